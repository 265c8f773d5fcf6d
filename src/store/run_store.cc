#include "src/store/run_store.h"

#include "gputriage/markers.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "src/store/database.h"
#include "src/store/schema.h"
#include "src/util/clock.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

constexpr int64_t kFlushEveryMs = 1000;

Status SchemaTooNew(const std::string& name, int64_t version) {
  return UnimplementedError(name + ": the store's schema version " + std::to_string(version) +
                            " is newer than this gputriage (" + std::to_string(RunStore::kSchemaVersion) +
                            "); upgrade gputriage");
}

/// "\"gpu_util\", \"mem_copy_util\", ..." in Metric order, each after `prefix` ("s.").
std::string MetricColumns(const std::string& prefix = "") {
  std::string out;
  for (int m = 0; m < kNumMetrics; ++m)
    out += std::string(m ? ", " : "") + prefix + "\"" + MetricName(static_cast<Metric>(m)) + "\"";
  return out;
}

std::optional<Metric> MetricFromName(const std::string& name) {
  for (int m = 0; m < kNumMetrics; ++m)
    if (name == MetricName(static_cast<Metric>(m))) return static_cast<Metric>(m);
  return std::nullopt;
}

constexpr std::string_view kProcessSeparator = ", ";  // devices.other_processes: "pid 7, pid 8"

constexpr const char* kSelectDevices =
    "SELECT device, gpu_index, uuid, pci_bus_id, name, driver_version, power_limit_w, max_sm_clock_mhz,"
    " memory_total_bytes, mig_mode, mig_instance, mig_profile, job_use, other_processes FROM devices WHERE run_id=?"
    " ORDER BY device";

/// Device facts from a kSelectDevices row (column 0, the stored position, is the caller's).
void ReadDeviceFacts(const Query& row, MetricDevice& d) {
  d.name = row.Text(4);
  d.driver_version = row.Text(5);
  d.power_limit_w = row.Real(6);
  d.max_sm_clock_mhz = row.Real(7);
  d.memory_total_bytes = row.Int(8);
  d.mig_mode = row.Int(9) != 0;
  d.mig_profile = row.Text(11);
  const int64_t use = row.Int(12);
  d.job_use = use == 1 ? MetricDevice::JobUse::kUsed : use == 2 ? MetricDevice::JobUse::kNotUsed : MetricDevice::JobUse::kUnknown;
  d.other_processes = Split(row.Text(13), kProcessSeparator);
}

/// Runs a statement that returns no rows; false on an error.
bool RunsWell(Query& q) { return !q.Step() && q.Done(); }

}  // namespace

std::string RunStore::DefaultPath() {
  if (const char* p = std::getenv("GPUTRIAGE_STORE"); p && *p) return p;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return std::string(xdg) + "/gputriage/runs.db";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/gputriage/runs.db";
}

RunStore::RunStore(std::unique_ptr<Database> db) : db_(std::move(db)), path_(db_->display_name()) {}

StatusOr<std::unique_ptr<RunStore>> RunStore::Open(const std::string& location) {
  auto db = IsPostgresUrl(location) ? OpenPostgres(location, false) : OpenSqlite(location, false);
  if (!db.ok()) return db.status();
  std::unique_ptr<RunStore> store(new RunStore(std::move(*db)));
  RETURN_IF_ERROR(store->Migrate());
  RETURN_IF_ERROR(store->CheckSampleColumns());
  store->version_ = kSchemaVersion;
  store->last_flush_ms_ = MonotonicMs();
  return store;
}

StatusOr<std::unique_ptr<RunStore>> RunStore::OpenForReading(const std::string& location) {
  const bool postgres = IsPostgresUrl(location);
  auto db = postgres ? OpenPostgres(location, true) : OpenSqlite(location, true);
  if (!db.ok()) return db.status();
  std::unique_ptr<RunStore> store(new RunStore(std::move(*db)));
  auto version = store->db_->SchemaVersion();
  if (!version.ok()) return version.status();
  if (*version == 0 && postgres)
    return NotFoundError(store->path_ + ": there is no run store in this database (nothing recorded yet, or another --store?)");
  if (*version == 0) return DataLossError(store->path_ + ": this file is not a gputriage run store");
  if (*version > kSchemaVersion) return SchemaTooNew(store->path_, *version);
  if (*version < kOldestReadableVersion)
    return UnimplementedError(store->path_ + ": the store's schema version " + std::to_string(*version) +
                              " is older than this gputriage's (" + std::to_string(kSchemaVersion) +
                              "); reading commands never change a store: record one run into it to migrate it");
  store->version_ = *version;
  RETURN_IF_ERROR(store->CheckSampleColumns());
  return store;
}

const char* RunStore::kind() const { return db_->kind(); }

Status RunStore::ReadEnd(const Query& statement, const char* what) const {
  if (statement.Done()) return Status::Ok();
  if (db_->LastErrorIsDamage() || std::string_view(db_->kind()) == "sqlite")
    return DataLossError(path_ + ": the run store is damaged (" + db_->LastError() + ", while " + what +
                         "); `gputriage runs --check` names what is affected; runs that can still be read can be exported");
  return IoError(path_ + ": cannot read the run store (" + db_->LastError() + ", while " + what + ")");
}

Status RunStore::Failed(const char* what) const {
  return IoError(path_ + ": " + what + ": " + db_->LastError());
}

