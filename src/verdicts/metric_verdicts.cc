// Verdicts from sampled GPU metrics (nvidia-smi, dmon, dcgmi, dcgm-exporter), in
// the same vocabulary as trace verdicts. Levels are judged against the workload
// class's targets; where the logged metrics cannot separate two causes the
// finding says so and names the metric that would.
//
// Signatures (DCGM profiling-metric guidance and ../shared/reference/gpu-metrics.md §2.4):
//   idle              utilization ≈ 0 most of the time, power near idle
//   input_bound       utilization well below target, stop-and-go (periodic or bimodal), PCIe RX bursts
//   undersized_work   utilization high (a kernel is running) but SM activity < 50 %
//   memory_bound      DRAM activity ≥ 50 % (practical ceiling ~80 %), tensor pipes modest
//   low_precision     FP32 pipe busy, tensor pipe ≈ 0 on a tensor-core GPU
//   throttled         performance-limiting clock events (power cap, thermal, HW slowdown)
//   at_compute_limit  busy at the class target with SM and tensor activity at target
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "src/analysis/gpu_specs.h"
#include "src/analysis/metric_analysis.h"
#include "src/analysis/what_if.h"
#include "src/util/units.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

// Thresholds, with where they come from.
constexpr double kIdleShare = 0.75;              // three quarters of samples at <= 5 %
constexpr double kVideoEnginePercent = 20.0;     // NVENC/NVDEC busy while SMs are not
constexpr double kThrottleModerateShare = 0.10;  // samples with a performance-limiting clock event
constexpr double kThrottleHighShare = 0.50;
// Throttling read from power, clocks and temperature where no clock-event reason
// was logged (most logs carry none): under load (busy >= 80 % in the same sample,
// LoadedReadings) the SM clock is held below its maximum while power sits at its
// ceiling (a power cap: the driver lowers clocks until the board's draw fits) or
// the GPU runs hot (a thermal limit). Set on the corpus's calibration half
// (tests/corpus/cases.toml): power-capped GEMM bursts held their clocks at 58 %
// and 90 % of maximum, uncapped ones at 99.97-100 %; GPU Boost moves clocks a
// few percent on its own, hence 93 %.
constexpr double kLoadedClockPercent = 93.0;       // loaded SM clock mean / max at most this
constexpr double kPowerAtLimitPercent = 95.0;      // loaded power mean / known limit at least this
// Power capping under a bursty load: DVFS holds the clock down whenever power
// reaches the cap, so the peaks sit at the limit while the mean stays a little
// under it. Set on the calibration half of the corpus (an H100 PCIe at a 350 W
// cap: loaded mean 89 %, p95 at the limit, clock 63 % of maximum).
constexpr double kPowerLoadedNearLimitPercent = 85.0;
// Limit unknown: loaded power mean / power p95 at least this (power flat at a
// ceiling). 85 rather than 90 since a bursty H100 PCIe case of the corpus (mean
// 89 % of its p95 with the clock at 64 % of maximum, no name, no limit logged).
constexpr double kPowerSteadyPercent = 85.0;
// ... and the clock moving with power: a cap holds power and moves the clock to do
// it (DVFS), so under load the clock's spread (coefficient of variation) is at least
// about as large as power's; a clock set by something else (application clocks, a
// voltage or reliability limit) stays put while power follows the data. Measured on
// the corpus's H100/A100 PCIe GEMM logs (calibration, and the cases issue 40 released
// after their first sight): capped runs 0.78-2.4 (clock CV / power CV), uncapped ones
// 0.08-0.38 with clocks flat at 84-93 % of maximum; 0.6 sits between.
constexpr double kClockFollowsPowerRatio = 0.6;
constexpr double kThermalLimitC = 85.0;            // loaded mean temperature (slowdown thresholds sit at 85-90 C)
constexpr double kMinLoadedShare = 0.10;           // of the logged time, for a run (a snapshot needs one loaded sample)
constexpr double kFp32PipePercent = 20.0;        // FP32 pipe busy ...
constexpr double kTensorIdlePercent = 5.0;       // ... while the tensor pipe is idle
constexpr double kDramModeratePercent = 50.0;    // DCGM: ~0.8 is the practical DRAM ceiling
constexpr double kDramHighPercent = 70.0;
constexpr double kSmLowPercent = 50.0;           // DCGM: SM activity < 0.5 "likely ineffective"
constexpr double kBusyForSmCheckPercent = 80.0;  // a kernel is running most of the time
constexpr double kRhythmStrength = 0.3;          // mean autocorrelation at the period
constexpr double kRhythmSwingPercent = 30.0;     // p90 − p10 within a block
constexpr double kStopAndGoZeroShare = 0.10;     // dips to ~0 ...
constexpr double kBimodalZeroShare = 0.20;       // ... or a bimodal on/off pattern
constexpr double kIdlePhaseShare = 0.05;         // idle stretches worth naming: 5 % of the time
constexpr double kIdlePhaseBusyOutsidePercent = 20.0;  // ... between bursts of real work
constexpr double kBimodalHighPercent = 80.0;
constexpr double kPowerWorkingPercent = 40.0;    // board power well above idle: the GPU does work
constexpr double kMaterialZeroShare = 0.05;      // time near 0 that rules out "at the limit"
constexpr double kPowerNearLimitPercent = 80.0;  // dense tensor work draws 80-95 % of the limit (the bundled H100 gpu-burn: 90 %)
constexpr double kClockNearMaxPercent = 90.0;
constexpr int kMinSamplesForRun = 3;             // fewer samples are an instant, not a run
constexpr double kMinSecondsForRun = 60.0;       // a shorter capture is a snapshot of the job

double Mean(const DeviceMetricAnalysis& d, Metric m) { return d.metrics[static_cast<int>(m)].mean; }
bool Has(const DeviceMetricAnalysis& d, Metric m) { return d.metrics[static_cast<int>(m)].samples > 0; }

bool HasAny(const std::vector<Finding>& out, std::initializer_list<const char*> verdicts, Severity at_least) {
  for (const auto& f : out)
    for (const char* v : verdicts)
      if (f.verdict == v && f.severity >= at_least) return true;
  return false;
}

struct Ctx {
  const RecordingAnalysis& rec;
  const DeviceMetricAnalysis& d;
  const WorkloadTargets& t;
  std::optional<GpuSpec> spec;
  std::string scope;
  std::string source;  // "nvidia-smi utilization.gpu" etc.
  int64_t busy_samples = 0;
  bool snapshot = false;  // too few samples or too short a span to speak for a whole run
};

/// Why a short source's verdict is held back, in words: a handful of samples
/// is an instant; a few seconds of dense samples are a short recording, which
/// speaks for the job only if the job was that short.
std::string ShortSourceNote(const Ctx& c) {
  if (c.busy_samples < kMinSamplesForRun)
    return fmt::format(" The source holds {} sample{}: an instant, not a run; confirm with a log over the job's lifetime.",
                       c.busy_samples, c.busy_samples == 1 ? "" : "s");
  return fmt::format(" The source covers {:.0f} s ({} samples): if the job ran longer than that, confirm with a log "
                     "over its lifetime.",
                     c.d.hours * 3600.0, c.busy_samples);
}

/// What "busy" is on this GPU: NVML utilization, or DCGM's GR engine activity where that is absent (MIG).
const char* BusyName(const Ctx& c) { return c.d.busy_series == Metric::kGpuUtil ? "utilization" : "GR engine activity"; }

Finding Make(const Ctx& c, std::string verdict, Severity severity) {
  Finding f;
  f.verdict = std::move(verdict);
  f.severity = severity;
  f.origin = "metrics";
  f.scope = c.scope;
  return f;
}

