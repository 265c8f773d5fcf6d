// Step markers: the C ABI writing into the shared-memory ring from threads and
// processes, and the reader that checks every record before trusting it.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gputriage/markers.h"
#include "gputriage/markers.hpp"
#include "src/markers/marked_steps.h"
#include "src/markers/marker_ring.h"

namespace gputriage {
namespace {

class Markers : public ::testing::Test {
 protected:
  void Attach(uint64_t capacity) {
    auto ring = MarkerRing::Create(capacity);
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    ring_ = std::move(*ring);
    setenv(kMarkersFdEnv, std::to_string(ring_->fd()).c_str(), 1);
    ResetMarkersForTesting();
  }
  void TearDown() override {
    unsetenv(kMarkersFdEnv);
    ResetMarkersForTesting();
  }
  std::unique_ptr<MarkerRing> ring_;
};

// The node agent's side: a second, read-only reader of a job's ring, through
// /proc/PID/fd/N, that sees the markers published after it attached, while
// the recorder's reader sees them all.
TEST_F(Markers, ASecondReaderAttachesReadOnly) {
  Attach(256);
  gputriage_step_begin(1);
  gputriage_step_end(1, 8, 0, 0);
  auto second = MarkerRing::Attach("/proc/self/fd/" + std::to_string(ring_->fd()));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  gputriage_step_begin(2);
  gputriage_step_end(2, 8, 0, 0);
  std::vector<Marker> first_seen, second_seen;
  ring_->Drain(first_seen);
  (*second)->Drain(second_seen);
  ASSERT_EQ(first_seen.size(), 4u);
  ASSERT_EQ(second_seen.size(), 2u);
  EXPECT_EQ(second_seen[0].step, 2);
  EXPECT_EQ((*second)->stats().corrupt, 0);
  // Not a ring: refused with the path.
  auto not_ring = MarkerRing::Attach("/proc/self/status");
  ASSERT_FALSE(not_ring.ok());
  EXPECT_NE(not_ring.status().message().find("/proc/self/status"), std::string::npos);
  EXPECT_FALSE(MarkerRing::Attach("/nonexistent/ring").ok());
}

// The path a second reader opens is the job's to choose (issue 53: a FIFO
// without a writer froze the node's agent in open()). Each hostile kind is
// refused at once, and the recorder's own ring cannot be shrunk by the job.
TEST_F(Markers, ASecondReaderNeverBlocksOnOrTrustsWhatTheJobNames) {
  Attach(256);
  char dir_template[] = "/tmp/gputriage_ring_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // A copy of the live ring's bytes in a plain file: a valid ring, but
  // unsealed (its writer could truncate it under the mapping).
  const std::string copy = dir + "/ring-copy";
  {
    struct stat st {};
    ASSERT_EQ(fstat(ring_->fd(), &st), 0);
    std::vector<char> bytes(static_cast<size_t>(st.st_size));
    ASSERT_EQ(pread(ring_->fd(), bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    const int out = open(copy.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(out, 0);
    ASSERT_EQ(write(out, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(out);
  }
  const std::string link = dir + "/link-to-fifo";
  ASSERT_EQ(symlink(fifo.c_str(), link.c_str()), 0);
  for (const std::string& path : {fifo, link, std::string("/dev/null"), std::string("/dev/zero"), dir, copy}) {
    // On a thread: before the fix a FIFO blocked here for ever.
    std::atomic<bool> done{false};
    std::string message;
    std::thread attach([&] {
      auto ring = MarkerRing::Attach(path);
      if (!ring.ok()) message = ring.status().message();
      done = true;
    });
    for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!done) {
      // Unblock the open (a writer arrives) so the test can end, and fail.
      const int w = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      attach.join();
      if (w >= 0) close(w);
      ADD_FAILURE() << path << ": Attach blocked";
      continue;
    }
    attach.join();
    EXPECT_NE(message, "") << path << " was attached";
    EXPECT_NE(message.find(path), std::string::npos) << message;
  }
  // The recorder's ring: sealed, so the job cannot shrink or grow it.
  EXPECT_NE(ftruncate(ring_->fd(), 64), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_TRUE(MarkerRing::Attach("/proc/self/fd/" + std::to_string(ring_->fd())).ok());
  for (const std::string& path : {link, fifo, copy}) unlink(path.c_str());
  rmdir(dir.c_str());
}

TEST_F(Markers, WithoutARecorderTheyAreNoOps) {
  unsetenv(kMarkersFdEnv);
  ResetMarkersForTesting();
  EXPECT_EQ(gputriage_markers_enabled(), 0);
  gputriage_step_begin(1);
  gputriage_step_end(1, 32, 0, 0);
  setenv(kMarkersFdEnv, "not-a-number", 1);
  ResetMarkersForTesting();
  EXPECT_EQ(gputriage_markers_enabled(), 0);
  setenv(kMarkersFdEnv, "0", 1);  // stdin: not a ring
  ResetMarkersForTesting();
  EXPECT_EQ(gputriage_markers_enabled(), 0);
}

TEST_F(Markers, OnlyTheRecordersUserReachesTheRing) {
  // The ring is a memfd: besides the processes that inherit it, only its
  // owner's processes (and root) may reopen it through /proc. Checked by
  // dropping to another user in a child, which needs root to begin with.
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch to another user";
  Attach(64);
  const std::string path = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(ring_->fd());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // nobody (65534) in most systems: any uid other than ours will do.
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    const int fd = open(path.c_str(), O_RDWR);
    if (fd >= 0) _exit(11);  // reached the ring: wrong
    _exit(errno == EACCES || errno == EPERM ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: could not switch user, 11: another user opened the ring, 12: other error";
  // The same user (root here) does reach it by that path.
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
}

TEST_F(Markers, StepsAndPhasesArriveWithTheirValues) {
  Attach(1024);
  ASSERT_EQ(gputriage_markers_enabled(), 1);
  gputriage_step_begin(7);
  gputriage_phase_begin(GPUTRIAGE_PHASE_DATA);
  gputriage_phase_end(GPUTRIAGE_PHASE_DATA);
  gputriage_step_end(7, 256, 524288, 1.5e15);
  std::vector<Marker> got;
  ring_->Drain(got);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].kind, MarkerKind::kStepBegin);
  EXPECT_EQ(got[0].step, 7);
  EXPECT_EQ(got[1].kind, MarkerKind::kPhaseBegin);
  EXPECT_EQ(got[1].phase, GPUTRIAGE_PHASE_DATA);
  EXPECT_EQ(got[3].samples, 256);
  EXPECT_EQ(got[3].tokens, 524288);
  EXPECT_DOUBLE_EQ(got[3].flops, 1.5e15);
  EXPECT_EQ(got[3].pid, static_cast<uint32_t>(getpid()));
  EXPECT_LE(got[0].t_ns, got[3].t_ns);
  EXPECT_EQ(ring_->stats().read, 4);
  EXPECT_EQ(ring_->stats().corrupt, 0);
}

TEST_F(Markers, APhaseSwitchedAtAnEarlierReadingSplitsTheSpanThere) {
  // Zero-code mode's DDP backward: backward begins; autograd's work ends (the
  // clock is read then, on whichever thread); backward returns after the wait;
  // only then is the switch written, with the earlier reading.
  Attach(1024);
  gputriage_step_begin(3);
  gputriage_phase_begin(GPUTRIAGE_PHASE_BACKWARD);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int64_t work_done = 0;
  std::thread([&] { work_done = gputriage_markers_clock(); }).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  gputriage_phase_switch_at(GPUTRIAGE_PHASE_BACKWARD, GPUTRIAGE_PHASE_COMMUNICATION, work_done);
  gputriage_phase_end(GPUTRIAGE_PHASE_COMMUNICATION);
  gputriage_phase_switch_at(GPUTRIAGE_PHASE_FORWARD, GPUTRIAGE_PHASE_OTHER, INT64_MAX);  // a later reading: now
  gputriage_step_end(3, 8, 0, 0);
  std::vector<Marker> got;
  ring_->Drain(got);
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[2].kind, MarkerKind::kPhaseEnd);
  EXPECT_EQ(got[3].kind, MarkerKind::kPhaseBegin);
  EXPECT_EQ(got[2].t_ns, got[3].t_ns);  // one instant: backward ends where communication begins
  EXPECT_LT(got[3].t_ns, got[4].t_ns);
  EXPECT_LE(got[5].t_ns, got[6].t_ns);  // a reading from the future is taken as now
  EXPECT_LE(got[6].t_ns, got[7].t_ns);
  const MarkedSteps steps = BuildMarkedSteps(got);
  ASSERT_EQ(steps.steps.size(), 1u);
  const MarkedStep& step = steps.steps[0];
  // Wide bounds: a loaded machine oversleeps, never undersleeps.
  EXPECT_GE(step.phase_ns[GPUTRIAGE_PHASE_BACKWARD], 19'000'000);
  EXPECT_EQ(step.phase_ns[GPUTRIAGE_PHASE_BACKWARD] + step.phase_ns[GPUTRIAGE_PHASE_COMMUNICATION],
            got[4].t_ns - got[1].t_ns);  // the span is split, not stretched
  EXPECT_GE(step.phase_ns[GPUTRIAGE_PHASE_COMMUNICATION], 29'000'000);
  EXPECT_EQ(step.sync_release, got[4].t_ns);  // the step leaves its collective when communication ends
}

TEST_F(Markers, ThreadsAndProcessesAreNeitherLostNorMixedUp) {
  Attach(1 << 18);
  ASSERT_EQ(gputriage_markers_enabled(), 1);
  constexpr int kPerWriter = 20000;
  // Two child processes (they inherit the mapping, as DataLoader workers do) and four threads.
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kPerWriter; ++i) gputriage_step_end(i, c + 1, 0, 0);
      _exit(0);
    }
    children.push_back(pid);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < kPerWriter; ++i) gputriage_step_end(i, 100 + t, 0, 0);
    });
  std::vector<Marker> got;
  for (auto& th : threads) th.join();
  for (pid_t c : children) waitpid(c, nullptr, 0);
  ring_->Drain(got, true);
  ASSERT_EQ(got.size(), 6u * kPerWriter);
  // Each writer's markers, in its own order, under its own pid/tid.
  std::map<int64_t, std::vector<int64_t>> by_writer;  // samples field names the writer
  std::map<int64_t, std::pair<uint32_t, uint32_t>> ids;
  for (const auto& m : got) {
    by_writer[m.samples].push_back(m.step);
    auto [it, fresh] = ids.try_emplace(m.samples, m.pid, m.tid);
    EXPECT_EQ(it->second, std::make_pair(m.pid, m.tid)) << "writer " << m.samples;
  }
  ASSERT_EQ(by_writer.size(), 6u);
  for (const auto& [writer, steps] : by_writer) {
    ASSERT_EQ(steps.size(), static_cast<size_t>(kPerWriter)) << writer;
    for (int i = 0; i < kPerWriter; ++i) ASSERT_EQ(steps[static_cast<size_t>(i)], i) << writer;
  }
  EXPECT_NE(ids[1].first, ids[2].first);               // the children are told apart
  EXPECT_EQ(ids[100].first, static_cast<uint32_t>(getpid()));
  EXPECT_NE(ids[100].second, ids[101].second);         // so are the threads
  EXPECT_EQ(ring_->stats().lost + ring_->stats().corrupt + ring_->stats().abandoned, 0);
}

