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
#include <limits>
#include <unordered_map>

namespace gputriage::analysis {
namespace {

/// host'(t): a piecewise-linear map built in recorded-time order.
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

 private:
  double stretch_;
  std::vector<std::pair<TimeNs, double>> points_;
};

int64_t StreamKey(int32_t device, int32_t stream) {
  return (static_cast<int64_t>(device) << 32) ^ static_cast<int64_t>(static_cast<uint32_t>(stream));
}

}  // namespace

TraceReplay::TraceReplay(const Recording& rec, const Index& index, const StepWindows& steps) {
  if (steps.windows.empty()) return;
  if (steps.from_markers) {
    for (size_t i = 0; i < steps.windows.size() && i < rec.steps.size(); ++i) host_steps_.push_back(rec.steps[i].host);
  } else {
    host_steps_.push_back(steps.windows.front());
  }
  if (host_steps_.empty()) return;

  std::unordered_map<int64_t, int32_t> stream_numbers;
  ops_.reserve(rec.kernels.size() + rec.memory_ops.size());
  auto add = [&](Interval time, int64_t correlation, int32_t device, int32_t stream, int32_t kernel) {
    Op op;
    op.time = time;
    op.kernel = kernel;
    op.stream = stream_numbers.try_emplace(StreamKey(device, stream), static_cast<int32_t>(stream_numbers.size())).first->second;
    op.launch = time.start;
    if (const RuntimeCall* launch = index.Launch(correlation)) {
      op.launch = std::min(launch->time.start, time.start);
      auto s = std::upper_bound(host_steps_.begin(), host_steps_.end(), op.launch,
                                [](TimeNs v, const Interval& h) { return v < h.end; });
      if (s != host_steps_.end() && s->start <= op.launch) op.step = static_cast<int32_t>(s - host_steps_.begin());
    }
    ops_.push_back(op);
  };
  for (size_t i = 0; i < rec.kernels.size(); ++i) {
    const auto& k = rec.kernels[i];
    add(k.time, k.correlation, k.device, k.stream, static_cast<int32_t>(i));
  }
  for (const auto& m : rec.memory_ops) add(m.time, m.correlation, m.device, m.stream, -1);
  streams_ = static_cast<int>(stream_numbers.size());
  ops_per_stream_.assign(static_cast<size_t>(streams_), 0);
  for (const auto& op : ops_) ++ops_per_stream_[static_cast<size_t>(op.stream)];
  if (ops_.empty()) return;
  std::sort(ops_.begin(), ops_.end(), [](const Op& a, const Op& b) { return a.time.start < b.time.start; });
  {
    std::vector<TimeNs> prev_end(static_cast<size_t>(streams_), std::numeric_limits<TimeNs>::min());
    for (auto& op : ops_) {
      auto& prev = prev_end[static_cast<size_t>(op.stream)];
      op.delay = std::max<TimeNs>(0, op.time.start - std::max(op.launch, prev));
      prev = std::max(prev, op.time.end);
    }
  }
  std::stable_sort(ops_.begin(), ops_.end(), [](const Op& a, const Op& b) { return a.launch < b.launch; });

  for (const auto& span : index.data_loader) items_.push_back({span, true});
  std::unordered_map<int64_t, TimeNs> copy_end;  // correlation -> end of its transfer
  for (const auto& m : rec.memory_ops)
    if (m.correlation >= 0) copy_end[m.correlation] = std::max(copy_end[m.correlation], m.time.end);
  for (const auto& r : rec.runtime_calls) {
    bool blocking = r.kind == RuntimeCallKind::kSynchronize;
    if (r.kind == RuntimeCallKind::kMemcpy && r.correlation >= 0) {
      auto it = copy_end.find(r.correlation);
      blocking = it != copy_end.end() && it->second <= r.time.end;  // returned only after its transfer
    }
    if (blocking && r.time.end > r.time.start) items_.push_back({r.time, false});
  }
  std::sort(items_.begin(), items_.end(), [](const HostItem& a, const HostItem& b) { return a.time.start < b.time.start; });
  origin_ = std::min(host_steps_.front().start, ops_.front().launch);
  if (!items_.empty()) origin_ = std::min(origin_, items_.front().time.start);
}

