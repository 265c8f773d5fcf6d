// Trackers: TensorBoard's record framing and event bytes against the reference
// vectors (docs: ../shared/reference/gpu-metrics.md §5.3), the window feed's
// time weighting, and the worker's promise that a dead tracker never blocks.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "src/trackers/tensorboard_writer.h"
#include "src/trackers/tracker_feed.h"
#include "src/trackers/tracker_worker.h"

namespace gputriage {
namespace {

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

TEST(TensorBoard, Crc32cCheckValue) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

TEST(TensorBoard, RecordsMatchTheReferenceBytes) {
  EXPECT_EQ(Hex(TfRecord(FileVersionEvent(1700000000.0))),
            "1800000000000000a37f4b220900000040fc54d9411a0d627261696e2e4576656e743a32eced8f9d");
  EXPECT_EQ(Hex(TfRecord(ScalarEvent(1700000001.0, 10, "gpu/sm_active", 0.75f))),
            "2300000000000000b09f77430900004040fc54d941100a2a160a140a0d6770752f736d5f616374697665150000403f246a88a5");
}

/// The records of a TFRecord file, as TensorBoard's reader walks them: false
/// when the file ends inside a record.
bool WholeRecords(const std::string& path, int* count) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  *count = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) return false;
    uint64_t length = 0;
    std::memcpy(&length, bytes.data() + at, 8);
    if (bytes.size() - at < 16 + length) return false;
    at += 16 + length;
    ++*count;
  }
  return true;
}

TEST(TensorBoard, AFullDiskNeverLeavesATornRecord) {
  // Issue 41: after ENOSPC the event file ended in part of a record, which
  // TensorBoard reads as corruption. A file-size limit makes the same short
  // write here (EFBIG where a full disk gives ENOSPC).
  const std::string dir = ::testing::TempDir() + "tb_full_" + std::to_string(getpid());
  auto writer = TensorBoardWriter::Open(dir, 1'700'000'000 * kNsPerS);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  std::vector<TrackerPoint> points(1);
  points[0].t_ns = 1'700'000'001 * kNsPerS;
  for (int i = 0; i < 50; ++i) points[0].values.emplace_back("gpu/metric_" + std::to_string(i), i);
  ASSERT_TRUE((*writer)->Log(points).ok());
  const auto written = std::filesystem::file_size((*writer)->path());
  rlimit old {};
  getrlimit(RLIMIT_FSIZE, &old);
  const auto previous = signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = written + 300;  // room for part of the next record, not all of it
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status full = (*writer)->Log(points);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, previous);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.message().find("keeps its whole records"), std::string::npos) << full.message();
  int records = 0;
  EXPECT_TRUE(WholeRecords((*writer)->path(), &records));
  EXPECT_EQ(records, 2);  // the file version and the first point
  ASSERT_TRUE((*writer)->Log(points).ok());  // room again: writing goes on
  EXPECT_TRUE(WholeRecords((*writer)->path(), &records));
  EXPECT_EQ(records, 3);
  std::filesystem::remove_all(dir);
}

TEST(TrackerFeed, WindowsAreTimeWeighted) {
  TrackerFeed feed(10 * kNsPerS, kNsPerS);
  const TimeNs t0 = 1'700'000'000 * kNsPerS;
  // 100 % for 1 s, then 0 % for 3 s: each sample stands for the time since the previous one.
  feed.AddSample(0, Metric::kGpuUtil, t0, 100);
  feed.AddSample(0, Metric::kGpuUtil, t0 + kNsPerS, 100);
  feed.AddSample(0, Metric::kGpuUtil, t0 + 2 * kNsPerS, 0);
  feed.AddSample(0, Metric::kGpuUtil, t0 + 3 * kNsPerS, 0);
  feed.AddSample(0, Metric::kGpuUtil, t0 + 4 * kNsPerS, 0);
  EXPECT_TRUE(feed.Poll(t0 + 5 * kNsPerS).empty());  // the window is not over
  auto points = feed.Poll(t0 + 10 * kNsPerS);
  ASSERT_EQ(points.size(), 1u);
  const TrackerPoint* p = &points[0];
  double util = -1;
  for (const auto& [k, v] : p->values)
    if (k == "gpu/utilization_percent") util = v;
  // The first sample stands for one sampling interval (1 s) at 100, the second
  // for 1 s at 100, then 3 s at 0: 40 %, where a plain mean of the five says 40 too
  // only by chance; see the uneven case below.
  EXPECT_NEAR(util, 100.0 * 2 / 5, 1e-9);
  // Uneven spacing: 100 % held for 3 s (one sample after a 3 s gap), then 0 %
  // for 1 s: 75 %, not the 50 % a plain mean of the two samples gives.
  feed.AddSample(0, Metric::kGpuUtil, t0 + 7 * kNsPerS, 100);
  feed.AddSample(0, Metric::kGpuUtil, t0 + 8 * kNsPerS, 0);
  auto more = feed.Poll(t0 + 20 * kNsPerS);
  ASSERT_EQ(more.size(), 1u);
  for (const auto& [k, v] : more[0].values)
    if (k == "gpu/utilization_percent") util = v;
  EXPECT_NEAR(util, 75.0, 1e-9);
  EXPECT_EQ(p->step, 0);  // GPU windows: the window's index
  EXPECT_EQ(more[0].step, 1);
}