std::string ProfilingMetricsHint(const DeviceMetricAnalysis& d) {
  std::vector<std::string> missing;
  if (!Has(d, Metric::kSmActive)) missing.emplace_back("DCGM_FI_PROF_SM_ACTIVE");
  if (!Has(d, Metric::kTensorActive)) missing.emplace_back("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE");
  if (!Has(d, Metric::kDramActive)) missing.emplace_back("DCGM_FI_PROF_DRAM_ACTIVE");
  if (missing.empty()) return {};
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
  return fmt::format("collect {} via dcgm-exporter (uncomment them in its counters CSV), or the GPM metrics on Hopper "
                     "and newer (nvidia-smi dmon --gpm-metrics 2,3,5,10,12)",
                     list);
}

void AddBusyEvidence(const Ctx& c, Finding& f, std::optional<double> threshold = std::nullopt, std::string cmp = "") {
  f.evidence.push_back(E("gpu_util_mean_percent", c.d.busy_mean_percent, "percent", c.source, threshold, std::move(cmp)));
  const auto& m = c.d.Busy();
  f.evidence.push_back(E("gpu_util_p50_percent", m.p50, "percent", c.source));
  f.evidence.push_back(E("samples", static_cast<double>(c.busy_samples), "count", c.source));
}

void AddPowerEvidence(const Ctx& c, Finding& f, std::optional<double> threshold = std::nullopt, std::string cmp = "") {
  if (!Has(c.d, Metric::kPowerW)) return;
  f.evidence.push_back(E("power_mean_w", Mean(c.d, Metric::kPowerW), "W", "board power draw"));
  if (!std::isnan(c.d.power_mean_percent_of_limit))
    f.evidence.push_back(E("power_percent_of_limit", c.d.power_mean_percent_of_limit, "percent",
                           fmt::format("mean draw / {:.0f} W ({})", c.d.power_limit_w, c.d.power_limit_source), threshold,
                           std::move(cmp)));
}

/// Below-theoretical check: tensor activity scaled to the model's dense peak and
/// the live clock. A community estimator (TorchBench, NVIDIA/DCGM#251); DCGM's
/// maintainers warn pipe ratios do not convert exactly to FLOP/s (NVIDIA/DCGM#164).
void AddTensorThroughputEvidence(const Ctx& c, Finding& f) {
  if (!c.spec || !Has(c.d, Metric::kTensorActive)) return;
  const bool bf16 = c.spec->bf16_tflops > 0;
  const double peak = bf16 ? c.spec->bf16_tflops : c.spec->fp16_tflops;
  if (peak <= 0) return;
  const double clock = std::isnan(c.d.sm_clock_mean_percent_of_max) ? 1.0 : c.d.sm_clock_mean_percent_of_max / 100.0;
  const double estimate = Mean(c.d, Metric::kTensorActive) / 100.0 * peak * clock;
  f.evidence.push_back(E("estimated_tensor_tflops", estimate, "TFLOP/s",
                         fmt::format("tensor activity x {} dense {} peak {:.0f} TFLOP/s{} (an estimate: pipe activity "
                                     "does not convert exactly to FLOP/s)",
                                     c.spec->model, bf16 ? "bf16" : "fp16", peak,
                                     std::isnan(c.d.sm_clock_mean_percent_of_max) ? "" : " x SM clock / max clock")));
  f.evidence.push_back(E("tensor_peak_tflops", peak, "TFLOP/s", c.spec->source));
}

/// Utilization once the stops are gone, from the log itself: the GPU holds its fed
/// level (the mean while above ~0) for the whole period, less the host slowing down
/// beside loader workers when the fed stretches were the host's pace (what_if.h).
std::optional<ExpectedGain> FedLevelGain(const Ctx& c, const char* bounded_by) {
  const double fed = c.d.fed_mean_percent, now = c.d.busy_mean_percent;
  if (std::isnan(fed) || std::isnan(now) || fed <= now) return std::nullopt;
  auto after = [&](double stretch) { return std::max(now, fed / stretch); };
  return LevelGain("gpu_util_percent", now, after(analysis::kWorkerHostStretchPoint), after(analysis::kWorkerHostStretchBest),
                   after(analysis::kWorkerHostStretchWorst), bounded_by,
                   fmt::format("{} rising to the {:.0f}% this GPU holds while fed (the log's mean above {:.0f}%), "
                               "over a period {:.0f}% longer where the host paces it ({:.0f}-{:.0f}%)",
                               BusyName(c), fed, kNearZeroPercent, (analysis::kWorkerHostStretchPoint - 1) * 100,
                               (analysis::kWorkerHostStretchBest - 1) * 100, (analysis::kWorkerHostStretchWorst - 1) * 100));
}

/// No utilization to judge by: MIG hides utilization.gpu (NVML and DCGM report none
/// per instance), or the source has no such column gputriage reads. Said, never
/// silent: a report that draws no verdict must say it had nothing to draw one from.
bool UtilizationUnavailable(const Ctx& c, std::vector<Finding>& out) {
  if (!c.d.busy_metric.empty()) return false;
  // A MIG board whose instances report their own activity (GPM per instance) is
  // diagnosed through them: nothing is missing.
  if (c.d.mig_mode && !c.d.mig_instance)
    for (const auto& other : c.rec.metric_devices)
      if (other.mig_instance && !other.busy_metric.empty() && other.label.rfind(c.d.label + " / MIG", 0) == 0) return true;
  Finding f = Make(c, "utilization_unavailable", Severity::kInfo);
  const bool working = !std::isnan(c.d.power_mean_percent_of_limit) && c.d.power_mean_percent_of_limit >= kPowerWorkingPercent;
  f.title = c.d.mig_mode ? "No utilization reported: MIG mode hides utilization.gpu"
                         : "No utilization metric was read: nothing about this GPU's use can be judged";
  f.detail = fmt::format(
      "Neither utilization.gpu nor GR engine activity is in this source{}. {}No utilization verdict is drawn.",
      c.d.mig_mode ? " (with MIG enabled NVML and DCGM report no device utilization; dmon prints '-')" : "",
      working ? fmt::format("The board draws {:.0f}% of its power limit, so it is doing work: do not read the gap as idle. ",
                            c.d.power_mean_percent_of_limit)
              : std::string(""));
  AddPowerEvidence(c, f);
  f.to_separate = c.d.mig_mode
                      ? "collect DCGM_FI_PROF_GR_ENGINE_ACTIVE (per GPU instance under MIG) via dcgm-exporter, or GPM "
                        "metrics (nvidia-smi dmon --gpm-metrics 1,2,5,10)"
                      : "log utilization.gpu (nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw,"
                        "clocks.sm --format=csv -l 1); a log whose columns are named otherwise is read with "
                        "--smi-columns (the import notes list the columns not used)";
  out.push_back(std::move(f));
  return true;
}

bool VideoEngineBusy(const Ctx& c, std::vector<Finding>& out) {
  const double enc = Has(c.d, Metric::kEncoderUtil) ? Mean(c.d, Metric::kEncoderUtil) : 0.0;
  const double dec = Has(c.d, Metric::kDecoderUtil) ? Mean(c.d, Metric::kDecoderUtil) : 0.0;
  const double engine = std::max(enc, dec);
  if (engine < kVideoEnginePercent || c.d.busy_mean_percent >= 50.0) return false;
  Finding f = Make(c, "video_engine_busy", Severity::kInfo);
  f.title = fmt::format("Busy on the video engines ({} {:.0f}%), not on the SMs ({:.0f}%)", enc >= dec ? "NVENC" : "NVDEC",
                        engine, c.d.busy_mean_percent);
  f.detail = "utilization.gpu counts only the graphics/compute engine; encode/decode work runs on separate engines. "
             "This GPU is not idle, and compute verdicts (precision, batch size) do not apply to this load.";
  f.evidence.push_back(E("encoder_util_mean_percent", enc, "percent", "utilization.encoder / dmon enc",
                         kVideoEnginePercent, ">="));
  f.evidence.push_back(E("decoder_util_mean_percent", dec, "percent", "utilization.decoder / dmon dec"));
  AddBusyEvidence(c, f);
  out.push_back(std::move(f));
  return true;
}

