#include <algorithm>
#include <functional>
#include "src/fleet/fleet_report.h"

#include <cmath>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gputriage/report.h"
#include "gputriage/version.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

using OrderedJson = nlohmann::ordered_json;  // members in the order written


std::string Utc(TimeNs t) {
  const time_t s = static_cast<time_t>(t / kNsPerS);
  struct tm tm {};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

OrderedJson WhatIfJson(const std::optional<WhatIf>& w, double saving) {
  if (!w) return nullptr;
  return {{"from_percent", w->from_percent}, {"to_percent", w->to_percent},
          {"more_compute_percent", w->more_compute_percent}, {"spend_saved_percent", w->spend_saved_percent},
          {"saving_usd", saving}};
}

/// GPU-hours: tenths from 10 up, three figures below (a short range is minutes).
std::string Hours(double h) { return h >= 10 ? fmt::format("{:.1f}", h) : fmt::format("{:.3g}", h); }

}  // namespace

std::string RenderFleetText(const FleetReport& r, size_t top) {
  std::string out;
  out += fmt::format("gputriage fleet — {} · {} to {} (step {})\n", Printable(r.prometheus_url), Utc(r.start),
                     Utc(r.end), FormatPromDuration(r.step));
  out += "source: " + r.source + "\n";
  out += "price: " + (r.price_basis.empty() ? std::string("none known") : Printable(r.price_basis)) + "\n";
  out += fmt::format("{} GPU(s), {} GPU-hours at {:.1f}% utilization (time-weighted): {} spent, {} idle ({}/month at "
                     "the rate of the {} h observed)\n",
                     r.gpus, Hours(r.gpu_hours), r.utilization_percent, FormatUsd(r.cost_usd), FormatUsd(r.idle_cost_usd),
                     FormatUsd(r.idle_cost_usd_per_month), Hours(r.observed_hours));
  if (!r.gpu_hours_basis.empty()) out += "GPU-hours: " + r.gpu_hours_basis + "\n";
  if (r.what_if)
    out += fmt::format("what-if, the fleet at {}: saves {} over this range\n", WhatIfLine(*r.what_if),
                       FormatUsd(r.what_if_saving_usd));
  const bool ledger = !r.ledger.empty();
  const bool by_badput = r.rank == FleetRank::kBadputDollars;
  if (ledger) {
    // Where the agents' GPU time went, by bucket, most dollars first.
    out += fmt::format("\nGoodput ledger (the agents'): {} GPU-hours, {} badput (not productive)\n",
                       Hours(r.ledger_gpu_hours), FormatUsd(r.badput_usd));
    for (const auto& b : r.ledger) {
      if (b.gpu_hours <= 0) continue;
      out += fmt::format("  {:<19} {:>8} GPU-h {:>5.1f}% {:>10}{}\n", b.bucket, Hours(b.gpu_hours),
                         r.ledger_gpu_hours > 0 ? 100 * b.gpu_hours / r.ledger_gpu_hours : 0.0, FormatUsd(b.cost_usd),
                         b.bucket == "unsplit" ? "  (no step markers: not split)" : "");
    }
  } else if (by_badput) {
    out += "\nNo goodput-ledger series (gputriage_ledger_gpu_seconds_total) in the range: ranked by idle dollars\n";
  }
  out += fmt::format("\nBy {}, most {} dollars first:\n", FleetGroupingName(r.by), by_badput && ledger ? "badput" : "idle");
  out += fmt::format("  {:>3}  {:<44} {:>4} {:>8} {:>6} {:>10}{}  {:<20} {}\n", "#", FleetGroupingName(r.by), "GPUs",
                     "GPU-h", "util", "idle $", ledger ? fmt::format(" {:>10} {:>7}", "badput $", "goodput") : "",
                     "verdict", fmt::format("at {:g}%", r.target_percent));
  size_t shown = 0;
  const size_t total = std::max(r.groups_total, r.groups.size());
  for (const auto& g : r.groups) {
    if (top > 0 && shown == top) break;
    ++shown;
    std::string name = Printable(g.name);
    if (name.size() > 44) name = name.substr(0, 41) + "...";
    const std::string what_if = g.what_if ? fmt::format("saves {} ({:.0f}% less GPU time)", FormatUsd(g.what_if_saving_usd),
                                                        std::floor(g.what_if->spend_saved_percent))
                                : g.utilization_percent <= 0 ? "no work: release it (saves all of its cost)"
                                                             : "at or above the target";
    std::string ledger_columns;
    if (ledger) {
      ledger_columns = fmt::format(" {:>10} {:>7}", !g.ledger ? "-" : FormatUsd(g.ledger->badput_usd),
                                   !g.ledger || std::isnan(g.ledger->goodput_percent) ? "-" : fmt::format("{:.1f}%", g.ledger->goodput_percent));
    }
    out += fmt::format("  {:>3}  {:<44} {:>4} {:>8} {:>5.1f}% {:>10}{}  {:<20} {}\n", shown, name, g.gpus, Hours(g.gpu_hours),
                       g.utilization_percent, FormatUsd(g.idle_cost_usd), ledger_columns,
                       g.verdict.empty() ? "-" : g.verdict, what_if);
    if (by_badput && g.ledger) {
      std::vector<std::string> parts;
      for (const auto& b : g.ledger->buckets)
        if (IsBadputBucket(b.bucket) && b.cost_usd > 0 && parts.size() < 4)
          parts.push_back(fmt::format("{} {}", b.bucket, FormatUsd(b.cost_usd)));
      if (!parts.empty()) out += fmt::format("       {:<44} badput: {}\n", "", Join(parts, ", "));
    }
    if (!g.cannot_exclude.empty())
      out += fmt::format("       {:<44} could also be: {}\n", "", Join(g.cannot_exclude, ", "));
  }
  if (total > shown) out += fmt::format("  … {} more (--top 0 shows all)\n", total - shown);
  if (!r.cannot_separate.empty()) {
    out += "\nWhat these series cannot separate:\n";
    for (const auto& c : r.cannot_separate) out += "  - " + c + "\n";
    if (r.source_key != "gputriage")
      out += "  (run `gputriage agent` on the nodes for its verdicts, which see every sampling tick)\n";
  }
  for (const auto& w : r.warnings) out += "warning: " + Printable(w) + "\n";
  return out;
}

