// Load generator for bench/agent_scrape_benchmark.sh: CLIENTS threads, each a
// keep-alive HTTP client, together asking GET PATH at RATE requests per second
// for SECONDS; prints one line of JSON: requests, errors, latency percentiles.
// With --stall N, N more connections each send a request and never read the
// answer (a scraper stalled mid-response), held for the whole run.
//
//   agent_load HOST PORT PATH RATE CLIENTS SECONDS [--stall N]
//
// With AGENT_LOAD_CA=FILE the clients speak TLS and verify the server against
// FILE; with AGENT_LOAD_USER and AGENT_LOAD_PASSWORD they send basic auth.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "src/sources/http/http_get.h"

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: agent_load HOST PORT PATH RATE CLIENTS SECONDS [--stall N]\n");
    return 2;
  }
  const std::string host = argv[1];
  const int port = std::atoi(argv[2]);
  const std::string path = argv[3];
  const double rate = std::atof(argv[4]);
  const int clients = std::max(1, std::atoi(argv[5]));
  const double seconds = std::atof(argv[6]);
  int stall = 0;
  if (argc >= 9 && std::string(argv[7]) == "--stall") stall = std::atoi(argv[8]);

  // Stalled scrapers: a request sent, a tiny receive buffer, nothing read.
  std::vector<int> stalled;
  for (int i = 0; i < stall; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      std::perror("connect");
      return 1;
    }
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
    if (write(fd, request.data(), request.size()) < 0) std::perror("write");
    stalled.push_back(fd);
  }

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  const double per_client_interval = clients / rate;  // seconds between one client's requests
  std::atomic<int64_t> errors{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      const char* ca = std::getenv("AGENT_LOAD_CA");
      const char* user = std::getenv("AGENT_LOAD_USER");
      const char* password = std::getenv("AGENT_LOAD_PASSWORD");
      gputriage::HttpAuth auth;
      if (ca) auth.ca_file = ca;
      if (user && password) auth.username = user, auth.password = password;
      // gputriage's own client (kept alive between requests, TCP_NODELAY).
      gputriage::HttpClient client(gputriage::HttpTarget{ca ? "https" : "http", host + ":" + std::to_string(port), path},
                                   10'000, auth);
      auto& mine = latencies[static_cast<size_t>(c)];
      // Clients are staggered over one interval so the rate is smooth.
      auto next = start + std::chrono::duration<double>(per_client_interval * c / clients);
      while (next < end) {
        std::this_thread::sleep_until(next);
        const auto t0 = Clock::now();
        auto res = client.Get(64u << 20);
        const auto t1 = Clock::now();
        if (!res.ok() || res->empty()) {
          // The first error in words (a count alone says nothing of why).
          if (errors.fetch_add(1) == 0)
            std::fprintf(stderr, "agent_load: first error: %s\n", res.ok() ? "an empty page" : res.status().message().c_str());
        }
        else mine.push_back(std::chrono::duration<double>(t1 - t0).count());
        next += std::chrono::duration<double>(per_client_interval);
        if (next < t1 - std::chrono::duration<double>(per_client_interval)) next = t1;  // behind: do not burst
      }
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  for (int fd : stalled) close(fd);
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))]; };
  std::printf("{\"requests\": %zu, \"errors\": %lld, \"seconds\": %.3f, \"rate\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, "
              "\"max_ms\": %.3f}\n",
              all.size(), static_cast<long long>(errors.load()), elapsed, all.size() / elapsed, pct(0.5) * 1e3,
              pct(0.99) * 1e3, all.empty() ? 0.0 : all.back() * 1e3);
  return 0;
}
