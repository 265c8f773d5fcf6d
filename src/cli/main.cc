// gputriage command line: a thin layer over import → analysis → verdicts → report.
// CLI11 is used only here; its exceptions stay inside this file.
//
// Exit codes (README "Use"):
//   0  the diagnosis was printed (and no finding reached --fail-on)
//   1  a finding reached the --fail-on severity
//   2  usage error (bad flag or value)
//   3  an input could not be read (missing, unreadable, not a trace or metric log, corrupt),
//      or `record` could not start its command
// `record` exits with the recorded command's exit code (128 + N when signal N killed it).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <charconv>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/report.h"
#include "gputriage/version.h"
#include "src/record/recorder.h"
#include "src/util/strings.h"
#include "src/report/runs_json.h"
#include "src/store/run_export.h"
#include "src/store/run_store.h"

namespace {

/// A number in [lo, hi] (in (lo, hi] with `above_lo`). CLI11's Range lets NaN and
/// infinities through; here they are usage errors like any out-of-range value.
CLI::Validator FiniteRange(double lo, double hi, bool above_lo = false) {
  return CLI::Validator(
      [lo, hi, above_lo](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == text.c_str() || *end != '\0') return "must be a number, not '" + text + "'";
        if (!std::isfinite(v)) return "must be a finite number, not '" + text + "'";
        if (v < lo || v > hi || (above_lo && v <= lo))
          return fmt::format("must be {} {:g} and at most {:g}, not {}", above_lo ? "above" : "at least", lo, hi, text);
        return std::string();
      },
      fmt::format("NUMBER in {}{:g}, {:g}]", above_lo ? "(" : "[", lo, hi));
}


constexpr int kExitOk = 0;
constexpr int kExitFindings = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInput = 3;

struct DiagnoseArgs {
  std::vector<std::string> files;
  bool json = false;
  std::string color = "auto";
  std::string fail_on = "none";
  int kernels = 10;
  std::string format = "auto";
  std::vector<std::string> smi_columns;
  double sample_interval_s = 0;
  std::string workload = "unspecified";
  std::optional<double> price_per_gpu_hour;
  std::optional<double> monthly_spend;
  std::string store_path;
};

void Print(const std::string& out) { std::fwrite(out.data(), 1, out.size(), stdout); }

/// The run store at `path` ($GPUTRIAGE_STORE or the user's data directory when
/// empty); null after printing why it cannot be opened, `hint` appended.
std::unique_ptr<gputriage::RunStore> OpenStore(const std::string& path, const char* hint = "") {
  auto store = gputriage::RunStore::Open(path.empty() ? gputriage::RunStore::DefaultPath() : path);
  if (!store.ok()) {
    std::fprintf(stderr, "gputriage: error: %s%s\n", store.status().ToString().c_str(), hint);
    return nullptr;
  }
  return std::move(*store);
}

