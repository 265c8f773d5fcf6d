#include "src/store/run_history.h"

#include "src/verdicts/compare.h"

namespace gputriage {

StatusOr<HistoryRun> LoadHistoryRun(RunStore& store, const RunInfo& info, bool* worked_out) {
  HistoryRun h;
  h.id = info.id;
  ASSIGN_OR_RETURN(h.figures, store.LoadFigures(info.id));
  if (worked_out) *worked_out = false;
  if (h.figures.empty()) {
    // Kept by an older gputriage: judge it from what it recorded. The figures do
    // not depend on the workload class or the price, so default options serve.
    ASSIGN_OR_RETURN(Recording rec, store.LoadRun(info.id));
    Run run;
    run.recordings.push_back(std::move(rec));
    h.figures = FiguresOf(Diagnose(run, {}));
    if (worked_out) *worked_out = true;
  }
  ASSIGN_OR_RETURN(h.settings, store.LoadSettings(info.id));
  h.settings["command"] = info.command;
  return h;
}

namespace {

/// The complete runs named `name` with ids below `before` (0: all), the last `last` (0: all).
std::vector<RunInfo> Choose(std::vector<RunInfo>& runs, const std::string& name, int64_t before, size_t last) {
  std::vector<RunInfo> chosen;
  for (auto& r : runs)
    if (r.name == name && r.status == "complete" && (before == 0 || r.id < before)) chosen.push_back(std::move(r));
  if (last > 0 && chosen.size() > last) chosen.erase(chosen.begin(), chosen.end() - static_cast<ptrdiff_t>(last));
  return chosen;
}

}  // namespace

StatusOr<RunAndPredecessors> LoadPredecessors(RunStore& store, int64_t run_id, const std::string& name, size_t last) {
  ASSIGN_OR_RETURN(auto runs, store.ListRuns());
  RunAndPredecessors out;
  ASSIGN_OR_RETURN(out.settings, store.LoadSettings(run_id));
  for (const auto& r : runs)
    if (r.id == run_id) out.settings["command"] = r.command;
  for (const auto& info : Choose(runs, name, run_id, last)) {
    ASSIGN_OR_RETURN(HistoryRun h, LoadHistoryRun(store, info));
    out.predecessors.push_back(std::move(h));
  }
  return out;
}

StatusOr<std::vector<ExperimentRun>> LoadExperiment(RunStore& store, const std::string& name, int64_t before,
                                                    size_t last) {
  ASSIGN_OR_RETURN(auto runs, store.ListRuns());
  std::vector<ExperimentRun> out;
  for (auto& info : Choose(runs, name, before, last)) {
    ExperimentRun e;
    ASSIGN_OR_RETURN(e.history, LoadHistoryRun(store, info, &e.figures_worked_out));
    ASSIGN_OR_RETURN(e.findings, store.LoadFindings(info.id));
    e.info = std::move(info);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace gputriage
