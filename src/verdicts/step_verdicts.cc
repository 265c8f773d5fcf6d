// Verdicts from step markers (timing from inside the training loop), in the
// same vocabulary as the trace and metric rules, merged with them by verdict.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/markers.hpp"
#include "src/analysis/what_if.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

// The brief's line: data wait above 20 % of compute time is input-bound; at 50 %
// the GPU waits a third of every step.
constexpr double kDataWaitModeratePercent = 20.0;
constexpr double kDataWaitHighPercent = 50.0;
// Step-time outliers (> 2x the median) that cost this share of all step time.
constexpr double kOutlierTimeModeratePercent = 10.0;
constexpr double kOutlierTimeHighPercent = 25.0;
constexpr int64_t kOutlierMinSteps = 2;
// Other processes holding this many CPUs on average make them the first suspect for slow steps.
constexpr double kOutlierLoadCpus = 0.5;
// The most the loop can slow beside its loader workers on the CPUs left to it: a
// process more than CPUs shares them (three processes on one CPU, 3x).
constexpr double kMaxSharedStretch = 3.0;
// A rank whose late arrival at the step's collectives makes every step this much
// longer than it would be if it arrived with the others (the others wait for it).
constexpr double kStragglerRatio = 1.15;
constexpr double kStragglerHighRatio = 1.5;
constexpr int64_t kStragglerMinSteps = 3;
constexpr double kStragglerMinLateMs = 1.0;
// Arriving last in this share of the steps: the lateness stays with the rank.
constexpr double kStragglerPersistentShare = 0.8;
// MFU below 30 % is low (gpuprof's rule, shared/reference/trace-analysis.md §5.6);
// large dense models reach 38-56 % (Llama 3 405B 38-43 %, Megatron-LM 41-56 %).
constexpr double kLowMfuPercent = 30.0;
constexpr double kVeryLowMfuPercent = 10.0;

// Host work outside every marked phase of a step (forward, backward, optimizer,
// data, ...): at 20 % of the step a per-step callback, log line or sync costs a
// fifth of the run; at 40 % the step is mostly the host's own bookkeeping. Below
// 1 ms a step's rest is the loop's own Python between phases.
constexpr double kHostStallModeratePercent = 20.0;
constexpr double kHostStallHighPercent = 40.0;
constexpr double kHostStallMinMs = 1.0;
// A host that stops waiting between steps runs the steps' own work faster too
// (clocks and caches stay warm): the phases of a CPU loop that slept 20 ms per
// step took 10-20 % longer than the same loop's whole steps without the sleep
// (tests/python/test_step_phases.py, 2 vCPUs of an AMD EPYC, 2026-12-02). The best
// end allows that much.
constexpr double kWarmHostSpeedup = 0.2;

// Host-to-device copies of the step's inputs (the copy phase, docs/phases.md): at
// 10 % of the step a synchronous copy holds every step that long (the GPU waits
// for its inputs); at 25 % a quarter of the run moves batches. Below 0.5 ms per
// step the copy is small beside any step worth fixing.
constexpr double kCopyModeratePercent = 10.0;
constexpr double kCopyHighPercent = 25.0;
constexpr double kCopyMinMs = 0.5;
// Copies already leave the host at once when this share of their bytes came from
// pinned memory with non_blocking=True: the phase then holds queueing and
// allocation, not the transfer, and these fixes have nothing left to give.
constexpr double kAsyncCopiesPercent = 90.0;

// The optimizer phase of a job whose parameters live on a GPU (step, zero_grad,
// clipping; host-timed): at 10 % of the step and 1 ms the per-tensor kernels of a
// for-loop or foreach update cost a tenth of the run; at 25 % a quarter.
constexpr double kOptimizerModeratePercent = 10.0;
constexpr double kOptimizerHighPercent = 25.0;
constexpr double kOptimizerMinMs = 1.0;
// How much faster the optimizer step runs with fewer kernels per update, from
// published before/after pairs on GPUs: for-loop -> foreach 3.1-5.0x for
// Adam/AdamW/SGD (pytorch/pytorch#49039), foreach -> fused 2.75x (Adam,
// deepmodeling/deepmd-kit#4463: 22 -> 8 ms), 3x (Adam, NVIDIA-NeMo/Automodel#3110:
// 0.06 -> 0.02 s), 3.2x (AdamW host time, microsoft/dion#63: 138 -> 43 ms). The
// point is their median; the worst end is below every one of them (zero_grad and
// clipping, also in the phase, do not speed up).
constexpr double kFusedSpeedupPoint = 3.0;
constexpr double kFusedSpeedupBest = 5.0;
constexpr double kFusedSpeedupWorst = 2.0;
// Where the steps were timed on the GPU and it was busy this share of each step,
// the host's optimizer launches overlap the GPU's own work: not a cost to fix.
constexpr double kGpuBoundPercent = 90.0;

// Activation checkpointing's recomputation (backward runs the checkpointed
// segments' forward again): at 10 % of the step it is worth knowing what the
// memory saving costs; at 20 % a fifth of the run recomputes. Below 1 ms per step
// it is small beside any step worth changing.
constexpr double kRecomputeLowPercent = 10.0;
constexpr double kRecomputeModeratePercent = 20.0;
constexpr double kRecomputeMinMs = 1.0;
// A GPU whose memory was this full at its peak has no room for the activations
// checkpointing saves: turning it off may not fit at all.
constexpr double kMemoryFullPercent = 90.0;
// Removing checkpointing saves its bookkeeping in backward too (restoring RNG
// state, a nested backward per segment), which is not in the measured
// recomputation: the saving may exceed it by this share. Fitted on the
// RecomputePair runs of tests/python/test_step_phases.py (CPU, PyTorch 1.13):
// the saving was 1.6 % and 3.9 % above the measured recomputation (the latter in
// CI, under load); the committed pair cpu_mlp_activation_checkpointing_removed is
// held out and was not used.
constexpr double kCheckpointBookkeepingMax = 0.05;

/// A GPU ran in this recording, timed per step or not: kernels in its trace or
/// GPU metrics beside its steps.
bool GpuRan(const RecordingAnalysis& a) { return a.has_gpu_activity || !a.metric_devices.empty(); }

/// A finding from the step markers of recording `a`.
Finding MarkerFinding(const RecordingAnalysis& a, std::string verdict, Severity severity) {
  Finding f;
  f.verdict = std::move(verdict);
  f.origin = "markers";
  f.severity = severity;
  f.scope = a.source;
  return f;
}