bool Idle(const Ctx& c, std::vector<Finding>& out) {
  const auto& busy = c.d.Busy();
  if (!(busy.p50 <= kNearZeroPercent && c.d.near_zero_share >= kIdleShare)) return false;
  if (Has(c.d, Metric::kSmActive) && Mean(c.d, Metric::kSmActive) > kNearZeroPercent * 2) return false;
  const bool instant = c.snapshot;
  Finding f = Make(c, "idle", instant ? Severity::kLow : Severity::kHigh);
  f.title = fmt::format("GPU idle: {} ≤ {:.0f}% in {:.0f}% of {} sample{}", BusyName(c), kNearZeroPercent,
                        100.0 * c.d.near_zero_share, c.busy_samples, c.busy_samples == 1 ? "" : "s");
  const double mem = c.d.memory_used_max_percent;
  f.detail = fmt::format(
      "No kernel ran in most samples.{}{}",
      !std::isnan(mem) && mem >= 10.0
          ? fmt::format(" {:.0f}% of device memory is allocated: a process holds the GPU without using it.", mem)
          : std::string(""),
      instant ? ShortSourceNote(c) : std::string(""));
  AddBusyEvidence(c, f);
  f.evidence.push_back(E("near_zero_share_percent", 100.0 * c.d.near_zero_share, "percent",
                         fmt::format("samples with utilization <= {:.0f}%", kNearZeroPercent), 100.0 * kIdleShare, ">="));
  AddPowerEvidence(c, f);
  if (!std::isnan(mem)) f.evidence.push_back(E("memory_used_max_percent", mem, "percent", "peak memory used / total"));
  f.recommendations = {
      {"release idle GPUs (end interactive sessions, scale inference replicas down, fix jobs that hang after training)",
       "an idle GPU costs the same per hour as a busy one"},
      {"share small or bursty work (MIG instances, MPS, time-slicing)", "several light jobs fill one GPU"},
  };
  // What releasing it saves, as a share of this GPU's cost over the log: the time it
  // sat near zero (best and point: the work of its busy moments moves elsewhere);
  // worst: nothing, where the allocation cannot be split (a whole node rented).
  const double idle_percent = 100.0 * c.d.near_zero_share;
  ExpectedGain gain = LevelGain("gpu_spend_saved_percent", 0.0, idle_percent, idle_percent, 0.0, "allocation_granularity",
                                fmt::format("this GPU released for the {:.0f}% of the logged time it sat at or below "
                                            "{:.0f}%; nothing saved where GPUs are rented by the whole node",
                                            idle_percent, kNearZeroPercent));
  gain.speedup_percent = 0;  // no work goes faster: the spend falls
  f.gain = gain;
  out.push_back(std::move(f));
  return true;
}

/// The clock headroom a limit takes: SM-bound work speeds up by the clock ratio once
/// the limit no longer holds it; memory-bound work gains nothing (the range's other end).
ExpectedGain ClockGain(double current_mhz, double max_mhz, const char* bounded_by) {
  ExpectedGain g = LevelGain("sm_clock_mhz", current_mhz, max_mhz, max_mhz, current_mhz, bounded_by,
                             fmt::format("the clock headroom lost: SM-bound work speeds up by the clock ratio ({:.0f} -> "
                                         "{:.0f} MHz, +{:.0f}%) once the limit no longer holds it; memory-bound work "
                                         "gains nothing (the range's other end)",
                                         current_mhz, max_mhz, 100.0 * (max_mhz / current_mhz - 1.0)));
  g.unit = "MHz";
  return g;
}

