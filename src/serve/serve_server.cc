#include "src/serve/serve_server.h"

#include <cctype>
#include <cstring>
#include <optional>
#include <regex>

#include "src/net/web_server.h"
#include "src/report/runs_json.h"
#include "src/report/serve_page.h"
#include "src/serve/serve_api.h"
#include "src/util/strings.h"

namespace gputriage {

namespace {

constexpr const char* kCookie = "gputriage_token";

/// The decoded request path as a Location on this server: percent-encoded
/// again (a decoded "%0d%0a" would have ended the header and begun another),
/// and never "//host/..." (a path that a browser reads as another site).
std::string SameSiteRedirectPath(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "/";
  size_t i = 0;
  while (i < path.size() && (path[i] == '/' || path[i] == '\\')) ++i;
  for (; i < path.size(); ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    if (std::isalnum(c) || std::strchr("-._~/!$&'()*+,;=:@", c) != nullptr) {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

/// Equal without telling, by its timing, how much of a guess was right.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& longer = a.size() >= b.size() ? a : b;
  for (size_t i = 0; i < longer.size(); ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::string CookieValue(const std::string& header, const std::string& name) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string::npos) end = header.size();
    std::string part = header.substr(pos, end - pos);
    const size_t start = part.find_first_not_of(' ');
    if (start != std::string::npos) part = part.substr(start);
    if (part.compare(0, name.size() + 1, name + "=") == 0) return part.substr(name.size() + 1);
    pos = end + 1;
  }
  return {};
}

/// The Host header's name without its port ("[::1]:8765" → "::1").
std::string HostName(const std::string& host) {
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return close == std::string::npos ? host : host.substr(1, close - 1);
  }
  const size_t colon = host.rfind(':');
  return colon == std::string::npos ? host : host.substr(0, colon);
}

HttpResponse JsonError(int status, const std::string& message) {
  return HttpResponse::Text(status, RenderErrorJson(message), "application/json");
}

/// The pages: one shell whose script reads the address and asks the API.
bool IsPagePath(const std::string& path) {
  static const std::regex kPages(R"(/|/runs/[0-9]+|/compare|/experiments/.+)");
  return std::regex_match(path, kPages);
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  // 127.0.0.0/8 in dotted form: "127." and three numbers up to 255.
  if (host.rfind("127.", 0) != 0) return false;
  int parts = 1, value = -1;
  for (size_t i = 4; i <= host.size(); ++i) {
    if (i == host.size() || host[i] == '.') {
      if (value < 0 || value > 255) return false;
      ++parts;
      value = -1;
    } else if (host[i] >= '0' && host[i] <= '9' && value < 1000) {
      value = (value < 0 ? 0 : value * 10) + (host[i] - '0');
    } else {
      return false;
    }
  }
  return parts == 4;
}

struct ServeServer::Impl {
  ServeApi* api = nullptr;
  std::string token;
  WebAccess access;
  std::unique_ptr<HttpServer> server;

  HttpResponse Handle(const HttpRequest& req) {
    HttpResponse res = Route(req);
    res.SetHeader("X-Content-Type-Options", "nosniff");
    res.SetHeader("Referrer-Policy", "no-referrer");
    res.SetHeader("X-Frame-Options", "DENY");
    access.AddHeaders(&res);
    return res;
  }

