// AnalyzeRecording: every measurement of one recording, from the canonical model.
#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <span>
#include <set>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "src/analysis/metric_analysis.h"
#include "src/analysis/analysis_internal.h"
#include "src/analysis/collective_skew.h"
#include "src/analysis/trace_timeline.h"
#include "src/analysis/gpu_specs.h"
#include "src/analysis/kernel_taxonomy.h"
#include "src/analysis/ledger.h"
#include "src/analysis/roofline.h"
#include "src/analysis/shapes.h"
#include "src/analysis/what_if.h"
#include "src/util/parallel.h"
#include "src/util/strings.h"

namespace gputriage {

const char* StepCategoryName(StepCategory c) {
  switch (c) {
    case StepCategory::kKernel: return "kernel";
    case StepCategory::kMemcpy: return "memcpy";
    case StepCategory::kMemset: return "memset";
    case StepCategory::kCommunication: return "communication";
    case StepCategory::kRuntime: return "runtime";
    case StepCategory::kDataLoader: return "data_loader";
    case StepCategory::kCpuExec: return "cpu_exec";
    case StepCategory::kOther: return "other";
  }
  return "other";
}

const char* IdleCauseName(IdleCause c) {
  switch (c) {
    case IdleCause::kDataLoader: return "data_loader";
    case IdleCause::kHostWait: return "host_wait";
    case IdleCause::kLaunchOverhead: return "launch_overhead";
    case IdleCause::kSynchronization: return "synchronization";
    case IdleCause::kOther: return "other";
  }
  return "other";
}

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kLow: return "low";
    case Severity::kModerate: return "moderate";
    case Severity::kHigh: return "high";
  }
  return "info";
}

namespace {

constexpr TimeNs kShortKernel = 10 * kNsPerUs;  // HTA/TraceLens "short kernel" bound
// A bytes-bound kernel by name (elementwise, reduction, copy) whose thread blocks
// leave over half the SMs without work (undersized_work's line) cannot pull the
// DRAM bandwidth its name suggests: its time is undersized work, not memory-bound.
constexpr float kMinBlocksPerSmForBandwidth = 0.5f;
constexpr size_t kTopKernels = 15;

struct NameAccumulator {
  KernelKind kind;
  bool kind_from_operator = false;  // classified by the matrix operator that launched it
  int64_t count = 0;
  TimeNs total = 0, min = std::numeric_limits<TimeNs>::max(), max = 0;
  double blocks_weighted = 0, blocks_time = 0, occ_weighted = 0, occ_time = 0;
};

bool InSteps(const intervals::List& steps, TimeNs t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t, [](TimeNs v, const Interval& r) { return v < r.end; });
  return it != steps.end() && it->start <= t;
}


/// Communication kernels on the primary device and their overlap with compute, in
/// one sweep over its kernels.
StatusOr<CommStats> MeasureCommunication(const analysis::TracePrep& prep, int primary, const intervals::List& step_list) {
  CommStats out;
  enum { kComm = 0, kCompute = 1 };
  size_t at = 0;
  auto segment = [&](TimeNs a, TimeNs b, const analysis::CoverageSweep<2>::Active& active) {
    while (at < step_list.size() && step_list[at].end <= a) ++at;
    for (size_t i = at; i < step_list.size() && step_list[i].start < b; ++i) {
      const TimeNs lo = std::max(a, step_list[i].start), hi = std::min(b, step_list[i].end);
      if (lo >= hi || active[kComm] == 0) continue;
      out.union_ns += hi - lo;
      if (active[kCompute] > 0) out.overlapped_ns += hi - lo;
    }
  };
  analysis::CoverageSweep<2> sweep;
  analysis::DeviceOpCursor ops(prep);
  for (const analysis::DeviceOp* op = ops.Next(); op != nullptr; op = ops.Next()) {
    if (!op->is_kernel || (primary >= 0 && op->device != primary)) continue;
    if (op->is_communication) out.kernel_ns += op->time.duration();
    sweep.Add(op->time, op->is_communication ? kComm : kCompute, segment);
  }
  RETURN_IF_ERROR(ops.status());
  sweep.Finish(segment);
  out.exposed_ns = out.union_ns - out.overlapped_ns;
  if (out.union_ns > 0)
    out.overlap_percent = 100.0 * static_cast<double>(out.overlapped_ns) / static_cast<double>(out.union_ns);
  return out;
}

/// The profiler's FLOP estimates (with_flops=True) of the host operators inside the steps.
StatusOr<double> SumStepFlops(const analysis::TraceEvents& events, const intervals::List& step_list) {
  double flops = 0;
  auto spans = events.cpu_spans();
  for (const CpuSpan* c = spans.Next(); c != nullptr; c = spans.Next())
    if (c->flops > 0 && InSteps(step_list, c->time.start)) flops += c->flops;
  RETURN_IF_ERROR(spans.status());
  return flops;
}

