#include "src/fleet/prometheus_api.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/sources/http/http_get.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

using json = nlohmann::json;

// One reply's limit: a range query over a whole fleet is split by the caller
// (fleet.cc queries nodes in batches), so a reply this large means the range
// or the step should change.
constexpr size_t kMaxReplyBytes = 256u << 20;

/// Seconds since the epoch, as the API takes them.
std::string ApiTime(TimeNs t) { return fmt::format("{}.{:03d}", t / kNsPerS, static_cast<int>((t % kNsPerS) / 1'000'000)); }

const json& Member(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  const auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

/// A sample value: ["1701388800.5", "42"]; the value is a string, as the API
/// writes NaN and infinities ("NaN", "+Inf").
bool ParsePoint(const json& pair, TimeNs* t, double* v) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) return false;
  *t = static_cast<TimeNs>(std::llround(pair[0].get<double>() * 1e9));
  const std::string& text = pair[1].get_ref<const std::string&>();
  char* end = nullptr;
  *v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0';
}

bool ParseLabels(const json& metric, LabelMap* out) {
  if (!metric.is_object()) return false;
  for (const auto& [k, v] : metric.items()) {
    if (!v.is_string()) return false;
    (*out)[k] = v.get<std::string>();
  }
  return true;
}

}  // namespace

struct PrometheusApi::Reply {
  json data;  // the reply's `data` member
};

std::string PromRegexEscape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (std::strchr(".+*?()|[]{}^$\\", c) != nullptr) out += "\\\\";  // a backslash in the regex, escaped in the literal
    else if (c == '"') out += '\\';
    out.push_back(c);
  }
  return out;
}

std::string PromQuote(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') { out += "\\n"; continue; }
    out.push_back(c);
  }
  return out;
}

StatusOr<std::unique_ptr<PrometheusApi>> PrometheusApi::Open(const std::string& url, const HttpAuth& auth,
                                                             int timeout_ms) {
  auto target = ParseHttpUrl(url, "");
  if (!target.ok()) return target.status();
  std::unique_ptr<PrometheusApi> api(new PrometheusApi());
  api->url_ = url;
  api->path_prefix_ = target->path;
  while (!api->path_prefix_.empty() && api->path_prefix_.back() == '/') api->path_prefix_.pop_back();
  if (api->path_prefix_.find_first_of("?#") != std::string::npos)
    return InvalidArgumentError(url + ": give the server's base URL, without a query (e.g. http://prometheus:9090)");
  api->http_ = std::make_unique<HttpClient>(*target, timeout_ms, auth);
  // The timeout bounds every query together: a Prometheus that trickles its
  // replies ends the report at --timeout, not at --timeout per query.
  api->http_->SetDeadline(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms));
  return api;
}

PrometheusApi::~PrometheusApi() = default;

Status PrometheusApi::Post(const std::string& endpoint, const std::string& form, const std::string& expr,
                           Reply* out) {
  const std::string path = path_prefix_ + endpoint;
  auto reply = http_->Request("POST", path, form, "application/x-www-form-urlencoded", kMaxReplyBytes);
  const std::string where = "Prometheus " + url_;
  if (!reply.ok()) return Status(reply.status().code(), where + ": " + reply.status().message());
  json body = json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
  if ((body.is_discarded() || !body.is_object()) && reply->status == 503)
    // A Prometheus starting up (replaying its WAL) answers 503 "Service Unavailable" in plain text.
    return IoError(fmt::format("{}{}: HTTP 503, the server is not ready ({}): a Prometheus answers once it has "
                               "started (replaying its write-ahead log can take minutes); try again",
                               where, path, Printable(TrimAsciiSpace(reply->body.substr(0, 200)))));
  if (body.is_discarded() || !body.is_object()) {
    return DataLossError(fmt::format("{}{}: HTTP {} with a reply that is not the Prometheus API's JSON (is this a "
                                     "Prometheus server?): {}",
                                     where, path, reply->status, Printable(reply->body.substr(0, 200))));
  }
  if (const json& w = Member(body, "warnings"); w.is_array())
    for (const auto& item : w)
      if (item.is_string() && std::find(warnings_.begin(), warnings_.end(), item.get<std::string>()) == warnings_.end())
        warnings_.push_back(item.get<std::string>());
  const json& status = Member(body, "status");
  if (!status.is_string() || status.get<std::string>() != "success") {
    const json& type = Member(body, "errorType");
    const json& error = Member(body, "error");
    return InvalidArgumentError(fmt::format("{}: HTTP {}, {}: {} (query: {})", where, reply->status,
                                            type.is_string() ? type.get<std::string>() : "error",
                                            error.is_string() ? Printable(error.get<std::string>()) : "no reason given",
                                            expr));
  }
  out->data = std::move(body["data"]);
  return Status::Ok();
}

StatusOr<std::vector<PromSample>> PrometheusApi::Query(const std::string& expr, TimeNs at) {
  Reply reply;
  if (Status s = Post("/api/v1/query", "query=" + UrlEncode(expr) + "&time=" + ApiTime(at), expr, &reply); !s.ok())
    return s;
  const json& d = reply.data;
  const json& type = Member(d, "resultType");
  const json& result = Member(d, "result");
  std::vector<PromSample> out;
  if (type == "scalar") {
    TimeNs t;
    PromSample s;
    if (!ParsePoint(result, &t, &s.value)) return DataLossError("Prometheus " + url_ + ": malformed scalar for " + expr);
    out.push_back(std::move(s));
    return out;
  }
  if (type != "vector" || !result.is_array())
    return DataLossError("Prometheus " + url_ + ": expected a vector result for " + expr);
  out.reserve(result.size());
  for (const auto& item : result) {
    PromSample s;
    TimeNs t;
    if (!ParseLabels(Member(item, "metric"), &s.labels) || !ParsePoint(Member(item, "value"), &t, &s.value))
      return DataLossError("Prometheus " + url_ + ": malformed sample in the result of " + expr);
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<std::vector<PromSeries>> PrometheusApi::QueryRange(const std::string& expr, TimeNs start, TimeNs end,
                                                            TimeNs step) {
  const std::string form = "query=" + UrlEncode(expr) + "&start=" + ApiTime(start) + "&end=" + ApiTime(end) +
                           "&step=" + ApiTime(step);
  Reply reply;
  if (Status s = Post("/api/v1/query_range", form, expr, &reply); !s.ok()) return s;
  const json& d = reply.data;
  const json& result = Member(d, "result");
  if (Member(d, "resultType") != "matrix" || !result.is_array())
    return DataLossError("Prometheus " + url_ + ": expected a matrix result for " + expr);
  std::vector<PromSeries> out;
  out.reserve(result.size());
  for (const auto& item : result) {
    PromSeries s;
    if (!ParseLabels(Member(item, "metric"), &s.labels))
      return DataLossError("Prometheus " + url_ + ": malformed series labels in the result of " + expr);
    const json& values = Member(item, "values");
    if (!values.is_array()) return DataLossError("Prometheus " + url_ + ": a series without values for " + expr);
    s.points.reserve(values.size());
    for (const auto& p : values) {
      TimeNs t;
      double v;
      if (!ParsePoint(p, &t, &v)) return DataLossError("Prometheus " + url_ + ": malformed point for " + expr);
      s.points.emplace_back(t, v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gputriage
