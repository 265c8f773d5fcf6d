// Predicted step times of the fixes trace verdicts recommend (what_if.cc).
#pragma once

#include <vector>

#include "gputriage/diagnosis.h"
#include "src/analysis/analysis_internal.h"
#include "src/analysis/kernel_taxonomy.h"
#include "src/analysis/replay.h"

namespace gputriage::analysis {

// Loader workers move the data work off the main process but not off the machine:
// the main process's own work (Python, op dispatch, launches) runs slower beside
// them. Turbo bins drop as more cores run (Intel Xeon E5-2698 v4: 3.6 GHz on one
// core, 2.7 GHz on all; Xeon Platinum 8480+: 3.8 / 3.0 GHz; AMD EPYC 9654: 3.7 /
// 3.55 GHz), and the workers share caches and memory bandwidth. Measured on real
// pairs: the bundled ResNet-50 V100 pair ran its host ops 17-25 % slower with 4
// workers (aten::conv2d 12.96 -> 15.17 ms, batch_norm 14.66 -> 17.60 ms per step);
// PyTorch CPU loops on a 2-core VM ran 5-12 % slower (tests/gains).
inline constexpr double kWorkerHostStretchBest = 1.0;    // spare cores at full clock
inline constexpr double kWorkerHostStretchPoint = 1.15;
inline constexpr double kWorkerHostStretchWorst = 1.35;  // the all-core turbo drop of the Xeons above

// Matrix kernels in bf16/fp16 instead of fp32/tf32: never more than the peak ratio;
// in practice 2-3x for training (NVIDIA's mixed-precision training guide; AMP
// ResNet-50 and BERT results), 1.5x when shapes or casts stand in the way. The
// replay uses them, and low_precision's Amdahl bound where no replay is possible.
inline constexpr double kMatrixSpeedupBest = 4.0;
inline constexpr double kMatrixSpeedupPoint = 3.0;
inline constexpr double kMatrixSpeedupWorst = 1.5;

// memory_bound's lowest line (bytes-bound kernels' share of kernel time): its
// fusion replay runs only where the verdict can fire.
inline constexpr double kMemoryBoundModeratePercent = 50.0;

// A fixed run is another run: its range is widened by this run's own step-time
// variation (coefficient of variation), at most this much.
inline constexpr double kMaxRunToRunNoise = 0.2;


/// `replay`: the trace's device work prepared for replaying (TraceReplay::Prepare,
/// done beside the other measurements; null: nothing to replay). `a`: the
/// measurements so far (steps, device, attention backend).
StatusOr<WhatIfs> PredictFixes(const TracePrep& prep, const TraceReplay* replay, const RecordingAnalysis& a);

}  // namespace gputriage::analysis
