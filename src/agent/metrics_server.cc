#include "src/agent/metrics_server.h"

#include <mutex>

#include "src/agent/agent.h"
#include "src/agent/exposition.h"
#include "src/net/gzip.h"
#include "src/net/web_server.h"

namespace gputriage {
namespace {

/// The format an Accept header prefers, by its q-values: OpenMetrics only
/// when it weighs more than the text format (Prometheus sends both, OpenMetrics
/// first; a browser's "*/*" gets text).
Exposition::Format NegotiateFormat(const std::string& accept) {
  if (accept.empty()) return Exposition::Format::kPrometheusText;
  const double om = AcceptWeight(accept, "application/openmetrics-text", "*/*");
  const double text = AcceptWeight(accept, "text/plain", "*/*");
  return om > text ? Exposition::Format::kOpenMetrics : Exposition::Format::kPrometheusText;
}

/// Whether Accept-Encoding allows gzip over identity (RFC 9110 12.5.3).
bool WantsGzip(const std::string& accept_encoding) {
  return !accept_encoding.empty() && AcceptWeight(accept_encoding, "gzip", "*") > 0;
}

}  // namespace

struct MetricsServer::Impl {
  Agent* agent = nullptr;
  WebAccess access;
  std::unique_ptr<HttpServer> server;

  // The page last compressed, per format: the agent renders once per tick and
  // every scraper of that tick shares one compression.
  std::mutex gzip_mutex;
  std::shared_ptr<const std::string> gzip_source[2];
  std::shared_ptr<const std::string> gzip_page[2];

  std::shared_ptr<const std::string> Gzipped(Exposition::Format format, const std::shared_ptr<const std::string>& page) {
    const int i = format == Exposition::Format::kOpenMetrics ? 1 : 0;
    std::lock_guard<std::mutex> lock(gzip_mutex);
    if (gzip_source[i] != page) {
      gzip_source[i] = page;
      gzip_page[i] = std::make_shared<const std::string>(GzipCompress(*page));
    }
    return gzip_page[i];
  }

  HttpResponse Handle(const HttpRequest& req) {
    HttpResponse res = Route(req);
    access.AddHeaders(&res);
    return res;
  }

  HttpResponse Route(const HttpRequest& req) {
    const bool allowed = access.Allowed(req);
    if (req.path == "/healthz") {
      // Kubernetes probes carry no credentials: without them /healthz says
      // only whether the agent is healthy; the reason needs credentials.
      std::string why;
      const bool healthy = agent->Healthy(&why);
      if (healthy) return HttpResponse::Text(200, "ok\n");
      return HttpResponse::Text(503, allowed ? why + "\n" : "unhealthy\n");
    }
    if (!allowed) return WebAccess::Unauthorized("gputriage agent");
    if (req.path == "/metrics") {
      agent->CountScrape();
      const auto format = NegotiateFormat(req.Header("Accept"));
      std::shared_ptr<const std::string> page = agent->Page(format);
      if (!page) return HttpResponse::Text(503, "the agent has not sampled yet\n");
      HttpResponse res;
      res.content_type = Exposition::ContentType(format);
      res.SetHeader("Vary", "Accept, Accept-Encoding");
      if (WantsGzip(req.Header("Accept-Encoding"))) {
        res.body = Gzipped(format, page);
        res.SetHeader("Content-Encoding", "gzip");
      } else {
        res.body = std::move(page);
      }
      return res;
    }
    if (req.path == "/") return HttpResponse::Text(200, "gputriage agent: /metrics (Prometheus), /healthz\n");
    return HttpResponse::Text(404, "no such page: " + req.path + " (/metrics, /healthz)\n");
  }
};

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(Agent& agent, const ServerOptions& options) {
  std::unique_ptr<MetricsServer> out(new MetricsServer());
  out->impl_ = std::make_unique<Impl>();
  Impl& impl = *out->impl_;
  impl.agent = &agent;
  ASSIGN_OR_RETURN(impl.server, StartWebServer(options.host, options.port, options.limits,
                                               [&impl](const HttpRequest& req) { return impl.Handle(req); },
                                               impl.access, options.web));
  return out;
}

int MetricsServer::port() const { return impl_->server->port(); }

Status MetricsServer::Reload(std::shared_ptr<const WebConfig> web) {
  return ReloadWebServer(*impl_->server, impl_->access, std::move(web));
}

HttpServerStats MetricsServer::Stats() const { return impl_->server->Stats(); }

void MetricsServer::Stop() {
  if (impl_ && impl_->server) impl_->server->Stop();
}

void MetricsServer::Wait() {
  if (impl_ && impl_->server) impl_->server->Wait();
}

MetricsServer::~MetricsServer() {
  Stop();
  Wait();
}

}  // namespace gputriage
