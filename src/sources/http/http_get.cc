#include "src/sources/http/http_get.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "src/util/strings.h"

namespace gputriage {

std::string UrlEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

StatusOr<HttpTarget> ParseHttpUrl(const std::string& url, const std::string& default_path) {
  HttpTarget t;
  std::string rest = url;
  if (const size_t sep = rest.find("://"); sep != std::string::npos) {
    t.scheme = rest.substr(0, sep);
    rest = rest.substr(sep + 3);
    if (t.scheme != "http" && t.scheme != "https")
      return InvalidArgumentError(url + ": unsupported URL scheme '" + t.scheme + "' (use http:// or https://)");
  } else {
    t.scheme = "http";
  }
  const size_t slash = rest.find('/');
  t.host = rest.substr(0, slash);
  t.path = slash == std::string::npos ? default_path : rest.substr(slash);
  if (t.host.empty() || t.host.find_first_of(" \t\r\n@") != std::string::npos)
    return InvalidArgumentError(url + ": no usable host in the URL (expected e.g. http://node1:9400/metrics)");
  if (t.path.find_first_of(" \t\r\n") != std::string::npos)
    return InvalidArgumentError(url + ": spaces or line breaks in the URL's path (percent-encode them)");
  if (const size_t colon = t.host.rfind(':'); colon != std::string::npos && t.host.back() != ']') {
    const std::string port = t.host.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) == 0 || std::stoi(port) > 65535)
      return InvalidArgumentError(url + ": bad port '" + port + "'");
  }
  return t;
}

namespace {

// The system's certificate authorities. OpenSSL's default paths are the ones
// its build was configured with (Debian's: /usr/lib/ssl), which other
// distributions do not have, and the wheel's OpenSSL is Debian's, linked in: so
// where the default bundle is not there (and SSL_CERT_FILE / SSL_CERT_DIR name
// none), the first bundle found of the places Linux distributions keep theirs.
constexpr const char* kSystemCaBundles[] = {
    "/etc/ssl/certs/ca-certificates.crt",                 // Debian, Ubuntu, Arch, Gentoo
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // RHEL, Rocky, Fedora, CentOS 7+
    "/etc/pki/tls/certs/ca-bundle.crt",                   // older Fedora, RHEL 6
    "/etc/ssl/ca-bundle.pem",                             // openSUSE, SLES
    "/etc/ssl/cert.pem",                                  // Alpine
};

void LoadSystemCertificates(SSL_CTX* ctx) {
  SSL_CTX_set_default_verify_paths(ctx);
  if (std::getenv("SSL_CERT_FILE") != nullptr || std::getenv("SSL_CERT_DIR") != nullptr) return;  // the user's choice
  if (access(X509_get_default_cert_file(), R_OK) == 0) return;  // the defaults found a bundle: loaded once
  for (const char* bundle : kSystemCaBundles)
    if (access(bundle, R_OK) == 0 && SSL_CTX_load_verify_locations(ctx, bundle, nullptr) == 1) break;
  // No bundle at all: the defaults stand, and a failed verification says why.
  ERR_clear_error();
}

using Clock = std::chrono::steady_clock;

// A reply's status line and headers: the same bound our servers put on a
// request's head (Go's clients allow 1 MiB, curl 100 KiB). A server that sends
// an endless head is refused here, not read until memory runs out.
constexpr size_t kMaxHeadBytes = 64 * 1024;  // said as "64 KiB" in messages
constexpr size_t kMaxHeaderLines = 200;
constexpr size_t kMaxChunkLine = 1024;  // a chunk-size line and its extensions
constexpr int kMaxInterimReplies = 8;   // 1xx replies read past before the real one

std::string Base64(const std::string& in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], kAlphabet[v & 63]};
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

