// Nsight Systems exports (issue 44): tables and columns read by name, whatever
// the nsys version wrote; processes apart; steps from NVTX ranges.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "src/sources/nsys/nsys_export.h"

namespace gputriage {
namespace {

// nsys's GlobalId: pid in bits 24-47, tid in bits 0-23.
constexpr int64_t Gid(int64_t pid, int64_t tid) { return (pid << 24) | tid; }

class NsysExport : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gputriage-nsys-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/report.sqlite";
  }
  void TearDown() override {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  void Make(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
    sqlite3_close(db);
  }
  std::string dir_, path_;
};

// An export in an older schema's shape: no greenContextId, no cuDevice in
// TARGET_INFO_GPU, kernel names only as shortName, no MEMSET table.
constexpr const char* kOldSchema = R"(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'ampere_sgemm_128x64_nn'), (2, 'cudaLaunchKernel_v7000'), (3, 'cudaMemcpyAsync_v3020'),
  (4, 'cudaStreamSynchronize_v3020');
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');
CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, smCount INTEGER, totalMemory INTEGER, computeMajor INTEGER,
  computeMinor INTEGER);
INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA A100-SXM4-80GB', 108, 85899345920, 8, 0);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER,
  streamId INTEGER, correlationId INTEGER, globalPid INTEGER, shortName INTEGER, registersPerThread INTEGER,
  gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER,
  staticSharedMemory INTEGER, dynamicSharedMemory INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER, returnValue INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER,
  streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER,
  color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
)";

TEST_F(NsysExport, AnOlderSchemaReadsByColumnName) {
  Make(std::string(kOldSchema) + R"(
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1000, 6000, 0, )" + std::to_string(Gid(42, 43)) + R"(, 7, 2, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 18000, 0, 1, 7, 7, )" + std::to_string(Gid(42, 0)) + R"(, 1, 96,
  216, 1, 1, 128, 1, 1, 1024, 2048);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (19000, 20000, 0, )" + std::to_string(Gid(42, 43)) + R"(, 8, 3, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (21000, 25000, 0, 1, 7, 8, )" + std::to_string(Gid(42, 0)) + R"(, 4096, 2);
INSERT INTO NVTX_EVENTS VALUES (500, 30000, 59, 0, 0, 0, 'ProfilerStep#3', )" + std::to_string(Gid(42, 43)) + R"(, NULL, NULL, 0);
INSERT INTO NVTX_EVENTS VALUES (900, 7000, 59, 0, 0, 0, 'forward', )" + std::to_string(Gid(42, 43)) + R"(, NULL, NULL, 0);
INSERT INTO NVTX_EVENTS VALUES (950, NULL, 34, 0, 0, 0, 'a mark', )" + std::to_string(Gid(42, 43)) + R"(, NULL, NULL, 0);
)");
  auto read = ImportNsysExport(path_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), 1u);
  const Recording& rec = (*read)[0];
  EXPECT_EQ(rec.format, "nsys");
  EXPECT_TRUE(rec.clock_is_absolute);
  ASSERT_EQ(rec.devices.size(), 1u);
  EXPECT_EQ(rec.devices[0].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(rec.devices[0].num_sms, 108);
  ASSERT_EQ(rec.kernels.size(), 1u);
  const KernelActivity& k = rec.kernels[0];
  EXPECT_EQ(rec.names.View(k.name), "ampere_sgemm_128x64_nn");  // shortName, the only name this schema has
  EXPECT_EQ(k.time.start, 1700000000000000000 + 8000);           // session start + ns into it
  EXPECT_EQ(k.time.duration(), 10000);
  EXPECT_EQ(k.grid[0], 216u);
  EXPECT_EQ(k.block[0], 128u);
  EXPECT_FLOAT_EQ(k.blocks_per_sm, 2.0f);  // 216 blocks over the A100's 108 SMs, as Kineto computes it
  EXPECT_EQ(k.shared_memory_bytes, 1024 + 2048);
  EXPECT_EQ(k.correlation, 7);
  ASSERT_EQ(rec.runtime_calls.size(), 2u);
  EXPECT_EQ(rec.names.View(rec.runtime_calls[0].name), "cudaLaunchKernel");  // the _v7000 ABI suffix dropped
  EXPECT_EQ(rec.runtime_calls[0].kind, RuntimeCallKind::kKernelLaunch);
  EXPECT_EQ(rec.runtime_calls[0].correlation, 7);  // joins the kernel
  EXPECT_EQ(rec.runtime_calls[0].thread, 43);
  EXPECT_EQ(rec.runtime_calls[1].kind, RuntimeCallKind::kMemcpy);
  ASSERT_EQ(rec.memory_ops.size(), 1u);
  EXPECT_EQ(rec.memory_ops[0].kind, MemoryOpKind::kMemcpyDtoH);
  EXPECT_EQ(rec.memory_ops[0].bytes, 4096);
  EXPECT_EQ(rec.memory_ops[0].host_memory, HostMemory::kUnknown);  // this schema has no srcKind/dstKind
  ASSERT_EQ(rec.steps.size(), 1u);  // ProfilerStep#3 is a step, as in a Kineto trace, not a span
  EXPECT_EQ(rec.steps[0].number, 3);
  ASSERT_EQ(rec.cpu_spans.size(), 1u);  // 'forward'; the mark has no end
  EXPECT_EQ(rec.names.View(rec.cpu_spans[0].name), "forward");
  EXPECT_EQ(rec.cpu_spans[0].kind, CpuSpanKind::kUserAnnotation);
}

