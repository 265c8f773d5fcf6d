// HTTP GET for scraping metric endpoints (dcgm-exporter /metrics). The only
// user of cpp-httplib (http_get.cc).
#pragma once

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

/// The body of a 200 response. Errors say what failed: connection refused,
/// timeout, or the HTTP status with the start of the body.
StatusOr<std::string> HttpGet(const HttpTarget& target, int timeout_ms);

}  // namespace gputriage
