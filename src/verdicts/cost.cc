// What idle capacity costs: per GPU, per run and per month, by nvidia-smi
// utilization and by SM activity where it was logged, and what raising
// utilization would buy.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "src/util/strings.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

// Default on-demand prices per GPU-hour. Cloud prices move quickly and differ by
// region, commitment and provider: these are starting points, each with its date
// and source; --price-per-gpu-hour overrides them. Models without a sourced
// price have no default (the report asks for one).
constexpr GpuPrice kPrices[] = {
    {"H200", 5.408, "AWS EC2 p5e/p5en H200, Capacity Blocks effective accelerator rate (US East Ohio)",
     "aws.amazon.com/ec2/capacityblocks/pricing, read 2026-11 (rates listed for the update of 2025-01-01)"},
    {"H100", 3.90, "AWS EC2 P5 (8x H100 80GB) on-demand, per GPU-hour",
     "costnimbus.com 'GPU cost management for ML teams', March 2026 table"},
    {"A100-SXM4-80GB", 1.50, "A100 80GB on-demand, low end of the hyperscaler range",
     "mercatus-ai.com 'Cloud GPU pricing', May 2026 table ($1.50-$3.00)"},
    {"A100 80GB", 1.50, "A100 80GB on-demand, low end of the hyperscaler range",
     "mercatus-ai.com 'Cloud GPU pricing', May 2026 table ($1.50-$3.00)"},
    {"A100", 1.844, "AWS EC2 p4d.24xlarge (8x A100 40GB), Capacity Blocks effective accelerator rate",
     "aws.amazon.com/ec2/capacityblocks/pricing, read 2026-11 (rates listed for the update of 2025-01-01)"},
    {"L4", 0.80, "GCP g2-standard-4 (1x L4) on-demand, top of the quoted $0.70-$0.80",
     "costnimbus.com 'GPU cost management for ML teams', March 2026"},
};

}  // namespace

std::optional<GpuPrice> DefaultGpuPrice(std::string_view device_name) {
  for (const auto& p : kPrices)
    if (ContainsToken(device_name, p.match)) return p;
  return std::nullopt;
}

double IdleMonthlyCost(double monthly_spend, double util_percent) {
  return monthly_spend * (1.0 - std::clamp(util_percent, 0.0, 100.0) / 100.0);
}

WhatIf MakeWhatIf(double from_percent, double to_percent, std::optional<double> monthly_spend) {
  WhatIf w;
  w.from_percent = from_percent;
  w.to_percent = to_percent;
  if (from_percent > 0) {
    w.more_compute_percent = (to_percent / from_percent - 1.0) * 100.0;
    w.spend_saved_percent = (1.0 - from_percent / to_percent) * 100.0;
    if (monthly_spend) w.monthly_saving_usd = *monthly_spend * w.spend_saved_percent / 100.0;
  }
  return w;
}

