// Ranks of a synchronous job against each other, from step markers (rank_sync.cc).
#pragma once

#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"

namespace gputriage {

/// `judged[p]` are process p's judged steps (warm-up left out), `processes[p]`
/// its stats: filled with its lateness, waiting and where its lateness came
/// from; in a synchronous job its work loses the time it waited for the last rank.
RankSync MeasureRankSync(const std::vector<std::vector<const MarkedStep*>>& judged,
                         std::vector<ProcessStepStats>& processes);

}  // namespace gputriage
