#include "src/agent/agent.h"

#include <cmath>
#include <limits>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "gputriage/version.h"
#include "src/markers/marked_steps.h"
#include "src/markers/marker_ring.h"
#include "src/agent/ring_attacher.h"
#include "src/record/dcgm_exporter_source.h"
#include "src/sources/nvml/nvml_library.h"
#include "src/sources/nvml/nvml_sampler.h"
#include "src/analysis/ledger.h"
#include "src/analysis/metric_analysis.h"
#include "src/util/clock.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

/// Nanoseconds as seconds.
double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// DCGM's series for what NVML gives the agent: dcgm-exporter's default names
// (before 4.9's renames, what dashboards and alerts query), units and HELP.
struct DcgmSeries {
  const char* name;
  Metric metric;
  double scale;  // canonical unit → DCGM's
  const char* help;
};
constexpr DcgmSeries kDcgmSeries[] = {
    {"DCGM_FI_DEV_GPU_UTIL", Metric::kGpuUtil, 1, "GPU utilization (in %)."},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", Metric::kMemCopyUtil, 1, "Memory utilization (in %)."},
    {"DCGM_FI_DEV_ENC_UTIL", Metric::kEncoderUtil, 1, "Encoder utilization (in %)."},
    {"DCGM_FI_DEV_DEC_UTIL", Metric::kDecoderUtil, 1, "Decoder utilization (in %)."},
    {"DCGM_FI_DEV_SM_CLOCK", Metric::kSmClockMHz, 1, "SM clock frequency (in MHz)."},
    {"DCGM_FI_DEV_MEM_CLOCK", Metric::kMemClockMHz, 1, "Memory clock frequency (in MHz)."},
    {"DCGM_FI_DEV_GPU_TEMP", Metric::kGpuTempC, 1, "GPU temperature (in C)."},
    {"DCGM_FI_DEV_MEMORY_TEMP", Metric::kMemTempC, 1, "Memory temperature (in C)."},
    {"DCGM_FI_DEV_POWER_USAGE", Metric::kPowerW, 1, "Power draw (in W)."},
    // A counter in dcgm-exporter; a gauge here so its name stays DCGM's (no _total).
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Metric::kEnergyJ, 1e3, "Total energy consumption since boot (in mJ)."},
    {"DCGM_FI_DEV_FB_FREE", Metric::kFbFreeBytes, 1.0 / (1024 * 1024), "Framebuffer memory free (in MiB)."},
    {"DCGM_FI_DEV_FB_USED", Metric::kFbUsedBytes, 1.0 / (1024 * 1024), "Framebuffer memory used (in MiB)."},
    {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", Metric::kClockEventReasons, 1, "Current clock throttle reasons."},
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", Metric::kGrEngineActive, 0.01, "Ratio of time the graphics engine is active."},
    {"DCGM_FI_PROF_SM_ACTIVE", Metric::kSmActive, 0.01,
     "The ratio of cycles an SM has at least 1 warp assigned."},
    {"DCGM_FI_PROF_SM_OCCUPANCY", Metric::kSmOccupancy, 0.01,
     "The ratio of number of warps resident on an SM."},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", Metric::kTensorActive, 0.01,
     "Ratio of cycles the tensor (HMMA) pipe is active."},
    {"DCGM_FI_PROF_DRAM_ACTIVE", Metric::kDramActive, 0.01,
     "Ratio of cycles the device memory interface is active sending or receiving data."},
    {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", Metric::kFp64Active, 0.01, "Ratio of cycles the fp64 pipes are active."},
    {"DCGM_FI_PROF_PIPE_FP32_ACTIVE", Metric::kFp32Active, 0.01, "Ratio of cycles the fp32 pipes are active."},
    {"DCGM_FI_PROF_PIPE_FP16_ACTIVE", Metric::kFp16Active, 0.01, "Ratio of cycles the fp16 pipes are active."},
    {"DCGM_FI_PROF_PCIE_TX_BYTES", Metric::kPcieTxBytesPerS, 1,
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second."},
    {"DCGM_FI_PROF_PCIE_RX_BYTES", Metric::kPcieRxBytesPerS, 1,
     "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second."},
    {"DCGM_FI_PROF_NVLINK_TX_BYTES", Metric::kNvlinkTxBytesPerS, 1,
     "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second."},
    {"DCGM_FI_PROF_NVLINK_RX_BYTES", Metric::kNvlinkRxBytesPerS, 1,
     "The rate of data received over NVLink, not including protocol headers, in bytes per second."},
};

double NaN() { return std::nan(""); }

/// dcgm-exporter's labels for a GPU, in its order (render_metrics.go):
/// gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID], Hostname, DCGM_FI_DRIVER_VERSION.
Labels DcgmLabels(const MetricDevice& d, const std::string& hostname) {
  Labels out;
  const std::string index = d.index >= 0 ? std::to_string(d.index) : "";
  out.emplace_back("gpu", index);
  out.emplace_back("UUID", d.uuid);
  out.emplace_back("pci_bus_id", d.pci_bus_id);
  out.emplace_back("device", "nvidia" + index);
  out.emplace_back("modelName", d.name);
  if (d.mig_instance >= 0) {
    out.emplace_back("GPU_I_PROFILE", d.mig_profile);
    out.emplace_back("GPU_I_ID", std::to_string(d.mig_instance));
  }
  if (!hostname.empty()) out.emplace_back("Hostname", hostname);
  if (!d.driver_version.empty()) out.emplace_back("DCGM_FI_DRIVER_VERSION", d.driver_version);
  return out;
}

/// The labels of gputriage's own series for a GPU: DCGM's identity in
/// Prometheus' snake_case (gpu is the same label, so the two join on it).
Labels GpuLabels(const MetricDevice& d, const std::string& hostname) {
  Labels out;
  out.emplace_back("gpu", d.index >= 0 ? std::to_string(d.index) : "");
  out.emplace_back("uuid", d.uuid);
  out.emplace_back("pci_bus_id", d.pci_bus_id);
  out.emplace_back("model_name", d.name);
  if (d.mig_instance >= 0) {
    out.emplace_back("mig_profile", d.mig_profile);
    out.emplace_back("mig_instance", std::to_string(d.mig_instance));
  }
  if (!hostname.empty()) out.emplace_back("hostname", hostname);
  return out;
}

Labels With(Labels base, const Labels& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

}  // namespace

Agent::JobMarkers::~JobMarkers() = default;

TimeNs Agent::MarkerHold() const {
  return std::clamp<TimeNs>(options_.window_ns / 4, kNsPerS / 2, StepBuilder::kDefaultHoldNs);
}

void Agent::FindMarkers(size_t d) {
  // A process's environment is fixed at exec: its ring is looked for once per
  // job, on the attacher's thread (a path the job names can block an open).
  if (!ring_attacher_) ring_attacher_ = std::make_unique<RingAttacher>(options_.proc_root);
  ring_attacher_->Request(d, gpus_[d].job_key, gpus_[d].pids);
  gpus_[d].joined_mid_run = !attributed_once_;
  gpus_[d].markers_asked_ns = WallNs();  // the ledger starts here, not when the ring arrives a tick later
}

void Agent::TakeAttachedRings() {
  if (!ring_attacher_) return;
  for (auto& found : ring_attacher_->Take()) {
    if (found.gpu >= gpus_.size()) continue;
    GpuState& g = gpus_[found.gpu];
    if (g.job_key != found.job_key || g.markers) continue;  // the job left while its ring was opened
    auto m = std::make_shared<JobMarkers>();
    m->path = std::move(found.path);
    m->ring = std::move(found.ring);
    // A step is final once its late phases and device time have had time to
    // come: 5 s (the recorder's), less in a short window.
    m->builder = std::make_unique<StepBuilder>(MarkerHold());
    g.markers = std::move(m);
    // A job already running when the agent came has no start-up here: the
    // time before the first step it sees is not known to be start-up.
    g.marked_ledger = std::make_shared<analysis::MarkedLedger>(g.markers_asked_ns, g.joined_mid_run);
  }
}

void Agent::ReadMarkers(TimeNs now) {
  TakeAttachedRings();
  for (auto& g : gpus_) {
    if (!g.markers) continue;
    JobMarkers& m = *g.markers;
    std::vector<Marker> fresh;
    m.ring->Drain(fresh);
    m.builder->Add(std::move(fresh));
    std::vector<MarkedStep> finished = m.builder->TakeFinished();
    std::vector<RunPhase> phases = m.builder->TakeRunPhases();
    if (g.marked_ledger) {
      // The GPU's own process's timeline: one of its processes that marks
      // steps (a job of several ranks writes one ring), else the first that does.
      if (g.ledger_pid == 0)
        for (const auto& step : finished)
          if (std::find(g.pids.begin(), g.pids.end(), step.pid) != g.pids.end()) {
            g.ledger_pid = step.pid;
            break;
          }
      if (g.ledger_pid == 0 && !finished.empty()) g.ledger_pid = finished.front().pid;
      std::vector<MarkedStep> own;
      for (const auto& step : finished)
        if (step.pid == g.ledger_pid) own.push_back(step);
      std::vector<RunPhase> own_phases;
      for (const auto& p : phases)
        if (g.ledger_pid == 0 || p.pid == g.ledger_pid ||
            std::find(g.pids.begin(), g.pids.end(), p.pid) != g.pids.end())
          own_phases.push_back(p);
      g.marked_ledger->Add(std::move(own), std::move(own_phases));
      // Markers written before this drain are all in: what began before the
      // builder's open and held steps and phases is final.
      g.marked_ledger->Advance(m.builder->SettledBefore(now - 10 * kNsPerMs));
    }
    for (auto& step : finished) m.steps.push_back(std::move(step));
    // Steps reach the window a hold late: they are kept for the window and the hold.
    while (!m.steps.empty() && m.steps.front().span.end < now - options_.window_ns - MarkerHold()) m.steps.pop_front();
  }
}

namespace {

/// The job's memory growth over the window, from the same analysis `diagnose`
/// makes of its steps: the GPU's process (`pid`, else the first that sampled).
void NoteMemoryGrowth(const Diagnosis& dx, uint32_t pid, GpuJudgement& j) {
  if (dx.recordings.empty()) return;
  const StepMemoryAnalysis& m = dx.recordings.front().step_memory;
  const ProcessMemory* p = nullptr;
  for (const auto& q : m.processes)
    if (p == nullptr || q.pid == pid) p = &q;
  if (p == nullptr) return;
  const bool gpu = p->device >= 0 && p->gpu.points > 0;
  const MemoryTrend& t = gpu ? p->gpu : p->host;
  if (t.points == 0) return;
  j.memory_growth_bytes_per_hour = t.bytes_per_hour;
  j.memory_kind = gpu ? "gpu" : "host";
  j.memory_creeping = t.creeping;
}

}  // namespace

Agent::Agent(AgentOptions options) : options_(std::move(options)), window_(options_.window_ns) {}

Agent::~Agent() { Stop(); }

void Agent::Start() {
  started_ = WallNs();
  if (!options_.pod_resources_socket.empty()) pod_thread_ = std::thread([this] { PodLoop(); });
  Tick(started_);  // the first page is there before the first scrape
  thread_ = std::thread([this] { Loop(); });
}

void Agent::PodLoop() {
  PodResourcesClient client(options_.pod_resources_socket);
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_) {
    lock.unlock();
    auto pods = client.List(2000);
    {
      std::lock_guard<std::mutex> pods_lock(pods_mutex_);
      if (pods.ok()) {
        pods_ = std::make_shared<const PodAllocations>(std::move(*pods));
        pods_status_.clear();
      } else {
        // The last answer stays: a kubelet restarting does not unname every job.
        pods_status_ = pods.status().message();
      }
    }
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::nanoseconds(options_.pod_refresh_ns), [this] { return stop_; });
  }
}

