// `gputriage fleet`: ranks a fleet's GPUs, jobs, namespaces or nodes by the
// dollars paid for idle GPU time, from a Prometheus (src/fleet/).
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "src/cli/cli_common.h"
#include "src/fleet/fleet.h"
#include "src/fleet/fleet_report.h"
#include "src/sources/http/http_get.h"
#include "src/util/clock.h"
#include "src/util/strings.h"

namespace gputriage::cli {
namespace {

struct FleetArgs {
  std::string prometheus;
  std::string range = "24h";
  std::string step;
  std::string end;
  std::string by = "job";
  std::string rank_by = "idle";
  bool ledger = false;
  std::string source = "auto";
  std::optional<double> price_per_gpu_hour;
  std::optional<double> monthly_spend;
  double target = 75;
  std::string workload = "unspecified";
  size_t top = 20;
  bool json = false;
  std::string bearer_token_file;
  std::string basic_auth_user;
  std::string basic_auth_password_file;
  double timeout_s = 120;
};

/// --end: seconds since the epoch, or an RFC 3339 UTC time.
StatusOr<TimeNs> ParseEnd(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789.") == std::string::npos) {
    char* end = nullptr;
    const double s = std::strtod(text.c_str(), &end);
    if (*end == '\0' && std::isfinite(s) && s > 0 && s < 1e11) return static_cast<TimeNs>(std::llround(s * 1e9));
  }
  struct tm tm {};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest != nullptr && (std::string(rest) == "Z" || std::string(rest).empty()))
    return static_cast<TimeNs>(timegm(&tm)) * kNsPerS;
  return InvalidArgumentError("--end '" + Printable(text) +
                              "': expected seconds since the epoch or a UTC time such as 2026-11-30T12:00:00Z");
}

StatusOr<std::string> ReadSecret(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return IoError(std::string(what) + " " + path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty()) return InvalidArgumentError(std::string(what) + " " + path + " is empty");
  return s;
}

int RunFleet(const FleetArgs& args) {
  FleetOptions o;
  auto range = ParsePromDuration(args.range);
  if (!range.ok()) {
    PrintError(InvalidArgumentError("--range: " + range.status().message()));
    return kExitUsage;
  }
  o.range = *range;
  if (!args.step.empty()) {
    auto step = ParsePromDuration(args.step);
    if (!step.ok()) {
      PrintError(InvalidArgumentError("--step: " + step.status().message()));
      return kExitUsage;
    }
    o.step = *step;
    if (o.step > o.range) {
      PrintError(InvalidArgumentError("--step " + args.step + " is longer than the --range " + args.range));
      return kExitUsage;
    }
  }
  o.end = WallNs();
  if (!args.end.empty()) {
    auto end = ParseEnd(args.end);
    if (!end.ok()) {
      PrintError(end.status());
      return kExitUsage;
    }
    o.end = *end;
  }
  o.by = *ParseFleetGrouping(args.by);
  o.keep_groups = args.top;  // 0: all
  o.rank = args.rank_by == "badput" ? FleetRank::kBadputDollars : FleetRank::kIdleDollars;
  o.ledger = args.ledger || o.rank == FleetRank::kBadputDollars;
  o.source = args.source == "gputriage" ? FleetSource::kGputriage
             : args.source == "dcgm"    ? FleetSource::kDcgm
                                        : FleetSource::kAuto;
  o.price_per_gpu_hour = args.price_per_gpu_hour;
  o.monthly_spend = args.monthly_spend;
  o.target_percent = args.target;
  o.workload = *ParseWorkloadClass(args.workload);

  HttpAuth auth;
  if (!args.bearer_token_file.empty()) {
    auto token = ReadSecret(args.bearer_token_file, "--bearer-token-file");
    if (!token.ok()) {
      PrintError(token.status());
      return kExitInput;
    }
    auth.bearer_token = *token;
  }
  if (!args.basic_auth_user.empty()) {
    auth.username = args.basic_auth_user;
    if (!args.basic_auth_password_file.empty()) {
      auto password = ReadSecret(args.basic_auth_password_file, "--basic-auth-password-file");
      if (!password.ok()) {
        PrintError(password.status());
        return kExitInput;
      }
      auth.password = *password;
    }
  }
  auto api = PrometheusApi::Open(args.prometheus, auth, static_cast<int>(args.timeout_s * 1000));
  if (!api.ok()) {
    PrintError(api.status());
    return kExitUsage;
  }
  auto report = BuildFleetReport(**api, o);
  if (!report.ok()) {
    PrintError(report.status());
    return kExitInput;
  }
  if (args.json) WriteFleetJson(*report, args.top, [](std::string_view part) { Print(std::string(part)); });
  else PrintText(RenderFleetText(*report, args.top));
  return kExitOk;
}

}  // namespace

