#include "src/report/runs_json.h"

#include <nlohmann/json.hpp>

namespace gputriage {

std::string RenderRunsJson(const std::vector<RunInfo>& runs) {
  using json = nlohmann::json;
  json out = json::array();
  for (const auto& r : runs)
    out.push_back({{"id", r.id},
                   {"name", r.name},
                   {"status", r.status},
                   {"command", r.command},
                   {"host", r.host},
                   {"started_ns", r.started_ns},
                   {"ended_ns", r.ended_ns},
                   {"exit_code", r.exit_code ? json(*r.exit_code) : json(nullptr)},
                   {"devices", r.devices},
                   {"samples", r.samples},
                   {"metadata", r.metadata}});
  // A command line or tag is the user's bytes: invalid UTF-8 must not abort the dump.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gputriage
