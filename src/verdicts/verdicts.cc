// Verdicts: each rule reads measurements of one recording and, when its evidence
// crosses a documented threshold, emits a Finding with that evidence, concrete fixes
// and an expected gain computed from the measured numbers.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "src/analysis/collective_skew.h"
#include "src/analysis/gpu_specs.h"
#include "src/analysis/kernel_taxonomy.h"
#include "src/analysis/ledger.h"
#include "src/analysis/what_if.h"
#include "src/util/strings.h"
#include "src/util/units.h"
#include "src/analysis/run_sources.h"
#include "src/util/parallel.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

// Thresholds, with where they come from.
constexpr double kInputHighPercent = 20.0;      // XProf "highly input-bound"
constexpr double kInputModeratePercent = 5.0;   // XProf "moderately input-bound"; tb-profiler DataLoader advice
constexpr double kMatrixMinPercent = 10.0;      // matrix work must matter before precision does
constexpr double kFp32HighPercent = 50.0;       // most matrix time off tensor cores
constexpr double kFp32ModeratePercent = 10.0;
constexpr double kTf32ModeratePercent = 50.0;   // tf32 where bf16 runs at twice the peak
constexpr double kAttentionMinPercent = 5.0;    // unfused attention share of kernel time
constexpr double kCommHighPercent = 25.0;
constexpr double kCommModeratePercent = 10.0;   // tb-profiler's communication advice fires at 10 %
constexpr double kLaunchHighPercent = 30.0;
constexpr double kLaunchModeratePercent = 15.0; // XProf kernel-launch "high" is 15 %
// Host gaps decide a verdict at moderate or above only over this many steady steps:
// fewer (one or two steps, a trace without step markers, warm-up alone) hold no
// steady state, and the first steps' gaps hold warm-up that later ones lack.
constexpr double kSteadyStateSteps = 3;
constexpr double kLaunchMinKernelsPerStep = 20;  // "a few dozen" per step: below that a step is a handful of big kernels
// A GPU waiting for work starts a kernel within launch latency (5-20 µs) of its
// launch; a median delay past this means kernels usually wait behind others.
constexpr double kQueueDrainedLaunchDelayUs = 100;
// An OS runtime trace (nsys --trace=osrt) shows where the launching thread was
// while the GPU waited on it. Inside OS calls for at least half of that wait, the
// thread was blocked on something else (a worker's queue, a pipe, a file, a lock):
// the fix is what it waits for, not faster launching.
constexpr double kHostBlockedPercent = 50;
constexpr double kHostPacedIntervalUs = 1000;   // the host issues a kernel at least every millisecond on average
constexpr double kMinWorthwhileGainPercent = 5.0;  // below this a fix is not what holds the step
constexpr double kMisalignedLowPercent = 5.0;        // off-tile share of matrix kernel time
constexpr double kMisalignedModeratePercent = 20.0;
constexpr double kMemoryBoundHighPercent = 70.0;
constexpr double kMemoryBoundMinBusyPercent = 50.0;   // the GPU must be what the step waits for
constexpr double kSmFillModerate = 0.5;         // SMs with a block, share of busy time (SM efficiency / busy)
constexpr double kSmFillHigh = 0.25;
constexpr double kUndersizedMinBusyPercent = 5.0;  // below this the GPU's work is too little to judge its shape
constexpr double kIdleBusyPercent = 10.0;
constexpr double kUnderutilizedBusyPercent = 50.0;  // idle most of the step: always said
constexpr double kCommHiddenPoint = 0.6;        // share of exposed communication overlap hides
constexpr double kCommHiddenWorst = 0.25;
constexpr double kGraphKernelGapUs = 2.0;       // kernel-to-kernel gap inside a CUDA graph replay (~1-3 µs)
constexpr double kComputeLimitBusyPercent = 85.0;
// Of kernel time, bytes-bound: at or above it, fusion is a cheap fix still left.
// Set after the first sight of tracelens-mi300x-qwen1.5-0.5b-inference (47.6 %
// bytes-bound, called at the compute limit; its record stays wrong): that case is
// calibration for this line, and the bundled unit test (20 % / 40 %) brackets it.
constexpr double kComputeLimitMaxMemoryBoundPercent = 25.0;
constexpr double kTensorActiveTarget = 50.0;    // dense transformers: >50 % tensor activity

// Device copies not under a kernel, share of the step: the lines the marker rule
// (step_verdicts.cc) draws for the host-timed copy phase.
constexpr double kTraceCopyModeratePercent = 10.0;
constexpr double kTraceCopyHighPercent = 25.0;

/// The steps the analysis's totals cover (warm-up left out): what per-step figures divide by.
double StepCount(const RecordingAnalysis& a) { return a.steps.empty() ? 1.0 : static_cast<double>(a.SteadySteps().size()); }

bool HasTensorCores(const Device& d) {
  if (d.vendor == Vendor::kNvidia) return d.compute_major >= 7;
  return false;
}

struct Context {
  const RecordingAnalysis& a;
  double step_ms;
  double kernel_ms;  // kernel time per step (tb "Kernel" category)
};

/// A fix the replay says gains under kMinWorthwhileGainPercent is not urgent
/// whatever its own evidence: another bottleneck (named in bounded_by) holds the
/// step. Its severity drops to low and the detail says why.
void WeighByGain(Finding& f) {
  if (!f.gain || f.gain->unit != "ms" || f.gain->speedup_percent >= kMinWorthwhileGainPercent) return;
  if (f.severity > Severity::kLow) f.severity = Severity::kLow;
  f.detail += fmt::format(
      " Alone this fix gains {:.1f}% per step: the step is held by {} (fix that first; the replay then shows this "
      "fix's gain).",
      f.gain->speedup_percent, f.gain->bounded_by);
}

void InputBound(const Context& c, std::vector<Finding>& out) {
  const double wait_ms = ToMs(c.a.average.ns[static_cast<int>(StepCategory::kDataLoader)]);
  const double wait_pct = Percent(wait_ms, c.step_ms);
  if (wait_pct < kInputModeratePercent) return;
  Finding f;
  f.verdict = "input_bound";
  f.severity = wait_pct >= kInputHighPercent ? Severity::kHigh : Severity::kModerate;
  f.title = fmt::format("Input-bound: {:.1f}% of each step waits for the DataLoader", wait_pct);
  f.detail = fmt::format(
      "The training loop spends {:.1f} ms of a {:.1f} ms step inside DataLoader.__next__ while the GPU has "
      "nothing to run. Loading and preprocessing happen on the critical path instead of in parallel with compute.",
      wait_ms, c.step_ms);
  f.evidence.push_back(E("data_wait_percent", wait_pct, "percent",
                         "DataLoader share of step time (torch-tb-profiler category priority)",
                         f.severity == Severity::kHigh ? kInputHighPercent : kInputModeratePercent, ">="));
  f.evidence.push_back(E("data_wait_ms_per_step", wait_ms, "ms", "mean over steps"));
  f.evidence.push_back(E("gpu_busy_percent", c.a.gpu.busy_percent, "percent", "union of kernel time / step time"));
  const double idle_loader = Percent(ToMs(c.a.device_idle.ns[static_cast<int>(IdleCause::kDataLoader)]) /
                                         StepCount(c.a),
                                     c.step_ms);
  f.evidence.push_back(E("gpu_idle_waiting_for_data_percent", idle_loader, "percent",
                         "device idle time during DataLoader spans / step time"));
  f.recommendations = {
      WorkersAdvice(c.a.loader, "loads and decodes batches in worker processes while the GPU computes"),
      {"DataLoader(..., pin_memory=True) and tensor.to(device, non_blocking=True)",
       "page-locked buffers make host-to-device copies asynchronous"},
      {"DataLoader(..., prefetch_factor=2..4, persistent_workers=True)",
       "keeps batches queued ahead and avoids re-forking workers every epoch"},
      {"cache the dataset on local NVMe (or in memory) instead of network storage",
       "removes I/O latency when workers are already saturated"},
  };
  f.gain = ReplayGain(c.step_ms, c.a.what_if.no_data_wait);
  WeighByGain(f);
  out.push_back(std::move(f));
}

}  // namespace

Recommendation WorkersAdvice(const LoaderSettings& loader, const std::string& why) {
  const int taken = static_cast<int>(std::lround(loader.cpus_taken_by_others));
  const int per_gpu = loader.WorkersPerGpu();
  const std::string cores =
      loader.host_cpus > 0
          ? fmt::format("{} CPU{}{}{}", loader.host_cpus, loader.host_cpus == 1 ? "" : "s",
                        taken > 0 ? fmt::format(", {:.1f} of them busy with other processes", loader.cpus_taken_by_others)
                                  : std::string(),
                        loader.gpus > 1 ? fmt::format(" for {} GPUs", loader.gpus) : "")
          : "";
  if (loader.host_saturated && per_gpu > 0) {
    // The recorder saw the CPUs full: more workers would only share them.
    return {fmt::format("make each batch cheaper to produce: the job's CPUs were saturated {:.0f}% of the time ({}{}), "
                        "so more workers only share the same cores: decode on the GPU (DALI, "
                        "torchvision.io.decode_jpeg(device='cuda')), preprocess once offline, or move to a host with "
                        "more CPUs per GPU",
                        loader.host_saturated_percent, cores,
                        loader.num_workers >= 0 ? fmt::format(", num_workers={}", loader.num_workers) : std::string()),
            "the loader's CPUs are the bottleneck; workers beyond them add no throughput"};
  }
  if (loader.WorkersWait()) {
    // Workers that use a fraction of a core each wait (storage, the network, a
    // remote service): more of them overlap more waits, past the cores too
    // (issue 53: 2 workers on 2 CPUs at 0.19-0.30 cores in all; 4 ran 11.9 ms a
    // step against 20.2). Memory, not the cores, bounds them.
    return {fmt::format("DataLoader(..., num_workers={}) or more, past the cores if need be (the run had {} using "
                        "{:.2f} cores in all, {:.2f} each{}): the workers wait on I/O, they do not compute, so more of "
                        "them overlap more waits; raise prefetch_factor too, and stop when memory or the storage's "
                        "throughput runs out",
                        2 * loader.num_workers, loader.num_workers, loader.workers_cores_mean,
                        loader.workers_cores_mean / loader.num_workers, cores.empty() ? "" : "; " + cores),
            "each worker spends most of its time waiting, not on a CPU"};
  }
  if (loader.num_workers >= 0 && per_gpu > 0 && loader.num_workers >= per_gpu) {
    // Workers beyond the cores time-share them: the wait is the CPU's work itself.
    return {fmt::format("make each batch cheaper to produce: the run already had num_workers={} on {} (more workers "
                        "only share the same cores): decode on the GPU (DALI, torchvision.io.decode_jpeg(device='cuda')), "
                        "preprocess once offline, or move to a host with more CPUs per GPU",
                        loader.num_workers, cores),
            "the loader's CPUs are the bottleneck; workers beyond them add no throughput"};
  }
  if (loader.num_workers >= 0 && per_gpu > 0)
    return {fmt::format("DataLoader(..., num_workers={}) (the run had {}; {} on this host)", per_gpu, loader.num_workers,
                        cores),
            why};
  if (per_gpu > 0)
    return {fmt::format("DataLoader(..., num_workers=N) with N up to {} ({} on this host)", per_gpu, cores), why};
  return {"DataLoader(..., num_workers=N) with N ≈ CPU cores per GPU (start at 4-8, never past the cores)", why};
}

