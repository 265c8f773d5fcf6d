// Steps, the step-time breakdown and the GPU summary, defined as torch-tb-profiler
// defines them so that our numbers can be checked against its published output.
#include <algorithm>
#include <limits>

#include "src/analysis/analysis_internal.h"

namespace gputriage::analysis {

Index BuildIndex(const Recording& rec, const std::vector<bool>& is_comm_kernel) {
  Index index;
  index.device_ops.reserve(rec.kernels.size() + rec.memory_ops.size());
  for (size_t i = 0; i < rec.kernels.size(); ++i) {
    const auto& k = rec.kernels[i];
    index.device_ops.push_back({k.time, k.correlation, k.device, k.stream, true, is_comm_kernel[i]});
  }
  for (const auto& m : rec.memory_ops) {
    index.device_ops.push_back({m.time, m.correlation, m.device, m.stream, false, false});
  }
  std::sort(index.device_ops.begin(), index.device_ops.end(),
            [](const DeviceOp& a, const DeviceOp& b) { return a.time.start < b.time.start; });
  // Lists threaded backwards, so each reads in device_ops order.
  const size_t n = index.device_ops.size();
  index.first_op_by_correlation = CorrelationMap(n);
  index.next_op_same_correlation.assign(n, CorrelationMap::kNone);
  for (size_t i = n; i-- > 0;) {
    const int64_t c = index.device_ops[i].correlation;
    if (c < 0) continue;
    index.next_op_same_correlation[i] = index.first_op_by_correlation.Find(c);
    index.first_op_by_correlation.Assign(c, static_cast<uint32_t>(i));
  }
  intervals::List sync;
  index.runtime_calls = &rec.runtime_calls;
  index.runtime_by_correlation = CorrelationMap(rec.runtime_calls.size());
  for (size_t i = 0; i < rec.runtime_calls.size(); ++i) {
    const auto& r = rec.runtime_calls[i];
    if (r.correlation >= 0) index.runtime_by_correlation.Insert(r.correlation, static_cast<uint32_t>(i));
    if (r.kind == RuntimeCallKind::kSynchronize) sync.push_back(r.time);
  }
  intervals::List loader;
  for (const auto& c : rec.cpu_spans)
    if (c.kind == CpuSpanKind::kDataLoader) loader.push_back(c.time);
  index.data_loader = intervals::Merge(std::move(loader));
  // A sync inside a DataLoader span is charged to the loader: subtract it once here.
  index.host_sync = intervals::Subtract(intervals::Merge(std::move(sync)), index.data_loader);
  intervals::List device_sync;
  for (const auto& s : rec.syncs) device_sync.push_back(s.time);
  index.device_sync = intervals::Merge(std::move(device_sync));
  return index;
}

// Step alignment (torch-tb-profiler's StepParser): a host step ends when the last
// device work launched inside it ends, and starts no earlier than the previous step
// ends, so the steps tile the device timeline:
//
//   host:    |--- step 5 ---|--- step 6 ---|
//   launch:      ^k1   ^k2       ^k3
//   device:          [k1]  [k2------]  [k3]
//   aligned: |--- step 5 ---------|--step 6-|
//
// Trailing steps that launched under 80 % of the previous step's device work are
// dropped: the profiler stopped before their kernels were recorded.
StepWindows AlignSteps(const Recording& rec, const Index& index) {
  StepWindows out;
  std::vector<Interval> host;
  if (!rec.steps.empty()) {
    out.from_markers = true;
    for (const auto& s : rec.steps) {
      out.numbers.push_back(s.number);
      host.push_back(s.host);
    }
  } else {
    // No ProfilerStep markers: one window over the host activity (as the plugin
    // does), or over the device activity when the host side is absent.
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
    for (const auto& c : rec.cpu_spans) {
      if (c.kind == CpuSpanKind::kUserAnnotation) continue;
      lo = std::min(lo, c.time.start);
      hi = std::max(hi, c.time.end);
    }
    if (lo > hi) {
      for (const auto& op : index.device_ops) {
        lo = std::min(lo, op.time.start);
        hi = std::max(hi, op.time.end);
      }
    }
    if (lo > hi) return out;
    out.numbers.push_back(-1);
    host.push_back({lo, hi});
  }

  const size_t n = host.size();
  constexpr TimeNs kNone = std::numeric_limits<TimeNs>::max();
  std::vector<Interval> device(n, Interval{kNone, std::numeric_limits<TimeNs>::min()});
  std::vector<int64_t> matched(n, 0);
  std::vector<bool> op_matched(index.device_ops.size(), false);
  bool any_matched = false;

  size_t i_step = 0;
  for (const auto& r : rec.runtime_calls) {  // sorted by start
    while (i_step < n && r.time.start >= host[i_step].end) ++i_step;
    if (i_step >= n) break;
    if (r.time.start < host[i_step].start || r.time.end > host[i_step].end) continue;
    const uint32_t first = index.first_op_by_correlation.Find(r.correlation);
    if (first == CorrelationMap::kNone) continue;
    for (uint32_t op = first; op != CorrelationMap::kNone; op = index.next_op_same_correlation[op]) {
      device[i_step].start = std::min(device[i_step].start, index.device_ops[op].time.start);
      device[i_step].end = std::max(device[i_step].end, index.device_ops[op].time.end);
      op_matched[op] = true;
      ++matched[i_step];
      any_matched = true;
    }
  }

  out.windows = host;
  if (!any_matched) return out;

  TimeNs prev_end = host[0].start;
  if (device[0].start != kNone) {
    for (size_t op = 0; op < index.device_ops.size(); ++op) {
      if (!op_matched[op] && index.device_ops[op].time.end < device[0].start)
        prev_end = std::max(prev_end, index.device_ops[op].time.end);
    }
  }
  for (size_t s = 0; s < n; ++s) {
    const TimeNs start = std::max(prev_end, host[s].start);
    TimeNs end = host[s].end;
    if (device[s].start == kNone) {
      end = std::max(end, start);
    } else {
      end = std::max(end, device[s].end);
      end = std::max(end, start);
    }
    out.windows[s] = {start, end};
    prev_end = end;
  }
  if (n > 1) {
    ptrdiff_t last = static_cast<ptrdiff_t>(n) - 1;
    while (last >= 0 && matched[static_cast<size_t>(last)] == 0) --last;
    if (last >= 0) {
      size_t keep = static_cast<size_t>(last) + 1;
      if (last > 0 && static_cast<double>(matched[static_cast<size_t>(last) - 1]) * 0.8 >
                          static_cast<double>(matched[static_cast<size_t>(last)]))
        keep = static_cast<size_t>(last);
      out.dropped_tail_steps = static_cast<int>(n - keep);
      out.windows.resize(keep);
      out.numbers.resize(keep);
    }
  }
  return out;
}

// Breakdown: each category's intervals are merged; walking the categories in
// priority order, each takes what it covers of the step time still unclaimed.
//
//   kernel   :   [====]      [==]
//   runtime  : [=]  [=====]
//   cpu exec : [=================]
//   result   : R KKKK CC KKK C  (R runtime, K kernel, C cpu exec; rest "other")
std::vector<StepBreakdown> BreakDownSteps(const Recording& rec, const Index& index, const StepWindows& steps) {
  std::array<intervals::List, kNumStepCategories - 1> roles;
  auto& kernel = roles[static_cast<int>(StepCategory::kKernel)];
  auto& memcpy = roles[static_cast<int>(StepCategory::kMemcpy)];
  auto& memset = roles[static_cast<int>(StepCategory::kMemset)];
  auto& comm = roles[static_cast<int>(StepCategory::kCommunication)];
  auto& runtime = roles[static_cast<int>(StepCategory::kRuntime)];
  auto& loader = roles[static_cast<int>(StepCategory::kDataLoader)];
  auto& cpu = roles[static_cast<int>(StepCategory::kCpuExec)];
  for (const auto& op : index.device_ops) {
    if (op.is_kernel) (op.is_communication ? comm : kernel).push_back(op.time);
  }
  for (const auto& m : rec.memory_ops) (m.kind == MemoryOpKind::kMemset ? memset : memcpy).push_back(m.time);
  for (const auto& r : rec.runtime_calls) runtime.push_back(r.time);
  for (const auto& c : rec.cpu_spans) {
    switch (c.kind) {
      case CpuSpanKind::kDataLoader: loader.push_back(c.time); break;
      case CpuSpanKind::kCommunication: comm.push_back(c.time); break;
      default: cpu.push_back(c.time); break;
    }
  }
  intervals::List slots = intervals::Merge(steps.windows);
  std::array<intervals::List, kNumStepCategories> claimed;
  for (int c = 0; c < kNumStepCategories - 1; ++c) {
    intervals::List role = intervals::Merge(std::move(roles[c]));
    claimed[c] = intervals::Intersect(slots, role);
    slots = intervals::Subtract(slots, claimed[c]);
  }
  claimed[kNumStepCategories - 1] = std::move(slots);

  std::vector<StepBreakdown> out;
  for (size_t s = 0; s < steps.windows.size(); ++s) {
    StepBreakdown b;
    b.number = steps.numbers[s];
    b.window = steps.windows[s];
    for (int c = 0; c < kNumStepCategories; ++c) b.ns[c] = intervals::OverlapWith(claimed[c], b.window);
    out.push_back(b);
  }
  return out;
}

GpuMetrics MeasureGpu(const Recording& rec, int device, Interval window) {
  GpuMetrics g;
  g.device = device;
  g.window_ns = window.duration();
  intervals::List busy;
  // SM efficiency: sum of concurrent kernels' blocks-per-SM, capped at 1, over time.
  std::vector<std::pair<TimeNs, double>> edges;
  double occupancy_weighted = 0;
  double occupancy_time = 0;
  for (const auto& k : rec.kernels) {
    if (k.device != device) continue;
    busy.push_back(k.time);
    if (!std::isnan(k.blocks_per_sm) && k.blocks_per_sm > 0) {
      edges.emplace_back(k.time.start, k.blocks_per_sm);
      edges.emplace_back(k.time.end, -static_cast<double>(k.blocks_per_sm));
    }
    if (!std::isnan(k.est_occupancy_percent) && k.est_occupancy_percent >= 0) {
      const TimeNs lo = std::max(k.time.start, window.start);
      const TimeNs hi = std::min(k.time.end, window.end);
      if (lo < hi) {
        occupancy_weighted += static_cast<double>(k.est_occupancy_percent) * static_cast<double>(hi - lo);
        occupancy_time += static_cast<double>(hi - lo);
      }
    }
  }
  busy = intervals::Merge(std::move(busy));
  g.busy_ns = intervals::OverlapWith(busy, window);
  if (g.window_ns > 0) g.busy_percent = 100.0 * static_cast<double>(g.busy_ns) / static_cast<double>(g.window_ns);
  if (!edges.empty() && g.window_ns > 0) {
    // Starts before ends at equal times, as the plugin sorts them.
    std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > 0 && b.second < 0);
    });
    double level = 0, weighted = 0;
    TimeNs last = edges.front().first;
    for (const auto& [t, delta] : edges) {
      if (t > last && level > 1e-12) {
        const TimeNs lo = std::max(last, window.start), hi = std::min(t, window.end);
        if (lo < hi) weighted += std::min(level, 1.0) * static_cast<double>(hi - lo);
      }
      last = t;
      level += delta;
    }
    g.sm_efficiency_percent = 100.0 * weighted / static_cast<double>(g.window_ns);
  }
  if (occupancy_time > 0) g.achieved_occupancy_percent = occupancy_weighted / occupancy_time;
  return g;
}

}  // namespace gputriage::analysis
