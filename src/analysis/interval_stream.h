// Interval algebra on streams: the same unions, overlaps and coverage as
// intervals.h, computed from events that arrive sorted by start, holding only what
// is open at the moment (the spans still running, the intervals a query window can
// reach), never the whole list. Results are integers of nanoseconds, so they do not
// depend on how the work is cut.
#pragma once

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <type_traits>
#include <vector>

#include "gputriage/model.h"
#include "src/model/event_streams.h"

namespace gputriage::analysis {

/// Merged intervals kept in order, in memory up to a budget, the rest in a scratch file.
using IntervalSpool = SortedSpill<Interval, InAddedOrder>;

/// The union of intervals added in order of start: emits each merged interval once
/// it can no longer grow (as intervals::Merge does: empty ones dropped, touching
/// ones joined).
class UnionBuilder {
 public:
  /// `r.start` must not be below the previous start.
  template <typename Emit>
  void Add(Interval r, Emit&& emit) {
    if (r.end <= r.start) return;
    if (open_ && r.start <= current_.end) {
      current_.end = std::max(current_.end, r.end);
      return;
    }
    if (open_) emit(current_);
    current_ = r;
    open_ = true;
  }
  template <typename Emit>
  void Finish(Emit&& emit) {
    if (open_) emit(current_);
    open_ = false;
  }

 private:
  Interval current_;
  bool open_ = false;
};

/// Coverage by C categories of intervals added in order of start: calls
/// segment(start, end, active) for each stretch of time in which the set of running
/// intervals does not change and at least one runs; `active[c]` counts category c's.
template <int C>
class CoverageSweep {
 public:
  using Active = std::array<int32_t, C>;

  template <typename Segment>
  void Add(Interval r, int category, Segment&& segment) {
    if (r.end <= r.start) return;
    AdvanceTo(r.start, segment);
    ++active_[static_cast<size_t>(category)];
    ++running_;
    ends_.push({r.end, category});
  }
  /// Ends every interval still running.
  template <typename Segment>
  void Finish(Segment&& segment) {
    AdvanceTo(std::numeric_limits<TimeNs>::max(), segment);
  }

 private:
  template <typename Segment>
  void AdvanceTo(TimeNs t, Segment& segment) {
    while (!ends_.empty() && ends_.top().first <= t) {
      const auto [end, category] = ends_.top();
      ends_.pop();
      if (end > now_) {
        segment(now_, end, active_);
        now_ = end;
      }
      --active_[static_cast<size_t>(category)];
      --running_;
    }
    if (running_ > 0 && t > now_) segment(now_, t, active_);
    now_ = std::max(now_, t);
    if (running_ == 0) now_ = t;
  }

  std::priority_queue<std::pair<TimeNs, int>, std::vector<std::pair<TimeNs, int>>, std::greater<>> ends_;
  Active active_{};
  int64_t running_ = 0;
  TimeNs now_ = std::numeric_limits<TimeNs>::min();
};

/// The records of a spool that reach a window, for windows whose starts never
/// decrease: reads the spool once, holding only what the current window reaches.
/// A record is an Interval, or carries one as `time` (records in start order).
template <typename T>
class SpoolWindow {
 public:
  using Spool = SortedSpill<T, InAddedOrder>;
  explicit SpoolWindow(const Spool& spool) : cursor_(spool.Open()) {}

  /// The held records, in order: all that overlap [w.start, w.end), maybe one after.
  const std::deque<T>& Reach(Interval w) {
    while (!held_.empty() && SpanOf(held_.front()).end <= w.start) held_.pop_front();
    while (!done_ && (held_.empty() || SpanOf(held_.back()).start < w.end)) {
      T r;
      if (!cursor_.Next(&r)) {
        done_ = true;
        break;
      }
      if (SpanOf(r).end > w.start) held_.push_back(r);
    }
    return held_;
  }
  Status status() const { return cursor_.status(); }

  static const Interval& SpanOf(const T& r) {
    if constexpr (std::is_same_v<T, Interval>) return r;
    else return r.time;
  }

 private:
  typename Spool::Cursor cursor_;
  std::deque<T> held_;
  bool done_ = false;
};

/// The merged intervals of a spool that reach a window (SpoolWindow of intervals).
using IntervalWindow = SpoolWindow<Interval>;

/// |merged ∩ [a, b)| for query windows whose starts never decrease.
class IntervalTrack {
 public:
  explicit IntervalTrack(const IntervalSpool& spool) : window_(spool) {}

  TimeNs OverlapWith(Interval w) {
    TimeNs total = 0;
    for (const auto& r : window_.Reach(w)) {
      if (r.start >= w.end) break;
      const TimeNs lo = std::max(r.start, w.start), hi = std::min(r.end, w.end);
      if (lo < hi) total += hi - lo;
    }
    return total;
  }
  Status status() const { return window_.status(); }

 private:
  IntervalWindow window_;
};

}  // namespace gputriage::analysis