TEST(TrackerFeed, StepsGiveStepTimeDataWaitAndThroughput) {
  TrackerFeed feed(kNsPerS, 100 * kNsPerMs);
  const TimeNs t0 = 1'700'000'000 * kNsPerS;
  std::vector<MarkedStep> steps(4);
  for (int i = 0; i < 4; ++i) {
    steps[i].number = 10 + i;
    steps[i].span = Interval{t0 + i * 250 * kNsPerMs, t0 + (i + 1) * 250 * kNsPerMs};
    steps[i].phase_ns[1] = 50 * kNsPerMs;  // data
    steps[i].samples = 32;
  }
  feed.AddSteps(steps);
  auto points = feed.Poll(t0 + kNsPerS, /*final=*/true);
  ASSERT_EQ(points.size(), 1u);
  std::map<std::string, double> v(points[0].values.begin(), points[0].values.end());
  EXPECT_DOUBLE_EQ(v.at("gputriage/step_time_ms"), 250);
  EXPECT_DOUBLE_EQ(v.at("gputriage/data_wait_percent"), 20);
  EXPECT_DOUBLE_EQ(v.at("gputriage/samples_per_s"), 128);
  EXPECT_EQ(points[0].step, 13);
  EXPECT_FALSE(v.count("gpu/utilization_percent"));
}

// Issue 24: steps arrive late (held until final); each counts in the window it
// ended in. Issue 41: gpu/* and gputriage/* on one step axis (the GPU series
// had its window index, the step series the job's step numbers): once the job
// marks steps, a GPU point waits out the hold too and takes the latest step
// number ended by its time.
TEST(TrackerFeed, HeldStepsJoinTheWindowsTheyBelongTo) {
  TrackerFeed feed(kNsPerS, 100 * kNsPerMs, /*step_hold=*/2 * kNsPerS);
  const TimeNs t0 = 1'700'000'000 * kNsPerS;
  auto step = [&](int number, double start_s, double end_s) {
    MarkedStep s;
    s.number = number;
    s.span = Interval{t0 + static_cast<TimeNs>(start_s * 1e9), t0 + static_cast<TimeNs>(end_s * 1e9)};
    s.samples = 10;
    return s;
  };
  auto samples = [&](int from, int to) {  // GPU samples every 100 ms, as the recorder takes them
    for (int i = from; i < to; ++i) feed.AddSample(0, Metric::kGpuUtil, t0 + i * 100 * kNsPerMs, 90);
  };
  // Windows [0,1) and [1,2) each had two steps; they arrive together, late.
  samples(0, 10);
  std::vector<TrackerPoint> got = feed.Poll(t0 + kNsPerS);  // no step seen yet: the GPU window at once
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].step, 0);
  feed.AddSteps({step(1, 0.0, 0.5), step(2, 0.5, 0.9), step(3, 1.0, 1.5), step(4, 1.5, 1.9)});
  samples(10, 20);
  got = feed.Poll(t0 + 2 * kNsPerS);  // the second GPU window and the step windows: all held
  EXPECT_TRUE(got.empty());
  samples(20, 31);
  feed.AddSteps({step(5, 2.0, 2.6)});  // a step of the third window, ended before its GPU point
  got = feed.Poll(t0 + 4 * kNsPerS + kNsPerS / 10);  // the holds of windows [0,1) and [1,2) are over
  std::vector<const TrackerPoint*> steps, gpu;
  for (const auto& p : got) {
    std::map<std::string, double> v(p.values.begin(), p.values.end());
    (v.count("gputriage/steps") ? steps : gpu).push_back(&p);
    EXPECT_NE(v.count("gpu/utilization_percent") > 0, v.count("gputriage/steps") > 0);  // never both
  }
  ASSERT_EQ(steps.size(), 2u);
  ASSERT_EQ(gpu.size(), 1u);
  std::map<std::string, double> first(steps[0]->values.begin(), steps[0]->values.end());
  std::map<std::string, double> second(steps[1]->values.begin(), steps[1]->values.end());
  EXPECT_EQ(first.at("gputriage/steps"), 2);   // not 4 in one window and none in the other
  EXPECT_EQ(second.at("gputriage/steps"), 2);
  EXPECT_EQ(steps[0]->step, 2);  // the job's step numbers
  EXPECT_EQ(steps[1]->step, 4);
  EXPECT_EQ(steps[0]->t_ns, t0 + kNsPerS);  // at its own window's end
  EXPECT_EQ(steps[1]->t_ns, t0 + 2 * kNsPerS);
  EXPECT_DOUBLE_EQ(first.at("gputriage/samples_per_s"), 20);
  // The second GPU window (ended at 2 s): on the step axis, step 4 ended by then (5 had not).
  EXPECT_EQ(gpu[0]->t_ns, t0 + 2 * kNsPerS);
  EXPECT_EQ(gpu[0]->step, 4);
  got = feed.Poll(t0 + 5 * kNsPerS, /*final=*/true);  // the third GPU window (4.1 s) and step window [2,3)
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].step, 5);  // the step window
  EXPECT_EQ(got[1].step, 5);  // the GPU window ended at 4.1 s
  EXPECT_LE(got[0].t_ns, got[1].t_ns);
}