/// Achieved throughput from the FLOP estimates of the steps' operators.
ThroughputStats MeasureThroughput(double flops, const RecordingAnalysis& a) {
  ThroughputStats out;
  if (flops <= 0 || a.steps.empty() || a.avg_step_ns <= 0) return out;
  out.available = true;
  out.flops_per_step = flops / static_cast<double>(a.SteadySteps().size());  // summed over the steady steps
  out.achieved_tflops = out.flops_per_step / (static_cast<double>(a.avg_step_ns) * 1e-9) / 1e12;
  const auto spec = FindGpuSpec(a.device.name);
  if (!spec) return out;  // an unknown GPU's peak is unknown
  out.peak_tflops = MfuPeakTflops(*spec);
  out.peak_basis = spec->bf16_tflops > 0 ? fmt::format("{} dense bf16", spec->model) : fmt::format("{} dense fp16", spec->model);
  // FLOPs in formats faster than bf16 (fp8, int8) are measured against the peak of
  // the mix the matrix operators ran in (the time the mix needs at peak), so the
  // share stays a share of what the GPU can do.
  const auto& by_p = a.roofline.flops_by_precision;
  const double fast = by_p[static_cast<int>(Precision::kFp8)] + by_p[static_cast<int>(Precision::kInt8)] +
                      by_p[static_cast<int>(Precision::kFp4)];
  if (a.roofline.available && fast > 0) {
    double total = 0, seconds_at_peak = 0;
    for (int p = 0; p < kNumPrecisions; ++p) {
      const double peak = PeakTflops(*spec, static_cast<Precision>(p));
      if (by_p[static_cast<size_t>(p)] <= 0 || peak <= 0) continue;
      total += by_p[static_cast<size_t>(p)];
      seconds_at_peak += by_p[static_cast<size_t>(p)] / (peak * 1e12);
    }
    if (seconds_at_peak > 0) {
      out.peak_tflops = total / seconds_at_peak / 1e12;
      out.peak_basis = fmt::format("{}: the mix of precisions its matrix operators ran in ({:.0f}% of their FLOPs in "
                                   "8-bit or narrower formats)",
                                   spec->model, 100.0 * fast / total);
    }
  }
  if (out.peak_tflops > 0) {
    const double mfu = 100.0 * out.achieved_tflops / out.peak_tflops;
    // Above the peak the FLOP count and the peak do not describe the same work
    // (sparsity, a format this table lacks, an estimate counting skipped work).
    if (mfu <= 100.0) out.mfu_percent = mfu;
    else out.peak_basis += fmt::format("; the trace's FLOPs come to {:.0f}% of it, so MFU is not reported", mfu);
  }
  return out;
}

/// Leading steps of a trace far longer than the rest (kWarmupStepFactor x the median,
/// the rule the goodput ledger applies to marked steps): warm-up. Five steps at least,
/// so one slow step of a short trace is not taken for it.
int64_t CountWarmupSteps(const std::vector<Interval>& windows) {
  if (windows.size() < 5) return 0;
  std::vector<TimeNs> durations;
  for (const auto& w : windows) durations.push_back(w.duration());
  std::nth_element(durations.begin(), durations.begin() + static_cast<long>(durations.size() / 2), durations.end());
  const double median = static_cast<double>(durations[durations.size() / 2]);
  int64_t warmup = 0;
  while (warmup < static_cast<int64_t>(windows.size()) - 1 &&
         static_cast<double>(windows[static_cast<size_t>(warmup)].duration()) > analysis::kWarmupStepFactor * median)
    ++warmup;
  return warmup;
}

/// What this recording cannot tell, in words for the report.
std::vector<std::string> ListLimitations(const Recording& rec, bool no_kernels, const RecordingAnalysis& a,
                                         int dropped_tail_steps) {
  std::vector<std::string> out;
  if (rec.stats.truncated) out.push_back("truncated input: " + rec.stats.truncation_note);
  if (no_kernels) {
    out.push_back(
        "no GPU kernels were recorded: GPU busy time, kernel efficiency and precision cannot be measured; "
        "only the host-side timeline is available");
  }
  if (!a.steps_from_markers) out.push_back("no ProfilerStep#N markers: the whole trace is treated as one step window");
  if (a.captured_kernel_launches > 0)
    out.push_back(fmt::format(
        "{} kernel launches were made while a stream was captured into a CUDA/HIP graph: they record graph nodes and "
        "run no kernel{}; the graph's replays (cudaGraphLaunch) run them, so profile those steps to see the work",
        a.captured_kernel_launches,
        a.MostlyGraphCapture() ? ", and they outnumber the kernels that ran: this window shows the graph being built "
                                 "(the GPU idles while the host captures), not the work"
                               : ""));
  if (a.dropped_kernel_records > 0)
    out.push_back(fmt::format(
        "the host launched {} more kernels than the trace holds records of: the profiler dropped them (its activity "
        "buffer filled, or it stopped before they were written; an Nsight Systems export's DIAGNOSTIC_EVENT table "
        "says which); busy and idle shares are over the kept records, so the GPU is not judged idle",
        a.dropped_kernel_records));
  if (a.warmup_steps > 0)
    out.push_back(fmt::format("the first {} step(s) ran over {:.0f}x the median step (warm-up: cuDNN/cuBLAS autotuning, "
                              "allocator growth, compilation): left out of the step averages the verdicts use",
                              a.warmup_steps, analysis::kWarmupStepFactor));
  if (dropped_tail_steps > 0)
    out.push_back(fmt::format("{} trailing step(s) dropped: their device work was not fully recorded", dropped_tail_steps));
  if (no_kernels) return out;
  if (a.device.vendor != Vendor::kNvidia) {
    out.push_back(fmt::format(
        "device vendor is {}: tensor-core precision rules cover NVIDIA kernel names and rocBLAS type tags only; "
        "SM efficiency and occupancy need fields this trace may lack",
        VendorName(a.device.vendor)));
  }
  if (std::isnan(a.gpu.achieved_occupancy_percent))
    out.push_back("kernels carry no occupancy estimate: achieved occupancy not reported");
  if (a.device.name.empty())
    out.push_back("no deviceProperties: the GPU model is unknown, so peak-based gains are not computed");
  if (!a.device_from_kernel_names.empty())
    out.push_back(fmt::format(
        "the trace does not describe its GPU: its compute capability is taken as at least {}.{} from the kernels "
        "that ran ({}: libraries name kernels by the architecture they were built for), so the tensor-core "
        "precision rules apply",
        a.device.compute_major, a.device.compute_minor, a.device_from_kernel_names));
  return out;
}

}  // namespace

namespace {

/// The most of `items` by value, ties by name, at most `n`.
template <typename V>
void KeepLargest(std::vector<std::pair<std::string, V>>& items, size_t n) {
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.second > b.second || (a.second == b.second && a.first < b.first); });
  if (items.size() > n) items.resize(n);
}