TEST_F(NsysExport, EachProcessIsARecordingAndALauncherIsNot) {
  Make(std::string(kOldSchema) + R"(
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 18000, 0, 1, 7, 7, )" + std::to_string(Gid(100, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 19000, 1, 1, 7, 9, )" + std::to_string(Gid(200, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
INSERT INTO NVTX_EVENTS VALUES (0, 90000, 59, 0, 0, 0, 'launcher', )" + std::to_string(Gid(7, 7)) + R"(, NULL, NULL, 0);
)");
  auto read = ImportNsysExport(path_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), 2u);  // pids 100 and 200; pid 7 did no GPU work
  EXPECT_EQ((*read)[0].metadata.at("process.pid"), "100");
  EXPECT_EQ((*read)[1].metadata.at("process.pid"), "200");
  EXPECT_EQ((*read)[1].kernels[0].device, 1);
}

// A process that made CUDA calls but ran no GPU work beside one that did (a
// launcher querying the GPU, a compile worker): a helper, not rank 1 (issue 54).
TEST_F(NsysExport, AHelperProcessWithCudaCallsAndNoGpuWorkIsNotARank) {
  Make(std::string(kOldSchema) + R"(
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1000, 6000, 0, )" + std::to_string(Gid(100, 101)) + R"(, 7, 2, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 18000, 0, 1, 7, 7, )" + std::to_string(Gid(100, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (500, 900, 0, )" + std::to_string(Gid(300, 301)) + R"(, 40, 4, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (950, 990, 0, )" + std::to_string(Gid(300, 301)) + R"(, 41, 4, 0);
)");
  auto read = ImportNsysExport(path_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].metadata.at("process.pid"), "100");
  const ImportIssue* helper = (*read)[0].stats.FindIssue("helper_processes");
  ASSERT_NE(helper, nullptr);
  EXPECT_NE(helper->message.find("pid 300 (2 CUDA API calls)"), std::string::npos) << helper->message;
  // With no process running GPU work, every process with CUDA calls stays a recording.
  Make("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL;");
  auto cpu_only = ImportNsysExport(path_);
  ASSERT_TRUE(cpu_only.ok()) << cpu_only.status().ToString();
  EXPECT_EQ(cpu_only->size(), 2u);
}