int RunDiagnose(const DiagnoseArgs& args) {
  gputriage::ImportOptions import;
  import.format = args.format;
  import.smi_columns = args.smi_columns;
  import.sample_interval_ns = static_cast<gputriage::TimeNs>(std::llround(args.sample_interval_s * 1e9));
  // A bare number that is not a file names a stored run (one too large for a
  // run id stays a file name, and its import says it is missing).
  std::vector<std::string> files;
  std::vector<int64_t> run_ids;
  for (const auto& f : args.files) {
    std::error_code ec;
    int64_t id = 0;
    const auto [end, err] = std::from_chars(f.data(), f.data() + f.size(), id);
    if (!f.empty() && err == std::errc() && end == f.data() + f.size() && id >= 0 && !std::filesystem::exists(f, ec))
      run_ids.push_back(id);
    else
      files.push_back(f);
  }
  auto run = gputriage::ImportRun(files, import);
  if (!run.ok()) {
    std::fprintf(stderr, "gputriage: error: %s\n", run.status().ToString().c_str());
    return kExitInput;
  }
  if (!run_ids.empty()) {
    auto store = OpenStore(args.store_path);
    if (!store) return kExitInput;
    for (int64_t id : run_ids) {
      auto rec = store->LoadRun(id);
      if (!rec.ok()) {
        std::fprintf(stderr, "gputriage: error: %s\n", rec.status().ToString().c_str());
        return kExitInput;
      }
      run->recordings.push_back(std::move(*rec));
    }
  }
  gputriage::DiagnoseOptions options;
  options.workload = *gputriage::ParseWorkloadClass(args.workload);
  options.price_per_gpu_hour = args.price_per_gpu_hour;
  options.monthly_spend = args.monthly_spend;
  const gputriage::Diagnosis diagnosis = gputriage::Diagnose(*run, options);
  if (args.json) {
    Print(gputriage::RenderJson(*run, diagnosis));
    std::fputc('\n', stdout);
  } else {
    gputriage::TerminalOptions terminal;
    terminal.color = args.color == "always" || (args.color == "auto" && isatty(fileno(stdout)));
    terminal.max_kernels = args.kernels;
    Print(gputriage::RenderTerminal(*run, diagnosis, terminal));
  }
  for (const auto& r : run->recordings)
    if (r.stats.truncated)
      std::fprintf(stderr, "gputriage: warning: %s: %s\n", r.source_path.c_str(), r.stats.truncation_note.c_str());
  if (args.fail_on != "none") {
    const gputriage::Severity threshold = args.fail_on == "high"       ? gputriage::Severity::kHigh
                                          : args.fail_on == "moderate" ? gputriage::Severity::kModerate
                                          : args.fail_on == "low"      ? gputriage::Severity::kLow
                                                                       : gputriage::Severity::kInfo;
    for (const auto& f : diagnosis.findings)
      if (f.severity >= threshold) return kExitFindings;
  }
  return kExitOk;
}

struct CostArgs {
  double monthly_spend = 0;
  double utilization = 0;
  std::optional<double> sm_active;
  std::vector<double> targets;
  bool json = false;
};

/// Fleet arithmetic without a log: what idle capacity costs at a utilization.
int RunCost(const CostArgs& args) {
  const double idle = gputriage::IdleMonthlyCost(args.monthly_spend, args.utilization);
  std::vector<double> targets = args.targets;
  if (targets.empty()) targets = {50, 75, 90};
  std::vector<gputriage::WhatIf> rows;
  for (double t : targets)
    if (t > args.utilization) rows.push_back(gputriage::MakeWhatIf(args.utilization, t, args.monthly_spend));
  if (args.json) {
    std::string out = fmt::format("{{\"monthly_spend_usd\": {}, \"utilization_percent\": {}, \"idle_cost_usd_per_month\": {}",
                                  args.monthly_spend, args.utilization, idle);
    if (args.sm_active)
      out += fmt::format(", \"sm_active_percent\": {}, \"idle_cost_by_sm_usd_per_month\": {}", *args.sm_active,
                         gputriage::IdleMonthlyCost(args.monthly_spend, *args.sm_active));
    out += ", \"what_if\": [";
    for (size_t i = 0; i < rows.size(); ++i)
      out += fmt::format("{}{{\"from_percent\": {}, \"to_percent\": {}, \"more_compute_percent\": {}, \"spend_saved_percent\": {}, "
                         "\"monthly_saving_usd\": {}}}",
                         i ? ", " : "", rows[i].from_percent, rows[i].to_percent, rows[i].more_compute_percent,
                         rows[i].spend_saved_percent, rows[i].monthly_saving_usd.value_or(0));
    out += "]}\n";
    Print(out);
    return kExitOk;
  }
  Print(fmt::format("{}/month at {:g}% average utilization: {}/month of idle capacity\n",
                    gputriage::FormatUsd(args.monthly_spend), args.utilization, gputriage::FormatUsd(idle)));
  if (args.sm_active)
    Print(fmt::format("by SM activity ({:g}%): {}/month of idle capacity\n", *args.sm_active,
                      gputriage::FormatUsd(gputriage::IdleMonthlyCost(args.monthly_spend, *args.sm_active))));
  for (const auto& w : rows) Print("  " + gputriage::WhatIfLine(w) + "\n");
  return kExitOk;
}