TEST_F(Markers, CppScopesMarkStepsAndPhases) {
  Attach(1024);
  ASSERT_TRUE(MarkersEnabled());
  {
    StepScope step(3, 64);
    { PhaseScope data(GPUTRIAGE_PHASE_DATA); }
    { PhaseScope forward(GPUTRIAGE_PHASE_FORWARD); }
    step.set_tokens(4096);
  }
  std::vector<Marker> got;
  ring_->Drain(got);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].kind, MarkerKind::kStepBegin);
  EXPECT_EQ(got[3].phase, GPUTRIAGE_PHASE_FORWARD);
  EXPECT_EQ(got[4].kind, MarkerKind::kPhaseEnd);
  EXPECT_EQ(got[5].kind, MarkerKind::kStepEnd);
  EXPECT_EQ(got[5].samples, 64);
  EXPECT_EQ(got[5].tokens, 4096);
}

TEST_F(Markers, TimesAreOnTheWallClock) {
  Attach(1024);
  auto wall = [] {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  // Each marker between two wall-clock reads (a loaded machine oversleeps by
  // milliseconds: the sleep itself is not the reference).
  const int64_t w0 = wall();
  gputriage_step_begin(1);
  const int64_t w1 = wall();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int64_t w2 = wall();
  gputriage_step_end(1, 8, 0, 0);
  const int64_t w3 = wall();
  std::vector<Marker> got;
  ring_->Drain(got);  // whichever clock the writers used (TSC or realtime), the reader hands out wall time
  ASSERT_EQ(got.size(), 2u);
  constexpr int64_t kTolerance = 1'000'000;  // the TSC's conversion to wall time
  EXPECT_GE(got[0].t_ns, w0 - kTolerance);
  EXPECT_LE(got[0].t_ns, w1 + kTolerance);
  EXPECT_GE(got[1].t_ns, w2 - kTolerance);
  EXPECT_LE(got[1].t_ns, w3 + kTolerance);
  EXPECT_GE(got[1].t_ns - got[0].t_ns, 50'000'000 - kTolerance);
}

TEST_F(Markers, TheReaderDrainsWhileWritersWrite) {
  Attach(1 << 12);  // small: the reader must keep up, as the recorder does
  constexpr int kThreads = 3, kPerThread = 30000;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        gputriage_step_end(i, t, 0, 0);
        if (i % 512 == 0) std::this_thread::yield();
      }
      done.fetch_add(1);
    });
  std::vector<Marker> got;
  while (done.load() < kThreads) ring_->Drain(got);
  for (auto& th : threads) th.join();
  ring_->Drain(got, true);
  const auto& st = ring_->stats();
  // Every marker is accounted for: read, or counted lost when the writers lapped the reader.
  EXPECT_EQ(static_cast<int64_t>(got.size()) + st.lost, int64_t{kThreads} * kPerThread);
  EXPECT_EQ(st.corrupt, 0);
  EXPECT_EQ(st.abandoned, 0);
  std::map<int64_t, int64_t> last;  // per writer, steps arrive in order
  for (const auto& m : got) {
    auto [it, fresh] = last.try_emplace(m.samples, m.step);
    if (!fresh) {
      EXPECT_GT(m.step, it->second);
      it->second = m.step;
    }
  }
}

