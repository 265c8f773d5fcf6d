// `gputriage record`: one recording session per job. Its stages, in order:
// open the GPU source, open the job's channels (step markers, configuration),
// begin the stored run, start the job, sample until the job and its
// descendants end, and finish (steps, configuration, ranks, the machine, the
// exit code). Each tick of the sampling loop samples the sources, takes the
// job's markers and answers its requests. A new measurement goes in a sampling
// method of its own, called from SampleSources(), and is finished in Finish().
#include "src/record/recorder.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "src/markers/marked_steps.h"
#include "src/record/dcgm_exporter_source.h"
#include "src/record/host_usage.h"
#include "src/record/job_config.h"
#include "src/record/process_rank.h"
#include "src/record/process_tree.h"
#include "src/sources/nvml/nvml_library.h"
#include "src/sources/nvml/nvml_sampler.h"
#include "src/util/clock.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

volatile sig_atomic_t g_forward_signal = 0;
// How often a sleeping recorder looks whether the job has exited.
constexpr TimeNs kJobExitCheckNs = 20 * kNsPerMs;
constexpr TimeNs kHostUsageIntervalNs = 500 * kNsPerMs;  // the job's CPU and memory, twice a second

void RememberSignal(int sig) { g_forward_signal = sig; }

/// SIGTERM and SIGHUP are remembered (and forwarded to the job), SIGINT and
/// SIGQUIT ignored (a terminal sends them to the job directly) while recording;
/// the recorder's own dispositions come back when it ends.
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

/// Orphans of the job (a daemonized worker, `cmd &` in a script) become the
/// recorder's children rather than init's while it records: it can follow them.
class SubreaperScope {
 public:
  SubreaperScope() {
    prctl(PR_GET_CHILD_SUBREAPER, &was_);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  ~SubreaperScope() { prctl(PR_SET_CHILD_SUBREAPER, was_); }

 private:
  int was_ = 0;
};

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
  if (steps.unmatched_memory > 0)
    stats.AddIssue(IssueSeverity::kInfo, "memory_samples_unmatched",
                   std::to_string(steps.unmatched_memory) +
                       " memory samples matched no open or recorded step of their process");
}

void SortByStart(std::vector<MarkedStep>& steps) {
  std::stable_sort(steps.begin(), steps.end(),
                   [](const MarkedStep& a, const MarkedStep& b) { return a.span.start < b.span.start; });
}

/// The CPUs this process (and so the job, which inherits its affinity) may run on; 0 unknown.
int AffinityCpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
}

class RecordingSession {
 public:
  explicit RecordingSession(const RecordOptions& options) : options_(options) {}
  StatusOr<RecordResult> Run();

 private:
  // The stages, in order.
  Status OpenGpuSource();
  void OpenJobChannels();
  void BeginStoredRun();
  Status StartJob();
  Status SampleUntilJobEnds();
  void Finish();

  // The sampling loop.
  StatusOr<bool> JobStillRunning();  // false once the command and the descendants followed have ended
  void ForwardSignal();
  void SampleSources();
  void TakeMarkers(bool final);
  void StoreSteps(const std::vector<MarkedStep>& steps);
  void StorePhases(std::vector<RunPhase> phases);
  void AnswerJobRequests();
  void TellTheSecond();
  void TellJobSettings();
  bool SleepToNextTick();  // true when the job ended while asleep
  bool DescendantsRunning();

  // Finishing.
  void FinishSteps();
  void FinishSources();
  void ReadJobConfig();
  void StoreRunEnd();
  void NoteMachine();
  void NoteExit();

  bool Storing() const { return options_.store != nullptr && result_.run_id > 0; }
  /// A failed store write costs the run its stored copy, not the recording: said, and recording goes on.
  void Stored(const Status& s) {
    if (!s.ok()) result_.recording.stats.AddIssue(IssueSeverity::kError, "store_write_failed", s.message());
  }

