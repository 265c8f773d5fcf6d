// `gputriage runs`: the runs in the store, newest last; `--name NAME` shows one
// experiment's history (figures, verdicts, regressions, what changed);
// `--check` runs the store's integrity check.
#include <cstdio>
#include <optional>
#include <vector>
#include <string>

#include <fmt/format.h>

#include "src/cli/cli_common.h"
#include "src/report/experiment_report.h"
#include "src/report/runs_json.h"
#include "src/store/run_history.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace gputriage::cli {
namespace {

int RunRuns(const std::string& store_path, bool json, bool check, const std::optional<std::string>& name) {
  auto store = OpenStoreForReading(store_path);
  if (!store) return kExitInput;
  if (check) {
    std::vector<std::string> problems;
    if (Status s = store->CheckIntegrity(&problems); !s.ok()) {
      PrintError(s);
      return kExitInput;
    }
    if (!problems.empty()) {
      std::fprintf(stderr, "gputriage: error: %s: the run store is damaged: %s%s\n", Printable(store->path()).c_str(),
                   Printable(problems.front()).c_str(),
                   problems.size() > 1 ? fmt::format(" (and {} more problems)", problems.size() - 1).c_str() : "");
      return kExitInput;
    }
    std::fprintf(stderr, "gputriage: %s passes its integrity check\n", Printable(store->path()).c_str());
  }
  if (name) {
    auto runs = LoadExperiment(*store, *name);
    if (!runs.ok()) {
      PrintError(runs.status());
      return kExitInput;
    }
    if (json) Print(RenderExperimentJson(*name, *runs) + "\n");
    else PrintText(RenderExperimentText(*name, *runs));
    return kExitOk;
  }
  auto runs = store->ListRuns();
  if (!runs.ok()) {
    PrintError(runs.status());
    return kExitInput;
  }
  std::string out;
  if (json) {
    out = RenderRunsJson(*runs) + "\n";
  } else {
    out = fmt::format("{:>5}  {:<16}  {:<10}  {:>5}  {:>4}  {:>9}  {:<9}  {}\n", "run", "started", "status", "exit",
                      "gpus", "samples", "commit", "command");
    for (const auto& r : *runs) {
      // Local start time, and the code's commit (with * when the working tree had changes).
      const std::string started = FormatLocalMinute(r.started_ns);
      std::string commit = "-";
      if (auto c = r.metadata.find("git_commit"); c != r.metadata.end()) {
        commit = c->second.substr(0, 8);
        if (auto dirty = r.metadata.find("git_dirty"); dirty != r.metadata.end() && dirty->second == "true") commit += "*";
      }
      out += fmt::format("{:>5}  {:<16}  {:<10}  {:>5}  {:>4}  {:>9}  {:<9}  {}{}\n", r.id, started, r.status,
                         r.exit_code ? std::to_string(*r.exit_code) : "-", r.devices, r.samples, commit,
                         r.name.empty() ? "" : "[" + Printable(r.name) + "] ",
                         Printable(r.command));  // names and commands cannot steer the terminal
    }
  }
  if (json) Print(out);
  else PrintText(out);
  return kExitOk;
}

}  // namespace

Subcommand AddRunsCommand(CLI::App& app) {
  struct RunsArgs {
    std::string store;
    bool json = false;
    bool check = false;
    std::optional<std::string> name;
  };
  auto a = std::make_shared<RunsArgs>();
  auto* runs = app.add_subcommand("runs", "List the runs in the run store");
  runs->add_option("--store", a->store, kStoreHelp);
  runs->add_flag("--json", a->json, "print JSON");
  runs->add_flag("--check", a->check,
                 "run the store's integrity check (reads every page) before listing; exit 3 when it is damaged");
  runs->add_option("--name", a->name,
                   "one experiment's history: its complete runs with their figures, verdicts, regressions and what "
                   "changed from run to run");
  return {runs, [a] { return RunRuns(a->store, a->json, a->check, a->name); }};
}

}  // namespace gputriage::cli
