// How the analyses read a recording's events: one pass at a time, in order, each
// pass through its own cursor, whether the events are in the recording's vectors
// or were left in time-ordered streams past the memory budget (Recording::streams).
// The analyses keep aggregates and one step's state, never the events, so a trace
// of any size is diagnosed in bounded memory.
#pragma once

#include <optional>
#include <vector>

#include "gputriage/model.h"
#include "src/model/event_streams.h"

namespace gputriage::analysis {

template <typename T>
struct StreamOrderOf {
  using type = ByStartThenLongest;
};
template <>
struct StreamOrderOf<MatrixOpShapes> {
  using type = InAddedOrder;
};

/// One pass over one kind of event, in the recording's order (start, longer first,
/// file order; matrix shapes in file order).
template <typename T>
class EventCursor {
 public:
  using Spill = SortedSpill<T, typename StreamOrderOf<T>::type>;

  explicit EventCursor(const std::vector<T>& events) : at_(events.data()), end_(events.data() + events.size()) {}
  EventCursor(const Spill& spill, TimeNs shift) : spill_(spill.Open()), shift_(shift) {}

  /// The next event, nullptr at the end (or on a scratch-file read error: status()).
  const T* Next() {
    if (!spill_) return at_ < end_ ? at_++ : nullptr;
    if (!spill_->Next(&item_)) return nullptr;
    if constexpr (requires { item_.time; }) {
      item_.time.start += shift_;
      item_.time.end += shift_;
    }
    return &item_;
  }
  Status status() const { return spill_ ? spill_->status() : Status::Ok(); }

 private:
  const T* at_ = nullptr;
  const T* end_ = nullptr;
  std::optional<typename Spill::Cursor> spill_;
  TimeNs shift_ = 0;
  T item_{};
};

/// A recording's events, readable in passes.
class TraceEvents {
 public:
  explicit TraceEvents(const Recording& rec) : rec_(rec) {}

  EventCursor<KernelActivity> kernels() const { return Open(rec_.kernels, &EventStreams::kernels); }
  EventCursor<MemoryActivity> memory_ops() const { return Open(rec_.memory_ops, &EventStreams::memory_ops); }
  EventCursor<RuntimeCall> runtime_calls() const { return Open(rec_.runtime_calls, &EventStreams::runtime_calls); }
  EventCursor<CpuSpan> cpu_spans() const { return Open(rec_.cpu_spans, &EventStreams::cpu_spans); }
  EventCursor<SyncActivity> syncs() const { return Open(rec_.syncs, &EventStreams::syncs); }
  EventCursor<OsCall> os_calls() const { return Open(rec_.os_calls, &EventStreams::os_calls); }
  EventCursor<CpuSample> cpu_samples() const { return Open(rec_.cpu_samples, &EventStreams::cpu_samples); }
  EventCursor<MatrixOpShapes> matrix_shapes() const { return Open(rec_.matrix_shapes, &EventStreams::matrix_shapes); }

  int64_t kernel_count() const { return Count(rec_.kernels, &EventStreams::kernels); }
  int64_t memory_op_count() const { return Count(rec_.memory_ops, &EventStreams::memory_ops); }
  int64_t runtime_call_count() const { return Count(rec_.runtime_calls, &EventStreams::runtime_calls); }
  int64_t cpu_span_count() const { return Count(rec_.cpu_spans, &EventStreams::cpu_spans); }
  int64_t sync_count() const { return Count(rec_.syncs, &EventStreams::syncs); }
  int64_t matrix_shape_count() const { return Count(rec_.matrix_shapes, &EventStreams::matrix_shapes); }

  const Recording& recording() const { return rec_; }

  /// How the analyses' own intermediate results (joins, merged intervals) are held:
  /// in memory for a recording whose events are; under a small budget each, in the
  /// scratch directory, for one read past its budget.
  SpillOptions spool_options() const {
    SpillOptions o;
    if (rec_.streams) {
      o.budget_bytes = rec_.streams->spool_budget_bytes;
      o.directory = rec_.streams->directory;
    } else {
      o.budget_bytes = size_t{1} << 62;
    }
    return o;
  }

 private:
  template <typename T, typename Member>
  EventCursor<T> Open(const std::vector<T>& events, Member member) const {
    if (rec_.streams) return EventCursor<T>((*rec_.streams).*member, rec_.streams_shift);
    return EventCursor<T>(events);
  }
  template <typename T, typename Member>
  int64_t Count(const std::vector<T>& events, Member member) const {
    if (rec_.streams) return ((*rec_.streams).*member).size();
    return static_cast<int64_t>(events.size());
  }

  const Recording& rec_;
};

}  // namespace gputriage::analysis