// A zero-code job marks steps from its first batch: its GPU points are on the
// step axis from the start (0 before the first step), never the window index.
TEST(TrackerFeed, AJobThatWillMarkStepsHasOneAxisFromTheStart) {
  TrackerFeed feed(kNsPerS, 100 * kNsPerMs, /*step_hold=*/kNsPerS);
  feed.ExpectSteps();
  const TimeNs t0 = 1'700'000'000 * kNsPerS;
  std::vector<TrackerPoint> got;
  for (int s = 1; s <= 3; ++s) {
    for (int i = 10 * (s - 1); i < 10 * s; ++i) feed.AddSample(0, Metric::kGpuUtil, t0 + i * 100 * kNsPerMs, 10);
    for (auto& p : feed.Poll(t0 + s * kNsPerS)) got.push_back(std::move(p));
  }
  MarkedStep first;
  first.number = 7;  // a resumed job's (zero-code numbers start at 0)
  first.span = Interval{t0 + 2500 * kNsPerMs, t0 + 2800 * kNsPerMs};
  feed.AddSteps({first});  // startup took 2.5 s
  for (auto& p : feed.Poll(t0 + 4 * kNsPerS, /*final=*/true)) got.push_back(std::move(p));
  std::vector<int64_t> gpu_steps;
  for (const auto& p : got)
    if (p.values.front().first.rfind("gpu/", 0) == 0) gpu_steps.push_back(p.step);
  EXPECT_EQ(gpu_steps, (std::vector<int64_t>{0, 0, 7}));  // windows ending at 1, 2 and 3 s: none yet, then 7
}

TEST(TrackerFeed, SeveralGpusGiveTheirMeanAndTheirOwnKeys) {
  TrackerFeed feed(kNsPerS, 100 * kNsPerMs);
  MetricSet gpus;
  gpus.devices[*gpus.FindOrAdd(0, "GPU-a", "", -1)].memory_total_bytes = 80LL << 30;
  gpus.devices[*gpus.FindOrAdd(3, "GPU-b", "", 2)].memory_total_bytes = 40LL << 30;  // a MIG instance
  feed.NoteDevices(gpus);
  const TimeNs t0 = 1'700'000'000 * kNsPerS;
  for (int i = 0; i < 5; ++i) {
    feed.AddSample(0, Metric::kGpuUtil, t0 + i * 100 * kNsPerMs, 50);
    feed.AddSample(1, Metric::kGpuUtil, t0 + i * 100 * kNsPerMs, 100);
  }
  auto points = feed.Poll(t0 + kNsPerS);
  ASSERT_EQ(points.size(), 1u);
  std::map<std::string, double> v(points[0].values.begin(), points[0].values.end());
  EXPECT_DOUBLE_EQ(v.at("gpu/utilization_percent"), 75);
  EXPECT_DOUBLE_EQ(v.at("gpu/0/utilization_percent"), 50);
  EXPECT_DOUBLE_EQ(v.at("gpu/3.mig2/utilization_percent"), 100);
  EXPECT_DOUBLE_EQ(v.at("gpu/memory_total_mib"), (80 + 40) * 1024 / 2);  // per GPU, their mean
  EXPECT_DOUBLE_EQ(v.at("gputriage/gpus"), 2);
}

