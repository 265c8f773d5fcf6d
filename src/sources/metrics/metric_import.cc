// Metric logs: format detection, the file/directory drivers, and nvidia-smi
// capture bundles (one file of "# $ nvidia-smi ..." sections, as collected by
// nvidia_gpu_exporter's capture script and by hand in bug reports).
#include <algorithm>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "src/sources/metrics/metric_readers.h"
#include "src/sources/metrics/metric_text.h"
#include "src/util/line_reader.h"
#include "src/util/strings.h"

namespace gputriage {

bool SmiCsvHeaderLine(std::string_view line);                    // smi_csv_reader.cc
bool IsDcgmiFieldTag(std::string_view name);                     // dmon_reader.cc

namespace {

bool IsRule(std::string_view line) {
  line = TrimAsciiSpace(line);
  return line.size() >= 20 && line.find_first_not_of('#') == std::string_view::npos;
}

/// A row nvidia-smi --query-gpu --format=csv,noheader[,nounits] could have
/// written: two or more fields, each a number (bare, or in one of its units), a
/// date-time, a placeholder, a uuid or bus id, or text beside them, with at least
/// one number in a unit or two bare numbers. Whether they hold GPU readings is
/// the reader's to tell (smi_column_inference.h). `strict` (a file met in a
/// directory, beside other CSVs a run writes) asks for a unit or a leading date.
bool HeaderlessSmiRow(std::string_view line, bool strict) {
  if (line.find(',') == std::string_view::npos) return false;
  std::vector<std::string_view> fields;
  metric_text::SplitTrimmed(line, ',', fields);
  int in_units = 0, bare = 0;
  if (strict && metric_text::ParseTimestamp(fields.front())) return true;
  for (auto f : fields) {
    if (f.empty()) return false;
    if (metric_text::ParseNumber(f)) {
      ++bare;
    } else if (auto v = metric_text::ParseValueWithUnit(f);
               v && (v->unit == "%" || v->unit == "MiB" || v->unit == "W" || v->unit == "MHz")) {
      ++in_units;
    }
  }
  return in_units >= 1 || (bare >= 2 && !strict);
}

/// nvidia-smi dmon's header names "gpu" and its own columns.
bool DmonHeaderFields(const std::vector<std::string_view>& fields) {
  bool gpu = false, dmon_col = false;
  for (auto f : fields) {
    if (EqualsLowered(f, "gpu")) gpu = true;
    if (EqualsLowered(f, "pwr") || EqualsLowered(f, "sm") || EqualsLowered(f, "smutil") || EqualsLowered(f, "mclk") ||
        EqualsLowered(f, "rxpci") || EqualsLowered(f, "fb") || EqualsLowered(f, "gtemp"))
      dmon_col = true;
  }
  return gpu && dmon_col;
}

/// Which reader a capture-bundle command needs ("" to skip the section).
std::string FormatForCommand(std::string_view command) {
  if (Contains(command, "dcgmi") && Contains(command, "dmon")) return "dcgmi-dmon";
  if (!Contains(command, "nvidia-smi")) return "";
  if (Contains(command, "--query-gpu")) return "nvidia-smi-csv";
  if (Contains(command, " dmon")) return "nvidia-smi-dmon";
  if (EndsWith(TrimAsciiSpace(command), " -q") || Contains(command, " -q ") || Contains(command, " --query ")) return "nvidia-smi-q";
  return "";
}

/// The field list of a "--query-gpu=a,b,c" command (for headerless output).
std::vector<std::string> QueryColumns(std::string_view command) {
  std::vector<std::string> out;
  const size_t at = command.find("--query-gpu=");
  if (at == std::string_view::npos) return out;
  std::string_view list = command.substr(at + 12);
  const size_t end = list.find(' ');
  if (end != std::string_view::npos) list = list.substr(0, end);
  std::vector<std::string_view> parts;
  metric_text::SplitTrimmed(list, ',', parts);
  for (auto p : parts) out.emplace_back(p);
  return out;
}


TimeNs LatestTime(const MetricSet& set) {
  TimeNs latest = 0;
  for (const auto& d : set.devices)
    for (const auto& s : d.series)
      if (s.count() > 0) latest = std::max(latest, s.last_time());
  return latest;
}

ImportOptions WithDefaultInterval(ImportOptions options, const std::string& format) {
  if (options.sample_interval_ns <= 0 && format != "dcgm-exporter") options.sample_interval_ns = kNsPerS;
  return options;
}

/// One phase ("idle", "load") of a capture bundle.
struct Phase {
  std::string name;
  Recording recording;
};

StatusOr<std::vector<Recording>> ReadBundle(LineReader& lines, const std::string& path, const ImportOptions& options) {
  std::vector<Phase> phases;
  std::unique_ptr<MetricLineReader> reader;
  MetricReaderContext ctx;
  Phase* current = nullptr;
  bool in_header = false;
  std::string header_phase, header_command;
  auto finish_section = [&]() -> Status {
    if (!reader) return Status::Ok();
    Status s = reader->Finish();
    reader.reset();
    if (!s.ok()) {
      // One unreadable section does not lose the others: count it.
      current->recording.stats.AddIssue(IssueSeverity::kWarning, "bad_section", s.message());
    }
    return Status::Ok();
  };
  std::string_view line;
  while (lines.Next(line)) {
    if (IsRule(line)) {
      if (!in_header) {
        RETURN_IF_ERROR(finish_section());
        in_header = true;
        header_phase.clear();
        header_command.clear();
      } else {
        in_header = false;
        const std::string format = FormatForCommand(header_command);
        if (format.empty() || header_phase == "capabilities") continue;
        auto it = std::find_if(phases.begin(), phases.end(), [&](const Phase& p) { return p.name == header_phase; });
        if (it == phases.end()) {
          phases.push_back(Phase{header_phase, Recording{}});
          it = phases.end() - 1;
          it->recording.source_path = path + "#" + header_phase;
          it->recording.metadata["phase"] = header_phase;
        }
        current = &*it;
        ctx = MetricReaderContext{};
        ctx.recording = &current->recording;
        ctx.file = path;
        ctx.options = WithDefaultInterval(options, format);
        ctx.options.smi_columns = QueryColumns(header_command);
        const TimeNs latest = LatestTime(current->recording.metrics);
        ctx.anchor_ns = latest > 0 ? latest + ctx.options.sample_interval_ns : 0;
        reader = MakeMetricLineReader(format, &ctx);
        current->recording.metadata["sections"] += (current->recording.metadata["sections"].empty() ? "" : ", ") + format;
      }
      continue;
    }
    if (in_header) {
      std::string_view h = TrimAsciiSpace(line);
      if (StartsWith(h, "# $ ")) header_command = std::string(TrimAsciiSpace(h.substr(4)));
      else if (StartsWith(h, "# ") && Contains(h, " :: ")) header_phase = std::string(TrimAsciiSpace(h.substr(2, h.find(" :: ") - 2)));
      continue;
    }
    if (reader) reader->Line(line, lines.line_number());
  }
  RETURN_IF_ERROR(lines.status());
  RETURN_IF_ERROR(finish_section());
  std::vector<Recording> out;
  for (auto& p : phases) {
    if (p.recording.metrics.devices.empty()) continue;
    p.recording.format = "capture-bundle";
    p.recording.stats.bytes_read = lines.bytes_consumed();
    out.push_back(std::move(p.recording));
  }
  if (out.empty()) return DataLossError(path + ": capture bundle without a readable nvidia-smi -q, --query-gpu or dmon section");
  NoteUnterminatedLastLine(lines, path, out.back());
  return out;
}

}  // namespace

std::unique_ptr<MetricLineReader> MakeMetricLineReader(const std::string& format, MetricReaderContext* ctx) {
  if (format == "nvidia-smi-csv") return MakeSmiCsvReader(ctx);
  if (format == "nvidia-smi-q") return MakeSmiQueryReader(ctx);
  if (format == "nvidia-smi-table") return MakeSmiTableReader(ctx);
  if (format == "nvidia-smi-dmon") return MakeSmiDmonReader(ctx);
  if (format == "dcgmi-dmon") return MakeDcgmiDmonReader(ctx);
  if (format == "dcgm-exporter") return MakeDcgmExporterReader(ctx);
  return nullptr;
}

bool AppendableFormat(const std::string& format) {
  return format == "nvidia-smi-csv" || format == "nvidia-smi-table" || format == "nvidia-smi-q" ||
         format == "nvidia-smi-dmon";
}

/// "# gpu   pwr  gtemp ..." ('#' and then dmon's own column names).
bool SmiDmonHeaderLine(std::string_view line) {
  line = TrimAsciiSpace(line);
  if (line.empty() || line.front() != '#') return false;
  const std::string_view rest = TrimAsciiSpace(line.substr(1));
  std::vector<std::string_view> fields;
  if (rest.find(',') != std::string_view::npos) metric_text::SplitTrimmed(rest, ',', fields);  // dmon --format csv
  else metric_text::SplitWhitespace(rest, fields);
  return DmonHeaderFields(fields);
}

void FeedLines(LineReader& lines, MetricLineReader& reader, MetricReaderContext& ctx) {
  std::string_view line;
  while (lines.Next(line)) {
    // NUL bytes never occur in these text logs: a log's zero-filled tail after a
    // crash, or binary damage. A run of them before a line's text is the hole a
    // logger leaves when its file is truncated under it (`> log` while it writes
    // with `>>`'s offset): the text after it is read. Otherwise the line is not
    // read as numbers.
    const size_t text_at = line.find_first_not_of('\0');
    if (text_at != 0 && text_at != std::string_view::npos && line.find('\0', text_at) == std::string_view::npos) {
      ctx.Issue(IssueSeverity::kInfo, "nul_padding", [&] {
        return fmt::format("{}: {} NUL bytes before the line's text (a log truncated while written); the text "
                           "after them is read",
                           ctx.Where(lines.line_number()), text_at);
      });
      line.remove_prefix(text_at);
    }
    if (line.find('\0') != std::string_view::npos) {
      ctx.Issue(IssueSeverity::kWarning, "binary_line", [&] {
        return fmt::format("{}: binary bytes (NUL) in a text log; line skipped", ctx.Where(lines.line_number()));
      });
      continue;
    }
    reader.Line(line, lines.line_number());
  }
}

void NoteUnterminatedLastLine(const LineReader& lines, const std::string& path, Recording& rec) {
  if (!lines.last_line_unterminated()) return;
  rec.stats.AddIssue(IssueSeverity::kWarning, "unterminated_last_line",
                     fmt::format("{}:{}: the last line has no newline: the file was probably cut while it was being "
                                 "written (the line was read as it stands)",
                                 path, lines.line_number()));
}

StatusOr<std::vector<Recording>> ReadMetricLines(std::unique_ptr<ByteSource> source, const std::string& format,
                                                 const ImportOptions& options) {
  const std::string path = source->name();
  LineReader lines(std::move(source));
  if (format == "capture-bundle") return ReadBundle(lines, path, options);
  Recording rec;
  rec.source_path = path;
  MetricReaderContext ctx;
  ctx.recording = &rec;
  ctx.file = path;
  ctx.options = WithDefaultInterval(options, format);
  // A format gputriage detected may be the first of several in a file appended
  // to by several commands; one named with --format is read as that alone.
  const bool detected = options.format.empty() || options.format == "auto";
  auto reader = detected && AppendableFormat(format) ? MakeAppendedLogReader(&ctx, format)
                                                     : MakeMetricLineReader(format, &ctx);
  if (!reader) return InvalidArgumentError("unknown metric format '" + format + "'");
  FeedLines(lines, *reader, ctx);
  RETURN_IF_ERROR(lines.status());
  RETURN_IF_ERROR(reader->Finish());
  NoteUnterminatedLastLine(lines, path, rec);
  rec.stats.bytes_read = lines.bytes_consumed();
  if (rec.metrics.timestamps_synthetic)
    rec.metrics.clock_note = "no timestamps in the source: samples spaced by the sampling interval from 0";
  else if (format == "nvidia-smi-csv" || format == "nvidia-smi-q" || format == "nvidia-smi-dmon" ||
           format == "nvidia-smi-table")
    rec.metrics.clock_note = "local time of the logging host (nvidia-smi writes no time zone)";
  rec.clock_is_absolute = !rec.metrics.timestamps_synthetic;
  std::vector<Recording> out;
  out.push_back(std::move(rec));
  return out;
}

std::optional<size_t> MetricReaderContext::Device(int index, std::string_view uuid, std::string_view pci_bus_id,
                                                  int mig_instance, int64_t line_no) {
  auto found = recording->metrics.FindOrAdd(index, uuid, pci_bus_id, mig_instance);
  if (!found)
    Issue(IssueSeverity::kError, "too_many_devices", [&] {
      return fmt::format("{}: more than {} distinct GPUs; further devices ignored", Where(line_no), MetricSet::kMaxDevices);
    });
  return found;
}

std::string SniffMetricFormat(std::string_view head, bool strict) {
  // Look at the first lines that carry content.
  bool prom = false;
  int examined = 0;
  size_t pos = 0;
  while (pos < head.size() && examined < 64) {
    size_t end = head.find('\n', pos);
    if (end == std::string_view::npos) end = head.size();
    std::string_view line = TrimAsciiSpace(head.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty()) continue;
    ++examined;
    if (StartsWith(line, "# $ nvidia-smi") || StartsWith(line, "# $ dcgmi")) return "capture-bundle";
    if (StartsWith(line, "# gputriage export of run")) return "dcgm-exporter";  // may hold steps alone
    if (Contains(line, "NVSMI LOG")) return "nvidia-smi-q";
    if (Contains(line, "NVIDIA-SMI") && Contains(line, "Driver Version")) return "nvidia-smi-table";
    if (StartsWith(line, "#Entity") || StartsWith(line, "# Entity")) return "dcgmi-dmon";
    const bool comment = line[0] == '#';
    std::string_view rest = comment ? TrimAsciiSpace(line.substr(1)) : line;
    if (comment && (StartsWith(rest, "HELP ") || StartsWith(rest, "TYPE "))) {
      prom = true;
      continue;
    }
    {
      // nvidia-smi dmon's header names "gpu" and its own columns ('#' optional in csv output).
      std::vector<std::string_view> fields;
      if (rest.find(',') != std::string_view::npos) metric_text::SplitTrimmed(rest, ',', fields);
      else metric_text::SplitWhitespace(rest, fields);
      if (DmonHeaderFields(fields)) return "nvidia-smi-dmon";
      // A CSV of dcgmi field tags ("EntityId,GRACT,FBUSD,TimeStamp").
      if (!comment && fields.size() > 1 && rest.find(',') != std::string_view::npos && !SmiCsvHeaderLine(line)) {
        int tags = 0;
        for (auto f : fields) tags += IsDcgmiFieldTag(f) ? 1 : 0;
        if (tags > 0) return "dcgmi-dmon";
      }
    }
    if (comment) continue;
    if (StartsWith(line, "DCGM_FI_") || StartsWith(line, "dcgm_")) return "dcgm-exporter";
    if (SmiCsvHeaderLine(line)) return "nvidia-smi-csv";
    if (prom && line.find(' ') != std::string_view::npos) return "dcgm-exporter";
    // A headerless nvidia-smi CSV row: its reader tells the columns from the
    // values, or says that they hold no GPU reading.
    if (HeaderlessSmiRow(line, strict)) return "nvidia-smi-csv";
  }
  return prom ? "dcgm-exporter" : "";
}

StatusOr<std::vector<Recording>> ImportMetricLogFromMemory(const std::string& name, std::string_view bytes,
                                                           const ImportOptions& options) {
  std::string format = options.format;
  if (format.empty() || format == "auto") {
    format = SniffMetricFormat(bytes.substr(0, 1 << 16));
    if (format.empty()) return UnimplementedError(name + ": not a recognised GPU metric log");
  }
  return ReadMetricLines(MemorySource(name, bytes.data(), bytes.size()), format, options);
}

StatusOr<Recording> ImportScrapeFiles(const std::string& path, std::vector<std::string> file_names,
                                      const ImportOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (file_names.empty()) return NotFoundError(path + ": directory holds no scrape files");
  std::sort(file_names.begin(), file_names.end());
  std::vector<fs::path> files(file_names.begin(), file_names.end());
  Recording rec;
  rec.source_path = path;
  MetricReaderContext ctx;
  ctx.recording = &rec;
  ctx.file = path;
  ctx.options = options;
  auto reader = MakeDcgmExporterReader(&ctx);
  bool mtime_used = false;
  for (const auto& f : files) {
    ASSIGN_OR_RETURN(auto source, OpenFileSource(f.string()));
    LineReader lines(std::move(source));
    ctx.file = f.string();
    // Scrape time: a "# TIME" line inside the file wins; else the file's mtime.
    const auto mtime = fs::last_write_time(f, ec);
    if (!ec) {
      const auto since_epoch = std::chrono::duration_cast<std::chrono::nanoseconds>(
          mtime - fs::file_time_type::clock::now() + std::chrono::system_clock::now().time_since_epoch());
      StartDcgmExporterScrape(reader.get(), since_epoch.count());
      mtime_used = true;
    }
    FeedLines(lines, *reader, ctx);
    RETURN_IF_ERROR(lines.status());
    NoteUnterminatedLastLine(lines, f.string(), rec);
    rec.stats.bytes_read += lines.bytes_consumed();
  }
  ctx.file = path;
  RETURN_IF_ERROR(reader->Finish());
  rec.metrics.rows = static_cast<int64_t>(files.size());
  rec.metrics.clock_note = mtime_used ? "scrape times from '# TIME' lines, else file modification times"
                                      : "scrape times from '# TIME' lines";
  return rec;
}

}  // namespace gputriage