namespace {

/// Without a replay: Amdahl over the time the fix touches. The convertible matrix
/// time runs 3x faster (1.5-4x, the replay's range); at best all of it is on the
/// step's critical path, at worst none is (the host holds the step and the kernels
/// hide behind it); the point counts the share the GPU is busy, the chance a
/// kernel's time is the step's.
ExpectedGain MatrixAmdahlGain(const Context& c, double convertible_ms) {
  const double busy = std::clamp(c.a.gpu.busy_percent / 100.0, 0.0, 1.0);
  const double saved_point = convertible_ms * (1.0 - 1.0 / analysis::kMatrixSpeedupPoint) * busy;
  const double saved_best = convertible_ms * (1.0 - 1.0 / analysis::kMatrixSpeedupBest);
  return StepGain(c.step_ms, c.step_ms - saved_point, c.step_ms - saved_best, c.step_ms,
                  busy < 0.5 ? "host_work" : "other_kernels",
                  fmt::format("Amdahl over the fp32/tf32 matrix time ({:.2f} ms a step) {:.1f}x faster ({:.1f}-{:.1f}x): "
                              "all of it on the step's path at best, none at worst (the host holds the step), the point "
                              "weighted by the GPU's busy share ({:.0f}%); no replay of this trace was possible",
                              convertible_ms, analysis::kMatrixSpeedupPoint, analysis::kMatrixSpeedupWorst,
                              analysis::kMatrixSpeedupBest, 100.0 * busy));
}

void LowPrecision(const Context& c, std::vector<Finding>& out) {
  const auto& p = c.a.precision;
  if (!HasTensorCores(c.a.device) || p.matrix_total_ns == 0) return;
  if (p.matrix_percent_of_kernels < kMatrixMinPercent) return;
  const double fp32 = Percent(static_cast<double>(p.matrix_ns[static_cast<int>(Precision::kFp32Simt)]),
                              static_cast<double>(p.matrix_total_ns));
  const double tf32 = Percent(static_cast<double>(p.matrix_ns[static_cast<int>(Precision::kTf32)]),
                              static_cast<double>(p.matrix_total_ns));
  const bool has_bf16 = c.a.device.compute_major >= 8;
  Severity severity = Severity::kInfo;
  if (fp32 >= kFp32HighPercent) severity = Severity::kHigh;
  else if (fp32 >= kFp32ModeratePercent) severity = Severity::kModerate;
  else if (has_bf16 && tf32 >= kTf32ModeratePercent) severity = Severity::kModerate;
  if (severity == Severity::kInfo) return;

  Finding f;
  f.verdict = "low_precision";
  f.severity = severity;
  const bool fp32_fired = fp32 >= kFp32ModeratePercent;  // else the tf32 rule fired
  const std::string half = has_bf16 ? "bf16" : "fp16";
  f.title = fmt::format("Matrix math in {} on a GPU with {} tensor cores", fp32_fired ? "fp32" : "tf32", half);
  f.detail = fmt::format(
      "{:.0f}% of matrix (GEMM/convolution) kernel time runs in fp32 on CUDA cores and {:.0f}% in tf32; "
      "{} (compute capability {}.{}) runs {} matrix math on tensor cores at a much higher peak.",
      fp32, tf32, c.a.device.name.empty() ? "this GPU" : c.a.device.name, c.a.device.compute_major,
      c.a.device.compute_minor, half);
  // The threshold goes on the number whose rule fired.
  const char* families = "kernel-name precision families (e.g. *sgemm*, cudnn engines <float>, *s1688gemm*)";
  if (fp32_fired) {
    f.evidence.push_back(E("fp32_simt_percent_of_matrix_time", fp32, "percent", families,
                           severity == Severity::kHigh ? kFp32HighPercent : kFp32ModeratePercent, ">="));
    f.evidence.push_back(E("tf32_percent_of_matrix_time", tf32, "percent", families));
  } else {
    f.evidence.push_back(E("fp32_simt_percent_of_matrix_time", fp32, "percent", families));
    f.evidence.push_back(E("tf32_percent_of_matrix_time", tf32, "percent", families, kTf32ModeratePercent, ">="));
  }
  f.evidence.push_back(E("tensor_core_percent_of_matrix_time", p.tensor_core_percent_of_matrix, "percent",
                         "matrix kernel time on tensor cores"));
  f.evidence.push_back(E("matrix_percent_of_kernel_time", p.matrix_percent_of_kernels, "percent",
                         "GEMM + convolution + attention kernels", kMatrixMinPercent, ">="));
  f.evidence.push_back(E("compute_capability", c.a.device.compute_major + c.a.device.compute_minor / 10.0, "",
                         "deviceProperties", 7.0, ">="));
  if (has_bf16) {
    f.recommendations.push_back({"with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16): around forward and loss",
                                 "bf16 matrix math on tensor cores; no loss scaling needed"});
    if (fp32_fired)
      f.recommendations.push_back({"torch.set_float32_matmul_precision(\"high\") (tf32) if autocast is not possible",
                                   "keeps fp32 storage but runs matmuls on tensor cores"});
  } else {
    f.recommendations.push_back({"with torch.autocast(device_type=\"cuda\", dtype=torch.float16): plus torch.cuda.amp.GradScaler()",
                                 "fp16 tensor cores; this GPU has no bf16 tensor cores, so fp16 needs loss scaling"});
  }
  f.recommendations.push_back({"torch.backends.cudnn.benchmark = True for fixed input shapes",
                               "lets cuDNN pick tensor-core convolution algorithms"});
  // Gain: the trace replayed with the convertible matrix kernels faster (what_if.cc);
  // the host and the data wait stay, so a host-bound step gains little.
  const double convertible_ms = c.kernel_ms * (fp32 + (has_bf16 ? tf32 : 0.0)) / 100.0 * p.matrix_percent_of_kernels / 100.0;
  f.evidence.push_back(E("convertible_matrix_ms_per_step", convertible_ms, "ms", "fp32+tf32 matrix kernel time per step"));
  f.gain = ReplayGain(c.step_ms, c.a.what_if.faster_matrix);
  if (!f.gain) f.gain = MatrixAmdahlGain(c, convertible_ms);
  WeighByGain(f);
  out.push_back(std::move(f));
}

void UnfusedAttention(const Context& c, std::vector<Finding>& out) {
  const auto& at = c.a.attention;
  if (at.backend != "math") return;
  const double share = Percent(static_cast<double>(at.softmax_ns + at.batched_gemm_ns),
                               static_cast<double>(c.a.precision.kernel_total_ns));
  if (share < kAttentionMinPercent) return;
  Finding f;
  f.verdict = "unfused_attention";
  f.severity = Severity::kModerate;
  f.title = fmt::format("Attention runs unfused (softmax + batched GEMMs): {:.1f}% of kernel time", share);
  f.detail = "No fused attention kernel (flash / memory-efficient / cuDNN) ran; attention is computed as separate "
             "batched matmuls and a softmax, which materialises the full score matrix in memory.";
  f.evidence.push_back(E("unfused_attention_percent_of_kernel_time", share, "percent",
                         "softmax + batched GEMM kernel time", kAttentionMinPercent, ">="));
  f.evidence.push_back(E("softmax_kernels", static_cast<double>(at.softmax_kernels), "count", "kernel names containing softmax"));
  f.evidence.push_back(E("fused_attention_ms", ToMs(at.fused_ns), "ms", "flash/fmha/efficient_attention kernels", 0.0, "=="));
  f.recommendations = {
      {"torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=...) instead of softmax(q @ k.T) @ v",
       "dispatches to FlashAttention / memory-efficient kernels"},
      {"with torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION): in bf16/fp16",
       "flash kernels need 16-bit inputs and a supported head dimension"},
  };
  f.gain = ReplayGain(c.step_ms, c.a.what_if.fused_attention);
  WeighByGain(f);
  out.push_back(std::move(f));
}

void CommunicationBound(const Context& c, std::vector<Finding>& out) {
  const auto& cm = c.a.comm;
  const double total_ms = c.step_ms * StepCount(c.a);
  const double exposed = Percent(ToMs(cm.exposed_ns), total_ms);
  if (exposed < kCommModeratePercent) return;
  Finding f;
  f.verdict = "communication_bound";
  f.severity = exposed >= kCommHighPercent ? Severity::kHigh : Severity::kModerate;
  f.title = fmt::format("Communication-bound: {:.1f}% of step time is collective communication not hidden by compute", exposed);
  f.detail = fmt::format(
      "Communication kernels take {:.1f}% of kernel time; {:.0f}% of their wall time overlaps compute, the rest "
      "stalls the step.", cm.share_of_kernel_time_percent, std::isnan(cm.overlap_percent) ? 0.0 : cm.overlap_percent);
  f.evidence.push_back(E("exposed_communication_percent", exposed, "percent",
                         "communication kernel wall time with no compute kernel running / step time",
                         f.severity == Severity::kHigh ? kCommHighPercent : kCommModeratePercent, ">="));
  f.evidence.push_back(E("communication_percent_of_kernel_time", cm.share_of_kernel_time_percent, "percent", "NCCL/RCCL kernels"));
  f.evidence.push_back(E("communication_overlap_percent", std::isnan(cm.overlap_percent) ? 0.0 : cm.overlap_percent, "percent",
                         "communication wall time overlapped with compute"));
  f.recommendations = {
      {"overlap gradients with backward: DDP(bucket_cap_mb=...) tuning, FSDP(backward_prefetch=BACKWARD_PRE)",
       "starts reductions while later layers still compute"},
      {"gradient accumulation with model.no_sync() on all but the last micro-batch",
       "communicates once per accumulated step"},
      {"larger per-GPU batch, or fewer/larger collectives; check NCCL_DEBUG=INFO for the transport (NVLink/IB vs TCP)",
       "raises compute per byte communicated; a slow transport shows up there"},
  };
  // Overlap can hide communication only behind compute that runs beside it: fully
  // hidden at best; a quarter hidden at worst (the last buckets reduce after the
  // last backward kernel, with nothing left to hide behind).
  const double exposed_ms = ToMs(cm.exposed_ns) / StepCount(c.a);
  f.gain = StepGain(c.step_ms, c.step_ms - exposed_ms * kCommHiddenPoint, c.step_ms - exposed_ms,
                    c.step_ms - exposed_ms * kCommHiddenWorst, "gpu_busy_time",
                    fmt::format("exposed communication ({:.1f} ms per step) {:.0f}% hidden behind compute ({:.0f}-100%)",
                                exposed_ms, kCommHiddenPoint * 100, kCommHiddenWorst * 100));
  out.push_back(std::move(f));
}

/// Where a CPU sampler caught the launching thread while it ran during the GPU's
/// wait, by module ("" without samples).
std::string RunningModules(const HostOsWaits& w) {
  std::string out;
  for (const auto& [module, n] : w.running_modules)
    out += fmt::format("{}{} {:.0f}%", out.empty() ? "" : ", ", module,
                       100.0 * static_cast<double>(n) / static_cast<double>(w.running_samples));
  return out;
}

/// What an OS runtime trace and CPU samples say of the host's share of the idle
/// time: the launching thread blocked in OS calls (then the first fix is what it
/// waits on), or running, and where.
void AddHostOsWaits(const RecordingAnalysis& a, Finding& f) {
  const HostOsWaits& w = a.host_os_waits;
  const TimeNs host_wait = a.device_idle.ns[static_cast<int>(IdleCause::kHostWait)];
  if (host_wait <= 0) return;
  const bool sampled = w.sampled && w.running_samples > 0;
  if (sampled)
    f.evidence.push_back(E("launching_thread_running_samples_in_host_wait", static_cast<double>(w.running_samples),
                           "count",
                           fmt::format("CPU samples of thread {} while the GPU waited on the host and the thread was "
                                       "in no OS call, by module: {}",
                                       w.thread, RunningModules(w))));
  if (!w.traced) return;
  const double blocked_pct = Percent(ToMs(w.in_os_calls_ns), ToMs(host_wait));
  std::string calls;
  for (const auto& [name, ns] : w.calls)
    calls += fmt::format("{}{} {:.1f}%", calls.empty() ? "" : ", ", name, Percent(ToMs(ns), ToMs(host_wait)));
  f.evidence.push_back(E("launching_thread_in_os_calls_percent_of_host_wait", blocked_pct, "percent",
                         fmt::format("OS runtime trace: thread {} (the most launches) inside OS calls while the GPU "
                                     "waited on the host{}", w.thread, calls.empty() ? "" : " (" + calls + ")"),
                         kHostBlockedPercent, ">="));
  if (blocked_pct >= kHostBlockedPercent) {
    f.detail += fmt::format(" The launching thread was inside OS calls for {:.0f}% of the GPU's wait ({}): blocked on "
                            "something else (a worker's queue, a pipe, a file, a lock), not issuing work slowly.",
                            blocked_pct, calls);
    f.recommendations.insert(
        f.recommendations.begin(),
        {fmt::format("find what the training thread waits on in {} (py-spy dump --native, or nsys --trace=osrt "
                     "--osrt-backtrace-threshold for the call's stack)", w.calls.empty() ? "its OS calls" : w.calls[0].first),
         "the GPU waits while that thread waits: a DataLoader queue, a pipe, a file read or a lock is the bottleneck"});
  } else {
    f.detail += fmt::format(" The launching thread was inside OS calls for only {:.0f}% of that wait: it was running{}.",
                            blocked_pct,
                            sampled ? " (CPU samples: " + RunningModules(w) + ")" : " (Python, the framework, the launch path)");
  }
}

/// The kernel records do not show the work the window held (the profiler dropped
/// records): its idle time is not the GPU's, so no idle verdict is drawn. Launches
/// captured into a graph are not among them: they ran nothing, and the GPU idled.
bool RecordsMissWork(const RecordingAnalysis& a) { return a.dropped_kernel_records > 0; }

void LaunchBound(const Context& c, std::vector<Finding>& out) {
  const auto& idle = c.a.device_idle;
  const double steps = StepCount(c.a);
  const double host_ms = (ToMs(idle.ns[static_cast<int>(IdleCause::kHostWait)]) +
                          ToMs(idle.ns[static_cast<int>(IdleCause::kLaunchOverhead)])) / steps;
  const double host_pct = Percent(host_ms, c.step_ms);
  const auto& l = c.a.launch;
  if (host_pct < kLaunchModeratePercent || l.host_launches_per_step < kLaunchMinKernelsPerStep) return;
  if (RecordsMissWork(c.a)) return;  // the host's gaps may be kernels the profiler dropped
  // The host paces the GPU only while it keeps issuing: one launch at least every
  // kHostPacedIntervalUs. Sparser launches with the GPU mostly unused are idle (see
  // Idle); dense ones are host-bound however low the busy share (batch-1 inference:
  // the GPU runs every tiny kernel the moment it arrives, then waits for the next).
  if (l.mean_launch_interval_us > kHostPacedIntervalUs) return;
  // Physics: the queue drains when kernels finish faster than the host issues them.
  if (l.median_kernel_us >= l.mean_launch_interval_us) return;
  Finding f;
  f.verdict = "launch_bound";
  f.severity = host_pct >= kLaunchHighPercent ? Severity::kHigh : Severity::kModerate;
  // The text must agree with the queue: kernels that typically wait milliseconds
  // after their launch show a host that is ahead most of the time; the idle time
  // then sits in stretches where it issues nothing (syncs, transfers, Python).
  const bool queue_drains = l.median_launch_delay_us <= kQueueDrainedLaunchDelayUs;
  f.title = queue_drains
                ? fmt::format("Host/launch-bound: the GPU waits for the CPU to issue work {:.1f}% of each step", host_pct)
                : fmt::format("Host-bound in stretches: the GPU waits for the CPU {:.1f}% of each step", host_pct);
  f.detail = queue_drains
                 ? fmt::format("{:.0f} kernels per step with a median of {:.1f} µs, while the host issues one every "
                               "{:.1f} µs on average and a kernel starts a median {:.1f} µs after its launch: the GPU "
                               "drains its queue and waits for Python/framework overhead and launch latency.",
                               l.kernels_per_step, l.median_kernel_us, l.mean_launch_interval_us,
                               l.median_launch_delay_us)
                 : fmt::format("Most kernels wait in the queue (a median {} from launch to start), so the host runs "
                               "ahead much of the step; yet the GPU sits idle with nothing queued for {:.1f} ms per "
                               "step: stretches where the host issues nothing (synchronisations, copies, Python work "
                               "between phases) leave it waiting. {:.0f} kernels per step, median {:.1f} µs.",
                               FormatSeconds(l.median_launch_delay_us / 1e6), host_ms, l.kernels_per_step,
                               l.median_kernel_us);
  f.evidence.push_back(E("gpu_idle_waiting_for_host_percent", host_pct, "percent",
                         "device idle time charged to host_wait + launch_overhead / step time",
                         f.severity == Severity::kHigh ? kLaunchHighPercent : kLaunchModeratePercent, ">="));
  f.evidence.push_back(E("host_launches_per_step", l.host_launches_per_step, "count",
                         "launches the host made inside steps (a CUDA graph replay counts once)", kLaunchMinKernelsPerStep, ">="));
  if (l.graph_kernels > 0)
    f.evidence.push_back(E("graph_kernels", static_cast<double>(l.graph_kernels), "count", "kernels replayed from CUDA graphs"));
  f.evidence.push_back(E("median_kernel_us", l.median_kernel_us, "us", "kernel durations inside steps",
                         l.mean_launch_interval_us, "<"));
  f.evidence.push_back(E("mean_launch_interval_us", l.mean_launch_interval_us, "us", "step time / host launches",
                         kHostPacedIntervalUs, "<="));
  f.evidence.push_back(E("short_kernel_percent", l.short_kernel_percent, "percent", "kernels under 10 µs"));
  f.evidence.push_back(E("median_launch_delay_us", l.median_launch_delay_us, "us",
                         "kernel start − end of its launch call (queue wait); the queue drains at or below the threshold",
                         kQueueDrainedLaunchDelayUs, "<="));
  f.recommendations = {
      {"torch.compile(model, mode=\"reduce-overhead\") or CUDA graphs (torch.cuda.graphs)",
       "replays the whole step's kernels with one launch and fuses small ops"},
      {"increase the batch size per GPU",
       "each kernel does more work per launch, so the host keeps ahead"},
      {"remove host syncs from the step (.item(), .cpu(), print of tensors) and use fused optimizers (fused=True)",
       "keeps the CPU issuing work instead of waiting"},
  };
  AddHostOsWaits(c.a, f);
  const bool steady_state = c.a.steps_from_markers && steps >= kSteadyStateSteps;
  if (!steady_state) {
    f.severity = Severity::kLow;
    f.detail += fmt::format(
        " {}: no steady state. The first steps' host gaps hold warm-up (cuDNN autotuning, allocator growth, lazy "
        "initialisation, compilation) that later steps do not repeat, and nothing here tells it from launch overhead; "
        "so this is not ranked above what the kernels measure. A trace of {} or more steps after warm-up (torch.profiler "
        "schedule(wait=1, warmup=1, active=3)) tells whether the gaps recur.",
        c.a.steps_from_markers ? fmt::format("{:.0f} steady step{}", steps, steps == 1 ? "" : "s")
                               : std::string("One window without step markers"),
        kSteadyStateSteps);
    f.evidence.push_back(E("steady_steps", c.a.steps_from_markers ? steps : 0, "count",
                           "steps after warm-up the host gaps were measured over (0: no step markers)",
                           kSteadyStateSteps, ">="));
    f.cannot_exclude.push_back("warm-up in the traced steps");
  }
  // CUDA graphs replay the step's kernels with one launch: the host's idle gaps go,
  // the device still spends a few µs between graph kernels (kGraphKernelGapUs). At
  // worst half the host time goes (ops that cannot be captured stay eager).
  const double graph_gaps_ms = l.kernels_per_step * kGraphKernelGapUs / 1000.0;
  // Without a steady state nothing is promised: the gaps may be warm-up a longer run
  // does not have (worst: no gain; best: every gap removed).
  const double expected_ms = std::min(c.step_ms, c.step_ms - host_ms + graph_gaps_ms);
  f.gain = steady_state
               ? StepGain(c.step_ms, expected_ms, c.step_ms - host_ms, c.step_ms - host_ms / 2, "gpu_busy_time",
                          fmt::format("the host's {:.1f} ms of idle device time per step removed, {:.0f} kernels x "
                                      "{:.1f} µs of graph kernel-to-kernel gap left; at worst half removed",
                                      host_ms, l.kernels_per_step, kGraphKernelGapUs))
               : StepGain(c.step_ms, c.step_ms, c.step_ms - host_ms, c.step_ms, "gpu_busy_time",
                          fmt::format("none promised without a steady state: up to the host's {:.1f} ms of idle device "
                                      "time per step if the gaps recur, nothing if they are warm-up",
                                      host_ms));
  out.push_back(std::move(f));
}

/// The lowest tensor-core ridge point (16-bit peak / DRAM bandwidth, FLOP per byte)
/// of this GPU, or of every GPU in the spec table when this one is not in it: the
/// ridge no GPU the trace could come from sits below. `of` names it.
double TensorRidgeFloor(const RecordingAnalysis& a, std::string& of) {
  auto ridge = [](const GpuSpec& g) {
    const double peak = g.fp16_tflops > 0 ? g.fp16_tflops : g.bf16_tflops;
    return peak > 0 && g.memory_bandwidth_gbs > 0 ? peak * 1e3 / g.memory_bandwidth_gbs : NAN;
  };
  if (const auto spec = FindGpuSpec(a.device.name); spec && !std::isnan(ridge(*spec))) {
    of = fmt::format("the {}'s 16-bit tensor peak / {:.0f} GB/s", spec->model, spec->memory_bandwidth_gbs);
    return ridge(*spec);
  }
  double floor = NAN;
  for (const auto& g : AllGpuSpecs())
    if (const double r = ridge(g); !std::isnan(r) && (std::isnan(floor) || r < floor)) floor = r, of = g.model;
  of = fmt::format("the lowest of every GPU in the spec table ({}), {} not in it", of,
                   a.device.name.empty() ? "this GPU" : a.device.name);
  return floor;
}

/// The most FLOPs per byte a GEMM of a serving step can reach without shapes: each
/// weight element (half a byte at the narrowest, fp4) does 2 FLOPs per token.
constexpr double kWeightStreamingFlopsPerByteAndToken = 4.0;

/// An LLM server's GEMMs that stream weights, judged without shapes.
struct WeightStreaming {
  TimeNs gemm_ns = 0;      // GEMM kernel time that waits on memory (0: no claim)
  double intensity = NAN;  // the most FLOPs per byte those GEMMs can reach
  double ridge = NAN;      // the ridge point they sit below
  std::string ridge_of;    // whose ridge that is
};

/// Where vLLM's annotations give the tokens per step and even fp4 weights leave the
/// GEMMs below every ridge point, the GEMMs wait on memory. No claim when a roofline
/// judged the operators (shapes tell better) or the steps process too many tokens.
WeightStreaming WeightStreamingGemms(const RecordingAnalysis& a) {
  WeightStreaming w;
  const ServingSteps& s = a.serving;
  if (a.roofline.available || s.steps == 0 || std::isnan(s.tokens_per_step_median)) return w;
  w.ridge = TensorRidgeFloor(a, w.ridge_of);
  w.intensity = kWeightStreamingFlopsPerByteAndToken * s.tokens_per_step_median;
  if (!std::isnan(w.ridge) && w.intensity < w.ridge) w.gemm_ns = a.precision.gemm_ns;
  return w;
}

/// The share of kernel time that waits on DRAM: the kernel families that only move
/// bytes (elementwise, reductions, norms, softmax, copies) plus the matrix and
/// attention operators whose arithmetic intensity sits below the GPU's ridge point
/// (roofline.cc; decode GEMMs and attention over one query token).
double MemoryBoundShare(const RecordingAnalysis& a) {
  const auto& p = a.precision;
  const double matrix = a.roofline.available ? static_cast<double>(a.roofline.memory_bound_matrix_ns)
                                             : static_cast<double>(WeightStreamingGemms(a).gemm_ns);
  return Percent(static_cast<double>(p.memory_bound_ns) + matrix, static_cast<double>(p.kernel_total_ns));
}

/// Most matrix time already in 8 bits or fewer (fp8, fp4, int8): weight quantization is done.
bool MatrixMostlyNarrow(const PrecisionStats& p) {
  const TimeNs narrow = p.matrix_ns[static_cast<int>(Precision::kFp8)] + p.matrix_ns[static_cast<int>(Precision::kFp4)] +
                        p.matrix_ns[static_cast<int>(Precision::kInt8)];
  return p.matrix_total_ns > 0 && 2 * narrow > p.matrix_total_ns;
}

/// Twice the tokens per step, by Amdahl's law over the step's kernel time: weight-
/// streaming GEMMs read the same weights whatever the batch (their time stays), the
/// rest of the work grows with the tokens. Point: GEMMs stay, the rest doubles;
/// best: nothing grows; worst: everything doubles (no gain). In time per token.
ExpectedGain LargerDecodeBatchGain(const Context& c) {
  const double tokens = static_cast<double>(c.a.serving.tokens) / StepCount(c.a);
  const double gemm_ms = std::min(c.step_ms, ToMs(c.a.precision.gemm_in_steps_ns) / StepCount(c.a));
  const double other_ms = c.step_ms - gemm_ms;  // attention over the KV cache, per-token work, host gaps
  const double now = c.step_ms / tokens;
  ExpectedGain g = StepGain(now, (gemm_ms + 2 * other_ms) / (2 * tokens), c.step_ms / (2 * tokens), now,
                            "kv_cache_memory",
                            fmt::format("Amdahl over {:.1f} ms of weight-streaming GEMMs in a {:.1f} ms window of {:.0f} "
                                        "tokens: twice the tokens per step leave the GEMM time as it is (the same "
                                        "weights are read) and double the rest (point); best nothing else grows; "
                                        "worst everything doubles. The batch grows while the KV cache fits and "
                                        "latency allows",
                                        gemm_ms, c.step_ms, tokens));
  g.metric = "ms_per_token";
  g.unit = "ms/token";
  return g;
}

/// Most kernel time waits on device memory, on a GPU the step waits for.
void MemoryBound(const Context& c, std::vector<Finding>& out) {
  const auto& p = c.a.precision;
  const Roofline& r = c.a.roofline;
  const double share = MemoryBoundShare(c.a);
  if (share < analysis::kMemoryBoundModeratePercent || c.a.gpu.busy_percent < kMemoryBoundMinBusyPercent) return;
  const WeightStreaming streaming = WeightStreamingGemms(c.a);
  const TimeNs streaming_ns = streaming.gemm_ns;
  const double matrix_share =
      Percent(r.available ? static_cast<double>(r.memory_bound_matrix_ns) : static_cast<double>(streaming_ns),
              static_cast<double>(p.kernel_total_ns));
  Finding f;
  f.verdict = "memory_bound";
  f.severity = share >= kMemoryBoundHighPercent ? Severity::kHigh : Severity::kModerate;
  f.title = matrix_share > 0
                ? fmt::format("Memory-bound: {:.0f}% of kernel time waits on DRAM ({:.0f}% in matrix/attention ops below "
                              "the ridge point, {:.0f}% in elementwise, norm, reduction and copy kernels)",
                              share, matrix_share, p.memory_bound_percent_of_kernels)
                : fmt::format("Memory-bound: {:.0f}% of kernel time moves bytes (elementwise, norms, reductions, copies)",
                              share);
  std::string top;
  int listed = 0;
  for (const auto& k : c.a.top_kernels) {
    if (k.kernel_class != KernelClassName(KernelClass::kOther) && k.kernel_class != KernelClassName(KernelClass::kMemory) &&
        k.kernel_class != KernelClassName(KernelClass::kSoftmax))
      continue;
    if (listed++ == 3) break;
    top += fmt::format("{}{} ({:.1f} ms)", top.empty() ? "" : "; ", k.name.substr(0, 60), ToMs(k.total_ns));
  }
  f.detail = fmt::format(
      "The GPU is busy {:.0f}% of the step, but {:.0f}% of that kernel time is in work whose arithmetic intensity "
      "is below the GPU's ridge point: it waits on device memory, not on the SMs.",
      c.a.gpu.busy_percent, share);
  if (!top.empty()) f.detail += fmt::format(" Largest bytes-bound kernels: {}.", top);
  f.evidence.push_back(E("memory_bound_percent_of_kernel_time", share, "percent",
                         "bytes-bound kernel families by name + matrix/attention ops below the ridge point (roofline)",
                         f.severity == Severity::kHigh ? kMemoryBoundHighPercent : analysis::kMemoryBoundModeratePercent, ">="));
  f.evidence.push_back(E("bytes_bound_kernel_percent_of_kernel_time", p.memory_bound_percent_of_kernels, "percent",
                         "elementwise, reduction, normalisation, softmax and copy kernels by name"));
  if (r.available) {
    f.evidence.push_back(E("memory_bound_matrix_percent_of_kernel_time", matrix_share, "percent",
                           "matrix/attention kernel time of operators with FLOPs/byte below the ridge point"));
    f.evidence.push_back(E("arithmetic_intensity_p50", r.intensity_p50, "flop/byte",
                           "kernel-time weighted median over matrix/attention ops: FLOPs / (operands + output bytes) from "
                           "record_shapes Input Dims and dtype",
                           r.ridge_p50, "<"));
    f.evidence.push_back(E("ridge_point_p50", r.ridge_p50, "flop/byte",
                           fmt::format("peak of the op's precision / {:.0f} GB/s ({})", r.peak_bandwidth_gbs, r.gpu_model)));
    if (!std::isnan(r.memory_bound_bandwidth_percent))
      f.evidence.push_back(E("memory_bound_ops_bandwidth_percent_of_peak", r.memory_bound_bandwidth_percent, "percent",
                             "bytes the memory-bound ops move / their kernel time / peak DRAM bandwidth"));
    std::string ops;
    for (const auto& o : r.top)
      if (o.memory_bound && ops.size() < 400)
        ops += fmt::format("{}{} {} {} x{}: {:.1f} FLOP/B against a ridge of {:.0f}, {:.0f} GB/s", ops.empty() ? "" : "; ",
                           o.name, o.dtype, o.shapes, o.calls, o.intensity, o.ridge, o.achieved_bandwidth_gbs);
    if (!ops.empty()) f.detail += " Matrix/attention ops below the ridge point: " + ops + ".";
  }
  if (streaming_ns > 0) {
    const ServingSteps& sv = c.a.serving;
    f.detail += fmt::format(
        " vLLM's step annotations give {:.0f} token(s) per model step ({} of {} steps decode only): a GEMM reads each "
        "weight once per step and does 2 FLOPs per weight per token, at most {:.0f} FLOP/byte even with 4-bit "
        "weights, below the ridge point of {:.0f} FLOP/byte ({}): the GEMMs stream weights.",
        sv.tokens_per_step_median, sv.decode_only_steps, sv.steps, streaming.intensity, streaming.ridge, streaming.ridge_of);
    f.evidence.push_back(E("tokens_per_step_median", sv.tokens_per_step_median, "count",
                           "prefill + decode tokens of a model step (vLLM's execute_context_/generation_ annotations)"));
    f.evidence.push_back(E("gemm_flops_per_byte_max", streaming.intensity, "flop/byte",
                           "2 FLOPs per weight per token over half a byte per weight (fp4, the narrowest)", streaming.ridge,
                           "<"));
    f.evidence.push_back(E("weight_streaming_gemm_percent_of_kernel_time", matrix_share, "percent",
                           "GEMM kernel time of those steps"));
    f.to_separate = "record_shapes=True gives each operator's FLOPs per byte (the per-operator roofline)";
  }
  f.evidence.push_back(E("matrix_percent_of_kernel_time", p.matrix_percent_of_kernels, "percent", "GEMM + convolution + attention kernels"));
  f.evidence.push_back(E("gpu_busy_percent", c.a.gpu.busy_percent, "percent", "union of kernel time / step time",
                         kMemoryBoundMinBusyPercent, ">="));
  if (p.memory_bound_percent_of_kernels > 0)
    f.recommendations.push_back({"torch.compile(model)", "fuses chains of elementwise and normalisation ops into one pass over memory"});
  if (matrix_share > 0) {
    f.recommendations.push_back({"serve more sequences per step (a larger decode batch) or batch requests together",
                                 "a decode GEMM reads its weights once per step whatever M is: more rows per read "
                                 "raise its FLOPs per byte toward the ridge point"});
    if (!MatrixMostlyNarrow(p))
      f.recommendations.push_back({"8-bit (or 4-bit) weight-only quantization of the linear layers (fp8 / int8 / int4 "
                                   "weights, fused dequantization)",
                                   "the weights are most of the bytes a memory-bound GEMM moves"});
  }
  if (c.a.serving.steps == 0)  // an LLM server's steps run no optimizer
    f.recommendations.push_back({"fused optimizers: torch.optim.AdamW(..., fused=True) (or foreach=True)", "one kernel per parameter group, not per tensor"});
  f.gain = ReplayGain(c.step_ms, c.a.what_if.fused_memory);
  if (!f.gain && streaming_ns > 0 && c.a.serving.tokens > 0) f.gain = LargerDecodeBatchGain(c);
  if (!f.gain && r.available && r.memory_bound_weight_bytes_16bit > 0 && r.memory_bound_bytes > 0) {
    // Weight-only 8-bit quantization, by Amdahl's law over the memory-bound matrix
    // time: a memory-bound op's time scales with the bytes it moves. Point: at the
    // bandwidth it reaches now, with 16-bit weights halved; best: those bytes at the
    // GPU's peak bandwidth; worst: nothing gained (dequantization not fused).
    const double touched_ms = ToMs(r.memory_bound_matrix_ns) / StepCount(c.a);
    const double bytes_after = r.memory_bound_bytes - r.memory_bound_weight_bytes_16bit / 2;
    const double point = touched_ms * bytes_after / r.memory_bound_bytes;
    const double at_peak = std::isnan(r.memory_bound_bandwidth_percent)
                               ? point
                               : point * std::min(1.0, r.memory_bound_bandwidth_percent / 100.0);
    f.gain = StepGain(c.step_ms, c.step_ms - touched_ms + point, c.step_ms - touched_ms + at_peak, c.step_ms,
                      "memory_bandwidth",
                      fmt::format("Amdahl over {:.2f} ms per step of memory-bound matrix ops: time scales with bytes "
                                  "moved; 16-bit weights to 8-bit cut them {:.0f}% (point, at today's bandwidth); best "
                                  "at peak bandwidth; worst no gain",
                                  touched_ms, 100.0 * (1 - bytes_after / r.memory_bound_bytes)));
  }
  WeighByGain(f);
  out.push_back(std::move(f));
}

/// GEMM/convolution dimensions that miss tensor-core tiles (record_shapes).
void MisalignedShapes(const Context& c, std::vector<Finding>& out) {
  const auto& sh = c.a.shapes;
  if (!sh.available || sh.misaligned_percent_of_matrix < kMisalignedLowPercent || sh.top.empty()) return;
  if (c.a.precision.matrix_percent_of_kernels < kMatrixMinPercent) return;
  Finding f;
  f.verdict = "misaligned_shapes";
  f.severity = sh.misaligned_percent_of_matrix >= kMisalignedModeratePercent ? Severity::kModerate : Severity::kLow;
  const auto& top = sh.top.front();
  f.title = fmt::format("Shapes miss tensor-core tiles: {:.0f}% of matrix time in ops like {} with {}",
                        sh.misaligned_percent_of_matrix, top.name, top.dims);
  std::string ops;
  for (const auto& m : sh.top)
    ops += fmt::format("{}{} {} {} x{} ({:.1f} ms, {})", ops.empty() ? "" : "; ", m.name, m.dtype, m.shapes, m.calls,
                       ToMs(m.kernel_ns), m.dims);
  f.detail = fmt::format(
      "Tensor cores reach their rate when a GEMM's N and K (a convolution's channels) are multiples of 8 elements "
      "in fp16/bf16 and 16 in fp8/int8; these operators' recorded input shapes are not: {}.",
      ops);
  f.evidence.push_back(E("misaligned_percent_of_matrix_time", sh.misaligned_percent_of_matrix, "percent",
                         "kernel time of 16/8-bit GEMM/convolution ops with off-tile dims (record_shapes Input Dims)",
                         f.severity == Severity::kModerate ? kMisalignedModeratePercent : kMisalignedLowPercent, ">="));
  f.evidence.push_back(E("misaligned_matrix_ms", ToMs(sh.misaligned_ns), "ms", "kernel time of those ops, whole trace"));
  f.evidence.push_back(E("checked_matrix_ms", ToMs(sh.checked_ns), "ms", "kernel time of 16/8-bit matrix ops with shapes"));
  f.recommendations = {
      {fmt::format("pad the dimension to a multiple of 8 (ideally 64): e.g. {} -> vocabulary/hidden/channel sizes "
                   "rounded up (nn.Linear(in, out) with out = ceil(out / 64) * 64)",
                   top.dims),
       "the GEMM then fills whole tensor-core tiles"},
      {"keep the batch x sequence (M) a multiple of 8 as well", "the third GEMM dimension tiles the same way"},
  };
  f.gain = ReplayGain(c.step_ms, c.a.what_if.aligned_shapes);
  WeighByGain(f);
  out.push_back(std::move(f));
}

/// Kernels too small for the GPU: while a kernel runs, under half of the SMs hold a
/// block (torch-tb-profiler's Est. SM Efficiency over busy time: blocks per SM,
/// capped at 1, time-weighted), or the resident warps are few (achieved occupancy).
void UndersizedWork(const Context& c, std::vector<Finding>& out) {
  const GpuMetrics& g = c.a.gpu;
  if (std::isnan(g.sm_efficiency_percent) || g.busy_percent < kUndersizedMinBusyPercent) return;
  const double fill = g.sm_efficiency_percent / g.busy_percent;
  if (fill >= kSmFillModerate) return;
  Finding f;
  f.verdict = "undersized_work";
  f.severity = fill < kSmFillHigh ? Severity::kHigh : Severity::kModerate;
  f.title = fmt::format("Undersized work: while a kernel runs, only {:.0f}% of the SMs have work", 100.0 * fill);
  const int sms = c.a.device.num_sms;
  f.detail = fmt::format(
      "Kernels launch fewer thread blocks than the GPU has SMs{}: the GPU looks busy {:.1f}% of the step while most "
      "of the chip sits empty. Small batches, small layers and many tiny elementwise kernels do this.",
      sms > 0 ? fmt::format(" ({} here)", sms) : std::string(), g.busy_percent);
  f.evidence.push_back(E("sm_fill_percent_of_busy", 100.0 * fill, "percent",
                         "Est. SM Efficiency / GPU busy (kernels' blocks per SM, capped at 1, time-weighted)",
                         100.0 * (f.severity == Severity::kHigh ? kSmFillHigh : kSmFillModerate), "<"));
  f.evidence.push_back(E("sm_efficiency_percent", g.sm_efficiency_percent, "percent", "Est. SM Efficiency over the steps"));
  f.evidence.push_back(E("gpu_busy_percent", g.busy_percent, "percent", "union of kernel time / step time"));
  if (!std::isnan(g.achieved_occupancy_percent))
    f.evidence.push_back(E("achieved_occupancy_percent", g.achieved_occupancy_percent, "percent",
                           "Est. Achieved Occupancy (kernel-time weighted)"));
  f.evidence.push_back(E("median_kernel_us", c.a.launch.median_kernel_us, "us", "kernel durations inside steps"));
  const auto& mem = c.a.memory;
  if (mem.available && !std::isnan(mem.peak_reserved_percent)) {
    f.evidence.push_back(E("peak_memory_reserved_percent", mem.peak_reserved_percent, "percent",
                           fmt::format("caching allocator's peak {:.1f} GiB of {:.1f} GiB ([memory] events)",
                                       std::max(mem.peak_reserved_gib, mem.peak_allocated_gib), mem.total_gib)));
    f.detail += mem.peak_reserved_percent < 50.0
                    ? fmt::format(" Memory allows a larger batch: the step peaked at {:.0f}% of device memory.",
                                  mem.peak_reserved_percent)
                    : fmt::format(" Memory is {:.0f}% used at the peak: a larger batch needs activation checkpointing "
                                  "or a smaller optimizer state first.",
                                  mem.peak_reserved_percent);
  }
  f.recommendations = {
      {"increase the per-GPU batch (or sequence) size; gradient accumulation keeps the optimizer batch but does not "
       "fill the SMs",
       "each kernel gets enough blocks to occupy every SM"},
      {"torch.compile(model) or CUDA graphs", "fuses the small kernels and removes the launch gaps between them"},
      {"pad bf16/fp16 matrix dimensions to multiples of 8 (ideally 64/128)", "tensor-core tiles are filled"},
  };
  // Twice the batch, as throughput (the batch changes the step, so not step time).
  // Work spread over SMs that now sit empty takes no longer until the SMs are full:
  // the kernels' time scales by max(1, 2 x fill) (point); the host's time per step
  // stays (the same kernels are issued). Best: kernel time unchanged; worst: it
  // doubles (the kernels were latency-bound, not short of blocks).
  const double busy_ms = c.step_ms * g.busy_percent / 100.0;
  const double host_ms = c.step_ms - busy_ms;
  const auto throughput = [&](double kernel_scale) { return 2.0 * c.step_ms / (host_ms + busy_ms * kernel_scale); };
  ExpectedGain gain = LevelGain("throughput_x", 1.0, throughput(std::max(1.0, 2.0 * fill)), throughput(1.0),
                                throughput(2.0), "memory_capacity",
                                fmt::format("twice the batch per step: {:.2f} ms of kernels at {:.0f}% SM fill take "
                                            "max(1, 2 x fill) as long, {:.2f} ms of host time per step unchanged; best: "
                                            "kernel time unchanged, worst: doubled",
                                            busy_ms, 100.0 * fill, host_ms));
  gain.unit = "x";
  f.gain = gain;
  out.push_back(std::move(f));
}

/// Reads the findings so far; appends only when none of them explains the idle time.
/// The evidence and Amdahl gain of a GPU idle much of the step: where its idle time
/// sits (the idle-cause breakdown) and the step with that time gone at best,
/// unchanged at worst, the point in the middle (no fix's effect is measured).
/// Share of the step the device spent copying or setting memory with no kernel
/// running: work, never idle (the step breakdown gives each instant to one
/// category, kernels first).
double CopyAndMemsetPercent(const Context& c) {
  return Percent(ToMs(c.a.average.ns[static_cast<int>(StepCategory::kMemcpy)] +
                      c.a.average.ns[static_cast<int>(StepCategory::kMemset)]),
                 c.step_ms);
}

/// Kernels, copies and memsets: the share of the step the device had work.
double DeviceWorkPercent(const Context& c) { return std::min(100.0, c.a.gpu.busy_percent + CopyAndMemsetPercent(c)); }

void AddIdleEvidenceAndGain(const Context& c, Finding& f, double threshold) {
  f.evidence.push_back(E("gpu_busy_percent", c.a.gpu.busy_percent, "percent", "union of kernel time / step window",
                         threshold, "<"));
  f.evidence.push_back(E("kernels_per_step", c.a.launch.kernels_per_step, "count", "kernels inside steps"));
  for (int i = 0; i < kNumIdleCauses; ++i) {
    f.evidence.push_back(E(std::string("idle_") + IdleCauseName(static_cast<IdleCause>(i)) + "_percent",
                           Percent(ToMs(c.a.device_idle.ns[i]), c.step_ms * StepCount(c.a)),
                           "percent", "share of step time"));
  }
  const double copying = CopyAndMemsetPercent(c);
  if (copying > 0)
    f.evidence.push_back(E("copy_memset_percent", copying, "percent",
                           "device copies and memsets with no kernel running / step window: work, not idle"));
  const double idle_ms = c.step_ms * (100.0 - DeviceWorkPercent(c)) / 100.0;
  f.gain = StepGain(c.step_ms, c.step_ms - idle_ms / 2, c.step_ms - idle_ms, c.step_ms, "host_work",
                    fmt::format("Amdahl bound over {:.2f} ms of idle device time per step: all of it removed at best, "
                                "none at worst; the point is the middle (no fix's effect is measured here)",
                                idle_ms));
  f.recommendations = {
      {"profile the host side (py-spy, torch.profiler with_stack=True) for what runs between GPU work",
       "the GPU waits on something the trace shows only as CPU time"},
      {"if the job is interactive or mostly CPU, release the GPU or share it (MIG, MPS, smaller instance)",
       "an idle GPU costs the same as a busy one"},
  };
}

/// The copies of the steady steps, summed.
struct CopyTraffic {
  int64_t copies = 0;
  TimeNs device_ns = 0;
  TimeNs host_device_ns = 0;
  int64_t h2d = 0, d2h = 0, other = 0;
  int64_t pageable = 0, pinned = 0;  // host-device bytes by host memory, where named
  int64_t bytes() const { return h2d + d2h + other; }
};
CopyTraffic SteadyCopies(const RecordingAnalysis& a) {
  CopyTraffic t;
  for (const auto& s : a.SteadySteps()) {
    t.copies += s.copies;
    t.device_ns += s.copy_device_ns;
    t.host_device_ns += s.host_device_copy_ns;
    t.pageable += s.pageable_copy_bytes;
    t.pinned += s.pinned_copy_bytes;
    t.h2d += s.h2d_bytes;
    t.d2h += s.d2h_bytes;
    t.other += s.other_copy_bytes;
  }
  return t;
}

/// Copies hold the step: the device moves bytes with no kernel running for a
/// large share of it. A cause of its own (transfers), never idle time.
void CopyBound(const Context& c, std::vector<Finding>& out) {
  // The step breakdown's copy time with no kernel running, host↔device's share of
  // it by the copies' device time (device-to-device moves are device work, a
  // memory-bound kernel's kind, not transfers).
  const CopyTraffic t = SteadyCopies(c.a);
  if (t.device_ns <= 0 || t.host_device_ns <= 0) return;
  const double host_device_share = static_cast<double>(t.host_device_ns) / static_cast<double>(t.device_ns);
  const double copy_ms = ToMs(c.a.average.ns[static_cast<int>(StepCategory::kMemcpy)]) * host_device_share;
  const double pct = Percent(copy_ms, c.step_ms);
  if (pct < kTraceCopyModeratePercent) return;
  const double steps = StepCount(c.a);
  Finding f;
  f.verdict = "copy_bound";
  f.severity = pct >= kTraceCopyHighPercent ? Severity::kHigh : Severity::kModerate;
  const bool back_to_host = t.d2h > t.h2d;
  f.title = fmt::format("Copy-bound: the device copies with no kernel running {:.1f}% of each step", pct);
  f.detail = fmt::format(
      "{:.2f} ms of every {:.2f} ms step is host-device copying with nothing computing beside it; kernels run {:.1f}% "
      "of the step. {:.0f} copies per step (every direction){}.",
      copy_ms, c.step_ms, c.a.gpu.busy_percent, static_cast<double>(t.copies) / steps,
      t.bytes() > 0 ? fmt::format(", {:.1f} MiB per step ({:.1f} MiB to the device, {:.1f} MiB back), {:.1f} GB/s while "
                                  "copying",
                                  static_cast<double>(t.bytes()) / steps / 1048576.0,
                                  static_cast<double>(t.h2d) / steps / 1048576.0,
                                  static_cast<double>(t.d2h) / steps / 1048576.0,
                                  t.device_ns > 0 ? static_cast<double>(t.bytes()) / static_cast<double>(t.device_ns) : 0.0)
                    : std::string());
  const bool host_memory_known = t.pageable + t.pinned > 0;
  const double pageable_pct =
      host_memory_known ? 100.0 * static_cast<double>(t.pageable) / static_cast<double>(t.pageable + t.pinned) : NAN;
  if (host_memory_known)
    f.detail += fmt::format(" {:.0f}% of the host-device bytes whose host memory the trace names were pageable{}.",
                            pageable_pct,
                            pageable_pct >= 10 ? " (staged through a driver buffer: the copy blocks the host)"
                                               : " (pinned already: what is left is bytes and overlap)");
  if (!c.a.steps_from_markers || steps < kSteadyStateSteps)
    f.detail += " With one window and no steady steps, a one-time load (weights, a dataset moved to the device) looks "
                "the same: a longer run spreads it; profile steps after it to see whether the copies recur.";
  f.evidence.push_back(E("copy_percent_of_step", pct, "percent",
                         "host-device copy time with no kernel running / step time",
                         f.severity == Severity::kHigh ? kTraceCopyHighPercent : kTraceCopyModeratePercent, ">="));
  f.evidence.push_back(E("copy_ms_per_step", copy_ms, "ms", "device copy time with no kernel running, per step"));
  f.evidence.push_back(E("host_device_percent_of_copy_time", 100 * host_device_share, "percent",
                         "host-to-device and device-to-host copies' share of all copies' device time (the rest: "
                         "device-to-device and peer moves, device work)"));
  f.evidence.push_back(E("gpu_busy_percent", c.a.gpu.busy_percent, "percent", "union of kernel time / step window"));
  if (t.bytes() > 0)
    f.evidence.push_back(E("copy_bytes_per_step", static_cast<double>(t.bytes()) / steps, "bytes",
                           "bytes the copies moved, per steady step"));
  if (host_memory_known)
    f.evidence.push_back(E("pageable_percent_of_host_device_bytes", pageable_pct, "percent",
                           "host-device copy bytes from or to pageable memory, of those whose host memory is named "
                           "(Kineto's copy names, nsys's srcKind/dstKind)"));
  if (back_to_host) {
    f.recommendations.push_back({"keep results on the device: drop .cpu(), .item(), .numpy() and tensor logging from "
                                 "the step",
                                 "each copy back to the host waits for the GPU and stops the host issuing work"});
    f.recommendations.push_back({"copy back once per N steps, or into pinned buffers with non_blocking=True",
                                 "fewer, asynchronous transfers overlap compute"});
  } else {
    // Pageable or unnamed host memory first gets pinned; pinned copies (under 10 %
    // pageable) are left with their bytes and their overlap.
    if (!host_memory_known || pageable_pct >= 10)
      f.recommendations.push_back({"DataLoader(pin_memory=True) and .to(device, non_blocking=True)",
                                   "a copy from pinned memory is queued and overlaps compute; from pageable memory it "
                                   "is staged and blocks"});
    f.recommendations.push_back({"move fewer bytes: keep the dataset or constants on the device, send uint8/fp16 and "
                                 "convert there",
                                 "the copy engine's time is bytes over PCIe bandwidth"});
    f.recommendations.push_back({"prefetch the next batch on a side CUDA stream with non_blocking=True",
                                 "a pinned copy on its own stream runs while the current step computes"});
  }
  f.gain = StepGain(c.step_ms, c.step_ms - copy_ms / 2, c.step_ms - copy_ms, c.step_ms, "gpu_busy_time",
                    fmt::format("Amdahl bound over {:.2f} ms of exposed copy time per step: all of it hidden behind "
                                "compute or removed at best, none at worst (copies that are needed and already "
                                "pinned); the point is the middle (no fix's effect is measured here)",
                                copy_ms));
  out.push_back(std::move(f));
}

IdleCause LargestIdleCause(const IdleBreakdown& idle) {
  IdleCause top = IdleCause::kOther;
  for (int i = 0; i < kNumIdleCauses; ++i)
    if (idle.ns[i] > idle.ns[static_cast<int>(top)]) top = static_cast<IdleCause>(i);
  return top;
}

bool Explained(const std::vector<Finding>& out, Severity at_least) {
  for (const auto& f : out)  // idleness already explained by a cause of idle time
    if (f.severity >= at_least && (f.verdict == "input_bound" || f.verdict == "launch_bound" ||
                                   f.verdict == "communication_bound" || f.verdict == "undersized_work" ||
                                   f.verdict == "copy_bound"))
      return true;
  return false;
}

/// ", copies and memsets 12.0%" when the device copied with no kernel running.
std::string CopyingClause(const Context& c) {
  const double copying = CopyAndMemsetPercent(c);
  return copying >= 0.05 ? fmt::format(", copies and memsets {:.1f}%", copying) : std::string();
}

void Idle(const Context& c, std::vector<Finding>& out) {
  if (!c.a.has_gpu_activity || DeviceWorkPercent(c) >= kIdleBusyPercent) return;
  if (RecordsMissWork(c.a)) return;  // the idle time may be dropped records (a limitation says so)
  if (Explained(out, Severity::kModerate)) return;
  // A launch pattern too short to confirm (no steady state: launch_bound low) is
  // still the pattern the idle time shows: not "nothing explains it".
  if (std::any_of(out.begin(), out.end(), [](const Finding& f) { return f.verdict == "launch_bound"; })) return;
  Finding f;
  f.verdict = "idle";
  f.severity = Severity::kHigh;
  f.title = fmt::format("GPU idle: kernels run only {:.1f}% of the step time", c.a.gpu.busy_percent);
  f.detail = fmt::format(
      "Kernels ran {:.1f}%{} of the {:.1f} ms window: the device had no work for {:.1f}% of it; the largest share of "
      "that idle time is '{}'. No data-loading, launch, copy or communication pattern explains it: the job spends its "
      "time elsewhere (CPU work, waiting on I/O or other processes, or a mostly idle allocation).",
      c.a.gpu.busy_percent, CopyingClause(c), c.step_ms, 100.0 - DeviceWorkPercent(c),
      IdleCauseName(LargestIdleCause(c.a.device_idle)));
  AddIdleEvidenceAndGain(c, f, kIdleBusyPercent);
  out.push_back(std::move(f));
}

/// A GPU idle most of the step (busy under half of it, above idle's line) that no
/// rule explains: said, with where the idle time sits, never left silent between
/// two rules' thresholds.
void Underutilized(const Context& c, std::vector<Finding>& out) {
  if (!c.a.has_gpu_activity || DeviceWorkPercent(c) < kIdleBusyPercent ||
      DeviceWorkPercent(c) >= kUnderutilizedBusyPercent || RecordsMissWork(c.a))
    return;
  if (Explained(out, Severity::kLow)) return;
  Finding f;
  f.verdict = "underutilized";
  f.severity = Severity::kModerate;
  f.title = fmt::format("GPU idle {:.1f}% of the step with no pattern that explains it", 100.0 - DeviceWorkPercent(c));
  f.detail = fmt::format(
      "Kernels run {:.1f}%{} of the {:.1f} ms step; the largest share of the idle time is '{}'. No data-loading, "
      "launch, copy, communication or batch-size pattern crosses its threshold, so the trace names where the time "
      "sits but not one cause.",
      c.a.gpu.busy_percent, CopyingClause(c), c.step_ms, IdleCauseName(LargestIdleCause(c.a.device_idle)));
  f.cannot_exclude = {"launch_bound", "input_bound", "host-side synchronisation"};
  f.to_separate = "profile more steps with with_stack=True (which host code runs while the GPU waits), or mark the "
                  "loop's phases with gputriage's step markers";
  AddIdleEvidenceAndGain(c, f, kUnderutilizedBusyPercent);
  out.push_back(std::move(f));
}

/// Why this GPU's peak for the work it ran is unknown ("" when it is known): a GPU
/// missing from the spec table, or no published peak for the precision that holds
/// most of the matrix time (fp4 anywhere, fp8 before Hopper's tables).
std::string UnknownPeak(const RecordingAnalysis& a) {
  const auto spec = FindGpuSpec(a.device.name);
  const std::string gpu = a.device.name.empty() ? "this GPU" : a.device.name;
  if (!spec) return gpu + " is not in the spec table (src/analysis/gpu_specs.cc): its peaks are unknown";
  const auto& p = a.precision;
  if (p.matrix_total_ns == 0) return "";
  int dominant = 0;
  for (int i = 1; i < kNumPrecisions; ++i)
    if (p.matrix_ns[i] > p.matrix_ns[dominant]) dominant = i;
  const auto precision = static_cast<Precision>(dominant);
  if (PeakTflops(*spec, precision) > 0) return "";
  return fmt::format("no {} peak of the {} is published in the spec table", PrecisionName(precision), spec->model);
}

/// Busy, nothing above fired, but no known peak to say the work is at it.
void EfficiencyUnknown(const Context& c, const std::string& why, std::vector<Finding>& out) {
  Finding f;
  f.verdict = "efficiency_unknown";
  f.severity = Severity::kInfo;
  f.title = fmt::format("Busy {:.1f}% of the step, but whether that is the compute limit is unknown: {}",
                        c.a.gpu.busy_percent, why);
  f.detail = "A GPU busy most of the step may be at its compute limit or streaming memory far below it (decode "
             "GEMMs at a small batch are); telling them apart needs the GPU's peak for this precision and its "
             "memory bandwidth (the ridge point), and the operators' shapes.";
  f.evidence.push_back(E("gpu_busy_percent", c.a.gpu.busy_percent, "percent", "union of kernel time / step time",
                         kComputeLimitBusyPercent, ">="));
  f.cannot_exclude = {"memory_bound", "undersized_work"};
  f.to_separate = "record the trace with record_shapes=True (the per-operator roofline) on a GPU whose peaks the spec "
                  "table has, or collect DCGM_FI_PROF_PIPE_TENSOR_ACTIVE and DCGM_FI_PROF_DRAM_ACTIVE beside it";
  out.push_back(std::move(f));
}

/// Reads the findings so far; appends only when none of them is moderate or worse.
void ComputeLimit(const Context& c, std::vector<Finding>& out) {
  if (!c.a.has_gpu_activity || c.a.gpu.busy_percent < kComputeLimitBusyPercent) return;
  // Busy is not compute-limited: time that waits on DRAM is never the compute limit,
  // and where a quarter of the kernel time or more is bytes-bound work, fusing it
  // (1.2-2x on that time) is a cheap fix still left: no "at the limit" claim.
  if (MemoryBoundShare(c.a) >= kComputeLimitMaxMemoryBoundPercent) return;
  for (const auto& f : out)
    if (f.severity >= Severity::kModerate) return;
  if (const std::string why = UnknownPeak(c.a); !why.empty()) return EfficiencyUnknown(c, why, out);
  Finding f;
  f.verdict = "at_compute_limit";
  f.severity = Severity::kInfo;
  f.title = fmt::format("At the compute limit: the GPU is busy {:.1f}% of the step with no cheap fix left",
                        c.a.gpu.busy_percent);
  f.detail = "No input, precision, attention, launch or communication problem crosses its threshold. Further "
             "gains need model-level work (kernel fusion, better parallelism, algorithmic changes). For a dense "
             "transformer, 70-80% utilization and >50% tensor activity is the expected range; MoE, RL and "
             "multimodal jobs run lower by design.";
  f.evidence.push_back(E("gpu_busy_percent", c.a.gpu.busy_percent, "percent", "union of kernel time / step time",
                         kComputeLimitBusyPercent, ">="));
  if (!std::isnan(c.a.precision.tensor_core_percent_of_matrix))
    f.evidence.push_back(E("tensor_core_percent_of_matrix_time", c.a.precision.tensor_core_percent_of_matrix, "percent",
                           "matrix kernels on tensor cores", kTensorActiveTarget, ">="));
  if (!std::isnan(c.a.gpu.sm_efficiency_percent))
    f.evidence.push_back(E("sm_efficiency_percent", c.a.gpu.sm_efficiency_percent, "percent", "Est. SM Efficiency"));
  out.push_back(std::move(f));
}

/// A trace cut off with no GPU record in what is left: the profiler writes the
/// device's activities after the host's, so the cut most likely took them (issue
/// 53: a trace naming a V100 and cut short was told to add CUDA activities).
void NoGpuActivityInACutOffTrace(const RecordingAnalysis& a, std::vector<Finding>& out) {
  Finding f;
  f.verdict = "no_gpu_activity";
  f.severity = Severity::kInfo;
  f.title = "No GPU kernels in what is left of this trace: the file is cut off, most likely before its GPU records";
  const std::string device = a.device.name.empty() ? std::string() : " and describes a " + a.device.name;
  f.detail = fmt::format(
      "The trace file ends before its JSON closes{}; the PyTorch profiler writes the host's events first and "
      "the GPU's kernels and copies after them, so a cut (a full disk, a job killed while exporting, a size "
      "limit on upload) loses the GPU side first. Its {} step(s) of {:.1f} ms on average are host spans only: "
      "nothing about the GPU can be concluded until a whole file is read.",
      device, a.steps.size(), ToMs(a.avg_step_ns));
  f.evidence.push_back(E("kernels", 0, "count", "kernel events in the part of the file that was read"));
  f.evidence.push_back(E("avg_step_ms", ToMs(a.avg_step_ns), "ms", "host step spans"));
  f.recommendations = {{"copy or export the trace again, whole (check the disk's free space and that the job was not "
                        "killed while export_chrome_trace or the tensorboard handler wrote it)",
                        "the GPU side is in the part of the file that is missing"}};
  out.push_back(std::move(f));
}

/// Kernel launches recorded with no kernel record: CUDA activity was asked for
/// (the launches are CUPTI's own callbacks) and its records were lost.
void GpuRecordsLost(const RecordingAnalysis& a, std::vector<Finding>& out) {
  Finding f;
  f.verdict = "no_gpu_activity";
  f.severity = Severity::kInfo;
  f.title = fmt::format("No GPU records, though the host launched {} kernel{}: the profiler lost its GPU activities",
                        a.launches_without_gpu_records, a.launches_without_gpu_records == 1 ? "" : "s");
  f.detail = fmt::format(
      "The trace records {} kernel launch call{} (CUPTI's callbacks: CUDA activity was requested) and no kernel, "
      "copy or memset. The activity records were lost between CUPTI and the file: CUPTI could not start its activity "
      "tracing (another profiler or tool holding it, a driver older than the CUDA runtime, a container without the "
      "driver's CUPTI access), its buffers were not flushed before the profiler stopped, or the trace was written "
      "before the device side arrived. Nothing about the GPU can be concluded from it.",
      a.launches_without_gpu_records, a.launches_without_gpu_records == 1 ? "" : "s");
  f.evidence.push_back(E("kernel_launch_calls", static_cast<double>(a.launches_without_gpu_records), "count",
                         "cudaLaunchKernel / graph launch calls in the trace"));
  f.evidence.push_back(E("kernels", 0, "count", "kernel, copy and memset records in the trace"));
  f.recommendations = {
      {"check the job's log for CUPTI warnings (CUPTI_ERROR_*, 'CUPTI initialization failed', 'profiler already "
       "running'), run one profiler at a time, and match the driver to the CUDA runtime",
       "CUPTI reports why it could not record activities, and only one tool may hold it"},
      {"let the profiler stop before the trace is exported (prof.stop() or leaving the `with` block, then "
       "export_chrome_trace)",
       "the GPU activities are flushed at stop"}};
  out.push_back(std::move(f));
}

void NoGpuActivity(const RecordingAnalysis& a, std::vector<Finding>& out) {
  if (a.truncated && a.source_format != "nsys") return NoGpuActivityInACutOffTrace(a, out);
  if (a.launches_without_gpu_records > 0) return GpuRecordsLost(a, out);
  Finding f;
  f.verdict = "no_gpu_activity";
  f.severity = Severity::kInfo;
  f.title = "No GPU kernels in this trace: only the host side can be judged";
  f.detail = fmt::format(
      "The trace has {} step(s) of {:.1f} ms on average but records no GPU kernels or copies (a CPU-only rank, "
      "a non-CUDA backend, or a profiler started without CUDA activities). GPU utilization, precision and "
      "kernel efficiency cannot be concluded from it.",
      a.steps.size(), ToMs(a.avg_step_ns));
  f.evidence.push_back(E("kernels", 0, "count", "kernel events in the trace"));
  f.evidence.push_back(E("avg_step_ms", ToMs(a.avg_step_ns), "ms", "host step spans"));
  if (a.source_format == "nsys")
    f.recommendations = {{"nsys profile --trace=cuda,nvtx on a GPU rank", "records kernels and CUDA calls so the GPU "
                                                                           "side can be diagnosed"}};
  else
    f.recommendations = {{"profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a GPU rank",
                          "records kernels so the GPU side can be diagnosed"}};
  out.push_back(std::move(f));
}

}  // namespace