TEST_F(Markers, AFullRingCountsWhatItLost) {
  Attach(64);
  for (int i = 0; i < 1000; ++i) gputriage_step_begin(i);
  std::vector<Marker> got;
  ring_->Drain(got, true);
  ASSERT_EQ(got.size(), 64u);
  EXPECT_EQ(got.front().step, 936);  // the newest survive
  EXPECT_EQ(ring_->stats().lost, 936);
}

/// The ring as a writer sees it, for writing garbage into it.
char* MapForScribbling(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

TEST_F(Markers, GarbageIsDetectedAndNotTrusted) {
  Attach(256);
  for (int i = 0; i < 100; ++i) gputriage_step_begin(i);
  const size_t bytes = sizeof(MarkerRingHeader) + 256 * sizeof(MarkerRecord);
  char* base = MapForScribbling(ring_->fd(), bytes);
  ASSERT_TRUE(base);
  auto* records = reinterpret_cast<MarkerRecord*>(base + sizeof(MarkerRingHeader));
  // A stray write into the payload of some published records (their seq intact).
  std::mt19937 rng(42);
  for (int i : {3, 17, 50, 99}) {
    auto* payload = reinterpret_cast<unsigned char*>(&records[i]) + 8;
    for (int b = 0; b < 56; ++b) payload[b] = static_cast<unsigned char>(rng());
  }
  std::vector<Marker> got;
  ring_->Drain(got);
  EXPECT_EQ(got.size(), 96u);
  EXPECT_EQ(ring_->stats().corrupt, 4);
  for (const auto& m : got) EXPECT_TRUE(m.step != 3 && m.step != 17 && m.step != 50 && m.step != 99);
  // A damaged header stops the reader: nothing more is believed.
  std::memset(base, 0xAB, 16);
  gputriage_step_begin(1000);
  got.clear();
  ring_->Drain(got);
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(ring_->stats().header_damaged);
  munmap(base, bytes);
}

TEST_F(Markers, AWriterThatDiesMidMarkerLeavesTheRestReadable) {
  Attach(256);
  gputriage_step_begin(1);
  const size_t bytes = sizeof(MarkerRingHeader) + 256 * sizeof(MarkerRecord);
  char* base = MapForScribbling(ring_->fd(), bytes);
  ASSERT_TRUE(base);
  // A slot claimed and never published: the writer was killed between the two.
  reinterpret_cast<MarkerRingHeader*>(base)->write_index.fetch_add(1);
  gputriage_step_begin(3);
  std::vector<Marker> got;
  ring_->Drain(got);          // waits for the unpublished slot
  EXPECT_EQ(got.size(), 1u);
  ring_->Drain(got, true);    // the job has ended: it will never come
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].step, 3);
  EXPECT_EQ(ring_->stats().abandoned, 1);
  munmap(base, bytes);
}