// nsys's own account of what it dropped is said in the recording; "dropped: 0." is not.
TEST_F(NsysExport, DroppedEventsNsysReportsAreSaid) {
  Make(std::string(kOldSchema) + R"(
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 18000, 0, 1, 7, 7, )" + std::to_string(Gid(100, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
CREATE TABLE DIAGNOSTIC_EVENT (timestamp INTEGER, timestampType INTEGER, source INTEGER, severity INTEGER, text TEXT,
  globalPid INTEGER);
INSERT INTO DIAGNOSTIC_EVENT VALUES (1, 1, 1, 1, 'Number of incomplete CUPTI events dropped: 24806. Incomplete events appear when GPU timestamp information have not been retrieved', 0);
INSERT INTO DIAGNOSTIC_EVENT VALUES (2, 1, 1, 1, 'Number of CUPTI events dropped: 0.', 0);
INSERT INTO DIAGNOSTIC_EVENT VALUES (3, 1, 3, 1, 'Profiling has stopped.', 0);
)");
  auto read = ImportNsysExport(path_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const ImportIssue* dropped = (*read)[0].stats.FindIssue("nsys_dropped_events");
  ASSERT_NE(dropped, nullptr);
  EXPECT_EQ(dropped->count, 1);
  EXPECT_NE(dropped->message.find("Nsight Systems says: Number of incomplete CUPTI events dropped: 24806"),
            std::string::npos) << dropped->message;
}

// A copy's host memory, by the export's own ENUM_CUDA_MEM_KIND names (nsys's ids:
// 0 pageable, 1 pinned), from srcKind for copies to the device, dstKind back.
TEST_F(NsysExport, CopiesSayWhetherTheirHostMemoryIsPageableOrPinned) {
  const std::string pid = std::to_string(Gid(42, 0));
  Make(std::string(kOldSchema) + R"(
ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY ADD COLUMN srcKind INTEGER;
ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY ADD COLUMN dstKind INTEGER;
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
  (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device');
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (1000, 2000, 0, 1, 7, 1, )" + pid + R"(, 4096, 1, 0, 2);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (3000, 4000, 0, 1, 7, 2, )" + pid + R"(, 4096, 2, 2, 1);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (5000, 6000, 0, 1, 7, 3, )" + pid + R"(, 4096, 8, 2, 2);
)");
  auto read = ImportNsysExport(path_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const auto& ops = (*read)[0].memory_ops;
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].host_memory, HostMemory::kPageable);  // to the device from pageable memory
  EXPECT_EQ(ops[1].host_memory, HostMemory::kPinned);    // back into pinned memory
  EXPECT_EQ(ops[2].host_memory, HostMemory::kUnknown);   // device to device: no host side
}

TEST_F(NsysExport, AUserStepRegexAndMissingTablesAreSaid) {
  Make(R"(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'k');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,
  globalPid INTEGER, demangledName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER,
  blockY INTEGER, blockZ INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 7, )" + std::to_string(Gid(5, 0)) + R"(, 1, 1, 1, 1, 1, 1, 1);
CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, globalTid INTEGER);
INSERT INTO NVTX_EVENTS VALUES (0, 30, 59, 'fwd-bwd 12', )" + std::to_string(Gid(5, 5)) + R"();
)");
  NsysReadOptions options;
  options.step_range_regex = R"(^fwd-bwd (\d+)$)";
  auto read = ImportNsysExport(path_, options);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const Recording& rec = (*read)[0];
  EXPECT_FALSE(rec.clock_is_absolute);  // no session start: times from the export's own zero
  ASSERT_EQ(rec.steps.size(), 1u);
  EXPECT_EQ(rec.steps[0].number, 12);
  const ImportIssue* missing = rec.stats.FindIssue("nsys_table_missing");
  ASSERT_NE(missing, nullptr);
  EXPECT_NE(missing->message.find("CUDA API calls"), std::string::npos) << missing->message;

  options.step_range_regex = R"(^(fwd)-bwd \d+$)";  // a group that is no number: the steps count in order
  auto named = ImportNsysExport(path_, options);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  ASSERT_EQ((*named)[0].steps.size(), 1u);
  EXPECT_EQ((*named)[0].steps[0].number, 0);

  options.step_range_regex = "([unclosed";
  auto bad = ImportNsysExport(path_, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--step-range"), std::string::npos);
}