ReplayResult TraceReplay::Run(const ReplayChange& change) const {
  ReplayResult out;
  if (ops_.empty() || host_steps_.empty()) return out;
  HostClock clock(origin_, change.host_stretch);
  // Replayed device state: per stream, (recorded end, replayed end) of each op in order.
  std::vector<std::vector<std::pair<TimeNs, double>>> stream_done(static_cast<size_t>(streams_));
  for (size_t i = 0; i < stream_done.size(); ++i) stream_done[i].reserve(ops_per_stream_[i]);
  std::vector<Interval> busy;  // replayed op intervals (ns, rounded)
  busy.reserve(ops_.size());
  std::vector<double> device_end(host_steps_.size(), -std::numeric_limits<double>::infinity());
  size_t next = 0;
  auto replay_ops_until = [&](TimeNs t) {
    for (; next < ops_.size() && ops_[next].launch <= t; ++next) {
      const Op& op = ops_[next];
      auto& done = stream_done[static_cast<size_t>(op.stream)];
      const double free = done.empty() ? -std::numeric_limits<double>::infinity() : done.back().second;
      const double scale = op.kernel >= 0 && static_cast<size_t>(op.kernel) < change.kernel_scale.size()
                               ? static_cast<double>(change.kernel_scale[static_cast<size_t>(op.kernel)])
                               : 1.0;
      const double start = std::max(clock.Map(op.launch), free) + static_cast<double>(op.delay);
      const double end = start + static_cast<double>(op.time.duration()) * scale;
      done.emplace_back(op.time.end, end);
      busy.push_back({static_cast<TimeNs>(start), static_cast<TimeNs>(end)});
      if (op.step >= 0) {
        auto& e = device_end[static_cast<size_t>(op.step)];
        e = std::max(e, end);
      }
    }
  };
  for (const auto& item : items_) {
    if (item.data_wait && !change.remove_data_wait) continue;
    if (item.time.start < clock.last_recorded()) continue;  // inside an item already replayed
    replay_ops_until(item.time.start);
    const double a = clock.Map(item.time.start);
    if (item.data_wait) {
      clock.Add(item.time.start, a);
      clock.Add(item.time.end, a);
      continue;
    }
    // The work this call waited for: on each stream, the ops that had finished when it returned.
    TimeNs recorded_done = std::numeric_limits<TimeNs>::min();
    double replayed_done = -std::numeric_limits<double>::infinity();
    for (const auto& done : stream_done) {
      auto it = std::upper_bound(done.begin(), done.end(), item.time.end,
                                 [](TimeNs v, const std::pair<TimeNs, double>& p) { return v < p.first; });
      if (it == done.begin()) continue;
      --it;
      recorded_done = std::max(recorded_done, it->first);
      replayed_done = std::max(replayed_done, it->second);
    }
    const TimeNs own = item.time.end - std::max(item.time.start, std::min(recorded_done, item.time.end));
    const double end = std::max(a, replayed_done) + static_cast<double>(own) * change.host_stretch;
    clock.Add(item.time.start, a);
    clock.Add(item.time.end, end);
  }
  replay_ops_until(std::numeric_limits<TimeNs>::max());

  // Steps, aligned to the device as AlignSteps aligns the recorded ones.
  double prev_end = clock.Map(host_steps_.front().start);
  const double first_start = prev_end;
  for (size_t s = 0; s < host_steps_.size(); ++s) {
    const double start = std::max(prev_end, clock.Map(host_steps_[s].start));
    prev_end = std::max({clock.Map(host_steps_[s].end), device_end[s], start});
  }
  const double total = prev_end - first_start;
  const auto n = static_cast<double>(host_steps_.size());
  intervals::List merged = intervals::Merge(std::move(busy));
  const TimeNs busy_ns = intervals::OverlapWith(merged, {static_cast<TimeNs>(first_start), static_cast<TimeNs>(prev_end)});
  out.valid = total > 0;
  out.steps = static_cast<int>(host_steps_.size());
  out.step_ms = total / n / 1e6;
  out.gpu_busy_ms = static_cast<double>(busy_ns) / n / 1e6;
  return out;
}

}  // namespace gputriage::analysis