Status RunStore::CheckIntegrity(std::vector<std::string>* problems) {
  problems->clear();
  RETURN_IF_ERROR(db_->CheckPages(problems));
  if (!problems->empty()) return Status::Ok();
  // Row by row, what a recorder's transactions keep true (either engine): every
  // run has a known status, and each run's samples lie inside the id range and
  // add up to the value count its recorder committed with them.
  auto statuses = db_->Prepare("SELECT id, status FROM runs WHERE status NOT IN ('complete', 'incomplete') ORDER BY id");
  while (statuses->Step() && problems->size() < 100)
    problems->push_back(fmt::format("run {} has status '{}'", statuses->Int(0), statuses->Text(1)));
  if (!statuses->Done() && problems->empty()) return ReadEnd(*statuses, "checking the runs");
  std::string present;
  for (int m = 0; m < kNumMetrics; ++m)
    present += fmt::format("{}CASE WHEN s.\"{}\" IS NOT NULL THEN 1 ELSE 0 END", m ? " + " : "", MetricName(static_cast<Metric>(m)));
  const std::string row_id = std::string("s.") + db_->sample_row_id();
  const std::string sql =
      "SELECT r.id, r.sample_count, coalesce(x.n, 0), coalesce(x.inside, 0), coalesce(x.vals, 0) FROM runs r LEFT JOIN"
      " (SELECT s.run_id, count(*) AS n, sum(CASE WHEN " + row_id + " BETWEEN o.first_sample AND o.last_sample THEN 1"
      " ELSE 0 END) AS inside, sum(" + present + ") AS vals FROM samples s JOIN runs o ON o.id = s.run_id"
      " GROUP BY s.run_id) x ON x.run_id = r.id"
      " WHERE coalesce(x.n, 0) <> coalesce(x.inside, 0) OR coalesce(x.vals, 0) <> r.sample_count ORDER BY r.id";
  auto extents = db_->Prepare(sql);
  while (extents->Step() && problems->size() < 100)
    problems->push_back(fmt::format("run {}: {} of its {} sample rows lie inside its recorded range, holding {} values"
                                    " where its recorder committed {}",
                                    extents->Int(0), extents->Int(3), extents->Int(2), extents->Int(4), extents->Int(1)));
  if (!extents->Done() && problems->empty()) return ReadEnd(*extents, "checking the runs' samples");
  auto orphans = db_->Prepare("SELECT count(*) FROM samples s WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id)");
  if (!orphans->Step()) return ReadEnd(*orphans, "checking the samples");
  if (orphans->Int(0) > 0 && problems->size() < 100)
    problems->push_back(fmt::format("{} sample rows belong to no run", orphans->Int(0)));
  return Status::Ok();
}

RunStore::~RunStore() { (void)Flush(); }

Status RunStore::Migrate() {
  // Each step re-reads the version inside a transaction that excludes the
  // other migrators: recorders that open a new store at once wait for each
  // other, and each step runs once.
  for (;;) {
    RETURN_IF_ERROR(db_->BeginMigration());
    auto current = db_->SchemaVersion();
    Status s = current.status();
    SchemaMigration next;
    if (s.ok() && *current > kSchemaVersion) s = SchemaTooNew(path_, *current);
    if (s.ok() && *current == 0) {
      // A database with tables that are not ours is someone else's: leave it alone.
      auto other = db_->HoldsOtherTables();
      if (!other.ok()) s = other.status();
      else if (*other && std::string_view(db_->kind()) == "sqlite")
        s = DataLossError(path_ + ": an SQLite file that is not a gputriage run store");
      else if (*other)
        s = DataLossError(path_ + ": the database already has tables named as a run store's (runs, samples, ...) that are"
                                  " not one; give gputriage its own database, or schema (options=-csearch_path=NAME)");
    }
    if (s.ok() && *current == kSchemaVersion) return db_->Exec("COMMIT");
    if (s.ok()) {
      next = NextMigration(db_->kind(), *current);
      if (next.to == 0)
        s = DataLossError(path_ + ": a " + db_->kind() + " run store at schema version " + std::to_string(*current) +
                          ", which no gputriage wrote");
    }
    if (s.ok()) s = db_->Exec(next.sql);
    if (s.ok()) s = db_->SetSchemaVersion(next.to);
    if (!s.ok()) {
      (void)db_->Exec("ROLLBACK");
      return s;
    }
    RETURN_IF_ERROR(db_->Exec("COMMIT"));
  }
}
static_assert(RunStore::kSchemaVersion == kStoreSchemaVersion);

Status RunStore::CheckSampleColumns() {
  // Every metric this build records needs its column (the migrations add them).
  std::vector<bool> found(kNumMetrics, false);
  auto columns = db_->Columns("samples");
  if (!columns.ok()) return columns.status();
  for (const auto& name : *columns)
    if (auto m = MetricFromName(name)) found[static_cast<size_t>(*m)] = true;
  for (int m = 0; m < kNumMetrics; ++m)
    if (!found[static_cast<size_t>(m)])
      return DataLossError(path_ + ": the samples table has no column for " + MetricName(static_cast<Metric>(m)) +
                           " (a damaged store?)");
  return Status::Ok();
}

