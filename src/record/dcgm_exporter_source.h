// `gputriage record --dcgm-exporter URL`: samples a running dcgm-exporter
// instead of NVML (a node where DCGM already owns the profiling counters, or
// a Kubernetes pod without access to the driver). Each scrape goes through the
// same reader as a saved scrape file, stamped with the host's wall clock.
#pragma once

#include <memory>
#include <string>

#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

class HttpClient;
class MetricLineReader;
struct MetricReaderContext;

class DcgmExporterSource {
 public:
  /// Scrapes `url` once: an endpoint that cannot be reached, or that does not
  /// serve dcgm-exporter text, is an error before the job starts.
  static StatusOr<std::unique_ptr<DcgmExporterSource>> Open(const std::string& url, TimeNs t, Recording& recording);
  ~DcgmExporterSource();

  /// One scrape at `t`. A scrape identical to the previous one is skipped:
  /// dcgm-exporter refreshes its values only every collect interval (-c,
  /// 30 s by default), and repeats would count as samples. Failures are import
  /// issues (`scrape_failed`); recording goes on.
  void Sample(TimeNs t, Recording& recording);
  Status Finish();

  int64_t scrapes() const { return scrapes_; }
  /// Why the last scrape failed; "" when it succeeded.
  const std::string& last_error() const { return last_error_; }
  int64_t unchanged() const { return unchanged_; }

 private:
  DcgmExporterSource();
  void Feed(const std::string& body, TimeNs t);

  std::string url_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<MetricReaderContext> context_;
  std::unique_ptr<MetricLineReader> reader_;
  std::string previous_;
  std::string last_error_;
  int64_t scrapes_ = 0;
  int64_t unchanged_ = 0;
};

}  // namespace gputriage
