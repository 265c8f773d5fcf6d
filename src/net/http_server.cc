#include "src/net/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "src/net/connection_cap.h"
#include "src/net/tls_server_context.h"

namespace gputriage {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
constexpr int64_t kMs = 1'000'000;

// epoll data: the listening socket and the wake-up eventfd have fixed ids;
// connections count up from here (an id is never reused, so a handler's reply
// for a connection that has gone finds nothing instead of a stranger).
constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
// How long and how much a closing connection is drained (see kDraining).
constexpr int64_t kDrainMs = 2000;
constexpr size_t kDrainBytes = 16 << 20;
// A connection whose head, handshake or reply has not moved for this long
// gives way first at the connection cap.
constexpr int64_t kStuckMs = 1000;
constexpr int64_t kDrainGraceMs = 200;
constexpr int64_t kAcceptPauseMs = 100;
// The kernel's send buffer per connection (it doubles this): a client that
// never reads holds at most this much of the host's memory, where autotuning
// would let each grow to megabytes (600 such readers: gigabytes of the
// host's TCP memory). 1 MiB in flight still moves 10 MB/s at 100 ms RTT.
constexpr int kSendBufferBytes = 512 << 10;

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

/// The Date header's value (RFC 9110 5.6.7), once per second.
std::string HttpDate() {
  thread_local std::time_t cached_second = 0;
  thread_local std::string cached;
  const std::time_t now = std::time(nullptr);
  if (now != cached_second) {
    std::tm tm {};
    gmtime_r(&now, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached = buf;
    cached_second = now;
  }
  return cached;
}

struct Job {
  uint64_t connection = 0;
  HttpRequest request;
  std::string slow_key;  // the slow lane's key (SlowLane): jobs with the same one wait together
};

struct Completion {
  uint64_t connection = 0;
  HttpResponse response;
};

/// A queue that takes turns between client addresses: each address has its
/// own line, served round-robin, and holds at most `max_per_peer` places, so
/// one host's flood (wrong passwords, replayed TLS hellos) cannot fill it and
/// starve a client on another host (issue 41: 150 threads of wrong passwords
/// gave the right one 429 for 35 s).
template <typename T>
struct FairQueue {
  std::unordered_map<std::string, std::deque<T>> by_peer;
  std::deque<std::string> turns;  // addresses with a line, in the order they are served
  size_t queued = 0;
  size_t max_queued = 0;
  size_t max_per_peer = 0;

  /// False when the queue (or this address's share of it) is full. Past its
  /// share, an item `same` as one already in the address's line still joins
  /// it: it costs nothing once that one is answered (scrapers sharing new
  /// credentials wait for one bcrypt, not eight places).
  template <typename Same = std::nullptr_t>
  bool Push(const std::string& peer_host, T item, Same same = nullptr) {
    auto& line = by_peer[peer_host];
    bool joins = false;
    if constexpr (!std::is_same_v<Same, std::nullptr_t>) {
      if (line.size() >= max_per_peer)
        joins = std::any_of(line.begin(), line.end(), [&](const T& queued_item) { return same(queued_item, item); });
    }
    if (queued >= max_queued || (line.size() >= max_per_peer && !joins)) {
      if (line.empty()) by_peer.erase(peer_host);
      return false;
    }
    if (line.empty()) turns.push_back(peer_host);
    line.push_back(std::move(item));
    ++queued;
    return true;
  }
  T Pop() {
    const std::string peer = std::move(turns.front());
    turns.pop_front();
    auto it = by_peer.find(peer);
    T item = std::move(it->second.front());
    it->second.pop_front();
    --queued;
    if (it->second.empty()) by_peer.erase(it);
    else turns.push_back(peer);
    return item;
  }
  void Clear() {
    by_peer.clear();
    turns.clear();
    queued = 0;
  }
};

/// Threads and the fair queue they take their work from.
template <typename T>
struct WorkLane {
  std::mutex mutex;
  std::condition_variable ready;
  FairQueue<T> queue;
  std::vector<std::thread> threads;
};

struct Socket;

struct HandshakeJob {
  uint64_t connection = 0;
  std::shared_ptr<Socket> socket;
};

struct HandshakeStep {
  uint64_t connection = 0;
  int result = 0;  // SSL_do_handshake's
  int error = 0;   // SSL_get_error's, on the thread that ran it
};

using Lane = WorkLane<Job>;                   // handler threads
using HandshakeLane = WorkLane<HandshakeJob>;  // TLS handshake threads

/// The host part of "HOST:PORT" or "[V6]:PORT".
std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

// kDraining: an error reply has gone and the write side is shut; what the
// client still sends (the rest of a 12 MB head) is read and dropped for a
// moment, because closing with unread bytes sends a reset that can destroy
// the reply before the client reads it.
enum class State { kHandshake, kReadHead, kHandling, kWriting, kDraining };

/// A connection's descriptor and TLS session, freed (SSL_free, close) when
/// the last holder lets go: a handshake thread holds it while a step runs
/// there, so a connection dropped mid-handshake never has its descriptor
/// closed, and reused by another connection, under that thread.
struct Socket {
  int fd = -1;
  SSL* ssl = nullptr;
  Socket() = default;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }
};

struct Connection {
  uint64_t id = 0;
  std::shared_ptr<Socket> socket;
  int fd = -1;          // socket->fd
  SSL* ssl = nullptr;   // socket->ssl
  bool handshaking = false;  // a handshake step is on a handshake thread: the connection waits for it
  std::shared_ptr<TlsServerContext> tls;  // keeps the context alive while the connection uses it
  State state = State::kReadHead;
  std::string peer;
  std::string in;             // read, not yet parsed (a head, or pipelined heads)
  bool head_started = false;  // a byte of the current head has arrived: the head deadline runs
  int64_t deadline_ns = 0;    // of the current state (head, idle, handshake or send)
  int64_t idle_since_ns = 0;  // for choosing whom to drop at the connection cap
  uint64_t served = 0;
  bool close_after = false;   // this reply is the connection's last
  bool eof = false;           // the client closed its side
  std::string out_head;
  std::shared_ptr<const std::string> out_body;
  size_t out_sent = 0;        // of out_head + out_body
  int64_t progress_ns = 0;    // when the reply last moved (its start, or bytes the client took)
  bool send_body = true;      // false for HEAD
  uint32_t interest = 0;      // the epoll events now registered
  size_t drained = 0;         // bytes dropped while draining
};

}  // namespace

