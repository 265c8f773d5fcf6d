// The team store against a real PostgreSQL server: run by store_postgres_test.sh,
// which starts the server and passes its URL in GPUTRIAGE_TEST_POSTGRES_URL.
// Each test works in a schema of its own (options=-csearch_path=...), so a new
// store starts empty.
//
// The same run written to SQLite and to PostgreSQL reads back the same from
// both: runs, settings, devices, every sample (bit for bit), steps, findings
// and figures.
#include <libpq-fe.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "src/store/run_store.h"

namespace gputriage {
namespace {

std::string ServerUrl() {
  const char* url = std::getenv("GPUTRIAGE_TEST_POSTGRES_URL");
  return url ? url : "";
}

/// Runs `sql` on the server's database as the test's superuser.
void ServerSql(const std::string& sql) {
  PGconn* conn = PQconnectdb(ServerUrl().c_str());
  ASSERT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);  // "schema ... does not exist, skipping"
  PGresult* res = PQexec(conn, sql.c_str());
  const ExecStatusType st = PQresultStatus(res);
  EXPECT_TRUE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) << sql << ": " << PQresultErrorMessage(res);
  PQclear(res);
  PQfinish(conn);
}

/// A URL whose store lives in a new, empty schema `name`.
std::string FreshSchema(const std::string& name) {
  ServerSql("DROP SCHEMA IF EXISTS " + name + " CASCADE; CREATE SCHEMA " + name);
  return ServerUrl() + "?options=-csearch_path%3D" + name;
}

std::string TempPath(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("gputriage_pgtest_" + name);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + suffix);
  return p.string();
}

class PostgresStore : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(ServerUrl().empty()) << "GPUTRIAGE_TEST_POSTGRES_URL is not set: run store_postgres_test.sh";
  }
};

// A run with what a recording writes: metadata with awkward text, two GPUs,
// values that need every digit, a steps batch, settings, findings, figures.
int64_t WriteRun(RunStore& store, const std::string& name) {
  RunInfo info;
  info.name = name;
  info.command = "python train.py --note 'it''s ?' \"quoted\" ü";
  info.host = "node-7";
  info.started_ns = 1'764'000'000'123'456'789;
  info.metadata["tag.owner"] = "ml-team";
  info.metadata["git_commit"] = "2d1b66d5";
  auto id = store.BeginRun(info);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  if (!id.ok()) return 0;
  Recording live;
  for (int g = 0; g < 2; ++g) {
    auto dev = live.metrics.FindOrAdd(g, "GPU-" + std::to_string(g), "00000000:1" + std::to_string(g) + ":00.0", -1);
    auto& d = live.metrics.devices[*dev];
    d.name = "NVIDIA H200";
    d.power_limit_w = 700.25;
    d.max_sm_clock_mhz = 1980;
    d.memory_total_bytes = 150'754'820'096;
    d.job_use = g == 0 ? MetricDevice::JobUse::kUsed : MetricDevice::JobUse::kNotUsed;
    d.other_processes = {"pid 7", "pid 8"};
  }
  EXPECT_TRUE(store.PutDevices(*id, live.metrics).ok());
  for (int i = 0; i < 500; ++i) {
    const TimeNs t = info.started_ns + i * 100 * kNsPerMs;
    for (size_t g = 0; g < 2; ++g) {
      store.AddSample(*id, g, Metric::kGpuUtil, t, (i * 7 + static_cast<int>(g)) % 101);
      store.AddSample(*id, g, Metric::kPowerW, t, 0.1 + 0.2 + i * 1e-9);  // needs 17 digits
      if (i % 3 == 0) store.AddSample(*id, g, Metric::kTensorActive, t, 1.0 / 3.0);
    }
  }
  std::vector<MarkedStep> steps;
  for (int s = 0; s < 20; ++s) {
    MarkedStep step;
    step.number = s;
    step.span = Interval{info.started_ns + s * kNsPerS, info.started_ns + (s + 1) * kNsPerS - 1};
    step.pid = 4242;
    step.samples = 64;
    step.tokens = 64 * 2048;
    step.flops = 1.234567890123e15;
    step.phase_ns[1] = 12'345'678;
    step.device_ns = 900'000'001;
    step.phase_device_ns[3] = 600'000'003;  // backward, GPU-timed
    step.sync_arrival = step.span.start + 20'000'001;
    step.sync_release = step.span.start + 700'000'002;
    steps.push_back(step);
  }
  EXPECT_TRUE(store.PutSteps(*id, steps).ok());
  EXPECT_TRUE(store.PutProcessRanks(*id, {{4242, 3, 1, 8, "node-b", "torch.distributed"}}).ok());
  EXPECT_TRUE(store.PutSettings(*id, {{"dataloader.num_workers", "4"}, {"torch.version", "2.5.1"}}).ok());
  EXPECT_TRUE(store.PutSettings(*id, {{"dataloader.num_workers", "0"}}).ok());  // replaced, not doubled
  Finding f;
  f.verdict = "input_bound";
  f.severity = Severity::kHigh;
  f.title = "Input-bound: data wait 31% of compute";
  f.scope = "GPU 0";
  EXPECT_TRUE(store.EndRun(*id, info.started_ns + 50 * kNsPerS, 0, {f}, {{"step_time_ms", 28.4199999999}, {"data_wait_percent", 40.0}}).ok());
  return *id;
}