Marker M(MarkerKind kind, TimeNs t, int64_t step = 0, uint16_t phase = 0, uint32_t pid = 10, uint32_t tid = 10) {
  Marker m;
  m.kind = kind;
  m.t_ns = t;
  m.step = step;
  m.phase = phase;
  m.pid = pid;
  m.tid = tid;
  m.samples = kind == MarkerKind::kStepEnd ? 32 : 0;
  return m;
}

TEST(MarkedSteps, DataFetchedBetweenStepsIsTheNextStepsWait) {
  using K = MarkerKind;
  // `for batch in watch(loader)`: the fetch precedes each step; a forward phase runs inside it.
  const std::vector<Marker> markers = {
      M(K::kPhaseBegin, 0, 0, 1),   M(K::kPhaseEnd, 30, 0, 1),     // data for step 0: 30
      M(K::kStepBegin, 31, 0),      M(K::kPhaseBegin, 40, 0, 2),
      M(K::kPhaseEnd, 90, 0, 2),    M(K::kStepEnd, 100, 0),        // forward 50
      M(K::kPhaseBegin, 101, 0, 1), M(K::kPhaseEnd, 111, 0, 1),    // data for step 1: 10
      M(K::kStepBegin, 112, 1),     M(K::kPhaseBegin, 120, 0, 1),
      M(K::kPhaseEnd, 125, 0, 1),   M(K::kStepEnd, 200, 1),        // and 5 more inside it
      M(K::kStepBegin, 300, 2),                                    // cut short by the job's end
  };
  const MarkedSteps steps = BuildMarkedSteps(markers);
  ASSERT_EQ(steps.steps.size(), 2u);
  EXPECT_EQ(steps.steps[0].data_wait_ns(), 30);
  EXPECT_EQ(steps.steps[0].phase_ns[2], 50);
  EXPECT_EQ(steps.steps[0].span.start, 0);  // the iteration: its fetch, then the step
  EXPECT_EQ(steps.steps[0].span.duration(), 100);
  EXPECT_EQ(steps.steps[0].samples, 32);
  EXPECT_EQ(steps.steps[1].data_wait_ns(), 15);
  EXPECT_EQ(steps.steps[1].span.start, 101);
  EXPECT_EQ(steps.unpaired_steps, 1);
  EXPECT_EQ(steps.unpaired_phases, 0);
  EXPECT_EQ(steps.unassigned_phases, 0);
}

