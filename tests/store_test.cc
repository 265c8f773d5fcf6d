// The run store: schema versioning, refusing files that are not ours, and a
// run written and read back through the same sketches.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "gputriage/import.h"
#include "gputriage/markers.hpp"
#include "src/store/run_export.h"
#include "src/store/run_store.h"

namespace gputriage {
namespace {

std::string TempPath(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("gputriage_store_" + name);
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + "-wal");
  std::filesystem::remove(p.string() + "-shm");
  return p.string();
}

void Sql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

TEST(RunStore, RoundTripThroughTheSketches) {
  const std::string path = TempPath("roundtrip.db");
  auto store = RunStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  RunInfo info;
  info.name = "bench";
  info.command = "python train.py";
  info.metadata["batch_size"] = "64";
  auto id = (*store)->BeginRun(info);
  ASSERT_TRUE(id.ok());
  Recording live;
  auto dev = live.metrics.FindOrAdd(0, "GPU-a", "00000000:18:00.0", -1);
  live.metrics.devices[*dev].name = "NVIDIA H100 80GB HBM3";
  live.metrics.devices[*dev].power_limit_w = 700;
  ASSERT_TRUE((*store)->PutDevices(*id, live.metrics).ok());
  for (int i = 0; i < 100; ++i) {
    (*store)->AddSample(*id, 0, Metric::kGpuUtil, i * 100 * kNsPerMs, i % 2 ? 90 : 10);
    (*store)->AddSample(*id, 0, Metric::kPowerW, i * 100 * kNsPerMs, 400.5);
  }
  ASSERT_TRUE((*store)->EndRun(*id, 10 * kNsPerS, 0, {}).ok());
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->at(0).status, "complete");
  EXPECT_EQ(runs->at(0).samples, 200);
  EXPECT_EQ(runs->at(0).metadata.at("batch_size"), "64");
  auto rec = (*store)->LoadRun(*id);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  const auto& d = rec->metrics.devices.at(0);
  EXPECT_EQ(d.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d.uuid, "GPU-a");
  EXPECT_DOUBLE_EQ(d.power_limit_w, 700);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kGpuUtil).mean(), 50);
  EXPECT_EQ(d.Get(Metric::kGpuUtil).MedianInterval(), 100 * kNsPerMs);
  EXPECT_FALSE(rec->stats.FindIssue("incomplete_run"));
  EXPECT_FALSE((*store)->LoadRun(42).ok());
}

TEST(RunStore, RefusesFilesThatAreNotOurs) {
  const std::string foreign = TempPath("foreign.db");
  Sql(foreign, "CREATE TABLE invoices(id INTEGER)");
  auto s1 = RunStore::Open(foreign);
  ASSERT_FALSE(s1.ok());
  EXPECT_NE(s1.status().message().find("not a gputriage run store"), std::string::npos);

  const std::string text = TempPath("text.db");
  std::ofstream(text) << "this is not sqlite at all, just some text long enough to have a header page\n";
  EXPECT_FALSE(RunStore::Open(text).ok());

  const std::string newer = TempPath("newer.db");
  ASSERT_TRUE(RunStore::Open(newer).ok());
  Sql(newer, "PRAGMA user_version=99");
  auto s3 = RunStore::Open(newer);
  ASSERT_FALSE(s3.ok());
  EXPECT_NE(s3.status().message().find("newer"), std::string::npos);
}

TEST(RunStore, IncompleteRunIsFlagged) {
  const std::string path = TempPath("incomplete.db");
  int64_t id = 0;
  {
    auto store = RunStore::Open(path);
    ASSERT_TRUE(store.ok());
    id = *(*store)->BeginRun(RunInfo{});
    (*store)->AddSample(id, 0, Metric::kGpuUtil, 0, 5);
    // No EndRun: the recorder died (the destructor flushes what was buffered, as the 1 s batches would).
  }
  auto store = RunStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto rec = (*store)->LoadRun(id);
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE(rec->stats.FindIssue("incomplete_run"));
  EXPECT_EQ(rec->stats.FindIssue("bad_stored_sample")->count, 1);  // a sample of a device never stored
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

TEST(RunStore, ADamagedDevicePositionIsNamedNotAllocated) {
  const std::string path = TempPath("damaged.db");
  {
    auto store = RunStore::Open(path);
    ASSERT_TRUE(store.ok());
    auto id = (*store)->BeginRun({});
    ASSERT_TRUE(id.ok());
    Recording live;
    live.metrics.FindOrAdd(0, "GPU-a", "", -1);
    ASSERT_TRUE((*store)->PutDevices(*id, live.metrics).ok());
    (*store)->AddSample(*id, 0, Metric::kGpuUtil, 0, 50);
    ASSERT_TRUE((*store)->EndRun(*id, kNsPerS, 0, {}).ok());
  }
  Sql(path, "UPDATE devices SET device = 9000000000000000000");  // would be a vector of 9e18 positions
  auto store = RunStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto rec = (*store)->LoadRun(1);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->metrics.devices.empty());
  const auto* issue = rec->stats.FindIssue("bad_stored_device");
  ASSERT_TRUE(issue);
  EXPECT_NE(issue->message.find("9000000000000000000"), std::string::npos) << issue->message;
}

