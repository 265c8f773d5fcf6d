// What-if replay (see replay.h). The rules, for a device operation N on stream S
// launched by a host call that starts at L:
//
//   recorded:  start(N) = max(L, end(previous op on S)) + d      d >= 0: the launch
//                                                                 latency or queueing
//                                                                 the trace shows
//   replayed:  start'(N) = max(host'(L), end'(previous op on S)) + d
//              end'(N)   = start'(N) + duration(N) x kernel_scale(N)
//
// host'(t) maps recorded host time to replayed host time. It advances at
// host_stretch per recorded nanosecond of host work, except over
//   * a removed DataLoader span: it takes no time;
//   * a blocking call [a, b) (cudaDeviceSynchronize, cudaStreamSynchronize, a copy
//     that returned only after its transfer): it ends when the device work it waited
//     for ends in the replay, plus its own cost after the wait:
//         end' = max(host'(a), end' of the ops that had finished by b) + (b - max(a, their recorded end))
// With no change the replay gives back the recorded steps (tested). Device work of
// other streams, cross-stream waits and the host threads' order are kept as recorded
// (the d of each op), so the replay answers "what if only this changed".
#include "src/analysis/replay.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <queue>
#include <unordered_map>

namespace gputriage::analysis {
namespace {

/// host'(t): a piecewise-linear map built in recorded-time order. Points before
/// `Forget(t)`'s t are dropped (the replay asks no more about earlier times), so it
/// holds what lies between the earliest question still to come and now.
class HostClock {
 public:
  HostClock(TimeNs origin, double stretch) : stretch_(stretch) { points_.push_back({origin, static_cast<double>(origin)}); }
  TimeNs last_recorded() const { return points_.back().first; }
  double Map(TimeNs t) const {
    const auto& last = points_.back();
    if (t >= last.first) return last.second + static_cast<double>(t - last.first) * stretch_;
    auto it = std::upper_bound(points_.begin(), points_.end(), t,
                               [](TimeNs v, const std::pair<TimeNs, double>& p) { return v < p.first; });
    if (it == points_.begin()) return it->second - static_cast<double>(it->first - t);
    const auto& hi = *it;
    const auto& lo = *(it - 1);
    if (hi.first == lo.first) return hi.second;
    return lo.second + (hi.second - lo.second) * static_cast<double>(t - lo.first) / static_cast<double>(hi.first - lo.first);
  }
  void Add(TimeNs recorded, double replayed) {
    if (recorded < points_.back().first) return;
    replayed = std::max(replayed, points_.back().second);
    points_.push_back({recorded, replayed});
  }
  /// No question about a time before t will come: keep the last point at or before t.
  void Forget(TimeNs t) {
    while (points_.size() >= 2 && points_[1].first <= t) points_.pop_front();
  }

