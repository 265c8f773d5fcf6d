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
  // A reload never lowers the server's guard: an empty, comment-only or
  // half-written file would otherwise turn TLS or passwords off without a
  // word (issue 41). Dropping them takes a restart without the file.
  if (const auto running = access.config(); running) {
    const std::string file = web && !web->path.empty() ? web->path : running->path;
    if (running->tls() && (!web || !web->tls()))
      return InvalidArgumentError(file + ": the new web config has no tls_server_config, which would turn TLS off; "
                                     "not reloaded (restart without the file to serve plain HTTP)");
    if (!running->basic_auth_users.empty() && (!web || web->basic_auth_users.empty()))
      return InvalidArgumentError(file + ": the new web config has no basic_auth_users, which would turn passwords "
                                     "off; not reloaded (restart without them to serve without passwords)");
  }
  ASSIGN_OR_RETURN(auto tls, TlsOf(web));
  server.SetTls(std::move(tls));
  access.Reload(std::move(web));
  return Status::Ok();
}

}  // namespace gputriage
