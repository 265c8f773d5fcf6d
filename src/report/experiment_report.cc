#include "src/report/experiment_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/analysis/ledger.h"
#include "src/util/strings.h"
#include "src/util/units.h"
#include "src/verdicts/compare.h"
#include "src/verdicts/history.h"

namespace gputriage {
namespace {

// The figures shown per run, in this order, when some run has them, with their column heads.
struct Column {
  const char* figure;
  const char* head;
};
constexpr Column kColumns[] = {{"step_time_ms", "step time"},        {"data_wait_percent", "data wait"},
                               {"samples_per_s", "samples/s"},       {"gpu_busy_percent", "GPU busy"},
                               {"gpu_util_mean_percent", "util"},    {"tensor_core_percent_of_matrix_time", "tensor"},
                               {"mfu_percent", "MFU"}};

std::string Cell(const FigureDefinition& f, double v) {
  // Throughput without its unit: the column head says it.
  return f.unit == std::string("samples/s") ? fmt::format("{:.1f}", v) : FormatFigureValue(f.unit, v);
}

std::string Short(const std::string& value) { return value.empty() ? "(unset)" : value.size() > 24 ? value.substr(0, 21) + "..." : value; }

/// What changed from the previous run, briefly: "dataloader.num_workers 4→0".
std::vector<ConfigChange> ChangesFromPrevious(const std::vector<ExperimentRun>& runs, size_t i) {
  if (i == 0) return {};
  return SettingsChanges(runs[i - 1].history.settings, runs[i].history.settings);
}

/// The latest run against the runs before it (the last kHistoryWindow): where
/// the experiment stands now.
std::vector<HistoryCheck> LatestAgainstHistory(const std::vector<ExperimentRun>& runs) {
  if (runs.size() < 2) return {};
  std::vector<HistoryRun> before;
  for (size_t i = 0; i + 1 < runs.size(); ++i) before.push_back(runs[i].history);
  return CheckAgainstHistory(runs.back().history, before);
}

/// The experiment's goodput ledger: its runs' ledgers added up, and the time
/// from each failed run's end to the next run's start (the restart), in the
/// failed run's unit (its GPUs were paid for while the job was down).
struct ExperimentLedger {
  int runs = 0;            // runs with a ledger
  bool gpu_hours = false;  // any run on GPUs (else job-hours)
  bool mixed_units = false;
  double total = 0;
  std::vector<std::pair<std::string, double>> buckets;  // in LedgerBucketNames() order
  double restart_hours = 0;
  int restarts = 0;
  int failed = 0;
  double Bucket(const std::string& name) const {
    for (const auto& [n, h] : buckets)
      if (n == name) return h;
    return 0;
  }
};

double Figure(const ExperimentRun& r, const std::string& id, double fallback = NAN) {
  auto it = r.history.figures.find(id);
  return it == r.history.figures.end() ? fallback : it->second;
}

ExperimentLedger AddUpLedgers(const std::vector<ExperimentRun>& runs) {
  ExperimentLedger l;
  int gpu_runs = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const double total = Figure(r, "ledger_total_hours");
    if (std::isnan(total)) continue;
    ++l.runs;
    if (Figure(r, "ledger_gpus", 0) > 0) ++gpu_runs;
    l.total += total;
    for (const std::string& name : analysis::LedgerBucketNames()) {
      const double hours = Figure(r, "ledger_" + name + "_hours");
      if (std::isnan(hours)) continue;  // not seen in this run
      auto it = std::find_if(l.buckets.begin(), l.buckets.end(), [&](const auto& b) { return b.first == name; });
      if (it == l.buckets.end()) l.buckets.push_back({name, hours});
      else it->second += hours;
    }
    const bool failed = r.info.exit_code && *r.info.exit_code != 0;
    if (failed) ++l.failed;
    if (failed && i + 1 < runs.size() && runs[i + 1].info.started_ns > r.info.ended_ns && r.info.ended_ns > 0) {
      const double gpus = Figure(r, "ledger_gpus", 0);
      const double hours = static_cast<double>(runs[i + 1].info.started_ns - r.info.ended_ns) / 3.6e12;
      l.restart_hours += hours * (gpus > 0 ? gpus : 1.0);
      ++l.restarts;
    }
  }
  const auto& order = analysis::LedgerBucketNames();
  std::stable_sort(l.buckets.begin(), l.buckets.end(), [&](const auto& a, const auto& b) {
    return std::find(order.begin(), order.end(), a.first) < std::find(order.begin(), order.end(), b.first);
  });
  l.gpu_hours = gpu_runs > 0;
  l.mixed_units = gpu_runs > 0 && gpu_runs < l.runs;
  l.total += l.restart_hours;
  return l;
}

bool Regressed(const ExperimentRun& r) {
  for (const auto& f : r.findings)
    if (f.verdict == "regression") return true;
  return false;
}

}  // namespace

