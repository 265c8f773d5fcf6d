// The terminal report: verdicts first, then their evidence and fixes, then the
// measurements they came from.
#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "gputriage/markers.hpp"
#include "gputriage/report.h"
#include "src/util/strings.h"
#include "src/util/units.h"

namespace gputriage {
namespace {


/// Colours by SGR code. While the report is built, a colour is a marker that
/// carries a per-report random nonce: the final pass (Finish) turns exactly those
/// markers into escape sequences and every other control character (from file
/// names, kernel names, device names, log text) into a visible escape, so no input
/// can move the cursor or recolour the terminal, whatever text it reaches.
struct Style {
  bool on;
  std::string nonce;
  std::string operator()(const std::string& text, const char* code) const {
    return on ? Marker(code) + text + Marker("0") : text;
  }
  std::string Marker(const char* code) const { return "\x1b" + nonce + code + "\x1f"; }

  static std::string NewNonce() {
    std::random_device random;
    return fmt::format("{:08x}{:08x}", random(), random());
  }

  /// The report as printed: markers become SGR sequences, other control
  /// characters (but the report's own newlines) visible escapes.
  std::string Finish(const std::string& built) const {
    const std::string prefix = "\x1b" + nonce;
    std::string out;
    out.reserve(built.size());
    size_t from = 0;
    for (size_t at = built.find(prefix); at != std::string::npos; at = built.find(prefix, from)) {
      const size_t end = built.find('\x1f', at + prefix.size());
      if (end == std::string::npos) break;
      out += Printable(std::string_view(built).substr(from, at - from), /*keep_newlines=*/true);
      if (on) out += "\033[" + built.substr(at + prefix.size(), end - at - prefix.size()) + "m";
      from = end + 1;
    }
    out += Printable(std::string_view(built).substr(from), /*keep_newlines=*/true);
    return out;
  }
};

const char* SeverityColor(Severity s) {
  switch (s) {
    case Severity::kHigh: return "1;31";
    case Severity::kModerate: return "1;33";
    case Severity::kLow: return "36";
    case Severity::kInfo: return "32";
  }
  return "0";
}

std::string Pct(double v) { return std::isnan(v) ? "n/a" : fmt::format("{:.1f}%", v); }

std::string FormatValue(const Evidence& e) {
  if (e.unit == "percent") return fmt::format("{:.2f}%", e.value);
  if (e.unit == "count") return fmt::format("{:.0f}", e.value);
  if (e.unit.empty()) return fmt::format("{:.1f}", e.value);
  return fmt::format("{:.2f} {}", e.value, e.unit);
}

std::string Shorten(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

std::string GainLine(const ExpectedGain& g) {
  const std::string next = g.bounded_by.empty() ? std::string() : ", then " + g.bounded_by;
  if (g.unit == "ms")
    return fmt::format("{:.2f} → {:.2f} ms per step (range {:.2f}-{:.2f}; {:+.0f}% throughput{})", g.current, g.expected,
                       g.best, g.worst, g.speedup_percent, next);
  if (g.metric == "gpu_spend_saved_percent")  // an idle GPU released: the spend falls, nothing runs faster
    return fmt::format("{:.0f}% of this GPU's cost saved (range {:.0f}-{:.0f}%{})", g.expected, g.worst, g.best, next);
  if (g.metric == "memory_growth_per_step")  // a leak fixed: no growth; at worst what the recording could not see
    return fmt::format("memory growth {:.2f} → {:.0f} MiB per step (at worst {:.3f}, under what this recording could "
                       "see{})",
                       g.current, g.expected, g.worst, next);
  if (g.metric == "memory_short")  // an OOM: what the request lacked, after the first fix
    return fmt::format("short by {:.0f} MiB → {:.0f} MiB after the first fix (range {:.0f}-{:.0f}{})", g.current,
                       g.expected, g.best, g.worst, next);
  if (g.metric == "memory_usable_for_request")
    return fmt::format("memory for the request {:.0f} → {:.0f} MiB (range {:.0f}-{:.0f}{})", g.current, g.expected,
                       g.worst, g.best, next);
  if (g.metric == "reserved_above_peak")
    return fmt::format("reserved above the peak {:.0f} → {:.0f} MiB (range {:.0f}-{:.0f}{})", g.current, g.expected,
                       g.best, g.worst, next);
  if (g.metric == "alloc_retries")
    return fmt::format("allocator retries {:.0f} → {:.0f} (range {:.0f}-{:.0f}{})", g.current, g.expected, g.best,
                       g.worst, next);
  if (g.metric == "batch_size")  // how far the batch can grow before memory runs out
    return fmt::format("batch {:.0f} → {:.0f} fits (range {:.0f}-{:.0f}{})", g.current, g.expected, g.worst, g.best, next);
  if (g.unit == "x")  // relative throughput (a larger batch)
    return fmt::format("throughput ×{:.2f} (range ×{:.2f}-×{:.2f}{})", g.expected, g.worst, g.best, next);
  if (g.unit == "cpus")  // CPUs other processes held, given back (issue 53: "1 → 1 (+147 %)")
    return fmt::format("CPUs left to the job {:.2f} → {:.2f} (range {:.2f}-{:.2f}; host-side work gets {:+.0f}% CPU{})",
                       g.current, g.expected, g.worst, g.best, g.speedup_percent, next);
  if (g.unit != "percent") {  // a level in its own unit (the SM clock in MHz); small levels keep their decimals
    const auto level = [](double v) { return std::fabs(v) < 10 ? fmt::format("{:.2f}", v) : fmt::format("{:.0f}", v); };
    return fmt::format("{} {} → {} {} (range {}-{} {}{}{})", g.metric, level(g.current), level(g.expected), g.unit,
                       level(g.worst), level(g.best), g.unit,
                       g.speedup_percent != 0 ? fmt::format("; {:+.0f}% work done in the same GPU time", g.speedup_percent)
                                              : std::string(),
                       next);
  }
  return fmt::format("{} {:.1f}% → {:.1f}% (range {:.1f}-{:.1f}%; {:+.0f}% work done in the same GPU time{})", g.metric,
                     g.current, g.expected, g.worst, g.best, g.speedup_percent, next);
}

std::string Dist(const MetricDistribution& m, const char* unit) {
  if (m.samples == 0) return "not logged";
  return fmt::format("mean {:.1f}{u} (p5 {:.0f}, p50 {:.0f}, p95 {:.0f}{u})", m.mean, m.p5, m.p50, m.p95,
                     fmt::arg("u", unit));
}

/// One line per marked process (at most 16): its phases and, where the ranks
/// met at collectives, how late it arrived and how long it waited for the others.
void RenderRanks(std::string& out, const StepMarkerAnalysis& m) {
  const bool sync = m.sync.matched_steps > 0;
  out += fmt::format("     per rank, ms per step (p50 step; means of data, forward, backward, optimizer, communication, rest){}:\n",
                     sync ? "; arrival at the collectives after the first rank, and waiting for the last" : "");
  std::vector<const ProcessStepStats*> order;
  for (const auto& p : m.by_process) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const ProcessStepStats* a, const ProcessStepStats* b) {
    return a->rank != b->rank ? (a->rank < 0 ? false : b->rank < 0 || a->rank < b->rank) : a->pid < b->pid;
  });
  size_t shown = 0;
  for (const ProcessStepStats* p : order) {
    if (++shown > 16) {
      out += fmt::format("       … {} more\n", order.size() - 16);
      break;
    }
    out += fmt::format("       {:<28} step {:6.1f}  data {:5.1f}  fwd {:5.1f}  bwd {:5.1f}  opt {:5.1f}  comm {:5.1f}  rest {}",
                       p->Label(), p->step_ms_p50, p->data_wait_ms_mean, p->phase_ms_mean[GPUTRIAGE_PHASE_FORWARD],
                       p->phase_ms_mean[GPUTRIAGE_PHASE_BACKWARD], p->phase_ms_mean[GPUTRIAGE_PHASE_OPTIMIZER],
                       p->phase_ms_mean[GPUTRIAGE_PHASE_COMMUNICATION], std::isnan(p->untraced_ms_mean) ? std::string("  -") : fmt::format("{:5.1f}", p->untraced_ms_mean));
    if (sync && !std::isnan(p->late_ms_p50))
      out += fmt::format("  late {:5.1f}  waited {:5.1f}", p->late_ms_p50, p->waited_ms_p50);
    out += "\n";
  }
  if (sync)
    out += fmt::format("       {} matched steps: arrivals {:.1f} ms apart, releases {:.1f} ms apart ({})\n",
                       m.sync.matched_steps, m.sync.arrival_spread_ms_p50, m.sync.release_spread_ms_p50,
                       m.sync.synchronous ? "the ranks wait for each other" : "no sign the ranks wait for each other");
}

void RenderStepMarkers(std::string& out, const StepMarkerAnalysis& m) {
  if (m.steps == 0) return;
  out += fmt::format("   {} steps from step markers ({} process{}{}): {:.1f} ms per step (p50 {:.1f}, p95 {:.1f}, CV {:.2f}){}\n",
                     m.steps, m.processes, m.processes == 1 ? "" : "es",
                     m.warmup_steps > 0 ? fmt::format(", {} warm-up step{} left out", m.warmup_steps,
                                                      m.warmup_steps == 1 ? "" : "s")
                                        : "",
                     m.step_ms_mean, m.step_ms_p50, m.step_ms_p95, m.step_ms_cv,
                     m.outlier_steps > 0 ? fmt::format(", {} over twice the median", m.outlier_steps) : "");
  if (m.step_boundary == "optimizer")
    out += "     no DataLoader drove the loop: each step ends where optimizer.step() returns (zero-code mode)\n";
  // Accumulation runs the optimizer every second step or rarer; a step or two
  // without it (the one a crash cut short, the last batch) is no accumulation.
  if (m.optimizer_steps > 0 && 2 * m.steps >= 3 * m.optimizer_steps)
    out += fmt::format("     the steps are micro-batches: {} of them, {} optimizer steps (gradient accumulation about {:.0f})\n",
                       m.steps, m.optimizer_steps, static_cast<double>(m.steps) / static_cast<double>(m.optimizer_steps));
  if (m.phases_known)
    out += fmt::format("     data wait {:.1f} ms against {:.1f} ms of compute per step ({:.0f}% of compute)\n",
                       m.data_wait_ms_mean, m.compute_ms_mean, m.data_wait_percent_of_compute);
  if (m.phases_traced)
    out += fmt::format("     inside the step (host-timed): data {:.1f}, {}forward {:.1f}, backward {:.1f}, optimizer {:.1f}{} "
                       "ms, outside every phase {:.1f} ms ({:.0f}%)\n",
                       m.phase_ms_mean[GPUTRIAGE_PHASE_DATA],
                       m.phase_ms_mean[kCopySlot] > 0 ? fmt::format("copy to the device {:.1f}, ", m.phase_ms_mean[kCopySlot])
                                                      : std::string(),
                       m.phase_ms_mean[GPUTRIAGE_PHASE_FORWARD],
                       m.phase_ms_mean[GPUTRIAGE_PHASE_BACKWARD], m.phase_ms_mean[GPUTRIAGE_PHASE_OPTIMIZER],
                       m.phase_ms_mean[GPUTRIAGE_PHASE_COMMUNICATION] > 0
                           ? fmt::format(", communication {:.1f}", m.phase_ms_mean[GPUTRIAGE_PHASE_COMMUNICATION])
                           : std::string(),
                       m.untraced_ms_mean, m.untraced_percent_of_step);
  if (m.phase_device_steps > 0) {
    const auto device = [&](int slot) { return m.phase_device_ms_mean[static_cast<size_t>(slot)]; };
    out += fmt::format("     inside the step (GPU-timed, {} steps): {}forward {:.1f}, backward {:.1f}, optimizer {:.1f} ms\n",
                       m.phase_device_steps,
                       device(kCopySlot) > 0 ? fmt::format("copy to the device {:.1f}, ", device(kCopySlot)) : std::string(),
                       device(GPUTRIAGE_PHASE_FORWARD), device(GPUTRIAGE_PHASE_BACKWARD),
                       device(GPUTRIAGE_PHASE_OPTIMIZER));
  }
  if (m.device_steps > 0)
    out += fmt::format("     GPU time {:.1f} ms per step (device-side, {} steps): GPU idle {:.1f} ms per step; the host "
                       "waited {:.1f} ms for data, {:.1f} ms of it exposed\n",
                       m.device_ms_mean, m.device_steps, m.gpu_idle_ms_mean, m.data_wait_host_ms_mean,
                       m.data_wait_ms_mean);
  if (!std::isnan(m.samples_per_s) || !std::isnan(m.tokens_per_s))
    out += fmt::format("     throughput{}{}\n",
                       std::isnan(m.samples_per_s) ? "" : fmt::format(" {:.1f} samples/s", m.samples_per_s),
                       std::isnan(m.tokens_per_s) ? "" : fmt::format(" {:.0f} tokens/s", m.tokens_per_s));
  if (!std::isnan(m.achieved_tflops))
    out += fmt::format("     {:.3g} model FLOPs per step: {:.2f} TFLOPS per process{}\n", m.flops_per_step,
                       m.achieved_tflops,
                       std::isnan(m.mfu_percent)
                           ? std::string(" (MFU needs the GPU model: record with NVML or a dcgm-exporter)")
                           : fmt::format(", MFU {:.1f}% of the {}'s {:.0f} TFLOPS", m.mfu_percent, m.gpu_model,
                                         m.peak_tflops));
  if (m.by_process.size() > 1) RenderRanks(out, m);
}

void RenderLedger(std::string& out, const RunLedger& l) {
  if (!l.valid) return;
  const bool gpu = l.unit == "gpu_hours";
  out += fmt::format("   ledger: {} ({}), goodput {}{}\n",
                     gpu ? fmt::format("{}: {:.3g} GPU{} x {}", FormatGpuTime(l.total), l.gpus, l.gpus == 1 ? "" : "s",
                                       FormatSeconds(l.wall_hours * 3600))
                         : fmt::format("{} of wall time, no GPU seen", FormatSeconds(l.wall_hours * 3600)),
                     l.span_source, std::isnan(l.goodput) ? std::string("not known (no steps)") : Pct(100.0 * l.goodput),
                     std::isnan(l.price_per_gpu_hour) ? "" : fmt::format(", at {}/GPU-hour", FormatUsd(l.price_per_gpu_hour)));
  std::string unknown;
  for (const auto& b : l.buckets) {
    if (!b.known) {
      unknown += (unknown.empty() ? "" : ", ") + b.Label();
      continue;
    }
    if (b.share <= 0) continue;
    out += fmt::format("     {:<19} {:>6.1f}%  {:>10}{}{}\n", b.Label(), 100.0 * b.share,
                       gpu ? FormatGpuTime(b.hours) : FormatSeconds(b.hours * 3600),
                       std::isnan(b.dollars) ? "" : "  " + FormatUsd(b.dollars),
                       b.count > 0 ? fmt::format("  ({})", b.count) : "");
  }
  const LedgerBucket* unsplit = l.Find("unsplit");
  if (unsplit != nullptr && unsplit->known)  // a metric log: every step bucket is unseen
    out += "     not seen by a metric log (not zero): productive and every bucket inside or between steps\n";
  else if (!unknown.empty())
    out += fmt::format("     not seen by this source (not zero): {}\n", unknown);
  for (const auto& n : l.notes) out += fmt::format("     {}\n", Printable(n));
}

// Above this many GPUs in one recording, the terminal groups them (--json keeps
// every GPU): 4,096 GPUs once printed 16,443 lines.
constexpr size_t kMaxListedGpus = 8;

/// Median of `v` (empty: NaN).
double MedianOf(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// Many GPUs: one block per GPU model telling their common story, then the GPUs
/// whose busy level stands apart from their model's (3 MADs, at least 15 points).
void RenderGpuGroups(std::string& out, const RecordingAnalysis& a) {
  std::vector<std::string> models;
  for (const auto& d : a.metric_devices)
    if (std::find(models.begin(), models.end(), d.name) == models.end()) models.push_back(d.name);
  for (const auto& model : models) {
    std::vector<const DeviceMetricAnalysis*> group;
    std::vector<double> busy, power, hours;
    for (const auto& d : a.metric_devices) {
      if (d.name != model) continue;
      group.push_back(&d);
      if (!std::isnan(d.busy_mean_percent)) busy.push_back(d.busy_mean_percent);
      const auto& p = d.metrics[static_cast<int>(Metric::kPowerW)];
      if (p.samples > 0) power.push_back(p.mean);
      hours.push_back(d.hours);
    }
    double total_hours = 0;
    for (double h : hours) total_hours += h;
    out += fmt::format("   {} × {}: {} observed", group.size(), model.empty() ? "GPU (model not logged)" : Printable(model),
                       FormatGpuTime(total_hours));
    if (!busy.empty()) {
      const auto [lo, hi] = std::minmax_element(busy.begin(), busy.end());
      out += fmt::format("; {} mean per GPU: median {:.1f}%, range {:.1f}-{:.1f}%", group.front()->busy_metric,
                         MedianOf(busy), *lo, *hi);
    }
    if (!power.empty()) out += fmt::format("; power median {:.0f} W", MedianOf(power));
    out += "\n";
    if (busy.empty()) continue;
    const double median = MedianOf(busy);
    std::vector<double> deviation;
    for (double b : busy) deviation.push_back(std::fabs(b - median));
    const double band = std::max(15.0, 3 * MedianOf(deviation));
    std::vector<std::string> outliers;
    for (const auto* d : group)
      if (!std::isnan(d->busy_mean_percent) && std::fabs(d->busy_mean_percent - median) > band)
        outliers.push_back(fmt::format("{} {:.0f}%", Printable(d->label), d->busy_mean_percent));
    if (outliers.empty()) {
      out += fmt::format("     all within ±{:.0f} points of the median\n", band);
      continue;
    }
    std::string named;
    for (size_t k = 0; k < outliers.size() && k < 10; ++k) named += (k ? ", " : "") + outliers[k];
    out += fmt::format("     {} outlier{} (more than {:.0f} points from the median): {}{}\n", outliers.size(),
                       outliers.size() == 1 ? "" : "s", band, named,
                       outliers.size() > 10 ? fmt::format(" and {} more", outliers.size() - 10) : "");
  }
  out += "     (each GPU's numbers are in --json)\n";
}

void RenderMetricDevices(std::string& out, const Recording& rec, const RecordingAnalysis& a) {
  // Steps alone, or an allocator snapshot: said elsewhere; no metric log to describe.
  if (rec.metrics.devices.empty() && rec.metrics.rows == 0 && (a.marked.steps > 0 || !rec.allocator_states.empty()))
    return;
  // Live recordings have samples, not rows: "0 rows" would read as nothing recorded.
  out += fmt::format("   {}{} samples{}\n", rec.metrics.rows > 0 ? fmt::format("{} rows, ", rec.metrics.rows) : "",
                     rec.metrics.samples,
                     rec.metrics.clock_note.empty() ? "" : "; clock: " + rec.metrics.clock_note);
  if (a.metric_devices.size() > kMaxListedGpus) return RenderGpuGroups(out, a);
  for (const auto& d : a.metric_devices) {
    out += fmt::format("   {}: {}{}{}\n", Printable(d.label), d.name.empty() ? "(model not logged)" : Printable(d.name),
                       d.hostname.empty() ? "" : " on " + Printable(d.hostname), d.mig_mode && !d.mig_instance ? " [MIG enabled]" : "");
    if (!d.labels.empty()) {
      std::string labels;
      for (const auto& [k, v] : d.labels) labels += (labels.empty() ? "" : ", ") + k + "=" + v;
      out += fmt::format("     labels: {}\n", Printable(labels));
    }
    if (!d.other_processes.empty())
      out += fmt::format("     also on this GPU, outside the job: {}\n", Printable(Join(d.other_processes, ", ")));
    if (d.median_interval_ns == 0) out += "     one sample (a snapshot, no time span)\n";
    else out += fmt::format("     observed {:.2f} h, sampled every {:.2f} s{}\n", d.hours, static_cast<double>(d.median_interval_ns) / 1e9,
                       d.sampling_gaps > 0 ? fmt::format(" ({} gap{} in the log; span {:.2f} h)", d.sampling_gaps,
                                                         d.sampling_gaps == 1 ? "" : "s", d.span_hours)
                                           : std::string());
    if (!d.busy_metric.empty()) {
      out += fmt::format("     {}: {}; {:.0f}% of samples ≤ 5%, {:.0f}% ≥ 95%\n", d.busy_metric,
                         Dist(d.Busy(), "%"),
                         100.0 * d.near_zero_share, 100.0 * d.near_full_share);
      if (d.rhythm.period_samples > 0)
        out += fmt::format("     rhythm: period {:.2f} s (autocorrelation {:.2f}), sawtooth depth {:.0f} points\n",
                           static_cast<double>(d.rhythm.period_ns) / 1e9, d.rhythm.strength, d.rhythm.swing_p50);
    }
    for (Metric m : {Metric::kSmActive, Metric::kSmOccupancy, Metric::kTensorActive, Metric::kDramActive, Metric::kFp32Active,
                     Metric::kFp16Active, Metric::kEncoderUtil, Metric::kDecoderUtil})
      if (d.metrics[static_cast<int>(m)].samples > 0)
        out += fmt::format("     {}: {}\n", MetricName(m), Dist(d.metrics[static_cast<int>(m)], "%"));
    const auto& power = d.metrics[static_cast<int>(Metric::kPowerW)];
    if (power.samples > 0)
      out += fmt::format("     power: mean {:.0f} W, p95 {:.0f} W{}\n", power.mean, power.p95,
                         d.power_limit_w > 0 ? fmt::format(" of {:.0f} W ({:.0f}%)", d.power_limit_w, d.power_mean_percent_of_limit) : "");
    const auto& clock = d.metrics[static_cast<int>(Metric::kSmClockMHz)];
    if (clock.samples > 0)
      out += fmt::format("     SM clock: mean {:.0f} MHz{}\n", clock.mean,
                         d.max_sm_clock_mhz > 0 ? fmt::format(" of max {:.0f} MHz", d.max_sm_clock_mhz) : "");
    if (d.reason_samples > 0) {
      std::string reasons;
      for (const auto& r : d.active_reasons) reasons += (reasons.empty() ? "" : ", ") + r;
      out += fmt::format("     clock events: {:.0f}% of samples performance-limiting{}\n", 100.0 * d.limiting_reason_share,
                         reasons.empty() ? "" : " (seen: " + reasons + ")");
    }
    if (!std::isnan(d.memory_used_max_percent)) out += fmt::format("     memory used: peak {:.0f}% of total\n", d.memory_used_max_percent);
    const auto& rx = d.metrics[static_cast<int>(Metric::kPcieRxBytesPerS)];
    if (rx.samples > 0) out += fmt::format("     PCIe RX: mean {:.1f} MB/s, p95 {:.1f} MB/s\n", rx.mean / 1e6, rx.p95 / 1e6);
  }
}

void RenderCost(std::string& out, const CostReport& c) {
  if (c.devices.empty()) return;
  out += "\nCOST\n";
  if (c.available) out += fmt::format("  price: {}\n", c.price_basis);
  if (c.devices.size() > kMaxListedGpus) {
    // Many GPUs: one line per model and price (each GPU's cost is in --json).
    struct Line {
      std::string name;
      double price, hours = 0, cost = 0, idle = 0, idle_sm = 0;
      size_t gpus = 0;
    };
    std::vector<Line> lines;
    for (const auto& d : c.devices) {
      if (d.price_per_hour <= 0) continue;
      auto it = std::find_if(lines.begin(), lines.end(),
                             [&](const Line& l) { return l.name == d.name && l.price == d.price_per_hour; });
      if (it == lines.end()) it = lines.insert(lines.end(), Line{d.name, d.price_per_hour});
      ++it->gpus;
      it->hours += d.hours;
      it->cost += d.cost_usd;
      it->idle += d.idle_cost_by_util_usd;  // NaN when a GPU has no utilization: the sum says n/a
      it->idle_sm += d.idle_cost_by_sm_usd;
    }
    for (const auto& l : lines)
      out += fmt::format("  {:>5} × {:<28} {:>12} × {}/h = {:>10}   idle by utilization {:>10}{}\n", l.gpus,
                         Shorten(Printable(l.name.empty() ? "GPU" : l.name), 28), FormatGpuTime(l.hours),
                         FormatUsd(l.price), FormatUsd(l.cost), FormatUsd(l.idle),
                         std::isnan(l.idle_sm) ? "" : fmt::format(", by SM activity {}", FormatUsd(l.idle_sm)));
  }
  for (const auto& d : c.devices) {
    if (d.price_per_hour <= 0 || c.devices.size() > kMaxListedGpus) continue;
    out += fmt::format("  {:<28} {:>12} × {}/h = {:>10}   idle by utilization {:>10}{}\n", Shorten(d.label, 28),
                       FormatGpuTime(d.hours),
                       FormatUsd(d.price_per_hour), FormatUsd(d.cost_usd), FormatUsd(d.idle_cost_by_util_usd),
                       std::isnan(d.idle_cost_by_sm_usd) ? "" : fmt::format(", by SM activity {}", FormatUsd(d.idle_cost_by_sm_usd)));
  }
  if (!std::isnan(c.idle_cost_by_util_usd))
    out += fmt::format("  this run: {} of GPU time, {} idle by utilization.gpu{}\n", FormatUsd(c.cost_usd), FormatUsd(c.idle_cost_by_util_usd),
                       std::isnan(c.idle_cost_by_sm_usd) ? "" : fmt::format(", {} idle by SM activity", FormatUsd(c.idle_cost_by_sm_usd)));
  if (c.monthly_spend_usd && !std::isnan(c.monthly_idle_by_util_usd))
    out += fmt::format("  per month: {} spend at {:.0f}% utilization = {} of idle capacity{}\n", FormatUsd(*c.monthly_spend_usd),
                       c.util_mean_percent, FormatUsd(c.monthly_idle_by_util_usd),
                       std::isnan(c.monthly_idle_by_sm_usd)
                           ? ""
                           : fmt::format(" ({} by SM activity at {:.0f}%)", FormatUsd(c.monthly_idle_by_sm_usd), c.sm_active_mean_percent));
  if (!c.what_if.empty()) {
    out += "  what if utilization rose:\n";
    for (const auto& w : c.what_if) out += "    " + WhatIfLine(w) + "\n";
  }
  for (const auto& n : c.notes) out += fmt::format("  note: {}\n", n);
  for (const auto& d : c.devices)
    if (!d.price_source.empty() && d.price_source != "--price-per-gpu-hour") {
      out += fmt::format("  price source ({}): {}\n", d.name, d.price_source);
      break;
    }
}

/// "6.17 GiB", "57.3 MiB", "8 B": memory sizes as people read them.
std::string SizeText(int64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(v) >= 1024 && unit < 4) v /= 1024, ++unit;
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.{}f} {}", v, std::fabs(v) < 10 ? 2 : 1, kUnits[unit]);
}

