// Shared pieces of the analysis stage (private to src/analysis).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"
#include "src/analysis/interval_stream.h"
#include "src/analysis/intervals.h"
#include "src/analysis/joins.h"
#include "src/analysis/trace_events.h"

namespace gputriage::analysis {

/// The median (upper middle) of values added one by one, held as counts of each
/// distinct value (kernel durations repeat: a trace has far fewer distinct ones).
class CountingMedian {
 public:
  void Add(TimeNs v) {
    ++counts_[v];
    ++n_;
  }
  double Median() const {
    if (n_ == 0) return 0;
    int64_t rank = n_ / 2;  // the element std::nth_element puts at size()/2
    for (const auto& [v, c] : counts_) {
      if (rank < c) return static_cast<double>(v);
      rank -= c;
    }
    return 0;
  }

 private:
  std::map<TimeNs, int64_t> counts_;
  int64_t n_ = 0;
};

/// The median (upper middle) of `v`, 0 when empty; reorders `v`.
template <typename T>
double Median(std::vector<T>& v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return static_cast<double>(*mid);
}

/// A kernel's class as the analyses use it: by name, refined by the operator that
/// launched it (analyze.cc).
using KindByName = std::unordered_map<NameId, KernelKind>;

/// A span of time with a name: a piece of an OS call (OsCall) outside the
/// DataLoader spans and blocking CUDA calls.
struct NamedInterval {
  Interval time;
  NameId name = kNoName;
};
using NamedIntervalSpool = SortedSpill<NamedInterval, InAddedOrder>;

/// What every pass over a trace shares: its events, the joins made once, and the
/// merged host intervals the idle attribution and the replay query.
struct TracePrep {
  explicit TracePrep(const TraceEvents& e) : events(e), spill(e.spool_options()) {}
  const TraceEvents& events;
  SpillOptions spill;
  int threads = 1;  // independent passes run on this many threads
  const KindByName* kinds = nullptr;
  std::unique_ptr<KernelOperators> operators;  // by kernel index
  LaunchJoin launches;
  /// Merged, in order: DataLoader spans; blocking host calls outside them; device-side waits.
  std::unique_ptr<IntervalSpool> data_loader, host_sync, device_sync;
  bool has_data_loader = false;
  /// The OS calls of the thread that launched the most work (an OS runtime trace),
  /// outside the DataLoader spans and blocking CUDA calls, disjoint and in order;
  /// null where the source traced none.
  std::unique_ptr<NamedIntervalSpool> os_calls;
  int64_t os_thread = -1;
  /// That thread's CPU samples (a CPU sampler) outside the DataLoader spans,
  /// blocking CUDA calls and OS calls, by module: where it was running. Null
  /// where the source has no samples.
  std::unique_ptr<NamedIntervalSpool> running_samples;
};

/// Builds the merged host intervals of `prep` (one pass over CPU spans, runtime calls and syncs).
Status BuildHostIntervals(TracePrep& prep);

/// A device-side operation (kernel, memcpy or memset) as the step, idle and replay
/// passes see it, with its launching call.
struct DeviceOp {
  Interval time;
  int64_t correlation = -1;
  int32_t device = -1;
  int32_t stream = -1;
  bool is_kernel = false;
  bool is_communication = false;
  int64_t seq = -1;  // index among the kernels, or among the memory operations
  const KernelActivity* kernel = nullptr;  // valid until the next Next()
  const MemoryActivity* memory = nullptr;
  OpLaunch launch;  // has_launch false when no call was recorded
  KernelOperator launched_by;  // what the kernel's CPU operators say (seq -1: nothing)
};

/// Kernels and memory operations merged by start (kernels first at equal starts),
/// each with its launch and, for kernels, whether it is communication.
class DeviceOpCursor {
 public:
  explicit DeviceOpCursor(const TracePrep& prep);
  const DeviceOp* Next();
  Status status() const;

 private:
  const TracePrep& prep_;
  EventCursor<KernelActivity> kernels_;
  EventCursor<MemoryActivity> memory_;
  SeqZip<OpLaunch> kernel_launches_, memory_launches_;
  SeqZip<KernelOperator> operators_;
  const KernelActivity* k_ = nullptr;
  const MemoryActivity* m_ = nullptr;
  int64_t k_seq_ = 0, m_seq_ = 0;
  KernelActivity kernel_copy_;  // the current operation's event: the cursors move on
  MemoryActivity memory_copy_;
  DeviceOp op_;
};

struct StepWindows {
  std::vector<int64_t> numbers;
  std::vector<Interval> windows;  // device-aligned, non-overlapping, in order
  bool from_markers = false;
  int dropped_tail_steps = 0;
};

/// The host steps AlignSteps starts from: the ProfilerStep spans, or without them
/// one window over the host activity (over the device activity when there is none).
struct HostSteps {
  std::vector<int64_t> numbers;
  std::vector<Interval> spans;
  bool from_markers = false;
};
StatusOr<HostSteps> FindHostSteps(const TraceEvents& events);

/// The host steps re-aligned to the device as torch-tb-profiler does (steps.cc);
/// `prep.launches` joined over the same host steps.
StatusOr<StepWindows> AlignSteps(const TracePrep& prep, const HostSteps& host);

/// Per-step time in the eight categories (steps.cc).
StatusOr<std::vector<StepBreakdown>> BreakDownSteps(const TracePrep& prep, const StepWindows& steps);

/// GPU busy, SM efficiency and occupancy of each device in `devices` over [window) (steps.cc).
StatusOr<std::vector<GpuMetrics>> MeasureGpus(const TraceEvents& events, const std::vector<int>& devices, Interval window);

struct IdleAttribution {
  IdleBreakdown device;              // the device's idle time inside the steps, by cause
  std::vector<StreamIdle> streams;   // the same per stream: gaps between its operations
  /// Of the device's host_wait: the launching thread inside OS calls, by call
  /// (where prep.os_calls is set).
  std::map<NameId, TimeNs> host_wait_os_calls;
  /// The launching thread's running CPU samples inside the host_wait, by module.
  std::map<NameId, int64_t> host_wait_running_samples;
};

/// Idle time of a device and of its streams inside the steps, by cause (idle_gaps.cc).
StatusOr<IdleAttribution> AttributeIdle(const TracePrep& prep, int device, const intervals::List& steps);

}  // namespace gputriage::analysis