// Two ranks in one report, as `nsys profile` of a torchrun job writes it: each
// process's NCCL all-reduce kernels, NCCL's NVTX domain (its collective calls on
// the host) and NVTX step ranges. Rank 1 computes 2 ms longer before every
// all-reduce, so rank 0 waits for it there.
TEST_F(NsysExport, ProcessesAreRanksAndNcclIsTheirCommunication) {
  std::string sql = std::string(kOldSchema) + R"(
INSERT INTO StringIds VALUES (10, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'), (11, 'NCCL'), (12, 'ncclAllReduce');
)";
  constexpr int64_t kMs = 1000000;
  int64_t correlation = 100;
  for (int rank = 0; rank < 2; ++rank) {
    const int64_t pid = 100 * (rank + 1), thread = Gid(pid, pid);
    sql += fmt::format("INSERT INTO NVTX_EVENTS VALUES (0, NULL, 75, 0, 0, 0, NULL, {}, NULL, 11, 1);\n", thread);
    for (int step = 0; step < 12; ++step) {
      const int64_t t0 = step * 10 * kMs, compute_end = t0 + (rank == 0 ? 6 : 8) * kMs, reduce_end = t0 + 9 * kMs;
      sql += fmt::format("INSERT INTO NVTX_EVENTS VALUES ({}, {}, 59, 0, 0, 0, 'iteration {}', {}, NULL, NULL, 0);\n",
                         t0, t0 + 10 * kMs, step, thread);
      sql += fmt::format("INSERT INTO NVTX_EVENTS VALUES ({}, {}, 59, 0, 0, 0, NULL, {}, NULL, 12, 1);\n",
                         compute_end - 50000, compute_end - 20000, thread);
      // The compute kernel and the all-reduce, each launched just before it runs.
      for (auto [start, end, name] : {std::tuple{t0 + 100000, compute_end, 1}, std::tuple{compute_end, reduce_end, 10}}) {
        ++correlation;
        sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ({}, {}, 0, {}, {}, 2, 0);\n", start - 20000,
                           start - 10000, thread, correlation);
        sql += fmt::format(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({}, {}, {}, 1, 7, {}, {}, {}, 96, 108, 1, 1, 256, 1, 1, 0, 0);\n",
            start, end, rank, correlation, Gid(pid, 0), name);
      }
    }
  }
  Make(sql);
  auto run = ImportRun({path_}, {});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->recordings.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const Recording& rec = run->recordings[static_cast<size_t>(rank)];
    EXPECT_EQ(rec.rank, rank);  // the processes in pid order, as the ranks of one run
    EXPECT_EQ(rec.steps.size(), 12u);
    int communication = 0;
    for (const auto& c : rec.cpu_spans) communication += c.kind == CpuSpanKind::kCommunication ? 1 : 0;
    EXPECT_EQ(communication, 12) << "NCCL's NVTX ranges are the rank's collective calls";
  }
  const Diagnosis d = Diagnose(*run);
  ASSERT_EQ(d.collective_skew.size(), 1u);
  const CollectiveSkew& skew = d.collective_skew[0];
  ASSERT_TRUE(skew.available) << skew.unavailable_reason;
  EXPECT_EQ(skew.events, "device collective kernels");
  EXPECT_EQ(skew.ranks, 2);
  EXPECT_EQ(skew.collectives, 12);
  EXPECT_EQ(skew.straggler_rank, 1);
  EXPECT_NEAR(skew.wait_ms_per_step, 1.0, 0.05);  // rank 0 waits 2 ms, rank 1 none: 1 ms a step on average
  std::set<std::string> verdicts;
  for (const auto& f : d.findings) verdicts.insert(f.verdict);
  EXPECT_TRUE(verdicts.count("straggler_rank") + verdicts.count("load_imbalance") > 0)
      << "the late rank is judged as in a Kineto trace of the run";
}

