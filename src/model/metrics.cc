#include "gputriage/metrics.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace gputriage {

namespace {

struct MetricInfo {
  const char* name;
  const char* unit;
};

constexpr MetricInfo kMetricInfo[kNumMetrics] = {
    {"gpu_util", "percent"},         {"mem_copy_util", "percent"},     {"encoder_util", "percent"},
    {"decoder_util", "percent"},     {"gr_engine_active", "percent"},  {"sm_active", "percent"},
    {"sm_occupancy", "percent"},     {"tensor_active", "percent"},     {"dram_active", "percent"},
    {"fp64_active", "percent"},      {"fp32_active", "percent"},       {"fp16_active", "percent"},
    {"pcie_rx", "bytes/s"},          {"pcie_tx", "bytes/s"},           {"nvlink_rx", "bytes/s"},
    {"nvlink_tx", "bytes/s"},        {"power", "W"},                   {"power_limit", "W"},
    {"sm_clock", "MHz"},             {"mem_clock", "MHz"},             {"gpu_temp", "C"},
    {"mem_temp", "C"},               {"fb_used", "bytes"},             {"fb_free", "bytes"},
    {"fb_total", "bytes"},           {"clock_event_reasons", "bitmask"}, {"energy", "J"},
    {"job_sm_util", "percent"},      {"other_sm_util", "percent"},     {"job_fb_used", "bytes"},
};

// Integer readings 0..4095 (percent, MHz up to 4 GHz, degrees, watts without
// decimals) are counted exactly; anything else goes to log-linear buckets.
constexpr int kExactValues = 4096;
constexpr int kMantissaBits = 8;  // 256 buckets per octave: < 0.4 % relative error

int32_t LogBucket(double v) {
  // Sign, exponent and the top mantissa bits of the IEEE-754 representation give
  // a monotone bucket index for positive values; negatives mirror it.
  const double a = std::fabs(v);
  if (a < 1e-300) return 0;
  const uint64_t bits = std::bit_cast<uint64_t>(a);
  const int32_t key = static_cast<int32_t>(bits >> (52 - kMantissaBits)) & 0x7FFFFFFF;
  return v < 0 ? -key : key;
}

double BucketValue(int32_t key) {
  if (key == 0) return 0.0;
  const bool negative = key < 0;
  const uint64_t k = static_cast<uint64_t>(negative ? -static_cast<int64_t>(key) : key);
  // Midpoint of the bucket: set the next mantissa bit.
  const uint64_t bits = (k << (52 - kMantissaBits)) | (uint64_t{1} << (51 - kMantissaBits));
  const double v = std::bit_cast<double>(bits);
  return negative ? -v : v;
}

/// The q-quantile of values given as sorted (value, weight) pairs whose weights sum
/// to `total`: the smallest value with more than q of the weight at or below it.
double QuantileOfSorted(const std::vector<std::pair<double, double>>& sorted, double total, double q) {
  if (total <= 0 || sorted.empty()) return NAN;
  const double target = std::clamp(q, 0.0, 1.0) * total;
  double seen = 0;
  for (const auto& [value, w] : sorted) {
    seen += w;
    if (seen > target) return value;
  }
  return sorted.back().first;
}

constexpr double kMiB = 1024.0 * 1024.0;

/// The log2 bin of a memory reading (bytes): bin b holds [2^(b/k), 2^((b+1)/k)) MiB.
int FbBin(double bytes) {
  const double octaves = std::log2(std::max(bytes / kMiB, 1.0));
  return std::clamp(static_cast<int>(octaves * LoadedReadings::kFbBinsPerOctave), 0, LoadedReadings::kFbBins - 1);
}

}  // namespace

const char* MetricName(Metric m) { return kMetricInfo[static_cast<int>(m)].name; }
const char* MetricUnit(Metric m) { return kMetricInfo[static_cast<int>(m)].unit; }
bool IsPercentMetric(Metric m) { return std::strcmp(MetricUnit(m), "percent") == 0; }

