// Training steps rebuilt from step markers: each step-begin paired with the
// step-end of the same process and number, and each phase (data, forward, ...)
// paired on its thread and charged to a step of its process: the step it
// starts in, else the next step (a batch fetched between steps, as
// `for batch in loader` does, is that step's data wait, and the step's span
// then starts with it: a span is one loop iteration, wait and compute).
//
// StepBuilder does this as markers stream in, holding only open steps, steps
// that ended in the last few seconds (a late phase or device time may still
// belong to them) and phases waiting for their step: a recorder's memory stays
// bounded however long the job trains, and finished steps can be stored as it runs.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include "gputriage/model.h"
#include "src/markers/marker_ring.h"

namespace gputriage {

inline constexpr int kNumMarkerPhases = 9;  // step phase slots 1..8 (StepPhaseSlot); 0 unused
static_assert(std::tuple_size_v<decltype(MarkedStep::phase_ns)> == kNumMarkerPhases);

struct MarkedSteps {
  std::vector<MarkedStep> steps;  // by start time
  int64_t unpaired_steps = 0;     // a begin without its end (the job ended mid-step) or the reverse
  int64_t unpaired_phases = 0;
  int64_t unassigned_phases = 0;  // phases with no step of their process to charge
  int64_t unmatched_device_times = 0;  // device times for no recorded step (or not positive)
  int64_t unmatched_memory = 0;        // memory samples for no open or recorded step
  /// The job's phases outside steps (a checkpoint between steps; evaluation,
  /// compilation and restores wherever they are), by start.
  std::vector<RunPhase> run_phases;
  int64_t run_phases_dropped = 0;  // beyond kMaxRunPhases
};

class StepBuilder {
 public:
  /// How long an ended step is held for late phases and device times (markers'
  /// own clock). CUDA-event device times come a few steps late.
  static constexpr TimeNs kDefaultHoldNs = 5 * kNsPerS;
  /// Run phases kept at most (a job marking every evaluation batch would grow
  /// them without end): 24 MiB.
  static constexpr size_t kMaxRunPhases = size_t{1} << 20;
  explicit StepBuilder(TimeNs hold_ns = kDefaultHoldNs) : hold_ns_(hold_ns) {}

  /// Markers as drained (claim order; sorted by time here).
  void Add(std::vector<Marker> markers);
  /// Steps final by now (ended over the hold before the newest marker seen), by start.
  std::vector<MarkedStep> TakeFinished();
  /// Everything left once the job is over; the counts cover the whole run.
  MarkedSteps Finish();
  /// The job's phases outside steps that ended since the last call (a reader
  /// that keeps them itself, as the agent's ledger; Finish() then has only the rest).
  std::vector<RunPhase> TakeRunPhases();
  /// The time before which every step and job phase has been handed out or is
  /// held (so no step or phase still to come begins before it), at most `now`:
  /// the earliest open or held step, open phase or phase waiting for its step.
  /// A phase open for over kStaleOpenPhaseNs (its end lost) no longer holds it.
  TimeNs SettledBefore(TimeNs now) const;
  static constexpr TimeNs kStaleOpenPhaseNs = 3600 * kNsPerS;
  /// The ended steps still held (not yet final), by start, left in place: with
  /// the finished ones, the run's steps so far (a snapshot the job asked for).
  std::vector<MarkedStep> PeekEnded() const;

 private:
  struct Slot {
    MarkedStep step;
    bool open = true;
  };
  struct Process {
    std::map<TimeNs, Slot> by_begin;               // open and held steps, by their begin marker's time
    std::map<int64_t, TimeNs> open_by_number;      // step number → begin marker time
    std::map<int64_t, TimeNs> held_by_number;      // ended, held: step number → begin marker time
    std::vector<std::pair<uint16_t, Interval>> waiting;  // (slot, span): phases before any step of this process began
    TimeNs released_before = INT64_MIN;            // steps starting before this were handed out
  };
  void Charge(Process& p, uint16_t slot, Interval span);  // slot: StepPhaseSlot
  void DropWaitingBefore(Process& p, TimeNs start);
  /// Whether `start` lies inside a step of the process (one still open, or ended after it).
  static bool InsideStep(const Process& p, TimeNs start);
  /// Keeps where a step meets its peers: its first forward or communication
  /// begin (arrival) and its last backward or communication end (release).
  static void NoteSync(MarkedStep& step, uint16_t slot, Interval span);
  /// A memory sample of the step's end (MarkerKind::kStepMemory / kStepMemoryEvents).
  static void NoteMemory(MarkedStep& step, const Marker& m);
  void Release(bool all, std::vector<MarkedStep>& out);

  std::map<uint32_t, Process> processes_;
  std::map<std::tuple<uint32_t, uint32_t, uint16_t>, std::vector<TimeNs>> open_phases_;  // (pid, tid, phase)
  TimeNs hold_ns_;
  TimeNs newest_ = INT64_MIN;
  MarkedSteps counts_;
};

/// The whole run at once (tests, and a recorder's final answer is the same).
MarkedSteps BuildMarkedSteps(const std::vector<Marker>& markers);

}  // namespace gputriage
