#include "src/analysis/trace_timeline.h"

#include <algorithm>

#include "src/analysis/interval_stream.h"

namespace gputriage::analysis {
namespace {

/// Adds one merged interval's time to `covered` (fractions of each slice of [start, end)).
void AddCoverage(std::vector<double>& covered, Interval iv, TimeNs start, TimeNs end) {
  if (end <= start) return;
  const double width = static_cast<double>(end - start) / static_cast<double>(covered.size());
  const TimeNs s = std::max(iv.start, start), e = std::min(iv.end, end);
  if (e <= s) return;
  const double fs = static_cast<double>(s - start) / width;
  const double fe = static_cast<double>(e - start) / width;
  const auto first = static_cast<size_t>(fs);
  const auto last = std::min(static_cast<size_t>(fe), covered.size() - 1);
  if (first >= covered.size()) return;
  if (first == last) {
    covered[first] += fe - fs;
    return;
  }
  covered[first] += static_cast<double>(first + 1) - fs;
  for (size_t b = first + 1; b < last; ++b) covered[b] += 1.0;
  covered[last] += std::min(fe, static_cast<double>(last + 1)) - static_cast<double>(last);
}

std::vector<double> AsPercent(std::vector<double> covered) {
  for (auto& c : covered) c = std::clamp(100.0 * c, 0.0, 100.0);
  return covered;
}

/// Coverage of the union of what `next()` gives in order of start; empty when it gives nothing.
template <typename Next>
std::vector<double> UnionCoveragePercent(Next&& next, TimeNs start, TimeNs end, int buckets) {
  std::vector<double> covered(static_cast<size_t>(buckets), 0.0);
  UnionBuilder merged;
  bool any = false;
  auto add = [&](Interval iv) { AddCoverage(covered, iv, start, end); };
  for (const Interval* iv = next(); iv != nullptr; iv = next()) merged.Add(*iv, add), any = true;
  merged.Finish(add);
  if (!any) return {};
  return AsPercent(std::move(covered));
}

}  // namespace

std::vector<double> CoveragePercent(const intervals::List& merged, TimeNs start, TimeNs end, int buckets) {
  std::vector<double> covered(static_cast<size_t>(buckets), 0.0);
  for (const auto& iv : merged) AddCoverage(covered, iv, start, end);
  return AsPercent(std::move(covered));
}

StatusOr<TraceTimeline> MeasureTimeline(const TraceEvents& events, int primary_device, const KernelExtents& extents,
                                        const std::vector<Interval>& step_windows, bool steps_from_markers) {
  TraceTimeline out;
  out.busy_extent = extents.primary;
  std::optional<Interval> span = extents.all;
  // Over the steps when ProfilerStep markers cut them, else over the kernels' extent.
  Interval window;
  if (extents.primary) window = *extents.primary;
  if (steps_from_markers && !step_windows.empty()) {
    window = step_windows.front();
    for (const auto& w : step_windows) window.start = std::min(window.start, w.start), window.end = std::max(window.end, w.end);
  }
  const bool drawn = extents.primary && window.end > window.start;
  if (drawn) {
    out.window = window;
    auto kernels = events.kernels();
    out.busy_percent = UnionCoveragePercent(
        [&]() -> const Interval* {
          for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next())
            if (k->device == primary_device && k->time.end > k->time.start) return &k->time;
          return nullptr;
        },
        window.start, window.end, kTimelineBuckets);
    RETURN_IF_ERROR(kernels.status());
  }
  auto spans = events.cpu_spans();
  out.data_wait_percent = UnionCoveragePercent(
      [&]() -> const Interval* {
        for (const CpuSpan* c = spans.Next(); c != nullptr; c = spans.Next()) {
          intervals::Widen(span, c->time);
          if (drawn && c->kind == CpuSpanKind::kDataLoader) return &c->time;
        }
        return nullptr;
      },
      window.start, window.end, kTimelineBuckets);
  RETURN_IF_ERROR(spans.status());
  if (out.busy_percent.empty()) out.data_wait_percent.clear();
  out.event_span = span;
  return out;
}

}  // namespace gputriage::analysis