TEST(MarkedSteps, ProcessesAndThreadsAreKeptApart) {
  using K = MarkerKind;
  // Two ranks with the same step numbers, interleaved; a data phase on a second thread of rank A.
  const std::vector<Marker> markers = {
      M(K::kStepBegin, 0, 0, 0, 1),      M(K::kStepBegin, 1, 0, 0, 2),
      M(K::kPhaseBegin, 2, 0, 1, 1, 7),  M(K::kPhaseBegin, 3, 0, 1, 1, 1),
      M(K::kPhaseEnd, 12, 0, 1, 1, 7),   M(K::kPhaseEnd, 23, 0, 1, 1, 1),
      M(K::kStepEnd, 50, 0, 0, 2),       M(K::kStepEnd, 60, 0, 0, 1),
      M(K::kPhaseEnd, 70, 0, 1, 2, 2),   // an end without a begin
  };
  const MarkedSteps steps = BuildMarkedSteps(markers);
  ASSERT_EQ(steps.steps.size(), 2u);
  const MarkedStep& a = steps.steps[0].pid == 1 ? steps.steps[0] : steps.steps[1];
  const MarkedStep& b = steps.steps[0].pid == 2 ? steps.steps[0] : steps.steps[1];
  EXPECT_EQ(a.span.duration(), 60);
  EXPECT_EQ(a.data_wait_ns(), 10 + 20);  // both threads' data phases belong to rank A's step
  EXPECT_EQ(b.span.duration(), 49);
  EXPECT_EQ(b.data_wait_ns(), 0);
  EXPECT_EQ(steps.unpaired_phases, 1);
}

