// `record --mlflow URI` (or MLflow's own MLFLOW_TRACKING_URI): the run's
// figures in an MLflow tracking server, through its REST API (docs:
// /api/2.0/mlflow/...). Windows become metric histories (log-batch), the
// verdicts tags, the summary figures metrics, the reports artifacts.
// nlohmann-json builds and reads the requests here only.
//
// Where they go is settled when there is first something to log, never before
// the job starts (it waits for no server): the job's own run where the job has
// one (MLFLOW_RUN_ID, or the run it opens, which its bridge tells the recorder:
// JobRunNotice), else a run of gputriage's own. Live windows wait up to
// kJobRunGraceMs for a job to open its run, so that a job with a run of its own
// gets gputriage's figures there and no second run beside it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
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

/// The run the job opened itself, as its bridge told the recorder
/// (python/gputriage/mlflow_bridge.py): set on the recorder's thread, read on
/// the trackers'.
class JobRunNotice {
 public:
  struct JobRun {
    std::string run_id;
    std::string tracking_uri;  // where the job's MLflow keeps it
  };
  void Set(JobRun run);
  std::optional<JobRun> Get() const;

 private:
  mutable std::mutex mu_;
  std::optional<JobRun> run_;
};

/// "http://host:5000/" and "http://host:5000" are one server.
std::string MlflowServerOf(std::string uri);

class MlflowTracker : public Tracker {
 public:
  /// How long live windows wait for the job to say it opened a run of its own
  /// (importing PyTorch and MLflow takes seconds; jobs open their run first
  /// thing), counted from the tracker's creation. The run's end never waits.
  static constexpr int64_t kJobRunGraceMs = 30'000;

  /// Finds or creates the run now. Errors say what the server answered or that
  /// it could not be reached.
  static StatusOr<std::unique_ptr<MlflowTracker>> Start(const MlflowOptions& options, TimeNs started_ns);
  /// Checks the URI only: the run opens at the first Log or Finish, into the
  /// job's run where `job_run` names one on the same server by then.
  static StatusOr<std::unique_ptr<MlflowTracker>> Deferred(const MlflowOptions& options, TimeNs started_ns,
                                                           std::shared_ptr<const JobRunNotice> job_run);
  ~MlflowTracker() override;

  std::string Describe() const override;
  /// Once open, or once the job has named its run, or after kJobRunGraceMs.
  bool Ready() const override;
  Status Log(const std::vector<TrackerPoint>& points) override;
  /// Settings as params (gputriage.KEY), verdicts as tags, the summary as
  /// metrics (gputriage/summary/...), the reports as artifacts
  /// (gputriage/report.json, report.txt); a run gputriage created is ended
  /// (FINISHED, FAILED, or KILLED for a job a signal ended).
  Status Finish(const TrackerSummary& summary) override;
  void LimitTo(std::chrono::steady_clock::time_point deadline) override;
  /// The run's settings, logged as params at the end.
  void SetParams(std::map<std::string, std::string> params) { params_ = std::move(params); }

  /// "" until the run is open (after Finish, unless it could not be).
  const std::string& run_id() const { return run_id_; }
  const std::string& experiment_id() const { return experiment_id_; }
  bool created_run() const { return created_; }
  /// The job's own run, found through the JobRunNotice.
  bool in_jobs_run() const { return in_jobs_run_; }

 private:
  MlflowTracker() = default;
  /// Opens the run (get the one named, or create one) if it is not open yet.
  Status EnsureOpen();
  Status Open(const MlflowOptions& options);  // the calls that do it
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string base_;  // the tracking URI, for messages
  MlflowOptions options_;
  TimeNs started_ns_ = 0;
  std::shared_ptr<const JobRunNotice> job_run_;
  int64_t ready_at_ms_ = 0;  // monotonic: when live windows stop waiting for the job's run
  std::optional<std::chrono::steady_clock::time_point> limit_;  // LimitTo's
  std::string run_id_, experiment_id_, artifact_uri_;
  bool created_ = false;
  bool in_jobs_run_ = false;
  std::map<std::string, std::string> params_;
};

}  // namespace gputriage
