#include "src/net/web_server.h"

#include "src/net/tls_server_context.h"

namespace gputriage {
namespace {

StatusOr<std::shared_ptr<TlsServerContext>> TlsOf(const std::shared_ptr<const WebConfig>& web) {
  if (!web || !web->tls()) return std::shared_ptr<TlsServerContext>();
  return TlsServerContext::FromWebConfig(*web);
}

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> StartWebServer(const std::string& host, int port, const HttpServerLimits& limits,
                                                     HttpServer::Handler handler, WebAccess& access,
                                                     std::shared_ptr<const WebConfig> web) {
  ASSIGN_OR_RETURN(auto tls, TlsOf(web));
  access.Reload(std::move(web));
  return HttpServer::Start(host, port, limits, std::move(handler),
                           [&access](const HttpRequest& req) -> std::optional<std::string> {
                             // Keyed by the credentials: scrapers sharing new ones wait for one bcrypt.
                             if (!access.NeedsSlowCheck(req)) return std::nullopt;
                             return req.Header("Authorization");
                           }, std::move(tls));
}

Status ReloadWebServer(HttpServer& server, WebAccess& access, std::shared_ptr<const WebConfig> web) {
  // A reload never lowers the server's guard unless the new file says so
  // field by field: an empty, comment-only or half-written file would
  // otherwise turn TLS, passwords or client certificates off without a word
  // (issues 41, 53). Dropping TLS or passwords takes a restart.
  if (const auto running = access.config(); running) {
    const std::string file = web && !web->path.empty() ? web->path : running->path;
    if (const std::string why = ReloadLowersAGuard(*running, web.get()); !why.empty())
      return InvalidArgumentError(file + ": " + why + "; not reloaded (restart to serve with less)");
  }
  ASSIGN_OR_RETURN(auto tls, TlsOf(web));
  server.SetTls(std::move(tls));
  access.Reload(std::move(web));
  return Status::Ok();
}

}  // namespace gputriage
