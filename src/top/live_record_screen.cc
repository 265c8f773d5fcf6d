#include "src/top/live_record_screen.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gputriage/markers.hpp"

namespace gputriage {
namespace {

struct PhaseShare {
  const char* name;
  char glyph;
  double ms;
};

/// `width` columns split between the phases in proportion to their time, each
/// drawn with its glyph (the rest of the step as '.').
std::string PhaseBar(const std::vector<PhaseShare>& parts, int width) {
  double total = 0;
  for (const auto& p : parts) total += p.ms;
  if (total <= 0 || width <= 0) return std::string(static_cast<size_t>(std::max(0, width)), ' ');
  std::string bar;
  double used = 0;
  for (const auto& p : parts) {
    const double end = used + p.ms / total * width;
    const int cells = static_cast<int>(std::lround(end)) - static_cast<int>(std::lround(used));
    bar.append(static_cast<size_t>(std::max(0, cells)), p.glyph);
    used = end;
  }
  bar.resize(static_cast<size_t>(width), ' ');
  return bar;
}

LineStyle SeverityStyle(Severity s) {
  switch (s) {
    case Severity::kHigh: return LineStyle::kHigh;
    case Severity::kModerate: return LineStyle::kModerate;
    default: return LineStyle::kLow;
  }
}

}  // namespace

void LiveStepWindow::Add(const std::vector<MarkedStep>& steps) {
  for (const auto& s : steps) {
    steps_.push_back(s);
    ++total_;
    if (steps_.size() > capacity_) steps_.pop_front();
  }
}

std::vector<MarkedStep> LiveStepWindow::Steps(const std::vector<MarkedStep>& held) const {
  const size_t from_held = std::min(held.size(), capacity_);
  const size_t from_final = std::min(steps_.size(), capacity_ - from_held);
  std::vector<MarkedStep> out(steps_.end() - static_cast<std::ptrdiff_t>(from_final), steps_.end());
  out.insert(out.end(), held.end() - static_cast<std::ptrdiff_t>(from_held), held.end());
  return out;
}

std::vector<ScreenLine> RenderLiveRecordScreen(const StepMarkerAnalysis& m, const std::vector<Finding>& findings,
                                               int64_t steps_so_far, TimeNs elapsed_ns, int width) {
  width = std::max(width, 40);
  std::vector<ScreenLine> out;
  const int64_t seconds = elapsed_ns / 1'000'000'000;
  out.push_back({FitColumns(fmt::format(" gputriage record --live  {:02d}:{:02d}:{:02d}  {} steps", seconds / 3600,
                                        seconds / 60 % 60, seconds % 60, steps_so_far),
                            width),
                 LineStyle::kTitle});
  if (m.steps == 0) {
    out.push_back({FitColumns(steps_so_far == 0 ? "waiting for the job's first steps (step markers, or record --python)"
                                                : "warming up: the first steps are left out",
                              width),
                   LineStyle::kDim});
    return out;
  }
  std::string rate = std::isnan(m.samples_per_s) ? std::string() : fmt::format(" · {:.0f} samples/s", m.samples_per_s);
  out.push_back({FitColumns(fmt::format("step {:.1f} ms (p50 {:.1f}, p95 {:.1f}) over the last {} steps{}",
                                        m.step_ms_mean, m.step_ms_p50, m.step_ms_p95, m.steps, rate),
                            width)});
  const auto phase = [&](int id) { return m.phase_ms_mean[static_cast<size_t>(id)]; };
  std::vector<PhaseShare> parts = {{"data", 'd', phase(GPUTRIAGE_PHASE_DATA)},
                                   {"copy", 'h', phase(kCopySlot)},
                                   {"forward", 'f', phase(GPUTRIAGE_PHASE_FORWARD)},
                                   {"backward", 'b', phase(GPUTRIAGE_PHASE_BACKWARD)},
                                   {"optimizer", 'o', phase(GPUTRIAGE_PHASE_OPTIMIZER)},
                                   {"communication", 'c', phase(GPUTRIAGE_PHASE_COMMUNICATION)}};
  const double rest = m.phases_traced ? m.untraced_ms_mean
                                      : std::max(0.0, m.step_ms_mean - phase(GPUTRIAGE_PHASE_DATA) -
                                                          phase(GPUTRIAGE_PHASE_COMMUNICATION));
  parts.push_back({m.phases_traced ? "outside the phases" : "compute (phases not marked)", '.', rest});
  std::string legend;
  for (const auto& p : parts)
    if (p.ms > 0 || p.glyph == '.')
      legend += fmt::format("{}{} {} {:.1f}", legend.empty() ? "" : "  ", p.glyph, p.name, p.ms);
  out.push_back({FitColumns("[" + PhaseBar(parts, width - 2) + "]", width)});
  out.push_back({FitColumns(legend + " ms (host-timed)", width), LineStyle::kDim});
  if (findings.empty()) {
    out.push_back({FitColumns("no verdict so far: no rule crossed its threshold on these steps", width), LineStyle::kLow});
  } else {
    for (size_t i = 0; i < findings.size() && i < 3; ++i)
      out.push_back({FitColumns(fmt::format("{:<9}{}", findings[i].severity == Severity::kHigh       ? "high"
                                                       : findings[i].severity == Severity::kModerate ? "moderate"
                                                                                                      : "low",
                                            findings[i].title),
                                width),
                     SeverityStyle(findings[i].severity)});
  }
  return out;
}

std::string AnsiLine(const ScreenLine& line) {
  const char* sgr = "";
  switch (line.style) {
    case LineStyle::kTitle: sgr = "\033[7m"; break;
    case LineStyle::kHeader: sgr = "\033[1m"; break;
    case LineStyle::kSelected: sgr = "\033[7m"; break;
    case LineStyle::kHigh: sgr = "\033[1;31m"; break;
    case LineStyle::kModerate: sgr = "\033[33m"; break;
    case LineStyle::kLow: sgr = "\033[32m"; break;
    case LineStyle::kDim: sgr = "\033[2m"; break;
    case LineStyle::kNormal: break;
  }
  return fmt::format("{}{}\033[0m", sgr, line.text);
}

std::string AnsiRedraw(const std::vector<ScreenLine>& lines, size_t previous) {
  std::string out;
  if (previous > 0) out += fmt::format("\r\033[{}A", previous);  // back up to the first line drawn last time
  for (const auto& line : lines) out += "\r" + AnsiLine(line) + "\033[K\n";
  for (size_t i = lines.size(); i < previous; ++i) out += "\033[K\n";  // a shorter screen clears what was below
  return out;
}

}  // namespace gputriage