StatusOr<int64_t> RunStore::BeginRun(const RunInfo& info) {
  auto insert = db_->Prepare("INSERT INTO runs(name, command, host, status, started_ns) VALUES(?, ?, ?, 'incomplete', ?)"
                             " RETURNING id");
  insert->Bind(1, info.name);
  insert->Bind(2, info.command);
  insert->Bind(3, info.host);
  insert->Bind(4, static_cast<int64_t>(info.started_ns));
  if (!insert->Step()) return Failed("cannot start a run");
  const int64_t id = insert->Int(0);
  if (insert->Step() || !insert->Done()) return Failed("cannot start a run");
  auto meta = db_->Prepare("INSERT INTO run_metadata(run_id, key, value) VALUES(?, ?, ?)"
                           " ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value");
  for (const auto& [k, v] : info.metadata) {
    meta->Bind(1, id);
    meta->Bind(2, k);
    meta->Bind(3, v);
    if (!RunsWell(*meta)) return Failed("cannot store metadata");
    meta->Reset();
  }
  return id;
}

Status RunStore::DiscardRun(int64_t run) {
  RETURN_IF_ERROR(db_->Exec("BEGIN"));
  for (const char* sql : {"DELETE FROM run_metadata WHERE run_id=?", "DELETE FROM runs WHERE id=? AND status='incomplete'"}) {
    auto del = db_->Prepare(sql);
    del->Bind(1, run);
    if (!RunsWell(*del)) return Rollback("cannot discard the run");
  }
  return db_->Exec("COMMIT");
}

Status RunStore::PutDevices(int64_t run, const MetricSet& metrics) {
  auto put = db_->Prepare(
      "INSERT INTO devices(run_id, device, gpu_index, uuid, pci_bus_id, name, driver_version,"
      " power_limit_w, max_sm_clock_mhz, memory_total_bytes, mig_mode, mig_instance, mig_profile, job_use,"
      " other_processes) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id, device) DO UPDATE SET"
      " gpu_index = excluded.gpu_index, uuid = excluded.uuid, pci_bus_id = excluded.pci_bus_id, name = excluded.name,"
      " driver_version = excluded.driver_version, power_limit_w = excluded.power_limit_w,"
      " max_sm_clock_mhz = excluded.max_sm_clock_mhz, memory_total_bytes = excluded.memory_total_bytes,"
      " mig_mode = excluded.mig_mode, mig_instance = excluded.mig_instance, mig_profile = excluded.mig_profile,"
      " job_use = excluded.job_use, other_processes = excluded.other_processes");
  for (size_t i = 0; i < metrics.devices.size(); ++i) {
    const auto& d = metrics.devices[i];
    put->Bind(1, run);
    put->Bind(2, static_cast<int64_t>(i));
    put->Bind(3, static_cast<int64_t>(d.index));
    put->Bind(4, d.uuid);
    put->Bind(5, d.pci_bus_id);
    put->Bind(6, d.name);
    put->Bind(7, d.driver_version);
    put->Bind(8, d.power_limit_w);
    put->Bind(9, d.max_sm_clock_mhz);
    put->Bind(10, d.memory_total_bytes);
    put->Bind(11, static_cast<int64_t>(d.mig_mode ? 1 : 0));
    put->Bind(12, static_cast<int64_t>(d.mig_instance));
    put->Bind(13, d.mig_profile);
    put->Bind(14, static_cast<int64_t>(d.job_use == MetricDevice::JobUse::kUsed      ? 1
                                       : d.job_use == MetricDevice::JobUse::kNotUsed ? 2
                                                                                      : 0));
    put->Bind(15, Join(d.other_processes, kProcessSeparator));
    if (!RunsWell(*put)) return Failed("cannot store devices");
    put->Reset();
  }
  return Status::Ok();
}

void RunStore::AddSample(int64_t run, size_t device, Metric metric, TimeNs t, double value) {
  // A sampler adds one device's values at one time together: they share a row.
  const auto slot = static_cast<size_t>(metric);
  const auto dev = static_cast<int64_t>(device);
  PendingRow* row = nullptr;
  for (size_t i = pending_.size(), looked = 0; i > 0 && looked < 8; --i, ++looked) {
    PendingRow& r = pending_[i - 1];
    if (r.run == run && r.device == dev && r.t == t) {
      if (!(r.present & (uint64_t{1} << slot))) row = &r;
      break;
    }
  }
  if (row == nullptr) {
    // A full buffer is written at once; if the store refuses it (for a long
    // time by now), the newest rows are kept and the rest counted.
    if (pending_.size() >= kMaxPendingRows) (void)Flush();
    if (pending_.size() >= kMaxPendingRows) {
      const size_t drop = kMaxPendingRows / 10;
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(drop));
      dropped_rows_ += static_cast<int64_t>(drop);
    }
    pending_.push_back(PendingRow{run, dev, t, 0, {}});
    row = &pending_.back();
  }
  row->present |= uint64_t{1} << slot;
  row->values[slot] = value;
  if (MonotonicMs() - last_flush_ms_ >= kFlushEveryMs) (void)Flush();
}

Status RunStore::Rollback(const char* what) {
  const Status failed = Failed(what);
  (void)db_->Exec("ROLLBACK");
  return failed;
}