void Agent::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (pod_thread_.joinable()) pod_thread_.join();
}

void Agent::Loop() {
  // A steady tick on the monotonic clock: a slow pass (a judgement, a slow
  // NVML call) delays one tick, never shifts the schedule; missed ticks are skipped.
  auto next = std::chrono::steady_clock::now() + std::chrono::nanoseconds(options_.interval_ns);
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_) {
    if (stop_cv_.wait_until(lock, next, [this] { return stop_; })) break;
    lock.unlock();
    Tick(WallNs());
    lock.lock();
    const auto now = std::chrono::steady_clock::now();
    next += std::chrono::nanoseconds(options_.interval_ns);
    while (next <= now) next += std::chrono::nanoseconds(options_.interval_ns);
  }
}

std::shared_ptr<const std::string> Agent::Page(Exposition::Format format) const {
  std::lock_guard<std::mutex> lock(page_mutex_);
  return format == Exposition::Format::kOpenMetrics ? page_openmetrics_ : page_text_;
}

bool Agent::Healthy(std::string* why) const {
  const int64_t last = last_tick_ns_.load();
  const int64_t late = MonotonicNs() - last;
  const int64_t allowed = std::max<int64_t>(3 * options_.interval_ns, 5 * kNsPerS);
  if (last != 0 && late <= allowed) return true;
  *why = last == 0 ? "the sampling loop has not run yet"
                   : fmt::format("the sampling loop last ran {:.1f} s ago (interval {:.1f} s)", Seconds(late),
                                 Seconds(options_.interval_ns));
  return false;
}

