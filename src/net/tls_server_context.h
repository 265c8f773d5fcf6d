// A server's TLS set-up (OpenSSL, used only in tls_server_context.cc and the
// server's connection code): certificate, key, client-certificate policy and
// protocol versions from a web config. Shared by the connections made while
// it was current; a reloaded web config makes a new one.
#pragma once

#include <memory>
#include <string>

#include "gputriage/status.h"

struct ssl_ctx_st;

namespace gputriage {

struct WebConfig;

class TlsServerContext {
 public:
  /// Errors name the web-config file and what OpenSSL refused (a key that is
  /// not the certificate's, an unreadable CA file, a version pair it rejects).
  static StatusOr<std::shared_ptr<TlsServerContext>> FromWebConfig(const WebConfig& web);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  ssl_ctx_st* native() const { return ctx_; }

 private:
  explicit TlsServerContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

/// The OpenSSL errors queued on this thread, as one line (and the queue emptied).
std::string TakeOpenSslErrors();

}  // namespace gputriage