Status RunStore::Flush() {
  last_flush_ms_ = MonotonicMs();
  if (pending_.empty() || db_ == nullptr) return Status::Ok();
  // One transaction per second of samples: cheap for 10 Hz x 8 GPUs, and a crash
  // loses at most this batch. A batch that fails stays pending for the next.
  RETURN_IF_ERROR(db_->Exec("BEGIN"));
  // Many rows per statement (one round trip to a PostgreSQL server, not one per
  // row), within SQLite's 32,766 bound values.
  constexpr size_t kRowsPerInsert = 128;
  constexpr int kColumns = 3 + kNumMetrics;
  auto insert_of = [&](size_t rows) {
    std::string sql = "INSERT INTO samples(run_id, device, t_ns, " + MetricColumns() + ") VALUES";
    std::string one = "(?, ?, ?";
    for (int m = 0; m < kNumMetrics; ++m) one += ", ?";
    one += ")";
    for (size_t r = 0; r < rows; ++r) sql += (r ? ", " : "") + one;
    return db_->Prepare(sql + " RETURNING run_id, " + db_->sample_row_id());
  };
  std::unique_ptr<Query> full_insert;
  auto extent = db_->Prepare(
      "UPDATE runs SET first_sample = coalesce(first_sample, ?), last_sample = ?,"
      " sample_count = sample_count + ? WHERE id = ?");
  struct Extent {
    int64_t first = INT64_MAX, last = INT64_MIN, values = 0;
  };
  std::map<int64_t, Extent> extents;  // by run: usually one
  for (size_t begin = 0; begin < pending_.size(); begin += kRowsPerInsert) {
    const size_t rows = std::min(kRowsPerInsert, pending_.size() - begin);
    std::unique_ptr<Query> partial;
    if (rows == kRowsPerInsert && !full_insert) full_insert = insert_of(rows);
    if (rows < kRowsPerInsert) partial = insert_of(rows);
    Query& insert = rows == kRowsPerInsert ? *full_insert : *partial;
    for (size_t r = 0; r < rows; ++r) {
      const PendingRow& row = pending_[begin + r];
      const int at = static_cast<int>(r) * kColumns;
      insert.Bind(at + 1, row.run);
      insert.Bind(at + 2, row.device);
      insert.Bind(at + 3, static_cast<int64_t>(row.t));
      for (int m = 0; m < kNumMetrics; ++m) {
        if (row.present & (uint64_t{1} << m)) {
          insert.Bind(at + 4 + m, row.values[static_cast<size_t>(m)]);
          ++extents[row.run].values;
        } else {
          insert.BindNull(at + 4 + m);
        }
      }
    }
    // Ids only grow within one connection, though other recorders' rows may
    // fall between them: a run's range is its least and greatest id.
    size_t returned = 0;
    while (insert.Step()) {
      Extent& e = extents[insert.Int(0)];
      e.first = std::min(e.first, insert.Int(1));
      e.last = std::max(e.last, insert.Int(1));
      ++returned;
    }
    if (!insert.Done() || returned != rows) return Rollback("cannot store samples");
    insert.Reset();
  }
  for (const auto& [run, e] : extents) {
    extent->Bind(1, e.first);
    extent->Bind(2, e.last);
    extent->Bind(3, e.values);
    extent->Bind(4, run);
    if (!RunsWell(*extent)) return Rollback("cannot store samples");
    extent->Reset();
  }
  if (Status s = db_->Exec("COMMIT"); !s.ok()) {
    (void)db_->Exec("ROLLBACK");
    return s;
  }
  pending_.clear();
  return Status::Ok();
}

Status RunStore::EndRun(int64_t run, TimeNs ended_ns, std::optional<int> exit_code, const std::vector<Finding>& findings,
                        const std::map<std::string, double>& figures) {
  RETURN_IF_ERROR(Flush());
  RETURN_IF_ERROR(db_->Exec("BEGIN"));
  auto end = db_->Prepare("UPDATE runs SET status='complete', ended_ns=?, exit_code=? WHERE id=?");
  end->Bind(1, static_cast<int64_t>(ended_ns));
  if (exit_code) end->Bind(2, static_cast<int64_t>(*exit_code));
  else end->BindNull(2);
  end->Bind(3, run);
  if (!RunsWell(*end)) return Rollback("cannot end the run");
  auto put = db_->Prepare(
      "INSERT INTO findings(run_id, position, verdict, severity, title, scope) VALUES(?, ?, ?, ?, ?, ?)"
      " ON CONFLICT(run_id, position) DO UPDATE SET verdict = excluded.verdict, severity = excluded.severity,"
      " title = excluded.title, scope = excluded.scope");
  for (size_t i = 0; i < findings.size(); ++i) {
    put->Bind(1, run);
    put->Bind(2, static_cast<int64_t>(i));
    put->Bind(3, findings[i].verdict);
    put->Bind(4, std::string(SeverityName(findings[i].severity)));
    put->Bind(5, findings[i].title);
    put->Bind(6, findings[i].scope);
    if (!RunsWell(*put)) return Rollback("cannot store findings");
    put->Reset();
  }
  auto figure = db_->Prepare("INSERT INTO run_figures(run_id, figure, value) VALUES(?, ?, ?)"
                             " ON CONFLICT(run_id, figure) DO UPDATE SET value = excluded.value");
  for (const auto& [name, value] : figures) {
    if (!std::isfinite(value)) continue;
    figure->Bind(1, run);
    figure->Bind(2, name);
    figure->Bind(3, value);
    if (!RunsWell(*figure)) return Rollback("cannot store the run's figures");
    figure->Reset();
  }
  return db_->Exec("COMMIT");
}

