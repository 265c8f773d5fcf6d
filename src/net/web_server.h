// An HTTP server under a web config: what the agent and `serve` share. TLS
// from the config, its basic auth's uncached bcrypts on the slow lane, and a
// reload (SIGHUP) that swaps TLS for new connections and auth and headers for
// new requests, or changes nothing when the new config's TLS cannot be set up
// or it would drop TLS or basic auth that the running config has.
#pragma once

#include <memory>
#include <string>

#include "gputriage/status.h"
#include "src/net/http_server.h"
#include "src/net/web_config.h"

namespace gputriage {

/// Starts `handler` on `host:port` under `web` (null: plain HTTP, open), which
/// `access` then holds; the handler checks `access` itself (paths differ in
/// what they allow without credentials).
StatusOr<std::unique_ptr<HttpServer>> StartWebServer(const std::string& host, int port, const HttpServerLimits& limits,
                                                     HttpServer::Handler handler, WebAccess& access,
                                                     std::shared_ptr<const WebConfig> web);

/// `web` in place of the running config, or an error and nothing changed.
Status ReloadWebServer(HttpServer& server, WebAccess& access, std::shared_ptr<const WebConfig> web);

}  // namespace gputriage
