// Joins by sorting (see joins.h). Each join writes one record per event of either
// side into a SortedSpill ordered by (key, side, index), walks the groups of equal
// keys, and writes what each event learns into another spill ordered by index.
#include "src/analysis/joins.h"

#include <algorithm>

#include "src/analysis/roofline.h"
#include "src/analysis/shapes.h"

namespace gputriage::analysis {
namespace {

/// A record of the correlation join: a runtime call (side 0), a kernel (1) or a
/// memory operation (2).
struct CorrelationRecord {
  int64_t correlation = -1;
  int64_t seq = -1;
  TimeNs start = 0, end = 0;
  uint8_t side = 0;
  RuntimeCallKind kind = RuntimeCallKind::kOther;
};
struct ByCorrelation {
  bool operator()(const CorrelationRecord& a, const CorrelationRecord& b) const {
    if (a.correlation != b.correlation) return a.correlation < b.correlation;
    if (a.side != b.side) return a.side < b.side;
    return a.seq < b.seq;
  }
};

/// The host step a call starting at t is looked for in, as AlignSteps' walk finds
/// it: the first step whose end is after t (ends as a running maximum, so the
/// search works when steps overlap).
class HostStepFinder {
 public:
  explicit HostStepFinder(const std::vector<Interval>& steps) : steps_(steps) {
    TimeNs top = std::numeric_limits<TimeNs>::min();
    for (const auto& s : steps) ends_.push_back(top = std::max(top, s.end));
  }
  /// The step holding the call [start, end), or -1.
  int64_t Find(Interval call) const {
    const auto it = std::upper_bound(ends_.begin(), ends_.end(), call.start);
    if (it == ends_.end()) return -1;
    const auto i = static_cast<size_t>(it - ends_.begin());
    if (call.start < steps_[i].start || call.end > steps_[i].end) return -1;
    return static_cast<int64_t>(i);
  }

 private:
  const std::vector<Interval>& steps_;
  std::vector<TimeNs> ends_;
};

/// A record of the external-id join: a CPU operator (side 0), matrix shapes (1) or a kernel (2).
struct OperatorRecord {
  int64_t external_id = -1;
  int64_t seq = -1;
  NameId a = kNoName, b = kNoName;
  uint8_t side = 0;
  bool communication = false;
};
struct ByExternalId {
  bool operator()(const OperatorRecord& x, const OperatorRecord& y) const {
    if (x.external_id != y.external_id) return x.external_id < y.external_id;
    if (x.side != y.side) return x.side < y.side;
    return x.seq < y.seq;
  }
};

/// A record of the shape join: matrix shapes (side 0) or a kernel (1).
struct ShapeRecord {
  int64_t external_id = -1;
  int64_t seq = -1;
  TimeNs ns = 0;
  uint8_t side = 0;
  bool covered = false;     // shapes: the cost model covers the operator
  bool off_tile = false;    // shapes: off the tensor-core tile (when its kernels are found)
  bool matrix = false;      // kernel: a matrix class
  bool communication = false;
  bool on_alignment_device = false;
  bool on_roofline_device = false;
  Precision precision = Precision::kUnknown;
};
struct ByShapeKey {
  bool operator()(const ShapeRecord& x, const ShapeRecord& y) const {
    if (x.external_id != y.external_id) return x.external_id < y.external_id;
    if (x.side != y.side) return x.side < y.side;
    return x.seq < y.seq;
  }
};

}  // namespace

StatusOr<LaunchJoin> JoinLaunches(const TraceEvents& events, const std::vector<Interval>& host_steps,
                                  const SpillOptions& spill) {
  LaunchJoin out;
  out.kernels = std::make_unique<LaunchJoin::Launches>(spill);
  out.memory_ops = std::make_unique<LaunchJoin::Launches>(spill);
  out.copy_ends = std::make_unique<SortedSpill<CopyEnd, BySeq>>(spill);
  out.step_device.assign(host_steps.size(), Interval{std::numeric_limits<TimeNs>::max(), std::numeric_limits<TimeNs>::min()});
  out.step_launched.assign(host_steps.size(), 0);

  SortedSpill<CorrelationRecord, ByCorrelation> records(spill);
  {
    auto calls = events.runtime_calls();
    int64_t seq = 0;
    for (const RuntimeCall* r = calls.Next(); r != nullptr; r = calls.Next(), ++seq)
      if (r->correlation >= 0) RETURN_IF_ERROR(records.Add({r->correlation, seq, r->time.start, r->time.end, 0, r->kind}));
    RETURN_IF_ERROR(calls.status());
    auto kernels = events.kernels();
    seq = 0;
    for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next(), ++seq)
      if (k->correlation >= 0) RETURN_IF_ERROR(records.Add({k->correlation, seq, k->time.start, k->time.end, 1, {}}));
    RETURN_IF_ERROR(kernels.status());
    auto memory = events.memory_ops();
    seq = 0;
    for (const MemoryActivity* m = memory.Next(); m != nullptr; m = memory.Next(), ++seq)
      if (m->correlation >= 0) RETURN_IF_ERROR(records.Add({m->correlation, seq, m->time.start, m->time.end, 2, {}}));
    RETURN_IF_ERROR(memory.status());
  }
  RETURN_IF_ERROR(records.Finish());