std::string SizeText(size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

/// "host:port" (or "[v6]:port") into the name to resolve and the port.
void SplitHostPort(const std::string& host_port, bool tls, std::string* host, std::string* port) {
  *port = tls ? "443" : "80";
  *host = host_port;
  if (!host_port.empty() && host_port.front() == '[') {
    const size_t close = host_port.find(']');
    *host = host_port.substr(1, close - 1);
    if (close + 1 < host_port.size() && host_port[close + 1] == ':') *port = host_port.substr(close + 2);
    return;
  }
  if (const size_t colon = host_port.rfind(':'); colon != std::string::npos) {
    *host = host_port.substr(0, colon);
    *port = host_port.substr(colon + 1);
  }
}

/// The reply's head as read: status and the framing headers.
struct ReplyHead {
  int status = 0;
  int64_t content_length = -1;  // -1: none given
  bool chunked = false;
  bool close = false;           // Connection: close, or HTTP/1.0 without keep-alive
  std::string location;
};

/// Parses a complete head (without its blank line); false with `why` when it is not HTTP/1.x.
bool ParseReplyHead(std::string_view head, ReplyHead* out, std::string* why) {
  size_t line_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ' ||
      !std::isdigit(static_cast<unsigned char>(status_line[9])) || !std::isdigit(static_cast<unsigned char>(status_line[10])) ||
      !std::isdigit(static_cast<unsigned char>(status_line[11]))) {
    *why = "not an HTTP/1.x reply (it began '" + Printable(std::string(status_line.substr(0, 40))) + "')";
    return false;
  }
  out->status = (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
  const bool http10 = status_line[7] == '0';
  bool keep_alive_10 = false;
  size_t lines = 0;
  while (line_end != std::string_view::npos) {
    const size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string_view line = head.substr(start, line_end == std::string_view::npos ? std::string_view::npos : line_end - start);
    if (line.empty()) continue;
    if (++lines > kMaxHeaderLines) {
      *why = "more than " + std::to_string(kMaxHeaderLines) + " header lines";
      return false;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // not a header: ignored, as browsers do
    const std::string name = AsciiLower(std::string(line.substr(0, colon)));
    const std::string value(TrimAsciiSpace(line.substr(colon + 1)));
    if (name == "content-length") {
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 0) {
        *why = "a Content-Length that is not a number: '" + Printable(value.substr(0, 40)) + "'";
        return false;
      }
      out->content_length = n;
    } else if (name == "transfer-encoding") {
      out->chunked = AsciiLower(value).find("chunked") != std::string::npos;
    } else if (name == "connection") {
      const std::string v = AsciiLower(value);
      if (v.find("close") != std::string::npos) out->close = true;
      if (v.find("keep-alive") != std::string::npos) keep_alive_10 = true;
    } else if (name == "location") {
      out->location = value;
    }
  }
  if (http10 && !keep_alive_10) out->close = true;
  return true;
}

/// Why the last OpenSSL call failed, for a message.
std::string TlsErrorText() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "the TLS connection failed";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// Host names are looked up on a thread of their own: getaddrinfo takes no
// deadline, and a DNS server that never answers holds it for the resolver's own
// timeouts (30 s and more with resolv.conf's defaults). The request waits until
// its deadline; a lookup left behind finishes on its own and frees what it found.
// At most kMaxLookups run at once, so a dead DNS server cannot pile up threads.
constexpr int kMaxLookups = 32;
std::atomic<int> g_lookups_running{0};
std::atomic<HostLookupForTesting> g_host_lookup{nullptr};

struct AddrInfoFree {
  void operator()(addrinfo* a) const {
    if (a != nullptr) freeaddrinfo(a);
  }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoFree>;

struct Lookup {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false, abandoned = false;
  int error = 0;
  addrinfo* found = nullptr;
};

addrinfo StreamHints(int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  return hints;
}

/// The addresses of `host`:`port`, by `deadline`. `what` starts the error.
StatusOr<AddrInfoList> LookUpHost(const std::string& what, const std::string& host, const std::string& port,
                                  Clock::time_point deadline) {
  const addrinfo numeric = StreamHints(AI_NUMERICHOST);
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &numeric, &found) == 0) return AddrInfoList(found);  // no lookup
  if (g_lookups_running.fetch_add(1) >= kMaxLookups) {
    g_lookups_running.fetch_sub(1);
    return IoError(fmt::format("{}: could not look up host '{}': {} lookups are still waiting for the DNS server",
                               what, host, kMaxLookups));
  }
  auto lookup = std::make_shared<Lookup>();
  const HostLookupForTesting fn = g_host_lookup.load();
  std::thread([lookup, host, port, fn] {
    const addrinfo hints = StreamHints(0);
    addrinfo* result = nullptr;
    const int e = fn != nullptr ? fn(host.c_str(), port.c_str(), &hints, &result)
                                : getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
    {
      std::lock_guard<std::mutex> lock(lookup->mutex);
      if (lookup->abandoned) {
        if (e == 0) freeaddrinfo(result);
      } else {
        lookup->error = e;
        lookup->found = e == 0 ? result : nullptr;
      }
      lookup->done = true;
    }
    lookup->done_cv.notify_one();
    g_lookups_running.fetch_sub(1);
  }).detach();
  std::unique_lock<std::mutex> lock(lookup->mutex);
  if (!lookup->done_cv.wait_until(lock, deadline, [&] { return lookup->done; })) {
    lookup->abandoned = true;
    return IoError(fmt::format("{}: timed out looking up host '{}' (the DNS server did not answer in time)", what, host));
  }
  if (lookup->error != 0)
    return IoError(what + ": could not connect: no such host '" + host + "' (" + gai_strerror(lookup->error) + ")");
  return AddrInfoList(lookup->found);
}

}  // namespace

