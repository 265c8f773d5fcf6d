// `gputriage record -- CMD ARGS...`: runs a command, samples the GPUs through
// NVML while it runs, and hands back its exit status and the recording.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gputriage/model.h"
#include "gputriage/status.h"
#include "src/markers/marker_ring.h"
#include "src/store/run_store.h"

namespace gputriage {

struct RecordOptions {
  std::vector<std::string> command;  // argv of the job
  TimeNs interval_ns = 100 * kNsPerMs;
  // A job that starts background processes and exits: keep recording until
  // they end too (the recorder is their subreaper). Off: stop when the command
  // exits and say which of its processes outlived the record.
  bool follow_descendants = true;
  std::string nvml_library;          // "" = $GPUTRIAGE_NVML_LIBRARY, then the driver's
  std::string dcgm_exporter_url;     // scrape this dcgm-exporter instead of using NVML
  RunStore* store = nullptr;         // where the run is kept as it is recorded (may be null)
  // Why the run store asked for could not be opened: the job runs all the same,
  // and the recording says so in a store_unavailable issue.
  Status store_unavailable;
  RunInfo info;                      // name, host, metadata for the store
  /// Variables set (or replaced) in the job's environment, e.g. PYTHONPATH for
  /// `record --python`.
  std::vector<std::pair<std::string, std::string>> environment;
  /// Called about once a second while the job runs (the CLI's live status line,
  /// the trackers' windows).
  std::function<void(const Recording& recording, TimeNs elapsed_ns)> on_second;
  /// Every sampled value as it is taken (device position, metric, wall time, value).
  std::function<void(size_t device, Metric metric, TimeNs t, double value)> on_sample;
  /// Steps from the job's markers, each once, when they are final.
  std::function<void(const std::vector<MarkedStep>& steps)> on_steps;
  /// Just before each on_second: the ended steps not yet final (held 5 s for late
  /// phases and device times), by start; a live view shows them at once.
  std::function<void(const std::vector<MarkedStep>& held)> on_held_steps;
  /// The requests the job wrote to its configuration channel since the last
  /// tick (the Python package, ending, asks "summary NONCE" for the diagnosis so
  /// far), with the recording so far as a run: its samples, and every step that
  /// has ended. Called on the sampling loop: it must be quick.
  std::function<void(const std::vector<std::string>& requests, const Run& so_far)> on_job_request;
  /// The job's settings so far (its configuration channel), at most once a
  /// second and only when it wrote more: e.g. the MLflow run it opened, which
  /// the trackers log into. Returns whether to be told again (each time reads
  /// the whole channel). On the sampling loop: it must be quick.
  std::function<bool(const std::map<std::string, std::string>& settings)> on_job_settings;
};

struct RecordResult {
  Recording recording;
  int exit_code = 0;          // the command's, or 128 + signal (the shell convention)
  bool gpu_metrics = false;   // false when NVML could not be used: the job still ran
  std::string gpu_note;       // why GPU metrics are missing, if they are
  int64_t markers_read = 0;     // valid step markers the job wrote (include/gputriage/markers.h)
  TimeNs started_ns = 0;
  TimeNs ended_ns = 0;
  int64_t run_id = 0;         // in the store, 0 without one
};

/// Starts the command (PATH lookup), samples every `interval_ns` until it exits,
/// forwards SIGTERM/SIGHUP to it (SIGINT/SIGQUIT from a terminal reach it
/// directly; the recorder keeps sampling until the job is gone). A missing or
/// unusable NVML is not an error: the job runs and `gpu_note` says why there are
/// no GPU metrics. Errors: the command could not be started, or the
/// dcgm-exporter URL given cannot be scraped (checked before the job starts).
StatusOr<RecordResult> RecordCommand(const RecordOptions& options);

/// Where and what ran, kept with a stored run: git_commit and git_dirty (of the
/// working directory's repository, when there is one and git is installed),
/// cwd, user, cuda_visible_devices.
std::map<std::string, std::string> CollectRunContext();

}  // namespace gputriage
