#include "src/fleet/fleet.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "src/analysis/ledger.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

constexpr double kHoursPerMonth = 730;  // 365 × 24 / 12

double Hours(TimeNs ns) { return static_cast<double>(ns) / 3.6e12; }

/// Strings held once however many series repeat them (a fleet's model names,
/// namespaces, hosts): the slices of 200,000 GPUs keep numbers, not maps.
class StringPool {
 public:
  uint32_t Id(const std::string& text) {
    auto [it, inserted] = ids_.try_emplace(text, static_cast<uint32_t>(texts_.size()));
    if (inserted) texts_.push_back(&it->first);
    return it->second;
  }
  const std::string& Text(uint32_t id) const { return *texts_[id]; }

 private:
  std::unordered_map<std::string, uint32_t> ids_;  // node-based: the keys never move
  std::vector<const std::string*> texts_;
};

/// Canonical labels as (name, value) ids, sorted by name id.
using LabelIds = std::vector<std::pair<uint32_t, uint32_t>>;

/// One GPU under one job (or none) over the range: the unit every group is
/// summed from. Its labels are its key in SliceTable.
struct Slice {
  double hours = 0;
  double util_percent = NAN;
  double own_price = NAN;  // the agent's, or the price table's through Diagnose
  uint32_t own_price_basis = 0;  // a SliceTable string id (0: none)
  double price = NAN;      // what the report uses
  bool covered = false;    // hours from the agent's sampled-seconds counter
  std::vector<FleetVerdictShare> verdicts;
  std::vector<std::pair<uint32_t, double>> time_weights, idle_weights;  // agent route: verdict id → samples, idle $
  std::vector<std::string> cannot_exclude;
  // Agent route, with the ledger asked for: (LedgerBucketNames() index,
  // GPU-seconds over the range); empty (24 bytes, no allocation) otherwise.
  std::vector<std::pair<uint8_t, float>> ledger_seconds;
  double IdleCost() const { return std::isfinite(price) ? hours * price * (1 - util_percent / 100) : 0; }
  FleetVerdictShare& Verdict(const std::string& verdict) {
    for (auto& v : verdicts)
      if (v.verdict == verdict) return v;
    verdicts.push_back({verdict, 0, 0});
    return verdicts.back();
  }
};

/// Every slice of the fleet, keyed by its canonical labels.
class SliceTable {
 public:
  SliceTable() { pool_.Id(""); }
  Slice& Of(const LabelMap& canonical) {
    LabelIds key;
    key.reserve(canonical.size());
    for (const auto& [name, value] : canonical) key.emplace_back(pool_.Id(name), pool_.Id(value));
    std::sort(key.begin(), key.end());
    return slices_[std::move(key)];
  }
  LabelMap Labels(const LabelIds& key) const {
    LabelMap out;
    for (const auto& [name, value] : key) out.emplace(pool_.Text(name), pool_.Text(value));
    return out;
  }
  uint32_t Id(const std::string& text) { return pool_.Id(text); }
  const std::string& Text(uint32_t id) const { return pool_.Text(id); }
  std::map<LabelIds, Slice>& slices() { return slices_; }
  bool empty() const { return slices_.empty(); }

 private:
  StringPool pool_;
  std::map<LabelIds, Slice> slices_;
};

std::string Get(const LabelMap& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

std::string KeyOf(const LabelMap& m) {
  std::string k;
  for (const auto& [name, value] : m) k += name + "=" + value + "\x1f";
  return k;
}

}  // namespace

// The spellings are listed in fleet.h; 4.9's dcgm-exporter writes a lower-case hostname.
LabelMap CanonicalFleetLabels(const LabelMap& in) {
  LabelMap out;
  auto first = [&](std::initializer_list<const char*> names) -> std::string {
    for (const char* n : names)
      if (std::string_view(n) != "instance")  // a target label only, never the series' own
        if (auto it = in.find(std::string("exported_") + n); it != in.end() && !it->second.empty()) return it->second;
    for (const char* n : names)
      if (auto it = in.find(n); it != in.end() && !it->second.empty()) return it->second;
    return "";
  };
  auto put = [&](const char* key, std::initializer_list<const char*> names) {
    std::string v = first(names);
    if (!v.empty()) out[key] = std::move(v);
  };
  put("hostname", {"hostname", "Hostname", "instance"});
  put("gpu", {"gpu"});
  put("uuid", {"uuid", "UUID"});
  put("model_name", {"model_name", "modelName"});
  put("mig_instance", {"mig_instance", "GPU_I_ID"});
  put("mig_profile", {"mig_profile", "GPU_I_PROFILE"});
  put("namespace", {"namespace", "pod_namespace"});
  put("pod", {"pod", "pod_name"});
  put("container", {"container", "container_name"});
  put("pod_uid", {"pod_uid"});
  put("container_id", {"container_id"});
  put("hpc_job", {"hpc_job"});
  put("job_name", {"job_name"});
  put("job_source", {"job_source"});
  // The agent says where its job labels come from: where it found no pod,
  // pod, namespace and container labels are the scrape target's (the agent's
  // own pod), never the GPU's job.
  if (const std::string source = Get(out, "job_source"); !source.empty() && source != "pod") {
    for (const char* k : {"namespace", "pod", "container", "pod_uid"}) out.erase(k);
  }
  return out;
}