/// Throttling without clock-event reasons: what holds the clocks under load, read
/// from power against its ceiling, the clocks' own movement and temperature.
void InferredThrottle(const Ctx& c, std::vector<Finding>& out) {
  const auto& d = c.d;
  if (d.loaded_clock_samples < 1 || std::isnan(d.loaded_sm_clock_percent_of_max) || std::isnan(d.loaded_share)) return;
  if (d.loaded_share < kMinLoadedShare && !c.snapshot) return;
  if (d.loaded_sm_clock_percent_of_max > kLoadedClockPercent) return;
  const double follows = d.loaded_power_cv > 0 ? d.loaded_sm_clock_cv / d.loaded_power_cv : NAN;
  const double power_p95 = Has(d, Metric::kPowerW) ? d.metrics[static_cast<int>(Metric::kPowerW)].p95 : NAN;
  const double steady = power_p95 > 0 ? 100.0 * d.loaded_power_mean_w / power_p95 : NAN;
  std::string cause;
  const char* bounded_by = "power_limit";
  std::vector<Evidence> why;
  const double p95_of_limit = d.power_limit_w > 0 && power_p95 > 0 ? 100.0 * power_p95 / d.power_limit_w : NAN;
  if (!std::isnan(d.loaded_power_percent_of_limit) && d.loaded_power_percent_of_limit >= kPowerAtLimitPercent) {
    const bool assumed = d.power_limit_source.rfind("logged", 0) != 0;
    cause = fmt::format("power at {:.0f}% of the {:.0f} W limit{}", d.loaded_power_percent_of_limit, d.power_limit_w,
                        assumed ? " (the board's default limit, assumed: the log has none)" : "");
    why.push_back(E("loaded_power_percent_of_limit", d.loaded_power_percent_of_limit, "percent",
                    "mean power while loaded / " + d.power_limit_source, kPowerAtLimitPercent, ">="));
  } else if (!std::isnan(d.loaded_power_percent_of_limit) && d.loaded_power_percent_of_limit >= kPowerLoadedNearLimitPercent &&
             !std::isnan(p95_of_limit) && p95_of_limit >= kPowerAtLimitPercent) {
    const bool assumed = d.power_limit_source.rfind("logged", 0) != 0;
    cause = fmt::format("power peaking at the {:.0f} W limit (p95 {:.0f}%, loaded mean {:.0f}%){}", d.power_limit_w,
                        p95_of_limit, d.loaded_power_percent_of_limit,
                        assumed ? " (the board's default limit, assumed: the log has none)" : "");
    why.push_back(E("power_p95_percent_of_limit", p95_of_limit, "percent", "power p95 / " + d.power_limit_source,
                    kPowerAtLimitPercent, ">="));
    why.push_back(E("loaded_power_percent_of_limit", d.loaded_power_percent_of_limit, "percent",
                    "mean power while loaded / " + d.power_limit_source, kPowerLoadedNearLimitPercent, ">="));
  } else if (std::isnan(d.loaded_power_percent_of_limit) && !std::isnan(steady) && steady >= kPowerSteadyPercent &&
             follows >= kClockFollowsPowerRatio) {
    cause = fmt::format("power flat at a ceiling ({:.0f} W, {:.0f}% of its 95th percentile) while the clock moves "
                        "{:.1f}x as much as power (spread over mean): a power cap holding power by moving the clock "
                        "(the limit itself is not logged)",
                        d.loaded_power_mean_w, steady, follows);
    why.push_back(E("loaded_power_percent_of_p95", steady, "percent", "mean power while loaded / power p95",
                    kPowerSteadyPercent, ">="));
    why.push_back(E("loaded_clock_cv_over_power_cv", follows, "ratio",
                    "SM clock's coefficient of variation / power's, while loaded", kClockFollowsPowerRatio, ">="));
  } else if (!std::isnan(d.loaded_temp_mean_c) && d.loaded_temp_mean_c >= kThermalLimitC) {
    cause = fmt::format("the GPU at {:.0f} C under load", d.loaded_temp_mean_c);
    bounded_by = "thermal_limit";
    why.push_back(E("loaded_temp_mean_c", d.loaded_temp_mean_c, "C", "mean GPU temperature while loaded", kThermalLimitC, ">="));
  } else {
    return;  // clocks low for another reason (locked application clocks, a light load): not a limit
  }
  const double headroom = 100.0 * (d.max_sm_clock_mhz / d.loaded_sm_clock_mean_mhz - 1.0);
  Finding f = Make(c, "throttled", c.snapshot ? Severity::kLow : headroom >= 25.0 ? Severity::kHigh
                                                         : headroom >= 5.0         ? Severity::kModerate
                                                                                    : Severity::kLow);
  f.title = fmt::format("Clocks held at {:.0f}% of maximum under load: {}", d.loaded_sm_clock_percent_of_max,
                        bounded_by == std::string("thermal_limit") ? "thermal limit" : "power cap");
  f.detail = fmt::format(
      "No clock-event reasons were logged, so the limit is read from the readings of the loaded samples (busy >= {:.0f}%, "
      "{:.0f}% of the time): the SM clock averages {:.0f} MHz against a maximum of {:.0f} MHz ({}), with {}. Every "
      "kernel that is bound by the SMs runs slower by that ratio, whatever the code does.",
      LoadedReadings::kLoadedBusyPercent, 100.0 * d.loaded_share, d.loaded_sm_clock_mean_mhz, d.max_sm_clock_mhz,
      d.max_sm_clock_source, cause);
  f.evidence.push_back(E("loaded_sm_clock_percent_of_max", d.loaded_sm_clock_percent_of_max, "percent",
                         fmt::format("mean SM clock while loaded / {} {:.0f} MHz", d.max_sm_clock_source, d.max_sm_clock_mhz),
                         kLoadedClockPercent, "<="));
  for (auto& e : why) f.evidence.push_back(std::move(e));
  f.evidence.push_back(E("loaded_share_percent", 100.0 * d.loaded_share, "percent",
                         fmt::format("time with busy >= {:.0f}%", LoadedReadings::kLoadedBusyPercent)));
  f.cannot_exclude = {"a workload bound by memory bandwidth gains less from the clock than the ratio"};
  f.gain = ClockGain(d.loaded_sm_clock_mean_mhz, d.max_sm_clock_mhz, bounded_by);
  f.recommendations = {
      {bounded_by == std::string("thermal_limit")
           ? "check cooling, fan curves and inlet temperature"
           : "check the power limit (nvidia-smi -q -d POWER): raise it to the board's maximum where the operator allows, "
             "or accept the clock the cap gives",
       "a capped GPU cannot reach its rated clocks"},
      {"log clocks_event_reasons.active (nvidia-smi) or DCGM_FI_DEV_CLOCK_THROTTLE_REASONS to confirm the reason",
       "the driver names the limit it applies"},
  };
  out.push_back(std::move(f));
}

void Throttled(const Ctx& c, std::vector<Finding>& out) {
  if (c.d.reason_samples < 1) return InferredThrottle(c, out);
  if (std::isnan(c.d.limiting_reason_share) || c.d.limiting_reason_share < kThrottleModerateShare)
    return;
  if (!std::isnan(c.d.busy_mean_percent) && c.d.busy_mean_percent < 20.0) return;  // clocks do not matter when idle
  Finding f = Make(c, "throttled",
                   c.d.limiting_reason_share >= kThrottleHighShare ? Severity::kHigh : Severity::kModerate);
  std::string reasons;
  for (const auto& r : c.d.active_reasons)
    if (r != "gpu_idle" && r != "applications_clocks_setting" && r != "display_clock_setting" && r != "sync_boost")
      reasons += (reasons.empty() ? "" : ", ") + r;
  f.title = fmt::format("Clocks throttled in {:.0f}% of samples ({})", 100.0 * c.d.limiting_reason_share, reasons);
  f.detail = "The driver lowered clocks below what the work asked for: power cap, thermal limit or a hardware "
             "slowdown. Every kernel runs slower by the clock ratio, whatever the code does.";
  f.evidence.push_back(E("limiting_clock_event_share_percent", 100.0 * c.d.limiting_reason_share, "percent",
                         "samples with sw_power_cap, hw_slowdown, sw/hw_thermal_slowdown or hw_power_brake_slowdown",
                         100.0 * (f.severity == Severity::kHigh ? kThrottleHighShare : kThrottleModerateShare), ">="));
  if (!std::isnan(c.d.sm_clock_mean_percent_of_max))
    f.evidence.push_back(E("sm_clock_mean_percent_of_max", c.d.sm_clock_mean_percent_of_max, "percent",
                           fmt::format("mean SM clock / max {:.0f} MHz", c.d.max_sm_clock_mhz)));
  AddPowerEvidence(c, f);
  if (Has(c.d, Metric::kGpuTempC)) f.evidence.push_back(E("gpu_temp_max_c", c.d.metrics[static_cast<int>(Metric::kGpuTempC)].max, "C", "GPU temperature"));
  // The clock the limit leaves under load (else over the log) against its maximum.
  const double clock = !std::isnan(c.d.loaded_sm_clock_mean_mhz) ? c.d.loaded_sm_clock_mean_mhz
                                                                  : Has(c.d, Metric::kSmClockMHz) ? Mean(c.d, Metric::kSmClockMHz)
                                                                                                  : NAN;
  if (clock > 0 && c.d.max_sm_clock_mhz > clock) {
    const bool thermal = reasons.find("thermal") != std::string::npos;
    f.gain = ClockGain(clock, c.d.max_sm_clock_mhz, thermal ? "thermal_limit" : "power_limit");
  } else {
    // The clock is not logged, or sits at its maximum despite the events: nothing to promise.
    f.severity = Severity::kLow;
    f.detail += clock > 0 ? " The SM clock under load is not below its maximum in this log, so no gain can be stated."
                          : " The SM clock is not logged, so what the limit costs cannot be stated: log clocks.sm "
                            "beside the reasons.";
  }
  f.recommendations = {
      {"check cooling and inlet temperature (thermal slowdowns) and the power limit (nvidia-smi -q -d POWER)",
       "a thermally or power-limited GPU cannot reach its rated clocks"},
      {"report HW slowdown / power brake to the operator: it points at the node (PSU, board), not the job",
       "hardware slowdowns are not fixable in code"},
  };
  out.push_back(std::move(f));
}

