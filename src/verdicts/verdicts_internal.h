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