struct HttpServer::Impl {
  HttpServerLimits limits;
  Handler handler;
  SlowLane slow_lane;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  int port = 0;
  std::thread loop;
  std::atomic<bool> stopping{false};

  std::mutex tls_mutex;
  std::shared_ptr<TlsServerContext> tls;

  Lane fast, slow;
  HandshakeLane handshakes;
  std::mutex done_mutex;
  std::vector<Completion> done;
  std::vector<HandshakeStep> handshakes_done;

  // Owned by the loop thread.
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections;
  uint64_t next_id = 2;
  int64_t last_sweep_ns = 0;
  int64_t accept_paused_until_ns = 0;  // 0: accepting

  // Counted by the loop thread, read by any.
  std::atomic<uint64_t> accepted{0}, open{0}, requests{0}, too_large{0}, head_timeouts{0}, idle_closed{0},
      evicted{0}, write_timeouts{0}, busy{0}, tls_failures{0};

  ~Impl() {
    if (listen_fd >= 0) close(listen_fd);
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
  }

  void Wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd, &one, sizeof one);
  }

  // ---- handler threads ----
  void StartLane(Lane& lane, int threads, size_t max_queued, size_t max_per_peer) {
    lane.queue.max_queued = max_queued;
    lane.queue.max_per_peer = std::max<size_t>(max_per_peer, 1);
    for (int i = 0; i < std::max(threads, 1); ++i) lane.threads.emplace_back([this, &lane] { RunLane(lane); });
  }

  void RunLane(Lane& lane) {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(lane.mutex);
        lane.ready.wait(lock, [&] { return stopping.load() || lane.queue.queued > 0; });
        if (stopping.load()) return;
        job = lane.queue.Pop();
      }
      Completion c;
      c.connection = job.connection;
      // The boundary with the handler: whatever it throws (allocation
      // failure) becomes a 500 for this request, never the server's end.
      try {
        c.response = handler(job.request);
      } catch (const std::exception& e) {
        c.response = HttpResponse::Text(500, std::string("internal error: ") + e.what() + "\n");
      } catch (...) {
        c.response = HttpResponse::Text(500, "internal error\n");
      }
      {
        std::lock_guard<std::mutex> lock(done_mutex);
        done.push_back(std::move(c));
      }
      Wake();
    }
  }

  void StopLane(Lane& lane) {
    {
      std::lock_guard<std::mutex> lock(lane.mutex);
      lane.queue.Clear();
    }
    lane.ready.notify_all();
    for (auto& t : lane.threads)
      if (t.joinable()) t.join();
    lane.threads.clear();
  }

  // ---- the event loop ----
  void Run() {
    std::vector<epoll_event> events(256);
    while (!stopping.load()) {
      const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 100);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[i].data.u64;
        if (id == kListenId) {
          AcceptAll();
        } else if (id == kWakeId) {
          uint64_t count;
          [[maybe_unused]] const ssize_t r = read(wake_fd, &count, sizeof count);
          TakeCompletions();
        } else {
          auto it = connections.find(id);
          if (it != connections.end()) OnEvents(*it->second, events[i].events);
        }
      }
      const int64_t now = NowNs();
      if (now - last_sweep_ns >= 100 * kMs) {
        last_sweep_ns = now;
        Sweep(now);
        ResumeAcceptingWhenDue(now);
      }
    }
    // No more connections: those the kernel accepted for us but the loop never
    // took are refused with the listening socket, not left hanging.
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
    close(listen_fd);
    listen_fd = -1;
    std::vector<uint64_t> ids;
    for (const auto& [id, c] : connections) ids.push_back(id);
    for (uint64_t id : ids) Close(id);
  }

  void SetInterest(Connection& c, uint32_t interest) {
    if (c.interest == interest) return;
    epoll_event ev {};
    ev.events = interest;
    ev.data.u64 = c.id;
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd, &ev);
    c.interest = interest;
  }

  /// `abort`: a reset instead of a FIN, for a connection dropped with a reply
  /// its client never took. A plain close queues the FIN behind the unsent
  /// bytes, and a client that never reads keeps the orphaned socket and its
  /// send buffer in the kernel for minutes (and never learns it was dropped).
  /// Out of descriptors with none to free: the listening socket rests for
  /// kAcceptPauseMs (the sweep re-arms it), its backlog kept.
  void PauseAccepting() {
    if (accept_paused_until_ns != 0) return;
    epoll_event ev{};
    ev.events = 0;
    ev.data.u64 = kListenId;
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
    accept_paused_until_ns = NowNs() + kAcceptPauseMs * kMs;
  }

  void ResumeAcceptingWhenDue(int64_t now) {
    if (accept_paused_until_ns == 0 || now < accept_paused_until_ns) return;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
    accept_paused_until_ns = 0;
  }

  void Close(uint64_t id, bool abort = false) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& c = *it->second;
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
    if (abort) {
      const linger reset{1, 0};
      setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    }
    if (c.ssl != nullptr && c.state != State::kHandshake && !c.eof) SSL_shutdown(c.ssl);  // one close_notify, no wait
    connections.erase(it);  // the socket closes with its last holder (a handshake thread may still hold it)
    open.store(connections.size());
  }

  void AcceptAll() {
    for (;;) {
      sockaddr_storage addr {};
      socklen_t len = sizeof addr;
      const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int error = errno;
        if (error == EINTR || error == ECONNABORTED) continue;
        // EMFILE/ENFILE: out of descriptors. A connection gives way as at the
        // cap and the accept is tried again; with none to give, the listening
        // socket is left out of the loop's wait for a moment. (Left in, it
        // stays readable and the loop spins a core until a descriptor frees.)
        const bool out_of_descriptors = error == EMFILE || error == ENFILE;
        if (out_of_descriptors && MakeRoom()) continue;
        if (out_of_descriptors) PauseAccepting();
        return;
      }
      accepted.fetch_add(1);
      if (connections.size() >= limits.max_connections && !MakeRoom()) {
        close(fd);
        continue;
      }
      const int yes = 1;
      // Replies go out in one or two writes: without TCP_NODELAY, Nagle's
      // algorithm holds the second until the client's delayed ACK (40 ms).
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSendBufferBytes, sizeof kSendBufferBytes);
      auto socket = std::make_shared<Socket>();
      socket->fd = fd;
      auto conn = std::make_unique<Connection>();
      Connection& c = *conn;
      c.id = next_id++;
      c.socket = socket;
      c.fd = fd;
      c.peer = PeerName(addr);
      const int64_t now = NowNs();
      c.idle_since_ns = now;
      {
        std::lock_guard<std::mutex> lock(tls_mutex);
        c.tls = tls;
      }
      if (c.tls) {
        socket->ssl = c.ssl = SSL_new(c.tls->native());
        if (c.ssl == nullptr || SSL_set_fd(c.ssl, fd) != 1) {
          ERR_clear_error();
          tls_failures.fetch_add(1);
          continue;  // the socket closes with `conn`
        }
        SSL_set_accept_state(c.ssl);
        c.state = State::kHandshake;
        c.deadline_ns = now + limits.handshake_timeout_ms * kMs;
      } else {
        // The head deadline runs from the accept: a client that connects and
        // sends nothing is as slow as one that sends a byte a minute.
        c.state = State::kReadHead;
        c.head_started = true;
        c.deadline_ns = now + limits.head_timeout_ms * kMs;
      }
      epoll_event ev {};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.u64 = c.id;
      if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) continue;  // the socket closes with `conn`
      c.interest = ev.events;
      connections.emplace(c.id, std::move(conn));
      open.store(connections.size());
    }
  }

  /// At the connection cap, who gives way. First a client holding its
  /// connection without progress, whichever has waited longest: a head still
  /// arriving after kStuckMs (a slow client), a handshake as long, or a reply it
  /// has not taken for kStuckMs (a reader that never reads: 512 of them,
  /// never evicted, had locked every scrape out for the write deadline). Then
  /// a reply waiting for its client to read, stalled longest first (readers
  /// churning through reconnections are never older than kStuckMs), then the
  /// one with the most pipelined requests waiting behind its current one (it
  /// asked for more than one reply at a time: Prometheus never does), then a
  /// closing connection drained for kDrainGraceMs (earlier, its client may
  /// not have read the reply: the reset would destroy it), then the oldest
  /// head just begun (a flood of connections), and only then the longest-idle
  /// keep-alive connection: a Prometheus between scrapes has shown itself a
  /// well-behaved client. False when every connection waits for a handler.
  bool MakeRoom() {
    const int64_t now = NowNs();
    Connection* stuck = nullptr;
    Connection* stalled = nullptr;
    Connection* greedy = nullptr;
    Connection* idle = nullptr;
    Connection* draining = nullptr;
    std::vector<Connection*> young;
    const auto older = [](const Connection* best, int64_t since, int64_t best_since) {
      return best == nullptr || since < best_since;
    };
    for (auto& [id, conn] : connections) {
      Connection* c = conn.get();
      if ((c->state == State::kHandling || c->state == State::kWriting) && !c->in.empty() &&
          (greedy == nullptr || c->in.size() > greedy->in.size()))
        greedy = c;
      switch (c->state) {
        case State::kHandling: break;
        case State::kDraining:
          if (older(draining, c->idle_since_ns, draining ? draining->idle_since_ns : 0)) draining = c;
          break;  // idle_since_ns: when its reply was sent
        case State::kWriting:
          if (now - c->progress_ns >= kStuckMs * kMs) {
            if (older(stuck, c->progress_ns, stuck ? StuckSince(*stuck) : 0)) stuck = c;
          } else if (c->interest == EPOLLOUT) {  // the client's window is full: it is not reading now
            if (older(stalled, c->progress_ns, stalled ? stalled->progress_ns : 0)) stalled = c;
          }
          break;
        case State::kReadHead:
          if (c->in.empty() && c->served > 0 && !c->head_started) {
            if (older(idle, c->idle_since_ns, idle ? idle->idle_since_ns : 0)) idle = c;
            break;
          }
          [[fallthrough]];
        case State::kHandshake:
          if (now - c->idle_since_ns >= kStuckMs * kMs) {
            if (older(stuck, c->idle_since_ns, stuck ? StuckSince(*stuck) : 0)) stuck = c;
          } else {
            young.push_back(c);
          }
          break;
      }
    }
    Connection* drained = draining != nullptr && now - draining->idle_since_ns >= kDrainGraceMs * kMs ? draining : nullptr;
    Connection* victim = stuck;
    for (Connection* next : {stalled, greedy, drained, YoungestToGo(young), idle, draining})
      if (victim == nullptr) victim = next;
    if (victim == nullptr) return false;
    evicted.fetch_add(1);
    Close(victim->id, /*abort=*/victim->state == State::kWriting || victim->state == State::kHandling);
    return true;
  }

  /// Of the connections just begun, the one to close (see connection_cap.h).
  static Connection* YoungestToGo(const std::vector<Connection*>& young) {
    std::vector<FreshConnection> fresh;
    fresh.reserve(young.size());
    for (const Connection* c : young) fresh.push_back({c->fd, c->idle_since_ns, !c->in.empty() || c->head_started});
    const std::optional<size_t> chosen = FreshConnectionToGo(fresh);
    return chosen ? young[*chosen] : nullptr;
  }

  /// Since when a connection has held its place without progress.
  static int64_t StuckSince(const Connection& c) { return c.state == State::kWriting ? c.progress_ns : c.idle_since_ns; }

  void OnEvents(Connection& c, uint32_t events) {
    const uint64_t id = c.id;
    if (events & EPOLLERR) {
      Close(id);
      return;
    }
    switch (c.state) {
      case State::kHandshake: Handshake(c); break;
      case State::kReadHead: ReadAndParse(c); break;
      case State::kWriting: Write(c); break;
      case State::kHandling:
        // Nothing is read while a handler runs (no EPOLLIN registered), so
        // only a hang-up gets here: the reply has nowhere to go.
        if (events & EPOLLHUP) Close(id);
        break;
      case State::kDraining: Drain(c); break;
    }
  }

  /// Whether the TLS call's result means "try again when the socket is ready"
  /// (and registers for that), or a failure.
  bool TlsWouldBlock(Connection& c, int result) {
    const int error = SSL_get_error(c.ssl, result);
    if (error == SSL_ERROR_WANT_READ) {
      SetInterest(c, EPOLLIN | EPOLLRDHUP);
      return true;
    }
    if (error == SSL_ERROR_WANT_WRITE) {
      SetInterest(c, EPOLLOUT);
      return true;
    }
    if (error == SSL_ERROR_ZERO_RETURN) c.eof = true;
    ERR_clear_error();
    return false;
  }

  /// A handshake step (the key exchange and the certificate's signature are
  /// milliseconds of CPU each) runs on a handshake thread, never on the loop:
  /// 256 replayed ClientHellos had held every scrape up for seconds. The
  /// threads take turns between client addresses, as the bcrypt lane does.
  void Handshake(Connection& c) {
    if (c.handshaking) return;
    {
      std::lock_guard<std::mutex> lock(handshakes.mutex);
      if (!handshakes.queue.Push(PeerHost(c.peer), HandshakeJob{c.id, c.socket})) {
        busy.fetch_add(1);
        Close(c.id);  // this address has its share of handshakes waiting: the client may try again
        return;
      }
    }
    handshakes.ready.notify_one();
    c.handshaking = true;
    SetInterest(c, 0);
  }

  void RunHandshakes() {
    for (;;) {
      HandshakeJob job;
      {
        std::unique_lock<std::mutex> lock(handshakes.mutex);
        handshakes.ready.wait(lock, [&] { return stopping.load() || handshakes.queue.queued > 0; });
        if (stopping.load()) return;
        job = handshakes.queue.Pop();
      }
      HandshakeStep step{job.connection, SSL_do_handshake(job.socket->ssl), SSL_ERROR_NONE};
      if (step.result != 1) step.error = SSL_get_error(job.socket->ssl, step.result);
      ERR_clear_error();  // OpenSSL's error queue is this thread's
      job.socket.reset();  // a connection closed meanwhile is freed here
      {
        std::lock_guard<std::mutex> lock(done_mutex);
        handshakes_done.push_back(step);
      }
      Wake();
    }
  }

  /// A handshake step's outcome, on the loop: read on, wait for the socket, or close.
  void HandshakeStepDone(const HandshakeStep& step) {
    auto it = connections.find(step.connection);
    if (it == connections.end()) return;
    Connection& c = *it->second;
    c.handshaking = false;
    if (step.result == 1) {
      c.state = State::kReadHead;
      c.head_started = true;
      c.deadline_ns = NowNs() + limits.head_timeout_ms * kMs;
      ReadAndParse(c);
    } else if (step.error == SSL_ERROR_WANT_READ) {
      SetInterest(c, EPOLLIN | EPOLLRDHUP);
    } else if (step.error == SSL_ERROR_WANT_WRITE) {
      SetInterest(c, EPOLLOUT);
    } else {
      tls_failures.fetch_add(1);
      Close(c.id);
    }
  }

  /// Reads what the socket has, up to the head limit; false when the
  /// connection ended (closed here).
  bool ReadSome(Connection& c) {
    const size_t cap = limits.head.max_head_bytes + 1;
    char buf[16384];
    while (c.in.size() < cap) {
      const size_t want = std::min(sizeof buf, cap - c.in.size());
      ssize_t n;
      if (c.ssl != nullptr) {
        const int r = SSL_read(c.ssl, buf, static_cast<int>(want));
        if (r <= 0) {
          if (TlsWouldBlock(c, r)) return true;
          c.eof = true;
          break;
        }
        n = r;
      } else {
        n = recv(c.fd, buf, want, 0);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) {
            SetInterest(c, EPOLLIN | EPOLLRDHUP);
            return true;
          }
          if (errno == EINTR) continue;
          c.eof = true;
          break;
        }
        if (n == 0) {
          c.eof = true;
          break;
        }
      }
      c.in.append(buf, static_cast<size_t>(n));
    }
    SetInterest(c, EPOLLIN | EPOLLRDHUP);
    return true;
  }

  void ReadAndParse(Connection& c) {
    ReadSome(c);
    Parse(c);
  }

  /// Acts on what `c.in` holds: a whole head goes to a handler, a bad one
  /// gets its error reply, a partial one waits (its deadline running).
  void Parse(Connection& c) {
    if (c.in.empty()) {
      if (c.eof) Close(c.id);
      return;
    }
    if (!c.head_started) {
      c.head_started = true;
      c.deadline_ns = NowNs() + limits.head_timeout_ms * kMs;
    }
    HttpRequest request;
    size_t used = 0;
    std::string why;
    const HeadParse result = ParseRequestHead(c.in, limits.head, &request, &used, &why);
    switch (result) {
      case HeadParse::kIncomplete:
        if (c.eof) Close(c.id);  // the client gave up mid-head
        return;
      case HeadParse::kTooLarge:
        too_large.fetch_add(1);
        Reply(c, HttpResponse::Text(431, "request header fields too large: " + why + "\n"), /*close=*/true, true);
        return;
      case HeadParse::kBad:
        Reply(c, HttpResponse::Text(400, "bad request: " + why + "\n"), true, true);
        return;
      case HeadParse::kVersion:
        Reply(c, HttpResponse::Text(505, why + "\n"), true, true);
        return;
      case HeadParse::kComplete:
        break;
    }
    c.in.erase(0, used);
    requests.fetch_add(1);
    request.peer = c.peer;
    request.tls = c.ssl != nullptr;
    const bool head_only = request.method == "HEAD";
    const bool has_body = request.content_length > 0 || request.chunked;
    if (request.method != "GET" && !head_only) {
      HttpResponse r = HttpResponse::Text(405, "method " + request.method + " is not allowed here: GET or HEAD\n");
      r.SetHeader("Allow", "GET, HEAD");
      // A body it sent is not read: the connection ends after the reply.
      Reply(c, std::move(r), has_body || !request.keep_alive, true);
      return;
    }
    if (has_body) {
      Reply(c, HttpResponse::Text(400, "this server takes no request body\n"), true, true);
      return;
    }
    c.close_after = !request.keep_alive || c.eof || c.served + 1 >= limits.max_requests_per_connection;
    c.send_body = !head_only;
    std::optional<std::string> slow_key = slow_lane ? slow_lane(request) : std::nullopt;
    const bool slow_path = slow_key.has_value();
    Lane& lane = slow_path ? slow : fast;
    {
      std::lock_guard<std::mutex> lock(lane.mutex);
      const auto same_key = [](const Job& a, const Job& b) { return a.slow_key == b.slow_key; };
      Job job{c.id, std::move(request), slow_key.value_or("")};
      if (!lane.queue.Push(PeerHost(c.peer), std::move(job), same_key)) {
        busy.fetch_add(1);
        HttpResponse r = HttpResponse::Text(slow_path ? 429 : 503, "busy: try again shortly\n");
        r.SetHeader("Retry-After", "1");
        Reply(c, std::move(r), true, !head_only);
        return;
      }
    }
    lane.ready.notify_one();
    c.state = State::kHandling;
    SetInterest(c, 0);
  }

  void TakeCompletions() {
    std::vector<Completion> batch;
    std::vector<HandshakeStep> steps;
    {
      std::lock_guard<std::mutex> lock(done_mutex);
      batch.swap(done);
      steps.swap(handshakes_done);
    }
    for (const HandshakeStep& step : steps) HandshakeStepDone(step);
    for (Completion& d : batch) {
      auto it = connections.find(d.connection);
      if (it == connections.end() || it->second->state != State::kHandling) continue;
      Connection& c = *it->second;
      Reply(c, std::move(d.response), c.close_after, c.send_body);
    }
  }

  void Reply(Connection& c, HttpResponse response, bool close_after, bool send_body) {
    const size_t length = response.body ? response.body->size() : 0;
    std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + HttpReason(response.status) + "\r\n";
    head += "Date: " + HttpDate() + "\r\n";
    if (length > 0 || response.status != 204) head += "Content-Type: " + response.content_type + "\r\n";
    if (response.status != 204 && response.status != 304) head += "Content-Length: " + std::to_string(length) + "\r\n";
    for (const auto& [name, value] : response.headers) {
      // A line break in a header would end it and begin one the handler never
      // meant (a reflected value): such a header is not sent.
      if (name.find_first_of("\r\n:") != std::string::npos || value.find_first_of("\r\n") != std::string::npos) continue;
      head += name + ": " + value + "\r\n";
    }
    if (close_after) head += "Connection: close\r\n";
    head += "\r\n";
    c.out_head = std::move(head);
    c.out_body = send_body ? response.body : nullptr;
    c.out_sent = 0;
    c.close_after = close_after;
    c.state = State::kWriting;
    c.progress_ns = NowNs();
    c.deadline_ns = c.progress_ns + limits.write_timeout_ms * kMs;
    Write(c);
  }

  void Write(Connection& c) {
    const size_t head_size = c.out_head.size();
    const size_t total = head_size + (c.out_body ? c.out_body->size() : 0);
    while (c.out_sent < total) {
      ssize_t n;
      if (c.ssl != nullptr) {
        const char* data = c.out_sent < head_size ? c.out_head.data() + c.out_sent : c.out_body->data() + (c.out_sent - head_size);
        const size_t left = c.out_sent < head_size ? head_size - c.out_sent : total - c.out_sent;
        const int r = SSL_write(c.ssl, data, static_cast<int>(std::min<size_t>(left, 1 << 20)));
        if (r <= 0) {
          if (TlsWouldBlock(c, r)) return;
          Close(c.id);
          return;
        }
        n = r;
      } else {
        iovec parts[2];
        int count = 0;
        if (c.out_sent < head_size) {
          parts[count++] = {const_cast<char*>(c.out_head.data() + c.out_sent), head_size - c.out_sent};
          if (c.out_body && !c.out_body->empty())
            parts[count++] = {const_cast<char*>(c.out_body->data()), c.out_body->size()};
        } else {
          parts[count++] = {const_cast<char*>(c.out_body->data() + (c.out_sent - head_size)), total - c.out_sent};
        }
        msghdr msg {};
        msg.msg_iov = parts;
        msg.msg_iovlen = static_cast<size_t>(count);
        n = sendmsg(c.fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) {
            SetInterest(c, EPOLLOUT);
            return;
          }
          if (errno == EINTR) continue;
          Close(c.id);
          return;
        }
      }
      c.out_sent += static_cast<size_t>(n);
      c.progress_ns = NowNs();
    }
    // Sent.
    c.out_head.clear();
    c.out_body.reset();
    ++c.served;
    if (c.close_after || c.eof) {
      if (c.ssl != nullptr || c.eof) {
        Close(c.id);
        return;
      }
      shutdown(c.fd, SHUT_WR);
      c.state = State::kDraining;
      c.idle_since_ns = NowNs();  // when the reply went: a drained connection gives way only after kDrainGraceMs
      c.in.clear();
      c.deadline_ns = NowNs() + kDrainMs * kMs;
      c.drained = 0;
      SetInterest(c, EPOLLIN | EPOLLRDHUP);
      Drain(c);
      return;
    }
    // Keep-alive: the next head may already be here (pipelined), in the
    // socket, or inside OpenSSL's buffer (which epoll cannot see): read now.
    c.state = State::kReadHead;
    const int64_t now = NowNs();
    c.idle_since_ns = now;
    c.head_started = false;
    c.deadline_ns = now + limits.idle_timeout_ms * kMs;
    ReadAndParse(c);
  }

  /// Reads and drops what a closing connection's client still sends, until it
  /// closes, stops sending, or has sent kDrainBytes more.
  void Drain(Connection& c) {
    char buf[16384];
    for (;;) {
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.drained += static_cast<size_t>(n);
        if (c.drained < kDrainBytes) continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else if (n < 0 && errno == EINTR) {
        continue;
      }
      Close(c.id);
      return;
    }
  }

  void Sweep(int64_t now) {
    std::vector<uint64_t> expired;
    for (const auto& [id, c] : connections)
      if (c->state != State::kHandling && now >= c->deadline_ns) expired.push_back(id);
    for (uint64_t id : expired) {
      auto it = connections.find(id);
      if (it == connections.end()) continue;
      Connection& c = *it->second;
      if (c.state == State::kReadHead && c.head_started) {
        head_timeouts.fetch_add(1);
        if (c.in.empty()) {
          Close(id);  // connected and sent nothing: no reply to a client that may not speak HTTP
        } else {
          // One attempt at a 408; if the client does not take it, the send deadline ends it.
          c.in.clear();
          Reply(c, HttpResponse::Text(408, "the request's headers took too long\n"), true, true);
          if (auto again = connections.find(id); again != connections.end()) {
            again->second->deadline_ns = now + 1000 * kMs;
          }
        }
      } else if (c.state == State::kReadHead) {
        idle_closed.fetch_add(1);
        Close(id);
      } else if (c.state == State::kWriting) {
        write_timeouts.fetch_add(1);
        Close(id, /*abort=*/true);
      } else if (c.state == State::kDraining) {
        Close(id);
      } else {
        tls_failures.fetch_add(1);
        Close(id);
      }
    }
  }
};

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port, const HttpServerLimits& limits,
                                                         Handler handler, SlowLane slow_lane,
                                                         std::shared_ptr<TlsServerContext> tls) {
  // A client that hangs up mid-reply must not end the process: OpenSSL writes
  // with write(2), where MSG_NOSIGNAL cannot be asked for.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<HttpServer> out(new HttpServer());
  out->impl_ = std::make_unique<Impl>();
  Impl& s = *out->impl_;
  s.limits = limits;
  s.handler = std::move(handler);
  s.slow_lane = std::move(slow_lane);
  s.tls = std::move(tls);

  addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int e = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); e != 0)
    return IoError("cannot listen on " + host + ":" + service + ": " + gai_strerror(e));
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR only: SO_REUSEPORT would let a second server bind the same
    // port and take half the requests.
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      s.listen_fd = fd;
      break;
    }
    why = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  if (s.listen_fd < 0)
    return IoError("cannot listen on " + host + ":" + service + " (" + why +
                   (port != 0 ? ": in use, or not an address of this machine)" : ")"));
  sockaddr_storage bound {};
  socklen_t bound_len = sizeof bound;
  getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  s.port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  s.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  s.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.epoll_fd < 0 || s.wake_fd < 0) return IoError(std::string("cannot start the server: ") + std::strerror(errno));
  epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.listen_fd, &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.wake_fd, &ev);

  s.StartLane(s.fast, limits.workers, limits.max_queued, limits.max_queued);
  s.StartLane(s.slow, limits.slow_lane_workers, limits.max_slow_queued, limits.max_slow_queued_per_host);
  s.handshakes.queue.max_queued = limits.max_handshakes_queued;
  s.handshakes.queue.max_per_peer = std::max<size_t>(limits.max_handshakes_queued_per_host, 1);
  // Started with or without TLS: a reload may turn it on.
  for (int i = 0; i < std::max(limits.handshake_workers, 1); ++i) s.handshakes.threads.emplace_back([&s] { s.RunHandshakes(); });
  s.loop = std::thread([&s] { s.Run(); });
  return out;
}