Status RunStore::PutSteps(int64_t run, const std::vector<MarkedStep>& steps) {
  RETURN_IF_ERROR(db_->Exec("BEGIN"));
  auto put = db_->Prepare(
      "INSERT INTO steps(run_id, step, start_ns, end_ns, pid, samples, tokens, flops, data_ns,"
      " forward_ns, backward_ns, optimizer_ns, communication_ns, checkpoint_ns, other_ns, device_ns, copy_ns,"
      " forward_device_ns, backward_device_ns, optimizer_device_ns, copy_device_ns, sync_arrival_ns,"
      " sync_release_ns, host_rss_bytes, host_rss_peak_bytes, memory_device, device_allocated_bytes, device_peak_bytes,"
      " device_reserved_bytes, alloc_retries, alloc_ooms)"
      " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
      " ON CONFLICT(run_id, step, start_ns) DO UPDATE SET"
      " end_ns = excluded.end_ns, pid = excluded.pid, samples = excluded.samples, tokens = excluded.tokens,"
      " flops = excluded.flops, data_ns = excluded.data_ns, forward_ns = excluded.forward_ns,"
      " backward_ns = excluded.backward_ns, optimizer_ns = excluded.optimizer_ns,"
      " communication_ns = excluded.communication_ns, checkpoint_ns = excluded.checkpoint_ns,"
      " other_ns = excluded.other_ns, device_ns = excluded.device_ns, copy_ns = excluded.copy_ns,"
      " forward_device_ns = excluded.forward_device_ns, backward_device_ns = excluded.backward_device_ns,"
      " optimizer_device_ns = excluded.optimizer_device_ns, copy_device_ns = excluded.copy_device_ns,"
      " sync_arrival_ns = excluded.sync_arrival_ns, sync_release_ns = excluded.sync_release_ns,"
      " host_rss_bytes = excluded.host_rss_bytes, host_rss_peak_bytes = excluded.host_rss_peak_bytes,"
      " memory_device = excluded.memory_device, device_allocated_bytes = excluded.device_allocated_bytes,"
      " device_peak_bytes = excluded.device_peak_bytes, device_reserved_bytes = excluded.device_reserved_bytes,"
      " alloc_retries = excluded.alloc_retries, alloc_ooms = excluded.alloc_ooms");
  for (const auto& step : steps) {
    put->Bind(1, run);
    put->Bind(2, step.number);
    put->Bind(3, static_cast<int64_t>(step.span.start));
    put->Bind(4, static_cast<int64_t>(step.span.end));
    put->Bind(5, static_cast<int64_t>(step.pid));
    put->Bind(6, step.samples);
    put->Bind(7, step.tokens);
    put->Bind(8, step.flops);
    for (int phase = 1; phase <= 7; ++phase) put->Bind(8 + phase, static_cast<int64_t>(step.phase_ns[static_cast<size_t>(phase)]));
    put->Bind(16, static_cast<int64_t>(step.device_ns));
    put->Bind(17, static_cast<int64_t>(step.phase_ns[kCopySlot]));
    for (size_t i = 0; i < kDeviceTimedSlots.size(); ++i)
      put->Bind(18 + static_cast<int>(i), static_cast<int64_t>(step.phase_device_ns[static_cast<size_t>(kDeviceTimedSlots[i])]));
    put->Bind(22, static_cast<int64_t>(step.sync_arrival));
    put->Bind(23, static_cast<int64_t>(step.sync_release));
    put->Bind(24, step.host_rss_bytes);
    put->Bind(25, step.host_rss_peak_bytes);
    put->Bind(26, static_cast<int64_t>(step.memory_device));
    put->Bind(27, step.device_allocated_bytes);
    put->Bind(28, step.device_peak_bytes);
    put->Bind(29, step.device_reserved_bytes);
    put->Bind(30, step.alloc_retries);
    put->Bind(31, step.alloc_ooms);
    if (!RunsWell(*put)) return Rollback("cannot store steps");
    put->Reset();
  }
  return db_->Exec("COMMIT");
}

Status RunStore::PutProcessRanks(int64_t run, const std::vector<ProcessRank>& ranks) {
  if (ranks.empty()) return Status::Ok();
  RETURN_IF_ERROR(db_->Exec("BEGIN"));
  auto put = db_->Prepare(
      "INSERT INTO run_processes(run_id, pid, rank, local_rank, world_size, host, source) VALUES(?, ?, ?, ?, ?, ?, ?)"
      " ON CONFLICT(run_id, pid) DO UPDATE SET rank = excluded.rank, local_rank = excluded.local_rank,"
      " world_size = excluded.world_size, host = excluded.host, source = excluded.source");
  for (const auto& r : ranks) {
    put->Bind(1, run);
    put->Bind(2, static_cast<int64_t>(r.pid));
    put->Bind(3, static_cast<int64_t>(r.rank));
    put->Bind(4, static_cast<int64_t>(r.local_rank));
    put->Bind(5, static_cast<int64_t>(r.world_size));
    put->Bind(6, r.host);
    put->Bind(7, r.source);
    if (!RunsWell(*put)) return Rollback("cannot store the run's process ranks");
    put->Reset();
  }
  return db_->Exec("COMMIT");
}

Status RunStore::PutRunPhases(int64_t run, const std::vector<RunPhase>& phases) {
  if (phases.empty()) return Status::Ok();
  RETURN_IF_ERROR(db_->Exec("BEGIN"));
  auto put = db_->Prepare("INSERT INTO run_phases(run_id, phase, pid, start_ns, end_ns) VALUES(?, ?, ?, ?, ?)");
  for (const auto& phase : phases) {
    put->Bind(1, run);
    put->Bind(2, static_cast<int64_t>(phase.phase));
    put->Bind(3, static_cast<int64_t>(phase.pid));
    put->Bind(4, static_cast<int64_t>(phase.span.start));
    put->Bind(5, static_cast<int64_t>(phase.span.end));
    if (!RunsWell(*put)) return Rollback("cannot store the run's phases");
    put->Reset();
  }
  return db_->Exec("COMMIT");
}

