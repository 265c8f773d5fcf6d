// The agent's memory of the recent past: every sampled value of the last
// `window` (default 5 minutes) per GPU and metric, in time order, and nothing
// older. Judging replays it into a fresh Recording, so a verdict is always
// about the window and the agent's memory stays bounded over weeks: at most
// window / interval values per series, and at most kMaxValuesPerSeries.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <vector>

#include "gputriage/model.h"

namespace gputriage {

class SampleWindow {
 public:
  static constexpr size_t kMaxValuesPerSeries = 100'000;

  explicit SampleWindow(TimeNs window_ns) : window_ns_(window_ns) {}

  /// A value of `device` (its position in the agent's recording) at time `t`.
  /// Values older than the window are dropped as newer ones arrive.
  void Add(size_t device, Metric metric, TimeNs t, double value);
  /// Drops what is older than `now - window` (and a device's values when it
  /// has none left).
  void Prune(TimeNs now);
  /// Forgets a device's values (a GPU lost, or its job replaced).
  void Forget(size_t device);

  /// Replays `device`'s values into `out` at its position `out_device`, in time
  /// order per series. Returns how many values it added.
  int64_t Replay(size_t device, MetricSet& out, size_t out_device) const;
  /// The time span of `device`'s values: first and last time (0, 0 when none).
  std::pair<TimeNs, TimeNs> Span(size_t device) const;
  size_t values() const { return values_; }
  TimeNs window_ns() const { return window_ns_; }

 private:
  using Series = std::deque<std::pair<TimeNs, double>>;
  struct DeviceSeries {
    std::array<Series, kNumMetrics> series;
  };
  TimeNs window_ns_;
  std::vector<DeviceSeries> devices_;
  size_t values_ = 0;
};

}  // namespace gputriage
