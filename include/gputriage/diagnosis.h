// The result model: what the analyses measured and the verdicts drawn from it.
// Every number a verdict uses is carried as Evidence with its unit, the threshold
// it was compared with and where it came from, so a user can check it.
#pragma once

#include <array>
#include <map>
#include <string_view>
#include <cmath>
#include <optional>
#include <string>
#include <algorithm>
#include <span>
#include <vector>

#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

// ---- Measurements ---------------------------------------------------------

/// Step-time categories in torch-tb-profiler's priority order: where several run
/// at once, the earlier category takes the time.
enum class StepCategory { kKernel, kMemcpy, kMemset, kCommunication, kRuntime, kDataLoader, kCpuExec, kOther };
constexpr int kNumStepCategories = 8;
const char* StepCategoryName(StepCategory c);

struct StepBreakdown {
  int64_t number = -1;      // ProfilerStep number, -1 for a whole-trace window
  Interval window;          // aligned to the device (see analysis/steps.cc)
  std::array<TimeNs, kNumStepCategories> ns{};
  // Of ns[kCommunication], the host's nccl:*/gloo:* spans with nothing on the
  // device (torch-tb-profiler counts both): the rest is collective kernels.
  TimeNs host_communication_ns = 0;
  TimeNs device_communication_ns() const {
    return ns[static_cast<size_t>(StepCategory::kCommunication)] - host_communication_ns;
  }
  // The copies that start in the step: their count, device time (overlaps with
  // kernels included) and bytes by direction (bytes the source recorded).
  int64_t copies = 0;
  TimeNs copy_device_ns = 0;
  TimeNs host_device_copy_ns = 0;  // of copy_device_ns, host↔device (HtoD, DtoH): transfers, not device-side moves
  int64_t pageable_copy_bytes = 0, pinned_copy_bytes = 0;  // host↔device bytes whose host memory the source names
  int64_t h2d_bytes = 0, d2h_bytes = 0, other_copy_bytes = 0;
  TimeNs total() const { return window.duration(); }
};

/// torch-tb-profiler's GPU summary for one device over the steps.
struct GpuMetrics {
  int device = -1;
  TimeNs window_ns = 0;
  TimeNs busy_ns = 0;                    // union of kernel intervals in the window
  double busy_percent = 0;               // "GPU Utilization"
  double sm_efficiency_percent = NAN;    // "Est. SM Efficiency"; NaN without blocks-per-SM data
  double achieved_occupancy_percent = NAN;  // "Est. Achieved Occupancy"; NaN without occupancy data
};

/// Why a device (or stream) sat idle: each idle nanosecond goes to one cause.
enum class IdleCause { kDataLoader, kHostWait, kLaunchOverhead, kSynchronization, kOther };
constexpr int kNumIdleCauses = 5;
const char* IdleCauseName(IdleCause c);

struct IdleBreakdown {
  std::array<TimeNs, kNumIdleCauses> ns{};
  int64_t gaps = 0;
  TimeNs total() const {
    TimeNs t = 0;
    for (auto v : ns) t += v;
    return t;
  }
};

/// The device's host_wait split by what the thread that launches its work was
/// doing, from an OS runtime trace (nsys --trace=osrt): inside an OS call
/// (waiting on a lock, a condition variable, a pipe, a file) or running (Python,
/// the framework, the launch path).
struct HostOsWaits {
  bool traced = false;        // the source traced OS runtime calls
  int64_t thread = -1;        // the thread that launched the most work
  TimeNs in_os_calls_ns = 0;  // of the device's host_wait (device_idle), that thread inside OS calls
  std::vector<std::pair<std::string, TimeNs>> calls;  // the same by call, longest first, at most 5
  /// The source has CPU samples (nsys --sample=cpu): the rest of the host_wait,
  /// where the thread was running, by the module its samples were in.
  bool sampled = false;
  int64_t running_samples = 0;
  std::vector<std::pair<std::string, int64_t>> running_modules;  // file names, most samples first, at most 5
};

struct StreamIdle {
  int device = -1;
  int stream = -1;
  TimeNs busy_ns = 0;
  IdleBreakdown idle;
};

struct KernelStat {
  std::string name;
  std::string kernel_class;  // KernelClassName
  std::string precision;     // PrecisionName
  bool tensor_cores = false;
  int64_t count = 0;
  TimeNs total_ns = 0;
  TimeNs min_ns = 0;
  TimeNs max_ns = 0;
  double mean_blocks_per_sm = NAN;
  double mean_occupancy_percent = NAN;
};

struct PrecisionStats {
  /// Matrix (GEMM, convolution, fused attention) kernel time by number format, ns,
  /// indexed by Precision.
  std::array<TimeNs, 10> matrix_ns{};
  TimeNs matrix_total_ns = 0;
  TimeNs kernel_total_ns = 0;
  TimeNs tensor_core_ns = 0;  // matrix time on tensor cores
  TimeNs gemm_ns = 0;         // of the matrix time, GEMM kernels (not convolution or attention)
  TimeNs gemm_in_steps_ns = 0;  // of that, kernels that start inside the analysed steps
  double tensor_core_percent_of_matrix = NAN;
  double matrix_percent_of_kernels = 0;
  /// Kernels whose time goes to moving bytes, not math: elementwise, reductions,
  /// normalisation, softmax, copies and layout transposes (every family but matrix,
  /// attention and communication kernels).
  TimeNs memory_bound_ns = 0;
  double memory_bound_percent_of_kernels = 0;
};

struct AttentionStats {
  std::string backend = "none";  // flash / memory_efficient / cudnn / fused_other / math / none
  TimeNs fused_ns = 0;
  TimeNs softmax_ns = 0;
  int64_t softmax_kernels = 0;
  TimeNs batched_gemm_ns = 0;
  int64_t batched_gemm_kernels = 0;
};

struct LaunchStats {
  int64_t kernels = 0;
  double kernels_per_step = 0;
  double median_kernel_us = 0;
  double short_kernel_percent = 0;        // kernels shorter than kShortKernel, by count
  double host_launches_per_step = 0;      // launches the host made: a CUDA graph replay counts once
  double mean_launch_interval_us = 0;     // host step time / host launches
  double median_launch_delay_us = 0;      // kernel start − end of its launch call
  int64_t graph_launches = 0;
  int64_t graph_kernels = 0;              // kernels replayed from CUDA graphs (inside steps)
};

struct CommStats {
  TimeNs kernel_ns = 0;        // sum of communication kernel durations
  TimeNs union_ns = 0;         // wall time with communication running (in steps)
  TimeNs overlapped_ns = 0;    // of that, with compute kernels running too
  TimeNs exposed_ns = 0;       // communication with no compute beside it
  double share_of_kernel_time_percent = 0;
  double overlap_percent = NAN;
};