TEST(MarkedSteps, DeviceTimesFindTheirStepWhenEverTheyArrive) {
  using K = MarkerKind;
  auto device = [](TimeNs t, int64_t step, int64_t ns, uint32_t pid) {
    Marker m = M(K::kStepDeviceTime, t, step, 0, pid);
    m.samples = ns;  // the device time travels in `samples`
    return m;
  };
  const std::vector<Marker> markers = {
      M(K::kStepBegin, 0, 0, 0, 1), M(K::kStepEnd, 10, 0, 0, 1),  M(K::kStepBegin, 0, 0, 0, 2),
      M(K::kStepEnd, 12, 0, 0, 2),  M(K::kStepBegin, 11, 1, 0, 1), M(K::kStepEnd, 20, 1, 0, 1),
      device(21, 0, 9, 1),          // step 0 of process 1, read a step later
      device(22, 1, 8, 1),          device(23, 0, 7, 2),
      device(24, 5, 3, 1),          // no step 5
      device(25, 1, -1, 2),         // not a time
  };
  const MarkedSteps steps = BuildMarkedSteps(markers);
  ASSERT_EQ(steps.steps.size(), 3u);
  for (const auto& s : steps.steps) {
    EXPECT_EQ(s.device_ns, s.pid == 2 ? 7 : s.number == 0 ? 9 : 8);
  }
  EXPECT_EQ(steps.unmatched_device_times, 2);
  EXPECT_EQ(steps.unpaired_steps, 0);
}

TEST(MarkedSteps, AStepKeepsWhereItMetItsPeers) {
  // Arrival: the first forward or communication begin; release: the last backward
  // or communication end. A data phase and the optimizer move neither.
  using K = MarkerKind;
  const std::vector<Marker> markers = {
      M(K::kPhaseBegin, 1, 0, GPUTRIAGE_PHASE_DATA, 1), M(K::kPhaseEnd, 9, 0, GPUTRIAGE_PHASE_DATA, 1),
      M(K::kStepBegin, 10, 0, 0, 1),
      M(K::kPhaseBegin, 12, 0, GPUTRIAGE_PHASE_FORWARD, 1), M(K::kPhaseEnd, 20, 0, GPUTRIAGE_PHASE_FORWARD, 1),
      M(K::kPhaseBegin, 21, 0, GPUTRIAGE_PHASE_BACKWARD, 1), M(K::kPhaseEnd, 40, 0, GPUTRIAGE_PHASE_BACKWARD, 1),
      M(K::kPhaseBegin, 41, 0, GPUTRIAGE_PHASE_COMMUNICATION, 1),
      M(K::kPhaseEnd, 45, 0, GPUTRIAGE_PHASE_COMMUNICATION, 1),
      M(K::kPhaseBegin, 46, 0, GPUTRIAGE_PHASE_OPTIMIZER, 1), M(K::kPhaseEnd, 50, 0, GPUTRIAGE_PHASE_OPTIMIZER, 1),
      M(K::kStepEnd, 51, 0, 0, 1),
      // A step with only an explicit collective: it arrives and is released there.
      M(K::kStepBegin, 60, 1, 0, 1),
      M(K::kPhaseBegin, 61, 1, GPUTRIAGE_PHASE_COMMUNICATION, 1),
      M(K::kPhaseEnd, 65, 1, GPUTRIAGE_PHASE_COMMUNICATION, 1),
      M(K::kStepEnd, 70, 1, 0, 1),
      // No phase that meets peers: neither is known.
      M(K::kStepBegin, 80, 2, 0, 1), M(K::kStepEnd, 90, 2, 0, 1),
  };
  const MarkedSteps steps = BuildMarkedSteps(markers);
  ASSERT_EQ(steps.steps.size(), 3u);
  EXPECT_EQ(steps.steps[0].sync_arrival, 12);
  EXPECT_EQ(steps.steps[0].sync_release, 45);
  EXPECT_EQ(steps.steps[1].sync_arrival, 61);
  EXPECT_EQ(steps.steps[1].sync_release, 65);
  EXPECT_EQ(steps.steps[2].sync_arrival, 0);
  EXPECT_EQ(steps.steps[2].sync_release, 0);
}

