// When the ranks of one run enter each synchronising collective (collective_skew.cc).
#pragma once

#include <vector>

#include "gputriage/diagnosis.h"

namespace gputriage::analysis {

/// One rank of a run: its recording, the analysis of it and its index in the diagnosis.
struct RankTrace {
  const Recording* recording = nullptr;
  const RecordingAnalysis* analysis = nullptr;
  int index = -1;
};

/// Arrival skew at the collectives every rank ran (all-reduce, all-gather,
/// reduce-scatter, all-to-all, barrier), matched by the k-th occurrence of each
/// kind on each rank. `ranks`: distinct ranks of one run, absolute clocks.
CollectiveSkew MeasureCollectiveSkew(const std::vector<RankTrace>& ranks);

/// The collective a kernel or host span is ("all_reduce", "all_to_all", ...), ""
/// for point-to-point and rooted ones (send/recv, broadcast, reduce): those do not
/// hold every rank until the last arrives.
std::string_view SynchronisingCollective(std::string_view name);

}  // namespace gputriage::analysis
