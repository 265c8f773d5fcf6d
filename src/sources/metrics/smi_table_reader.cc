// nvidia-smi's default table: what `nvidia-smi` prints with no options, the form
// people save most (a `watch nvidia-smi` loop redirected to a file, a log written
// beside a job). Each table is one snapshot of every GPU: name, bus id, fan,
// temperature, performance state, power draw and cap, memory used and total, and
// GPU-Util. nvidia-smi prints the wall time on the line above each table
// ("Wed Apr  9 10:26:15 2025"); a table without one comes one sampling interval
// after the table before, and a log with no time at all says its times are synthetic.
//
// Layout (drivers R418..R580 keep it; only column widths change):
//   |   0  NVIDIA GeForce RTX 3090        Off | 00000000:04:00.0 Off |                  N/A |
//   | 30%   22C    P8              13W / 350W |  17706MiB / 24576MiB |      0%      Default |
// The Processes and MIG devices blocks that follow are not per-GPU readings and
// are skipped.
#include <algorithm>
#include <cctype>

#include <memory>

#include <fmt/format.h>

#include "src/sources/metrics/metric_readers.h"
#include "src/sources/metrics/metric_text.h"
#include "src/sources/metrics/terminal_screen.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

/// The cells of a table row ("| a | b | c |" → a, b, c), trimmed.
std::vector<std::string_view> Cells(std::string_view line) {
  std::vector<std::string_view> cells;
  line = TrimAsciiSpace(line);
  if (line.size() < 2 || line.front() != '|' || line.back() != '|') return cells;
  line = line.substr(1, line.size() - 2);
  size_t start = 0;
  while (start <= line.size()) {
    size_t bar = line.find('|', start);
    if (bar == std::string_view::npos) bar = line.size();
    cells.push_back(TrimAsciiSpace(line.substr(start, bar - start)));
    start = bar + 1;
  }
  return cells;
}