TEST(MarkedSteps, PhaseDeviceTimesAddUpInTheirStepOpenOrEnded) {
  using K = MarkerKind;
  auto device = [](TimeNs t, int64_t step, uint16_t phase, int64_t ns) {
    Marker m = M(K::kPhaseDeviceTime, t, step, phase, 1);
    m.samples = ns;
    return m;
  };
  const std::vector<Marker> markers = {
      M(K::kStepBegin, 0, 0, 0, 1),
      M(K::kPhaseBegin, 1, 0, GPUTRIAGE_PHASE_FORWARD, 1), M(K::kPhaseEnd, 5, 0, GPUTRIAGE_PHASE_FORWARD, 1),
      device(6, 0, GPUTRIAGE_PHASE_FORWARD, 30),  // read while its step is still open
      M(K::kStepEnd, 10, 0, 0, 1),
      device(11, 0, GPUTRIAGE_PHASE_BACKWARD, 50),   // and after it ended
      device(12, 0, GPUTRIAGE_PHASE_BACKWARD, 20),   // a second backward of the step: added
      device(13, 0, GPUTRIAGE_PHASE_COPY, 4),        // the copy phase's own slot
      device(14, 0, GPUTRIAGE_PHASE_EVAL, 9),        // not a step phase
      device(15, 3, GPUTRIAGE_PHASE_FORWARD, 9),     // no step 3
      device(16, 0, GPUTRIAGE_PHASE_OPTIMIZER, 0),   // not a time
  };
  const MarkedSteps steps = BuildMarkedSteps(markers);
  ASSERT_EQ(steps.steps.size(), 1u);
  const MarkedStep& s = steps.steps[0];
  EXPECT_EQ(s.phase_device_ns[GPUTRIAGE_PHASE_FORWARD], 30);
  EXPECT_EQ(s.phase_device_ns[GPUTRIAGE_PHASE_BACKWARD], 70);
  EXPECT_EQ(s.phase_device_ns[kCopySlot], 4);
  EXPECT_EQ(s.phase_device_ns[GPUTRIAGE_PHASE_OPTIMIZER], 0);
  EXPECT_EQ(s.phase_ns[GPUTRIAGE_PHASE_FORWARD], 4);  // the host's own timing is untouched
  EXPECT_EQ(steps.unmatched_device_times, 3);
}

TEST(MarkedSteps, StreamedInBatchesTheyComeOutAsTheWholeRunWould) {
  using K = MarkerKind;
  // Two processes, 50 steps each of 100 ns: a data phase before each step, a
  // forward phase inside it, and the step's device time two steps later.
  std::vector<Marker> all;
  for (uint32_t pid : {1u, 2u}) {
    for (int64_t i = 0; i < 50; ++i) {
      const TimeNs t = 1000 + i * 100 + pid;
      all.push_back(M(K::kPhaseBegin, t, 0, GPUTRIAGE_PHASE_DATA, pid));
      all.push_back(M(K::kPhaseEnd, t + 20, 0, GPUTRIAGE_PHASE_DATA, pid));
      all.push_back(M(K::kStepBegin, t + 21, i, 0, pid));
      all.push_back(M(K::kPhaseBegin, t + 30, 0, GPUTRIAGE_PHASE_FORWARD, pid));
      all.push_back(M(K::kPhaseEnd, t + 60, 0, GPUTRIAGE_PHASE_FORWARD, pid));
      all.push_back(M(K::kStepEnd, t + 90, i, 0, pid));
      if (i >= 2) {
        Marker d = M(K::kStepDeviceTime, t + 95, i - 2, 0, pid);
        d.samples = 50 + i - 2;
        all.push_back(d);
      }
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Marker& a, const Marker& b) { return a.t_ns < b.t_ns; });
  const MarkedSteps whole = BuildMarkedSteps(all);
  ASSERT_EQ(whole.steps.size(), 100u);
  // The same markers in batches of 7, a 500 ns hold: steps come out while the run goes on.
  StepBuilder builder(500);
  std::vector<MarkedStep> streamed;
  size_t released_early = 0;
  for (size_t i = 0; i < all.size(); i += 7) {
    builder.Add(std::vector<Marker>(all.begin() + static_cast<std::ptrdiff_t>(i),
                                    all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + 7))));
    auto done = builder.TakeFinished();
    released_early += done.size();
    streamed.insert(streamed.end(), done.begin(), done.end());
  }
  EXPECT_GT(released_early, 80u);  // all but the last ~5 steps of each process, before the end
  MarkedSteps rest = builder.Finish();
  streamed.insert(streamed.end(), rest.steps.begin(), rest.steps.end());
  std::stable_sort(streamed.begin(), streamed.end(),
                   [](const MarkedStep& a, const MarkedStep& b) { return a.span.start < b.span.start; });
  ASSERT_EQ(streamed.size(), whole.steps.size());
  for (size_t i = 0; i < streamed.size(); ++i) {
    const MarkedStep& a = streamed[i];
    const MarkedStep& b = whole.steps[i];
    EXPECT_EQ(a.pid, b.pid);
    EXPECT_EQ(a.number, b.number);
    EXPECT_EQ(a.span.start, b.span.start);  // from the data phase on
    EXPECT_EQ(a.span.duration(), 90);
    EXPECT_EQ(a.data_wait_ns(), 20);
    EXPECT_EQ(a.phase_ns[GPUTRIAGE_PHASE_FORWARD], 30);
    EXPECT_EQ(a.device_ns, b.device_ns);
    EXPECT_EQ(a.device_ns, a.number < 48 ? 50 + a.number : 0);  // the last two never got theirs
  }
  EXPECT_EQ(rest.unassigned_phases, 0);
  EXPECT_EQ(rest.unpaired_steps, 0);
  EXPECT_EQ(rest.unmatched_device_times, 0);
}

