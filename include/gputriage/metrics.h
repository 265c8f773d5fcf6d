// Sampled GPU metrics in the canonical model: what nvidia-smi, dmon, dcgmi and
// dcgm-exporter logs (and later NVML recordings) become.
//
// Every importer normalises units on the way in (percent 0-100, bytes, bytes/s,
// watts, MHz, degrees C, joules), so analyses never see a source's unit.
//
// Memory is bounded: a series keeps a streaming sketch (exact counts, a value
// histogram, a decimated timeline and a periodicity accumulator), not its samples,
// so a multi-gigabyte log costs the same memory as a short one.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gputriage {

using TimeNs = int64_t;

/// Canonical metrics. Utilizations and activities are percent (0-100) even when
/// the source reports a 0-1 ratio (DCGM profiling fields, dcgm-exporter >= 4.9).
enum class Metric : uint8_t {
  kGpuUtil,          // NVML utilization.gpu / DCGM_FI_DEV_GPU_UTIL: share of time any kernel runs
  kMemCopyUtil,      // utilization.memory / MEM_COPY_UTIL: share of time device memory is read or written
  kEncoderUtil,      // NVENC
  kDecoderUtil,      // NVDEC
  kGrEngineActive,   // DCGM_FI_PROF_GR_ENGINE_ACTIVE / GPM GRAPHICS_UTIL
  kSmActive,         // DCGM_FI_PROF_SM_ACTIVE / GPM SM_UTIL
  kSmOccupancy,      // DCGM_FI_PROF_SM_OCCUPANCY / GPM SM_OCCUPANCY
  kTensorActive,     // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE / GPM ANY_TENSOR_UTIL
  kDramActive,       // DCGM_FI_PROF_DRAM_ACTIVE / GPM DRAM_BW_UTIL
  kFp64Active,
  kFp32Active,
  kFp16Active,
  kPcieRxBytesPerS,  // host → device
  kPcieTxBytesPerS,
  kNvlinkRxBytesPerS,
  kNvlinkTxBytesPerS,
  kPowerW,
  kPowerLimitW,      // enforced/current board power limit
  kSmClockMHz,
  kMemClockMHz,
  kGpuTempC,
  kMemTempC,
  kFbUsedBytes,
  kFbFreeBytes,
  kFbTotalBytes,
  kClockEventReasons,  // NVML clocks_event_reasons bitmask (stored as a double holding an integer)
  kEnergyJ,            // cumulative energy counter
  // Live recordings only (NVML per-process accounting of the recorded job's process tree):
  kJobSmUtil,          // summed per-process SM utilization of the job's processes on this GPU
  kOtherSmUtil,        // the same for processes outside the job (another user, a stale process)
  kJobFbUsedBytes,     // device memory held by the job's processes
  kCount,
};
constexpr int kNumMetrics = static_cast<int>(Metric::kCount);

/// Stable snake_case id ("gpu_util", "tensor_active") used in JSON and docs.
const char* MetricName(Metric m);
/// Canonical unit: "percent", "bytes", "bytes/s", "W", "MHz", "C", "J", "bitmask".
const char* MetricUnit(Metric m);
/// True for metrics on a 0-100 scale.
bool IsPercentMetric(Metric m);

/// NVML clock event (throttle) reason bits (nvml.h nvmlClocksEventReason*).
namespace clock_event {
constexpr uint64_t kGpuIdle = 0x1;
constexpr uint64_t kApplicationsClocksSetting = 0x2;
constexpr uint64_t kSwPowerCap = 0x4;
constexpr uint64_t kHwSlowdown = 0x8;
constexpr uint64_t kSyncBoost = 0x10;
constexpr uint64_t kSwThermalSlowdown = 0x20;
constexpr uint64_t kHwThermalSlowdown = 0x40;
constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
constexpr uint64_t kDisplayClockSetting = 0x100;
/// Reasons that cost performance while the GPU has work (idle and settings do not).
constexpr uint64_t kPerformanceLimiting =
    kSwPowerCap | kHwSlowdown | kSwThermalSlowdown | kHwThermalSlowdown | kHwPowerBrakeSlowdown;
}  // namespace clock_event

