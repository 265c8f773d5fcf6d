// The servers' web configuration (the agent's and `serve`'s), in the Prometheus exporter-toolkit's
// web-config format (the file node_exporter and dcgm-exporter take with
// --web.config.file), so one file serves every exporter on a node:
//
//   tls_server_config:
//     cert_file: agent.crt          # relative paths: to the config file
//     key_file: agent.key
//     client_auth_type: RequireAndVerifyClientCert   # optional, with client_ca_file
//     client_ca_file: ca.crt
//     min_version: TLS12            # default TLS12
//   http_server_config:
//     headers: {X-Frame-Options: deny}
//   basic_auth_users:
//     prometheus: $2y$10$...        # bcrypt (htpasswd -nBC 10 USER)
//
// Keys this agent does not implement (curve_preferences, client_allowed_sans,
// inline cert/key) are errors, never silently ignored;
// unknown keys are errors as in exporter-toolkit.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gputriage/status.h"
#include "src/net/http_request.h"

namespace gputriage {

struct WebConfig {
  std::string path;  // the file, for messages
  // tls_server_config (TLS when cert_file is set)
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  std::string client_auth_type = "NoClientCert";
  std::string min_version = "TLS12";
  std::string max_version;  // "": the library's highest
  // TLS 1.2's suites in OpenSSL's names, from Go's names in cipher_suites;
  // empty: ECDHE with AES-GCM or ChaCha20-Poly1305 only (no static-RSA key
  // exchange, no CBC). TLS 1.3's suites are not configurable, as in Go.
  std::vector<std::string> cipher_suites;
  // http_server_config.headers
  std::vector<std::pair<std::string, std::string>> headers;
  // basic_auth_users: user → bcrypt hash
  std::vector<std::pair<std::string, std::string>> basic_auth_users;

  // The fields the file itself sets ("tls_server_config.min_version", ...): a
  // reload may lower a guard only where the new file says so explicitly.
  std::vector<std::string> fields_set;

  bool tls() const { return !cert_file.empty(); }
  bool Sets(const std::string& field) const;
};

/// Why `next` may not replace `running` on a reload ("" when it may): it would
/// lower a guard the running config has (TLS, passwords, client certificates,
/// the lowest TLS version, a security header) without naming the field that
/// lowers it. A file cut short on its way to disk leaves fields out; it must
/// never open a server that was closed.
std::string ReloadLowersAGuard(const WebConfig& running, const WebConfig* next);

/// Reads and checks a web-config file. Errors name the file, the line and the
/// field: YAML syntax, an unknown or unsupported key, a cert without its key,
/// an unreadable file, a password that is not a bcrypt hash.
StatusOr<WebConfig> LoadWebConfig(const std::string& path);

/// Checks HTTP basic auth against the bcrypt hashes. bcrypt is slow by design
/// (tens of ms at cost 10), so a verified user and password is remembered
/// (as a SHA-256 digest, not the password) and later scrapes cost a hash.
class BasicAuthVerifier {
 public:
  explicit BasicAuthVerifier(std::vector<std::pair<std::string, std::string>> users);
  bool enabled() const { return !users_.empty(); }
  /// Whether an `Authorization` header value names a user with the right password.
  bool Verify(const std::string& authorization);

  /// What Verify would answer without a bcrypt: allowed or denied when this
  /// user and password were checked before (or the value is not Basic),
  /// unknown otherwise. Cheap: the servers call it on their event loop to
  /// send unknown credentials to their slow lane.
  enum class Answer { kAllowed, kDenied, kUnknown };
  Answer Known(const std::string& authorization);

  /// Takes what `earlier` (the verifier before a reload) learned about users
  /// whose hash is the same here: a SIGHUP costs known scrapers no bcrypt, so
  /// a flood of guesses right after one cannot lock them out.
  void InheritFrom(BasicAuthVerifier& earlier);

 private:
  const std::string* HashOf(const std::string& user) const;
  std::vector<std::pair<std::string, std::string>> users_;
  std::string dummy_hash_;
  std::mutex mutex_;
  std::mutex bcrypt_mutex_;
  /// Digests of "user\0password", each with its user, at most kMaxRemembered:
  /// the oldest goes first. (Cleared whole at the limit, a flood of new guesses
  /// made every known answer unknown at once: a request the event loop had just
  /// sent to the fast lane as known could then cost a bcrypt there. Issue 53.)
  struct Remembered {
    static constexpr size_t kMaxRemembered = 1024;
    std::unordered_map<std::string, std::string> user_by_digest;
    std::deque<std::string> oldest_first;
    bool Has(const std::string& digest) const { return user_by_digest.count(digest) != 0; }
    void Add(const std::string& digest, const std::string& user);
  };
  Remembered verified_;  // matched
  Remembered refused_;   // did not
};

/// What a web config asks of every request, swappable while serving (SIGHUP
/// reloads it): basic auth and the extra response headers. TLS is the
/// server's own (HttpServer::SetTls). Both servers use it alike.
class WebAccess {
 public:
  explicit WebAccess(std::shared_ptr<const WebConfig> web = nullptr) { Reload(std::move(web)); }
  /// Later requests use `web` (null: open, no extra headers).
  void Reload(std::shared_ptr<const WebConfig> web);
  bool auth_required() const;
  /// The web config now in force (null: none).
  std::shared_ptr<const WebConfig> config() const;
  /// Whether the request's credentials would cost a bcrypt (the slow lane).
  bool NeedsSlowCheck(const HttpRequest& request) const;
  /// Whether the request may proceed (true when no users are configured).
  bool Allowed(const HttpRequest& request) const;
  /// The 401 reply asking for basic auth.
  static HttpResponse Unauthorized(const std::string& realm);
  /// The configured response headers, set on `response`.
  void AddHeaders(HttpResponse* response) const;

 private:
  struct State {
    std::shared_ptr<const WebConfig> web;
    std::shared_ptr<BasicAuthVerifier> verifier;  // null: no users
  };
  std::shared_ptr<const State> Current() const;
  mutable std::mutex mutex_;
  std::shared_ptr<const State> state_;
};

}  // namespace gputriage
