// One entry point for every input: detects what a file is from its content and
// hands it to the trace reader or a metric-log reader. A directory is read for
// what it holds: its traces as the ranks of one run, its metric logs, its
// dcgm-exporter scrapes as one series.
#include <sys/stat.h>

#include <filesystem>

#include <fmt/format.h>

#include "gputriage/import.h"
#include "src/sources/kineto/kineto_reader.h"
#include "src/sources/nsys/nsys_export.h"
#include "src/sources/snapshot/allocator_snapshot.h"
#include "src/sources/metrics/metric_readers.h"
#include "src/util/byte_source.h"
#include "src/util/parallel.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

constexpr size_t kSniffBytes = 1 << 16;
// A directory walk stops here: a run's directory holds a few hundred files at
// most; more means the wrong directory (`diagnose /`) and a clear error beats
// minutes of reading.
constexpr int64_t kMaxDirectoryEntries = 20000;
constexpr int64_t kMaxDirectoryFilesRead = 2000;
constexpr int kMaxDirectoryDepth = 8;

constexpr const char* kNotRecognised =
    ": not a recognised input: expected a PyTorch profiler trace (.json/.json.gz), an Nsight Systems export "
    "(nsys export --type sqlite), a PyTorch allocator snapshot (.pickle), an nvidia-smi --query-gpu CSV, "
    "nvidia-smi -q text, nvidia-smi's default table, nvidia-smi dmon or dcgmi dmon output, or dcgm-exporter /metrics text (use --format to "
    "name it)";

/// The format a file's head shows: "kineto", a metric format, or "" for none.
/// `strict` (inside a directory) asks a JSON file to look like a trace, since
/// directories also hold configs and TensorBoard's own JSON.
std::string FormatOfHead(std::string_view head, bool strict) {
  if (LooksLikePickle(head)) return "allocator-snapshot";
  if (LooksLikeSqlite(head)) return "nsys";
  if (LooksLikeNsysReport(head)) return "nsys-report";
  const std::string_view view = TrimAsciiSpace(head);
  if (view.empty()) return "";
  if (view.front() == '{' || view.front() == '[') {
    if (!strict || head.find("\"traceEvents\"") != std::string_view::npos ||
        head.find("\"ph\"") != std::string_view::npos)
      return "kineto";
    return "";
  }
  return SniffMetricFormat(head, strict);
}

KinetoReadOptions KinetoReadOptionsFor(const ImportOptions& options) {
  KinetoReadOptions out;
  out.threads = options.threads;
  out.memory_budget_bytes = options.memory_budget_bytes;
  return out;
}

/// Reads an opened input as `format` (the reader gets the source whole, head included).
StatusOr<std::vector<Recording>> ReadSource(std::unique_ptr<ByteSource> source, const std::string& format,
                                            const ImportOptions& options) {
  if (format == "kineto" || format == "allocator-snapshot") {
    ASSIGN_OR_RETURN(Recording rec, format == "kineto"
                                        ? ImportKinetoTraceFromSource(std::move(source), KinetoReadOptionsFor(options))
                                        : ImportAllocatorSnapshot(std::move(source)));
    std::vector<Recording> out;
    out.push_back(std::move(rec));
    return out;
  }
  return ReadMetricLines(std::move(source), format, options);
}

/// An Nsight Systems export is a SQLite database, read by random access: a file,
/// never a pipe. A report (.nsys-rep) must be exported by nsys first.
StatusOr<std::vector<Recording>> ReadNsys(const std::string& path, const std::string& format,
                                          const ImportOptions& options) {
  if (path == kStdinPath)
    return InvalidArgumentError("-: an Nsight Systems export is a SQLite database and is read from a file, not a "
                                "pipe; name the .sqlite file");
  NsysReadOptions nsys;
  nsys.step_range_regex = options.step_range_regex;
  nsys.memory_budget_bytes = options.memory_budget_bytes;
  return format == "nsys-report" ? ImportNsysReport(path, nsys) : ImportNsysExport(path, nsys);
}

/// One file (or standard input), opened once: a pipe's head read to detect the
/// format is served again to the reader.
StatusOr<std::vector<Recording>> ImportOneFile(const std::string& path, const ImportOptions& options) {
  ASSIGN_OR_RETURN(auto source, OpenFileSource(path));
  std::string format = options.format;
  if (format.empty() || format == "auto") {
    ASSIGN_OR_RETURN(std::string head, PeekHead(source, kSniffBytes));
    if (TrimAsciiSpace(head).empty()) return DataLossError(source->name() + ": empty file");
    format = FormatOfHead(head, /*strict=*/false);
    if (format.empty()) return UnimplementedError(source->name() + kNotRecognised);
  }
  if (format == "nsys" || format == "nsys-report") return ReadNsys(path, format, options);
  return ReadSource(std::move(source), format, options);
}

