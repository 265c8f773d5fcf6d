// `gputriage serve`'s HTTP endpoint (cpp-httplib, used only here and in the
// agent's metrics_server.cc): the pages (one shell whose script draws runs,
// a run's report, a comparison or an experiment's trend from the API) and the
// JSON API (serve_api.h).
//
// Access: on loopback with no token, any local client, but only under a
// loopback Host name (a web page elsewhere cannot reach it by rebinding a DNS
// name to 127.0.0.1). With a token (required off loopback): every request
// carries it as "Authorization: Bearer TOKEN" or the cookie a first visit to
// /?token=TOKEN sets.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "gputriage/status.h"

namespace gputriage {

class ServeApi;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8765;      // 0: any free port (tests)
  std::string token;    // empty: loopback only
  int threads = 8;
};

/// 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

class ServeServer {
 public:
  /// Binds and serves in its own thread. Errors: a host off loopback without a
  /// token; an address that cannot be bound.
  static StatusOr<std::unique_ptr<ServeServer>> Start(ServeApi& api, const ServeOptions& options);
  ~ServeServer();
  int port() const { return port_; }
  void Stop();
  void Wait();

 private:
  ServeServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gputriage