struct SeriesSketch::Histogram {
  // Log buckets live in a dense window of keys while the values span a few
  // octaves (the usual case: power between idle and the limit), in a map beyond.
  // Each bucket holds the time its samples cover (weights), not their count.
  static constexpr size_t kMaxDense = 1 << 14;
  std::vector<double> exact;  // lazily sized kExactValues
  size_t exact_end = 0;       // one past the largest exact value seen
  std::vector<double> dense;
  int64_t dense_base = 0;  // int64: keys span the whole int32 range
  std::unordered_map<int32_t, double> buckets;
  double total = 0;

  void Add(double v, double w) {
    total += w;
    if (v >= 0 && v < kExactValues && v == std::floor(v)) {
      if (exact.empty()) exact.assign(kExactValues, 0);
      const auto i = static_cast<size_t>(v);
      exact[i] += w;
      exact_end = std::max(exact_end, i + 1);
      return;
    }
    const int64_t key = LogBucket(v);
    if (dense.empty()) {
      dense.assign(256, 0);
      dense_base = key - 128;
    }
    const int64_t size = static_cast<int64_t>(dense.size());
    if (key >= dense_base && key < dense_base + size) {
      dense[static_cast<size_t>(key - dense_base)] += w;
      return;
    }
    // Grow the window to cover the key when it stays small; else use the map.
    const int64_t lo = std::min(dense_base, key), hi = std::max(dense_base + size, key + 1);
    if (hi - lo <= static_cast<int64_t>(kMaxDense)) {
      std::vector<double> grown(static_cast<size_t>(hi - lo), 0);
      std::copy(dense.begin(), dense.end(), grown.begin() + (dense_base - lo));
      dense = std::move(grown);
      dense_base = lo;
      dense[static_cast<size_t>(key - dense_base)] += w;
      return;
    }
    buckets[static_cast<int32_t>(key)] += w;
  }

  /// (value, weight) pairs in increasing value order.
  std::vector<std::pair<double, double>> Sorted() const {
    std::vector<std::pair<double, double>> out;
    out.reserve(buckets.size() + 64);
    for (const auto& [key, w] : buckets) out.emplace_back(BucketValue(key), w);
    for (size_t i = 0; i < dense.size(); ++i)
      if (dense[i] > 0) out.emplace_back(BucketValue(static_cast<int32_t>(dense_base + static_cast<int64_t>(i))), dense[i]);
    for (size_t i = 0; i < exact_end; ++i)
      if (exact[i] > 0) out.emplace_back(static_cast<double>(i), exact[i]);
    std::sort(out.begin(), out.end());
    return out;
  }

  double Quantile(double q) const { return QuantileOfSorted(Sorted(), total, q); }
};

/// Sampling intervals: exact while there are few distinct spacings (the usual
/// case: a fixed interval with millisecond jitter), rounded to 3 significant
/// digits once there are many, so memory stays bounded.
constexpr double kRegularSpacingQuantile = 0.9;

struct SeriesSketch::IntervalCounts {
  static constexpr size_t kMaxExact = 256;  // live clocks jitter: every spacing differs
  std::unordered_map<int64_t, int64_t> counts;
  int64_t total = 0;
  int64_t last_dt = -1;
  int64_t* last_count = nullptr;  // map nodes are stable: the common repeat skips the lookup
  void Add(int64_t dt) {
    ++total;
    if (dt == last_dt) {
      ++*last_count;
      return;
    }
    auto it = counts.find(dt);
    if (it != counts.end()) {
      ++it->second;
      last_dt = dt;
      last_count = &it->second;
      return;
    }
    if (counts.size() >= kMaxExact) {
      int64_t scale = 1;
      while (dt / scale >= 1000) scale *= 10;
      dt = dt / scale * scale;
    }
    ++counts[dt];
  }
  int64_t Median() const { return Quantile(0.5); }
  /// The smallest spacing with more than q of all spacings at or below it.
  int64_t Quantile(double q) const {
    if (total == 0) return 0;
    std::vector<std::pair<int64_t, int64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end());
    int64_t seen = 0;
    for (const auto& [dt, n] : sorted) {
      seen += n;
      if (static_cast<double>(seen) > q * static_cast<double>(total)) return dt;
    }
    return sorted.back().first;
  }
  /// What a hole is measured against: the p90 spacing, so that a source mixing two
  /// rates (NVML's 20 ms buffer entries while busy, 100 ms polls while idle) has no
  /// holes where it only samples slower; a hole is rarer than one spacing in ten.
  int64_t Regular() const { return Quantile(kRegularSpacingQuantile); }
};