using SampleRow = std::tuple<int, int, TimeNs, double>;
std::vector<SampleRow> Samples(RunStore& store, int64_t id) {
  std::vector<SampleRow> out;
  EXPECT_TRUE(store
                  .ForEachSample(id, [&](const MetricDevice& d, Metric m, TimeNs t, double v) {
                    out.emplace_back(d.index, static_cast<int>(m), t, v);
                  })
                  .ok());
  return out;
}

TEST_F(PostgresStore, TheSameRunReadsBackTheSameAsFromSqlite) {
  auto pg = RunStore::Open(FreshSchema("same_run"));
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  auto lite = RunStore::Open(TempPath("same_run.db"));
  ASSERT_TRUE(lite.ok()) << lite.status().ToString();
  EXPECT_STREQ((*pg)->kind(), "postgresql");
  const int64_t pg_id = WriteRun(**pg, "same");
  const int64_t lite_id = WriteRun(**lite, "same");
  ASSERT_GT(pg_id, 0);

  auto pg_runs = (*pg)->ListRuns();
  auto lite_runs = (*lite)->ListRuns();
  ASSERT_TRUE(pg_runs.ok() && lite_runs.ok());
  ASSERT_EQ(pg_runs->size(), 1u);
  const RunInfo& a = pg_runs->at(0);
  const RunInfo& b = lite_runs->at(0);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.host, "node-7");
  EXPECT_EQ(a.status, "complete");
  EXPECT_EQ(a.started_ns, b.started_ns);
  EXPECT_EQ(a.ended_ns, b.ended_ns);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.samples, 500 * 2 * 2 + 167 * 2);
  EXPECT_EQ(a.devices, 2);
  EXPECT_EQ(a.metadata, b.metadata);

  EXPECT_EQ(*(*pg)->LoadSettings(pg_id), *(*lite)->LoadSettings(lite_id));
  EXPECT_EQ((*(*pg)->LoadSettings(pg_id)).at("dataloader.num_workers"), "0");
  EXPECT_EQ(*(*pg)->LoadFigures(pg_id), *(*lite)->LoadFigures(lite_id));
  auto pg_findings = (*pg)->LoadFindings(pg_id);
  ASSERT_TRUE(pg_findings.ok());
  ASSERT_EQ(pg_findings->size(), 1u);
  EXPECT_EQ(pg_findings->at(0).title, "Input-bound: data wait 31% of compute");
  EXPECT_EQ(pg_findings->at(0).severity, Severity::kHigh);

  auto pg_steps = (*pg)->LoadSteps(pg_id);
  auto lite_steps = (*lite)->LoadSteps(lite_id);
  ASSERT_TRUE(pg_steps.ok() && lite_steps.ok());
  ASSERT_EQ(pg_steps->size(), 20u);
  for (size_t i = 0; i < pg_steps->size(); ++i) {
    EXPECT_EQ(pg_steps->at(i).span.start, lite_steps->at(i).span.start);
    EXPECT_EQ(pg_steps->at(i).span.end, lite_steps->at(i).span.end);
    EXPECT_EQ(pg_steps->at(i).flops, lite_steps->at(i).flops);
    EXPECT_EQ(pg_steps->at(i).phase_ns, lite_steps->at(i).phase_ns);
    EXPECT_EQ(pg_steps->at(i).device_ns, lite_steps->at(i).device_ns);
    EXPECT_EQ(pg_steps->at(i).phase_device_ns, lite_steps->at(i).phase_device_ns);
    EXPECT_EQ(pg_steps->at(i).phase_device_ns[3], 600'000'003);
    EXPECT_EQ(pg_steps->at(i).sync_arrival, lite_steps->at(i).sync_arrival);
    EXPECT_EQ(pg_steps->at(i).sync_release - pg_steps->at(i).span.start, 700'000'002);
  }
  for (auto* store : {pg->get(), lite->get()}) {
    auto ranks = store->LoadProcessRanks(store == pg->get() ? pg_id : lite_id);
    ASSERT_TRUE(ranks.ok());
    ASSERT_EQ(ranks->size(), 1u);
    EXPECT_EQ(ranks->at(0).pid, 4242u);
    EXPECT_EQ(ranks->at(0).rank, 3);
    EXPECT_EQ(ranks->at(0).local_rank, 1);
    EXPECT_EQ(ranks->at(0).world_size, 8);
    EXPECT_EQ(ranks->at(0).host, "node-b");
    EXPECT_EQ(ranks->at(0).source, "torch.distributed");
  }

  const auto pg_samples = Samples(**pg, pg_id);
  EXPECT_EQ(pg_samples.size(), 500u + 500u + 167u);  // the job's GPU only, as LoadRun keeps it
  EXPECT_EQ(pg_samples, Samples(**lite, lite_id));   // bit for bit

  auto pg_rec = (*pg)->LoadRun(pg_id);
  auto lite_rec = (*lite)->LoadRun(lite_id);
  ASSERT_TRUE(pg_rec.ok() && lite_rec.ok()) << pg_rec.status().ToString();
  ASSERT_EQ(pg_rec->metrics.devices.size(), lite_rec->metrics.devices.size());
  for (size_t d = 0; d < pg_rec->metrics.devices.size(); ++d) {
    const auto& x = pg_rec->metrics.devices[d];
    const auto& y = lite_rec->metrics.devices[d];
    EXPECT_EQ(x.uuid, y.uuid);
    EXPECT_EQ(x.other_processes, y.other_processes);
    EXPECT_EQ(x.memory_total_bytes, y.memory_total_bytes);
    EXPECT_EQ(x.Get(Metric::kGpuUtil).mean(), y.Get(Metric::kGpuUtil).mean());
    EXPECT_EQ(x.Get(Metric::kPowerW).mean(), y.Get(Metric::kPowerW).mean());
  }
  std::vector<std::string> problems;
  ASSERT_TRUE((*pg)->CheckIntegrity(&problems).ok());
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST_F(PostgresStore, TextThatIsNotUtf8IsKeptWithReplacementCharacters) {
  auto pg = RunStore::Open(FreshSchema("latin1"));
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  RunInfo info;
  info.command = std::string("cat caf\xE9.txt ") + '\0' + "end";
  auto id = (*pg)->BeginRun(info);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto runs = (*pg)->ListRuns();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->at(0).command, "cat caf\xEF\xBF\xBD.txt \xEF\xBF\xBD" "end");
}

