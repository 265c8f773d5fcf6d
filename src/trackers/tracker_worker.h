// Hands TrackerPoints to the trackers on a thread of its own. The queue is
// bounded (the oldest points go first when a tracker is down for long); a
// tracker that fails is retried with backoff and warned about once; Finish
// waits for the queue only until its deadline. Nothing here can block the
// recorder's sampling loop or the job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/trackers/tracker.h"

namespace gputriage {

class TrackerWorker {
 public:
  static constexpr size_t kMaxQueuedPoints = 1000;

  explicit TrackerWorker(std::vector<std::unique_ptr<Tracker>> trackers);
  ~TrackerWorker();
  TrackerWorker(const TrackerWorker&) = delete;
  TrackerWorker& operator=(const TrackerWorker&) = delete;

  /// Queues a point for every tracker (never blocks).
  void Push(TrackerPoint point);
  /// Logs what is queued and ends the run in every tracker, giving up at
  /// `deadline_ms` from now; then stops the thread.
  void Finish(const TrackerSummary& summary, int64_t deadline_ms);

  /// What went wrong, one line per tracker and problem (for the report's issues).
  std::vector<std::string> Warnings() const;
  /// CPU time the tracker thread has used (CLOCK_THREAD_CPUTIME_ID), in ns.
  int64_t ThreadCpuNs() const { return thread_cpu_ns_.load(); }
  int64_t PointsLogged() const { return logged_.load(); }
  int64_t PointsDropped() const { return dropped_.load(); }

 private:
  struct Lane {  // one tracker's queue and state
    std::unique_ptr<Tracker> tracker;
    std::deque<TrackerPoint> queue;
    int64_t retry_at_ms = 0;
    int64_t backoff_ms = 0;
    bool warned = false;
    bool abandoned = false;  // failed again once the run ended: not waited for
  };
  void Run();
  void Warn(Lane& lane, const std::string& what);

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Lane> lanes_;
  bool stopping_ = false;
  int64_t deadline_ms_ = 0;  // monotonic ms, once stopping
  std::vector<std::string> warnings_;
  std::atomic<int64_t> thread_cpu_ns_{0};
  std::atomic<int64_t> logged_{0};
  std::atomic<int64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace gputriage
