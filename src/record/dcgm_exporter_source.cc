#include "src/record/dcgm_exporter_source.h"

#include <string_view>

#include "src/sources/http/http_get.h"
#include "src/sources/metrics/metric_readers.h"
#include "src/util/byte_source.h"
#include "src/util/line_reader.h"

namespace gputriage {
namespace {
constexpr int kTimeoutMs = 5000;  // a scrape slower than this is a failed sample, not a stalled recorder
// A dcgm-exporter page is ~10 KB per GPU; a reply this large is something else.
constexpr size_t kMaxReplyBytes = size_t{64} << 20;
}  // namespace

DcgmExporterSource::DcgmExporterSource() = default;
DcgmExporterSource::~DcgmExporterSource() = default;

StatusOr<std::unique_ptr<DcgmExporterSource>> DcgmExporterSource::Open(const std::string& url, TimeNs t,
                                                                       Recording& recording) {
  ASSIGN_OR_RETURN(HttpTarget http, ParseHttpUrl(url));
  std::unique_ptr<DcgmExporterSource> source(new DcgmExporterSource());
  source->url_ = url;
  source->http_ = std::make_unique<HttpClient>(std::move(http), kTimeoutMs);
  auto body = source->http_->Get(kMaxReplyBytes);
  if (!body.ok()) return IoError("cannot scrape dcgm-exporter: " + body.status().message());
  source->context_ = std::make_unique<MetricReaderContext>();
  source->context_->recording = &recording;
  source->context_->file = url;
  source->reader_ = MakeDcgmExporterReader(source->context_.get());
  recording.source_path = url;
  recording.metrics.clock_note = "recorder's wall clock at each scrape";
  source->Feed(*body, t);
  if (recording.metrics.devices.empty())
    return DataLossError(url + " does not serve dcgm-exporter metrics (no DCGM_FI_* series with a gpu label in its reply)");
  source->previous_ = std::move(*body);
  return source;
}

void DcgmExporterSource::Feed(const std::string& body, TimeNs t) {
  StartDcgmExporterScrape(reader_.get(), t);
  context_->file = url_ + " (scrape " + std::to_string(scrapes_ + 1) + ")";  // messages name the scrape and its line
  LineReader lines(MemorySource(context_->file, body.data(), body.size()));
  std::string_view line;
  while (lines.Next(line)) reader_->Line(line, lines.line_number());
  if (!lines.status().ok())
    context_->Issue(IssueSeverity::kWarning, "scrape_unreadable", [&] { return lines.status().message(); });
  ++scrapes_;
}

void DcgmExporterSource::Sample(TimeNs t, Recording& recording) {
  context_->recording = &recording;
  auto body = http_->Get(kMaxReplyBytes);
  if (!body.ok()) {
    last_error_ = body.status().message();
    context_->Issue(IssueSeverity::kWarning, "scrape_failed", [&] { return body.status().message(); });
    return;
  }
  last_error_.clear();
  if (*body == previous_) {
    ++unchanged_;
    return;
  }
  Feed(*body, t);
  previous_ = std::move(*body);
}

Status DcgmExporterSource::Finish() { return reader_->Finish(); }

}  // namespace gputriage