/// A streaming summary of one series. Exact: count, sum, min, max, first/last
/// time. Quantiles: exact for integer values 0..4095 (what percent and MHz
/// readings are), else from a log-linear histogram (relative error < 0.4 %).
/// Timeline: at most kTimelineBuckets means (kChartTimelineBuckets for the series
/// the HTML report draws), merged pairwise as the series grows.
/// Periodicity: mean autocorrelation over blocks of kRhythmBlock regular samples.
class SeriesSketch {
 public:
  static constexpr int kTimelineBuckets = 512;
  /// Pictures need about one bucket per pixel column of a wide chart; only the
  /// few activity series a report draws keep this many (min and max in each, so
  /// no spike is lost when the buckets merge).
  static constexpr int kChartTimelineBuckets = 2048;
  static constexpr int kRhythmBlock = 256;
  static constexpr int kRhythmMaxLag = 96;

  SeriesSketch();
  ~SeriesSketch();
  SeriesSketch(SeriesSketch&&) noexcept;
  SeriesSketch& operator=(SeriesSketch&&) noexcept;

  /// Adds one sample. Times should not decrease; an out-of-order sample still
  /// counts in the distribution but not in the timeline or periodicity.
  void Add(TimeNs t, double value);
  /// Turns on the periodicity accumulator (costly: only for utilization series).
  void EnableRhythm();
  /// Keeps up to `buckets` timeline buckets instead of kTimelineBuckets (before the first sample).
  void SetTimelineBuckets(int buckets) { timeline_buckets_ = buckets; }

  int64_t count() const { return count_; }
  /// Time-weighted mean: each sample counts for the time since the one before it
  /// (see Weight in metrics.cc); shares and quantiles below are weighted the same way.
  double mean() const;
  /// The time-weighted mean of the values above x (NaN when none is).
  double MeanAbove(double x) const;
  double min() const { return min_; }
  double max() const { return max_; }
  TimeNs first_time() const { return first_t_; }
  TimeNs last_time() const { return last_t_; }
  int64_t out_of_order() const { return out_of_order_; }
  /// The q-quantile (0..1) of the values, by time; never outside [min, max].
  double Quantile(double q) const;
  /// Share (0..1) of the observed time with value <= x / >= x.
  double ShareAtMost(double x) const;
  double ShareAtLeast(double x) const;
  /// Median spacing of consecutive samples (0 with fewer than 2).
  TimeNs MedianInterval() const;
  /// Largest spacing of consecutive samples.
  TimeNs MaxInterval() const { return max_interval_; }
  /// Time the series observed: the sum of sample spacings up to 4x the regular
  /// (p90) spacing of their part of the log, plus one regular spacing for the first
  /// sample and for each hole (logging stopped, the job paused) that is longer. The
  /// same time the samples' weights add up to.
  TimeNs CoveredTime() const;
  /// Spacings longer than 4x the regular (p90) spacing: where the log has holes.
  int64_t Gaps() const;

  struct TimelinePoint {
    TimeNs start = 0;
    double mean = 0;
    double min = 0;
    double max = 0;
    int64_t count = 0;
    double weight = 0;  // the time its samples cover (ns): the mean is weighted by it
  };
  std::vector<TimelinePoint> Timeline() const;
  /// The timeline with neighbouring buckets merged pairwise until at most
  /// `max_points` remain (min and max kept, means time-weighted).
  std::vector<TimelinePoint> Timeline(size_t max_points) const;
  TimeNs timeline_bucket_ns() const { return bucket_ns_; }

  /// Stretches of at least kIdleStretchMinNs whose every sample is at or below
  /// kIdleStretchLevel (utilization series: those with EnableRhythm): a GPU idle
  /// between bursts of work (evaluation, checkpoints, waits between jobs), far
  /// longer than a step's wait for data. Not bridged across holes in the log.
  static constexpr int64_t kIdleStretchMinNs = int64_t{10} * 1000 * 1000 * 1000;
  static constexpr double kIdleStretchLevel = 5.0;
  /// The sparsest sampling whose stretches an analysis may name (see metric_analysis.cc).
  static constexpr int64_t kIdleStretchMaxSpacingNs = int64_t{60} * 1000 * 1000 * 1000;
  static constexpr size_t kIdleStretchesListed = 16;
  struct IdleStretches {
    int64_t count = 0;
    TimeNs total_ns = 0;
    TimeNs longest_ns = 0;
    std::vector<std::pair<TimeNs, TimeNs>> listed;  // the first kIdleStretchesListed (start, end)
  };
  /// The stretches so far, with one still open at the last sample.
  IdleStretches idle_stretches() const;

  struct Rhythm {
    int blocks = 0;            // blocks of regular samples with variation
    int period_samples = 0;    // lag of the strongest autocorrelation peak, 0 if none
    TimeNs period_ns = 0;      // period_samples × median interval
    double strength = 0;       // mean autocorrelation at that lag (-1..1)
    double swing_p50 = 0;      // median within-block p90 - p10 (units of the series)
  };
  Rhythm rhythm() const;

