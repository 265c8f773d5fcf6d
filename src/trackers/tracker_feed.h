// Turns the recorder's samples and steps into tracker points, on one step axis
// where the job marks steps (so gpu/* and gputriage/* plot against the same x):
//  - GPU windows: time-weighted means per GPU (each sample stands for the time
//    since the previous one of its GPU and metric, capped at 4 intervals so a
//    gap does not stretch a stale value), at the window's end, step = the job's
//    latest step number ended by then (0 before its first step). Held as step
//    windows are (below), so steps that reach the recorder late still count.
//    A job that marks no steps: the window's index, given at once;
//  - step windows: the steps that ENDED in each window of the run's fixed grid
//    (origin + k x every), at that window's end, step = the job's latest step
//    number in it. Step markers reach the recorder late (held until final, up
//    to a few seconds), so a step window is emitted only `step_hold` after it
//    closes: a held step counts in the window it belongs to, not the one it
//    arrived in.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gputriage/metrics.h"
#include "gputriage/model.h"
#include "src/trackers/tracker.h"

namespace gputriage {

class TrackerFeed {
 public:
  /// `every`: the window length; `sample_interval`: the recorder's, for the gap
  /// cap; `step_hold`: how late a step may arrive and still join its window.
  TrackerFeed(TimeNs every, TimeNs sample_interval, TimeNs step_hold = 6 * kNsPerS);

  /// One sampled value (the recorder's observer: device position, metric, wall time, value).
  void AddSample(size_t device, Metric metric, TimeNs t, double value);
  /// The GPUs' facts (memory size, for memory_total_mib when it is not sampled).
  void NoteDevices(const MetricSet& metrics);
  /// Steps that finished (step markers), each once.
  void AddSteps(const std::vector<MarkedStep>& steps);
  /// The job will mark steps (zero-code mode): GPU points take the job's step
  /// axis from the start, not the window's index until the first step.
  void ExpectSteps() { expect_steps_ = true; }
  /// The GPU window's point once `now` (wall clock) has passed its end, and
  /// each step window's once its hold is over; at the end of the run
  /// (`final`) everything not yet given. Oldest first.
  std::vector<TrackerPoint> Poll(TimeNs now, bool final = false);

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
  std::optional<TrackerPoint> GpuWindow(TimeNs now);
  struct StepWindow {
    int64_t steps = 0;
    double step_ns = 0, data_ns = 0, samples = 0;
    int64_t latest_step = -1;
    TimeNs first_start = 0, last_end = 0;
  };
  TrackerPoint StepPoint(int64_t window, const StepWindow& w, bool last) const;
  TimeNs every_;
  TimeNs gap_cap_;
  TimeNs step_hold_;
  TimeNs window_start_ = 0;  // the GPU window's
  int64_t points_ = 0;       // GPU windows given
  TimeNs origin_ = 0;        // the step grid's start: the first thing seen
  std::map<int64_t, StepWindow> step_windows_;  // by index on the grid, not yet given
  int64_t next_step_window_ = 0;                 // windows before this one are given
  // The GPU series on the job's step axis: its points wait out the step hold,
  // then take the latest step number ended by their time.
  void ReleaseGpuPoints(TimeNs now, bool final, std::vector<TrackerPoint>& out);
  static constexpr size_t kMaxStepEnds = 1 << 16;
  bool expect_steps_ = false;
  bool steps_seen_ = false;
  std::vector<TrackerPoint> held_gpu_;        // oldest first
  std::multimap<TimeNs, int64_t> step_ends_;  // steps' end → number, not yet behind a given GPU point
  int64_t axis_step_ = 0;                     // the latest step number ended by the last GPU point given
};

}  // namespace gputriage