std::string WarmupNote(const StepMarkerAnalysis& m) {
  if (m.warmup_steps == 0) return "";
  return fmt::format(" ({} warm-up step{} at >= 3x the median left out.)", m.warmup_steps,
                     m.warmup_steps == 1 ? "" : "s");
}

void JudgeOutliers(const RecordingAnalysis& a, std::vector<Finding>& out) {
  const StepMarkerAnalysis& m = a.marked;
  if (m.outlier_steps < kOutlierMinSteps || m.outlier_time_percent < kOutlierTimeModeratePercent) return;
  Finding f = MarkerFinding(a, "unstable_step_time",
                            m.outlier_time_percent >= kOutlierTimeHighPercent ? Severity::kHigh : Severity::kModerate);
  f.title = fmt::format("Unstable step time: {} of {} steps take over twice the median ({:.1f} ms), {:.0f}% of all step time",
                        m.outlier_steps, m.steps, m.step_ms_p50, m.outlier_time_percent);
  f.detail = fmt::format(
      "Step time p50 {:.1f} ms, p95 {:.1f} ms, coefficient of variation {:.2f}. The slow steps spend {:.0f}% of the "
      "run's step time beyond the median.{}",
      m.step_ms_p50, m.step_ms_p95, m.step_ms_cv, m.outlier_time_percent,
      m.outlier_phase.empty() ? std::string(" No marked phase grows in them: the stall is outside the marked phases.")
                              : fmt::format(" The '{}' phase grows most in them: {:.1f} ms more per slow step.",
                                            m.outlier_phase, m.outlier_phase_ms));
  f.evidence.push_back(E("outlier_time_percent", m.outlier_time_percent, "percent",
                          "step markers: time of steps > 2x median beyond the median / all step time",
                          f.severity == Severity::kHigh ? kOutlierTimeHighPercent : kOutlierTimeModeratePercent, ">="));
  f.evidence.push_back(E("outlier_steps", static_cast<double>(m.outlier_steps), "count", "steps > 2x the median"));
  f.evidence.push_back(E("step_ms_p50", m.step_ms_p50, "ms", "step markers"));
  f.evidence.push_back(E("step_ms_p95", m.step_ms_p95, "ms", "step markers"));
  f.evidence.push_back(E("step_ms_cv", m.step_ms_cv, "ratio", "step markers: standard deviation / mean"));
  if (!m.outlier_phase.empty())
    f.evidence.push_back(E("outlier_phase_excess_ms", m.outlier_phase_ms, "ms",
                            "step markers: mean '" + m.outlier_phase + "' phase in slow steps minus in the others"));
  if (m.outlier_phase == "data") {
    f.recommendations = {{"DataLoader(..., prefetch_factor=4, persistent_workers=True)",
                          "workers refilling at epoch or shard boundaries stall single steps"}};
  } else if (m.outlier_phase == "checkpoint") {
    f.recommendations = {{"save checkpoints asynchronously (torch.distributed.checkpoint.async_save) or less often",
                          "a synchronous save stops training for its whole duration"}};
  } else {
    f.recommendations = {
        {"move periodic work (evaluation, logging with .item()/.cpu(), checkpoints) off the step or mark it as a phase",
         "a periodic host sync or save shows as a slow step"},
        {"gc.freeze() after setup, or gc.disable() with periodic gc.collect() between steps",
         "Python's cyclic GC pauses land on random steps in large programs"},
    };
  }
  // On a machine shared with other processes, their bursts are the first suspect.
  if (const double others = a.host.ContendingCpus(); others >= kOutlierLoadCpus) {
    f.detail += fmt::format(" Other processes used {:.2f} of the machine's {} CPUs while the job ran "
                            "(host_contention): a step that waits for a CPU they hold is slow for a reason outside the "
                            "job.",
                            others, a.host.machine_cpus);
    f.recommendations.insert(f.recommendations.begin(),
                             {"run it where nothing else competes for its CPUs before changing the job",
                              "other processes' bursts of CPU use land on random steps"});
  }
  const double expected = m.step_ms_mean * (1.0 - m.outlier_time_percent / 100.0);
  f.gain = StepGain(m.step_ms_mean, expected, std::min(expected, m.step_ms_p50), (m.step_ms_mean + expected) / 2,
                    "unstable_step_time",
                    "mean step time if the slow steps took the median (at best every step at the median; at worst "
                    "half the excess removed)");
  out.push_back(std::move(f));
}

/// The rank whose `field` (ms per step) stands out: at least twice the median of
/// the others and 1 ms above it. Null for one process or an even spread: an
/// average over ranks hides a wait that only one of them has.
const ProcessStepStats* UnevenRank(const StepMarkerAnalysis& m, double ProcessStepStats::*field, double* others) {
  if (m.by_process.size() < 2) return nullptr;
  const ProcessStepStats* top = nullptr;
  for (const auto& p : m.by_process)
    if (!std::isnan(p.*field) && (!top || p.*field > top->*field)) top = &p;
  if (!top) return nullptr;
  std::vector<double> rest;
  for (const auto& p : m.by_process)
    if (&p != top && !std::isnan(p.*field)) rest.push_back(p.*field);
  if (rest.empty()) return nullptr;
  std::nth_element(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(rest.size() / 2), rest.end());
  *others = rest[rest.size() / 2];
  return top->*field >= 2 * *others && top->*field >= *others + 1.0 ? top : nullptr;
}

/// A sentence naming the rank a per-step figure belongs to, and the evidence for it.
void NameUnevenRank(const StepMarkerAnalysis& m, double ProcessStepStats::*field, const char* what, Finding& f) {
  double others = 0;
  const ProcessStepStats* top = UnevenRank(m, field, &others);
  if (!top) return;
  f.title += fmt::format(" -- on {}", top->Label());
  f.detail += fmt::format(" It is {}'s: {:.1f} ms of {} per step there against {:.1f} ms (median) on the other {} "
                          "process{}; the mean over processes understates it.",
                          top->Label(), top->*field, what, others, m.by_process.size() - 1,
                          m.by_process.size() == 2 ? "" : "es");
  f.evidence.push_back(E(fmt::format("{}_ms_on_{}", what[0] == 'd' ? "data_wait" : "untraced",
                                     top->rank >= 0 ? fmt::format("rank_{}", top->rank) : fmt::format("pid_{}", top->pid)),
                         top->*field, "ms", fmt::format("step markers: {}", top->Label())));
  f.evidence.push_back(E("other_processes_median_ms", others, "ms", "step markers: median of the other processes"));
}

/// Where a late rank's lateness came from: the largest of its parts.
enum class Lateness { kData, kHostBeforeForward, kPreviousStep };