StatusOr<std::vector<RunInfo>> RunStore::ListRuns() {
  auto q = db_->Prepare(
      "SELECT r.id, r.name, r.command, r.host, r.status, r.started_ns, r.ended_ns, r.exit_code,"
      " r.sample_count,"
      " (SELECT count(*) FROM devices d WHERE d.run_id = r.id) FROM runs r ORDER BY r.id");
  std::vector<RunInfo> out;
  while (q->Step()) {
    RunInfo r;
    r.id = q->Int(0);
    r.name = q->Text(1);
    r.command = q->Text(2);
    r.host = q->Text(3);
    r.status = q->Text(4);
    r.started_ns = q->Int(5);
    r.ended_ns = q->Int(6);
    if (!q->Null(7)) r.exit_code = static_cast<int>(q->Int(7));
    r.samples = q->Int(8);
    r.devices = static_cast<int>(q->Int(9));
    out.push_back(std::move(r));
  }
  RETURN_IF_ERROR(ReadEnd(*q, "listing runs"));
  auto meta = db_->Prepare("SELECT run_id, key, value FROM run_metadata");
  while (meta->Step()) {
    // Runs are in id order: a binary search, not a scan per row (10,000 runs).
    auto r = std::lower_bound(out.begin(), out.end(), meta->Int(0),
                              [](const RunInfo& info, int64_t id) { return info.id < id; });
    if (r != out.end() && r->id == meta->Int(0)) r->metadata[meta->Text(1)] = meta->Text(2);
  }
  RETURN_IF_ERROR(ReadEnd(*meta, "listing run settings"));
  return out;
}

StatusOr<Recording> RunStore::LoadRun(int64_t run) {
  auto head = db_->Prepare("SELECT name, command, status, started_ns, ended_ns, exit_code FROM runs WHERE id=?");
  head->Bind(1, run);
  if (!head->Step()) {
    RETURN_IF_ERROR(ReadEnd(*head, "finding the run"));
    return NotFoundError(path_ + ": there is no run " + std::to_string(run) + " (gputriage runs lists them)");
  }
  Recording rec;
  rec.format = "nvml";
  rec.source_path = "run " + std::to_string(run) + (head->Text(0).empty() ? "" : " (" + head->Text(0) + ")");
  rec.metadata["command"] = head->Text(1);
  rec.metadata["status"] = head->Text(2);
  if (!head->Text(0).empty()) rec.metadata["name"] = head->Text(0);
  // The job's span and end, as recorded (an incomplete run's end is unknown).
  if (!head->Null(3) && !head->Null(4) && head->Int(4) >= head->Int(3)) rec.job_span = {head->Int(3), head->Int(4)};
  if (!head->Null(5)) rec.exit_code = static_cast<int>(head->Int(5));
  if (head->Text(2) != "complete")
    rec.stats.AddIssue(IssueSeverity::kWarning, "incomplete_run",
                       "run " + std::to_string(run) + " was not completed (the recorder stopped early); samples up to its last second are kept");
  // The run's settings and context (workload, price, tags, commit) travel with it.
  ASSIGN_OR_RETURN(auto settings, LoadSettings(run));
  for (auto& [key, value] : settings) rec.metadata.try_emplace(key, std::move(value));
  auto devs = db_->Prepare(kSelectDevices);
  devs->Bind(1, run);
  std::vector<size_t> position;  // stored device → recording device
  while (devs->Step()) {
    // Positions are what the recorder wrote; a damaged file may hold anything.
    const int64_t stored_position = devs->Int(0);
    if (stored_position < 0 || stored_position >= static_cast<int64_t>(MetricSet::kMaxDevices)) {
      rec.stats.AddIssue(IssueSeverity::kWarning, "bad_stored_device",
                         "run " + std::to_string(run) + ": a device row with position " + std::to_string(stored_position) +
                             " (a damaged store?); its samples are skipped");
      continue;
    }
    auto pos = rec.metrics.FindOrAdd(static_cast<int>(devs->Int(1)), devs->Text(2), devs->Text(3), static_cast<int>(devs->Int(10)));
    if (!pos) break;
    ReadDeviceFacts(*devs, rec.metrics.devices[*pos]);
    const auto stored = static_cast<size_t>(stored_position);
    if (position.size() <= stored) position.resize(stored + 1, SIZE_MAX);
    position[stored] = *pos;
  }
  if (rec.metrics.devices.size() < MetricSet::kMaxDevices) RETURN_IF_ERROR(ReadEnd(*devs, "reading a run's GPUs"));
  // Samples stream in the order they were recorded (each series in time order,
  // no sort), through the same sketches a live recording fills.
  const std::string row_id = db_->sample_row_id();
  const std::string select = "SELECT s.device, s.t_ns, " + MetricColumns("s.") +
                             " FROM runs r JOIN samples s ON s." + row_id + " BETWEEN r.first_sample AND r.last_sample"
                             " AND s.run_id = r.id WHERE r.id=? ORDER BY s." + row_id;
  auto samples = db_->Prepare(select, /*streaming=*/true);
  samples->Bind(1, run);
  while (samples->Step()) {
    const auto device = static_cast<size_t>(samples->Int(0));
    if (device >= position.size() || position[device] == SIZE_MAX) {
      rec.stats.AddIssue(IssueSeverity::kWarning, "bad_stored_sample", "run " + std::to_string(run) + ": a sample of an unknown device");
      continue;
    }
    const TimeNs t = samples->Int(1);
    for (int m = 0; m < kNumMetrics; ++m)
      if (!samples->Null(2 + m)) rec.metrics.Add(position[device], static_cast<Metric>(m), t, samples->Real(2 + m));
  }
  RETURN_IF_ERROR(ReadEnd(*samples, "reading a run's samples"));
  ASSIGN_OR_RETURN(rec.marked_steps, LoadSteps(run));
  ASSIGN_OR_RETURN(rec.run_phases, LoadRunPhases(run));
  ASSIGN_OR_RETURN(rec.process_ranks, LoadProcessRanks(run));
  rec.clock_is_absolute = true;
  rec.metrics.clock_note = "host wall clock at each NVML sample";
  if (rec.metrics.devices.empty()) {  // recorded without a GPU: as the live report said
    rec.format = "step-markers";
    rec.metrics.clock_note.clear();
    rec.stats.AddIssue(IssueSeverity::kInfo, "gpu_metrics_unavailable",
                       "run " + std::to_string(run) +
                           " was recorded without GPU metrics: the diagnosis rests on its step markers alone");
  }
  AttributeGpusToJob(rec);  // the same GPUs as when the run was recorded
  ReportRejectedValues(rec);
  return rec;
}