 private:
  struct Histogram;
  struct IntervalCounts;
  struct RhythmState;
  void AddTimeline(TimeNs t, double value, double weight);
  void FlushRhythmBlock();

  static constexpr size_t kWarmSamples = 16;
  static constexpr int64_t kReferenceEvery = 256;
  static double Weight(TimeNs dt, TimeNs reference);
  void Commit(double value, TimeNs dt);

  int64_t count_ = 0;
  double weight_ = 0;        // committed samples' time, ns
  int64_t holes_ = 0;        // committed spacings over 4x the reference at their time
  double weighted_sum_ = 0;
  TimeNs reference_interval_ = 0;  // median spacing, for telling holes; 0 while warming up
  std::vector<std::pair<double, TimeNs>> pending_;  // the first samples, until the spacing is known
  double min_ = 0;
  double max_ = 0;
  TimeNs first_t_ = 0;
  TimeNs last_t_ = 0;
  TimeNs max_interval_ = 0;
  int64_t out_of_order_ = 0;
  std::unique_ptr<Histogram> values_;
  std::unique_ptr<IntervalCounts> intervals_;
  std::vector<TimelinePoint> timeline_;
  int timeline_buckets_ = kTimelineBuckets;
  TimeNs bucket_ns_ = 0;
  size_t current_ = 0;         // bucket of the latest sample
  TimeNs current_start_ = 0;
  std::unique_ptr<RhythmState> rhythm_;
  IdleStretches idle_;
  TimeNs idle_begin_ = -1;  // the open low stretch: from the sample before its first low one, -1 when none
  TimeNs idle_last_ = 0;    // its latest low sample
  static void CloseIdle(IdleStretches& into, TimeNs begin, TimeNs end);
  const std::vector<std::pair<double, double>>& SortedValues() const;
  mutable std::vector<std::pair<double, double>> sorted_;  // (value, weight), valid for sorted_count_ samples
  mutable double sorted_weight_ = 0;
  mutable int64_t sorted_count_ = -1;
};

/// Power, SM clock and temperature while the GPU is loaded (its utilization, or GR
/// engine activity, at least kLoadedBusyPercent in the same sample): the readings
/// of one sample are joined by their time as they arrive, so the signature of a
/// power cap or a thermal limit (power pinned at a ceiling, clocks below their
/// maximum) is read where the work runs, not averaged with idle stretches, where
/// clocks drop on their own. Time-weighted: a loaded sample stands for the time
/// since the device's previous sample (at most kMaxWeightNs). Bounded: one
/// pending sample and a few sums.
struct LoadedReadings {
  static constexpr double kLoadedBusyPercent = 80.0;
  static constexpr TimeNs kMaxWeightNs = TimeNs{60} * 1000 * 1000 * 1000;

  struct Sums {
    double weight_ns = 0;  // loaded time with each reading
    double value_sum = 0;     // time-weighted
    double value_sq_sum = 0;  // time-weighted squares (the spread)
    double min = 0, max = 0;
    int64_t samples = 0;
    void Add(double value, double weight);
    double Mean() const { return weight_ns > 0 ? value_sum / weight_ns : NAN; }
    /// Time-weighted coefficient of variation (standard deviation / mean).
    double Cv() const;
  };
  Sums power_w, sm_clock_mhz, temp_c;
  double loaded_ns = 0;       // loaded time (samples with a busy reading >= the threshold)
  double observed_ns = 0;     // time of every sample with a busy reading

  /// Time near zero (busy <= kNearZeroBusyPercent) by the memory in use at that
  /// sample, in log2 bins of kFbBinsPerOctave per octave from 1 MiB: a job holds its
  /// memory while it waits for data, so readings near zero with far less memory in
  /// use than the log's peak were taken while no job held the GPU (between jobs).
  static constexpr double kNearZeroBusyPercent = 5.0;
  static constexpr int kFbBinsPerOctave = 8;
  static constexpr int kFbBins = 24 * kFbBinsPerOctave;
  std::array<double, kFbBins> near_zero_ns_by_fb{};
  double fb_used_max = 0;     // bytes, the highest reading joined to a busy reading
  /// Share (0..1) of the observed time near zero with less than `fraction` of the
  /// peak memory in use; 0 when memory was not logged beside utilization.
  double NearZeroShareBelowMemory(double fraction) const;
  /// Readings of the device's latest sample time, until a later one arrives.
  TimeNs pending_t = 0;
  TimeNs previous_t = 0;
  bool has_previous = false;
  bool has_pending = false;
  double busy = NAN, power = NAN, sm_clock = NAN, temp = NAN, fb_used = NAN;

