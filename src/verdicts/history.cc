#include "src/verdicts/history.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

#include "src/util/strings.h"
#include "src/verdicts/compare.h"

namespace gputriage {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool IsShare(const FigureDefinition& f) { return f.unit == std::string("percent"); }

std::string Value(const FigureDefinition& f, double v) { return FormatFigureValue(f.unit, v); }

/// "+62%" or "+33.4 points": a move as the figure counts it.
std::string Move(const FigureDefinition& f, double before, double after) {
  if (IsShare(f)) return fmt::format("{:+.1f} points", after - before);
  return before != 0 ? fmt::format("{:+.0f}%", 100.0 * (after - before) / std::fabs(before)) : "new";
}

Severity SeverityOf(const FigureDefinition& f, double worse_by) {
  // Shares move by points, times by percent of the baseline.
  const double high = IsShare(f) ? 15.0 : 25.0, moderate = IsShare(f) ? 5.0 : 10.0;
  return worse_by >= high ? Severity::kHigh : worse_by >= moderate ? Severity::kModerate : Severity::kLow;
}

std::string RunList(const std::vector<int64_t>& ids) {
  std::vector<std::string> parts;
  for (int64_t id : ids) parts.push_back("#" + std::to_string(id));
  if (parts.size() > 6) parts.erase(parts.begin() + 2, parts.end() - 2), parts.insert(parts.begin() + 2, "…");
  return Join(parts, ", ");
}

/// The first of the predecessors that form the baseline (the last kHistoryWindow).
size_t BaselineStart(const std::vector<HistoryRun>& predecessors) {
  return predecessors.size() > kHistoryWindow ? predecessors.size() - kHistoryWindow : 0;
}

/// Each predecessor's stretch of unchanged settings (from `first`): a run whose
/// recorded settings differ from the run before it starts a new stretch.
std::vector<int> SettingsStretches(const std::vector<HistoryRun>& predecessors, size_t first) {
  std::vector<int> stretch(predecessors.size(), 0);
  int id = 0;
  for (size_t i = first + 1; i < predecessors.size(); ++i) {
    if (!SettingsChanges(predecessors[i - 1].settings, predecessors[i].settings).empty()) ++id;
    stretch[i] = id;
  }
  return stretch;
}

/// The baseline of one figure: the median of the latest stretch that has it,
/// and the spread pooled from every stretch's deviations from its own median.
void MeasureBaseline(const std::map<int, std::vector<double>>& by_stretch, HistoryCheck& c) {
  const std::vector<double>& latest = by_stretch.rbegin()->second;
  c.runs = latest.size();
  c.baseline = Median(latest);
  std::vector<double> deviations;
  for (const auto& [id, values] : by_stretch) {
    if (values.size() < 2) continue;
    const double median = Median(values);
    for (double v : values) deviations.push_back(std::fabs(v - median));
    c.repeats += values.size() - 1;
  }
  c.spread = deviations.empty() ? 0 : 1.4826 * Median(deviations);  // a normal distribution's SD, from its MAD
  c.judged = c.repeats >= kHistoryMinRepeats;
}

// A share of a faster step judged in ms per step moves at least this much
// (percent of its ms before) to count: the step-time bar, floored as other times are.
constexpr double kShareInMsMinPercent = 10.0;

// Figures that are a share of the step's wall time: a faster step changes them
// without anything getting worse.
bool ShareOfStep(const std::string& id) {
  return id == "data_wait_percent" || id == "exposed_communication_percent" || id == "gpu_busy_percent" ||
         id == "gpu_util_mean_percent";
}

/// A run whose step got faster (or throughput higher) beyond the bar is no
/// regression of a share of that step unless the time itself grew: its data
/// wait or exposed communication in ms per step, judged with the same bar.
void ShareOfAFasterStep(std::vector<HistoryCheck>& checks) {
  const auto find = [&](const char* id) {
    auto it = std::find_if(checks.begin(), checks.end(), [&](const HistoryCheck& c) { return c.figure == id; });
    return it == checks.end() ? nullptr : &*it;
  };
  const HistoryCheck* step = find("step_time_ms");
  const HistoryCheck* rate = find("samples_per_s");
  const bool faster = (step != nullptr && -step->worse_by > step->threshold) || (rate != nullptr && -rate->worse_by > rate->threshold);
  if (!faster) return;
  for (auto& c : checks) {
    if (!c.regression || !ShareOfStep(c.figure)) continue;
    const FigureDefinition& def = *FindFigure(c.figure);
    if (def.higher_is_better || step == nullptr || step->baseline <= 0) {
      c.regression = false;  // a busy share of a shorter step
      continue;
    }
    const double before_ms = c.baseline / 100.0 * step->baseline, now_ms = c.value / 100.0 * step->value;
    c.regression = before_ms > 0 &&
                   100.0 * (now_ms - before_ms) / before_ms > std::max(step->threshold, kShareInMsMinPercent);
  }
}

}  // namespace

