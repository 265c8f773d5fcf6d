// What the two HTTP servers (the agent's /metrics, `serve`'s pages and API)
// share on top of cpp-httplib: the same connection settings, and binding a
// server then running it on its own thread. Both servers' files include
// cpp-httplib for their routes; the socket set-up lives here once.
#pragma once

#include <httplib.h>

#include <string>
#include <thread>

#include "gputriage/status.h"

namespace gputriage {

struct HttpServerSettings {
  int threads = 8;            // connections served at once
  int io_timeout_s = 5;       // a stalled reader or writer is dropped after this
  size_t max_request_body = 64 * 1024;  // both servers answer GETs only
};

/// Thread pool, timeouts, TCP_NODELAY and SO_REUSEADDR (not SO_REUSEPORT).
void ConfigureHttpServer(httplib::Server& server, const HttpServerSettings& settings);

/// Binds `host:port` (0: any free port) and starts `server` on `thread`;
/// returns the bound port. Errors say the address is in use or not this machine's.
StatusOr<int> BindAndServe(httplib::Server& server, const std::string& host, int port, std::thread& thread);

}  // namespace gputriage
