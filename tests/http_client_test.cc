// The HTTP client every tracker, scrape and Prometheus query goes through, against
// misbehaving servers on loopback: a total deadline however slowly the server
// trickles (headers or body), a cap on what is read, redirects not followed (they
// would carry the credentials elsewhere).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "src/sources/http/http_get.h"

namespace gputriage {
namespace {

/// A one-connection server on 127.0.0.1: after reading the request, it sends
/// `reply` in pieces of `chunk` bytes with `gap` between them.
class TrickleServer {
 public:
  TrickleServer(std::string reply, size_t chunk, std::chrono::milliseconds gap)
      : reply_(std::move(reply)), chunk_(chunk), gap_(gap) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TrickleServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  void Serve() {
    const int conn = accept(fd_, nullptr, nullptr);
    if (conn < 0) return;
    char buf[4096];
    (void)!read(conn, buf, sizeof buf);  // the request (small)
    for (size_t at = 0; at < reply_.size() && !stop_; at += chunk_) {
      // The client may close first (a reply over its cap): no SIGPIPE for the test process.
      if (send(conn, reply_.data() + at, std::min(chunk_, reply_.size() - at), MSG_NOSIGNAL) <= 0) break;
      std::this_thread::sleep_for(gap_);
    }
    close(conn);
  }
  std::string reply_;
  size_t chunk_;
  std::chrono::milliseconds gap_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

HttpTarget Local(int port) { return HttpTarget{"http", "127.0.0.1:" + std::to_string(port), "/metrics"}; }

double SecondsOf(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(HttpClient, ABodyTrickledByteByByteEndsAtTheDeadline) {
  // Headers at once, then one body byte every 100 ms of 1000: each byte would
  // restart a read timeout; the total deadline (800 ms) ends it.
  std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
  TrickleServer server(reply + std::string(1000, 'x'), 1, std::chrono::milliseconds(100));
  HttpClient client(Local(server.port()), 800);
  StatusOr<std::string> body = std::string();
  const double s = SecondsOf([&] { body = client.Get(1 << 20); });
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("timed out"), std::string::npos) << body.status().ToString();
  EXPECT_LT(s, 2.5);
}

TEST(HttpClient, HeadersTrickledByteByByteEndAtTheDeadline) {
  TrickleServer server("HTTP/1.1 200 OK\r\nX-Slow: " + std::string(200, 'a') + "\r\n\r\n", 1,
                       std::chrono::milliseconds(50));
  HttpClient client(Local(server.port()), 700);
  StatusOr<HttpReply> reply = HttpReply{};
  const double s = SecondsOf([&] { reply = client.Request("POST", "/api/2.0/mlflow/runs/create", "{}", "application/json", 4096); });
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.status().message().find("timed out"), std::string::npos) << reply.status().ToString();
  EXPECT_LT(s, 2.5);
}

TEST(HttpClient, AReplyOverTheCapIsNotRead) {
  std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n" + std::string(200000, 'y');
  TrickleServer server(reply, 65536, std::chrono::milliseconds(0));
  HttpClient client(Local(server.port()), 3000);
  auto result = client.Request("POST", "/api/2.0/mlflow/runs/create", "{}", "application/json", 4096);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("larger than 4096 bytes"), std::string::npos) << result.status().ToString();
}

TEST(HttpClient, ARedirectIsNotFollowedWithTheCredentials) {
  TrickleServer server("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.2:1/steal\r\nContent-Length: 0\r\n\r\n", 4096,
                       std::chrono::milliseconds(0));
  HttpAuth auth;
  auth.bearer_token = "secret";
  HttpClient client(Local(server.port()), 3000, auth);
  auto body = client.Get(1 << 20);
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("redirect to http://127.0.0.2:1/steal not followed"), std::string::npos)
      << body.status().ToString();
}

// A DNS server that never answers held getaddrinfo (so every client: fleet,
// MLflow, --dcgm-exporter) past the request's deadline, for the resolver's own
// timeouts. The lookup now runs beside the request and is left behind at the deadline.
std::atomic<int> g_slow_lookups{0};
int SlowLookup(const char* host, const char* port, const addrinfo* hints, addrinfo** found) {
  ++g_slow_lookups;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  return getaddrinfo("127.0.0.1", port, hints, found);
}
int FastLookup(const char*, const char* port, const addrinfo* hints, addrinfo** found) {
  return getaddrinfo("127.0.0.1", port, hints, found);
}