std::vector<HistoryCheck> CheckAgainstHistory(const HistoryRun& current, const std::vector<HistoryRun>& predecessors) {
  std::vector<HistoryCheck> out;
  const size_t first = BaselineStart(predecessors);
  // The noise of step times: this run's and the history's typical CV.
  std::vector<double> cvs, step_counts;
  for (size_t i = first; i < predecessors.size(); ++i) {
    if (auto it = predecessors[i].figures.find("step_time_cv"); it != predecessors[i].figures.end()) cvs.push_back(it->second);
    if (auto it = predecessors[i].figures.find("steps"); it != predecessors[i].figures.end()) step_counts.push_back(it->second);
  }
  const double cv = std::max(cvs.empty() ? 0 : Median(cvs), FigureOr(current.figures, "step_time_cv", 0));
  const double steps = std::min(step_counts.empty() ? 0 : Median(step_counts), FigureOr(current.figures, "steps", 0));
  // Step times are compared only with runs of the same batch (samples per
  // step); throughput is compared with every run.
  std::vector<bool> same_batch(predecessors.size(), true);
  for (size_t i = first; i < predecessors.size(); ++i)
    same_batch[i] = BatchChange(predecessors[i].figures, predecessors[i].settings, current.figures, current.settings).empty();
  const std::vector<int> stretch = SettingsStretches(predecessors, first);

  for (const auto& def : Figures()) {
    const auto now = current.figures.find(def.id);
    if (now == current.figures.end()) continue;
    std::map<int, std::vector<double>> by_stretch;
    for (size_t i = first; i < predecessors.size(); ++i) {
      if (def.per_batch && !same_batch[i]) continue;
      if (auto it = predecessors[i].figures.find(def.id); it != predecessors[i].figures.end())
        by_stretch[stretch[i]].push_back(it->second);
    }
    if (by_stretch.empty()) continue;
    HistoryCheck c;
    c.figure = def.id;
    c.value = now->second;
    MeasureBaseline(by_stretch, c);
    const double delta = def.higher_is_better ? c.baseline - c.value : c.value - c.baseline;
    if (IsShare(def)) {
      c.threshold = std::max(NoiseFloor(def, cv, steps), kHistorySigmas * c.spread);
      c.worse_by = delta;
    } else {
      if (c.baseline == 0) continue;  // nothing to be a percentage of
      c.threshold = std::max(NoiseFloor(def, cv, steps), 100.0 * kHistorySigmas * c.spread / std::fabs(c.baseline));
      c.worse_by = 100.0 * delta / std::fabs(c.baseline);
    }
    c.regression = c.judged && c.worse_by > c.threshold;
    out.push_back(c);
  }
  ShareOfAFasterStep(out);
  return out;
}

namespace {

/// CPUs outside load cost the job in a recorded run (its host.usage.* settings,
/// read as diagnose reads them); NaN where the run did not measure its host.
double ContendingCpus(const std::map<std::string, std::string>& settings) {
  const HostUsageAnalysis h = ReadHostUsage(settings, 0);
  return h.known && h.machine_cpus > 0 && !std::isnan(h.machine_busy_percent_mean) ? h.ContendingCpus() : NAN;
}

// Other processes taking this many more CPUs than in the baseline run (and this
// share of the machine) name the load as the first suspect.
constexpr double kMoreLoadCpus = 0.25;
constexpr double kMoreLoadShare = 0.1;

/// "the machine was busier..." when the run had markedly more outside load than the reference; "" otherwise.
std::string MoreLoad(const HistoryRun& reference, const HistoryRun& current) {
  // Both runs must have measured their host: a run from before that is no baseline of load.
  const double now = ContendingCpus(current.settings), before = ContendingCpus(reference.settings);
  const double total = ReadHostUsage(current.settings, 0).machine_cpus;
  if (std::isnan(now) || std::isnan(before) || now - before < std::max(kMoreLoadCpus, kMoreLoadShare * total)) return "";
  return fmt::format("the machine was busier with other processes: they used {:.2f} of its {:.0f} CPUs in this run "
                     "against {:.2f} in run #{}",
                     now, total, before, reference.id);
}

}  // namespace

