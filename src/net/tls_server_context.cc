#include "src/net/tls_server_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "src/net/web_config.h"

namespace gputriage {
namespace {

int TlsVersion(const std::string& name) {
  if (name == "TLS10") return TLS1_VERSION;
  if (name == "TLS11") return TLS1_1_VERSION;
  if (name == "TLS13") return TLS1_3_VERSION;
  return TLS1_2_VERSION;
}

}  // namespace

std::string TakeOpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

StatusOr<std::shared_ptr<TlsServerContext>> TlsServerContext::FromWebConfig(const WebConfig& web) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return InternalError("TLS: " + TakeOpenSslErrors());
  std::shared_ptr<TlsServerContext> out(new TlsServerContext(ctx));
  auto fail = [&](const std::string& what) { return InvalidArgumentError(web.path + ": " + what + ": " + TakeOpenSslErrors()); };
  // Replies go out in pieces from the event loop: a partial write is normal,
  // and the next attempt may pass the rest from wherever it now lives.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_min_proto_version(ctx, TlsVersion(web.min_version)) != 1) return fail("min_version");
  if (!web.max_version.empty() && SSL_CTX_set_max_proto_version(ctx, TlsVersion(web.max_version)) != 1)
    return fail("max_version");
  // TLS 1.2: forward-secret AEAD suites unless the file names others (TLS 1.3's are all of that kind).
  const std::string suites = web.cipher_suites.empty() ? "ECDHE+AESGCM:ECDHE+CHACHA20" : [&] {
    std::string list;
    for (const auto& name : web.cipher_suites) list += (list.empty() ? "" : ":") + name;
    return list;
  }();
  if (SSL_CTX_set_cipher_list(ctx, suites.c_str()) != 1) return fail("cipher_suites");
  if (SSL_CTX_use_certificate_chain_file(ctx, web.cert_file.c_str()) != 1) return fail("cert_file " + web.cert_file);
  if (SSL_CTX_use_PrivateKey_file(ctx, web.key_file.c_str(), SSL_FILETYPE_PEM) != 1) return fail("key_file " + web.key_file);
  if (SSL_CTX_check_private_key(ctx) != 1) return fail("key_file does not match cert_file");
  int mode = SSL_VERIFY_NONE;
  const std::string& type = web.client_auth_type;
  if (type == "RequestClientCert" || type == "VerifyClientCertIfGiven") mode = SSL_VERIFY_PEER;
  if (type == "RequireAnyClientCert" || type == "RequireAndVerifyClientCert")
    mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  if (!web.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, web.client_ca_file.c_str(), nullptr) != 1)
      return fail("client_ca_file " + web.client_ca_file);
    SSL_CTX_set_client_CA_list(ctx, SSL_load_client_CA_file(web.client_ca_file.c_str()));
  }
  // Request/RequireAny take any certificate: the verify callback accepts all.
  const bool any = type == "RequestClientCert" || type == "RequireAnyClientCert";
  SSL_verify_cb accept_any = [](int, X509_STORE_CTX*) { return 1; };
  SSL_CTX_set_verify(ctx, mode, any ? accept_any : nullptr);
  return out;
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

}  // namespace gputriage
