// C++ wrapper over the step-marker C ABI (markers.h): scopes that mark a step
// or a phase from construction to destruction.
//
//   for (auto& batch : loader) {
//     gputriage::StepScope step(i, /*samples=*/batch.size());
//     { gputriage::PhaseScope p(GPUTRIAGE_PHASE_FORWARD); forward(); }
//     ...
//   }
#pragma once

#include <array>
#include <cstdint>

#include "gputriage/markers.h"

namespace gputriage {

/// One training step: begins now, ends when the scope closes.
class StepScope {
 public:
  explicit StepScope(int64_t step, int64_t samples = 0, int64_t tokens = 0, double flops = 0)
      : step_(step), samples_(samples), tokens_(tokens), flops_(flops) {
    gputriage_step_begin(step_);
  }
  ~StepScope() { gputriage_step_end(step_, samples_, tokens_, flops_); }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
  /// Per-step figures known only after the step ran (a variable-length batch).
  void set_samples(int64_t samples) { samples_ = samples; }
  void set_tokens(int64_t tokens) { tokens_ = tokens; }
  void set_flops(double flops) { flops_ = flops; }

 private:
  int64_t step_;
  int64_t samples_;
  int64_t tokens_;
  double flops_;
};

/// One phase of a step on this thread: data, forward, backward, optimizer, ...
class PhaseScope {
 public:
  explicit PhaseScope(gputriage_phase phase) : phase_(phase) { gputriage_phase_begin(phase_); }
  ~PhaseScope() { gputriage_phase_end(phase_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  gputriage_phase phase_;
};

/// The step phases' names, as reports and the Python package use them ("" for 0),
/// in the order of their slots in MarkedStep::phase_ns: ids 1-7, then the copy
/// phase (id 11, added after the job's own phases had taken 8-10).
inline constexpr const char* kPhaseNames[] = {"",           "data",          "forward",    "backward", "optimizer",
                                              "communication", "checkpoint", "other", "copy"};

/// The slot of a step phase in MarkedStep::phase_ns, -1 for the job's own
/// phases (eval, compile, restore) and ids that name none.
inline constexpr int StepPhaseSlot(int id) {
  if (id >= GPUTRIAGE_PHASE_DATA && id <= GPUTRIAGE_PHASE_OTHER) return id;
  if (id == GPUTRIAGE_PHASE_COPY) return GPUTRIAGE_PHASE_OTHER + 1;
  return -1;
}

/// The copy phase's slot in MarkedStep::phase_ns.
inline constexpr int kCopySlot = StepPhaseSlot(GPUTRIAGE_PHASE_COPY);

/// The step phases timed on the device where CUDA runs (python/gputriage/device.py),
/// by slot, in the order the store and the export keep them.
inline constexpr std::array<int, 4> kDeviceTimedSlots = {GPUTRIAGE_PHASE_FORWARD, GPUTRIAGE_PHASE_BACKWARD,
                                                         GPUTRIAGE_PHASE_OPTIMIZER, kCopySlot};

/// The highest phase id a marker may carry.
inline constexpr int kLastPhase = GPUTRIAGE_PHASE_COPY;

/// Every phase's name: the step phases, then the job's own (eval, compile,
/// restore); "" for ids that name none.
inline constexpr const char* PhaseName(int id) {
  constexpr const char* kJobPhases[] = {"eval", "compile", "restore"};
  if (const int slot = StepPhaseSlot(id); slot > 0) return kPhaseNames[slot];
  if (id >= GPUTRIAGE_PHASE_EVAL && id <= GPUTRIAGE_PHASE_RESTORE) return kJobPhases[id - GPUTRIAGE_PHASE_EVAL];
  return "";
}

/// Whether a recorder is reading the markers of this process.
inline bool MarkersEnabled() { return gputriage_markers_enabled() != 0; }

}  // namespace gputriage