std::vector<Finding> JudgeRecording(const RecordingAnalysis& a) {
  std::vector<Finding> out;
  if (!a.has_gpu_activity) {
    NoGpuActivity(a, out);
    for (auto& f : out) f.rank = a.rank;
    return out;
  }
  if (a.steps.empty() || a.avg_step_ns <= 0) return out;  // a cut-off file says why (ListLimitations, Diagnose's notes)
  const Context c{a, ToMs(a.avg_step_ns), ToMs(a.average.ns[static_cast<int>(StepCategory::kKernel)])};
  InputBound(c, out);
  LowPrecision(c, out);
  UnfusedAttention(c, out);
  CommunicationBound(c, out);
  CopyBound(c, out);
  LaunchBound(c, out);
  MemoryBound(c, out);
  MisalignedShapes(c, out);
  UndersizedWork(c, out);
  Idle(c, out);
  Underutilized(c, out);
  ComputeLimit(c, out);
  for (auto& f : out) {
    f.rank = a.rank;
    // A cut-off file: every figure is of the steps it holds whole, and the reader is told.
    if (a.truncated)
      f.detail += fmt::format(" The trace file is cut off: judged on the {} step{} whose device work it holds whole "
                              "({} later step{} left out, their kernels partly or wholly lost).",
                              a.steps.size(), a.steps.size() == 1 ? "" : "s", a.truncated_steps_dropped,
                              a.truncated_steps_dropped == 1 ? "" : "s");
  }
  return out;
}

