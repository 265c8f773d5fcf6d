// Memory at step ends (python/gputriage/memory.py samples it; docs/memory.md):
// each process's peaks, its allocator's retries and out-of-memory errors, and
// whether its memory at the same point of every step keeps growing -- a robust
// slope over step numbers that a single jump or a settling allocator does not
// pass for a leak.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"

namespace gputriage {
namespace {

// A leak is judged past the steps where memory settles (optimizer state made at
// the first step, the allocator's cache and the host's arenas growing to their
// working size): the first tenth of the sampled steps, at least two.
constexpr double kSettleShare = 0.10;
constexpr int64_t kMinSettlePoints = 2;
constexpr int64_t kMinTrendPoints = 12;
// Growth over the judged steps that a creep must pass: below it, noise of the
// host's allocator (arenas, Python's free lists) or of the caching allocator.
constexpr double kMinGrowthBytes = 8.0 * 1024 * 1024;
constexpr double kMinGrowthShare = 0.02;  // of the level at the start
// The second half keeps growing at a quarter of the first half's rate at least:
// memory that settles is not a leak.
constexpr double kMinLateShare = 0.25;
constexpr size_t kMaxSlopePoints = 256;  // Theil-Sen over at most this many (evenly spaced)

using Points = std::vector<std::pair<int64_t, double>>;  // (step number, bytes)

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) m = (m + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  return m;
}

/// Theil-Sen: the median of the slopes between every two points (evenly
/// thinned to kMaxSlopePoints), bytes per step.
double TheilSen(const Points& pts, size_t begin, size_t end) {
  const size_t n = end - begin;
  if (n < 2) return 0;
  const size_t keep = std::min(n, kMaxSlopePoints);
  std::vector<size_t> idx;
  for (size_t i = 0; i < keep; ++i) idx.push_back(begin + i * (n - 1) / std::max<size_t>(1, keep - 1));
  std::vector<double> slopes;
  slopes.reserve(keep * (keep - 1) / 2);
  for (size_t a = 0; a < idx.size(); ++a)
    for (size_t b = a + 1; b < idx.size(); ++b) {
      const auto& [xa, ya] = pts[idx[a]];
      const auto& [xb, yb] = pts[idx[b]];
      if (xb != xa) slopes.push_back((yb - ya) / static_cast<double>(xb - xa));
    }
  return Median(std::move(slopes));
}

int64_t SettlePoints(size_t n) {
  return std::max<int64_t>(kMinSettlePoints, static_cast<int64_t>(kSettleShare * static_cast<double>(n)));
}

/// The median level past the settling steps (all of them when that leaves none).
double SettledMedian(Points pts) {
  std::sort(pts.begin(), pts.end());
  const auto skip = SettlePoints(pts.size());
  std::vector<double> v;
  for (size_t i = static_cast<int64_t>(pts.size()) > skip ? static_cast<size_t>(skip) : 0; i < pts.size(); ++i)
    v.push_back(pts[i].second);
  return Median(std::move(v));
}

MemoryTrend Trend(Points pts, double step_s) {
  MemoryTrend t;
  t.step_s = step_s;
  std::sort(pts.begin(), pts.end());
  const auto settle = SettlePoints(pts.size());
  if (static_cast<int64_t>(pts.size()) - settle < kMinTrendPoints) {
    t.why_not = fmt::format("{} sampled steps (a trend needs {} past the first {})", pts.size(), kMinTrendPoints, settle);
    return t;
  }
  pts.erase(pts.begin(), pts.begin() + settle);
  const size_t n = pts.size();
  t.points = static_cast<int64_t>(n);
  t.first_step = pts.front().first;
  t.last_step = pts.back().first;
  for (size_t q = 0; q < 4; ++q) {
    std::vector<double> part;
    for (size_t i = q * n / 4; i < (q + 1) * n / 4; ++i) part.push_back(pts[i].second);
    t.quarter_median_bytes[q] = Median(std::move(part));
  }
  t.first_bytes = t.quarter_median_bytes[0];
  t.last_bytes = t.quarter_median_bytes[3];
  t.bytes_per_step = TheilSen(pts, 0, n);
  const double early = TheilSen(pts, 0, n / 2), late = TheilSen(pts, n / 2, n);
  t.bytes_per_step_low = std::min(early, late);
  t.bytes_per_step_high = std::max(early, late);
  t.bytes_per_hour = step_s > 0 ? t.bytes_per_step / step_s * 3600.0 : 0;
  const auto& q = t.quarter_median_bytes;
  const double growth = q[3] - q[0];
  const double floor = std::max(kMinGrowthBytes, kMinGrowthShare * q[0]);
  if (!(q[0] < q[1] && q[1] < q[2] && q[2] < q[3]))
    t.why_not = "the quarters' medians do not rise in turn";
  else if (growth < floor)
    t.why_not = fmt::format("grew {:.1f} MiB, under the {:.1f} MiB floor", growth / 1048576.0, floor / 1048576.0);
  else if (early <= 0 || late < kMinLateShare * early)
    t.why_not = "growth stops in the second half (memory settling, not a leak)";
  else
    t.creeping = t.bytes_per_step > 0;
  return t;
}

int64_t SettingBytes(const std::map<std::string, std::string>& settings, const std::string& key) {
  auto it = settings.find(key);
  if (it == settings.end()) return -1;
  int64_t v = -1;
  const auto& s = it->second;
  const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  return err == std::errc() && end == s.data() + s.size() && v >= 0 ? v : -1;
}

ProcessMemory MeasureProcess(uint32_t pid, const std::vector<const MarkedStep*>& steps) {
  ProcessMemory p;
  p.pid = pid;
  Points host, gpu;
  std::map<int, int64_t> device_samples;
  double span_s = 0, samples = 0;
  int64_t with_samples = 0;
  for (const MarkedStep* s : steps) {
    span_s += static_cast<double>(s->span.duration()) / 1e9;
    if (s->samples > 0) samples += static_cast<double>(s->samples), ++with_samples;
    if (!s->memory_sampled()) continue;
    ++p.sampled_steps;
    if (s->host_rss_bytes > 0) {
      host.emplace_back(s->number, static_cast<double>(s->host_rss_bytes));
      p.host_rss_peak_bytes = std::max(p.host_rss_peak_bytes, s->host_rss_peak_bytes);
      p.host_rss_last_bytes = s->host_rss_bytes;
    }
    if (s->memory_device >= 0) ++device_samples[s->memory_device];
  }
  if (!device_samples.empty())
    p.device = std::max_element(device_samples.begin(), device_samples.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  for (const MarkedStep* s : steps) {
    if (s->memory_device != p.device || p.device < 0) continue;
    gpu.emplace_back(s->number, static_cast<double>(s->device_allocated_bytes));
    p.device_peak_bytes = std::max(p.device_peak_bytes, s->device_peak_bytes);
    p.device_reserved_max_bytes = std::max(p.device_reserved_max_bytes, s->device_reserved_bytes);
    p.device_allocated_last_bytes = s->device_allocated_bytes;
    p.alloc_retries = std::max(p.alloc_retries, s->alloc_retries);
    p.alloc_ooms = std::max(p.alloc_ooms, s->alloc_ooms);
  }
  const double step_s = steps.empty() ? 0 : span_s / static_cast<double>(steps.size());
  p.samples_per_step = with_samples > 0 ? samples / static_cast<double>(with_samples) : 0;
  p.host_end_median_bytes = SettledMedian(host);
  p.gpu_end_median_bytes = SettledMedian(gpu);
  if (!host.empty()) p.host = Trend(std::move(host), step_s);
  if (!gpu.empty()) p.gpu = Trend(std::move(gpu), step_s);
  return p;
}

std::string SettingText(const std::map<std::string, std::string>& settings, const std::string& key) {
  auto it = settings.find(key);
  return it == settings.end() ? "" : it->second;
}

OutOfMemoryError ReadOutOfMemory(const std::map<std::string, std::string>& settings) {
  OutOfMemoryError e;
  e.device = SettingText(settings, "oom.device");
  if (e.device.empty()) return e;
  e.known = true;
  e.requested_bytes = SettingBytes(settings, "oom.requested_bytes");
  e.total_bytes = SettingBytes(settings, "oom.total_bytes");
  e.free_bytes = SettingBytes(settings, "oom.free_bytes");
  e.allocated_bytes = SettingBytes(settings, "oom.allocated_bytes");
  e.reserved_unallocated_bytes = SettingBytes(settings, "oom.reserved_unallocated_bytes");
  // The allocator's own figures, read as the error left, where the message rounds them.
  if (const int64_t exact = SettingBytes(settings, "oom.allocator_allocated_bytes"); exact >= 0) {
    e.allocated_bytes = exact;
    if (const int64_t reserved = SettingBytes(settings, "oom.allocator_reserved_bytes"); reserved >= exact)
      e.reserved_unallocated_bytes = reserved - exact;
  }
  e.step = SettingBytes(settings, "oom.step");
  e.where = SettingText(settings, "oom.where");
  e.message = SettingText(settings, "oom.message");
  e.snapshot = SettingText(settings, "oom.snapshot");
  e.from_snapshot = SettingText(settings, "oom.source") == "allocator-snapshot";
  e.host_rss_bytes = SettingBytes(settings, "oom.host_rss_bytes");
  e.host_vm_bytes = SettingBytes(settings, "oom.host_vm_bytes");
  e.host_rss_peak_bytes = SettingBytes(settings, "oom.host_rss_peak_bytes");
  e.host_vm_peak_bytes = SettingBytes(settings, "oom.host_vm_peak_bytes");
  e.address_space_limit_bytes = SettingBytes(settings, "oom.address_space_limit_bytes");
  e.host_limit_bytes = SettingBytes(settings, "oom.host_limit_bytes");
  e.host_limit_source = SettingText(settings, "oom.host_limit_source");
  return e;
}

}  // namespace

StepMemoryAnalysis AnalyzeStepMemory(const std::vector<MarkedStep>& steps,
                                     const std::map<std::string, std::string>& settings,
                                     const std::vector<ProcessRank>& ranks) {
  StepMemoryAnalysis a;
  a.oom = ReadOutOfMemory(settings);
  if (const int64_t code = SettingBytes(settings, "exit_code"); code >= 0 && code < 1024) a.exit_code = static_cast<int>(code);
  for (const char* key : {"dist.world_size", "gpu.count"})
    if (const int64_t n = SettingBytes(settings, key); n > 0 && n < 1'000'000 && a.world_size < 0) a.world_size = static_cast<int>(n);
  a.parameters_bytes = SettingBytes(settings, "memory.parameters_bytes");
  a.gradients_bytes = SettingBytes(settings, "memory.gradients_bytes");
  a.optimizer_state_bytes = SettingBytes(settings, "memory.optimizer_state_bytes");
  a.static_device = SettingText(settings, "memory.static_device");
  a.host_total_bytes = std::max<int64_t>(0, SettingBytes(settings, "memory.host_total_bytes"));
  a.host_limit_source = SettingText(settings, "memory.host_limit_source");
  std::map<uint32_t, std::vector<const MarkedStep*>> by_pid;
  for (const auto& s : steps) by_pid[s.pid].push_back(&s);
  for (auto& [pid, list] : by_pid) {
    ProcessMemory p = MeasureProcess(pid, list);
    if (p.sampled_steps == 0) continue;
    for (const auto& r : ranks)
      if (r.pid == pid) p.rank = r.rank;
    a.processes.push_back(std::move(p));
  }
  a.sampled = !a.processes.empty();
  // The GPU of the process with the largest peak, else the one that ran out.
  const ProcessMemory* top = nullptr;
  for (const auto& p : a.processes)
    if (p.device >= 0 && (top == nullptr || p.device_peak_bytes > top->device_peak_bytes)) top = &p;
  const std::string device = top != nullptr ? std::to_string(top->device)
                             : a.oom.device.rfind("cuda:", 0) == 0 ? a.oom.device.substr(5) : "";
  if (!device.empty()) a.device_total_bytes = std::max<int64_t>(0, SettingBytes(settings, "memory.cuda" + device + ".total_bytes"));
  if (a.device_total_bytes == 0 && a.oom.total_bytes > 0) a.device_total_bytes = a.oom.total_bytes;
  return a;
}

}  // namespace gputriage