void WriteFleetJson(const FleetReport& r, size_t top, const std::function<void(std::string_view)>& write) {
  OrderedJson j;
  j["schema_version"] = kFleetSchemaVersion;
  j["tool"] = {{"name", "gputriage"}, {"version", kGputriageVersion}};
  j["prometheus"] = r.prometheus_url;
  j["source"] = r.source_key;
  j["source_description"] = r.source;
  j["start"] = Utc(r.start);
  j["end"] = Utc(r.end);
  j["range_seconds"] = static_cast<double>(r.end - r.start) / 1e9;
  j["step_seconds"] = static_cast<double>(r.step) / 1e9;
  j["by"] = FleetGroupingName(r.by);
  j["price_basis"] = r.price_basis;
  j["totals"] = {{"gpus", r.gpus},
                 {"gpu_hours", r.gpu_hours},
                 {"utilization_percent", r.utilization_percent},
                 {"cost_usd", r.cost_usd},
                 {"idle_cost_usd", r.idle_cost_usd},
                 {"idle_cost_usd_per_month", r.idle_cost_usd_per_month},
                 {"observed_hours", r.observed_hours},
                 {"gpu_hours_basis", r.gpu_hours_basis},
                 {"what_if", WhatIfJson(r.what_if, r.what_if_saving_usd)}};
  j["rank_by"] = r.rank == FleetRank::kBadputDollars ? "badput" : "idle";
  auto ledger_json = [](const std::vector<FleetLedgerBucket>& buckets) {
    OrderedJson out = OrderedJson::array();
    for (const auto& b : buckets)
      out.push_back({{"bucket", std::string(b.bucket)}, {"gpu_hours", b.gpu_hours}, {"cost_usd", b.cost_usd}, {"badput", IsBadputBucket(b.bucket)}});
    return out;
  };
  j["ledger"] = {{"gpu_hours", r.ledger_gpu_hours}, {"badput_usd", r.badput_usd}, {"buckets", ledger_json(r.ledger)}};
  j["groups_total"] = std::max(r.groups_total, r.groups.size());
  // The groups are written one at a time into the document's text where this
  // marker stands: a fleet ranked by GPU has one per GPU, too many for one tree.
  static constexpr std::string_view kMarker = "@@gputriage-fleet-groups@@";
  j["groups"] = kMarker;
  j["cannot_separate"] = r.cannot_separate;
  j["queries"] = r.queries;
  j["warnings"] = r.warnings;
  const std::string text = j.dump(2, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
  const size_t at = text.find("\"" + std::string(kMarker) + "\"");
  write(std::string_view(text).substr(0, at));
  size_t shown = 0;
  for (const auto& g : r.groups) {
    if (top > 0 && shown == top) break;
    OrderedJson verdicts = OrderedJson::array();
    for (const auto& v : g.verdicts)
      verdicts.push_back({{"verdict", v.verdict}, {"gpu_hours", v.gpu_hours}, {"idle_cost_usd", v.idle_cost_usd}});
    OrderedJson labels = OrderedJson::object();
    for (const auto& [label, value] : g.labels) labels[label] = value;
    const OrderedJson one = {{"labels", labels},
                      {"name", g.name},
                      {"gpus", g.gpus},
                      {"gpu_hours", g.gpu_hours},
                      {"utilization_percent", g.utilization_percent},
                      {"cost_usd", g.cost_usd},
                      {"idle_cost_usd", g.idle_cost_usd},
                      {"verdict", g.verdict.empty() ? OrderedJson(nullptr) : OrderedJson(g.verdict)},
                      {"verdicts", verdicts},
                      {"cannot_exclude", g.cannot_exclude},
                      {"what_if", WhatIfJson(g.what_if, g.what_if_saving_usd)},
                      {"ledger", !g.ledger ? OrderedJson(nullptr)
                                           : OrderedJson{{"gpu_hours", g.ledger->gpu_hours},
                                                  {"badput_usd", g.ledger->badput_usd},
                                                  {"goodput_percent", std::isnan(g.ledger->goodput_percent) ? OrderedJson(nullptr) : OrderedJson(g.ledger->goodput_percent)},
                                                  {"buckets", ledger_json(g.ledger->buckets)}}}};
    // Indented as a member of the top-level object's array would be (4 spaces).
    std::string item = "    " + one.dump(2, ' ', false, OrderedJson::error_handler_t::replace);
    for (size_t i = 0; (i = item.find('\n', i)) != std::string::npos; i += 5) item.insert(i + 1, "    ");
    write(shown == 0 ? "[\n" : ",\n");
    write(item);
    ++shown;
  }
  write(shown == 0 ? "[]" : "\n  ]");
  write(std::string_view(text).substr(at + kMarker.size() + 2));
}

std::string RenderFleetJson(const FleetReport& r, size_t top) {
  std::string out;
  WriteFleetJson(r, top, [&out](std::string_view part) { out.append(part); });
  return out;
}

}  // namespace gputriage