 private:
  double stretch_;
  std::deque<std::pair<TimeNs, double>> points_;
};

// Replayed times are doubles of absolute nanoseconds (about 2^60: 256 ns apart);
// interpolating can put a later op a few of those before an earlier estimate.
constexpr TimeNs kClockRoundingNs = 4096;

int64_t StreamKey(int32_t device, int32_t stream) {
  return (static_cast<int64_t>(device) << 32) ^ static_cast<int64_t>(static_cast<uint32_t>(stream));
}

}  // namespace

uint8_t ReplayBitsOf(const KernelKind& kind, bool misaligned) {
  uint8_t bits = kReplayKernel;
  if (IsMatrixClass(kind.cls)) {
    if (kind.precision == Precision::kFp32Simt) bits |= kReplayMatrixFp32Simt;
    if (kind.precision == Precision::kTf32) bits |= kReplayMatrixTf32;
    if (misaligned) bits |= kReplayMisalignedMatrix;
  }
  if (kind.cls == KernelClass::kSoftmax || kind.batched) bits |= kReplayAttentionPart;
  if (IsMemoryBoundClass(kind.cls)) bits |= kReplayMemoryBound;
  return bits;
}

StatusOr<std::unique_ptr<TraceReplay>> TraceReplay::Prepare(const TracePrep& prep, const StepWindows& steps,
                                                            const SortedSpill<ShapeJoin::Misaligned, BySeq>& misaligned) {
  std::unique_ptr<TraceReplay> replay(new TraceReplay(prep.spill));
  TraceReplay& r = *replay;
  r.threads_ = prep.threads;
  if (steps.windows.empty()) return replay;
  const Recording& rec = prep.events.recording();
  if (steps.from_markers) {
    for (size_t i = 0; i < steps.windows.size() && i < rec.steps.size(); ++i) r.host_steps_.push_back(rec.steps[i].host);
  } else {
    r.host_steps_.push_back(steps.windows.front());
  }
  if (r.host_steps_.empty()) return replay;

  std::unordered_map<int64_t, int32_t> stream_numbers;
  std::vector<TimeNs> prev_end;  // per stream: the latest recorded end so far, in start order
  SeqZip<ShapeJoin::Misaligned> off_tile(misaligned);
  TimeNs first_launch = std::numeric_limits<TimeNs>::max();
  DeviceOpCursor ops(prep);
  for (const DeviceOp* d = ops.Next(); d != nullptr; d = ops.Next()) {
    Op op;
    op.time = d->time;
    op.stream = stream_numbers.try_emplace(StreamKey(d->device, d->stream), static_cast<int32_t>(stream_numbers.size())).first->second;
    if (static_cast<size_t>(op.stream) >= prev_end.size()) prev_end.push_back(std::numeric_limits<TimeNs>::min());
    op.launch = d->time.start;
    if (d->launch.has_launch) {
      op.launch = std::min(d->launch.launch_start, d->time.start);
      auto s = std::upper_bound(r.host_steps_.begin(), r.host_steps_.end(), op.launch,
                                [](TimeNs v, const Interval& h) { return v < h.end; });
      if (s != r.host_steps_.end() && s->start <= op.launch) op.step = static_cast<int32_t>(s - r.host_steps_.begin());
    }
    if (d->is_kernel) {
      const bool off = d->kernel->external_id >= 0 && off_tile.At(d->seq) != nullptr;
      op.bits = ReplayBitsOf(prep.kinds->at(d->kernel->name), off);
      ++r.kernels_by_bits_[op.bits];
    }
    auto& prev = prev_end[static_cast<size_t>(op.stream)];
    op.delay = std::max<TimeNs>(0, op.time.start - std::max(op.launch, prev));
    prev = std::max(prev, op.time.end);
    first_launch = std::min(first_launch, op.launch);
    RETURN_IF_ERROR(r.ops_.Add(op));
  }
  RETURN_IF_ERROR(ops.status());
  RETURN_IF_ERROR(off_tile.status());
  RETURN_IF_ERROR(r.ops_.Finish());
  r.streams_ = static_cast<int>(stream_numbers.size());
  if (r.ops_.size() == 0) return replay;

  // Host items in recorded start order: DataLoader spans, then (at equal starts)
  // blocking calls in call order.
  {
    auto loader = prep.data_loader->Open();
    Interval span;
    bool has_span = loader.Next(&span);
    auto calls = prep.events.runtime_calls();
    SeqZip<CopyEnd> copy_ends(*prep.launches.copy_ends);
    int64_t seq = 0;
    for (const RuntimeCall* c = calls.Next(); c != nullptr; c = calls.Next(), ++seq) {
      bool blocking = c->kind == RuntimeCallKind::kSynchronize;
      if (c->kind == RuntimeCallKind::kMemcpy && c->correlation >= 0) {
        const CopyEnd* end = copy_ends.At(seq);
        blocking = end != nullptr && end->end <= c->time.end;  // returned only after its transfer
      }
      if (!blocking || c->time.end <= c->time.start) continue;
      for (; has_span && span.start <= c->time.start; has_span = loader.Next(&span)) RETURN_IF_ERROR(r.items_.Add({span, true}));
      RETURN_IF_ERROR(r.items_.Add({c->time, false}));
    }
    for (; has_span; has_span = loader.Next(&span)) RETURN_IF_ERROR(r.items_.Add({span, true}));
    RETURN_IF_ERROR(calls.status());
    RETURN_IF_ERROR(copy_ends.status());
    RETURN_IF_ERROR(loader.status());
    RETURN_IF_ERROR(r.items_.Finish());
  }
  r.origin_ = std::min(r.host_steps_.front().start, first_launch);
  {
    auto items = r.items_.Open();
    HostItem first;
    if (items.Next(&first)) r.origin_ = std::min(r.origin_, first.time.start);
    RETURN_IF_ERROR(items.status());
  }
  return replay;
}

StatusOr<ReplayResult> TraceReplay::Run(const ReplayChange& change) const {
  ReplayResult out;
  if (ops_.size() == 0 || host_steps_.empty()) return out;
  HostClock clock(origin_, change.host_stretch);

  // The step boundaries the result is measured at, each read off the clock once a
  // point beyond it exists (the clock then interpolates there, as it will at the
  // end), or once no host item is left to change the clock; then the clock can
  // forget what lies before.
  const size_t n_steps = host_steps_.size();
  std::vector<double> step_start(n_steps), step_end(n_steps);
  std::vector<std::pair<TimeNs, double*>> questions;  // (recorded time, where its replayed time goes)
  for (size_t s = 0; s < n_steps; ++s) {
    questions.push_back({host_steps_[s].start, &step_start[s]});
    questions.push_back({host_steps_[s].end, &step_end[s]});
  }
  std::stable_sort(questions.begin(), questions.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t answered = 0;
  // The replayed steps end no earlier than any replayed boundary, nor than any op
  // of a step ends (the window's end is the latest of both): busy time wholly
  // before the latest of these read so far is counted at once. (Held until the
  // last step's end is read, a trace without steps, one window, would hold every
  // busy interval of the trace.)
  double boundary_reached = -std::numeric_limits<double>::infinity();
  double step_op_end_reached = -std::numeric_limits<double>::infinity();

  // Replayed device state, per stream: when its latest op (in launch order) ends in
  // the replay, and (recorded end, replayed end) of its ops in recorded-end order,
  // the latest of those a blocking call can still ask about.
  std::vector<double> stream_free(static_cast<size_t>(streams_), -std::numeric_limits<double>::infinity());
  std::vector<std::deque<std::pair<TimeNs, double>>> stream_done(static_cast<size_t>(streams_));
  std::vector<double> device_end(n_steps, -std::numeric_limits<double>::infinity());
  // Replayed op intervals (ns, rounded) wait in start order until no later op can
  // start before them, then join the union; union intervals wait until the steps'
  // end is known to lie beyond them.
  std::priority_queue<std::pair<TimeNs, TimeNs>, std::vector<std::pair<TimeNs, TimeNs>>, std::greater<>> pending;
  UnionBuilder busy_union;
  std::deque<Interval> busy_held;
  TimeNs busy_counted = 0;
  TimeNs first_start_ns = 0;  // the replayed first step's start, once read
  auto settle = [&](Interval u) { busy_held.push_back(u); };
  auto progress = [&](bool clock_final) {
    for (; answered < questions.size() && (clock_final || questions[answered].first < clock.last_recorded()); ++answered) {
      *questions[answered].second = clock.Map(questions[answered].first);
      boundary_reached = std::max(boundary_reached, *questions[answered].second);
      if (answered == 0) first_start_ns = static_cast<TimeNs>(step_start[0]);  // the earliest question
    }
    if (answered == 0) return;
    const auto bound = static_cast<TimeNs>(std::max(boundary_reached, step_op_end_reached));
    while (!busy_held.empty() && busy_held.front().end <= bound) {
      const Interval u = busy_held.front();
      busy_held.pop_front();
      const TimeNs lo = std::max(u.start, first_start_ns);
      if (lo < u.end) busy_counted += u.end - lo;
    }
  };

  // The host items this replay plays, in order (DataLoader spans only when they
  // are removed): one is always looked at ahead, since the clock is final up to it.
  auto items = items_.Open();
  HostItem item;
  auto next_item = [&] {
    while (items.Next(&item))
      if (!item.data_wait || change.remove_data_wait) return true;
    return false;
  };
  bool has_item = next_item();
  auto ops = ops_.Open();
  Op op;
  bool has_op = ops.Next(&op);
  auto replay_ops_until = [&](TimeNs t) {
    const TimeNs final_until = has_item ? item.time.start : std::numeric_limits<TimeNs>::max();
    for (; has_op && op.launch <= t; has_op = ops.Next(&op)) {
      auto& done = stream_done[static_cast<size_t>(op.stream)];
      double& free = stream_free[static_cast<size_t>(op.stream)];
      const double scale = (op.bits & kReplayKernel) != 0 ? static_cast<double>(change.kernel_scale[op.bits]) : 1.0;
      const double launched = clock.Map(op.launch);
      const double start = std::max(launched, free) + static_cast<double>(op.delay);
      const double end = start + static_cast<double>(op.time.duration()) * scale;
      free = end;
      // In recorded-end order (an op launched late but run early, e.g. one whose
      // launch call was not recorded, goes before the ones it ran ahead of).
      // Mostly that is launch order: then the op goes at the back, unsearched.
      if (done.empty() || done.back().first <= op.time.end) {
        done.emplace_back(op.time.end, end);
      } else {
        done.insert(std::upper_bound(done.begin(), done.end(), op.time.end,
                                     [](TimeNs v, const std::pair<TimeNs, double>& p) { return v < p.first; }),
                    {op.time.end, end});
      }
      // Blocking calls still to come start no earlier than the next host item: of
      // the ops that finished before that, only the latest can be their answer.
      while (done.size() >= 2 && done[1].first <= final_until) done.pop_front();
      pending.push({static_cast<TimeNs>(start), static_cast<TimeNs>(end)});
      if (op.step >= 0) {
        auto& e = device_end[static_cast<size_t>(op.step)];
        e = std::max(e, end);
        step_op_end_reached = std::max(step_op_end_reached, end);
      }
      // Later ops launch no earlier, and the clock never goes back: none starts
      // before this one's launch (less a margin for the clock's rounding).
      while (!pending.empty() && pending.top().first <= static_cast<TimeNs>(launched) - kClockRoundingNs) {
        busy_union.Add({pending.top().first, pending.top().second}, settle);
        pending.pop();
      }
      progress(!has_item);
    }
  };
  while (has_item) {
    const HostItem current = item;
    has_item = next_item();
    RETURN_IF_ERROR(items.status());
    if (current.time.start < clock.last_recorded()) continue;  // inside an item already replayed
    // `item` is now the next one: ops up to this item see the clock final up to its start.
    const HostItem next = item;
    const bool next_exists = has_item;
    item = current;
    has_item = true;
    replay_ops_until(current.time.start);
    item = next;
    has_item = next_exists;
    const double a = clock.Map(current.time.start);
    if (current.data_wait) {
      clock.Add(current.time.start, a);
      clock.Add(current.time.end, a);
    } else {
      // The work this call waited for: on each stream, the op that finished last
      // before it returned.
      TimeNs recorded_done = std::numeric_limits<TimeNs>::min();
      double replayed_done = -std::numeric_limits<double>::infinity();
      for (auto& done : stream_done) {
        // Later calls start no earlier: of what finished before this one started,
        // only the latest op can still be the answer.
        while (done.size() >= 2 && done[1].first <= current.time.start) done.pop_front();
        auto it = std::upper_bound(done.begin(), done.end(), current.time.end,
                                   [](TimeNs v, const std::pair<TimeNs, double>& p) { return v < p.first; });
        if (it == done.begin()) continue;
        --it;
        recorded_done = std::max(recorded_done, it->first);
        replayed_done = std::max(replayed_done, it->second);
      }
      const TimeNs own = current.time.end - std::max(current.time.start, std::min(recorded_done, current.time.end));
      const double end = std::max(a, replayed_done) + static_cast<double>(own) * change.host_stretch;
      clock.Add(current.time.start, a);
      clock.Add(current.time.end, end);
    }
    progress(!has_item);
    const TimeNs next_question = answered < questions.size() ? questions[answered].first : std::numeric_limits<TimeNs>::max();
    clock.Forget(std::min({next_question, has_item ? item.time.start : std::numeric_limits<TimeNs>::max(),
                           has_op ? op.launch : std::numeric_limits<TimeNs>::max()}));
  }
  replay_ops_until(std::numeric_limits<TimeNs>::max());
  RETURN_IF_ERROR(ops.status());
  while (!pending.empty()) {
    busy_union.Add({pending.top().first, pending.top().second}, settle);
    pending.pop();
  }
  busy_union.Finish(settle);
  progress(true);

  // Steps, aligned to the device as AlignSteps aligns the recorded ones.
  double prev_end = step_start[0];
  const double first_start = prev_end;
  for (size_t s = 0; s < n_steps; ++s) {
    const double start = std::max(prev_end, step_start[s]);
    prev_end = std::max({step_end[s], device_end[s], start});
  }
  const double total = prev_end - first_start;
  const auto n = static_cast<double>(n_steps);
  const Interval window{static_cast<TimeNs>(first_start), static_cast<TimeNs>(prev_end)};
  TimeNs busy_ns = busy_counted;
  for (const Interval& u : busy_held) {
    const TimeNs lo = std::max(u.start, window.start), hi = std::min(u.end, window.end);
    if (lo < hi) busy_ns += hi - lo;
  }
  out.valid = total > 0;
  out.steps = static_cast<int>(n_steps);
  out.step_ms = total / n / 1e6;
  out.gpu_busy_ms = static_cast<double>(busy_ns) / n / 1e6;
  return out;
}

}  // namespace gputriage::analysis
