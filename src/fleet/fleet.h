// `gputriage fleet`: where a fleet's GPU money goes idle, from the series a
// Prometheus already holds. Every figure is PromQL over a time range (the
// server does the work, so it scales with the Prometheus, not with this
// process), time-weighted: the range is cut into steps and each step stands
// for its own length of GPU time.
//
// Two kinds of series are understood:
//  - the agent's (gputriage_*): utilization over its window (which saw every
//    sampling tick, not only the scrapes), its verdict, its price;
//  - dcgm-exporter's alone, in either name generation (DCGM_FI_DEV_GPU_UTIL in
//    percent, or 4.9's DCGM_FI_DEV_GPU_UTIL_RATIO): each GPU's series over the
//    range are judged by the same rules as `diagnose`, and the report says
//    which verdicts those metrics cannot separate.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"
#include "gputriage/status.h"
#include "src/fleet/prometheus_api.h"

namespace gputriage {

enum class FleetGrouping { kGpu, kJob, kNamespace, kNode };
const char* FleetGroupingName(FleetGrouping g);
std::optional<FleetGrouping> ParseFleetGrouping(std::string_view name);

enum class FleetSource { kAuto, kGputriage, kDcgm };

/// What the groups are ranked by: the dollars paid for idle GPU time (from
/// utilization, every source), or the badput dollars of the agents' goodput
/// ledgers (every bucket but productive and unsplit; docs/ledger.md).
enum class FleetRank { kIdleDollars, kBadputDollars };

/// "90s", "30m", "24h", "7d", "2w", "1h30m" (Prometheus' duration syntax; ms,
/// y too). Errors name the text.
StatusOr<TimeNs> ParsePromDuration(std::string_view text);
/// The shortest Prometheus duration for `ns` ("1h30m"; whole milliseconds).
std::string FormatPromDuration(TimeNs ns);

struct FleetOptions {
  TimeNs end = 0;                  // the range ends here (wall clock, ns)
  TimeNs range = 24 * 3600 * kNsPerS;
  TimeNs step = 0;                 // 0: range / 1440, at least 1 s
  FleetGrouping by = FleetGrouping::kJob;
  FleetSource source = FleetSource::kAuto;
  std::optional<double> price_per_gpu_hour;
  std::optional<double> monthly_spend;  // spread over the GPUs seen, 730 h a month each
  double target_percent = 75;           // the what-if's utilization
  WorkloadClass workload = WorkloadClass::kUnspecified;
  size_t nodes_per_query = 32;          // dcgm-exporter route: range queries cover this many targets
  size_t series_per_query = 10'000;     // agent route: instant queries cover targets with about this many series
  size_t keep_groups = 0;               // the report keeps the first this many groups (0: all); totals count all
  FleetRank rank = FleetRank::kIdleDollars;
  // Read the agents' goodput ledgers (one more query per batch of targets, and
  // each group's buckets kept): on with kBadputDollars.
  bool ledger = false;
};

/// One goodput-ledger bucket of a group or the fleet: the increase of the
/// agents' gputriage_ledger_gpu_seconds_total over the range, priced.
struct FleetLedgerBucket {
  std::string_view bucket;  // one of LedgerBucketNames() (static storage: a fleet by GPU has 200k groups of these)
  double gpu_hours = 0;
  double cost_usd = 0;
};

/// Whether a ledger bucket is badput: GPU time paid for and not productive
/// (unsplit time, which no step split, is neither).
bool IsBadputBucket(std::string_view bucket);

/// A group's goodput ledger, from the agents' counters.
struct FleetGroupLedger {
  std::vector<FleetLedgerBucket> buckets;  // most dollars first
  double gpu_hours = 0;
  double badput_usd = 0;
  double goodput_percent = NAN;  // productive / gpu_hours, where every GPU's steps split its time
};

/// A verdict's share of a group: the GPU time it held and the idle dollars
/// paid meanwhile.
struct FleetVerdictShare {
  std::string verdict;
  double gpu_hours = 0;
  double idle_cost_usd = 0;
};

struct FleetGroup {
  // What identifies the group (by GPU: node and GPU; by job: pod, Slurm job or
  // process), by name: a list, not a map (a fleet by GPU has 200k groups, and a
  // map's nodes cost about twice the memory).
  std::vector<std::pair<std::string, std::string>> labels;
  std::string name;         // the same, in words
  int gpus = 0;             // distinct GPUs
  double gpu_hours = 0;
  double utilization_percent = 0;  // time-weighted over the group's GPU time
  double cost_usd = 0;
  double idle_cost_usd = 0;
  std::string verdict;      // the verdict under which most of its idle dollars were paid
  std::vector<FleetVerdictShare> verdicts;  // most idle dollars first
  std::vector<std::string> cannot_exclude;  // what the verdict could also be (dcgm-exporter route)
  std::optional<WhatIf> what_if;            // raised to the target (absent at 0 % or at or above it)
  double what_if_saving_usd = 0;            // over the range: the same work for less GPU time
  // The agents' goodput ledgers of its GPUs: null unless read (a pointer: a
  // fleet ranked by GPU has 200k groups, most of them read without it).
  std::shared_ptr<const FleetGroupLedger> ledger;
};

struct FleetReport {
  std::string prometheus_url;
  std::string source;          // what the figures were read from, in words
  std::string source_key;      // "gputriage", "dcgm_legacy", "dcgm_ratio"
  TimeNs start = 0, end = 0, step = 0;
  FleetGrouping by = FleetGrouping::kJob;
  std::string price_basis;
  double target_percent = 75;
  // Totals over every GPU in the range.
  int gpus = 0;
  double gpu_hours = 0;
  double utilization_percent = 0;
  double cost_usd = 0;
  double idle_cost_usd = 0;
  std::optional<WhatIf> what_if;
  double what_if_saving_usd = 0;
  double idle_cost_usd_per_month = 0;  // at the rate of the time observed, 730 h a month
  TimeNs observed_start = 0, observed_end = 0;  // the first and last sample, fleet-wide, within the range
  double observed_hours = 0;                    // between them (the range when unknown)
  std::string gpu_hours_basis;         // how GPU-hours were taken from the series, in words
  FleetRank rank = FleetRank::kIdleDollars;
  std::vector<FleetLedgerBucket> ledger;  // the fleet's ledger buckets (the agents'), most dollars first
  double ledger_gpu_hours = 0;
  double badput_usd = 0;
  std::vector<FleetGroup> groups;  // most idle (or badput) dollars first (FleetOptions::keep_groups of them)
  size_t groups_total = 0;         // groups in the fleet, kept or not
  std::vector<std::string> cannot_separate;  // verdicts the series read cannot tell apart
  std::vector<std::string> queries;          // the PromQL behind the figures, to check them by hand
  std::vector<std::string> warnings;
};

/// The labels that say which GPU and which job, under one spelling whatever
/// wrote them (the agent, dcgm-exporter's legacy or 1.x labels): hostname,
/// gpu, uuid, model_name, mig_instance, mig_profile, namespace, pod,
/// container, pod_uid, container_id, hpc_job, job_name. A series' own label
/// that Prometheus renamed exported_NAME (it collided with a target label of
/// the same name, as a PodMonitor's namespace and pod do) wins over the
/// target's.
LabelMap CanonicalFleetLabels(const LabelMap& labels);

/// Reads the series over the range and ranks the groups. Errors: the server
/// cannot be reached or refuses a query; no GPU series in the range.
StatusOr<FleetReport> BuildFleetReport(PrometheusApi& api, const FleetOptions& options);

}  // namespace gputriage
