// `gputriage agent`: a node's long-running sampler and judge. It samples every
// GPU through NVML (GPM on Hopper) on a steady tick, keeps the last window of
// values (sample_window.h), attributes each GPU to the job whose processes run
// there (job_identity.h), judges each GPU's window with the same rules as
// `diagnose` every few seconds, and renders the whole state as one page of
// Prometheus series that scrapes copy (exposition.h): DCGM's names and labels
// where DCGM has the metric, and gputriage_* series for the window, the
// verdict, the idle dollars and the expected gain.
//
// Faults are states, never exits: NVML failing to load or initialise is
// retried; a GPU that falls off the bus is a gputriage_gpu_lost series until
// NVML is opened again; a GPU whose job changes starts a new window, so a
// verdict is never about a job that has gone.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"
#include "src/agent/exposition.h"
#include "src/agent/job_identity.h"
#include "src/agent/pod_resources.h"
#include "src/agent/sample_window.h"
#include "src/analysis/live_ledger.h"

namespace gputriage {

class DcgmExporterSource;
class MarkerRing;
class StepBuilder;
class NvmlLibrary;
class NvmlSampler;
class RingAttacher;

struct AgentOptions {
  std::string nvml_library;                // "" = $GPUTRIAGE_NVML_LIBRARY, then the driver's
  // Instead of NVML: a local dcgm-exporter's page, scraped every tick (a node
  // where DCGM owns the profiling counters). Its DCGM series are not served
  // again (Prometheus scrapes the exporter); the agent adds gputriage_*.
  std::string dcgm_exporter_url;
  TimeNs interval_ns = kNsPerS;            // sampling tick (the sawtooth at 1 s resolution)
  TimeNs window_ns = 300 * kNsPerS;        // what a verdict is about
  TimeNs judge_every_ns = 15 * kNsPerS;    // how often the verdicts are drawn again
  TimeNs reopen_every_ns = 30 * kNsPerS;   // NVML unusable, or a GPU lost: try again this often
  WorkloadClass workload = WorkloadClass::kUnspecified;
  std::optional<double> price_per_gpu_hour;  // else the dated price table, by GPU model
  std::string hostname;
  std::string proc_root = "/proc";
  // The kubelet's pod-resources socket ("" : none); asked every pod_refresh_ns
  // on a thread of its own, so a slow kubelet never delays a sampling tick.
  std::string pod_resources_socket;
  TimeNs pod_refresh_ns = 10 * kNsPerS;
  // `gputriage top`: each GPU's last values kept for View() (sparklines), and
  // no Prometheus page rendered (nobody scrapes it).
  size_t view_history = 0;  // ticks kept per GPU; 0: no View()
  bool render_page = true;
};

/// What the agent says about one GPU, as of its last judgement.
struct GpuJudgement {
  std::string verdict;        // the leading finding's verdict; "none" when judged without one; "" before the first judgement
  Severity severity = Severity::kInfo;
  std::string title;
  TimeNs window_covered_ns = 0;
  double util_percent = NAN;  // time-weighted over the window
  double sm_active_percent = NAN;
  double tensor_active_percent = NAN;
  double dram_active_percent = NAN;
  double price_per_hour = NAN;
  std::string price_basis;
  double idle_usd_per_hour = NAN;  // price × (1 − utilization)
  std::optional<double> gain_percent;  // the leading finding's expected throughput gain
  std::string gain_bounded_by;
  // Memory at the job's step ends over the window (its markers' memory samples):
  // the Theil-Sen slope per hour, on the GPU's allocator where it reports one,
  // else the host's resident set; NaN without enough sampled steps.
  double memory_growth_bytes_per_hour = NAN;
  std::string memory_kind;  // "gpu", "host"
  bool memory_creeping = false;
};

/// The series `top` draws as sparklines, in this order.
inline constexpr Metric kViewSeries[] = {Metric::kGpuUtil, Metric::kSmActive, Metric::kTensorActive, Metric::kDramActive};
inline constexpr size_t kNumViewSeries = 4;

/// One process on a GPU, as NVML lists it.
struct GpuProcessView {
  unsigned int pid = 0;
  std::string command;  // /proc/PID/comm
};

/// One GPU as of the last tick (a copy: the sampling thread goes on).
struct GpuView {
  std::string label;  // "GPU 0", "GPU 0 / MIG 1g.10gb (13)"
  std::string name;
  std::string uuid;
  double power_limit_w = 0;       // as NVML reported it once; 0 unknown
  int64_t memory_total_bytes = 0;
  bool lost = false;
  JobIdentity job;
  std::vector<GpuProcessView> processes;
  std::array<double, kNumMetrics> latest{};  // NaN: not sampled
  std::array<std::vector<float>, kNumViewSeries> recent;  // oldest first; NaN where not sampled
  GpuJudgement judgement;
};

struct AgentView {
  TimeNs at = 0;
  std::string source_status;  // "" while sampling, else why not (NVML failed to load, ...)
  TimeNs interval_ns = 0;
  TimeNs window_ns = 0;
  std::vector<GpuView> gpus;
};

class Agent {
 public:
  explicit Agent(AgentOptions options);
  ~Agent();  // stops the sampling thread
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// Starts sampling (in its own thread) and renders the first page at once.
  void Start();
  void Stop();