/// The device's host_wait that the launching thread spent in OS calls, by call,
/// and where it ran the rest of it, by module (samples merged by file name: the
/// sampler names a module by its path).
HostOsWaits HostOsWaitsOf(const Recording& rec, const analysis::TracePrep& prep, const analysis::IdleAttribution& idle) {
  HostOsWaits out;
  if (prep.os_thread < 0) return out;  // no thread launched work: nothing to say of one
  out.thread = prep.os_thread;
  out.traced = rec.os_calls_traced && prep.os_calls != nullptr;
  for (const auto& [name, ns] : idle.host_wait_os_calls) {
    out.in_os_calls_ns += ns;
    out.calls.emplace_back(std::string(rec.names.View(name)), ns);
  }
  KeepLargest(out.calls, 5);
  out.sampled = rec.cpu_sampled && prep.running_samples != nullptr;
  std::map<std::string, int64_t> by_file;
  for (const auto& [module, count] : idle.host_wait_running_samples) {
    out.running_samples += count;
    const std::string path(rec.names.View(module));
    by_file[path.empty() ? "(unresolved)" : path.substr(path.rfind('/') + 1)] += count;
  }
  out.running_modules.assign(by_file.begin(), by_file.end());
  KeepLargest(out.running_modules, 5);
  return out;
}

/// The first error of tasks run at once.
class FirstError {
 public:
  void Keep(const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok() && first_.ok()) first_ = s;
  }
  /// A result into `into`, or its error kept.
  template <typename T, typename U>
  void Into(StatusOr<T> result, U& into) {
    if (result.ok()) into = std::move(result).value();
    else Keep(result.status());
  }
  Status Take() { return first_; }

 private:
  std::mutex mu_;
  Status first_;
};

/// The kernel table, precision, attention and launch measurements: one pass over
/// the kernels in order (with their launches and operators).
struct KernelPass {
  analysis::CountingMedian durations, launch_delays;
  int64_t kernels_in_steps = 0, short_kernels = 0, graph_kernels_in_steps = 0, graph_launches = 0;
  PrecisionStats precision;
  AttentionStats attention;
};

Status MeasureKernels(const analysis::TracePrep& prep, const intervals::List& step_list,
                      std::unordered_map<NameId, NameAccumulator>& by_name, KernelPass& out) {
  const Recording& rec = prep.events.recording();
  analysis::DeviceOpCursor ops(prep);
  for (const analysis::DeviceOp* op = ops.Next(); op != nullptr; op = ops.Next()) {
    if (!op->is_kernel) continue;
    const KernelActivity& k = *op->kernel;
    auto& acc = by_name[k.name];
    const TimeNs d = k.time.duration();
    ++acc.count;
    acc.total += d;
    acc.min = std::min(acc.min, d);
    acc.max = std::max(acc.max, d);
    if (!std::isnan(k.blocks_per_sm)) acc.blocks_weighted += k.blocks_per_sm * static_cast<double>(d), acc.blocks_time += static_cast<double>(d);
    if (!std::isnan(k.est_occupancy_percent)) acc.occ_weighted += k.est_occupancy_percent * static_cast<double>(d), acc.occ_time += static_cast<double>(d);
    out.precision.kernel_total_ns += d;
    const KernelKind& kind = acc.kind;
    const bool in_steps = InSteps(step_list, k.time.start);
    if (IsMatrixClass(kind.cls)) {
      Precision p = kind.precision;
      if ((p == Precision::kUnknown || p == Precision::kTensorUnknown) && op->launched_by.input_type != kNoName) {
        const Precision from_type =
            PrecisionFromInputType(rec.names.View(op->launched_by.input_type), p == Precision::kTensorUnknown);
        if (from_type != Precision::kUnknown) p = from_type;
      }
      out.precision.matrix_ns[static_cast<int>(p)] += d;
      out.precision.matrix_total_ns += d;
      if (kind.cls == KernelClass::kGemm) {
        out.precision.gemm_ns += d;
        if (in_steps) out.precision.gemm_in_steps_ns += d;
      }
      if (UsesTensorCores(p)) out.precision.tensor_core_ns += d;
    }
    if (IsMemoryBoundClass(kind.cls) && !(k.blocks_per_sm < kMinBlocksPerSmForBandwidth))  // NaN: not recorded
      out.precision.memory_bound_ns += d;
    if (kind.cls == KernelClass::kAttentionFused) out.attention.fused_ns += d;
    if (kind.cls == KernelClass::kSoftmax) out.attention.softmax_ns += d, ++out.attention.softmax_kernels;
    if (kind.batched) out.attention.batched_gemm_ns += d, ++out.attention.batched_gemm_kernels;
    if (kind.cls != KernelClass::kCommunication && in_steps) {
      ++out.kernels_in_steps;
      out.durations.Add(d);
      if (d < kShortKernel) ++out.short_kernels;
      if (op->launch.has_launch) {
        if (op->launch.kind == RuntimeCallKind::kKernelLaunch)
          out.launch_delays.Add(std::max<TimeNs>(0, k.time.start - op->launch.launch_end));
        if (op->launch.kind == RuntimeCallKind::kGraphLaunch) ++out.graph_kernels_in_steps;
      }
    }
  }
  RETURN_IF_ERROR(ops.status());
  // Launches the host made: a CUDA graph replay is one launch for all its kernels.
  auto calls = prep.events.runtime_calls();
  for (const RuntimeCall* r = calls.Next(); r != nullptr; r = calls.Next())
    if (r->kind == RuntimeCallKind::kGraphLaunch && InSteps(step_list, r->time.start)) ++out.graph_launches;
  return calls.status();
}

/// "execute_context_1(512)_generation_3(3)" -> {prefill tokens, decode tokens}.
std::optional<std::pair<int64_t, int64_t>> ServingStepTokens(std::string_view name) {
  constexpr std::string_view kPrefix = "execute_context_";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  int64_t counts[4] = {};
  for (int i = 0; i < 4; ++i) {  // requests ( tokens ) _generation_ requests ( tokens )
    size_t digits = 0;
    while (digits < name.size() && digits < 12 && name[digits] >= '0' && name[digits] <= '9')
      counts[i] = counts[i] * 10 + (name[digits++] - '0');
    if (digits == 0) return std::nullopt;
    name.remove_prefix(digits);
    const std::string_view next = i == 0 || i == 2 ? "(" : i == 1 ? ")_generation_" : ")";
    if (!name.starts_with(next)) return std::nullopt;
    name.remove_prefix(next.size());
  }
  return std::make_pair(counts[1], counts[3]);
}