TEST_F(PostgresStore, RecordersOpeningANewStoreAtOnceAllLand) {
  const std::string url = FreshSchema("race");
  constexpr int kRecorders = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kRecorders);
  for (int r = 0; r < kRecorders; ++r) {
    threads.emplace_back([&, r] {
      for (int k = 0; k < 5; ++k) {
        auto store = RunStore::Open(url);  // every run opens it anew, as `record` does
        if (!store.ok()) {
          errors[static_cast<size_t>(r)] = store.status().ToString();
          return;
        }
        RunInfo info;
        info.name = "race-" + std::to_string(r);
        auto id = (*store)->BeginRun(info);
        if (!id.ok()) {
          errors[static_cast<size_t>(r)] = id.status().ToString();
          return;
        }
        for (int i = 0; i < 20; ++i) (*store)->AddSample(*id, 0, Metric::kGpuUtil, i * kNsPerMs, i);
        if (Status s = (*store)->EndRun(*id, kNsPerS, 0, {}); !s.ok()) errors[static_cast<size_t>(r)] = s.ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  auto store = RunStore::OpenForReading(url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), static_cast<size_t>(kRecorders * 5));
  for (const auto& r : *runs) EXPECT_EQ(r.samples, 20) << r.id;
  std::vector<std::string> problems;
  ASSERT_TRUE((*store)->CheckIntegrity(&problems).ok());
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST_F(PostgresStore, ADatabaseThatIsNotAStoreIsLeftAlone) {
  // Tables of the team's own beside it: fine.
  std::string url = FreshSchema("beside");
  ServerSql("CREATE TABLE beside.team_notes(note TEXT)");
  EXPECT_TRUE(RunStore::Open(url).ok());
  // A table with a store's name that is not one: refused, untouched.
  url = FreshSchema("foreign_runs");
  ServerSql("CREATE TABLE foreign_runs.runs(owner TEXT); INSERT INTO foreign_runs.runs VALUES('finance')");
  auto refused = RunStore::Open(url);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("not one"), std::string::npos) << refused.status().ToString();
  // Reading an empty database says there is nothing recorded, and creates nothing.
  url = FreshSchema("empty");
  auto empty = RunStore::OpenForReading(url);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound) << empty.status().ToString();
  EXPECT_FALSE(RunStore::OpenForReading(url).ok());  // still nothing: reading made no tables
  // A store from a newer gputriage is refused.
  url = FreshSchema("newer");
  ASSERT_TRUE(RunStore::Open(url).ok());
  ServerSql("UPDATE newer.gputriage_schema SET version = 99");
  auto newer = RunStore::Open(url);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().ToString().find("newer"), std::string::npos) << newer.status().ToString();
  EXPECT_FALSE(RunStore::OpenForReading(url).ok());
}