TEST(MarkedSteps, APhaseForAStepAlreadyHandedOutIsCountedNotMisplaced) {
  using K = MarkerKind;
  StepBuilder builder(100);
  builder.Add({M(K::kStepBegin, 0, 0), M(K::kPhaseBegin, 5, 0, GPUTRIAGE_PHASE_BACKWARD), M(K::kStepEnd, 10, 0),
               M(K::kStepBegin, 500, 1)});
  ASSERT_EQ(builder.TakeFinished().size(), 1u);  // step 0 ended 490 ns before the newest marker
  builder.Add({M(K::kPhaseEnd, 501, 0, GPUTRIAGE_PHASE_BACKWARD), M(K::kStepEnd, 600, 1)});
  const MarkedSteps rest = builder.Finish();
  ASSERT_EQ(rest.steps.size(), 1u);
  EXPECT_EQ(rest.steps[0].phase_ns[GPUTRIAGE_PHASE_BACKWARD], 0);  // not step 1's
  EXPECT_EQ(rest.unassigned_phases, 1);
}

TEST(MarkedSteps, TheLoopsLastFetchIsNoUnassignedPhase) {
  using K = MarkerKind;
  // Two steps, then the fetch that finds the loader exhausted (a data phase no
  // step follows): not unassigned. Another phase there, or a data phase of a
  // process that never stepped, is.
  auto run = [](uint16_t trailing, bool steps) {
    StepBuilder builder(100);
    std::vector<Marker> markers;
    if (steps)
      markers = {M(K::kPhaseBegin, 0, 0, GPUTRIAGE_PHASE_DATA), M(K::kPhaseEnd, 5, 0, GPUTRIAGE_PHASE_DATA),
                 M(K::kStepBegin, 5, 0), M(K::kStepEnd, 20, 0), M(K::kPhaseBegin, 20, 0, GPUTRIAGE_PHASE_DATA),
                 M(K::kPhaseEnd, 25, 0, GPUTRIAGE_PHASE_DATA), M(K::kStepBegin, 25, 1), M(K::kStepEnd, 40, 1)};
    markers.push_back(M(K::kPhaseBegin, 41, 0, trailing));
    markers.push_back(M(K::kPhaseEnd, 43, 0, trailing));
    builder.Add(markers);
    return builder.Finish();
  };
  const MarkedSteps done = run(GPUTRIAGE_PHASE_DATA, true);
  EXPECT_EQ(done.steps.size(), 2u);
  EXPECT_EQ(done.unassigned_phases, 0);
  EXPECT_EQ(run(GPUTRIAGE_PHASE_OPTIMIZER, true).unassigned_phases, 1);
  EXPECT_EQ(run(GPUTRIAGE_PHASE_DATA, false).unassigned_phases, 1);
}

}  // namespace
}  // namespace gputriage