Lateness LatenessFrom(const ProcessStepStats& p) {
  if (p.late_data_ms >= p.late_start_ms && p.late_data_ms >= p.late_host_ms) return Lateness::kData;
  return p.late_host_ms >= p.late_start_ms ? Lateness::kHostBeforeForward : Lateness::kPreviousStep;
}

/// What a late rank was doing, from the part of its lateness it spent there.
std::string LateCause(const ProcessStepStats& p) {
  switch (LatenessFrom(p)) {
    case Lateness::kData:
      return fmt::format("waiting for its next batch ({:.1f} ms more data wait per step than the first rank to arrive)",
                         p.late_data_ms);
    case Lateness::kHostBeforeForward:
      return fmt::format("host work before its forward ({:.1f} ms more per step than the first rank to arrive: "
                         "preprocessing, a callback, a sync outside any marked phase)",
                         p.late_host_ms);
    case Lateness::kPreviousStep:
      break;
  }
  return fmt::format("finishing its previous step late ({:.1f} ms per step: host work after the step's collectives "
                     "-- logging, a .item() sync, a callback, a checkpoint -- before its next step begins)",
                     p.late_start_ms);
}

/// The last rank to arrive in a synchronous job (with enough steps to judge); null otherwise.
const ProcessStepStats* LateRank(const StepMarkerAnalysis& m) {
  if (!m.sync.synchronous) return nullptr;
  const ProcessStepStats* late = nullptr;
  for (const auto& p : m.by_process)
    if (p.steps >= kStragglerMinSteps && !std::isnan(p.late_ms_p50) && (!late || p.late_ms_p50 > late->late_ms_p50))
      late = &p;
  return late;
}

/// One cause explained once: where the data wait is the straggler's own (its
/// lateness came from its loader), the other ranks wait for it at every
/// collective, so overlapping that wait gives the straggler's gain, not the
/// averaged one this finding would compute over ranks that mostly waited.
void ReconcileWithStraggler(const StepMarkerAnalysis& m, const std::vector<Finding>& out, Finding& input) {
  const Finding* straggler = nullptr;
  for (const auto& f : out)
    if (f.verdict == "straggler_rank") straggler = &f;
  const ProcessStepStats* late = LateRank(m);
  if (!straggler || !late || !straggler->gain || LatenessFrom(*late) != Lateness::kData) return;
  input.gain = straggler->gain;
  input.gain->basis = "the straggler's gain (straggler_rank): the other ranks wait for this rank's data at every "
                      "collective, so overlapping its wait removes their waiting too";
  input.detail += fmt::format(" This wait is what the other ranks wait for at every collective (straggler_rank, {}):"
                              " its expected gain is the straggler's.",
                              late->Label());
}

/// The rank the others wait for: in a synchronous job (ranks arrive apart and
/// leave the step's collectives together), the one that arrives last, by how
/// late it arrives -- never by the time inside the collective, where the others
/// wait for it.
void JudgeStragglers(const RecordingAnalysis& a, std::vector<Finding>& out) {
  const StepMarkerAnalysis& m = a.marked;
  const ProcessStepStats* late = LateRank(m);
  if (!late) return;
  const double step = m.step_ms_p50;
  const double without = step - late->late_ms_p50;  // the step if it arrived with the others
  if (late->late_ms_p50 < kStragglerMinLateMs || without <= 0 || step < kStragglerRatio * without) return;
  const double ratio = step / without;
  Finding f = MarkerFinding(a, "straggler_rank", ratio >= kStragglerHighRatio ? Severity::kHigh : Severity::kModerate);
  const bool persistent = late->last_share >= kStragglerPersistentShare;
  f.title = fmt::format("Straggler: {} reaches the step's collectives {:.1f} ms after the first rank; the others wait "
                        "for it every step",
                        late->Label(), late->late_ms_p50);
  f.detail = fmt::format(
      "{} ranks marked the same {} steps. In synchronous data-parallel training every rank waits at each collective "
      "(DDP's all-reduce inside backward, or an explicit one) for the last to arrive: the ranks arrived {:.1f} ms apart "
      "(median step) and left within {:.1f} ms of each other, so the whole job runs at {}'s pace. It was late from {}. "
      "{}",
      m.by_process.size(), m.sync.matched_steps, m.sync.arrival_spread_ms_p50, m.sync.release_spread_ms_p50,
      late->Label(), LateCause(*late),
      persistent ? fmt::format("The lateness stays with it: it arrived last in {:.0f}% of the steps.", 100 * late->last_share)
                 : fmt::format("The lateness moves between ranks: it arrived last in only {:.0f}% of the steps.",
                               100 * late->last_share));
  f.evidence.push_back(E("straggler_late_ms", late->late_ms_p50, "ms",
                         fmt::format("step markers: {} arrives after the first rank, p50 over matched steps", late->Label()),
                         kStragglerMinLateMs, ">="));
  f.evidence.push_back(E("straggler_step_ratio", ratio, "ratio", "step time / step time without the lateness",
                         f.severity == Severity::kHigh ? kStragglerHighRatio : kStragglerRatio, ">="));
  f.evidence.push_back(E("release_spread_ms", m.sync.release_spread_ms_p50, "ms",
                         "ranks leave the collectives this close together (p50): they waited for each other"));
  f.evidence.push_back(E("straggler_last_share_percent", 100 * late->last_share, "percent",
                         "matched steps in which it arrived last", 100 * kStragglerPersistentShare, ">="));
  if (late->rank >= 0) f.evidence.push_back(E("straggler_rank", late->rank, "rank", "RANK of the late process"));
  f.evidence.push_back(E("matched_steps", static_cast<double>(m.sync.matched_steps), "count",
                         "steps every rank marked with both sync times"));
  f.recommendations = {
      {fmt::format("fix what {} does before it arrives: {}", late->Label(),
                   LatenessFrom(*late) == Lateness::kData
                       ? "more DataLoader workers or faster storage on its host (its loader is the slow one)"
                       : "move its extra host work off the step (log and sync every N steps, on rank 0 only where "
                         "that is the slow one)"),
       "the other ranks stop waiting for it at every collective"},
      {"check the slow rank's host: CPU contention, its GPU's clocks and temperature (throttling), its NIC",
       "one slow node paces the whole job"},
  };
  // The point is the whole lateness gone, as a trace's straggler_rank says (the
  // rank arriving with the others). It had kept a quarter of it: on real DDP
  // pairs (gloo, 10-60 ms late) the fixed run was faster than even the best
  // end, never a quarter of the lateness slower (docs/verdicts.md).
  f.gain = StepGain(step, without, without, without + late->late_ms_p50 / 2, "straggler_rank",
                    "step time with the late rank arriving with the others: its whole lateness gone (point and "
                    "best), at worst half of it (the others' own work may then be the last to arrive)");
  out.push_back(std::move(f));
}

