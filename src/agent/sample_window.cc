#include "src/agent/sample_window.h"

#include <algorithm>
#include <array>

namespace gputriage {

void SampleWindow::Add(size_t device, Metric metric, TimeNs t, double value) {
  if (device >= MetricSet::kMaxDevices) return;
  if (devices_.size() <= device) devices_.resize(device + 1);
  Series& s = devices_[device].series[static_cast<size_t>(metric)];
  // Out-of-order values (a clock step) are dropped: the window is in time order.
  if (!s.empty() && t < s.back().first) return;
  s.emplace_back(t, value);
  ++values_;
  while (!s.empty() && (s.front().first < t - window_ns_ || s.size() > kMaxValuesPerSeries)) {
    s.pop_front();
    --values_;
  }
}

void SampleWindow::Prune(TimeNs now) {
  for (auto& d : devices_)
    for (auto& s : d.series)
      while (!s.empty() && s.front().first < now - window_ns_) {
        s.pop_front();
        --values_;
      }
}

void SampleWindow::Forget(size_t device) {
  if (device >= devices_.size()) return;
  for (auto& s : devices_[device].series) {
    values_ -= s.size();
    Series().swap(s);
  }
}

int64_t SampleWindow::Replay(size_t device, MetricSet& out, size_t out_device) const {
  if (device >= devices_.size()) return 0;
  // In time order across the metrics, as the samples arrived: the readings of one
  // sample time must reach MetricSet::Add together (LoadedReadings joins them).
  const auto& series = devices_[device].series;
  std::array<size_t, kNumMetrics> next{};
  int64_t n = 0;
  for (;;) {
    int first = -1;
    for (int m = 0; m < kNumMetrics; ++m) {
      const auto& s = series[static_cast<size_t>(m)];
      if (next[static_cast<size_t>(m)] < s.size() &&
          (first < 0 || s[next[static_cast<size_t>(m)]].first <
                            series[static_cast<size_t>(first)][next[static_cast<size_t>(first)]].first))
        first = m;
    }
    if (first < 0) break;
    const auto& [t, v] = series[static_cast<size_t>(first)][next[static_cast<size_t>(first)]++];
    out.Add(out_device, static_cast<Metric>(first), t, v);
    ++n;
  }
  return n;
}

std::pair<TimeNs, TimeNs> SampleWindow::Span(size_t device) const {
  if (device >= devices_.size()) return {0, 0};
  TimeNs first = 0, last = 0;
  bool any = false;
  for (const auto& s : devices_[device].series) {
    if (s.empty()) continue;
    first = any ? std::min(first, s.front().first) : s.front().first;
    last = any ? std::max(last, s.back().first) : s.back().first;
    any = true;
  }
  return {first, last};
}

}  // namespace gputriage
