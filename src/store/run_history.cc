#include "src/store/run_history.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

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

void ApplyRecordedSettings(const Run& run, bool workload_given, DiagnoseOptions& options) {
  const bool price_given = options.price_per_gpu_hour.has_value();
  for (const auto& rec : run.recordings) {
    if (!workload_given)
      if (auto w = rec.metadata.find("workload"); w != rec.metadata.end())
        if (auto parsed = ParseWorkloadClass(w->second)) options.workload = *parsed;
    if (!price_given)
      if (auto p = rec.metadata.find("price_per_gpu_hour"); p != rec.metadata.end()) {
        char* end = nullptr;
        const double price = std::strtod(p->second.c_str(), &end);
        if (end != p->second.c_str() && *end == '\0' && std::isfinite(price) && price >= 0)
          options.price_per_gpu_hour = price;
      }
  }
}

Status JudgeAgainstExperiment(RunStore& store, int64_t run_id, const std::string& name, Diagnosis& diagnosis) {
  if (name.empty()) return Status::Ok();
  ASSIGN_OR_RETURN(auto loaded, LoadPredecessors(store, run_id, name, kHistoryWindow));
  if (loaded.predecessors.empty()) return Status::Ok();
  HistoryRun current;
  current.id = run_id;
  current.figures = FiguresOf(diagnosis);
  current.settings = std::move(loaded.settings);
  // One name, several scripts: judged together as the name says, but never silently.
  if (auto cmd = current.settings.find("command"); cmd != current.settings.end()) {
    const std::string program = CommandProgram(cmd->second);
    std::map<std::string, int> others;
    for (const auto& p : loaded.predecessors)
      if (auto c = p.settings.find("command"); c != p.settings.end() && CommandProgram(c->second) != program)
        ++others[CommandProgram(c->second)];
    if (!others.empty()) {
      std::string listed;
      int count = 0;
      for (const auto& [other, n] : others) {
        listed += (listed.empty() ? "" : ", ") + fmt::format("{} ({} run{})", other, n, n == 1 ? "" : "s");
        count += n;
      }
      diagnosis.notes.push_back(fmt::format(
          "The history of '{}' mixes scripts: this run ran {}, {} of the {} runs before it ran {}. They are compared "
          "as the name says; give each script's runs their own --name to compare like with like.",
          name, program, count, loaded.predecessors.size(), listed));
    }
  }
  FitHeadroomOverRuns(current, loaded.predecessors, diagnosis);
  std::string not_judged;
  auto finding = JudgeAgainstHistory(name, current, loaded.predecessors, &not_judged);
  if (!not_judged.empty()) diagnosis.notes.push_back(not_judged);
  if (finding) {
    // After the findings of its own severity: what the run itself shows comes first.
    auto at = std::find_if(diagnosis.findings.begin(), diagnosis.findings.end(),
                           [&](const Finding& f) { return f.severity < finding->severity; });
    diagnosis.findings.insert(at, std::move(*finding));
  }
  return Status::Ok();
}

StatusOr<StoredRunDiagnosis> DiagnoseStoredRun(RunStore& store, int64_t run_id, bool judge_history) {
  StoredRunDiagnosis out;
  ASSIGN_OR_RETURN(auto rec, store.LoadRun(run_id));
  out.run.recordings.push_back(std::move(rec));
  DiagnoseOptions options;
  ApplyRecordedSettings(out.run, /*workload_given=*/false, options);
  out.diagnosis = Diagnose(out.run, options);
  const auto name = out.run.recordings[0].metadata.find("name");
  if (judge_history && name != out.run.recordings[0].metadata.end())
    RETURN_IF_ERROR(JudgeAgainstExperiment(store, run_id, name->second, out.diagnosis));
  return out;
}

}  // namespace gputriage