struct SeriesSketch::RhythmState {
  std::vector<double> values;
  std::vector<TimeNs> times;
  std::array<double, kRhythmMaxLag + 1> acf_sum{};
  int blocks = 0;
  Histogram swings;
};

SeriesSketch::SeriesSketch() = default;
SeriesSketch::~SeriesSketch() = default;
SeriesSketch::SeriesSketch(SeriesSketch&&) noexcept = default;
SeriesSketch& SeriesSketch::operator=(SeriesSketch&&) noexcept = default;

void SeriesSketch::EnableRhythm() {
  if (!rhythm_) {
    rhythm_ = std::make_unique<RhythmState>();
    rhythm_->values.reserve(kRhythmBlock);
    rhythm_->times.reserve(kRhythmBlock);
  }
}

double SeriesSketch::Weight(TimeNs dt, TimeNs reference) {
  // A sample stands for the time since the one before it (utilization and DCGM
  // activities are averages over the period that ends at the sample). The first
  // sample, one out of order and one after a hole in the log (a spacing over 4x
  // the reference) stand for one reference interval: nobody saw the hole. The
  // extra nanosecond keeps samples at one instant (a single scrape) equal.
  if (dt < 0 || (reference > 0 && dt / 4 > reference)) dt = std::max<TimeNs>(reference, 0);
  return static_cast<double>(dt) + 1.0;
}

void SeriesSketch::Commit(double value, TimeNs dt) {
  const double w = Weight(dt, reference_interval_);
  if (dt > 0 && reference_interval_ > 0 && dt / 4 > reference_interval_) ++holes_;
  values_->Add(value, w);
  weight_ += w;
  weighted_sum_ += w * value;
}

void SeriesSketch::CloseIdle(IdleStretches& into, TimeNs begin, TimeNs end) {
  if (end - begin < kIdleStretchMinNs) return;
  ++into.count;
  into.total_ns += end - begin;
  into.longest_ns = std::max(into.longest_ns, end - begin);
  if (into.listed.size() < kIdleStretchesListed) into.listed.emplace_back(begin, end);
}

SeriesSketch::IdleStretches SeriesSketch::idle_stretches() const {
  IdleStretches out = idle_;
  if (idle_begin_ >= 0) CloseIdle(out, idle_begin_, idle_last_);
  return out;
}