const char* WorkloadClassName(WorkloadClass w) {
  switch (w) {
    case WorkloadClass::kDenseTransformer: return "dense-transformer";
    case WorkloadClass::kCnn: return "cnn";
    case WorkloadClass::kMoe: return "moe";
    case WorkloadClass::kRl: return "rl";
    case WorkloadClass::kMultimodal: return "multimodal";
    case WorkloadClass::kInference: return "inference";
    default: return "unspecified";
  }
}

std::optional<WorkloadClass> ParseWorkloadClass(std::string_view name) {
  for (auto w : {WorkloadClass::kUnspecified, WorkloadClass::kDenseTransformer, WorkloadClass::kCnn, WorkloadClass::kMoe,
                 WorkloadClass::kRl, WorkloadClass::kMultimodal, WorkloadClass::kInference})
    if (name == WorkloadClassName(w)) return w;
  return std::nullopt;
}

WorkloadTargets TargetsFor(WorkloadClass w) {
  // Dense transformers: 70-80 % utilization, > 50 % tensor activity, > 70 % SM
  // activity; below 50 % merits investigation (the project brief; DCGM's guidance
  // that SM activity >= 0.8 is needed and < 0.5 is likely ineffective). The other
  // classes run lower by design; their figures are gputriage's judgement, scaled
  // from the dense targets by what each class spends outside dense matmuls.
  switch (w) {
    case WorkloadClass::kCnn:
      return {70, 50, 60, 30, "a CNN (convolutions on tensor cores, normalisation and pooling off them)"};
    case WorkloadClass::kMoe:
      return {50, 35, 50, 30, "a mixture-of-experts model (routing and all-to-all lower the ceiling)"};
    case WorkloadClass::kRl:
      return {30, 15, 30, 10, "RL training (rollouts and environment steps keep the GPU waiting by design)"};
    case WorkloadClass::kMultimodal:
      return {50, 35, 50, 30, "a multimodal model (heterogeneous encoders, heavy input pipelines)"};
    case WorkloadClass::kInference:
      return {40, 20, 40, 20, "inference serving (load follows requests; batching sets the level)"};
    case WorkloadClass::kDenseTransformer:
      return {70, 50, 70, 50, "a dense transformer"};
    default:
      return {70, 50, 70, 50, "a dense transformer (no --workload given)"};
  }
}

