// The clocks every component reads: wall time (what samples and steps are
// stamped with) and monotonic time (for intervals, immune to clock steps).
#pragma once

#include <time.h>

#include <cstdint>

#include "gputriage/model.h"

namespace gputriage {

/// CLOCK_REALTIME in ns.
inline TimeNs WallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * kNsPerS + ts.tv_nsec;
}

/// CLOCK_MONOTONIC in ns.
inline TimeNs MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * kNsPerS + ts.tv_nsec;
}

/// CLOCK_MONOTONIC in ms.
inline int64_t MonotonicMs() { return MonotonicNs() / 1'000'000; }

}  // namespace gputriage
