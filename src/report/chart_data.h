// The time series a report draws, as JSON beside the report document: each
// recording's utilization and activity timelines, its step boundaries, the
// share of time spent waiting for data, and per-step phase times. The HTML
// report embeds it; `serve` hands it out over its API.
//
// Every series is already downsampled to about one point per pixel column of a
// wide chart, keeping each bucket's min and max, so a spike is never lost and a
// recording of millions of samples stays a few hundred kilobytes.
#pragma once

#include <string>

#include "gputriage/diagnosis.h"

namespace gputriage {

/// Points per timeline: about the pixel columns of a wide chart.
inline constexpr int kChartPoints = 2048;
/// Step boundaries are drawn up to this many steps a recording; past it they
/// would fill every pixel column, and the data-wait share says the same.
inline constexpr size_t kChartMaxStepBoundaries = 5000;
/// Per-step bars: consecutive steps are averaged in groups past this many bars.
inline constexpr size_t kChartMaxStepBars = 400;
/// GPUs of one recording drawn as charts (a dcgm-exporter scrape of a whole
/// cluster holds thousands): the least busy first, as they cost the most idle time.
inline constexpr size_t kChartMaxGpus = 16;

/// The chart document (schema "gputriage.charts", version 1; docs/json-schema.md).
std::string RenderChartJson(const Run& run, const Diagnosis& diagnosis, int indent = -1);

}  // namespace gputriage