TEST_F(PostgresStore, ThePasswordIsNeverInAMessage) {
  const std::string url = FreshSchema("secret");
  const std::string password = url.substr(url.find(':', 14) + 1, url.find('@') - url.find(':', 14) - 1);
  ASSERT_GT(password.size(), 8u);
  auto store = RunStore::Open(url);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->path().find(password), std::string::npos) << (*store)->path();
  EXPECT_NE((*store)->path().find("***"), std::string::npos);
  // Wrong password, in the authority and as a parameter.
  std::string wrong = url;
  wrong.replace(wrong.find(password), password.size(), "not-" + password);
  auto refused = RunStore::Open(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("password authentication failed"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(refused.status().ToString().find(password), std::string::npos);
  const std::string as_param = url.substr(0, url.find(':', 14)) + url.substr(url.find('@')) + "&password=x" + password;
  auto refused2 = RunStore::OpenForReading(as_param);
  ASSERT_FALSE(refused2.ok());
  EXPECT_EQ(refused2.status().ToString().find(password), std::string::npos) << refused2.status().ToString();
}

TEST_F(PostgresStore, TheCheckFindsRowsThatDisagreeWithTheirRun) {
  const std::string url = FreshSchema("tamper");
  auto store = RunStore::Open(url);
  ASSERT_TRUE(store.ok());
  const int64_t id = WriteRun(**store, "tamper");
  std::vector<std::string> problems;
  ASSERT_TRUE((*store)->CheckIntegrity(&problems).ok());
  EXPECT_TRUE(problems.empty());
  ServerSql("UPDATE tamper.runs SET sample_count = sample_count - 1 WHERE id = " + std::to_string(id));
  ASSERT_TRUE((*store)->CheckIntegrity(&problems).ok());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("run " + std::to_string(id)), std::string::npos) << problems[0];
  ServerSql("UPDATE tamper.runs SET status = 'half' WHERE id = " + std::to_string(id));
  ASSERT_TRUE((*store)->CheckIntegrity(&problems).ok());
  EXPECT_EQ(problems.size(), 2u);
}