/// A profile_memory trace's memory, one line per device: the peaks, or the net
/// change where the trace has no totals.
void RenderTraceMemory(std::string& out, const TraceMemory& m) {
  for (const auto& d : m.devices) {
    const std::string name = d.host ? "host" : "GPU " + std::to_string(d.device);
    if (d.relative) {
      out += fmt::format("   memory ({}): {} above the trace's start at its peak ({} events; no allocator totals in "
                         "this trace, PyTorch < 1.10: the level before it is unknown)\n",
                         name, SizeText(d.peak_allocated), d.events);
    } else {
      out += fmt::format("   memory ({}): peak {} allocated{} ({} events)\n", name, SizeText(d.peak_allocated),
                         d.peak_reserved >= 0 ? ", " + SizeText(d.peak_reserved) + " reserved" : std::string(), d.events);
    }
  }
  if (m.available && m.total_gib > 0)
    out += fmt::format("     the GPU's peak reserved: {:.0f}% of its {:.1f} GiB\n", m.peak_reserved_percent, m.total_gib);
}

/// An allocator snapshot's state, per device: reserved against allocated (the
/// gap is what the cache holds), the blocks by state, the history it kept.
void RenderAllocatorStates(std::string& out, const std::vector<AllocatorState>& states) {
  for (const auto& s : states) {
    out += fmt::format("   allocator (GPU {}): {} reserved in {} segments, {} allocated, {} requested\n", s.device,
                       SizeText(s.reserved_bytes), s.segments, SizeText(s.allocated_bytes), SizeText(s.requested_bytes));
    std::string blocks;
    for (const auto& [state, counted] : s.blocks)
      blocks += fmt::format("{}{} {} ({})", blocks.empty() ? "" : ", ", counted.first, state, SizeText(counted.second));
    if (!blocks.empty()) out += "     blocks: " + blocks + "\n";
    std::string actions;
    for (const auto& [action, count] : s.actions) actions += fmt::format("{}{} {}", actions.empty() ? "" : ", ", count, action);
    if (!actions.empty()) out += "     history: " + actions + "\n";
  }
}

