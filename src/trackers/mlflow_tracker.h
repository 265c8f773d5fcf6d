// `record --mlflow URI` (or MLflow's own MLFLOW_TRACKING_URI): the run's
// figures in an MLflow tracking server, through its REST API (docs:
// /api/2.0/mlflow/...). The recorder attaches to the job's MLflow run
// (MLFLOW_RUN_ID) or creates one and hands its id to the job, so the job's own
// mlflow.start_run() logs into the same run. Windows become metric histories
// (log-batch), the verdicts tags, the summary figures metrics, the reports
// artifacts. nlohmann-json builds and reads the requests here only.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "src/sources/http/http_get.h"
#include "src/trackers/tracker.h"

namespace gputriage {

struct MlflowOptions {
  std::string tracking_uri;     // http(s)://host:port[/prefix]
  std::string run_id;           // attach to this run (MLFLOW_RUN_ID)
  std::string experiment_id;    // MLFLOW_EXPERIMENT_ID
  std::string experiment_name;  // MLFLOW_EXPERIMENT_NAME (created when missing)
  std::string run_name;         // a new run's name (record --name)
  std::map<std::string, std::string> tags;  // a new run's tags
  HttpAuth auth;                // MLFLOW_TRACKING_TOKEN, or _USERNAME and _PASSWORD
  int timeout_ms = 5000;        // per request: a server that hangs costs this, not the job
};

/// MLflow's own environment, as its client reads it.
MlflowOptions MlflowOptionsFromEnvironment();

class MlflowTracker : public Tracker {
 public:
  /// Finds or creates the run (before the job starts: the job gets its id).
  /// Errors say what the server answered or that it could not be reached.
  static StatusOr<std::unique_ptr<MlflowTracker>> Start(const MlflowOptions& options, TimeNs started_ns);
  ~MlflowTracker() override;

  std::string Describe() const override;
  Status Log(const std::vector<TrackerPoint>& points) override;
  /// Settings as params (gputriage.KEY), verdicts as tags, the summary as
  /// metrics (gputriage/summary/...), the reports as artifacts
  /// (gputriage/report.json, report.txt); a run gputriage created is ended
  /// (FINISHED, FAILED, or KILLED for a job a signal ended).
  Status Finish(const TrackerSummary& summary) override;
  void LimitTo(std::chrono::steady_clock::time_point deadline) override;
  /// The run's settings, logged as params at the end.
  void SetParams(std::map<std::string, std::string> params) { params_ = std::move(params); }

  const std::string& run_id() const { return run_id_; }
  const std::string& experiment_id() const { return experiment_id_; }
  bool created_run() const { return created_; }

 private:
  MlflowTracker() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string base_;  // the tracking URI, for messages
  std::string run_id_, experiment_id_, artifact_uri_;
  bool created_ = false;
  std::map<std::string, std::string> params_;
};

}  // namespace gputriage