struct ThroughputStats {
  bool available = false;      // the trace carries FLOP counts (profile_memory/with_flops)
  double flops_per_step = 0;
  double achieved_tflops = 0;
  double mfu_percent = NAN;    // against peak_tflops
  double peak_tflops = NAN;    // the peak MFU is taken against
  std::string peak_basis;      // which peak: the dense bf16 one, or the mix of precisions that ran
};

/// A matrix operator whose input dimensions miss tensor-core tiles.
struct MisalignedOp {
  std::string name;      // "aten::linear"
  std::string dtype;     // "c10::BFloat16"
  std::string shapes;    // "[[4096, 1000], [1001, 1000]]"
  std::string dims;      // which dimensions miss, e.g. "N=1001 (not a multiple of 8)"
  int64_t calls = 0;
  TimeNs kernel_ns = 0;  // kernel time of its launches
};

/// Tensor-core tile alignment of 16-bit and 8-bit matrix operators (record_shapes=True).
struct ShapeAlignment {
  bool available = false;   // the trace recorded input shapes of matrix operators
  TimeNs checked_ns = 0;    // kernel time of 16/8-bit matrix operators with shapes
  TimeNs misaligned_ns = 0; // of that, operators with a GEMM/convolution dimension off the tile
  double misaligned_percent_of_matrix = 0;  // of all matrix kernel time
  std::vector<MisalignedOp> top;            // largest first, at most 5
};

/// One matrix or attention operator on the roofline: its FLOPs and the bytes it
/// must move at least (each operand read once, the output written once), from the
/// recorded input shapes and dtype (record_shapes=True), against its ridge point.
struct RooflineOp {
  std::string name;       // "aten::mm"
  std::string dtype;      // "c10::BFloat16"
  std::string shapes;     // "[[4, 896], [896, 4864]]"
  std::string precision;  // the peak it is judged against ("bf16", "tf32", ...)
  int64_t calls = 0;
  TimeNs kernel_ns = 0;          // kernel time of its launches
  double flops = 0;              // per call
  double bytes = 0;              // per call
  double intensity = 0;          // FLOP per byte
  double ridge = 0;              // FLOP per byte: peak of its precision / peak DRAM bandwidth
  double achieved_tflops = 0;
  double achieved_bandwidth_gbs = 0;
  bool memory_bound = false;     // intensity below the ridge
};

/// The tokens each model step of an LLM server processed, from vLLM's per-step
/// annotation "execute_context_{requests}({tokens})_generation_{requests}({tokens})"
/// (prefill, then decode). A decode step's GEMMs read every weight once for these
/// few tokens: their FLOPs per byte follow from the count even without shapes.
struct ServingSteps {
  int64_t steps = 0;              // annotated model steps
  int64_t tokens = 0;             // prefill + decode tokens over them
  double tokens_per_step_median = NAN;
  int64_t decode_only_steps = 0;  // steps without prefill tokens
};

/// The roofline of a trace's matrix and attention operators (roofline.cc).
struct Roofline {
  bool available = false;          // shapes recorded and the GPU's peaks known
  std::string unavailable_reason;  // why not, when shapes were recorded
  std::string gpu_model;           // the spec row the peaks come from
  double peak_bandwidth_gbs = 0;
  TimeNs checked_ns = 0;           // kernel time of the operators judged
  TimeNs memory_bound_ns = 0;      // of that, operators below their ridge point
  TimeNs memory_bound_matrix_ns = 0;  // of that, launched as matrix kernels (counted beside the
                                      // bytes-bound kernel families in memory_bound_percent)
  double memory_bound_percent_of_checked = NAN;
  double memory_bound_bandwidth_percent = NAN;  // bytes / time of the memory-bound ops against peak bandwidth
  double memory_bound_bytes = 0;                // bytes the memory-bound ops move, whole trace
  double memory_bound_weight_bytes_16bit = 0;   // of that, 16/32-bit weight operands (8-bit weights would halve them or more)
  double compute_bound_percent_of_peak = NAN;   // the compute-bound ops' time at peak / their time
  double intensity_p50 = NAN;      // kernel-time weighted median FLOP per byte
  double ridge_p50 = NAN;          // kernel-time weighted median ridge point
  /// FLOPs of the judged operators by the precision they ran in (indexed by Precision).
  std::array<double, 10> flops_by_precision{};
  std::vector<RooflineOp> top;     // largest kernel time first, at most 5
};

/// Device memory the caching allocator held (profile_memory=True traces).
struct TraceMemory {
  bool available = false;
  double peak_allocated_gib = 0;
  double peak_reserved_gib = 0;
  double total_gib = 0;            // deviceProperties total memory, 0 unknown
  double peak_reserved_percent = NAN;
  // Every device's memory over the trace, the host's too: peaks and the decimated curve.
  std::vector<DeviceMemoryUse> devices;
};

/// A step time predicted by replaying the trace with one fix applied
/// (src/analysis/replay.cc): the point estimate and the range it can fall in.
struct StepPrediction {
  bool available = false;
  double expected_ms = NAN;  // point estimate
  double best_ms = NAN;      // the most favourable end of the range
  double worst_ms = NAN;     // the least favourable end
  double gpu_busy_ms = NAN;  // device busy time per step in the point replay
  double data_wait_ms = 0;   // data wait per step left in the point replay
  /// What limits the replayed step next: "input_bound" (the data wait left),
  /// "gpu_busy_time" (the device runs the whole step) or "launch_bound" (the host's
  /// own issue time: the device waits for the host).
  std::string bounded_by;
  std::string basis;         // what the range spans
};

/// What-if replays of one trace (src/analysis/what_if.cc).
struct WhatIfs {
  double identity_ms = NAN;       // the replay with nothing changed: checks the replay itself
  StepPrediction no_data_wait;    // input_bound fixed (loader workers)
  StepPrediction faster_matrix;   // low_precision fixed (bf16/fp16 autocast)
  StepPrediction fused_attention; // unfused_attention fixed (SDPA flash)
  StepPrediction fused_memory;    // memory_bound fixed (torch.compile fusion, fused optimizers)
  StepPrediction aligned_shapes;  // misaligned_shapes fixed (dimensions padded to tile multiples)
};

/// A distribution of one metric series (canonical units, see metrics.h).
struct MetricDistribution {
  int64_t samples = 0;
  double mean = NAN;
  double p5 = NAN;
  double p50 = NAN;
  double p95 = NAN;
  double min = NAN;
  double max = NAN;
};