namespace {

/// The ranks of one run are one job: a trace verdict found on several ranks is one
/// finding (the most severe rank's evidence and gain) that names the ranks showing
/// it and those that do not.
void GroupRanks(std::vector<Finding>& findings, const std::vector<int>& ranks) {
  if (ranks.size() < 2) return;
  std::vector<Finding> kept;
  std::vector<std::vector<int>> members;
  for (auto& f : findings) {
    auto same = std::find_if(kept.begin(), kept.end(), [&](const Finding& k) { return k.verdict == f.verdict; });
    if (same == kept.end()) {
      members.push_back({f.rank});
      kept.push_back(std::move(f));
      continue;
    }
    members[static_cast<size_t>(same - kept.begin())].push_back(f.rank);
    if (f.severity > same->severity) *same = std::move(f);
  }
  for (size_t i = 0; i < kept.size(); ++i) {
    std::vector<std::string> with, without;
    for (int r : ranks)
      (std::find(members[i].begin(), members[i].end(), r) != members[i].end() ? with : without).push_back(std::to_string(r));
    auto& f = kept[i];
    f.scope = fmt::format("ranks {} of {} (evidence: rank {})", Join(with, ", "), ranks.size(), f.rank);
    f.detail += fmt::format(" Judged for the run's {} ranks together: seen on ranks {}{}.", ranks.size(), Join(with, ", "),
                            without.empty() ? "" : "; not on ranks " + Join(without, ", "));
  }
  findings = std::move(kept);
}

/// A finding from metrics that repeats a trace finding's verdict joins it: one
/// diagnosis, with the metric evidence beside the trace evidence.
void MergeSameVerdicts(std::vector<Finding>& findings, const RunSources& sources) {
  const auto group = [&](const Finding& f) {
    return f.recording >= 0 && static_cast<size_t>(f.recording) < sources.group.size()
               ? sources.group[static_cast<size_t>(f.recording)]
               : 0;
  };
  std::vector<Finding> kept;
  for (auto& f : findings) {
    if (f.origin == "metrics") {
      // Only evidence of the same run joins: another run's metrics agreeing is no evidence.
      auto trace = std::find_if(kept.begin(), kept.end(), [&](const Finding& k) {
        return k.origin == "trace" && k.verdict == f.verdict && group(k) == group(f);
      });
      if (trace != kept.end()) {
        for (auto e : f.evidence) {
          e.source = "metrics, " + f.scope + ": " + e.source;
          trace->evidence.push_back(std::move(e));
        }
        trace->detail += " The GPU metrics of the same run agree (" + f.scope + ").";
        continue;
      }
    }
    kept.push_back(std::move(f));
  }
  findings = std::move(kept);
}

}  // namespace

