// `gputriage runs --json`: the run store's list of runs as JSON (the report
// library is the one place JSON is written).
#pragma once

#include <string>
#include <vector>

#include "src/store/run_store.h"

namespace gputriage {

/// [{"id", "name", "status", "command", "host", "started_ns", "ended_ns",
///   "exit_code" (null while unknown), "devices", "samples", "metadata": {...}}, ...]
std::string RenderRunsJson(const std::vector<RunInfo>& runs);

}  // namespace gputriage