struct RecordArgs {
  std::vector<std::string> command;
  std::string store_path;
  bool no_store = false;
  std::string name;
  std::vector<std::string> tags;
  double interval_s = 0.1;
  bool interval_given = false;
  std::string nvml_library;
  std::string dcgm_exporter_url;
  std::string json_path;
  std::string workload = "unspecified";
  std::optional<double> price_per_gpu_hour;
  bool python = false;
};

/// `record --python`: the directory holding the gputriage Python package
/// ($GPUTRIAGE_PYTHON_PATH, else this build's), with its zero-code
/// sitecustomize; "" with a message on stderr when there is none.
std::string FindPythonPackage() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("GPUTRIAGE_PYTHON_PATH"); env != nullptr && *env != '\0') candidates.push_back(env);
#ifdef GPUTRIAGE_PYTHON_BUILD_DIR
  candidates.push_back(GPUTRIAGE_PYTHON_BUILD_DIR);
#endif
  for (const auto& dir : candidates)
    if (access((dir + "/gputriage/_sitecustomize/sitecustomize.py").c_str(), R_OK) == 0) return dir;
  std::fprintf(stderr,
               "gputriage: error: --python: no gputriage Python package found (looked in: %s); set "
               "GPUTRIAGE_PYTHON_PATH to the directory that holds gputriage/ (python -c 'import gputriage, os; "
               "print(os.path.dirname(os.path.dirname(gputriage.__file__)))')\n",
               candidates.empty() ? "$GPUTRIAGE_PYTHON_PATH unset" : gputriage::Join(candidates, ", ").c_str());
  return "";
}

/// Runs the job, then prints the diagnosis of what was sampled to stderr (the
/// job's stdout stays its own) and exits with the job's exit code.
int RunRecord(const RecordArgs& args) {
  gputriage::RecordOptions options;
  options.command = args.command;
  options.interval_ns = static_cast<gputriage::TimeNs>(std::llround(args.interval_s * 1e9));
  options.nvml_library = args.nvml_library;
  options.dcgm_exporter_url = args.dcgm_exporter_url;
  if (args.python) {
    // Zero-code markers: Python imports our sitecustomize at start-up, which
    // hooks DataLoader iteration and optimizer steps (python/gputriage/zero_code.py).
    const std::string package = FindPythonPackage();
    if (package.empty()) return kExitUsage;
    std::string path = package + "/gputriage/_sitecustomize:" + package;
    if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') path += std::string(":") + old;
    options.environment.emplace_back("PYTHONPATH", path);
  }
  // dcgm-exporter refreshes every few seconds (its -c, 30 s by default): 1 s scrapes lose nothing.
  if (!args.dcgm_exporter_url.empty() && !args.interval_given) options.interval_ns = 1'000'000'000;
  std::unique_ptr<gputriage::RunStore> store;
  if (!args.no_store) {
    store = OpenStore(args.store_path, " (use --no-store to record without one)");
    if (!store) return kExitInput;
    options.store = store.get();
  }
  options.info.name = args.name;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) options.info.host = host;
  for (const auto& tag : args.tags) {
    const size_t eq = tag.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "gputriage: error: --tag %s: expected KEY=VALUE\n", tag.c_str());
      return kExitUsage;
    }
    // User tags live in their own namespace: a tag named like recorded context
    // (cwd, interval_s, ...) neither overwrites it nor is dropped.
    options.info.metadata["tag." + tag.substr(0, eq)] = tag.substr(eq + 1);
  }
  options.info.metadata["interval_s"] = fmt::format("{:g}", static_cast<double>(options.interval_ns) / 1e9);
  options.info.metadata["source"] = args.dcgm_exporter_url.empty() ? "nvml" : "dcgm-exporter " + args.dcgm_exporter_url;
  const bool tty = isatty(fileno(stderr)) != 0;
  if (tty) {
    // One status line, rewritten in place: elapsed time and each GPU's latest utilization and power.
    options.on_second = [](const gputriage::Recording& rec, gputriage::TimeNs elapsed) {
      std::string line = fmt::format("\r[gputriage] {:02d}:{:02d}", elapsed / 60'000'000'000, elapsed / 1'000'000'000 % 60);
      for (const auto& d : rec.metrics.devices) {
        // A MIG instance has no utilization in NVML: its SM activity (GPM) stands in.
        const bool util = d.Has(gputriage::Metric::kGpuUtil);
        const auto tl = d.Get(util ? gputriage::Metric::kGpuUtil : gputriage::Metric::kSmActive).Timeline();
        const auto pw = d.Get(gputriage::Metric::kPowerW).Timeline();
        line += fmt::format(" | GPU{}{} {}{}", d.index, d.mig_instance >= 0 ? fmt::format("/{}", d.mig_instance) : "",
                            tl.empty() ? std::string("-") : fmt::format("{}{:.0f}%", util ? "" : "SM ", tl.back().mean),
                            pw.empty() ? std::string() : fmt::format(" {:.0f}W", pw.back().mean));
        if (line.size() > 150) break;
      }
      std::fprintf(stderr, "%s\033[K", line.c_str());
      std::fflush(stderr);
    };
  }
  auto result = gputriage::RecordCommand(options);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!result.ok()) {
    std::fprintf(stderr, "gputriage: error: %s\n", result.status().ToString().c_str());
    return result.status().code() == gputriage::StatusCode::kInvalidArgument ? kExitUsage : kExitInput;
  }
  if (!result->gpu_metrics)
    std::fprintf(stderr, "gputriage: GPU metrics unavailable: %s\n", result->gpu_note.c_str());
  gputriage::Run run;
  run.recordings.push_back(std::move(result->recording));
  gputriage::DiagnoseOptions diagnose;
  diagnose.workload = *gputriage::ParseWorkloadClass(args.workload);
  diagnose.price_per_gpu_hour = args.price_per_gpu_hour;
  const gputriage::Diagnosis diagnosis = gputriage::Diagnose(run, diagnose);
  if (store && result->run_id > 0) {
    if (auto s = store->EndRun(result->run_id, result->ended_ns, result->exit_code, diagnosis.findings); !s.ok())
      std::fprintf(stderr, "gputriage: error: %s\n", s.ToString().c_str());
    else
      std::fprintf(stderr, "gputriage: stored as run %lld in %s\n", static_cast<long long>(result->run_id),
                   store->path().c_str());
  }
  // A report when there is something to judge: GPU metrics, or the job's own step markers.
  if (result->gpu_metrics || !run.recordings[0].marked_steps.empty()) {
    const std::string text = gputriage::RenderTerminal(run, diagnosis, {});
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  if (!args.json_path.empty()) {
    FILE* f = std::fopen(args.json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "gputriage: error: cannot write %s\n", args.json_path.c_str());
    } else {
      const std::string json = gputriage::RenderJson(run, diagnosis);
      std::fwrite(json.data(), 1, json.size(), f);
      std::fputc('\n', f);
      std::fclose(f);
    }
  }
  return result->exit_code;
}

