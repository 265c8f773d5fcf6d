// `gputriage record -- COMMAND`: runs a job, samples its GPUs (NVML or a
// dcgm-exporter endpoint) and its step markers, keeps the run in the store and
// prints the diagnosis on stderr (the job's own stdout stays its own).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/report.h"
#include "src/cli/cli_common.h"
#include "src/cli/record_live.h"
#include "src/cli/terminal_footer.h"
#include "src/record/recorder.h"
#include "src/trackers/job_feed.h"
#include "src/trackers/mlflow_tracker.h"
#include "src/trackers/tensorboard_writer.h"
#include "src/trackers/tracker_feed.h"
#include "src/trackers/tracker_worker.h"
#include "src/util/exit_code.h"
#include "src/util/clock.h"
#include "src/util/strings.h"
#include "src/verdicts/compare.h"

namespace gputriage::cli {
namespace {

// How long a finished run waits for its trackers (queued points, the run's end),
// at least: a --tracker-timeout above half of it raises it to two requests' worth.
constexpr int64_t kTrackerDeadlineMs = 10'000;
// Requests from the job answered per sampling tick (one per rank of a large job).
constexpr int kMaxAnswersPerTick = 256;

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
  std::string html_path;
  std::string workload = "unspecified";
  std::optional<double> price_per_gpu_hour;
  bool python = false;
  std::string memory_history;  // --memory-history: where an OOM's allocator snapshot is written
  bool live = false;
  bool no_follow = false;
  std::string fail_on = "none";
  std::string mlflow_uri;         // --mlflow, else $MLFLOW_TRACKING_URI
  bool no_mlflow = false;
  std::string tensorboard_dir;
  double tracker_interval_s = 10;
  double tracker_timeout_s = 5;  // per MLflow request, and for the calls that open the run together
};

int64_t TrackerFinishDeadlineMs(const RecordArgs& args) {
  return std::max<int64_t>(kTrackerDeadlineMs, std::llround(2 * args.tracker_timeout_s * 1000));
}

/// The trackers asked for (--mlflow or MLflow's environment, --tensorboard),
/// made before the job; none waits for a server (MLflow's run opens when there
/// is first something to log: mlflow_tracker.h). The job's environment gets
/// nothing that changes what MLflow does for it (no MLFLOW_RUN_ID: a job that
/// sets its own experiment and starts a run would be refused one); the Python
/// package tells the recorder the run the job opens
/// (python/gputriage/mlflow_bridge.py), and the figures go there. A tracker
/// that cannot start is a warning: the job runs and the run is stored all the same.
struct Trackers {
  std::vector<std::unique_ptr<Tracker>> started;
  MlflowTracker* mlflow = nullptr;
  MlflowOptions mlflow_options;  // how the recorder's MLflow server is reached
  std::shared_ptr<JobRunNotice> job_run;  // the job's own MLflow run, once its bridge says
  JobFeed* feed = nullptr;  // the job's own view (W&B logging in the Python package)
  bool user_trackers = false;  // MLflow or TensorBoard asked for
  std::vector<std::string> warnings;
};

Trackers StartTrackers(const RecordArgs& args, RecordOptions& options) {
  Trackers t;
  const TimeNs now = WallNs();
  MlflowOptions mlflow = MlflowOptionsFromEnvironment();
  if (!args.mlflow_uri.empty()) mlflow.tracking_uri = args.mlflow_uri;
  mlflow.timeout_ms = static_cast<int>(std::lround(args.tracker_timeout_s * 1000));
  // MLflow's own default is a local ./mlruns directory, which has no REST API to
  // log to: only a server URI is followed.
  const bool server = mlflow.tracking_uri.rfind("http://", 0) == 0 || mlflow.tracking_uri.rfind("https://", 0) == 0;
  if (!args.no_mlflow && !mlflow.tracking_uri.empty() && !server) {
    t.warnings.push_back("MLflow " + mlflow.tracking_uri + ": not an http(s):// tracking server; not logged to MLflow");
  } else if (!args.no_mlflow && server) {
    mlflow.run_name = args.name;
    const std::string command = Join(args.command, " ");
    mlflow.tags = {{"mlflow.source.name", command}, {"mlflow.source.type", "LOCAL"}, {"gputriage.command", command}};
    if (const char* user = std::getenv("USER")) mlflow.tags["mlflow.user"] = user;
    t.job_run = std::make_shared<JobRunNotice>();
    auto started = MlflowTracker::Deferred(mlflow, now, t.job_run);
    if (!started.ok()) {
      t.warnings.push_back("MLflow " + mlflow.tracking_uri + ": " + started.status().message() +
                           "; not logged to MLflow (the run is stored locally)");
    } else {
      t.mlflow = started->get();
      t.mlflow_options = mlflow;
      t.started.push_back(std::move(*started));
    }
  }
  if (!args.tensorboard_dir.empty()) {
    auto writer = TensorBoardWriter::Open(args.tensorboard_dir, now);
    if (!writer.ok()) t.warnings.push_back(writer.status().message() + "; not logged to TensorBoard");
    else t.started.push_back(std::move(*writer));
  }
  t.user_trackers = !t.started.empty();
  // The job's feed, always: a Python job that uses W&B logs the same windows and
  // its verdicts into its own run (python/gputriage/wandb_bridge.py).
  if (auto feed = JobFeed::Create(); feed.ok()) {
    t.feed = feed->get();
    options.environment.emplace_back(kFeedFdEnv, std::to_string((*feed)->fd()));
    options.environment.emplace_back(kFeedPathEnv,
                                     "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string((*feed)->fd()));
    t.started.push_back(std::move(*feed));
  }
  return t;
}

/// Says where MLflow's figures went. Mostly one run: the job's own (it had
/// opened it when the first window was due) or gputriage's. A job that opened
/// its run only later gets the figures and verdicts at the end in its run too,
/// where the recorder reaches its server; the runs are linked by the param
/// gputriage.mlflow.job_run_id in gputriage's.
void LogIntoTheJobsRun(Trackers& trackers, const std::map<std::string, std::string>& metadata,
                       const TrackerSummary& summary, const RecordArgs& args) {
  const std::string& ours = trackers.mlflow->run_id();
  if (ours.empty()) return;  // never opened: the worker's warning says why
  std::fprintf(stderr, "gputriage: MLflow: figures and verdicts in %srun %s (%s/#/experiments/%s/runs/%s)\n",
               trackers.mlflow->in_jobs_run() ? "the job's own " : "", ours.c_str(),
               MlflowServerOf(trackers.mlflow_options.tracking_uri).c_str(), trackers.mlflow->experiment_id().c_str(),
               ours.c_str());
  const auto job_run = metadata.find("mlflow.job_run_id");
  if (job_run == metadata.end() || job_run->second == ours) return;
  const auto job_uri = metadata.find("mlflow.job_tracking_uri");
  if (job_uri == metadata.end() || MlflowServerOf(job_uri->second) != MlflowServerOf(trackers.mlflow_options.tracking_uri)) {
    std::fprintf(stderr, "gputriage: MLflow: the job logged to its own run %s at %s, which this recorder does not "
                         "log to; the runs are linked by the param gputriage.mlflow.job_run_id\n",
                 Printable(job_run->second).c_str(),
                 Printable(job_uri == metadata.end() ? std::string("(unknown)") : job_uri->second).c_str());
    return;
  }
  MlflowOptions options = trackers.mlflow_options;
  options.run_id = job_run->second;  // attached: its status stays the job's
  auto attached = MlflowTracker::Start(options, WallNs());
  if (!attached.ok()) {
    trackers.warnings.push_back("MLflow: the job's own run " + job_run->second + ": " + attached.status().message());
    return;
  }
  (*attached)->SetParams({});  // the job's params are its own; ours are in our run
  (*attached)->LimitTo(std::chrono::steady_clock::now() + std::chrono::milliseconds(TrackerFinishDeadlineMs(args)));
  if (Status s = (*attached)->Finish(summary); !s.ok())
    trackers.warnings.push_back("MLflow: the job's own run " + job_run->second + ": " + s.message());
  else
    std::fprintf(stderr, "gputriage: MLflow: and in the job's own run %s\n", Printable(job_run->second).c_str());
}

/// A W&B run directory (wandb/run-* or wandb/offline-run-*, under $WANDB_DIR
/// or the working directory, as the SDK writes them) changed since `since`,
/// or "".
constexpr TimeNs kFileClockSlackNs = 100 * kNsPerMs;

std::string WandbRunWrittenSince(TimeNs since) {
  std::vector<std::string> roots;
  if (const char* dir = std::getenv("WANDB_DIR"); dir != nullptr && *dir != '\0') roots.push_back(std::string(dir) + "/wandb");
  roots.push_back("wandb");
  for (const auto& root : roots) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_directory(ec) || (name.rfind("run-", 0) != 0 && name.rfind("offline-run-", 0) != 0)) continue;
      struct stat st {};
      if (stat(entry.path().c_str(), &st) != 0) continue;
      const TimeNs changed = static_cast<TimeNs>(st.st_mtim.tv_sec) * kNsPerS + st.st_mtim.tv_nsec;
      // File times come from the kernel's coarse clock, up to a tick (1-10 ms)
      // behind the clock `since` was read from: a directory the job made at once
      // can carry a time just before it started.
      if (changed + kFileClockSlackNs >= since) return entry.path().string();
    }
  }
  return "";
}

