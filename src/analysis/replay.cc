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

struct Op {
  Interval time;        // recorded
  TimeNs launch = 0;    // recorded start of the launch call (op start when unknown)
  bool has_launch = false;
  int64_t stream_key = 0;
  double scale = 1.0;
  TimeNs delay = 0;     // d above
};

struct HostItem {
  Interval time;
  bool data_wait = false;  // else a blocking call
};

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

ReplayResult Replay(const Recording& rec, const Index& index, const StepWindows& steps, const ReplayChange& change) {
  ReplayResult out;
  if (steps.windows.empty()) return out;
  // The host span of each kept step.
  std::vector<Interval> host_steps;
  if (steps.from_markers) {
    for (size_t i = 0; i < steps.windows.size() && i < rec.steps.size(); ++i) host_steps.push_back(rec.steps[i].host);
  } else {
    host_steps.push_back(steps.windows.front());
  }
  if (host_steps.empty()) return out;

  // Device operations with their launch and recorded delay.
  std::vector<Op> ops;
  ops.reserve(rec.kernels.size() + rec.memory_ops.size());
  auto add = [&](Interval time, int64_t correlation, int32_t device, int32_t stream, double scale) {
    Op op;
    op.time = time;
    op.stream_key = StreamKey(device, stream);
    op.scale = scale;
    op.launch = time.start;
    if (correlation >= 0) {
      auto it = index.runtime_by_correlation.find(correlation);
      if (it != index.runtime_by_correlation.end()) {
        op.launch = std::min(it->second->time.start, time.start);
        op.has_launch = true;
      }
    }
    ops.push_back(op);
  };
  for (size_t i = 0; i < rec.kernels.size(); ++i) {
    const auto& k = rec.kernels[i];
    add(k.time, k.correlation, k.device, k.stream, i < change.kernel_scale.size() ? change.kernel_scale[i] : 1.0);
  }
  for (const auto& m : rec.memory_ops) add(m.time, m.correlation, m.device, m.stream, 1.0);
  if (ops.empty()) return out;
  std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.time.start < b.time.start; });
  {
    std::unordered_map<int64_t, TimeNs> prev_end;
    for (auto& op : ops) {
      auto [it, fresh] = prev_end.try_emplace(op.stream_key, std::numeric_limits<TimeNs>::min());
      op.delay = std::max<TimeNs>(0, op.time.start - std::max(op.launch, it->second));
      it->second = std::max(it->second, op.time.end);
    }
  }
  std::stable_sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.launch < b.launch; });

  // Host items: removed data waits and blocking calls, in recorded order.
  std::vector<HostItem> items;
  if (change.remove_data_wait)
    for (const auto& span : index.data_loader) items.push_back({span, true});
  std::unordered_map<int64_t, TimeNs> copy_end;  // correlation -> end of its transfer
  for (const auto& m : rec.memory_ops)
    if (m.correlation >= 0) copy_end[m.correlation] = std::max(copy_end[m.correlation], m.time.end);
  for (const auto& r : rec.runtime_calls) {
    bool blocking = r.kind == RuntimeCallKind::kSynchronize;
    if (r.kind == RuntimeCallKind::kMemcpy && r.correlation >= 0) {
      auto it = copy_end.find(r.correlation);
      blocking = it != copy_end.end() && it->second <= r.time.end;  // returned only after its transfer
    }
    if (blocking && r.time.end > r.time.start) items.push_back({r.time, false});
  }
  std::sort(items.begin(), items.end(), [](const HostItem& a, const HostItem& b) { return a.time.start < b.time.start; });

  TimeNs origin = std::min(host_steps.front().start, ops.front().launch);
  if (!items.empty()) origin = std::min(origin, items.front().time.start);
  HostClock clock(origin, change.host_stretch);

  // Replayed device state: per stream, (recorded end, replayed end) of each op in order.
  std::unordered_map<int64_t, std::vector<std::pair<TimeNs, double>>> stream_done;
  std::vector<Interval> busy;  // replayed op intervals (ns, rounded)
  std::vector<double> launched_end(ops.size(), 0.0);
  busy.reserve(ops.size());
  size_t next = 0;
  auto replay_ops_until = [&](TimeNs t) {
    for (; next < ops.size() && ops[next].launch <= t; ++next) {
      const Op& op = ops[next];
      auto& done = stream_done[op.stream_key];
      const double free = done.empty() ? -std::numeric_limits<double>::infinity() : done.back().second;
      const double start = std::max(clock.Map(op.launch), free) + static_cast<double>(op.delay);
      const double end = start + static_cast<double>(op.time.duration()) * op.scale;
      done.emplace_back(op.time.end, end);
      launched_end[next] = end;
      busy.push_back({static_cast<TimeNs>(start), static_cast<TimeNs>(end)});
    }
  };
  double blocked = 0;
  for (const auto& item : items) {
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
    for (const auto& [key, done] : stream_done) {
      auto it = std::upper_bound(done.begin(), done.end(), item.time.end,
                                 [](TimeNs v, const std::pair<TimeNs, double>& p) { return v < p.first; });
      if (it == done.begin()) continue;
      --it;
      recorded_done = std::max(recorded_done, it->first);
      replayed_done = std::max(replayed_done, it->second);
    }
    const TimeNs own = item.time.end - std::max(item.time.start, std::min(recorded_done, item.time.end));
    const double end = std::max(a, replayed_done) + static_cast<double>(own) * change.host_stretch;
    blocked += std::max(0.0, replayed_done - a);
    clock.Add(item.time.start, a);
    clock.Add(item.time.end, end);
  }
  replay_ops_until(std::numeric_limits<TimeNs>::max());

  // Steps, aligned to the device as AlignSteps aligns the recorded ones.
  std::vector<double> device_end(host_steps.size(), -std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!ops[i].has_launch) continue;
    auto it = std::upper_bound(host_steps.begin(), host_steps.end(), ops[i].launch,
                               [](TimeNs v, const Interval& s) { return v < s.end; });
    if (it == host_steps.end() || it->start > ops[i].launch) continue;
    auto& e = device_end[static_cast<size_t>(it - host_steps.begin())];
    e = std::max(e, launched_end[i]);
  }
  double prev_end = clock.Map(host_steps.front().start);
  const double first_start = prev_end;
  for (size_t s = 0; s < host_steps.size(); ++s) {
    const double start = std::max(prev_end, clock.Map(host_steps[s].start));
    const double end = std::max({clock.Map(host_steps[s].end), device_end[s], start});
    prev_end = end;
  }
  const double total = prev_end - first_start;
  const auto n = static_cast<double>(host_steps.size());
  intervals::List merged = intervals::Merge(std::move(busy));
  const TimeNs busy_ns = intervals::OverlapWith(merged, {static_cast<TimeNs>(first_start), static_cast<TimeNs>(prev_end)});
  out.valid = total > 0;
  out.steps = static_cast<int>(host_steps.size());
  out.step_ms = total / n / 1e6;
  out.gpu_busy_ms = static_cast<double>(busy_ns) / n / 1e6;
  out.host_blocked_ms = blocked / n / 1e6;
  return out;
}

}  // namespace gputriage::analysis
