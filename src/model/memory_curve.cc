// A device's memory curve from a trace's [memory] events: sorted, summed where
// the trace has no totals, its peak found, decimated to what a chart needs.
#include <algorithm>

#include "gputriage/model.h"

namespace gputriage {
namespace {

/// At most kMaxCurvePoints points: each of kMaxCurvePoints / 2 runs of
/// consecutive points keeps its lowest and its highest, in time order, so every
/// peak and trough of the curve (the peak itself among them) survives.
void Decimate(std::vector<MemoryPoint>& curve) {
  const size_t buckets = DeviceMemoryUse::kMaxCurvePoints / 2;
  if (curve.size() <= DeviceMemoryUse::kMaxCurvePoints) return;
  std::vector<MemoryPoint> kept;
  kept.reserve(DeviceMemoryUse::kMaxCurvePoints);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t from = curve.size() * b / buckets, to = curve.size() * (b + 1) / buckets;
    if (from == to) continue;
    auto [low, high] = std::minmax_element(curve.begin() + static_cast<std::ptrdiff_t>(from),
                                           curve.begin() + static_cast<std::ptrdiff_t>(to),
                                           [](const MemoryPoint& a, const MemoryPoint& c) { return a.allocated < c.allocated; });
    if (low > high) std::swap(low, high);
    kept.push_back(*low);
    if (high != low) kept.push_back(*high);
  }
  curve = std::move(kept);
}

}  // namespace

void FinishMemoryCurve(DeviceMemoryUse& use) {
  auto& curve = use.curve;
  std::stable_sort(curve.begin(), curve.end(), [](const MemoryPoint& a, const MemoryPoint& b) { return a.t < b.t; });
  if (use.relative) {  // each point holds its event's Bytes: the running sum is the net allocated since the trace began
    int64_t sum = 0;
    for (auto& p : curve) p.allocated = sum += p.allocated;
  }
  use.peak_allocated = 0;
  use.peak_reserved = -1;  // unknown unless a point says
  use.peak_at = curve.empty() ? 0 : curve.front().t;
  for (const auto& p : curve) {
    if (p.allocated > use.peak_allocated) use.peak_allocated = p.allocated, use.peak_at = p.t;
    use.peak_reserved = std::max(use.peak_reserved, p.reserved);
  }
  Decimate(curve);
}

}  // namespace gputriage
