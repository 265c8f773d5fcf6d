// `gputriage diagnose`: traces, metric logs and stored runs of one job, judged
// together and reported on the terminal or as JSON.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/report.h"
#include "src/cli/cli_common.h"
#include "src/util/byte_source.h"
#include "src/util/strings.h"

namespace gputriage::cli {
namespace {

struct DiagnoseArgs {
  std::vector<std::string> files;
  bool json = false;
  std::string color = "auto";
  std::string fail_on = "none";
  int kernels = 10;
  bool kernels_given = false;
  std::string format = "auto";
  std::vector<std::string> smi_columns;
  double sample_interval_s = 0;
  int gpus = 0;
  int threads = 0;
  int64_t memory_budget_mib = static_cast<int64_t>(kDefaultTraceMemoryBudget >> 20);
  std::string workload = "unspecified";
  bool workload_given = false;
  std::optional<double> price_per_gpu_hour;
  std::optional<double> monthly_spend;
  std::string store_path;
  std::string html_path;
  std::string step_range;
};

/// A progress line on stderr, rewritten in place at most twice a second, shown
/// once a read has taken a second (short imports stay silent).
ReadProgressHook ProgressLine() {
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  return [start, last](const std::string& name, int64_t read, int64_t total) mutable {
    const auto now = std::chrono::steady_clock::now();
    if (now - start < std::chrono::seconds(1) || now - last < std::chrono::milliseconds(500)) return;
    last = now;
    const std::string where = total > 0 ? fmt::format("{:.0f}% of {:.1f} GB", 100.0 * static_cast<double>(read) /
                                                                                static_cast<double>(total),
                                                      static_cast<double>(total) / 1e9)
                                        : fmt::format("{:.1f} GB", static_cast<double>(read) / 1e9);
    std::fprintf(stderr, "\r[gputriage] reading %s: %s\033[K", Printable(name.size() <= 80 ? name : "..." + name.substr(name.size() - 77)).c_str(), where.c_str());
    std::fflush(stderr);
  };
}

int RunDiagnose(const DiagnoseArgs& args) {
  ImportOptions import;
  import.format = args.format;
  import.smi_columns = args.smi_columns;
  import.sample_interval_ns = static_cast<TimeNs>(std::llround(args.sample_interval_s * 1e9));
  import.gpus = args.gpus;
  import.threads = args.threads;
  import.memory_budget_bytes = static_cast<size_t>(args.memory_budget_mib) << 20;
  import.step_range_regex = args.step_range;
  // The ranks of a run read a few at a time are analysed as they are read and
  // kept as summaries: memory holds those few ranks' events, not every rank's.
  import.on_trace_read = AnalyzeAndDropEvents;
  // A bare number that is not a file names a stored run (one too large for a
  // run id stays a file name, and its import says it is missing).
  std::vector<std::string> files;
  std::vector<int64_t> run_ids;
  for (const auto& f : args.files) {
    if (auto id = AsRunId(f)) run_ids.push_back(*id);
    else files.push_back(f);
  }
  // The same run or file twice would count its steps and findings twice.
  std::set<std::string> seen;
  for (const auto& f : args.files) {
    std::error_code ec;
    const std::string key = AsRunId(f) ? "run " + f : std::filesystem::weakly_canonical(f, ec).string();
    if (!seen.insert(ec ? f : key).second) {
      std::fprintf(stderr, "gputriage: error: %s is given twice: each file or stored run is one part of the run, once\n",
                   Printable(AsRunId(f) ? "run " + f : f).c_str());
      return kExitUsage;
    }
  }
  // Long imports (a 2 GiB trace) show progress on a terminal; never in --json
  // output or when stderr is a pipe or file.
  const bool progress = !args.json && isatty(fileno(stderr)) != 0;
  if (progress) SetReadProgressHook(ProgressLine());
  auto run = ImportRun(files, import);
  if (progress) {
    SetReadProgressHook(nullptr);
    std::fprintf(stderr, "\r\033[K");
  }
  if (!run.ok()) {
    PrintError(run.status());
    return kExitInput;
  }
  std::unique_ptr<RunStore> store;
  if (!run_ids.empty()) {
    store = OpenStoreForReading(args.store_path);
    if (!store) return kExitInput;
    for (int64_t id : run_ids) {
      auto rec = store->LoadRun(id);
      if (!rec.ok()) {
        PrintError(rec.status());
        return kExitInput;
      }
      run->recordings.push_back(std::move(*rec));
    }
  }
  DiagnoseOptions options;
  options.workload = *ParseWorkloadClass(args.workload);
  options.price_per_gpu_hour = args.price_per_gpu_hour;
  ApplyRecordedSettings(*run, args.workload_given, options);
  options.monthly_spend = args.monthly_spend;
  Diagnosis diagnosis = Diagnose(*run, options);
  for (const auto& r : diagnosis.recordings)
    if (!r.error.empty()) {
      PrintError(IoError(r.error));
      return kExitInput;
    }
  // One stored run of a named experiment is judged against the runs before it, as when it was recorded.
  if (run_ids.size() == 1 && files.empty() && store) {
    if (Status s = JudgeAgainstExperiment(*store, run_ids[0], run->recordings[0].metadata["name"], diagnosis); !s.ok()) {
      PrintError(s);
      return kExitInput;
    }
  }
  if (!args.html_path.empty()) {
    // The HTML file is written beside the terminal or JSON report, not instead of it.
    if (Status s = WriteOutputFile(args.html_path, RenderHtml(*run, diagnosis)); !s.ok()) {
      PrintError(s);
      return kExitInput;
    }
  }
  if (args.json) {
    JsonOptions json;
    if (args.kernels_given) json.max_kernels = args.kernels;  // else every kernel the analysis kept
    Print(RenderJson(*run, diagnosis, json));
    std::fputc('\n', stdout);
  } else {
    TerminalOptions terminal;
    terminal.color = args.color == "always" || (args.color == "auto" && isatty(fileno(stdout)));
    terminal.max_kernels = args.kernels;
    PrintText(RenderTerminal(*run, diagnosis, terminal));
  }
  for (const auto& r : run->recordings)
    if (r.stats.truncated)
      std::fprintf(stderr, "gputriage: warning: %s: %s\n", Printable(r.source_path).c_str(),
                   Printable(r.stats.truncation_note).c_str());
  if (ReachesFailOn(diagnosis, args.fail_on)) return kExitFindings;
  return kExitOk;
}

}  // namespace

Subcommand AddDiagnoseCommand(CLI::App& app) {
  auto d = std::make_shared<DiagnoseArgs>();
  auto* diagnose = app.add_subcommand(
      "diagnose",
      "Diagnose PyTorch profiler (Kineto) traces and GPU metric logs (nvidia-smi CSV / -q / dmon, dcgmi dmon, "
      "dcgm-exporter scrapes); all files are one run");
  diagnose->add_option("FILE", d->files,
                       "traces (.json/.json.gz), metric logs, directories holding them, - for standard input, or RUN_IDs of the run store")
      ->required();
  diagnose->add_flag("--json", d->json, "print the versioned JSON report (docs/json-schema.md)");
  diagnose->add_option("--color", d->color, "colour the terminal report: auto (on a TTY), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  diagnose->add_option("--fail-on", d->fail_on,
                       "exit 1 when a finding has at least this severity, or (regression) when a stored run of a named "
                       "experiment regressed against the runs before it")
      ->check(CLI::IsMember(FailOnChoices()));
  diagnose->add_option("--kernels", d->kernels, "rows of the kernel table (terminal: 10 by default; JSON: all 15 kept)")
      ->check(CLI::Range(0, 1000))
      ->each([d](const std::string&) { d->kernels_given = true; });
  std::vector<std::string> formats = {"auto"};
  for (const char* f : kInputFormats) formats.emplace_back(f);
  diagnose->add_option("--format", d->format, "input format; auto detects it from the content")->check(CLI::IsMember(formats));
  diagnose->add_option("--step-range", d->step_range,
                       "an Nsight Systems export: the NVTX ranges whose names match this regex are the steps "
                       "(default: ProfilerStep#N, iteration N, step N, train_step N)");
  diagnose->add_option("--smi-columns", d->smi_columns,
                       "field list of a headerless nvidia-smi CSV (the --query-gpu list, comma separated)")
      ->delimiter(',');
  diagnose->add_option("--sample-interval", d->sample_interval_s,
                       "seconds between samples of sources without timestamps (default: dmon/dcgmi 1 s, "
                       "dcgm-exporter scrapes 15 s)")
      ->check(FiniteRange(0.001, 86400.0));
  diagnose->add_option("--gpus", d->gpus,
                       "GPUs an nvidia-smi CSV without index, uuid or pci.bus_id cycles through (default: inferred "
                       "from the rows' timing and values; the report says how)")
      ->check(CLI::Range(1, 4096));
  diagnose->add_option("--threads", d->threads,
                       "threads reading each trace (default 0: one per core; -1: read on one thread)")
      ->check(CLI::Range(-1, 256));
  diagnose->add_option("--memory-budget", d->memory_budget_mib,
                       "MiB of a trace's events held in memory (default 64); past it they are sorted through scratch "
                       "files in $TMPDIR and the trace is analysed from them, in bounded memory, with the same result")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  diagnose->add_option("--workload", d->workload, "workload class the targets are judged against")
      ->check(CLI::IsMember(WorkloadChoices()))
      ->each([d](const std::string&) { d->workload_given = true; });
  diagnose->add_option("--price-per-gpu-hour", d->price_per_gpu_hour, "USD per GPU-hour (default: the dated price table)")
      ->check(FiniteRange(0.0, 1e6));
  diagnose->add_option("--monthly-spend", d->monthly_spend, "USD per month spent on these GPUs, for the monthly idle cost")
      ->check(FiniteRange(0.0, 1e12));
  diagnose->add_option("--store", d->store_path, kStoreHelp);
  diagnose->add_option("--html", d->html_path,
                       "also write a self-contained HTML report (verdicts, then charts; opens offline) to this file")
      ->type_name("FILE");
  return {diagnose, [d] { return RunDiagnose(*d); }};
}

}  // namespace gputriage::cli
