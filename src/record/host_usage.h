// The host side of a recorded job, read from /proc: CPU time of the job's
// training process and of its other processes (DataLoader workers, launchers'
// children), the machine's CPU busy share, and the job's resident memory. A GPU
// waiting for data is often a CPU problem: workers beyond the cores, a host
// pinned by preprocessing. Summed into time-weighted figures at the end
// (`HostUsageSummary`), which the recording keeps as `host.usage.*` metadata
// (and the store as settings), so a stored run reads back the same.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "gputriage/model.h"

namespace gputriage {

/// One interval between two reads.
struct HostUsageInterval {
  TimeNs duration_ns = 0;
  double job_cores = 0;      // CPU-seconds of every job process per second
  double main_cores = 0;     // of the command's own process
  int job_processes = 0;
  double machine_busy_percent = 0;  // every online CPU's busy time, % of all of them
  int64_t job_rss_bytes = 0;        // resident memory summed over the job's processes
  double job_wait_cores = 0;        // the job's processes' time runnable but not running (schedstat run delay) per second
};

/// Time-weighted over every interval read.
struct HostUsageSummary {
  int64_t intervals = 0;
  TimeNs covered_ns = 0;
  double job_cores_mean = 0;
  double main_cores_mean = 0;
  double other_cores_mean = 0;  // the job's other processes: DataLoader workers and the like
  int job_processes_max = 0;
  double machine_busy_percent_mean = 0;
  int machine_cpus = 0;          // online CPUs (/proc/stat)
  int job_cpus = 0;              // CPUs the job may run on (its affinity)
  double saturated_percent_of_time = 0;  // machine >= 90 % busy, or the job using >= 90 % of its CPUs
  double job_wait_cores_mean = -1;  // time the job's processes waited for a CPU, per second (-1: not measured)
  int64_t job_rss_peak_bytes = 0;
  double job_cpu_seconds = -1;   // the job's whole CPU time (its reaped processes' account), -1 unknown
  /// As `host.usage.*` metadata keys (docs/formats.md).
  std::map<std::string, std::string> AsMetadata() const;
};

/// The share at or above which an interval counts as saturated.
inline constexpr double kHostSaturatedPercent = 90.0;

class HostUsageSampler {
 public:
  /// `main` is the command's process, `root` the process whose descendants are
  /// the job (the recorder); `job_cpus` the CPUs the job may use (0: unknown).
  /// `proc_root` is "/proc" except in tests.
  HostUsageSampler(pid_t root, pid_t main, int job_cpus, std::string proc_root = "/proc");

  /// Reads /proc; from the second read on, adds the interval since the last one.
  /// A process that ended between two reads loses its CPU time since the last
  /// (the kernel keeps no account of it for us).
  void Sample(TimeNs now_ns);
  const HostUsageSummary& summary() const { return summary_; }
  /// The interval the last read closed (none before the second read).
  const HostUsageInterval* last() const { return have_last_ ? &last_ : nullptr; }

 private:
  /// The job's processes now: the root's descendants (not the root itself).
  std::vector<unsigned int> JobPids() const;

  pid_t root_, main_;
  std::string proc_root_;
  double ticks_per_s_;
  TimeNs previous_ns_ = 0;
  bool started_ = false;
  bool previous_machine_ok_ = false;
  uint64_t machine_total_ = 0, machine_idle_ = 0;
  std::unordered_map<unsigned int, uint64_t> ticks_;  // per job process, at the last read
  std::unordered_map<unsigned int, uint64_t> waits_;  // per job process: schedstat run delay (ns) at the last read
  bool wait_known_ = false;                           // some process's schedstat was read
  HostUsageInterval last_;
  bool have_last_ = false;
  HostUsageSummary summary_;
  double weighted_job_ = 0, weighted_main_ = 0, weighted_busy_ = 0, saturated_ns_ = 0, weighted_wait_ = 0;
};

}  // namespace gputriage
