#include "src/record/recorder.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "src/markers/marked_steps.h"
#include "src/record/dcgm_exporter_source.h"
#include "src/record/host_usage.h"
#include "src/record/process_rank.h"
#include "src/record/process_tree.h"
#include "src/sources/nvml/nvml_library.h"
#include "src/sources/nvml/nvml_sampler.h"
#include "src/record/job_config.h"
#include "src/util/clock.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

volatile sig_atomic_t g_forward_signal = 0;
// How often a sleeping recorder looks whether the job has exited.
constexpr TimeNs kJobExitCheckNs = 20 * kNsPerMs;
constexpr TimeNs kHostUsageIntervalNs = 500 * kNsPerMs;  // the job's CPU and memory, twice a second

void RememberSignal(int sig) { g_forward_signal = sig; }

/// Restores the recorder's signal dispositions when recording ends.
class SignalScope {
 public:
  SignalScope() {
    struct sigaction forward {};
    forward.sa_handler = RememberSignal;
    sigemptyset(&forward.sa_mask);
    sigaction(SIGTERM, &forward, &old_term_);
    sigaction(SIGHUP, &forward, &old_hup_);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGINT, &ignore, &old_int_);
    sigaction(SIGQUIT, &ignore, &old_quit_);
  }
  ~SignalScope() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGQUIT, &old_quit_, nullptr);
  }

 private:
  struct sigaction old_term_ {}, old_hup_ {}, old_int_ {}, old_quit_ {};
};

/// The first line a shell command prints ("" when it fails or prints nothing).
std::string FirstLineOf(const char* command) {
  FILE* pipe = popen(command, "r");
  if (pipe == nullptr) return "";
  char buf[256] = {};
  const bool got = std::fgets(buf, sizeof buf, pipe) != nullptr;
  const int status = pclose(pipe);
  if (!got || status != 0) return "";
  std::string line(buf);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

}  // namespace

std::map<std::string, std::string> CollectRunContext() {
  std::map<std::string, std::string> context;
  // The code that ran: the commit of the working directory's repository, and
  // whether tracked files differed from it (a run of uncommitted code).
  if (std::string commit = FirstLineOf("git rev-parse HEAD 2>/dev/null"); !commit.empty()) {
    context["git_commit"] = commit;
    context["git_dirty"] =
        FirstLineOf("git status --porcelain --untracked-files=no 2>/dev/null | head -n 1").empty() ? "false" : "true";
  }
  if (char cwd[4096]; getcwd(cwd, sizeof cwd) != nullptr) context["cwd"] = cwd;
  if (const char* user = std::getenv("USER"); user && *user) context["user"] = user;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr)
    context["cuda_visible_devices"] = visible;
  return context;
}

/// This process's environment with `vars` set (replacing what they name).
std::vector<std::string> JobEnvironment(const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    if (std::none_of(vars.begin(), vars.end(), [&](const auto& v) { return v.first == name; })) env.emplace_back(entry);
  }
  for (const auto& [key, value] : vars) env.push_back(key + "=" + value);
  return env;
}

/// What reading the ring and pairing the markers could not use, as issues.
void AddMarkerIssues(const MarkerRing::DrainStats& ring, const MarkedSteps& steps, ImportStats& stats) {
  if (ring.header_damaged)
    stats.AddIssue(IssueSeverity::kError, "marker_ring_damaged",
                   "the step-marker ring's header was overwritten (by the job?): markers after that were not trusted");
  if (ring.corrupt > 0)
    stats.AddIssue(IssueSeverity::kError, "markers_corrupt",
                   std::to_string(ring.corrupt) + " step-marker records failed their checks (garbage in the ring) and were ignored");
  if (ring.lost > 0)
    stats.AddIssue(IssueSeverity::kWarning, "markers_lost",
                   std::to_string(ring.lost) + " step markers were overwritten before the recorder read them");
  if (ring.abandoned > 0)
    stats.AddIssue(IssueSeverity::kWarning, "markers_abandoned",
                   std::to_string(ring.abandoned) + " step markers were begun but never finished (a process died mid-marker)");
  if (steps.unpaired_steps > 0 || steps.unpaired_phases > 0)
    stats.AddIssue(IssueSeverity::kInfo, "markers_unpaired",
                   std::to_string(steps.unpaired_steps) + " step and " + std::to_string(steps.unpaired_phases) +
                       " phase begin/end markers had no partner (cut short by the end of the job?)");
  if (steps.unassigned_phases > 0)
    stats.AddIssue(IssueSeverity::kInfo, "phases_unassigned",
                   std::to_string(steps.unassigned_phases) +
                       " marked phases had no step of their process to charge (before its first step, after its last, or "
                       "ending over 5 s after their step)");
  if (steps.run_phases_dropped > 0)
    stats.AddIssue(IssueSeverity::kWarning, "run_phases_dropped",
                   std::to_string(steps.run_phases_dropped) + " job phases (checkpoint, eval, ...) past the first " +
                       std::to_string(StepBuilder::kMaxRunPhases) +
                       " were not kept: the ledger counts their time as gaps between steps");
  if (steps.unmatched_device_times > 0)
    stats.AddIssue(IssueSeverity::kInfo, "device_times_unmatched",
                   std::to_string(steps.unmatched_device_times) +
                       " step or phase device times matched no recorded step of their process (or were not positive)");
}