  const HostStepFinder finder(host_steps);
  std::vector<CorrelationRecord> calls;  // of the current correlation id, in call order
  std::vector<int64_t> call_steps;
  std::vector<int64_t> memcpy_calls;  // their seq, for the copy ends
  int64_t group = -1;
  TimeNs copy_end = std::numeric_limits<TimeNs>::min();
  auto close_group = [&]() -> Status {
    if (copy_end != std::numeric_limits<TimeNs>::min())
      for (int64_t seq : memcpy_calls) RETURN_IF_ERROR(out.copy_ends->Add({seq, copy_end}));
    calls.clear();
    call_steps.clear();
    memcpy_calls.clear();
    copy_end = std::numeric_limits<TimeNs>::min();
    return Status::Ok();
  };
  auto cursor = records.Open();
  CorrelationRecord r;
  while (cursor.Next(&r)) {
    if (r.correlation != group) {
      RETURN_IF_ERROR(close_group());
      group = r.correlation;
    }
    if (r.side == 0) {
      calls.push_back(r);
      call_steps.push_back(finder.Find({r.start, r.end}));
      if (r.kind == RuntimeCallKind::kMemcpy) memcpy_calls.push_back(r.seq);
      continue;
    }
    if (r.side == 2) copy_end = std::max(copy_end, r.end);
    OpLaunch launch;
    launch.seq = r.seq;
    if (!calls.empty()) {
      launch.has_launch = true;
      launch.launch_start = calls.front().start;
      launch.launch_end = calls.front().end;
      launch.kind = calls.front().kind;
    }
    // Every call of the id counts, as AlignSteps walks calls and then their operations.
    for (int64_t step : call_steps) {
      if (step < 0) continue;
      auto& device = out.step_device[static_cast<size_t>(step)];
      device.start = std::min(device.start, r.start);
      device.end = std::max(device.end, r.end);
      ++out.step_launched[static_cast<size_t>(step)];
      launch.in_host_step = true;
      out.any_launched = true;
    }
    RETURN_IF_ERROR((r.side == 1 ? *out.kernels : *out.memory_ops).Add(launch));
  }
  RETURN_IF_ERROR(cursor.status());
  RETURN_IF_ERROR(close_group());
  RETURN_IF_ERROR(out.kernels->Finish());
  RETURN_IF_ERROR(out.memory_ops->Finish());
  RETURN_IF_ERROR(out.copy_ends->Finish());
  return out;
}

StatusOr<std::unique_ptr<KernelOperators>> JoinKernelOperators(const TraceEvents& events, const SpillOptions& spill) {
  SortedSpill<OperatorRecord, ByExternalId> records(spill);
  {
    auto spans = events.cpu_spans();
    int64_t seq = 0;
    for (const CpuSpan* c = spans.Next(); c != nullptr; c = spans.Next(), ++seq) {
      const bool communication = c->kind == CpuSpanKind::kCommunication;
      if (c->external_id >= 0 && (communication || c->first_input_type != kNoName))
        RETURN_IF_ERROR(records.Add({c->external_id, seq, c->first_input_type, kNoName, 0, communication}));
    }
    RETURN_IF_ERROR(spans.status());
    auto shapes = events.matrix_shapes();
    seq = 0;
    for (const MatrixOpShapes* s = shapes.Next(); s != nullptr; s = shapes.Next(), ++seq)
      if (s->external_id >= 0) RETURN_IF_ERROR(records.Add({s->external_id, seq, s->name, s->dtype, 1, false}));
    RETURN_IF_ERROR(shapes.status());
    auto kernels = events.kernels();
    seq = 0;
    for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next(), ++seq)
      if (k->external_id >= 0) RETURN_IF_ERROR(records.Add({k->external_id, seq, kNoName, kNoName, 2, false}));
    RETURN_IF_ERROR(kernels.status());
  }
  RETURN_IF_ERROR(records.Finish());
  auto out = std::make_unique<KernelOperators>(spill);
  int64_t group = -1;
  KernelOperator known;  // what the group's operators say
  auto cursor = records.Open();
  OperatorRecord r;
  while (cursor.Next(&r)) {
    if (r.external_id != group) {
      group = r.external_id;
      known = KernelOperator();
    }
    if (r.side == 0) {
      known.communication_op = known.communication_op || r.communication;
      if (known.input_type == kNoName) known.input_type = r.a;  // the first with a type
    } else if (r.side == 1) {
      if (!known.has_shapes) known.has_shapes = true, known.op_name = r.a, known.op_dtype = r.b;
    } else {
      KernelOperator k = known;
      k.seq = r.seq;
      if (k.communication_op || k.input_type != kNoName || k.has_shapes) RETURN_IF_ERROR(out->Add(k));
    }
  }
  RETURN_IF_ERROR(cursor.status());
  RETURN_IF_ERROR(out->Finish());
  return out;
}