/// The annotated model steps whose midpoint falls in the analysed step windows (the
/// tokens then match the time the verdicts divide).
/// The least compute capability the kernels that ran imply, where the trace does
/// not describe its GPU: cuBLAS, cuDNN and CUTLASS name kernels by the architecture
/// they were built for (volta_sgemm_..., sm80_xmma_..., sm90_...), and a GPU runs
/// kernels built for its own architecture or an older one.
struct ImpliedArchitecture {
  int major = -1, minor = -1;
  std::string kernel;  // the name it was read from
};

ImpliedArchitecture ArchitectureFromKernelNames(const Recording& rec,
                                                const std::unordered_map<NameId, NameAccumulator>& by_name) {
  struct Prefix {
    std::string_view text;
    int major, minor;
  };
  constexpr Prefix kPrefixes[] = {{"volta_", 7, 0}, {"turing_", 7, 5}, {"ampere_", 8, 0}, {"sm70_", 7, 0},
                                  {"sm75_", 7, 5},  {"sm80_", 8, 0},   {"sm86_", 8, 6},   {"sm89_", 8, 9},
                                  {"sm90_", 9, 0},  {"sm90a_", 9, 0},  {"sm100_", 10, 0}};
  ImpliedArchitecture best;
  for (const auto& [id, acc] : by_name) {
    std::string_view name = rec.names.View(id);
    if (StartsWith(name, "void ")) name.remove_prefix(5);
    for (const auto& p : kPrefixes)
      if (StartsWith(name, p.text) && std::pair(p.major, p.minor) > std::pair(best.major, best.minor))
        best = {p.major, p.minor, std::string(name.substr(0, 80))};
  }
  return best;
}

/// Kernel launch calls: those that ran, and those made while their thread captured
/// a stream into a CUDA/HIP graph (between Begin- and EndCapture), which record a
/// graph node, run no kernel and leave no kernel record.
struct LaunchCounts {
  int64_t run = 0, captured = 0;
};

StatusOr<LaunchCounts> CountKernelLaunches(const analysis::TraceEvents& events) {
  LaunchCounts n;
  std::set<int64_t> capturing;  // threads inside a stream capture
  auto calls = events.runtime_calls();
  for (const RuntimeCall* c = calls.Next(); c != nullptr; c = calls.Next()) {
    if (c->kind == RuntimeCallKind::kCaptureBegin) capturing.insert(c->thread);
    else if (c->kind == RuntimeCallKind::kCaptureEnd) capturing.erase(c->thread);
    else if (c->kind == RuntimeCallKind::kKernelLaunch) ++(capturing.count(c->thread) ? n.captured : n.run);
  }
  RETURN_IF_ERROR(calls.status());
  return n;
}

StatusOr<ServingSteps> ReadServingSteps(const analysis::TraceEvents& events, const intervals::List& step_list) {
  ServingSteps out;
  std::vector<double> per_step;
  auto spans = events.cpu_spans();
  for (const CpuSpan* c = spans.Next(); c != nullptr; c = spans.Next()) {
    if (c->kind != CpuSpanKind::kUserAnnotation) continue;
    const auto tokens = ServingStepTokens(events.recording().names.View(c->name));
    if (!tokens || !InSteps(step_list, c->time.start + c->time.duration() / 2)) continue;
    ++out.steps;
    out.tokens += tokens->first + tokens->second;
    if (tokens->first == 0) ++out.decode_only_steps;
    per_step.push_back(static_cast<double>(tokens->first + tokens->second));
  }
  RETURN_IF_ERROR(spans.status());
  if (!per_step.empty()) {
    std::nth_element(per_step.begin(), per_step.begin() + static_cast<long>(per_step.size() / 2), per_step.end());
    out.tokens_per_step_median = per_step[per_step.size() / 2];
  }
  return out;
}

