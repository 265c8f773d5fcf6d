#include "src/top/top_screen.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gputriage {
namespace {

constexpr const char* kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};

std::string Percent(double v) { return std::isfinite(v) ? fmt::format("{:.0f}%", v) : "-"; }

std::string Memory(const GpuView& g) {
  const double used = g.latest[static_cast<size_t>(Metric::kFbUsedBytes)];
  double total = g.latest[static_cast<size_t>(Metric::kFbTotalBytes)];
  if (!std::isfinite(total) && g.memory_total_bytes > 0) total = static_cast<double>(g.memory_total_bytes);
  if (!std::isfinite(total)) {
    const double free = g.latest[static_cast<size_t>(Metric::kFbFreeBytes)];
    if (std::isfinite(free) && std::isfinite(used)) total = used + free;
  }
  if (!std::isfinite(used)) return "-";
  const double gib = 1024.0 * 1024 * 1024;
  return std::isfinite(total) && total > 0 ? fmt::format("{:.1f}/{:.0f}G", used / gib, total / gib)
                                           : fmt::format("{:.1f}G", used / gib);
}

std::string Power(const GpuView& g) {
  const double w = g.latest[static_cast<size_t>(Metric::kPowerW)];
  double limit = g.latest[static_cast<size_t>(Metric::kPowerLimitW)];
  if (!std::isfinite(limit) && g.power_limit_w > 0) limit = g.power_limit_w;
  if (!std::isfinite(w)) return "-";
  return std::isfinite(limit) && limit > 0 ? fmt::format("{:.0f}/{:.0f}W", w, limit) : fmt::format("{:.0f}W", w);
}

std::string JobName(const JobIdentity& j) {
  if (!j.pod_name.empty()) return (j.namespace_name.empty() ? "" : j.namespace_name + "/") + j.pod_name;
  if (!j.slurm_job.empty()) return "slurm " + j.slurm_job;
  if (!j.pod_uid.empty()) return "pod " + j.pod_uid.substr(0, 8);
  if (j.pid != 0) return j.command.empty() ? fmt::format("pid {}", j.pid) : fmt::format("{} ({})", j.command, j.pid);
  return "-";
}

std::string Verdict(const GpuJudgement& j) {
  if (j.verdict.empty()) return "judging...";
  if (j.verdict == "none") return "no finding";
  return j.verdict;
}

LineStyle SeverityStyle(const GpuJudgement& j) {
  if (j.verdict.empty() || j.verdict == "none") return LineStyle::kNormal;
  switch (j.severity) {
    case Severity::kHigh: return LineStyle::kHigh;
    case Severity::kModerate: return LineStyle::kModerate;
    case Severity::kLow: return LineStyle::kLow;
    default: return LineStyle::kNormal;
  }
}

/// The value a sort orders by; NaN sorts last.
double SortKey(const GpuView& g, size_t index, TopSort sort) {
  switch (sort) {
    case TopSort::kIndex: return static_cast<double>(index);
    case TopSort::kUtil: return g.latest[static_cast<size_t>(Metric::kGpuUtil)];
    case TopSort::kMemory: return g.latest[static_cast<size_t>(Metric::kFbUsedBytes)];
    case TopSort::kPower: return g.latest[static_cast<size_t>(Metric::kPowerW)];
    case TopSort::kIdleCost: return g.judgement.idle_usd_per_hour;
  }
  return NAN;
}

}  // namespace

const char* TopSortName(TopSort sort) {
  switch (sort) {
    case TopSort::kIndex: return "index";
    case TopSort::kUtil: return "utilization";
    case TopSort::kMemory: return "memory";
    case TopSort::kPower: return "power";
    case TopSort::kIdleCost: return "idle $/h";
  }
  return "?";
}

int DisplayWidth(std::string_view text) {
  int n = 0;
  for (unsigned char c : text)
    if ((c & 0xC0) != 0x80) ++n;  // count lead bytes, not continuations
  return n;
}

std::string FitColumns(std::string_view text, int width) {
  std::string out;
  int cols = 0;
  size_t i = 0;
  while (i < text.size() && cols < width) {
    size_t len = 1;
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0xF0) len = 4;
    else if (c >= 0xE0) len = 3;
    else if (c >= 0xC0) len = 2;
    if (i + len > text.size()) break;
    // Control characters from a process name must not steer the terminal.
    if (len == 1 && (c < 0x20 || c == 0x7F)) out += '?';
    else out.append(text.substr(i, len));
    i += len;
    ++cols;
  }
  out.append(static_cast<size_t>(std::max(0, width - cols)), ' ');
  return out;
}

