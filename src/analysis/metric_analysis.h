// Features of sampled GPU metrics (per device), read from the bounded series
// sketches: distributions, the rhythm of utilization, pipe activity levels,
// power against the board limit, clocks and clock-event reasons.
#pragma once

#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/metrics.h"

namespace gputriage {

/// Utilization at or below this is "near zero"; at or above kNearFull "near full".
constexpr double kNearZeroPercent = 5.0;
constexpr double kNearFullPercent = 95.0;

std::vector<DeviceMetricAnalysis> AnalyzeMetrics(const MetricSet& metrics);

}  // namespace gputriage