/// Memory sampled at step ends: per process its peaks and whether it grows.
void RenderStepMemory(std::string& out, const StepMemoryAnalysis& m) {
  if (const OutOfMemoryError& e = m.oom; e.known)
    out += fmt::format("   out of memory ({}){}{}: {}{}\n", e.device, e.step >= 0 ? fmt::format(" in step {}", e.step) : "",
                       e.where.empty() ? "" : " at " + Printable(e.where),
                       e.requested_bytes >= 0 ? "asked for " + SizeText(e.requested_bytes) : "request unknown",
                       e.snapshot.empty() ? "" : "; allocator snapshot: " + Printable(e.snapshot));
  const auto trend = [](const MemoryTrend& t) {
    if (t.points == 0) return std::string(" (") + t.why_not + ")";
    return fmt::format(", {}{}/step over steps {}-{}{}", t.bytes_per_step >= 0 ? "+" : "-",
                       SizeText(static_cast<int64_t>(std::fabs(t.bytes_per_step))), t.first_step, t.last_step,
                       t.creeping ? " (growing)" : t.why_not.empty() ? "" : " (steady: " + t.why_not + ")");
  };
  for (const auto& p : m.processes) {
    const std::string who = p.rank >= 0 ? fmt::format("rank {}", p.rank) : fmt::format("process {}", p.pid);
    if (p.host_rss_peak_bytes > 0)
      out += fmt::format("   memory ({}, host): resident {} at the last sample, peak {}{}\n", who,
                         SizeText(p.host_rss_last_bytes), SizeText(p.host_rss_peak_bytes), trend(p.host));
    if (p.device >= 0)
      out += fmt::format("   memory ({}, GPU {}): allocated peak {}, reserved up to {}, {} retries, {} OOMs{}\n", who,
                         p.device, SizeText(p.device_peak_bytes), SizeText(p.device_reserved_max_bytes), p.alloc_retries,
                         p.alloc_ooms, trend(p.gpu));
  }
  if (m.StaticBytes() >= 0)
    out += fmt::format("     static ({}): parameters {}, gradients {}, optimizer state {}\n", m.static_device,
                       SizeText(m.parameters_bytes), SizeText(std::max<int64_t>(0, m.gradients_bytes)),
                       SizeText(std::max<int64_t>(0, m.optimizer_state_bytes)));
}

