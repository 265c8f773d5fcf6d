// `gputriage agent`: the node agent (src/agent/) behind a /metrics endpoint
// until SIGTERM or SIGINT; SIGHUP reads the web config again.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "src/agent/agent.h"
#include "src/agent/metrics_server.h"
#include "src/net/web_config.h"
#include "src/cli/cli_common.h"
#include "src/util/strings.h"

namespace gputriage::cli {
namespace {

struct AgentArgs {
  std::string listen = "127.0.0.1:9401";
  SamplingArgs sampling;  // a node agent's defaults: 1 s ticks, 5-minute windows judged every 15 s
  double nvml_retry_s = 30;
  int threads = 4;
  size_t max_connections = 512;
  std::string hostname;
  std::string web_config_file;
  std::string pod_resources_socket;  // "": the kubelet's, when this node has one
  double pod_refresh_s = 10;
};

int RunAgent(const AgentArgs& args) {
  std::string host;
  int port = 0;
  if (Status s = ParseListenAddress(args.listen, &host, &port); !s.ok()) {
    PrintError(s);
    return kExitUsage;
  }
  std::shared_ptr<const WebConfig> web;
  if (!args.web_config_file.empty()) {
    auto config = LoadWebConfig(args.web_config_file);
    if (!config.ok()) {
      PrintError(config.status());
      return kExitInput;
    }
    web = std::make_shared<const WebConfig>(std::move(*config));
  }
  AgentOptions options = ToAgentOptions(args.sampling);
  options.reopen_every_ns = static_cast<TimeNs>(std::llround(args.nvml_retry_s * 1e9));
  options.hostname = args.hostname;
  options.pod_refresh_ns = static_cast<TimeNs>(std::llround(args.pod_refresh_s * 1e9));
  if (args.pod_resources_socket.empty()) {
    if (access(PodResourcesClient::kDefaultSocket, F_OK) == 0) options.pod_resources_socket = PodResourcesClient::kDefaultSocket;
  } else if (args.pod_resources_socket != "none") {
    options.pod_resources_socket = args.pod_resources_socket;
  }
  char hostname[256] = {};
  if (options.hostname.empty() && gethostname(hostname, sizeof hostname - 1) == 0) options.hostname = hostname;

  // SIGTERM/SIGINT end the agent, SIGHUP reloads the web config; they are
  // waited for on this thread, so no handler runs inside the sampling or
  // serving threads (and SIGHUP's default, ending the process, never applies).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a scraper that hangs up mid-response

  Agent agent(options);
  agent.Start();
  ServerOptions server_options;
  server_options.host = host;
  server_options.port = port;
  server_options.limits.workers = args.threads;
  server_options.limits.max_connections = args.max_connections;
  server_options.web = web;
  auto server = MetricsServer::Start(agent, server_options);
  if (!server.ok()) {
    PrintError(server.status());
    return kExitInput;
  }
  std::fprintf(stderr, "gputriage agent: serving %s://%s:%d/metrics%s (sampling %s every %gs, judging a %gs window every %gs)\n",
               web && web->tls() ? "https" : "http", Printable(host).c_str(), (*server)->port(),
               web && !web->basic_auth_users.empty() ? " (basic auth)" : "",
               args.sampling.dcgm_exporter_url.empty() ? "NVML" : Printable(args.sampling.dcgm_exporter_url).c_str(),
               args.sampling.interval_s, args.sampling.window_s, args.sampling.judge_every_s);
  std::fflush(stderr);
  int received = 0;
  for (;;) {
    sigwait(&stop_signals, &received);
    if (received != SIGHUP) break;
    ReloadWebConfig(args.web_config_file, "gputriage agent", [&](std::shared_ptr<const WebConfig> fresh) {
      return (*server)->Reload(std::move(fresh));
    });
  }
  std::fprintf(stderr, "gputriage agent: %s received, stopping\n", received == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Stop();
  agent.Stop();
  return kExitOk;
}

}  // namespace

Subcommand AddAgentCommand(CLI::App& app) {
  auto a = std::make_shared<AgentArgs>();
  auto* agent = app.add_subcommand(
      "agent", "Run as a node agent: sample every GPU, judge each job continuously, serve Prometheus /metrics");
  agent->add_option("--listen", a->listen, "HOST:PORT to serve /metrics and /healthz on (default 127.0.0.1:9401)");
  AddSamplingOptions(*agent, a->sampling, "; its DCGM series are not served again");
  agent->add_option("--nvml-retry", a->nvml_retry_s,
                    "seconds between attempts to open NVML again while it fails or every GPU is lost (default 30)")
      ->check(FiniteRange(0.1, 86400.0));
  agent->add_option("--hostname", a->hostname,
                    "the node's name on every series (default: $NODE_NAME, else this machine's hostname; in a "
                    "Kubernetes pod the hostname is the pod's)")
      ->envname("NODE_NAME");
  agent->add_option("--web-config-file", a->web_config_file,
                    "TLS and basic auth, in the Prometheus exporter-toolkit's web-config format (docs/deployment.md)");
  agent->add_option("--pod-resources-socket", a->pod_resources_socket,
                    "the kubelet's pod-resources socket, naming the pod, namespace and container each GPU is allocated "
                    "to (default: /var/lib/kubelet/pod-resources/kubelet.sock when it exists; none: never)");
  agent->add_option("--pod-refresh", a->pod_refresh_s, "seconds between asking the kubelet (default 10)")
      ->check(FiniteRange(0.1, 3600.0));
  agent->add_option("--threads", a->threads, "threads answering requests (default 4; connections are served by one event loop)")
      ->check(CLI::Range(1, 256));
  agent->add_option("--max-connections", a->max_connections,
                    "open connections at most (default 512); at the cap the longest-idle one is closed for a new one")
      ->check(CLI::Range(8, 65536));
  return {agent, [a] { return RunAgent(*a); }};
}

}  // namespace gputriage::cli