/// What one GPU's metric series say, over the whole recording.
struct DeviceMetricAnalysis {
  std::string label;   // "GPU 0", "GPU 0 / MIG 1g.5gb (13)"
  std::string name;    // model as reported
  std::string uuid;
  std::string hostname;
  bool mig_instance = false;
  bool mig_mode = false;
  std::string mig_profile;                    // "3g.40gb" for a MIG instance
  double board_share = 1.0;                   // of the physical GPU: a MIG instance's compute slices / the board's
  std::map<std::string, std::string> labels;  // Kubernetes attribution
  std::string job_use;                        // live recordings: "used" / "not_used" by the job, "" unknown
  std::vector<std::string> other_processes;   // processes outside the job seen on this GPU ("pid 4242")
  TimeNs first_ns = 0;
  TimeNs last_ns = 0;
  TimeNs median_interval_ns = 0;
  double hours = 0;              // observed time: sample spacings without gaps, + one interval; 0 for one sample
  double span_hours = 0;         // first to last sample, gaps included
  int64_t sampling_gaps = 0;     // spacings > 4x the median (logging stopped, job paused)
  bool timestamps_synthetic = false;
  std::array<MetricDistribution, kNumMetrics> metrics;  // samples == 0 when not logged
  // utilization.gpu (else GR engine activity) shape
  std::string busy_metric;       // which series "busy" means here ("gpu_util", "gr_engine_active", "")
  Metric busy_series = Metric::kCount;  // the same as a Metric; kCount when neither was logged
  /// The busy series' distribution (empty when there is none).
  const MetricDistribution& Busy() const {
    static const MetricDistribution kNone;
    return busy_series == Metric::kCount ? kNone : metrics[static_cast<int>(busy_series)];
  }
  double busy_mean_percent = NAN;
  double near_zero_share = NAN;  // share of the observed time at <= 5 %
  double fed_mean_percent = NAN; // mean busy level while above 5 %: the level the GPU holds while fed
  double near_full_share = NAN;  // share of samples >= 95 %
  SeriesSketch::Rhythm rhythm;   // of the busy series
  /// Stretches of >= 10 s with the busy series near zero: idle phases between
  /// bursts of work, not the wait inside a step (the rhythm leaves them out).
  SeriesSketch::IdleStretches idle_phases;
  double idle_phase_share = 0;   // of the observed time
  /// Share of the observed time near zero while under half the log's peak memory
  /// was in use: no job held the GPU then (a job waiting for data keeps its memory).
  double near_zero_without_job_share = 0;
  // power and clocks
  double power_limit_w = 0;      // logged limit, else the spec's board power
  std::string power_limit_source;
  double power_mean_percent_of_limit = NAN;
  double max_sm_clock_mhz = 0;
  double sm_clock_mean_percent_of_max = NAN;
  /// While loaded (busy >= 80 % in the same sample, MetricDevice::loaded): where a
  /// power cap or a thermal limit shows, without the idle stretches' low clocks.
  double loaded_share = NAN;             // of the time with a busy reading
  int64_t loaded_clock_samples = 0;
  double loaded_power_mean_w = NAN;
  double loaded_power_max_w = NAN;
  double loaded_power_percent_of_limit = NAN;  // against power_limit_w when known
  double loaded_power_cv = NAN;                // time-weighted standard deviation / mean
  double loaded_sm_clock_cv = NAN;             // the same for the SM clock
  double loaded_sm_clock_mean_mhz = NAN;
  double loaded_sm_clock_min_mhz = NAN;
  double loaded_sm_clock_max_mhz = NAN;
  double loaded_sm_clock_percent_of_max = NAN;
  double loaded_temp_mean_c = NAN;
  std::string max_sm_clock_source;       // "logged maximum SM clock" / the spec table's boost clock / "highest SM clock in the log"
  int64_t reason_samples = 0;
  double limiting_reason_share = NAN;  // share of samples with a performance-limiting clock event
  std::vector<std::string> active_reasons;  // names of reasons seen
  double pcie_rx_p95_over_mean = NAN;       // burstiness of host→device traffic
  double memory_used_max_percent = NAN;     // of total memory
  std::vector<SeriesSketch::TimelinePoint> busy_timeline;  // decimated, for plots
};

/// One rank at the run's synchronising collectives (collective_skew.cc).
struct RankArrivals {
  int rank = -1;
  int recording = -1;             // index into Diagnosis::recordings
  int64_t late = 0;               // collectives it entered last (past the noise margin)
  double late_share = 0;          // of the collectives with a late rank
  double lateness_ms_mean = 0;    // when last: its arrival after the median rank's
  double wait_ms_per_step = 0;    // waiting inside collectives for the last rank to arrive
  double transfer_ms_per_step = 0;  // the rest of its collective time: moving bytes
  /// Before a late arrival, against the median of the other ranks over the same
  /// stretch (previous collective's end to this one's start), per late collective:
  double excess_compute_ms = 0;   // GPU kernels (more or slower work)
  double excess_data_wait_ms = 0; // DataLoader
  double excess_host_ms = 0;      // the rest: host code, launches, syncs
};

/// One synchronising collective call on a rank (collective_skew.cc), with what
/// the rank did since its previous call of the same list ended: what the
/// cross-rank analysis needs of a rank, so a rank's events can be dropped once it
/// is analysed (the ranks of a large run are read and summarised a few at a time).
struct CollectiveCall {
  Interval time;
  std::string_view kind;           // "all_reduce", "all_gather", ... (static storage)
  TimeNs compute_before_ns = 0;    // non-communication kernels on the primary device (union)
  TimeNs data_wait_before_ns = 0;  // DataLoader spans on the host (union)
};

/// A rank's synchronising collectives, both ways they can be seen.
struct RankCollectives {
  bool gathered = false;               // measured (traces of a rank)
  std::vector<CollectiveCall> device;  // collective kernels on the primary device, by start
  std::vector<CollectiveCall> host;    // outermost host collective spans per thread, by start
};

/// What a trace's charts draw of its events (chart_data.cc), measured while it
/// is analysed so the report needs its events no more.
struct TraceTimeline {
  /// The earliest start and latest end of its kernels and host spans (the run
  /// grouping's wall-clock span); none without either.
  std::optional<Interval> event_span;
  /// The primary device's kernels (of positive length): their extent, and the
  /// share of each of `buckets` equal slices of `window` that any of them covers.
  std::optional<Interval> busy_extent;
  Interval window;
  std::vector<double> busy_percent;
  std::vector<double> data_wait_percent;  // DataLoader spans over the same slices; empty without any
};