HttpServer::~HttpServer() {
  Stop();
  Wait();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::SetTls(std::shared_ptr<TlsServerContext> tls) {
  std::lock_guard<std::mutex> lock(impl_->tls_mutex);
  impl_->tls = std::move(tls);
}

void HttpServer::Stop() {
  if (!impl_) return;
  impl_->stopping.store(true);
  impl_->Wake();
  impl_->fast.ready.notify_all();
  impl_->slow.ready.notify_all();
  impl_->handshakes.ready.notify_all();
}

void HttpServer::Wait() {
  if (!impl_) return;
  if (impl_->loop.joinable()) impl_->loop.join();
  impl_->StopLane(impl_->fast);
  impl_->StopLane(impl_->slow);
  {
    std::lock_guard<std::mutex> lock(impl_->handshakes.mutex);
    impl_->handshakes.queue.Clear();
  }
  impl_->handshakes.ready.notify_all();
  for (auto& t : impl_->handshakes.threads)
    if (t.joinable()) t.join();
  impl_->handshakes.threads.clear();
}

HttpServerStats HttpServer::Stats() const {
  const Impl& s = *impl_;
  HttpServerStats out;
  out.connections_accepted = s.accepted.load();
  out.connections_open = s.open.load();
  out.requests = s.requests.load();
  out.refused_too_large = s.too_large.load();
  out.timed_out_head = s.head_timeouts.load();
  out.closed_idle = s.idle_closed.load();
  out.evicted = s.evicted.load();
  out.timed_out_write = s.write_timeouts.load();
  out.rejected_busy = s.busy.load();
  out.tls_failures = s.tls_failures.load();
  return out;
}

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

}  // namespace gputriage
