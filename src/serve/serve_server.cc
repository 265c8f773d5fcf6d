#include "src/serve/serve_server.h"

#include <httplib.h>


#include "src/report/runs_json.h"
#include "src/report/serve_page.h"
#include "src/serve/serve_api.h"
#include "src/sources/http/http_server.h"

namespace gputriage {

struct ServeServer::Impl {
  std::unique_ptr<httplib::Server> server;
};

namespace {

constexpr const char* kCookie = "gputriage_token";

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

void SendError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(RenderErrorJson(message), "application/json");
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

StatusOr<std::unique_ptr<ServeServer>> ServeServer::Start(ServeApi& api, const ServeOptions& options) {
  if (options.token.empty() && !IsLoopbackHost(options.host))
    return InvalidArgumentError("--listen " + options.host +
                                ": serving beyond this machine needs a token (--token-file FILE); without one, serve listens "
                                "on loopback only (127.0.0.1)");
  std::unique_ptr<ServeServer> out(new ServeServer());
  out->impl_ = std::make_unique<Impl>();
  out->impl_->server = std::make_unique<httplib::Server>();
  httplib::Server& server = *out->impl_->server;
  const std::string token = options.token;
  server.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("X-Frame-Options", "DENY");
    if (token.empty()) {
      // Loopback without a token: only loopback names, so a page elsewhere that
      // rebinds its DNS name to 127.0.0.1 is refused.
      if (!IsLoopbackHost(HostName(req.get_header_value("Host")))) {
        SendError(res, 403, "Host " + req.get_header_value("Host") + " is not a loopback name: serve without a token answers only "
                            "http://127.0.0.1, http://localhost and http://[::1]");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string auth = req.get_header_value("Authorization");
    if ((auth.rfind("Bearer ", 0) == 0 && SameSecret(auth.substr(7), token)) ||
        SameSecret(CookieValue(req.get_header_value("Cookie"), kCookie), token))
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.has_param("token") && SameSecret(req.get_param_value("token"), token)) {
      // A link with the token: keep it in a cookie and drop it from the address bar.
      res.set_header("Set-Cookie", std::string(kCookie) + "=" + token + "; Path=/; HttpOnly; SameSite=Strict");
      std::string target = req.path;
      std::string sep = "?";
      for (const auto& [k, v] : req.params) {
        if (k == "token") continue;
        target += sep + httplib::detail::encode_query_param(k) + "=" + httplib::detail::encode_query_param(v);
        sep = "&";
      }
      res.status = 303;
      res.set_header("Location", target);
      return httplib::Server::HandlerResponse::Handled;
    }
    res.set_header("WWW-Authenticate", "Bearer realm=\"gputriage serve\"");
    SendError(res, 401, "this gputriage serve needs its token: open the address it printed (…/?token=…) or send "
                        "\"Authorization: Bearer TOKEN\"");
    return httplib::Server::HandlerResponse::Handled;
  });
  server.Get(R"(/api/.*)", [&api](const httplib::Request& req, httplib::Response& res) {
    ApiResponse answer = api.Get(req.path, req.params);
    res.status = answer.status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(std::move(answer.body), answer.content_type);
  });
  // Every page is the same shell; its script reads the address and asks the API.
  server.Get(R"(/|/runs/[0-9]+|/compare|/experiments/.+)", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(RenderServePage(), "text/html; charset=utf-8");
  });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty())
      SendError(res, 404, "no such page: " + req.path + " (/, /runs/ID, /compare?a=ID&b=ID, /experiments/NAME, /api/...)");
  });
  HttpServerSettings settings;
  settings.threads = options.threads;
  settings.io_timeout_s = 10;
  ConfigureHttpServer(server, settings);
  ASSIGN_OR_RETURN(out->port_, BindAndServe(server, options.host, options.port, out->thread_));
  return out;
}

void ServeServer::Stop() {
  if (impl_ && impl_->server) impl_->server->stop();
}

void ServeServer::Wait() {
  if (thread_.joinable()) thread_.join();
}

ServeServer::~ServeServer() {
  Stop();
  Wait();
}

}  // namespace gputriage
