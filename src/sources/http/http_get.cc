#include "src/sources/http/http_get.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "src/util/strings.h"

namespace gputriage {

std::string UrlEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

StatusOr<HttpTarget> ParseHttpUrl(const std::string& url, const std::string& default_path) {
  HttpTarget t;
  std::string rest = url;
  if (const size_t sep = rest.find("://"); sep != std::string::npos) {
    t.scheme = rest.substr(0, sep);
    rest = rest.substr(sep + 3);
    if (t.scheme != "http" && t.scheme != "https")
      return InvalidArgumentError(url + ": unsupported URL scheme '" + t.scheme + "' (use http:// or https://)");
  } else {
    t.scheme = "http";
  }
  const size_t slash = rest.find('/');
  t.host = rest.substr(0, slash);
  t.path = slash == std::string::npos ? default_path : rest.substr(slash);
  if (t.host.empty() || t.host.find_first_of(" \t\r\n@") != std::string::npos)
    return InvalidArgumentError(url + ": no usable host in the URL (expected e.g. http://node1:9400/metrics)");
  if (const size_t colon = t.host.rfind(':'); colon != std::string::npos && t.host.back() != ']') {
    const std::string port = t.host.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) == 0 || std::stoi(port) > 65535)
      return InvalidArgumentError(url + ": bad port '" + port + "'");
  }
  return t;
}

namespace {

/// httplib's error names ("Read", "Connection") as a user reads them.
std::string ErrorText(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection: return "could not connect (refused, unreachable or no such host)";
    case httplib::Error::Read: return "the reply could not be read (the connection closed early, or it is not HTTP)";
    case httplib::Error::Write: return "the request could not be sent (the connection closed)";
    case httplib::Error::ExceedRedirectCount: return "too many redirects";
    case httplib::Error::Canceled: return "cancelled";
    case httplib::Error::SSLConnection: return "the TLS connection failed";
    case httplib::Error::SSLServerVerification: return "the server's TLS certificate was not accepted";
    case httplib::Error::ConnectionTimeout: return "timed out connecting";
    default: return httplib::to_string(error);
  }
}

}  // namespace

struct HttpClient::Impl {
  HttpTarget target;
  std::string where;  // the URL, for messages
  int timeout_ms;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  httplib::Client client;
  Impl(HttpTarget t, int timeout, const HttpAuth& auth)
      : target(std::move(t)), where(target.scheme + "://" + target.host + target.path), timeout_ms(timeout),
        client(target.scheme + "://" + target.host) {
    const time_t seconds = timeout_ms / 1000;
    const time_t micros = (timeout_ms % 1000) * 1000;
    client.set_connection_timeout(seconds, micros);
    // A second past the whole request's budget: the watchdog in Send() ends a
    // stalled read as a timeout, never httplib's own per-read limit first (which
    // would say the reply could not be read).
    client.set_read_timeout(seconds + 1, micros);
    client.set_write_timeout(seconds + 1, micros);
    // A redirect is answered as itself (an error naming where it points): followed,
    // it would carry the credentials to whatever host and port it names.
    client.set_follow_location(false);
    client.set_keep_alive(true);
    if (!auth.bearer_token.empty()) client.set_bearer_token_auth(auth.bearer_token);
    else if (!auth.username.empty()) client.set_basic_auth(auth.username, auth.password);
  }

  /// Sends `req` and reads at most `max_bytes` of the reply's body, all within
  /// timeout_ms from the first byte sent to the last read: the read timeout alone
  /// restarts with every byte, so a server trickling one byte a second would hold
  /// the caller forever. A watchdog shuts the socket at the deadline
  /// (httplib::Client::stop is safe while a request is in flight).
  StatusOr<HttpReply> Send(httplib::Request req, size_t max_bytes, const std::string& what) {
    HttpReply reply;
    bool too_large = false;
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      if (reply.body.size() + size > max_bytes) {
        too_large = true;
        return false;
      }
      reply.body.append(data, size);
      return true;
    };
    int budget_ms = timeout_ms;
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return IoError(what + ": timed out: the caller's deadline has passed");
      budget_ms = std::min<int>(budget_ms, static_cast<int>(left.count()));
    }
    std::mutex mu;
    std::condition_variable cv;
    bool done = false, expired = false;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, std::chrono::milliseconds(budget_ms), [&] { return done; })) {
        expired = true;
        client.stop();
      }
    });
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    const auto sent_at = std::chrono::steady_clock::now();
    const bool sent = client.send(req, response, error);
    const auto took_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - sent_at).count();
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_one();
    watchdog.join();
    if (too_large)
      return DataLossError(what + ": reply larger than " +
                           (max_bytes >= (1u << 20) ? std::to_string(max_bytes >> 20) + " MiB"
                                                    : std::to_string(max_bytes) + " bytes") +
                           "; not read");
    // Ended by the watchdog, or failed only once the budget was spent (the
    // watchdog's thread can be scheduled late on a busy machine): a timeout.
    if (expired || (!sent && took_ms >= budget_ms))
      return IoError(fmt::format("{}: timed out: no complete reply within {:.1f} s", what, budget_ms / 1000.0));
    if (!sent) return IoError(what + ": " + ErrorText(error));
    if (response.status >= 300 && response.status < 400) {
      const std::string location = response.get_header_value("Location");
      return IoError(fmt::format("{}: HTTP {} redirect{} not followed (credentials stay with {})", what,
                                 response.status, location.empty() ? "" : " to " + Printable(location.substr(0, 200)),
                                 target.host));
    }
    reply.status = response.status;
    return reply;
  }
};

HttpClient::HttpClient(HttpTarget target, int timeout_ms, const HttpAuth& auth)
    : impl_(std::make_unique<Impl>(std::move(target), timeout_ms, auth)) {}
HttpClient::~HttpClient() = default;

void HttpClient::SetDeadline(std::optional<std::chrono::steady_clock::time_point> deadline) {
  impl_->deadline = deadline;
}

StatusOr<std::string> HttpClient::Get(size_t max_bytes) {
  httplib::Request req;
  req.method = "GET";
  req.path = impl_->target.path;
  ASSIGN_OR_RETURN(HttpReply reply, impl_->Send(std::move(req), max_bytes, impl_->where));
  if (reply.status != 200) {
    std::string start = reply.body.substr(0, 120);
    for (char& c : start)
      if (c == '\n' || c == '\r') c = ' ';
    return IoError(impl_->where + ": HTTP " + std::to_string(reply.status) +
                   (start.empty() ? "" : ": " + Printable(start)));
  }
  return std::move(reply.body);
}

StatusOr<HttpReply> HttpClient::Request(const std::string& method, const std::string& path, const std::string& body,
                                        const std::string& content_type, size_t max_bytes) {
  const std::string where = impl_->target.scheme + "://" + impl_->target.host + path;
  if (method != "GET" && method != "POST" && method != "PUT")
    return InvalidArgumentError("HTTP method " + method + " is not supported");
  httplib::Request req;
  req.method = method;
  req.path = path;
  if (method != "GET") {
    req.body = body;
    req.set_header("Content-Type", content_type);
  }
  return impl_->Send(std::move(req), max_bytes, method + " " + where);
}

}  // namespace gputriage