  const RecordOptions& options_;
  RecordResult result_;
  Recording& recording_ = result_.recording;
  std::string command_;
  // Sources.
  std::unique_ptr<NvmlLibrary> nvml_;
  std::unique_ptr<NvmlSampler> sampler_;
  std::unique_ptr<DcgmExporterSource> scraper_;
  std::unique_ptr<HostUsageSampler> host_usage_;
  int job_cpus_ = AffinityCpus();
  JobProcesses job_processes_{getpid()};  // the recorder's descendants: the command's own and the orphans it left
  // The job's channels and its environment (built before fork: the child only execs).
  std::unique_ptr<MarkerRing> ring_;
  std::unique_ptr<JobConfigChannel> config_;
  off_t job_settings_bytes_ = 0;  // the channel's size when on_job_settings was last told
  bool job_settings_wanted_ = true;  // on_job_settings has not said it has what it needs
  std::vector<std::string> job_env_;
  // The job.
  pid_t child_ = -1;
  int wait_status_ = 0;
  bool command_exited_ = false;
  int64_t descendants_followed_ = 0;
  // Markers become steps as they arrive; finished steps and the job's phases
  // outside steps go to the store once a second, so neither memory nor a killed
  // recorder loses what was measured.
  StepBuilder step_builder_;
  std::vector<Marker> drained_;
  std::vector<MarkedStep> finished_steps_;
  std::vector<RunPhase> finished_phases_;
  int64_t phases_dropped_ = 0;
  // Each marking process's rank, from its environment while it runs (a process
  // gone by the end cannot be read then); what it reports itself wins later.
  std::map<uint32_t, ProcessRank> environment_ranks_;
  std::map<uint32_t, ProcessRank> reported_ranks_;
  std::set<uint32_t> marking_pids_;
  HostUsageSummary host_summary_;
  size_t stored_devices_ = 0;
  // The loop's clock (monotonic).
  TimeNs began_ = 0, next_tick_ = 0, next_status_ = 0, next_processes_ = 0, next_host_usage_ = 0,
         next_steps_write_ = 0;
};

StatusOr<RecordResult> RecordingSession::Run() {
  if (options_.command.empty())
    return InvalidArgumentError("record: no command given (usage: gputriage record -- CMD ARGS...)");
  if (options_.interval_ns < kNsPerMs) return InvalidArgumentError("record: the sampling interval must be at least 1 ms");
  command_ = Join(options_.command, " ");
  recording_.source_path = "record: " + options_.command.front();
  RETURN_IF_ERROR(OpenGpuSource());  // first, so a missing driver is reported before the job's own output
  OpenJobChannels();
  BeginStoredRun();
  SubreaperScope subreaper;
  RETURN_IF_ERROR(StartJob());
  SignalScope signals;  // in the parent only, after fork: the exec'd job keeps the default dispositions
  RETURN_IF_ERROR(SampleUntilJobEnds());
  Finish();
  return std::move(result_);
}

Status RecordingSession::OpenGpuSource() {
  recording_.format = "nvml";
  if (!options_.dcgm_exporter_url.empty()) {
    ASSIGN_OR_RETURN(scraper_, DcgmExporterSource::Open(options_.dcgm_exporter_url, WallNs(), recording_));
    result_.gpu_metrics = true;
    recording_.format = "dcgm-exporter";
    return Status::Ok();
  }
  if (auto lib = NvmlLibrary::Load(options_.nvml_library); lib.ok()) {
    nvml_ = std::move(*lib);
    if (auto s = NvmlSampler::Open(*nvml_, recording_); s.ok()) {
      sampler_ = std::make_unique<NvmlSampler>(std::move(*s));
      result_.gpu_metrics = sampler_->devices() > 0;
      if (!result_.gpu_metrics) result_.gpu_note = "NVML reports no GPUs on this machine";
    } else {
      result_.gpu_note = s.status().message();
    }
  } else {
    result_.gpu_note = lib.status().message();
  }
  if (!result_.gpu_metrics) {
    // A laptop, a CPU job: the job's step markers are the whole recording.
    recording_.format = "step-markers";
    recording_.stats.AddIssue(IssueSeverity::kInfo, "gpu_metrics_unavailable",
                              "GPU metrics unavailable (" + result_.gpu_note +
                                  "): the diagnosis rests on the job's step markers alone");
  }
  return Status::Ok();
}

void RecordingSession::OpenJobChannels() {
  // The step-marker ring and the channel the job reports its configuration on
  // (python/gputriage/job_config.py), each inherited by descriptor and named by /proc path.
  std::vector<std::pair<std::string, std::string>> vars = options_.environment;
  const std::string fds = "/proc/" + std::to_string(getpid()) + "/fd/";
  const auto inherit = [&](int fd, const char* fd_env, const char* path_env) {
    vars.emplace_back(fd_env, std::to_string(fd));
    vars.emplace_back(path_env, fds + std::to_string(fd));
  };
  if (auto created = MarkerRing::Create(); created.ok()) {
    ring_ = std::move(*created);
    inherit(ring_->fd(), kMarkersFdEnv, kMarkersPathEnv);
  } else {
    recording_.stats.AddIssue(IssueSeverity::kWarning, "markers_unavailable", created.status().message());
  }
  if (auto created = JobConfigChannel::Create(); created.ok()) {
    config_ = std::move(*created);
    inherit(config_->fd(), kConfigFdEnv, kConfigPathEnv);
  } else {
    recording_.stats.AddIssue(IssueSeverity::kWarning, "job_config_unavailable", created.status().message());
  }
  job_env_ = JobEnvironment(vars);
}

