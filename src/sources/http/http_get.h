// HTTP for scraping metric endpoints (dcgm-exporter /metrics) and for the
// trackers' REST calls (MLflow) and the Prometheus API: a client of our own on sockets and OpenSSL (http_get.cc), every wait bounded by one deadline per request, the reply's head capped at 64 KiB.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "gputriage/status.h"

struct addrinfo;  // <netdb.h>

namespace gputriage {

struct HttpTarget {
  std::string scheme;  // "http" or "https"
  std::string host;    // with ":port" when given
  std::string path;    // "/metrics" when the URL has none
};

/// Splits "http://host:9400/metrics"; a URL without a scheme is taken as http,
/// one without a path gets `default_path`. Errors name what is wrong with the URL.
StatusOr<HttpTarget> ParseHttpUrl(const std::string& url, const std::string& default_path = "/metrics");

/// "a%20b": text as a URL query or form value (RFC 3986 unreserved characters kept).
std::string UrlEncode(const std::string& s);

/// Credentials sent with every request: a bearer token, or a user and password.
struct HttpAuth {
  std::string bearer_token;
  std::string username, password;
  std::string ca_file;  // https: trust the CAs in this PEM file instead of the system's
};

/// Tests put a slow DNS server in getaddrinfo's place (nullptr: getaddrinfo).
/// A host name is looked up within the request's deadline; an IP address is not looked up.
using HostLookupForTesting = int (*)(const char* host, const char* port, const ::addrinfo* hints,
                                     ::addrinfo** found);
void SetHostLookupForTesting(HostLookupForTesting lookup);

/// A reply of any status.
struct HttpReply {
  int status = 0;
  std::string body;
};

/// GETs one URL again and again over one kept-alive connection (a recorder
/// scrapes the same endpoint every second).
class HttpClient {
 public:
  HttpClient(HttpTarget target, int timeout_ms, const HttpAuth& auth = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// The body of a 200 response, at most `max_bytes` long. Errors say what
  /// failed: connection refused, timeout, a reply over the limit, or the HTTP
  /// status with the start of the body.
  StatusOr<std::string> Get(size_t max_bytes);

  /// Until cleared (nullopt), no request runs past `deadline` whatever its own
  /// timeout: a caller making several calls (a tracker opening a run before the job
  /// may start) bounds them all together.
  void SetDeadline(std::optional<std::chrono::steady_clock::time_point> deadline);

  /// `method` ("GET", "POST", "PUT") of `path` on the target's host, with `body`
  /// of `content_type` (ignored for GET). Any HTTP status is a reply; an error
  /// means no reply (refused, timed out, a reply over `max_bytes`).
  StatusOr<HttpReply> Request(const std::string& method, const std::string& path, const std::string& body,
                              const std::string& content_type, size_t max_bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputriage
