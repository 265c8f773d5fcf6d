// The recorded job's process tree, read from /proc: NVML lists GPU processes by
// pid, and a training job's GPU work often runs in a child (a launcher, a shell
// wrapper, torchrun's workers), not in the process gputriage started.
#pragma once

#include <sys/types.h>

#include <string>
#include <unordered_set>

namespace gputriage {

/// Adds `root` and every living descendant of it to `pids` (pids already there
/// stay: a worker that exited was still the job's). `proc_root` is "/proc"
/// except in tests. Unreadable entries (a process that just exited) are skipped.
void AddProcessTree(pid_t root, std::unordered_set<unsigned int>& pids, const std::string& proc_root = "/proc");

}  // namespace gputriage