/// The trace part of AnalyzeRecording: passes over the events (see trace_events.h),
/// the independent ones at once on `threads` threads.
Status AnalyzeTrace(const Recording& rec, RecordingAnalysis& a, int threads, bool rank_of_run) {
  const analysis::TraceEvents events(rec);
  analysis::TracePrep prep(events);
  prep.threads = threads;
  FirstError errors;

  // The joins and the merged host intervals.
  analysis::HostSteps host;
  RunConcurrently(threads, {
      [&] { errors.Into(analysis::JoinKernelOperators(events, prep.spill), prep.operators); },
      [&] {
        auto found = analysis::FindHostSteps(events);
        if (!found.ok()) return errors.Keep(found.status());
        host = std::move(found).value();
        errors.Into(analysis::JoinLaunches(events, host.spans, prep.spill), prep.launches);
      },
      [&] { errors.Keep(analysis::BuildHostIntervals(prep)); },
  });
  RETURN_IF_ERROR(errors.Take());

  // Classify each distinct kernel name once; kernels no name rule knows, launched
  // by a matrix or attention operator whose shapes were recorded, are that
  // operator's matrix kernels (custom or mangled names).
  std::unordered_map<NameId, NameAccumulator> by_name;
  std::unordered_map<int, TimeNs> time_by_device;
  std::unordered_map<int, std::optional<Interval>> extent_by_device;  // kernels of positive length, for the timeline
  analysis::KernelExtents extents;
  {
    auto kernels = events.kernels();
    analysis::SeqZip<analysis::KernelOperator> operators(*prep.operators);
    int64_t seq = 0;
    for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next(), ++seq) {
      auto [it, inserted] = by_name.try_emplace(k->name);
      if (inserted) it->second.kind = ClassifyKernelName(rec.names.View(k->name));
      time_by_device[k->device] += k->time.duration();
      intervals::Widen(extents.all, k->time);
      if (k->time.end > k->time.start) intervals::Widen(extent_by_device[k->device], k->time);
      const analysis::KernelOperator* op = k->external_id >= 0 ? operators.At(seq) : nullptr;
      auto& acc = it->second;
      if (op == nullptr || !op->has_shapes || acc.kind.cls != KernelClass::kOther || acc.kind_from_operator) continue;
      const KernelKind kind = KindFromLaunchingOperator(acc.kind, rec.names.View(k->name), rec.names.View(op->op_name),
                                                        rec.names.View(op->op_dtype));
      if (kind.cls != acc.kind.cls) acc.kind = kind, acc.kind_from_operator = true;
    }
    RETURN_IF_ERROR(kernels.status());
    RETURN_IF_ERROR(operators.status());
  }
  analysis::KindByName kinds;
  for (const auto& [name, acc] : by_name) kinds.emplace(name, acc.kind);
  prep.kinds = &kinds;
  const int64_t kernel_count = events.kernel_count();
  a.kernel_records = kernel_count;
  a.has_gpu_activity = kernel_count > 0 || events.memory_op_count() > 0;
  if (events.runtime_call_count() > kernel_count) {  // more calls than kernels: were kernel records lost?
    ASSIGN_OR_RETURN(const LaunchCounts launches, CountKernelLaunches(events));
    a.kernel_launch_calls = launches.run + launches.captured;
    a.captured_kernel_launches = launches.captured;
    if (!a.has_gpu_activity) a.launches_without_gpu_records = launches.run;
    else if (launches.run > 2 * kernel_count && launches.run - kernel_count >= 100)
      a.dropped_kernel_records = launches.run - kernel_count;
  }

  int primary = -1;
  TimeNs best = -1;
  for (const auto& [device, t] : time_by_device)
    if (t > best || (t == best && device < primary)) best = t, primary = device;
  if (primary < 0 && events.memory_op_count() > 0) {
    auto memory = events.memory_ops();
    if (const MemoryActivity* m = memory.Next()) primary = m->device;
    RETURN_IF_ERROR(memory.status());
  }
  if (const Device* d = rec.FindDevice(primary)) {
    a.device = *d;
  } else if (!rec.devices.empty() && primary < 0) {
    a.device = rec.devices.front();
  } else if (rec.devices.size() == 1 && time_by_device.size() == 1) {
    // One device described, one device ran, under another index: a process that
    // sees one GPU (CUDA/HIP_VISIBLE_DEVICES, a virtual function) describes it as
    // device 0 while the activities carry the physical index. It is that GPU.
    a.device = rec.devices.front();
    a.device.id = primary;
  } else {
    a.device.id = primary;
  }
  if (a.device.compute_major < 0 && (a.device.vendor == Vendor::kUnknown || a.device.vendor == Vendor::kNvidia)) {
    const ImpliedArchitecture arch = ArchitectureFromKernelNames(rec, by_name);
    if (arch.major >= 0) {
      a.device.vendor = Vendor::kNvidia;
      a.device.compute_major = arch.major;
      a.device.compute_minor = arch.minor;
      a.device_from_kernel_names = arch.kernel;
    }
  }

  if (auto it = extent_by_device.find(a.device.id); it != extent_by_device.end()) extents.primary = it->second;
  ASSIGN_OR_RETURN(analysis::StepWindows steps, analysis::AlignSteps(prep, host));
  // A file cut short lost the events after the cut: the last step that still has
  // device work is the one the cut went through (its kernels partly lost), so it
  // is left out with the steps after it; only steps held whole are judged.
  if (rec.stats.truncated) {
    a.truncated = true;
    if (steps.from_markers && !steps.windows.empty()) {
      steps.windows.pop_back();
      steps.numbers.resize(std::min(steps.numbers.size(), steps.windows.size()));
      ++steps.dropped_tail_steps;
    }
    a.truncated_steps_dropped = steps.dropped_tail_steps;
  }
  a.steps_from_markers = steps.from_markers;
  // Measurements of the steady state leave the warm-up steps out: their autotuning
  // kernels and host pauses say nothing of the steps that follow.
  a.warmup_steps = CountWarmupSteps(steps.windows);
  analysis::StepWindows steady = steps;
  steady.windows.erase(steady.windows.begin(), steady.windows.begin() + a.warmup_steps);
  steady.numbers.erase(steady.numbers.begin(), steady.numbers.begin() + std::min<int64_t>(a.warmup_steps, static_cast<int64_t>(steady.numbers.size())));
  const std::vector<Interval>& steady_windows = steady.windows;
  const intervals::List step_list = intervals::Merge(steady_windows);

  // Every measurement over the aligned steps.
  KernelPass kernel_pass;
  analysis::ShapeJoin shapes;
  std::unique_ptr<analysis::TraceReplay> replay;
  double step_flops = 0;
  std::vector<std::function<void()>> passes = {
      [&] { errors.Into(analysis::BreakDownSteps(prep, steps), a.steps); },
      [&] { errors.Keep(MeasureKernels(prep, step_list, by_name, kernel_pass)); },
      [&] { errors.Into(MeasureCommunication(prep, primary, step_list), a.comm); },
      [&] {
        errors.Into(analysis::JoinShapes(events, *prep.operators,
                                           [&](const KernelActivity& k) {
                                             analysis::KernelForShapes f;
                                             f.kind = kinds.at(k.name);
                                             f.on_alignment_device = primary < 0 || k.device == primary;
                                             f.on_roofline_device = a.device.id < 0 || k.device == a.device.id;
                                             return f;
                                           },
                                           prep.spill),
                    shapes);
        // The replay's device work (it needs the off-tile kernels): read here,
        // beside the other passes, rather than after them all.
        if (!steps.windows.empty() && kernel_count > 0 && shapes.misaligned_kernels)
          errors.Into(analysis::TraceReplay::Prepare(prep, steady, *shapes.misaligned_kernels), replay);
      },
      [&] { errors.Into(SumStepFlops(events, step_list), step_flops); },
      [&] { errors.Into(analysis::MeasureTimeline(events, a.device.id, extents, steps.windows, steps.from_markers), a.timeline); },
      [&] { errors.Into(ReadServingSteps(events, step_list), a.serving); },
  };
  // A rank of a run: what the cross-rank analysis needs, so it never reads these events again.
  if (rank_of_run && rec.clock_is_absolute)
    passes.push_back([&] { errors.Into(analysis::GatherRankCollectives(events, a.device.id, kinds), a.collectives); });
  if (!steps.windows.empty()) {
    passes.push_back([&] {
      const Interval all{steady_windows.front().start, steady_windows.back().end};
      std::vector<int> devices;
      for (const auto& [device, t] : time_by_device) devices.push_back(device);
      std::sort(devices.begin(), devices.end());
      errors.Into(analysis::MeasureGpus(events, devices, all), a.gpus);
    });
    if (primary >= 0)
      passes.push_back([&] {
        auto idle = analysis::AttributeIdle(prep, primary, step_list);
        if (!idle.ok()) return errors.Keep(idle.status());
        a.device_idle = idle->device;
        a.streams = std::move(idle->streams);
        a.host_os_waits = HostOsWaitsOf(rec, prep, *idle);
      });
  }
  RunConcurrently(threads, passes);
  RETURN_IF_ERROR(errors.Take());

  if (!a.steps.empty()) {
    const auto steady_steps = a.SteadySteps();
    for (const auto& s : steady_steps) {
      for (int c = 0; c < kNumStepCategories; ++c) a.average.ns[c] += s.ns[c];
      a.average.host_communication_ns += s.host_communication_ns;
    }
    TimeNs total = 0;
    for (const auto& s : steady_steps) total += s.total();
    const auto n = static_cast<TimeNs>(steady_steps.size());
    for (auto& v : a.average.ns) v /= n;
    a.average.host_communication_ns /= n;
    a.avg_step_ns = total / n;
    // The average's window is as long as the mean step, so total() and shares work on it too.
    a.average.window = {steady_steps.front().window.start, steady_steps.front().window.start + a.avg_step_ns};
    for (const auto& g : a.gpus)
      if (g.device == primary) a.gpu = g;
  } else {
    a.gpus.clear();
    a.device_idle = {};
    a.host_os_waits = {};
    a.streams.clear();
  }

  // Kernel table, precision and attention.
  a.precision = kernel_pass.precision;
  a.attention = kernel_pass.attention;
  if (a.precision.matrix_total_ns > 0) {
    a.precision.tensor_core_percent_of_matrix =
        100.0 * static_cast<double>(a.precision.tensor_core_ns) / static_cast<double>(a.precision.matrix_total_ns);
  }
  if (a.precision.kernel_total_ns > 0) {
    a.precision.matrix_percent_of_kernels =
        100.0 * static_cast<double>(a.precision.matrix_total_ns) / static_cast<double>(a.precision.kernel_total_ns);
    a.precision.memory_bound_percent_of_kernels =
        100.0 * static_cast<double>(a.precision.memory_bound_ns) / static_cast<double>(a.precision.kernel_total_ns);
  }
  if (a.precision.kernel_total_ns > 0)
    a.comm.share_of_kernel_time_percent =
        100.0 * static_cast<double>(a.comm.kernel_ns) / static_cast<double>(a.precision.kernel_total_ns);

  // Attention backend: the fused kernel family with most time, else "math" when
  // softmax kernels run beside batched GEMMs (SDPA's unfused path or hand-written attention).
  {
    std::unordered_map<int, TimeNs> by_backend;
    for (const auto& [name, acc] : by_name)
      if (acc.kind.cls == KernelClass::kAttentionFused) by_backend[static_cast<int>(acc.kind.attention)] += acc.total;
    TimeNs top = 0;
    for (const auto& [backend, t] : by_backend)
      if (t > top) top = t, a.attention.backend = AttentionBackendName(static_cast<AttentionBackend>(backend));
    if (top == 0 && a.attention.softmax_kernels > 0 && a.attention.batched_gemm_kernels > 0) a.attention.backend = "math";
  }

  // Kernel table: top by total time.
  a.kernel_names = static_cast<int64_t>(by_name.size());
  std::vector<std::pair<NameId, const NameAccumulator*>> order;
  for (const auto& [name, acc] : by_name)
    if (acc.count > 0) order.emplace_back(name, &acc);
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.second->total > y.second->total; });
  for (const auto& [name, acc] : by_name) a.kernel_class_ns[KernelClassName(acc.kind.cls)] += acc.total;
  for (size_t i = 0; i < order.size() && i < kTopKernels; ++i) {
    const auto& acc = *order[i].second;
    KernelStat s;
    s.name = std::string(rec.names.View(order[i].first));
    s.kernel_class = KernelClassName(acc.kind.cls);
    s.precision = IsMatrixClass(acc.kind.cls) ? PrecisionName(acc.kind.precision) : "";
    s.tensor_cores = IsMatrixClass(acc.kind.cls) && UsesTensorCores(acc.kind.precision);
    s.count = acc.count;
    s.total_ns = acc.total;
    s.min_ns = acc.min;
    s.max_ns = acc.max;
    if (acc.blocks_time > 0) s.mean_blocks_per_sm = acc.blocks_weighted / acc.blocks_time;
    if (acc.occ_time > 0) s.mean_occupancy_percent = acc.occ_weighted / acc.occ_time;
    a.top_kernels.push_back(std::move(s));
  }

  // Launch overhead.
  const int64_t kernels_in_steps = kernel_pass.kernels_in_steps, graph_kernels_in_steps = kernel_pass.graph_kernels_in_steps;
  a.launch.graph_launches = kernel_pass.graph_launches;
  const int64_t host_launches = kernels_in_steps - graph_kernels_in_steps + a.launch.graph_launches;
  a.launch.kernels = kernels_in_steps;
  a.launch.graph_kernels = graph_kernels_in_steps;
  if (!a.steps.empty()) {
    const auto steady_count = static_cast<double>(a.SteadySteps().size());  // kernels were counted in those steps
    a.launch.kernels_per_step = static_cast<double>(kernels_in_steps) / steady_count;
    a.launch.host_launches_per_step = static_cast<double>(host_launches) / steady_count;
  }
  a.launch.median_kernel_us = kernel_pass.durations.Median() / 1000.0;
  if (kernels_in_steps > 0)
    a.launch.short_kernel_percent =
        100.0 * static_cast<double>(kernel_pass.short_kernels) / static_cast<double>(kernels_in_steps);
  if (host_launches > 0)
    a.launch.mean_launch_interval_us =
        static_cast<double>(intervals::Sum(step_list)) / static_cast<double>(host_launches) / 1000.0;
  a.launch.median_launch_delay_us = kernel_pass.launch_delays.Median() / 1000.0;

  ASSIGN_OR_RETURN(a.shapes, analysis::MeasureShapeAlignment(events, *shapes.by_shape, a.precision.matrix_total_ns));
  ASSIGN_OR_RETURN(a.roofline, analysis::MeasureRoofline(events, *shapes.by_shape, a.device));
  a.memory = analysis::MeasureTraceMemory(rec, a.device);
  if (!a.steps.empty()) {
    ASSIGN_OR_RETURN(a.what_if, analysis::PredictFixes(prep, replay.get(), a));
  }
  a.throughput = MeasureThroughput(step_flops, a);
  a.limitations = ListLimitations(rec, kernel_count == 0, a, steps.dropped_tail_steps);
  return Status::Ok();
}


