// How many GPUs a metric log without an index, uuid or pci.bus_id column holds.
//
// nvidia-smi --query-gpu prints one row per GPU per interval, GPUs in index order,
// each row stamped when that GPU was queried. Rows of one cycle are a few
// milliseconds apart; cycles are the interval apart (-l / -lms). A log of K GPUs
// therefore has gaps in a repeating pattern of K-1 short ones and one long one;
// a log of one GPU has no such pattern, however fast or irregular it is sampled
// (-lms 10 gives rows 7-19 ms apart). Values confirm it: the slow readings of a
// GPU (memory used, temperature) continue from one of its rows to its next, K
// rows later, and jump between neighbouring rows of different GPUs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gputriage/model.h"

namespace gputriage {

struct InterleavedGpus {
  int gpus = 1;
  /// Rows before the first complete cycle: row r is GPU ((r - phase) mod gpus).
  int phase = 0;
  /// A gap longer than this starts a new cycle (0 with one GPU).
  TimeNs cycle_gap_ns = 0;
  /// How it was inferred, for the report ("rows 7-19 ms apart with no repeating
  /// pattern of short and long gaps").
  std::string how;
};

/// One column of readings, one entry per row (NaN where missing), and whether it
/// changes slowly on one GPU (memory used, temperature): only such columns can
/// tell GPUs apart by continuity, since a rhythm of work makes utilization and
/// power alternate on one GPU too.
struct RowColumn {
  std::string name;
  bool slow = false;
  std::vector<double> values;
};

/// Infers the GPU count from the first rows of a log (their times in row order,
/// and their readings). Needs at least 5 rows; with fewer it says one GPU.
InterleavedGpus InferInterleavedGpus(std::span<const TimeNs> times, std::span<const RowColumn> columns);

}  // namespace gputriage