/// One kind of import issue: its count and first message, shortened, except the
/// assumptions a reading made (the columns of a log without a header), which a
/// user checks whole.
void RenderImportIssue(std::string& out, const ImportIssue& issue) {
  const size_t limit = issue.kind == "columns_inferred" ? 4000 : 280;
  out += fmt::format("   import {}: {} × {} (first: {})\n", issue.severity == IssueSeverity::kInfo ? "note" : "warning",
                     issue.count, issue.kind, Printable(Shorten(issue.message, limit)));
}

void RenderRecording(std::string& out, const Recording& rec, const RecordingAnalysis& a, const TerminalOptions& o,
                     const Style& st) {
  out += st(fmt::format("\n== {}{} [{}]\n", Printable(a.source), a.rank >= 0 ? fmt::format(" (rank {})", a.rank) : "", rec.format), "1");
  if (!a.has_trace) {
    for (const auto& issue : rec.stats.issues)
      RenderImportIssue(out, issue);
    RenderStepMarkers(out, a.marked);
    if (const HostUsageAnalysis& h = a.host; h.known)
      out += fmt::format("   host: the job used {:.2f} of {} CPUs (training process {:.2f}, its other processes {:.2f}, up "
                         "to {} processes), machine {:.0f}% busy, saturated {:.0f}% of the time; peak RSS {:.0f} MiB\n",
                         h.job_cores_mean, h.job_cpus > 0 ? h.job_cpus : h.machine_cpus, h.main_cores_mean,
                         h.other_cores_mean, h.job_processes_max, h.machine_busy_percent_mean,
                         h.saturated_percent_of_time, h.job_rss_peak_mib);
    RenderStepMemory(out, a.step_memory);
    RenderLedger(out, a.ledger);
    RenderMetricDevices(out, rec, a);
    RenderAllocatorStates(out, rec.allocator_states);
    RenderTraceMemory(out, a.memory);
    return;
  }
  if (!a.device.name.empty())
    out += fmt::format("   device {}: {} ({}, compute capability {}.{}, {} SMs)\n", a.device.id, a.device.name,
                       VendorName(a.device.vendor), a.device.compute_major, a.device.compute_minor, a.device.num_sms);
  out += fmt::format("   import: {} events, {:.1f} MB{}\n", rec.stats.events_seen, static_cast<double>(rec.stats.bytes_read) / 1e6,
                     rec.stats.truncated ? " — TRUNCATED" : "");
  for (const auto& issue : rec.stats.issues) RenderImportIssue(out, issue);
  if (a.steps.empty()) {
    out += "   no steps and no activity to measure\n";
  } else {
    out += fmt::format("   {} {}, average {:.2f} ms\n", a.steps.size(), a.steps_from_markers ? "steps (ProfilerStep)" : "window (whole trace)",
                       ToMs(a.avg_step_ns));
    out += "   step time:";
    for (int c = 0; c < kNumStepCategories; ++c) {
      out += fmt::format(" {} {:.2f} ms ({:.1f}%)", StepCategoryName(static_cast<StepCategory>(c)), ToMs(a.average.ns[c]),
                         100.0 * static_cast<double>(a.average.ns[c]) / static_cast<double>(a.avg_step_ns));
      if (c == 3) out += "\n             ";
      else if (c < kNumStepCategories - 1) out += ",";
    }
    out += "\n";
    RenderLedger(out, a.ledger);
  }
  if (a.has_gpu_activity && !a.steps.empty()) {
    out += fmt::format("   GPU: busy {}, est. SM efficiency {}, est. achieved occupancy {}, tensor cores {} of matrix time\n",
                       Pct(a.gpu.busy_percent), Pct(a.gpu.sm_efficiency_percent), Pct(a.gpu.achieved_occupancy_percent),
                       Pct(a.precision.tensor_core_percent_of_matrix));
    const double steps = static_cast<double>(std::max<size_t>(a.SteadySteps().size(), 1));  // idle was attributed in them
    out += "   GPU idle per step by cause:";
    for (int c = 0; c < kNumIdleCauses; ++c)
      out += fmt::format(" {} {:.2f} ms{}", IdleCauseName(static_cast<IdleCause>(c)), ToMs(a.device_idle.ns[c]) / steps,
                         c < kNumIdleCauses - 1 ? "," : "\n");
    const auto& w = a.host_os_waits;
    if (w.traced) {
      std::string calls;
      for (const auto& [name, ns] : w.calls) calls += fmt::format(", {} {:.2f} ms", name, ToMs(ns) / steps);
      out += fmt::format("   of host_wait, thread {} (the most launches) inside OS calls {:.2f} ms per step{}\n", w.thread,
                         ToMs(w.in_os_calls_ns) / steps, calls);
    }
    if (w.sampled) {
      std::string modules;
      for (const auto& [module, n] : w.running_modules)
        modules += fmt::format(", {} {:.0f}%", module, 100.0 * static_cast<double>(n) / static_cast<double>(w.running_samples));
      out += fmt::format("   of host_wait, thread {} running: {} CPU samples{}\n", w.thread, w.running_samples, modules);
    }
    out += fmt::format("   launches: {:.0f} kernels/step, median {:.1f} µs, {:.0f}% under 10 µs, median launch delay {:.1f} µs\n",
                       a.launch.kernels_per_step, a.launch.median_kernel_us, a.launch.short_kernel_percent,
                       a.launch.median_launch_delay_us);
    if (a.comm.kernel_ns > 0)
      out += fmt::format("   communication: {:.1f}% of kernel time, {} overlapped with compute, {:.2f} ms exposed per step\n",
                         a.comm.share_of_kernel_time_percent, Pct(a.comm.overlap_percent), ToMs(a.comm.exposed_ns) / steps);
    if (a.attention.backend != "none") out += fmt::format("   attention: {}\n", a.attention.backend);
    if (a.throughput.available)
      out += fmt::format("   throughput: {:.1f} TFLOP/s achieved, MFU {}{}\n", a.throughput.achieved_tflops,
                         Pct(a.throughput.mfu_percent),
                         a.throughput.peak_basis.empty() ? "" : " (against " + a.throughput.peak_basis + ")");
    if (a.roofline.available)
      out += fmt::format("   roofline: {:.0f}% of {:.1f} ms matrix/attention time below the ridge point (median "
                         "intensity {:.0f} FLOP/B, ridge {:.0f}); memory-bound ops at {} of {:.0f} GB/s\n",
                         a.roofline.memory_bound_percent_of_checked, ToMs(a.roofline.checked_ns), a.roofline.intensity_p50,
                         a.roofline.ridge_p50, Pct(a.roofline.memory_bound_bandwidth_percent),
                         a.roofline.peak_bandwidth_gbs);
  }
  RenderTraceMemory(out, a.memory);
  if (!a.top_kernels.empty() && o.max_kernels > 0) {
    out += fmt::format("   top kernels ({} distinct):\n", a.kernel_names);
    for (int i = 0; i < o.max_kernels && i < static_cast<int>(a.top_kernels.size()); ++i) {
      const auto& k = a.top_kernels[static_cast<size_t>(i)];
      out += fmt::format("     {:>9.2f} ms {:>6} × {:<13} {:<6} {}\n", ToMs(k.total_ns), k.count, k.kernel_class,
                         k.precision.empty() ? "" : k.precision, Printable(Shorten(k.name, 90)));
    }
  }
  for (const auto& l : a.limitations) out += fmt::format("   cannot tell: {}\n", l);
}

}  // namespace