/// Where an installed wheel keeps the Python package: this binary is
/// <site-packages>/gputriage/_bin/gputriage. "" when it is not one.
std::string PackageBesideThisBinary() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || exe.parent_path().filename() != "_bin") return "";
  return exe.parent_path().parent_path().parent_path().string();
}

/// `record --python`: the directory holding the gputriage Python package
/// ($GPUTRIAGE_PYTHON_PATH, else the installed wheel's this binary came in,
/// else this build's), with its zero-code sitecustomize; "" with a message on
/// stderr when there is none.
std::string FindPythonPackage() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("GPUTRIAGE_PYTHON_PATH"); env != nullptr && *env != '\0') candidates.push_back(env);
  if (std::string beside = PackageBesideThisBinary(); !beside.empty()) candidates.push_back(beside);
#ifdef GPUTRIAGE_PYTHON_BUILD_DIR
  candidates.push_back(GPUTRIAGE_PYTHON_BUILD_DIR);
#endif
  for (const auto& dir : candidates)
    if (access((dir + "/gputriage/_sitecustomize/sitecustomize.py").c_str(), R_OK) == 0) return dir;
  std::fprintf(stderr,
               "gputriage: error: --python: no gputriage Python package found (looked in: %s); set "
               "GPUTRIAGE_PYTHON_PATH to the directory that holds gputriage/ (python -c 'import gputriage, os; "
               "print(os.path.dirname(os.path.dirname(gputriage.__file__)))')\n",
               candidates.empty() ? "$GPUTRIAGE_PYTHON_PATH unset" : Join(candidates, ", ").c_str());
  return "";
}

