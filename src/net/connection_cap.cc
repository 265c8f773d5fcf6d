#include "src/net/connection_cap.h"

#include <sys/ioctl.h>

#include <algorithm>
#include <numeric>

namespace gputriage {

std::optional<size_t> FreshConnectionToGo(const std::vector<FreshConnection>& fresh) {
  if (fresh.empty()) return std::nullopt;
  std::vector<size_t> oldest_first(fresh.size());
  std::iota(oldest_first.begin(), oldest_first.end(), size_t{0});
  std::stable_sort(oldest_first.begin(), oldest_first.end(),
                   [&](size_t a, size_t b) { return fresh[a].since_ns < fresh[b].since_ns; });
  for (size_t i : oldest_first) {
    int pending = 0;
    if (!fresh[i].head_begun && ioctl(fresh[i].fd, FIONREAD, &pending) == 0 && pending == 0) return i;
  }
  return oldest_first.front();
}

}  // namespace gputriage