/// A tracker whose server is gone: every call fails after `delay`.
class DeadTracker : public Tracker {
 public:
  explicit DeadTracker(std::chrono::milliseconds delay) : delay_(delay) {}
  std::string Describe() const override { return "dead"; }
  Status Log(const std::vector<TrackerPoint>&) override {
    std::this_thread::sleep_for(delay_);
    ++calls;
    return IoError("connection refused");
  }
  Status Finish(const TrackerSummary&) override {
    ++finishes;
    return IoError("connection refused");
  }
  std::atomic<int> calls{0};
  std::atomic<int> finishes{0};

 private:
  std::chrono::milliseconds delay_;
};

TEST(TrackerWorker, ADeadTrackerNeverBlocksAndIsNotWaitedFor) {
  auto dead = std::make_unique<DeadTracker>(std::chrono::milliseconds(200));
  DeadTracker* d = dead.get();
  std::vector<std::unique_ptr<Tracker>> trackers;
  trackers.push_back(std::move(dead));
  TrackerWorker worker(std::move(trackers));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5000; ++i) worker.Push(TrackerPoint{i, i, {{"k", 1.0}}});  // past the bound
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));  // never waits for a call
  const auto finish = std::chrono::steady_clock::now();
  worker.Finish({}, 60'000);
  // One more try at the end, then it is abandoned: not the 60 s deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - finish, std::chrono::seconds(5));
  EXPECT_EQ(d->finishes.load(), 0);
  EXPECT_EQ(worker.PointsLogged(), 0);
  EXPECT_EQ(worker.PointsDropped(), 5000 - static_cast<int64_t>(TrackerWorker::kMaxQueuedPoints));
  const auto warnings = worker.Warnings();
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("connection refused"), std::string::npos);
}

// A tracker that waits to learn where its points go (MLflow: the job's own run,
// issue 53) gets none until it is ready, loses none meanwhile, and gets them at
// the run's end whether or not it became ready.
class WaitingTracker : public Tracker {
 public:
  std::string Describe() const override { return "waiting"; }
  bool Ready() const override { return ready.load(); }
  Status Log(const std::vector<TrackerPoint>& points) override {
    logged += static_cast<int>(points.size());
    return Status::Ok();
  }
  Status Finish(const TrackerSummary&) override {
    ++finishes;
    return Status::Ok();
  }
  std::atomic<bool> ready{false};
  std::atomic<int> logged{0}, finishes{0};
};

TEST(TrackerWorker, PointsWaitForATrackerThatIsNotReadyAndReachItAtTheEnd) {
  for (const bool becomes_ready : {true, false}) {
    auto waiting = std::make_unique<WaitingTracker>();
    WaitingTracker* w = waiting.get();
    std::vector<std::unique_ptr<Tracker>> trackers;
    trackers.push_back(std::move(waiting));
    TrackerWorker worker(std::move(trackers));
    for (int i = 0; i < 3; ++i) worker.Push(TrackerPoint{i, i, {{"k", 1.0}}});
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(w->logged.load(), 0);  // held, not lost
    if (becomes_ready) {
      w->ready = true;  // looked at within a second
      for (int waited = 0; waited < 50 && w->logged.load() < 3; ++waited)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      EXPECT_EQ(w->logged.load(), 3);
    }
    worker.Push(TrackerPoint{3, 3, {{"k", 1.0}}});
    worker.Finish({}, 10'000);
    EXPECT_EQ(w->logged.load(), 4) << (becomes_ready ? "ready" : "never ready");
    EXPECT_EQ(w->finishes.load(), 1);
    EXPECT_EQ(worker.PointsLogged(), 4);
    EXPECT_TRUE(worker.Warnings().empty());
  }
}

}  // namespace
}  // namespace gputriage
