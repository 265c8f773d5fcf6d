// The terminal report: verdicts first, then their evidence and fixes, then the
// measurements they came from.
#include <cmath>

#include <fmt/format.h>

#include "gputriage/report.h"

namespace gputriage {
namespace {


struct Style {
  bool on;
  std::string operator()(const std::string& text, const char* code) const {
    return on ? fmt::format("\033[{}m{}\033[0m", code, text) : text;
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

void RenderRecording(std::string& out, const Recording& rec, const RecordingAnalysis& a, const TerminalOptions& o,
                     const Style& st) {
  out += st(fmt::format("\n== {}{}\n", a.source, a.rank >= 0 ? fmt::format(" (rank {})", a.rank) : ""), "1");
  if (!a.device.name.empty())
    out += fmt::format("   device {}: {} ({}, compute capability {}.{}, {} SMs)\n", a.device.id, a.device.name,
                       VendorName(a.device.vendor), a.device.compute_major, a.device.compute_minor, a.device.num_sms);
  out += fmt::format("   import: {} events, {:.1f} MB{}\n", rec.stats.events_seen, static_cast<double>(rec.stats.bytes_read) / 1e6,
                     rec.stats.truncated ? " — TRUNCATED" : "");
  for (const auto& issue : rec.stats.issues)
    out += fmt::format("   import {}: {} × {} (first: {})\n", issue.severity == IssueSeverity::kInfo ? "note" : "warning",
                       issue.count, issue.kind, Shorten(issue.message, 160));
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
  }
  if (a.has_gpu_activity && !a.steps.empty()) {
    out += fmt::format("   GPU: busy {}, est. SM efficiency {}, est. achieved occupancy {}, tensor cores {} of matrix time\n",
                       Pct(a.gpu.busy_percent), Pct(a.gpu.sm_efficiency_percent), Pct(a.gpu.achieved_occupancy_percent),
                       Pct(a.precision.tensor_core_percent_of_matrix));
    const double steps = static_cast<double>(a.steps.size());
    out += "   GPU idle per step by cause:";
    for (int c = 0; c < kNumIdleCauses; ++c)
      out += fmt::format(" {} {:.2f} ms{}", IdleCauseName(static_cast<IdleCause>(c)), ToMs(a.device_idle.ns[c]) / steps,
                         c < kNumIdleCauses - 1 ? "," : "\n");
    out += fmt::format("   launches: {:.0f} kernels/step, median {:.1f} µs, {:.0f}% under 10 µs, median launch delay {:.1f} µs\n",
                       a.launch.kernels_per_step, a.launch.median_kernel_us, a.launch.short_kernel_percent,
                       a.launch.median_launch_delay_us);
    if (a.comm.kernel_ns > 0)
      out += fmt::format("   communication: {:.1f}% of kernel time, {} overlapped with compute, {:.2f} ms exposed per step\n",
                         a.comm.share_of_kernel_time_percent, Pct(a.comm.overlap_percent), ToMs(a.comm.exposed_ns) / steps);
    if (a.attention.backend != "none") out += fmt::format("   attention: {}\n", a.attention.backend);
    if (a.throughput.available)
      out += fmt::format("   throughput: {:.1f} TFLOP/s achieved, MFU {}\n", a.throughput.achieved_tflops, Pct(a.throughput.mfu_percent));
  }
  if (!a.top_kernels.empty()) {
    out += fmt::format("   top kernels ({} distinct):\n", a.kernel_names);
    for (int i = 0; i < o.max_kernels && i < static_cast<int>(a.top_kernels.size()); ++i) {
      const auto& k = a.top_kernels[static_cast<size_t>(i)];
      out += fmt::format("     {:>9.2f} ms {:>6} × {:<13} {:<6} {}\n", ToMs(k.total_ns), k.count, k.kernel_class,
                         k.precision.empty() ? "" : k.precision, Shorten(k.name, 90));
    }
  }
  for (const auto& l : a.limitations) out += fmt::format("   cannot tell: {}\n", l);
}

}  // namespace

std::string RenderTerminal(const Run& run, const Diagnosis& d, const TerminalOptions& o) {
  const Style st{o.color};
  std::string out;
  const Summary& s = d.summary;
  out += st("gputriage diagnosis", "1");
  out += fmt::format(" — {} recording(s){}\n", s.recordings, s.device.empty() ? "" : ", " + s.device);
  if (s.steps > 0)
    out += fmt::format("GPU busy {:.1f}% · data wait {:.1f}% of step · avg step {:.2f} ms over {} step(s)\n",
                       s.gpu_busy_percent, s.data_wait_percent, s.avg_step_ms, s.steps);

  out += st("\nVERDICTS\n", "1");
  if (d.findings.empty()) out += "  none: no rule crossed its threshold (see the measurements below)\n";
  for (const auto& f : d.findings) {
    out += fmt::format("  {} {:<20} {}\n", st(fmt::format("{:<9}", SeverityName(f.severity)), SeverityColor(f.severity)),
                       f.verdict, f.title);
    if (f.gain && f.gain->expected > 0)
      out += fmt::format("  {:<9} {:<20} expected: {:.2f} → {:.2f} ms per step ({:+.0f}% throughput)\n", "", "",
                         f.gain->current, f.gain->expected, f.gain->speedup_percent);
  }

  int n = 0;
  for (const auto& f : d.findings) {
    out += st(fmt::format("\n[{}] {} ({}){}\n", ++n, f.verdict, SeverityName(f.severity),
                          f.rank >= 0 ? fmt::format(", rank {}", f.rank) : ""),
              "1");
    out += fmt::format("    {}\n", f.detail);
    out += "    evidence:\n";
    for (const auto& e : f.evidence) {
      std::string threshold = e.threshold ? fmt::format(" (threshold {} {})", e.comparison, *e.threshold) : "";
      out += fmt::format("      {:<40} {:>12}{}  — {}\n", e.name, FormatValue(e), threshold, e.source);
    }
    if (!f.recommendations.empty()) out += "    fix:\n";
    for (const auto& r : f.recommendations) out += fmt::format("      - {}\n        ({})\n", r.action, r.why);
    if (f.gain)
      out += fmt::format("    expected gain: {:.2f} → {:.2f} ms per step ({:+.0f}%); {}\n", f.gain->current, f.gain->expected,
                         f.gain->speedup_percent, f.gain->basis);
  }

  out += st("\nMEASUREMENTS\n", "1");
  for (size_t i = 0; i < d.recordings.size() && i < run.recordings.size(); ++i)
    RenderRecording(out, run.recordings[i], d.recordings[i], o, st);
  return out;
}

}  // namespace gputriage