void RecordingSession::BeginStoredRun() {
  // Read before the job starts, so sampling starts with it.
  const std::map<std::string, std::string> context =
      options_.store ? CollectRunContext() : std::map<std::string, std::string>{};
  // The run is in the store before the job starts: a recorder killed at any
  // moment leaves a listed (incomplete) run for every job that ran.
  result_.started_ns = WallNs();
  if (!options_.store_unavailable.ok())
    recording_.stats.AddIssue(IssueSeverity::kError, "store_unavailable",
                              options_.store_unavailable.message() + " (the run was not kept)");
  if (options_.store) {
    RunInfo info = options_.info;
    info.started_ns = result_.started_ns;
    for (auto& [key, value] : context) info.metadata.try_emplace(key, value);  // --tag wins
    if (info.command.empty()) info.command = command_;
    if (auto id = options_.store->BeginRun(info); id.ok()) {
      result_.run_id = *id;
      Stored(options_.store->PutDevices(result_.run_id, recording_.metrics));
      // Every value the recording takes from now on also goes to the store (batched there).
      recording_.metrics.observer = [store = options_.store, run = result_.run_id, tap = options_.on_sample](
                                        size_t device, Metric m, TimeNs t, double v) {
        store->AddSample(run, device, m, t, v);
        if (tap) tap(device, m, t, v);
      };
    } else {
      recording_.stats.AddIssue(IssueSeverity::kError, "store_unavailable", id.status().message());
    }
  }
  if (options_.on_sample && !recording_.metrics.observer) recording_.metrics.observer = options_.on_sample;
  stored_devices_ = recording_.metrics.devices.size();
}

Status RecordingSession::StartJob() {
  std::vector<char*> argv, envp;
  for (const auto& a : options_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : job_env_) envp.push_back(e.data());
  envp.push_back(nullptr);
  int exec_errno_pipe[2];
  if (pipe2(exec_errno_pipe, O_CLOEXEC) != 0) return IoError(std::string("record: pipe: ") + std::strerror(errno));
  g_forward_signal = 0;
  child_ = fork();
  if (child_ < 0) return IoError(std::string("record: fork: ") + std::strerror(errno));
  if (child_ == 0) {
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
    waitpid(child_, nullptr, 0);
    // The command never ran: nothing of it was recorded, so no run of it is kept
    // (a complete run with exit 127 would sit in its experiment's history).
    if (Storing()) (void)options_.store->DiscardRun(result_.run_id);
    return NotFoundError("record: cannot run '" + options_.command.front() + "': " + std::strerror(exec_errno));
  }
  return Status::Ok();
}

Status RecordingSession::SampleUntilJobEnds() {
  began_ = next_tick_ = next_processes_ = MonotonicNs();
  next_status_ = next_steps_write_ = began_ + kNsPerS;
  // The host side of the job (its processes' CPU and memory, the machine's CPUs),
  // twice a second whatever the GPU interval: workers starve a GPU from there.
  host_usage_ = std::make_unique<HostUsageSampler>(getpid(), child_, job_cpus_);
  host_usage_->Sample(began_);
  next_host_usage_ = began_ + kHostUsageIntervalNs;
  while (true) {
    ASSIGN_OR_RETURN(const bool running, JobStillRunning());
    if (!running) return Status::Ok();
    ForwardSignal();
    SampleSources();
    AnswerJobRequests();
    TellTheSecond();
    if (SleepToNextTick()) return Status::Ok();
  }
}

bool RecordingSession::DescendantsRunning() {
  while (true) {  // reaps the descendants that ended
    int ignored = 0;
    const pid_t reaped = waitpid(-1, &ignored, WNOHANG);
    if (reaped > 0) continue;
    return reaped == 0;  // -1 (ECHILD): none left
  }
}

