#include "src/agent/metrics_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cstdlib>

#include "src/agent/agent.h"
#include "src/agent/exposition.h"

namespace gputriage {

struct MetricsServer::Impl {
  httplib::Server server;
};

Status ParseListenAddress(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos)
    return InvalidArgumentError("--listen " + text + ": expected HOST:PORT (e.g. 127.0.0.1:9401, or :9401 for every address)");
  std::string h = text.substr(0, colon);
  const std::string p = text.substr(colon + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  char* end = nullptr;
  const long value = std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || value < 0 || value > 65535)
    return InvalidArgumentError("--listen " + text + ": the port must be a number from 0 to 65535");
  *host = h.empty() ? "0.0.0.0" : h;
  *port = static_cast<int>(value);
  return Status::Ok();
}

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(Agent& agent, const ServerOptions& options) {
  std::unique_ptr<MetricsServer> out(new MetricsServer());
  out->impl_ = std::make_unique<Impl>();
  httplib::Server& server = out->impl_->server;
  const int threads = std::max(options.threads, 1);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server.set_read_timeout(options.io_timeout_s, 0);
  server.set_write_timeout(options.io_timeout_s, 0);
  server.set_keep_alive_timeout(options.io_timeout_s);
  server.set_payload_max_length(64 * 1024);  // scrapes send no body
  // Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
  // algorithm holds the body until the client's delayed ACK (40 ms a scrape).
  server.set_tcp_nodelay(true);
  // SO_REUSEADDR only: cpp-httplib's default, SO_REUSEPORT, would let a second
  // agent bind the same port and take half the scrapes.
  server.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.Get("/metrics", [&agent](const httplib::Request& req, httplib::Response& res) {
    agent.CountScrape();
    const auto format = Exposition::Negotiate(req.get_header_value("Accept"));
    const std::shared_ptr<const std::string> page = agent.Page(format);
    if (!page) {
      res.status = 503;
      res.set_content("the agent has not sampled yet\n", "text/plain; charset=utf-8");
      return;
    }
    // The page stays alive while it is sent, however slow the reader.
    res.set_content_provider(page->size(), Exposition::ContentType(format),
                             [page](size_t offset, size_t length, httplib::DataSink& sink) {
                               return sink.write(page->data() + offset, length);
                             });
  });
  server.Get("/healthz", [&agent](const httplib::Request&, httplib::Response& res) {
    std::string why;
    if (agent.Healthy(&why)) {
      res.set_content("ok\n", "text/plain; charset=utf-8");
    } else {
      res.status = 503;
      res.set_content(why + "\n", "text/plain; charset=utf-8");
    }
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("gputriage agent: /metrics (Prometheus), /healthz\n", "text/plain; charset=utf-8");
  });
  if (options.port == 0) {
    out->port_ = server.bind_to_any_port(options.host);
    if (out->port_ < 0) return IoError("cannot listen on " + options.host + ": no free port");
  } else {
    if (!server.bind_to_port(options.host, options.port))
      return IoError("cannot listen on " + options.host + ":" + std::to_string(options.port) +
                     " (in use, or not an address of this machine)");
    out->port_ = options.port;
  }
  MetricsServer* self = out.get();
  out->thread_ = std::thread([self] { self->impl_->server.listen_after_bind(); });
  return out;
}

void MetricsServer::Stop() {
  if (impl_) impl_->server.stop();
}

void MetricsServer::Wait() {
  if (thread_.joinable()) thread_.join();
}

MetricsServer::~MetricsServer() {
  Stop();
  Wait();
}

}  // namespace gputriage