void Agent::CloseNvml() {
  sampler_.reset();
  nvml_.reset();
  live_.reset();
  gpus_.clear();
  window_ = SampleWindow(options_.window_ns);
}

void Agent::OpenNvml(TimeNs now) {
  next_open_ = now + options_.reopen_every_ns;
  auto lib = NvmlLibrary::Load(options_.nvml_library);
  if (!lib.ok()) {
    nvml_status_ = lib.status().message();
    return;
  }
  auto live = std::make_unique<Recording>();
  live->format = "nvml";
  live->clock_is_absolute = true;
  auto sampler = NvmlSampler::Open(**lib, *live);
  if (!sampler.ok()) {
    nvml_status_ = sampler.status().message();
    return;
  }
  nvml_ = std::move(*lib);
  live_ = std::move(live);
  sampler_ = std::make_unique<NvmlSampler>(std::move(*sampler));
  ++nvml_opens_;
  nvml_status_.clear();
  gpus_.assign(live_->metrics.devices.size(), GpuState{});
  for (auto& g : gpus_) g.latest.fill(NaN());
  window_ = SampleWindow(options_.window_ns);
  Watch(*live_);
  next_attribution_ = now;
  next_judgement_ = now + options_.judge_every_ns;
}

void Agent::Watch(Recording& live) {
  live.metrics.sketch = false;  // verdicts come from the window; nothing reads the live sketches
  live.metrics.observer = [this](size_t device, Metric m, TimeNs t, double value) {
    window_.Add(device, m, t, value);
    // A dcgm-exporter's GPUs appear as its pages name them.
    if (device >= gpus_.size()) {
      GpuState fresh;
      fresh.latest.fill(NaN());
      gpus_.resize(device + 1, fresh);
    }
    GpuState& g = gpus_[device];
    g.latest[static_cast<size_t>(m)] = value;
    ++samples_;
    // Each busy sample stands for the time since the one before (the first for
    // one interval), capped at four intervals so a stall does not count as
    // observed time.
    if (m == Metric::kGpuUtil) g.has_util = true;
    if (m == Metric::kGpuUtil || (m == Metric::kGrEngineActive && !g.has_util)) {
      const TimeNs cap = 4 * options_.interval_ns;
      const TimeNs covered = g.last_busy_t > 0 && t > g.last_busy_t ? std::min(t - g.last_busy_t, cap)
                                                                     : (g.last_busy_t == 0 ? options_.interval_ns : 0);
      g.sampled_seconds += Seconds(covered);
      g.last_busy_t = std::max(g.last_busy_t, t);
      g.utilization_ledger.Add(covered, value);
    }
  };
}

