// One entry point for every input: detects what a file is from its content and
// hands it to the trace reader or a metric-log reader.
#include <filesystem>

#include "gputriage/import.h"
#include "src/sources/metrics/metric_readers.h"
#include "src/util/byte_source.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

constexpr size_t kSniffBytes = 1 << 16;

StatusOr<std::string> SniffFile(const std::string& path) {
  ASSIGN_OR_RETURN(auto source, OpenFileSource(path));
  std::string head(kSniffBytes, '\0');
  size_t got = 0;
  while (got < head.size()) {
    auto n = source->Read(head.data() + got, head.size() - got);
    if (!n.ok()) {
      if (got > 0) break;  // a truncated gzip still shows what it is
      return n.status();
    }
    if (*n == 0) break;
    got += *n;
  }
  head.resize(got);
  const std::string_view view = TrimAsciiSpace(head);
  if (view.empty()) return DataLossError(path + ": empty file");
  if (view.front() == '{' || view.front() == '[') return std::string("kineto");
  std::string format = SniffMetricFormat(head);
  if (format.empty())
    return UnimplementedError(path +
                              ": not a recognised input: expected a PyTorch profiler trace (.json/.json.gz), an "
                              "nvidia-smi --query-gpu CSV, nvidia-smi -q text, nvidia-smi dmon or dcgmi dmon output, "
                              "or dcgm-exporter /metrics text (use --format to name it)");
  return format;
}

}  // namespace

namespace {

StatusOr<std::vector<Recording>> ImportAnyFile(const std::string& path, const ImportOptions& options);

}  // namespace

StatusOr<std::vector<Recording>> ImportFile(const std::string& path, const ImportOptions& options) {
  ASSIGN_OR_RETURN(auto recordings, ImportAnyFile(path, options));
  for (auto& rec : recordings) ReportRejectedValues(rec);
  return recordings;
}

namespace {

StatusOr<std::vector<Recording>> ImportAnyFile(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (options.format != "auto" && options.format != "dcgm-exporter")
      return InvalidArgumentError(path + ": a directory is read as dcgm-exporter scrapes, not as " + options.format);
    ASSIGN_OR_RETURN(Recording rec, ImportScrapeDirectory(path, options));
    std::vector<Recording> out;
    out.push_back(std::move(rec));
    return out;
  }
  std::string format = options.format;
  if (format.empty() || format == "auto") {
    ASSIGN_OR_RETURN(format, SniffFile(path));
  }
  if (format == "kineto") {
    ASSIGN_OR_RETURN(Recording rec, ImportKinetoTrace(path));
    std::vector<Recording> out;
    out.push_back(std::move(rec));
    return out;
  }
  return ImportMetricFile(path, format, options);
}

}  // namespace

StatusOr<Run> ImportRun(const std::vector<std::string>& paths, const ImportOptions& options) {
  Run run;
  int traces = 0;
  for (const auto& path : paths) {
    ASSIGN_OR_RETURN(auto recordings, ImportFile(path, options));
    for (auto& rec : recordings) {
      if (rec.format == "kineto") {
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
      if (rec.format == "kineto" && rec.rank < 0) rec.rank = -1 - rec.rank;
  for (auto& rec : run.recordings)
    if (rec.format == "kineto" && traces == 1 && rec.rank < 0) rec.rank = -1;
  return run;
}

}  // namespace gputriage