void JudgeMfu(const RecordingAnalysis& a, std::vector<Finding>& out) {
  const StepMarkerAnalysis& m = a.marked;
  if (std::isnan(m.mfu_percent) || m.mfu_percent >= kLowMfuPercent) return;
  Finding f = MarkerFinding(a, "low_mfu", m.mfu_percent < kVeryLowMfuPercent ? Severity::kHigh : Severity::kModerate);
  f.title = fmt::format("Low MFU: {:.1f}% of the {}'s dense bf16 peak ({:.1f} of {:.0f} TFLOPS)", m.mfu_percent,
                        m.gpu_model, m.achieved_tflops, m.peak_tflops);
  f.detail = fmt::format(
      "The job reports {:.3g} model FLOPs per step; at {:.1f} ms per step that is {:.1f} TFLOPS per GPU. Large dense "
      "transformers reach 38-56% (Llama 3 405B, Megatron-LM); below 30% the GPU's arithmetic is mostly unused.",
      m.flops_per_step, m.step_ms_mean, m.achieved_tflops);
  f.evidence.push_back(E("mfu_percent", m.mfu_percent, "percent", "step markers: FLOPs per step / step time / peak",
                          f.severity == Severity::kHigh ? kVeryLowMfuPercent : kLowMfuPercent, "<"));
  f.evidence.push_back(E("achieved_tflops", m.achieved_tflops, "TFLOPS", "step markers, per process"));
  f.evidence.push_back(E("peak_tflops", m.peak_tflops, "TFLOPS", "dense bf16 (fp16 where no bf16), src/analysis/gpu_specs.cc"));
  f.cannot_exclude = {"input_bound", "launch_bound", "low_precision", "undersized_work"};
  f.to_separate = "the other findings of this run; a profiler trace of a few steps (gputriage diagnose trace.json)";
  f.recommendations = {
      {"with torch.autocast('cuda', dtype=torch.bfloat16): ...", "tensor cores at bf16 rate instead of fp32/tf32"},
      {"F.scaled_dot_product_attention (flash backend)", "fused attention instead of materialized softmax"},
      {"larger per-GPU batch, torch.compile or CUDA graphs", "fills the GPU and removes launch gaps"},
  };
  out.push_back(std::move(f));
}

/// Time each step spends outside every marked phase (zero-code mode marks
/// forward, backward and the optimizer itself): the host's own work between the
/// phases, which a profile of the GPU shows only as gaps.
void JudgeHostStall(const RecordingAnalysis& a, std::vector<Finding>& out) {
  const StepMarkerAnalysis& m = a.marked;
  if (!m.phases_traced || std::isnan(m.untraced_ms_mean)) return;
  if (m.untraced_percent_of_step < kHostStallModeratePercent || m.untraced_ms_mean < kHostStallMinMs) return;
  // Where the GPU's own time per step was measured, the host's rest may have been a
  // wait for queued GPU work (.item() on a busy GPU): only what the GPU's time
  // leaves uncovered can be won.
  const double device = m.device_steps > 0 ? m.device_ms_mean : 0.0;
  const double floor = std::max(device, m.step_ms_mean - m.untraced_ms_mean);
  const double winnable = m.step_ms_mean - floor;
  if (winnable <= 0 || 100.0 * winnable / m.step_ms_mean < kHostStallModeratePercent) return;
  const bool gpu_unmeasured = m.device_steps == 0 && GpuRan(a);
  Finding f = MarkerFinding(a, "host_stall",
                            m.untraced_percent_of_step >= kHostStallHighPercent && !gpu_unmeasured ? Severity::kHigh
                                                                                                  : Severity::kModerate);
  const auto phase = [&](int id) { return m.phase_ms_mean[static_cast<size_t>(id)]; };
  f.title = fmt::format("Host stall: {:.1f} ms of every {:.1f} ms step ({:.0f}%) is spent outside forward, backward, "
                        "the optimizer and data loading",
                        m.untraced_ms_mean, m.step_ms_mean, m.untraced_percent_of_step);
  f.detail = fmt::format(
      "Per step (mean of {} steps, host-timed): data {:.1f} ms, forward {:.1f} ms, backward {:.1f} ms, optimizer "
      "{:.1f} ms, and {:.1f} ms (p50 {:.1f}) in none of them. That rest is the loop's own host work: per-step "
      "callbacks, logging, metric computation, .item()/.cpu() reads that wait for the device, a loss computed "
      "outside a module.{}{}",
      m.steps, phase(GPUTRIAGE_PHASE_DATA), phase(GPUTRIAGE_PHASE_FORWARD), phase(GPUTRIAGE_PHASE_BACKWARD),
      phase(GPUTRIAGE_PHASE_OPTIMIZER), m.untraced_ms_mean, m.untraced_ms_p50,
      device > 0 ? fmt::format(" The GPU's own time per step is {:.1f} ms (device-side, {} steps): removing the rest "
                               "cannot take the step below it.",
                               device, m.device_steps)
                 : "",
      gpu_unmeasured ? " A GPU ran but the steps were not timed on it: part of the rest may be a sync waiting for "
                       "queued GPU work, which is GPU time, not a stall."
                     : "");
  NameUnevenRank(m, &ProcessStepStats::untraced_ms_mean, "host work outside the marked phases", f);
  f.evidence.push_back(E("untraced_percent_of_step", m.untraced_percent_of_step, "percent",
                          "step markers: step time outside every marked phase / step time",
                          f.severity == Severity::kHigh ? kHostStallHighPercent : kHostStallModeratePercent, ">="));
  f.evidence.push_back(E("untraced_ms_per_step", m.untraced_ms_mean, "ms", "step markers, mean over steps",
                          kHostStallMinMs, ">="));
  f.evidence.push_back(E("untraced_ms_p50", m.untraced_ms_p50, "ms", "step markers"));
  f.evidence.push_back(E("forward_ms_per_step", phase(GPUTRIAGE_PHASE_FORWARD), "ms", "forward phase, host-timed"));
  f.evidence.push_back(E("backward_ms_per_step", phase(GPUTRIAGE_PHASE_BACKWARD), "ms", "backward phase, host-timed"));
  f.evidence.push_back(E("optimizer_ms_per_step", phase(GPUTRIAGE_PHASE_OPTIMIZER), "ms",
                          "optimizer phase (step, zero_grad, gradient clipping), host-timed"));
  f.evidence.push_back(E("data_wait_ms_per_step", phase(GPUTRIAGE_PHASE_DATA), "ms", "data phase, host-timed"));
  if (device > 0) f.evidence.push_back(E("device_ms_per_step", device, "ms", "step device times (CUDA events)"));
  if (gpu_unmeasured) {
    f.cannot_exclude = {"gpu_busy_time"};
    f.to_separate = "record with device step times on (zero-code mode times steps with CUDA events unless "
                    "GPUTRIAGE_DEVICE_TIME=0)";
  }
  f.recommendations = {
      {"log every N steps, and read loss.item() / .cpu() / .tolist() only when logging: keep running sums on the "
       "device",
       "each read waits for the device and runs on the critical path of every step"},
      {"run per-step callbacks (metrics, W&B/MLflow logging, checkpoint checks) every N steps or on a background "
       "thread",
       "work between optimizer.step() and the next forward delays every step by its whole length"},
      {"gc.freeze() after setup", "Python's cyclic collector pauses land between steps in large programs"},
  };
  // Without the rest every step is its marked phases (not below the GPU's own
  // time); at worst half the rest is the loop's floor and stays. At best every
  // step runs its phases as fast as the fastest tenth of them did (a loop that
  // stops stalling also stops cooling its caches between steps), or the mean
  // less run-to-run variation, taken as this run's step-time CV.
  const double noise = std::min(m.step_ms_cv, analysis::kMaxRunToRunNoise);
  const double fastest = std::isnan(m.in_phases_ms_p10) ? floor : m.in_phases_ms_p10;
  const double best = std::max(device, std::min(floor * (1.0 - std::max(noise, kWarmHostSpeedup)), fastest));
  f.gain = StepGain(m.step_ms_mean, floor, best, m.step_ms_mean - winnable / 2,
                    device > 0 && device >= m.step_ms_mean - m.untraced_ms_mean ? "gpu_busy_time" : "marked_phases",
                    fmt::format("step time without the {:.1f} ms outside the marked phases: the phases' own {:.1f} ms{}; "
                                "at worst half the rest is the loop's floor and stays; at best the phases {:.0f}% faster on a "
                                "host that no longer idles between steps (or the step-time CV, or the fastest tenth "
                                "of steps, {:.1f} ms, whichever is lower)",
                                m.untraced_ms_mean, m.step_ms_mean - m.untraced_ms_mean,
                                device > 0 ? fmt::format(", not below the GPU's {:.1f} ms", device) : std::string(),
                                std::max(noise, kWarmHostSpeedup) * 100, fastest));
  out.push_back(std::move(f));
}

