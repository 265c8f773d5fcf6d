// Turns the recorder's samples and steps into one TrackerPoint per window:
// time-weighted means per GPU (each sample stands for the time since the
// previous one of its GPU and metric, capped at 4 intervals so a gap does not
// stretch a stale value), and the steps that ended in the window.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "gputriage/metrics.h"
#include "gputriage/model.h"
#include "src/trackers/tracker.h"

namespace gputriage {

class TrackerFeed {
 public:
  /// `every`: the window length; `sample_interval`: the recorder's, for the gap cap.
  TrackerFeed(TimeNs every, TimeNs sample_interval);

  /// One sampled value (the recorder's observer: device position, metric, wall time, value).
  void AddSample(size_t device, Metric metric, TimeNs t, double value);
  /// The GPUs' facts (memory size, for memory_total_mib when it is not sampled).
  void NoteDevices(const MetricSet& metrics);
  /// Steps that finished (step markers), each once.
  void AddSteps(const std::vector<MarkedStep>& steps);
  /// The window's point once `now` (wall clock) has passed its end, or at the
  /// end of the run (`final`) when anything was seen since the last one.
  std::optional<TrackerPoint> Poll(TimeNs now, bool final = false);

  TimeNs every() const { return every_; }

 private:
  struct Accumulator {
    TimeNs last_t = 0;
    double weighted = 0;  // Σ value × covered ns
    double covered = 0;   // Σ covered ns
    double last_value = 0;
    bool seen = false;
  };
  static constexpr size_t kMaxDevices = 64;
  static constexpr Metric kTracked[] = {Metric::kGpuUtil,     Metric::kSmActive,     Metric::kTensorActive,
                                        Metric::kDramActive,  Metric::kPowerW,       Metric::kFbUsedBytes,
                                        Metric::kFbTotalBytes};
  static constexpr size_t kNumTracked = std::size(kTracked);
  std::vector<std::array<Accumulator, kNumTracked>> devices_;
  std::vector<double> memory_total_bytes_;  // per device position, 0 unknown
  std::vector<std::string> gpu_label_;      // per device position: "0", or "0.mig3" (gpu/LABEL/... keys)
  TimeNs every_;
  TimeNs gap_cap_;
  TimeNs window_start_ = 0;
  int64_t points_ = 0;
  int64_t latest_step_ = -1;
  // Steps of the window.
  int64_t steps_ = 0;
  double step_ns_ = 0, data_ns_ = 0, samples_ = 0;
};

}  // namespace gputriage
