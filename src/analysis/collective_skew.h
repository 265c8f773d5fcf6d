// When the ranks of one run enter each synchronising collective (collective_skew.cc).
#pragma once

#include <vector>

#include "gputriage/diagnosis.h"
#include "src/analysis/analysis_internal.h"
#include "src/analysis/trace_events.h"

namespace gputriage::analysis {

/// A rank's synchronising collectives and what it did between them (four passes:
/// two over its kernels, two over its host spans), kept in its analysis so the
/// cross-rank analysis needs no rank's events. `primary_device` < 0: every device.
/// `kinds`: the analysis's class of each kernel name.
StatusOr<RankCollectives> GatherRankCollectives(const TraceEvents& events, int primary_device, const KindByName& kinds);

/// One rank of a run: its recording (its events may be gone: only its rank is
/// read), the analysis of it and its index in the diagnosis.
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
