#include "src/record/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace gputriage {
namespace {

/// The parent pid from /proc/<pid>/stat ("pid (comm) state ppid ..."); the
/// command name may hold spaces and parentheses, so read after the last ')'.
bool ParentOf(const std::string& stat_path, unsigned int* ppid) {
  const int fd = open(stat_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr || close_paren[1] != ' ' || close_paren[2] == '\0' || close_paren[3] != ' ') return false;
  char* end = nullptr;
  const unsigned long value = std::strtoul(close_paren + 4, &end, 10);
  if (end == close_paren + 4) return false;
  *ppid = static_cast<unsigned int>(value);
  return true;
}

}  // namespace

void AddProcessTree(pid_t root, std::unordered_set<unsigned int>& pids, const std::string& proc_root) {
  pids.insert(static_cast<unsigned int>(root));
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return;
  std::unordered_multimap<unsigned int, unsigned int> children;  // ppid → pid
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const unsigned long pid = std::strtoul(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    unsigned int ppid = 0;
    if (ParentOf(proc_root + "/" + entry->d_name + "/stat", &ppid)) children.emplace(ppid, static_cast<unsigned int>(pid));
  }
  closedir(dir);
  std::vector<unsigned int> todo{static_cast<unsigned int>(root)};
  std::unordered_set<unsigned int> visited;
  while (!todo.empty()) {
    const unsigned int p = todo.back();
    todo.pop_back();
    if (!visited.insert(p).second) continue;  // a cycle in a corrupt or racing listing
    auto [first, last] = children.equal_range(p);
    for (auto it = first; it != last; ++it) {
      pids.insert(it->second);
      todo.push_back(it->second);
    }
  }
}

}  // namespace gputriage