/// A recorded figure (a setting's text): NaN unless the whole text is a finite
/// number >= 0.
double MetadataNumber(const std::map<std::string, std::string>& metadata, const std::string& key) {
  auto it = metadata.find(key);
  if (it == metadata.end()) return NAN;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  return end != it->second.c_str() && *end == '\0' && std::isfinite(v) && v >= 0 ? v : NAN;
}

}  // namespace

HostUsageAnalysis ReadHostUsage(const std::map<std::string, std::string>& metadata, int job_cpus) {
  HostUsageAnalysis h;
  h.job_cpus = job_cpus;
  auto number = [&](const char* key) { return MetadataNumber(metadata, std::string("host.usage.") + key); };
  auto count = [&](const char* key) {
    const double v = number(key);
    return std::isnan(v) || v > 1e6 ? 0 : static_cast<int>(v);
  };
  h.seconds = number("seconds");
  h.job_cores_mean = number("job_cpu_cores_mean");
  h.known = !std::isnan(h.seconds) && h.seconds > 0 && !std::isnan(h.job_cores_mean);
  if (std::isnan(h.seconds)) h.seconds = 0;
  h.main_cores_mean = number("main_cpu_cores_mean");
  h.other_cores_mean = number("other_cpu_cores_mean");
  h.job_processes_max = count("job_processes_max");
  h.machine_busy_percent_mean = number("machine_busy_percent_mean");
  h.saturated_percent_of_time = number("saturated_percent_of_time");
  h.machine_cpus = count("machine_cpus");
  h.job_cpu_seconds = number("job_cpu_seconds");
  h.job_cpu_wait_mean = number("job_cpu_wait_mean");
  const double rss = number("job_rss_peak_bytes");
  h.job_rss_peak_mib = std::isnan(rss) ? NAN : rss / (1024.0 * 1024.0);
  return h;
}