void Agent::OpenDcgmExporter(TimeNs now) {
  next_open_ = now + options_.reopen_every_ns;
  auto live = std::make_unique<Recording>();
  live->format = "dcgm-exporter";
  live->clock_is_absolute = true;
  gpus_.clear();
  window_ = SampleWindow(options_.window_ns);
  Watch(*live);
  auto source = DcgmExporterSource::Open(options_.dcgm_exporter_url, now, *live);
  if (!source.ok()) {
    nvml_status_ = source.status().message();
    gpus_.clear();
    window_ = SampleWindow(options_.window_ns);
    return;
  }
  live_ = std::move(live);
  dcgm_ = std::move(*source);
  ++nvml_opens_;
  nvml_status_.clear();
  next_attribution_ = now;
  next_judgement_ = now + options_.judge_every_ns;
}

void Agent::Attribute(TimeNs now) {
  // Every process on a GPU counts: the agent has no one job of its own.
  if (sampler_) sampler_->SampleProcesses(now, [](unsigned int) { return true; }, *live_);
  std::shared_ptr<const PodAllocations> pods;
  {
    std::lock_guard<std::mutex> lock(pods_mutex_);
    pods = pods_;  // the kubelet's last answer, shared, not copied
  }
  for (size_t d = 0; d < gpus_.size(); ++d) {
    GpuState& g = gpus_[d];
    if (g.lost) continue;
    if (options_.view_history > 0 && sampler_) {
      // `top` shows each process by name: read once per attribution, not every tick.
      g.processes.clear();
      for (unsigned int pid : sampler_->ProcessIds(d)) g.processes.push_back({pid, ProcessName(pid, options_.proc_root)});
    }
    JobIdentity job;
    if (sampler_) {
      g.pids = sampler_->ProcessIds(d);
      job = JobOfProcesses(g.pids, options_.proc_root);
    } else if (d < live_->metrics.devices.size()) {
      // A dcgm-exporter names the pod (its Kubernetes mapping) or the HPC job.
      const auto& labels = live_->metrics.devices[d].labels;
      auto label = [&](const char* k) {
        const auto it = labels.find(k);
        return it == labels.end() ? std::string() : it->second;
      };
      job.pod_name = label("pod");
      job.namespace_name = label("namespace");
      job.container_name = label("container");
      job.slurm_job = label("hpc_job");
    }
    // The kubelet names the pod the GPU is allocated to, with or without a
    // process of it on the GPU (held and idle counts too).
    if (pods && d < live_->metrics.devices.size())
      if (auto it = pods->find(live_->metrics.devices[d].uuid); it != pods->end()) {
        job.namespace_name = it->second.namespace_name;
        job.pod_name = it->second.pod;
        job.container_name = it->second.container;
      }
    const std::string key = job.Key();
    if (key == g.job_key) continue;
    // Another job (or none) on this GPU: its window, verdict, markers,
    // covered time and ledger start again (a new series, from zero); the
    // ended job's ledger is served a while longer.
    if (attributed_once_) EndLedger(d, now);
    g.utilization_ledger = analysis::UtilizationLedger{};
    g.marked_ledger.reset();
    g.ledger_pid = 0;
    window_.Forget(d);
    g.judgement = GpuJudgement{};
    g.sampled_seconds = 0;
    g.markers.reset();
    g.job = std::move(job);
    g.job_key = key;
    if (sampler_ && g.job.pid != 0) FindMarkers(d);
  }
  attributed_once_ = true;
  ReadMarkers(now);
  next_attribution_ = now + kNsPerS;
}