std::string Sparkline(const std::vector<float>& values, int width) {
  std::string out;
  if (width <= 0) return out;
  const size_t n = std::min(values.size(), static_cast<size_t>(width));
  out.append(static_cast<size_t>(width) - n, ' ');  // history not yet long enough: blank on the left
  for (size_t i = values.size() - n; i < values.size(); ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) {
      out += ' ';
      continue;
    }
    const int level = std::clamp(static_cast<int>(std::lround(v / 100.0 * 7.0)), 0, 7);
    out += kBlocks[level];
  }
  return out;
}

std::vector<size_t> SortedGpus(const AgentView& view, const TopUiState& ui) {
  std::vector<size_t> order(view.gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (ui.sort == TopSort::kIndex && !ui.reverse) return order;
  // Largest first (index: in order), NaN last whichever way.
  const bool ascending = (ui.sort == TopSort::kIndex) != ui.reverse;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double x = SortKey(view.gpus[a], a, ui.sort), y = SortKey(view.gpus[b], b, ui.sort);
    if (!std::isfinite(x) || !std::isfinite(y)) return std::isfinite(x) && !std::isfinite(y);
    return ascending ? x < y : x > y;
  });
  return order;
}

std::vector<ScreenLine> RenderTopScreen(const AgentView* view, const TopUiState& ui, int width, int height,
                                        const std::string& clock) {
  std::vector<ScreenLine> lines;
  width = std::max(width, 1);
  auto add = [&](std::string text, LineStyle style = LineStyle::kNormal) {
    lines.push_back({FitColumns(text, width), style});
  };
  // A message too long for the width goes on over the next lines, cut at spaces
  // (issue 53: `top --once` cut NVML's reason in the middle of a word).
  auto add_wrapped = [&](const std::string& text, LineStyle style) {
    std::string rest = text;
    const size_t cols = static_cast<size_t>(std::max(20, width));
    while (DisplayWidth(rest) > static_cast<int>(cols)) {
      size_t cut = rest.rfind(' ', cols);
      if (cut == std::string::npos || cut < cols / 2) cut = cols;
      add(rest.substr(0, cut), style);
      rest = "  " + rest.substr(cut + (rest[cut] == ' ' ? 1 : 0));
    }
    add(rest, style);
  };
  const size_t gpus = view ? view->gpus.size() : 0;
  std::string title = fmt::format("gputriage top: {} GPU{}", gpus, gpus == 1 ? "" : "s");
  if (view) title += fmt::format(", every {:g} s, verdicts over {:g} s", static_cast<double>(view->interval_ns) / 1e9,
                                 static_cast<double>(view->window_ns) / 1e9);
  if (DisplayWidth(title) + 1 + DisplayWidth(clock) <= width)
    title += std::string(static_cast<size_t>(width - DisplayWidth(title) - DisplayWidth(clock)), ' ') + clock;
  add(title, LineStyle::kTitle);
  if (ui.help) {
    add("");
    add("  q        quit");
    add("  s        sort by: index, utilization, memory, power, idle $/h");
    add("  r        reverse the order");
    add("  j k  ↓ ↑ pick a GPU (its processes, job and finding show below the list)");
    add("  h ?      this help (any key closes it)");
    add("");
    add("  Sparklines: the last values of utilization, SM, tensor and DRAM activity (0-100 %).");
    add("  Verdicts: the agent's rules over the window, the same vocabulary as `gputriage diagnose`.");
  } else if (!view) {
    add("starting: the first sample comes within one interval");
  } else if (!view->source_status.empty() && view->gpus.empty()) {
    add_wrapped("not sampling: " + view->source_status, LineStyle::kHigh);
  } else {
    if (!view->source_status.empty()) add_wrapped("warning: " + view->source_status, LineStyle::kModerate);
    // Columns: fixed figures, then the job and verdict share what is left.
    // Sparkline columns as the width allows: none, utilization and SM, or all four.
    const int histories = width >= 170 ? 4 : width >= 110 ? 2 : 0;
    const int spark = histories > 0 ? std::clamp((width - 96) / histories, 8, 40) : 0;
    const char* history_names[] = {"util history", "SM history", "tensor history", "DRAM history"};
    std::string header =
        fmt::format(" {:<4} {:>5} {:>4} {:>4} {:>4} {:>11} {:>10}  ", "GPU", "util", "SM", "tens", "DRAM", "memory", "power");
    for (int h = 0; h < histories; ++h) header += FitColumns(history_names[h], spark) + " ";
    header += "verdict / job";
    add(header, LineStyle::kHeader);
    const auto order = SortedGpus(*view, ui);
    const size_t selected = std::min(ui.selected, order.empty() ? size_t{0} : order.size() - 1);
    // Rows for the list: what the detail and footer leave; scroll to keep the selection on screen.
    const int detail_rows = 6;
    const int room = std::max(1, height - static_cast<int>(lines.size()) - detail_rows - 1);
    size_t first = 0;
    if (static_cast<int>(order.size()) > room) first = std::min(order.size() - static_cast<size_t>(room),
                                                               selected >= static_cast<size_t>(room) / 2 ? selected - static_cast<size_t>(room) / 2 : 0);
    for (size_t k = first; k < order.size() && static_cast<int>(k - first) < room; ++k) {
      const GpuView& g = view->gpus[order[k]];
      const auto value = [&](Metric m) { return g.latest[static_cast<size_t>(m)]; };
      std::string label = g.label.rfind("GPU ", 0) == 0 ? g.label.substr(4) : g.label;
      // The first column marks the selected GPU (colour alone is lost on a monochrome terminal).
      std::string row = fmt::format("{}{:<4} {:>5} {:>4} {:>4} {:>4} {:>11} {:>10}  ", k == selected ? ">" : " ", FitColumns(label, 4), Percent(value(Metric::kGpuUtil)),
                                    Percent(value(Metric::kSmActive)), Percent(value(Metric::kTensorActive)),
                                    Percent(value(Metric::kDramActive)), Memory(g), Power(g));
      for (int h = 0; h < histories; ++h) row += Sparkline(g.recent[static_cast<size_t>(h)], spark) + " ";
      // The verdict before the job: on a narrow screen it is what must stay.
      row += g.lost ? "lost (fell off the bus)" : Verdict(g.judgement) + "  " + JobName(g.job);
      LineStyle style = g.lost ? LineStyle::kHigh : SeverityStyle(g.judgement);
      if (k == selected) style = LineStyle::kSelected;
      add(row, style);
    }
    if (first > 0 || first + static_cast<size_t>(room) < order.size())
      add(fmt::format("  ({} of {} GPUs shown; j/k scrolls)", std::min<size_t>(static_cast<size_t>(room), order.size()), order.size()), LineStyle::kDim);
    // The selected GPU in detail.
    if (!order.empty()) {
      const GpuView& g = view->gpus[order[selected]];
      add("");
      add(fmt::format("{} {}  {}", g.label, g.name, g.uuid), LineStyle::kHeader);
      const GpuJudgement& j = g.judgement;
      if (!j.title.empty()) {
        std::string line = "  " + j.verdict + ": " + j.title;
        if (j.gain_percent) line += fmt::format(" (fix: +{:.0f}% throughput expected)", *j.gain_percent);
        add(line, SeverityStyle(j));
      } else {
        add("  " + Verdict(j), LineStyle::kDim);
      }
      const int spark_detail = std::max(8, std::min(width - 12, 120));
      const char* names[] = {"util  ", "SM    ", "tensor", "DRAM  "};
      for (size_t s = 0; s < kNumViewSeries; ++s)
        if (std::any_of(g.recent[s].begin(), g.recent[s].end(), [](float v) { return std::isfinite(v); }))
          add(std::string("  ") + names[s] + " " + Sparkline(g.recent[s], spark_detail - 4));
      std::string procs = "  processes:";
      if (g.processes.empty()) procs += " none";
      for (const auto& p : g.processes) procs += fmt::format(" {} ({})", p.pid, p.command.empty() ? "?" : p.command);
      add(procs);
      if (std::isfinite(j.idle_usd_per_hour))
        add(fmt::format("  idle: ${:.2f}/h of ${:.2f}/h ({})", j.idle_usd_per_hour, j.price_per_hour, j.price_basis), LineStyle::kDim);
    }
  }
  // The footer on the last row.
  while (static_cast<int>(lines.size()) < height - 1) add("");
  if (static_cast<int>(lines.size()) >= height && height > 0) lines.resize(static_cast<size_t>(height - 1));
  add(fmt::format("q quit  s sort: {}{}  j/k pick  h help", TopSortName(ui.sort), ui.reverse ? " (reversed)" : ""),
      LineStyle::kDim);
  return lines;
}

}  // namespace gputriage
