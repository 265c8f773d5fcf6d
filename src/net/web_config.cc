#include "src/net/web_config.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "src/util/strings.h"
#include "src/util/yaml_tree.h"

namespace gputriage {
namespace {

/// "FILE:LINE" of a member: its key's line.
std::string Where(const std::string& path, const YamlNode& node) {
  return path + ":" + std::to_string(node.key_line > 0 ? node.key_line : node.line);
}

Status ExpectMapping(const std::string& path, const YamlNode& node, const std::string& name) {
  if (node.kind == YamlNode::Kind::kMapping || node.kind == YamlNode::Kind::kNull) return Status::Ok();
  return InvalidArgumentError(Where(path, node) + ": " + name + " must be a mapping");
}

StatusOr<std::string> ScalarOf(const std::string& path, const YamlNode& node, const std::string& name) {
  if (node.kind == YamlNode::Kind::kNull) return std::string();
  if (node.kind != YamlNode::Kind::kScalar)
    return InvalidArgumentError(Where(path, node) + ": " + name + " must be a single value");
  return node.scalar;
}

/// A path in the file, relative to the file's own directory (as exporter-toolkit reads them).
std::string Resolve(const std::string& config_path, const std::string& file) {
  if (file.empty() || file.front() == '/') return file;
  const size_t slash = config_path.rfind('/');
  return slash == std::string::npos ? file : config_path.substr(0, slash + 1) + file;
}

Status Readable(const std::string& path, const YamlNode& node, const std::string& name, const std::string& file) {
  std::ifstream in(file);
  if (!in) return InvalidArgumentError(Where(path, node) + ": " + name + " " + file + " cannot be read");
  return Status::Ok();
}

bool IsBcrypt(const std::string& hash) {
  return hash.size() == 60 && (StartsWith(hash, "$2a$") || StartsWith(hash, "$2b$") || StartsWith(hash, "$2y$"));
}

/// RFC 4648 base64; false on anything else.
bool DecodeBase64(std::string_view in, std::string* out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

std::string Sha256(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

/// Whether `password` hashes to `hash` (bcrypt through libxcrypt), compared in constant time.
bool BcryptMatches(const std::string& password, const std::string& hash) {
  struct crypt_data data {};
  const char* out = crypt_r(password.c_str(), hash.c_str(), &data);
  if (out == nullptr || out[0] == '*') return false;
  const std::string computed = out;
  return computed.size() == hash.size() && CRYPTO_memcmp(computed.data(), hash.data(), hash.size()) == 0;
}

/// exporter-toolkit's rule (web/handler.go, extraHTTPHeaders): only these
/// response headers may be configured, the enumerated ones only with their
/// values, so that every exporter on a node answers alike. Content-Type is
/// the server's own: configured, it would go out twice.
Status CheckExtraHeader(const std::string& path, const YamlNode& node, const std::string& name, const std::string& value) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> kAllowed = {
      {"Strict-Transport-Security", {}},
      {"X-Content-Type-Options", {"nosniff"}},
      {"X-Frame-Options", {"deny", "sameorigin"}},
      {"X-XSS-Protection", {}},
      {"Content-Security-Policy", {}},
  };
  for (const auto& [allowed, values] : kAllowed) {
    if (allowed != name) continue;
    if (value.find_first_of("\r\n") != std::string::npos)
      return InvalidArgumentError(Where(path, node) + ": header " + name + ": the value has a line break");
    if (!values.empty() && std::find(values.begin(), values.end(), value) == values.end()) {
      std::string expected;
      for (const auto& v : values) expected += (expected.empty() ? "" : ", ") + v;
      return InvalidArgumentError(Where(path, node) + ": header " + name + ": '" + value + "' is not one of " + expected);
    }
    return Status::Ok();
  }
  return InvalidArgumentError(Where(path, node) + ": header " + name +
                              " cannot be configured (as in exporter-toolkit, only Strict-Transport-Security, "
                              "X-Content-Type-Options, X-Frame-Options, X-XSS-Protection and Content-Security-Policy)");
}

/// cipher_suites as exporter-toolkit reads it (Go's crypto/tls names), into
/// OpenSSL's names for TLS 1.2. TLS 1.3's names are accepted and change
/// nothing: Go does not let them be configured either.
Status ReadCipherSuites(const std::string& path, const YamlNode& node, std::vector<std::string>* out) {
  static const std::pair<const char*, const char*> kGoToOpenSsl[] = {
      {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"},
      {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"},
      {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
      {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"},
      {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"},
      {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"},
      {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"},
      {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"},
      {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256"},
      {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256"},
      {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"},
      {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"},
      {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"},
      {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA"},
      {"TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256"},
  };
  static const char* kTls13[] = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"};
  if (node.kind != YamlNode::Kind::kSequence)
    return InvalidArgumentError(Where(path, node) + ": tls_server_config.cipher_suites must be a list of suite names");
  for (const YamlNode& item : node.items) {
    if (item.kind != YamlNode::Kind::kScalar)
      return InvalidArgumentError(Where(path, item) + ": tls_server_config.cipher_suites: each entry is one suite name");
    if (std::find_if(std::begin(kTls13), std::end(kTls13), [&](const char* n) { return item.scalar == n; }) !=
        std::end(kTls13))
      continue;
    const auto* known = std::find_if(std::begin(kGoToOpenSsl), std::end(kGoToOpenSsl),
                                     [&](const auto& pair) { return item.scalar == pair.first; });
    if (known == std::end(kGoToOpenSsl))
      return InvalidArgumentError(Where(path, item) + ": tls_server_config.cipher_suites: '" + item.scalar +
                                  "' is not a TLS 1.2 suite this agent offers (Go's names, e.g. "
                                  "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)");
    if (std::find(out->begin(), out->end(), known->second) == out->end()) out->push_back(known->second);
  }
  if (out->empty())
    return InvalidArgumentError(Where(path, node) + ": tls_server_config.cipher_suites names no TLS 1.2 suite");
  return Status::Ok();
}

}  // namespace

StatusOr<WebConfig> LoadWebConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError("--web-config-file " + path + ": cannot be read");
  // At most a byte past ParseYaml's limit is read: a huge file is refused by size.
  std::string file_text(size_t{1} << 20 | 1, '\0');
  in.read(file_text.data(), static_cast<std::streamsize>(file_text.size()));
  file_text.resize(static_cast<size_t>(in.gcount()));
  auto doc = ParseYaml(file_text, path);
  if (!doc.ok()) return doc.status();
  WebConfig c;
  c.path = path;
  if (Status s = ExpectMapping(path, *doc, "the web config"); !s.ok()) return s;
  for (const auto& [key, node] : doc->members) {
    if (key == "tls_server_config") {
      if (Status s = ExpectMapping(path, node, key); !s.ok()) return s;
      for (const auto& [field, value] : node.members) {
        if (field == "cipher_suites") {
          if (Status s = ReadCipherSuites(path, value, &c.cipher_suites); !s.ok()) return s;
          c.fields_set.push_back("tls_server_config.cipher_suites");
          continue;
        }
        if (field == "cert" || field == "key" || field == "client_ca" ||
            field == "curve_preferences" || field == "client_allowed_sans" || field == "prefer_server_cipher_suites")
          return InvalidArgumentError(Where(path, value) + ": tls_server_config." + field +
                                      " is not supported by the gputriage agent (use cert_file/key_file/client_ca_file)");
        auto text = ScalarOf(path, value, "tls_server_config." + field);
        if (!text.ok()) return text.status();
        c.fields_set.push_back("tls_server_config." + field);
        if (field == "cert_file") c.cert_file = Resolve(path, *text);
        else if (field == "key_file") c.key_file = Resolve(path, *text);
        else if (field == "client_ca_file") c.client_ca_file = Resolve(path, *text);
        else if (field == "client_auth_type") c.client_auth_type = *text;
        else if (field == "min_version") c.min_version = *text;
        else if (field == "max_version") c.max_version = *text;
        else
          return InvalidArgumentError(Where(path, value) + ": unknown field tls_server_config." + field);
      }
    } else if (key == "http_server_config") {
      if (Status s = ExpectMapping(path, node, key); !s.ok()) return s;
      for (const auto& [field, value] : node.members) {
        if (field == "headers") {
          if (Status s = ExpectMapping(path, value, "http_server_config.headers"); !s.ok()) return s;
          c.fields_set.push_back("http_server_config.headers");
          for (const auto& [name, header] : value.members) {
            auto text = ScalarOf(path, header, "header " + name);
            if (!text.ok()) return text.status();
            if (Status s = CheckExtraHeader(path, header, name, *text); !s.ok()) return s;
            c.headers.emplace_back(name, *text);
          }
        } else if (field == "http2") {
          // Prometheus scrapes over HTTP/1.1; the agent serves only that.
        } else {
          return InvalidArgumentError(Where(path, value) + ": unknown field http_server_config." + field);
        }
      }
    } else if (key == "basic_auth_users") {
      if (Status s = ExpectMapping(path, node, key); !s.ok()) return s;
      c.fields_set.push_back("basic_auth_users");
      for (const auto& [user, hash] : node.members) {
        auto text = ScalarOf(path, hash, "basic_auth_users." + user);
        if (!text.ok()) return text.status();
        if (!IsBcrypt(*text))
          return InvalidArgumentError(Where(path, hash) + ": basic_auth_users." + user +
                                      " must be a bcrypt hash ($2y$..., 60 characters; htpasswd -nBC 10 " + user + ")");
        c.basic_auth_users.emplace_back(user, *text);
      }
    } else {
      return InvalidArgumentError(Where(path, node) + ": unknown field " + key);
    }
  }
  const YamlNode* tls = doc->Find("tls_server_config");
  if (tls != nullptr && tls->kind == YamlNode::Kind::kMapping) {
    if (c.cert_file.empty() != c.key_file.empty())
      return InvalidArgumentError(Where(path, *tls) + ": tls_server_config needs both cert_file and key_file");
    if (c.cert_file.empty() && !tls->members.empty())
      return InvalidArgumentError(Where(path, *tls) + ": tls_server_config without cert_file and key_file");
    for (const char* field : {"cert_file", "key_file", "client_ca_file"})
      if (const YamlNode* n = tls->Find(field))
        if (Status s = Readable(path, *n, field, Resolve(path, n->scalar)); !s.ok()) return s;
    static const char* kAuthTypes[] = {"NoClientCert", "RequestClientCert", "RequireAnyClientCert",
                                       "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"};
    if (std::find(std::begin(kAuthTypes), std::end(kAuthTypes), c.client_auth_type) == std::end(kAuthTypes))
      return InvalidArgumentError(Where(path, *tls) + ": client_auth_type '" + c.client_auth_type +
                                  "' is not one of NoClientCert, RequestClientCert, RequireAnyClientCert, "
                                  "VerifyClientCertIfGiven, RequireAndVerifyClientCert");
    const bool verifies = c.client_auth_type == "VerifyClientCertIfGiven" || c.client_auth_type == "RequireAndVerifyClientCert";
    if (verifies && c.client_ca_file.empty())
      return InvalidArgumentError(Where(path, *tls) + ": client_auth_type " + c.client_auth_type + " needs client_ca_file");
    for (const std::string* v : {&c.min_version, &c.max_version})
      if (!v->empty() && *v != "TLS10" && *v != "TLS11" && *v != "TLS12" && *v != "TLS13")
        return InvalidArgumentError(Where(path, *tls) + ": TLS version '" + *v + "' is not TLS10, TLS11, TLS12 or TLS13");
  }
  return c;
}

bool WebConfig::Sets(const std::string& field) const {
  return std::find(fields_set.begin(), fields_set.end(), field) != fields_set.end();
}

namespace {

/// A guard's strength in its field's own order (higher: stricter).
int ClientAuthRank(const std::string& type) {
  static const char* kOrder[] = {"NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven",
                                 "RequireAndVerifyClientCert"};
  for (int i = 0; i < 5; ++i)
    if (type == kOrder[i]) return i;
  return 0;
}

int TlsVersionRank(const std::string& version) { return version.empty() ? 2 : version.back() - '0'; }  // TLS1x

}  // namespace

std::string ReloadLowersAGuard(const WebConfig& running, const WebConfig* next) {
  if (running.tls() && (next == nullptr || !next->tls()))
    return "the new web config has no tls_server_config, which would turn TLS off";
  if (!running.basic_auth_users.empty() && (next == nullptr || next->basic_auth_users.empty()))
    return "the new web config has no basic_auth_users, which would turn passwords off";
  if (next == nullptr) return "";
  if (running.tls() && ClientAuthRank(next->client_auth_type) < ClientAuthRank(running.client_auth_type) &&
      !next->Sets("tls_server_config.client_auth_type"))
    return "the new web config leaves out tls_server_config.client_auth_type, which would lower client certificates "
           "from " + running.client_auth_type + " to " + next->client_auth_type + " (write client_auth_type: " +
           next->client_auth_type + " to mean it)";
  if (running.tls() && TlsVersionRank(next->min_version) < TlsVersionRank(running.min_version) &&
      !next->Sets("tls_server_config.min_version"))
    return "the new web config leaves out tls_server_config.min_version, which would let " + next->min_version +
           " in again where " + running.min_version + " was the lowest (write min_version: " + next->min_version +
           " to mean it)";
  if (!running.headers.empty() && !next->Sets("http_server_config.headers"))
    return "the new web config leaves out http_server_config.headers, which would drop the " +
           running.headers.front().first + " header (write headers: {} to mean it)";
  return "";
}

BasicAuthVerifier::BasicAuthVerifier(std::vector<std::pair<std::string, std::string>> users) : users_(std::move(users)) {
  // Compared against when the user is unknown, so that a reply takes as long
  // for an unknown user as for a wrong password (exporter-toolkit does the same).
  char salt[CRYPT_GENSALT_OUTPUT_SIZE] = {};
  const std::string cost = users_.empty() ? "10" : users_.front().second.substr(4, 2);
  if (crypt_gensalt_rn("$2y$", std::atoi(cost.c_str()), nullptr, 0, salt, sizeof salt) != nullptr) {
    struct crypt_data data {};
    if (const char* h = crypt_r("gputriage", salt, &data); h != nullptr && h[0] != '*') dummy_hash_ = h;
  }
}

/// The user and password of a Basic `Authorization` value; false when it is not one.
static bool SplitBasic(const std::string& authorization, std::string* user, std::string* password) {
  // The scheme is case-insensitive (RFC 9110, 11.1): "basic" and "BASIC" are Basic.
  if (authorization.size() < 6 || authorization[5] != ' ') return false;
  for (size_t i = 0; i < 5; ++i)
    if ((authorization[i] | 0x20) != "basic"[i]) return false;
  std::string decoded;
  if (!DecodeBase64(TrimAsciiSpace(std::string_view(authorization).substr(6)), &decoded)) return false;
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  // crypt() stops at a NUL: "s3cret\0anything" would pass as "s3cret".
  if (decoded.find('\0') != std::string::npos) return false;
  *user = decoded.substr(0, colon);
  *password = decoded.substr(colon + 1);
  return true;
}

BasicAuthVerifier::Answer BasicAuthVerifier::Known(const std::string& authorization) {
  if (users_.empty()) return Answer::kAllowed;
  std::string user, password;
  if (!SplitBasic(authorization, &user, &password)) return Answer::kDenied;
  const std::string digest = Sha256(user + '\0' + password);
  std::lock_guard<std::mutex> lock(mutex_);
  if (verified_.Has(digest)) return Answer::kAllowed;
  if (refused_.Has(digest)) return Answer::kDenied;
  return Answer::kUnknown;
}

bool BasicAuthVerifier::Verify(const std::string& authorization) {
  if (users_.empty()) return true;
  std::string user, password;
  if (!SplitBasic(authorization, &user, &password)) return false;
  const std::string digest = Sha256(user + '\0' + password);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (verified_.Has(digest)) return true;
    if (refused_.Has(digest)) return false;
  }
  const std::string* hash = HashOf(user);
  bool ok;
  {
    // One bcrypt at a time (as exporter-toolkit): a flood of guesses costs one
    // core, never all of them.
    std::lock_guard<std::mutex> lock(bcrypt_mutex_);
    ok = BcryptMatches(password, hash != nullptr ? *hash : dummy_hash_) && hash != nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // Both answers are remembered (bounded: many distinct passwords only cost a
  // bcrypt again), so a repeated wrong guess is refused without one.
  (ok ? verified_ : refused_).Add(digest, user);
  return ok;
}

void BasicAuthVerifier::Remembered::Add(const std::string& digest, const std::string& user) {
  if (Has(digest)) return;
  if (oldest_first.size() >= kMaxRemembered) {
    user_by_digest.erase(oldest_first.front());
    oldest_first.pop_front();
  }
  oldest_first.push_back(digest);
  user_by_digest.emplace(digest, user);
}

const std::string* BasicAuthVerifier::HashOf(const std::string& user) const {
  for (const auto& [name, h] : users_)
    if (name == user) return &h;
  return nullptr;
}

void BasicAuthVerifier::InheritFrom(BasicAuthVerifier& earlier) {
  if (&earlier == this) return;
  std::scoped_lock lock(mutex_, earlier.mutex_);
  // A user's answers carry over only while the user's hash is unchanged (an
  // unknown user stays unknown: its answer was "no" and still is).
  const auto same = [&](const std::string& user) {
    const std::string* now = HashOf(user);
    const std::string* before = earlier.HashOf(user);
    return (now == nullptr && before == nullptr) || (now != nullptr && before != nullptr && *now == *before);
  };
  const auto carry = [&](const Remembered& from, Remembered& to) {
    for (const std::string& digest : from.oldest_first)  // oldest first: the same ones go first here
      if (const auto it = from.user_by_digest.find(digest); it != from.user_by_digest.end() && same(it->second))
        to.Add(digest, it->second);
  };
  carry(earlier.verified_, verified_);
  carry(earlier.refused_, refused_);
}

void WebAccess::Reload(std::shared_ptr<const WebConfig> web) {
  auto state = std::make_shared<State>();
  if (web && !web->basic_auth_users.empty()) {
    state->verifier = std::make_shared<BasicAuthVerifier>(web->basic_auth_users);
    if (const auto before = Current(); before && before->verifier) state->verifier->InheritFrom(*before->verifier);
  }
  state->web = std::move(web);
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = std::move(state);
}

std::shared_ptr<const WebAccess::State> WebAccess::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

std::shared_ptr<const WebConfig> WebAccess::config() const { return Current()->web; }

bool WebAccess::auth_required() const { return Current()->verifier != nullptr; }

bool WebAccess::NeedsSlowCheck(const HttpRequest& request) const {
  const auto state = Current();
  return state->verifier && state->verifier->Known(request.Header("Authorization")) == BasicAuthVerifier::Answer::kUnknown;
}

bool WebAccess::Allowed(const HttpRequest& request) const {
  const auto state = Current();
  return !state->verifier || state->verifier->Verify(request.Header("Authorization"));
}

HttpResponse WebAccess::Unauthorized(const std::string& realm) {
  HttpResponse r = HttpResponse::Text(401, "Unauthorized\n");
  r.SetHeader("WWW-Authenticate", "Basic realm=\"" + realm + "\"");
  return r;
}

void WebAccess::AddHeaders(HttpResponse* response) const {
  const auto state = Current();
  if (!state->web) return;
  for (const auto& [name, value] : state->web->headers) response->SetHeader(name, value);
}

}  // namespace gputriage