// An OS runtime trace (--trace=osrt) and CPU samples: while the GPU waits on the
// host, the launching thread sits in poll() (a worker's pipe) most of the time and
// runs Python the rest. Its OS calls and running samples split the host_wait;
// another thread's, a call nested in one, and samples outside the wait do not.
TEST_F(NsysExport, OsRuntimeCallsSayWhereTheLaunchingThreadWaited) {
  std::string sql = std::string(kOldSchema) + R"(
INSERT INTO StringIds VALUES (20, 'poll'), (21, 'read'), (22, 'pthread_mutex_lock'), (23, '_PyEval_EvalFrameDefault'),
  (24, '/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0'), (25, '__poll'), (26, '/lib/x86_64-linux-gnu/libc.so.6');
CREATE TABLE OSRT_API (start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER, nameId INTEGER,
  returnValue INTEGER, nestingLevel INTEGER, callchainId INTEGER);
CREATE TABLE COMPOSITE_EVENTS (id INTEGER PRIMARY KEY, start INTEGER, cpu INTEGER, threadState INTEGER,
  globalTid INTEGER, cpuCycles INTEGER);
CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER, symbol INTEGER, module INTEGER, kernelMode INTEGER, thumbCode INTEGER,
  unresolved INTEGER, specialEntry INTEGER, originalIP INTEGER, unwindMethod INTEGER, stackDepth INTEGER);
)";
  int sample_id = 0;
  // A CPU sample of `thread` at `t` whose innermost frame is `symbol` in `module`.
  auto sample = [&](int64_t t, int64_t thread, int symbol, int module) {
    ++sample_id;
    return fmt::format("INSERT INTO COMPOSITE_EVENTS VALUES ({0}, {1}, 0, 1, {2}, 0);\n"
                       "INSERT INTO SAMPLING_CALLCHAINS VALUES ({0}, {3}, {4}, 0, 0, 0, 0, 0, 0, 0);\n"
                       "INSERT INTO SAMPLING_CALLCHAINS VALUES ({0}, 99, 99, 0, 0, 0, 0, 0, 0, 1);\n",
                       sample_id, t, thread, symbol, module);
  };
  constexpr int64_t kMs = 1000000, kUs = 1000;
  const int64_t main_thread = Gid(42, 43), other_thread = Gid(42, 44);
  for (int step = 0; step < 10; ++step) {
    const int64_t t0 = step * 10 * kMs;
    sql += fmt::format("INSERT INTO NVTX_EVENTS VALUES ({}, {}, 59, 0, 0, 0, 'iteration {}', {}, NULL, NULL, 0);\n", t0,
                       t0 + 10 * kMs, step, main_thread);
    sql += fmt::format("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ({}, {}, 0, {}, {}, 2, 0);\n", t0, t0 + 10 * kUs,
                       main_thread, step + 1);
    sql += fmt::format(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({}, {}, 0, 1, 7, {}, {}, 1, 96, 108, 1, 1, 256, 1, 1, 0, 0);\n",
        t0 + 20 * kUs, t0 + 2 * kMs, step + 1, Gid(42, 0));
    // The launching thread in poll() for 5.9 ms of the 8 ms the GPU waits, with a
    // read() nested in it; another thread's lock wait meanwhile.
    sql += fmt::format("INSERT INTO OSRT_API VALUES ({}, {}, 0, {}, 20, 0, 0, 0);\n", t0 + 2100 * kUs, t0 + 8 * kMs,
                       main_thread);
    sql += fmt::format("INSERT INTO OSRT_API VALUES ({}, {}, 0, {}, 21, 0, 1, 0);\n", t0 + 3 * kMs, t0 + 4 * kMs,
                       main_thread);
    sql += fmt::format("INSERT INTO OSRT_API VALUES ({}, {}, 0, {}, 22, 0, 0, 0);\n", t0 + 2 * kMs, t0 + 9 * kMs,
                       other_thread);
    // Samples: two while the thread runs Python in the GPU's wait; one inside
    // poll() (it waited there); one while the GPU was busy; one of another thread.
    sql += sample(t0 + 8500 * kUs, main_thread, 23, 24) + sample(t0 + 9500 * kUs, main_thread, 23, 24);
    sql += sample(t0 + 5 * kMs, main_thread, 25, 26) + sample(t0 + 1 * kMs, main_thread, 23, 24);
    sql += sample(t0 + 8500 * kUs, other_thread, 25, 26);
  }
  Make(sql);
  auto read = ImportNsysExport(path_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const Recording& rec = (*read)[0];
  EXPECT_TRUE(rec.os_calls_traced);
  EXPECT_EQ(rec.os_calls.size(), 10u) << "the launching thread's outermost calls only";
  const RecordingAnalysis a = AnalyzeRecording(rec);
  const HostOsWaits& w = a.host_os_waits;
  ASSERT_TRUE(w.traced);
  EXPECT_EQ(w.thread, 43);
  const TimeNs host_wait = a.device_idle.ns[static_cast<int>(IdleCause::kHostWait)];
  ASSERT_GT(host_wait, 0);
  EXPECT_NEAR(static_cast<double>(w.in_os_calls_ns) / static_cast<double>(host_wait), 5.9 / 8.0, 0.02);
  ASSERT_EQ(w.calls.size(), 1u);
  EXPECT_EQ(w.calls[0].first, "poll");
  EXPECT_EQ(w.calls[0].second, w.in_os_calls_ns);
  // Where it ran the rest of the wait: the Python samples, by module file name.
  ASSERT_TRUE(w.sampled);
  EXPECT_EQ(w.running_samples, 20);
  ASSERT_EQ(w.running_modules.size(), 1u);
  EXPECT_EQ(w.running_modules[0].first, "libpython3.11.so.1.0");

  // Without an OS runtime trace nothing is claimed either way.
  Make("DROP TABLE OSRT_API; DROP TABLE COMPOSITE_EVENTS;");
  auto untraced = ImportNsysExport(path_);
  ASSERT_TRUE(untraced.ok()) << untraced.status().ToString();
  const HostOsWaits none = AnalyzeRecording((*untraced)[0]).host_os_waits;
  EXPECT_FALSE(none.traced);
  EXPECT_FALSE(none.sampled);
}