namespace {

std::string GpuKey(const LabelMap& c) {
  return Get(c, "hostname") + "/" + (Get(c, "uuid").empty() ? Get(c, "gpu") : Get(c, "uuid")) + "/" +
         Get(c, "mig_instance");
}

/// The group a slice belongs to under `by`, and its name in words.
std::pair<LabelMap, std::string> GroupOf(const LabelMap& c, FleetGrouping by) {
  LabelMap g;
  auto copy = [&](const char* key) {
    if (auto it = c.find(key); it != c.end()) g[key] = it->second;
  };
  switch (by) {
    case FleetGrouping::kNode:
      copy("hostname");
      return {g, Get(c, "hostname").empty() ? "(no node label)" : Get(c, "hostname")};
    case FleetGrouping::kNamespace:
      copy("namespace");
      return {g, Get(c, "namespace").empty() ? "(no namespace)" : Get(c, "namespace")};
    case FleetGrouping::kGpu: {
      copy("hostname");
      copy("gpu");
      copy("uuid");
      copy("model_name");
      copy("mig_instance");
      copy("mig_profile");
      std::string name = Get(c, "hostname") + " GPU " + Get(c, "gpu");
      if (!Get(c, "mig_instance").empty()) name += " MIG " + Get(c, "mig_profile") + " #" + Get(c, "mig_instance");
      if (!Get(c, "model_name").empty()) name += " (" + Get(c, "model_name") + ")";
      return {g, name};
    }
    case FleetGrouping::kJob:
      if (!Get(c, "pod").empty()) {
        copy("namespace");
        copy("pod");
        return {g, "pod " + (Get(c, "namespace").empty() ? "" : Get(c, "namespace") + "/") + Get(c, "pod")};
      }
      if (!Get(c, "pod_uid").empty()) {
        copy("pod_uid");
        copy("namespace");
        return {g, "pod " + Get(c, "pod_uid")};
      }
      if (!Get(c, "hpc_job").empty()) {
        copy("hpc_job");
        return {g, "Slurm job " + Get(c, "hpc_job")};
      }
      copy("hostname");
      if (!Get(c, "job_name").empty()) {
        copy("job_name");
        return {g, Get(c, "job_name") + " on " + Get(c, "hostname")};
      }
      g["job_name"] = "";
      return {g, "no job on " + Get(c, "hostname")};
  }
  return {g, ""};
}

TimeNs DefaultStep(TimeNs range) { return std::max<TimeNs>(kNsPerS, (range / 1440 / kNsPerS) * kNsPerS); }

/// `expr` evaluated at each step of the range, as a subquery.
std::string Sub(const std::string& expr, const FleetOptions& o) {
  return "(" + expr + ")[" + FormatPromDuration(o.range) + ":" + FormatPromDuration(o.step) + "]";
}

// ---- the agent's series ----

Status ReadAgentSeries(PrometheusApi& api, const FleetOptions& o, FleetReport& report, SliceTable& table) {
  const double step_hours = Hours(o.step);
  const std::string range = "[" + FormatPromDuration(o.range) + "]";
  // Each series of the agent is keyed by its labels less those that say what
  // the value is (window, basis, verdict, severity).
  auto slice_of = [&](const LabelMap& raw) -> Slice& { return table.Of(CanonicalFleetLabels(raw)); };
  // The per-GPU queries, with `m` the matcher of one batch of targets.
  // How much GPU time: the time the agents' samples cover (a counter; its
  // increase). Counting query steps instead overstates a short stretch of
  // data in a long range (every step within Prometheus' 5-minute lookback of
  // a sample counts, and a coarse step counts whole), and can miss it whole
  // (data between two steps): steps only for agents without the counter.
  auto covered = [&](const std::string& m) { return "increase(gputriage_gpu_sampled_seconds_total" + m + range + ")"; };
  auto steps_with_value = [&](const std::string& m) {
    return "count_over_time(" + Sub("gputriage_gpu_utilization_percent" + m, o) + ")";
  };
  // Means and proportions over the raw samples: scraped at one interval, each
  // stands for the same time.
  auto util_mean = [&](const std::string& m) { return "avg_over_time(gputriage_gpu_utilization_percent" + m + range + ")"; };
  auto price = [&](const std::string& m) {
    return "max without (basis) (avg_over_time(gputriage_price_usd_per_hour" + m + range + "))";
  };
  auto verdict_time = [&](const std::string& m) { return "count_over_time(gputriage_finding" + m + range + ")"; };
  auto verdict_idle = [&](const std::string& m) {
    return "sum_over_time(" +
           Sub("gputriage_finding" + m + " * ignoring (verdict, severity) group_left gputriage_idle_usd_per_hour" + m, o) +
           ")";
  };
  // The goodput ledger: GPU-seconds by bucket (agents that have the counter).
  auto ledger = [&](const std::string& m) { return "increase(gputriage_ledger_gpu_seconds_total" + m + range + ")"; };
  const std::string basis = "max by (basis) (last_over_time(gputriage_price_usd_per_hour" + range + "))";
  const std::string first_seen = "min(min_over_time(timestamp(gputriage_gpu_utilization_percent)[" +
                                 FormatPromDuration(o.range) + ":" + FormatPromDuration(o.step) + "]))";
  const std::string last_seen = "max(max_over_time(timestamp(gputriage_gpu_utilization_percent)[" +
                                FormatPromDuration(o.range) + ":" + FormatPromDuration(o.step) + "]))";
  const std::string targets = "count by (instance) (last_over_time(gputriage_gpu_utilization_percent" + range + "))";
  report.queries = {covered("") + "  # seconds the samples cover: GPU time",
                    steps_with_value("") + "  # steps with a value x step: GPU time where an agent has no counter",
                    util_mean(""), price(""), basis,
                    verdict_time("") + "  # samples per verdict: the shares of each GPU's time",
                    verdict_idle("") + "  # idle dollars per verdict, in steps: the shares of each GPU's idle dollars",
                    ledger("") + "  # GPU-seconds by goodput-ledger bucket (with --ledger or --rank-by badput)",
                    first_seen + ", " + last_seen + "  # the time observed",
                    targets + "  # the targets: the per-GPU queries above read them a batch at a time, "
                              "{instance=~\"…\"} (no reply holds the whole fleet)"};

  // The targets and their series, in batches of about series_per_query series.
  std::vector<std::pair<std::string, double>> instances;
  RETURN_IF_ERROR(api.QueryEach(targets, o.end, [&](const LabelMap& labels, double n) {
    instances.emplace_back(Get(labels, "instance"), n);
  }));
  std::sort(instances.begin(), instances.end());
  std::vector<std::string> matchers;
  for (size_t i = 0; i < instances.size();) {
    std::vector<std::string> alternatives;
    double series = 0;
    for (; i < instances.size() && (alternatives.empty() || series + instances[i].second <= static_cast<double>(o.series_per_query)); ++i) {
      alternatives.push_back(PromRegexEscape(instances[i].first));
      series += instances[i].second;
    }
    matchers.push_back("{instance=~\"" + Join(alternatives, "|") + "\"}");
  }

  const uint32_t no_basis = table.Id("");
  std::set<std::string> unknown_buckets;
  for (const std::string& m : matchers) {
    RETURN_IF_ERROR(api.QueryEach(util_mean(m), o.end, [&](const LabelMap& l, double v) { slice_of(l).util_percent = v; }));
    RETURN_IF_ERROR(api.QueryEach(covered(m), o.end, [&](const LabelMap& l, double v) {
      if (!std::isfinite(v) || v < 0) return;
      Slice& sl = slice_of(l);
      sl.hours = v / 3600.0;
      sl.covered = true;
    }));
    RETURN_IF_ERROR(api.QueryEach(steps_with_value(m), o.end, [&](const LabelMap& l, double v) {
      Slice& sl = slice_of(l);
      if (!sl.covered) sl.hours = v * step_hours;
    }));
    RETURN_IF_ERROR(api.QueryEach(price(m), o.end, [&](const LabelMap& l, double v) { slice_of(l).own_price = v; }));
    if (o.ledger || o.rank == FleetRank::kBadputDollars) RETURN_IF_ERROR(api.QueryEach(ledger(m), o.end, [&](const LabelMap& l, double v) {
      if (!std::isfinite(v) || v < 0) return;
      LabelMap raw = l;
      const std::string name = Get(raw, "bucket");
      const auto& names = analysis::LedgerBucketNames();
      const auto known = std::find(names.begin(), names.end(), name);
      if (known == names.end()) {  // a newer agent's bucket: said, not guessed at
        if (unknown_buckets.size() < 8) unknown_buckets.insert(name);
        return;
      }
      const auto bucket = static_cast<uint8_t>(known - names.begin());
      raw.erase("bucket");
      auto& seconds = slice_of(raw).ledger_seconds;
      auto it = std::find_if(seconds.begin(), seconds.end(), [&](const auto& b) { return b.first == bucket; });
      if (it == seconds.end()) seconds.emplace_back(bucket, static_cast<float>(v));
      else it->second += static_cast<float>(v);
    }));
    // Per verdict: its share of each GPU's time (samples under it) and of its
    // idle dollars (the idle rate under it, summed over steps; where no step saw
    // the data, the time shares). A verdict whose severity changed within the
    // range comes as two series: both add.
    for (const bool idle : {false, true}) {
      RETURN_IF_ERROR(api.QueryEach(idle ? verdict_idle(m) : verdict_time(m), o.end, [&](const LabelMap& l, double v) {
        if (!std::isfinite(v) || v <= 0) return;
        LabelMap raw = l;
        const uint32_t verdict = table.Id(Get(raw, "verdict"));
        raw.erase("verdict");
        raw.erase("severity");
        auto& weights = idle ? slice_of(raw).idle_weights : slice_of(raw).time_weights;
        auto it = std::find_if(weights.begin(), weights.end(), [&](const auto& w) { return w.first == verdict; });
        if (it == weights.end()) weights.emplace_back(verdict, v);
        else it->second += v;
      }));
    }
  }
  if (!unknown_buckets.empty())
    report.warnings.push_back("ledger buckets this version does not know were left out of the ledger: " +
                              Join(std::vector<std::string>(unknown_buckets.begin(), unknown_buckets.end()), ", "));
  size_t counted_with_data = 0, with_data = 0;
  for (const auto& [key, sl] : table.slices()) {
    counted_with_data += sl.covered && std::isfinite(sl.util_percent);
    with_data += std::isfinite(sl.util_percent);
  }
  report.gpu_hours_basis =
      counted_with_data == with_data
          ? "the time each GPU's samples cover (the agents' gputriage_gpu_sampled_seconds_total, its increase over the range)"
          : fmt::format("the time samples cover for {} of {} GPU series; query steps with a value x the step for the rest "
                        "(agents older than gputriage_gpu_sampled_seconds_total: up to the 5-minute lookback more)",
                        counted_with_data, with_data);
  for (const bool first : {true, false}) {
    RETURN_IF_ERROR(api.QueryEach(first ? first_seen : last_seen, o.end, [&](const LabelMap&, double v) {
      if (std::isfinite(v)) (first ? report.observed_start : report.observed_end) = static_cast<TimeNs>(v * 1e9);
    }));
  }
  std::vector<std::string> basis_names;
  RETURN_IF_ERROR(api.QueryEach(basis, o.end, [&](const LabelMap& l, double) { basis_names.push_back(Get(l, "basis")); }));
  const uint32_t agent_basis =
      basis_names.empty() ? no_basis : table.Id("the agents' prices (" + Join(basis_names, "; ") + ")");

  for (auto& [key, sl] : table.slices()) {
    sl.own_price_basis = agent_basis;
    double time_total = 0, idle_total = 0;
    for (const auto& [v, w] : sl.time_weights) time_total += w;
    for (const auto& [v, w] : sl.idle_weights) idle_total += w;
    // The idle dollars at the agent's own price (rescaled later when the
    // price is given here).
    const double idle_usd = std::isfinite(sl.own_price) && std::isfinite(sl.util_percent)
                                ? sl.hours * sl.own_price * (1 - sl.util_percent / 100)
                                : 0;
    for (const auto& [verdict, w] : sl.time_weights) {
      FleetVerdictShare& share = sl.Verdict(table.Text(verdict));
      share.gpu_hours = sl.hours * w / time_total;
      share.idle_cost_usd = idle_total > 0 ? 0 : idle_usd * w / time_total;
    }
    if (idle_total > 0)
      for (const auto& [verdict, w] : sl.idle_weights) sl.Verdict(table.Text(verdict)).idle_cost_usd = idle_usd * w / idle_total;
    std::sort(sl.verdicts.begin(), sl.verdicts.end(),
              [](const FleetVerdictShare& x, const FleetVerdictShare& y) { return x.verdict < y.verdict; });
    sl.time_weights = {};
    sl.idle_weights = {};
  }
  // Series that carry a verdict but no utilization in the range (scraped
  // only at its very end) add no GPU time.
  auto& slices = table.slices();
  for (auto it = slices.begin(); it != slices.end();)
    it = it->second.hours > 0 && std::isfinite(it->second.util_percent) ? std::next(it) : slices.erase(it);
  return Status::Ok();
}

// ---- dcgm-exporter's series ----

struct DcgmFamily {
  Metric metric;
  const char* legacy;  // legacy name (percent for GPU_UTIL, ratio for PROF)
  double legacy_scale;
  const char* renamed;  // DCGM 4.7 / dcgm-exporter 4.9 name (0-1 ratio)
};
constexpr DcgmFamily kDcgmFamilies[] = {
    {Metric::kGpuUtil, "DCGM_FI_DEV_GPU_UTIL", 1, "DCGM_FI_DEV_GPU_UTIL_RATIO"},
    {Metric::kGrEngineActive, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 100, "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"},
    {Metric::kSmActive, "DCGM_FI_PROF_SM_ACTIVE", 100, "DCGM_FI_PROF_SM_UTIL_RATIO"},
    {Metric::kSmOccupancy, "DCGM_FI_PROF_SM_OCCUPANCY", 100, "DCGM_FI_PROF_SM_OCCUPANCY_RATIO"},
    {Metric::kTensorActive, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 100, "DCGM_FI_PROF_TENSOR_UTIL_RATIO"},
    {Metric::kDramActive, "DCGM_FI_PROF_DRAM_ACTIVE", 100, "DCGM_FI_PROF_DRAM_UTIL_RATIO"},
    {Metric::kFp32Active, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", 100, "DCGM_FI_PROF_FP32_UTIL_RATIO"},
    {Metric::kFp16Active, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", 100, "DCGM_FI_PROF_FP16_UTIL_RATIO"},
    {Metric::kPowerW, "DCGM_FI_DEV_POWER_USAGE", 1, "DCGM_FI_DEV_BOARD_POWER_WATTS"},
};

struct DcgmSliceData {
  LabelMap labels;
  std::map<Metric, std::vector<std::pair<TimeNs, double>>> series;
  std::map<Metric, std::vector<TimeNs>> sample_times;  // busy families: scrape times over the last 5 minutes
  std::map<Metric, double> raw_samples;                 // busy families: samples in the range
};

/// A series' scrape interval: the median spacing of its own timestamps
/// (sorted, distinct); 0 when fewer than two.
TimeNs ScrapeInterval(const std::vector<TimeNs>& times) {
  if (times.size() < 2) return 0;
  std::vector<TimeNs> gaps;
  for (size_t i = 1; i < times.size(); ++i) gaps.push_back(times[i] - times[i - 1]);
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
  return gaps[gaps.size() / 2];
}

Status ReadDcgmSeries(PrometheusApi& api, const FleetOptions& o, FleetReport& report, SliceTable& table) {
  const std::string range = "[" + FormatPromDuration(o.range) + "]";
  // Which families the range holds, under which generation's names.
  struct Present {
    const DcgmFamily* family;
    std::string name;
    double scale;
  };
  // A fleet part-way through the upgrade has both generations: each name found is read.
  std::vector<Present> present;
  bool legacy_util = false, renamed_util = false;
  for (const auto& f : kDcgmFamilies) {
    for (int generation = 0; generation < 2; ++generation) {
      const std::string name = generation == 0 ? f.legacy : f.renamed;
      auto n = api.Query("count(last_over_time(" + name + range + "))", o.end);
      if (!n.ok()) return n.status();
      if (n->empty() || n->front().value <= 0) continue;
      // Legacy names hold percent (GPU_UTIL) or a ratio (PROF); DCGM 4.7's are
      // all ratios, except power, which stays in watts.
      const double scale = generation == 0 ? f.legacy_scale : f.metric == Metric::kPowerW ? 1.0 : 100.0;
      present.push_back({&f, name, scale});
      if (f.metric == Metric::kGpuUtil) (generation == 0 ? legacy_util : renamed_util) = true;
    }
  }
  const bool has_util = std::any_of(present.begin(), present.end(), [](const Present& p) {
    return p.family->metric == Metric::kGpuUtil || p.family->metric == Metric::kGrEngineActive;
  });
  if (!has_util)
    return NotFoundError(fmt::format(
        "Prometheus {}: no GPU utilization series in the last {} (looked for gputriage_gpu_utilization_percent, "
        "DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_GPU_UTIL_RATIO and DCGM_FI_PROF_GR_ENGINE_ACTIVE)",
        api.url(), FormatPromDuration(o.range)));
  report.source_key = legacy_util && renamed_util ? "dcgm_mixed" : renamed_util ? "dcgm_ratio" : "dcgm_legacy";
  report.source = legacy_util && renamed_util
                      ? "dcgm-exporter series under both name generations (legacy, and DCGM 4.7 / exporter 4.9's ratios)"
                  : renamed_util ? "dcgm-exporter series (DCGM 4.7 / exporter 4.9 names, 0-1 ratios)"
                                 : "dcgm-exporter series (legacy DCGM names)";
  report.gpu_hours_basis =
      "the time each GPU's samples cover (their own scrape timestamps: each stands for the time since the one before, "
      "at most four typical scrape intervals)";
  auto has = [&](Metric m) {
    return std::any_of(present.begin(), present.end(), [&](const Present& p) { return p.family->metric == m; });
  };

  // The targets, queried a batch at a time so that no reply holds the whole fleet.
  std::set<std::string> instance_set;
  for (const auto& p : present) {
    if (p.family->metric != Metric::kGpuUtil && p.family->metric != Metric::kGrEngineActive) continue;
    auto targets = api.Query("count by (instance) (last_over_time(" + p.name + range + "))", o.end);
    if (!targets.ok()) return targets.status();
    for (const auto& t : *targets) instance_set.insert(Get(t.labels, "instance"));
  }
  std::vector<std::string> instances(instance_set.begin(), instance_set.end());
  std::sort(instances.begin(), instances.end());
  for (const auto& p : present)
    report.queries.push_back(fmt::format("{}{{instance=~\"…\"}} over [end - {}, end] every {} (query_range)", p.name,
                                         FormatPromDuration(o.range), FormatPromDuration(o.step)));

  const TimeNs start = o.end - o.range;
  const size_t batch = std::max<size_t>(1, o.nodes_per_query);
  for (size_t first = 0; first < instances.size(); first += batch) {
    std::vector<std::string> alternatives;
    for (size_t i = first; i < std::min(instances.size(), first + batch); ++i)
      alternatives.push_back(PromRegexEscape(instances[i]));
    const std::string matcher = "{instance=~\"" + Join(alternatives, "|") + "\"}";
    std::map<std::string, DcgmSliceData> data;
    // Each GPU's data, keyed by its labels under one spelling.
    auto data_of = [&data](const LabelMap& labels) -> DcgmSliceData& {
      LabelMap c = CanonicalFleetLabels(labels);
      DcgmSliceData& d = data[KeyOf(c)];
      if (d.labels.empty()) d.labels = std::move(c);
      return d;
    };
    for (const auto& p : present) {
      // For the busy families, how much time the samples cover: the raw
      // samples in the range (a query step repeats the last sample for
      // Prometheus' 5-minute lookback, so steps with a value overstate it),
      // each standing for the series' scrape interval, read from its own
      // timestamps over the last 5 minutes.
      if (p.family->metric == Metric::kGpuUtil || p.family->metric == Metric::kGrEngineActive) {
        auto counts = api.Query("count_over_time(" + p.name + matcher + range + ")", o.end);
        if (!counts.ok()) return counts.status();
        for (auto& s : *counts) {
          DcgmSliceData& d = data_of(s.labels);
          // Both name generations of one GPU (an upgrade half done) are the same samples: the larger count.
          d.raw_samples[p.family->metric] = std::max(d.raw_samples[p.family->metric], s.value);
        }
        const TimeNs recent = std::min<TimeNs>(o.range, 300 * kNsPerS);
        auto stamps = api.QueryRange("timestamp(" + p.name + matcher + ")", o.end - recent, o.end, kNsPerS);
        if (!stamps.ok()) return stamps.status();
        for (auto& s : *stamps) {
          DcgmSliceData& d = data_of(s.labels);
          auto& times = d.sample_times[p.family->metric];
          for (const auto& [t, v] : s.points)
            if (std::isfinite(v)) times.push_back(static_cast<TimeNs>(std::llround(v * 1e3)) * kNsPerMs);
        }
      }
      auto series = api.QueryRange(p.name + matcher, start, o.end, o.step);
      if (!series.ok()) return series.status();
      for (auto& s : *series) {
        DcgmSliceData& d = data_of(s.labels);
        auto& points = d.series[p.family->metric];
        for (const auto& [t, v] : s.points)
          if (std::isfinite(v)) points.emplace_back(t, v * p.scale);
      }
    }
    // The batch's typical scrape interval, for a series too short to show its own.
    std::vector<TimeNs> intervals;
    for (auto& [key, d] : data)
      for (auto& [metric, times] : d.sample_times) {
        std::sort(times.begin(), times.end());
        times.erase(std::unique(times.begin(), times.end()), times.end());
        if (const TimeNs i = ScrapeInterval(times); i > 0) intervals.push_back(i);
      }
    TimeNs batch_interval = 0;
    if (!intervals.empty()) {
      std::nth_element(intervals.begin(), intervals.begin() + static_cast<std::ptrdiff_t>(intervals.size() / 2), intervals.end());
      batch_interval = intervals[intervals.size() / 2];
    }
    // Each GPU (under each pod) judged by `diagnose`'s rules over its range.
    for (auto& [key, d] : data) {
      // One value per step, even where both name generations were scraped at once.
      for (auto& [metric, points] : d.series) {
        std::stable_sort(points.begin(), points.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        points.erase(std::unique(points.begin(), points.end(),
                                 [](const auto& x, const auto& y) { return x.first == y.first; }),
                     points.end());
      }
      // MIG instances have no GPU_UTIL: the graphics engine's activity stands for it.
      const Metric busy = d.series.count(Metric::kGpuUtil) ? Metric::kGpuUtil : Metric::kGrEngineActive;
      const auto& busy_points = d.series[busy];
      if (busy_points.empty()) continue;
      Recording r;
      r.format = "prometheus";
      r.clock_is_absolute = true;
      r.source_path = report.prometheus_url;
      const int index = std::atoi(Get(d.labels, "gpu").c_str());
      const int mig = Get(d.labels, "mig_instance").empty() ? -1 : std::atoi(Get(d.labels, "mig_instance").c_str());
      auto pos = r.metrics.FindOrAdd(index, Get(d.labels, "uuid"), "", mig);
      if (!pos) continue;
      MetricDevice& dev = r.metrics.devices[*pos];
      dev.name = Get(d.labels, "model_name");
      dev.mig_profile = Get(d.labels, "mig_profile");
      for (const auto& [metric, points] : d.series)
        for (const auto& [t, v] : points) r.metrics.Add(*pos, metric, t, v);
      Slice& s = table.Of(d.labels);
      const auto& times = d.sample_times[busy];
      // Each raw sample stands for one scrape interval (this series' own, else
      // the batch's typical one), never more than the range in all.
      TimeNs interval = ScrapeInterval(times);
      if (interval <= 0) interval = batch_interval > 0 ? batch_interval : o.step;
      const double raw = d.raw_samples[busy];
      s.hours = raw > 0 ? std::min(raw * Hours(interval), Hours(o.range))
                        : static_cast<double>(busy_points.size()) * Hours(o.step);
      const SeriesSketch& sketch = dev.Get(busy);
      s.util_percent = sketch.mean();
      Run run;
      run.recordings.push_back(std::move(r));
      DiagnoseOptions dopt;
      dopt.workload = o.workload;
      dopt.price_per_gpu_hour = o.price_per_gpu_hour;
      const Diagnosis dx = Diagnose(run, dopt);
      std::string verdict = "efficiency_unknown";
      if (!dx.findings.empty()) {
        verdict = dx.findings.front().verdict;
        s.cannot_exclude = dx.findings.front().cannot_exclude;
      }
      FleetVerdictShare& share = s.Verdict(verdict);
      share.gpu_hours = s.hours;
      if (dx.cost.available && !dx.cost.devices.empty()) {
        s.own_price = dx.cost.devices.front().price_per_hour * dx.cost.devices.front().board_share;
        const DeviceCost& c = dx.cost.devices.front();
        s.own_price_basis = table.Id(c.price_source.empty() ? dx.cost.price_basis
                                                            : fmt::format("{} at ${:g}/GPU-hour: {}", c.name,
                                                                          c.price_per_hour, c.price_source));
      }
    }
  }

  // What these series cannot tell apart.
  report.cannot_separate.push_back(
      "input_bound, launch_bound and host-side stalls (checkpointing, evaluation, synchronisation): DCGM's "
      "utilization shows the GPU waiting, not what it waits for; the agent's step markers or a profiler trace tell "
      "them apart");
  report.cannot_separate.push_back(
      "communication_bound: NCCL kernels that wait for a peer count as busy in every DCGM field");
  if (!has(Metric::kTensorActive))
    report.cannot_separate.push_back(
        "low_precision and at_compute_limit: without tensor pipe activity (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE) a busy "
        "GPU in fp32 looks like one at its limit");
  if (!has(Metric::kDramActive))
    report.cannot_separate.push_back(
        "memory_bound: without DRAM activity (DCGM_FI_PROF_DRAM_ACTIVE) memory-bound kernels look like busy ones");
  if (!has(Metric::kSmActive))
    report.cannot_separate.push_back(
        "undersized_work: without SM activity (DCGM_FI_PROF_SM_ACTIVE) a GPU running one small kernel at a time "
        "counts as fully utilized");
  if (o.step > 5 * kNsPerS)
    report.cannot_separate.push_back(fmt::format(
        "at a step of {}, stop-and-go rhythms shorter than {} are averaged away (input_bound's sawtooth); a shorter "
        "--step over a shorter --range shows them",
        FormatPromDuration(o.step), FormatPromDuration(2 * o.step)));
  return Status::Ok();
}

}  // namespace

bool IsBadputBucket(std::string_view bucket) { return bucket != "productive" && bucket != "unsplit" && !bucket.empty(); }

const char* FleetGroupingName(FleetGrouping g) {
  switch (g) {
    case FleetGrouping::kGpu: return "gpu";
    case FleetGrouping::kJob: return "job";
    case FleetGrouping::kNamespace: return "namespace";
    case FleetGrouping::kNode: return "node";
  }
  return "";
}

std::optional<FleetGrouping> ParseFleetGrouping(std::string_view name) {
  for (FleetGrouping g : {FleetGrouping::kGpu, FleetGrouping::kJob, FleetGrouping::kNamespace, FleetGrouping::kNode})
    if (name == FleetGroupingName(g)) return g;
  return std::nullopt;
}

StatusOr<TimeNs> ParsePromDuration(std::string_view text) {
  static constexpr std::pair<std::string_view, TimeNs> kUnits[] = {
      {"ms", 1'000'000},           {"s", kNsPerS},          {"m", 60 * kNsPerS},          {"h", 3600 * kNsPerS},
      {"d", 86400 * kNsPerS},      {"w", 7 * 86400 * kNsPerS}, {"y", 365 * 86400 * kNsPerS}};
  const std::string shown(text);
  if (text.empty()) return InvalidArgumentError("empty duration (expected e.g. 24h, 7d, 90m)");
  TimeNs total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t digits = i;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == i || digits - i > 9)
      return InvalidArgumentError("bad duration '" + Printable(shown) + "' (expected e.g. 24h, 7d, 1h30m)");
    const int64_t n = std::stoll(std::string(text.substr(i, digits - i)));
    const std::string_view rest = text.substr(digits);
    const auto unit = std::find_if(std::begin(kUnits), std::end(kUnits),
                                   [&](const auto& u) { return StartsWith(rest, u.first) && !(u.first == "m" && StartsWith(rest, "ms")); });
    if (unit == std::end(kUnits))
      return InvalidArgumentError("bad duration '" + Printable(shown) + "': a number needs a unit (ms, s, m, h, d, w, y)");
    if (n > INT64_MAX / unit->second || total > INT64_MAX - n * unit->second)
      return InvalidArgumentError("duration '" + Printable(shown) + "' is too long");
    total += n * unit->second;
    i = digits + unit->first.size();
  }
  if (total <= 0) return InvalidArgumentError("duration '" + Printable(shown) + "' must be above zero");
  return total;
}

std::string FormatPromDuration(TimeNs ns) {
  static constexpr std::pair<const char*, TimeNs> kUnits[] = {
      {"d", 86400 * kNsPerS}, {"h", 3600 * kNsPerS}, {"m", 60 * kNsPerS}, {"s", kNsPerS}, {"ms", 1'000'000}};
  ns = std::max<TimeNs>(1'000'000, ns / 1'000'000 * 1'000'000);
  std::string out;
  for (const auto& [unit, size] : kUnits) {
    if (ns >= size) {
      out += std::to_string(ns / size) + unit;
      ns %= size;
    }
  }
  return out;
}

StatusOr<FleetReport> BuildFleetReport(PrometheusApi& api, const FleetOptions& options) {
  FleetOptions o = options;
  if (o.step <= 0) o.step = DefaultStep(o.range);
  if (o.step > o.range) return InvalidArgumentError("the step (" + FormatPromDuration(o.step) + ") is longer than the range");
  if (o.range / o.step > 100'000)
    return InvalidArgumentError(fmt::format("{} steps of {} over {}: too many points per series; raise --step",
                                            o.range / o.step, FormatPromDuration(o.step), FormatPromDuration(o.range)));
  FleetReport report;
  report.prometheus_url = api.url();
  report.start = o.end - o.range;
  report.end = o.end;
  report.step = o.step;
  report.by = o.by;
  report.target_percent = o.target_percent;

  SliceTable table;
  bool agent = false;
  if (o.source != FleetSource::kDcgm) {
    auto n = api.Query("count(last_over_time(gputriage_gpu_utilization_percent[" + FormatPromDuration(o.range) + "]))", o.end);
    if (!n.ok()) return n.status();
    agent = !n->empty() && n->front().value > 0;
    if (!agent && o.source == FleetSource::kGputriage)
      return NotFoundError(fmt::format("Prometheus {}: no gputriage_gpu_utilization_percent series in the last {} "
                                       "(is a gputriage agent scraped?)",
                                       api.url(), FormatPromDuration(o.range)));
  }
  if (agent) {
    report.source_key = "gputriage";
    report.source = "gputriage agent series (utilization over each agent's window, its verdicts and prices)";
    if (Status s = ReadAgentSeries(api, o, report, table); !s.ok()) return s;
    // GPUs that only a dcgm-exporter reports (a node without the agent): not
    // in the agents' figures, and said so rather than silently left out.
    const std::string dcgm_only =
        "count(group by (UUID) (last_over_time({__name__=~\"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_GPU_UTIL_RATIO|"
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE|DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO\", UUID!=\"\"}[" + FormatPromDuration(o.range) +
        "])) unless on (UUID) group by (UUID) (label_replace(last_over_time(gputriage_gpu_utilization_percent[" +
        FormatPromDuration(o.range) + "]), \"UUID\", \"$1\", \"uuid\", \"(.*)\")))";
    report.queries.push_back(dcgm_only + "  # GPUs in DCGM series only");
    auto only = api.Query(dcgm_only, o.end);
    if (!only.ok()) return only.status();
    if (!only->empty() && only->front().value > 0)
      report.warnings.push_back(fmt::format(
          "{:.0f} GPU(s) appear only in DCGM series (nodes without the gputriage agent): they are not in these "
          "figures; --source dcgm reads every GPU from DCGM's series",
          only->front().value));
  } else {
    if (Status s = ReadDcgmSeries(api, o, report, table); !s.ok()) return s;
  }
  auto& slices = table.slices();
  if (slices.empty())
    return NotFoundError(fmt::format("Prometheus {}: GPU series exist but none has values in the last {}", api.url(),
                                     FormatPromDuration(o.range)));

  // Prices: the flag, the monthly spend spread over the GPUs seen, else each
  // source's own (the agent's, or the dated table by model).
  // Distinct GPUs (a GPU under two jobs over the range is two slices), by the
  // hash of their keys: 8 bytes each, for fleets of hundreds of thousands.
  std::vector<uint64_t> gpu_hashes;
  gpu_hashes.reserve(slices.size());
  for (const auto& [k, s] : slices) gpu_hashes.push_back(std::hash<std::string>{}(GpuKey(table.Labels(k))));
  std::sort(gpu_hashes.begin(), gpu_hashes.end());
  const size_t gpu_count = static_cast<size_t>(std::unique(gpu_hashes.begin(), gpu_hashes.end()) - gpu_hashes.begin());
  gpu_hashes = {};
  std::set<std::string> unpriced;
  if (o.price_per_gpu_hour) {
    report.price_basis = fmt::format("--price-per-gpu-hour {:g}", *o.price_per_gpu_hour);
  } else if (o.monthly_spend) {
    report.price_basis = fmt::format("--monthly-spend {:g} over the {} GPUs seen, {:g} h a month each: ${:.4g}/GPU-hour",
                                     *o.monthly_spend, gpu_count, kHoursPerMonth,
                                     *o.monthly_spend / (kHoursPerMonth * static_cast<double>(gpu_count)));
  }
  std::set<std::string> bases;
  for (auto& [k, s] : slices) {
    if (o.price_per_gpu_hour) s.price = *o.price_per_gpu_hour;
    else if (o.monthly_spend) s.price = *o.monthly_spend / (kHoursPerMonth * static_cast<double>(gpu_count));
    else s.price = s.own_price;
    if (!std::isfinite(s.price)) {
      const LabelMap labels = table.Labels(k);
      unpriced.insert(Get(labels, "model_name").empty() ? GpuKey(labels) : Get(labels, "model_name"));
    } else if (!o.price_per_gpu_hour && !o.monthly_spend && !table.Text(s.own_price_basis).empty()) {
      bases.insert(table.Text(s.own_price_basis));
    }
    // The agent's idle dollars per verdict were at its price; the report's price may differ.
    const double rescale = agent && std::isfinite(s.own_price) && s.own_price > 0 ? s.price / s.own_price : 1.0;
    for (auto& share : s.verdicts) {
      if (!agent) share.idle_cost_usd = s.IdleCost();
      // An agent without a price of its own: the report's price, by time share.
      else if (!std::isfinite(s.own_price)) share.idle_cost_usd = s.hours > 0 ? s.IdleCost() * share.gpu_hours / s.hours : 0;
      else share.idle_cost_usd = std::isfinite(rescale) ? share.idle_cost_usd * rescale : 0;
    }
  }
  if (report.price_basis.empty()) report.price_basis = Join(std::vector<std::string>(bases.begin(), bases.end()), "; ");
  if (!unpriced.empty())
    report.warnings.push_back("no price known for " + Join(std::vector<std::string>(unpriced.begin(), unpriced.end()), ", ") +
                              ": their idle dollars count as 0; give --price-per-gpu-hour or --monthly-spend");

  // Groups: summed compactly (a fleet ranked by GPU has as many groups as
  // GPUs); only the groups the report keeps are written out in full.
  struct Acc {
    const LabelIds* key = nullptr;  // the group's labels
    std::string name;
    double gpu_hours = 0, busy_hours = 0, cost_usd = 0, idle_cost_usd = 0;
    std::vector<uint64_t> gpus;  // hashes of the GPU keys, made distinct below
    std::vector<FleetVerdictShare> verdicts;
    std::vector<std::string> cannot_exclude;
    std::vector<FleetLedgerBucket> ledger;
    double badput_usd = 0;  // of `ledger`, worked out once for the ranking
    bool unsplit = false;  // some GPU's ledger is from utilization alone: goodput is not known
  };
  std::map<LabelIds, Acc> groups;
  // Adds a slice's ledger to a list of buckets, priced at the slice's price.
  auto add_ledger = [&](std::vector<FleetLedgerBucket>& into, const Slice& s) {
    if (into.empty()) into.reserve(s.ledger_seconds.size());
    for (const auto& [bucket, seconds] : s.ledger_seconds) {
      const std::string_view name = analysis::LedgerBucketNames()[bucket];
      auto it = std::find_if(into.begin(), into.end(), [&](const FleetLedgerBucket& b) { return b.bucket == name; });
      if (it == into.end()) into.push_back({name, 0, 0}), it = into.end() - 1;
      it->gpu_hours += seconds / 3600;
      if (std::isfinite(s.price)) it->cost_usd += seconds / 3600 * s.price;
    }
  };
  double busy_hours = 0;
  double longest_slice_hours = 0;
  // Each slice goes as it joins its group: the groups grow into the memory the
  // slices give back (a fleet by GPU has as many groups as slices).
  for (auto slice = slices.begin(); slice != slices.end(); slice = slices.erase(slice)) {
    const LabelIds& k = slice->first;
    Slice& s = slice->second;
    longest_slice_hours = std::max(longest_slice_hours, s.hours);
    const LabelMap labels = table.Labels(k);
    auto [group_labels, name] = GroupOf(labels, o.by);
    LabelIds group_key;
    for (const auto& [n, v] : group_labels) group_key.emplace_back(table.Id(n), table.Id(v));
    auto [entry, inserted] = groups.try_emplace(std::move(group_key));
    Acc& a = entry->second;
    if (inserted) a.key = &entry->first, a.name = std::move(name);
    a.gpus.push_back(std::hash<std::string>{}(GpuKey(labels)));
    a.gpu_hours += s.hours;
    a.busy_hours += s.hours * s.util_percent / 100;
    if (std::isfinite(s.price)) a.cost_usd += s.hours * s.price;
    a.idle_cost_usd += s.IdleCost();
    for (const auto& share : s.verdicts) {
      auto it = std::find_if(a.verdicts.begin(), a.verdicts.end(),
                             [&](const FleetVerdictShare& t) { return t.verdict == share.verdict; });
      if (it == a.verdicts.end()) a.verdicts.push_back({share.verdict, 0, 0}), it = a.verdicts.end() - 1;
      it->gpu_hours += share.gpu_hours;
      it->idle_cost_usd += share.idle_cost_usd;
    }
    for (const auto& c : s.cannot_exclude)
      if (std::find(a.cannot_exclude.begin(), a.cannot_exclude.end(), c) == a.cannot_exclude.end())
        a.cannot_exclude.push_back(c);
    add_ledger(a.ledger, s);
    add_ledger(report.ledger, s);
    for (const auto& [bucket, seconds] : s.ledger_seconds)
      a.unsplit = a.unsplit || analysis::LedgerBucketNames()[bucket] == "unsplit";
    report.gpu_hours += s.hours;
    busy_hours += s.hours * s.util_percent / 100;
    if (std::isfinite(s.price)) report.cost_usd += s.hours * s.price;
    report.idle_cost_usd += s.IdleCost();
  }
  double observed = report.observed_end > report.observed_start
                        ? Hours(report.observed_end - report.observed_start) + Hours(o.step)
                        : 0;
  observed = std::max(observed, longest_slice_hours);
  report.gpus = static_cast<int>(gpu_count);
  using GroupEntry = std::map<LabelIds, Acc>::iterator;
  std::vector<GroupEntry> entries;
  entries.reserve(groups.size());
  for (auto it = groups.begin(); it != groups.end(); ++it) entries.push_back(it);
  auto badput = [](const std::vector<FleetLedgerBucket>& ledger) {
    double usd = 0;
    for (const auto& b : ledger) usd += IsBadputBucket(b.bucket) ? b.cost_usd : 0;
    return usd;
  };
  report.rank = o.rank;
  report.badput_usd = badput(report.ledger);
  for (const auto& b : report.ledger) report.ledger_gpu_hours += b.gpu_hours;
  std::sort(report.ledger.begin(), report.ledger.end(),
            [](const FleetLedgerBucket& x, const FleetLedgerBucket& y) { return x.cost_usd > y.cost_usd; });
  for (GroupEntry e : entries) e->second.badput_usd = badput(e->second.ledger);
  std::sort(entries.begin(), entries.end(), [&](GroupEntry ex, GroupEntry ey) {
    const Acc* x = &ex->second;
    const Acc* y = &ey->second;
    const double kx = o.rank == FleetRank::kBadputDollars ? x->badput_usd : x->idle_cost_usd;
    const double ky = o.rank == FleetRank::kBadputDollars ? y->badput_usd : y->idle_cost_usd;
    if (std::abs(kx - ky) > 1e-9) return kx > ky;
    return x->name < y->name;
  });
  report.groups_total = entries.size();
  if (o.keep_groups > 0 && entries.size() > o.keep_groups) entries.resize(o.keep_groups);
  // At its final size at once: a growing vector of 200k groups holds its old and
  // new copies together while it moves.
  report.groups.reserve(entries.size());
  for (GroupEntry entry : entries) {
    Acc* a = &entry->second;
    FleetGroup g;
    for (auto& [label, value] : table.Labels(*a->key)) g.labels.emplace_back(label, std::move(value));
    g.name = std::move(a->name);
    std::sort(a->gpus.begin(), a->gpus.end());
    g.gpus = static_cast<int>(std::unique(a->gpus.begin(), a->gpus.end()) - a->gpus.begin());
    g.gpu_hours = a->gpu_hours;
    g.cost_usd = a->cost_usd;
    g.idle_cost_usd = a->idle_cost_usd;
    g.utilization_percent = g.gpu_hours > 0 ? 100 * a->busy_hours / g.gpu_hours : 0;
    g.verdicts = std::move(a->verdicts);
    std::sort(g.verdicts.begin(), g.verdicts.end(), [](const FleetVerdictShare& x, const FleetVerdictShare& y) {
      if (std::abs(x.idle_cost_usd - y.idle_cost_usd) > 1e-9) return x.idle_cost_usd > y.idle_cost_usd;
      if (x.gpu_hours != y.gpu_hours) return x.gpu_hours > y.gpu_hours;
      return x.verdict < y.verdict;
    });
    if (!g.verdicts.empty()) g.verdict = g.verdicts.front().verdict;
    // What the dominant verdict could also be (dcgm route).
    g.cannot_exclude = std::move(a->cannot_exclude);
    std::sort(g.cannot_exclude.begin(), g.cannot_exclude.end());
    if (g.utilization_percent > 0 && g.utilization_percent < o.target_percent) {
      g.what_if = MakeWhatIf(g.utilization_percent, o.target_percent, std::nullopt);
      g.what_if_saving_usd = g.cost_usd * g.what_if->spend_saved_percent / 100;
    }
    if (!a->ledger.empty()) {
      auto l = std::make_shared<FleetGroupLedger>();
      l->buckets = std::move(a->ledger);
      std::sort(l->buckets.begin(), l->buckets.end(),
                [](const FleetLedgerBucket& x, const FleetLedgerBucket& y) { return x.cost_usd > y.cost_usd; });
      double productive = 0;
      for (const auto& b : l->buckets) {
        l->gpu_hours += b.gpu_hours;
        if (b.bucket == "productive") productive = b.gpu_hours;
      }
      l->badput_usd = a->badput_usd;
      if (l->gpu_hours > 0 && !a->unsplit) l->goodput_percent = 100 * productive / l->gpu_hours;
      g.ledger = std::move(l);
    }
    report.groups.push_back(std::move(g));
    groups.erase(entry);  // what is left of it (its key, its sums) goes back as its report entry is made
  }
  report.utilization_percent = report.gpu_hours > 0 ? 100 * busy_hours / report.gpu_hours : 0;
  if (report.utilization_percent > 0 && report.utilization_percent < o.target_percent) {
    report.what_if = MakeWhatIf(report.utilization_percent, o.target_percent, std::nullopt);
    report.what_if_saving_usd = report.cost_usd * report.what_if->spend_saved_percent / 100;
  }
  // A month at the rate of the time the data covers: 12 minutes of data in a
  // 30-day range is 12 minutes' rate, not a 30-day one.
  // The first sample to the last, where the query's steps saw them; never
  // less than the longest any one GPU was covered (data shorter than a step
  // can fall between two steps, and a GPU's covered time was observed).
  report.observed_hours = observed > 0 ? std::min(observed, Hours(o.range)) : Hours(o.range);
  report.idle_cost_usd_per_month = report.idle_cost_usd * kHoursPerMonth / report.observed_hours;
  report.warnings.insert(report.warnings.end(), api.warnings().begin(), api.warnings().end());
  return report;
}

}  // namespace gputriage
