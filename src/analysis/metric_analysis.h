// Features of sampled GPU metrics (per device), read from the bounded series
// sketches: distributions, the rhythm of utilization, pipe activity levels,
// power against the board limit, clocks and clock-event reasons.
#pragma once

#include <string_view>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/metrics.h"

namespace gputriage {

/// Utilization at or below this is "near zero"; at or above kNearFull "near full".
constexpr double kNearZeroPercent = 5.0;
constexpr double kNearFullPercent = 95.0;
static_assert(kNearZeroPercent == LoadedReadings::kNearZeroBusyPercent, "one line for near zero");
/// Readings near zero with under this fraction of the log's peak memory in use were
/// taken while no job held the GPU: a job keeps its memory while it waits.
constexpr double kJobMemoryFraction = 0.5;

std::vector<DeviceMetricAnalysis> AnalyzeMetrics(const MetricSet& metrics);

/// A MIG instance's share of its board: its GPU instance's compute slices over the
/// board's (7, or 4 on an A30); 1 when the profile says nothing.
double MigBoardShare(std::string_view profile, std::string_view board_name);

}  // namespace gputriage