  /// The latest page, in either format (cheap: a shared, immutable string).
  std::shared_ptr<const std::string> Page(Exposition::Format format) const;
  /// Healthy while the sampling loop keeps its tick; `why` says what is wrong.
  bool Healthy(std::string* why) const;
  /// The GPUs as of the last tick (with AgentOptions::view_history); null before the first.
  std::shared_ptr<const AgentView> View() const;
  /// Counted in gputriage_agent_scrapes_total.
  void CountScrape() { scrapes_.fetch_add(1, std::memory_order_relaxed); }

 private:
  // A job's step markers, when it writes them (a job started under
  // `gputriage record`, or given a ring): read through /proc/PID/fd/N as a
  // second reader, its steps kept for the window.
  struct JobMarkers {
    std::string path;
    std::unique_ptr<MarkerRing> ring;
    std::unique_ptr<StepBuilder> builder;
    std::deque<MarkedStep> steps;  // finished, ending within the window
    ~JobMarkers();
  };
  struct GpuState {
    JobIdentity job;
    std::shared_ptr<JobMarkers> markers;  // shared: a GPU's state is copied as GPUs appear
    std::string job_key;
    std::array<double, kNumMetrics> latest;  // NaN: no value yet
    GpuJudgement judgement;
    bool lost = false;
    std::array<std::deque<float>, kNumViewSeries> recent;  // view_history ticks
    std::vector<GpuProcessView> processes;  // with view_history: as listed at the last attribution
    std::vector<std::pair<std::string, std::string>> failures;  // NVML calls failing now: (call, why)
    // The time its busy samples cover under the current job (a counter: fleet
    // takes GPU-hours from its increase, not from counting query steps).
    double sampled_seconds = 0;
    TimeNs last_busy_t = 0;
    bool has_util = false;  // utilization.gpu arrives (else GR engine activity, MIG, stands for it)
    // The job's goodput ledger on this GPU, from its start here: from its step
    // markers when it writes them, else idle phases of its utilization.
    // Shared like `markers`: a GPU's state is copied as GPUs appear.
    std::shared_ptr<analysis::MarkedLedger> marked_ledger;
    analysis::UtilizationLedger utilization_ledger;
    uint32_t ledger_pid = 0;  // the process whose steps are this GPU's (one of its own, when it marks)
    std::vector<unsigned int> pids;  // on the GPU at the last attribution
    bool joined_mid_run = false;     // the job was running before the agent's first attribution
    TimeNs markers_asked_ns = 0;     // when its ring was asked for: the marked ledger's start
  };
  // A job's ledger after the job left its GPU: its final counters stay served
  // for a while, so the scrapes after its last steps see where it ended.
  struct EndedLedger {
    Labels labels;
    std::vector<std::pair<std::string, double>> gpu_seconds;  // by bucket
    TimeNs served_until = 0;
  };
  void Loop();
  void Tick(TimeNs now);
  void OpenNvml(TimeNs now);
  void OpenDcgmExporter(TimeNs now);
  void Watch(Recording& live);  // its values into the window and each GPU's latest
  void CloseNvml();
  void Attribute(TimeNs now);
  void FindMarkers(size_t d);
  void TakeAttachedRings();
  void ReadMarkers(TimeNs now);
  TimeNs MarkerHold() const;
  void Judge(TimeNs now);
  /// The GPU's ledger buckets in GPU-seconds (a MIG instance by its share).
  std::vector<std::pair<std::string, double>> LedgerGpuSeconds(size_t d) const;
  void EndLedger(size_t d, TimeNs now);
  void Render(TimeNs now);
  void Publish(const Exposition& e);
  void PublishView(TimeNs now);
  void PodLoop();

  const AgentOptions options_;
  // The sampling loop's own state (one thread).
  std::unique_ptr<NvmlLibrary> nvml_;
  std::unique_ptr<NvmlSampler> sampler_;
  std::unique_ptr<DcgmExporterSource> dcgm_;
  std::unique_ptr<Recording> live_;  // the sampler's recording: facts, and bounded sketches
  SampleWindow window_;
  std::vector<GpuState> gpus_;
  std::string nvml_status_ = "not opened yet";
  TimeNs next_open_ = 0;
  TimeNs next_attribution_ = 0;
  TimeNs next_judgement_ = 0;
  int64_t nvml_opens_ = 0;
  int64_t ticks_ = 0;
  int64_t judgements_ = 0;
  int64_t samples_ = 0;
  TimeNs started_ = 0;
  bool attributed_once_ = false;  // jobs found at the first attribution were running before the agent
  std::vector<EndedLedger> ended_ledgers_;
  std::unique_ptr<RingAttacher> ring_attacher_;  // made at the first job with a pid

  // Shared with the server's threads.
  mutable std::mutex page_mutex_;
  std::shared_ptr<const std::string> page_text_;
  std::shared_ptr<const std::string> page_openmetrics_;
  std::shared_ptr<const AgentView> view_;
  std::atomic<int64_t> scrapes_{0};
  std::atomic<int64_t> last_tick_ns_{0};

  // The pod-resources thread's answer.
  mutable std::mutex pods_mutex_;
  std::shared_ptr<const PodAllocations> pods_;
  std::string pods_status_ = "not asked yet";

  std::thread thread_;
  std::thread pod_thread_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

}  // namespace gputriage