void SetHostLookupForTesting(HostLookupForTesting lookup) { g_host_lookup.store(lookup); }

/// One connection (plain or TLS) and the requests on it. Every wait is a
/// poll() against the request's deadline: a server that trickles a byte a
/// second, or never answers, costs the caller its timeout and no more.
struct HttpClient::Impl {
  HttpTarget target;
  std::string where;  // the URL, for messages
  int timeout_ms;
  std::optional<Clock::time_point> deadline;
  std::string authorization;  // the header's value, or ""
  std::string ca_file;

  int fd = -1;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  std::string buffered;  // read past the end of the last reply (never reused: the connection closes then)
  Clock::time_point request_deadline;

  Impl(HttpTarget t, int timeout, const HttpAuth& auth)
      : target(std::move(t)), where(target.scheme + "://" + target.host + target.path), timeout_ms(timeout) {
    if (!auth.bearer_token.empty()) authorization = "Bearer " + auth.bearer_token;
    else if (!auth.username.empty()) authorization = "Basic " + Base64(auth.username + ":" + auth.password);
    ca_file = auth.ca_file;
  }
  ~Impl() {
    Disconnect();
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }

  void Disconnect() {
    if (ssl != nullptr) {
      SSL_free(ssl);
      ssl = nullptr;
    }
    if (fd >= 0) close(fd);
    fd = -1;
    buffered.clear();
  }

  int LeftMs() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(request_deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
  }

  /// Waits until the socket can be read (or written); false at the deadline.
  bool WaitFor(short events) {
    for (;;) {
      const int left = LeftMs();
      if (left <= 0) return false;
      pollfd p{fd, events, 0};
      const int n = poll(&p, 1, left);
      if (n > 0) return true;
      if (n == 0) return false;
      if (errno != EINTR) return true;  // the next call reports the error
    }
  }

  Status TimedOut(const std::string& what, int budget_ms) const {
    return IoError(fmt::format("{}: timed out: no complete reply within {:.1f} s", what, budget_ms / 1000.0));
  }

  Status Connect(const std::string& what, int budget_ms) {
    std::string host, port;
    SplitHostPort(target.host, target.scheme == "https", &host, &port);
    auto found = LookUpHost(what, host, port, request_deadline);
    if (!found.ok()) return found.status();
    std::string why = "no address";
    for (addrinfo* a = found->get(); a != nullptr && fd < 0; a = a->ai_next) {
      const int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (s < 0) continue;
      fd = s;
      if (connect(s, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
        why = std::strerror(errno);
        close(s);
        fd = -1;
        continue;
      }
      if (!WaitFor(POLLOUT)) {
        Disconnect();
        return IoError(fmt::format("{}: timed out connecting ({:.1f} s)", what, budget_ms / 1000.0));
      }
      int error = 0;
      socklen_t len = sizeof error;
      getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0) {
        why = std::strerror(error);
        close(s);
        fd = -1;
      }
    }
    if (fd < 0) return IoError(what + ": could not connect (" + why + ")");
    const int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    if (target.scheme == "https") return StartTls(what, host, budget_ms);
    return Status::Ok();
  }

