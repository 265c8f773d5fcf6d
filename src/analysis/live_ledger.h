// The goodput ledger of a job while it runs: seconds by bucket that only ever
// grow, so the agent can serve them as Prometheus counters and a fleet can
// take their increase over any range. The same buckets and rules as the
// finished run's ledger (ledger.h), drawn as time becomes final instead of
// once at the end:
//
//  - MarkedLedger: a job that writes step markers. Time is accounted up to a
//    settled horizon (before which no step or phase can still arrive: the
//    step builder's hold, open steps and open phases). A gap between steps is
//    accounted when it closes, idle or between-steps by its length; a gap
//    still open is idle as soon as it is long enough to be, whatever comes
//    next. The first steps wait until the job is steady (five steps alike): the
//    leading ones slower than 3x their median are warm-up.
//  - UtilizationLedger: a job without markers. Each sample's time is idle when
//    it lies in an idle phase (at least 10 s at or below 5 %, as a metric log's
//    idle phases), else unsplit: no step splits it further.
//
// What an agent cannot see stays out: how the job ended (crash, hang, lost
// work) and GPU idle inside steps (host stalls) need the recorder or a trace.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "gputriage/model.h"
#include "src/analysis/ledger_buckets.h"

namespace gputriage::analysis {

using LedgerSeconds = std::array<double, ledger_internal::kNumBuckets>;

class MarkedLedger {
 public:
  /// Steps alike in a row that make a job steady (warm-up is told against
  /// their median); the leading steps wait for them, unless the job ends first.
  static constexpr size_t kStepsBeforeAccounting = 5;
  /// Step durations kept for the running median.
  static constexpr size_t kMedianSteps = 255;

  /// `joined_mid_run`: the job was running before this ledger began (an agent
  /// started after it): the time before its first step seen is not start-up.
  explicit MarkedLedger(TimeNs job_start, bool joined_mid_run = false)
      : until_(job_start), gap_start_(job_start), any_step_(joined_mid_run) {}

  /// Steps and job phases as they become final (any order; a step or phase
  /// before the accounted time is counted for what of it is after).
  void Add(std::vector<MarkedStep> steps, std::vector<RunPhase> phases);
  /// Accounts the time before `settled`: nothing that begins before it is still to come.
  void Advance(TimeNs settled);
  /// The job has gone at `end`: the rest is accounted, the time after its last
  /// step as tear-down (what of it was not already idle).
  void End(TimeNs end);

  /// Seconds per bucket (ledger_buckets.h's order).
  const LedgerSeconds& seconds() const { return seconds_; }
  TimeNs accounted_until() const { return until_; }
  /// The buckets a marked job can show (unmarked phases are zero here, not unknown:
  /// a counter must exist from the job's start for its increase to count).
  static bool Shows(int bucket);

 private:
  void Account(TimeNs horizon, bool ending);
  TimeNs MedianStep() const;
  void Put(int bucket, double ns) { seconds_[static_cast<size_t>(bucket)] += ns / 1e9; }

  std::deque<MarkedStep> steps_;  // pending, by start
  std::vector<RunPhase> phases_;  // pending job phases
  std::deque<TimeNs> durations_;  // recent step durations, for the median
  size_t steps_seen_ = 0;
  TimeNs until_;             // accounted before this
  TimeNs steps_end_ = INT64_MIN;  // the end of the last step accounted (nested steps count once)
  TimeNs gap_start_;         // where the gap open at until_ began (a step's or phase's end)
  bool gap_idle_ = false;    // that gap was found long enough to be idle
  bool any_step_ = false;    // a step was accounted: gaps are no longer start-up
  bool warming_ = true;      // the leading steps over kWarmupStepFactor × the steady median are warm-up
  bool steady_ = false;      // the last kStepsBeforeAccounting steps were alike
  TimeNs steady_median_ = 0;
  LedgerSeconds seconds_{};
};

class UtilizationLedger {
 public:
  /// One busy sample: `covers_ns` of the GPU's time (since its previous sample) at `percent`.
  void Add(TimeNs covers_ns, double percent);
  /// The job has gone: a low stretch not yet long enough is not idle.
  void End();
  const LedgerSeconds& seconds() const { return seconds_; }
  static bool Shows(int bucket) { return bucket == ledger_internal::kIdle || bucket == ledger_internal::kUnsplit; }

 private:
  TimeNs low_ns_ = 0;     // the current stretch at or below the idle level, not yet accounted
  bool low_idle_ = false;  // it reached the idle phases' length: accounted as it grows
  LedgerSeconds seconds_{};
};

}  // namespace gputriage::analysis
