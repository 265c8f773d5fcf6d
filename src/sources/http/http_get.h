// HTTP GET for scraping metric endpoints (dcgm-exporter /metrics). The only
// user of cpp-httplib (http_get.cc).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "gputriage/status.h"

namespace gputriage {

struct HttpTarget {
  std::string scheme;  // "http" or "https"
  std::string host;    // with ":port" when given
  std::string path;    // "/metrics" when the URL has none
};

/// Splits "http://host:9400/metrics"; a URL without a scheme is taken as http.
/// Errors name what is wrong with the URL.
StatusOr<HttpTarget> ParseHttpUrl(const std::string& url);

/// GETs one URL again and again over one kept-alive connection (a recorder
/// scrapes the same endpoint every second).
class HttpClient {
 public:
  HttpClient(HttpTarget target, int timeout_ms);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// The body of a 200 response, at most `max_bytes` long. Errors say what
  /// failed: connection refused, timeout, a reply over the limit, or the HTTP
  /// status with the start of the body.
  StatusOr<std::string> Get(size_t max_bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputriage
