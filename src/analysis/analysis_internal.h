// Shared pieces of the analysis stage (private to src/analysis).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
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

/// Correlation id (>= 0) → a 32-bit index, by open addressing in two flat arrays:
/// a trace has a correlation per launch, hundreds of thousands of them, and a
/// node-based map spends an allocation on each.
class CorrelationMap {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  explicit CorrelationMap(size_t expected = 0) { Rehash(std::max<size_t>(16, expected * 2)); }
  /// Stores `value` under `key` unless the key has one (the first stays).
  void Insert(int64_t key, uint32_t value) {
    if (2 * (size_ + 1) > keys_.size()) Rehash(keys_.size() * 2);
    size_t i = Slot(key);
    if (keys_[i] == key) return;
    keys_[i] = key, values_[i] = value, ++size_;
  }
  /// Stores `value` under `key`, replacing any.
  void Assign(int64_t key, uint32_t value) {
    Insert(key, value);
    values_[Slot(key)] = value;
  }
  /// The value under `key`, kNone if none (or key < 0).
  uint32_t Find(int64_t key) const {
    if (key < 0) return kNone;
    const size_t i = Slot(key);
    return keys_[i] == key ? values_[i] : kNone;
  }

 private:
  size_t Slot(int64_t key) const {
    size_t i = static_cast<size_t>((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> 16) & (keys_.size() - 1);
    while (keys_[i] != key && keys_[i] != -1) i = (i + 1) & (keys_.size() - 1);
    return i;
  }
  void Rehash(size_t capacity) {
    size_t n = 16;
    while (n < capacity) n *= 2;
    std::vector<int64_t> keys = std::move(keys_);
    std::vector<uint32_t> values = std::move(values_);
    keys_.assign(n, -1);
    values_.assign(n, kNone);
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != -1) {
        const size_t j = Slot(keys[i]);
        keys_[j] = keys[i], values_[j] = values[i], ++size_;
      }
  }
  std::vector<int64_t> keys_;
  std::vector<uint32_t> values_;
  size_t size_ = 0;
};

/// Joins of the model built once per recording.
struct Index {
  std::vector<DeviceOp> device_ops;  // sorted by start
  /// The device operations of a correlation id: the first, then each one's next
  /// (device_ops order); CorrelationMap::kNone ends the list.
  CorrelationMap first_op_by_correlation;
  std::vector<uint32_t> next_op_same_correlation;
  CorrelationMap runtime_by_correlation;  // index into recording.runtime_calls (the first call)
  const std::vector<RuntimeCall>* runtime_calls = nullptr;
  /// The runtime call that launched correlation id `c`, nullptr if none recorded.
  const RuntimeCall* Launch(int64_t c) const {
    const uint32_t i = runtime_by_correlation.Find(c);
    return i == CorrelationMap::kNone ? nullptr : &(*runtime_calls)[i];
  }
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