CostReport ComputeCost(const std::vector<RecordingAnalysis>& recordings, const DiagnoseOptions& options,
                       const WorkloadTargets& targets) {
  CostReport r;
  double weight_sum = 0, util_sum = 0, sm_weight = 0, sm_sum = 0;
  bool all_priced = true;
  for (const auto& rec : recordings) {
    for (const auto& d : rec.metric_devices) {
      if (d.busy_metric.empty()) continue;  // no utilization: nothing to price against
      DeviceCost c;
      c.label = d.label + (rec.phase.empty() ? "" : " (" + rec.phase + ")");
      c.name = d.name;
      // A MIG slice costs its share of the board, and is that share of a GPU-hour.
      c.board_share = d.board_share;
      c.hours = d.hours * d.board_share;
      c.util_percent = d.busy_mean_percent;
      const auto& sm = d.metrics[static_cast<int>(Metric::kSmActive)];
      if (sm.samples > 0) c.sm_active_percent = sm.mean;
      if (options.price_per_gpu_hour) {
        c.price_per_hour = *options.price_per_gpu_hour;
        c.price_source = "--price-per-gpu-hour";
      } else if (auto p = DefaultGpuPrice(d.name)) {
        c.price_per_hour = p->usd_per_gpu_hour;
        c.price_source = fmt::format("{} ({})", p->offer, p->source);
      } else {
        all_priced = false;
      }
      if (d.board_share < 1.0 && c.price_per_hour > 0)
        c.price_source += fmt::format("; MIG {}: {:.3g} of the board's hours", d.mig_profile, d.board_share);
      c.cost_usd = c.hours * c.price_per_hour;
      if (c.price_per_hour > 0) {
        c.idle_cost_by_util_usd = c.cost_usd * (1.0 - c.util_percent / 100.0);
        if (!std::isnan(c.sm_active_percent)) c.idle_cost_by_sm_usd = c.cost_usd * (1.0 - c.sm_active_percent / 100.0);
      }
      // Weights: GPU-hours; a single-instant source counts once.
      const double w = c.hours > 0 ? c.hours : 1e-9;
      weight_sum += w;
      util_sum += w * c.util_percent;
      if (!std::isnan(c.sm_active_percent)) sm_weight += w, sm_sum += w * c.sm_active_percent;
      r.gpu_hours += c.hours;
      r.devices.push_back(std::move(c));
    }
  }
  if (weight_sum > 0) r.util_mean_percent = util_sum / weight_sum;
  if (sm_weight > 0) r.sm_active_mean_percent = sm_sum / sm_weight;
  r.monthly_spend_usd = options.monthly_spend;
  bool any_price = false;
  double idle_util = 0, idle_sm = 0;
  bool sm_complete = !r.devices.empty();
  for (const auto& c : r.devices) {
    if (c.price_per_hour <= 0) continue;
    any_price = true;
    r.cost_usd += c.cost_usd;
    idle_util += c.idle_cost_by_util_usd;
    if (std::isnan(c.idle_cost_by_sm_usd)) sm_complete = false;
    else idle_sm += c.idle_cost_by_sm_usd;
  }
  if (any_price) {
    r.idle_cost_by_util_usd = idle_util;
    if (sm_complete) r.idle_cost_by_sm_usd = idle_sm;
    r.price_basis = options.price_per_gpu_hour ? "--price-per-gpu-hour" : "default price table (dated, see notes)";
    if (!all_priced) r.notes.emplace_back("some GPUs have no default price: pass --price-per-gpu-hour to include them");
  }
  if (r.monthly_spend_usd && !std::isnan(r.util_mean_percent)) {
    r.monthly_idle_by_util_usd = IdleMonthlyCost(*r.monthly_spend_usd, r.util_mean_percent);
    if (!std::isnan(r.sm_active_mean_percent))
      r.monthly_idle_by_sm_usd = IdleMonthlyCost(*r.monthly_spend_usd, r.sm_active_mean_percent);
    if (r.price_basis.empty()) r.price_basis = "--monthly-spend";
  }
  r.available = any_price || (r.monthly_spend_usd.has_value() && !std::isnan(r.util_mean_percent));
  if (!r.available && !r.devices.empty())
    r.notes.emplace_back("no price known for these GPUs: pass --price-per-gpu-hour or --monthly-spend for dollar figures");
  if (r.gpu_hours == 0 && !r.devices.empty())
    r.notes.emplace_back("the metric sources are single instants (no time span): per-run dollars are 0; use "
                         "--monthly-spend to price the utilization");
  // What-if: from the measured utilization to the class target and beyond.
  if (!std::isnan(r.util_mean_percent) && r.util_mean_percent > 0) {
    for (double to : {targets.util_investigate_percent, targets.util_good_percent, 90.0})
      if (to > r.util_mean_percent + 0.5) r.what_if.push_back(MakeWhatIf(r.util_mean_percent, to, r.monthly_spend_usd));
  }
  return r;
}

}  // namespace gputriage
