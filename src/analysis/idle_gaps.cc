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
//
// Where the source traced OS runtime calls (nsys --trace=osrt), the device's
// host_wait is also split by what the launching thread was doing: inside an OS
// call (waiting on a lock, a condition variable, a pipe, a file: by call name)
// or not (running: Python, the framework, the launch path). The cause stays
// host_wait; the split says which fix applies.
#include <algorithm>
#include <map>
#include <optional>

#include "src/analysis/analysis_internal.h"

namespace gputriage::analysis {
namespace {

constexpr TimeNs kQueuedGapLaunchLimit = 30 * kNsPerUs;

/// The launching thread's OS calls (TracePrep::os_calls) met by query windows
/// whose starts never decrease: their overlap with each window, by call name.
class OsCallTrack {
 public:
  explicit OsCallTrack(const NamedIntervalSpool& spool) : window_(spool) {}

  void Charge(Interval w, std::map<NameId, TimeNs>& by_name) {
    for (const auto& r : window_.Reach(w)) {
      if (r.time.start >= w.end) break;
      const TimeNs lo = std::max(r.time.start, w.start), hi = std::min(r.time.end, w.end);
      if (lo < hi) by_name[r.name] += hi - lo;
    }
  }
  Status status() const { return window_.status(); }

 private:
  SpoolWindow<NamedInterval> window_;
};

/// The launching thread's running samples (TracePrep::running_samples) counted in
/// query windows whose starts never decrease, by module.
class SampleTrack {
 public:
  explicit SampleTrack(const NamedIntervalSpool& spool) : cursor_(spool.Open()) { Advance(); }

  void Count(Interval w, std::map<NameId, int64_t>& by_module) {
    while (has_ && next_.time.start < w.start) Advance();
    while (has_ && next_.time.start < w.end) {
      ++by_module[next_.name];
      Advance();
    }
  }
  Status status() const { return cursor_.status(); }

 private:
  void Advance() { has_ = cursor_.Next(&next_); }
  NamedIntervalSpool::Cursor cursor_;
  NamedInterval next_;
  bool has_ = false;
};

/// The merged host intervals a gap is charged against, read forward as the gaps
/// of one timeline (the device's, or one stream's) come in order; for the
/// device's, the launching thread's OS calls and running samples too.
struct HostTracks {
  HostTracks(const TracePrep& prep, bool with_launching_thread)
      : data_loader(*prep.data_loader), host_sync(*prep.host_sync), device_sync(*prep.device_sync) {
    if (with_launching_thread && prep.os_calls) os_calls.emplace(*prep.os_calls);
    if (with_launching_thread && prep.running_samples) running_samples.emplace(*prep.running_samples);
  }
  IntervalTrack data_loader, host_sync, device_sync;
  std::optional<OsCallTrack> os_calls;
  std::optional<SampleTrack> running_samples;
  std::map<NameId, TimeNs> host_wait_os_calls;
  std::map<NameId, int64_t> host_wait_running_samples;
  Status status() const {
    for (const Status& s : {data_loader.status(), host_sync.status(), device_sync.status(),
                            os_calls ? os_calls->status() : Status::Ok(),
                            running_samples ? running_samples->status() : Status::Ok()})
      if (!s.ok()) return s;
    return Status::Ok();
  }
};

void ChargeHostPart(HostTracks& tracks, Interval part, IdleCause rest, IdleBreakdown& out) {
  if (part.end <= part.start) return;
  const TimeNs loader_ns = tracks.data_loader.OverlapWith(part);
  const TimeNs sync_ns = tracks.host_sync.OverlapWith(part);
  out.ns[static_cast<int>(IdleCause::kDataLoader)] += loader_ns;
  out.ns[static_cast<int>(IdleCause::kSynchronization)] += sync_ns;
  out.ns[static_cast<int>(rest)] += part.duration() - loader_ns - sync_ns;
  // The OS calls are already outside the loader and sync spans: within `part` they
  // lie in its host_wait rest.
  if (rest == IdleCause::kHostWait && tracks.os_calls) tracks.os_calls->Charge(part, tracks.host_wait_os_calls);
  // So are the running samples: those within `part` are the host_wait's.
  if (rest == IdleCause::kHostWait && tracks.running_samples)
    tracks.running_samples->Count(part, tracks.host_wait_running_samples);
}

/// Charges the gap [a, b) ended by `next` (nullptr when the window ends it).
void ChargeGap(HostTracks& tracks, TimeNs a, TimeNs b, const DeviceOp* next, IdleBreakdown& out) {
  if (b <= a) return;
  ++out.gaps;
  const bool launched_known = next != nullptr && next->launch.has_launch;
  if (!launched_known) {
    ChargeHostPart(tracks, {a, b}, next == nullptr ? IdleCause::kHostWait : IdleCause::kOther, out);
    return;
  }
  const TimeNs launched = next->launch.launch_start;
  if (launched <= a) {
    const TimeNs gap = b - a;
    if (gap < kQueuedGapLaunchLimit && next->launch.kind != RuntimeCallKind::kGraphLaunch) {
      out.ns[static_cast<int>(IdleCause::kLaunchOverhead)] += gap;
      return;
    }
    const TimeNs waits = tracks.device_sync.OverlapWith({a, b});
    out.ns[static_cast<int>(IdleCause::kSynchronization)] += waits;
    out.ns[static_cast<int>(IdleCause::kOther)] += gap - waits;
    return;
  }
  const TimeNs split = std::min(launched, b);
  ChargeHostPart(tracks, {a, split}, IdleCause::kHostWait, out);
  out.ns[static_cast<int>(IdleCause::kLaunchOverhead)] += b - split;
}

/// The parts of [a, b) inside the steps, in order; `at` is a cursor into `steps`
/// that only moves forward (the regions of one timeline come in order).
template <typename Part>
void InsideSteps(const intervals::List& steps, size_t& at, Interval region, Part&& part) {
  while (at < steps.size() && steps[at].end <= region.start) ++at;
  for (size_t i = at; i < steps.size() && steps[i].start < region.end; ++i) {
    const TimeNs lo = std::max(region.start, steps[i].start), hi = std::min(region.end, steps[i].end);
    if (lo < hi) part(Interval{lo, hi});
  }
}

/// One timeline's gaps: the device's (every gap inside the steps) or a stream's
/// (only gaps between two of its operations: a stream that has finished its work
/// for the step is not "waiting").
class GapWalker {
 public:
  GapWalker(const TracePrep& prep, const intervals::List& steps, bool between_ops_only)
      : tracks_(prep, /*with_launching_thread=*/!between_ops_only), steps_(steps), between_ops_only_(between_ops_only) {}

