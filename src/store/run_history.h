// An experiment's history in the run store: the runs kept under one --name,
// with their headline figures and settings, for judging a run against the
// runs before it (src/verdicts/history.h) and for `gputriage runs --name`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gputriage/status.h"
#include "src/store/run_store.h"
#include "src/verdicts/history.h"

namespace gputriage {

/// One stored run of an experiment.
struct ExperimentRun {
  RunInfo info;
  HistoryRun history;              // id, figures, settings (with "command")
  std::vector<Finding> findings;   // as stored when the run ended
  bool figures_worked_out = false; // kept before figures were stored: diagnosed from its samples now
};

/// The complete runs named `name`, oldest first, with ids below `before` (0: all).
/// `last` keeps only the latest ones (0: all). Figures come from the store, or
/// are worked out from a run's samples and steps when an older gputriage kept it.
StatusOr<std::vector<ExperimentRun>> LoadExperiment(RunStore& store, const std::string& name, int64_t before = 0,
                                                    size_t last = 0);

/// What judging stored run `run_id` against its experiment needs, from one
/// listing of the store: the run's settings (with "command") and the history
/// view of the complete runs named `name` before it (the last `last`, oldest first).
struct RunAndPredecessors {
  std::map<std::string, std::string> settings;
  std::vector<HistoryRun> predecessors;
};
StatusOr<RunAndPredecessors> LoadPredecessors(RunStore& store, int64_t run_id, const std::string& name, size_t last);

/// The history view of one stored run: its figures (stored, else worked out)
/// and settings.
StatusOr<HistoryRun> LoadHistoryRun(RunStore& store, const RunInfo& info, bool* worked_out = nullptr);

/// A stored or exported run is judged as it was recorded (its --workload and
/// price), unless the caller says otherwise (`workload_given`, a price set).
void ApplyRecordedSettings(const Run& run, bool workload_given, DiagnoseOptions& options);

/// Judges stored run `run_id` of experiment `name` against the complete runs of
/// that name before it; a regression becomes a finding in `diagnosis` (kept in
/// severity order). No name, or no predecessor: nothing to judge.
Status JudgeAgainstExperiment(RunStore& store, int64_t run_id, const std::string& name, Diagnosis& diagnosis);

/// A stored run loaded and diagnosed as `diagnose RUN_ID` does: its recorded
/// settings, then (with `judge_history`) judged against its experiment's
/// earlier runs; without, as `compare` diagnoses each side.
struct StoredRunDiagnosis {
  Run run;
  Diagnosis diagnosis;
};
StatusOr<StoredRunDiagnosis> DiagnoseStoredRun(RunStore& store, int64_t run_id, bool judge_history = true);

}  // namespace gputriage
