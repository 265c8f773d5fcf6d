// `gputriage export RUN_ID`: a stored run as a file another machine's
// `gputriage diagnose` reads. The format is dcgm-exporter's Prometheus text with
// a timestamp on every sample (DCGM names and units), so Prometheus tooling
// (promtool backfill) reads it too.
#pragma once

#include <string>

#include "gputriage/status.h"
#include "src/store/run_store.h"

namespace gputriage {

/// Writes run `run` of `store` to `path`. Returns the number of samples written.
StatusOr<int64_t> ExportRun(RunStore& store, int64_t run, const std::string& path);

}  // namespace gputriage