StatusOr<ShapeJoin> JoinShapes(const TraceEvents& events, KernelOperators& operators,
                               const std::function<KernelForShapes(const KernelActivity&)>& kernel,
                               const SpillOptions& spill) {
  const Recording& rec = events.recording();
  SortedSpill<ShapeRecord, ByShapeKey> records(spill);
  {
    auto shapes = events.matrix_shapes();
    int64_t seq = 0;
    for (const MatrixOpShapes* s = shapes.Next(); s != nullptr; s = shapes.Next(), ++seq) {
      if (s->external_id < 0) continue;
      ShapeRecord r;
      r.external_id = s->external_id;
      r.seq = seq;
      r.side = 0;
      OpCost unused;
      r.covered = MatrixOpCost(rec.names.View(s->name), *s, 2, unused);
      r.off_tile = !OffTileDims(rec.names.View(s->name), rec.names.View(s->dtype), *s).empty();
      RETURN_IF_ERROR(records.Add(r));
    }
    RETURN_IF_ERROR(shapes.status());
    auto kernels = events.kernels();
    SeqZip<KernelOperator> ops(operators);
    seq = 0;
    for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next(), ++seq) {
      if (k->external_id < 0) continue;
      const KernelOperator* op = ops.At(seq);
      if (op == nullptr || !op->has_shapes) continue;  // no shapes share its id
      const KernelForShapes info = kernel(*k);
      ShapeRecord r;
      r.external_id = k->external_id;
      r.seq = seq;
      r.side = 1;
      r.ns = k->time.duration();
      r.matrix = IsMatrixClass(info.kind.cls);
      r.communication = info.kind.cls == KernelClass::kCommunication;
      r.precision = info.kind.precision;
      r.on_alignment_device = info.on_alignment_device;
      r.on_roofline_device = info.on_roofline_device;
      RETURN_IF_ERROR(records.Add(r));
    }
    RETURN_IF_ERROR(kernels.status());
    RETURN_IF_ERROR(ops.status());
  }
  RETURN_IF_ERROR(records.Finish());

  ShapeJoin out;
  out.by_shape = std::make_unique<SortedSpill<ShapeKernelTime, BySeq>>(spill);
  out.misaligned_kernels = std::make_unique<SortedSpill<ShapeJoin::Misaligned, BySeq>>(spill);
  // A group: the shapes of one external id, then its kernels; the sums are over the
  // kernels, and every shapes record of the id reads them.
  std::vector<ShapeRecord> group_shapes;
  std::vector<int64_t> group_kernels;
  ShapeKernelTime sums;
  bool covered = false;
  auto close_group = [&]() -> Status {
    bool off_tile = false;
    for (const auto& s : group_shapes) {
      ShapeKernelTime t = sums;
      t.seq = s.seq;
      t.roofline_found = covered;
      if (!covered) t.roofline_ns = 0, t.roofline_matrix_ns = 0, t.roofline_by_precision = {};
      off_tile = off_tile || (s.off_tile && t.alignment_found);
      RETURN_IF_ERROR(out.by_shape->Add(t));
    }
    if (off_tile)
      for (int64_t k : group_kernels) RETURN_IF_ERROR(out.misaligned_kernels->Add({k}));
    group_shapes.clear();
    group_kernels.clear();
    sums = ShapeKernelTime();
    covered = false;
    return Status::Ok();
  };
  int64_t group = -1;
  auto cursor = records.Open();
  ShapeRecord r;
  while (cursor.Next(&r)) {
    if (r.external_id != group) {
      RETURN_IF_ERROR(close_group());
      group = r.external_id;
    }
    if (r.side == 0) {
      group_shapes.push_back(r);
      covered = covered || r.covered;
      continue;
    }
    group_kernels.push_back(r.seq);
    if (r.on_alignment_device && r.matrix) {
      sums.alignment_found = true;
      sums.alignment_ns += r.ns;
    }
    if (r.on_roofline_device && !r.communication) {
      sums.roofline_ns += r.ns;
      if (r.matrix) {
        sums.roofline_matrix_ns += r.ns;
        sums.roofline_by_precision[static_cast<size_t>(r.precision)] += r.ns;
      }
    }
  }
  RETURN_IF_ERROR(cursor.status());
  RETURN_IF_ERROR(close_group());
  RETURN_IF_ERROR(out.by_shape->Finish());
  RETURN_IF_ERROR(out.misaligned_kernels->Finish());
  return out;
}

}  // namespace gputriage::analysis