StatusOr<RecordResult> RecordCommand(const RecordOptions& options) {
  if (options.command.empty()) return InvalidArgumentError("record: no command given (usage: gputriage record -- CMD ARGS...)");
  if (options.interval_ns < kNsPerMs) return InvalidArgumentError("record: the sampling interval must be at least 1 ms");
  RecordResult result;
  const std::string command = Join(options.command, " ");
  result.recording.source_path = "record: " + options.command.front();
  result.recording.format = "nvml";

  // The GPU source first, so a missing driver is reported before the job's own output.
  std::unique_ptr<NvmlLibrary> nvml;
  std::unique_ptr<NvmlSampler> sampler;
  std::unique_ptr<DcgmExporterSource> scraper;
  if (!options.dcgm_exporter_url.empty()) {
    ASSIGN_OR_RETURN(scraper, DcgmExporterSource::Open(options.dcgm_exporter_url, WallNs(), result.recording));
    result.gpu_metrics = true;
  } else if (auto lib = NvmlLibrary::Load(options.nvml_library); lib.ok()) {
    nvml = std::move(*lib);
    if (auto s = NvmlSampler::Open(*nvml, result.recording); s.ok()) {
      sampler = std::make_unique<NvmlSampler>(std::move(*s));
      result.gpu_metrics = sampler->devices() > 0;
      if (!result.gpu_metrics) result.gpu_note = "NVML reports no GPUs on this machine";
    } else {
      result.gpu_note = s.status().message();
    }
  } else {
    result.gpu_note = lib.status().message();
  }
  if (scraper) {
    result.recording.format = "dcgm-exporter";
  } else if (!result.gpu_metrics) {
    // A laptop, a CPU job: the job's step markers are the whole recording.
    result.recording.format = "step-markers";
    result.recording.stats.AddIssue(IssueSeverity::kInfo, "gpu_metrics_unavailable",
                                    "GPU metrics unavailable (" + result.gpu_note +
                                        "): the diagnosis rests on the job's step markers alone");
  }

  // The step-marker ring, inherited by the job through $GPUTRIAGE_MARKERS_FD.
  std::unique_ptr<MarkerRing> ring;
  if (auto created = MarkerRing::Create(); created.ok()) ring = std::move(*created);
  else result.recording.stats.AddIssue(IssueSeverity::kWarning, "markers_unavailable", created.status().message());
  // The job's environment, built before fork (the child only execs): the ring
  // by descriptor and by /proc path, and the caller's variables.
  std::vector<std::pair<std::string, std::string>> job_vars = options.environment;
  if (ring) {
    job_vars.emplace_back(kMarkersFdEnv, std::to_string(ring->fd()));
    job_vars.emplace_back(kMarkersPathEnv, "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(ring->fd()));
  }
  // What the job reports about its configuration (python/gputriage/job_config.py), the same way.
  std::unique_ptr<JobConfigChannel> config;
  if (auto created = JobConfigChannel::Create(); created.ok()) config = std::move(*created);
  else result.recording.stats.AddIssue(IssueSeverity::kWarning, "job_config_unavailable", created.status().message());
  if (config) {
    job_vars.emplace_back(kConfigFdEnv, std::to_string(config->fd()));
    job_vars.emplace_back(kConfigPathEnv, "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(config->fd()));
  }
  std::vector<std::string> job_env = JobEnvironment(job_vars);
  std::vector<char*> envp;
  for (auto& e : job_env) envp.push_back(e.data());
  envp.push_back(nullptr);

  // Read before the job starts, so sampling starts with it.
  const std::map<std::string, std::string> context =
      options.store ? CollectRunContext() : std::map<std::string, std::string>{};

  // The run is in the store before the job starts: a recorder killed at any
  // moment leaves a listed (incomplete) run for every job that ran.
  result.started_ns = WallNs();
  // A failed store write costs the run its stored copy, not the recording: say so and go on.
  auto stored = [&result](const Status& s) {
    if (!s.ok()) result.recording.stats.AddIssue(IssueSeverity::kError, "store_write_failed", s.message());
  };
  if (!options.store_unavailable.ok())
    result.recording.stats.AddIssue(IssueSeverity::kError, "store_unavailable",
                                    options.store_unavailable.message() + " (the run was not kept)");
  if (options.store) {
    RunInfo info = options.info;
    info.started_ns = result.started_ns;
    for (auto& [key, value] : context) info.metadata.try_emplace(key, value);  // --tag wins
    if (info.command.empty()) info.command = command;
    auto id = options.store->BeginRun(info);
    if (id.ok()) {
      result.run_id = *id;
      stored(options.store->PutDevices(result.run_id, result.recording.metrics));
      // Every value the recording takes from now on also goes to the store (batched there).
      result.recording.metrics.observer = [store = options.store, run = result.run_id, tap = options.on_sample](
                                              size_t device, Metric m, TimeNs t, double v) {
        store->AddSample(run, device, m, t, v);
        if (tap) tap(device, m, t, v);
      };
    } else {
      result.recording.stats.AddIssue(IssueSeverity::kError, "store_unavailable", id.status().message());
    }
  }
  if (options.on_sample && !result.recording.metrics.observer) result.recording.metrics.observer = options.on_sample;
  // The exec'd job must not inherit the recorder's signal dispositions: set them after fork in the parent only.
  std::vector<char*> argv;
  for (const auto& a : options.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int exec_errno_pipe[2];
  if (pipe2(exec_errno_pipe, O_CLOEXEC) != 0) return IoError(std::string("record: pipe: ") + std::strerror(errno));
  g_forward_signal = 0;
  // Orphans of the job (a daemonized worker, `cmd &` in a script) become the
  // recorder's children rather than init's: the recording can follow them.
  int was_subreaper = 0;
  prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct SubreaperReset {
    int was;
    ~SubreaperReset() { prctl(PR_SET_CHILD_SUBREAPER, was); }
  } subreaper_reset{was_subreaper};
  const pid_t child = fork();
  if (child < 0) return IoError(std::string("record: fork: ") + std::strerror(errno));
  if (child == 0) {
    close(exec_errno_pipe[0]);
    execvpe(argv[0], argv.data(), envp.data());
    const int err = errno;  // tell the parent why exec failed
    (void)!write(exec_errno_pipe[1], &err, sizeof err);
    _exit(127);
  }
  close(exec_errno_pipe[1]);
  int exec_errno = 0;
  const ssize_t got = read(exec_errno_pipe[0], &exec_errno, sizeof exec_errno);
  close(exec_errno_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    waitpid(child, nullptr, 0);
    // The command never ran: nothing of it was recorded, so no run of it is kept
    // (a complete run with exit 127 would sit in its experiment's history).
    if (options.store && result.run_id > 0) (void)options.store->DiscardRun(result.run_id);
    return NotFoundError("record: cannot run '" + options.command.front() + "': " + std::strerror(exec_errno));
  }

  SignalScope signals;
  // Markers become steps as they arrive; finished steps go to the store once a
  // second, so neither memory nor a killed recorder loses what was measured.
  StepBuilder step_builder;
  std::vector<Marker> drained;
  std::vector<MarkedStep> finished_steps;
  TimeNs next_steps_write = MonotonicNs() + kNsPerS;
  // Each marking process's rank, from its environment while it runs (a process
  // gone by the end cannot be read then); what it reports itself wins later.
  std::map<uint32_t, ProcessRank> environment_ranks;
  std::set<uint32_t> marking_pids;
  auto take_markers = [&](bool final) {
    drained.clear();
    ring->Drain(drained, final);
    for (const auto& m : drained)
      if (marking_pids.size() < JobConfig::kMaxProcesses && marking_pids.insert(m.pid).second)
        if (auto rank = ReadProcessRank(m.pid)) environment_ranks[m.pid] = *rank;
    step_builder.Add(drained);
  };
  auto store_steps = [&](const std::vector<MarkedStep>& steps) {
    if (steps.empty()) return;
    if (options.store && result.run_id > 0) stored(options.store->PutSteps(result.run_id, steps));
    if (options.on_steps) options.on_steps(steps);
    finished_steps.insert(finished_steps.end(), steps.begin(), steps.end());
  };
  // The job's phases outside steps (checkpoints, evaluation, ...) go with them:
  // a killed recorder keeps the ledger's phases up to its last second.
  std::vector<RunPhase> finished_phases;
  int64_t phases_dropped = 0;
  auto store_phases = [&](std::vector<RunPhase> phases) {
    if (phases.empty()) return;
    const size_t room = StepBuilder::kMaxRunPhases - std::min(StepBuilder::kMaxRunPhases, finished_phases.size());
    if (phases.size() > room) {
      phases_dropped += static_cast<int64_t>(phases.size() - room);
      phases.resize(room);
    }
    if (options.store && result.run_id > 0 && !phases.empty()) stored(options.store->PutRunPhases(result.run_id, phases));
    finished_phases.insert(finished_phases.end(), phases.begin(), phases.end());
  };
  TimeNs next = MonotonicNs();
  const TimeNs began = next;
  TimeNs next_status = began + kNsPerS;
  TimeNs next_processes = began;  // the GPUs' processes, once a second
  // The recorder's descendants are the job's: the command's own, and the
  // orphans it left that were reparented to us.
  JobProcesses job(getpid());
  // The host side of the job (its processes' CPU and memory, the machine's CPUs),
  // twice a second whatever the GPU interval: workers starve a GPU from there.
  int job_cpus = 0;
  {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) job_cpus = CPU_COUNT(&cpus);
  }
  HostUsageSampler host_usage(getpid(), child, job_cpus);
  host_usage.Sample(MonotonicNs());
  TimeNs next_host_usage = began + kHostUsageIntervalNs;
  const auto is_job = [&job](unsigned int pid) { return job.Contains(pid); };
  size_t stored_devices = result.recording.metrics.devices.size();
  int status = 0;
  bool command_exited = false;
  int64_t descendants_followed = 0;
  // After the command: reaps the descendants that ended; true while some run.
  const auto descendants_running = [&]() {
    while (true) {
      int ignored = 0;
      const pid_t reaped = waitpid(-1, &ignored, WNOHANG);
      if (reaped > 0) continue;
      return reaped == 0;  // -1 (ECHILD): none left
    }
  };
  while (true) {
    if (!command_exited) {
      const pid_t done = waitpid(child, &status, WNOHANG);
      if (done < 0 && errno != EINTR) return IoError(std::string("record: waitpid: ") + std::strerror(errno));
      command_exited = done == child;
    }
    if (command_exited) {
      if (!descendants_running()) break;
      if (!options.follow_descendants) {
        const auto outlived = ChildProcesses(getpid());
        std::vector<std::string> pids;
        for (pid_t pid : outlived) pids.push_back(std::to_string(pid));
        result.recording.stats.AddIssue(
            IssueSeverity::kWarning, "descendants_outlived",
            std::to_string(outlived.size()) + " process(es) the job started outlived it and were not recorded (pid " +
                Join(pids, ", ") + ")");
        break;
      }
      if (descendants_followed == 0) {
        descendants_followed = static_cast<int64_t>(std::max<size_t>(1, ChildProcesses(getpid()).size()));
        result.recording.stats.AddIssue(
            IssueSeverity::kInfo, "descendants_followed",
            "the command exited with " + std::to_string(descendants_followed) +
                " process(es) it started still running: the recording followed them until they ended");
      }
    }
    if (g_forward_signal != 0) {
      if (!command_exited) kill(child, g_forward_signal);
      for (pid_t pid : ChildProcesses(getpid())) kill(pid, g_forward_signal);  // and the orphans
      g_forward_signal = 0;
    }
    if (sampler) {
      sampler->Sample(WallNs(), result.recording);
      if (MonotonicNs() >= next_processes) {
        sampler->SampleProcesses(WallNs(), is_job, result.recording);
        next_processes += kNsPerS;
      }
    }
    if (scraper) scraper->Sample(WallNs(), result.recording);
    if (MonotonicNs() >= next_host_usage) {
      host_usage.Sample(MonotonicNs());
      next_host_usage += kHostUsageIntervalNs;
      if (next_host_usage < MonotonicNs()) next_host_usage = MonotonicNs() + kHostUsageIntervalNs;
    }
    if (ring) {
      take_markers(false);
      if (MonotonicNs() >= next_steps_write) {
        store_steps(step_builder.TakeFinished());
        store_phases(step_builder.TakeRunPhases());
        next_steps_write += kNsPerS;
      }
    }
    if (config && options.on_job_request)
      if (std::vector<std::string> requests = config->TakeRequests(); !requests.empty()) {
        // The steps so far: final ones, and the ended ones still held for late markers.
        if (ring) take_markers(false);
        std::vector<MarkedStep> steps = finished_steps;
        for (auto& step : step_builder.PeekEnded()) steps.push_back(std::move(step));
        std::stable_sort(steps.begin(), steps.end(),
                         [](const MarkedStep& a, const MarkedStep& b) { return a.span.start < b.span.start; });
        // The recording is lent to the requests as a run (moved, not copied: its
        // sketches are large), with the steps so far, and taken back.
        Run lent;
        // The host as measured so far: a diagnosis asked for now judges contention as the final one will.
        for (auto& [key, value] : host_usage.summary().AsMetadata()) result.recording.metadata[key] = std::move(value);
        if (job_cpus > 0) result.recording.metadata["host.cpus"] = std::to_string(job_cpus);
        lent.recordings.push_back(std::move(result.recording));
        std::swap(lent.recordings[0].marked_steps, steps);
        options.on_job_request(requests, lent);
        std::swap(lent.recordings[0].marked_steps, steps);
        result.recording = std::move(lent.recordings[0]);
      }
    if (options.store && result.run_id > 0 && result.recording.metrics.devices.size() != stored_devices) {
      stored_devices = result.recording.metrics.devices.size();  // a scrape named a new GPU
      stored(options.store->PutDevices(result.run_id, result.recording.metrics));
    }
    if (options.on_second && MonotonicNs() >= next_status) {
      if (options.on_held_steps && ring) options.on_held_steps(step_builder.PeekEnded());
      options.on_second(result.recording, MonotonicNs() - began);
      next_status += kNsPerS;
    }
    // Sleep to the next tick on the monotonic clock (no drift, no catch-up bursts),
    // in slices, so that the recording ends as soon as the job does whatever the
    // interval (an hour's interval must not keep a finished job waiting).
    next += options.interval_ns;
    if (next < MonotonicNs()) next = MonotonicNs();
    bool exited = false;
    for (TimeNs now = MonotonicNs(); now < next; now = MonotonicNs()) {
      const TimeNs slice = std::min(next - now, kJobExitCheckNs);
      timespec sleep_for{static_cast<time_t>(slice / kNsPerS), static_cast<long>(slice % kNsPerS)};
      nanosleep(&sleep_for, nullptr);  // a signal cuts it short: the loop looks again
      if (g_forward_signal != 0) break;  // forward promptly
      if (!command_exited) {
        if (waitpid(child, &status, WNOHANG) == child) {
          command_exited = true;
          break;  // the loop's top looks for descendants
        }
      } else if (!descendants_running()) {
        exited = true;
        break;
      }
    }
    if (exited) break;
  }
  result.ended_ns = WallNs();
  // The job's processes have been reaped by now: the intervals end at the last
  // read while they ran. Their whole CPU time is the kernel's account of reaped
  // children (workers reaped by the training process count into it too).
  HostUsageSummary host_summary = host_usage.summary();
  {
    rusage children{};
    if (getrusage(RUSAGE_CHILDREN, &children) == 0)
      host_summary.job_cpu_seconds = static_cast<double>(children.ru_utime.tv_sec + children.ru_stime.tv_sec) +
                                     static_cast<double>(children.ru_utime.tv_usec + children.ru_stime.tv_usec) / 1e6;
  }
  result.recording.metrics.observer = nullptr;  // the store may not outlive the result
  if (ring) {
    take_markers(true);
    MarkedSteps marked = step_builder.Finish();
    store_steps(marked.steps);
    store_phases(std::move(marked.run_phases));
    marked.run_phases_dropped += phases_dropped;
    std::stable_sort(finished_steps.begin(), finished_steps.end(),
                     [](const MarkedStep& a, const MarkedStep& b) { return a.span.start < b.span.start; });
    std::stable_sort(finished_phases.begin(), finished_phases.end(),
                     [](const RunPhase& a, const RunPhase& b) { return a.span.start < b.span.start; });
    result.recording.marked_steps = std::move(finished_steps);
    result.recording.run_phases = std::move(finished_phases);
    result.markers_read = ring->stats().read;
    AddMarkerIssues(ring->stats(), marked, result.recording.stats);
  }
  if (scraper) {
    if (Status s = scraper->Finish(); !s.ok())
      result.recording.stats.AddIssue(IssueSeverity::kError, "scrape_empty", s.message());
    result.recording.metadata["scrapes"] = std::to_string(scraper->scrapes());
    result.recording.metadata["unchanged_scrapes_skipped"] = std::to_string(scraper->unchanged());
  }
  if (sampler) sampler->FinishAttribution(result.recording);
  std::map<uint32_t, ProcessRank> reported_ranks;
  if (config) {
    JobConfig reported = config->Read();
    if (reported.rejected_lines > 0)
      result.recording.stats.AddIssue(IssueSeverity::kWarning, "job_config_rejected",
                                      std::to_string(reported.rejected_lines) +
                                          " configuration lines the job wrote were not used (" +
                                          reported.first_problem + ")");
    if (reported.truncated)
      result.recording.stats.AddIssue(IssueSeverity::kWarning, "job_config_truncated",
                                      "the job wrote more than 4 MiB of configuration: the rest was not read");
    if (options.store && result.run_id > 0) stored(options.store->PutSettings(result.run_id, reported.settings));
    for (auto& [key, value] : reported.settings) result.recording.metadata[key] = std::move(value);
    for (const auto& [pid, settings] : reported.by_process)
      if (auto rank = RankFromSettings(pid, settings)) reported_ranks[pid] = *rank;
  }
  result.recording.process_ranks = MergeProcessRanks(reported_ranks, environment_ranks, options.info.host);
  if (options.store && result.run_id > 0) stored(options.store->PutProcessRanks(result.run_id, result.recording.process_ranks));
  // Stored with every GPU (sample rows refer to positions; facts may have grown), attributed on load.
  if (options.store && result.run_id > 0) {
    stored(options.store->PutDevices(result.run_id, result.recording.metrics));
    stored(options.store->Flush());
    if (const int64_t dropped = options.store->dropped_rows(); dropped > 0)
      result.recording.stats.AddIssue(
          IssueSeverity::kWarning, "store_samples_dropped",
          std::to_string(dropped) + " sample rows could not be written to the run store (" +
              options.store->path() + ") while it refused them, and were dropped to bound the recorder's memory;"
              " the diagnosis printed here used every sample, the stored run lacks those");
  }
  AttributeGpusToJob(result.recording);
  ReportRejectedValues(result.recording);
  // What the recorder itself knows of the machine that moves performance: the
  // driver, and the GPUs (kept with the job's own configuration; where the job
  // told its GPUs as PyTorch sees them, the job's word stands).
  {
    std::map<std::string, std::string> machine;
    // The CPUs the job could run on (its affinity, inherited from here): what
    // a DataLoader's workers share.
    if (job_cpus > 0) machine["host.cpus"] = std::to_string(job_cpus);
    for (auto& [key, value] : host_summary.AsMetadata()) machine[key] = std::move(value);
    for (const auto& d : result.recording.metrics.devices)
      if (!d.driver_version.empty()) machine.try_emplace("version.driver", d.driver_version);
    if (!result.recording.metrics.devices.empty() && !result.recording.metadata.count("gpu.model") &&
        !result.recording.metrics.devices[0].name.empty()) {
      machine["gpu.model"] = result.recording.metrics.devices[0].name;
      machine["gpu.count"] = std::to_string(result.recording.metrics.devices.size());
    }
    if (options.store && result.run_id > 0 && !machine.empty()) stored(options.store->PutSettings(result.run_id, machine));
    for (auto& [key, value] : machine) result.recording.metadata[key] = std::move(value);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  result.recording.job_span = {result.started_ns, result.ended_ns};
  result.recording.exit_code = result.exit_code;
  result.recording.metadata["command"] = command;
  result.recording.metadata["exit_code"] = std::to_string(result.exit_code);
  return result;
}

}  // namespace gputriage
