// The HTTP/1.1 server under the agent's /metrics and `serve`'s pages: one
// event-loop thread owns every connection (reading heads, writing replies,
// TLS), a small pool runs the handlers. No client can hold more than its
// connection: a slow or idle one costs a few kilobytes and is dropped at its
// deadline, so a scrape beside 100 trickling clients is answered at once.
//
// TLS handshakes run on threads of their own, taking turns between client
// addresses, so the loop never spends its time on key exchanges.
//
// Limits (HttpServerLimits): head size and header count (431), a deadline for
// a request's head from its first byte (408), an idle deadline between
// keep-alive requests, a send deadline per reply, a connection cap (at the
// cap the longest-idle, then the slowest, connection gives way to the new
// one), and a bounded handler queue (503 when full). Pipelined requests are
// answered in order. GET and HEAD only; anything else is 405 with Allow.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gputriage/status.h"
#include "src/net/http_request.h"

namespace gputriage {

class TlsServerContext;

struct HttpServerLimits {
  HttpHeadLimits head;
  int head_timeout_ms = 10'000;    // from a request's first byte (or the connection's accept) to its blank line
  int idle_timeout_ms = 60'000;    // between keep-alive requests (Prometheus scrapes every 15-60 s)
  int write_timeout_ms = 30'000;   // to send one reply
  int handshake_timeout_ms = 10'000;  // TLS
  size_t max_connections = 512;
  size_t max_requests_per_connection = 10'000;
  int workers = 4;                 // handler threads
  size_t max_queued = 256;         // requests waiting for a handler thread; beyond: 503
  int slow_lane_workers = 1;       // handler threads for requests the handler marks slow (bcrypt)
  size_t max_slow_queued = 64;     // beyond: 429 (a burst of scrapers with the same new credentials waits for one bcrypt)
  size_t max_slow_queued_per_host = 8;  // one client address's share of those; addresses take turns
  int handshake_workers = 2;            // threads for TLS handshake steps (never the event loop)
  size_t max_handshakes_queued = 256;   // beyond: the new connection is closed
  size_t max_handshakes_queued_per_host = 32;  // one client address's share; addresses take turns
};

/// What the server counted, for the agent's own series and the tests.
struct HttpServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_open = 0;
  uint64_t requests = 0;
  uint64_t refused_too_large = 0;   // 431
  uint64_t timed_out_head = 0;      // 408 (slow or stalled heads)
  uint64_t closed_idle = 0;         // idle keep-alive connections closed at their deadline
  uint64_t evicted = 0;             // closed at the connection cap for a newer one
  uint64_t timed_out_write = 0;     // readers that did not take a reply in time
  uint64_t rejected_busy = 0;       // 503/429: handler queues full; TLS handshakes refused, their queue full
  uint64_t tls_failures = 0;        // handshakes that failed
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  /// Whether a request needs the slow lane (e.g. credentials not yet verified,
  /// a bcrypt of tens of milliseconds): those wait for their own thread, so a
  /// flood of wrong passwords never delays a scrape with known credentials.
  /// The answer is the request's key there (nullopt: the fast lane): past its
  /// address's share, a request joins one already waiting with the same key
  /// (the same credentials cost one check). Called on the event loop: quick.
  using SlowLane = std::function<std::optional<std::string>(const HttpRequest&)>;

  /// Binds `host:port` (0: any free port) and starts serving. `tls` may be
  /// null (plain HTTP). Errors: the address cannot be bound.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port, const HttpServerLimits& limits,
                                                     Handler handler, SlowLane slow_lane = nullptr,
                                                     std::shared_ptr<TlsServerContext> tls = nullptr);
  ~HttpServer();  // stops, closes every connection, joins the threads

  int port() const;
  /// New connections use this TLS context (a reloaded web config); open ones keep theirs.
  void SetTls(std::shared_ptr<TlsServerContext> tls);
  void Stop();  // any thread; returns at once
  void Wait();  // until the loop has ended
  HttpServerStats Stats() const;

 private:
  HttpServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// "HOST:PORT", "[V6]:PORT" or ":PORT" (all addresses) into its parts; an error names what is wrong.
Status ParseListenAddress(const std::string& text, std::string* host, int* port);

}  // namespace gputriage