void LowPrecision(const Ctx& c, std::vector<Finding>& out) {
  if (!Has(c.d, Metric::kFp32Active) || !Has(c.d, Metric::kTensorActive)) return;
  const double fp32 = Mean(c.d, Metric::kFp32Active), tensor = Mean(c.d, Metric::kTensorActive);
  if (fp32 < kFp32PipePercent || tensor >= kTensorIdlePercent) return;
  if (c.spec && std::string(c.spec->tensor_cores) == "none") return;
  Finding f = Make(c, "low_precision", Severity::kHigh);
  f.title = fmt::format("FP32 pipe busy {:.0f}% while the tensor pipe is idle ({:.1f}%)", fp32, tensor);
  f.detail = "Arithmetic runs on the FP32 pipes, not on tensor cores: matrix math in fp32 (or non-matrix fp32 work) "
             "on a GPU whose tensor cores are several times faster.";
  f.evidence.push_back(E("fp32_active_mean_percent", fp32, "percent", "DCGM_FI_PROF_PIPE_FP32_ACTIVE / GPM FP32_UTIL",
                         kFp32PipePercent, ">="));
  f.evidence.push_back(E("tensor_active_mean_percent", tensor, "percent", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE / GPM ANY_TENSOR_UTIL",
                         kTensorIdlePercent, "<"));
  if (Has(c.d, Metric::kSmActive))
    f.evidence.push_back(E("sm_active_mean_percent", Mean(c.d, Metric::kSmActive), "percent", "DCGM_FI_PROF_SM_ACTIVE"));
  const bool bf16 = c.spec && c.spec->bf16_tflops > 0;
  f.recommendations = {
      {bf16 ? "with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16): around forward and loss"
            : "with torch.autocast(device_type=\"cuda\", dtype=torch.float16): plus torch.cuda.amp.GradScaler()",
       "matrix math moves to tensor cores"},
      {"torch.set_float32_matmul_precision(\"high\") where autocast is not possible", "tf32 tensor cores for fp32 matmuls"},
  };
  out.push_back(std::move(f));
}

void MemoryBound(const Ctx& c, std::vector<Finding>& out) {
  if (!Has(c.d, Metric::kDramActive)) return;
  const double dram = Mean(c.d, Metric::kDramActive);
  if (dram < kDramModeratePercent) return;
  const double tensor = Has(c.d, Metric::kTensorActive) ? Mean(c.d, Metric::kTensorActive) : NAN;
  if (!std::isnan(tensor) && tensor >= c.t.tensor_active_percent) return;
  Finding f = Make(c, "memory_bound", dram >= kDramHighPercent ? Severity::kHigh : Severity::kModerate);
  f.title = fmt::format("Memory-bound: DRAM busy {:.0f}% of cycles{}", dram,
                        std::isnan(tensor) ? std::string() : fmt::format(", tensor pipe {:.0f}%", tensor));
  f.detail = "Device memory is the bottleneck (about 80% is the practical ceiling): kernels move more bytes than they "
             "compute on. Elementwise chains, normalisation and small-batch matmuls behave like this.";
  f.evidence.push_back(E("dram_active_mean_percent", dram, "percent", "DCGM_FI_PROF_DRAM_ACTIVE / GPM DRAM_BW_UTIL",
                         f.severity == Severity::kHigh ? kDramHighPercent : kDramModeratePercent, ">="));
  if (!std::isnan(tensor))
    f.evidence.push_back(E("tensor_active_mean_percent", tensor, "percent", "tensor pipe", c.t.tensor_active_percent, "<"));
  if (c.spec && c.spec->memory_bandwidth_gbs > 0)
    f.evidence.push_back(E("memory_bandwidth_gbs", c.spec->memory_bandwidth_gbs, "GB/s", c.spec->source));
  f.recommendations = {
      {"torch.compile(model) to fuse elementwise chains", "fewer round trips through device memory"},
      {"increase the batch (or sequence) size per GPU", "matmuls gain arithmetic intensity with larger dimensions"},
      {"use fused kernels (fused optimizers: torch.optim.AdamW(fused=True); flash attention via SDPA)",
       "one pass over the data instead of several"},
  };
  out.push_back(std::move(f));
}

void UndersizedWork(const Ctx& c, std::vector<Finding>& out) {
  if (!Has(c.d, Metric::kSmActive) || std::isnan(c.d.busy_mean_percent)) return;
  const double sm = Mean(c.d, Metric::kSmActive);
  if (c.d.busy_mean_percent < kBusyForSmCheckPercent || sm >= kSmLowPercent) return;
  Finding f = Make(c, "undersized_work", sm < kSmLowPercent / 2 ? Severity::kHigh : Severity::kModerate);
  f.title = fmt::format("Undersized work: a kernel runs {:.0f}% of the time but SMs are active only {:.0f}%",
                        c.d.busy_mean_percent, sm);
  f.detail = "utilization.gpu counts time with any kernel running; SM activity counts how much of the chip those "
             "kernels occupy. Kernels too small to fill the GPU (small batch, small layers, many tiny kernels) "
             "leave most SMs empty while the GPU looks busy.";
  AddBusyEvidence(c, f, kBusyForSmCheckPercent, ">=");
  f.evidence.push_back(E("sm_active_mean_percent", sm, "percent", "DCGM_FI_PROF_SM_ACTIVE / GPM SM_UTIL", kSmLowPercent, "<"));
  if (Has(c.d, Metric::kSmOccupancy))
    f.evidence.push_back(E("sm_occupancy_mean_percent", Mean(c.d, Metric::kSmOccupancy), "percent", "DCGM_FI_PROF_SM_OCCUPANCY"));
  f.recommendations = {
      {"increase the per-GPU batch size (gradient accumulation keeps the optimizer batch but does not fill tensor cores)",
       "larger kernels occupy more SMs"},
      {"capture the step with CUDA graphs or torch.compile(mode=\"reduce-overhead\")",
       "removes launch gaps between many small kernels"},
      {"pad bf16/fp16 matrix dimensions to multiples of 8 (ideally 64/128)", "tensor-core tiles are filled"},
  };
  {
    // From the log: the SM activity this GPU reaches in its fullest twentieth of the
    // time; at best its peak, at worst half way there. A bigger batch needs memory.
    const auto& dist = c.d.metrics[static_cast<int>(Metric::kSmActive)];
    const bool memory_full = !std::isnan(c.d.memory_used_max_percent) && c.d.memory_used_max_percent >= 90.0;
    if (dist.p95 > sm)
      f.gain = LevelGain("sm_active_percent", sm, dist.p95, dist.max, (sm + dist.p95) / 2,
                         memory_full ? "memory_headroom" : "sm_active_p95",
                         fmt::format("SM activity at the {:.0f}% this GPU reaches in its fullest 5% of the time "
                                     "(p95 of the log; its peak {:.0f}%)",
                                     dist.p95, dist.max));
  }
  out.push_back(std::move(f));
}

/// Near-zero time outside the idle phases (stretches of >= 10 s) and while a job
/// held the GPU's memory: what a step's wait for data can account for. (The two
/// may overlap; the smaller remainder is the tighter bound.)
double ZeroShareInSteps(const Ctx& c) {
  const double outside_phases = c.d.near_zero_share - c.d.idle_phase_share;
  const double with_job = c.d.near_zero_share - c.d.near_zero_without_job_share;
  return std::max(0.0, std::min(outside_phases, with_job));
}

/// The busy mean over the time outside the idle phases (they sit near 0); NaN when
/// the whole log is one.
double BusyOutsideIdlePhases(const Ctx& c) {
  return c.d.idle_phase_share < 1.0 ? c.d.busy_mean_percent / (1.0 - c.d.idle_phase_share) : NAN;
}

bool StopAndGo(const Ctx& c, bool& periodic) {
  const auto& r = c.d.rhythm;
  // A rhythm as slow as an idle phase is bursts of work, not the batches' rhythm.
  periodic = r.period_samples > 0 && r.strength >= kRhythmStrength && r.swing_p50 >= kRhythmSwingPercent &&
             ZeroShareInSteps(c) >= kStopAndGoZeroShare && r.period_ns < SeriesSketch::kIdleStretchMinNs;
  const auto& busy = c.d.Busy();
  // Zeros are a step's waits only where a log could have told them from idle phases:
  // readings minutes apart sample both alike (idle stretches are not named there).
  const bool phases_visible = c.d.median_interval_ns <= SeriesSketch::kIdleStretchMaxSpacingNs;
  const bool bimodal =
      phases_visible && ZeroShareInSteps(c) >= kBimodalZeroShare && busy.p95 >= kBimodalHighPercent;
  return periodic || bimodal;
}

