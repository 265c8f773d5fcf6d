// `gputriage compare A B`: two runs (run ids of the store, or files) side by
// side, what changed between them and which change explains each move.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/report.h"
#include "src/cli/cli_common.h"
#include "src/verdicts/compare.h"

namespace gputriage::cli {
namespace {

struct CompareArgs {
  std::string a, b;
  std::string store_path;
  std::string workload = "unspecified";
  bool workload_given = false;
  bool json = false;
  bool force = false;
  std::string fail_on = "none";
};

/// One side: a stored run, or a file / directory read as one run.
bool Load(const std::string& what, const CompareArgs& args, std::unique_ptr<RunStore>& store, Run* run,
          std::string* name) {
  if (auto id = AsRunId(what)) {
    if (!store && !(store = OpenStoreForReading(args.store_path))) return false;
    auto rec = store->LoadRun(*id);
    if (!rec.ok()) {
      PrintError(rec.status());
      return false;
    }
    *name = rec->source_path;
    run->recordings.push_back(std::move(*rec));
    return true;
  }
  ImportOptions import;
  import.on_trace_read = AnalyzeAndDropEvents;  // a directory of ranks: summaries, not every rank's events
  auto imported = ImportRun({what}, import);
  if (!imported.ok()) {
    PrintError(imported.status());
    return false;
  }
  *run = std::move(*imported);
  *name = what;
  return true;
}

int RunCompare(const CompareArgs& args) {
  std::unique_ptr<RunStore> store;
  Run a_run, b_run;
  std::string a_name, b_name;
  if (!Load(args.a, args, store, &a_run, &a_name) || !Load(args.b, args, store, &b_run, &b_name)) return kExitInput;
  const auto diagnose = [&](const Run& run) {
    DiagnoseOptions options;
    options.workload = *ParseWorkloadClass(args.workload);
    ApplyRecordedSettings(run, args.workload_given, options);
    return Diagnose(run, options);
  };
  const Diagnosis a = diagnose(a_run), b = diagnose(b_run);
  const Comparison c = CompareRuns(a_name, a_run, a, b_name, b_run, b);
  if (!c.not_comparable.empty() && !args.force) {
    PrintError(InvalidArgumentError(fmt::format("{} and {} are not comparable: {} (--force compares them anyway)",
                                                a_name, b_name, c.not_comparable)));
    return kExitUsage;
  }
  if (args.json) Print(RenderComparisonJson(c));
  else PrintText(RenderComparisonText(c));
  return args.fail_on == "regression" && !c.regressions().empty() ? kExitFindings : kExitOk;
}

}  // namespace

Subcommand AddCompareCommand(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* compare = app.add_subcommand(
      "compare", "Compare run B with run A (run ids or files): the figures, what changed, and which change explains each move");
  compare->add_option("A", a->a, "the earlier or reference run: a RUN_ID of the store, or a trace / metric log")->required();
  compare->add_option("B", a->b, "the run to compare with it")->required();
  compare->add_option("--store", a->store_path, kStoreHelp);
  compare->add_option("--workload", a->workload, "workload class both runs are judged against (default: as recorded)")
      ->check(CLI::IsMember(WorkloadChoices()))
      ->each([a](const std::string&) { a->workload_given = true; });
  compare->add_flag("--json", a->json, "print the comparison as JSON (regressions, parts, config_changes, explanations)");
  compare->add_flag("--force", a->force, "compare runs that are not comparable (two programs, no figure in common)");
  compare->add_option("--fail-on", a->fail_on, "exit 1 when B regressed on any figure (regression), for CI gates")
      ->check(CLI::IsMember({"none", "regression"}));
  return {compare, [a] { return RunCompare(*a); }};
}

}  // namespace gputriage::cli
