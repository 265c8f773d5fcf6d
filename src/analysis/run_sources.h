// Which inputs are one run. Files named together are meant as one job, but a
// stored H100 run from 2026 and a V100 trace from 2021 are not, and two traces
// that both say rank 0 are not two ranks: such sources are judged apart, and the
// report says why, instead of merging their evidence.
#pragma once

#include <string>
#include <vector>

#include "gputriage/diagnosis.h"

namespace gputriage {

struct RunSources {
  /// Per recording, the group (run) it belongs to; group 0 holds the first.
  std::vector<int> group;
  int groups = 0;
  /// Why sources were set apart, one sentence each (empty when all are one run).
  std::vector<std::string> notes;
};

/// Groups the recordings of `run`: a recording joins a group when its wall-clock
/// span overlaps the group's (within a few minutes, where both clocks are
/// absolute), its GPUs are of a model the group ran on (where both name theirs),
/// and, for a trace, no trace in the group already claims its rank. `analyses`:
/// one per recording (a trace's span is its analysis's, its events may be gone).
RunSources GroupSourcesIntoRuns(const Run& run, const std::vector<RecordingAnalysis>& analyses);

}  // namespace gputriage