TEST(HttpClient, AHostLookupThatNeverAnswersEndsAtTheDeadline) {
  TrickleServer server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 4096, std::chrono::milliseconds(0));
  SetHostLookupForTesting(SlowLookup);
  HttpClient client(HttpTarget{"http", "metrics.example:" + std::to_string(server.port()), "/metrics"}, 500);
  StatusOr<std::string> body = std::string();
  const double s = SecondsOf([&] { body = client.Get(1 << 20); });
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("timed out looking up host 'metrics.example'"), std::string::npos)
      << body.status().ToString();
  EXPECT_LT(s, 2.0);  // the lookup takes 3 s
  EXPECT_EQ(g_slow_lookups.load(), 1);
  // A lookup that answers in time connects as before; an address is never looked up.
  SetHostLookupForTesting(FastLookup);
  HttpClient named(HttpTarget{"http", "metrics.example:" + std::to_string(server.port()), "/metrics"}, 3000);
  auto got = named.Get(1 << 20);
  SetHostLookupForTesting(SlowLookup);
  TrickleServer second("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 4096, std::chrono::milliseconds(0));
  HttpClient numeric(Local(second.port()), 3000);
  auto direct = numeric.Get(1 << 20);
  SetHostLookupForTesting(nullptr);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "hello");
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(g_slow_lookups.load(), 1);
}

TEST(HttpClient, AnOrdinaryReplyIsRead) {
  TrickleServer server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 4096, std::chrono::milliseconds(0));
  HttpClient client(Local(server.port()), 3000);
  auto body = client.Get(1 << 20);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(*body, "hello");
}

TEST(HttpClient, AnEndlessHeadIsRefusedAtItsCap) {
  // A server that answers with header lines and never the blank line: read to
  // its end, 4 GiB went into memory in 30 s; the head is capped as our servers cap one.
  std::string reply = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 100000; ++i) reply += "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaa\r\n";
  TrickleServer server(reply, 65536, std::chrono::milliseconds(0));
  HttpClient client(Local(server.port()), 5000);
  StatusOr<std::string> body = std::string();
  const double s = SecondsOf([&] { body = client.Get(1 << 20); });
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("head is over 64 KiB"), std::string::npos) << body.status().ToString();
  EXPECT_LT(s, 2.0);
}

TEST(HttpClient, InterimRepliesWithoutEndAreAnErrorNotARecursion) {
  std::string reply;
  for (int i = 0; i < 200000; ++i) reply += "HTTP/1.1 100 Continue\r\n\r\n";
  TrickleServer server(reply, 65536, std::chrono::milliseconds(0));
  HttpClient client(Local(server.port()), 3000);
  auto body = client.Get(1 << 20);
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("interim (1xx) replies"), std::string::npos) << body.status().ToString();
  TrickleServer one("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 4096,
                    std::chrono::milliseconds(0));
  HttpClient after_one(Local(one.port()), 3000);
  auto ok = after_one.Get(1 << 20);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "ok");
}

TEST(HttpClient, AChunkedReplyIsJoined) {
  TrickleServer server("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n", 7,
                       std::chrono::milliseconds(1));
  HttpClient client(Local(server.port()), 3000);
  auto body = client.Get(1 << 20);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(*body, "hello world");
}

TEST(HttpClient, ABodyRunningToTheCloseIsRead) {
  TrickleServer server("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nup to the end", 3, std::chrono::milliseconds(1));
  HttpClient client(Local(server.port()), 3000);
  auto body = client.Get(1 << 20);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(*body, "up to the end");
}

TEST(HttpClient, BinaryGarbageIsAnErrorInPlainText) {
  TrickleServer server(std::string(1, '\0') + "\xff" "not http\r\n\r\n", 4096, std::chrono::milliseconds(0));
  HttpClient client(Local(server.port()), 3000);
  auto body = client.Get(1 << 20);
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("not an HTTP/1.x reply"), std::string::npos) << body.status().ToString();
  EXPECT_NE(body.status().message().find("\\xff"), std::string::npos) << body.status().ToString();
}

}  // namespace
}  // namespace gputriage