  /// The reply when the request may not go on, or nothing.
  std::optional<HttpResponse> Refusal(const HttpRequest& req) {
    const bool users = access.auth_required();
    if (token.empty() && !users) {
      // Loopback without a token: only loopback names, so a page elsewhere that
      // rebinds its DNS name to 127.0.0.1 is refused.
      if (!IsLoopbackHost(HostName(req.Header("Host"))))
        return JsonError(403, "Host " + req.Header("Host") + " is not a loopback name: serve without a token answers only "
                              "http://127.0.0.1, http://localhost and http://[::1]");
      return std::nullopt;
    }
    if (users && StartsWith(req.Header("Authorization"), "Basic ") && access.Allowed(req)) return std::nullopt;
    if (!token.empty()) {
      const std::string auth = req.Header("Authorization");
      if ((auth.rfind("Bearer ", 0) == 0 && SameSecret(auth.substr(7), token)) ||
          SameSecret(CookieValue(req.Header("Cookie"), kCookie), token))
        return std::nullopt;
      const auto given = req.query.find("token");
      if (given != req.query.end() && SameSecret(given->second, token)) {
        // A link with the token: keep it in a cookie and drop it from the address bar.
        HttpResponse res = HttpResponse::Text(303, "");
        res.SetHeader("Set-Cookie", std::string(kCookie) + "=" + token + "; Path=/; HttpOnly; SameSite=Strict");
        std::string target = SameSiteRedirectPath(req.path);
        std::string sep = "?";
        for (const auto& [k, v] : req.query) {
          if (k == "token") continue;
          target += sep + PercentEncodeQuery(k) + "=" + PercentEncodeQuery(v);
          sep = "&";
        }
        res.SetHeader("Location", target);
        return res;
      }
    }
    if (users && token.empty()) return WebAccess::Unauthorized("gputriage serve");
    HttpResponse res = JsonError(401, "this gputriage serve needs its token: open the address it printed (…/?token=…) or send "
                                      "\"Authorization: Bearer TOKEN\"");
    res.SetHeader("WWW-Authenticate", users ? "Basic realm=\"gputriage serve\"" : "Bearer realm=\"gputriage serve\"");
    return res;
  }

  HttpResponse Route(const HttpRequest& req) {
    if (auto refused = Refusal(req)) return std::move(*refused);
    if (StartsWith(req.path, "/api/")) {
      ApiResponse answer = api->Get(req.path, req.query);
      HttpResponse res = HttpResponse::Text(answer.status, std::move(answer.body), answer.content_type);
      res.SetHeader("Cache-Control", "no-store");
      return res;
    }
    if (IsPagePath(req.path)) {
      HttpResponse res = HttpResponse::Text(200, RenderServePage(), "text/html; charset=utf-8");
      res.SetHeader("Cache-Control", "no-store");
      return res;
    }
    return JsonError(404, "no such page: " + req.path + " (/, /runs/ID, /compare?a=ID&b=ID, /experiments/NAME, /api/...)");
  }
};

StatusOr<std::unique_ptr<ServeServer>> ServeServer::Start(ServeApi& api, const ServeOptions& options) {
  const bool users = options.web && !options.web->basic_auth_users.empty();
  if (options.token.empty() && !users && !IsLoopbackHost(options.host))
    return InvalidArgumentError("--listen " + options.host +
                                ": serving beyond this machine needs a token (--token-file FILE) or basic_auth_users in "
                                "--web-config-file; without either, serve listens on loopback only (127.0.0.1)");
  std::unique_ptr<ServeServer> out(new ServeServer());
  out->impl_ = std::make_unique<Impl>();
  Impl& impl = *out->impl_;
  impl.api = &api;
  impl.token = options.token;
  ASSIGN_OR_RETURN(impl.server, StartWebServer(options.host, options.port, options.limits,
                                               [&impl](const HttpRequest& req) { return impl.Handle(req); },
                                               impl.access, options.web));
  return out;
}

int ServeServer::port() const { return impl_->server->port(); }

Status ServeServer::Reload(std::shared_ptr<const WebConfig> web) {
  return ReloadWebServer(*impl_->server, impl_->access, std::move(web));
}

void ServeServer::Stop() {
  if (impl_ && impl_->server) impl_->server->Stop();
}

void ServeServer::Wait() {
  if (impl_ && impl_->server) impl_->server->Wait();
}

ServeServer::~ServeServer() {
  Stop();
  Wait();
}

}  // namespace gputriage