/// --memory-history: the allocator snapshot the job wrote at an out-of-memory
/// error (after `started_ns`) joins the recording: its segments, its history as
/// a memory curve and its OOM entries, read as `diagnose` reads a snapshot (data
/// only). A file the job did not write, or cannot be read, is said and left.
void AttachMemorySnapshot(const std::string& path, TimeNs started_ns, Recording& rec) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return;  // no error ended the job on a GPU: nothing written
  const TimeNs written_ns = static_cast<TimeNs>(st.st_mtim.tv_sec) * kNsPerS + st.st_mtim.tv_nsec;
  if (written_ns + kFileClockSlackNs < started_ns) {
    rec.stats.AddIssue(IssueSeverity::kInfo, "memory_snapshot_stale",
                       path + " is older than this run: not this job's snapshot, left out");
    return;
  }
  auto snapshot = ImportRun({path});
  if (!snapshot.ok() || snapshot->recordings.empty() || snapshot->recordings[0].allocator_states.empty()) {
    rec.stats.AddIssue(IssueSeverity::kWarning, "memory_snapshot_unreadable",
                       path + ": the allocator snapshot could not be read (" +
                           (snapshot.ok() ? std::string("no allocator state in it") : snapshot.status().message()) + ")");
    return;
  }
  Recording& s = snapshot->recordings[0];
  for (auto& state : s.allocator_states) rec.allocator_states.push_back(std::move(state));
  for (auto& use : s.memory_use) rec.memory_use.push_back(std::move(use));
  for (auto& [key, value] : s.metadata)
    if (key.rfind("allocator.", 0) == 0) rec.metadata[key] = value;
  rec.stats.AddIssue(IssueSeverity::kInfo, "memory_snapshot", "the allocator snapshot written at the error (" + path +
                                                                   ") is in this report: its segments, history and OOM entries");
}

