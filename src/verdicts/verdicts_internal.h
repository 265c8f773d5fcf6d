// Pieces of the verdict stage shared between its files.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/diagnosis.h"

namespace gputriage {

/// One number behind a finding (the rules' shorthand for Evidence{...}).
inline Evidence E(std::string name, double value, std::string unit, std::string source,
                  std::optional<double> threshold = std::nullopt, std::string comparison = "") {
  return Evidence{std::move(name), value, std::move(unit), threshold, std::move(comparison), std::move(source)};
}

/// `part` as a percentage of `whole`, 0 when `whole` is not positive.
inline double Percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

/// A gain in step time: `current_ms` to `expected_ms`, within [best_ms, worst_ms]
/// (not below 0), limited next by `bounded_by`.
inline ExpectedGain StepGain(double current_ms, double expected_ms, double best_ms, double worst_ms,
                             std::string bounded_by, std::string basis) {
  ExpectedGain g;
  g.current = current_ms;
  g.expected = std::max(expected_ms, 0.0);
  g.best = std::max(std::min(best_ms, g.expected), 0.0);
  g.worst = std::max(worst_ms, g.expected);
  g.speedup_percent = g.expected > 0 ? (current_ms / g.expected - 1.0) * 100.0 : 0.0;
  g.bounded_by = std::move(bounded_by);
  g.basis = std::move(basis);
  return g;
}

/// A gain from a replayed prediction (src/analysis/replay.cc).
inline std::optional<ExpectedGain> ReplayGain(double current_ms, const StepPrediction& p) {
  if (!p.available) return std::nullopt;
  return StepGain(current_ms, p.expected_ms, p.best_ms, p.worst_ms, p.bounded_by, p.basis);
}

/// A gain in a percent level (utilization, SM activity): higher is better, so the
/// best end is the highest.
inline ExpectedGain LevelGain(std::string metric, double current, double expected, double best, double worst,
                              std::string bounded_by, std::string basis) {
  ExpectedGain g;
  g.metric = std::move(metric);
  g.unit = "percent";
  g.current = current;
  g.expected = expected;
  g.best = std::max(best, expected);
  g.worst = std::min(worst, expected);
  g.speedup_percent = current > 0 ? (expected / current - 1.0) * 100.0 : 0.0;
  g.bounded_by = std::move(bounded_by);
  g.basis = std::move(basis);
  return g;
}

/// Trace verdicts of one recording (verdicts.cc).
/// The input_bound advice on DataLoader workers, from what the run had: the
/// workers it ran with and the CPUs and GPUs of its host, where recorded. At
/// or past a CPU per worker, more workers only compete for the same cores.
Recommendation WorkersAdvice(const LoaderSettings& loader, const std::string& why);

std::vector<Finding> JudgeRecording(const RecordingAnalysis& a);

/// Metric verdicts of one recording's GPUs (metric_verdicts.cc).
std::vector<Finding> JudgeMetrics(const RecordingAnalysis& a, const WorkloadTargets& targets);
/// Verdicts from step markers (src/verdicts/step_verdicts.cc).
std::vector<Finding> JudgeStepMarkers(const RecordingAnalysis& a);
/// What memory_headroom keeps free of a device's or host's memory: fragmentation,
/// a longer batch, the allocator's rounding. A batch that fills the last tenth is
/// one unlucky step from an out-of-memory error.
inline constexpr double kMemorySafetyMargin = 0.10;
/// memory_headroom speaks when the batch can grow at least this much, or when the
/// peak reaches this share of capacity (the job runs on the edge).
inline constexpr double kMemoryHeadroomGrowth = 1.5;
inline constexpr double kMemoryTightShare = 0.90;

/// Verdicts from the memory sampled at step ends (memory_verdicts.cc).
std::vector<Finding> JudgeStepMemory(const RecordingAnalysis& a);
/// undersized_work's "a larger batch" bounded by memory_headroom where both were
/// found: its fix's first line says how far the batch can grow (memory_verdicts.cc).
void BoundBatchByMemory(std::vector<Finding>& findings);

/// One cause, one finding (reconcile.cc): a metric-only guess that the same
/// recording's step markers measured and ruled out is dropped, with a note in
/// `notes` saying which source decided; idle time a measured cause explains
/// joins that cause's finding instead of standing as an idle GPU.
void ReconcileWithBestEvidence(std::vector<Finding>& findings, const std::vector<RecordingAnalysis>& recordings,
                               std::vector<std::string>& notes);

/// Findings from the recording's goodput ledger: checkpoints and evaluation
/// that take a large share of the job (ledger_verdicts.cc).
std::vector<Finding> JudgeLedger(const RecordingAnalysis& a);

/// Findings from the host side of a recorded job: CPUs saturated (host_verdicts.cc).
std::vector<Finding> JudgeHost(const RecordingAnalysis& a);

/// Verdicts from the arrival skew at one run's collectives (collective_verdicts.cc):
/// a persistent straggler rank or lateness that moves between ranks; and the
/// communication_bound finding of the same ranks gets its time split into transfer
/// and waiting for the last arrival.
std::vector<Finding> JudgeCollectiveSkew(const CollectiveSkew& skew, const std::vector<Finding*>& run_findings);

/// A dated default price for a GPU model (cost.cc).
struct GpuPrice {
  const char* match;       // device-name fragment
  double usd_per_gpu_hour;
  const char* offer;       // what was priced
  const char* source;      // where the figure was read, with its date
};
std::optional<GpuPrice> DefaultGpuPrice(std::string_view device_name);

/// Cost of the GPUs observed in the run (cost.cc).
CostReport ComputeCost(const std::vector<RecordingAnalysis>& recordings, const DiagnoseOptions& options,
                       const WorkloadTargets& targets);

}  // namespace gputriage