void SeriesSketch::Add(TimeNs t, double value) {
  if (!std::isfinite(value)) return;
  if (!values_) values_ = std::make_unique<Histogram>();
  // The sample's spacing from the one before (-1: none, or out of order).
  const TimeNs dt = count_ == 0 || t < last_t_ ? -1 : t - last_t_;
  if (rhythm_ && (dt >= 0 || count_ == 0)) {
    // Long stretches near zero: a low sample stands for the spacing before it, so
    // a stretch begins at the sample before its first low one (not across a hole).
    const bool hole = dt > 0 && reference_interval_ > 0 && dt / 4 > reference_interval_;
    if (hole && idle_begin_ >= 0) {
      CloseIdle(idle_, idle_begin_, idle_last_);
      idle_begin_ = -1;
    }
    if (value <= kIdleStretchLevel) {
      if (idle_begin_ < 0) idle_begin_ = dt > 0 && !hole ? last_t_ : t;
      idle_last_ = t;
    } else if (idle_begin_ >= 0) {
      CloseIdle(idle_, idle_begin_, idle_last_);
      idle_begin_ = -1;
    }
  }
  if (count_ == 0) {
    min_ = max_ = value;
    first_t_ = last_t_ = t;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  if (dt >= 0 && count_ > 1) {
    if (!intervals_) intervals_ = std::make_unique<IntervalCounts>();
    // Readings at one instant (a logger that writes several tables within the second
    // its clock shows) are no spacing: counted as spacings of 0, they made every real
    // interval look like a hole in the log.
    if (dt > 0) intervals_->Add(dt);
    max_interval_ = std::max(max_interval_, dt);
    last_t_ = t;
    // The reference for holes follows the series as it grows, and is checked again
    // whenever a spacing looks like a hole (a source that changes its rate).
    if (reference_interval_ > 0 && (intervals_->total % kReferenceEvery == 0 || dt / 4 > reference_interval_))
      reference_interval_ = intervals_->Regular();
  }
  if (pending_.size() < kWarmSamples && reference_interval_ == 0) {
    // Until a few spacings are known, no hole can be told from a normal interval.
    pending_.emplace_back(value, dt);
    if (pending_.size() == kWarmSamples) {
      reference_interval_ = intervals_ ? intervals_->Regular() : 0;
      for (const auto& [v, d] : pending_) Commit(v, d);
      pending_.clear();
      pending_.shrink_to_fit();
      if (reference_interval_ == 0) reference_interval_ = -1;  // all at one instant: keep unit weights
    }
  } else {
    Commit(value, dt);
  }
  if (dt < 0 && count_ > 1) {
    ++out_of_order_;  // counts in the distribution, not in the timeline or the rhythm
    return;
  }
  AddTimeline(t, value, Weight(dt, std::max<TimeNs>(reference_interval_, 0)));
  if (rhythm_) {
    auto& r = *rhythm_;
    // A gap of several sampling intervals breaks the regular spacing the
    // autocorrelation assumes: start the block again.
    if (r.times.size() >= 2) {
      const TimeNs first_dt = r.times[1] - r.times[0];
      if ((t - r.times.back()) / 4 > std::max<TimeNs>(first_dt, 1)) {
        r.values.clear();
        r.times.clear();
      }
    }
    r.values.push_back(value);
    r.times.push_back(t);
    if (static_cast<int>(r.values.size()) == kRhythmBlock) FlushRhythmBlock();
  }
}

void SeriesSketch::AddTimeline(TimeNs t, double value, double w) {
  // Buckets hold time-weighted sums (mean: sum of w x value; weight: sum of w) until Timeline() divides.
  if (timeline_.empty()) {
    timeline_.push_back({t, w * value, value, value, 1, w});
    return;
  }
  if (bucket_ns_ == 0) {
    const TimeNs dt = t - first_t_;
    if (dt <= 0) {  // same instant as the first sample
      auto& p = timeline_[0];
      p.mean += w * value;
      p.weight += w;
      ++p.count;
      p.min = std::min(p.min, value);
      p.max = std::max(p.max, value);
      return;
    }
    bucket_ns_ = std::max<TimeNs>(dt, 1'000'000);
  }
  if (t >= current_start_ && t < current_start_ + bucket_ns_ && current_ < timeline_.size()) {
    auto& p = timeline_[current_];  // still inside the current bucket: the common case
    if (p.count > 0) {
      p.mean += w * value;
      p.weight += w;
      ++p.count;
      p.min = std::min(p.min, value);
      p.max = std::max(p.max, value);
      return;
    }
  }
  TimeNs index = (t - first_t_) / bucket_ns_;
  while (index >= timeline_buckets_) {
    // Merge neighbours: the timeline keeps its shape at half the resolution.
    std::vector<TimelinePoint> merged((timeline_.size() + 1) / 2);
    for (size_t i = 0; i < timeline_.size(); ++i) {
      auto& m = merged[i / 2];
      const auto& p = timeline_[i];
      if (p.count == 0) continue;
      if (m.count == 0) {
        m = p;
        m.start = first_t_ + static_cast<TimeNs>(i / 2) * bucket_ns_ * 2;
        continue;
      }
      m.mean += p.mean;  // sums
      m.weight += p.weight;
      m.min = std::min(m.min, p.min);
      m.max = std::max(m.max, p.max);
      m.count += p.count;
    }
    timeline_ = std::move(merged);
    bucket_ns_ *= 2;
    index = (t - first_t_) / bucket_ns_;
  }
  if (static_cast<size_t>(index) >= timeline_.size()) timeline_.resize(static_cast<size_t>(index) + 1);
  current_ = static_cast<size_t>(index);
  current_start_ = first_t_ + index * bucket_ns_;
  auto& p = timeline_[static_cast<size_t>(index)];
  if (p.count == 0) {
    p = {first_t_ + index * bucket_ns_, w * value, value, value, 1, w};
  } else {
    p.mean += w * value;
    p.weight += w;
    ++p.count;
    p.min = std::min(p.min, value);
    p.max = std::max(p.max, value);
  }
}

void SeriesSketch::FlushRhythmBlock() {
  auto& r = *rhythm_;
  const size_t n = r.values.size();
  std::vector<double> x = r.values;
  r.values.clear();
  r.times.clear();
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(n);
  double var = 0;
  for (auto& v : x) {
    v -= mean;
    var += v * v;
  }
  // A flat block (always 0 or always 100) has no rhythm to measure.
  if (var <= 1e-9 * static_cast<double>(n)) return;
  for (size_t lag = 1; lag <= static_cast<size_t>(kRhythmMaxLag); ++lag) {
    // Four accumulators let the compiler keep the multiply-adds in flight.
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const size_t m = n - lag;
    size_t i = 0;
    for (; i + 4 <= m; i += 4) {
      s0 += x[i] * x[i + lag];
      s1 += x[i + 1] * x[i + 1 + lag];
      s2 += x[i + 2] * x[i + 2 + lag];
      s3 += x[i + 3] * x[i + 3 + lag];
    }
    for (; i < m; ++i) s0 += x[i] * x[i + lag];
    r.acf_sum[lag] += (s0 + s1 + s2 + s3) / var;
  }
  ++r.blocks;
  // Within-block swing: p90 - p10, robust to single spikes.
  std::vector<double> sorted(x);
  std::sort(sorted.begin(), sorted.end());
  const double swing = sorted[n * 9 / 10] - sorted[n / 10];
  r.swings.Add(swing, 1.0);
}

const std::vector<std::pair<double, double>>& SeriesSketch::SortedValues() const {
  // Reports ask for several quantiles and shares of each series: sort once.
  if (sorted_count_ != count_) {
    sorted_ = values_ ? values_->Sorted() : std::vector<std::pair<double, double>>{};
    sorted_weight_ = values_ ? values_->total : 0.0;
    if (!pending_.empty()) {  // a short series: its samples are weighed now
      const TimeNs reference = intervals_ ? intervals_->Regular() : 0;
      for (const auto& [v, dt] : pending_) {
        const double w = Weight(dt, reference);
        sorted_.emplace_back(v, w);
        sorted_weight_ += w;
      }
      std::sort(sorted_.begin(), sorted_.end());
    }
    sorted_count_ = count_;
  }
  return sorted_;
}

double SeriesSketch::mean() const {
  if (count_ == 0) return 0.0;
  if (pending_.empty()) return weight_ > 0 ? weighted_sum_ / weight_ : 0.0;
  double w = 0, sum = 0;
  for (const auto& [v, c] : SortedValues()) w += c, sum += c * v;
  return w > 0 ? sum / w : 0.0;
}

double SeriesSketch::Quantile(double q) const {
  const auto& sorted = SortedValues();
  // Bucket midpoints can fall just outside the values seen: a quantile never does.
  const double v = QuantileOfSorted(sorted, sorted_weight_, q);
  return std::isnan(v) ? v : std::clamp(v, min_, max_);
}

double SeriesSketch::ShareAtMost(double x) const {
  if (count_ == 0) return 0;
  double n = 0;
  const auto& sorted = SortedValues();
  for (const auto& [value, w] : sorted)
    if (value <= x) n += w;
  return sorted_weight_ > 0 ? n / sorted_weight_ : 0.0;
}

double SeriesSketch::ShareAtLeast(double x) const {
  if (count_ == 0) return 0;
  double n = 0;
  const auto& sorted = SortedValues();
  for (const auto& [value, w] : sorted)
    if (value >= x) n += w;
  return sorted_weight_ > 0 ? n / sorted_weight_ : 0.0;
}

double SeriesSketch::MeanAbove(double x) const {
  double n = 0, sum = 0;
  for (const auto& [value, w] : SortedValues())
    if (value > x) n += w, sum += w * value;
  return n > 0 ? sum / n : NAN;
}

TimeNs SeriesSketch::MedianInterval() const { return intervals_ ? intervals_->Median() : 0; }

TimeNs SeriesSketch::CoveredTime() const {
  if (!intervals_ || intervals_->total == 0) return 0;
  // The committed samples' weights, less the nanosecond each carries: spacings judged
  // against the regular spacing of their own part of the log, so a log that changes
  // its rate (a minute apart, then ten a second) keeps the slow part's time.
  if (pending_.empty()) return static_cast<TimeNs>(std::max(0.0, weight_ - static_cast<double>(count_)));
  const int64_t regular = intervals_->Regular();
  // In double: sums of corrupt spacings must not overflow.
  double covered = static_cast<double>(regular);  // the first sample's own interval
  for (const auto& [dt, n] : intervals_->counts)
    covered += static_cast<double>(dt / 4 <= regular ? dt : regular) * static_cast<double>(n);
  return covered >= 9.0e18 ? TimeNs{9'000'000'000'000'000'000} : static_cast<TimeNs>(covered);
}

int64_t SeriesSketch::Gaps() const {
  if (!intervals_) return 0;
  if (pending_.empty()) return holes_;
  const int64_t regular = intervals_->Regular();
  int64_t gaps = 0;
  for (const auto& [dt, n] : intervals_->counts)
    if (dt / 4 > regular) gaps += n;
  return gaps;
}

std::vector<SeriesSketch::TimelinePoint> SeriesSketch::Timeline() const {
  return Timeline(timeline_.size());
}

std::vector<SeriesSketch::TimelinePoint> SeriesSketch::Timeline(size_t max_points) const {
  // Merging works on the sums the buckets hold, so a merged mean stays time-weighted.
  size_t factor = 1;
  while (max_points > 0 && (timeline_.size() + factor - 1) / factor > max_points) factor *= 2;
  std::vector<TimelinePoint> out;
  TimelinePoint m;
  size_t group = SIZE_MAX;
  auto flush = [&] {
    if (m.count == 0) return;
    m.mean = m.weight > 0 ? m.mean / m.weight : m.mean / static_cast<double>(m.count);
    out.push_back(m);
  };
  for (size_t i = 0; i < timeline_.size(); ++i) {
    const auto& p = timeline_[i];
    if (p.count == 0) continue;
    if (i / factor != group) {
      flush();
      group = i / factor;
      m = p;
      if (bucket_ns_ > 0) m.start = first_t_ + static_cast<TimeNs>(group * factor) * bucket_ns_;
      continue;
    }
    m.mean += p.mean;
    m.weight += p.weight;
    m.min = std::min(m.min, p.min);
    m.max = std::max(m.max, p.max);
    m.count += p.count;
  }
  flush();
  return out;
}

SeriesSketch::Rhythm SeriesSketch::rhythm() const {
  Rhythm out;
  if (!rhythm_ || rhythm_->blocks == 0) return out;
  const auto& r = *rhythm_;
  out.blocks = r.blocks;
  out.swing_p50 = r.swings.Quantile(0.5);
  std::array<double, kRhythmMaxLag + 1> acf{};
  for (int k = 1; k <= kRhythmMaxLag; ++k) acf[static_cast<size_t>(k)] = r.acf_sum[static_cast<size_t>(k)] / r.blocks;
  // The strongest local maximum after the autocorrelation first dips: lag 1 is
  // always high for smooth series and is not a rhythm.
  double lowest = acf[1];
  for (int k = 2; k < kRhythmMaxLag; ++k) {
    const double a = acf[static_cast<size_t>(k)];
    lowest = std::min(lowest, acf[static_cast<size_t>(k - 1)]);
    const bool peak = a > acf[static_cast<size_t>(k - 1)] && a >= acf[static_cast<size_t>(k + 1)];
    if (peak && a - lowest >= 0.1 && a > out.strength) {
      out.strength = a;
      out.period_samples = k;
    }
  }
  // In double: a corrupt log's median spacing times the lag must not overflow.
  const double period = static_cast<double>(out.period_samples) * static_cast<double>(MedianInterval());
  out.period_ns = period >= 9.0e18 ? TimeNs{9'000'000'000'000'000'000} : static_cast<TimeNs>(period);
  return out;
}

std::string MetricDevice::Label() const {
  std::string out;
  if (index >= 0) out = "GPU " + std::to_string(index);
  else if (!uuid.empty()) out = uuid;
  else if (!pci_bus_id.empty()) out = pci_bus_id;
  else out = "GPU ?";
  if (mig_instance >= 0 || !mig_profile.empty()) {
    out += " / MIG";
    if (!mig_profile.empty()) out += " " + mig_profile;
    if (mig_instance >= 0) out += " (" + std::to_string(mig_instance) + ")";
  }
  return out;
}

std::optional<size_t> MetricSet::FindOrAdd(int index, std::string_view uuid, std::string_view pci_bus_id,
                                           int mig_instance) {
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    if (d.mig_instance != mig_instance) continue;
    if (!uuid.empty() && !d.uuid.empty()) {
      if (d.uuid == uuid) return i;
      continue;
    }
    if (!pci_bus_id.empty() && !d.pci_bus_id.empty()) {
      if (d.pci_bus_id == pci_bus_id) return i;
      continue;
    }
    if (index >= 0 && d.index == index) {
      auto& known = devices[i];  // a later source row may name the device more fully
      if (known.uuid.empty() && !uuid.empty()) known.uuid = std::string(uuid);
      if (known.pci_bus_id.empty() && !pci_bus_id.empty()) known.pci_bus_id = std::string(pci_bus_id);
      return i;
    }
    if (index < 0 && uuid.empty() && pci_bus_id.empty() && d.index < 0) return i;
  }
  if (devices.size() >= kMaxDevices) return std::nullopt;
  MetricDevice d;
  d.index = index;
  d.uuid = std::string(uuid);
  d.pci_bus_id = std::string(pci_bus_id);
  d.mig_instance = mig_instance;
  d.series[static_cast<int>(Metric::kGpuUtil)].EnableRhythm();
  d.series[static_cast<int>(Metric::kGrEngineActive)].EnableRhythm();
  for (Metric m : {Metric::kGpuUtil, Metric::kGrEngineActive, Metric::kSmActive, Metric::kTensorActive,
                   Metric::kDramActive, Metric::kJobSmUtil})
    d.series[static_cast<int>(m)].SetTimelineBuckets(SeriesSketch::kChartTimelineBuckets);
  devices.push_back(std::move(d));
  return devices.size() - 1;
}