StatusOr<std::vector<MarkedStep>> RunStore::LoadSteps(int64_t run) {
  std::vector<MarkedStep> out;
  // copy_ns since version 6, the phases' device times since 7: an older store
  // opened read-only has none (0).
  auto steps = db_->Prepare(std::string("SELECT step, start_ns, end_ns, pid, samples, tokens, flops, data_ns, forward_ns,"
                                        " backward_ns, optimizer_ns, communication_ns, checkpoint_ns, other_ns, device_ns, ") +
                            (version_ >= 6 ? "copy_ns" : "0") +
                            (version_ >= 7 ? ", forward_device_ns, backward_device_ns, optimizer_device_ns, copy_device_ns"
                                           : ", 0, 0, 0, 0") +
                            (version_ >= 8 ? ", sync_arrival_ns, sync_release_ns" : ", 0, 0") +
                            (version_ >= 9 ? ", host_rss_bytes, host_rss_peak_bytes, memory_device, device_allocated_bytes,"
                                             " device_peak_bytes, device_reserved_bytes, alloc_retries, alloc_ooms"
                                           : ", 0, 0, -1, 0, 0, 0, 0, 0") +
                            " FROM steps WHERE run_id=? ORDER BY start_ns, step");
  steps->Bind(1, run);
  while (steps->Step()) {
    MarkedStep step;
    step.number = steps->Int(0);
    step.span = Interval{steps->Int(1), steps->Int(2)};
    step.pid = static_cast<uint32_t>(steps->Int(3));
    step.samples = steps->Int(4);
    step.tokens = steps->Int(5);
    step.flops = steps->Real(6);
    for (int phase = 1; phase <= 7; ++phase) step.phase_ns[static_cast<size_t>(phase)] = steps->Int(6 + phase);
    step.device_ns = steps->Int(14);
    step.phase_ns[kCopySlot] = steps->Int(15);
    for (size_t i = 0; i < kDeviceTimedSlots.size(); ++i)
      step.phase_device_ns[static_cast<size_t>(kDeviceTimedSlots[i])] = steps->Int(16 + static_cast<int>(i));
    step.sync_arrival = steps->Int(20);
    step.sync_release = steps->Int(21);
    step.host_rss_bytes = steps->Int(22);
    step.host_rss_peak_bytes = steps->Int(23);
    step.memory_device = static_cast<int>(std::clamp<int64_t>(steps->Int(24), -1, 1 << 20));
    step.device_allocated_bytes = steps->Int(25);
    step.device_peak_bytes = steps->Int(26);
    step.device_reserved_bytes = steps->Int(27);
    step.alloc_retries = steps->Int(28);
    step.alloc_ooms = steps->Int(29);
    out.push_back(step);
  }
  RETURN_IF_ERROR(ReadEnd(*steps, "reading a run's steps"));
  return out;
}

StatusOr<std::vector<ProcessRank>> RunStore::LoadProcessRanks(int64_t run) {
  std::vector<ProcessRank> out;
  if (version_ < 8) return out;
  auto q = db_->Prepare("SELECT pid, rank, local_rank, world_size, host, source FROM run_processes WHERE run_id=? ORDER BY pid");
  q->Bind(1, run);
  while (q->Step()) {
    ProcessRank r;
    r.pid = static_cast<uint32_t>(q->Int(0));
    r.rank = static_cast<int>(q->Int(1));
    r.local_rank = static_cast<int>(q->Int(2));
    r.world_size = static_cast<int>(q->Int(3));
    r.host = q->Text(4);
    r.source = q->Text(5);
    out.push_back(std::move(r));
  }
  RETURN_IF_ERROR(ReadEnd(*q, "reading a run's process ranks"));
  return out;
}

