#include "src/trackers/tracker_feed.h"

#include <algorithm>
#include <string>

namespace gputriage {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

TrackerFeed::TrackerFeed(TimeNs every, TimeNs sample_interval, TimeNs step_hold)
    : every_(std::max<TimeNs>(every, kNsPerMs)),
      gap_cap_(4 * std::max<TimeNs>(sample_interval, kNsPerMs)),
      step_hold_(std::max<TimeNs>(step_hold, 0)) {}

void TrackerFeed::AddSample(size_t device, Metric metric, TimeNs t, double value) {
  if (device >= kMaxDevices) return;
  size_t slot = kNumTracked;
  for (size_t i = 0; i < kNumTracked; ++i)
    if (kTracked[i] == metric) slot = i;
  if (slot == kNumTracked) return;
  if (window_start_ == 0) window_start_ = t;
  if (origin_ == 0) origin_ = t;
  if (devices_.size() <= device) devices_.resize(device + 1);
  Accumulator& a = devices_[device][slot];
  // A sample stands for the time since the previous one (the first for one
  // interval's worth), capped: a recorder that stalled does not stretch a value.
  const TimeNs covered = a.last_t > 0 && t > a.last_t ? std::min(t - a.last_t, gap_cap_) : gap_cap_ / 4;
  a.weighted += value * static_cast<double>(covered);
  a.covered += static_cast<double>(covered);
  a.last_t = t;
  a.last_value = value;
  a.seen = true;
}

void TrackerFeed::NoteDevices(const MetricSet& metrics) {
  const size_t n = std::min(metrics.devices.size(), kMaxDevices);
  memory_total_bytes_.resize(n, 0);
  gpu_label_.resize(n);
  for (size_t d = 0; d < n; ++d) {
    const MetricDevice& device = metrics.devices[d];
    memory_total_bytes_[d] = static_cast<double>(device.memory_total_bytes);
    if (device.index >= 0)
      gpu_label_[d] = std::to_string(device.index) +
                      (device.mig_instance >= 0 ? ".mig" + std::to_string(device.mig_instance) : "");
  }
}

void TrackerFeed::AddSteps(const std::vector<MarkedStep>& steps) {
  for (const auto& s : steps) {
    if (s.span.end <= s.span.start) continue;
    if (origin_ == 0) origin_ = s.span.start;
    // The window the step ended in; one already given (a step later than the
    // hold) joins the first window still open, rather than being lost.
    // A step ending on a window's boundary ran in the window before it.
    int64_t window = s.span.end > origin_ ? (s.span.end - origin_ - 1) / every_ : 0;
    window = std::max(window, next_step_window_);
    StepWindow& w = step_windows_[window];
    ++w.steps;
    w.step_ns += static_cast<double>(s.span.end - s.span.start);
    w.data_ns += static_cast<double>(s.data_wait_ns());
    w.samples += static_cast<double>(s.samples);
    w.latest_step = std::max(w.latest_step, s.number);
    steps_seen_ = true;
    step_ends_.emplace(s.span.end, s.number);
    if (step_ends_.size() > kMaxStepEnds) {  // no GPU points to take them (no GPU sampled): keep the latest
      axis_step_ = std::max(axis_step_, step_ends_.begin()->second);
      step_ends_.erase(step_ends_.begin());
    }
    w.first_start = w.first_start == 0 ? s.span.start : std::min(w.first_start, s.span.start);
    w.last_end = std::max(w.last_end, s.span.end);
  }
}

TrackerPoint TrackerFeed::StepPoint(int64_t window, const StepWindow& w, bool last) const {
  TrackerPoint p;
  const TimeNs start = origin_ + window * every_;
  const TimeNs end = start + every_;
  // The last window of a run ends with its last step, not at the grid line.
  const TimeNs until = last ? std::min(end, std::max(w.last_end, start + 1)) : end;
  p.t_ns = until;
  p.step = w.latest_step;
  p.values.emplace_back("gputriage/step_time_ms", w.step_ns / static_cast<double>(w.steps) / 1e6);
  p.values.emplace_back("gputriage/data_wait_percent", w.step_ns > 0 ? 100.0 * w.data_ns / w.step_ns : 0.0);
  p.values.emplace_back("gputriage/steps", static_cast<double>(w.steps));
  // Every process's samples over the window's time: the job's throughput.
  if (w.samples > 0 && until > start)
    p.values.emplace_back("gputriage/samples_per_s", w.samples / (static_cast<double>(until - start) / 1e9));
  return p;
}

std::vector<TrackerPoint> TrackerFeed::Poll(TimeNs now, bool final) {
  std::vector<TrackerPoint> out;
  const bool gpu_window_over = window_start_ != 0 && (final || now + every_ / 20 >= window_start_ + every_);
  if (gpu_window_over)
    if (auto gpu = GpuWindow(now)) {
      if (expect_steps_ || steps_seen_) held_gpu_.push_back(std::move(*gpu));
      else out.push_back(std::move(*gpu));  // no step axis (yet): the window's index, at once
    }
  ReleaseGpuPoints(now, final, out);
  // Step windows whose hold is over (every one at the end), in grid order.
  while (!step_windows_.empty()) {
    auto it = step_windows_.begin();
    const TimeNs closes = origin_ + (it->first + 1) * every_;
    if (!final && now < closes + step_hold_) break;
    const bool last = final && std::next(it) == step_windows_.end();
    out.push_back(StepPoint(it->first, it->second, last));
    next_step_window_ = it->first + 1;
    step_windows_.erase(it);
  }
  // With a step hold longer than a window, a GPU point can be newer than the
  // step points it goes out with: oldest first for the trackers' sake.
  std::stable_sort(out.begin(), out.end(), [](const TrackerPoint& a, const TrackerPoint& b) { return a.t_ns < b.t_ns; });
  return out;
}

void TrackerFeed::ReleaseGpuPoints(TimeNs now, bool final, std::vector<TrackerPoint>& out) {
  size_t given = 0;
  for (; given < held_gpu_.size(); ++given) {
    TrackerPoint& p = held_gpu_[given];
    if (!final && now < p.t_ns + step_hold_) break;
    for (auto it = step_ends_.begin(); it != step_ends_.end() && it->first <= p.t_ns; it = step_ends_.erase(it))
      axis_step_ = std::max(axis_step_, it->second);
    p.step = axis_step_;
    out.push_back(std::move(p));
  }
  held_gpu_.erase(held_gpu_.begin(), held_gpu_.begin() + static_cast<std::ptrdiff_t>(given));
}

std::optional<TrackerPoint> TrackerFeed::GpuWindow(TimeNs now) {
  // A window ends on the recorder's once-a-second tick: a tick a few ms early
  // still ends it (5 % of the window), or a 1 s window would often last 2.
  if (window_start_ == 0) return std::nullopt;  // no sample yet
  TrackerPoint p;
  p.t_ns = now;
  p.step = points_;  // the window's index, until the job's step axis replaces it (Poll)
  const auto mean = [](const Accumulator& a) { return a.covered > 0 ? a.weighted / a.covered : a.last_value; };
  // Per GPU, and over the GPUs (their mean: every key keeps its per-GPU meaning).
  constexpr const char* kKeys[] = {"utilization_percent", "sm_active_percent", "tensor_active_percent",
                                   "dram_active_percent", "power_w", "memory_used_mib", "memory_total_mib"};
  static_assert(std::size(kKeys) == kNumTracked);
  std::array<double, kNumTracked> sum{};
  std::array<int, kNumTracked> n{};
  int gpus = 0;
  for (size_t d = 0; d < devices_.size(); ++d) {
    bool any = false;
    // A GPU's memory size is a fact where NVML does not sample it.
    constexpr size_t kTotal = kNumTracked - 1;
    static_assert(kTracked[kTotal] == Metric::kFbTotalBytes);
    if (!devices_[d][kTotal].seen && d < memory_total_bytes_.size() && memory_total_bytes_[d] > 0 &&
        devices_[d][0].seen) {
      devices_[d][kTotal].last_value = memory_total_bytes_[d];
      devices_[d][kTotal].seen = true;
    }
    for (size_t i = 0; i < kNumTracked; ++i) {
      Accumulator& a = devices_[d][i];
      if (!a.seen) continue;
      any = true;
      double v = mean(a);
      if (kTracked[i] == Metric::kFbUsedBytes || kTracked[i] == Metric::kFbTotalBytes) v /= kMiB;
      sum[i] += v;
      ++n[i];
      if (devices_.size() > 1) {
        const std::string label = d < gpu_label_.size() && !gpu_label_[d].empty() ? gpu_label_[d] : std::to_string(d);
        p.values.emplace_back("gpu/" + label + "/" + kKeys[i], v);
      }
      a.weighted = a.covered = 0;  // the next window starts; last_t stays for the next sample's span
      a.seen = false;
    }
    gpus += any;
  }
  for (size_t i = 0; i < kNumTracked; ++i) {
    if (n[i] == 0) continue;
    // The seed's keys for utilization and memory; the rest under gputriage/.
    const bool seed = kTracked[i] == Metric::kGpuUtil || kTracked[i] == Metric::kFbUsedBytes ||
                      kTracked[i] == Metric::kFbTotalBytes;
    p.values.emplace_back(std::string(seed ? "gpu/" : "gputriage/") + kKeys[i], sum[i] / n[i]);
  }
  if (gpus > 0) p.values.emplace_back("gputriage/gpus", gpus);
  window_start_ = now;
  if (p.values.empty()) return std::nullopt;
  ++points_;
  return p;
}

}  // namespace gputriage