void Agent::Tick(TimeNs now) {
  ++ticks_;
  const bool from_exporter = !options_.dcgm_exporter_url.empty();
  if (from_exporter) {
    if (!dcgm_ && now >= next_open_) OpenDcgmExporter(now);
    else if (dcgm_) {
      dcgm_->Sample(now, *live_);
      nvml_status_ = dcgm_->last_error();
    }
  } else if (!sampler_ && now >= next_open_) {
    OpenNvml(now);
  }
  if (sampler_) {
    sampler_->Sample(now, *live_);
    size_t lost = 0;
    for (size_t d = 0; d < gpus_.size(); ++d) {
      const bool gone = sampler_->Lost(d);
      if (gone && !gpus_[d].lost) {
        window_.Forget(d);
        gpus_[d].judgement = GpuJudgement{};
        gpus_[d].latest.fill(NaN());
      }
      gpus_[d].lost = gone;
      gpus_[d].failures = gone ? decltype(gpus_[d].failures){} : sampler_->Failures(d);
      lost += gone ? 1 : 0;
    }
    if (lost > 0 && lost == gpus_.size()) {
      // Every GPU gone (a driver reload, NVML restarted): open NVML again later.
      CloseNvml();
      nvml_status_ = "every GPU was lost; NVML is opened again every " +
                     fmt::format("{:g}", Seconds(options_.reopen_every_ns)) + " s";
      next_open_ = now + options_.reopen_every_ns;
    }
  }
  const bool sampling = sampler_ || dcgm_;
  if (sampling && now >= next_attribution_) Attribute(now);
  window_.Prune(now);
  if (sampling && now >= next_judgement_) {
    Judge(now);
    next_judgement_ = now + options_.judge_every_ns;
  }
  if (options_.render_page) Render(now);
  if (options_.view_history > 0) PublishView(now);
  last_tick_ns_.store(MonotonicNs());
}

void Agent::PublishView(TimeNs now) {
  auto view = std::make_shared<AgentView>();
  view->at = now;
  // NVML sampling: nothing to say; a dcgm-exporter's last error, or why nothing samples.
  view->source_status = sampler_ ? std::string() : nvml_status_;
  view->interval_ns = options_.interval_ns;
  view->window_ns = options_.window_ns;
  for (size_t d = 0; d < gpus_.size(); ++d) {
    GpuState& g = gpus_[d];
    for (size_t k = 0; k < kNumViewSeries; ++k) {
      auto& ring = g.recent[k];
      ring.push_back(g.lost ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(g.latest[static_cast<size_t>(kViewSeries[k])]));
      while (ring.size() > options_.view_history) ring.pop_front();
    }
    GpuView v;
    if (live_ && d < live_->metrics.devices.size()) {
      const MetricDevice& facts = live_->metrics.devices[d];
      v.label = facts.Label();
      v.name = facts.name;
      v.uuid = facts.uuid;
      v.power_limit_w = facts.power_limit_w;
      v.memory_total_bytes = facts.memory_total_bytes;
    }
    v.lost = g.lost;
    v.job = g.job;
    v.latest = g.latest;
    v.judgement = g.judgement;
    for (size_t k = 0; k < kNumViewSeries; ++k) v.recent[k].assign(g.recent[k].begin(), g.recent[k].end());
    if (!g.lost) v.processes = g.processes;
    view->gpus.push_back(std::move(v));
  }
  std::lock_guard<std::mutex> lock(page_mutex_);
  view_ = std::move(view);
}

std::shared_ptr<const AgentView> Agent::View() const {
  std::lock_guard<std::mutex> lock(page_mutex_);
  return view_;
}

void Agent::Judge(TimeNs /*now*/) {
  ++judgements_;
  for (size_t d = 0; d < gpus_.size(); ++d) {
    GpuState& g = gpus_[d];
    if (g.lost) continue;
    const MetricDevice& facts = live_->metrics.devices[d];
    Recording r;
    r.format = "nvml";
    r.clock_is_absolute = true;
    r.source_path = "agent window, " + facts.Label();
    auto pos = r.metrics.FindOrAdd(facts.index, facts.uuid, facts.pci_bus_id, facts.mig_instance);
    if (!pos) continue;
    MetricDevice& dev = r.metrics.devices[*pos];
    dev.name = facts.name;
    dev.driver_version = facts.driver_version;
    dev.power_limit_w = facts.power_limit_w;
    dev.max_sm_clock_mhz = facts.max_sm_clock_mhz;
    dev.memory_total_bytes = facts.memory_total_bytes;
    dev.mig_mode = facts.mig_mode;
    dev.mig_profile = facts.mig_profile;
    window_.Replay(d, r.metrics, *pos);
    // The job's own step times, when it marks them: the same step-marker rules
    // as `diagnose` (data wait, step time) join the metric rules.
    if (g.markers) r.marked_steps.assign(g.markers->steps.begin(), g.markers->steps.end());
    GpuJudgement j;
    // A MIG instance has no utilization.gpu (NVML does not report it per
    // instance): its busy share is the graphics engine's activity (GPM), as
    // `diagnose` reads a MIG capture.
    const bool has_util = dev.Has(Metric::kGpuUtil) && dev.Get(Metric::kGpuUtil).count() > 0;
    const Metric busy = has_util || !dev.Has(Metric::kGrEngineActive) ? Metric::kGpuUtil : Metric::kGrEngineActive;
    const SeriesSketch& util = dev.Get(busy);
    j.window_covered_ns = util.count() > 0 ? util.CoveredTime() : 0;
    auto mean = [&](Metric m) { return dev.Has(m) ? dev.Get(m).mean() : NaN(); };
    j.util_percent = mean(busy);
    j.sm_active_percent = mean(Metric::kSmActive);
    j.tensor_active_percent = mean(Metric::kTensorActive);
    j.dram_active_percent = mean(Metric::kDramActive);
    // Fewer than 3 values: nothing to judge yet (a new GPU, a new job).
    if (util.count() >= 3) {
      Run run;
      run.recordings.push_back(std::move(r));
      DiagnoseOptions o;
      o.workload = options_.workload;
      o.price_per_gpu_hour = options_.price_per_gpu_hour;
      const Diagnosis dx = Diagnose(run, o);
      // Judged and nothing found is a verdict of its own ("none"), so a
      // healthy GPU keeps its gputriage_finding series and its place in
      // counts, dashboards and timelines.
      j.verdict = "none";
      if (!dx.findings.empty()) {
        const Finding& lead = dx.findings.front();
        j.verdict = lead.verdict;
        j.severity = lead.severity;
        j.title = lead.title;
        for (const auto& f : dx.findings)
          if (f.gain) {
            j.gain_percent = f.gain->speedup_percent;
            j.gain_bounded_by = f.gain->bounded_by;
            break;
          }
      }
      NoteMemoryGrowth(dx, g.ledger_pid, j);
      if (dx.cost.available && !dx.cost.devices.empty()) {
        const DeviceCost& c = dx.cost.devices.front();
        j.price_per_hour = c.price_per_hour * c.board_share;
        j.price_basis = dx.cost.price_basis;
        if (std::isfinite(j.util_percent)) j.idle_usd_per_hour = j.price_per_hour * (1 - j.util_percent / 100);
      }
    }
    g.judgement = std::move(j);
  }
}