std::string RenderExperimentText(const std::string& name, const std::vector<ExperimentRun>& runs) {
  std::string out = fmt::format("Experiment \"{}\": {} complete {}\n", Printable(name), runs.size(),
                                runs.size() == 1 ? "run" : "runs");
  if (runs.empty()) return out + "  (no complete run has this name: `gputriage runs` lists every run)\n";
  std::vector<const Column*> columns;
  for (const Column& c : kColumns)
    for (const auto& r : runs)
      if (r.history.figures.count(c.figure)) {
        columns.push_back(&c);
        break;
      }
  bool any_goodput = false;
  for (const auto& r : runs) any_goodput = any_goodput || r.history.figures.count("goodput_percent") > 0;
  out += fmt::format("  {:>5}  {:<16}", "run", "started");
  for (const auto* c : columns) out += fmt::format("  {:>10}", c->head);
  if (any_goodput) out += fmt::format("  {:>10}", "goodput");
  out += "  verdicts\n";
  std::vector<std::string> regressions;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    out += fmt::format("  {:>5}  {:<16}", r.info.id, FormatLocalMinute(r.info.started_ns));
    for (const auto* c : columns) {
      auto it = r.history.figures.find(c->figure);
      out += fmt::format("  {:>10}", it == r.history.figures.end() ? "-" : Cell(*FindFigure(c->figure), it->second));
    }
    if (any_goodput) {
      const double g = Figure(r, "goodput_percent");
      out += fmt::format("  {:>10}", std::isnan(g) ? "-" : fmt::format("{:.1f}%", g));
    }
    std::vector<std::string> verdicts;
    if (r.info.exit_code && *r.info.exit_code != 0) verdicts.push_back(fmt::format("exit {}", *r.info.exit_code));
    for (const auto& f : r.findings)
      verdicts.push_back(f.verdict == "regression" ? "REGRESSION" : f.verdict);
    out += "  " + (verdicts.empty() ? std::string("-") : Join(verdicts, ", ")) + "\n";
    std::vector<std::string> changed;
    for (const auto& c : ChangesFromPrevious(runs, i))
      if (c.key != "command" && c.key != "git_commit")
        changed.push_back(fmt::format("{} {} → {}", c.key, Short(c.before), Short(c.after)));
      else if (c.key == "git_commit")
        changed.push_back(fmt::format("commit {} → {}", c.before.substr(0, 8), c.after.substr(0, 8)));
    if (!changed.empty()) out += fmt::format("  {:>5}  changed: {}\n", "", Printable(Join(changed, ", ")));
    for (const auto& f : r.findings)
      if (f.verdict == "regression") regressions.push_back(fmt::format("run {}: {}", r.info.id, f.title));
  }
  // The trend: the first run to the latest, and the latest against its baseline.
  if (runs.size() >= 2) {
    const auto checks = LatestAgainstHistory(runs);
    out += fmt::format("\nTrend: run {} against the median of the latest {} run{} before it with unchanged settings "
                       "(the first was run {}){}\n",
                       runs.back().info.id, checks.empty() ? 0 : checks.front().runs,
                       !checks.empty() && checks.front().runs == 1 ? "" : "s", runs.front().info.id,
                       !checks.empty() && !checks.front().judged
                           ? fmt::format("; not judged: {} more run{} with unchanged settings needed to know the spread",
                                         kHistoryMinRepeats - checks.front().repeats,
                                         kHistoryMinRepeats - checks.front().repeats == 1 ? " is" : "s are")
                           : "");
    for (const auto& c : checks) {
      const FigureDefinition& def = *FindFigure(c.figure);
      const auto first = runs.front().history.figures.find(c.figure);
      const bool share = def.unit == std::string("percent");
      const std::string move = share ? fmt::format("{:+.1f} points", c.value - c.baseline)
                                     : fmt::format("{:+.0f}%", 100.0 * (c.value - c.baseline) / c.baseline);
      out += fmt::format("  {:<36} {:>12} now, {:>12} baseline ({}{}){}\n", def.label, Cell(def, c.value),
                         Cell(def, c.baseline), move,
                         c.regression ? ", worse past the bar" : c.worse_by < -c.threshold ? ", better past the bar" : "",
                         first != runs.front().history.figures.end()
                             ? fmt::format("; first run {}", Cell(def, first->second))
                             : "");
    }
  }
  if (!regressions.empty()) {
    out += "\nRegressions (each run judged against the runs before it):\n";
    for (const auto& line : regressions) out += "  " + Printable(line) + "\n";
  }
  // Where the experiment's GPU-hours went, across its runs and restarts.
  if (const ExperimentLedger l = AddUpLedgers(runs); l.runs > 0 && l.total > 0) {
    const std::string amount = l.gpu_hours ? FormatGpuTime(l.total)
                                           : FormatSeconds(l.total * 3600.0) + " of wall time, no GPU seen";
    out += fmt::format("\nLedger of the {} run{} with one: {}, goodput {:.1f}%{}{}\n", l.runs,
                       l.runs == 1 ? "" : "s", amount, 100.0 * l.Bucket("productive") / l.total,
                       l.failed > 0 ? fmt::format("; {} failed, {} restart{}", l.failed, l.restarts, l.restarts == 1 ? "" : "s")
                                    : "",
                       l.mixed_units ? " (runs without a GPU counted in job-hours)" : "");
    auto line = [&](const std::string& bucket, double hours) {
      if (hours <= 0) return;
      // Job-hours read best as time; GPU-hours as they are billed.
      out += fmt::format("  {:<19} {:>6.1f}%  {:>12}\n", bucket, 100.0 * hours / l.total,
                         l.gpu_hours ? FormatGpuTime(hours) : FormatSeconds(hours * 3600.0));
    };
    for (const auto& [bucket, hours] : l.buckets) line(bucket, hours);
    line("restart", l.restart_hours);
  }
  bool worked_out = false;
  for (const auto& r : runs) worked_out = worked_out || r.figures_worked_out;
  if (worked_out)
    out += "\nRuns kept by an older gputriage have no stored figures: theirs were worked out from their samples now.\n";
  return out;
}

