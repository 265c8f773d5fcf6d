// Verdicts from the host side of a recorded job (record's /proc reads:
// src/record/host_usage.h): CPUs saturated by the job's own processes, most often
// DataLoader workers beyond the cores. The same vocabulary as the rest; origin "host".
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

// Saturated (machine >= 90 % busy, or the job on >= 90 % of its CPUs) for half
// the job's time: every process of the job, the training loop's included,
// waits for a core; at 80 % nearly always.
constexpr double kSaturatedModeratePercent = 50.0;
constexpr double kSaturatedHighPercent = 80.0;
// The job itself uses this share of its CPUs on average: the saturation is its own.
constexpr double kJobShareOfCpus = 0.5;
constexpr double kMinSeconds = 2.0;  // fewer reads than this say nothing of a run

}  // namespace

std::vector<Finding> JudgeHost(const RecordingAnalysis& a) {
  std::vector<Finding> out;
  const HostUsageAnalysis& h = a.host;
  if (!h.known || h.seconds < kMinSeconds || std::isnan(h.saturated_percent_of_time)) return out;
  if (h.saturated_percent_of_time < kSaturatedModeratePercent) return out;
  const int cpus = h.job_cpus > 0 ? h.job_cpus : h.machine_cpus;
  if (cpus <= 0) return out;
  const bool own = h.job_cores_mean >= kJobShareOfCpus * cpus;
  const int workers = a.loader.num_workers;
  const bool workers_beyond = workers >= 0 && workers + 1 > cpus;  // the training process needs a core too

  Finding f;
  f.verdict = "host_saturated";
  f.origin = "host";
  f.scope = a.source;
  f.severity = h.saturated_percent_of_time >= kSaturatedHighPercent ? Severity::kHigh : Severity::kModerate;
  f.title = fmt::format("Host CPUs saturated {:.0f}% of the time: the job used {:.2f} of its {} CPU{}{}",
                        h.saturated_percent_of_time, h.job_cores_mean, cpus, cpus == 1 ? "" : "s",
                        workers >= 0 ? fmt::format(" with num_workers={}", workers) : std::string());
  f.detail = fmt::format(
      "Over {:.0f} s read from /proc: the training process used {:.2f} cores, the job's other processes (up to {} "
      "processes in all: DataLoader workers and the like) {:.2f}, and the machine's {} CPUs were {:.0f}% busy on "
      "average. {}{}",
      h.seconds, h.main_cores_mean, h.job_processes_max, h.other_cores_mean, h.machine_cpus,
      h.machine_busy_percent_mean,
      own ? "The job itself fills its CPUs: its processes time-share them, and the training loop waits for a core as "
            "the workers do."
          : "The job uses less than half of its CPUs: other processes on the machine hold the rest.",
      workers_beyond ? fmt::format(" {} workers and the training process are {} processes for {} CPUs.", workers,
                                   workers + 1, cpus)
                     : std::string());
  f.evidence.push_back(E("saturated_percent_of_time", h.saturated_percent_of_time, "percent",
                          "record: /proc/stat and the job's /proc/<pid>/stat, intervals with the machine >= 90% busy or "
                          "the job on >= 90% of its CPUs",
                          f.severity == Severity::kHigh ? kSaturatedHighPercent : kSaturatedModeratePercent, ">="));
  f.evidence.push_back(E("job_cpu_cores_mean", h.job_cores_mean, "cores", "record: every job process, time-weighted"));
  f.evidence.push_back(E("main_cpu_cores_mean", h.main_cores_mean, "cores", "record: the training process"));
  f.evidence.push_back(E("other_cpu_cores_mean", h.other_cores_mean, "cores", "record: the job's other processes"));
  f.evidence.push_back(E("machine_busy_percent_mean", h.machine_busy_percent_mean, "percent", "record: /proc/stat"));
  f.evidence.push_back(E("job_cpus", static_cast<double>(cpus), "count", "record: the job's CPU affinity"));
  if (workers >= 0)
    f.evidence.push_back(E("num_workers", static_cast<double>(workers), "count", "the job's DataLoader settings"));
  if (own) {
    const int fit = std::max(0, cpus - 1);
    f.recommendations.push_back(
        {workers_beyond ? fmt::format("DataLoader(..., num_workers={}) at most: one CPU stays with the training process",
                                      fit)
                        : "make each batch cheaper to produce: decode on the GPU (DALI, "
                          "torchvision.io.decode_jpeg(device='cuda')), preprocess once offline, cache decoded samples",
         "workers beyond the cores add no throughput: they take turns on the same CPUs"});
    if (workers_beyond)
      f.recommendations.push_back({"make each batch cheaper to produce: decode on the GPU (DALI, "
                                   "torchvision.io.decode_jpeg(device='cuda')), preprocess once offline, cache decoded "
                                   "samples",
                                   "the CPUs, not the number of workers, bound the loader"});
    f.recommendations.push_back({"torch.set_num_threads(1) in the workers (worker_init_fn), and for the training "
                                 "process as many threads as the cores it keeps",
                                 "intra-op thread pools in every process multiply the runnable threads per core"});
    f.recommendations.push_back({fmt::format("a host with more CPUs per GPU (this one has {})", cpus),
                                 "when the data pipeline needs the cores it uses"});
  } else {
    f.recommendations.push_back({"find what else runs on the machine (top, pidstat) and move it, or pin the job to "
                                 "its own cores (taskset, cgroup cpusets)",
                                 "other tenants' processes take the CPUs the job's loader needs"});
  }
  out.push_back(std::move(f));
  return out;
}

}  // namespace gputriage
