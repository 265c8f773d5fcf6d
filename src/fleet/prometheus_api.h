// A client of Prometheus' HTTP API (/api/v1/query, /api/v1/query_range), as
// served by Prometheus, Thanos, Mimir, VictoriaMetrics and Cortex. Queries are
// POSTed as forms, so long label matchers fit; replies are parsed here (the
// only place the fleet reads JSON), as streams, into plain label maps and numbers.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
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
  /// The same, each series handed to `on_sample` as its reply is parsed (the
  /// labels are valid during the call): a whole fleet's result is never held.
  using SampleFn = std::function<void(const LabelMap& labels, double value)>;
  Status QueryEach(const std::string& expr, TimeNs at, const SampleFn& on_sample);
  /// One series of any result as the reply is read (a scalar: no labels, one point).
  using SeriesFn = std::function<void(const LabelMap& labels, const std::vector<std::pair<TimeNs, double>>& points)>;
  /// A range query over [start, end] every `step`.
  StatusOr<std::vector<PromSeries>> QueryRange(const std::string& expr, TimeNs start, TimeNs end, TimeNs step);

  /// Warnings the server attached to replies (e.g. a partial response from a
  /// federated store), each once.
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::string& url() const { return url_; }

 private:
  PrometheusApi() = default;
  /// POSTs `form` and reads the reply as a stream; `want` is the result type.
  Status Read(const std::string& endpoint, const std::string& form, const std::string& expr, const char* want,
              const SeriesFn& on_series);

  std::string url_;
  std::string path_prefix_;
  std::unique_ptr<HttpClient> http_;
  std::vector<std::string> warnings_;
};

/// Reads one API reply (`body`, answered with `http_status`) as a stream: each
/// series of the result to `on_series`, its warnings added to `warnings`.
/// `want` is the result type asked for ("vector" also takes a scalar). Errors
/// name `where` (the server and path) and, for the server's own, `expr`.
Status ParsePrometheusReply(std::string_view body, int http_status, const std::string& where, const std::string& expr,
                            const char* want, const PrometheusApi::SeriesFn& on_series,
                            std::vector<std::string>* warnings);

/// "x" as a PromQL string literal's contents would be matched exactly by =~
/// (regex metacharacters escaped), for building `label=~"a|b"` matchers.
std::string PromRegexEscape(const std::string& value);
/// A PromQL double-quoted string literal's contents (\ and " escaped).
std::string PromQuote(const std::string& value);

}  // namespace gputriage