/// Runs the job, then prints the diagnosis of what was sampled to stderr (the
/// job's stdout stays its own) and exits with the job's exit code.
/// Why a job recorded with --python has no steps, and what marks them.
std::string NoStepsHint(const Recording& rec) {
  if (rec.metadata.count("version.torch") == 0)
    return "no steps: the job never imported PyTorch, and zero-code mode marks the steps of PyTorch loops (a "
           "DataLoader's batches, else the optimizer's steps); mark a loop of your own with `with gputriage.step():` "
           "around each iteration (`import gputriage`)";
  return "no steps: the job imported PyTorch but neither iterated a DataLoader nor stepped an optimizer (an "
         "inference loop?); mark each iteration with `with gputriage.step():`";
}

int RunRecord(const RecordArgs& args) {
  // The report's files are checked before the job starts: found unwritable only
  // after a long run, its report would be lost (issue 53). The job's own output
  // is on standard output: a report there would be mixed into it.
  for (const auto& [flag, path] : {std::pair{"--json", &args.json_path}, std::pair{"--html", &args.html_path}}) {
    if (path->empty()) continue;
    if (*path == "-") {
      PrintError(InvalidArgumentError(std::string(flag) + " -: the job writes its own output to standard output; "
                                      "give a file (or /dev/stderr)"));
      return kExitUsage;
    }
    if (Status s = CheckOutputWritable(*path); !s.ok()) {
      PrintError(Status(s.code(), std::string(flag) + " " + s.message() + "; nothing was run"));
      return kExitUsage;
    }
  }
  RecordOptions options;
  options.command = args.command;
  options.interval_ns = static_cast<TimeNs>(std::llround(args.interval_s * 1e9));
  options.nvml_library = args.nvml_library;
  options.follow_descendants = !args.no_follow;
  options.dcgm_exporter_url = args.dcgm_exporter_url;
  if (args.python) {
    // Zero-code markers: Python imports our sitecustomize at start-up, which
    // loads the package from beside itself and hooks DataLoader iteration and
    // optimizer steps (python/gputriage/zero_code.py). Only its directory goes
    // on the path: the job sees nothing else of where the package lives.
    const std::string package = FindPythonPackage();
    if (package.empty()) return kExitUsage;
    std::string path = package + "/gputriage/_sitecustomize";
    if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') path += std::string(":") + old;
    options.environment.emplace_back("PYTHONPATH", path);
  }
  if (!args.memory_history.empty()) {
    // The job may change directory: it gets the path from where record was started.
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(args.memory_history, ec);
    options.environment.emplace_back("GPUTRIAGE_MEMORY_HISTORY", ec ? args.memory_history : absolute.string());
  }
  // dcgm-exporter refreshes every few seconds (its -c, 30 s by default): 1 s scrapes lose nothing.
  if (!args.dcgm_exporter_url.empty() && !args.interval_given) options.interval_ns = 1'000'000'000;
  std::unique_ptr<RunStore> store;
  if (!args.no_store) {
    // A store that cannot be opened (read-only home, not a store) must not cost
    // the job: it runs, its report is printed, and the report says it was not kept.
    Status why;
    store = OpenStoreForRecording(args.store_path, &why);
    if (store) {
      options.store = store.get();
    } else {
      std::fprintf(stderr, "gputriage: warning: %s; the job runs and its report is printed, but the run is not kept\n",
                   Printable(why.message()).c_str());
      options.store_unavailable = why;
    }
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
  // The settings the run is judged with, so `diagnose RUN_ID` judges it the same way.
  options.info.metadata["workload"] = args.workload;
  if (args.price_per_gpu_hour) options.info.metadata["price_per_gpu_hour"] = fmt::format("{}", *args.price_per_gpu_hour);
  options.info.metadata["interval_s"] = fmt::format("{:g}", static_cast<double>(options.interval_ns) / 1e9);
  options.info.metadata["source"] = args.dcgm_exporter_url.empty() ? "nvml" : "dcgm-exporter " + args.dcgm_exporter_url;
  const bool tty = isatty(fileno(stderr)) != 0;
  if (args.live && !tty)
    std::fprintf(stderr, "gputriage: warning: --live draws on a terminal and stderr is not one: recording without it\n");
  const bool live = args.live && tty;
  // One status line at the bottom of the terminal, below the job's own output
  // (never on the line the job is writing): elapsed time and each GPU's latest
  // utilization and power.
  std::unique_ptr<TerminalFooter> status_line = tty && !live ? TerminalFooter::Open(STDERR_FILENO, 1) : nullptr;
  if (status_line) {
    options.on_second = [footer = status_line.get()](const Recording& rec, TimeNs elapsed) {
      std::string line = fmt::format("[gputriage] {:02d}:{:02d}", elapsed / 60'000'000'000, elapsed / 1'000'000'000 % 60);
      for (const auto& d : rec.metrics.devices) {
        // A MIG instance has no utilization in NVML: its SM activity (GPM) stands in.
        const bool util = d.Has(Metric::kGpuUtil);
        const auto tl = d.Get(util ? Metric::kGpuUtil : Metric::kSmActive).Timeline();
        const auto pw = d.Get(Metric::kPowerW).Timeline();
        line += fmt::format(" | GPU{}{} {}{}", d.index, d.mig_instance >= 0 ? fmt::format("/{}", d.mig_instance) : "",
                            tl.empty() ? std::string("-") : fmt::format("{}{:.0f}%", util ? "" : "SM ", tl.back().mean),
                            pw.empty() ? std::string() : fmt::format(" {:.0f}W", pw.back().mean));
        if (line.size() > 150) break;
      }
      if (line.size() > static_cast<size_t>(footer->width())) line.resize(static_cast<size_t>(footer->width()));
      footer->Draw({line});
    };
  }
  // Trackers: windows of the sampled figures, handed to a worker thread.
  Trackers trackers = StartTrackers(args, options);
  for (const auto& w : trackers.warnings) std::fprintf(stderr, "gputriage: warning: %s\n", Printable(w).c_str());
  std::unique_ptr<TrackerFeed> feed;
  std::unique_ptr<TrackerWorker> worker;
  if (!trackers.started.empty()) {
    feed = std::make_unique<TrackerFeed>(static_cast<TimeNs>(std::llround(args.tracker_interval_s * 1e9)),
                                         options.interval_ns);
    if (args.python) feed->ExpectSteps();  // zero-code mode marks steps: one step axis from the start
    worker = std::make_unique<TrackerWorker>(std::move(trackers.started));
    options.on_sample = [f = feed.get()](size_t device, Metric m, TimeNs t, double v) { f->AddSample(device, m, t, v); };
    options.on_steps = [f = feed.get()](const std::vector<MarkedStep>& steps) { f->AddSteps(steps); };
    if (trackers.job_run)
      options.on_job_settings = [notice = trackers.job_run](const std::map<std::string, std::string>& settings) {
        // Both, or not yet: the bridge writes the run's id before its tracking URI,
        // and a run on another server must not be looked for on this one.
        const auto run = settings.find("mlflow.job_run_id");
        const auto uri = settings.find("mlflow.job_tracking_uri");
        if (run == settings.end() || uri == settings.end()) return true;
        notice->Set({run->second, uri->second});
        return false;  // the first run the job opens is the one (its bridge says no other)
      };
    options.on_second = [f = feed.get(), w = worker.get(), status = options.on_second](const Recording& rec,
                                                                                      TimeNs elapsed) {
      if (status) status(rec, elapsed);
      f->NoteDevices(rec.metrics);
      for (auto& point : f->Poll(WallNs())) w->Push(std::move(point));
    };
  }
  // Whether a job's W&B bridge spoke to the recorder (asked for its summary).
  auto bridge_asked = std::make_shared<bool>(false);
  const TimeNs job_start_ns = WallNs();
  if (trackers.feed) {
    // The job, ending, asks for its verdicts so far (to put in its W&B summary).
    // One diagnosis a second at most, shared by every request of that second (the
    // ranks of a job end together): a job cannot make the recorder's loop judge
    // the run over and over.
    struct Answer {
      bool made = false;
      int64_t at_ms = 0;
      std::map<std::string, double> figures;
      std::vector<Finding> findings;
    };
    options.on_job_request = [&args, job_feed = trackers.feed, answer = std::make_shared<Answer>(), bridge_asked](
                                 const std::vector<std::string>& requests, const Run& run) {
      const int64_t now_ms = MonotonicMs();
      int answered = 0;
      for (const std::string& request : requests) {
        if (request.rfind("summary ", 0) != 0 || ++answered > kMaxAnswersPerTick) continue;
        *bridge_asked = true;
        if (!answer->made || now_ms - answer->at_ms >= 1000) {
          DiagnoseOptions diagnose;
          diagnose.workload = *ParseWorkloadClass(args.workload);
          diagnose.price_per_gpu_hour = args.price_per_gpu_hour;
          const Diagnosis d = Diagnose(run, diagnose);
          // The job is still running: its ledger (start-up to exit) is not known yet.
          auto figures = FiguresOf(d);
          std::erase_if(figures, [](const auto& f) { return IsLedgerFigure(f.first); });
          *answer = Answer{true, now_ms, std::move(figures), d.findings};
        }
        (void)job_feed->AppendSummary(request.substr(8), answer->figures, answer->findings);
      }
    };
  }
  std::function<void()> close_live_screen;
  if (live) close_live_screen = AddLiveScreen(*ParseWorkloadClass(args.workload), options);
  const TimeNs record_started_ns = WallNs();
  auto result = RecordCommand(options);
  // The terminal whole again before anything else is printed.
  if (close_live_screen) close_live_screen();
  status_line.reset();
  if (!result.ok()) {
    PrintError(result.status());
    if (worker && trackers.user_trackers) {
      // A run made for the job (MLflow) ends as failed, with why, rather than
      // staying "running" for ever.
      TrackerSummary failed;
      failed.exit_code = 127;
      failed.ended_ns = WallNs();
      failed.report_text = result.status().message();
      failed.report_json = "{}";
      worker->Finish(failed, TrackerFinishDeadlineMs(args));
    }
    return result.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitInput;
  }
  Run run;
  run.recordings.push_back(std::move(result->recording));
  if (!args.memory_history.empty()) AttachMemorySnapshot(args.memory_history, record_started_ns, run.recordings[0]);
  DiagnoseOptions diagnose;
  diagnose.workload = *ParseWorkloadClass(args.workload);
  diagnose.price_per_gpu_hour = args.price_per_gpu_hour;
  Diagnosis diagnosis = Diagnose(run, diagnose);
  // Why the run is not in the store, when it is not (and was meant to be).
  std::string not_kept, partly_kept;
  if (!args.no_store && !store) not_kept = "the run store could not be opened";
  else if (!args.no_store && result->run_id <= 0) not_kept = "the run could not be written to " + store->path();
  if (store && result->run_id > 0) {
    // A named run is one of an experiment: judged against the runs before it.
    if (Status s = JudgeAgainstExperiment(*store, result->run_id, args.name, diagnosis); !s.ok())
      std::fprintf(stderr, "gputriage: warning: the run was not judged against its history: %s\n",
                   Printable(s.message()).c_str());
    if (auto s = store->EndRun(result->run_id, result->ended_ns, result->exit_code, diagnosis.findings,
                               FiguresOf(diagnosis));
        !s.ok()) {
      std::fprintf(stderr, "gputriage: error: %s\n", Printable(s.message()).c_str());
      partly_kept = "run " + std::to_string(result->run_id) + "'s end could not be written to " + store->path() + " (" +
                    s.message() + "): `gputriage runs` lists it as incomplete, without its verdicts";
    } else {
      std::fprintf(stderr, "gputriage: stored as run %lld in %s\n", static_cast<long long>(result->run_id),
                   store->path().c_str());
    }
  }
  // Said at the top of the report (and in its JSON, and to the trackers): a
  // run the user expects to find with `gputriage runs` is not there.
  if (!not_kept.empty())
    diagnosis.notes.insert(diagnosis.notes.begin(),
                           "this run was NOT kept in the run store: " + not_kept +
                               " (see the store error above); its report below is all there is of it");
  if (!partly_kept.empty()) diagnosis.notes.insert(diagnosis.notes.begin(), "this run is only partly kept: " + partly_kept);
  // How the job ended, when it failed: first, before anything measured about it.
  if (result->exit_code != 0)
    diagnosis.notes.insert(diagnosis.notes.begin(),
                           EndedBySignal(result->exit_code)
                               ? "the job was " + SignalDeathWords(result->exit_code) + ": what follows covers it up to then"
                               : fmt::format("the job FAILED: it exited with code {}; what follows covers it up to then",
                                             result->exit_code));
  if (worker) {
    // The last window, then the run's end; a tracker that is down costs at most
    // the deadline, never the run (it is stored above).
    for (auto& point : feed->Poll(WallNs(), /*final=*/true)) worker->Push(std::move(point));
    TrackerSummary summary;
    summary.exit_code = result->exit_code;
    summary.ended_ns = result->ended_ns;
    summary.figures = FiguresOf(diagnosis);
    summary.findings = diagnosis.findings;
    if (trackers.user_trackers) {  // the job's feed does not take them
      summary.report_json = RenderJson(run, diagnosis);
      summary.report_text = RenderTerminal(run, diagnosis, {});
    }
    if (trackers.mlflow) {
      std::map<std::string, std::string> params = run.recordings[0].metadata;
      for (const char* incidental : {"exit_code", "command", "scrapes", "unchanged_scrapes_skipped"}) params.erase(incidental);
      // Measurements of the host are figures, not parameters of the run.
      std::erase_if(params, [](const auto& p) { return p.first.rfind("host.usage.", 0) == 0; });
      params.insert(options.info.metadata.begin(), options.info.metadata.end());
      trackers.mlflow->SetParams(std::move(params));
    }
    worker->Finish(summary, TrackerFinishDeadlineMs(args));
    if (trackers.mlflow) LogIntoTheJobsRun(trackers, run.recordings[0].metadata, summary, args);
    for (const auto& w : worker->Warnings()) trackers.warnings.push_back(w);
    for (const auto& w : worker->Warnings())
      std::fprintf(stderr, "gputriage: warning: %s\n", Printable(w).c_str());
    if (trackers.user_trackers)
      run.recordings[0].stats.AddIssue(
        IssueSeverity::kInfo, "trackers",
        fmt::format("{} points logged to the trackers, {} dropped; tracker thread CPU {:.3f} s",
                    worker->PointsLogged(), worker->PointsDropped(), static_cast<double>(worker->ThreadCpuNs()) / 1e9));
  }
  for (const auto& w : trackers.warnings) run.recordings[0].stats.AddIssue(IssueSeverity::kWarning, "tracker_unavailable", w);
  // A job that logged to W&B without the bridge: its W&B run has none of
  // gputriage's figures, which the user would otherwise look for there.
  if (!*bridge_asked)
    if (const std::string wandb_run = WandbRunWrittenSince(job_start_ns); !wandb_run.empty()) {
      const std::string note = "the job logged to W&B (" + wandb_run +
                               ") but gputriage's figures and verdicts are not in that run: the W&B bridge runs "
                               "inside the job, with `gputriage record --python` or `import gputriage` in the script";
      run.recordings[0].stats.AddIssue(IssueSeverity::kWarning, "wandb_not_bridged", note);
      std::fprintf(stderr, "gputriage: warning: %s\n", Printable(note).c_str());
    }
  // A report when there is something to judge: GPU metrics, or the job's own step
  // markers (the report then says itself why GPU metrics are missing, once).
  if (result->gpu_metrics || !run.recordings[0].marked_steps.empty()) {
    PrintText(RenderTerminal(run, diagnosis, {}), stderr);
  } else if (!result->gpu_metrics) {
    std::fprintf(stderr, "gputriage: GPU metrics unavailable: %s\n", Printable(result->gpu_note).c_str());
    // Nothing else is reported: how the job ended must still be said (issue 53:
    // a job that died before its first step got no word of it), and why it has no steps.
    if (result->exit_code != 0)
      PrintText(EndedBySignal(result->exit_code)
                    ? "gputriage: the job was " + SignalDeathWords(result->exit_code) +
                          ", with nothing recorded of it: no GPU metrics and no step\n"
                    : fmt::format("gputriage: the job FAILED: it exited with code {}, with nothing recorded of it: no "
                                  "GPU metrics and no step\n",
                                  result->exit_code),
                stderr);
    if (args.python) PrintText("gputriage: " + NoStepsHint(run.recordings[0]) + "\n", stderr);
  }
  // The run is stored already: a report that cannot be written costs only itself.
  if (!args.json_path.empty())
    if (Status s = WriteOutputFile(args.json_path, RenderJson(run, diagnosis) + "\n"); !s.ok()) PrintError(s);
  if (!args.html_path.empty())
    if (Status s = WriteOutputFile(args.html_path, RenderHtml(run, diagnosis, {.title = args.name})); !s.ok()) PrintError(s);
  // A job that failed keeps its exit code; one that succeeded fails a CI gate on --fail-on.
  if (result->exit_code == 0 && ReachesFailOn(diagnosis, args.fail_on)) return kExitFindings;
  return result->exit_code;
}

}  // namespace