std::optional<Finding> JudgeAgainstHistory(const std::string& experiment, const HistoryRun& current,
                                           const std::vector<HistoryRun>& predecessors, std::string* not_judged) {
  if (predecessors.empty()) return std::nullopt;
  const auto checks = CheckAgainstHistory(current, predecessors);
  std::vector<const HistoryCheck*> worse;
  size_t repeats = 0;
  bool any_judged = false;
  for (const auto& c : checks) {
    if (c.regression) worse.push_back(&c);
    any_judged = any_judged || c.judged;
    repeats = std::max(repeats, c.repeats);
  }
  // Said only when nothing could be judged: a figure left out for another
  // reason (a batch change) beside judged ones is no missing history.
  if (!checks.empty() && !any_judged && not_judged != nullptr)
    *not_judged = fmt::format(
        "History of \"{}\": not judged for regressions yet. Its spread is known from runs repeated with unchanged "
        "settings, and it holds {} such repeat{}: {} more run{} with unchanged settings, and this run is judged "
        "against the latest of them.",
        experiment, repeats, repeats == 1 ? "" : "s", kHistoryMinRepeats - repeats,
        kHistoryMinRepeats - repeats == 1 ? "" : "s");
  if (worse.empty()) return std::nullopt;

  // The baseline runs: the latest stretch of unchanged settings.
  const size_t first = BaselineStart(predecessors);
  const std::vector<int> stretch = SettingsStretches(predecessors, first);
  std::vector<int64_t> baseline_ids;
  for (size_t i = first; i < predecessors.size(); ++i)
    if (stretch[i] == stretch.back()) baseline_ids.push_back(predecessors[i].id);

  // The run the settings are compared with: the latest baseline run whose value
  // of the first regressed figure was typical of the history (within its band),
  // so a change is named against a good run, not against an earlier bad one.
  const FigureDefinition& lead = *FindFigure(worse.front()->figure);
  const HistoryRun* reference = &predecessors.back();
  for (size_t i = predecessors.size(); i-- > first;) {
    auto it = predecessors[i].figures.find(lead.id);
    if (it == predecessors[i].figures.end()) continue;
    const double off = IsShare(lead) ? std::fabs(it->second - worse.front()->baseline)
                                     : 100.0 * std::fabs(it->second - worse.front()->baseline) /
                                           std::fabs(worse.front()->baseline);
    if (off <= worse.front()->threshold) {
      reference = &predecessors[i];
      break;
    }
  }

  Finding f;
  f.verdict = "regression";
  f.origin = "history";
  f.scope = "experiment " + experiment;
  f.config_changes = SettingsChanges(reference->settings, current.settings);
  std::vector<std::string> moves, bars;
  for (const HistoryCheck* c : worse) {
    const FigureDefinition& def = *FindFigure(c->figure);
    f.severity = std::max(f.severity, SeverityOf(def, c->worse_by));
    moves.push_back(fmt::format("{} {} → {} ({})", def.label, Value(def, c->baseline), Value(def, c->value),
                                Move(def, c->baseline, c->value)));
    const std::string unit = IsShare(def) ? "points" : "%";
    bars.push_back(fmt::format("{}: worse by {:.1f} {} against a bar of {:.1f} {} (spread of the history {})", def.label,
                               c->worse_by, unit, c->threshold, unit, Value(def, c->spread)));
    // The value past which the run counts as worse, in the figure's own unit.
    const double bar = IsShare(def) ? (def.higher_is_better ? c->baseline - c->threshold : c->baseline + c->threshold)
                                    : c->baseline * (1 + (def.higher_is_better ? -1 : 1) * c->threshold / 100.0);
    const std::string source = fmt::format("median of the latest {} {} of \"{}\" with unchanged settings ({}); the "
                                           "bar is the larger of the figure's noise floor and {:.0f} robust SDs of the "
                                           "history's {} repeated runs",
                                           c->runs, c->runs == 1 ? "run" : "runs", experiment, RunList(baseline_ids),
                                           kHistorySigmas, c->repeats);
    f.evidence.push_back({c->figure, c->value, def.unit, bar, def.higher_is_better ? "<" : ">", source});
    f.evidence.push_back({c->figure + "_baseline", c->baseline, def.unit, std::nullopt, "", source});
    // A share moves in points, everywhere it is shown (the title, the bar,
    // compare): "+33.4 points", never "+387 %" of a share.
    if (IsShare(def))
      f.evidence.push_back({c->figure + "_change_points", c->value - c->baseline, "points", std::nullopt, "",
                            "against the baseline median"});
    else
      f.evidence.push_back({c->figure + "_change_percent",
                            c->baseline != 0 ? 100.0 * (c->value - c->baseline) / std::fabs(c->baseline) : 0, "percent",
                            std::nullopt, "", "against the baseline median"});
  }
  f.title = fmt::format("Regression against the latest {} {} of \"{}\": {}", baseline_ids.size(),
                        baseline_ids.size() == 1 ? "run" : "runs", experiment, Join(moves, "; "));

  std::vector<std::string> changed;
  for (const auto& ch : f.config_changes)
    if (ch.key != "command")
      changed.push_back(fmt::format("{} {} → {}", ch.key, ch.before.empty() ? "(unset)" : ch.before,
                                    ch.after.empty() ? "(unset)" : ch.after));
  f.detail = fmt::format("Baseline: the median of runs {} of this experiment, the latest with unchanged settings. {}. ",
                         RunList(baseline_ids), Join(bars, "; "));
  // Load from outside the job comes before any setting: a slower run on a busier
  // machine says nothing of the settings until it is run again alone.
  // Another script is another experiment's run: the first thing to know about a
  // comparison, before any flag or setting of it.
  for (const auto& ch : f.config_changes)
    if (ch.key == "command script") {
      f.detail += fmt::format("This run is of another script than run #{} ({} → {}): its figures compare two "
                              "different programs. ",
                              reference->id, ch.before, ch.after);
      f.recommendations.push_back({"give each script's runs their own --name",
                                   "a history compares like with like only when its runs are of one program"});
    }
  const std::string load = MoreLoad(*reference, current);
  if (!load.empty()) {
    f.detail += "First suspect: " + load + ". ";
    f.evidence.push_back({"other_processes_cpus", ContendingCpus(current.settings), "cpus", std::nullopt, "",
                          "record: machine busy share × CPUs − the job's own CPU use, this run"});
    f.evidence.push_back({"other_processes_cpus_before", ContendingCpus(reference->settings), "cpus", std::nullopt, "",
                          fmt::format("the same, run #{}", reference->id)});
    f.recommendations.push_back({"run it again on a quiet machine (or with the same outside load) before reading the "
                                 "changes below as the cause",
                                 load});
  }
  f.detail += changed.empty()
                  ? fmt::format("Nothing recorded changed since run #{}, the latest typical run (code, command, "
                                "settings and job configuration are the same): look at the data, the machine's load or "
                                "a change gputriage does not record.",
                                reference->id)
                  : fmt::format("Changed since run #{}, the latest typical run: {}.", reference->id, Join(changed, ", "));

  // What to do: undo the change that most plausibly moved each figure.
  std::set<std::string> advised;
  for (const HistoryCheck* c : worse) {
    const FigureDefinition& def = *FindFigure(c->figure);
    const ConfigChange* cause = PlausibleCause(c->figure, f.config_changes);
    if (cause == nullptr) continue;
    if (!advised.insert(cause->key).second) continue;
    f.recommendations.push_back(
        {cause->before.empty() ? fmt::format("Remove {} (= {}), which run #{} did not have", cause->key, cause->after,
                                             reference->id)
                               : fmt::format("Set {} back to {} (as in run #{}), or confirm the change was meant",
                                             cause->key, cause->before, reference->id),
         fmt::format("{} moved with it, and {} is among the settings that move {} most directly", def.label, cause->key,
                     def.label)});
  }
  f.recommendations.push_back(
      {fmt::format("gputriage compare {} {}", reference->id, current.id > 0 ? std::to_string(current.id) : "RUN"),
       "every figure and every recorded change of the two runs, side by side"});
  return f;
}

}  // namespace gputriage