/// When the ranks of one run enter each collective, from aligned clocks: a
/// collective's time on a rank is transfer plus waiting for the last arrival.
struct CollectiveSkew {
  bool available = false;
  std::string unavailable_reason;  // ranks present but no judgement (clocks, matching)
  std::string events;              // "device collective kernels" / "host collective spans"
  int ranks = 0;
  int64_t collectives = 0;         // matched across every rank
  int64_t with_late_rank = 0;      // of those, with one rank past the noise margin
  double end_spread_us_p50 = NAN;  // collectives end together on aligned clocks
  double start_spread_us_p50 = NAN;
  double steps = 0;                // per rank, for per-step figures
  double step_ms = 0;              // mean over ranks
  double step_cv = 0;              // coefficient of variation of every rank's steps: run-to-run noise
  double wait_ms_per_step = 0;     // mean over ranks
  double transfer_ms_per_step = 0;
  int straggler_rank = -1;         // the rank most often last
  double straggler_late_share = 0;
  bool persistent = false;         // the same rank is last in most collectives and most steps
  double straggler_step_share = 0; // steps in which that rank was the latest on aggregate
  /// The chance that some rank is last this often when lateness falls on any rank
  /// alike (binomial tail at 1/ranks, times the ranks: any of them could have been top).
  double straggler_chance = 1;
  std::string cause;               // compute / data_wait / host: what the late rank did before
  double saving_ms_per_step = 0;   // the others' wait its lateness alone caused
  std::vector<RankArrivals> by_rank;  // by rank
};

/// Everything measured on one recording (one rank).
/// Step timing from inside the training loop (step markers), over the run.
/// One process's steps (a rank, in a multi-process job).
struct ProcessStepStats {
  uint32_t pid = 0;
  int rank = -1;             // in the distributed run, where known (ProcessRank)
  int local_rank = -1;
  std::string host;
  int64_t steps = 0;         // judged steps (warm-up left out)
  double step_ms_p50 = 0;
  /// Step time without data wait, marked communication and (in a synchronous
  /// job) the wait for the last rank to arrive: the rank's own work.
  double work_ms_p50 = 0;
  double data_wait_ms_mean = 0;
  std::array<double, 9> phase_ms_mean{};  // its phases per judged step (index = StepPhaseSlot)
  double untraced_ms_mean = NAN;          // outside every marked phase, where phases are traced
  // Arrival at the step's collectives against the other ranks (RankSync), over
  // the steps every rank marked; NaN where not measured.
  double late_ms_p50 = NAN;    // after the earliest rank
  double waited_ms_p50 = NAN;  // before the last rank arrived: time spent waiting for it
  double last_share = NAN;     // share of those steps in which it arrived last
  // Where its lateness came from, mean per step it was late, against the rank
  // that arrived first (they add up to the lateness): a later start (work after
  // its previous step's collectives), a longer data wait, more host work before
  // its forward.
  double late_start_ms = NAN;
  double late_data_ms = NAN;
  double late_host_ms = NAN;
  bool several_hosts = false;  // the run's ranks live on several hosts: the label names this one's
  /// "rank 1 (pid 4242)", "rank 1 on node-a (pid 4242)" (several hosts), "process 4242".
  std::string Label() const;
};

/// Whether the marked processes wait for each other at every step, from where
/// each step met its peers (MarkedStep::sync_arrival / sync_release): in a
/// synchronous job ranks arrive apart and leave together.
struct RankSync {
  int64_t matched_steps = 0;         // step numbers every judged process marked with both times
  double arrival_spread_ms_p50 = NAN;  // last arrival - first, per step
  double release_spread_ms_p50 = NAN;  // last release - first, per step
  bool synchronous = false;          // arrivals >= 1 ms apart and releases within a quarter of that
};

/// One memory series of a process over its sampled steps (host resident set,
/// or a GPU's allocated bytes), past the steps where memory settles.
struct MemoryTrend {
  int64_t points = 0;            // sampled steps judged
  int64_t first_step = 0, last_step = 0;
  double first_bytes = 0, last_bytes = 0;  // medians of the first and last quarter
  std::array<double, 4> quarter_median_bytes{};
  double bytes_per_step = 0;     // Theil-Sen slope over step number
  double bytes_per_step_low = 0, bytes_per_step_high = 0;  // the slopes of its two halves
  double bytes_per_hour = 0;     // at the process's step rate
  double step_s = 0;             // the process's mean step time, s
  bool creeping = false;         // grows through every quarter, in both halves, past the floor
  std::string why_not;           // when not creeping: what the series showed
};

/// A recorded process's memory (zero-code mode's sampler, docs/memory.md).
struct ProcessMemory {
  uint32_t pid = 0;
  int rank = -1;
  int64_t sampled_steps = 0;
  int64_t host_rss_peak_bytes = 0;   // VmHWM at the last sample
  int64_t host_rss_last_bytes = 0;
  int device = -1;                   // the GPU its allocator used most, -1 none
  int64_t device_peak_bytes = 0;     // the allocator's allocated peak
  int64_t device_reserved_max_bytes = 0;
  int64_t device_allocated_last_bytes = 0;
  int64_t alloc_retries = 0;         // at the last sample, since the process started
  int64_t alloc_ooms = 0;
  double samples_per_step = 0;       // the batch, where steps count samples
  // Median over the sampled steps past settling of memory at the step's end.
  double host_end_median_bytes = 0;
  double gpu_end_median_bytes = 0;
  MemoryTrend host;
  MemoryTrend gpu;
};

/// An out-of-memory error that ended the job, as zero-code mode caught it
/// leaving (oom.* settings, python/gputriage/memory.py): its message's figures,
/// to PyTorch's rounding, and the allocator's own where it could read them.
struct OutOfMemoryError {
  bool known = false;
  std::string device;                     // "cuda:0", "cpu"
  int64_t requested_bytes = -1;           // -1: not in the message
  int64_t total_bytes = -1;               // the device's capacity
  int64_t free_bytes = -1;                // free on the device (every process's use counted)
  int64_t allocated_bytes = -1;           // allocated by PyTorch
  int64_t reserved_unallocated_bytes = -1;  // held by the cache, not by tensors
  int64_t step = -1;                      // the step it struck in
  std::string where;                      // the job's own line ("train.py:88 in step")
  std::string message;
  std::string snapshot;                   // --memory-history: the allocator snapshot written
  bool from_snapshot = false;             // read from an allocator snapshot's history ('oom' entry), not a job's error
  // A host (CPU) error: the process as it left (-1 unknown). An address-space
  // limit (RLIMIT_AS, `ulimit -v`) counts reserved, never-touched memory too.
  int64_t host_rss_bytes = -1;            // VmRSS as the error was reported (its step's tensors freed)
  int64_t host_vm_bytes = -1;             // VmSize: the address space, likewise
  int64_t host_rss_peak_bytes = -1;       // VmHWM: the resident set's peak
  int64_t host_vm_peak_bytes = -1;        // VmPeak: the address space's peak
  int64_t address_space_limit_bytes = -1;  // RLIMIT_AS, where one is set
  int64_t host_limit_bytes = -1;          // what the process may keep resident
  std::string host_limit_source;          // "MemTotal", "cgroup memory.max (...)"
};

