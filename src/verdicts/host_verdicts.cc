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

// At 80 % of the time saturated, nearly always (the finding's own rule is
// HostUsageAnalysis::SaturatedByJob: half the time, by the job itself).
constexpr double kSaturatedHighPercent = 80.0;
// Other processes holding a quarter of the job's CPUs (and at least half a CPU)
// while it ran: every host-side figure of the run was measured on a shared
// machine. Half of them or more: the run's host side is mostly someone else's.
constexpr double kContentionShare = 0.25;
constexpr double kContentionHighShare = 0.5;
constexpr double kContentionMinCpus = 0.5;

/// Other processes took CPUs the job could have used: said first, since every
/// host-side measurement (data wait, host work, step time) was taken under it.
void HostContention(const RecordingAnalysis& a, std::vector<Finding>& out) {
  const HostUsageAnalysis& h = a.host;
  const double others = h.ContendingCpus();
  const int cpus = h.cpus();
  if (!h.known || h.seconds < HostUsageAnalysis::kMinSeconds || cpus <= 0 ||
      others < std::max(kContentionMinCpus, kContentionShare * cpus))
    return;
  const double left = std::max(0.0, std::min<double>(cpus, h.machine_cpus - others));
  Finding f;
  f.verdict = "host_contention";
  f.origin = "host";
  f.scope = fmt::format("host ({} CPU{})", cpus, cpus == 1 ? "" : "s");
  f.severity = others >= kContentionHighShare * cpus ? Severity::kHigh : Severity::kModerate;
  f.title = fmt::format("Host contention: other processes used {:.2f} of the machine's {} CPUs while the job ran; the "
                        "job could have at most {:.2f}",
                        others, h.machine_cpus, left);
  f.detail = fmt::format(
      "Over {:.0f} s read from /proc the machine's {} CPUs were {:.0f}% busy, and the job's own processes used {:.2f} "
      "of them: the rest, {:.2f} CPUs, went to processes outside the job. Its host-side work (data loading, "
      "preprocessing, the loop itself) ran on what was left, so its data wait, host stalls and step time are those of a "
      "shared machine, and advice on workers counts the CPUs left to it.",
      h.seconds, h.machine_cpus, h.machine_busy_percent_mean, h.job_cores_mean, others);
  f.evidence.push_back(E("other_processes_cpus", others, "cpus", "record: machine busy share × CPUs − the job's use",
                         std::max(kContentionMinCpus, kContentionShare * cpus), ">="));
  f.evidence.push_back(E("machine_busy_percent_mean", h.machine_busy_percent_mean, "percent", "record: /proc/stat"));
  f.evidence.push_back(E("job_cpu_cores_mean", h.job_cores_mean, "cores", "record: every job process, time-weighted"));
  f.evidence.push_back(E("job_cpus", static_cast<double>(cpus), "count", "record: the job's CPU affinity"));
  if (!std::isnan(h.job_cpu_wait_mean))
    f.evidence.push_back(E("job_cpu_wait_mean", h.job_cpu_wait_mean, "cpus",
                           "record: the job's processes runnable but waiting for a CPU, per second (/proc/<pid>/schedstat)",
                           HostUsageAnalysis::kContendedWaitCores, ">="));
  f.recommendations = {
      {"run the job where nothing else competes for its CPUs (or pin it: taskset / cgroup cpusets), and compare "
       "runs only between machines equally loaded",
       "its host-side work gets the CPUs it needs"},
      {fmt::format("size DataLoader workers to the CPUs left to the job (about {:.0f}), not the machine's {}", left,
                   h.machine_cpus),
       "workers beyond the free CPUs compete with the training process"},
  };
  // The CPUs given back, at best all that others took; at worst none (the load is
  // the machine's and stays). Host-bound work speeds up with them; GPU-bound not.
  f.gain = LevelGain("cpus_available_to_job", left, std::min<double>(cpus, left + others / 2),
                     std::min<double>(cpus, left + others), left, "outside_load",
                     fmt::format("the CPUs other processes held ({:.2f}) given back to the job: at best all, at worst "
                                 "none; host-side work speeds up with them, GPU-bound work does not",
                                 others));
  f.gain->unit = "cpus";
  out.push_back(std::move(f));
}

}  // namespace

std::vector<Finding> JudgeHost(const RecordingAnalysis& a) {
  std::vector<Finding> out;
  HostContention(a, out);
  const HostUsageAnalysis& h = a.host;
  if (!h.SaturatedByJob()) return out;
  const int cpus = h.cpus();
  const int workers = a.loader.num_workers;
  const bool workers_beyond = workers >= 0 && workers + 1 > cpus;  // the training process needs a core too

  Finding f;
  f.verdict = "host_saturated";
  f.origin = "host";
  f.scope = fmt::format("host ({} CPU{})", cpus, cpus == 1 ? "" : "s");  // the same for a live and a stored run
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
      "The job itself fills its CPUs: its processes time-share them, and the training loop waits for a core as the "
      "workers do.",
      workers_beyond ? fmt::format(" {} workers and the training process are {} processes for {} CPUs.", workers,
                                   workers + 1, cpus)
                     : std::string());
  f.evidence.push_back(E("saturated_percent_of_time", h.saturated_percent_of_time, "percent",
                          "record: /proc/stat and the job's /proc/<pid>/stat, intervals with the machine >= 90% busy or "
                          "the job on >= 90% of its CPUs",
                          f.severity == Severity::kHigh ? kSaturatedHighPercent : HostUsageAnalysis::kSaturatedPercent,
                          ">="));
  f.evidence.push_back(E("job_cpu_cores_mean", h.job_cores_mean, "cores", "record: every job process, time-weighted"));
  f.evidence.push_back(E("main_cpu_cores_mean", h.main_cores_mean, "cores", "record: the training process"));
  f.evidence.push_back(E("other_cpu_cores_mean", h.other_cores_mean, "cores", "record: the job's other processes"));
  f.evidence.push_back(E("machine_busy_percent_mean", h.machine_busy_percent_mean, "percent", "record: /proc/stat"));
  f.evidence.push_back(E("job_cpus", static_cast<double>(cpus), "count", "record: the job's CPU affinity"));
  if (workers >= 0)
    f.evidence.push_back(E("num_workers", static_cast<double>(workers), "count", "the job's DataLoader settings"));
  if (workers_beyond)
    f.recommendations.push_back(
        {fmt::format("DataLoader(..., num_workers={}) at most: one CPU stays with the training process",
                     std::max(0, cpus - 1)),
         "workers beyond the cores add no throughput: they take turns on the same CPUs"});
  f.recommendations.push_back({"make each batch cheaper to produce: decode on the GPU (DALI, "
                               "torchvision.io.decode_jpeg(device='cuda')), preprocess once offline, cache decoded "
                               "samples",
                               "the CPUs, not the number of workers, bound the loader"});
  f.recommendations.push_back({"torch.set_num_threads(1) in the workers (worker_init_fn), and for the training "
                               "process as many threads as the cores it keeps",
                               "intra-op thread pools in every process multiply the runnable threads per core"});
  f.recommendations.push_back({fmt::format("a host with more CPUs per GPU (this one has {})", cpus),
                               "when the data pipeline needs the cores it uses"});
  out.push_back(std::move(f));
  return out;
}

}  // namespace gputriage