/// Busy in bursts separated by long stretches near zero: phases of the job (or
/// gaps between jobs) that hold the GPU idle, told apart from a step's wait.
void IdlePhases(const Ctx& c, std::vector<Finding>& out) {
  const auto& p = c.d.idle_phases;
  // Phases between bursts of work: a GPU barely used the rest of the time is underutilized, not that.
  if (p.count == 0 || c.d.idle_phase_share < kIdlePhaseShare || !(BusyOutsideIdlePhases(c) >= kIdlePhaseBusyOutsidePercent))
    return;
  const double share = 100.0 * c.d.idle_phase_share;
  Finding f = Make(c, "idle_phases", share >= 20.0 ? Severity::kModerate : Severity::kLow);
  f.title = fmt::format("Idle phases: {} near 0 in {} stretch{} of {} or more ({:.0f}% of the time; the longest {})",
                        BusyName(c), p.count, p.count == 1 ? "" : "es",
                        FormatSeconds(static_cast<double>(SeriesSketch::kIdleStretchMinNs) / 1e9), share,
                        FormatSeconds(static_cast<double>(p.longest_ns) / 1e9));
  f.detail = "Between bursts of work the GPU was held with nothing to run for tens of seconds at a time: evaluation, "
             "checkpoint saves, data staging, a restart, or the wait between two jobs. These stretches are far longer "
             "than a step's wait for its next batch, and are left out of the stop-and-go rhythm.";
  AddBusyEvidence(c, f);
  f.evidence.push_back(E("idle_phase_share_percent", share, "percent",
                         fmt::format("time in stretches of >= {:.0f} s at <= {:.0f}%",
                                     static_cast<double>(SeriesSketch::kIdleStretchMinNs) / 1e9,
                                     SeriesSketch::kIdleStretchLevel),
                         100.0 * kIdlePhaseShare, ">="));
  f.evidence.push_back(E("idle_phases", static_cast<double>(p.count), "count", "stretches"));
  f.evidence.push_back(E("idle_phase_longest_s", static_cast<double>(p.longest_ns) / 1e9, "s", "the longest stretch"));
  f.evidence.push_back(E("busy_mean_outside_idle_phases_percent", BusyOutsideIdlePhases(c), "percent",
                         "the busy mean over the rest of the time", kIdlePhaseBusyOutsidePercent, ">="));
  f.to_separate = "record the job with step markers or zero-code mode (gputriage record --python): the goodput "
                  "ledger names each stretch (evaluation, checkpoint, start-up, restart) and prices it";
  f.recommendations = {
      {"save checkpoints asynchronously (torch.distributed.checkpoint.async_save) or less often",
       "training continues while the state is written"},
      {"evaluate on fewer batches, less often, or on another (smaller) GPU", "the training GPU stays busy"},
      {"release the GPU between jobs (a scheduler, not a held allocation)", "an idle GPU costs the same per hour"},
  };
  ExpectedGain gain = LevelGain("gpu_time_saved_percent", 0.0, share, share, 0.0, "what_runs_in_the_stretches",
                                fmt::format("the {:.0f}% of the logged time in idle stretches removed (overlapped with "
                                            "training, or the GPU released); nothing where they are work the job "
                                            "must do on this GPU",
                                            share));
  gain.speedup_percent = 0;  // the work itself goes no faster
  f.gain = gain;
  out.push_back(std::move(f));
}

void InputBound(const Ctx& c, std::vector<Finding>& out) {
  if (std::isnan(c.d.busy_mean_percent) || c.busy_samples < 16) return;  // a pattern needs a series
  bool periodic = false;
  if (!StopAndGo(c, periodic)) return;
  // Above the class target only a rhythmic stop costs enough to name: a GPU at ~0
  // for a tenth of the time in the batches' rhythm loses that tenth, whatever its mean.
  if (c.d.busy_mean_percent >= c.t.util_good_percent && !periodic) return;
  Finding f = Make(c, "input_bound", Severity::kModerate);
  const auto& r = c.d.rhythm;
  f.title = periodic ? fmt::format("Stop-and-go utilization: a {} sawtooth between ~0 and {:.0f}% (mean {:.0f}%)",
                                   FormatSeconds(static_cast<double>(r.period_ns) / 1e9),
                                   c.d.metrics[static_cast<int>(Metric::kGpuUtil)].p95, c.d.busy_mean_percent)
                     : fmt::format("Stop-and-go utilization: {:.0f}% of samples near 0, the rest near full (mean {:.0f}%)",
                                   100.0 * c.d.near_zero_share, c.d.busy_mean_percent);
  f.detail = "The GPU alternates between running flat out and waiting with nothing to do, in the rhythm of batches: "
             "the signature of a data pipeline that cannot keep up (DataLoader workers, storage, CPU preprocessing). "
             "Utilization alone cannot prove the wait is for data rather than other host-side work.";
  AddBusyEvidence(c, f, c.t.util_good_percent, "<");
  f.evidence.push_back(E("near_zero_share_percent", 100.0 * c.d.near_zero_share, "percent",
                         fmt::format("time with utilization <= {:.0f}%", kNearZeroPercent)));
  f.evidence.push_back(E("near_zero_in_steps_percent", 100.0 * ZeroShareInSteps(c), "percent",
                         "of it, outside idle phases and while a job held the GPU's memory",
                         100.0 * (periodic ? kStopAndGoZeroShare : kBimodalZeroShare), ">="));
  if (r.blocks > 0) {
    f.evidence.push_back(E("rhythm_period_s", static_cast<double>(r.period_ns) / 1e9, "s",
                           fmt::format("strongest autocorrelation peak over {} blocks of {} samples", r.blocks,
                                       SeriesSketch::kRhythmBlock)));
    f.evidence.push_back(E("rhythm_strength", r.strength, "correlation", "mean autocorrelation at the period",
                           periodic ? std::optional<double>(kRhythmStrength) : std::nullopt, periodic ? ">=" : ""));
    f.evidence.push_back(E("sawtooth_depth_percent", r.swing_p50, "percent", "median p90 − p10 utilization within a block",
                           periodic ? std::optional<double>(kRhythmSwingPercent) : std::nullopt, periodic ? ">=" : ""));
  }
  if (!std::isnan(c.d.pcie_rx_p95_over_mean))
    f.evidence.push_back(E("pcie_rx_p95_over_mean", c.d.pcie_rx_p95_over_mean, "ratio", "host→device traffic burstiness"));
  AddPowerEvidence(c, f);
  f.cannot_exclude = {"launch_bound", "host-side stalls (checkpointing, evaluation, logging, synchronisation)"};
  f.to_separate = "time data loading against compute: a PyTorch profiler trace of a few steps, or gputriage step "
                  "markers (a data wait of 20% or more of compute time is input-bound)";
  f.recommendations = {
      {"DataLoader(num_workers=<cores per GPU>, pin_memory=True, persistent_workers=True, prefetch_factor=4)",
       "loading and preprocessing run in parallel with compute"},
      {"cache the dataset on local NVMe (or in RAM) instead of network storage", "removes I/O stalls"},
      {"move heavy augmentation to the GPU (e.g. torchvision.transforms.v2 on CUDA tensors, DALI)", "unloads the CPU"},
  };
  f.gain = FedLevelGain(c, "launch_bound");
  out.push_back(std::move(f));
}

