// `gputriage export RUN_ID`: a stored run as a file `diagnose` reads on another
// machine.
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "src/cli/cli_common.h"
#include "src/store/run_export.h"
#include "src/util/strings.h"

namespace gputriage::cli {
namespace {

int RunExport(const std::string& store_path, int64_t run, std::string out_path, bool force) {
  if (out_path.empty()) out_path = fmt::format("gputriage-run-{}.prom", run);
  std::error_code ec;
  if (!force && std::filesystem::exists(out_path, ec)) {
    std::fprintf(stderr, "gputriage: error: %s exists: pass --force to overwrite it, or -o another file\n",
                 Printable(out_path).c_str());
    return kExitUsage;
  }
  auto store = OpenStoreForReading(store_path);
  if (!store) return kExitInput;
  auto written = ExportRun(*store, run, out_path);
  if (!written.ok()) {
    PrintError(written.status());
    return kExitInput;
  }
  std::fprintf(stderr, "gputriage: run %lld: %lld samples, %lld steps and %lld settings written to %s (gputriage diagnose %s)\n",
               static_cast<long long>(run), static_cast<long long>(written->samples),
               static_cast<long long>(written->steps), static_cast<long long>(written->settings),
               Printable(out_path).c_str(), Printable(out_path).c_str());
  return kExitOk;
}

}  // namespace

Subcommand AddExportCommand(CLI::App& app) {
  struct ExportArgs {
    std::string store, out;
    std::string run;
    bool force = false;
  };
  auto a = std::make_shared<ExportArgs>();
  auto* export_cmd = app.add_subcommand("export", "Write a stored run as a file `diagnose` reads on another machine");
  export_cmd->add_option("RUN_ID", a->run, "the run (gputriage runs lists them)")->required()->check(RunIdNumber());
  export_cmd->add_option("--store", a->store, kStoreHelp);
  export_cmd->add_option("-o,--output", a->out, "output file (default gputriage-run-<id>.prom)");
  export_cmd->add_flag("--force", a->force, "overwrite the output file if it exists");
  return {export_cmd, [a] { return RunExport(a->store, std::stoll(a->run), a->out, a->force); }};
}

}  // namespace gputriage::cli
