#include "src/report/runs_json.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace gputriage {
namespace {

using json = nlohmann::json;

json RunJson(const RunInfo& r) {
  return {{"id", r.id},
                   {"name", r.name},
                   {"status", r.status},
                   {"command", r.command},
                   {"host", r.host},
                   {"started_ns", r.started_ns},
                   {"ended_ns", r.ended_ns},
                   {"exit_code", r.exit_code ? json(*r.exit_code) : json(nullptr)},
                   {"devices", r.devices},
                   {"samples", r.samples},
                   {"metadata", r.metadata}};
}

}  // namespace

std::string RenderRunsJson(const std::vector<RunInfo>& runs) {
  json out = json::array();
  for (const auto& r : runs) out.push_back(RunJson(r));
  // A command line or tag is the user's bytes: invalid UTF-8 must not abort the dump.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string RenderRunsPageJson(const std::vector<const RunListing*>& page, size_t total, size_t offset, size_t limit,
                               const std::vector<std::string>& verdicts) {
  json runs = json::array();
  for (const RunListing* r : page) {
    json row = RunJson(r->info);
    row["findings"] = json::array();
    for (const auto& f : r->findings)
      row["findings"].push_back({{"verdict", f.verdict}, {"severity", SeverityName(f.severity)}, {"title", f.title}});
    row["figures"] = json::object();
    for (const auto& [k, v] : r->figures)
      if (std::isfinite(v)) row["figures"][k] = v;
    runs.push_back(std::move(row));
  }
  json out = {{"schema", "gputriage.runs"}, {"schema_version", 1}, {"total", total}, {"offset", offset},
              {"limit", limit}, {"verdicts", verdicts}, {"runs", std::move(runs)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string RenderErrorJson(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gputriage