StatusOr<bool> RecordingSession::JobStillRunning() {
  if (!command_exited_) {
    const pid_t done = waitpid(child_, &wait_status_, WNOHANG);
    if (done < 0 && errno != EINTR) return IoError(std::string("record: waitpid: ") + std::strerror(errno));
    command_exited_ = done == child_;
  }
  if (!command_exited_) return true;
  if (!DescendantsRunning()) return false;
  if (!options_.follow_descendants) {
    std::vector<std::string> pids;
    for (pid_t pid : ChildProcesses(getpid())) pids.push_back(std::to_string(pid));
    recording_.stats.AddIssue(IssueSeverity::kWarning, "descendants_outlived",
                              std::to_string(pids.size()) +
                                  " process(es) the job started outlived it and were not recorded (pid " +
                                  Join(pids, ", ") + ")");
    return false;
  }
  if (descendants_followed_ == 0) {
    descendants_followed_ = static_cast<int64_t>(std::max<size_t>(1, ChildProcesses(getpid()).size()));
    recording_.stats.AddIssue(IssueSeverity::kInfo, "descendants_followed",
                              "the command exited with " + std::to_string(descendants_followed_) +
                                  " process(es) it started still running: the recording followed them until they ended");
  }
  return true;
}

void RecordingSession::ForwardSignal() {
  if (g_forward_signal == 0) return;
  if (!command_exited_) kill(child_, g_forward_signal);
  for (pid_t pid : ChildProcesses(getpid())) kill(pid, g_forward_signal);  // and the orphans
  g_forward_signal = 0;
}

void RecordingSession::SampleSources() {
  if (sampler_) {
    sampler_->Sample(WallNs(), recording_);
    if (MonotonicNs() >= next_processes_) {  // the GPUs' processes, once a second
      sampler_->SampleProcesses(WallNs(), [this](unsigned int pid) { return job_processes_.Contains(pid); },
                                recording_);
      next_processes_ += kNsPerS;
    }
  }
  if (scraper_) scraper_->Sample(WallNs(), recording_);
  if (MonotonicNs() >= next_host_usage_) {
    host_usage_->Sample(MonotonicNs());
    next_host_usage_ += kHostUsageIntervalNs;
    if (next_host_usage_ < MonotonicNs()) next_host_usage_ = MonotonicNs() + kHostUsageIntervalNs;
  }
  if (ring_) {
    TakeMarkers(false);
    if (MonotonicNs() >= next_steps_write_) {
      StoreSteps(step_builder_.TakeFinished());
      StorePhases(step_builder_.TakeRunPhases());
      next_steps_write_ += kNsPerS;
    }
  }
  if (Storing() && recording_.metrics.devices.size() != stored_devices_) {
    stored_devices_ = recording_.metrics.devices.size();  // a scrape named a new GPU
    Stored(options_.store->PutDevices(result_.run_id, recording_.metrics));
  }
}

void RecordingSession::TakeMarkers(bool final) {
  drained_.clear();
  ring_->Drain(drained_, final);
  for (const auto& m : drained_)
    if (marking_pids_.size() < JobConfig::kMaxProcesses && marking_pids_.insert(m.pid).second)
      if (auto rank = ReadProcessRank(m.pid)) environment_ranks_[m.pid] = *rank;
  step_builder_.Add(drained_);
}

void RecordingSession::StoreSteps(const std::vector<MarkedStep>& steps) {
  if (steps.empty()) return;
  if (Storing()) Stored(options_.store->PutSteps(result_.run_id, steps));
  if (options_.on_steps) options_.on_steps(steps);
  finished_steps_.insert(finished_steps_.end(), steps.begin(), steps.end());
}

void RecordingSession::StorePhases(std::vector<RunPhase> phases) {
  if (phases.empty()) return;
  const size_t room = StepBuilder::kMaxRunPhases - std::min(StepBuilder::kMaxRunPhases, finished_phases_.size());
  if (phases.size() > room) {
    phases_dropped_ += static_cast<int64_t>(phases.size() - room);
    phases.resize(room);
  }
  if (Storing() && !phases.empty()) Stored(options_.store->PutRunPhases(result_.run_id, phases));
  finished_phases_.insert(finished_phases_.end(), phases.begin(), phases.end());
}

