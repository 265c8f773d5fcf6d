// Steps, the step-time breakdown and the GPU summary, defined as torch-tb-profiler
// defines them so that our numbers can be checked against its published output.
// Each is one pass over time-ordered events holding what is running at the moment.
#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>

#include "src/analysis/analysis_internal.h"

namespace gputriage::analysis {

DeviceOpCursor::DeviceOpCursor(const TracePrep& prep)
    : prep_(prep),
      kernels_(prep.events.kernels()),
      memory_(prep.events.memory_ops()),
      kernel_launches_(*prep.launches.kernels),
      memory_launches_(*prep.launches.memory_ops),
      operators_(*prep.operators) {
  k_ = kernels_.Next();
  m_ = memory_.Next();
}

const DeviceOp* DeviceOpCursor::Next() {
  if (k_ == nullptr && m_ == nullptr) return nullptr;
  const bool kernel = m_ == nullptr || (k_ != nullptr && k_->time.start <= m_->time.start);
  op_ = DeviceOp();
  op_.is_kernel = kernel;
  // The cursors' items stay valid only until their next Next(): the op keeps a copy.
  if (kernel) {
    kernel_copy_ = *k_;
    op_.kernel = &kernel_copy_;
    op_.seq = k_seq_++;
    k_ = kernels_.Next();
  } else {
    memory_copy_ = *m_;
    op_.memory = &memory_copy_;
    op_.seq = m_seq_++;
    m_ = memory_.Next();
  }
  const auto set = [&](const auto& e, SeqZip<OpLaunch>& launches) {
    op_.time = e.time;
    op_.correlation = e.correlation;
    op_.device = e.device;
    op_.stream = e.stream;
    if (e.correlation >= 0)
      if (const OpLaunch* l = launches.At(op_.seq)) op_.launch = *l;
  };
  if (!kernel) {
    set(memory_copy_, memory_launches_);
    return &op_;
  }
  set(kernel_copy_, kernel_launches_);
  const KernelActivity& k = kernel_copy_;
  const auto kind = prep_.kinds->find(k.name);
  const KernelOperator* op = k.external_id >= 0 ? operators_.At(op_.seq) : nullptr;
  op_.is_communication = (kind != prep_.kinds->end() && kind->second.cls == KernelClass::kCommunication) ||
                         (op != nullptr && op->communication_op);
  if (op != nullptr) op_.launched_by = *op;
  return &op_;
}

Status DeviceOpCursor::status() const {
  for (const Status& s : {kernels_.status(), memory_.status(), kernel_launches_.status(), memory_launches_.status(),
                          operators_.status()})
    if (!s.ok()) return s;
  return Status::Ok();
}

namespace {

/// The parts of `r` outside the merged intervals of `window`, in order (queries in
/// order of start).
template <typename Emit>
void EmitOutside(IntervalWindow& window, Interval r, Emit&& emit) {
  TimeNs cursor = r.start;
  for (const auto& w : window.Reach(r)) {
    if (w.start >= r.end) break;
    if (w.start > cursor) emit(Interval{cursor, w.start});
    cursor = std::max(cursor, w.end);
    if (cursor >= r.end) break;
  }
  if (cursor < r.end) emit(Interval{cursor, r.end});
}

/// Whether `t` lies in one of the merged intervals of `window` (points in order).
bool Covers(IntervalWindow& window, TimeNs t) {
  for (const auto& w : window.Reach({t, t + 1})) {
    if (w.start > t) break;
    if (t < w.end) return true;
  }
  return false;
}

/// prep.running_samples: the launching thread's CPU samples outside the DataLoader
/// spans, blocking CUDA calls and its OS calls (where it waited), by module.
Status BuildRunningSamples(TracePrep& prep) {
  prep.running_samples = std::make_unique<NamedIntervalSpool>(prep.spill);
  Status status;
  IntervalWindow loader(*prep.data_loader), sync(*prep.host_sync);
  auto os = prep.events.os_calls();
  const OsCall* call = os.Next();
  TimeNs in_os_until = std::numeric_limits<TimeNs>::min();  // the latest end of the thread's calls begun so far
  auto samples = prep.events.cpu_samples();
  for (const CpuSample* s = samples.Next(); s != nullptr; s = samples.Next()) {
    if (s->thread != prep.os_thread) continue;
    const TimeNs t = s->time.start;
    for (; call != nullptr && call->time.start <= t; call = os.Next())
      if (call->thread == prep.os_thread) in_os_until = std::max(in_os_until, call->time.end);
    if (t < in_os_until || Covers(loader, t) || Covers(sync, t)) continue;
    if (Status add = prep.running_samples->Add({{t, t}, s->module}); !add.ok() && status.ok()) status = add;
  }
  RETURN_IF_ERROR(samples.status());
  RETURN_IF_ERROR(os.status());
  RETURN_IF_ERROR(loader.status());
  RETURN_IF_ERROR(sync.status());
  RETURN_IF_ERROR(status);
  return prep.running_samples->Finish();
}

/// prep.os_calls: the OS calls of the thread that launched the most work, made
/// disjoint (a later call that overlaps an earlier one keeps only its rest), less
/// the DataLoader spans and blocking CUDA calls (their own idle causes); and its
/// running CPU samples where the source has them.
Status BuildLaunchingThread(TracePrep& prep, const std::map<int64_t, int64_t>& launches) {
  int64_t most = 0;
  for (const auto& [thread, count] : launches)
    if (count > most) most = count, prep.os_thread = thread;
  if (prep.events.recording().cpu_sampled) RETURN_IF_ERROR(BuildRunningSamples(prep));
  if (!prep.events.recording().os_calls_traced) return Status::Ok();
  prep.os_calls = std::make_unique<NamedIntervalSpool>(prep.spill);
  Status status;
  IntervalWindow loader(*prep.data_loader), sync(*prep.host_sync);
  TimeNs covered = std::numeric_limits<TimeNs>::min();
  auto calls = prep.events.os_calls();
  for (const OsCall* c = calls.Next(); c != nullptr; c = calls.Next()) {
    if (c->thread != prep.os_thread || c->time.end <= covered) continue;
    const Interval own{std::max(c->time.start, covered), c->time.end};
    covered = c->time.end;
    EmitOutside(loader, own, [&](Interval outside_loader) {
      EmitOutside(sync, outside_loader, [&](Interval piece) {
        if (Status s = prep.os_calls->Add({piece, c->name}); !s.ok() && status.ok()) status = s;
      });
    });
  }
  RETURN_IF_ERROR(calls.status());
  RETURN_IF_ERROR(loader.status());
  RETURN_IF_ERROR(sync.status());
  RETURN_IF_ERROR(status);
  return prep.os_calls->Finish();
}

}  // namespace

Status BuildHostIntervals(TracePrep& prep) {
  std::map<int64_t, int64_t> launches;  // CUDA calls that issue work, per thread
  prep.data_loader = std::make_unique<IntervalSpool>(prep.spill);
  prep.host_sync = std::make_unique<IntervalSpool>(prep.spill);
  prep.device_sync = std::make_unique<IntervalSpool>(prep.spill);
  Status status;
  auto into = [&status](IntervalSpool& spool) {
    return [&status, &spool](Interval r) {
      if (Status s = spool.Add(r); !s.ok() && status.ok()) status = s;
    };
  };
  {
    UnionBuilder loader;
    auto spans = prep.events.cpu_spans();
    for (const CpuSpan* c = spans.Next(); c != nullptr; c = spans.Next())
      if (c->kind == CpuSpanKind::kDataLoader) loader.Add(c->time, into(*prep.data_loader));
    loader.Finish(into(*prep.data_loader));
    RETURN_IF_ERROR(spans.status());
    RETURN_IF_ERROR(prep.data_loader->Finish());
    prep.has_data_loader = prep.data_loader->size() > 0;
  }
  {
    // A sync inside a DataLoader span is charged to the loader: subtract it once here.
    IntervalWindow loader(*prep.data_loader);
    auto subtract = [&](Interval r) { EmitOutside(loader, r, into(*prep.host_sync)); };
    UnionBuilder sync;
    auto calls = prep.events.runtime_calls();
    for (const RuntimeCall* r = calls.Next(); r != nullptr; r = calls.Next()) {
      if (r->kind == RuntimeCallKind::kSynchronize) sync.Add(r->time, subtract);
      if (r->kind == RuntimeCallKind::kKernelLaunch || r->kind == RuntimeCallKind::kGraphLaunch ||
          r->kind == RuntimeCallKind::kMemcpy || r->kind == RuntimeCallKind::kMemset)
        ++launches[r->thread];
    }
    sync.Finish(subtract);
    RETURN_IF_ERROR(calls.status());
    RETURN_IF_ERROR(loader.status());
    RETURN_IF_ERROR(prep.host_sync->Finish());
  }
  if (prep.events.recording().os_calls_traced || prep.events.recording().cpu_sampled)
    RETURN_IF_ERROR(BuildLaunchingThread(prep, launches));
  {
    UnionBuilder waits;
    auto syncs = prep.events.syncs();
    for (const SyncActivity* s = syncs.Next(); s != nullptr; s = syncs.Next()) waits.Add(s->time, into(*prep.device_sync));
    waits.Finish(into(*prep.device_sync));
    RETURN_IF_ERROR(syncs.status());
    RETURN_IF_ERROR(prep.device_sync->Finish());
  }
  return status;
}

StatusOr<HostSteps> FindHostSteps(const TraceEvents& events) {
  HostSteps out;
  const Recording& rec = events.recording();
  if (!rec.steps.empty()) {
    out.from_markers = true;
    for (const auto& s : rec.steps) {
      out.numbers.push_back(s.number);
      out.spans.push_back(s.host);
    }
    return out;
  }
  // No ProfilerStep markers: one window over the host activity (as the plugin
  // does), or over the device activity when the host side is absent.
  TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
  auto spans = events.cpu_spans();
  for (const CpuSpan* c = spans.Next(); c != nullptr; c = spans.Next()) {
    if (c->kind == CpuSpanKind::kUserAnnotation) continue;
    lo = std::min(lo, c->time.start);
    hi = std::max(hi, c->time.end);
  }
  RETURN_IF_ERROR(spans.status());
  if (lo > hi) {
    auto kernels = events.kernels();
    for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next())
      lo = std::min(lo, k->time.start), hi = std::max(hi, k->time.end);
    RETURN_IF_ERROR(kernels.status());
    auto memory = events.memory_ops();
    for (const MemoryActivity* m = memory.Next(); m != nullptr; m = memory.Next())
      lo = std::min(lo, m->time.start), hi = std::max(hi, m->time.end);
    RETURN_IF_ERROR(memory.status());
  }
  if (lo > hi) return out;
  out.numbers.push_back(-1);
  out.spans.push_back({lo, hi});
  return out;
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
StatusOr<StepWindows> AlignSteps(const TracePrep& prep, const HostSteps& host_steps) {
  StepWindows out;
  out.from_markers = host_steps.from_markers;
  out.numbers = host_steps.numbers;
  const std::vector<Interval>& host = host_steps.spans;
  const size_t n = host.size();
  if (n == 0) return out;
  constexpr TimeNs kNone = std::numeric_limits<TimeNs>::max();
  const std::vector<Interval>& device = prep.launches.step_device;
  const std::vector<int64_t>& matched = prep.launches.step_launched;

  out.windows = host;
  if (!prep.launches.any_launched) return out;

  TimeNs prev_end = host[0].start;
  if (!host_steps.from_markers) {
    // One window over the whole trace: it holds every device operation, the first
    // one included (a first copy or kernel launched before the host activity the
    // window was drawn over would otherwise start it at that operation's end).
    DeviceOpCursor ops(prep);
    const DeviceOp* first = ops.Next();
    RETURN_IF_ERROR(ops.status());
    TimeNs start = host[0].start, end = host[0].end;
    if (first != nullptr) start = std::min(start, first->time.start);
    if (device[0].start != kNone) end = std::max(end, device[0].end);
    out.windows[0] = {start, std::max(start, end)};
    return out;
  }
  if (device[0].start != kNone) {
    // Device work launched outside the steps that ended before the first step's did.
    DeviceOpCursor ops(prep);
    for (const DeviceOp* op = ops.Next(); op != nullptr && op->time.start < device[0].start; op = ops.Next())
      if (!op->launch.in_host_step && op->time.end < device[0].start) prev_end = std::max(prev_end, op->time.end);
    RETURN_IF_ERROR(ops.status());
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
//
// In one sweep: every instant of a step goes to the first category (in StepCategory
// order) with an interval running then; what none covers is "other".
/// A copy's count, device time and bytes, in the step it starts in (ops come by
/// start, so the steps before `from` are behind it).
void CountCopy(const MemoryActivity& m, std::vector<StepBreakdown>& steps, size_t from) {
  for (size_t w = from; w < steps.size() && steps[w].window.start <= m.time.start; ++w) {
    if (m.time.start >= steps[w].window.end) continue;
    StepBreakdown& b = steps[w];
    ++b.copies;
    b.copy_device_ns += m.time.duration();
    const int64_t bytes = std::max<int64_t>(m.bytes, 0);
    if (m.kind == MemoryOpKind::kMemcpyHtoD) b.h2d_bytes += bytes;
    else if (m.kind == MemoryOpKind::kMemcpyDtoH) b.d2h_bytes += bytes;
    else b.other_copy_bytes += bytes;
    if (m.kind == MemoryOpKind::kMemcpyHtoD || m.kind == MemoryOpKind::kMemcpyDtoH) {
      b.host_device_copy_ns += m.time.duration();
      if (m.host_memory == HostMemory::kPageable) b.pageable_copy_bytes += bytes;
      if (m.host_memory == HostMemory::kPinned) b.pinned_copy_bytes += bytes;
    }
    return;
  }
}

namespace {

// The sweep's roles: the step categories in their priority order, with
// communication split in two (collective kernels on the device before nccl:*
// spans on the host) so that a step's device time can be told from its host
// time; both are the category's time, as torch-tb-profiler counts it.
constexpr int kDeviceCommunicationRole = static_cast<int>(StepCategory::kCommunication);
constexpr int kHostCommunicationRole = kDeviceCommunicationRole + 1;
constexpr int kRoles = kNumStepCategories;  // every category but kOther (the rest), plus the host's communication

int RoleOf(StepCategory c) {
  const int i = static_cast<int>(c);
  return i <= kDeviceCommunicationRole ? i : i + 1;
}

StepCategory CategoryOfRole(int role) {
  if (role <= kDeviceCommunicationRole) return static_cast<StepCategory>(role);
  return static_cast<StepCategory>(role - 1);
}

}  // namespace

StatusOr<std::vector<StepBreakdown>> BreakDownSteps(const TracePrep& prep, const StepWindows& steps) {
  std::vector<StepBreakdown> out(steps.windows.size());
  for (size_t s = 0; s < out.size(); ++s) out[s].number = steps.numbers[s], out[s].window = steps.windows[s];
  size_t first_window = 0;
  auto segment = [&](TimeNs a, TimeNs b, const CoverageSweep<kRoles>::Active& active) {
    int role = 0;
    while (role < kRoles && active[static_cast<size_t>(role)] == 0) ++role;
    if (role == kRoles) return;  // nothing ran: kOther, the rest of the window, below
    const auto category = static_cast<size_t>(CategoryOfRole(role));
    while (first_window < out.size() && out[first_window].window.end <= a) ++first_window;
    for (size_t w = first_window; w < out.size() && out[w].window.start < b; ++w) {
      const TimeNs lo = std::max(a, out[w].window.start), hi = std::min(b, out[w].window.end);
      if (lo >= hi) continue;
      out[w].ns[category] += hi - lo;
      if (role == kHostCommunicationRole) out[w].host_communication_ns += hi - lo;
    }
  };
  CoverageSweep<kRoles> sweep;
  DeviceOpCursor ops(prep);
  auto calls = prep.events.runtime_calls();
  auto spans = prep.events.cpu_spans();
  const DeviceOp* op = ops.Next();
  const RuntimeCall* call = calls.Next();
  const CpuSpan* span = spans.Next();
  constexpr TimeNs kEnd = std::numeric_limits<TimeNs>::max();
  while (op != nullptr || call != nullptr || span != nullptr) {
    const TimeNs t_op = op ? op->time.start : kEnd, t_call = call ? call->time.start : kEnd,
                 t_span = span ? span->time.start : kEnd;
    if (t_op <= t_call && t_op <= t_span) {
      StepCategory c = StepCategory::kKernel;
      if (op->is_kernel) c = op->is_communication ? StepCategory::kCommunication : StepCategory::kKernel;
      else c = op->memory->kind == MemoryOpKind::kMemset ? StepCategory::kMemset : StepCategory::kMemcpy;
      sweep.Add(op->time, RoleOf(c), segment);
      if (c == StepCategory::kMemcpy) CountCopy(*op->memory, out, first_window);
      op = ops.Next();
    } else if (t_call <= t_span) {
      sweep.Add(call->time, RoleOf(StepCategory::kRuntime), segment);
      call = calls.Next();
    } else {
      int role = RoleOf(StepCategory::kCpuExec);
      if (span->kind == CpuSpanKind::kDataLoader) role = RoleOf(StepCategory::kDataLoader);
      else if (span->kind == CpuSpanKind::kCommunication) role = kHostCommunicationRole;
      sweep.Add(span->time, role, segment);
      span = spans.Next();
    }
  }
  sweep.Finish(segment);
  RETURN_IF_ERROR(ops.status());
  RETURN_IF_ERROR(calls.status());
  RETURN_IF_ERROR(spans.status());
  for (auto& b : out) {
    TimeNs claimed = 0;
    for (int c = 0; c < kNumStepCategories - 1; ++c) claimed += b.ns[c];
    b.ns[kNumStepCategories - 1] = b.window.duration() - claimed;
  }
  return out;
}

namespace {

/// One device's GPU summary, kernel by kernel in order.
class GpuMeter {
 public:
  GpuMeter(int device, Interval window) : window_(window) {
    g_.device = device;
    g_.window_ns = window.duration();
  }

  void Add(const KernelActivity& k, int64_t seq) {
    busy_.Add(k.time, [&](Interval r) { busy_ns_ += Overlap(r); });
    if (!std::isnan(k.blocks_per_sm) && k.blocks_per_sm > 0) {
      // Edges in the plugin's order: by time, starts before ends at equal times.
      while (!ends_.empty() && std::get<0>(ends_.top()) < k.time.start) PopEnd();
      Edge(k.time.start, k.blocks_per_sm);
      ends_.push({k.time.end, seq, -static_cast<double>(k.blocks_per_sm)});
    }
    if (!std::isnan(k.est_occupancy_percent) && k.est_occupancy_percent >= 0) {
      const TimeNs lo = std::max(k.time.start, window_.start);
      const TimeNs hi = std::min(k.time.end, window_.end);
      if (lo < hi) {
        occupancy_weighted_ += static_cast<double>(k.est_occupancy_percent) * static_cast<double>(hi - lo);
        occupancy_time_ += static_cast<double>(hi - lo);
      }
    }
  }

  GpuMetrics Finish() {
    busy_.Finish([&](Interval r) { busy_ns_ += Overlap(r); });
    while (!ends_.empty()) PopEnd();
    g_.busy_ns = busy_ns_;
    if (g_.window_ns > 0) g_.busy_percent = 100.0 * static_cast<double>(g_.busy_ns) / static_cast<double>(g_.window_ns);
    if (any_edge_ && g_.window_ns > 0) g_.sm_efficiency_percent = 100.0 * weighted_ / static_cast<double>(g_.window_ns);
    if (occupancy_time_ > 0) g_.achieved_occupancy_percent = occupancy_weighted_ / occupancy_time_;
    return g_;
  }

 private:
  TimeNs Overlap(Interval r) const {
    const TimeNs lo = std::max(r.start, window_.start), hi = std::min(r.end, window_.end);
    return lo < hi ? hi - lo : 0;
  }
  void PopEnd() {
    const auto [t, seq, delta] = ends_.top();
    (void)seq;
    ends_.pop();
    Edge(t, delta);
  }
  /// SM efficiency: sum of concurrent kernels' blocks-per-SM, capped at 1, over time.
  void Edge(TimeNs t, double delta) {
    if (!any_edge_) last_ = t, any_edge_ = true;
    if (t > last_ && level_ > 1e-12) {
      const TimeNs lo = std::max(last_, window_.start), hi = std::min(t, window_.end);
      if (lo < hi) weighted_ += std::min(level_, 1.0) * static_cast<double>(hi - lo);
    }
    last_ = t;
    level_ += delta;
  }

  Interval window_;
  GpuMetrics g_;
  UnionBuilder busy_;
  TimeNs busy_ns_ = 0;
  using End = std::tuple<TimeNs, int64_t, double>;  // ends in time order, then kernel order
  std::priority_queue<End, std::vector<End>, std::greater<>> ends_;
  bool any_edge_ = false;
  TimeNs last_ = 0;
  double level_ = 0, weighted_ = 0;
  double occupancy_weighted_ = 0, occupancy_time_ = 0;
};

}  // namespace

StatusOr<std::vector<GpuMetrics>> MeasureGpus(const TraceEvents& events, const std::vector<int>& devices, Interval window) {
  std::vector<GpuMeter> meters;
  for (int d : devices) meters.emplace_back(d, window);
  auto kernels = events.kernels();
  int64_t seq = 0;
  for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next(), ++seq) {
    const auto it = std::find(devices.begin(), devices.end(), k->device);
    if (it != devices.end()) meters[static_cast<size_t>(it - devices.begin())].Add(*k, seq);
  }
  RETURN_IF_ERROR(kernels.status());
  std::vector<GpuMetrics> out;
  for (auto& m : meters) out.push_back(m.Finish());
  return out;
}

}  // namespace gputriage::analysis
