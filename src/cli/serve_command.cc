// `gputriage serve`: a local web UI over the run store (the runs, a run's
// report, two runs compared, an experiment's trend) and the JSON API under it.
// SIGHUP reads the web config again.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "src/net/http_server.h"
#include "src/net/web_config.h"
#include "src/cli/cli_common.h"
#include "src/serve/serve_api.h"
#include "src/serve/serve_server.h"
#include "src/util/strings.h"

namespace gputriage::cli {
namespace {

struct ServeArgs {
  std::string store_path;
  std::string listen = "127.0.0.1:8765";
  std::string token_file;
  std::string web_config_file;
};

/// The token file's first line, trimmed; errors name the file.
StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot read the token file");
  std::string token;
  std::getline(in, token);
  const auto first = token.find_first_not_of(" \t\r");
  const auto last = token.find_last_not_of(" \t\r");
  token = first == std::string::npos ? "" : token.substr(first, last - first + 1);
  if (token.size() < 16)
    return InvalidArgumentError(path + ": the token must be at least 16 characters (e.g. openssl rand -hex 24 > " + path + ")");
  for (char c : token)
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e || c == ';' || c == ',')
      return InvalidArgumentError(path + ": the token must be printable ASCII without spaces, ';' or ','");
  return token;
}

int RunServe(const ServeArgs& args) {
  ServeOptions options;
  if (Status s = ParseListenAddress(args.listen, &options.host, &options.port); !s.ok()) {
    PrintError(s);
    return kExitUsage;
  }
  if (!args.token_file.empty()) {
    auto token = ReadToken(args.token_file);
    if (!token.ok()) {
      PrintError(token.status());
      return kExitUsage;
    }
    options.token = *token;
  }
  if (!args.web_config_file.empty()) {
    auto config = LoadWebConfig(args.web_config_file);
    if (!config.ok()) {
      PrintError(config.status());
      return kExitInput;
    }
    options.web = std::make_shared<const WebConfig>(std::move(*config));
  }
  auto api = ServeApi::Open(args.store_path.empty() ? RunStore::DefaultPath() : args.store_path);
  if (!api.ok()) {
    PrintError(api.status());
    return kExitInput;
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // reload, never the default (ending the process)
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a browser that closes mid-page
  auto server = ServeServer::Start(**api, options);
  if (!server.ok()) {
    PrintError(server.status());
    return server.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitInput;
  }
  const std::string host = options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  std::fprintf(stderr, "gputriage serve: %s on %s://%s:%d/%s\n", Printable((*api)->store_path()).c_str(),
               options.web && options.web->tls() ? "https" : "http", Printable(host).c_str(), (*server)->port(),
               options.token.empty() ? "" : ("?token=" + options.token).c_str());
  std::fflush(stderr);
  int received = 0;
  for (;;) {
    sigwait(&stop_signals, &received);
    if (received != SIGHUP) break;
    ReloadWebConfig(args.web_config_file, "gputriage serve", [&](std::shared_ptr<const WebConfig> fresh) {
      return (*server)->Reload(std::move(fresh));
    });
  }
  std::fprintf(stderr, "gputriage serve: %s received, stopping\n", received == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Stop();
  return kExitOk;
}

}  // namespace

Subcommand AddServeCommand(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* serve = app.add_subcommand(
      "serve", "Serve a web UI over the run store: runs (filter, sort), a run's report, two runs compared, an "
               "experiment's trend; and its JSON API (docs/json-schema.md)");
  serve->add_option("--store", a->store_path, kStoreHelp);
  serve->add_option("--listen", a->listen,
                    "HOST:PORT to serve on (127.0.0.1:8765; anything but loopback needs --token-file or a web config with users)");
  serve->add_option("--token-file", a->token_file,
                    "a file holding the token every request must carry (Bearer header, or the cookie /?token= sets)")
      ->type_name("FILE");
  serve->add_option("--web-config-file", a->web_config_file,
                    "TLS and basic auth, in the Prometheus exporter-toolkit's web-config format (the agent's; "
                    "docs/deployment.md); its users are enough to serve beyond loopback")
      ->type_name("FILE");
  return {serve, [a] { return RunServe(*a); }};
}

}  // namespace gputriage::cli
