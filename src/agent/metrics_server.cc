#include "src/agent/metrics_server.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdlib>

#include "src/agent/agent.h"
#include "src/agent/exposition.h"
#include "src/agent/web_config.h"
#include "src/sources/http/http_server.h"

namespace gputriage {

struct MetricsServer::Impl {
  std::unique_ptr<httplib::Server> server;
  std::unique_ptr<BasicAuthVerifier> auth;
};

namespace {

int TlsVersion(const std::string& name) {
  if (name == "TLS10") return TLS1_VERSION;
  if (name == "TLS11") return TLS1_1_VERSION;
  if (name == "TLS13") return TLS1_3_VERSION;
  return TLS1_2_VERSION;
}

/// The OpenSSL errors queued by the last calls, as one line.
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

/// The TLS context a web config describes; `why` says what failed.
bool SetUpTls(SSL_CTX& ctx, const WebConfig& web, std::string* why) {
  auto fail = [&](const std::string& what) {
    *why = web.path + ": " + what + ": " + OpenSslErrors();
    return false;
  };
  if (SSL_CTX_set_min_proto_version(&ctx, TlsVersion(web.min_version)) != 1) return fail("min_version");
  if (!web.max_version.empty() && SSL_CTX_set_max_proto_version(&ctx, TlsVersion(web.max_version)) != 1)
    return fail("max_version");
  if (SSL_CTX_use_certificate_chain_file(&ctx, web.cert_file.c_str()) != 1) return fail("cert_file " + web.cert_file);
  if (SSL_CTX_use_PrivateKey_file(&ctx, web.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return fail("key_file " + web.key_file);
  if (SSL_CTX_check_private_key(&ctx) != 1) return fail("key_file does not match cert_file");
  int mode = SSL_VERIFY_NONE;
  const std::string& type = web.client_auth_type;
  if (type == "RequestClientCert" || type == "VerifyClientCertIfGiven") mode = SSL_VERIFY_PEER;
  if (type == "RequireAnyClientCert" || type == "RequireAndVerifyClientCert")
    mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  if (!web.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, web.client_ca_file.c_str(), nullptr) != 1)
      return fail("client_ca_file " + web.client_ca_file);
    SSL_CTX_set_client_CA_list(&ctx, SSL_load_client_CA_file(web.client_ca_file.c_str()));
  }
  // Request/RequireAny take any certificate: the verify callback accepts all.
  const bool any = type == "RequestClientCert" || type == "RequireAnyClientCert";
  SSL_verify_cb accept_any = [](int, X509_STORE_CTX*) { return 1; };
  SSL_CTX_set_verify(&ctx, mode, any ? accept_any : nullptr);
  return true;
}

}  // namespace

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
  if (options.web && options.web->tls()) {
    std::string why;
    const WebConfig& web = *options.web;
    auto tls = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) { return SetUpTls(ctx, web, &why); });
    if (!tls->is_valid()) return InvalidArgumentError(why.empty() ? web.path + ": TLS could not be set up" : why);
    out->impl_->server = std::move(tls);
  } else {
    out->impl_->server = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *out->impl_->server;
  if (options.web && !options.web->basic_auth_users.empty()) {
    out->impl_->auth = std::make_unique<BasicAuthVerifier>(options.web->basic_auth_users);
    BasicAuthVerifier* auth = out->impl_->auth.get();
    // Every path, /healthz too, as exporter-toolkit guards them.
    server.set_pre_routing_handler([auth](const httplib::Request& req, httplib::Response& res) {
      if (auth->Verify(req.get_header_value("Authorization"))) return httplib::Server::HandlerResponse::Unhandled;
      res.status = 401;
      res.set_header("WWW-Authenticate", "Basic realm=\"gputriage agent\"");
      res.set_content("Unauthorized\n", "text/plain; charset=utf-8");
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  if (options.web && !options.web->headers.empty()) {
    auto headers = options.web->headers;
    server.set_post_routing_handler([headers](const httplib::Request&, httplib::Response& res) {
      for (const auto& [name, value] : headers) res.set_header(name.c_str(), value);
    });
  }
  HttpServerSettings settings;
  settings.threads = options.threads;
  settings.io_timeout_s = options.io_timeout_s;
  ConfigureHttpServer(server, settings);  // scrapes send no body
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
  ASSIGN_OR_RETURN(out->port_, BindAndServe(server, options.host, options.port, out->thread_));
  return out;
}

void MetricsServer::Stop() {
  if (impl_ && impl_->server) impl_->server->stop();
}

void MetricsServer::Wait() {
  if (thread_.joinable()) thread_.join();
}

MetricsServer::~MetricsServer() {
  Stop();
  Wait();
}

}  // namespace gputriage
