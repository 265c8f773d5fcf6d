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
                           [&access](const HttpRequest& req) { return access.NeedsSlowCheck(req); }, std::move(tls));
}

Status ReloadWebServer(HttpServer& server, WebAccess& access, std::shared_ptr<const WebConfig> web) {
  ASSIGN_OR_RETURN(auto tls, TlsOf(web));
  server.SetTls(std::move(tls));
  access.Reload(std::move(web));
  return Status::Ok();
}

}  // namespace gputriage