// Both profilers on one job: a PyTorch profiler trace and an Nsight Systems
// export of the same process are that rank seen twice, not two ranks.
TEST_F(NsysExport, ATraceAndAnExportOfOneProcessAreNotTwoRanks) {
  Make(std::string(kOldSchema) + R"(
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1000, 6000, 0, )" + std::to_string(Gid(4242, 4242)) + R"(, 7, 2, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 18000, 0, 1, 7, 7, )" + std::to_string(Gid(4242, 0)) + R"(, 1, 96,
  216, 1, 1, 128, 1, 1, 0, 0);
)");
  auto trace_of = [&](int pid) {
    const std::string path = dir_ + "/rank.pt.trace.json";
    std::ofstream(path) << fmt::format(
        R"({{"traceEvents": [
  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": {0}, "tid": 1, "ts": 0, "dur": 30}},
  {{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": {0}, "tid": 1, "ts": 1, "dur": 6}},
  {{"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 8, "dur": 10,
    "args": {{"device": 0, "stream": 7, "correlation": 7}}}}]}})",
        pid);
    return path;
  };
  auto notes_of = [&](int pid) {
    const std::string trace = trace_of(pid);
    auto run = ImportRun({trace, path_}, {});
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    std::remove(trace.c_str());
    return run.ok() ? Diagnose(*run).notes : std::vector<std::string>{};
  };
  const auto same = notes_of(4242);
  ASSERT_EQ(same.size(), 1u);
  EXPECT_NE(same[0].find("one process (pid 4242) seen by two profilers, not two ranks"), std::string::npos) << same[0];
  for (const auto& note : notes_of(4243)) EXPECT_EQ(note.find("seen by two profilers"), std::string::npos) << note;
}

