// Pieces of the verdict stage shared between its files.
#pragma once

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

/// A gain in step time: `current_ms` to `expected_ms` (not below 0).
inline ExpectedGain StepGain(double current_ms, double expected_ms, std::string basis) {
  ExpectedGain g;
  g.current = current_ms;
  g.expected = expected_ms > 0 ? expected_ms : 0.0;
  g.speedup_percent = g.expected > 0 ? (current_ms / g.expected - 1.0) * 100.0 : 0.0;
  g.basis = std::move(basis);
  return g;
}

/// Trace verdicts of one recording (verdicts.cc).
std::vector<Finding> JudgeRecording(const RecordingAnalysis& a);

/// Metric verdicts of one recording's GPUs (metric_verdicts.cc).
std::vector<Finding> JudgeMetrics(const RecordingAnalysis& a, const WorkloadTargets& targets);
/// Verdicts from step markers (src/verdicts/step_verdicts.cc).
std::vector<Finding> JudgeStepMarkers(const RecordingAnalysis& a);

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