std::string FormatUsd(double v) {
  if (std::isnan(v)) return "n/a";
  // Thousands separators: dollar figures are read by people planning budgets.
  const bool negative = v < 0;
  const double a = std::fabs(v);
  // A short run's cost is cents or less: "$0.00" would read as free.
  if (a > 0 && a < 0.01) return fmt::format("{}${:.2g}", negative ? "-" : "", a);
  if (a < 1000) {
    const long long cents = std::llround(a * 100.0);
    return fmt::format("{}${}.{:02d}", negative ? "-" : "", cents / 100, cents % 100);
  }
  const std::string digits = std::to_string(std::llround(a));
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return fmt::format("{}${}", negative ? "-" : "", grouped);
}

std::string WhatIfLine(const WhatIf& w) {
  // Whole percents rounded down: the table should never promise more than the arithmetic gives.
  return fmt::format("{:.0f}% → {:.0f}%: +{:.0f}% more compute for the same spend, or the same work for {:.0f}% less spend{}",
                     w.from_percent, w.to_percent, std::floor(w.more_compute_percent + 1e-9), std::floor(w.spend_saved_percent + 1e-9),
                     w.monthly_saving_usd ? fmt::format(" ({}/month)", FormatUsd(*w.monthly_saving_usd)) : "");
}