void JudgeCopies(const RecordingAnalysis& a, std::vector<Finding>& out) {
  const StepMarkerAnalysis& m = a.marked;
  const double copy = m.phase_ms_mean[kCopySlot];
  if (copy < kCopyMinMs || !(m.step_ms_mean > 0)) return;
  const double pct = 100.0 * copy / m.step_ms_mean;
  if (pct < kCopyModeratePercent) return;
  const CopySettings& c = a.copies;
  const bool pinned = c.known && c.pinned_percent >= kAsyncCopiesPercent;
  const bool non_blocking = c.known && c.non_blocking_percent >= kAsyncCopiesPercent;
  if (pinned && non_blocking) return;
  Finding f = MarkerFinding(a, "copy_bound", pct >= kCopyHighPercent ? Severity::kHigh : Severity::kModerate);
  f.title = fmt::format("Copy-bound: {:.1f} ms of every {:.1f} ms step ({:.0f}%) copies the batch to the device{}", copy,
                        m.step_ms_mean, pct, c.known ? " while the host waits" : "");
  const int64_t steps = m.steps + m.warmup_steps;  // copy.bytes counts every step's copies
  const double bytes_per_step = c.known && steps > 0 ? c.bytes / static_cast<double>(steps) : NAN;
  f.detail = fmt::format("The copy phase (host-to-device copies of the step's inputs, host-timed) takes {:.1f} ms per "
                         "step over {} steps.",
                         copy, m.steps);
  if (c.known) {
    f.detail += fmt::format(
        " {:.1f} MiB per step in {} copies over the run ({:.1f} GB/s as the host waited for them); {:.0f}% of the bytes "
        "from pinned memory, {:.0f}% with non_blocking=True{}. A copy from pageable memory is staged through a "
        "driver buffer and returns only when done; from pinned memory with non_blocking=True it is queued and the "
        "host goes on.",
        bytes_per_step / (1024.0 * 1024.0), c.calls, bytes_per_step / (copy * 1e6),
        c.pinned_percent, c.non_blocking_percent,
        c.loader_pin_memory.empty() ? "" : fmt::format(" (DataLoader pin_memory={})", c.loader_pin_memory));
  } else {
    f.detail += " The job marked this phase itself: whether its copies are pinned and non-blocking is not recorded.";
  }
  f.detail += WarmupNote(m);
  f.evidence.push_back(E("copy_percent_of_step", pct, "percent", "step markers: copy phase / step time",
                          f.severity == Severity::kHigh ? kCopyHighPercent : kCopyModeratePercent, ">="));
  f.evidence.push_back(E("copy_ms_per_step", copy, "ms", "copy phase, host-timed, mean over steps", kCopyMinMs, ">="));
  if (m.phase_device_steps > 0)
    f.evidence.push_back(E("copy_device_ms_per_step", m.phase_device_ms_mean[kCopySlot], "ms",
                            "copy phase, GPU-timed (CUDA events)"));
  if (c.known) {
    f.evidence.push_back(
        E("copy_mib_per_step", bytes_per_step / (1024.0 * 1024.0), "MiB", "copy.bytes / steps (zero-code mode)"));
    f.evidence.push_back(E("copy_pinned_percent", c.pinned_percent, "percent", "copy.pinned_percent: bytes from pinned memory",
                            kAsyncCopiesPercent, "<"));
    f.evidence.push_back(E("copy_non_blocking_percent", c.non_blocking_percent, "percent",
                            "copy.non_blocking_percent: bytes copied with non_blocking=True", kAsyncCopiesPercent, "<"));
  }
  if (!pinned)
    f.recommendations.push_back({"DataLoader(..., pin_memory=True)",
                                 "batches arrive in page-locked memory: the copy skips the staging buffer (about twice "
                                 "the bandwidth of pageable memory) and can run asynchronously"});
  if (!non_blocking)
    f.recommendations.push_back({"batch.to(device, non_blocking=True)",
                                 "from pinned memory the copy is queued on the stream and the host goes on to the "
                                 "forward at once"});
  f.recommendations.push_back({"copy the next batch on a side CUDA stream while this step computes (a prefetcher "
                               "around the DataLoader)",
                               "the transfer overlaps the previous step's compute instead of preceding this one's"});
  f.recommendations.push_back({"send compact dtypes (uint8 images, int32 token ids) and convert on the GPU",
                               "fewer bytes cross the host link"});
  // With the copies overlapped the step is the rest of its work, never below the
  // GPU's own time; at worst half the copy stays (pinned but not overlapped: a
  // pinned copy takes about half a pageable one's time); at best the rest of the
  // step less the run's step-time CV.
  const double device = m.device_steps > 0 ? m.device_ms_mean : 0.0;
  const double floor = std::max(device, m.step_ms_mean - copy);
  const double noise = std::min(m.step_ms_cv, analysis::kMaxRunToRunNoise);
  f.gain = StepGain(m.step_ms_mean, floor, std::max(device, floor * (1.0 - noise)), m.step_ms_mean - copy / 2,
                    device > 0 && device >= m.step_ms_mean - copy ? "gpu_busy_time" : "marked_phases",
                    fmt::format("step time with the {:.1f} ms copy overlapped: the rest of the step, {:.1f} ms{}; at "
                                "worst half the copy stays (pinned but not overlapped); the best end less the "
                                "step-time CV ({:.0f}%)",
                                copy, m.step_ms_mean - copy,
                                device > 0 ? fmt::format(", not below the GPU's {:.1f} ms", device) : std::string(),
                                noise * 100));
  out.push_back(std::move(f));
}

