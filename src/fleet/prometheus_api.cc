#include "src/fleet/prometheus_api.h"

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
// What one reply may hold besides its size (the API's own replies nest 6 deep,
// a label is a few hundred bytes, a series has tens of labels): past these it
// is not a Prometheus answering, and reading on would cost memory (250 MiB of
// '[' cost 3 GiB as a stack of open arrays).
constexpr size_t kMaxDepth = 32;
constexpr size_t kMaxStringBytes = 64 * 1024;
constexpr size_t kMaxLabels = 512;
// Distinct warnings kept (each cut to kMaxWarningChars); more are counted.
constexpr size_t kMaxWarnings = 20;
constexpr size_t kMaxWarningChars = 500;

/// Seconds since the epoch, as the API takes them.
std::string ApiTime(TimeNs t) { return fmt::format("{}.{:03d}", t / kNsPerS, static_cast<int>((t % kNsPerS) / 1'000'000)); }

}  // namespace

namespace {

/// Reads one API reply as it is parsed (nlohmann's SAX interface), never as a
/// whole document: a fleet's instant query answers one series per GPU, and a
/// document of 200,000 of them costs gigabytes as a tree. Each series of the
/// result goes to the caller as soon as its closing brace is read.
class ReplyReader final : public nlohmann::json_sax<json> {
 public:
  explicit ReplyReader(const PrometheusApi::SeriesFn& on_series) : on_series_(on_series) {}

  // What the reply said.
  std::string status, error_type, error, result_type;
  std::vector<std::string> warnings;
  bool saw_result = false;
  std::string problem;  // why it is not the API's JSON, when parsing stopped