std::string RenderExperimentJson(const std::string& name, const std::vector<ExperimentRun>& runs) {
  using json = nlohmann::json;
  json out = {{"schema", "gputriage.experiment"}, {"schema_version", 1}, {"name", name}, {"runs", json::array()}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    json figures = json::object();
    for (const auto& [k, v] : r.history.figures)
      if (std::isfinite(v)) figures[k] = v;
    json findings = json::array();
    for (const auto& f : r.findings)
      findings.push_back({{"verdict", f.verdict}, {"severity", SeverityName(f.severity)}, {"title", f.title}});
    json changes = json::array();
    for (const auto& c : ChangesFromPrevious(runs, i))
      changes.push_back({{"key", c.key}, {"before", c.before.empty() ? json(nullptr) : json(c.before)},
                         {"after", c.after.empty() ? json(nullptr) : json(c.after)}});
    out["runs"].push_back({{"id", r.info.id},
                           {"started_ns", r.info.started_ns},
                           {"ended_ns", r.info.ended_ns},
                           {"exit_code", r.info.exit_code ? json(*r.info.exit_code) : json(nullptr)},
                           {"command", r.info.command},
                           {"figures", figures},
                           {"figures_worked_out", r.figures_worked_out},
                           {"findings", findings},
                           {"regression", Regressed(r)},
                           {"changes_from_previous", changes}});
  }
  json latest = json::array();
  for (const auto& c : LatestAgainstHistory(runs))
    latest.push_back({{"figure", c.figure}, {"value", c.value}, {"baseline", c.baseline}, {"spread", c.spread},
                      {"threshold", c.threshold}, {"worse_by", c.worse_by}, {"runs", c.runs},
                      {"repeats", c.repeats}, {"judged", c.judged}, {"regression", c.regression}});
  out["latest_against_history"] = latest;
  if (const ExperimentLedger l = AddUpLedgers(runs); l.runs > 0) {
    json buckets = json::array();
    for (const auto& [bucket, hours] : l.buckets) buckets.push_back({{"name", bucket}, {"hours", hours}});
    buckets.push_back({{"name", "restart"}, {"hours", l.restart_hours}});
    out["ledger"] = {{"runs", l.runs},
                     {"unit", l.gpu_hours ? "gpu_hours" : "job_hours"},
                     {"mixed_units", l.mixed_units},
                     {"total", l.total},
                     {"goodput", l.total > 0 ? json(l.Bucket("productive") / l.total) : json(nullptr)},
                     {"failed_runs", l.failed},
                     {"restarts", l.restarts},
                     {"buckets", buckets}};
  } else {
    out["ledger"] = nullptr;
  }
  return out.dump(2, ' ', false, json::error_handler_t::replace);
}

}  // namespace gputriage