bool MetricSet::Plausible(Metric m, double v) {
  if (!std::isfinite(v)) return false;
  switch (m) {
    case Metric::kJobSmUtil:
    case Metric::kOtherSmUtil:
      return v >= 0 && v <= 100.0 * 64;  // summed over processes (MPS can share one GPU among many)
    case Metric::kPowerW:
    case Metric::kPowerLimitW:
      return v >= 0 && v <= 5000;  // the largest boards draw ~1.2 kW; modules ~2.7 kW
    case Metric::kSmClockMHz:
    case Metric::kMemClockMHz:
      return v >= 0 && v <= 100000;
    case Metric::kGpuTempC:
    case Metric::kMemTempC:
      return v >= -100 && v <= 300;
    case Metric::kFbUsedBytes:
    case Metric::kFbFreeBytes:
    case Metric::kFbTotalBytes:
    case Metric::kJobFbUsedBytes:
      return v >= 0 && v <= 1e15;
    case Metric::kPcieRxBytesPerS:
    case Metric::kPcieTxBytesPerS:
    case Metric::kNvlinkRxBytesPerS:
    case Metric::kNvlinkTxBytesPerS:
      return v >= 0 && v <= 1e13;
    case Metric::kEnergyJ:
      return v >= 0 && v <= 1e18;
    case Metric::kClockEventReasons:
      return v >= 0 && v < 1.8e19;
    default:
      // Utilizations and activities: 0-100 %, with rounding slack.
      return IsPercentMetric(m) ? v >= 0 && v <= 100.5 : true;
  }
}