StatusOr<std::vector<RunPhase>> RunStore::LoadRunPhases(int64_t run) {
  std::vector<RunPhase> out;
  if (version_ < 5) return out;
  auto q = db_->Prepare("SELECT phase, pid, start_ns, end_ns FROM run_phases WHERE run_id=? ORDER BY start_ns");
  q->Bind(1, run);
  while (q->Step()) {
    const int64_t phase = q->Int(0);
    const Interval span{q->Int(2), q->Int(3)};
    if (phase < 1 || phase > kLastPhase || span.end < span.start) continue;  // a damaged row: not a phase
    out.push_back({static_cast<uint16_t>(phase), static_cast<uint32_t>(q->Int(1)), span});
  }
  RETURN_IF_ERROR(ReadEnd(*q, "reading a run's phases"));
  return out;
}

StatusOr<std::map<std::string, std::string>> RunStore::LoadSettings(int64_t run) {
  std::map<std::string, std::string> out;
  auto meta = db_->Prepare("SELECT key, value FROM run_metadata WHERE run_id=?");
  meta->Bind(1, run);
  while (meta->Step()) out.emplace(meta->Text(0), meta->Text(1));
  RETURN_IF_ERROR(ReadEnd(*meta, "reading a run's settings"));
  return out;
}

StatusOr<std::map<std::string, double>> RunStore::LoadFigures(int64_t run) {
  std::map<std::string, double> out;
  if (version_ < 4) return out;  // kept before figures were: the caller works them out
  auto q = db_->Prepare("SELECT figure, value FROM run_figures WHERE run_id=?");
  q->Bind(1, run);
  while (q->Step()) out.emplace(q->Text(0), q->Real(1));
  RETURN_IF_ERROR(ReadEnd(*q, "reading a run's figures"));
  return out;
}

StatusOr<std::vector<Finding>> RunStore::LoadFindings(int64_t run) {
  std::vector<Finding> out;
  auto q = db_->Prepare("SELECT verdict, severity, title, scope FROM findings WHERE run_id=? ORDER BY position");
  q->Bind(1, run);
  while (q->Step()) {
    Finding f;
    f.verdict = q->Text(0);
    const std::string severity = q->Text(1);
    for (Severity s : {Severity::kInfo, Severity::kLow, Severity::kModerate, Severity::kHigh})
      if (severity == SeverityName(s)) f.severity = s;
    f.title = q->Text(2);
    f.scope = q->Text(3);
    out.push_back(std::move(f));
  }
  RETURN_IF_ERROR(ReadEnd(*q, "reading a run's findings"));
  return out;
}

Status RunStore::PutSettings(int64_t run, const std::map<std::string, std::string>& settings) {
  RETURN_IF_ERROR(db_->Exec("BEGIN"));
  auto meta = db_->Prepare("INSERT INTO run_metadata(run_id, key, value) VALUES(?, ?, ?)"
                           " ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value");
  for (const auto& [k, v] : settings) {
    meta->Bind(1, run);
    meta->Bind(2, k);
    meta->Bind(3, v);
    if (!RunsWell(*meta)) return Rollback("cannot store the run's settings");
    meta->Reset();
  }
  return db_->Exec("COMMIT");
}

}  // namespace gputriage

namespace gputriage {

Status RunStore::ForEachSample(int64_t run,
                               const std::function<void(const MetricDevice&, Metric, TimeNs, double)>& fn) {
  // The devices (facts, identity) as LoadRun reads them, without their samples.
  auto devs = db_->Prepare(kSelectDevices);
  devs->Bind(1, run);
  std::map<int64_t, MetricDevice> devices;
  while (devs->Step()) {
    MetricDevice d;
    d.index = static_cast<int>(devs->Int(1));
    d.uuid = devs->Text(2);
    d.pci_bus_id = devs->Text(3);
    d.mig_instance = static_cast<int>(devs->Int(10));
    ReadDeviceFacts(*devs, d);
    devices.emplace(devs->Int(0), std::move(d));
  }
  RETURN_IF_ERROR(ReadEnd(*devs, "reading a run's GPUs"));
  if (devices.empty()) return NotFoundError(path_ + ": run " + std::to_string(run) + " has no GPUs recorded");
  // The GPUs the job used, as LoadRun keeps them.
  bool any_used = false;
  for (const auto& [pos, d] : devices) any_used = any_used || d.job_use == MetricDevice::JobUse::kUsed;
  if (any_used) std::erase_if(devices, [](const auto& e) { return e.second.job_use == MetricDevice::JobUse::kNotUsed; });
  // Family by family (metric names in order), each device's series in time order.
  std::vector<Metric> by_name;
  for (int m = 0; m < kNumMetrics; ++m) by_name.push_back(static_cast<Metric>(m));
  std::sort(by_name.begin(), by_name.end(),
            [](Metric a, Metric b) { return std::string_view(MetricName(a)) < std::string_view(MetricName(b)); });
  const std::string row_id = db_->sample_row_id();
  for (const Metric metric : by_name) {
    const std::string column = std::string("s.\"") + MetricName(metric) + "\"";
    const std::string select = "SELECT s.device, s.t_ns, " + column +
                               " FROM runs r JOIN samples s ON s." + row_id + " BETWEEN r.first_sample AND r.last_sample"
                               " AND s.run_id = r.id WHERE r.id=? AND " + column + " IS NOT NULL ORDER BY s.device, s." + row_id;
    auto samples = db_->Prepare(select, /*streaming=*/true);
    samples->Bind(1, run);
    while (samples->Step()) {
      auto dev = devices.find(samples->Int(0));
      if (dev == devices.end()) continue;
      fn(dev->second, metric, samples->Int(1), samples->Real(2));
    }
    RETURN_IF_ERROR(ReadEnd(*samples, "reading a run's samples"));
  }
  return Status::Ok();
}

}  // namespace gputriage
