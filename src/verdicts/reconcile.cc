// One cause, one finding, decided by the best evidence a recording holds. A
// recorded job carries GPU metrics and its own step markers: utilization alone
// can only guess at a cause from the shape of its dips, where the markers time
// the cause itself. So a guess from utilization that the markers measured and
// ruled out is dropped (a note says which source decided), and idle time that a
// measured cause explains is not reported again as an idle GPU.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

constexpr int64_t kMinMarkedSteps = 3;

/// Verdicts from markers (or a trace) that say why a job's GPU sat idle.
bool ExplainsIdleTime(const Finding& f) {
  static const char* const kCauses[] = {"input_bound", "host_stall", "launch_bound", "straggler_rank",
                                        "copy_bound",  "optimizer_bound", "communication_bound"};
  return (f.origin == "markers" || f.origin == "trace") &&
         std::find(std::begin(kCauses), std::end(kCauses), f.verdict) != std::end(kCauses);
}

/// Whether the recording's metric GPUs are the job's own (a live recording that
/// attributed none of them to other processes, or a log that cannot say).
bool GpusAreTheJobs(const RecordingAnalysis& a) {
  return std::none_of(a.metric_devices.begin(), a.metric_devices.end(),
                      [](const DeviceMetricAnalysis& d) { return d.job_use == "not_used"; });
}

Finding* FindOf(std::vector<Finding>& findings, int recording, const std::string& verdict, bool (*origin_ok)(const Finding&)) {
  for (auto& f : findings)
    if (f.recording == recording && f.verdict == verdict && origin_ok(f)) return &f;
  return nullptr;
}

void JoinEvidence(const Finding& from, Finding& into, const std::string& why) {
  for (auto e : from.evidence) {
    e.source = "metrics, " + from.scope + ": " + e.source;
    into.evidence.push_back(std::move(e));
  }
  into.detail += " " + why;
}

}  // namespace

void ReconcileWithBestEvidence(std::vector<Finding>& findings, const std::vector<RecordingAnalysis>& recordings,
                               std::vector<std::string>& notes) {
  std::vector<Finding> kept;
  std::vector<Finding> metric;
  for (auto& f : findings) (f.origin == "metrics" ? metric : kept).push_back(std::move(f));
  for (auto& f : metric) {
    const bool known = f.recording >= 0 && static_cast<size_t>(f.recording) < recordings.size();
    const RecordingAnalysis* a = known ? &recordings[static_cast<size_t>(f.recording)] : nullptr;
    const bool marked = a && a->marked.steps >= kMinMarkedSteps && a->marked.phases_known;
    if (f.verdict == "input_bound" && marked) {
      if (Finding* measured = FindOf(kept, f.recording, "input_bound", [](const Finding& k) { return k.origin == "markers"; })) {
        JoinEvidence(f, *measured, "The GPU metrics of the same run agree (" + f.scope + ").");
      } else {
        notes.push_back(fmt::format(
            "Not input-bound, though utilization's dips looked it ({}): the job's step markers measured the data wait "
            "itself at {:.1f}% of compute over {} steps, under the 20% line. Step markers decided; the dips are the "
            "loop's other work.",
            f.scope, a->marked.data_wait_percent_of_compute, a->marked.steps));
      }
      continue;
    }
    if (f.verdict == "idle" && a && GpusAreTheJobs(*a)) {
      Finding* cause = nullptr;
      for (auto& k : kept)
        if (k.recording == f.recording && ExplainsIdleTime(k) && (!cause || k.severity > cause->severity)) cause = &k;
      if (cause) {
        JoinEvidence(f, *cause,
                     fmt::format("The idle time the GPU metrics show ({}: {}) is this cause's, counted once here.",
                                 f.scope, f.title));
        continue;
      }
    }
    kept.push_back(std::move(f));
  }
  findings = std::move(kept);
}

}  // namespace gputriage
