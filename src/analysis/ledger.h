// The goodput ledger: where every paid GPU-hour of a job went. The job's GPUs
// times its wall time are split into buckets that add up to it exactly:
//
//   job  |startup|restore|compile| step | step |ckpt| step |..idle..| step | eval |teardown|
//   step |  data wait | the rest (productive) |         (phases it marked inside it)
//
// Every instant of the job's span goes to one bucket, by priority: a phase the
// job marked outside its steps (restore > compile > checkpoint save > eval),
// else a step (split by the phases marked inside it), else a gap (startup before
// the first step, teardown after the last, idle or between-steps in between).
// A failed job's steps since its last checkpoint are lost work, and its time
// after the last step a hang (killed, long) or a crash. A bucket the source
// cannot see is reported unknown, never zero.
#pragma once

#include <string>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"

namespace gputriage::analysis {

/// A gap between steps at least this many median steps long (and over a second)
/// is idle time, not the loop's own overhead.
inline constexpr double kIdleGapSteps = 3.0;
inline constexpr TimeNs kIdleGapMinNs = kNsPerS;
/// Leading steps this many times the median step are compilation / warm-up.
inline constexpr double kWarmupStepFactor = 3.0;
/// A killed job whose last step ended this many median steps (and 30 s) before
/// the end was hung, not stopping.
inline constexpr double kHangSteps = 10.0;
inline constexpr TimeNs kHangMinNs = 30 * kNsPerS;

/// The buckets' names in the order reports list them.
const std::vector<std::string>& LedgerBucketNames();

/// The GPUs a job held, for the ledger's unit.
struct LedgerGpus {
  double gpus = 0;  // 0: none seen (the ledger is then in job-hours)
  std::string source;
};

/// The GPUs of a recording's metric devices that the job used (all when the
/// recorder could not tell), a MIG instance by its share of the board.
LedgerGpus JobGpus(const std::vector<DeviceMetricAnalysis>& devices);

/// The ledger of a recording with step markers (a live recording, or a stored
/// one); invalid, with a note, when it has no steps.
RunLedger BuildLedger(const Recording& recording, const LedgerGpus& gpus);

/// The ledger of a trace's profiled steps (ProfilerStep#N): each step split by
/// torch-tb-profiler's categories (productive, data wait, communication, host
/// stall) and the gaps between them; invalid without profiler steps.
/// record_function ranges named for a job phase ("checkpoint", "evaluate",
/// "compile", "restore", ...) count in its bucket.
RunLedger BuildTraceLedger(const Recording& rec, const RecordingAnalysis& a, const LedgerGpus& gpus);

/// The job phase a record_function range's name stands for (GPUTRIAGE_PHASE_*), 0 for none.
int AnnotationPhase(std::string_view name);

/// The ledger of a metric log (no steps): its GPUs' idle phases, and the rest
/// unsplit; invalid when it has no idle phase (nothing it can tell apart).
RunLedger BuildMetricLedger(const std::vector<DeviceMetricAnalysis>& devices, const LedgerGpus& gpus);

/// Prices the buckets at `usd_per_gpu_hour` (no-op for a job-hours ledger).
void PriceLedger(RunLedger& ledger, double usd_per_gpu_hour, const std::string& source);

}  // namespace gputriage::analysis
