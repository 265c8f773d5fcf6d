#include "src/model/event_streams.h"

#include <thread>

namespace gputriage {
namespace {

/// A stream held whole in memory, sorted, into `out` with the time base added.
template <typename T, typename Less>
void TakeShifted(SortedSpill<T, Less>& stream, std::vector<T>& out, TimeNs shift) {
  out = stream.TakeIfInMemory();
  if (shift != 0)
    for (auto& item : out) item.time.start += shift, item.time.end += shift;
}

}  // namespace

Status FinishEventStreams(EventStreams& streams, bool parallel) {
  Status host_status;
  std::thread host;
  if (parallel) host = std::thread([&] { host_status = streams.cpu_spans.Finish(); });
  else host_status = streams.cpu_spans.Finish();
  Status s = streams.kernels.Finish();
  if (s.ok()) s = streams.memory_ops.Finish();
  if (s.ok()) s = streams.runtime_calls.Finish();
  if (s.ok()) s = streams.syncs.Finish();
  if (s.ok()) s = streams.os_calls.Finish();
  if (s.ok()) s = streams.cpu_samples.Finish();
  if (s.ok()) s = streams.matrix_shapes.Finish();
  if (host.joinable()) host.join();
  if (!s.ok()) return s;
  return host_status;
}

void PlaceEvents(Recording& rec, std::shared_ptr<EventStreams> streams, TimeNs shift) {
  if (streams->spilled_bytes() > 0) {
    rec.streams = std::move(streams);
    rec.streams_shift = shift;
    return;
  }
  TakeShifted(streams->cpu_spans, rec.cpu_spans, shift);
  TakeShifted(streams->kernels, rec.kernels, shift);
  TakeShifted(streams->memory_ops, rec.memory_ops, shift);
  TakeShifted(streams->runtime_calls, rec.runtime_calls, shift);
  TakeShifted(streams->syncs, rec.syncs, shift);
  TakeShifted(streams->os_calls, rec.os_calls, shift);
  TakeShifted(streams->cpu_samples, rec.cpu_samples, shift);
  rec.matrix_shapes = streams->matrix_shapes.TakeIfInMemory();
}

}  // namespace gputriage
