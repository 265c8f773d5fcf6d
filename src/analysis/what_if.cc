// The fixes a trace verdict recommends, replayed (replay.cc) to predict the fixed
// run's step time. Each scenario has a point estimate and a range; the range spans
// what the trace cannot tell, and every end of it is named here with its source.
#include "src/analysis/what_if.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "src/analysis/gpu_specs.h"
#include "src/analysis/replay.h"
#include "src/util/parallel.h"

namespace gputriage::analysis {
namespace {

// Unfused attention (softmax + batched GEMMs) on a fused kernel: FlashAttention
// reports 2-4x over the standard implementation (Dao et al. 2022, FlashAttention-2 2023).
constexpr double kAttentionSpeedupBest = 4.0;
constexpr double kAttentionSpeedupPoint = 2.0;
constexpr double kAttentionSpeedupWorst = 1.3;

// Bytes-bound kernels fused (torch.compile, fused optimizers): a chain of
// elementwise kernels becomes one pass over memory. PyTorch 2 reports 1.41x geomean
// training speedup over 180+ models on A100 from compilation (Ansel et al., ASPLOS
// 2024); fused chains read and write memory once instead of once per op.
constexpr double kMemoryFusionSpeedupBest = 2.0;
constexpr double kMemoryFusionSpeedupPoint = 1.5;
constexpr double kMemoryFusionSpeedupWorst = 1.2;

// Matrix operators padded to tile multiples: NVIDIA's Deep Learning Performance
// Guide shows off-tile GEMMs at up to 2x (older cuBLAS: 4x+) the time of aligned
// ones; current libraries pad internally and lose less (1.1x).
constexpr double kAlignSpeedupBest = 2.0;
constexpr double kAlignSpeedupPoint = 1.3;
constexpr double kAlignSpeedupWorst = 1.1;

// The replay with nothing changed must give back the recorded mean step within
// this share, or the trace has dependencies the replay does not see (then no
// replayed prediction is made).
constexpr double kReplayTolerance = 0.10;

// The replayed step is device-bound when the device is busy this share of it.
constexpr double kDeviceBoundShare = 0.9;

std::string BoundedBy(const ReplayResult& r, double data_wait_ms) {
  if (data_wait_ms >= 0.05 * r.step_ms) return "input_bound";
  if (r.gpu_busy_ms >= kDeviceBoundShare * r.step_ms) return "gpu_busy_time";
  return "launch_bound";
}

/// One fix to predict: its three replays (best, point, worst), and where the
/// prediction goes. All scenarios' replays run in one batch (they are
/// independent passes: as many at once as there are cores).
struct Scenario {
  StepPrediction* target = nullptr;
  ReplayChange best, point, worst;
  double data_wait_left_ms = 0;
  std::string basis;
};

/// A scenario's prediction from its three replays. `correction` (measured_ms /
/// identity_ms) carries what the replay does not model exactly (it reproduces the
/// recorded step within kReplayTolerance or is not used).
StepPrediction Predict(const ReplayResult& b, const ReplayResult& e, const ReplayResult& w, double correction,
                       double noise, double data_wait_left_ms, const std::string& basis) {
  StepPrediction p;
  if (!b.valid || !e.valid || !w.valid) return p;
  p.available = true;
  p.best_ms = correction * std::min({b.step_ms, e.step_ms, w.step_ms}) * (1.0 - noise);
  p.worst_ms = correction * std::max({b.step_ms, e.step_ms, w.step_ms}) * (1.0 + noise);
  p.expected_ms = correction * e.step_ms;
  p.gpu_busy_ms = e.gpu_busy_ms;
  p.data_wait_ms = data_wait_left_ms;
  p.bounded_by = BoundedBy(e, data_wait_left_ms);
  p.basis = noise > 0 ? fmt::format("{}; the range widened by the step-time CV ({:.1f}%) for run-to-run variation", basis, noise * 100)
                      : basis;
  return p;
}

/// The change that scales each kind of kernel (by its ReplayKernelBits) by factor(bits).
ReplayChange ScaleKernels(const std::function<double(uint8_t)>& factor) {
  ReplayChange c;
  for (int bits = 0; bits < kReplayKernelKinds; ++bits)
    if ((bits & kReplayKernel) != 0) c.kernel_scale[static_cast<size_t>(bits)] = static_cast<float>(factor(static_cast<uint8_t>(bits)));
  return c;
}

/// A scenario in which the selected kernels run `best`, `point` or `worst` times faster.
Scenario FasterKernels(StepPrediction* target, const std::function<bool(uint8_t)>& selected, double best, double point,
                       double worst, double data_wait_left_ms, std::string basis) {
  auto change = [&](double speedup) {
    return ScaleKernels([&](uint8_t bits) { return selected(bits) ? 1.0 / speedup : 1.0; });
  };
  return {target, change(best), change(point), change(worst), data_wait_left_ms, std::move(basis)};
}

}  // namespace

StatusOr<WhatIfs> PredictFixes(const TracePrep& prep, const TraceReplay* replay, const RecordingAnalysis& a) {
  WhatIfs out;
  if (replay == nullptr) return out;  // prepared only for a trace with steps and kernels
  // Run-to-run variation: the coefficient of variation of this trace's steps.
  double noise = 0;
  const auto steady = a.SteadySteps();  // warm-up's long steps are no run-to-run noise
  if (steady.size() >= 2) {
    double sum = 0, sq = 0;
    for (const auto& s : steady) sum += ToMs(s.total()), sq += ToMs(s.total()) * ToMs(s.total());
    const double n = static_cast<double>(steady.size()), mean = sum / n;
    noise = std::min(std::sqrt(std::max(0.0, sq / n - mean * mean)) / mean, kMaxRunToRunNoise);
  }
  const double data_wait_ms = ToMs(a.average.ns[static_cast<int>(StepCategory::kDataLoader)]);
  std::vector<Scenario> scenarios;

  if (prep.has_data_loader) {
    Scenario loader;
    loader.target = &out.no_data_wait;
    loader.best.remove_data_wait = loader.point.remove_data_wait = loader.worst.remove_data_wait = true;
    loader.best.host_stretch = kWorkerHostStretchBest;
    loader.point.host_stretch = kWorkerHostStretchPoint;
    loader.worst.host_stretch = kWorkerHostStretchWorst;
    loader.basis = fmt::format(
        "trace replayed without the DataLoader wait; the main process's own work (op dispatch, launches, syncs) "
        "{:.0f}% slower beside the loader workers ({:.0f}-{:.0f}%: turbo clocks drop as more cores run)",
        (kWorkerHostStretchPoint - 1) * 100, (kWorkerHostStretchBest - 1) * 100, (kWorkerHostStretchWorst - 1) * 100);
    scenarios.push_back(std::move(loader));
  }

  const auto& counts = replay->kernels_by_bits();
  auto any = [&](const std::function<bool(uint8_t)>& selected) {
    for (int bits = 0; bits < kReplayKernelKinds; ++bits)
      if (counts[static_cast<size_t>(bits)] > 0 && selected(static_cast<uint8_t>(bits))) return true;
    return false;
  };
  // Matrix kernels in 16-bit: fp32 SIMT and (where bf16 exists) tf32 kernels speed up,
  // never beyond the device's peak ratio. A GPU missing from the spec table (an RTX
  // 3080, a GB10) has tensor cores all the same from compute capability 7.0: its
  // ratio is unknown, so the speedups stay the published range, uncapped.
  if (a.device.vendor == Vendor::kNvidia && a.device.compute_major >= 7) {
    const auto spec = FindGpuSpec(a.device.name);
    const bool has_bf16 = a.device.compute_major >= 8;
    const double target = !spec ? 0.0 : has_bf16 ? spec->bf16_tflops : spec->fp16_tflops;
    auto factor = [&](uint8_t bits, double cap) {
      const bool fp32 = (bits & kReplayMatrixFp32Simt) != 0;
      const bool tf32 = !fp32 && (bits & kReplayMatrixTf32) != 0 && has_bf16;
      if (!fp32 && !tf32) return 1.0;
      if (!spec) return 1.0 / cap;
      const double from = fp32 ? spec->fp32_tflops : spec->tf32_tflops;
      if (from <= 0 || target <= 0) return 1.0;
      return 1.0 / std::max(1.0, std::min(target / from, cap));
    };
    auto change = [&](double cap) { return ScaleKernels([&](uint8_t bits) { return factor(bits, cap); }); };
    if (any([&](uint8_t bits) { return factor(bits, kMatrixSpeedupPoint) != 1.0; })) {
      scenarios.push_back(
          {&out.faster_matrix, change(kMatrixSpeedupBest), change(kMatrixSpeedupPoint), change(kMatrixSpeedupWorst),
           data_wait_ms,
                  fmt::format("trace replayed with fp32/tf32 matrix kernels {:.1f}x faster in {} ({:.1f}-{:.1f}x, {}); "
                              "other kernels and the host unchanged",
                              kMatrixSpeedupPoint, has_bf16 ? "bf16" : "fp16", kMatrixSpeedupWorst, kMatrixSpeedupBest,
                              spec ? fmt::format("never above the {} peak ratio", spec->model)
                                   : std::string("this GPU is not in the spec table, so its peak ratio is unknown"))});
    }
  }

  if (a.attention.backend == "math") {
    scenarios.push_back(FasterKernels(
        &out.fused_attention, [](uint8_t bits) { return (bits & kReplayAttentionPart) != 0; },
                             kAttentionSpeedupBest, kAttentionSpeedupPoint, kAttentionSpeedupWorst, data_wait_ms,
                             fmt::format("trace replayed with softmax and batched-GEMM kernels {:.1f}x faster on a fused "
                                         "kernel ({:.1f}-{:.1f}x; FlashAttention reports 2-4x)",
                                         kAttentionSpeedupPoint, kAttentionSpeedupWorst, kAttentionSpeedupBest)));
  }
  if (a.shapes.misaligned_ns > 0) {
    scenarios.push_back(FasterKernels(
        &out.aligned_shapes, [](uint8_t bits) { return (bits & kReplayMisalignedMatrix) != 0; },
                             kAlignSpeedupBest, kAlignSpeedupPoint, kAlignSpeedupWorst, data_wait_ms,
                             fmt::format("trace replayed with the off-tile matrix kernels {:.1f}x faster once padded "
                                         "({:.1f}-{:.1f}x; NVIDIA's Deep Learning Performance Guide)",
                                         kAlignSpeedupPoint, kAlignSpeedupWorst, kAlignSpeedupBest)));
  }
  if (a.precision.memory_bound_percent_of_kernels >= kMemoryBoundModeratePercent) {
    scenarios.push_back(FasterKernels(
        &out.fused_memory, [](uint8_t bits) { return (bits & kReplayMemoryBound) != 0; },
                             kMemoryFusionSpeedupBest, kMemoryFusionSpeedupPoint, kMemoryFusionSpeedupWorst, data_wait_ms,
                             fmt::format("trace replayed with elementwise, reduction, normalisation and copy kernels "
                                         "{:.1f}x faster when fused ({:.1f}-{:.1f}x; PyTorch 2 reports 1.41x geomean "
                                         "training speedup from compilation)",
                                         kMemoryFusionSpeedupPoint, kMemoryFusionSpeedupWorst, kMemoryFusionSpeedupBest)));
  }

  // The identity replay (nothing changed) and every scenario's three, in one batch.
  std::vector<const ReplayChange*> changes = {nullptr};
  for (const Scenario& sc : scenarios) changes.insert(changes.end(), {&sc.best, &sc.point, &sc.worst});
  const ReplayChange identity_change;
  std::vector<std::optional<StatusOr<ReplayResult>>> results(changes.size());
  ParallelFor(changes.size(), replay->threads(),
              [&](size_t i) { results[i] = replay->Run(changes[i] != nullptr ? *changes[i] : identity_change); });
  ASSIGN_OR_RETURN(const ReplayResult identity, *results[0]);
  if (!identity.valid) return out;
  out.identity_ms = identity.step_ms;
  const double measured_ms = ToMs(a.avg_step_ns);
  if (measured_ms <= 0 || std::fabs(identity.step_ms / measured_ms - 1.0) > kReplayTolerance) return out;
  const double correction = measured_ms / identity.step_ms;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    ASSIGN_OR_RETURN(const ReplayResult best, *results[1 + 3 * i]);
    ASSIGN_OR_RETURN(const ReplayResult point, *results[2 + 3 * i]);
    ASSIGN_OR_RETURN(const ReplayResult worst, *results[3 + 3 * i]);
    *scenarios[i].target =
        Predict(best, point, worst, correction, noise, scenarios[i].data_wait_left_ms, scenarios[i].basis);
  }
  return out;
}

}  // namespace gputriage::analysis