/// The optimizer's own phase on a GPU job: a for-loop or foreach update runs a
/// few kernels per parameter tensor, each launched by the host; a fused one a
/// few per group. Silent for a job on the CPU (foreach there was slower for
/// large tensors: docs/verdicts.md), for a fused optimizer and for optimizers of
/// other libraries (their update is unknown).
void JudgeOptimizer(const RecordingAnalysis& a, std::vector<Finding>& out) {
  const StepMarkerAnalysis& m = a.marked;
  const OptimizerSettings& o = a.optimizer;
  const double optimizer = m.phase_ms_mean[GPUTRIAGE_PHASE_OPTIMIZER];
  if (!o.known || (o.implementation != "for-loop" && o.implementation != "foreach")) return;
  const bool adam = o.class_name == "Adam" || o.class_name == "AdamW";
  if (!adam && o.class_name != "SGD") return;  // the classes the published pairs measured
  const bool gpu_seen = m.device_steps > 0 || GpuRan(a);
  if (o.device.empty() ? !gpu_seen : o.device != "cuda") return;
  if (!(m.step_ms_mean > 0) || optimizer < kOptimizerMinMs) return;
  const double pct = 100.0 * optimizer / m.step_ms_mean;
  if (pct < kOptimizerModeratePercent) return;
  const double device_percent = m.device_steps > 0 ? 100.0 * m.device_ms_mean / m.step_ms_mean : NAN;
  if (device_percent >= kGpuBoundPercent) return;
  const bool gpu_unmeasured = m.device_steps == 0;
  Finding f = MarkerFinding(a, "optimizer_bound",
                            pct >= kOptimizerHighPercent && !gpu_unmeasured ? Severity::kHigh : Severity::kModerate);
  const std::string tensors = o.param_tensors > 0 ? fmt::format("{} parameter tensors", o.param_tensors)
                                                  : std::string("its parameter tensors");
  f.title = fmt::format("Optimizer-bound: {} {} takes {:.1f} ms of every {:.1f} ms step ({:.0f}%)", o.implementation,
                        o.class_name, optimizer, m.step_ms_mean, pct);
  f.detail = fmt::format(
      "The optimizer phase (step, zero_grad, gradient clipping; host-timed) takes {:.1f} ms per step over {} steps. "
      "PyTorch runs {} {} as {}: {}.{}{}",
      optimizer, m.steps, o.class_name, o.device.empty() ? "on the GPU" : "on " + o.device,
      o.implementation == "for-loop" ? "a loop over " + tensors : "multi-tensor (foreach) kernels over " + tensors,
      o.implementation == "for-loop"
          ? "each tensor's update is several small kernels, each launched by the host"
          : "each of the update's operations is a kernel launch per chunk of tensors, and its host dispatch runs per "
            "tensor",
      std::isnan(o.params) ? std::string()
                           : fmt::format(" The update reads and writes {:.0f}M parameters' values, gradients and state.",
                                         o.params / 1e6),
      gpu_unmeasured ? " The steps were not timed on the GPU: if it was busy through the optimizer's launches, they "
                       "overlapped its work and the gain is smaller."
                     : fmt::format(" The GPU's own time is {:.0f}% of the step: it waits for the host.", device_percent));
  f.detail += WarmupNote(m);
  f.evidence.push_back(E("optimizer_percent_of_step", pct, "percent", "step markers: optimizer phase / step time",
                          f.severity == Severity::kHigh ? kOptimizerHighPercent : kOptimizerModeratePercent, ">="));
  f.evidence.push_back(E("optimizer_ms_per_step", optimizer, "ms", "optimizer phase, host-timed, mean over steps",
                          kOptimizerMinMs, ">="));
  if (m.phase_device_steps > 0) {
    const double on_gpu = m.phase_device_ms_mean[GPUTRIAGE_PHASE_OPTIMIZER];
    f.evidence.push_back(E("optimizer_device_ms_per_step", on_gpu, "ms", "optimizer phase, GPU-timed (CUDA events)"));
    f.detail += fmt::format(" On the GPU the phase spans {:.1f} ms per step.", on_gpu);
  }
  if (o.param_tensors > 0)
    f.evidence.push_back(E("optimizer_param_tensors", static_cast<double>(o.param_tensors), "count",
                            "optimizer.param_tensors (zero-code mode)"));
  if (!std::isnan(device_percent))
    f.evidence.push_back(E("device_percent_of_step", device_percent, "percent",
                            "step device times (CUDA events) / step time", kGpuBoundPercent, "<"));
  if (gpu_unmeasured) {
    f.cannot_exclude = {"gpu_busy_time"};
    f.to_separate = "record with device step times on (zero-code mode times steps with CUDA events unless "
                    "GPUTRIAGE_DEVICE_TIME=0)";
  }
  // Fused AdamW came with PyTorch 2.0, fused Adam with 1.13; SGD's fused kernel is
  // newer still: foreach is the step every version has.
  const bool torch1 = o.torch_version.rfind("1.", 0) == 0;
  const bool fused_available = adam && !(torch1 && o.class_name == "AdamW");
  if (fused_available)
    f.recommendations.push_back({fmt::format("torch.optim.{}(params, ..., fused=True)", o.class_name),
                                 "the whole update in one kernel per group of tensors instead of several per tensor"});
  if (o.implementation == "for-loop")
    f.recommendations.push_back({fmt::format("torch.optim.{}(params, ..., foreach=True)", o.class_name),
                                 "multi-tensor kernels: one launch per operation for many tensors"});
  if (!fused_available && o.implementation == "foreach")
    f.recommendations.push_back({"a PyTorch release with a fused kernel for this optimizer (fused=True), or "
                                 "torch.compile around optimizer.step()",
                                 "foreach still dispatches per tensor on the host"});
  f.recommendations.push_back({"fewer, larger parameter tensors (fused QKV projections, no per-channel parameters "
                               "kept as separate tensors)",
                               "the launches scale with the number of tensors, not their size"});
  // The optimizer phase runs kFusedSpeedup* times faster; the rest of the step stays.
  const auto after = [&](double speedup) { return m.step_ms_mean - optimizer * (1.0 - 1.0 / speedup); };
  f.gain = StepGain(m.step_ms_mean, after(kFusedSpeedupPoint), after(kFusedSpeedupBest), after(kFusedSpeedupWorst),
                    "marked_phases",
                    fmt::format("the step with the {:.1f} ms optimizer phase {:.0f}x faster (published before/after "
                                "pairs of fewer kernels per update: {:.0f}x at best, {:.0f}x at worst); the step's other "
                                "{:.1f} ms stay",
                                optimizer, kFusedSpeedupPoint, kFusedSpeedupBest, kFusedSpeedupWorst,
                                m.step_ms_mean - optimizer));
  out.push_back(std::move(f));
}

