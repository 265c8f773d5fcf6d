#include "src/record/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace gputriage {
namespace {

constexpr int kMaxDepth = 256;  // deeper than any real process tree; stops a racing or corrupt chain

/// The parent pid from <proc>/<pid>/stat ("pid (comm) state ppid ..."); the
/// command name may hold spaces and parentheses, so read after the last ')'.
bool ParentOf(const std::string& proc_root, unsigned int pid, unsigned int* ppid) {
  const std::string path = proc_root + "/" + std::to_string(pid) + "/stat";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
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

JobProcesses::JobProcesses(pid_t root, std::string proc_root)
    : root_(static_cast<unsigned int>(root)), proc_root_(std::move(proc_root)) {
  known_[root_] = true;
  known_[0] = false;
  known_[1] = false;  // init (or a container's first process) is never inside the job
}

bool JobProcesses::Contains(unsigned int pid) {
  std::vector<unsigned int> chain;
  unsigned int p = pid;
  for (int depth = 0; depth < kMaxDepth; ++depth) {
    if (auto it = known_.find(p); it != known_.end()) {
      for (unsigned int q : chain) known_[q] = it->second;
      return it->second;
    }
    chain.push_back(p);
    unsigned int parent = 0;
    if (!ParentOf(proc_root_, p, &parent) || parent == p) {
      // Gone, invisible (another PID namespace) or a broken chain. Only the pid
      // asked about is remembered: NVML saw it running, so a pid we cannot see
      // now was never the job's, and asking again each second costs a failed open.
      if (p == pid) known_[pid] = false;
      return false;
    }
    p = parent;
  }
  return false;
}

std::vector<pid_t> ChildProcesses(pid_t parent, const std::string& proc_root) {
  std::vector<pid_t> children;
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return children;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const unsigned long pid = std::strtoul(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    unsigned int ppid = 0;
    if (ParentOf(proc_root, static_cast<unsigned int>(pid), &ppid) && ppid == static_cast<unsigned int>(parent))
      children.push_back(static_cast<pid_t>(pid));
  }
  closedir(dir);
  return children;
}

}  // namespace gputriage
