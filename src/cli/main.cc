// gputriage command line: a thin layer over import → analysis → verdicts → report.
// Each subcommand lives in its own file (src/cli/*_command.cc) over the
// libraries; exit codes are in cli_common.h. CLI11's exceptions stay here.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gputriage/version.h"
#include "src/cli/cli_common.h"
#include "src/util/build_info.h"

int main(int argc, char** argv) {
  using namespace gputriage::cli;
  CLI::App app{"gputriage: why your GPUs sit idle, with the evidence, the fix, the gain and the cost"};
  app.set_version_flag("--version", std::string("gputriage ") + gputriage::kGputriageVersion + "\ncommit " +
                                        gputriage::kBuildCommit + "\ntarget " + gputriage::kBuildTarget);
  app.require_subcommand(1);
  const std::vector<Subcommand> subcommands = {AddDiagnoseCommand(app), AddCostCommand(app), AddRecordCommand(app),
                                               AddRunsCommand(app), AddExportCommand(app),
                                               AddCompareCommand(app), AddAgentCommand(app),
                                               AddFleetCommand(app), AddServeCommand(app), AddTopCommand(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  for (const auto& subcommand : subcommands)
    if (subcommand.app->parsed()) return subcommand.run();
  return kExitUsage;
}
