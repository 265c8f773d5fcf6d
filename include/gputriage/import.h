// Reading sources into the canonical model.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

/// Imports one PyTorch profiler (Kineto) chrome-trace file, `.json` or `.json.gz`
/// (compression is detected from the content). Streams: memory is bounded by one
/// read buffer and the compact records kept, not by the file size.
///
/// A file that ends early (crashed job) imports what is complete and sets
/// `stats.truncated` with a note on what was lost. Per-event problems are counted
/// in `stats.issues` and skipped. Errors: missing/unreadable file (kNotFound,
/// kIoError), not a trace (kUnimplemented), broken structure before any event
/// (kDataLoss); each names the file and byte position.
StatusOr<Recording> ImportKinetoTrace(const std::string& path);

/// The same from bytes in memory (tests, fuzzing); `name` is used in messages.
StatusOr<Recording> ImportKinetoTraceFromMemory(const std::string& name, std::string_view bytes);

/// How to read inputs whose content does not say everything.
/// A trace's events held in memory while it is read, by default: a 0.4 GB trace's
/// fit, a larger one is sorted through scratch files and analysed from them, so
/// memory stays about the same whatever the trace's size (issue 25).
inline constexpr size_t kDefaultTraceMemoryBudget = size_t{64} << 20;
/// The least a trace of a run of many gets of the run's budget.
inline constexpr size_t kMinTraceMemoryBudget = size_t{1} << 20;

struct ImportOptions {
  /// "auto" (detect from the content) or one of kInputFormats.
  std::string format = "auto";
  /// Column list for a headerless nvidia-smi CSV: the --query-gpu fields in order.
  std::vector<std::string> smi_columns;
  /// Sampling interval of sources that write no timestamps; 0 = the source's
  /// default: 1 s for nvidia-smi dmon (-d) and dcgmi dmon (-d 1000), and 15 s
  /// between untimed dcgm-exporter scrapes (the Helm chart's scrape interval).
  TimeNs sample_interval_ns = 0;
  /// GPUs in an nvidia-smi CSV that names none (no index, uuid or pci.bus_id
  /// column): its rows cycle through this many. 0 = inferred from the rows
  /// (src/sources/metrics/interleaved_gpus.h).
  int gpus = 0;
  /// Threads reading a trace's events; 0 = one per core, 1 or more = that many
  /// workers beside the reading thread, -1 = the reading thread alone. Only the
  /// time changes, never the result.
  int threads = 0;
  /// Bytes of a trace's events held in memory while it is read; the rest is
  /// sorted through a scratch file in $TMPDIR. Only memory and time change.
  size_t memory_budget_bytes = kDefaultTraceMemoryBudget;
  /// Where several files are read at once (a directory of ranks, several inputs),
  /// called on the reading thread for each trace as soon as it is read, with the
  /// threads it may use, e.g. AnalyzeAndDropEvents (gputriage/diagnosis.h): the
  /// run then holds what it leaves of each trace, not every trace's events, so
  /// each file read at once gets an equal share of the memory budget (not each
  /// file of the run) and nothing goes through scratch files that fits.
  std::function<void(Recording&, int threads)> on_trace_read = nullptr;
  /// An Nsight Systems export's NVTX ranges whose names match this regex are its
  /// steps (empty: ProfilerStep#N, "iteration N", "step N", "train_step N").
  std::string step_range_regex;
};

/// Formats `--format` accepts.
inline constexpr const char* kInputFormats[] = {"kineto", "nsys", "allocator-snapshot", "nvidia-smi-csv", "nvidia-smi-q", "nvidia-smi-table",
                                                "nvidia-smi-dmon", "dcgmi-dmon", "dcgm-exporter", "capture-bundle"};

/// Imports one input: a Kineto trace, a GPU metric log (nvidia-smi CSV, -q text,
/// dmon, dcgmi dmon, dcgm-exporter scrapes, an nvidia-smi capture bundle), "-"
/// for standard input, or a directory. The format is detected from the content
/// unless `options.format` names it; the input is read once, so pipes and FIFOs
/// work. A directory is read for what it holds, down its subdirectories on the
/// same file system: each trace (the ranks of one run), each metric log, and its
/// dcgm-exporter scrape files as one series; other files are skipped and counted.
/// A capture bundle with idle/load phases gives one recording per phase. A metric
/// log with more unreadable entries than values is refused (kDataLoss), never
/// diagnosed from its few readable samples.
StatusOr<std::vector<Recording>> ImportFile(const std::string& path, const ImportOptions& options = {});

/// A metric log from bytes in memory (tests, fuzzing); `format` as in ImportOptions.
StatusOr<std::vector<Recording>> ImportMetricLogFromMemory(const std::string& name, std::string_view bytes,
                                                           const ImportOptions& options = {});

/// Imports several inputs as the recordings of one run: traces of several ranks,
/// and metric logs of the same job, diagnosed together.
StatusOr<Run> ImportRun(const std::vector<std::string>& paths, const ImportOptions& options = {});

}  // namespace gputriage
