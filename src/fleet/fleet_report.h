// How `gputriage fleet` prints its ranking: a terminal table, or JSON
// (docs/json-schema.md, "fleet"). nlohmann-json writes it (only in fleet_report.cc).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "src/fleet/fleet.h"

namespace gputriage {

constexpr int kFleetSchemaVersion = 1;

/// The ranking as text; `top` rows (0: all).
std::string RenderFleetText(const FleetReport& report, size_t top);
/// The ranking as JSON: `groups`, most idle dollars first, each with `labels`,
/// `gpu_hours`, `utilization_percent`, `idle_cost_usd`, `verdict`; `top` groups (0: all).
std::string RenderFleetJson(const FleetReport& report, size_t top);
/// The same, handed to `write` a part at a time (a ranking by GPU of a large
/// fleet is never one string).
void WriteFleetJson(const FleetReport& report, size_t top, const std::function<void(std::string_view)>& write);

}  // namespace gputriage
