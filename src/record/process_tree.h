// Which processes belong to the recorded job, read from /proc: NVML lists GPU
// processes by pid, and a training job's GPU work often runs in a descendant of
// the process gputriage started (a launcher, a shell wrapper, torchrun's workers).
#pragma once

#include <sys/types.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace gputriage {

class JobProcesses {
 public:
  /// `proc_root` is "/proc" except in tests.
  explicit JobProcesses(pid_t root, std::string proc_root = "/proc");

  /// True when `pid` is the job's root or descends from it. Walks the pid's
  /// parents in /proc once and remembers the answer for every process on the
  /// way, so a steady job costs no /proc reads: only pids new to the GPUs are
  /// looked up. A pid that cannot be read (exited, or in another PID namespace)
  /// is not the job's, and is remembered as such.
  bool Contains(unsigned int pid);

 private:
  unsigned int root_;
  std::string proc_root_;
  std::unordered_map<unsigned int, bool> known_;
};

/// The processes whose parent is `parent` now (a scan of <proc_root>/*/stat).
std::vector<pid_t> ChildProcesses(pid_t parent, const std::string& proc_root = "/proc");

}  // namespace gputriage
