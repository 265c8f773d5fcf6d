// What every subcommand of the gputriage CLI shares: exit codes, number
// validation, the run store's opening, printing. CLI11 is used only in src/cli/.
//
// Exit codes (README "Use"):
//   0  the diagnosis was printed (and no finding reached --fail-on)
//   1  a finding reached the --fail-on severity
//   2  usage error (bad flag or value)
//   3  an input could not be read (missing, unreadable, not a trace or metric log, corrupt),
//      or `record` could not start its command
// `record` exits with the recorded command's exit code (128 + N when signal N killed it),
// or 1 when the command succeeded and a finding reached its --fail-on.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gputriage/diagnosis.h"
#include "src/agent/agent.h"
#include "gputriage/status.h"
#include "src/net/web_config.h"
#include "src/store/run_history.h"
#include "src/store/run_store.h"

namespace gputriage::cli {

constexpr int kExitOk = 0;
constexpr int kExitFindings = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInput = 3;

/// A subcommand as main() sees it: parsed by CLI11, then run.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Subcommand AddDiagnoseCommand(CLI::App& app);
Subcommand AddCostCommand(CLI::App& app);
Subcommand AddRecordCommand(CLI::App& app);
Subcommand AddRunsCommand(CLI::App& app);
Subcommand AddExportCommand(CLI::App& app);
Subcommand AddCompareCommand(CLI::App& app);
Subcommand AddAgentCommand(CLI::App& app);
Subcommand AddFleetCommand(CLI::App& app);
Subcommand AddServeCommand(CLI::App& app);
Subcommand AddTopCommand(CLI::App& app);

/// What `agent` and `top` both sample and judge with: the source, the tick, the
/// window a verdict is about, the targets and the price. The defaults differ
/// (a node agent judges 5 minutes every 15 s; top a minute every 5 s).
struct SamplingArgs {
  std::string nvml_library;
  std::string dcgm_exporter_url;
  double interval_s = 1;
  double window_s = 300;
  double judge_every_s = 15;
  std::string workload = "unspecified";
  std::optional<double> price_per_gpu_hour;
};
/// --nvml-library | --dcgm-exporter, --interval, --window, --judge-every,
/// --workload, --price-per-gpu-hour; help shows the defaults `args` holds.
void AddSamplingOptions(CLI::App& app, SamplingArgs& args, const std::string& exporter_note = "");
/// The agent's options those flags set (the rest stay at AgentOptions' defaults).
AgentOptions ToAgentOptions(const SamplingArgs& args);

/// A number in [lo, hi] (in (lo, hi] with `above_lo`). CLI11's Range lets NaN and
/// infinities through; here they are usage errors like any out-of-range value.
CLI::Validator FiniteRange(double lo, double hi, bool above_lo = false);

/// A run id: a whole number from 1, said as such (CLI11's own message for
/// `export abc` is a 300-digit range).
CLI::Validator RunIdNumber();

/// A bare number that is not a file names a stored run (one too large for a run
/// id stays a file name, and its import says it is missing).
std::optional<int64_t> AsRunId(const std::string& argument);

// ApplyRecordedSettings and JudgeAgainstExperiment: src/store/run_history.h.

/// --fail-on: whether a finding reaches `level` ("none", "info", "low",
/// "moderate", "high", or "regression": a regression finding of any severity).
bool ReachesFailOn(const Diagnosis& diagnosis, const std::string& level);
inline const std::vector<std::string>& FailOnChoices() {
  static const std::vector<std::string> choices = {"none", "info", "low", "moderate", "high", "regression"};
  return choices;
}

/// The workload classes --workload accepts.
const std::vector<std::string>& WorkloadChoices();

/// Help text of every --store option.
inline constexpr const char* kStoreHelp = "run store: a file, or a team's postgresql://USER:PASS@HOST/DB (default: $GPUTRIAGE_STORE, else ~/.local/share/gputriage/runs.db)";

void Print(const std::string& out);
/// Human-readable text (a report, not JSON): in the terminal's encoding
/// (src/util/text_encoding.h), on standard output unless `stream` says otherwise.
void PrintText(const std::string& out, std::FILE* stream = stdout);
/// Writes a report file whole (a temporary beside it, renamed over it); "-" is standard output.
Status WriteOutputFile(const std::string& path, const std::string& content);
/// Whether WriteOutputFile could write `path` now, checked by writing: a file
/// made (and removed) beside it, where the report's temporary file goes. A
/// device, FIFO or "-" passes unchecked (opening a FIFO would wait for its reader).
Status CheckOutputWritable(const std::string& path);
/// "gputriage: error: MESSAGE" on stderr.
void PrintError(const Status& status);

/// SIGHUP in the agent and serve: reads the web-config file again and hands it
/// to `apply`. A file that no longer loads (or whose TLS cannot be set up)
/// leaves the running configuration in place; stderr says which happened.
void ReloadWebConfig(const std::string& path, const char* who,
                     const std::function<Status(std::shared_ptr<const WebConfig>)>& apply);

/// The run store at `path` ($GPUTRIAGE_STORE or the user's data directory when
/// empty), for recording: null after printing why it cannot be opened.
std::unique_ptr<RunStore> OpenStoreForRecording(const std::string& path, Status* why);
/// The same for reading commands: never creates or changes anything.
std::unique_ptr<RunStore> OpenStoreForReading(const std::string& path);

}  // namespace gputriage::cli
