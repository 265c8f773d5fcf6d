// The result model: what the analyses measured and the verdicts drawn from it.
// Every number a verdict uses is carried as Evidence with its unit, the threshold
// it was compared with and where it came from, so a user can check it.
#pragma once

#include <array>
#include <cmath>
#include <optional>
#include <string>
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
  double tensor_core_percent_of_matrix = NAN;
  double matrix_percent_of_kernels = 0;
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
  double mean_launch_interval_us = 0;     // host step time / launches
  double median_launch_delay_us = 0;      // kernel start − end of its launch call
  int64_t graph_launches = 0;
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
  double mfu_percent = NAN;    // against the device's bf16/fp16 dense peak
};

/// Everything measured on one recording (one rank).
struct RecordingAnalysis {
  std::string source;
  int rank = -1;
  Device device;  // the device that did the work (most kernel time)
  bool has_gpu_activity = false;
  bool steps_from_markers = false;  // ProfilerStep#N markers, else the whole trace
  std::vector<StepBreakdown> steps;
  StepBreakdown average;  // mean over steps (ns)
  TimeNs avg_step_ns = 0;
  std::vector<GpuMetrics> gpus;
  GpuMetrics gpu;  // the primary device's metrics
  IdleBreakdown device_idle;  // primary device, within the steps
  std::vector<StreamIdle> streams;
  std::vector<KernelStat> top_kernels;
  int64_t kernel_names = 0;
  PrecisionStats precision;
  AttentionStats attention;
  LaunchStats launch;
  CommStats comm;
  ThroughputStats throughput;
  std::vector<std::string> limitations;  // what this recording cannot tell
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

struct ExpectedGain {
  std::string metric = "avg_step_ms";
  double current = 0;
  double expected = 0;
  std::string unit = "ms";
  double speedup_percent = 0;  // (current/expected − 1) × 100
  std::string basis;           // the assumption behind the estimate
};

struct Finding {
  std::string verdict;  // stable id: input_bound, low_precision, ...
  Severity severity = Severity::kInfo;
  std::string title;    // one line
  std::string detail;   // a few sentences
  int rank = -1;
  std::vector<Evidence> evidence;
  std::vector<Recommendation> recommendations;
  std::optional<ExpectedGain> gain;
};

struct Summary {
  double gpu_busy_percent = 0;
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
  Summary summary;
};

/// Measures one recording (pure: no I/O).
RecordingAnalysis AnalyzeRecording(const Recording& recording);

/// Measures every recording of a run and draws the verdicts.
Diagnosis Diagnose(const Run& run);

}  // namespace gputriage
