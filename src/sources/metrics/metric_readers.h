// Line-fed readers for the GPU metric logs. Each reader is fed one line at a time
// (so the capture-bundle reader can hand sections of one file to different
// readers) and writes into a Recording's MetricSet and import issues.
//
// Per-line problems are counted as import issues (kind + first occurrence with
// file:line) and the line is skipped; only a problem that makes the whole input
// unreadable (e.g. a headerless CSV with no column list) is a returned error.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/import.h"
#include "gputriage/model.h"
#include "gputriage/status.h"
#include "src/util/byte_source.h"
#include "src/util/line_reader.h"

namespace gputriage {

class MetricLineReader {
 public:
  virtual ~MetricLineReader() = default;
  /// One line without its newline; `line_no` is 1-based in the file.
  virtual void Line(std::string_view line, int64_t line_no) = 0;
  /// End of input (or of the section). Returns a fatal error, if any.
  virtual Status Finish() = 0;
};

struct MetricReaderContext {
  Recording* recording = nullptr;
  std::string file;          // for messages
  ImportOptions options;
  /// For sources without a clock: the time of their first row (a capture
  /// bundle anchors dmon rows to the phase's first timestamp). 0 = none.
  TimeNs anchor_ns = 0;

  /// Counts an issue; formats the message only for the first occurrence.
  template <typename MakeMessage>
  void Issue(IssueSeverity severity, std::string_view kind, MakeMessage&& make) {
    auto& stats = recording->stats;
    for (auto& i : stats.issues)
      if (i.kind == kind) {
        ++i.count;
        return;
      }
    stats.issues.push_back(ImportIssue{severity, std::string(kind), make(), 1});
  }
  std::string Where(int64_t line_no) const { return file + ":" + std::to_string(line_no); }

  /// Latest time a metric sample may carry: int64 nanoseconds of year 2200 and
  /// every sum of two sample times stay representable.
  static constexpr TimeNs kMaxSampleTime = TimeNs{1} << 62;

  /// from + n × step, saturating at kMaxSampleTime (counted as a `time_overflow`
  /// issue) instead of overflowing: sources without a clock space rows this way.
  TimeNs Advance(TimeNs from, int64_t n, TimeNs step, int64_t line_no) {
    TimeNs offset = 0, t = 0;
    if (__builtin_mul_overflow(n, step, &offset) || __builtin_add_overflow(from, offset, &t) || t > kMaxSampleTime) {
      Issue(IssueSeverity::kWarning, "time_overflow", [&] {
        return Where(line_no) + ": sample times beyond the year 2200 (too many rows for the sampling interval); "
                                "later rows share the last time";
      });
      return kMaxSampleTime;
    }
    return t;
  }
  /// The time of the n-th interval of a source without a clock.
  TimeNs SyntheticTime(int64_t n, TimeNs interval, int64_t line_no) { return Advance(anchor_ns, n, interval, line_no); }

  /// Counts an unreadable timestamp (the row is skipped).
  void BadTimestamp(int64_t line_no, std::string_view text) {
    Issue(IssueSeverity::kWarning, "bad_timestamp",
          [&] { return Where(line_no) + ": unreadable timestamp '" + std::string(text) + "'; row skipped"; });
  }

  /// Finds or adds a GPU in the recording; past MetricSet::kMaxDevices it counts
  /// a `too_many_devices` error and returns nothing.
  std::optional<size_t> Device(int index, std::string_view uuid, std::string_view pci_bus_id, int mig_instance,
                               int64_t line_no);
};

/// The reader of one format ("nvidia-smi-csv", ...), or nullptr for an unknown one.
std::unique_ptr<MetricLineReader> MakeMetricLineReader(const std::string& format, MetricReaderContext* ctx);
/// nvidia-smi's text formats appended to one file by several commands (a table,
/// then --query-gpu rows, ...): from `first_format`, each part by its own reader.
std::unique_ptr<MetricLineReader> MakeAppendedLogReader(MetricReaderContext* ctx, const std::string& first_format);
bool AppendableFormat(const std::string& format);

/// nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]
std::unique_ptr<MetricLineReader> MakeSmiCsvReader(MetricReaderContext* ctx);
/// nvidia-smi -q (full text of one or more devices)
std::unique_ptr<MetricLineReader> MakeSmiQueryReader(MetricReaderContext* ctx);
/// nvidia-smi's default table (one snapshot of every GPU a table, `watch nvidia-smi` logs)
std::unique_ptr<MetricLineReader> MakeSmiTableReader(MetricReaderContext* ctx);
/// nvidia-smi dmon (text or csv, any -s selection, -o DT/T, --gpm-metrics)
std::unique_ptr<MetricLineReader> MakeSmiDmonReader(MetricReaderContext* ctx);
/// dcgmi dmon -e ...
std::unique_ptr<MetricLineReader> MakeDcgmiDmonReader(MetricReaderContext* ctx);
/// dcgm-exporter /metrics (Prometheus text), one or more scrapes
std::unique_ptr<MetricLineReader> MakeDcgmExporterReader(MetricReaderContext* ctx);
/// For a reader from MakeDcgmExporterReader: the lines that follow are one new
/// scrape taken at `t` (a scrape file's mtime, a live scrape's wall time).
void StartDcgmExporterScrape(MetricLineReader* reader, TimeNs t);

/// Which metric-log format a text starts with ("" when none); `head` is the
/// first bytes of the (decompressed) file. `strict` for a file met in a
/// directory: rows of bare numbers without a header are not taken for a log there.
std::string SniffMetricFormat(std::string_view head, bool strict = false);

/// Hands each line of `lines` to `reader`, skipping (and counting as binary_line
/// issues) lines with NUL bytes.
void FeedLines(LineReader& lines, MetricLineReader& reader, MetricReaderContext& ctx);
/// Says in `rec` when the input's last line had no newline (a file cut while written).
void NoteUnterminatedLastLine(const LineReader& lines, const std::string& path, Recording& rec);

/// Reads a metric log (already sniffed or forced as `format`) into one
/// recording, or several for a capture bundle with phases.
StatusOr<std::vector<Recording>> ReadMetricLines(std::unique_ptr<ByteSource> source, const std::string& format,
                                                 const ImportOptions& options);
/// dcgm-exporter scrapes saved one per file (`files`, in directory `path`): one
/// recording whose series run over the scrapes in file-name order.
StatusOr<Recording> ImportScrapeFiles(const std::string& path, std::vector<std::string> files,
                                      const ImportOptions& options);

}  // namespace gputriage