void LowTensorActivity(const Ctx& c, std::vector<Finding>& out) {
  if (!Has(c.d, Metric::kTensorActive) || std::isnan(c.d.busy_mean_percent)) return;
  if (c.d.busy_mean_percent < c.t.util_good_percent) return;
  if (Has(c.d, Metric::kSmActive) && Mean(c.d, Metric::kSmActive) < kSmLowPercent) return;  // undersized work instead
  if (HasAny(out, {"low_precision", "memory_bound"}, Severity::kModerate)) return;
  const double tensor = Mean(c.d, Metric::kTensorActive);
  if (tensor >= c.t.tensor_active_percent) return;
  // Low: counters say little of the work is tensor math, not what a fix would gain
  // (that depends on which kernels take the rest): a trace of a few steps would.
  Finding f = Make(c, "low_tensor_activity", Severity::kLow);
  f.title = fmt::format("Busy but inefficient: tensor pipe active {:.0f}% (target > {:.0f}% for {})", tensor,
                        c.t.tensor_active_percent, c.t.basis);
  f.detail = "The GPU is kept busy, but little of that time is tensor-core math: non-matrix kernels (elementwise, "
             "normalisation, unfused attention softmax) or matmuls with shapes that miss tensor-core tiles dominate.";
  AddBusyEvidence(c, f);
  f.evidence.push_back(E("tensor_active_mean_percent", tensor, "percent", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE / GPM ANY_TENSOR_UTIL",
                         c.t.tensor_active_percent, "<"));
  if (Has(c.d, Metric::kSmActive))
    f.evidence.push_back(E("sm_active_mean_percent", Mean(c.d, Metric::kSmActive), "percent", "DCGM_FI_PROF_SM_ACTIVE"));
  AddTensorThroughputEvidence(c, f);
  f.cannot_exclude = {"unfused_attention", "low_precision"};
  f.to_separate = "a PyTorch profiler trace of a few steps shows which kernels take the non-tensor time";
  f.recommendations = {
      {"torch.nn.functional.scaled_dot_product_attention (flash backend) for attention", "fused attention on tensor cores"},
      {"torch.compile(model)", "fuses the elementwise work around matmuls"},
      {"bf16 autocast and matrix dimensions padded to multiples of 8/64", "more of the math fits tensor-core tiles"},
  };
  out.push_back(std::move(f));
}

void Underutilized(const Ctx& c, std::vector<Finding>& out) {
  if (std::isnan(c.d.busy_mean_percent) || c.d.busy_mean_percent >= c.t.util_investigate_percent) return;
  if (HasAny(out, {"idle", "input_bound", "undersized_work", "video_engine_busy"}, Severity::kInfo)) return;
  // Low only because of its idle phases: those are the finding.
  if (HasAny(out, {"idle_phases"}, Severity::kInfo) && BusyOutsideIdlePhases(c) >= c.t.util_investigate_percent)
    return;
  const bool instant = c.snapshot;
  Finding f = Make(c, "underutilized", instant ? Severity::kLow : Severity::kModerate);
  f.title = fmt::format("Underutilized: mean {} {:.0f}%, below the {:.0f}% that merits investigation for {}", BusyName(c),
                        c.d.busy_mean_percent, c.t.util_investigate_percent, c.t.basis);
  const std::string hint = ProfilingMetricsHint(c.d);
  f.detail = fmt::format(
      "The GPU has no kernel to run for {:.0f}% of the time, without a clear stop-and-go rhythm. The logged metrics "
      "cannot tell which cause it is.{}",
      100.0 - c.d.busy_mean_percent,
      instant ? ShortSourceNote(c) : std::string(""));
  AddBusyEvidence(c, f, c.t.util_investigate_percent, "<");
  AddPowerEvidence(c, f);
  f.cannot_exclude = {"input_bound", "launch_bound", "undersized_work", "communication_bound"};
  f.to_separate = hint.empty() ? std::string("time data loading against compute with a profiler trace or gputriage step markers")
                               : fmt::format("only utilization was logged for these causes: {}; and time data loading "
                                             "against compute (profiler trace or gputriage step markers)",
                                             hint);
  f.recommendations = {{"record a PyTorch profiler trace of ~10 steps and run gputriage diagnose on it",
                        "the trace separates data wait, launch overhead and communication"}};
  f.gain = FedLevelGain(c, "launch_bound");
  out.push_back(std::move(f));
}

/// Busy time says a kernel runs, not that the GPU is used well: "at the compute
/// limit" needs positive evidence, else the finding says what is unknown.
void ComputeLimit(const Ctx& c, std::vector<Finding>& out) {
  if (std::isnan(c.d.busy_mean_percent) || c.d.busy_mean_percent < c.t.util_good_percent) return;
  for (const auto& f : out)
    if (f.severity >= Severity::kModerate) return;
  const bool has_sm = Has(c.d, Metric::kSmActive), has_tensor = Has(c.d, Metric::kTensorActive);
  if (has_sm && Mean(c.d, Metric::kSmActive) < c.t.sm_active_percent) return;
  if (has_tensor && Mean(c.d, Metric::kTensorActive) < c.t.tensor_active_percent) return;
  const bool stops = !std::isnan(c.d.near_zero_share) && c.d.near_zero_share >= kMaterialZeroShare;
  // Evidence 1: the pipes themselves are busy. Evidence 2: the board runs near its
  // power limit at a logged full clock, which only dense work does (power alone is no
  // proof: a capped or memory-bound board draws it too).
  const bool activity = has_sm || has_tensor;
  const bool power = !std::isnan(c.d.power_mean_percent_of_limit) && c.d.power_mean_percent_of_limit >= kPowerNearLimitPercent &&
                     !std::isnan(c.d.sm_clock_mean_percent_of_max) && c.d.sm_clock_mean_percent_of_max >= kClockNearMaxPercent;
  const bool proven = !stops && (activity || power);
  Finding f = Make(c, proven ? "at_compute_limit" : "efficiency_unknown", Severity::kInfo);
  if (proven) {
    f.title = fmt::format("At the compute limit: {} {:.0f}%{}", BusyName(c), c.d.busy_mean_percent,
                          has_tensor ? fmt::format(", tensor pipe {:.0f}%", Mean(c.d, Metric::kTensorActive))
                          : has_sm   ? fmt::format(", SM activity {:.0f}%", Mean(c.d, Metric::kSmActive))
                                     : fmt::format(", power {:.0f}% of its limit", c.d.power_mean_percent_of_limit));
    f.detail = fmt::format("The GPU is as busy as {} should be, and {} no cheap fix shows in these metrics.", c.t.basis,
                           activity ? "its SM/tensor activity is at target:" : "it draws near its power limit at full clock:");
  } else {
    f.title = fmt::format("Busy {:.0f}% of the time; whether that work is efficient is not known from these metrics",
                          c.d.busy_mean_percent);
    f.detail = fmt::format(
        "{} only says a kernel is running{}. Nothing logged shows how much of the chip that work uses, so this is not "
        "called the compute limit.",
        BusyName(c),
        stops ? fmt::format(", and the GPU sits near 0 for {:.0f}% of the time", 100.0 * c.d.near_zero_share)
              : std::string());
  }
  AddBusyEvidence(c, f, c.t.util_good_percent, ">=");
  f.evidence.push_back(E("near_zero_share_percent", 100.0 * (std::isnan(c.d.near_zero_share) ? 0.0 : c.d.near_zero_share),
                         "percent", fmt::format("time at <= {:.0f}%", kNearZeroPercent), 100.0 * kMaterialZeroShare, "<"));
  if (has_sm) f.evidence.push_back(E("sm_active_mean_percent", Mean(c.d, Metric::kSmActive), "percent", "DCGM_FI_PROF_SM_ACTIVE", c.t.sm_active_percent, ">="));
  if (has_tensor)
    f.evidence.push_back(E("tensor_active_mean_percent", Mean(c.d, Metric::kTensorActive), "percent",
                           "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", c.t.tensor_active_percent, ">="));
  AddPowerEvidence(c, f, kPowerNearLimitPercent, ">=");
  if (!std::isnan(c.d.sm_clock_mean_percent_of_max))
    f.evidence.push_back(E("sm_clock_mean_percent_of_max", c.d.sm_clock_mean_percent_of_max, "percent",
                           fmt::format("mean SM clock / max {:.0f} MHz", c.d.max_sm_clock_mhz), kClockNearMaxPercent, ">="));
  AddTensorThroughputEvidence(c, f);
  if (!has_sm || !has_tensor) {
    f.cannot_exclude = {"undersized_work", "low_precision", "memory_bound"};
    f.to_separate = ProfilingMetricsHint(c.d);
  }
  out.push_back(std::move(f));
}

