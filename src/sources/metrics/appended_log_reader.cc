// Logs that several commands appended to: `nvidia-smi >> gpu.log` then a
// `--query-gpu` loop into the same file, a logger restarted with its header, a
// dmon run after a table. A line that only one format writes starts that
// format's part; each part is read by its own reader into the one recording, so
// every GPU reading in the file is read whatever came first.
#include <map>

#include <fmt/format.h>

#include "src/sources/metrics/metric_readers.h"
#include "src/sources/metrics/metric_text.h"
#include "src/util/strings.h"

namespace gputriage {

bool SmiCsvHeaderLine(std::string_view line);  // smi_csv_reader.cc
bool SmiDmonHeaderLine(std::string_view line); // metric_import.cc

namespace {

/// The format whose part `line` begins, or "" for a line any part may hold.
/// Data rows start with a digit or a space and are passed by at the first byte.
std::string_view PartStart(std::string_view line) {
  const std::string_view t = TrimAsciiSpace(line);
  if (t.empty()) return {};
  const char c = t.front();
  if (c == '|' && Contains(t, "NVIDIA-SMI") && Contains(t, "Driver Version")) return "nvidia-smi-table";
  if (c == '=' && Contains(t, "NVSMI LOG")) return "nvidia-smi-q";
  if (c == '#' && SmiDmonHeaderLine(t)) return "nvidia-smi-dmon";
  // nvidia-smi writes a query header at the line's start; an indented word is a
  // section of -q's report ("    Temperature" above "GPU Current Temp : 38 C").
  const bool at_start = line.front() != ' ' && line.front() != '\t';
  if (at_start && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '\xEF') && SmiCsvHeaderLine(t))
    return "nvidia-smi-csv";
  return {};
}

/// Lines a table is preceded by: nvidia-smi's time line (or `watch`'s header) and
/// the table's top border. They are held until the next line says whose they are.
bool TableLead(std::string_view line) {
  const std::string_view t = TrimAsciiSpace(line);
  if (t.empty()) return false;
  if (t.front() == '+' && t.find_first_not_of("+-=") == std::string_view::npos) return true;
  if (StartsWith(t, "Every ")) return true;
  return t.find(',') == std::string_view::npos && metric_text::ParseTimestamp(t).has_value();
}

class AppendedLogReader final : public MetricLineReader {
 public:
  AppendedLogReader(MetricReaderContext* ctx, std::string first) : ctx_(ctx), first_(std::move(first)) {
    current_ = Reader(first_);
  }

  void Line(std::string_view line, int64_t line_no) override {
    const std::string_view next = PartStart(line);
    if (!next.empty() && next != current_format_) {
      current_ = Reader(std::string(next));
      ctx_->Issue(IssueSeverity::kInfo, "appended_parts", [&] {
        return fmt::format("{}: a {} part begins (the file was appended to by several commands; each part is read)",
                           ctx_->Where(line_no), next);
      });
    }
    if (current_format_ != "nvidia-smi-table" && TableLead(line)) {
      if (held_.size() >= 4) FlushHeld();
      held_.push_back({std::string(line), line_no});
      return;
    }
    FlushHeld();
    current_->Line(line, line_no);
  }

  Status Finish() override {
    FlushHeld();
    Status first_error;
    int read = 0;
    std::string parts;
    for (auto& [format, reader] : readers_) {
      Status s = reader->Finish();
      parts += (parts.empty() ? "" : ", ") + format;
      if (s.ok()) ++read;
      else if (first_error.ok()) first_error = s;
    }
    ctx_->recording->format = first_;
    if (readers_.size() > 1) ctx_->recording->metadata["sections"] = parts;
    if (read == 0) return first_error;  // no part read: the (first) part's own error
    if (!first_error.ok())
      ctx_->Issue(IssueSeverity::kWarning, "bad_section", [&] { return first_error.message(); });
    return Status::Ok();
  }

 private:
  void FlushHeld() {
    for (const auto& h : held_) current_->Line(h.line, h.line_no);
    held_.clear();
  }

  MetricLineReader* Reader(const std::string& format) {
    current_format_ = format;
    auto& slot = readers_[format];
    if (!slot) slot = MakeMetricLineReader(format, ctx_);
    return slot.get();
  }

  struct HeldLine {
    std::string line;
    int64_t line_no;
  };
  MetricReaderContext* ctx_;
  std::string first_;
  std::string current_format_;
  MetricLineReader* current_ = nullptr;
  std::map<std::string, std::unique_ptr<MetricLineReader>> readers_;
  std::vector<HeldLine> held_;
};

}  // namespace

std::unique_ptr<MetricLineReader> MakeAppendedLogReader(MetricReaderContext* ctx, const std::string& first_format) {
  return std::make_unique<AppendedLogReader>(ctx, first_format);
}

}  // namespace gputriage