/// What a directory walk found, by kind.
struct DirectoryContents {
  std::vector<std::string> traces;
  std::vector<std::string> nsys_exports;  // SQLite files: exports unless the reader finds them not to be
  std::vector<std::pair<std::string, std::string>> metric_logs;  // path, format
  std::vector<std::string> scrapes;
  int64_t skipped = 0;
  std::string first_skipped;
  void Skip(const std::string& file) {
    if (skipped++ == 0) first_skipped = file;
  }
};

/// A directory that held no input gputriage reads (SQLite files that were not
/// Nsight Systems exports among what it looked at).
Status NothingToRead(const std::string& path, const DirectoryContents& contents) {
  return NotFoundError(fmt::format(
      "{}: no PyTorch profiler trace or GPU metric log in this directory ({} other file{} looked at{}{})", path,
      contents.skipped, contents.skipped == 1 ? "" : "s", contents.skipped > 0 ? ", e.g. " : "",
      contents.first_skipped));
}

StatusOr<DirectoryContents> ClassifyDirectory(const std::string& path, const ImportOptions& options) {
  namespace fs = std::filesystem;
  DirectoryContents contents;
  struct stat root_stat {};
  if (::stat(path.c_str(), &root_stat) != 0) return IoError(path + ": cannot read directory");
  std::error_code ec;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) return IoError(path + ": cannot list directory: " + ec.message());
  int64_t entries = 0, files_read = 0;
  const bool forced = !options.format.empty() && options.format != "auto";
  for (; it != end; it.increment(ec)) {
    if (ec) return IoError(path + ": cannot list directory: " + ec.message());
    if (++entries > kMaxDirectoryEntries || files_read >= kMaxDirectoryFilesRead)
      return InvalidArgumentError(fmt::format(
          "{}: more than {} {} under this directory; name the run's own directory (a profiler log "
          "directory, a metrics folder) or its files",
          path, entries > kMaxDirectoryEntries ? kMaxDirectoryEntries : kMaxDirectoryFilesRead,
          entries > kMaxDirectoryEntries ? "entries" : "files to read"));
    const fs::directory_entry& entry = *it;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0) {
      contents.Skip(entry.path().string());
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      // Like `find -xdev`: /proc, /sys, /dev and other mounts are never a run's files.
      if (st.st_dev != root_stat.st_dev || it.depth() + 1 >= kMaxDirectoryDepth) it.disable_recursion_pending();
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;  // FIFOs, sockets, devices: never opened from a walk
    if (st.st_size == 0) {
      contents.Skip(entry.path().string());
      continue;
    }
    const std::string file = entry.path().string();
    if (forced) {
      if (options.format == "dcgm-exporter") contents.scrapes.push_back(file);
      else if (options.format == "kineto") contents.traces.push_back(file);
      else contents.metric_logs.emplace_back(file, options.format);
      continue;
    }
    ++files_read;
    auto source = OpenFileSource(file);
    if (!source.ok()) {
      contents.Skip(file);
      continue;
    }
    auto head = PeekHead(*source, kSniffBytes);
    const std::string format = head.ok() ? FormatOfHead(*head, /*strict=*/true) : "";
    if (format == "kineto") contents.traces.push_back(file);
    else if (format == "dcgm-exporter") contents.scrapes.push_back(file);
    else if (format == "nsys") contents.nsys_exports.push_back(file);
    else if (format == "nsys-report") contents.Skip(file);  // its export, beside it, is read
    else if (!format.empty()) contents.metric_logs.emplace_back(file, format);
    else contents.Skip(file);
  }
  if (ec) return IoError(path + ": cannot list directory: " + ec.message());
  std::sort(contents.traces.begin(), contents.traces.end());
  std::sort(contents.metric_logs.begin(), contents.metric_logs.end());
  std::sort(contents.nsys_exports.begin(), contents.nsys_exports.end());
  if (contents.traces.empty() && contents.nsys_exports.empty() && contents.metric_logs.empty() &&
      contents.scrapes.empty())
    return NothingToRead(path, contents);
  return contents;
}

