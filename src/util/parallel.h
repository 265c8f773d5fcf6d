// Independent pieces of work spread over the machine's cores: the rank traces of
// a run read at once, their analyses made at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace gputriage {

/// The cores this process may use (at least 1).
inline int CoreCount() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

/// Calls fn(i) for every i in [0, n), on up to `threads` threads (the caller's
/// among them), each i once; returns when all are done. `fn` must not throw.
inline void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  const size_t workers = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

/// Runs independent tasks on up to `threads` threads (the caller's among them).
inline void RunConcurrently(int threads, const std::vector<std::function<void()>>& tasks) {
  ParallelFor(tasks.size(), threads, [&](size_t i) { tasks[i](); });
}

}  // namespace gputriage