std::vector<std::pair<std::string, double>> Agent::LedgerGpuSeconds(size_t d) const {
  const GpuState& g = gpus_[d];
  double share = 1.0;
  if (live_ && d < live_->metrics.devices.size() && live_->metrics.devices[d].mig_instance >= 0)
    share = MigBoardShare(live_->metrics.devices[d].mig_profile, live_->metrics.devices[d].name);
  std::vector<std::pair<std::string, double>> out;
  const auto& names = analysis::LedgerBucketNames();
  const analysis::LedgerSeconds& seconds =
      g.marked_ledger ? g.marked_ledger->seconds() : g.utilization_ledger.seconds();
  for (size_t b = 0; b < names.size(); ++b) {
    const bool shown = g.marked_ledger ? analysis::MarkedLedger::Shows(static_cast<int>(b))
                                       : analysis::UtilizationLedger::Shows(static_cast<int>(b));
    if (shown) out.emplace_back(names[b], seconds[b] * share);
  }
  return out;
}

void Agent::EndLedger(size_t d, TimeNs now) {
  GpuState& g = gpus_[d];
  if (!live_ || d >= live_->metrics.devices.size() || g.last_busy_t == 0) return;
  if (g.marked_ledger && g.markers) {
    // The job has gone: its held steps and phases are final now.
    MarkedSteps rest = g.markers->builder->Finish();
    std::vector<MarkedStep> own;
    for (auto& step : rest.steps)
      if (g.ledger_pid == 0 || step.pid == g.ledger_pid) own.push_back(std::move(step));
    g.marked_ledger->Add(std::move(own), std::move(rest.run_phases));
    g.marked_ledger->End(now);
  }
  g.utilization_ledger.End();
  EndedLedger ended;
  ended.labels = With(GpuLabels(live_->metrics.devices[d], options_.hostname), g.job.ToLabels());
  ended.gpu_seconds = LedgerGpuSeconds(d);
  // Long enough for scrapes at any usual interval to see the last values.
  ended.served_until = now + std::max<TimeNs>(options_.window_ns, 120 * kNsPerS);
  ended_ledgers_.push_back(std::move(ended));
}

