#include "src/sources/metrics/interleaved_gpus.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace gputriage {
namespace {

// A node has at most 16 GPUs (NVSwitch systems); a log beyond that is read as
// one cycle per distinct key anyway, which an index-less log cannot give.
constexpr int kMaxGpus = 16;
// The cycle's long gap against its short ones: nvidia-smi queries the GPUs of a
// cycle back to back (0.1-5 ms each) and sleeps the interval (≥ 10 ms with -lms)
// between cycles. A clean split (every long gap above nearly every short one) and
// a 4x ratio of their medians leave no doubt; an irregularly sampled single GPU
// (gaps 7-19 ms) fails both.
constexpr double kLongOverShort = 4.0;
constexpr double kShortGapFloorNs = 0.2e6;
// Continuity of a slow reading at lag K against lag 1: a quarter or less means the
// rows K apart belong together and neighbours do not.
constexpr double kContinuityRatio = 0.25;
constexpr size_t kMinRows = 5;  // two cycles of two GPUs and a row: two long gaps
// Gaps inside a cycle are the queries of one sweep over the GPUs: milliseconds,
// never a second. A script that logs every few minutes at irregular times can show
// any pattern of "short" and "long" gaps, none of them a sweep.
constexpr double kMaxShortGapNs = 1e9;

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct CycleFit {
  int phase = 0;
  double short_q90 = 0, long_q10 = 0, short_median = 0, long_median = 0;
};

/// The best phase at which gaps split into K-1 short and one long per cycle.
std::optional<CycleFit> FitCycle(const std::vector<double>& gaps, int k) {
  std::optional<CycleFit> best;
  double best_margin = 0;
  for (int p = 0; p < k; ++p) {
    std::vector<double> long_gaps, short_gaps;
    for (size_t i = 0; i < gaps.size(); ++i) {
      // gaps[i] lies between rows i and i+1; row i+1 opens a cycle when (i+1-p) ≡ 0 (mod k).
      const long r = static_cast<long>(i) + 1 - p;
      ((r % k + k) % k == 0 ? long_gaps : short_gaps).push_back(gaps[i]);
    }
    if (long_gaps.size() < 2 || short_gaps.empty()) continue;
    CycleFit fit;
    fit.phase = p;
    fit.short_q90 = Quantile(short_gaps, 0.9);
    fit.long_q10 = Quantile(long_gaps, 0.1);
    fit.short_median = Quantile(short_gaps, 0.5);
    fit.long_median = Quantile(long_gaps, 0.5);
    if (!(fit.long_q10 > fit.short_q90) || fit.short_q90 > kMaxShortGapNs) continue;
    if (fit.long_median < kLongOverShort * std::max(fit.short_median, kShortGapFloorNs)) continue;
    const double margin = fit.long_q10 / std::max(fit.short_q90, kShortGapFloorNs);
    if (!best || margin > best_margin) best = fit, best_margin = margin;
  }
  return best;
}

/// Mean |x[i+lag] - x[i]| over rows where both are known; NaN when none.
double MeanStep(const std::vector<double>& x, size_t lag) {
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i + lag < x.size(); ++i)
    if (!std::isnan(x[i]) && !std::isnan(x[i + lag])) sum += std::fabs(x[i + lag] - x[i]), ++n;
  return n > 0 ? sum / static_cast<double>(n) : NAN;
}

struct Continuity {
  std::string column;
  double ratio = NAN;  // lag-K steps over lag-1 steps
};

/// The slow column that best shows continuity at lag `k` (NaN ratio when no slow
/// column changes between neighbouring rows, so none can tell).
Continuity ContinuityAt(std::span<const RowColumn> columns, int k) {
  Continuity out;
  for (const auto& c : columns) {
    if (!c.slow) continue;
    const double step1 = MeanStep(c.values, 1);
    const double stepk = MeanStep(c.values, static_cast<size_t>(k));
    if (!(step1 > 0) || std::isnan(stepk)) continue;
    const double ratio = stepk / step1;
    if (std::isnan(out.ratio) || ratio < out.ratio) out = {c.name, ratio};
  }
  return out;
}

std::string Ms(double ns) { return fmt::format("{:.3g} ms", ns / 1e6); }

}  // namespace

InterleavedGpus InferInterleavedGpus(std::span<const TimeNs> times, std::span<const RowColumn> columns) {
  InterleavedGpus out;
  if (times.size() < kMinRows) {
    out.how = fmt::format("only {} rows: read as one GPU", times.size());
    return out;
  }
  std::vector<double> gaps;
  gaps.reserve(times.size() - 1);
  for (size_t i = 0; i + 1 < times.size(); ++i) gaps.push_back(static_cast<double>(times[i + 1] - times[i]));

  const int max_k = std::min<int>(kMaxGpus, static_cast<int>(times.size() / 3));
  for (int k = 2; k <= max_k; ++k) {
    const auto fit = FitCycle(gaps, k);
    if (!fit) continue;
    out.gpus = k;
    out.phase = fit->phase;
    out.cycle_gap_ns = static_cast<TimeNs>(std::sqrt(std::max(fit->short_q90, kShortGapFloorNs) * fit->long_q10));
    out.how = fmt::format("rows come in cycles of {}: {} gap(s) of ~{} (90 % ≤ {}) then one of ~{} (90 % ≥ {})", k,
                          k - 1, Ms(fit->short_median), Ms(fit->short_q90), Ms(fit->long_median), Ms(fit->long_q10));
    const auto cont = ContinuityAt(columns, k);
    if (!std::isnan(cont.ratio))
      out.how += fmt::format("; {} changes {:.2g}x as much every {} rows as between neighbouring rows", cont.column,
                             cont.ratio, k);
    return out;
  }

  // No cycles in the timing. Rows of several GPUs sampled one at a time at even
  // spacing would show only in their values: a slow reading that continues every
  // K rows and jumps between neighbours.
  for (int k = 2; k <= max_k; ++k) {
    const auto cont = ContinuityAt(columns, k);
    if (std::isnan(cont.ratio) || cont.ratio > kContinuityRatio) continue;
    out.gpus = k;
    out.how = fmt::format("no cycles in the timing, but {} changes {:.2g}x as much every {} rows as between "
                          "neighbouring rows",
                          cont.column, cont.ratio, k);
    return out;
  }
  out.how = fmt::format("rows {}-{} apart (median {}) with no repeating pattern of short and long gaps",
                        Ms(Quantile(gaps, 0.0)), Ms(Quantile(gaps, 1.0)), Ms(Quantile(gaps, 0.5)));
  const auto cont = ContinuityAt(columns, 2);
  if (!std::isnan(cont.ratio))
    out.how += fmt::format(", and {} continues from row to row", cont.column);
  return out;
}

}  // namespace gputriage
