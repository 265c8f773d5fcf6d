// Idle-gap attribution: every nanosecond a device (or stream) sits idle inside the
// steps is charged to one cause, judged from what the host was doing and when the
// work that ended the gap was launched.
//
// For a gap [a, b) ended by operation N, whose launch call started at L:
//
//   device:  ...[prev]                 [N]...
//                     a                b
//   host:             |--data-loader--|L-launch
//                     |<-- host part ->|<-post->|
//
//   * Host part [a, min(L, b)): the device had nothing queued.
//       - overlapping a DataLoader `__next__` span    -> data_loader
//       - overlapping a blocking sync call            -> synchronization
//       - otherwise (Python, CPU ops, the launch path) -> host_wait
//   * Post part [max(a, L), b): N was launched but not yet running -> launch_overhead.
//   * N launched before the gap began (L <= a): the device had work queued.
//       - gap under kQueuedGapLaunchLimit (30 µs, HTA's kernel-to-kernel delay)
//         -> launch_overhead (back-to-back scheduling cost)
//       - overlapping a device-side wait (cuda_sync: stream/event waits) -> synchronization
//       - otherwise (cross-stream dependencies, unrecorded work)        -> other
//   * N's launch unknown (no runtime call recorded): the host part rules apply to
//     the whole gap, with "other" in place of host_wait.
//   * N replayed from a CUDA graph launched before the gap (one cudaGraphLaunch
//     stands for all its kernels): the gap is the graph's own scheduling, not a
//     launch the host made -> other.
#include <algorithm>
#include <map>

#include "src/analysis/analysis_internal.h"

namespace gputriage::analysis {
namespace {

constexpr TimeNs kQueuedGapLaunchLimit = 30 * kNsPerUs;

void ChargeHostPart(const Index& index, Interval part, IdleCause rest, IdleBreakdown& out) {
  if (part.end <= part.start) return;
  // Binary searches: this runs once per gap, and a trace has as many gaps as kernels.
  const TimeNs loader_ns = intervals::OverlapWith(index.data_loader, part);
  const TimeNs sync_ns = intervals::OverlapWith(index.host_sync, part);
  out.ns[static_cast<int>(IdleCause::kDataLoader)] += loader_ns;
  out.ns[static_cast<int>(IdleCause::kSynchronization)] += sync_ns;
  out.ns[static_cast<int>(rest)] += part.duration() - loader_ns - sync_ns;
}

/// Charges the gap [a, b) ended by `next` (nullptr when the window ends it).
void ChargeGap(const Index& index, TimeNs a, TimeNs b, const DeviceOp* next, IdleBreakdown& out) {
  if (b <= a) return;
  ++out.gaps;
  const RuntimeCall* launch = nullptr;
  if (next != nullptr) launch = index.Launch(next->correlation);
  if (launch == nullptr) {
    ChargeHostPart(index, {a, b}, next == nullptr ? IdleCause::kHostWait : IdleCause::kOther, out);
    return;
  }
  const TimeNs launched = launch->time.start;
  if (launched <= a) {
    const TimeNs gap = b - a;
    if (gap < kQueuedGapLaunchLimit && launch->kind != RuntimeCallKind::kGraphLaunch) {
      out.ns[static_cast<int>(IdleCause::kLaunchOverhead)] += gap;
      return;
    }
    const TimeNs waits = intervals::OverlapWith(index.device_sync, {a, b});
    out.ns[static_cast<int>(IdleCause::kSynchronization)] += waits;
    out.ns[static_cast<int>(IdleCause::kOther)] += gap - waits;
    return;
  }
  const TimeNs split = std::min(launched, b);
  ChargeHostPart(index, {a, split}, IdleCause::kHostWait, out);
  out.ns[static_cast<int>(IdleCause::kLaunchOverhead)] += b - split;
}

/// The operation that starts exactly at (or first after) time t among `ops`.
const DeviceOp* FirstStartingAt(const std::vector<const DeviceOp*>& ops, TimeNs t) {
  auto it = std::lower_bound(ops.begin(), ops.end(), t,
                             [](const DeviceOp* op, TimeNs v) { return op->time.start < v; });
  return it == ops.end() ? nullptr : *it;
}

}  // namespace

IdleBreakdown AttributeDeviceIdle(const Index& index, int device, const intervals::List& steps) {
  IdleBreakdown out;
  std::vector<const DeviceOp*> ops;
  intervals::List busy;
  for (const auto& op : index.device_ops) {
    if (op.device != device) continue;
    ops.push_back(&op);
    busy.push_back(op.time);
  }
  busy = intervals::Merge(std::move(busy));
  for (const auto& idle : intervals::Subtract(steps, busy)) {
    const DeviceOp* next = FirstStartingAt(ops, idle.end);
    if (next != nullptr && next->time.start != idle.end) next = nullptr;  // the window, not work, ended it
    ChargeGap(index, idle.start, idle.end, next, out);
  }
  return out;
}

std::vector<StreamIdle> AttributeStreamIdle(const Index& index, int device, const intervals::List& steps) {
  std::map<int, std::vector<const DeviceOp*>> ops_by_stream;  // each keeps device_ops' start order
  for (const auto& op : index.device_ops)
    if (op.device == device) ops_by_stream[op.stream].push_back(&op);
  std::vector<StreamIdle> out;
  for (const auto& [stream, ops] : ops_by_stream) {
    StreamIdle s;
    s.device = device;
    s.stream = stream;
    intervals::List busy;
    for (const DeviceOp* op : ops) busy.push_back(op->time);
    busy = intervals::Merge(std::move(busy));
    s.busy_ns = intervals::Sum(intervals::Intersect(busy, steps));
    // Only gaps between two operations of this stream count: a stream that has
    // finished its work for the step is not "waiting".
    for (size_t i = 1; i < busy.size(); ++i) {
      for (const auto& part : intervals::Intersect({{busy[i - 1].end, busy[i].start}}, steps)) {
        const DeviceOp* next = part.end == busy[i].start ? FirstStartingAt(ops, busy[i].start) : nullptr;
        ChargeGap(index, part.start, part.end, next, s.idle);
      }
    }
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const StreamIdle& a, const StreamIdle& b) { return a.busy_ns > b.busy_ns; });
  return out;
}

}  // namespace gputriage::analysis
