// What-if replay of a trace: the recorded host and device timelines are played
// again with one thing changed (the data wait removed, matrix kernels faster, host
// work slower), keeping every dependency the trace shows: a kernel cannot start
// before its launch call nor before the previous work on its stream ends, and a
// blocking call (synchronize, a pageable copy) holds the host until the device work
// it waits for is done. Removing one bottleneck thus exposes the next one, which is
// what a fixed run measures. See replay.cc for the rules and docs/verdicts.md.
#pragma once

#include <vector>

#include "gputriage/model.h"
#include "src/analysis/analysis_internal.h"

namespace gputriage::analysis {

struct ReplayChange {
  bool remove_data_wait = false;  // DataLoader spans on the host take no time
  double host_stretch = 1.0;      // host work (not its waits) takes this many times as long
  /// Per rec.kernels index: the factor its duration is multiplied by; empty = unchanged.
  std::vector<float> kernel_scale;
};

struct ReplayResult {
  bool valid = false;
  int steps = 0;
  double step_ms = 0;          // mean device-aligned step, as AlignSteps measures the recorded one
  double gpu_busy_ms = 0;      // per step: union of device work inside the steps
};

/// A trace prepared for replays: its device operations with their launches and
/// recorded delays, its blocking calls and data waits, in the order a replay walks
/// them. Built once per recording; each Run() is one linear pass.
class TraceReplay {
 public:
  TraceReplay(const Recording& recording, const Index& index, const StepWindows& steps);
  /// Replays with `change` over the steps AlignSteps kept.
  ReplayResult Run(const ReplayChange& change) const;

 private:
  struct Op {
    Interval time;      // recorded
    TimeNs launch = 0;  // recorded start of the launch call (op start when unknown)
    TimeNs delay = 0;   // recorded launch latency or queueing (see replay.cc)
    int32_t kernel = -1;  // index into recording.kernels, -1 for copies and memsets
    int32_t stream = 0;   // dense stream number
    int32_t step = -1;    // the host step its launch lies in, -1 if none or unknown
  };
  struct HostItem {
    Interval time;
    bool data_wait = false;  // else a blocking call
  };
  std::vector<Op> ops_;  // in launch order
  std::vector<HostItem> items_;  // in recorded start order
  std::vector<Interval> host_steps_;
  int streams_ = 0;
  std::vector<size_t> ops_per_stream_;  // so a replay reserves exactly what it needs
  TimeNs origin_ = 0;
};

}  // namespace gputriage::analysis