  Status StartTls(const std::string& what, const std::string& host, int budget_ms) {
    if (ctx == nullptr) {
      ctx = SSL_CTX_new(TLS_client_method());
      if (ctx == nullptr) return IoError(what + ": " + TlsErrorText());
      SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
      if (ca_file.empty()) {
        LoadSystemCertificates(ctx);
      } else if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
        return IoError(what + ": cannot read the CA file " + ca_file + ": " + TlsErrorText());
      }
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    }
    ssl = SSL_new(ctx);
    if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) return IoError(what + ": " + TlsErrorText());
    SSL_set_tlsext_host_name(ssl, host.c_str());
    // The certificate must name the host (an IP address is checked as one).
    if (X509_VERIFY_PARAM* param = SSL_get0_param(ssl); param != nullptr) {
      if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) SSL_set1_host(ssl, host.c_str());
    }
    for (;;) {
      const int r = SSL_connect(ssl);
      if (r == 1) return Status::Ok();
      const int e = SSL_get_error(ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (!WaitFor(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
          Disconnect();
          return IoError(fmt::format("{}: timed out in the TLS handshake ({:.1f} s)", what, budget_ms / 1000.0));
        }
        continue;
      }
      const long verify = SSL_get_verify_result(ssl);
      const std::string text = verify != X509_V_OK
                                   ? std::string("the server's TLS certificate was not accepted: ") +
                                         X509_verify_cert_error_string(verify)
                                   : "the TLS connection failed: " + TlsErrorText();
      ERR_clear_error();
      Disconnect();
      return IoError(what + ": " + text);
    }
  }

  /// Sends all of `data`; false when the connection closed or the deadline passed (*timed_out).
  bool SendAll(const std::string& data, bool* timed_out) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n;
      if (ssl != nullptr) {
        const int r = SSL_write(ssl, data.data() + sent, static_cast<int>(std::min<size_t>(data.size() - sent, 1 << 20)));
        if (r <= 0) {
          const int e = SSL_get_error(ssl, r);
          if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return (ERR_clear_error(), false);
          if (!WaitFor(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) return (*timed_out = true, false);
          continue;
        }
        n = r;
      } else {
        n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
          if (!WaitFor(POLLOUT)) return (*timed_out = true, false);
          continue;
        }
      }
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  /// Reads what the connection has (waiting for it) onto `*into`: >0 bytes
  /// read, 0 the server closed, -1 an error, -2 the deadline passed.
  ssize_t ReadSome(std::string* into, size_t at_most) {
    char buf[16384];
    const size_t want = std::min(sizeof buf, std::max<size_t>(at_most, 1));
    for (;;) {
      if (ssl != nullptr) {
        const int r = SSL_read(ssl, buf, static_cast<int>(want));
        if (r > 0) return into->append(buf, static_cast<size_t>(r)), r;
        const int e = SSL_get_error(ssl, r);
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
          if (!WaitFor(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) return -2;
          continue;
        }
        ERR_clear_error();
        return e == SSL_ERROR_SYSCALL ? 0 : -1;  // a close without close_notify reads as the end
      }
      const ssize_t n = recv(fd, buf, want, 0);
      if (n > 0) return into->append(buf, static_cast<size_t>(n)), n;
      if (n == 0) return 0;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!WaitFor(POLLIN)) return -2;
    }
  }

  /// Whether a reply could not be read because a kept-alive connection had
  /// been closed by the server before this request (it is then sent again once).
  struct Failure {
    Status status;
    bool stale = false;  // nothing at all came back on a reused connection
  };

  StatusOr<HttpReply> Exchange(const std::string& request, size_t max_bytes, const std::string& what, int budget_ms,
                               bool reused, Failure* failure) {
    bool timed_out = false;
    if (!SendAll(request, &timed_out)) {
      failure->stale = reused && !timed_out;
      return timed_out ? TimedOut(what, budget_ms) : IoError(what + ": the request could not be sent (the connection closed)");
    }
    std::string in = std::move(buffered);
    buffered.clear();
    ReplyHead head;
    // Interim replies (100 Continue) come before the real one: a few are read
    // past, a server sending them without end is an error (it had recursed).
    for (int interim = 0;; ++interim) {
      if (interim > kMaxInterimReplies)
        return IoError(what + ": more than " + std::to_string(kMaxInterimReplies) + " interim (1xx) replies");
      size_t head_end;
      while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
        if (in.size() > kMaxHeadBytes)
          return DataLossError(what + ": the reply's head is over 64 KiB without its end; not read (is this an HTTP server?)");
        const ssize_t n = ReadSome(&in, kMaxHeadBytes + 4 - in.size());
        if (n == -2) return TimedOut(what, budget_ms);
        if (n <= 0) {
          failure->stale = reused && in.empty() && interim == 0;
          return IoError(what + ": the reply could not be read (the connection closed early, or it is not HTTP)");
        }
      }
      if (head_end > kMaxHeadBytes) return DataLossError(what + ": the reply's head is over 64 KiB; not read");
      head = ReplyHead{};
      std::string why;
      if (!ParseReplyHead(std::string_view(in).substr(0, head_end), &head, &why)) return IoError(what + ": " + why);
      in.erase(0, head_end + 4);
      if (head.status >= 200 || head.status < 100) break;
    }
    HttpReply reply;
    reply.status = head.status;
    ASSIGN_OR_RETURN(reply.body, ReadBody(head, std::move(in), max_bytes, what, budget_ms));
    if (head.close) Disconnect();
    if (head.status >= 300 && head.status < 400 && head.status != 304)
      return IoError(fmt::format("{}: HTTP {} redirect{} not followed (credentials stay with {})", what, head.status,
                                 head.location.empty() ? "" : " to " + Printable(head.location.substr(0, 200)),
                                 target.host));
    return reply;
  }

  Status TooLarge(const std::string& what, size_t max_bytes) const {
    return DataLossError(what + ": reply larger than " + SizeText(max_bytes) + "; not read");
  }

  /// The body as the head frames it: Content-Length, chunked, or up to the close.
  StatusOr<std::string> ReadBody(const ReplyHead& head, std::string in, size_t max_bytes, const std::string& what,
                                 int budget_ms) {
    const auto more = [&](std::string* into, size_t want) -> Status {
      const ssize_t n = ReadSome(into, want);
      if (n == -2) return TimedOut(what, budget_ms);
      if (n <= 0) return IoError(what + ": the reply was cut off (the connection closed before its end)");
      return Status::Ok();
    };
    if (head.status == 204 || head.status == 304) return std::string();
    if (head.chunked) {
      std::string body;
      for (;;) {
        size_t line_end;
        while ((line_end = in.find("\r\n")) == std::string::npos) {
          if (in.size() > kMaxChunkLine) return IoError(what + ": a chunk-size line over 1 KiB (not HTTP chunking)");
          RETURN_IF_ERROR(more(&in, 4096));
        }
        char* end = nullptr;
        const std::string size_text = in.substr(0, line_end);
        const unsigned long long size = std::strtoull(size_text.c_str(), &end, 16);
        if (end == size_text.c_str()) return IoError(what + ": a chunk size that is not hexadecimal");
        in.erase(0, line_end + 2);
        if (size == 0) {
          // Trailers, if any, up to the blank line (bounded as a head is).
          while (in.find("\r\n") != 0 && in.find("\r\n\r\n") == std::string::npos) {
            if (in.size() > kMaxHeadBytes) return IoError(what + ": trailers over 64 KiB");
            RETURN_IF_ERROR(more(&in, 4096));
          }
          return body;
        }
        if (size > max_bytes || body.size() + size > max_bytes) {
          Disconnect();
          return TooLarge(what, max_bytes);
        }
        while (in.size() < size + 2) RETURN_IF_ERROR(more(&in, size + 2 - in.size()));
        body.append(in, 0, size);
        in.erase(0, size + 2);
      }
    }
    if (head.content_length >= 0) {
      if (static_cast<uint64_t>(head.content_length) > max_bytes) {
        Disconnect();
        return TooLarge(what, max_bytes);
      }
      const size_t length = static_cast<size_t>(head.content_length);
      in.reserve(length);  // once: growing by doubling would hold two copies at the end
      while (in.size() < length) RETURN_IF_ERROR(more(&in, length - in.size()));
      in.resize(length);  // anything after it is not ours to keep
      return in;
    }
    // Neither: the body runs to the close, and the connection is not reused.
    for (;;) {
      if (in.size() > max_bytes) {
        Disconnect();
        return TooLarge(what, max_bytes);
      }
      const ssize_t n = ReadSome(&in, max_bytes + 1 - in.size());
      if (n == -2) return TimedOut(what, budget_ms);
      if (n <= 0) break;
    }
    Disconnect();
    return in;
  }

  StatusOr<HttpReply> Send(const std::string& method, const std::string& path, const std::string& body,
                           const std::string& content_type, size_t max_bytes, const std::string& what) {
    int budget_ms = timeout_ms;
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      if (left.count() <= 0) return IoError(what + ": timed out: the caller's deadline has passed");
      budget_ms = std::min<int>(budget_ms, static_cast<int>(left.count()));
    }
    request_deadline = Clock::now() + std::chrono::milliseconds(budget_ms);
    std::string request = method + " " + path + " HTTP/1.1\r\nHost: " + target.host +
                          "\r\nUser-Agent: gputriage\r\nAccept-Encoding: identity\r\n";
    if (!authorization.empty()) request += "Authorization: " + authorization + "\r\n";
    if (method != "GET") {
      request += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    }
    request += "\r\n";
    if (method != "GET") request += body;
    // A kept-alive connection the server has since closed fails before any
    // byte of a reply: that request (and only that) is sent again on a new one.
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = fd >= 0;
      if (!reused) RETURN_IF_ERROR(Connect(what, budget_ms));
      Failure failure;
      auto reply = Exchange(request, max_bytes, what, budget_ms, reused, &failure);
      if (reply.ok()) return reply;
      Disconnect();
      if (!failure.stale) return reply.status();
    }
    return IoError(what + ": the reply could not be read (the connection closed early)");
  }
};