/// ", pod NS/NAME (container C)" where the source attributes the GPU to a Kubernetes
/// pod (dcgm-exporter's labels): the finding names who holds the GPU, so someone can act.
std::string PodOf(const DeviceMetricAnalysis& d) {
  const auto pod = d.labels.find("pod");
  if (pod == d.labels.end() || pod->second.empty()) return {};
  const auto ns = d.labels.find("namespace");
  const auto container = d.labels.find("container");
  return fmt::format(", pod {}{}{}", ns != d.labels.end() && !ns->second.empty() ? ns->second + "/" : "", pod->second,
                     container != d.labels.end() && !container->second.empty() ? " (container " + container->second + ")"
                                                                               : "");
}

/// The job a GPU served: one host's GPUs, split by Kubernetes pod where the source says.
std::string JobKey(const DeviceMetricAnalysis& d) {
  std::string key = d.hostname;
  for (const char* label : {"namespace", "pod"})
    if (auto it = d.labels.find(label); it != d.labels.end()) key += "|" + it->second;
  return key;
}

bool IsProblem(const Finding& f) {
  return f.severity >= Severity::kModerate && f.verdict != "at_compute_limit" && f.verdict != "efficiency_unknown";
}

/// "a; b; c" for a few names, "a; b; c; d; e; f and 505 more" for many.
std::string NameSome(const std::vector<std::string>& names) {
  constexpr size_t kNamed = 8;  // a node's GPUs, as the terminal lists them
  std::string out;
  for (size_t k = 0; k < names.size() && k < kNamed; ++k) out += (k ? "; " : "") + names[k];
  if (names.size() > kNamed) out += fmt::format(" and {} more (all listed in --json)", names.size() - kNamed);
  return out;
}

/// One job's GPUs are one job: a verdict found on several of them is one finding
/// naming them all and the GPUs that differ; where any GPU shows a problem, no GPU
/// of the job is called "at the compute limit" (they wait for each other at every
/// step, so the healthy-looking ones are paced by the problem).
std::vector<Finding> JudgeJob(std::vector<std::vector<Finding>>& per_gpu, const std::vector<std::string>& scopes) {
  bool problem = false;
  for (const auto& found : per_gpu)
    for (const auto& f : found) problem = problem || IsProblem(f);
  std::vector<Finding> grouped;
  std::vector<std::vector<size_t>> members;
  for (size_t g = 0; g < per_gpu.size(); ++g) {
    for (auto& f : per_gpu[g]) {
      if (problem && (f.verdict == "at_compute_limit" || f.verdict == "efficiency_unknown")) continue;
      auto same = std::find_if(grouped.begin(), grouped.end(), [&](const Finding& k) { return k.verdict == f.verdict; });
      if (same == grouped.end()) {
        members.push_back({g});
        grouped.push_back(std::move(f));
        continue;
      }
      auto& m = members[static_cast<size_t>(same - grouped.begin())];
      if (std::find(m.begin(), m.end(), g) == m.end()) m.push_back(g);
      if (f.severity > same->severity) {  // the most severe GPU speaks for the job
        f.scope = same->scope;
        *same = std::move(f);
      }
    }
  }
  for (size_t i = 0; i < grouped.size(); ++i) {
    const auto& m = members[i];
    if (per_gpu.size() < 2) continue;
    std::vector<std::string> with, without;
    for (size_t g = 0; g < per_gpu.size(); ++g)
      (std::find(m.begin(), m.end(), g) != m.end() ? with : without).push_back(scopes[g]);
    auto& f = grouped[i];
    if (with.size() > 1) f.scope = fmt::format("{} and {} more ({} of {} GPUs of the job)", with.front(), with.size() - 1,
                                               with.size(), per_gpu.size());
    // Thousands of GPUs: the text names a few, the finding keeps them all (--json).
    f.detail += fmt::format(" Judged for the job's {} GPUs together: seen on {}", per_gpu.size(), NameSome(with));
    if (!without.empty()) f.detail += fmt::format("; the GPUs that differ: {}", NameSome(without));
    f.detail += " (each GPU's numbers are under MEASUREMENTS; the evidence is the most severe GPU's).";
    f.seen_on = std::move(with);
    f.not_seen_on = std::move(without);
  }
  return grouped;
}

}  // namespace

std::vector<Finding> JudgeMetrics(const RecordingAnalysis& a, const WorkloadTargets& targets) {
  // Per GPU first, then per job.
  std::vector<std::string> job_keys;
  std::vector<std::vector<std::vector<Finding>>> jobs;
  std::vector<std::vector<std::string>> job_scopes;
  for (const auto& d : a.metric_devices) {
    Ctx c{a, d, targets, FindGpuSpec(d.name), {}, {}, 0};
    c.scope = d.label + (d.name.empty() ? "" : " (" + d.name + ")") + PodOf(d) +
              (a.phase.empty() ? "" : ", " + a.phase + " phase");
    c.source = d.busy_series == Metric::kGpuUtil ? "utilization.gpu (share of time a kernel runs)"
                                           : "GR engine activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE)";
    c.busy_samples = d.Busy().samples;
    c.snapshot = c.busy_samples < kMinSamplesForRun || d.hours * 3600.0 < kMinSecondsForRun;
    std::vector<Finding> out;
    if (!UtilizationUnavailable(c, out) && !VideoEngineBusy(c, out) && !Idle(c, out)) {
      Throttled(c, out);
      LowPrecision(c, out);
      MemoryBound(c, out);
      UndersizedWork(c, out);
      IdlePhases(c, out);
      InputBound(c, out);
      LowTensorActivity(c, out);
      Underutilized(c, out);
      ComputeLimit(c, out);
    }
    const std::string key = JobKey(d);
    auto it = std::find(job_keys.begin(), job_keys.end(), key);
    if (it == job_keys.end()) {
      job_keys.push_back(key);
      jobs.emplace_back();
      job_scopes.emplace_back();
      it = job_keys.end() - 1;
    }
    const auto j = static_cast<size_t>(it - job_keys.begin());
    jobs[j].push_back(std::move(out));
    job_scopes[j].push_back(c.scope);
  }
  std::vector<Finding> all;
  for (size_t j = 0; j < jobs.size(); ++j) {
    auto found = JudgeJob(jobs[j], job_scopes[j]);
    all.insert(all.end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
  }
  return all;
}

}  // namespace gputriage