Diagnosis Diagnose(const Run& run, const DiagnoseOptions& options) {
  Diagnosis d;
  const WorkloadTargets targets = TargetsFor(options.workload);
  // Each recording's analysis is its own: the ranks of a run are analysed at once.
  d.recordings.resize(run.recordings.size());
  // The recordings at once, and the cores left over to each one's own passes.
  const int inner = std::max<int>(1, CoreCount() / static_cast<int>(std::max<size_t>(1, run.recordings.size())));
  ParallelFor(run.recordings.size(), CoreCount(), [&](size_t i) {
    const Recording& rec = run.recordings[i];
    if (rec.analysis) {
      d.recordings[i] = *rec.analysis;
      d.recordings[i].rank = rec.rank;  // numbered after it was analysed, where the trace named none
    } else {
      d.recordings[i] = AnalyzeRecording(rec, inner);
    }
  });
  const RunSources sources = GroupSourcesIntoRuns(run, d.recordings);
  d.notes = sources.notes;
  const auto add = [&d](std::vector<Finding> found, size_t recording) {
    for (auto& f : found) {
      f.recording = static_cast<int>(recording);
      d.findings.push_back(std::move(f));
    }
  };
  for (size_t i = 0; i < d.recordings.size(); ++i) {
    if (!d.recordings[i].has_trace) continue;
    add(JudgeRecording(d.recordings[i]), i);
    if (d.recordings[i].truncated)
      d.notes.push_back(fmt::format(
          "{} is cut off (the file ended before its JSON closed): {}", FileName(run.recordings[i].source_path),
          d.recordings[i].steps.empty()
              ? "not one step's device work is held whole, so no verdict about the GPU is drawn from it; "
                "profile again, or fetch the whole file"
              : fmt::format("its verdicts are drawn from the {} step{} held whole before the cut, {} later step{} left "
                            "out",
                            d.recordings[i].steps.size(), d.recordings[i].steps.size() == 1 ? "" : "s",
                            d.recordings[i].truncated_steps_dropped,
                            d.recordings[i].truncated_steps_dropped == 1 ? "" : "s")));
  }
  {
    // The ranks of each run's traces: grouped only when every trace names a distinct rank.
    std::vector<Finding> grouped;
    for (int g = 0; g < sources.groups; ++g) {
      std::vector<int> ranks;
      bool distinct = true;
      for (size_t i = 0; i < d.recordings.size(); ++i) {
        if (!d.recordings[i].has_trace || sources.group[i] != g) continue;
        const int rank = d.recordings[i].rank;
        distinct = distinct && rank >= 0 && std::find(ranks.begin(), ranks.end(), rank) == ranks.end();
        ranks.push_back(rank);
      }
      std::vector<Finding> of_run;
      for (auto& f : d.findings)
        if (sources.group[static_cast<size_t>(f.recording)] == g) of_run.push_back(std::move(f));
      std::sort(ranks.begin(), ranks.end());
      if (distinct) GroupRanks(of_run, ranks);
      grouped.insert(grouped.end(), std::make_move_iterator(of_run.begin()), std::make_move_iterator(of_run.end()));
    }
    d.findings = std::move(grouped);
  }
  // Ranks of one run with aligned clocks: who waits for whom at the collectives.
  for (int g = 0; g < sources.groups; ++g) {
    std::vector<analysis::RankTrace> ranks;
    std::vector<int> seen;
    bool distinct = true;
    for (size_t i = 0; i < d.recordings.size(); ++i) {
      const auto& rec = run.recordings[i];
      if (!d.recordings[i].has_trace || sources.group[i] != g || !rec.clock_is_absolute) continue;
      distinct = distinct && rec.rank >= 0 && std::find(seen.begin(), seen.end(), rec.rank) == seen.end();
      seen.push_back(rec.rank);
      ranks.push_back({&rec, &d.recordings[i], static_cast<int>(i)});
    }
    if (ranks.size() < 2 || !distinct) continue;
    CollectiveSkew skew = analysis::MeasureCollectiveSkew(ranks);
    if (!skew.available && !skew.unavailable_reason.empty())
      d.notes.push_back(fmt::format("Collective arrival skew across the {} ranks not judged: {}.", ranks.size(),
                                    skew.unavailable_reason));
    std::vector<Finding*> of_run;
    for (auto& f : d.findings)
      if (f.recording >= 0 && sources.group[static_cast<size_t>(f.recording)] == g) of_run.push_back(&f);
    std::vector<Finding> found = JudgeCollectiveSkew(skew, of_run);
    for (auto& f : found) d.findings.push_back(std::move(f));
    d.collective_skew.push_back(std::move(skew));
  }
  for (size_t i = 0; i < d.recordings.size(); ++i) {
    add(JudgeMetrics(d.recordings[i], targets), i);
    add(JudgeStepMarkers(d.recordings[i]), i);
    add(JudgeStepMemory(d.recordings[i]), i);
    add(JudgeLedger(d.recordings[i]), i);
    add(JudgeHost(d.recordings[i]), i);
  }
  MergeSameVerdicts(d.findings, sources);
  ReconcileWithBestEvidence(d.findings, d.recordings, d.notes);
  BoundBatchByMemory(d.findings);
  if (sources.groups > 1) {
    // Sources of different runs: every finding names the file it came from.
    for (auto& f : d.findings) {
      const std::string name = FileName(run.recordings[static_cast<size_t>(f.recording)].source_path);
      f.scope = f.scope.empty() ? name : name + ": " + f.scope;
    }
  }
  std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& x, const Finding& y) {
    if (x.severity != y.severity) return x.severity > y.severity;
    const bool xs = x.gain && x.gain->unit == "ms", ys = y.gain && y.gain->unit == "ms";
    const double gx = xs ? x.gain->current - x.gain->expected : 0, gy = ys ? y.gain->current - y.gain->expected : 0;
    return gx > gy;
  });
  // Run summary: the mean over recordings (ranks) that have steps.
  Summary& s = d.summary;
  s.recordings = static_cast<int>(d.recordings.size());
  s.workload = WorkloadClassName(options.workload);
  int n = 0;
  double sm = 0, occ = 0, tc = 0;
  int n_sm = 0, n_occ = 0, n_tc = 0;
  for (const auto& a : d.recordings) {
    if (s.device.empty() && !a.device.name.empty()) s.device = a.device.name;
    for (const auto& m : a.metric_devices)
      if (s.device.empty() && !m.name.empty()) s.device = m.name;
    if (a.steps.empty()) continue;
    ++n;
    s.gpu_busy_percent += a.gpu.busy_percent;
    s.data_wait_percent += Percent(static_cast<double>(a.average.ns[static_cast<int>(StepCategory::kDataLoader)]),
                                   static_cast<double>(a.avg_step_ns));
    s.avg_step_ms += ToMs(a.avg_step_ns);
    s.steps += static_cast<int64_t>(a.SteadySteps().size());
    s.exposed_communication_percent += Percent(ToMs(a.comm.exposed_ns), ToMs(a.avg_step_ns) * StepCount(a));
    if (!std::isnan(a.gpu.sm_efficiency_percent)) sm += a.gpu.sm_efficiency_percent, ++n_sm;
    if (!std::isnan(a.gpu.achieved_occupancy_percent)) occ += a.gpu.achieved_occupancy_percent, ++n_occ;
    if (!std::isnan(a.precision.tensor_core_percent_of_matrix)) tc += a.precision.tensor_core_percent_of_matrix, ++n_tc;
  }
  if (n > 0) {
    s.gpu_busy_percent /= n;
    s.data_wait_percent /= n;
    s.avg_step_ms /= n;
    s.exposed_communication_percent /= n;
  } else {
    // No profiled steps: the steps the job marked itself (step markers) speak for
    // the run, so the summary reflects the source it was judged from.
    double step_sum = 0, wait_sum = 0;
    int64_t marked = 0;
    for (const auto& a : d.recordings) {
      if (a.marked.steps == 0) continue;
      const auto w = static_cast<double>(a.marked.steps);
      step_sum += w * a.marked.step_ms_mean;
      wait_sum += w * a.marked.data_wait_ms_mean;
      marked += a.marked.steps;
    }
    if (marked > 0) {
      s.steps = marked;
      s.avg_step_ms = step_sum / static_cast<double>(marked);
      s.data_wait_percent = step_sum > 0 ? 100.0 * wait_sum / step_sum : 0.0;
    }
  }
  if (n_sm > 0) s.sm_efficiency_percent = sm / n_sm;
  if (n_occ > 0) s.achieved_occupancy_percent = occ / n_occ;
  if (n_tc > 0) s.tensor_core_percent_of_matrix = tc / n_tc;

  // Devices, GPU-hours and utilization: from metric logs where present, else
  // one device per trace rank over its profiled window.
  d.cost = ComputeCost(d.recordings, options, targets);
  // The ledger's dollars: the price given, else the GPUs' own (a MIG instance's
  // board price: the ledger counts it by its share already).
  for (auto& a : d.recordings) {
    if (!a.ledger.valid) continue;
    if (options.price_per_gpu_hour) {
      analysis::PriceLedger(a.ledger, *options.price_per_gpu_hour, "--price-per-gpu-hour");
      continue;
    }
    for (const auto& c : d.cost.devices)
      if (c.price_per_hour > 0) {
        analysis::PriceLedger(a.ledger, c.price_per_hour, c.price_source);
        break;
      }
  }
  int metric_devices = 0;
  double gr_sum = 0, gr_w = 0;
  bool gr_everywhere = true;
  std::vector<std::string> seen;  // one GPU in several phases or files counts once
  for (const auto& a : d.recordings)
    for (const auto& m : a.metric_devices) {
      const std::string key = m.hostname + "|" + (m.uuid.empty() ? m.label + "|" + m.name : m.uuid) + "|" + m.label;
      if (std::find(seen.begin(), seen.end(), key) == seen.end()) {
        seen.push_back(key);
        ++metric_devices;
      }
      const auto& gr = m.metrics[static_cast<int>(Metric::kGrEngineActive)];
      if (gr.samples == 0) gr_everywhere = false;
      else gr_sum += gr.mean * std::max(m.hours, 1e-9), gr_w += std::max(m.hours, 1e-9);
    }
  if (metric_devices > 0) {
    s.devices = metric_devices;
    s.gpu_hours = d.cost.gpu_hours;
    // nvidia-smi utilization.gpu only (GR engine activity is not the same number).
    double util_sum = 0, util_w = 0;
    for (const auto& a : d.recordings)
      for (const auto& m : a.metric_devices) {
        const auto& util = m.metrics[static_cast<int>(Metric::kGpuUtil)];
        if (util.samples == 0) continue;
        const double w = m.hours > 0 ? m.hours : 1e-9;
        util_sum += w * util.mean;
        util_w += w;
      }
    if (util_w > 0) s.gpu_util_mean_percent = util_sum / util_w;
  } else {
    for (const auto& a : d.recordings)
      if (a.has_gpu_activity) {
        ++s.devices;
        s.gpu_hours += static_cast<double>(a.gpu.window_ns) / 3.6e12;
      }
  }
  // gpu_busy_percent: the best measure of busy time available.
  if (n > 0) {
    s.gpu_busy_source = "trace: union of kernel time over the profiled steps";
  } else if (metric_devices > 0 && gr_everywhere && gr_w > 0) {
    s.gpu_busy_percent = gr_sum / gr_w;
    s.gpu_busy_source = "DCGM GR engine activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE), GPU-hour weighted";
  } else if (!std::isnan(s.gpu_util_mean_percent)) {
    s.gpu_busy_percent = s.gpu_util_mean_percent;
    s.gpu_busy_source = "nvidia-smi utilization.gpu (share of time a kernel runs), GPU-hour weighted";
  } else {
    s.gpu_busy_source = "none: no busy measure in the inputs";
  }
  if (!std::isnan(d.cost.idle_cost_by_util_usd)) s.idle_cost_usd = d.cost.idle_cost_by_util_usd;
  if (!std::isnan(d.cost.monthly_idle_by_util_usd)) s.idle_cost_usd_per_month = d.cost.monthly_idle_by_util_usd;
  return d;
}

}  // namespace gputriage
