// What a trace's charts draw of its events (busy and data-wait coverage over
// time), measured while the trace is analysed: the report then needs only the
// analysis, so a rank's events can be dropped as soon as it is analysed.
#pragma once

#include <optional>
#include <vector>

#include "gputriage/diagnosis.h"
#include "src/analysis/intervals.h"
#include "src/analysis/trace_events.h"

namespace gputriage::analysis {

/// Slices of a timeline: about the pixel columns of a wide chart.
inline constexpr int kTimelineBuckets = 2048;

/// Time-weighted coverage of [start, end) by a merged interval list (overlaps
/// joined, so two DataLoader spans at once count once), in `buckets` equal
/// slices, as a percent of each slice.
std::vector<double> CoveragePercent(const intervals::List& merged, TimeNs start, TimeNs end, int buckets);

/// Extents gathered by an earlier pass over the kernels.
struct KernelExtents {
  std::optional<Interval> all;      // every kernel, of any length, on any device
  std::optional<Interval> primary;  // the primary device's kernels of positive length
};

/// The trace's timeline: the primary device's kernel coverage over the steps (over
/// its kernels' extent without ProfilerStep markers) and the DataLoader spans' over
/// the same slices; one pass over the kernels, one over the host spans.
StatusOr<TraceTimeline> MeasureTimeline(const TraceEvents& events, int primary_device, const KernelExtents& extents,
                                        const std::vector<Interval>& step_windows, bool steps_from_markers);

}  // namespace gputriage::analysis