TEST(RunStore, MigratesAVersionOneStoreKeepingItsRuns) {
  // A store as the first schema wrote it (the 0 → 1 migration), with one run.
  const std::string path = TempPath("v1.db");
  Sql(path,
      "CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT, command TEXT, host TEXT, status TEXT NOT NULL,"
      " started_ns INTEGER, ended_ns INTEGER, exit_code INTEGER);"
      "CREATE TABLE run_metadata(run_id INTEGER NOT NULL REFERENCES runs(id), key TEXT NOT NULL, value TEXT,"
      " PRIMARY KEY(run_id, key));"
      "CREATE TABLE devices(run_id INTEGER NOT NULL REFERENCES runs(id), device INTEGER NOT NULL, gpu_index INTEGER,"
      " uuid TEXT, pci_bus_id TEXT, name TEXT, driver_version TEXT, power_limit_w REAL, max_sm_clock_mhz REAL,"
      " memory_total_bytes INTEGER, mig_mode INTEGER, mig_instance INTEGER, mig_profile TEXT,"
      " PRIMARY KEY(run_id, device));"
      "CREATE TABLE metrics(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
      "CREATE TABLE samples(run_id INTEGER NOT NULL, device INTEGER NOT NULL, metric INTEGER NOT NULL REFERENCES metrics(id),"
      " t_ns INTEGER NOT NULL, value REAL NOT NULL);"
      "CREATE INDEX samples_by_run ON samples(run_id, t_ns);"
      "CREATE TABLE findings(run_id INTEGER NOT NULL REFERENCES runs(id), position INTEGER NOT NULL,"
      " verdict TEXT NOT NULL, severity TEXT NOT NULL, title TEXT, scope TEXT, PRIMARY KEY(run_id, position));"
      "INSERT INTO runs VALUES(1, 'old', 'python train.py', 'node1', 'complete', 0, 2000000000, 0);"
      "INSERT INTO devices VALUES(1, 0, 0, 'GPU-old', '', 'NVIDIA A100-SXM4-80GB', '535', 400, 1410, 0, 0, -1, '');"
      "INSERT INTO metrics VALUES(7, 'gpu_util');"
      "INSERT INTO samples VALUES(1, 0, 7, 0, 40), (1, 0, 7, 1000000000, 60);"
      "PRAGMA user_version=1;");
  auto store = RunStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto old = (*store)->LoadRun(1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  ASSERT_EQ(old->metrics.devices.size(), 1u);
  EXPECT_EQ(old->metrics.devices[0].job_use, MetricDevice::JobUse::kUnknown);
  EXPECT_DOUBLE_EQ(old->metrics.devices[0].Get(Metric::kGpuUtil).mean(), 50);
  // New runs use the new columns and tables.
  auto id = (*store)->BeginRun({});
  ASSERT_TRUE(id.ok());
  Recording live;
  for (const char* uuid : {"GPU-job", "GPU-other"}) {
    auto pos = live.metrics.FindOrAdd(-1, uuid, "", -1);
    live.metrics.devices[*pos].job_use = std::string(uuid) == "GPU-job" ? MetricDevice::JobUse::kUsed
                                                                       : MetricDevice::JobUse::kNotUsed;
  }
  live.metrics.devices[0].other_processes = {"pid 7", "pid 8"};
  ASSERT_TRUE((*store)->PutDevices(*id, live.metrics).ok());
  (*store)->AddSample(*id, 0, Metric::kGpuUtil, 0, 90);
  (*store)->AddSample(*id, 1, Metric::kGpuUtil, 0, 0);
  std::vector<MarkedStep> steps(3);
  for (int i = 0; i < 3; ++i) {
    steps[i].number = i;
    steps[i].span = Interval{i * kNsPerS, (i + 1) * kNsPerS - kNsPerMs};
    steps[i].pid = 4242;
    steps[i].samples = 64;
    steps[i].phase_ns[1] = 300 * kNsPerMs;  // data
    steps[i].phase_ns[2] = 200 * kNsPerMs;  // forward
    steps[i].phase_device_ns[2] = 150 * kNsPerMs + i;  // the forward as the GPU timed it
    steps[i].phase_device_ns[kCopySlot] = 7 * kNsPerMs;
    steps[i].sync_arrival = steps[i].span.start + 301 * kNsPerMs + i;
    steps[i].sync_release = steps[i].span.start + 900 * kNsPerMs + i;
    if (i > 0) {  // memory sampled at the ends of steps 1 and 2
      steps[i].host_rss_bytes = (900 + i) << 20;
      steps[i].host_rss_peak_bytes = 950 << 20;
      steps[i].memory_device = 1;
      steps[i].device_allocated_bytes = (int64_t{5} << 30) + i;
      steps[i].device_peak_bytes = int64_t{7} << 30;
      steps[i].device_reserved_bytes = int64_t{8} << 30;
      steps[i].alloc_retries = i;
      steps[i].alloc_ooms = 1;
    }
  }
  ASSERT_TRUE((*store)->PutSteps(*id, steps).ok());
  ASSERT_TRUE((*store)->PutProcessRanks(*id, {{4242, 1, 1, 2, "node-a", "RANK"}}).ok());
  ASSERT_TRUE((*store)->EndRun(*id, kNsPerS, 0, {}).ok());
  auto rec = (*store)->LoadRun(*id);
  ASSERT_TRUE(rec.ok());
  // Loaded as recorded: only the job's GPU, with who else was on it.
  ASSERT_EQ(rec->metrics.devices.size(), 1u);
  EXPECT_EQ(rec->metrics.devices[0].uuid, "GPU-job");
  EXPECT_EQ(rec->metrics.devices[0].other_processes, (std::vector<std::string>{"pid 7", "pid 8"}));
  EXPECT_TRUE(rec->stats.FindIssue("job_gpus"));
  ASSERT_EQ(rec->marked_steps.size(), 3u);
  EXPECT_EQ(rec->marked_steps[2].number, 2);
  EXPECT_EQ(rec->marked_steps[2].span.end, 3 * kNsPerS - kNsPerMs);
  EXPECT_EQ(rec->marked_steps[2].pid, 4242u);
  EXPECT_EQ(rec->marked_steps[2].samples, 64);
  EXPECT_EQ(rec->marked_steps[2].data_wait_ns(), 300 * kNsPerMs);
  EXPECT_EQ(rec->marked_steps[2].phase_ns[2], 200 * kNsPerMs);
  EXPECT_EQ(rec->marked_steps[2].phase_device_ns, steps[2].phase_device_ns);
  EXPECT_EQ(rec->marked_steps[2].sync_arrival, steps[2].sync_arrival);
  EXPECT_EQ(rec->marked_steps[2].sync_release, steps[2].sync_release);
  const auto same_memory = [](const MarkedStep& a, const MarkedStep& b) {
    return std::tie(a.host_rss_bytes, a.host_rss_peak_bytes, a.memory_device, a.device_allocated_bytes,
                    a.device_peak_bytes, a.device_reserved_bytes, a.alloc_retries, a.alloc_ooms) ==
           std::tie(b.host_rss_bytes, b.host_rss_peak_bytes, b.memory_device, b.device_allocated_bytes,
                    b.device_peak_bytes, b.device_reserved_bytes, b.alloc_retries, b.alloc_ooms);
  };
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_memory(rec->marked_steps[i], steps[i])) << "step " << i;
  EXPECT_EQ(rec->marked_steps[0].memory_device, -1);
  ASSERT_EQ(rec->process_ranks.size(), 1u);
  EXPECT_EQ(rec->process_ranks[0].rank, 1);
  // Exported and read back as a file, the steps keep their GPU-timed phases, their sync times and ranks.
  const std::string exported = TempPath("steps.prom");
  ASSERT_TRUE(ExportRun(**store, *id, exported).ok());
  auto reread = ImportRun({exported});
  ASSERT_TRUE(reread.ok()) << reread.status().ToString();
  ASSERT_EQ(reread->recordings.size(), 1u);
  ASSERT_EQ(reread->recordings[0].marked_steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(reread->recordings[0].marked_steps[i].phase_device_ns, steps[i].phase_device_ns);
    EXPECT_EQ(reread->recordings[0].marked_steps[i].phase_ns, steps[i].phase_ns);
    EXPECT_EQ(reread->recordings[0].marked_steps[i].sync_arrival, steps[i].sync_arrival);
    EXPECT_EQ(reread->recordings[0].marked_steps[i].sync_release, steps[i].sync_release);
    EXPECT_TRUE(same_memory(reread->recordings[0].marked_steps[i], steps[i])) << "exported step " << i;
  }
  ASSERT_EQ(reread->recordings[0].process_ranks.size(), 1u);
  EXPECT_EQ(reread->recordings[0].process_ranks[0].pid, 4242u);
  EXPECT_EQ(reread->recordings[0].process_ranks[0].world_size, 2);
  EXPECT_EQ(reread->recordings[0].process_ranks[0].host, "node-a");
  EXPECT_EQ(reread->recordings[0].process_ranks[0].source, "RANK");
  int exported_devices = 0;
  ASSERT_TRUE((*store)->ForEachSample(*id, [&](const MetricDevice& d, Metric, TimeNs, double) {
    EXPECT_EQ(d.uuid, "GPU-job");
    ++exported_devices;
  }).ok());
  EXPECT_EQ(exported_devices, 1);
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

TEST(RunStore, RecordersOpeningANewStoreAtOnceAllLand) {
  // Issue 12, item 2: two of three recorders failed with "table runs already
  // exists" when they created a new store together. Eight processes, 25 runs each.
  const std::string path = TempPath("concurrent.db");
  constexpr int kProcesses = 8, kRunsEach = 25;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int failures = 0;
      for (int r = 0; r < kRunsEach; ++r) {
        auto store = RunStore::Open(path);  // every run opens it anew, as `record` does
        if (!store.ok()) {
          ++failures;
          continue;
        }
        RunInfo info;
        info.name = "p" + std::to_string(p) + "r" + std::to_string(r);
        auto id = (*store)->BeginRun(info);
        if (!id.ok() || !(*store)->EndRun(*id, 1, 0, {}).ok()) ++failures;
      }
      _exit(failures == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a recorder process failed";
  }
  auto store = RunStore::OpenForReading(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), static_cast<size_t>(kProcesses * kRunsEach));
  std::vector<std::string> problems;
  ASSERT_TRUE((*store)->CheckIntegrity(&problems).ok());
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST(RunStore, ReadingNeverCreatesOrMigrates) {
  // Issue 12, item 11: `diagnose 1 --store typo/x.db` created directories and an
  // empty store; a reading command must leave the file system as it found it.
  const auto dir = std::filesystem::temp_directory_path() / "gputriage_store_typo_dir";
  std::filesystem::remove_all(dir);
  auto missing = RunStore::OpenForReading((dir / "x.db").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("there is no run store here"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir));
  // A version-1 store is not migrated by a reader; it says how to migrate it.
  const std::string v1 = TempPath("v1_read.db");
  Sql(v1, "CREATE TABLE runs(id INTEGER PRIMARY KEY); PRAGMA user_version=1;");
  auto old = RunStore::OpenForReading(v1);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("older than this gputriage"), std::string::npos) << old.status().ToString();
  auto text = RunStore::OpenForReading(TempPath("not_sqlite.db"));
  EXPECT_FALSE(text.ok());
}

