#include "src/sources/http/http_get.h"

#include <httplib.h>

#include <cctype>

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

struct HttpClient::Impl {
  HttpTarget target;
  std::string where;  // the URL, for messages
  httplib::Client client;
  Impl(HttpTarget t, int timeout_ms, const HttpAuth& auth)
      : target(std::move(t)), where(target.scheme + "://" + target.host + target.path),
        client(target.scheme + "://" + target.host) {
    const time_t seconds = timeout_ms / 1000;
    const time_t micros = (timeout_ms % 1000) * 1000;
    client.set_connection_timeout(seconds, micros);
    client.set_read_timeout(seconds, micros);
    client.set_write_timeout(seconds, micros);
    client.set_follow_location(true);
    client.set_keep_alive(true);
    if (!auth.bearer_token.empty()) client.set_bearer_token_auth(auth.bearer_token);
    else if (!auth.username.empty()) client.set_basic_auth(auth.username, auth.password);
  }
};

HttpClient::HttpClient(HttpTarget target, int timeout_ms, const HttpAuth& auth)
    : impl_(std::make_unique<Impl>(std::move(target), timeout_ms, auth)) {}
HttpClient::~HttpClient() = default;

StatusOr<std::string> HttpClient::Get(size_t max_bytes) {
  std::string body;
  bool too_large = false;
  auto response = impl_->client.Get(impl_->target.path, [&](const char* data, size_t size) {
    if (body.size() + size > max_bytes) {
      too_large = true;
      return false;  // stop reading: the reply is not a metrics page
    }
    body.append(data, size);
    return true;
  });
  if (too_large)
    return DataLossError(impl_->where + ": reply larger than " + std::to_string(max_bytes >> 20) + " MiB; not read");
  if (!response) return IoError(impl_->where + ": " + httplib::to_string(response.error()));
  if (response->status != 200) {
    std::string start = body.substr(0, 120);
    for (char& c : start)
      if (c == '\n' || c == '\r') c = ' ';
    return IoError(impl_->where + ": HTTP " + std::to_string(response->status) + (start.empty() ? "" : ": " + start));
  }
  return body;
}

StatusOr<HttpReply> HttpClient::Request(const std::string& method, const std::string& path, const std::string& body,
                                        const std::string& content_type, size_t max_bytes) {
  const std::string where = impl_->target.scheme + "://" + impl_->target.host + path;
  if (method != "GET" && method != "POST" && method != "PUT")
    return InvalidArgumentError("HTTP method " + method + " is not supported");
  httplib::Result result = method == "GET"    ? impl_->client.Get(path)
                           : method == "POST" ? impl_->client.Post(path, body, content_type)
                                              : impl_->client.Put(path, body, content_type);
  if (!result) return IoError(method + " " + where + ": " + httplib::to_string(result.error()));
  if (result->body.size() > max_bytes)
    return DataLossError(method + " " + where + ": reply larger than " + std::to_string(max_bytes) + " bytes");
  return HttpReply{result->status, std::move(result->body)};
}

}  // namespace gputriage