/// How `files` inputs are read: several at once, one per core (or --threads),
/// each then on one thread, the file being the unit of parallel work; one file,
/// or --threads -1, as the options say.
struct FilesAtOnce {
  FilesAtOnce(size_t files, const ImportOptions& options) : per_file(options) {
    if (files > 1 && options.threads >= 0) {
      threads = options.threads > 0 ? options.threads : CoreCount();
      if (options.threads == 0) per_file.threads = -1;
    }
    if (files <= 1) return;
    // The memory budget is the run's. Traces left whole are all held until the run
    // is diagnosed, so each file gets its share (the rest of its events in scratch
    // files); traces summarised as they are read (on_trace_read) are held only
    // while they are read and analysed, so each file read at once gets its share.
    const size_t sharing = options.on_trace_read ? std::min(files, static_cast<size_t>(threads)) : files;
    per_file.memory_budget_bytes = std::max(options.memory_budget_bytes / sharing, kMinTraceMemoryBudget);
    summarise = static_cast<bool>(options.on_trace_read);
    analysis_threads = std::max(1, CoreCount() / threads);
  }
  /// Hands each trace of `read` that is not summarised yet to on_trace_read.
  void Summarise(StatusOr<std::vector<Recording>>& read) const {
    if (!summarise || !read.ok()) return;
    for (auto& rec : *read)
      if (IsTraceFormat(rec.format) && !rec.analysis) per_file.on_trace_read(rec, analysis_threads);
  }
  int threads = 1;
  int analysis_threads = 1;
  bool summarise = false;  // several files: each trace handed to on_trace_read as it is read
  ImportOptions per_file;
};

StatusOr<std::vector<Recording>> ImportDirectory(const std::string& path, const ImportOptions& options) {
  ASSIGN_OR_RETURN(DirectoryContents contents, ClassifyDirectory(path, options));
  std::vector<Recording> out;
  // The ranks' traces at once, one per core, each read by one thread (the file
  // is the unit of parallel work here); the first error in file order wins.
  std::vector<StatusOr<std::vector<Recording>>> traces;
  for (size_t i = 0; i < contents.traces.size(); ++i) traces.emplace_back(InternalError("not read"));
  const FilesAtOnce at_once(contents.traces.size(), options);
  ParallelFor(contents.traces.size(), at_once.threads, [&](size_t i) {
    auto source = OpenFileSource(contents.traces[i]);
    traces[i] = source.ok() ? ReadSource(std::move(*source), "kineto", at_once.per_file) : source.status();
    at_once.Summarise(traces[i]);
  });
  for (auto& recs : traces) {
    if (!recs.ok()) return recs.status();
    for (auto& rec : *recs) out.push_back(std::move(rec));
  }
  // The exports are read one after another and all held until the run is
  // diagnosed: each gets its share of the budget.
  ImportOptions per_export = options;
  if (contents.nsys_exports.size() > 1)
    per_export.memory_budget_bytes =
        std::max(options.memory_budget_bytes / contents.nsys_exports.size(), kMinTraceMemoryBudget);
  for (const auto& file : contents.nsys_exports) {
    auto recs = ReadNsys(file, "nsys", per_export);
    if (!recs.ok() && recs.status().code() == StatusCode::kUnimplemented) {  // another program's SQLite file
      contents.Skip(file);
      continue;
    }
    if (!recs.ok()) return recs.status();
    for (auto& rec : *recs) out.push_back(std::move(rec));
  }
  if (out.empty() && contents.metric_logs.empty() && contents.scrapes.empty()) return NothingToRead(path, contents);
  for (const auto& [log, format] : contents.metric_logs) {
    ASSIGN_OR_RETURN(auto source, OpenFileSource(log));
    ASSIGN_OR_RETURN(auto recs, ReadSource(std::move(source), format, options));
    for (auto& rec : recs) out.push_back(std::move(rec));
  }
  if (!contents.scrapes.empty()) {
    ASSIGN_OR_RETURN(Recording rec, ImportScrapeFiles(path, std::move(contents.scrapes), options));
    out.push_back(std::move(rec));
  }
  if (contents.skipped > 0 && !out.empty())
    out.front().stats.AddIssue(
        IssueSeverity::kInfo, "directory_files_skipped",
        fmt::format("{}: {} file{} that {} neither a trace nor a GPU metric log, e.g. {}", path, contents.skipped,
                    contents.skipped == 1 ? "" : "s", contents.skipped == 1 ? "is" : "are", contents.first_skipped));
  return out;
}