/// What a job's memory is made of and where its ceiling is: the zero-code
/// sampler's per-step memory, the static memory it counted, the capacities.
struct StepMemoryAnalysis {
  OutOfMemoryError oom;
  int exit_code = -1;                 // the job's, where recorded (-1 unknown)
  int world_size = -1;                // ranks of the job (sharding's divisor), -1 unknown
  bool sampled = false;
  std::vector<ProcessMemory> processes;
  // Counted once the job trained (memory.* settings); -1 unknown.
  int64_t parameters_bytes = -1, gradients_bytes = -1, optimizer_state_bytes = -1;
  std::string static_device;          // "cuda:0", "cpu"
  int64_t device_total_bytes = 0;     // the sampled GPU's memory, 0 unknown
  int64_t host_total_bytes = 0;       // the host memory the job may use, 0 unknown
  std::string host_limit_source;      // "MemTotal", "cgroup memory.max (...)"
  int64_t StaticBytes() const {
    return parameters_bytes < 0 ? -1 : parameters_bytes + std::max<int64_t>(0, gradients_bytes) +
                                           std::max<int64_t>(0, optimizer_state_bytes);
  }
};

struct StepMarkerAnalysis {
  int64_t steps = 0;                     // judged steps, over every process
  int64_t warmup_steps = 0;              // leading steps >= 3x their process's median, left out
  int processes = 0;
  // What delimited zero-code mode's steps: "dataloader" (each batch fetched),
  // "optimizer" (no DataLoader drove the loop: each optimizer step), "" when
  // the job marked its own steps or did not say.
  std::string step_boundary;
  double step_ms_mean = 0;
  double step_ms_p50 = 0;
  double step_ms_p95 = 0;
  double step_ms_cv = 0;                 // coefficient of variation of step time
  double data_wait_ms_mean = 0;          // per step, from the data phase
  double compute_ms_mean = 0;            // step span without the data wait inside it
  double data_wait_percent_of_compute = 0;  // exposed wait where device times say so, else as the host saw it
  // Device times (the job measured each step on the GPU, e.g. CUDA events): a
  // host-side wait the GPU spent busy with queued work is hidden, not lost.
  int64_t device_steps = 0;              // judged steps with a device time
  double device_ms_mean = NAN;           // GPU time per step
  double gpu_idle_ms_mean = NAN;         // per step: iteration time not covered by GPU time
  double data_wait_host_ms_mean = 0;     // the wait as the host measured it
  double samples_per_s = NAN;            // whole job (every process), when steps report samples
  double tokens_per_s = NAN;             // whole job, when steps report tokens
  int64_t outlier_steps = 0;             // steps over twice the median
  double outlier_time_percent = 0;       // time those steps spent beyond the median, % of all step time
  std::string outlier_phase;             // the marked phase that grows most in outlier steps, "" if none
  double outlier_phase_ms = 0;           // its mean excess in an outlier step over a typical one
  bool phases_known = false;             // the job marked its data phase
  // Inside the step (docs/phases.md): each marked phase's mean time per judged
  // step (index = StepPhaseSlot: 1 data .. 7 other, 8 copy), as the host timed it.
  // With forward and backward or optimizer marked in at least half the steps
  // (zero-code mode marks them), the rest of the step -- outside every marked
  // phase -- is the host's own work: callbacks, logging, .item() syncs, metrics.
  std::array<double, 9> phase_ms_mean{};
  // The same phases as the GPU timed them (CUDA events at their begin and end,
  // python/gputriage/device.py), mean per step over the judged steps that carry
  // any (phase_device_steps); NaN where no step does. Forward, backward,
  // optimizer and copy only.
  int64_t phase_device_steps = 0;
  std::array<double, 9> phase_device_ms_mean = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
  bool phases_traced = false;            // forward and backward/optimizer marked: the rest is measured
  double untraced_ms_mean = NAN;         // per step, outside every marked phase (phases_traced only)
  double untraced_ms_p50 = NAN;
  double untraced_percent_of_step = NAN; // of the mean step time
  double in_phases_ms_p10 = NAN;         // 10th percentile over steps of the time inside marked phases
  std::vector<ProcessStepStats> by_process;  // slowest work first
  RankSync sync;
  // Gradient accumulation: the judged steps that ran the optimizer. Fewer than
  // `steps` means the marked steps are micro-batches (zero-code mode marks one per
  // batch the loader serves) and the model was updated once every few of them.
  int64_t optimizer_steps = 0;
  // MFU: FLOPs per step reported by the job, against the GPU's dense bf16 peak.
  double flops_per_step = NAN;           // mean per step of one process
  double achieved_tflops = NAN;          // per process (one GPU each), from judged steps
  std::string gpu_model;                 // the GPU the peak is taken from, "" when unknown
  double peak_tflops = NAN;
  double mfu_percent = NAN;
};

/// What the run says of its input pipeline's resources (recorded runs: the
/// job's configuration channel and the recorder's view of the host), so the
/// input_bound advice starts from what the run already had.
struct LoaderSettings {
  int num_workers = -1;  // DataLoader num_workers; -1: not reported
  int host_cpus = 0;     // CPUs the job could run on; 0: unknown
  int gpus = 0;          // GPUs on the host; 0: unknown
  double host_saturated_percent = NAN;  // share of the job's time its CPUs were saturated (record), NaN unknown
  bool host_saturated = false;          // saturated by the job itself (the host_saturated finding's rule)
  double cpus_taken_by_others = 0;      // mean CPUs other processes used while the job ran (record), 0 unknown
  // The CPU the job's processes besides the training process (its DataLoader
  // workers) used, cores on average (record); NaN unknown. Workers that wait on
  // storage, the network or a remote service use far less than a core each.
  double workers_cores_mean = NAN;
  /// Under half a core per worker on average: the loader waits, it does not compute.
  static constexpr double kWaitingWorkerCores = 0.5;
  bool WorkersWait() const {
    return num_workers > 0 && !host_saturated && !std::isnan(workers_cores_mean) &&
           workers_cores_mean < kWaitingWorkerCores * num_workers;
  }
  /// The CPUs the job can actually have: those other processes left it (a CPU
  /// counts as taken once it is half taken); 0 when the host's CPUs are unknown.
  int FreeCpus() const {
    return host_cpus > 0 ? std::max(1, host_cpus - static_cast<int>(std::lround(cpus_taken_by_others))) : 0;
  }
  /// The DataLoader workers per GPU those CPUs allow; 0 when unknown.
  int WorkersPerGpu() const { return FreeCpus() > 0 ? std::max(1, FreeCpus() / std::max(1, gpus)) : 0; }
};