void Agent::Render(TimeNs now) {
  Exposition e;
  const std::string& host = options_.hostname;
  e.Family("gputriage_agent", Exposition::Type::kInfo, "The gputriage agent: version and sampling settings.");
  e.Sample({{"version", kGputriageVersion},
            {"interval_seconds", fmt::format("{:g}", Seconds(options_.interval_ns))},
            {"window_seconds", fmt::format("{:g}", Seconds(options_.window_ns))},
            {"hostname", host}},
           1);
  if (options_.dcgm_exporter_url.empty()) {
    e.Family("gputriage_nvml_up", Exposition::Type::kGauge,
             "1 when NVML is loaded and sampling; 0 with the reason in the `error` label.");
    e.Sample({{"error", nvml_status_}, {"hostname", host}}, sampler_ ? 1 : 0);
  } else {
    e.Family("gputriage_dcgm_exporter_up", Exposition::Type::kGauge,
             "1 when the last scrape of the local dcgm-exporter succeeded; 0 with the reason in `error`.");
    e.Sample({{"url", options_.dcgm_exporter_url}, {"error", nvml_status_}, {"hostname", host}},
             dcgm_ && nvml_status_.empty() ? 1 : 0);
  }
  if (!options_.pod_resources_socket.empty()) {
    std::lock_guard<std::mutex> lock(pods_mutex_);
    e.Family("gputriage_pod_resources_up", Exposition::Type::kGauge,
             "1 when the kubelet's pod-resources socket answered the last List; 0 with the reason in `error`.");
    e.Sample({{"error", pods_status_}, {"hostname", host}}, pods_status_.empty() ? 1 : 0);
  }
  e.Family("gputriage_agent_nvml_opens", Exposition::Type::kCounter, "Times NVML was opened (again after a failure).");
  e.Sample({{"hostname", host}}, static_cast<double>(nvml_opens_));
  e.Family("gputriage_agent_ticks", Exposition::Type::kCounter, "Sampling ticks.");
  e.Sample({{"hostname", host}}, static_cast<double>(ticks_));
  e.Family("gputriage_agent_samples", Exposition::Type::kCounter, "Values sampled.");
  e.Sample({{"hostname", host}}, static_cast<double>(samples_));
  e.Family("gputriage_agent_judgements", Exposition::Type::kCounter, "Times the verdicts were drawn.");
  e.Sample({{"hostname", host}}, static_cast<double>(judgements_));
  e.Family("gputriage_agent_scrapes", Exposition::Type::kCounter, "Scrapes of /metrics answered.");
  e.Sample({{"hostname", host}}, static_cast<double>(scrapes_.load(std::memory_order_relaxed)));
  e.Family("gputriage_agent_window_values", Exposition::Type::kGauge, "Values held in the sliding windows.");
  e.Sample({{"hostname", host}}, static_cast<double>(window_.values()));
  e.Family("gputriage_agent_uptime_seconds", Exposition::Type::kGauge, "Seconds since the agent started.");
  e.Sample({{"hostname", host}}, std::max<double>(0, Seconds(now - started_)));
  if (!live_) {
    Publish(e);
    return;
  }
  const auto& devices = live_->metrics.devices;
  const size_t n = std::min(gpus_.size(), devices.size());
  // Each GPU's two label sets, built once per page (not once per series).
  std::vector<Labels> dcgm_labels(n), own_labels(n);
  for (size_t d = 0; d < n; ++d) {
    dcgm_labels[d] = DcgmLabels(devices[d], host);
    if (!gpus_[d].job.pod_name.empty()) {  // dcgm-exporter's Kubernetes labels
      dcgm_labels[d].emplace_back("pod", gpus_[d].job.pod_name);
      dcgm_labels[d].emplace_back("namespace", gpus_[d].job.namespace_name);
      dcgm_labels[d].emplace_back("container", gpus_[d].job.container_name);
    }
    if (!gpus_[d].job.pod_uid.empty()) dcgm_labels[d].emplace_back("pod_uid", gpus_[d].job.pod_uid);
    if (!gpus_[d].job.slurm_job.empty()) dcgm_labels[d].emplace_back("hpc_job", gpus_[d].job.slurm_job);
    own_labels[d] = With(GpuLabels(devices[d], host), gpus_[d].job.ToLabels());
  }
  // From a dcgm-exporter, its DCGM series are Prometheus' already: not served twice.
  for (const auto& s : kDcgmSeries) {
    if (dcgm_) break;
    e.Family(s.name, Exposition::Type::kGauge, s.help);
    for (size_t d = 0; d < n; ++d) {
      const double v = gpus_[d].latest[static_cast<size_t>(s.metric)];
      if (gpus_[d].lost || !std::isfinite(v)) continue;
      e.Sample(dcgm_labels[d], v * s.scale);
    }
  }
  auto per_gpu = [&](const char* name, Exposition::Type type, const char* help, auto value_of) {
    e.Family(name, type, help);
    for (size_t d = 0; d < n; ++d) {
      if (gpus_[d].lost) continue;
      const auto [extra, value] = value_of(gpus_[d]);
      if (!std::isfinite(value)) continue;
      e.Sample(With(own_labels[d], extra), value);
    }
  };
  const std::string window = fmt::format("{:g}s", Seconds(options_.window_ns));
  using Pair = std::pair<Labels, double>;
  per_gpu("gputriage_gpu_utilization_percent", Exposition::Type::kGauge,
          "utilization.gpu (share of time a kernel runs), time-weighted over the window.",
          [&](const GpuState& g) { return Pair{{{"window", window}}, g.judgement.util_percent}; });
  per_gpu("gputriage_sm_active_percent", Exposition::Type::kGauge, "SM activity, time-weighted over the window.",
          [&](const GpuState& g) { return Pair{{{"window", window}}, g.judgement.sm_active_percent}; });
  per_gpu("gputriage_tensor_active_percent", Exposition::Type::kGauge,
          "Tensor pipe activity, time-weighted over the window.",
          [&](const GpuState& g) { return Pair{{{"window", window}}, g.judgement.tensor_active_percent}; });
  per_gpu("gputriage_dram_active_percent", Exposition::Type::kGauge,
          "DRAM interface activity, time-weighted over the window.",
          [&](const GpuState& g) { return Pair{{{"window", window}}, g.judgement.dram_active_percent}; });
  per_gpu("gputriage_window_steps", Exposition::Type::kGauge,
          "Training steps the job marked in the window (step markers, read from its ring; absent without one).",
          [&](const GpuState& g) {
            return Pair{{}, g.markers ? static_cast<double>(g.markers->steps.size()) : NaN()};
          });
  per_gpu("gputriage_job_memory_growth_bytes_per_hour", Exposition::Type::kGauge,
          "How fast the job's memory at its step ends grows (Theil-Sen slope over the window's sampled steps, per "
          "hour at its step rate): its GPU allocator's allocated bytes (memory=\"gpu\") or its resident set "
          "(memory=\"host\"); creeping=\"true\" where memory_creep's tests pass. Absent without memory samples.",
          [&](const GpuState& g) {
            return Pair{{{"window", window}, {"memory", g.judgement.memory_kind},
                         {"creeping", g.judgement.memory_creeping ? "true" : "false"}},
                        g.judgement.memory_growth_bytes_per_hour};
          });
  per_gpu("gputriage_window_covered_seconds", Exposition::Type::kGauge,
          "Seconds of the window the last judgement rested on (less than the window after a job starts).",
          [&](const GpuState& g) {
            return Pair{{}, g.judgement.verdict.empty() && g.judgement.window_covered_ns == 0
                                ? NaN()
                                : Seconds(g.judgement.window_covered_ns)};
          });
  per_gpu("gputriage_gpu_sampled_seconds", Exposition::Type::kCounter,
          "Seconds the GPU's busy samples cover under its current job (each sample stands for the time since the "
          "one before, at most four intervals): fleet's GPU-hours are its increase.",
          [&](const GpuState& g) { return Pair{{}, g.last_busy_t > 0 ? g.sampled_seconds : NaN()}; });
  per_gpu("gputriage_finding", Exposition::Type::kGauge,
          "The leading verdict for the GPU's window, as `diagnose` would draw it (value 1); verdict=\"none\" when "
          "it was judged and nothing was found.",
          [&](const GpuState& g) {
            const bool none = g.judgement.verdict == "none";
            return Pair{{{"verdict", g.judgement.verdict}, {"severity", none ? "none" : SeverityName(g.judgement.severity)}},
                        g.judgement.verdict.empty() ? NaN() : 1.0};
          });
  per_gpu("gputriage_price_usd_per_hour", Exposition::Type::kGauge,
          "The GPU's price per hour the idle dollars use (`basis`: the flag or the dated table).",
          [&](const GpuState& g) { return Pair{{{"basis", g.judgement.price_basis}}, g.judgement.price_per_hour}; });
  per_gpu("gputriage_idle_usd_per_hour", Exposition::Type::kGauge,
          "Dollars per hour paid for the GPU's idle time: price x (1 - utilization over the window).",
          [&](const GpuState& g) { return Pair{{}, g.judgement.idle_usd_per_hour}; });
  per_gpu("gputriage_expected_gain_percent", Exposition::Type::kGauge,
          "Throughput gain expected from the leading fix (`bounded_by`: what limits it next).",
          [&](const GpuState& g) {
            return Pair{{{"bounded_by", g.judgement.gain_bounded_by}},
                        g.judgement.gain_percent ? *g.judgement.gain_percent : NaN()};
          });
  // The goodput ledger: GPU-seconds by bucket since the job came to the GPU.
  e.Family("gputriage_ledger_gpu_seconds", Exposition::Type::kCounter,
           "GPU-seconds of the job on this GPU by goodput-ledger bucket (docs/ledger.md), from its step markers "
           "(productive, data_wait, ...) or, without markers, from its utilization (idle phases, and unsplit).");
  std::erase_if(ended_ledgers_, [&](const EndedLedger& l) { return l.served_until < now; });
  for (const auto& l : ended_ledgers_)
    for (const auto& [bucket, seconds] : l.gpu_seconds) e.Sample(With(l.labels, {{"bucket", bucket}}), seconds);
  for (size_t d = 0; d < n; ++d) {
    if (gpus_[d].lost || gpus_[d].last_busy_t == 0) continue;
    for (const auto& [bucket, seconds] : LedgerGpuSeconds(d)) e.Sample(With(own_labels[d], {{"bucket", bucket}}), seconds);
  }
  e.Family("gputriage_gpu_metric_error", Exposition::Type::kGauge,
           "1 for each NVML call failing on a GPU now (`metric`: the call, `error`: the driver's answer); a GPU "
           "whose utilization fails has no verdict or idle dollars until it reads again.");
  for (size_t d = 0; d < n; ++d)
    for (const auto& [metric, why] : gpus_[d].failures) e.Sample(With(GpuLabels(devices[d], host), {{"metric", metric}, {"error", why}}), 1);
  e.Family("gputriage_gpu_lost", Exposition::Type::kGauge,
           "1 for a GPU that fell off the bus (NVML: GPU is lost); its other series stop.");
  for (size_t d = 0; d < n; ++d)
    if (gpus_[d].lost) e.Sample(GpuLabels(devices[d], host), 1);
  Publish(e);
}

void Agent::Publish(const Exposition& e) {
  auto text = std::make_shared<const std::string>(e.Render(Exposition::Format::kPrometheusText));
  auto om = std::make_shared<const std::string>(e.Render(Exposition::Format::kOpenMetrics));
  std::lock_guard<std::mutex> lock(page_mutex_);
  page_text_ = std::move(text);
  page_openmetrics_ = std::move(om);
}

}  // namespace gputriage
