// memory_headroom over an experiment's runs (docs/memory.md): one run's peak
// cannot say which part of it grows with the batch, so a single run gives only
// a lower bound on the largest batch. Runs of the same script and model at two
// or more batch sizes measure it: peak = fixed + per-sample × batch, fitted by
// least squares over the latest run at each batch size.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "src/verdicts/compare.h"
#include "src/verdicts/history.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

// With two batch sizes the fit passes through both points and has no residual
// to measure its noise by: a rerun's peak moves by about this share.
constexpr double kTwoPointNoiseShare = 0.02;

struct Fit {
  double fixed_mib = 0, per_sample_mib = 0, noise_mib = 0;
  std::map<double, double> points;  // batch → peak MiB
};

std::string Setting(const HistoryRun& r, const char* key) {
  auto it = r.settings.find(key);
  return it == r.settings.end() ? "" : it->second;
}

/// Whether `other` ran the same script and model as `current` (the model by
/// its parameter bytes, where both counted them).
bool SameJob(const HistoryRun& current, const HistoryRun& other) {
  const std::string a = Setting(current, "command"), b = Setting(other, "command");
  if (a.empty() || b.empty() || CommandProgram(a) != CommandProgram(b)) return false;
  const std::string pa = Setting(current, "memory.parameters_bytes"), pb = Setting(other, "memory.parameters_bytes");
  return pa.empty() || pb.empty() || pa == pb;
}

std::optional<Fit> FitPeaks(const char* figure, const HistoryRun& current, const std::vector<HistoryRun>& predecessors) {
  Fit fit;
  const auto add = [&](const HistoryRun& r) {
    auto peak = r.figures.find(figure), batch = r.figures.find("memory_batch");
    if (peak != r.figures.end() && batch != r.figures.end() && batch->second > 0)
      fit.points[std::round(batch->second)] = peak->second;  // the latest run at each batch size
  };
  for (const auto& p : predecessors)
    if (SameJob(current, p)) add(p);
  add(current);
  if (fit.points.size() < 2) return std::nullopt;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : fit.points) n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  const double den = n * sxx - sx * sx;
  if (den <= 0) return std::nullopt;
  fit.per_sample_mib = (n * sxy - sx * sy) / den;
  fit.fixed_mib = (sy - fit.per_sample_mib * sx) / n;
  double ssr = 0, top = 0;
  for (const auto& [x, y] : fit.points) {
    const double r = y - (fit.fixed_mib + fit.per_sample_mib * x);
    ssr += r * r;
    top = std::max(top, y);
  }
  fit.noise_mib = fit.points.size() > 2 ? std::sqrt(ssr / (n - 2)) : kTwoPointNoiseShare * top;
  return fit;
}

}  // namespace

void FitHeadroomOverRuns(const HistoryRun& current, const std::vector<HistoryRun>& predecessors, Diagnosis& d) {
  const bool gpu = current.figures.count("gpu_peak_memory_mib") > 0;
  const char* figure = gpu ? "gpu_peak_memory_mib" : "host_peak_memory_mib";
  const auto capacity_it = current.figures.find(gpu ? "gpu_memory_capacity_mib" : "host_memory_capacity_mib");
  const auto batch_it = current.figures.find("memory_batch");
  if (capacity_it == current.figures.end() || batch_it == current.figures.end() || !current.figures.count(figure)) return;
  const auto fit = FitPeaks(figure, current, predecessors);
  if (!fit) return;
  const double capacity = capacity_it->second, usable = capacity * (1 - kMemorySafetyMargin);
  const double batch = std::round(batch_it->second), peak = current.figures.at(figure);
  auto at = std::find_if(d.findings.begin(), d.findings.end(), [](const Finding& f) { return f.verdict == "memory_headroom"; });
  std::string batches;
  for (const auto& [x, y] : fit->points) batches += fmt::format("{}{:.0f} ({:.0f} MiB)", batches.empty() ? "" : ", ", x, y);
  if (fit->per_sample_mib <= 0) {
    d.notes.push_back(fmt::format("Peak {} memory did not grow with the batch over this experiment's runs at batches {}: "
                                  "the batch is not what fills it.",
                                  gpu ? "GPU" : "host", batches));
    return;
  }
  const double largest = std::floor((usable - fit->fixed_mib) / fit->per_sample_mib);
  const double low = std::floor((usable - fit->fixed_mib - 2 * fit->noise_mib) / fit->per_sample_mib);
  const double high = std::floor((usable - fit->fixed_mib + 2 * fit->noise_mib) / fit->per_sample_mib);
  if (at == d.findings.end()) {
    if (largest < kMemoryHeadroomGrowth * batch && peak < kMemoryTightShare * capacity) return;  // nothing worth saying
    Finding f;
    f.verdict = "memory_headroom";
    f.origin = "history";
    f.severity = peak >= kMemoryTightShare * capacity ? Severity::kModerate : gpu ? Severity::kLow : Severity::kInfo;
    d.findings.push_back(std::move(f));
    at = std::prev(d.findings.end());
  }
  Finding& f = *at;
  const std::string where = gpu ? "GPU" : "host";
  f.title = fmt::format("Memory headroom on the {}: batch {:.0f} → up to {:.0f} fits (peak {:.0f} of {:.0f} MiB; "
                        "fitted over {} batch sizes)",
                        where, batch, largest, peak, capacity, fit->points.size());
  f.detail = fmt::format(
      "Runs of this experiment (the same script and model) at batches {} measure what grows with the batch: peak = "
      "{:.1f} MiB + {:.2f} MiB per sample (least squares over the latest run at each batch size). With {:.0f}% of the "
      "{:.0f} MiB kept free, a batch of {:.0f} fits ({:.0f} to {:.0f} within twice the fit's noise of {:.1f} MiB{}).",
      batches, fit->fixed_mib, fit->per_sample_mib, kMemorySafetyMargin * 100, capacity, largest, low, high, fit->noise_mib,
      fit->points.size() > 2 ? "" : ", taken as 2 % of the peak: two points leave no residual");
  f.evidence.erase(std::remove_if(f.evidence.begin(), f.evidence.end(),
                                  [](const Evidence& e) { return e.name.rfind("fit_", 0) == 0; }),
                   f.evidence.end());
  f.evidence.push_back(E("fit_fixed_memory", fit->fixed_mib, "MiB", "history: intercept of peak over batch"));
  f.evidence.push_back(E("fit_memory_per_sample", fit->per_sample_mib, "MiB", "history: slope of peak over batch"));
  f.evidence.push_back(E("fit_noise", fit->noise_mib, "MiB", "history: residual standard deviation"));
  f.evidence.push_back(E("fit_batch_sizes", static_cast<double>(fit->points.size()), "count", "history: " + batches));
  f.evidence.push_back(E("fit_largest_batch", largest, "samples",
                         fmt::format("(capacity × {:.2f} − fixed) / per sample", 1 - kMemorySafetyMargin)));
  ExpectedGain g;
  g.metric = "batch_size";
  g.unit = "samples";
  g.current = batch;
  g.expected = largest;
  g.worst = std::max(batch, low);
  g.best = high;
  g.bounded_by = "memory_capacity";
  g.basis = fmt::format("peak memory fitted over this experiment's runs at batches {}; the range is twice the fit's "
                        "noise either side",
                        batches);
  f.gain = g;
  if (f.severity < Severity::kModerate && largest >= kMemoryHeadroomGrowth * batch && !f.recommendations.empty())
    f.recommendations[0].action = fmt::format("raise the batch toward {:.0f} (scale the learning rate with it)", largest);
  BoundBatchByMemory(d.findings);
}

}  // namespace gputriage