/// How a job's host-to-device copies left the host, as zero-code mode counted
/// them (`copy.*` settings, docs/formats.md): bytes, and the shares of them from
/// pinned memory and with non_blocking=True. Unknown for a job that marks its
/// copy phase itself.
struct CopySettings {
  bool known = false;
  int64_t calls = 0;
  double bytes = 0;
  double pinned_percent = NAN;        // of the bytes
  double non_blocking_percent = NAN;  // of the bytes
  std::string loader_pin_memory;      // dataloader.pin_memory as recorded ("true", "false"), "" unknown
};

/// The job's optimizer as zero-code mode saw it when it was created
/// (`optimizer.*` settings, docs/formats.md): which update PyTorch runs for its
/// tensors and how many there are. Unknown for a run without zero-code mode.
struct OptimizerSettings {
  bool known = false;          // the class is recorded
  std::string class_name;      // "AdamW", ...
  std::string implementation;  // "fused", "foreach", "for-loop"; "" for another library's optimizer
  std::string device;          // the first parameter's device type: "cuda", "cpu", ...
  int64_t param_tensors = -1;  // -1 unknown
  double params = NAN;         // elements over every tensor
  std::string torch_version;   // version.torch, for the advice (fused AdamW needs 2.0)
};

/// Activation checkpointing as zero-code mode timed it (`checkpointing.*`
/// settings): the host time of the checkpointed segments' forward in training
/// and of their second run in backward. Unknown for a job without it or
/// zero-code mode.
struct RecomputeSettings {
  bool known = false;
  int64_t calls = 0;               // torch.utils.checkpoint calls in training
  double forward_seconds = 0;      // their forward, over the run
  double recompute_seconds = NAN;  // the segments run again in backward, over the run
};

/// The host side of a recorded job: its processes' CPU and memory and the
/// machine's CPUs, read from /proc by `record` (src/record/host_usage.h) and kept
/// as `host.usage.*` settings. Time-weighted over the job's run.
struct HostUsageAnalysis {
  bool known = false;
  double seconds = 0;                      // time the reads cover
  int job_cpus = 0;                        // CPUs the job could run on (its affinity)
  int machine_cpus = 0;
  double job_cores_mean = NAN;             // CPU-seconds per second, every job process
  double main_cores_mean = NAN;            // the training process
  double other_cores_mean = NAN;           // its other processes (DataLoader workers)
  int job_processes_max = 0;
  double machine_busy_percent_mean = NAN;  // every CPU of the machine, the job's and others'
  double saturated_percent_of_time = NAN;  // machine >= 90 % busy, or the job using >= 90 % of its CPUs
  double job_rss_peak_mib = NAN;           // resident memory summed over the job's processes
  double job_cpu_seconds = NAN;            // the job's whole CPU time
  double job_cpu_wait_mean = NAN;          // its processes' time waiting for a CPU, per second (schedstat); NaN unknown

  // The host_saturated rule (src/verdicts/host_verdicts.cc): the CPUs full for half
  // the job's time, and the job itself using 70 % of them on average (a machine kept
  // busy by others is no finding of a job that barely uses its CPUs), over >= 2 s.
  static constexpr double kSaturatedPercent = 50.0;
  static constexpr double kJobShareOfCpus = 0.7;
  static constexpr double kMinSeconds = 2.0;
  int cpus() const { return job_cpus > 0 ? job_cpus : machine_cpus; }
  /// CPUs processes outside the job used on average (the machine's busy share of
  /// its CPUs less the job's own use); 0 when not measured.
  double OthersCpus() const {
    if (!known || std::isnan(machine_busy_percent_mean) || std::isnan(job_cores_mean) || machine_cpus <= 0) return 0;
    return std::max(0.0, machine_busy_percent_mean / 100.0 * machine_cpus - job_cores_mean);
  }
  /// Outside load that cost the job: others busy, and (where the kernel says) the
  /// job's processes waiting for a CPU at least kContendedWaitCores per second. A
  /// niced background load, which yields, takes the CPUs without costing the job.
  static constexpr double kContendedWaitCores = 0.05;
  double ContendingCpus() const {
    if (!std::isnan(job_cpu_wait_mean) && job_cpu_wait_mean < kContendedWaitCores) return 0;
    return OthersCpus();
  }
  bool SaturatedByJob() const {
    return known && seconds >= kMinSeconds && saturated_percent_of_time >= kSaturatedPercent && cpus() > 0 &&
           job_cores_mean >= kJobShareOfCpus * cpus();
  }
};

/// The host usage `record` kept (`host.usage.*` settings of a run, src/record/host_usage.h),
/// read back; a value that is not a finite number is left unknown (analyze.cc).
HostUsageAnalysis ReadHostUsage(const std::map<std::string, std::string>& metadata, int job_cpus);

/// One bucket of the goodput ledger: where part of the job's paid GPU time went.
struct LedgerBucket {
  std::string name;    // "productive", "data_wait", "startup", "checkpoint_save", "lost_work", ...
  std::string group;   // "inside_steps", "outside_steps", "failures"
  bool known = true;   // false: this source cannot see it (its time is inside another bucket, or unmeasured)
  double hours = 0;    // in the ledger's unit (GPU-hours, or job-hours without GPUs)
  double share = 0;    // of the ledger's total
  double dollars = NAN;  // at the run's price, when one is known
  int64_t count = 0;   // phases, steps or stretches it is made of
  std::string source;  // what measured it, or why it is unknown
  // How a report names it: "warmup" for compile_warmup in a job that never
  // called torch.compile (the name stays the bucket's id in JSON, store, series).
  std::string label;
  const std::string& Label() const { return label.empty() ? name : label; }
};

/// A stretch of a job's time and the ledger bucket it went to (a run of steps
/// is "productive", with the short gaps between them).
struct LedgerSegment {
  std::string bucket;
  Interval span;
};
inline constexpr size_t kMaxLedgerTimeline = 2000;

