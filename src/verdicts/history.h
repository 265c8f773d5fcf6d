// An experiment's history: the runs recorded under one --name, each judged
// against the runs before it. The baseline is the latest runs with unchanged
// settings (runs since the last recorded change: a median across a change
// would hide a revert of it), and a run is a regression when a headline figure
// (src/verdicts/compare.h) is worse than their median by more than both the
// figure's noise floor and three robust standard deviations of the history,
// pooled over its runs of unchanged settings. Until the history holds enough
// such repeats to know that spread, nothing is judged and the report says how
// many runs are missing; and a run whose step got faster is never a regression
// of a share of that step (its data wait is judged in ms, not in share).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gputriage/diagnosis.h"

namespace gputriage {

/// One run of an experiment as history sees it.
struct HistoryRun {
  int64_t id = 0;
  std::map<std::string, double> figures;          // FiguresOf(), or as the store kept them
  std::map<std::string, std::string> settings;    // tags, job config, command, commit
};

/// How many of the latest runs before a run form its baseline.
inline constexpr size_t kHistoryWindow = 10;
/// Robust standard deviations of the history a move must also pass.
inline constexpr double kHistorySigmas = 3.0;
/// Repeats (runs beyond the first of each stretch of unchanged settings) the
/// history needs before its spread is known and a regression can be judged: one
/// pair of runs of unchanged settings is a first measure of it (the figure's
/// noise floor bounds the bar from below while it is that thin).
inline constexpr size_t kHistoryMinRepeats = 1;

/// One figure of a run against its baseline.
struct HistoryCheck {
  std::string figure;       // FigureDefinition id
  double value = 0;
  double baseline = 0;      // median of the baseline runs
  double spread = 0;        // 1.4826 × MAD of the baseline runs, in the figure's unit
  double threshold = 0;     // the move that counts: points for shares, else percent of the baseline
  double worse_by = 0;      // points for shares, else percent of the baseline (> 0: worse)
  size_t runs = 0;          // baseline runs that had the figure
  size_t repeats = 0;       // runs the spread is pooled from, beyond the first of each stretch of unchanged settings
  bool judged = true;       // false: too few repeats to know the spread (repeats < kHistoryMinRepeats)
  bool regression = false;
};

/// Each figure `current` shares with its predecessors (oldest first; the last
/// kHistoryWindow are used), judged against them.
std::vector<HistoryCheck> CheckAgainstHistory(const HistoryRun& current, const std::vector<HistoryRun>& predecessors);

/// A `regression` finding (origin "history") naming each figure that got worse,
/// by how much, against which runs, and the settings changed since the latest
/// baseline run that was typical of the history; nullopt when nothing regressed
/// or there is no predecessor.
/// `not_judged` (when given) receives why nothing could be judged, and how
/// many runs are missing, when the history is too short to know its spread.
std::optional<Finding> JudgeAgainstHistory(const std::string& experiment, const HistoryRun& current,
                                           const std::vector<HistoryRun>& predecessors,
                                           std::string* not_judged = nullptr);

/// memory_headroom from an experiment's runs at two or more batch sizes (the
/// same script and model): peak memory fitted as fixed + per-sample × batch
/// over the latest run at each batch size, this one included; the finding in
/// `diagnosis` takes the fit's largest batch and its range (a single run gives
/// only a lower bound). Nothing when the runs hold fewer than two batch sizes.
void FitHeadroomOverRuns(const HistoryRun& current, const std::vector<HistoryRun>& predecessors, Diagnosis& diagnosis);

}  // namespace gputriage