/// A metric log most of whose lines could not be read was read in the wrong
/// format (or is not a metric log): its few readable samples must not become a
/// diagnosis.
Status CheckMostlyReadable(const Recording& rec) {
  if (IsTraceFormat(rec.format)) return Status::Ok();
  int64_t unreadable = 0;
  const ImportIssue* first = nullptr;
  for (const auto& issue : rec.stats.issues)
    if (issue.kind == "bad_sample" || issue.kind == "bad_row" || issue.kind == "bad_value" ||
        issue.kind == "bad_timestamp" || issue.kind == "row_before_header" || issue.kind == "binary_line") {
      unreadable += issue.count;
      if (first == nullptr) first = &issue;
    }
  if (unreadable == 0 || unreadable < rec.metrics.samples) return Status::Ok();
  return DataLossError(fmt::format(
      "{}: {} of its entries could not be read as {} ({} values were); it is not that format, or it is damaged "
      "(first problem: {}); name the format with --format if detection chose wrongly",
      rec.source_path, unreadable, rec.format, rec.metrics.samples, first->message));
}

/// A file that yields nothing to judge is an error, never a report whose "no rule
/// crossed its threshold" reads as a clean bill (a CI gate on --fail-on would pass).
Status CheckHoldsData(const Recording& rec) {
  if (rec.format == "allocator-snapshot") {
    if (!rec.allocator_states.empty()) return Status::Ok();
    return DataLossError(rec.source_path + ": an allocator snapshot with no segments and no history: nothing to judge");
  }
  if (rec.format == "nsys") return Status::Ok();  // the reader refuses an export with no GPU work or CUDA calls
  if (rec.format == "kineto") {
    if (rec.stats.events_seen > 0) return Status::Ok();
    return DataLossError(fmt::format("{}: a trace with no events (its traceEvents list is empty): nothing was "
                                     "recorded to judge; profile at least one step",
                                     rec.source_path));
  }
  // An exported run recorded without GPUs is its steps: data all the same.
  if (rec.metrics.samples > 0 || !rec.marked_steps.empty() || !rec.run_phases.empty()) return Status::Ok();
  const bool headed = rec.metrics.rows == 0;
  return DataLossError(fmt::format(
      "{}: {} with no readings ({}): nothing to judge; log at least a few samples (utilization.gpu among them)",
      rec.source_path, rec.format,
      headed ? "a header and no rows"
             : fmt::format("{} row{}, every value empty, N/A or unsupported", rec.metrics.rows,
                           rec.metrics.rows == 1 ? "" : "s")));
}

}  // namespace

StatusOr<std::vector<Recording>> ImportFile(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  const bool directory = path != kStdinPath && std::filesystem::is_directory(path, ec);
  ASSIGN_OR_RETURN(auto recordings, directory ? ImportDirectory(path, options) : ImportOneFile(path, options));
  for (auto& rec : recordings) {
    RETURN_IF_ERROR(CheckMostlyReadable(rec));  // a file read in the wrong format says so first
    RETURN_IF_ERROR(CheckHoldsData(rec));
    ReportRejectedValues(rec);
  }
  return recordings;
}

StatusOr<Run> ImportRun(const std::vector<std::string>& paths, const ImportOptions& options) {
  Run run;
  int traces = 0;
  // Several inputs at once (the ranks' traces named one by one), one per core.
  std::vector<StatusOr<std::vector<Recording>>> inputs;
  for (size_t i = 0; i < paths.size(); ++i) inputs.emplace_back(InternalError("not read"));
  const FilesAtOnce at_once(paths.size(), options);
  ParallelFor(paths.size(), at_once.threads, [&](size_t i) {
    inputs[i] = ImportFile(paths[i], at_once.per_file);
    at_once.Summarise(inputs[i]);
  });
  for (auto& input : inputs) {
    ASSIGN_OR_RETURN(auto recordings, std::move(input));
    for (auto& rec : recordings) {
      if (IsTraceFormat(rec.format)) {
        // Several traces are the ranks of one run; a trace without distributedInfo
        // takes its position among the traces.
        if (rec.rank < 0) rec.rank = -1 - traces;
        ++traces;
      }
      run.recordings.push_back(std::move(rec));
    }
  }
  if (traces > 1)
    for (auto& rec : run.recordings)
      if (IsTraceFormat(rec.format) && rec.rank < 0) rec.rank = -1 - rec.rank;
  for (auto& rec : run.recordings)
    if (IsTraceFormat(rec.format) && traces == 1 && rec.rank < 0) rec.rank = -1;
  return run;
}

}  // namespace gputriage