/// Where every paid GPU-hour of a job went (src/analysis/ledger.cc): the GPUs
/// times the job's wall time, split into buckets that add up to it exactly.
struct RunLedger {
  bool valid = false;
  std::string unit;           // "gpu_hours", or "job_hours" where no GPU was seen (a CPU job)
  double gpus = 0;            // GPUs the job held (a MIG instance by its share of the board)
  std::string gpus_source;
  double wall_hours = 0;      // the job's span
  std::string span_source;    // "the job's start and exit" / "first to last step marker"
  double total = 0;           // gpus × wall (job-hours: wall)
  double goodput = NAN;       // productive / total
  double price_per_gpu_hour = NAN;
  std::string price_source;
  std::vector<LedgerBucket> buckets;  // the known ones add up to `total`
  std::vector<std::string> notes;
  // From step markers: the first process's time as it was bucketed, by start
  // (phases after the steps and gaps they cover), for the reports' charts.
  std::vector<LedgerSegment> timeline;
  uint32_t timeline_pid = 0;
  int64_t timeline_dropped = 0;  // segments past kMaxLedgerTimeline
  const LedgerBucket* Find(std::string_view name) const {
    for (const auto& b : buckets)
      if (b.name == name) return &b;
    return nullptr;
  }
};

struct RecordingAnalysis {
  std::string source;
  std::string source_format;  // Recording::format ("kineto", "nsys", ...): which profiler to name in advice
  LoaderSettings loader;
  HostUsageAnalysis host;
  CopySettings copies;
  OptimizerSettings optimizer;
  RecomputeSettings recompute;
  int rank = -1;
  Device device;  // the device that did the work (most kernel time)
  bool has_gpu_activity = false;
  // Kernel and graph launches the host made (CUDA runtime/driver calls), counted
  // when the source holds no GPU record: calls without activities mean the
  // activities were asked for and lost (CUPTI, the driver, permissions).
  int64_t launches_without_gpu_records = 0;
  // Kernel launch calls beyond the kernel records, where the launches are over
  // twice the records (and 100 more): records the profiler dropped. The busy and
  // idle shares are then over the kept records only: no idle verdict is drawn.
  int64_t dropped_kernel_records = 0;
  // The whole trace's kernel records, and its kernel launch calls where they were
  // counted (-1 where the source has no more runtime calls than kernel records, so
  // none can have been dropped): the sweep checks the two against the verdicts.
  int64_t kernel_records = 0;
  int64_t kernel_launch_calls = -1;
  // Of those calls, the ones made while their thread captured a stream into a
  // CUDA/HIP graph: they run no kernel and leave no record (not dropped ones). Where
  // they outnumber the kernel records the window shows a graph being built (the
  // GPU idles while the host captures), not the work: a limitation says so.
  int64_t captured_kernel_launches = 0;
  // Where the trace does not describe its GPU, the kernel name its least compute
  // capability was read from (volta_sgemm_...): device.compute_major/minor hold it.
  std::string device_from_kernel_names;
  bool MostlyGraphCapture() const { return captured_kernel_launches > kernel_records; }
  bool steps_from_markers = false;  // ProfilerStep#N markers, else the whole trace
  std::vector<StepBreakdown> steps;
  // Leading steps over kWarmupStepFactor x the median (cuDNN/cuBLAS autotuning,
  // allocator growth, compilation): listed in `steps`, left out of `average` and of
  // every total the analysis takes over the steps.
  int64_t warmup_steps = 0;
  /// The steps every total over the steps covers (all but the warm-up): what a
  /// per-step figure divides by.
  std::span<const StepBreakdown> SteadySteps() const {
    return std::span(steps).subspan(std::min(steps.size(), static_cast<size_t>(std::max<int64_t>(warmup_steps, 0))));
  }
  StepBreakdown average;  // mean over the steady steps (ns)
  TimeNs avg_step_ns = 0;
  std::vector<GpuMetrics> gpus;
  GpuMetrics gpu;  // the primary device's metrics
  IdleBreakdown device_idle;  // primary device, within the steps
  HostOsWaits host_os_waits;  // of device_idle's host_wait: the launching thread in OS calls
  std::vector<StreamIdle> streams;
  std::vector<KernelStat> top_kernels;
  std::map<std::string, TimeNs> kernel_class_ns;  // every kernel of the trace, by KernelClassName
  int64_t kernel_names = 0;
  PrecisionStats precision;
  AttentionStats attention;
  LaunchStats launch;
  CommStats comm;
  ThroughputStats throughput;
  std::vector<std::string> limitations;  // what this recording cannot tell
  std::string error;  // the analysis stopped (a scratch file could not be written or read); empty when it did not
  // Sampled GPU metrics (metric logs); empty for a trace-only recording.
  bool has_trace = false;
  // The trace file ended before its JSON closed: its last steps' device work is
  // partly lost, and the steps judged are those before it (truncated_steps_dropped left out).
  bool truncated = false;
  int truncated_steps_dropped = 0;
  std::string phase;  // capture-bundle phase ("idle", "load"), else empty
  std::vector<DeviceMetricAnalysis> metric_devices;
  StepMarkerAnalysis marked;  // steps == 0 without step markers
  WhatIfs what_if;            // trace recordings with steps
  ShapeAlignment shapes;      // record_shapes traces
  Roofline roofline;          // record_shapes traces on a GPU with known peaks
  ServingSteps serving;       // vLLM's per-step token counts, where annotated
  TraceMemory memory;         // profile_memory traces
  TraceTimeline timeline;     // traces: what the charts draw
  RankCollectives collectives;  // traces of a rank: what the cross-rank analysis reads
  RunLedger ledger;           // live recordings and step markers: where the job's time went
  StepMemoryAnalysis step_memory;  // memory sampled at step ends (zero-code mode, watch())
};

// ---- Verdicts -------------------------------------------------------------

enum class Severity { kInfo, kLow, kModerate, kHigh };
const char* SeverityName(Severity s);

/// One number behind a verdict.
struct Evidence {
  std::string name;   // stable id, e.g. "data_wait_percent"
  double value = 0;
  std::string unit;   // "percent", "ms", "us", "count", ...
  std::optional<double> threshold;
  std::string comparison;  // ">=", "<", ... how value was compared with threshold
  std::string source;      // how it was measured
};

struct Recommendation {
  std::string action;  // what to do, concretely (code or config)
  std::string why;     // why it helps here
};

/// What a fix is expected to give, as a user will check it on the fixed run.
struct ExpectedGain {
  std::string metric = "avg_step_ms";
  double current = 0;
  double expected = 0;         // point estimate, in `unit`
  double best = 0;             // the range's most favourable end, in `unit`
  double worst = 0;            // its least favourable end
  std::string unit = "ms";
  double speedup_percent = 0;  // throughput change at the point estimate, %
  std::string bounded_by;      // the verdict id or measure that limits the gain next
  std::string basis;           // how the estimate and its range were derived
};

/// A setting that differs between two runs (compare, and a regression's
/// changes since its baseline); "" when absent on that side.
struct ConfigChange {
  std::string key;
  std::string before;
  std::string after;
};