Subcommand AddRecordCommand(CLI::App& app) {
  auto r = std::make_shared<RecordArgs>();
  auto* record = app.add_subcommand(
      "record", "Run a command and record its GPUs through NVML, then diagnose the recording (report on stderr)");
  record->add_option("--interval", r->interval_s, "seconds between samples (default 0.1; 1 with --dcgm-exporter)")
      ->check(FiniteRange(0.001, 3600.0))
      ->each([r](const std::string&) { r->interval_given = true; });
  auto* exporter_option = record->add_option(
      "--dcgm-exporter", r->dcgm_exporter_url,
      "record by scraping this dcgm-exporter endpoint (http://HOST:9400/metrics) instead of NVML");
  auto* nvml_option = record->add_option("--nvml-library", r->nvml_library,
                     "NVML library to load (default: $GPUTRIAGE_NVML_LIBRARY, then libnvidia-ml.so.1)");
  exporter_option->excludes(nvml_option);
  record->add_option("--json", r->json_path, "also write the JSON report to this file");
  record->add_option("--html", r->html_path, "also write the self-contained HTML report (verdicts, then charts) to this file")
      ->type_name("FILE");
  record->add_option("--workload", r->workload, "workload class the targets are judged against")
      ->check(CLI::IsMember(WorkloadChoices()));
  record->add_option("--price-per-gpu-hour", r->price_per_gpu_hour, "USD per GPU-hour")->check(FiniteRange(0.0, 1e6));
  record->add_option("--store", r->store_path, kStoreHelp);
  record->add_flag("--no-store", r->no_store, "do not keep the run");
  record->add_option("--name", r->name,
                     "the experiment this run belongs to: runs of one name form its history, and each is judged "
                     "against the runs before it (a regression finding)");
  record->add_option("--fail-on", r->fail_on,
                     "exit 1 when the job succeeded but a finding has at least this severity, or (regression) the run "
                     "regressed against its experiment's history; a failed job keeps its own exit code")
      ->check(CLI::IsMember(FailOnChoices()));
  record->add_option("--tag", r->tags, "KEY=VALUE settings kept with the run (batch size, ...); one per --tag")
      ->allow_extra_args(false);  // one value each: a greedy list would take the -- that starts the job
  record->add_flag("--python", r->python,
                   "zero-code step markers for a Python job: time DataLoader iteration and optimizer steps without "
                   "changing the script");
  record->add_option("--memory-history", r->memory_history,
                     "with --python (or gputriage.watch): PyTorch records its CUDA allocator's history from the first "
                     "batch, and an out-of-memory error that ends the job writes its snapshot to this file (read it "
                     "with `gputriage diagnose FILE`)");
  record->add_flag("--live", r->live,
                   "show the job's step time, the split of its steps into phases and the verdict so far on the terminal "
                   "as it runs (redrawn every second; needs step markers or --python)");
  record->add_flag("--no-follow", r->no_follow,
                   "stop when the command exits, even if processes it started still run (they are named, not recorded)");
  record->add_option("--mlflow", r->mlflow_uri,
                     "log to this MLflow tracking server (default: $MLFLOW_TRACKING_URI; the job's run is "
                     "$MLFLOW_RUN_ID, else one is created and handed to the job)");
  record->add_flag("--no-mlflow", r->no_mlflow, "do not log to MLflow even when $MLFLOW_TRACKING_URI is set");
  record->add_option("--tensorboard", r->tensorboard_dir,
                     "also write TensorBoard event files into this directory (the job's logdir, say)");
  record->add_option("--tracker-interval", r->tracker_interval_s,
                     "seconds per point logged to the trackers (default 10, like MLflow's system metrics)")
      ->check(FiniteRange(1.0, 86400.0));
  record->add_option("--tracker-timeout", r->tracker_timeout_s,
                     "seconds an MLflow request may take, and the most the job waits for its run to open (default 5: "
                     "a slow or hung server costs the job this, never more)")
      ->check(FiniteRange(0.1, 600.0));
  record->add_option("COMMAND", r->command, "the command to run, after --")->required();
  return {record, [r] { return RunRecord(*r); }};
}

}  // namespace gputriage::cli
