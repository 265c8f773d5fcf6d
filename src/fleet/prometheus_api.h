// A client of Prometheus' HTTP API (/api/v1/query, /api/v1/query_range), as
// served by Prometheus, Thanos, Mimir, VictoriaMetrics and Cortex. Queries are
// POSTed as forms, so long label matchers fit; replies are parsed here (the
// only place the fleet reads JSON) into plain label maps and numbers.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

class HttpClient;
struct HttpAuth;

using LabelMap = std::map<std::string, std::string>;

/// One series of an instant query's vector.
struct PromSample {
  LabelMap labels;
  double value = 0;
};

/// One series of a range query's matrix.
struct PromSeries {
  LabelMap labels;
  std::vector<std::pair<TimeNs, double>> points;
};

class PrometheusApi {
 public:
  /// `url` is the server's base ("http://prom:9090", or with a path prefix
  /// such as "https://host/prometheus"); nothing is sent until the first query.
  /// `timeout_ms` bounds all its queries together, from now.
  static StatusOr<std::unique_ptr<PrometheusApi>> Open(const std::string& url, const HttpAuth& auth, int timeout_ms);
  ~PrometheusApi();

  /// An instant query at `at`. Errors carry the server's errorType and error
  /// (a PromQL parse error, a timeout, too many samples) and the query.
  StatusOr<std::vector<PromSample>> Query(const std::string& expr, TimeNs at);
  /// A range query over [start, end] every `step`.
  StatusOr<std::vector<PromSeries>> QueryRange(const std::string& expr, TimeNs start, TimeNs end, TimeNs step);

  /// Warnings the server attached to replies (e.g. a partial response from a
  /// federated store), each once.
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::string& url() const { return url_; }

 private:
  struct Reply;  // the parsed JSON of one reply (prometheus_api.cc)
  PrometheusApi() = default;
  Status Post(const std::string& endpoint, const std::string& form, const std::string& expr, Reply* out);

  std::string url_;
  std::string path_prefix_;
  std::unique_ptr<HttpClient> http_;
  std::vector<std::string> warnings_;
};

/// "x" as a PromQL string literal's contents would be matched exactly by =~
/// (regex metacharacters escaped), for building `label=~"a|b"` matchers.
std::string PromRegexEscape(const std::string& value);
/// A PromQL double-quoted string literal's contents (\ and " escaped).
std::string PromQuote(const std::string& value);

}  // namespace gputriage
