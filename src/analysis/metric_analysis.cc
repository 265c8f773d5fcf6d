#include "src/analysis/metric_analysis.h"

#include <algorithm>
#include <cmath>

#include "src/analysis/gpu_specs.h"

namespace gputriage {
namespace {

MetricDistribution Distribution(const SeriesSketch& s) {
  MetricDistribution d;
  d.samples = s.count();
  if (d.samples == 0) return d;
  d.mean = s.mean();
  d.p5 = s.Quantile(0.05);
  d.p50 = s.Quantile(0.5);
  d.p95 = s.Quantile(0.95);
  d.min = s.min();
  d.max = s.max();
  return d;
}

const char* ReasonName(size_t bit) {
  static constexpr const char* kNames[] = {"gpu_idle",     "applications_clocks_setting", "sw_power_cap",
                                           "hw_slowdown",  "sync_boost",                  "sw_thermal_slowdown",
                                           "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"};
  return bit < 9 ? kNames[bit] : "other";
}

}  // namespace

double MigBoardShare(std::string_view profile, std::string_view board_name) {
  // "3g.40gb" (or a compute-instance profile "1c.3g.40gb"): the GPU instance's
  // compute slices. A100, H100, H200 and B200 boards have 7; A30 has 4 (NVIDIA MIG
  // user guide, "Supported MIG Profiles").
  size_t at = profile.find('g');
  while (at != std::string_view::npos && at > 0 && !(profile[at - 1] >= '0' && profile[at - 1] <= '9'))
    at = profile.find('g', at + 1);
  if (at == std::string_view::npos || at == 0) return 1.0;
  size_t begin = at;
  while (begin > 0 && profile[begin - 1] >= '0' && profile[begin - 1] <= '9') --begin;
  int slices = 0;
  for (size_t i = begin; i < at && slices < 100; ++i) slices = slices * 10 + (profile[i] - '0');
  const int board = board_name.find("A30") != std::string_view::npos ? 4 : 7;
  if (slices <= 0 || slices > board) return 1.0;
  return static_cast<double>(slices) / board;
}

std::vector<DeviceMetricAnalysis> AnalyzeMetrics(const MetricSet& metrics) {
  std::vector<DeviceMetricAnalysis> out;
  for (const auto& d : metrics.devices) {
    DeviceMetricAnalysis a;
    a.label = d.Label();
    a.name = d.name;
    a.uuid = d.uuid;
    a.hostname = d.hostname;
    a.mig_instance = d.mig_instance >= 0;
    a.mig_mode = d.mig_mode;
    a.mig_profile = d.mig_profile;
    if (a.mig_instance) a.board_share = MigBoardShare(d.mig_profile, d.name);
    a.labels = d.labels;
    a.job_use = d.job_use == MetricDevice::JobUse::kUsed      ? "used"
                : d.job_use == MetricDevice::JobUse::kNotUsed ? "not_used"
                                                               : "";
    a.other_processes = d.other_processes;
    a.timestamps_synthetic = metrics.timestamps_synthetic;
    for (int m = 0; m < kNumMetrics; ++m) a.metrics[m] = Distribution(d.series[m]);

    // Observed time: from the best-sampled series, its spacings up to 4x the
    // median (a hole in the log is not GPU time anyone saw), plus one interval.
    bool any = false;
    const SeriesSketch* densest = nullptr;
    for (const auto& s : d.series) {
      if (s.count() == 0) continue;
      a.first_ns = any ? std::min(a.first_ns, s.first_time()) : s.first_time();
      a.last_ns = any ? std::max(a.last_ns, s.last_time()) : s.last_time();
      any = true;
      if (!densest || s.count() > densest->count()) densest = &s;
    }
    if (densest) {
      a.median_interval_ns = densest->MedianInterval();
      a.hours = static_cast<double>(densest->CoveredTime()) / 3.6e12;
      a.sampling_gaps = densest->Gaps();
    }
    if (any && a.last_ns > a.first_ns) a.span_hours = static_cast<double>(a.last_ns - a.first_ns) / 3.6e12;

    // Busy: utilization.gpu; on MIG (where NVML gives none) the GR engine activity.
    const SeriesSketch* busy = nullptr;
    if (d.Has(Metric::kGpuUtil)) {
      busy = &d.Get(Metric::kGpuUtil);
      a.busy_series = Metric::kGpuUtil;
      a.busy_metric = MetricName(Metric::kGpuUtil);
    } else if (d.Has(Metric::kGrEngineActive)) {
      busy = &d.Get(Metric::kGrEngineActive);
      a.busy_series = Metric::kGrEngineActive;
      a.busy_metric = MetricName(Metric::kGrEngineActive);
    }
    if (busy) {
      a.busy_mean_percent = busy->mean();
      a.near_zero_share = busy->ShareAtMost(kNearZeroPercent);
      a.fed_mean_percent = busy->MeanAbove(kNearZeroPercent);
      a.near_full_share = busy->ShareAtLeast(kNearFullPercent);
      a.rhythm = busy->rhythm();
      // Samples further apart than kIdleStretchMaxSpacingNs cannot place a stretch's
      // edges: two snapshots an hour apart at 0 % say nothing of the hour between
      // them (a hand-saved series of nvidia-smi tables). Such a log keeps its
      // mean-level findings; no stretch is claimed, in the verdicts or the ledger.
      if (a.median_interval_ns <= SeriesSketch::kIdleStretchMaxSpacingNs) a.idle_phases = busy->idle_stretches();
      if (const TimeNs observed = busy->CoveredTime(); observed > 0)
        a.idle_phase_share = std::min(1.0, static_cast<double>(a.idle_phases.total_ns) / static_cast<double>(observed));
      a.busy_timeline = busy->Timeline(SeriesSketch::kTimelineBuckets);
    }

    // Power against the limit: the logged limit, else the board power of the model.
    const auto spec = FindGpuSpec(d.name);
    if (d.power_limit_w > 0) {
      a.power_limit_w = d.power_limit_w;
      a.power_limit_source = "logged power limit";
    } else if (d.Has(Metric::kPowerLimitW)) {
      a.power_limit_w = d.Get(Metric::kPowerLimitW).max();
      a.power_limit_source = "logged power limit";
    } else if (spec && spec->board_power_w > 0) {
      a.power_limit_w = spec->board_power_w;
      a.power_limit_source = std::string("board power of the ") + spec->model + " (" + spec->source + ")";
    }
    if (a.power_limit_w > 0 && d.Has(Metric::kPowerW))
      a.power_mean_percent_of_limit = 100.0 * d.Get(Metric::kPowerW).mean() / a.power_limit_w;

    // The maximum SM clock: logged, else the board's boost clock from the spec table
    // (a single scrape's one reading says nothing of the maximum), else the log's
    // highest reading; a reading above the table's (an overclocked board) wins.
    a.max_sm_clock_mhz = d.max_sm_clock_mhz;
    if (a.max_sm_clock_mhz > 0) a.max_sm_clock_source = "logged maximum SM clock";
    const double highest = d.Has(Metric::kSmClockMHz) ? d.Get(Metric::kSmClockMHz).max() : 0.0;
    if (a.max_sm_clock_mhz <= 0 && spec && spec->boost_clock_mhz > 0 && spec->boost_clock_mhz >= highest) {
      a.max_sm_clock_mhz = spec->boost_clock_mhz;
      a.max_sm_clock_source = std::string("boost clock of the ") + spec->model + " (" + spec->source + ")";
    }
    if (a.max_sm_clock_mhz <= 0 && highest > 0) {
      a.max_sm_clock_mhz = highest;
      a.max_sm_clock_source = "highest SM clock in the log";
    }
    if (a.max_sm_clock_mhz > 0 && d.Has(Metric::kSmClockMHz))
      a.sm_clock_mean_percent_of_max = 100.0 * d.Get(Metric::kSmClockMHz).mean() / a.max_sm_clock_mhz;

    const LoadedReadings loaded = d.loaded.Settled();
    if (loaded.observed_ns > 0) a.loaded_share = loaded.loaded_ns / loaded.observed_ns;
    a.near_zero_without_job_share = loaded.NearZeroShareBelowMemory(kJobMemoryFraction);
    if (loaded.power_w.samples > 0) {
      a.loaded_power_mean_w = loaded.power_w.Mean();
      a.loaded_power_cv = loaded.power_w.Cv();
      a.loaded_power_max_w = loaded.power_w.max;
      if (a.power_limit_w > 0) a.loaded_power_percent_of_limit = 100.0 * a.loaded_power_mean_w / a.power_limit_w;
    }
    a.loaded_clock_samples = loaded.sm_clock_mhz.samples;
    if (loaded.sm_clock_mhz.samples > 0) {
      a.loaded_sm_clock_mean_mhz = loaded.sm_clock_mhz.Mean();
      a.loaded_sm_clock_cv = loaded.sm_clock_mhz.Cv();
      a.loaded_sm_clock_min_mhz = loaded.sm_clock_mhz.min;
      a.loaded_sm_clock_max_mhz = loaded.sm_clock_mhz.max;
      if (a.max_sm_clock_mhz > 0) a.loaded_sm_clock_percent_of_max = 100.0 * a.loaded_sm_clock_mean_mhz / a.max_sm_clock_mhz;
    }
    if (loaded.temp_c.samples > 0) a.loaded_temp_mean_c = loaded.temp_c.Mean();

    a.reason_samples = d.Get(Metric::kClockEventReasons).count();
    if (a.reason_samples > 0) {
      a.limiting_reason_share = static_cast<double>(d.limiting_reason_samples) / static_cast<double>(a.reason_samples);
      for (size_t b = 0; b < d.reason_counts.size(); ++b)
        if (d.reason_counts[b] > 0) a.active_reasons.emplace_back(ReasonName(b));
    }
    if (d.Has(Metric::kPcieRxBytesPerS)) {
      const auto& rx = d.Get(Metric::kPcieRxBytesPerS);
      if (rx.mean() > 0) a.pcie_rx_p95_over_mean = rx.Quantile(0.95) / rx.mean();
    }
    double total = static_cast<double>(d.memory_total_bytes);
    if (total <= 0 && d.Has(Metric::kFbTotalBytes)) total = d.Get(Metric::kFbTotalBytes).max();
    if (total <= 0 && d.Has(Metric::kFbUsedBytes) && d.Has(Metric::kFbFreeBytes))
      total = d.Get(Metric::kFbUsedBytes).mean() + d.Get(Metric::kFbFreeBytes).mean();
    if (total > 0 && d.Has(Metric::kFbUsedBytes)) a.memory_used_max_percent = 100.0 * d.Get(Metric::kFbUsedBytes).max() / total;
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace gputriage
