// Shared pieces of the analysis stage (private to src/analysis).
#pragma once

#include <algorithm>
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"
#include "src/analysis/intervals.h"

namespace gputriage::analysis {

/// The median (upper middle) of `v`, 0 when empty; reorders `v`.
template <typename T>
double Median(std::vector<T>& v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return static_cast<double>(*mid);
}

/// A device-side operation (kernel, memcpy or memset) as the step and idle
/// analyses see it.
struct DeviceOp {
  Interval time;
  int64_t correlation = -1;
  int32_t device = -1;
  int32_t stream = -1;
  bool is_kernel = false;
  bool is_communication = false;
};

/// Joins of the model built once per recording.
struct Index {
  std::vector<DeviceOp> device_ops;  // sorted by start
  std::unordered_map<int64_t, std::vector<size_t>> ops_by_correlation;
  std::unordered_map<int64_t, const RuntimeCall*> runtime_by_correlation;
  intervals::List data_loader;  // merged DataLoader spans on the host
  intervals::List host_sync;    // merged host calls that block on the device, outside data_loader
  intervals::List device_sync;  // merged device-side waits (cuda_sync)
};

/// Builds the index; `is_comm_kernel[i]` says whether recording.kernels[i] is communication.
Index BuildIndex(const Recording& recording, const std::vector<bool>& is_comm_kernel);

struct StepWindows {
  std::vector<int64_t> numbers;
  std::vector<Interval> windows;  // device-aligned, non-overlapping, in order
  bool from_markers = false;
  int dropped_tail_steps = 0;
};

/// ProfilerStep spans re-aligned to the device as torch-tb-profiler does (steps.cc).
StepWindows AlignSteps(const Recording& recording, const Index& index);

/// Per-step time in the eight categories (steps.cc).
std::vector<StepBreakdown> BreakDownSteps(const Recording& recording, const Index& index,
                                          const StepWindows& steps);

/// GPU busy, SM efficiency and occupancy of one device over [window) (steps.cc).
GpuMetrics MeasureGpu(const Recording& recording, int device, Interval window);

/// Idle time of a device inside the steps, by cause (idle_gaps.cc).
IdleBreakdown AttributeDeviceIdle(const Index& index, int device, const intervals::List& steps);

/// The same per stream: gaps between consecutive operations on each stream.
std::vector<StreamIdle> AttributeStreamIdle(const Index& index, int device, const intervals::List& steps);

}  // namespace gputriage::analysis