  bool null() override { return Value(nullptr, NAN); }
  bool boolean(bool) override { return Value(nullptr, NAN); }
  bool number_integer(number_integer_t v) override { return Value(nullptr, static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Value(nullptr, static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Value(nullptr, v); }
  bool binary(binary_t&) override { return Value(nullptr, NAN); }
  bool string(string_t& v) override {
    if (v.size() > kMaxStringBytes) return Fail(fmt::format("a string of {} bytes (over 64 KiB)", v.size()));
    return Value(&v, NAN);
  }
  bool key(string_t& k) override {
    if (k.size() > kMaxStringBytes) return Fail(fmt::format("a key of {} bytes (over 64 KiB)", k.size()));
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override { return Open(true); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    if (problem.empty()) problem = fmt::format("not JSON (at byte {})", position);
    return false;
  }

 private:
  /// What a container is, from where it sits.
  enum class Role { kRoot, kData, kWarnings, kResult, kSeries, kMetric, kPoint, kPoints, kOther };
  struct Level {
    Role role;
    bool object;
  };

  Role Inner() const { return path_.empty() ? Role::kOther : path_.back().role; }

  bool Open(bool object) {
    if (path_.size() >= kMaxDepth) return Fail(fmt::format("nesting deeper than {} levels", kMaxDepth));
    Role role = Role::kOther;
    if (path_.empty()) role = object ? Role::kRoot : Role::kOther;
    else switch (Inner()) {
      case Role::kRoot:
        if (key_ == "data" && object) role = Role::kData;
        else if (key_ == "warnings" && !object) role = Role::kWarnings;
        break;
      case Role::kData:
        if (key_ == "result" && !object) role = Role::kResult, saw_result = true;
        break;
      case Role::kResult:
        if (object) role = Role::kSeries, labels_.clear(), points_.clear(), have_labels_ = false;
        else return Fail("a result that is neither series nor a point");
        break;
      case Role::kSeries:
        if (key_ == "metric" && object) role = Role::kMetric, have_labels_ = true;
        else if (key_ == "value" && !object) role = Role::kPoint, point_ = {};
        else if (key_ == "values" && !object) role = Role::kPoints;
        break;
      case Role::kPoints:
        if (object) return Fail("a point that is not [time, \"value\"]");
        role = Role::kPoint, point_ = {};
        break;
      case Role::kMetric:
      case Role::kPoint:
        return Fail("a label or point that is not a plain value");
      default: break;
    }
    path_.push_back({role, object});
    return true;
  }

  bool Close() {
    const Role role = Inner();
    path_.pop_back();
    if (role == Role::kPoint && !TakePoint()) return false;
    if (role == Role::kSeries) {
      if (!have_labels_) return Fail("a series without its labels");
      on_series_(labels_, points_);
    }
    if (role == Role::kResult && result_type == "scalar" && point_.values > 0) {  // [t, "v"] itself
      if (!TakePoint()) return false;
      on_series_(LabelMap{}, points_);
    }
    return true;
  }

  bool TakePoint() {
    if (point_.values != 2 || !point_.ok) return Fail("a malformed point");
    points_.emplace_back(point_.t, point_.v);
    point_ = {};
    return true;
  }

  /// A value: a point's time (a number) or value (a string, as the API writes
  /// NaN and infinities: "NaN", "+Inf"), a label, or a member of the reply.
  bool Value(string_t* text, double number) {
    switch (Inner()) {
      case Role::kRoot:
        if (text != nullptr) {
          if (key_ == "status") status = *text;
          else if (key_ == "errorType") error_type = *text;
          else if (key_ == "error") error = *text;
        }
        return true;
      case Role::kData:
        if (key_ == "resultType") {
          if (text == nullptr) return Fail("resultType is not a string");
          result_type = *text;
        }
        return true;
      case Role::kWarnings:
        if (text != nullptr) AddWarning(std::move(*text));
        return true;
      case Role::kMetric:
        if (text == nullptr) return Fail("a label value that is not a string");
        if (labels_.size() >= kMaxLabels) return Fail(fmt::format("a series with more than {} labels", kMaxLabels));
        labels_[key_] = std::move(*text);
        return true;
      case Role::kResult:  // a scalar result: [t, "v"]
        points_.clear();
        [[fallthrough]];
      case Role::kPoint:
        if (point_.values == 0) {
          point_.ok = text == nullptr && std::isfinite(number);
          point_.t = static_cast<TimeNs>(std::llround(number * 1e9));
        } else if (point_.values == 1 && text != nullptr) {
          char* end = nullptr;
          point_.v = std::strtod(text->c_str(), &end);
          point_.ok = point_.ok && end != text->c_str() && *end == '\0';
        } else {
          point_.ok = false;
        }
        ++point_.values;
        return true;
      case Role::kPoints:
        return Fail("a point that is not [time, \"value\"]");
      default: return true;  // members the report does not read (stats, infos)
    }
  }

  bool Fail(std::string what) {
    if (problem.empty()) problem = std::move(what);
    return false;
  }

  /// Kept when new and there is room (a linear search of at most kMaxWarnings).
  void AddWarning(std::string text) {
    if (text.size() > kMaxWarningChars) text = text.substr(0, kMaxWarningChars) + "...";
    if (std::find(warnings.begin(), warnings.end(), text) != warnings.end()) return;
    if (warnings.size() < kMaxWarnings) warnings.push_back(std::move(text));
    else ++more_warnings;
  }

 public:
  size_t more_warnings = 0;  // distinct warnings past kMaxWarnings

 private:

  struct Point {
    int values = 0;
    bool ok = true;
    TimeNs t = 0;
    double v = 0;
  };
  const PrometheusApi::SeriesFn& on_series_;
  std::vector<Level> path_;
  std::string key_;
  LabelMap labels_;
  bool have_labels_ = false;
  std::vector<std::pair<TimeNs, double>> points_;
  Point point_;
};

}  // namespace

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

Status ParsePrometheusReply(std::string_view body, int http_status, const std::string& where, const std::string& expr,
                            const char* want, const PrometheusApi::SeriesFn& on_series, std::vector<std::string>* warnings) {
  ReplyReader reader(on_series);
  const bool parsed = json::sax_parse(body, &reader, json::input_format_t::json, /*strict=*/true);
  // The caller's list is bounded as one reply's is: a server that sends a
  // million distinct warnings costs a count, not a quadratic search.
  size_t dropped = reader.more_warnings;
  for (auto& w : reader.warnings) {
    if (std::find(warnings->begin(), warnings->end(), w) != warnings->end()) continue;
    if (warnings->size() < kMaxWarnings) warnings->push_back(std::move(w));
    else ++dropped;
  }
  static const std::string kMore = "Prometheus sent more distinct warnings than these; the rest are not shown";
  if (dropped > 0 && std::find(warnings->begin(), warnings->end(), kMore) == warnings->end()) warnings->push_back(kMore);
  if (reader.status.empty()) {
    if (http_status == 503)
      // A Prometheus starting up (replaying its WAL) answers 503 "Service Unavailable" in plain text.
      return IoError(fmt::format("{}: HTTP 503, the server is not ready ({}): a Prometheus answers once it has "
                                 "started (replaying its write-ahead log can take minutes); try again",
                                 where, Printable(TrimAsciiSpace(body.substr(0, 200)))));
    return DataLossError(fmt::format("{}: HTTP {} with a reply that is not the Prometheus API's JSON ({}is this a "
                                     "Prometheus server?): {}",
                                     where, http_status, reader.problem.empty() ? "" : reader.problem + "; ",
                                     Printable(body.substr(0, 120))));
  }
  if (reader.status != "success") {
    return InvalidArgumentError(fmt::format("{}: HTTP {}, {}: {} (query: {})", where, http_status,
                                            reader.error_type.empty() ? "error" : reader.error_type,
                                            reader.error.empty() ? "no reason given" : Printable(reader.error), expr));
  }
  if (!parsed) return DataLossError(fmt::format("{}: {} in the result of {}", where, reader.problem, expr));
  const bool scalar_as_vector = std::string_view(want) == "vector" && reader.result_type == "scalar";
  if (!reader.saw_result || (reader.result_type != want && !scalar_as_vector))
    return DataLossError(fmt::format("{}: expected a {} result for {}", where, want, expr));
  return Status::Ok();
}

Status PrometheusApi::Read(const std::string& endpoint, const std::string& form, const std::string& expr,
                           const char* want, const SeriesFn& on_series) {
  const std::string path = path_prefix_ + endpoint;
  auto reply = http_->Request("POST", path, form, "application/x-www-form-urlencoded", kMaxReplyBytes);
  const std::string where = "Prometheus " + url_;
  if (!reply.ok()) return Status(reply.status().code(), where + ": " + reply.status().message());
  return ParsePrometheusReply(reply->body, reply->status, where + path, expr, want, on_series, &warnings_);
}

Status PrometheusApi::QueryEach(const std::string& expr, TimeNs at, const SampleFn& on_sample) {
  bool malformed = false;  // a vector's series has exactly one point
  RETURN_IF_ERROR(Read("/api/v1/query", "query=" + UrlEncode(expr) + "&time=" + ApiTime(at), expr, "vector",
                       [&](const LabelMap& labels, const std::vector<std::pair<TimeNs, double>>& points) {
                         if (points.size() != 1) malformed = true;
                         else on_sample(labels, points.front().second);
                       }));
  if (malformed) return DataLossError("Prometheus " + url_ + ": malformed sample in the result of " + expr);
  return Status::Ok();
}

StatusOr<std::vector<PromSample>> PrometheusApi::Query(const std::string& expr, TimeNs at) {
  std::vector<PromSample> out;
  RETURN_IF_ERROR(QueryEach(expr, at, [&](const LabelMap& labels, double value) { out.push_back({labels, value}); }));
  return out;
}

StatusOr<std::vector<PromSeries>> PrometheusApi::QueryRange(const std::string& expr, TimeNs start, TimeNs end,
                                                            TimeNs step) {
  const std::string form = "query=" + UrlEncode(expr) + "&start=" + ApiTime(start) + "&end=" + ApiTime(end) +
                           "&step=" + ApiTime(step);
  std::vector<PromSeries> out;
  RETURN_IF_ERROR(Read("/api/v1/query_range", form, expr, "matrix",
                       [&](const LabelMap& labels, const std::vector<std::pair<TimeNs, double>>& points) {
                         out.push_back({labels, points});
                       }));
  return out;
}

}  // namespace gputriage
