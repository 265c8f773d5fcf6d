// `gputriage cost`: what idle capacity costs a fleet at an average utilization,
// and what reaching a target would save; arithmetic without a log.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/report.h"
#include "src/cli/cli_common.h"

namespace gputriage::cli {
namespace {

struct CostArgs {
  double monthly_spend = 0;
  double utilization = 0;
  std::optional<double> sm_active;
  std::vector<double> targets;
  bool json = false;
};

/// Fleet arithmetic without a log: what idle capacity costs at a utilization.
int RunCost(const CostArgs& args) {
  const double idle = IdleMonthlyCost(args.monthly_spend, args.utilization);
  std::vector<double> targets = args.targets;
  if (targets.empty()) targets = {50, 75, 90};
  std::vector<WhatIf> rows;
  for (double t : targets)
    if (t > args.utilization) rows.push_back(MakeWhatIf(args.utilization, t, args.monthly_spend));
  if (args.json) {
    std::string out = fmt::format("{{\"monthly_spend_usd\": {}, \"utilization_percent\": {}, \"idle_cost_usd_per_month\": {}",
                                  args.monthly_spend, args.utilization, idle);
    if (args.sm_active)
      out += fmt::format(", \"sm_active_percent\": {}, \"idle_cost_by_sm_usd_per_month\": {}", *args.sm_active,
                         IdleMonthlyCost(args.monthly_spend, *args.sm_active));
    out += ", \"what_if\": [";
    for (size_t i = 0; i < rows.size(); ++i)
      out += fmt::format("{}{{\"from_percent\": {}, \"to_percent\": {}, \"more_compute_percent\": {}, \"spend_saved_percent\": {}, "
                         "\"monthly_saving_usd\": {}}}",
                         i ? ", " : "", rows[i].from_percent, rows[i].to_percent, rows[i].more_compute_percent,
                         rows[i].spend_saved_percent, rows[i].monthly_saving_usd.value_or(0));
    out += "]}\n";
    Print(out);
    return kExitOk;
  }
  PrintText(fmt::format("{}/month at {:g}% average utilization: {}/month of idle capacity\n",
                    FormatUsd(args.monthly_spend), args.utilization, FormatUsd(idle)));
  if (args.sm_active)
    PrintText(fmt::format("by SM activity ({:g}%): {}/month of idle capacity\n", *args.sm_active,
                      FormatUsd(IdleMonthlyCost(args.monthly_spend, *args.sm_active))));
  for (const auto& w : rows) PrintText("  " + WhatIfLine(w) + "\n");
  return kExitOk;
}

}  // namespace

Subcommand AddCostCommand(CLI::App& app) {
  auto c = std::make_shared<CostArgs>();
  auto* cost = app.add_subcommand("cost", "Idle capacity and what-if table for a fleet's spend and average utilization");
  cost->add_option("--monthly-spend", c->monthly_spend, "USD per month spent on GPUs")->required()->check(FiniteRange(0.0, 1e12));
  cost->add_option("--utilization", c->utilization, "average GPU utilization, percent (above 0: at 0 % every dollar is idle and no what-if applies)")
      ->required()
      ->check(FiniteRange(0.0, 100.0, true));
  cost->add_option("--sm-active", c->sm_active, "average SM activity, percent (DCGM), for the stricter idle figure")
      ->check(FiniteRange(0.0, 100.0));
  cost->add_option("--target", c->targets, "utilization targets for the what-if table (default 50 75 90)")
      ->check(FiniteRange(0.0, 100.0));
  cost->add_flag("--json", c->json, "print JSON");
  return {cost, [c] { return RunCost(*c); }};
}

}  // namespace gputriage::cli