/// Activation checkpointing: memory traded for a second forward of the
/// checkpointed segments in every backward. Its cost is measured (zero-code
/// mode times the checkpointed forward); whether the memory is there to stop
/// paying it is the user's call, so the finding says what it costs and what
/// bounds the fix.
void JudgeRecompute(const RecordingAnalysis& a, std::vector<Finding>& out) {
  const StepMarkerAnalysis& m = a.marked;
  const RecomputeSettings& r = a.recompute;
  const int64_t steps = m.steps + m.warmup_steps;  // checkpointing.* counts every step's segments
  if (!r.known || steps <= 0 || !(m.step_ms_mean > 0)) return;
  // The recomputation as it ran in backward (grad on: it records the graph the
  // first run did not); the forward's run where only that was recorded.
  const bool timed_in_backward = !std::isnan(r.recompute_seconds) && r.recompute_seconds > 0;
  const double recompute =
      (timed_in_backward ? r.recompute_seconds : r.forward_seconds) * 1e3 / static_cast<double>(steps);
  const double pct = 100.0 * recompute / m.step_ms_mean;
  if (recompute < kRecomputeMinMs || pct < kRecomputeLowPercent) return;
  double memory_max = NAN;  // fmax passes over the devices whose memory is unknown
  for (const auto& d : a.metric_devices) memory_max = std::fmax(memory_max, d.memory_used_max_percent);
  const bool memory_full = memory_max >= kMemoryFullPercent;
  Finding f = MarkerFinding(a, "recompute_overhead",
                            pct >= kRecomputeModeratePercent && !memory_full ? Severity::kModerate : Severity::kLow);
  const double forward = m.phase_ms_mean[GPUTRIAGE_PHASE_FORWARD];
  const double backward = m.phase_ms_mean[GPUTRIAGE_PHASE_BACKWARD];
  f.title = fmt::format("Activation checkpointing recomputes {:.1f} ms of every {:.1f} ms step ({:.0f}%) in backward",
                        recompute, m.step_ms_mean, pct);
  f.detail = fmt::format(
      "{} torch.utils.checkpoint calls in training ran their segments' forward for {:.1f} ms per step (host-timed); "
      "backward runs each again to rebuild the activations it did not keep{}.",
      r.calls, r.forward_seconds * 1e3 / static_cast<double>(steps),
      timed_in_backward ? fmt::format(", {:.1f} ms per step", recompute) : std::string());
  if (forward > 0 && backward > 0)
    f.detail += fmt::format(" Backward takes {:.1f} ms, {:.1f}x the {:.1f} ms forward; the recomputation is {:.0f}% "
                            "of it.",
                            backward, backward / forward, forward, 100.0 * std::min(recompute, backward) / backward);
  if (!std::isnan(memory_max))
    f.detail += fmt::format(" The GPU's memory peaked at {:.0f}% used{}.", memory_max,
                            memory_full ? ": the activations may not fit without checkpointing" : "");
  f.detail += WarmupNote(m);
  f.evidence.push_back(E("recompute_percent_of_step", pct, "percent",
                          timed_in_backward ? "checkpointing.recompute_seconds / steps / step time"
                                            : "checkpointing.forward_seconds / steps / step time",
                          f.severity == Severity::kModerate ? kRecomputeModeratePercent : kRecomputeLowPercent, ">="));
  f.evidence.push_back(E("recompute_ms_per_step", recompute, "ms",
                          timed_in_backward ? "the checkpointed segments run again in backward, per step (zero-code mode)"
                                            : "the checkpointed segments' forward per step (zero-code mode), run again in "
                                              "backward",
                          kRecomputeMinMs, ">="));
  if (forward > 0 && backward > 0)
    f.evidence.push_back(E("backward_over_forward", backward / forward, "ratio", "backward phase / forward phase"));
  if (!std::isnan(memory_max))
    f.evidence.push_back(E("gpu_memory_used_max_percent", memory_max, "percent", "GPU metrics: peak memory used",
                            kMemoryFullPercent, "<"));
  if (!memory_full)
    f.recommendations.push_back({"turn activation checkpointing off where memory allows (Hugging Face: "
                                 "gradient_checkpointing=False), or trade it for a smaller micro-batch with gradient "
                                 "accumulation",
                                 "backward no longer runs the checkpointed forward a second time"});
  f.recommendations.push_back({"checkpoint fewer segments (every other block, or only the attention/MLP of the "
                               "largest layers: selective checkpointing)",
                               "recomputes the activations that save the most memory per millisecond, not all"});
  // Without recomputation the step loses the measured recomputation; at worst half
  // the segments stay checkpointed (selective) -- or, with the GPU's memory full,
  // none can go. The best end also saves the untimed bookkeeping (at most
  // kCheckpointBookkeepingMax of the recomputation) and allows twice the
  // step-time CV: the run without checkpointing is another process whose steps
  // vary as these did.
  const double noise = std::min(m.step_ms_cv, analysis::kMaxRunToRunNoise);
  const double expected = m.step_ms_mean - recompute;
  const double best = (m.step_ms_mean - recompute * (1 + kCheckpointBookkeepingMax)) * (1.0 - 2 * noise);
  f.gain = StepGain(m.step_ms_mean, expected, best,
                    memory_full ? m.step_ms_mean : m.step_ms_mean - recompute / 2, "memory_headroom",
                    fmt::format("the step without the {:.1f} ms recomputation; at worst half the segments stay "
                                "checkpointed{}; at best {:.0f}% more than it (checkpointing's bookkeeping in backward, which is not "
                                "timed) and less twice the step-time CV ({:.0f}%: another run's variation); whether the "
                                "activations fit is bounded by the GPU's memory",
                                recompute, memory_full ? " (with memory this full, possibly all)" : "",
                                kCheckpointBookkeepingMax * 100, 2 * noise * 100));
  out.push_back(std::move(f));
}

}  // namespace