std::string RenderTerminal(const Run& run, const Diagnosis& d, const TerminalOptions& o) {
  const Style st{o.color, Style::NewNonce()};
  std::string out;
  const Summary& s = d.summary;
  out += st("gputriage diagnosis", "1");
  out += fmt::format(" — {} recording(s){}\n", s.recordings, s.device.empty() ? "" : ", " + Printable(s.device));
  if (s.steps > 0) {
    // Busy only where something measured it: a run of step markers without GPU
    // metrics has no busy share, not a busy share of 0.
    // A trace with no GPU kernel in it (a CPU-only gloo rank) measured none either
    // (issue 53: "GPU busy 0.0%" where record said "not measured").
    const bool any_gpu = std::any_of(d.recordings.begin(), d.recordings.end(), [](const RecordingAnalysis& a) {
      return a.has_gpu_activity || !a.metric_devices.empty();
    });
    const bool busy_measured = any_gpu && !s.gpu_busy_source.empty() && !StartsWith(s.gpu_busy_source, "none");
    out += fmt::format("{} · data wait {:.1f}% of step · avg step {:.2f} ms over {} step(s)\n",
                       busy_measured ? fmt::format("GPU busy {:.1f}%", s.gpu_busy_percent) : "GPU busy not measured",
                       s.data_wait_percent, s.avg_step_ms, s.steps);
  }
  if (!d.cost.devices.empty())
    out += fmt::format("{} GPU(s) · {} · utilization.gpu mean {} · busy {:.1f}% ({}) · judged as {}\n",
                       s.devices, FormatGpuTime(s.gpu_hours), Pct(s.gpu_util_mean_percent), s.gpu_busy_percent, s.gpu_busy_source,
                       s.workload);

  for (const auto& note : d.notes) out += st("note: ", "33") + Printable(note) + "\n";
  for (const auto& k : d.collective_skew) {
    if (!k.available) continue;
    out += fmt::format("collectives across {} ranks ({}, {} matched, ends within {:.0f} µs): {:.2f} ms transfer + "
                       "{:.2f} ms waiting per step",
                       k.ranks, k.events, k.collectives, k.end_spread_us_p50, k.transfer_ms_per_step, k.wait_ms_per_step);
    if (k.straggler_rank >= 0)
      out += fmt::format("; last to arrive most often: rank {} ({:.0f}% of late collectives{})", k.straggler_rank,
                         100.0 * k.straggler_late_share, k.persistent ? ", persistent" : ", moving");
    out += "\n";
  }
  out += st("\nVERDICTS\n", "1");
  if (d.findings.empty()) out += "  none: no rule crossed its threshold (see the measurements below)\n";
  for (const auto& f : d.findings) {
    out += fmt::format("  {} {:<20} {}{}\n", st(fmt::format("{:<9}", SeverityName(f.severity)), SeverityColor(f.severity)),
                       f.verdict, f.scope.empty() ? "" : "[" + Printable(f.scope) + "] ", Printable(f.title));
    if (f.gain && f.gain->expected > 0)
      out += fmt::format("  {:<9} {:<20} expected: {}\n", "", "", GainLine(*f.gain));
  }

  int n = 0;
  for (const auto& f : d.findings) {
    out += st(fmt::format("\n[{}] {} ({}){}{}\n", ++n, f.verdict, SeverityName(f.severity),
                          f.rank >= 0 ? fmt::format(", rank {}", f.rank) : "", f.scope.empty() ? "" : ", " + Printable(f.scope)),
              "1");
    out += fmt::format("    {}\n", Printable(f.detail));
    if (!f.cannot_exclude.empty()) {
      std::string alt;
      for (const auto& c : f.cannot_exclude) alt += (alt.empty() ? "" : ", ") + c;
      out += fmt::format("    cannot exclude: {}\n", alt);
    }
    if (!f.to_separate.empty()) out += fmt::format("    to tell them apart: {}\n", f.to_separate);
    out += "    evidence:\n";
    for (const auto& e : f.evidence) {
      std::string threshold =
          e.threshold ? fmt::format(" (threshold {} {})", e.comparison, FormatReadable(*e.threshold)) : "";
      out += fmt::format("      {:<40} {:>12}{}  — {}\n", e.name, FormatValue(e), threshold, e.source);
    }
    if (!f.recommendations.empty()) out += "    fix:\n";
    for (const auto& r : f.recommendations) out += fmt::format("      - {}\n        ({})\n", r.action, r.why);
    if (f.gain) out += fmt::format("    expected gain: {}; {}\n", GainLine(*f.gain), f.gain->basis);
  }
  RenderCost(out, d.cost);

  out += st("\nMEASUREMENTS\n", "1");
  for (size_t i = 0; i < d.recordings.size() && i < run.recordings.size(); ++i)
    RenderRecording(out, run.recordings[i], d.recordings[i], o, st);
  return st.Finish(out);
}

}  // namespace gputriage
