// Training steps rebuilt from step markers: each step-begin paired with the
// step-end of the same process and number, and each phase (data, forward, ...)
// paired on its thread and charged to a step of its process: the step it
// starts in, else the next step (a batch fetched between steps, as
// `for batch in loader` does, is that step's data wait, and the step's span
// then starts with it: a span is one loop iteration, wait and compute).
#pragma once

#include <array>
#include <tuple>
#include <cstdint>
#include <vector>

#include "gputriage/model.h"
#include "src/markers/marker_ring.h"

namespace gputriage {

inline constexpr int kNumMarkerPhases = 8;  // gputriage_phase values 1..7; 0 unused
static_assert(std::tuple_size_v<decltype(MarkedStep::phase_ns)> == kNumMarkerPhases);

struct MarkedSteps {
  std::vector<MarkedStep> steps;  // by start time
  int64_t unpaired_steps = 0;     // a begin without its end (the job ended mid-step) or the reverse
  int64_t unpaired_phases = 0;
  int64_t unassigned_phases = 0;  // phases with no step of their process to charge
  int64_t unmatched_device_times = 0;  // device times for no recorded step (or not positive)
};

MarkedSteps BuildMarkedSteps(const std::vector<Marker>& markers);

}  // namespace gputriage