std::vector<Finding> JudgeStepMarkers(const RecordingAnalysis& a) {
  std::vector<Finding> out;
  const StepMarkerAnalysis& m = a.marked;
  if (m.steps < 3) return out;
  JudgeOutliers(a, out);
  JudgeStragglers(a, out);
  JudgeMfu(a, out);
  JudgeHostStall(a, out);
  JudgeCopies(a, out);
  JudgeOptimizer(a, out);
  JudgeRecompute(a, out);
  if (!m.phases_known) return out;
  const double pct = m.data_wait_percent_of_compute;
  if (pct >= kDataWaitModeratePercent) {
    Finding f = MarkerFinding(a, "input_bound", pct >= kDataWaitHighPercent ? Severity::kHigh : Severity::kModerate);
    f.title = fmt::format("Input-bound: each step waits {:.1f} ms for data against {:.1f} ms of compute ({:.0f}%)",
                          m.data_wait_ms_mean, m.compute_ms_mean, pct);
    f.detail = fmt::format(
        "Step markers from the training loop: over {} steps the loop spent {:.1f} ms per step waiting for the next "
        "batch and {:.1f} ms computing. Loading and preprocessing run on the critical path instead of beside compute.{}",
        m.steps, m.data_wait_ms_mean, m.compute_ms_mean, WarmupNote(m));
    NameUnevenRank(m, &ProcessStepStats::data_wait_ms_mean, "data wait", f);
    f.evidence.push_back(E("data_wait_percent_of_compute", pct, "percent", "step markers: data phase / compute time",
                            f.severity == Severity::kHigh ? kDataWaitHighPercent : kDataWaitModeratePercent, ">="));
    f.evidence.push_back(E("data_wait_ms_per_step", m.data_wait_ms_mean, "ms", "step markers, mean over steps"));
    f.evidence.push_back(E("compute_ms_per_step", m.compute_ms_mean, "ms", "step markers, mean over steps"));
    if (m.device_steps > 0) {
      // The wait counted is what the GPU's own time left exposed.
      f.detail += fmt::format(
          " GPU time per step, measured on the device for {} steps: {:.1f} ms; of the {:.1f} ms the host waited, "
          "{:.1f} ms left the GPU idle.",
          m.device_steps, m.device_ms_mean, m.data_wait_host_ms_mean, m.data_wait_ms_mean);
      f.evidence.push_back(E("device_ms_per_step", m.device_ms_mean, "ms", "step device times (e.g. CUDA events)"));
      f.evidence.push_back(E("data_wait_host_ms_per_step", m.data_wait_host_ms_mean, "ms",
                              "step markers: the data phase as the host measured it"));
    }
    f.evidence.push_back(E("steps", static_cast<double>(m.steps), "count", "step markers"));
    f.recommendations = {
        WorkersAdvice(a.loader, "loads and decodes batches in worker processes while the model computes"),
        {"DataLoader(..., pin_memory=True, prefetch_factor=2..4, persistent_workers=True)",
         "keeps batches queued ahead and copies asynchronously"},
        {"cache the dataset on local NVMe (or in memory) instead of network storage",
         "removes I/O latency when workers are already saturated"},
    };
    // With the wait overlapped the step is the loop's own work, run slower beside
    // the loader workers (what_if.h), and never shorter than the GPU's time.
    // The range also spans run-to-run variation, taken as this run's step-time CV
    // (a fixed run is another run: its own work varies as these steps did).
    const double device = m.device_steps > 0 ? m.device_ms_mean : 0.0;
    const double noise = std::min(m.step_ms_cv, analysis::kMaxRunToRunNoise);
    auto after = [&](double stretch) { return std::min(m.step_ms_mean, std::max(m.compute_ms_mean * stretch, device)); };
    // At worst the loop shares the CPUs left to the job with the workers advised
    // for them (other processes hold the rest): one process more than CPUs.
    double worst_stretch = analysis::kWorkerHostStretchWorst;
    if (const int free_cpus = a.loader.FreeCpus(); free_cpus > 0)
      worst_stretch = std::max(worst_stretch, std::min(kMaxSharedStretch, (a.loader.WorkersPerGpu() + 1.0) / free_cpus));
    f.gain = StepGain(m.step_ms_mean, after(analysis::kWorkerHostStretchPoint),
                      after(analysis::kWorkerHostStretchBest) * (1.0 - noise),
                      std::min(m.step_ms_mean, after(worst_stretch) * (1.0 + noise)),
                      // What holds the step once the wait is gone: the GPU's own time where it was
                      // measured and is the longer; else the loop's host work (launch-bound with
                      // a GPU measured; without any GPU time, simply the host's work).
                      device >= m.compute_ms_mean * analysis::kWorkerHostStretchPoint ? "gpu_busy_time"
                      : m.device_steps > 0 || GpuRan(a) ? "launch_bound"
                                                                                        : "host_work",
                      fmt::format("step time with the data wait overlapped: the loop's own {:.1f} ms of work per step, "
                                  "{:.0f}% slower beside the loader workers ({:.0f}-{:.0f}%){}; the range widened by "
                                  "the step-time CV ({:.0f}%) for run-to-run variation",
                                  m.compute_ms_mean, (analysis::kWorkerHostStretchPoint - 1) * 100,
                                  (analysis::kWorkerHostStretchBest - 1) * 100,
                                  (worst_stretch - 1) * 100,
                                  device > 0 ? fmt::format(", not below the GPU's {:.1f} ms", device) : std::string(),
                                  noise * 100));
    ReconcileWithStraggler(m, out, f);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gputriage
