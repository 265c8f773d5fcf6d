#include "src/trackers/tracker_worker.h"

#include <time.h>

#include <algorithm>
#include <chrono>

#include "src/util/clock.h"

namespace gputriage {
namespace {

int64_t ThreadCpuNow() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

constexpr int64_t kFirstBackoffMs = 1000;
constexpr int64_t kMaxBackoffMs = 30'000;
constexpr size_t kPointsPerCall = 50;  // one request's worth (MLflow: ≤ 1000 metrics)
constexpr int64_t kReadyPollMs = 1000;

}  // namespace

TrackerWorker::TrackerWorker(std::vector<std::unique_ptr<Tracker>> trackers) {
  for (auto& t : trackers) lanes_.push_back(Lane{std::move(t), {}, 0, 0, false, false});
  thread_ = std::thread([this] { Run(); });
}

TrackerWorker::~TrackerWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      deadline_ms_ = MonotonicMs();  // destroyed without Finish: leave at once
    }
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TrackerWorker::Push(TrackerPoint point) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& lane : lanes_) {
      if (lane.queue.size() >= kMaxQueuedPoints) {
        lane.queue.pop_front();  // a tracker down for hours keeps the latest points
        dropped_.fetch_add(1);
      }
      lane.queue.push_back(point);
    }
  }
  wake_.notify_all();
}

void TrackerWorker::Warn(Lane& lane, const std::string& what) {
  // Called with mu_ held. One warning per tracker: a dead server is said once.
  if (lane.warned) return;
  lane.warned = true;
  warnings_.push_back(lane.tracker->Describe() + ": " + what);
}

void TrackerWorker::Run() {
  const int64_t cpu_start = ThreadCpuNow();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const int64_t now = MonotonicMs();
    if (stopping_ && now >= deadline_ms_) break;
    bool sent = false;
    for (auto& lane : lanes_) {
      // Once the run has ended, a failing tracker gets one more try at once
      // rather than its backoff: a server that is gone must not hold the recorder.
      if (lane.queue.empty() || lane.abandoned || (!stopping_ && (now < lane.retry_at_ms || !lane.tracker->Ready())))
        continue;
      const size_t n = std::min(lane.queue.size(), kPointsPerCall);
      std::vector<TrackerPoint> batch(lane.queue.begin(), lane.queue.begin() + static_cast<ptrdiff_t>(n));
      lock.unlock();  // the request runs without the lock: Push never waits for the network
      const Status s = lane.tracker->Log(batch);
      lock.lock();
      sent = true;
      if (s.ok()) {
        // Pushes only append, and drops only happen at the front while we were
        // out: drop what was logged, whatever the front is now.
        const size_t done = std::min(n, lane.queue.size());
        lane.queue.erase(lane.queue.begin(), lane.queue.begin() + static_cast<ptrdiff_t>(done));
        logged_.fetch_add(static_cast<int64_t>(n));
        lane.backoff_ms = 0;
      } else {
        Warn(lane, s.message() + " (points are kept and retried; the run is stored locally either way)");
        if (stopping_) lane.abandoned = true;
        lane.backoff_ms = lane.backoff_ms == 0 ? kFirstBackoffMs : std::min(2 * lane.backoff_ms, kMaxBackoffMs);
        lane.retry_at_ms = MonotonicMs() + lane.backoff_ms;
      }
    }
    thread_cpu_ns_.store(ThreadCpuNow() - cpu_start);
    const bool drained =
        std::all_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.queue.empty() || l.abandoned; });
    if (stopping_ && (drained || MonotonicMs() >= deadline_ms_)) break;
    if (sent) continue;
    // Sleep until a point arrives, a retry is due, a waiting tracker may be
    // ready (looked at every second), or the deadline.
    int64_t wake_at = stopping_ ? deadline_ms_ : MonotonicMs() + 60'000;
    for (const auto& lane : lanes_) {
      if (lane.queue.empty() || lane.abandoned) continue;
      if (!stopping_ && !lane.tracker->Ready()) wake_at = std::min(wake_at, MonotonicMs() + kReadyPollMs);
      else wake_at = std::min(wake_at, std::max(lane.retry_at_ms, MonotonicMs()));
    }
    wake_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(1, wake_at - MonotonicMs())));
  }
  for (auto& lane : lanes_)
    if (!lane.queue.empty()) {
      lane.warned = false;  // this is a different fact: points lost
      Warn(lane, std::to_string(lane.queue.size()) + " points were not logged" +
                     (lane.abandoned ? "" : " before the deadline"));
    }
  thread_cpu_ns_.store(ThreadCpuNow() - cpu_start);
}

void TrackerWorker::Finish(const TrackerSummary& summary, int64_t deadline_ms) {
  const int64_t deadline = MonotonicMs() + deadline_ms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    deadline_ms_ = deadline;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The run's end, on this thread now that the worker is done, within what is
  // left of the deadline (each tracker's requests carry their own timeouts).
  for (auto& lane : lanes_) {
    if (lane.abandoned) {
      std::lock_guard<std::mutex> lock(mu_);
      lane.warned = false;
      Warn(lane, "unreachable when the run ended: its end (verdicts, summary, report) was not logged");
      continue;
    }
    if (MonotonicMs() >= deadline) {
      std::lock_guard<std::mutex> lock(mu_);
      lane.warned = false;
      Warn(lane, "the run's end (verdicts, summary, report) was not logged before the deadline");
      continue;
    }
    lane.tracker->LimitTo(std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline - MonotonicMs()));
    if (Status s = lane.tracker->Finish(summary); !s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      lane.warned = false;
      Warn(lane, "the run's end was not logged: " + s.message());
    }
  }
  if (dropped_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    warnings_.push_back(std::to_string(dropped_.load()) + " tracker points were dropped (the queue holds " +
                        std::to_string(kMaxQueuedPoints) + " per tracker)");
  }
}

std::vector<std::string> TrackerWorker::Warnings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warnings_;
}

}  // namespace gputriage