int RunExport(const std::string& store_path, int64_t run, std::string out_path, bool force) {
  if (out_path.empty()) out_path = fmt::format("gputriage-run-{}.prom", run);
  std::error_code ec;
  if (!force && std::filesystem::exists(out_path, ec)) {
    std::fprintf(stderr, "gputriage: error: %s exists: pass --force to overwrite it, or -o another file\n",
                 gputriage::Printable(out_path).c_str());
    return kExitUsage;
  }
  auto store = OpenStore(store_path);
  if (!store) return kExitInput;
  auto written = gputriage::ExportRun(*store, run, out_path);
  if (!written.ok()) {
    std::fprintf(stderr, "gputriage: error: %s\n", written.status().ToString().c_str());
    return kExitInput;
  }
  std::fprintf(stderr, "gputriage: run %lld: %lld samples written to %s (gputriage diagnose %s)\n",
               static_cast<long long>(run), static_cast<long long>(*written), out_path.c_str(), out_path.c_str());
  return kExitOk;
}

int RunRuns(const std::string& store_path, bool json) {
  auto store = OpenStore(store_path);
  if (!store) return kExitInput;
  auto runs = store->ListRuns();
  if (!runs.ok()) {
    std::fprintf(stderr, "gputriage: error: %s\n", runs.status().ToString().c_str());
    return kExitInput;
  }
  std::string out;
  if (json) {
    out = gputriage::RenderRunsJson(*runs) + "\n";
  } else {
    out = fmt::format("{:>5}  {:<16}  {:<10}  {:>5}  {:>4}  {:>9}  {:<9}  {}\n", "run", "started", "status", "exit",
                      "gpus", "samples", "commit", "command");
    for (const auto& r : *runs) {
      // Local start time, and the code's commit (with * when the working tree had changes).
      char started[32] = "-";
      const time_t seconds = static_cast<time_t>(r.started_ns / 1'000'000'000);
      struct tm local {};
      if (r.started_ns > 0 && localtime_r(&seconds, &local) != nullptr)
        std::strftime(started, sizeof started, "%Y-%m-%d %H:%M", &local);
      std::string commit = "-";
      if (auto c = r.metadata.find("git_commit"); c != r.metadata.end()) {
        commit = c->second.substr(0, 8);
        if (auto dirty = r.metadata.find("git_dirty"); dirty != r.metadata.end() && dirty->second == "true") commit += "*";
      }
      out += fmt::format("{:>5}  {:<16}  {:<10}  {:>5}  {:>4}  {:>9}  {:<9}  {}{}\n", r.id, started, r.status,
                         r.exit_code ? std::to_string(*r.exit_code) : "-", r.devices, r.samples, commit,
                         r.name.empty() ? "" : "[" + gputriage::Printable(r.name) + "] ",
                         gputriage::Printable(r.command));  // names and commands cannot steer the terminal
    }
  }
  Print(out);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gputriage: why your GPUs sit idle, with the evidence, the fix, the gain and the cost"};
  app.set_version_flag("--version", std::string("gputriage ") + gputriage::kGputriageVersion);
  app.require_subcommand(1);

  auto* diagnose = app.add_subcommand(
      "diagnose",
      "Diagnose PyTorch profiler (Kineto) traces and GPU metric logs (nvidia-smi CSV / -q / dmon, dcgmi dmon, "
      "dcgm-exporter scrapes); all files are one run");
  DiagnoseArgs d;
  diagnose->add_option("FILE", d.files,
                       "traces (.json/.json.gz), metric logs, a directory of dcgm-exporter scrapes, or RUN_IDs of the run store")
      ->required();
  diagnose->add_flag("--json", d.json, "print the versioned JSON report (docs/json-schema.md)");
  diagnose->add_option("--color", d.color, "colour the terminal report: auto (on a TTY), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  diagnose->add_option("--fail-on", d.fail_on, "exit 1 when a finding has at least this severity")
      ->check(CLI::IsMember({"none", "info", "low", "moderate", "high"}));
  diagnose->add_option("--kernels", d.kernels, "rows of the kernel table")->check(CLI::Range(0, 1000));
  std::vector<std::string> formats = {"auto"};
  for (const char* f : gputriage::kInputFormats) formats.emplace_back(f);
  diagnose->add_option("--format", d.format, "input format; auto detects it from the content")->check(CLI::IsMember(formats));
  diagnose->add_option("--smi-columns", d.smi_columns,
                       "field list of a headerless nvidia-smi CSV (the --query-gpu list, comma separated)")
      ->delimiter(',');
  diagnose->add_option("--sample-interval", d.sample_interval_s,
                       "seconds between samples of sources without timestamps (default: dmon/dcgmi 1 s, "
                       "dcgm-exporter scrapes 15 s)")
      ->check(FiniteRange(0.001, 86400.0));
  diagnose->add_option("--workload", d.workload, "workload class the targets are judged against")
      ->check(CLI::IsMember({"unspecified", "dense-transformer", "cnn", "moe", "rl", "multimodal", "inference"}));
  diagnose->add_option("--price-per-gpu-hour", d.price_per_gpu_hour, "USD per GPU-hour (default: the dated price table)")
      ->check(FiniteRange(0.0, 1e6));
  diagnose->add_option("--monthly-spend", d.monthly_spend, "USD per month spent on these GPUs, for the monthly idle cost")
      ->check(FiniteRange(0.0, 1e12));

  auto* cost = app.add_subcommand("cost", "Idle capacity and what-if table for a fleet's spend and average utilization");
  CostArgs c;
  cost->add_option("--monthly-spend", c.monthly_spend, "USD per month spent on GPUs")->required()->check(FiniteRange(0.0, 1e12));
  cost->add_option("--utilization", c.utilization, "average GPU utilization, percent (above 0: at 0 % every dollar is idle and no what-if applies)")
      ->required()
      ->check(FiniteRange(0.0, 100.0, true));
  cost->add_option("--sm-active", c.sm_active, "average SM activity, percent (DCGM), for the stricter idle figure")
      ->check(FiniteRange(0.0, 100.0));
  cost->add_option("--target", c.targets, "utilization targets for the what-if table (default 50 75 90)")
      ->check(FiniteRange(0.0, 100.0));
  cost->add_flag("--json", c.json, "print JSON");

  auto* runs = app.add_subcommand("runs", "List the runs in the run store");
  std::string runs_store;
  bool runs_json = false;
  runs->add_option("--store", runs_store, "run store (default: $GPUTRIAGE_STORE, else ~/.local/share/gputriage/runs.db)");
  runs->add_flag("--json", runs_json, "print JSON");
  diagnose->add_option("--store", d.store_path, "run store for RUN_ID arguments");

  auto* export_cmd = app.add_subcommand("export", "Write a stored run as a file `diagnose` reads on another machine");
  std::string export_store, export_out;
  int64_t export_run = 0;
  export_cmd->add_option("RUN_ID", export_run, "the run (gputriage runs lists them)")->required()->check(CLI::PositiveNumber);
  export_cmd->add_option("--store", export_store, "run store (default: $GPUTRIAGE_STORE, else ~/.local/share/gputriage/runs.db)");
  export_cmd->add_option("-o,--output", export_out, "output file (default gputriage-run-<id>.prom)");
  bool export_force = false;
  export_cmd->add_flag("--force", export_force, "overwrite the output file if it exists");

  auto* record = app.add_subcommand(
      "record", "Run a command and record its GPUs through NVML, then diagnose the recording (report on stderr)");
  RecordArgs r;
  record->add_option("--interval", r.interval_s, "seconds between samples (default 0.1; 1 with --dcgm-exporter)")
      ->check(FiniteRange(0.001, 3600.0))
      ->each([&r](const std::string&) { r.interval_given = true; });
  auto* exporter_option = record->add_option(
      "--dcgm-exporter", r.dcgm_exporter_url,
      "record by scraping this dcgm-exporter endpoint (http://HOST:9400/metrics) instead of NVML");
  auto* nvml_option = record->add_option("--nvml-library", r.nvml_library,
                     "NVML library to load (default: $GPUTRIAGE_NVML_LIBRARY, then libnvidia-ml.so.1)");
  exporter_option->excludes(nvml_option);
  record->add_option("--json", r.json_path, "also write the JSON report to this file");
  record->add_option("--workload", r.workload, "workload class the targets are judged against")
      ->check(CLI::IsMember({"unspecified", "dense-transformer", "cnn", "moe", "rl", "multimodal", "inference"}));
  record->add_option("--price-per-gpu-hour", r.price_per_gpu_hour, "USD per GPU-hour")->check(FiniteRange(0.0, 1e6));
  record->add_option("--store", r.store_path, "run store (default: $GPUTRIAGE_STORE, else ~/.local/share/gputriage/runs.db)");
  record->add_flag("--no-store", r.no_store, "do not keep the run");
  record->add_option("--name", r.name, "a name for the run");
  record->add_option("--tag", r.tags, "KEY=VALUE settings kept with the run (batch size, ...); one per --tag")
      ->allow_extra_args(false);  // one value each: a greedy list would take the -- that starts the job
  record->add_flag("--python", r.python,
                   "zero-code step markers for a Python job: time DataLoader iteration and optimizer steps without "
                   "changing the script");
  record->add_option("COMMAND", r.command, "the command to run, after --")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (diagnose->parsed()) return RunDiagnose(d);
  if (cost->parsed()) return RunCost(c);
  if (record->parsed()) return RunRecord(r);
  if (runs->parsed()) return RunRuns(runs_store, runs_json);
  if (export_cmd->parsed()) return RunExport(export_store, export_run, export_out, export_force);
  return kExitUsage;
}