void LoadedReadings::Sums::Add(double value, double weight) {
  if (samples == 0 || value < min) min = value;
  if (samples == 0 || value > max) max = value;
  ++samples;
  weight_ns += weight;
  value_sum += value * weight;
  value_sq_sum += value * value * weight;
}

double LoadedReadings::Sums::Cv() const {
  const double mean = Mean();
  if (std::isnan(mean) || mean <= 0) return NAN;
  const double variance = std::max(0.0, value_sq_sum / weight_ns - mean * mean);
  return std::sqrt(variance) / mean;
}

void LoadedReadings::Take(Metric m, TimeNs t, double value) {
  if (m != Metric::kGpuUtil && m != Metric::kGrEngineActive && m != Metric::kPowerW && m != Metric::kSmClockMHz &&
      m != Metric::kGpuTempC && m != Metric::kFbUsedBytes)
    return;
  if (has_pending && t != pending_t) {
    if (t < pending_t) return;  // out of order: the sketches count it; the join needs one time at a time
    Commit();
  }
  if (!has_pending) {
    has_pending = true;
    pending_t = t;
    busy = power = sm_clock = temp = fb_used = NAN;
  }
  switch (m) {
    case Metric::kGpuUtil: busy = value; break;
    case Metric::kGrEngineActive: if (std::isnan(busy)) busy = value; break;  // utilization.gpu first
    case Metric::kPowerW: power = value; break;
    case Metric::kSmClockMHz: sm_clock = value; break;
    case Metric::kFbUsedBytes: fb_used = value; break;
    default: temp = value; break;
  }
}