/// "00000000:04:00.0": a PCI bus id (the first token of the second cell of a GPU's first row).
bool IsBusId(std::string_view token) {
  if (token.size() < 7 || token[token.size() - 2] != '.') return false;
  int colons = 0;
  for (char c : token) {
    if (c == ':') ++colons;
    else if (c != '.' && !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return colons == 2 || colons == 1;
}

/// The time a line shows, if it is only a time: nvidia-smi's own asctime line, or
/// `watch`'s header ("Every 1.0s: nvidia-smi   host: Wed Apr  9 10:26:15 2025").
std::optional<TimeNs> LineTime(std::string_view line) {
  line = TrimAsciiSpace(line);
  if (auto t = metric_text::ParseTimestamp(line)) return t;
  if (StartsWith(line, "Every ") && line.size() > 24) return metric_text::ParseTimestamp(line.substr(line.size() - 24));
  return std::nullopt;
}

class SmiTableReader final : public MetricLineReader {
 public:
  explicit SmiTableReader(MetricReaderContext* ctx) : ctx_(ctx), metrics_(ctx->recording->metrics) {
    ctx->recording->format = "nvidia-smi-table";
  }

  void Line(std::string_view line, int64_t line_no) override {
    if (escapes_line_ == 0 && line.find('\x1b') != std::string_view::npos) {
      // A terminal recording (`script`, a tmux log of `watch nvidia-smi`): the
      // screen it draws is replayed, and each frame read as a printed table.
      escapes_line_ = line_no;
      screen_ = std::make_unique<TerminalScreen>([this](const std::vector<std::string>& rows) { Frame(rows); });
    }
    if (!screen_) return TableLine(line, line_no);
    screen_line_ = line_no;
    screen_->Feed(line);
    screen_->Feed("\n");
  }

  void TableLine(std::string_view line, int64_t line_no) {
    const std::string_view body = TrimAsciiSpace(line);
    if (body.empty()) return;
    if (Contains(body, "NVIDIA-SMI") && Contains(body, "Driver Version")) return StartSnapshot(body, line_no);
    if (body.front() != '|') {
      if (body.front() != '+')
        if (auto t = LineTime(body)) pending_time_ = *t;
      return;
    }
    if (!in_gpus_) return;
    if (Contains(body, "Processes:") || Contains(body, "MIG devices:")) {
      in_gpus_ = false;
      return;
    }
    const auto cells = Cells(body);
    if (cells.size() != 3) return;
    if (!cells[1].empty() && IsBusId(FirstToken(cells[1]))) return StartGpu(cells, line_no);
    if (device_ && Contains(cells[1], " / ")) Readings(cells, line_no);
  }

  Status Finish() override {
    if (screen_) {
      screen_->Finish();
      ctx_->Issue(IssueSeverity::kInfo, "terminal_recording", [&] {
        return fmt::format(
            "{}: a terminal recording (escape sequences that redraw the screen in place, as `watch nvidia-smi` "
            "does): its screen was replayed and each of its {} frames read as a table; a reading the program "
            "drew between two frames is not seen, and where a frame shows no time of its own it is placed one "
            "--sample-interval after the last",
            ctx_->Where(escapes_line_), frames_);
      });
    }
    if (snapshots_ == 0 && screen_)
      return DataLossError(fmt::format("{}: a terminal recording whose screen never showed an nvidia-smi table",
                                       ctx_->Where(escapes_line_)));
    if (snapshots_ == 0) return DataLossError(ctx_->file + ": no nvidia-smi table (no '| NVIDIA-SMI ... Driver Version' line)");
    if (metrics_.devices.empty() && screen_)
      return DataLossError(fmt::format("{}: a terminal recording whose screen showed nvidia-smi tables with no GPU rows",
                                       ctx_->Where(escapes_line_)));
    if (metrics_.devices.empty()) return DataLossError(ctx_->file + ": nvidia-smi tables list no GPU rows");
    return Status::Ok();
  }

 private:
  static bool Border(char c) { return c == '|' || c == '+'; }

  /// A terminal recording's frame, read as printed lines. A terminal narrower
  /// than the table wraps each of its rows onto the next screen row: a row that
  /// opens with a border goes on below while the row below opens with none and
  /// the row is not closed, or is shorter than the table's widest closed row.
  void Frame(const std::vector<std::string>& rows) {
    ++frames_;
    size_t widest = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      std::string row(TrimAsciiSpace(rows[r]));
      while (!row.empty() && Border(row.front()) && r + 1 < rows.size()) {
        const std::string_view below = TrimAsciiSpace(rows[r + 1]);
        if (below.empty() || Border(below.front()) || (Border(row.back()) && row.size() >= widest)) break;
        row += " " + std::string(below);
        ++r;
      }
      if (!row.empty() && Border(row.front()) && Border(row.back())) widest = std::max(widest, row.size());
      TableLine(row, screen_line_);
    }
  }

  static std::string_view FirstToken(std::string_view cell) {
    const size_t space = cell.find(' ');
    return space == std::string_view::npos ? cell : cell.substr(0, space);
  }

  void StartSnapshot(std::string_view header, int64_t line_no) {
    in_gpus_ = true;
    device_.reset();
    if (pending_time_) {
      // The table's own time, even when it runs backwards: logs of several jobs are
      // appended to one file, and each GPU's series takes its readings in its own order.
      time_ = pending_time_;
      ++dated_;
    } else {
      // No time above this table: one interval after the last.
      time_ = time_ ? ctx_->Advance(*time_, 1, ctx_->options.sample_interval_ns, line_no) : ctx_->anchor_ns;
    }
    metrics_.timestamps_synthetic = dated_ == 0;
    pending_time_.reset();
    ++snapshots_;
    const size_t at = header.find("Driver Version:");
    if (at != std::string_view::npos) driver_ = std::string(FirstToken(TrimAsciiSpace(header.substr(at + 15))));
  }

  /// "0  NVIDIA GeForce RTX 3090        Off" | "00000000:04:00.0 Off" | "N/A"
  void StartGpu(const std::vector<std::string_view>& cells, int64_t line_no) {
    device_.reset();
    std::string_view first = cells[0];
    size_t digits = 0;
    while (digits < first.size() && std::isdigit(static_cast<unsigned char>(first[digits]))) ++digits;
    if (digits == 0 || digits > 4) return;  // nvidia-smi numbers GPUs 0..N; longer is not an index
    int index = 0;
    for (size_t i = 0; i < digits; ++i) index = index * 10 + (first[i] - '0');
    device_ = ctx_->Device(index, {}, FirstToken(cells[1]), -1, line_no);
    if (!device_) return;
    MetricDevice& d = metrics_.devices[*device_];
    // The name runs up to the persistence (On/Off) or Windows driver-model (WDDM/TCC) column.
    std::string_view name = TrimAsciiSpace(first.substr(digits));
    const size_t last_space = name.rfind(' ');
    if (last_space != std::string_view::npos) {
      const std::string_view mode = name.substr(last_space + 1);
      if (mode == "On" || mode == "Off" || mode == "WDDM" || mode == "TCC") {
        if (mode == "WDDM" || mode == "TCC") d.labels["driver_model"] = std::string(mode);
        name = TrimAsciiSpace(name.substr(0, last_space));
      }
    }
    // A name nvidia-smi cut to its column ends in "..."; keep it so the report shows the cut.
    if (d.name.empty() && !name.empty()) d.name = std::string(name);
    if (d.driver_version.empty()) d.driver_version = driver_;
  }

  /// "30%   22C    P8   13W / 350W" | "17706MiB / 24576MiB" | "0%   Default"
  void Readings(const std::vector<std::string_view>& cells, int64_t line_no) {
    const TimeNs t = *time_;
    const size_t gpu = *device_;
    device_.reset();  // one readings row per GPU row
    ++metrics_.rows;
    std::vector<std::string_view> tokens;
    metric_text::SplitWhitespace(cells[0], tokens);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (auto c = metric_text::ValueIn(tokens[i], "C")) metrics_.Add(gpu, Metric::kGpuTempC, t, *c);
      else if (tokens[i] == "/" && i > 0 && i + 1 < tokens.size()) Power(gpu, t, tokens[i - 1], tokens[i + 1]);
    }
    Memory(gpu, t, cells[1], line_no);
    std::vector<std::string_view> util;
    metric_text::SplitWhitespace(cells[2], util);
    if (auto v = util.empty() ? std::nullopt : metric_text::ValueIn(util[0], "%")) {
      if (*v >= 0 && *v <= 100) metrics_.Add(gpu, Metric::kGpuUtil, t, *v);
      else
        ctx_->Issue(IssueSeverity::kWarning, "out_of_range", [&] {
          return fmt::format("{}: GPU-Util {} % outside 0-100; value skipped", ctx_->Where(line_no), *v);
        });
    }
  }

  void Power(size_t gpu, TimeNs t, std::string_view draw, std::string_view cap) {
    if (auto w = metric_text::ValueIn(draw, "W")) metrics_.Add(gpu, Metric::kPowerW, t, *w);
    if (auto w = metric_text::ValueIn(cap, "W")) {
      metrics_.devices[gpu].power_limit_w = *w;
      metrics_.Add(gpu, Metric::kPowerLimitW, t, *w);
    }
  }

  void Memory(size_t gpu, TimeNs t, std::string_view cell, int64_t line_no) {
    const size_t slash = cell.find(" / ");
    auto bytes = [](std::string_view tok) -> std::optional<double> {
      const auto v = metric_text::ParseValueWithUnit(tok);
      return v ? std::optional<double>(metric_text::MemoryBytes(*v)) : std::nullopt;
    };
    auto used = bytes(cell.substr(0, slash)), total = bytes(cell.substr(slash + 3));
    if (!used || !total) {
      ctx_->Issue(IssueSeverity::kInfo, "memory_unreadable", [&] {
        return fmt::format("{}: memory cell '{}' not 'USED / TOTAL'", ctx_->Where(line_no), cell);
      });
      return;
    }
    metrics_.Add(gpu, Metric::kFbUsedBytes, t, *used);
    metrics_.Add(gpu, Metric::kFbTotalBytes, t, *total);
    metrics_.devices[gpu].memory_total_bytes = static_cast<int64_t>(*total);
  }

  MetricReaderContext* ctx_;
  MetricSet& metrics_;
  std::optional<TimeNs> pending_time_, time_;
  std::optional<size_t> device_;
  std::string driver_;
  int64_t snapshots_ = 0;
  int64_t dated_ = 0;         // tables with a time above them
  int64_t escapes_line_ = 0;  // the first line with a terminal escape sequence
  bool in_gpus_ = false;
  std::unique_ptr<TerminalScreen> screen_;  // a terminal recording's screen, replayed
  int64_t screen_line_ = 0;                 // the input line the screen is at
  int64_t frames_ = 0;
};

}  // namespace

std::unique_ptr<MetricLineReader> MakeSmiTableReader(MetricReaderContext* ctx) {
  return std::make_unique<SmiTableReader>(ctx);
}

}  // namespace gputriage