namespace {

/// The job's copies as zero-code mode counted them (`copy.*`); unknown unless
/// every figure reads as a number in its range.
CopySettings ReadCopySettings(const std::map<std::string, std::string>& metadata) {
  CopySettings c;
  if (auto it = metadata.find("dataloader.pin_memory"); it != metadata.end()) c.loader_pin_memory = it->second;
  const double calls = MetadataNumber(metadata, "copy.calls"), bytes = MetadataNumber(metadata, "copy.bytes");
  const double pinned = MetadataNumber(metadata, "copy.pinned_percent");
  const double non_blocking = MetadataNumber(metadata, "copy.non_blocking_percent");
  if (std::isnan(calls) || std::isnan(bytes) || !(pinned <= 100) || !(non_blocking <= 100) || calls < 1) return c;
  c.known = true;
  c.calls = static_cast<int64_t>(calls);
  c.bytes = bytes;
  c.pinned_percent = pinned;
  c.non_blocking_percent = non_blocking;
  return c;
}

/// The job's optimizer as zero-code mode recorded it (`optimizer.*`).
OptimizerSettings ReadOptimizerSettings(const std::map<std::string, std::string>& metadata) {
  OptimizerSettings o;
  auto text = [&](const char* key) {
    auto it = metadata.find(key);
    return it == metadata.end() ? std::string() : it->second;
  };
  o.class_name = text("optimizer.class");
  o.known = !o.class_name.empty();
  o.implementation = text("optimizer.implementation");
  if (o.implementation != "fused" && o.implementation != "foreach" && o.implementation != "for-loop")
    o.implementation.clear();  // another library's optimizer, or a value this version does not know
  o.device = text("optimizer.device");
  o.torch_version = text("version.torch");
  const double tensors = MetadataNumber(metadata, "optimizer.param_tensors");
  if (tensors >= 1 && tensors < 1e9) o.param_tensors = static_cast<int64_t>(tensors);
  const double params = MetadataNumber(metadata, "optimizer.params");
  if (params >= 1) o.params = params;
  return o;
}

/// The checkpointed forward as zero-code mode timed it (`checkpointing.*`).
RecomputeSettings ReadRecomputeSettings(const std::map<std::string, std::string>& metadata) {
  RecomputeSettings r;
  const double calls = MetadataNumber(metadata, "checkpointing.calls");
  const double seconds = MetadataNumber(metadata, "checkpointing.forward_seconds");
  if (!(calls >= 1 && calls < 1e15) || std::isnan(seconds)) return r;
  r.known = true;
  r.calls = static_cast<int64_t>(calls);
  r.forward_seconds = seconds;
  r.recompute_seconds = MetadataNumber(metadata, "checkpointing.recompute_seconds");
  return r;
}

/// `rank_of_run`: also gather what the cross-rank analysis reads (a trace of one rank of several).
RecordingAnalysis Analyze(const Recording& rec, int threads, bool rank_of_run) {
  RecordingAnalysis a;
  a.source = rec.source_path;
  a.source_format = rec.format;
  // The loader's resources, where the run recorded them (keys of the job's
  // configuration channel and the recorder's own, docs/formats.md).
  auto integer = [&](const char* key) {
    auto it = rec.metadata.find(key);
    if (it == rec.metadata.end()) return -1;
    char* end = nullptr;
    const long v = std::strtol(it->second.c_str(), &end, 10);
    return end != it->second.c_str() && *end == '\0' && v >= 0 && v < 1'000'000 ? static_cast<int>(v) : -1;
  };
  a.loader.num_workers = integer("dataloader.num_workers");
  a.loader.host_cpus = std::max(0, integer("host.cpus"));
  a.loader.gpus = std::max(0, integer("gpu.count"));
  a.host = ReadHostUsage(rec.metadata, a.loader.host_cpus);
  a.copies = ReadCopySettings(rec.metadata);
  a.optimizer = ReadOptimizerSettings(rec.metadata);
  a.recompute = ReadRecomputeSettings(rec.metadata);
  if (a.host.known) a.loader.host_saturated_percent = a.host.saturated_percent_of_time;
  a.loader.host_saturated = a.host.SaturatedByJob();
  a.loader.cpus_taken_by_others = a.host.ContendingCpus();
  if (a.host.known) a.loader.workers_cores_mean = a.host.other_cores_mean;
  a.rank = rec.rank;
  // A trace recording: any timeline content (tests build recordings without a format).
  const analysis::TraceEvents events(rec);
  a.has_trace = IsTraceFormat(rec.format) || events.kernel_count() > 0 || events.memory_op_count() > 0 ||
                events.cpu_span_count() > 0 || events.runtime_call_count() > 0 || !rec.steps.empty();
  if (auto it = rec.metadata.find("phase"); it != rec.metadata.end()) a.phase = it->second;
  a.metric_devices = AnalyzeMetrics(rec.metrics);
  std::string gpu_name;  // the GPU the job ran on, for MFU from its step FLOPs
  for (const auto& d : rec.metrics.devices)
    if (!d.name.empty() && gpu_name.empty()) gpu_name = d.name;
  a.marked = AnalyzeMarkedSteps(rec.marked_steps, gpu_name, rec.process_ranks);
  if (const auto boundary = rec.metadata.find("zero_code.step_boundary");
      boundary != rec.metadata.end() && (boundary->second == "dataloader" || boundary->second == "optimizer"))
    a.marked.step_boundary = boundary->second;
  // The optimizer's own count where zero-code mode kept one (over the run, every
  // step): steps with optimizer time count zero_grad's as well as step()'s.
  if (const auto counted = rec.metadata.find("zero_code.optimizer_steps"); counted != rec.metadata.end() && a.marked.steps > 0) {
    char* end = nullptr;
    const long long n = std::strtoll(counted->second.c_str(), &end, 10);
    if (end != counted->second.c_str() && *end == '\0' && n > 0 && n < (1LL << 40))
      a.marked.optimizer_steps = std::min<int64_t>(n, a.marked.steps + a.marked.warmup_steps);
  }
  a.step_memory = AnalyzeStepMemory(rec.marked_steps, rec.metadata, rec.process_ranks);
  a.ledger = analysis::BuildLedger(rec, analysis::JobGpus(a.metric_devices));
  if (!a.ledger.valid) a.ledger = analysis::BuildMetricLedger(a.metric_devices, analysis::JobGpus(a.metric_devices));
  if (!a.has_trace) {
    a.memory = analysis::MeasureTraceMemory(rec, a.device);  // an allocator snapshot's curves
    return a;
  }
  if (Status s = AnalyzeTrace(rec, a, threads, rank_of_run); !s.ok()) {
    a.error = fmt::format("{}: the analysis could not finish: {}", rec.source_path, s.message());
    a.limitations.push_back(a.error);
  }
  // A trace without step markers: the ledger of its profiled steps.
  if (!a.ledger.valid || a.ledger.Find("unsplit") != nullptr) {
    RunLedger trace = analysis::BuildTraceLedger(rec, a, analysis::JobGpus(a.metric_devices));
    if (trace.valid) a.ledger = std::move(trace);
  }
  return a;
}

}  // namespace

RecordingAnalysis AnalyzeRecording(const Recording& rec) { return AnalyzeRecording(rec, 1); }

RecordingAnalysis AnalyzeRecording(const Recording& rec, int threads) { return Analyze(rec, threads, rec.rank >= 0); }

void AnalyzeAndDropEvents(Recording& rec, int threads) {
  // Read among other traces, it is a rank even before the run numbers the ranks
  // that have no distributedInfo (ImportRun).
  rec.analysis = std::make_shared<const RecordingAnalysis>(Analyze(rec, threads, true));
  // Swapped with empty vectors, so their memory goes now.
  std::vector<KernelActivity>().swap(rec.kernels);
  std::vector<MemoryActivity>().swap(rec.memory_ops);
  std::vector<RuntimeCall>().swap(rec.runtime_calls);
  std::vector<CpuSpan>().swap(rec.cpu_spans);
  std::vector<SyncActivity>().swap(rec.syncs);
  std::vector<OsCall>().swap(rec.os_calls);
  std::vector<CpuSample>().swap(rec.cpu_samples);
  std::vector<MatrixOpShapes>().swap(rec.matrix_shapes);
  rec.streams.reset();
}

}  // namespace gputriage