Subcommand AddFleetCommand(CLI::App& app) {
  auto a = std::make_shared<FleetArgs>();
  auto* fleet = app.add_subcommand(
      "fleet", "Rank a fleet's GPUs, jobs, namespaces or nodes by idle or badput dollars, from a Prometheus");
  fleet->add_option("--prometheus", a->prometheus,
                    "the Prometheus (or Thanos, Mimir: anything with its HTTP API) base URL, e.g. http://prometheus:9090")
      ->required();
  fleet->add_option("--range", a->range, "how far back from --end (Prometheus duration: 24h, 7d, 1h30m; default 24h)");
  fleet->add_option("--step", a->step, "the time resolution each step of GPU time is read at (default: range/1440, at least 1s)");
  fleet->add_option("--end", a->end, "when the range ends: seconds since the epoch or 2026-11-30T12:00:00Z (default now)");
  fleet->add_option("--by", a->by, "rank by gpu, job (pod, Slurm job or process), namespace or node (default job)")
      ->check(CLI::IsMember({"gpu", "job", "namespace", "node"}));
  fleet->add_option("--rank-by", a->rank_by,
                    "idle (dollars paid for idle GPU time; default) or badput (dollars of the agents' goodput-ledger "
                    "buckets that are not productive: data wait, checkpoints, evaluation, idle phases, ...)")
      ->check(CLI::IsMember({"idle", "badput"}));
  fleet->add_flag("--ledger", a->ledger,
                  "read the agents' goodput ledgers: each group's buckets, badput dollars and goodput (implied by "
                  "--rank-by badput; one more query per batch of targets)");
  fleet->add_option("--source", a->source,
                    "which series: gputriage (the agent's), dcgm (dcgm-exporter's alone), or auto (the agent's when "
                    "there are any; default)")
      ->check(CLI::IsMember({"auto", "gputriage", "dcgm"}));
  auto* price = fleet->add_option("--price-per-gpu-hour", a->price_per_gpu_hour,
                                  "USD per GPU-hour (default: the agents' prices, else the dated price table by model)")
                    ->check(FiniteRange(0.0, 1e6));
  fleet->add_option("--monthly-spend", a->monthly_spend,
                    "USD a month spent on the GPUs seen, spread over them (730 h a month each)")
      ->check(FiniteRange(0.0, 1e12, true))
      ->excludes(price);
  fleet->add_option("--target", a->target, "the what-if's utilization, percent (default 75)")
      ->check(FiniteRange(0.0, 100.0, true));
  fleet->add_option("--workload", a->workload, "workload class dcgm-exporter series are judged against")
      ->check(CLI::IsMember(WorkloadChoices()));
  fleet->add_option("--top", a->top, "groups shown (0: all; default 20)");
  fleet->add_flag("--json", a->json, "print JSON");
  fleet->add_option("--bearer-token-file", a->bearer_token_file, "a file holding a bearer token for the Prometheus");
  fleet->add_option("--basic-auth-user", a->basic_auth_user, "basic auth user for the Prometheus");
  fleet->add_option("--basic-auth-password-file", a->basic_auth_password_file, "a file holding its password");
  fleet->add_option("--timeout", a->timeout_s, "seconds the report may take, every query to the Prometheus together (default 120)")->check(FiniteRange(1.0, 3600.0));
  return {fleet, [a] { return RunFleet(*a); }};
}

}  // namespace gputriage::cli