TEST(RunStore, ADamagedPageIsNamedNotReadAsFewerSamples) {
  // Issue 12, item 11: a store with a damaged page was exported as "0 samples",
  // exit 0. Reads that meet the damage fail and say so; the check finds it.
  const std::string path = TempPath("damaged_page.db");
  int64_t run = 0;
  {
    auto store = RunStore::Open(path);
    ASSERT_TRUE(store.ok());
    auto id = (*store)->BeginRun(RunInfo{});
    ASSERT_TRUE(id.ok());
    run = *id;
    Recording live;
    live.metrics.FindOrAdd(0, "GPU-a", "", -1);
    ASSERT_TRUE((*store)->PutDevices(run, live.metrics).ok());
    for (int i = 0; i < 50000; ++i) (*store)->AddSample(run, 0, Metric::kGpuUtil, i * kNsPerMs, i % 100);
    ASSERT_TRUE((*store)->EndRun(run, 60 * kNsPerS, 0, {}).ok());
  }
  Sql(path, "PRAGMA wal_checkpoint(TRUNCATE);");
  const auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 64 * 4096u);
  {
    // Garbage over a page in the middle of the file: the samples' b-tree.
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>((size / 4096 / 2) * 4096));
    const std::string garbage(4096, '\x5a');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto store = RunStore::OpenForReading(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rec = (*store)->LoadRun(run);
  ASSERT_FALSE(rec.ok()) << "a damaged store read as whole";
  EXPECT_EQ(rec.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(rec.status().message().find("damaged"), std::string::npos) << rec.status().ToString();
  int64_t exported = 0;
  Status each = (*store)->ForEachSample(run, [&](const MetricDevice&, Metric, TimeNs, double) { ++exported; });
  EXPECT_FALSE(each.ok()) << exported << " samples exported from a damaged store";
  std::vector<std::string> problems;
  ASSERT_TRUE((*store)->CheckIntegrity(&problems).ok());
  EXPECT_FALSE(problems.empty());
}

}  // namespace
}  // namespace gputriage
