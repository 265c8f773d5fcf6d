// An experiment's history: the runs recorded under one --name, each judged
// against the runs before it. A run is a regression when a headline figure
// (src/verdicts/compare.h) is worse than the recent runs' median by more than
// both the figure's noise floor and three robust standard deviations of the
// history itself, so a noisy experiment does not cry wolf.
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

/// One figure of a run against its baseline.
struct HistoryCheck {
  std::string figure;       // FigureDefinition id
  double value = 0;
  double baseline = 0;      // median of the baseline runs
  double spread = 0;        // 1.4826 × MAD of the baseline runs, in the figure's unit
  double threshold = 0;     // the move that counts: points for shares, else percent of the baseline
  double worse_by = 0;      // points for shares, else percent of the baseline (> 0: worse)
  size_t runs = 0;          // baseline runs that had the figure
  bool regression = false;
};

/// Each figure `current` shares with its predecessors (oldest first; the last
/// kHistoryWindow are used), judged against them.
std::vector<HistoryCheck> CheckAgainstHistory(const HistoryRun& current, const std::vector<HistoryRun>& predecessors);

/// A `regression` finding (origin "history") naming each figure that got worse,
/// by how much, against which runs, and the settings changed since the latest
/// baseline run that was typical of the history; nullopt when nothing regressed
/// or there is no predecessor.
std::optional<Finding> JudgeAgainstHistory(const std::string& experiment, const HistoryRun& current,
                                           const std::vector<HistoryRun>& predecessors);

/// memory_headroom from an experiment's runs at two or more batch sizes (the
/// same script and model): peak memory fitted as fixed + per-sample × batch
/// over the latest run at each batch size, this one included; the finding in
/// `diagnosis` takes the fit's largest batch and its range (a single run gives
/// only a lower bound). Nothing when the runs hold fewer than two batch sizes.
void FitHeadroomOverRuns(const HistoryRun& current, const std::vector<HistoryRun>& predecessors, Diagnosis& diagnosis);

}  // namespace gputriage