HttpClient::HttpClient(HttpTarget target, int timeout_ms, const HttpAuth& auth)
    : impl_(std::make_unique<Impl>(std::move(target), timeout_ms, auth)) {}
HttpClient::~HttpClient() = default;

void HttpClient::SetDeadline(std::optional<std::chrono::steady_clock::time_point> deadline) {
  impl_->deadline = deadline;
}

StatusOr<std::string> HttpClient::Get(size_t max_bytes) {
  ASSIGN_OR_RETURN(HttpReply reply, impl_->Send("GET", impl_->target.path, "", "", max_bytes, impl_->where));
  if (reply.status != 200) {
    std::string start = reply.body.substr(0, 120);
    for (char& c : start)
      if (c == '\n' || c == '\r') c = ' ';
    return IoError(impl_->where + ": HTTP " + std::to_string(reply.status) +
                   (start.empty() ? "" : ": " + Printable(start)));
  }
  return std::move(reply.body);
}

StatusOr<HttpReply> HttpClient::Request(const std::string& method, const std::string& path, const std::string& body,
                                        const std::string& content_type, size_t max_bytes) {
  const std::string where = impl_->target.scheme + "://" + impl_->target.host + path;
  if (method != "GET" && method != "POST" && method != "PUT")
    return InvalidArgumentError("HTTP method " + method + " is not supported");
  if (path.find_first_of(" \r\n") != std::string::npos)
    return InvalidArgumentError(method + " " + Printable(where) + ": spaces or line breaks in the path");
  return impl_->Send(method, path, body, content_type, max_bytes, method + " " + where);
}

}  // namespace gputriage