void LoadedReadings::Commit() {
  if (!has_pending) return;
  // A sample stands for the time since the one before; the first (and a single
  // scrape) for an instant, so that a snapshot still has its readings.
  const double weight = has_previous && pending_t > previous_t
                            ? static_cast<double>(std::min<TimeNs>(pending_t - previous_t, kMaxWeightNs))
                            : 1.0;
  previous_t = pending_t;
  has_previous = true;
  has_pending = false;
  if (std::isnan(busy)) return;
  observed_ns += weight;
  if (!std::isnan(fb_used)) {
    fb_used_max = std::max(fb_used_max, fb_used);
    if (busy <= kNearZeroBusyPercent) near_zero_ns_by_fb[FbBin(fb_used)] += weight;
  }
  if (busy < kLoadedBusyPercent || weight <= 0) return;
  loaded_ns += weight;
  if (!std::isnan(power)) power_w.Add(power, weight);
  if (!std::isnan(sm_clock)) sm_clock_mhz.Add(sm_clock, weight);
  if (!std::isnan(temp)) temp_c.Add(temp, weight);
}

double LoadedReadings::NearZeroShareBelowMemory(double fraction) const {
  if (observed_ns <= 0 || fb_used_max <= 0) return 0;
  // Whole bins only, those entirely under the line: a reading near it counts as held.
  const double line_mib = fraction * fb_used_max / kMiB;
  double below = 0;
  for (int b = 0; b < kFbBins; ++b) {
    const double upper_mib = std::exp2(static_cast<double>(b + 1) / kFbBinsPerOctave);
    if (upper_mib > line_mib) break;
    below += near_zero_ns_by_fb[b];
  }
  return below / observed_ns;
}