  /// Takes one reading (any metric: the ones above are kept).
  void Take(Metric m, TimeNs t, double value);
  /// The sums with the pending sample counted in (what analysis reads).
  LoadedReadings Settled() const;

 private:
  void Commit();
};

/// Identity and static facts of one GPU (or MIG instance) as a metric source saw it.
struct MetricDevice {
  int index = -1;            // nvidia-smi / DCGM GPU index, -1 if not given
  std::string uuid;
  std::string pci_bus_id;
  std::string mig_profile;   // "1g.5gb" for a MIG instance
  int mig_instance = -1;     // GPU_I_ID
  std::string name;          // "NVIDIA H100 80GB HBM3"
  std::string architecture;  // "Hopper" (nvidia-smi -q)
  std::string driver_version;
  std::string hostname;
  bool mig_mode = false;     // MIG enabled on the physical GPU
  double power_limit_w = 0;  // 0 when unknown
  double max_sm_clock_mhz = 0;
  int64_t memory_total_bytes = 0;
  /// Whether the recorded job ran here. A live recording attributes GPUs through
  /// the job's process tree (NVML's running processes); logs leave it unknown.
  enum class JobUse : uint8_t { kUnknown, kUsed, kNotUsed };
  JobUse job_use = JobUse::kUnknown;
  /// Processes outside the job seen on this GPU during a recording ("pid 4242"), at most 8.
  std::vector<std::string> other_processes;
  /// Kubernetes attribution and other labels (pod, namespace, container, ...).
  std::map<std::string, std::string> labels;
  std::array<SeriesSketch, kNumMetrics> series;
  /// Clock-event reason samples: how many had each bit (index = bit position)
  /// and how many had any performance-limiting reason.
  std::array<int64_t, 9> reason_counts{};
  int64_t limiting_reason_samples = 0;
  LoadedReadings loaded;

  /// "GPU 0", "GPU 0 / MIG 1g.5gb (13)", or the uuid when no index is known.
  std::string Label() const;
  bool Has(Metric m) const { return series[static_cast<int>(m)].count() > 0; }
  const SeriesSketch& Get(Metric m) const { return series[static_cast<int>(m)]; }
};

/// All metric series of one recording, keyed by device.
struct MetricSet {
  std::vector<MetricDevice> devices;
  int64_t samples = 0;       // values added
  int64_t rows = 0;          // source rows / scrapes read
  bool timestamps_synthetic = false;  // the source had no clock: times are row × interval
  std::string clock_note;    // e.g. "local time of the logging host (nvidia-smi writes no zone)"

  bool empty() const { return samples == 0 && devices.empty(); }
  /// Finds or adds a device by the best key available (uuid, pci bus id + MIG
  /// instance, index). Returns its position. Bounded: at most kMaxDevices.
  static constexpr size_t kMaxDevices = 4096;
  std::optional<size_t> FindOrAdd(int index, std::string_view uuid, std::string_view pci_bus_id, int mig_instance);
  /// Adds a value to its device's series, unless it is physically impossible for
  /// its metric (Plausible): then it is counted in `rejected`, never averaged in.
  void Add(size_t device, Metric m, TimeNs t, double value);
  /// Whether a value can be a reading of `m` in canonical units: percents in
  /// [0, 100], power in [0, 5 kW], clocks up to 100 GHz, bytes up to 1 PB, ...
  static bool Plausible(Metric m, double value);
  /// Values Add() refused, per metric, and the first of each (for the message).
  std::array<int64_t, kNumMetrics> rejected{};
  std::array<double, kNumMetrics> first_rejected{};
  /// false: Add() keeps no sketch (the series, the loaded readings), only the
  /// count, the clock-event tallies and the observer. The agent's live
  /// recording: it judges from its own sliding window, and sketches kept for
  /// weeks of every GPU had cost it 110 MB with 256 GPUs (issue 41).
  bool sketch = true;
  /// Called with every value Add() takes, after the sketch has it: while a run
  /// is recorded, the run store's writer.
  std::function<void(size_t device, Metric m, TimeNs t, double value)> observer;
  /// Leaves out the GPUs known not to be the recorded job's, when at least one
  /// is known to be (GPUs of unknown use stay). Returns the labels of the GPUs
  /// left out; nothing changes when no GPU is known to be the job's.
  std::vector<std::string> KeepJobDevices();
};

}  // namespace gputriage
