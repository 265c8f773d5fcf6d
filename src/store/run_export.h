// `gputriage export RUN_ID`: a stored run as a file another machine's
// `gputriage diagnose` reads. The format is dcgm-exporter's Prometheus text with
// a timestamp on every sample (DCGM names and units), so Prometheus tooling
// (promtool backfill) reads it too.
#pragma once

#include <string>

#include "gputriage/status.h"
#include "src/store/run_store.h"

namespace gputriage {

/// What an export wrote.
struct ExportCounts {
  int64_t samples = 0;
  int64_t steps = 0;
  int64_t settings = 0;
};

/// Writes run `run` of `store` to `path`: every sample, the GPUs' facts, and as
/// comment lines the run's settings (workload, price, tags, context) and steps,
/// so the file diagnoses as the stored run does.
StatusOr<ExportCounts> ExportRun(RunStore& store, int64_t run, const std::string& path);

}  // namespace gputriage
