// Experiment trackers (MLflow, TensorBoard): where a recorded run's GPU and
// step figures go beside the job's own metrics. The recorder's sampling feeds
// a TrackerFeed, which turns each window (10 s by default) into one point of
// time-weighted figures; a TrackerWorker hands points to the trackers on its
// own thread, so a slow or dead tracker never slows the recorder or the job.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

/// One window of a run, as trackers log it. Keys are documented in
/// docs/metrics.md ("Tracker keys"): the seed's gpu/utilization_percent,
/// gpu/memory_used_mib, gpu/memory_total_mib, then gputriage/....
struct TrackerPoint {
  TimeNs t_ns = 0;       // the window's end (wall clock)
  int64_t step = 0;      // the job's latest step number, else the point's index
  std::vector<std::pair<std::string, double>> values;
};

/// What a finished run gives its trackers.
struct TrackerSummary {
  int exit_code = 0;
  TimeNs ended_ns = 0;
  std::map<std::string, double> figures;  // FiguresOf(diagnosis): step_time_ms, data_wait_percent, ...
  std::vector<Finding> findings;
  std::string report_json;                // the JSON report
  std::string report_text;                // the terminal report, uncoloured
};

class Tracker {
 public:
  virtual ~Tracker() = default;
  /// "MLflow http://127.0.0.1:5000 run 3f2a…", for warnings and the report.
  virtual std::string Describe() const = 0;
  /// Whether queued points may be logged now: a tracker may wait to learn
  /// where they go (MLflow: the job's own run). Once the run has ended they
  /// are logged whatever this says.
  virtual bool Ready() const { return true; }
  /// Logs points in order; an error leaves them to be retried.
  virtual Status Log(const std::vector<TrackerPoint>& points) = 0;
  /// The run's end: verdicts, summary figures, the report.
  virtual Status Finish(const TrackerSummary& summary) = 0;
  /// From now on no call runs past `deadline` (the run's end has a budget: record
  /// returns the job's exit code within it whatever a server does). Trackers
  /// without network calls ignore it.
  virtual void LimitTo(std::chrono::steady_clock::time_point deadline) { (void)deadline; }
};

}  // namespace gputriage
