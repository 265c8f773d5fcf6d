// The job's feed: what the recorder tells a Python job about its own run, so
// the job can log it into its experiment tracker (W&B: python/gputriage/
// wandb_bridge.py). A memfd the recorder creates and the job inherits
// ($GPUTRIAGE_FEED_FD, and $GPUTRIAGE_FEED_PATH = /proc/RECORDER/fd/N), which
// only the recorder writes, one line per record, tab-separated, values escaped
// as in the configuration channel (\t \n \r \\):
//
//   point   T_NS  STEP  KEY=VALUE  KEY=VALUE ...      every window (tracker keys)
//   summary NONCE figure  NAME  VALUE                 the answer to "summary NONCE":
//   summary NONCE verdict VERDICT SEVERITY TITLE      the diagnosis so far
//   summary NONCE end
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/trackers/tracker.h"

namespace gputriage {

inline constexpr const char* kFeedFdEnv = "GPUTRIAGE_FEED_FD";
inline constexpr const char* kFeedPathEnv = "GPUTRIAGE_FEED_PATH";

class JobFeed : public Tracker {
 public:
  static StatusOr<std::unique_ptr<JobFeed>> Create();
  ~JobFeed() override;

  int fd() const { return fd_; }
  std::string Describe() const override { return "the job's feed"; }
  /// Points as `point` lines.
  Status Log(const std::vector<TrackerPoint>& points) override;
  /// The job has exited by then: nothing to tell it.
  Status Finish(const TrackerSummary&) override { return Status::Ok(); }
  /// The answer to a "summary NONCE" request.
  Status AppendSummary(const std::string& nonce, const std::map<std::string, double>& figures,
                       const std::vector<Finding>& findings);

 private:
  JobFeed() = default;
  Status Append(const std::string& text);
  std::mutex mu_;  // the worker thread logs points; the recorder's thread answers requests
  int fd_ = -1;
  size_t size_ = 0;
};

}  // namespace gputriage