  void Add(const DeviceOp& op) {
    // The operation a gap ending at this start would be ended by: the first one
    // starting then, empty ones included (they end no gap: the busy time is the
    // union of operations that take time, as intervals::Merge makes it).
    if (!first_at_start_ || first_at_start_->time.start != op.time.start) first_at_start_ = op;
    if (op.time.end <= op.time.start) return;
    if (op.time.start > covered_until_ && (seen_ || !between_ops_only_)) {
      const Interval region{seen_ ? covered_until_ : std::numeric_limits<TimeNs>::min(), op.time.start};
      InsideSteps(steps_, gap_step_, region, [&](Interval part) {
        ChargeGap(tracks_, part.start, part.end, part.end == op.time.start ? &*first_at_start_ : nullptr, idle_);
      });
    }
    seen_ = true;
    covered_until_ = std::max(covered_until_, op.time.end);
    busy_.Add(op.time, [&](Interval r) { CountBusy(r); });
  }

  void Finish() {
    if (!between_ops_only_) {
      const Interval region{seen_ ? covered_until_ : std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max()};
      InsideSteps(steps_, gap_step_, region, [&](Interval part) { ChargeGap(tracks_, part.start, part.end, nullptr, idle_); });
    }
    busy_.Finish([&](Interval r) { CountBusy(r); });
  }

  const IdleBreakdown& idle() const { return idle_; }
  const std::map<NameId, TimeNs>& host_wait_os_calls() const { return tracks_.host_wait_os_calls; }
  const std::map<NameId, int64_t>& host_wait_running_samples() const { return tracks_.host_wait_running_samples; }
  TimeNs busy_in_steps() const { return busy_ns_; }
  Status status() const { return tracks_.status(); }

 private:
  void CountBusy(Interval r) {
    InsideSteps(steps_, busy_step_, r, [&](Interval part) { busy_ns_ += part.duration(); });
  }

  HostTracks tracks_;
  const intervals::List& steps_;
  const bool between_ops_only_;
  bool seen_ = false;
  std::optional<DeviceOp> first_at_start_;
  TimeNs covered_until_ = std::numeric_limits<TimeNs>::min();
  size_t gap_step_ = 0, busy_step_ = 0;
  IdleBreakdown idle_;
  UnionBuilder busy_;
  TimeNs busy_ns_ = 0;
};

}  // namespace

StatusOr<IdleAttribution> AttributeIdle(const TracePrep& prep, int device, const intervals::List& steps) {
  GapWalker device_gaps(prep, steps, /*between_ops_only=*/false);
  std::map<int, GapWalker> streams;
  DeviceOpCursor ops(prep);
  for (const DeviceOp* op = ops.Next(); op != nullptr; op = ops.Next()) {
    if (op->device != device) continue;
    device_gaps.Add(*op);
    streams.try_emplace(op->stream, prep, steps, /*between_ops_only=*/true).first->second.Add(*op);
  }
  RETURN_IF_ERROR(ops.status());
  device_gaps.Finish();
  RETURN_IF_ERROR(device_gaps.status());
  IdleAttribution out;
  out.device = device_gaps.idle();
  out.host_wait_os_calls = device_gaps.host_wait_os_calls();
  out.host_wait_running_samples = device_gaps.host_wait_running_samples();
  for (auto& [stream, walker] : streams) {
    walker.Finish();
    RETURN_IF_ERROR(walker.status());
    StreamIdle s;
    s.device = device;
    s.stream = stream;
    s.busy_ns = walker.busy_in_steps();
    s.idle = walker.idle();
    out.streams.push_back(s);
  }
  std::sort(out.streams.begin(), out.streams.end(), [](const StreamIdle& a, const StreamIdle& b) { return a.busy_ns > b.busy_ns; });
  return out;
}

}  // namespace gputriage::analysis
