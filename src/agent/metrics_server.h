// The agent's HTTP endpoint, over the event-loop server (src/net/http_server.h):
// GET /metrics (Prometheus text, or OpenMetrics when the Accept header prefers
// it; gzip when Accept-Encoding allows), GET /healthz (200 while the sampling
// loop keeps its tick, else 503). A scrape copies nothing: the page rendered
// last is shared with every scraper. With a web config: TLS, HTTP basic auth
// on every path but /healthz's bare answer, and its extra response headers;
// Reload swaps them in while serving (SIGHUP).
#pragma once

#include <memory>
#include <string>

#include "gputriage/status.h"
#include "src/net/http_server.h"

namespace gputriage {

class Agent;
struct WebConfig;

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 9401;                 // 0: any free port (tests)
  HttpServerLimits limits;         // connections, deadlines, handler threads
  std::shared_ptr<const WebConfig> web;  // TLS, basic auth, headers (web_config.h); null: plain HTTP, open
};

class MetricsServer {
 public:
  /// Binds `options.host:port` and starts serving in its own threads. Errors:
  /// the address cannot be bound, the web config's TLS cannot be set up.
  static StatusOr<std::unique_ptr<MetricsServer>> Start(Agent& agent, const ServerOptions& options);
  ~MetricsServer();  // stops serving
  int port() const;
  /// A re-read web config for the requests and TLS connections that follow.
  /// Errors (its TLS cannot be set up) leave the current one in place.
  Status Reload(std::shared_ptr<const WebConfig> web);
  HttpServerStats Stats() const;
  void Stop();
  /// Blocks until the server stops (Stop from a signal handler's thread).
  void Wait();

 private:
  MetricsServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputriage
