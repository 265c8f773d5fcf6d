// Ranks of a synchronous job against each other, from step markers (rank_sync.cc).
#pragma once

#include <map>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"

namespace gputriage {

/// `judged[p]` are process p's judged steps (warm-up left out), `processes[p]`
/// its stats: filled with its lateness, waiting and where its lateness came
/// from. `waited[p]` gets, by step number, the ms process p waited in each
/// matched step for the last rank to arrive (not its own work, in a synchronous job).
RankSync MeasureRankSync(const std::vector<std::vector<const MarkedStep*>>& judged,
                         std::vector<ProcessStepStats>& processes, std::vector<std::map<int64_t, double>>& waited);

}  // namespace gputriage