TEST_F(PostgresStore, ARunOfManySamplesStreams) {
  // 200,000 rows (20,000 ticks x 10 GPUs) read back in order, row by row.
  auto store = RunStore::Open(FreshSchema("big"));
  ASSERT_TRUE(store.ok());
  RunInfo info;
  auto id = (*store)->BeginRun(info);
  ASSERT_TRUE(id.ok());
  Recording live;
  for (int g = 0; g < 10; ++g) live.metrics.FindOrAdd(g, "GPU-" + std::to_string(g), "", -1);
  ASSERT_TRUE((*store)->PutDevices(*id, live.metrics).ok());
  for (int i = 0; i < 20'000; ++i)
    for (size_t g = 0; g < 10; ++g) (*store)->AddSample(*id, g, Metric::kGpuUtil, i * 10 * kNsPerMs, i % 100);
  ASSERT_TRUE((*store)->EndRun(*id, 200 * kNsPerS, 0, {}).ok());
  size_t n = 0;
  TimeNs last = -1;
  bool ordered = true;
  ASSERT_TRUE((*store)
                  ->ForEachSample(*id, [&](const MetricDevice& d, Metric, TimeNs t, double) {
                    if (d.index == 0) ordered = ordered && t > last, last = t;
                    ++n;
                  })
                  .ok());
  EXPECT_EQ(n, 200'000u);
  EXPECT_TRUE(ordered);
  auto rec = (*store)->LoadRun(*id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->metrics.devices.size(), 10u);
  EXPECT_DOUBLE_EQ(rec->metrics.devices[9].Get(Metric::kGpuUtil).mean(), 49.5);
  // The connection is free again after a stream: the next statement runs.
  EXPECT_TRUE((*store)->ListRuns().ok());
}

TEST_F(PostgresStore, RowsWaitForAStoreThatRefusesThemWithinABound) {
  const std::string url = FreshSchema("refuse");
  auto store = RunStore::Open(url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  RunInfo info;
  auto id = (*store)->BeginRun(info);
  ASSERT_TRUE(id.ok());
  // The store refuses samples (as a server that is down would): they wait.
  ServerSql("ALTER TABLE refuse.samples RENAME TO samples_away");
  for (int i = 0; i < 50; ++i) (*store)->AddSample(*id, 0, Metric::kGpuUtil, i * kNsPerMs, i);
  EXPECT_FALSE((*store)->Flush().ok());
  ServerSql("ALTER TABLE refuse.samples_away RENAME TO samples");
  ASSERT_TRUE((*store)->Flush().ok());
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->at(0).samples, 50);  // nothing lost, nothing doubled by the failed attempt
  // Refused for long: the newest rows are kept, at most kMaxPendingRows, the rest counted.
  ServerSql("ALTER TABLE refuse.samples RENAME TO samples_away");
  const int64_t added = static_cast<int64_t>(RunStore::kMaxPendingRows) + 25'000;
  for (int64_t i = 0; i < added; ++i) (*store)->AddSample(*id, 0, Metric::kGpuUtil, (1000 + i) * kNsPerMs, 1);
  EXPECT_EQ((*store)->dropped_rows(), 30'000);
  ServerSql("ALTER TABLE refuse.samples_away RENAME TO samples");
  ASSERT_TRUE((*store)->Flush().ok());
  runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->at(0).samples, 50 + added - 30'000);
  std::vector<std::string> problems;
  ASSERT_TRUE((*store)->CheckIntegrity(&problems).ok());
  EXPECT_TRUE(problems.empty()) << problems.front();
}

}  // namespace
}  // namespace gputriage
