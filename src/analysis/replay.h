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
  double host_blocked_ms = 0;  // per step: host time spent in blocking calls waiting for the device
};

/// Replays `recording` with `change` over the steps AlignSteps kept.
ReplayResult Replay(const Recording& recording, const Index& index, const StepWindows& steps,
                    const ReplayChange& change);

}  // namespace gputriage::analysis
