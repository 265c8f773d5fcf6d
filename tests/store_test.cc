// The run store: schema versioning, refusing files that are not ours, and a
// run written and read back through the same sketches.
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

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
