// The joins of a trace, made by sorting instead of by lookup tables, so that they
// hold no more than the memory budget however long the trace: records of both sides
// are sorted by the key (correlation id, external id) through SortedSpill, joined
// group by group, and the results sorted back into the events' own order, where the
// analyses read them beside the events (SeqZip).
//
//   correlation id:  runtime call  -> the device operations it launched (LaunchJoin)
//   external id:     CPU operator  -> the kernels it launched (OperatorJoin)
//                    matrix shapes -> the kernel time of their operator (ShapeJoin)
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gputriage/model.h"
#include "src/analysis/kernel_taxonomy.h"
#include "src/analysis/trace_events.h"

namespace gputriage::analysis {

struct BySeq {
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a.seq < b.seq;
  }
};

/// The records of a join result, read beside the events they belong to: At(seq)
/// for seq in increasing order gives the record of that event, or nullptr.
template <typename R>
class SeqZip {
 public:
  explicit SeqZip(const SortedSpill<R, BySeq>& spill) : cursor_(spill.Open()) { Pull(); }
  const R* At(int64_t seq) {
    while (has_ && next_.seq < seq) Pull();
    return has_ && next_.seq == seq ? &next_ : nullptr;
  }
  Status status() const { return cursor_.status(); }

 private:
  void Pull() { has_ = cursor_.Next(&next_); }
  typename SortedSpill<R, BySeq>::Cursor cursor_;
  R next_{};
  bool has_ = false;
};

/// A device operation's launching runtime call: the first call with its correlation id.
struct OpLaunch {
  int64_t seq = -1;  // index of the kernel or memory operation in its stream
  TimeNs launch_start = 0, launch_end = 0;
  RuntimeCallKind kind = RuntimeCallKind::kOther;
  bool has_launch = false;
  bool in_host_step = false;  // launched by a call inside a host step (AlignSteps)
};

/// A memcpy call's transfers: when the last one with its correlation id ended.
struct CopyEnd {
  int64_t seq = -1;  // index of the runtime call
  TimeNs end = 0;
};

struct LaunchJoin {
  using Launches = SortedSpill<OpLaunch, BySeq>;
  std::unique_ptr<Launches> kernels;
  std::unique_ptr<Launches> memory_ops;
  std::unique_ptr<SortedSpill<CopyEnd, BySeq>> copy_ends;
  /// Per host step (AlignSteps): the extent of the device work launched inside it,
  /// and how many (call, operation) pairs that was.
  std::vector<Interval> step_device;
  std::vector<int64_t> step_launched;
  bool any_launched = false;
};

/// Joins runtime calls to the device operations of their correlation id.
/// `host_steps`: the ProfilerStep spans (AlignSteps' host steps), sorted by start.
StatusOr<LaunchJoin> JoinLaunches(const TraceEvents& events, const std::vector<Interval>& host_steps,
                                  const SpillOptions& spill);

/// What the CPU operators of a kernel's external id say about it.
struct KernelOperator {
  int64_t seq = -1;  // kernel index
  NameId input_type = kNoName;  // the first operator's with an input type
  NameId op_name = kNoName;     // the first matrix operator with recorded shapes
  NameId op_dtype = kNoName;
  bool communication_op = false;  // an nccl:* / gloo:* operator has this id
  bool has_shapes = false;        // op_name/op_dtype are set
};

using KernelOperators = SortedSpill<KernelOperator, BySeq>;

StatusOr<std::unique_ptr<KernelOperators>> JoinKernelOperators(const TraceEvents& events, const SpillOptions& spill);

/// Per matrix operator with recorded shapes (in file order): the kernel time its
/// external id launched, as shapes.cc and roofline.cc measure it.
struct ShapeKernelTime {
  int64_t seq = -1;  // index of the MatrixOpShapes in file order
  bool alignment_found = false;  // a matrix kernel on the device has its id
  TimeNs alignment_ns = 0;       // those kernels' time
  bool roofline_found = false;   // the id is one the cost model covers
  TimeNs roofline_ns = 0;        // non-communication kernels on the device
  TimeNs roofline_matrix_ns = 0;
  std::array<TimeNs, kNumPrecisions> roofline_by_precision{};
};

/// What the kernel pass knows of one kernel that the shape join needs.
struct KernelForShapes {
  KernelKind kind;
  bool on_alignment_device = false;
  bool on_roofline_device = false;
};

struct ShapeJoin {
  std::unique_ptr<SortedSpill<ShapeKernelTime, BySeq>> by_shape;
  /// Kernels whose external id has an off-tile matrix operator (shapes.cc's rule), by index.
  struct Misaligned {
    int64_t seq = -1;
  };
  std::unique_ptr<SortedSpill<Misaligned, BySeq>> misaligned_kernels;
};

/// `kernel(seq, k)` describes kernel `seq` (called in kernel order, for kernels
/// with an external id whose operator has shapes).
StatusOr<ShapeJoin> JoinShapes(const TraceEvents& events, KernelOperators& operators,
                               const std::function<KernelForShapes(const KernelActivity&)>& kernel,
                               const SpillOptions& spill);

}  // namespace gputriage::analysis
