// The agent's HTTP endpoint (cpp-httplib and OpenSSL, used only in metrics_server.cc):
// GET /metrics (Prometheus text, or OpenMetrics when the Accept header asks),
// GET /healthz (200 while the sampling loop keeps its tick, else 503 and why).
// A scrape copies the page the agent rendered last; it never waits for NVML.
// A scraper that stalls mid-response holds one worker thread until the write
// timeout, never the others. With a web config: TLS (its certificate, key,
// client CA and versions), HTTP basic auth on every path (401 otherwise), and
// its extra response headers.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "gputriage/status.h"

namespace gputriage {

class Agent;
struct WebConfig;

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 9401;                 // 0: any free port (tests)
  int threads = 64;                // concurrent connections served at once
  int io_timeout_s = 5;            // a stalled reader or writer is dropped after this
  std::shared_ptr<const WebConfig> web;  // TLS, basic auth, headers (web_config.h); null: plain HTTP, open
};

class MetricsServer {
 public:
  /// Binds `options.host:port` and starts serving in its own thread. Errors: the
  /// address cannot be bound (in use, not an address of this machine).
  static StatusOr<std::unique_ptr<MetricsServer>> Start(Agent& agent, const ServerOptions& options);
  ~MetricsServer();  // stops serving
  int port() const { return port_; }
  void Stop();
  /// Blocks until the server stops (Stop from a signal handler's thread).
  void Wait();

 private:
  MetricsServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  int port_ = 0;
};

/// "HOST:PORT", "[V6]:PORT" or ":PORT" (all addresses) into its parts; an error names what is wrong.
Status ParseListenAddress(const std::string& text, std::string* host, int* port);

}  // namespace gputriage
