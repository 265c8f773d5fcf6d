// `gputriage serve`'s HTTP endpoint, over the event-loop server
// (src/net/http_server.h) as the agent's is: the pages (one shell whose script draws runs,
// a run's report, a comparison or an experiment's trend from the API) and the
// JSON API (serve_api.h).
//
// Access: on loopback with no token, any local client, but only under a
// loopback Host name (a web page elsewhere cannot reach it by rebinding a DNS
// name to 127.0.0.1). With a token (required off loopback): every request
// carries it as "Authorization: Bearer TOKEN" or the cookie a first visit to
// /?token=TOKEN sets. With a web config (the agent's format): TLS, and HTTP
// basic auth for its users (enough on its own off loopback; with a token as
// well, either is accepted).
#pragma once

#include <memory>
#include <string>

#include "gputriage/status.h"
#include "src/net/http_server.h"

namespace gputriage {

class ServeApi;

struct WebConfig;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8765;      // 0: any free port (tests)
  std::string token;    // empty: loopback only (unless the web config has users)
  std::shared_ptr<const WebConfig> web;  // TLS, basic auth, headers; null: plain HTTP
  HttpServerLimits limits;
};

/// 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

class ServeServer {
 public:
  /// Binds and serves in its own thread. Errors: a host off loopback without a
  /// token; an address that cannot be bound.
  static StatusOr<std::unique_ptr<ServeServer>> Start(ServeApi& api, const ServeOptions& options);
  ~ServeServer();
  int port() const;
  /// A re-read web config for what follows; errors leave the current one.
  Status Reload(std::shared_ptr<const WebConfig> web);
  void Stop();
  void Wait();

 private:
  ServeServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputriage
