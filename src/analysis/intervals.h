// Set operations on sorted, disjoint interval lists ("merged" lists). All are
// linear two-pointer walks; inputs to Merge may be in any order.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "gputriage/model.h"

namespace gputriage::intervals {

using List = std::vector<Interval>;

/// Widens `hull` to cover `t` (sets it to `t` when empty): the extent of what was seen.
inline void Widen(std::optional<Interval>& hull, Interval t) {
  hull = hull ? Interval{std::min(hull->start, t.start), std::max(hull->end, t.end)} : t;
}

/// Sorts and joins overlapping or touching intervals; drops empty ones.
inline List Merge(List in) {
  std::sort(in.begin(), in.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  List out;
  out.reserve(in.size());
  for (const auto& r : in) {
    if (r.end <= r.start) continue;
    if (!out.empty() && r.start <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

inline TimeNs Sum(const List& list) {
  TimeNs total = 0;
  for (const auto& r : list) total += r.duration();
  return total;
}

/// a ∩ b for merged lists.
inline List Intersect(const List& a, const List& b) {
  List out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const TimeNs lo = std::max(a[i].start, b[j].start);
    const TimeNs hi = std::min(a[i].end, b[j].end);
    if (lo < hi) out.push_back({lo, hi});
    if (a[i].end < b[j].end) ++i;
    else ++j;
  }
  return out;
}

/// a − b for merged lists.
inline List Subtract(const List& a, const List& b) {
  List out;
  size_t j = 0;
  for (const auto& r : a) {
    TimeNs cursor = r.start;
    while (j < b.size() && b[j].end <= cursor) ++j;
    size_t k = j;
    while (k < b.size() && b[k].start < r.end) {
      if (b[k].start > cursor) out.push_back({cursor, b[k].start});
      cursor = std::max(cursor, b[k].end);
      if (cursor >= r.end) break;
      ++k;
    }
    if (cursor < r.end) out.push_back({cursor, r.end});
  }
  return out;
}

/// |list ∩ [window)| without building the intersection.
inline TimeNs OverlapWith(const List& list, Interval window) {
  auto it = std::lower_bound(list.begin(), list.end(), window.start,
                             [](const Interval& r, TimeNs t) { return r.end <= t; });
  TimeNs total = 0;
  for (; it != list.end() && it->start < window.end; ++it) {
    total += std::min(it->end, window.end) - std::max(it->start, window.start);
  }
  return total;
}

}  // namespace gputriage::intervals