struct Finding {
  std::string verdict;  // stable id: input_bound, low_precision, ...
  Severity severity = Severity::kInfo;
  std::string title;    // one line
  std::string detail;   // a few sentences
  int rank = -1;
  std::string origin = "trace";  // "trace" (profiler timeline) or "metrics" (sampled GPU metrics)
  std::string scope;  // what it is about when not a rank: "GPU 0 (load phase)", a source file
  int recording = -1;  // the recording it was judged from (index into Diagnosis::recordings)
  /// Judged for a job's GPUs together: every GPU that shows it and every one that
  /// does not (the text names a few; these are whole, for --json at any scale).
  std::vector<std::string> seen_on;
  std::vector<std::string> not_seen_on;
  std::vector<Evidence> evidence;
  /// When the evidence cannot separate causes: the other verdicts still possible
  /// and the measurement that would tell them apart.
  std::vector<std::string> cannot_exclude;
  std::string to_separate;
  std::vector<Recommendation> recommendations;
  std::optional<ExpectedGain> gain;
  /// A regression: the settings changed since the baseline run it names.
  std::vector<ConfigChange> config_changes;
};

/// What a workload class should reach, for judging metric levels.
enum class WorkloadClass { kUnspecified, kDenseTransformer, kCnn, kMoe, kRl, kMultimodal, kInference };
const char* WorkloadClassName(WorkloadClass w);
std::optional<WorkloadClass> ParseWorkloadClass(std::string_view name);

struct WorkloadTargets {
  double util_good_percent;       // utilization.gpu a healthy job of this class reaches
  double util_investigate_percent;  // below this, the job merits investigation
  double sm_active_percent;
  double tensor_active_percent;
  std::string basis;              // where the targets come from
};
WorkloadTargets TargetsFor(WorkloadClass w);

struct DiagnoseOptions {
  WorkloadClass workload = WorkloadClass::kUnspecified;
  std::optional<double> price_per_gpu_hour;  // USD
  std::optional<double> monthly_spend;       // USD per month on the GPUs observed
};

/// One row of the what-if table: raise utilization to `target`.
struct WhatIf {
  double from_percent = 0;
  double to_percent = 0;
  double more_compute_percent = 0;  // to/from − 1, same spend
  double spend_saved_percent = 0;   // 1 − from/to, same work
  std::optional<double> monthly_saving_usd;
};

struct DeviceCost {
  std::string label;
  std::string name;
  double hours = 0;
  double board_share = 1.0;  // a MIG instance's share of the board (its price is that share)
  double price_per_hour = 0;
  std::string price_source;
  double cost_usd = 0;
  double util_percent = NAN;           // nvidia-smi utilization (or GR engine on MIG)
  double idle_cost_by_util_usd = NAN;
  double sm_active_percent = NAN;
  double idle_cost_by_sm_usd = NAN;
};

struct CostReport {
  bool available = false;        // a price or spend was known
  std::string price_basis;       // "--price-per-gpu-hour", "default table: ...", "--monthly-spend"
  std::vector<DeviceCost> devices;
  double gpu_hours = 0;
  double cost_usd = 0;
  double idle_cost_by_util_usd = NAN;
  double idle_cost_by_sm_usd = NAN;
  std::optional<double> monthly_spend_usd;
  double monthly_idle_by_util_usd = NAN;
  double monthly_idle_by_sm_usd = NAN;
  double util_mean_percent = NAN;   // GPU-hour weighted
  double sm_active_mean_percent = NAN;
  std::vector<WhatIf> what_if;
  std::vector<std::string> notes;
};

/// Idle capacity of a monthly spend at a utilization: spend × (1 − util).
double IdleMonthlyCost(double monthly_spend, double util_percent);
/// The what-if row for raising utilization from `from` to `to` percent.
WhatIf MakeWhatIf(double from_percent, double to_percent, std::optional<double> monthly_spend);

struct Summary {
  double gpu_busy_percent = 0;
  std::string gpu_busy_source;   // which measure gpu_busy_percent is
  int devices = 0;               // GPUs (or MIG instances) observed
  double gpu_hours = 0;
  double gpu_util_mean_percent = NAN;  // nvidia-smi utilization.gpu, GPU-hour weighted
  std::optional<double> idle_cost_usd;            // this run, by utilization.gpu (needs a price)
  std::optional<double> idle_cost_usd_per_month;  // with --monthly-spend
  std::string workload;
  double data_wait_percent = 0;  // DataLoader share of step time
  double avg_step_ms = 0;
  int64_t steps = 0;
  double sm_efficiency_percent = NAN;
  double achieved_occupancy_percent = NAN;
  double tensor_core_percent_of_matrix = NAN;
  double exposed_communication_percent = 0;
  std::string device;
  int recordings = 0;
};

struct Diagnosis {
  std::vector<RecordingAnalysis> recordings;
  std::vector<Finding> findings;  // most severe first
  /// Per run of several ranks (traces with aligned clocks): arrival skew at collectives.
  std::vector<CollectiveSkew> collective_skew;
  /// Run-level notes: inputs that are not one run (different times, GPU models,
  /// or two traces claiming one rank) and were judged apart.
  std::vector<std::string> notes;
  Summary summary;
  CostReport cost;
};

/// Measures one recording (pure: no I/O but scratch files past the memory budget).
RecordingAnalysis AnalyzeRecording(const Recording& recording);
/// The same with its independent passes on up to `threads` threads (the result does not change).
RecordingAnalysis AnalyzeRecording(const Recording& recording, int threads);
/// Analyses a trace recording now (on `threads` threads) and keeps the analysis in
/// it (Recording::analysis), then drops its events: the ranks of a run read a few
/// at a time hold summaries, not events (ImportOptions::on_trace_read). Diagnose
/// gives the same result as for the recording with its events.
void AnalyzeAndDropEvents(Recording& recording, int threads);
/// Step-marker timing: step time, data wait against compute, throughput, outliers.
/// `gpu_name`: the device the job ran on as reported ("" if unknown), for MFU.
StepMarkerAnalysis AnalyzeMarkedSteps(const std::vector<MarkedStep>& steps, std::string_view gpu_name = "",
                                      const std::vector<ProcessRank>& ranks = {});
/// Memory at step ends: per process its peaks and trends, with the static
/// memory and capacities the job's settings carry (memory.*).
StepMemoryAnalysis AnalyzeStepMemory(const std::vector<MarkedStep>& steps,
                                     const std::map<std::string, std::string>& settings,
                                     const std::vector<ProcessRank>& ranks = {});

/// Measures every recording of a run and draws the verdicts.
Diagnosis Diagnose(const Run& run, const DiagnoseOptions& options = {});

}  // namespace gputriage