TEST_F(NsysExport, RowsWithoutUsableTimesAreLeftOutAndCounted) {
  Make(std::string(kOldSchema) + R"(
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 18000, 0, 1, 7, 7, )" + std::to_string(Gid(42, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ('soon', 18000, 0, 1, 7, 8, )" + std::to_string(Gid(42, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (9000, 100, 0, 1, 7, 9, )" + std::to_string(Gid(42, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
)");
  auto read = ImportNsysExport(path_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const Recording& rec = (*read)[0];
  EXPECT_EQ(rec.kernels.size(), 1u);  // text is not a time (SQLite would read it as 0); nor is an end before the start
  const ImportIssue* bad = rec.stats.FindIssue("bad_event");
  ASSERT_NE(bad, nullptr);
  EXPECT_NE(bad->message.find("2 rows"), std::string::npos) << bad->message;
}

TEST_F(NsysExport, OtherSqliteFilesAndDamagedOnesAreRefusedByName) {
  Make("CREATE TABLE runs (id INTEGER); INSERT INTO runs VALUES (1);");
  auto other = ImportNsysExport(path_);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(other.status().message().find("not an Nsight Systems export"), std::string::npos);

  // A file with the SQLite header and garbage after it: a clear error, no crash.
  FILE* f = std::fopen(path_.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string junk = std::string("SQLite format 3\0", 16) + std::string(4096, '\x5a');
  std::fwrite(junk.data(), 1, junk.size(), f);
  std::fclose(f);
  auto damaged = ImportFile(path_);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find(path_), std::string::npos) << damaged.status().message();
}

TEST_F(NsysExport, ImportDetectsAnExportByContentAndAReportSaysHowToExportIt) {
  Make(std::string(kOldSchema) + R"(
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 18000, 0, 1, 7, 7, )" + std::to_string(Gid(42, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
)");
  auto read = ImportFile(path_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)[0].format, "nsys");

  const std::string report = dir_ + "/run.nsys-rep";
  FILE* f = std::fopen(report.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("NVIDIA Tegra Profiler Report 2025@6@3@541", f);
  std::fclose(f);
  auto rep = ImportFile(report);
  std::remove(report.c_str());
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("nsys export --type sqlite"), std::string::npos) << rep.status().message();
}

// The user's own nsys exports a report: a stand-in on $GPUTRIAGE_NSYS that
// takes nsys's arguments and writes the export where --output says.
TEST_F(NsysExport, AReportIsExportedWithTheUsersNsysAndTheExportRemoved) {
  Make(std::string(kOldSchema) + R"(
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (8000, 18000, 0, 1, 7, 7, )" + std::to_string(Gid(42, 0)) + R"(, 1, 96, 1, 1, 1, 1, 1, 1, 0, 0);
)");
  const std::string report = dir_ + "/run.nsys-rep", fake = dir_ + "/nsys", seen = dir_ + "/args";
  FILE* f = std::fopen(report.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("NVIDIA Tegra Profiler Report 2025@6@3@541", f);
  std::fclose(f);
  f = std::fopen(fake.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fprintf(f,
               "#!/bin/sh\n"
               "echo \"$@\" > %s\n"
               "[ \"$FAKE_NSYS_FAIL\" = 1 ] && { echo 'Failed to open the report: version too new' >&2; exit 2; }\n"
               "while [ $# -gt 0 ]; do [ \"$1\" = --output ] && out=$2; shift; done\n"
               "cp %s \"$out\"\n",
               seen.c_str(), path_.c_str());
  std::fclose(f);
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  setenv(kNsysPathEnv, fake.c_str(), 1);
  auto read = ImportFile(report);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)[0].format, "nsys");
  EXPECT_EQ((*read)[0].source_path, report);  // messages name the user's file
  EXPECT_EQ((*read)[0].kernels.size(), 1u);
  EXPECT_NE((*read)[0].stats.FindIssue("nsys_exported"), nullptr);
  FILE* a = std::fopen(seen.c_str(), "r");
  ASSERT_NE(a, nullptr);
  char args[512] = {};
  ASSERT_NE(std::fgets(args, sizeof args, a), nullptr);
  std::fclose(a);
  EXPECT_NE(std::string(args).find("export --type sqlite"), std::string::npos) << args;
  const std::string out = std::string(args).substr(std::string(args).find("--output ") + 9);
  EXPECT_NE(access(out.substr(0, out.find(' ')).c_str(), F_OK), 0) << "the temporary export was not removed";

  setenv("FAKE_NSYS_FAIL", "1", 1);
  auto failed = ImportFile(report);
  unsetenv("FAKE_NSYS_FAIL");
  unsetenv(kNsysPathEnv);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("version too new"), std::string::npos) << failed.status().message();
  std::remove(report.c_str());
  std::remove(fake.c_str());
  std::remove(seen.c_str());
}

}  // namespace
}  // namespace gputriage
