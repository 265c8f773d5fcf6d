#include "src/record/host_usage.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_set>

#include <fmt/format.h>

#include "src/record/process_tree.h"

namespace gputriage {
namespace {

constexpr size_t kMaxJobProcesses = 4096;  // a fork bomb is not read whole, once a second

/// The whole of a small /proc file ("" when it cannot be read).
std::string ReadSmallFile(const std::string& path, size_t cap = 64 * 1024) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  while (out.size() < cap) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

/// utime + stime (clock ticks) and rss (pages) from <proc>/<pid>/stat, read after
/// the last ')' (the command name may hold spaces and parentheses).
bool ReadProcessStat(const std::string& proc_root, unsigned int pid, uint64_t* ticks, int64_t* rss_pages) {
  const std::string text = ReadSmallFile(proc_root + "/" + std::to_string(pid) + "/stat", 4096);
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  // Fields after ')': 3 state, 4 ppid, ... 14 utime, 15 stime, ... 24 rss (1-based in proc(5)).
  const char* p = text.c_str() + paren + 1;
  uint64_t utime = 0, stime = 0;
  int64_t rss = 0;
  for (int field = 3; field <= 24; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return false;
    char* end = nullptr;
    if (field == 14) utime = std::strtoull(p, &end, 10);
    else if (field == 15) stime = std::strtoull(p, &end, 10);
    else if (field == 24) rss = std::strtoll(p, &end, 10);
    while (*p != ' ' && *p != '\0') ++p;
  }
  *ticks = utime + stime;
  *rss_pages = std::max<int64_t>(0, rss);
  return true;
}

/// The time a process spent runnable but waiting for a CPU (ns), from
/// <proc>/<pid>/schedstat ("cpu_ns wait_ns slices"; CONFIG_SCHEDSTATS): what other
/// processes on the machine cost it, where a busy-share alone cannot tell a
/// niced background load, which yields, from one the job queues behind.
bool ReadProcessWait(const std::string& proc_root, unsigned int pid, uint64_t* wait_ns) {
  const std::string text = ReadSmallFile(proc_root + "/" + std::to_string(pid) + "/schedstat", 256);
  const char* p = text.c_str();
  char* end = nullptr;
  std::strtoull(p, &end, 10);  // on-CPU time
  if (end == p) return false;
  p = end;
  *wait_ns = std::strtoull(p, &end, 10);
  return end != p;
}

/// The machine's CPU counters from <proc>/stat's first line: every tick, and the
/// idle ones (idle + iowait); the number of cpuN lines.
bool ReadMachineStat(const std::string& proc_root, uint64_t* total, uint64_t* idle, int* cpus) {
  const std::string text = ReadSmallFile(proc_root + "/stat", 256 * 1024);
  if (text.compare(0, 4, "cpu ") != 0) return false;
  const char* p = text.c_str() + 4;
  uint64_t values[8] = {};
  for (int i = 0; i < 8; ++i) {
    char* end = nullptr;
    values[i] = std::strtoull(p, &end, 10);
    if (end == p) break;
    p = end;
  }
  *total = 0;
  for (uint64_t v : values) *total += v;  // user nice system idle iowait irq softirq steal (guest is inside user)
  *idle = values[3] + values[4];
  int n = 0;
  for (size_t at = text.find("\ncpu"); at != std::string::npos; at = text.find("\ncpu", at + 1))
    if (at + 4 < text.size() && text[at + 4] >= '0' && text[at + 4] <= '9') ++n;
  *cpus = n;
  return true;
}

}  // namespace

std::map<std::string, std::string> HostUsageSummary::AsMetadata() const {
  std::map<std::string, std::string> m;
  if (intervals == 0 && job_cpu_seconds < 0) return m;
  m["host.usage.intervals"] = std::to_string(intervals);
  m["host.usage.seconds"] = fmt::format("{:.3f}", static_cast<double>(covered_ns) / 1e9);
  m["host.usage.job_cpu_cores_mean"] = fmt::format("{:.3f}", job_cores_mean);
  m["host.usage.main_cpu_cores_mean"] = fmt::format("{:.3f}", main_cores_mean);
  m["host.usage.other_cpu_cores_mean"] = fmt::format("{:.3f}", other_cores_mean);
  m["host.usage.job_processes_max"] = std::to_string(job_processes_max);
  m["host.usage.machine_busy_percent_mean"] = fmt::format("{:.2f}", machine_busy_percent_mean);
  m["host.usage.saturated_percent_of_time"] = fmt::format("{:.2f}", saturated_percent_of_time);
  m["host.usage.job_rss_peak_bytes"] = std::to_string(job_rss_peak_bytes);
  if (machine_cpus > 0) m["host.usage.machine_cpus"] = std::to_string(machine_cpus);
  if (job_wait_cores_mean >= 0) m["host.usage.job_cpu_wait_mean"] = fmt::format("{:.3f}", job_wait_cores_mean);
  if (job_cpu_seconds >= 0) m["host.usage.job_cpu_seconds"] = fmt::format("{:.3f}", job_cpu_seconds);
  return m;
}

HostUsageSampler::HostUsageSampler(pid_t root, pid_t main, int job_cpus, std::string proc_root)
    : root_(root), main_(main), proc_root_(std::move(proc_root)) {
  const long hz = sysconf(_SC_CLK_TCK);
  ticks_per_s_ = hz > 0 ? static_cast<double>(hz) : 100.0;
  summary_.job_cpus = job_cpus;
}

std::vector<unsigned int> HostUsageSampler::JobPids() const {
  // Children files (Linux >= 4.2 with CONFIG_PROC_CHILDREN) walk the tree from the
  // root; without them, one scan of /proc per level.
  std::vector<unsigned int> out;
  std::deque<unsigned int> queue{static_cast<unsigned int>(root_)};
  std::unordered_set<unsigned int> seen{static_cast<unsigned int>(root_)};
  while (!queue.empty() && out.size() < kMaxJobProcesses) {
    const unsigned int pid = queue.front();
    queue.pop_front();
    std::vector<unsigned int> children;
    const std::string task_dir = proc_root_ + "/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
    if (access(task_dir.c_str(), R_OK) == 0) {
      const std::string text = ReadSmallFile(task_dir);
      const char* p = text.c_str();
      while (*p != '\0') {
        char* end = nullptr;
        const unsigned long child = std::strtoul(p, &end, 10);
        if (end == p) break;
        children.push_back(static_cast<unsigned int>(child));
        p = end;
      }
    } else {
      for (pid_t child : ChildProcesses(static_cast<pid_t>(pid), proc_root_))
        children.push_back(static_cast<unsigned int>(child));
    }
    for (unsigned int child : children)
      if (seen.insert(child).second) {
        out.push_back(child);
        queue.push_back(child);
      }
  }
  return out;
}

void HostUsageSampler::Sample(TimeNs now_ns) {
  uint64_t total = 0, idle = 0;
  int cpus = 0;
  const bool machine_ok = ReadMachineStat(proc_root_, &total, &idle, &cpus);
  if (cpus > 0) summary_.machine_cpus = cpus;
  std::unordered_map<unsigned int, uint64_t> ticks, waits;
  uint64_t job_delta = 0, main_delta = 0, wait_delta = 0;
  int64_t rss_pages = 0;
  for (unsigned int pid : JobPids()) {
    uint64_t t = 0;
    int64_t rss = 0;
    if (!ReadProcessStat(proc_root_, pid, &t, &rss)) continue;  // ended since it was listed
    ticks[pid] = t;
    rss_pages += rss;
    const auto before = ticks_.find(pid);
    // A process new since the last read ran only within this interval: all its time is.
    const uint64_t delta = before == ticks_.end() ? (started_ ? t : 0) : (t >= before->second ? t - before->second : 0);
    job_delta += delta;
    if (pid == static_cast<unsigned int>(main_)) main_delta = delta;
    uint64_t wait = 0;
    if (ReadProcessWait(proc_root_, pid, &wait)) {
      waits[pid] = wait;
      wait_known_ = true;
      const auto was = waits_.find(pid);
      wait_delta += was == waits_.end() ? (started_ ? wait : 0) : (wait >= was->second ? wait - was->second : 0);
    }
  }
  // Only between two reads of the machine's counters: a /proc that cannot be read
  // gives no interval rather than zeros that would read as an idle job.
  if (started_ && machine_ok && previous_machine_ok_ && now_ns > previous_ns_) {
    HostUsageInterval i;
    i.duration_ns = now_ns - previous_ns_;
    const double seconds = static_cast<double>(i.duration_ns) / 1e9;
    i.job_cores = static_cast<double>(job_delta) / ticks_per_s_ / seconds;
    i.main_cores = static_cast<double>(main_delta) / ticks_per_s_ / seconds;
    i.job_processes = static_cast<int>(ticks.size());
    i.job_wait_cores = static_cast<double>(wait_delta) / 1e9 / seconds;
    if (total > machine_total_) {
      const uint64_t all = total - machine_total_;
      const uint64_t idle_ticks = std::min(all, idle >= machine_idle_ ? idle - machine_idle_ : 0);
      i.machine_busy_percent = 100.0 * static_cast<double>(all - idle_ticks) / static_cast<double>(all);
    }
    static const long page = sysconf(_SC_PAGESIZE);
    i.job_rss_bytes = rss_pages * (page > 0 ? page : 4096);
    last_ = i;
    have_last_ = true;
    // Time-weighted: each interval stands for the time it covers.
    const double w = static_cast<double>(i.duration_ns);
    weighted_job_ += i.job_cores * w;
    weighted_main_ += i.main_cores * w;
    weighted_busy_ += i.machine_busy_percent * w;
    weighted_wait_ += i.job_wait_cores * w;
    const bool saturated = i.machine_busy_percent >= kHostSaturatedPercent ||
                           (summary_.job_cpus > 0 && i.job_cores >= kHostSaturatedPercent / 100.0 * summary_.job_cpus);
    if (saturated) saturated_ns_ += w;
    HostUsageSummary& s = summary_;
    ++s.intervals;
    s.covered_ns += i.duration_ns;
    const double covered = static_cast<double>(s.covered_ns);
    s.job_cores_mean = weighted_job_ / covered;
    s.main_cores_mean = weighted_main_ / covered;
    s.other_cores_mean = std::max(0.0, s.job_cores_mean - s.main_cores_mean);
    s.machine_busy_percent_mean = weighted_busy_ / covered;
    if (wait_known_) s.job_wait_cores_mean = weighted_wait_ / covered;
    s.saturated_percent_of_time = 100.0 * saturated_ns_ / covered;
    s.job_processes_max = std::max(s.job_processes_max, i.job_processes);
    s.job_rss_peak_bytes = std::max(s.job_rss_peak_bytes, i.job_rss_bytes);
  }
  if (machine_ok) machine_total_ = total, machine_idle_ = idle;
  previous_machine_ok_ = machine_ok;
  ticks_ = std::move(ticks);
  waits_ = std::move(waits);
  previous_ns_ = now_ns;
  started_ = true;
}

}  // namespace gputriage
