// A trace's events as time-ordered streams under a memory budget: what a reader
// adds in file order comes back sorted by start (then longest first, then file
// order), the part beyond the budget spilled to a scratch file (SortedSpill). The
// order is total, so a trace gives the same events in the same order whatever the
// budget, the threads or the file's size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>

#include "gputriage/model.h"
#include "src/util/sorted_spill.h"

namespace gputriage {

/// Start first, then the longer span first (an enclosing span before what it
/// encloses); SortedSpill keeps file order among the rest.
struct ByStartThenLongest {
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a.time.start < b.time.start || (a.time.start == b.time.start && a.time.end > b.time.end);
  }
};

/// Keeps the order records were added in (matrix operator shapes: file order).
struct InAddedOrder {
  template <typename T>
  bool operator()(const T&, const T&) const {
    return false;
  }
};

struct EventStreams {
  /// `budget_bytes` is shared by the streams in proportion to what a trace
  /// usually holds of each.
  EventStreams(size_t budget_bytes, const std::string& scratch_directory)
      : directory(scratch_directory),
        spool_budget_bytes(std::max<size_t>(budget_bytes / 16, size_t{4} << 10)),
        kernels(Share(budget_bytes, 4, scratch_directory)),
        memory_ops(Share(budget_bytes, 16, scratch_directory)),
        runtime_calls(Share(budget_bytes, 4, scratch_directory)),
        cpu_spans(Share(budget_bytes, 3, scratch_directory)),
        syncs(Share(budget_bytes, 32, scratch_directory)),
        os_calls(Share(budget_bytes, 32, scratch_directory)),
        cpu_samples(Share(budget_bytes, 32, scratch_directory)),
        matrix_shapes(Share(budget_bytes, 16, scratch_directory)) {}

  std::string directory;  // scratch files ("" = $TMPDIR, else /tmp)
  /// Each intermediate result of the analyses (a join, merged intervals) is held in
  /// memory up to this, the rest in a scratch file.
  size_t spool_budget_bytes;

  SortedSpill<KernelActivity, ByStartThenLongest> kernels;
  SortedSpill<MemoryActivity, ByStartThenLongest> memory_ops;
  SortedSpill<RuntimeCall, ByStartThenLongest> runtime_calls;
  SortedSpill<CpuSpan, ByStartThenLongest> cpu_spans;
  SortedSpill<SyncActivity, ByStartThenLongest> syncs;
  SortedSpill<OsCall, ByStartThenLongest> os_calls;
  SortedSpill<CpuSample, ByStartThenLongest> cpu_samples;
  SortedSpill<MatrixOpShapes, InAddedOrder> matrix_shapes;

  int64_t spilled_bytes() const {
    return kernels.spilled_bytes() + memory_ops.spilled_bytes() + runtime_calls.spilled_bytes() +
           cpu_spans.spilled_bytes() + syncs.spilled_bytes() + os_calls.spilled_bytes() + cpu_samples.spilled_bytes() +
           matrix_shapes.spilled_bytes();
  }

 private:
  static SpillOptions Share(size_t budget, size_t divisor, const std::string& directory) {
    SpillOptions o;
    o.budget_bytes = budget / divisor;
    o.directory = directory;
    return o;
  }
};

/// Every stream sorted (start, then the longer first, then the order added); the
/// host spans (about half of a trace's events) on a second thread when `parallel`.
Status FinishEventStreams(EventStreams& streams, bool parallel);

/// Where a reader's finished streams go: past the memory budget they stay
/// streams, which the analyses read as they would the vectors
/// (src/analysis/trace_events.h), with `shift` added as they are read; else the
/// events move into the recording's vectors, uncopied, `shift` added.
void PlaceEvents(Recording& rec, std::shared_ptr<EventStreams> streams, TimeNs shift);

}  // namespace gputriage