LoadedReadings LoadedReadings::Settled() const {
  LoadedReadings copy = *this;
  copy.Commit();
  return copy;
}

void MetricSet::Add(size_t device, Metric m, TimeNs t, double value) {
  if (!Plausible(m, value)) {
    const auto i = static_cast<size_t>(m);
    if (rejected[i]++ == 0) first_rejected[i] = value;
    return;
  }
  auto& d = devices[device];
  if (m == Metric::kClockEventReasons && value >= 0 && value < 1.8e19) {
    const auto bits = static_cast<uint64_t>(value);
    for (size_t b = 0; b < d.reason_counts.size(); ++b)
      if (bits & (uint64_t{1} << b)) ++d.reason_counts[b];
    if (bits & clock_event::kPerformanceLimiting) ++d.limiting_reason_samples;
  }
  if (sketch) {
    d.series[static_cast<int>(m)].Add(t, value);
    d.loaded.Take(m, t, value);
  }
  ++samples;
  if (observer) observer(device, m, t, value);
}

std::vector<std::string> MetricSet::KeepJobDevices() {
  auto not_used = [](const MetricDevice& d) { return d.job_use == MetricDevice::JobUse::kNotUsed; };
  if (std::none_of(devices.begin(), devices.end(),
                   [](const MetricDevice& d) { return d.job_use == MetricDevice::JobUse::kUsed; }))
    return {};
  // Unknown stays: a GPU whose processes could not be listed may be the job's.
  std::vector<std::string> dropped;
  for (const auto& d : devices)
    if (not_used(d)) dropped.push_back(d.Label());
  std::erase_if(devices, not_used);
  return dropped;
}

}  // namespace gputriage