void RecordingSession::AnswerJobRequests() {
  if (!config_ || !options_.on_job_request) return;
  std::vector<std::string> requests = config_->TakeRequests();
  if (requests.empty()) return;
  // The steps so far: final ones, and the ended ones still held for late markers.
  if (ring_) TakeMarkers(false);
  std::vector<MarkedStep> steps = finished_steps_;
  for (auto& step : step_builder_.PeekEnded()) steps.push_back(std::move(step));
  SortByStart(steps);
  // The host as measured so far: a diagnosis asked for now judges contention as the final one will.
  for (auto& [key, value] : host_usage_->summary().AsMetadata()) recording_.metadata[key] = std::move(value);
  if (job_cpus_ > 0) recording_.metadata["host.cpus"] = std::to_string(job_cpus_);
  // The job's settings so far (its loader, optimizer, memory.* capacities and
  // static memory): read again at the end, when the run is stored.
  for (auto& [key, value] : config_->Read().settings) recording_.metadata[key] = std::move(value);
  // The recording is lent to the requests as a run (moved, not copied: its
  // sketches are large), with the steps so far, and taken back.
  gputriage::Run lent;
  lent.recordings.push_back(std::move(recording_));
  std::swap(lent.recordings[0].marked_steps, steps);
  options_.on_job_request(requests, lent);
  std::swap(lent.recordings[0].marked_steps, steps);
  recording_ = std::move(lent.recordings[0]);
}

void RecordingSession::TellTheSecond() {
  if (MonotonicNs() < next_status_) return;
  TellJobSettings();
  if (!options_.on_second) {
    next_status_ += kNsPerS;
    return;
  }
  if (options_.on_held_steps && ring_) options_.on_held_steps(step_builder_.PeekEnded());
  options_.on_second(recording_, MonotonicNs() - began_);
  next_status_ += kNsPerS;
}

bool RecordingSession::SleepToNextTick() {
  // To the next tick on the monotonic clock (no drift, no catch-up bursts), in
  // slices, so that the recording ends as soon as the job does whatever the
  // interval (an hour's interval must not keep a finished job waiting).
  next_tick_ += options_.interval_ns;
  if (next_tick_ < MonotonicNs()) next_tick_ = MonotonicNs();
  for (TimeNs now = MonotonicNs(); now < next_tick_; now = MonotonicNs()) {
    const TimeNs slice = std::min(next_tick_ - now, kJobExitCheckNs);
    timespec sleep_for{static_cast<time_t>(slice / kNsPerS), static_cast<long>(slice % kNsPerS)};
    nanosleep(&sleep_for, nullptr);  // a signal cuts it short: the loop looks again
    if (g_forward_signal != 0) return false;  // forward promptly
    if (!command_exited_) {
      if (waitpid(child_, &wait_status_, WNOHANG) == child_) {
        command_exited_ = true;
        return false;  // the loop's top looks for descendants
      }
    } else if (!DescendantsRunning()) {
      return true;
    }
  }
  return false;
}

void RecordingSession::Finish() {
  result_.ended_ns = WallNs();
  // The job's processes have been reaped by now: the intervals end at the last
  // read while they ran. Their whole CPU time is the kernel's account of reaped
  // children (workers reaped by the training process count into it too).
  host_summary_ = host_usage_->summary();
  if (rusage children{}; getrusage(RUSAGE_CHILDREN, &children) == 0)
    host_summary_.job_cpu_seconds = static_cast<double>(children.ru_utime.tv_sec + children.ru_stime.tv_sec) +
                                    static_cast<double>(children.ru_utime.tv_usec + children.ru_stime.tv_usec) / 1e6;
  recording_.metrics.observer = nullptr;  // the store may not outlive the result
  FinishSteps();
  FinishSources();
  ReadJobConfig();
  recording_.process_ranks = MergeProcessRanks(reported_ranks_, environment_ranks_, options_.info.host);
  if (Storing()) Stored(options_.store->PutProcessRanks(result_.run_id, recording_.process_ranks));
  StoreRunEnd();
  AttributeGpusToJob(recording_);
  ReportRejectedValues(recording_);
  NoteMachine();
  NoteExit();
}

void RecordingSession::FinishSteps() {
  if (!ring_) return;
  TakeMarkers(true);
  MarkedSteps marked = step_builder_.Finish();
  StoreSteps(marked.steps);
  StorePhases(std::move(marked.run_phases));
  marked.run_phases_dropped += phases_dropped_;
  SortByStart(finished_steps_);
  std::stable_sort(finished_phases_.begin(), finished_phases_.end(),
                   [](const RunPhase& a, const RunPhase& b) { return a.span.start < b.span.start; });
  recording_.marked_steps = std::move(finished_steps_);
  recording_.run_phases = std::move(finished_phases_);
  result_.markers_read = ring_->stats().read;
  AddMarkerIssues(ring_->stats(), marked, recording_.stats);
}

