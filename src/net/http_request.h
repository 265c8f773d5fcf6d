// An HTTP/1.1 request head, parsed with limits (the servers' first line of
// defence: a head over its size or header count is refused before anything
// else is read), and what the servers answer with. Pure: no sockets here, so
// the parser is unit-tested and fuzzed on its own.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gputriage {

struct HttpHeadLimits {
  size_t max_head_bytes = 16 * 1024;  // request line and headers; Go's servers default to 1 MiB, browsers send < 8 KiB
  size_t max_header_count = 100;      // Go's net/http and nginx refuse far fewer than 400,000
};

struct HttpRequest {
  std::string method;  // as sent ("GET")
  std::string target;  // the request-target as sent ("/api/runs?tag=a%3Db")
  std::string path;    // percent-decoded, without the query
  std::multimap<std::string, std::string> query;  // decoded; a value keeps every '=' after the first
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent, values trimmed
  int minor_version = 1;  // HTTP/1.minor
  size_t content_length = 0;
  bool chunked = false;     // Transfer-Encoding present (the servers take no bodies)
  bool keep_alive = true;   // after this request: HTTP/1.1 unless "close", HTTP/1.0 only with "keep-alive"
  std::string peer;         // the client's address, for messages
  bool tls = false;

  /// The first header of that name (case-insensitive), or "".
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type, Content-Length, Date, Connection
  // Shared: a page rendered once (the agent's /metrics) goes to every scraper
  // without a copy, and stays alive while a slow reader takes it.
  std::shared_ptr<const std::string> body;

  static HttpResponse Text(int status, std::string text, std::string content_type = "text/plain; charset=utf-8");
  void SetHeader(std::string name, std::string value);
};

/// The reason phrase of a status code ("Request Header Fields Too Large").
const char* HttpReason(int status);

enum class HeadParse {
  kIncomplete,  // no blank line yet, and still within the size limit
  kComplete,    // *request filled; *head_bytes says how much of the buffer it used
  kBad,         // 400: not HTTP/1.x
  kTooLarge,    // 431: over max_head_bytes or max_header_count
  kVersion,     // 505: HTTP/2 preface or an HTTP version other than 1.x
};

/// Parses the head at the start of `buffer`. On kBad/kTooLarge/kVersion,
/// `*why` says what was wrong (for the error page, never the log: it is the
/// client's own input).
HeadParse ParseRequestHead(std::string_view buffer, const HttpHeadLimits& limits, HttpRequest* request,
                           size_t* head_bytes, std::string* why);

/// Percent-decoding of a path or query part ('+' is a space only in a query).
std::string PercentDecode(std::string_view text, bool plus_is_space);

/// A query key or value, percent-encoded (unreserved characters stay).
std::string PercentEncodeQuery(std::string_view text);

/// "a=1&b=x%3Dy&c" into (a,1), (b,x=y), (c,"").
std::multimap<std::string, std::string> ParseQuery(std::string_view query);

/// The weight (q) an Accept or Accept-Encoding list gives `token`; `wildcard`
/// ("*/*" or "*") and a "type/*" range count when the token is not named.
/// 0 when absent or refused (q=0). Values are 0-1; malformed q counts as 1.
double AcceptWeight(std::string_view header, std::string_view token, std::string_view wildcard);

}  // namespace gputriage
