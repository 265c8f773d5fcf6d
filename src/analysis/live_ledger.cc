#include "src/analysis/live_ledger.h"

#include <algorithm>

#include "gputriage/markers.h"
#include "gputriage/metrics.h"
#include "src/analysis/analysis_internal.h"
#include "src/analysis/ledger.h"

namespace gputriage::analysis {

using namespace ledger_internal;

namespace {
/// A job with fewer steps than it takes to know warm-up is accounted anyway
/// once its first step is this old (very long steps).
constexpr TimeNs kWarmupWaitNs = 600 * kNsPerS;
}  // namespace

bool MarkedLedger::Shows(int bucket) {
  switch (bucket) {
    case kHostStall:  // needs a trace
    case kHang:
    case kCrash:
    case kLostWork:   // how the job ended: the recorder's
    case kUnsplit:
      return false;
    default:
      return bucket >= 0 && bucket < kNumBuckets;
  }
}

void MarkedLedger::Add(std::vector<MarkedStep> steps, std::vector<RunPhase> phases) {
  for (auto& s : steps) {
    if (s.span.end < s.span.start) continue;
    durations_.push_back(s.span.duration());
    if (durations_.size() > kMedianSteps) durations_.pop_front();
    ++steps_seen_;
    // Steady once the last few steps are alike (the slowest within
    // kWarmupStepFactor x the fastest): warm-up steps are the leading ones
    // slower than that factor x their median.
    if (!steady_ && durations_.size() >= kStepsBeforeAccounting) {
      std::vector<TimeNs> last(durations_.end() - kStepsBeforeAccounting, durations_.end());
      std::sort(last.begin(), last.end());
      const TimeNs median = last[last.size() / 2];
      if (last.back() <= static_cast<TimeNs>(kWarmupStepFactor * static_cast<double>(last.front()))) {
        steady_ = true;
        steady_median_ = median;
      }
    }
    // Steps come in start order from the builder; a straggler is put in its place.
    auto at = std::upper_bound(steps_.begin(), steps_.end(), s.span.start,
                               [](TimeNs t, const MarkedStep& x) { return t < x.span.start; });
    steps_.insert(at, std::move(s));
  }
  for (auto& p : phases)
    if (PhaseBucket(p.phase) >= 0 && p.span.end > p.span.start) phases_.push_back(p);
}

TimeNs MarkedLedger::MedianStep() const {
  std::vector<TimeNs> v(durations_.begin(), durations_.end());
  return static_cast<TimeNs>(Median(v));
}

void MarkedLedger::Advance(TimeNs settled) {
  // Warm-up steps are told from the steady steps' median: the leading steps
  // wait until the job is steady (a job never steady: until its first step is old).
  if (!steady_ && !steps_.empty()) {
    if (settled - steps_.front().span.start < kWarmupWaitNs) settled = std::min(settled, steps_.front().span.start);
    else steady_ = true, steady_median_ = MedianStep();
  }
  Account(settled, false);
}

void MarkedLedger::End(TimeNs end) {
  if (steps_seen_ < kStepsBeforeAccounting) warming_ = false;  // as the run's ledger: too few steps to tell
  if (!steady_) steady_ = true, steady_median_ = MedianStep();  // all the steps there were
  Account(std::max(end, until_), true);
  steps_.clear();
  phases_.clear();
}

void MarkedLedger::Account(TimeNs h, bool ending) {
  const TimeNs u = until_;
  if (h <= u) return;
  std::vector<const RunPhase*> live;
  for (const auto& p : phases_)
    if (p.span.end > u && p.span.start < h) live.push_back(&p);
  const std::vector<Segment> segments = PhaseSegments(live, {u, h});
  std::vector<Interval> covered;
  for (const Segment& s : segments) {
    Put(s.bucket, static_cast<double>(s.span.duration()));
    covered.push_back(s.span);
  }
  const TimeNs median = MedianStep();
  const bool stepped_before = any_step_;  // gaps before the first step ever are start-up
  TimeNs first_step_here = INT64_MAX;
  while (!steps_.empty() && steps_.front().span.start < h) {
    const MarkedStep& s = steps_.front();
    const Interval piece{std::max({s.span.start, u, steps_end_}), std::min(s.span.end, h)};
    if (piece.end > piece.start) {
      covered.push_back(piece);
      any_step_ = true;
      first_step_here = std::min(first_step_here, piece.start);
      // Decided on the whole step (it is final), so both pieces of one cut at a horizon agree.
      warming_ = warming_ && s.span.duration() > static_cast<TimeNs>(kWarmupStepFactor * static_cast<double>(steady_median_));
      const TimeNs visible = piece.duration() - Covered(segments, piece);
      if (visible > 0) {
        if (warming_) {
          Put(kCompileWarmup, static_cast<double>(visible));
        } else {
          // The agent's job runs on a GPU: the rest outside the phases is a stall only where the
          // step's device time says the GPU was idle for it.
          const InsidePhases inside = PhasesInside(s, s.span.duration(), visible, /*no_gpu=*/false);
          Put(kDataWait, inside.data);
          Put(kCommunication, inside.communication);
          Put(kCheckpointSave, inside.checkpoint);
          Put(kHostStall, inside.host_stall);
          Put(kProductive, static_cast<double>(visible) - inside.data - inside.communication - inside.checkpoint -
                               inside.host_stall);
        }
      }
    }
    if (s.span.end > h) break;  // the rest of it next time
    steps_end_ = std::max(steps_end_, s.span.end);
    steps_.pop_front();
  }
  phases_.erase(std::remove_if(phases_.begin(), phases_.end(), [&](const RunPhase& p) { return p.span.end <= h; }),
                phases_.end());

  // The gaps: what neither a step nor a phase covers. The one at u continues
  // the gap open when the last accounting stopped (it began at gap_start_).
  std::sort(covered.begin(), covered.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  const TimeNs idle_after = std::max(kIdleGapMinNs, static_cast<TimeNs>(kIdleGapSteps * static_cast<double>(median)));
  auto start_of = [&](TimeNs a) { return a == u ? gap_start_ : a; };
  auto idle_of = [&](TimeNs a, TimeNs b) { return (a == u && gap_idle_) || b - start_of(a) >= idle_after; };
  TimeNs at = u;
  for (const Interval& c : covered) {
    if (c.start > at) {
      const bool startup = !stepped_before && c.start <= first_step_here;
      Put(startup ? kStartup : idle_of(at, c.start) ? kIdle : kBetweenSteps, static_cast<double>(c.start - at));
    }
    at = std::max(at, c.end);
  }
  TimeNs next_until = h;
  if (at < h) {  // a gap still open at the horizon
    const bool idle = idle_of(at, h);
    if (!stepped_before && first_step_here == INT64_MAX) {
      Put(kStartup, static_cast<double>(h - at));
    } else if (ending) {
      Put(idle ? kIdle : kTeardown, static_cast<double>(h - at));  // tear-down, unless it was idle already
    } else if (idle) {
      Put(kIdle, static_cast<double>(h - at));  // long enough to be idle, whatever comes next
    } else {
      next_until = at;  // too short yet to say: between steps, or idle
    }
    gap_idle_ = idle && !(!stepped_before && first_step_here == INT64_MAX);
    gap_start_ = start_of(at);
  } else {
    gap_start_ = h;
    gap_idle_ = false;
  }
  until_ = next_until;
}

void UtilizationLedger::Add(TimeNs covers_ns, double percent) {
  if (covers_ns <= 0) return;
  const auto put = [&](int bucket, TimeNs ns) { seconds_[static_cast<size_t>(bucket)] += static_cast<double>(ns) / 1e9; };
  if (percent <= SeriesSketch::kIdleStretchLevel) {
    if (low_idle_) return put(kIdle, covers_ns);
    low_ns_ += covers_ns;
    if (low_ns_ >= SeriesSketch::kIdleStretchMinNs) {  // an idle phase: all of it, from its start
      put(kIdle, low_ns_);
      low_ns_ = 0;
      low_idle_ = true;
    }
    return;
  }
  put(kUnsplit, low_ns_ + covers_ns);  // a dip too short to be an idle phase is the work's own
  low_ns_ = 0;
  low_idle_ = false;
}

void UtilizationLedger::End() {
  seconds_[kUnsplit] += static_cast<double>(low_ns_) / 1e9;
  low_ns_ = 0;
  low_idle_ = false;
}

}  // namespace gputriage::analysis
