#include "src/sources/http/http_server.h"

#include <sys/socket.h>

#include <algorithm>

namespace gputriage {

void ConfigureHttpServer(httplib::Server& server, const HttpServerSettings& settings) {
  const int threads = std::max(settings.threads, 1);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server.set_read_timeout(settings.io_timeout_s, 0);
  server.set_write_timeout(settings.io_timeout_s, 0);
  server.set_keep_alive_timeout(settings.io_timeout_s);
  server.set_payload_max_length(settings.max_request_body);
  // Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
  // algorithm holds the body until the client's delayed ACK (40 ms a request).
  server.set_tcp_nodelay(true);
  // SO_REUSEADDR only: cpp-httplib's default, SO_REUSEPORT, would let a second
  // server bind the same port and take half the requests.
  server.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
}

StatusOr<int> BindAndServe(httplib::Server& server, const std::string& host, int port, std::thread& thread) {
  int bound = port;
  if (port == 0) {
    bound = server.bind_to_any_port(host);
    if (bound < 0) return IoError("cannot listen on " + host + ": no free port");
  } else if (!server.bind_to_port(host, port)) {
    return IoError("cannot listen on " + host + ":" + std::to_string(port) + " (in use, or not an address of this machine)");
  }
  thread = std::thread([&server] { server.listen_after_bind(); });
  return bound;
}

}  // namespace gputriage
