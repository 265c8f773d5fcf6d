// Verdicts from step markers (timing from inside the training loop), in the
// same vocabulary as the trace and metric rules, merged with them by verdict.
#include <cmath>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

// The brief's line: data wait above 20 % of compute time is input-bound; at 50 %
// the GPU waits a third of every step.
constexpr double kDataWaitModeratePercent = 20.0;
constexpr double kDataWaitHighPercent = 50.0;

Evidence Ev(std::string name, double value, std::string unit, std::string source,
            std::optional<double> threshold = std::nullopt, std::string comparison = "") {
  return Evidence{std::move(name), value, std::move(unit), threshold, std::move(comparison), std::move(source)};
}

}  // namespace

std::vector<Finding> JudgeStepMarkers(const RecordingAnalysis& a) {
  std::vector<Finding> out;
  const StepMarkerAnalysis& m = a.marked;
  if (m.steps < 3 || !m.phases_known) return out;
  const double pct = m.data_wait_percent_of_compute;
  if (pct >= kDataWaitModeratePercent) {
    Finding f;
    f.verdict = "input_bound";
    f.severity = pct >= kDataWaitHighPercent ? Severity::kHigh : Severity::kModerate;
    f.scope = a.source;
    f.title = fmt::format("Input-bound: each step waits {:.1f} ms for data against {:.1f} ms of compute ({:.0f}%)",
                          m.data_wait_ms_mean, m.compute_ms_mean, pct);
    f.detail = fmt::format(
        "Step markers from the training loop: over {} steps the loop spent {:.1f} ms per step waiting for the next "
        "batch and {:.1f} ms computing. Loading and preprocessing run on the critical path instead of beside compute.",
        m.steps, m.data_wait_ms_mean, m.compute_ms_mean);
    f.evidence.push_back(Ev("data_wait_percent_of_compute", pct, "percent", "step markers: data phase / compute time",
                            f.severity == Severity::kHigh ? kDataWaitHighPercent : kDataWaitModeratePercent, ">="));
    f.evidence.push_back(Ev("data_wait_ms_per_step", m.data_wait_ms_mean, "ms", "step markers, mean over steps"));
    f.evidence.push_back(Ev("compute_ms_per_step", m.compute_ms_mean, "ms", "step markers, mean over steps"));
    f.evidence.push_back(Ev("steps", static_cast<double>(m.steps), "count", "step markers"));
    f.recommendations = {
        {"DataLoader(..., num_workers=N) with N ≈ CPU cores per GPU (start at 4-8)",
         "loads and decodes batches in worker processes while the model computes"},
        {"DataLoader(..., pin_memory=True, prefetch_factor=2..4, persistent_workers=True)",
         "keeps batches queued ahead and copies asynchronously"},
        {"cache the dataset on local NVMe (or in memory) instead of network storage",
         "removes I/O latency when workers are already saturated"},
    };
    ExpectedGain g;
    g.current = m.step_ms_mean;
    g.expected = m.compute_ms_mean;
    g.speedup_percent = g.expected > 0 ? (g.current / g.expected - 1.0) * 100.0 : 0.0;
    g.basis = "step time if the data wait overlapped with compute";
    f.gain = g;
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gputriage
