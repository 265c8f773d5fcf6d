#include "src/trackers/tracker_feed.h"

#include <algorithm>
#include <string>

namespace gputriage {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

TrackerFeed::TrackerFeed(TimeNs every, TimeNs sample_interval)
    : every_(std::max<TimeNs>(every, kNsPerMs)), gap_cap_(4 * std::max<TimeNs>(sample_interval, kNsPerMs)) {}

void TrackerFeed::AddSample(size_t device, Metric metric, TimeNs t, double value) {
  if (device >= kMaxDevices) return;
  size_t slot = kNumTracked;
  for (size_t i = 0; i < kNumTracked; ++i)
    if (kTracked[i] == metric) slot = i;
  if (slot == kNumTracked) return;
  if (window_start_ == 0) window_start_ = t;
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
    if (window_start_ == 0) window_start_ = s.span.start;
    ++steps_;
    step_ns_ += static_cast<double>(s.span.end - s.span.start);
    data_ns_ += static_cast<double>(s.data_wait_ns());
    samples_ += static_cast<double>(s.samples);
    latest_step_ = std::max(latest_step_, s.number);
  }
}

std::optional<TrackerPoint> TrackerFeed::Poll(TimeNs now, bool final) {
  if (window_start_ == 0) return std::nullopt;  // nothing seen yet
  // A window ends on the recorder's once-a-second tick: a tick a few ms early
  // still ends it (5 % of the window), or a 1 s window would often last 2.
  if (!final && now + every_ / 20 < window_start_ + every_) return std::nullopt;
  TrackerPoint p;
  p.t_ns = now;
  p.step = latest_step_ >= 0 ? latest_step_ : points_;
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
  if (steps_ > 0) {
    p.values.emplace_back("gputriage/step_time_ms", step_ns_ / static_cast<double>(steps_) / 1e6);
    p.values.emplace_back("gputriage/data_wait_percent", 100.0 * data_ns_ / step_ns_);
    p.values.emplace_back("gputriage/steps", static_cast<double>(steps_));
    // Every process's samples over the window's wall time: the job's throughput.
    if (samples_ > 0 && now > window_start_)
      p.values.emplace_back("gputriage/samples_per_s", samples_ / (static_cast<double>(now - window_start_) / 1e9));
  }
  steps_ = 0;
  step_ns_ = data_ns_ = samples_ = 0;
  window_start_ = now;
  ++points_;
  if (p.values.empty()) return std::nullopt;
  return p;
}

}  // namespace gputriage
