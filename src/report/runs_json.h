// `gputriage runs --json`: the run store's list of runs as JSON (the report
// library is the one place JSON is written).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gputriage/diagnosis.h"
#include "src/store/run_store.h"

namespace gputriage {

/// [{"id", "name", "status", "command", "host", "started_ns", "ended_ns",
///   "exit_code" (null while unknown), "devices", "samples", "metadata": {...}}, ...]
std::string RenderRunsJson(const std::vector<RunInfo>& runs);

/// One row of `serve`'s runs table: the run, its verdicts as stored when it
/// ended, and its headline figures (FiguresOf).
struct RunListing {
  RunInfo info;
  std::vector<Finding> findings;
  std::map<std::string, double> figures;
};

/// `serve`'s /api/runs page (schema "gputriage.runs", docs/json-schema.md):
/// {"total": matches before paging, "offset", "limit", "runs": [...], "verdicts": every verdict seen}.
std::string RenderRunsPageJson(const std::vector<const RunListing*>& page, size_t total, size_t offset, size_t limit,
                               const std::vector<std::string>& verdicts);

/// {"error": message} for an API answer that failed.
std::string RenderErrorJson(const std::string& message);

}  // namespace gputriage