void RecordingSession::FinishSources() {
  if (scraper_) {
    if (Status s = scraper_->Finish(); !s.ok()) recording_.stats.AddIssue(IssueSeverity::kError, "scrape_empty", s.message());
    recording_.metadata["scrapes"] = std::to_string(scraper_->scrapes());
    recording_.metadata["unchanged_scrapes_skipped"] = std::to_string(scraper_->unchanged());
  }
  if (sampler_) sampler_->FinishAttribution(recording_);
}

void RecordingSession::TellJobSettings() {
  if (!config_ || !options_.on_job_settings || !job_settings_wanted_) return;
  struct stat st {};
  if (fstat(config_->fd(), &st) != 0 || st.st_size == job_settings_bytes_) return;
  job_settings_bytes_ = st.st_size;
  job_settings_wanted_ = options_.on_job_settings(config_->Read().settings);
}

void RecordingSession::ReadJobConfig() {
  if (!config_) return;
  JobConfig reported = config_->Read();
  if (reported.rejected_lines > 0)
    recording_.stats.AddIssue(IssueSeverity::kWarning, "job_config_rejected",
                              std::to_string(reported.rejected_lines) +
                                  " configuration lines the job wrote were not used (" + reported.first_problem + ")");
  if (reported.truncated)
    recording_.stats.AddIssue(IssueSeverity::kWarning, "job_config_truncated",
                              "the job wrote more than 4 MiB of configuration: the rest was not read");
  if (Storing()) Stored(options_.store->PutSettings(result_.run_id, reported.settings));
  for (auto& [key, value] : reported.settings) recording_.metadata[key] = std::move(value);
  for (const auto& [pid, settings] : reported.by_process)
    if (auto rank = RankFromSettings(pid, settings)) reported_ranks_[pid] = *rank;
}

void RecordingSession::StoreRunEnd() {
  if (!Storing()) return;
  // Stored with every GPU (sample rows refer to positions; facts may have grown), attributed on load.
  Stored(options_.store->PutDevices(result_.run_id, recording_.metrics));
  Stored(options_.store->Flush());
  if (const int64_t dropped = options_.store->dropped_rows(); dropped > 0)
    recording_.stats.AddIssue(
        IssueSeverity::kWarning, "store_samples_dropped",
        std::to_string(dropped) + " sample rows could not be written to the run store (" + options_.store->path() +
            ") while it refused them, and were dropped to bound the recorder's memory;"
            " the diagnosis printed here used every sample, the stored run lacks those");
}

void RecordingSession::NoteMachine() {
  // What the recorder itself knows of the machine that moves performance: the
  // driver, and the GPUs (kept with the job's own configuration; where the job
  // told its GPUs as PyTorch sees them, the job's word stands).
  std::map<std::string, std::string> machine;
  // The CPUs the job could run on (its affinity, inherited from here): what a DataLoader's workers share.
  if (job_cpus_ > 0) machine["host.cpus"] = std::to_string(job_cpus_);
  for (auto& [key, value] : host_summary_.AsMetadata()) machine[key] = std::move(value);
  const auto& devices = recording_.metrics.devices;
  for (const auto& d : devices)
    if (!d.driver_version.empty()) machine.try_emplace("version.driver", d.driver_version);
  if (!devices.empty() && !recording_.metadata.count("gpu.model") && !devices[0].name.empty()) {
    machine["gpu.model"] = devices[0].name;
    machine["gpu.count"] = std::to_string(devices.size());
  }
  if (Storing() && !machine.empty()) Stored(options_.store->PutSettings(result_.run_id, machine));
  for (auto& [key, value] : machine) recording_.metadata[key] = std::move(value);
}

void RecordingSession::NoteExit() {
  if (WIFEXITED(wait_status_)) result_.exit_code = WEXITSTATUS(wait_status_);
  else if (WIFSIGNALED(wait_status_)) result_.exit_code = 128 + WTERMSIG(wait_status_);
  recording_.job_span = {result_.started_ns, result_.ended_ns};
  recording_.exit_code = result_.exit_code;
  recording_.metadata["command"] = command_;
  recording_.metadata["exit_code"] = std::to_string(result_.exit_code);
}

}  // namespace

StatusOr<RecordResult> RecordCommand(const RecordOptions& options) { return RecordingSession(options).Run(); }

}  // namespace gputriage
