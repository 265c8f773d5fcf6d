#include "src/store/run_store.h"

#include <sqlite3.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <string_view>

#include <fmt/format.h>
#include <unistd.h>

#include "src/util/clock.h"
#include "src/util/strings.h"

namespace gputriage {
/// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void Bind(int i, const std::string& v) { sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  int Step() { return last_ = sqlite3_step(stmt_); }
  /// After a loop of Step() == SQLITE_ROW: whether it ended at the last row
  /// rather than at an error (a damaged page reads as SQLITE_CORRUPT).
  bool Done() const { return rc_ == SQLITE_OK && last_ == SQLITE_DONE; }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) { return sqlite3_column_double(stmt_, col); }
  bool Null(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
  int last_ = SQLITE_OK;
};

namespace {

constexpr int64_t kFlushEveryMs = 1000;

Status SchemaTooNew(const std::string& path, int64_t version) {
  return UnimplementedError(path + ": the store's schema version " + std::to_string(version) +
                            " is newer than this gputriage (" + std::to_string(RunStore::kSchemaVersion) +
                            "); upgrade gputriage");
}

/// A path as the file: URI form wants it (%, ? and # escaped).
std::string UriPath(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out;
}



// Schema migrations: Migration(N) brings a store from version N to N + 1; the
// first is this text, later ones are built from frozen column lists below.
constexpr const char* kMigrations[] = {
    // 0 → 1
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT, command TEXT, host TEXT, status TEXT NOT NULL,"
    " started_ns INTEGER, ended_ns INTEGER, exit_code INTEGER);"
    "CREATE TABLE run_metadata(run_id INTEGER NOT NULL REFERENCES runs(id), key TEXT NOT NULL, value TEXT,"
    " PRIMARY KEY(run_id, key));"
    "CREATE TABLE devices(run_id INTEGER NOT NULL REFERENCES runs(id), device INTEGER NOT NULL, gpu_index INTEGER,"
    " uuid TEXT, pci_bus_id TEXT, name TEXT, driver_version TEXT, power_limit_w REAL, max_sm_clock_mhz REAL,"
    " memory_total_bytes INTEGER, mig_mode INTEGER, mig_instance INTEGER, mig_profile TEXT,"
    " PRIMARY KEY(run_id, device));"
    // Metric names are stored once; samples refer to them by a small integer.
    "CREATE TABLE metrics(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
    "CREATE TABLE samples(run_id INTEGER NOT NULL, device INTEGER NOT NULL, metric INTEGER NOT NULL REFERENCES metrics(id),"
    " t_ns INTEGER NOT NULL, value REAL NOT NULL);"
    "CREATE INDEX samples_by_run ON samples(run_id, t_ns);"
    "CREATE TABLE findings(run_id INTEGER NOT NULL REFERENCES runs(id), position INTEGER NOT NULL,"
    " verdict TEXT NOT NULL, severity TEXT NOT NULL, title TEXT, scope TEXT, PRIMARY KEY(run_id, position));",
};

// The metric columns of the version 2 samples table, frozen: a metric added
// later needs a migration that adds its column (the static_assert says when).
constexpr const char* kSampleColumnsV2[] = {
    "gpu_util",         "mem_copy_util", "encoder_util", "decoder_util",     "gr_engine_active", "sm_active",
    "sm_occupancy",     "tensor_active", "dram_active",  "fp64_active",      "fp32_active",      "fp16_active",
    "pcie_rx",          "pcie_tx",       "nvlink_rx",    "nvlink_tx",        "power",            "power_limit",
    "sm_clock",         "mem_clock",     "gpu_temp",     "mem_temp",         "fb_used",          "fb_free",
    "fb_total",         "clock_event_reasons", "energy", "job_sm_util",      "other_sm_util",    "job_fb_used",
};
static_assert(std::size(kSampleColumnsV2) == kNumMetrics, "a new metric needs a store migration adding its column");

/// 1 → 2: which GPUs the job used (process attribution), training steps, and
/// samples as one row per device and time with a column per metric: one insert
/// per GPU per tick instead of one per value, appended without an index (a run
/// reads its rows back by the rowid range kept in `runs`).
std::string MigrationToVersion2() {
  std::string columns, pivot;
  for (const char* c : kSampleColumnsV2) {
    columns += std::string(", \"") + c + "\" REAL";
    pivot += std::string(", max(CASE WHEN m.name = '") + c + "' THEN s.value END)";
  }
  std::string names;
  for (const char* c : kSampleColumnsV2) names += std::string(", \"") + c + "\"";
  return "ALTER TABLE devices ADD COLUMN job_use INTEGER NOT NULL DEFAULT 0;"
         "ALTER TABLE devices ADD COLUMN other_processes TEXT;"
         "CREATE TABLE steps(run_id INTEGER NOT NULL REFERENCES runs(id), step INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
         " end_ns INTEGER NOT NULL, PRIMARY KEY(run_id, step, start_ns));"
         "ALTER TABLE runs ADD COLUMN first_sample INTEGER;"
         "ALTER TABLE runs ADD COLUMN last_sample INTEGER;"
         "ALTER TABLE runs ADD COLUMN sample_count INTEGER NOT NULL DEFAULT 0;"
         "UPDATE runs SET sample_count = (SELECT count(*) FROM samples WHERE run_id = runs.id);"
         "CREATE TABLE samples_v2(run_id INTEGER NOT NULL, device INTEGER NOT NULL, t_ns INTEGER NOT NULL" + columns + ");"
         "INSERT INTO samples_v2(run_id, device, t_ns" + names + ") SELECT s.run_id, s.device, s.t_ns" + pivot +
         " FROM samples s JOIN metrics m ON m.id = s.metric GROUP BY s.run_id, s.device, s.t_ns ORDER BY min(s.rowid);"
         "DROP TABLE samples;"
         "DROP TABLE metrics;"
         "ALTER TABLE samples_v2 RENAME TO samples;"
         "UPDATE runs SET first_sample = (SELECT min(rowid) FROM samples WHERE run_id = runs.id),"
         " last_sample = (SELECT max(rowid) FROM samples WHERE run_id = runs.id);";
}

/// 2 → 3: steps from step markers keep their process, figures, phase times and device time.
constexpr const char* kMigrationToVersion3 =
    "ALTER TABLE steps ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN samples INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN flops REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN data_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN forward_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN backward_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN optimizer_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN communication_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN checkpoint_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN other_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN device_ns INTEGER NOT NULL DEFAULT 0;";

/// 3 → 4: each complete run's headline figures (step time, data wait, busy, ...),
/// written with its findings, so an experiment's history is judged without
/// re-reading every run's samples.
constexpr const char* kMigrationToVersion4 =
    "CREATE TABLE run_figures(run_id INTEGER NOT NULL REFERENCES runs(id), figure TEXT NOT NULL,"
    " value REAL NOT NULL, PRIMARY KEY(run_id, figure));";

/// The SQL that brings a store from version `from` to `from + 1`.
std::string Migration(int64_t from) {
  if (from == 0) return kMigrations[0];
  if (from == 1) return MigrationToVersion2();
  if (from == 2) return kMigrationToVersion3;
  return kMigrationToVersion4;
}
static_assert(RunStore::kSchemaVersion == 4, "a new schema version needs its migration in Migration()");

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
void ReadDeviceFacts(Statement& row, MetricDevice& d) {
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

}  // namespace

std::string RunStore::DefaultPath() {
  if (const char* p = std::getenv("GPUTRIAGE_STORE"); p && *p) return p;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return std::string(xdg) + "/gputriage/runs.db";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/gputriage/runs.db";
}

StatusOr<std::unique_ptr<RunStore>> RunStore::Open(const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError(path + ": cannot create the run store's directory: " + ec.message());
  }
  std::unique_ptr<RunStore> store(new RunStore());
  store->path_ = path;
  if (sqlite3_open_v2(path.c_str(), &store->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    return IoError(path + ": cannot open the run store: " + (store->db_ ? sqlite3_errmsg(store->db_) : "out of memory"));
  // Recorders share a store: one holds the write lock while it creates the
  // schema or commits a second of samples; the others wait for it.
  sqlite3_busy_timeout(store->db_, kBusyTimeoutMs);
  // WAL: readers never block the recorder, and a crash loses only uncommitted transactions.
  RETURN_IF_ERROR(store->SetJournalMode());
  RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"));
  RETURN_IF_ERROR(store->Migrate());
  RETURN_IF_ERROR(store->CheckSampleColumns());
  store->version_ = kSchemaVersion;
  store->last_flush_ms_ = MonotonicMs();
  return store;
}

StatusOr<std::unique_ptr<RunStore>> RunStore::OpenForReading(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return NotFoundError(path + ": there is no run store here (nothing recorded yet, or another --store path?)");
  std::unique_ptr<RunStore> store(new RunStore());
  store->path_ = path;
  if (sqlite3_open_v2(path.c_str(), &store->db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    return IoError(path + ": cannot open the run store: " + (store->db_ ? sqlite3_errmsg(store->db_) : "out of memory"));
  sqlite3_busy_timeout(store->db_, kBusyTimeoutMs);
  int64_t version = 0;
  Status readable = store->ReadVersion(&version);
  if (!readable.ok() && store->db_ != nullptr &&
      (sqlite3_errcode(store->db_) == SQLITE_CANTOPEN || sqlite3_errcode(store->db_) == SQLITE_READONLY)) {
    // A WAL store in a directory we may not write: its shared-memory index cannot
    // be made. Read the file as it stands (no writer can change it under us: we
    // could not have opened it for writing either).
    sqlite3_close_v2(store->db_);
    store->db_ = nullptr;
    const std::string uri = "file:" + UriPath(path) + "?immutable=1";
    if (sqlite3_open_v2(uri.c_str(), &store->db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) != SQLITE_OK)
      return IoError(path + ": cannot open the run store: " + (store->db_ ? sqlite3_errmsg(store->db_) : "out of memory"));
    readable = store->ReadVersion(&version);
  }
  RETURN_IF_ERROR(readable);
  if (version == 0) return DataLossError(path + ": this file is not a gputriage run store");
  if (version > kSchemaVersion)
    return SchemaTooNew(path, version);
  if (version < kOldestReadableVersion)
    return UnimplementedError(path + ": the store's schema version " + std::to_string(version) +
                              " is older than this gputriage's (" + std::to_string(kSchemaVersion) +
                              "); reading commands never change a store: record one run into it to migrate it");
  store->version_ = version;
  RETURN_IF_ERROR(store->CheckSampleColumns());
  return store;
}

Status RunStore::SetJournalMode() {
  // Changing the journal mode needs the whole file; on a new store several
  // recorders may race for it. SQLITE_BUSY here does not go through the busy
  // handler in every SQLite version, so retry for as long as it would.
  for (int64_t waited_ms = 0;; waited_ms += 10) {
    Statement mode(db_, "PRAGMA journal_mode=WAL");
    const int rc = mode.ok() ? mode.Step() : SQLITE_ERROR;
    if (rc == SQLITE_ROW) return Status::Ok();
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || waited_ms >= kBusyTimeoutMs) {
      if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
        return DataLossError(path_ + ": this file is not a gputriage run store (" + sqlite3_errmsg(db_) + ")");
      return IoError(path_ + ": cannot use the run store: " + sqlite3_errmsg(db_));
    }
    usleep(10'000);
  }
}

Status RunStore::ReadVersion(int64_t* version) {
  Statement q(db_, "PRAGMA user_version");
  const int rc = q.ok() ? q.Step() : sqlite3_errcode(db_);
  if (rc != SQLITE_ROW) {
    const int code = sqlite3_errcode(db_);
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
      return DataLossError(path_ + ": this file is not a gputriage run store (" + sqlite3_errmsg(db_) + ")");
    return IoError(path_ + ": cannot read the run store: " + sqlite3_errmsg(db_));
  }
  *version = q.Int(0);
  return Status::Ok();
}

Status RunStore::ReadEnd(const Statement& statement, const char* what) const {
  if (statement.Done()) return Status::Ok();
  return DataLossError(path_ + ": the run store is damaged (" + sqlite3_errmsg(db_) + ", while " + what +
                       "); `gputriage runs --check` names what is affected; runs that can still be read can be exported");
}

Status RunStore::CheckIntegrity(std::vector<std::string>* problems) {
  problems->clear();
  Statement check(db_, "PRAGMA integrity_check(100)");
  if (!check.ok()) return ReadEnd(check, "checking integrity");
  while (check.Step() == SQLITE_ROW)
    if (check.Text(0) != "ok") problems->push_back(check.Text(0));
  if (!check.Done() && problems->empty()) problems->push_back(sqlite3_errmsg(db_));
  return Status::Ok();
}

RunStore::~RunStore() {
  (void)Flush();
  if (db_) sqlite3_close_v2(db_);
}

Status RunStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = path_ + ": " + (err ? err : sqlite3_errmsg(db_));
    sqlite3_free(err);
    return IoError(message);
  }
  return Status::Ok();
}

Status RunStore::Migrate() {
  // Each step re-reads the version inside its write transaction: recorders that
  // open a new store at once wait for each other, and each step runs once.
  for (;;) {
    RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    int64_t current = 0;
    Status s = ReadVersion(&current);
    if (s.ok() && current > kSchemaVersion)
      s = SchemaTooNew(path_, current);
    if (s.ok() && current == 0) {
      // A non-empty file without our version is someone else's database: leave it alone.
      Statement tables(db_, "SELECT count(*) FROM sqlite_master");
      if (tables.ok() && tables.Step() == SQLITE_ROW && tables.Int(0) > 0)
        s = DataLossError(path_ + ": an SQLite file that is not a gputriage run store");
    }
    if (s.ok() && current == kSchemaVersion) return Exec("COMMIT");
    if (s.ok()) s = Exec(Migration(current).c_str());
    if (s.ok()) s = Exec(("PRAGMA user_version=" + std::to_string(current + 1)).c_str());
    if (!s.ok()) {
      (void)Exec("ROLLBACK");
      return s;
    }
    RETURN_IF_ERROR(Exec("COMMIT"));
  }
}

Status RunStore::CheckSampleColumns() {
  // Every metric this build records needs its column (the migrations add them).
  std::vector<bool> found(kNumMetrics, false);
  Statement columns(db_, "PRAGMA table_info(samples)");
  while (columns.ok() && columns.Step() == SQLITE_ROW)
    if (auto m = MetricFromName(columns.Text(1))) found[static_cast<size_t>(*m)] = true;
  for (int m = 0; m < kNumMetrics; ++m)
    if (!found[static_cast<size_t>(m)])
      return DataLossError(path_ + ": the samples table has no column for " + MetricName(static_cast<Metric>(m)) +
                           " (a damaged store?)");
  return Status::Ok();
}

StatusOr<int64_t> RunStore::BeginRun(const RunInfo& info) {
  Statement insert(db_, "INSERT INTO runs(name, command, host, status, started_ns) VALUES(?, ?, ?, 'incomplete', ?)");
  if (!insert.ok()) return IoError(path_ + ": " + sqlite3_errmsg(db_));
  insert.Bind(1, info.name);
  insert.Bind(2, info.command);
  insert.Bind(3, info.host);
  insert.Bind(4, static_cast<int64_t>(info.started_ns));
  if (insert.Step() != SQLITE_DONE) return IoError(path_ + ": cannot start a run: " + sqlite3_errmsg(db_));
  const int64_t id = sqlite3_last_insert_rowid(db_);
  Statement meta(db_, "INSERT OR REPLACE INTO run_metadata(run_id, key, value) VALUES(?, ?, ?)");
  for (const auto& [k, v] : info.metadata) {
    meta.Bind(1, id);
    meta.Bind(2, k);
    meta.Bind(3, v);
    if (meta.Step() != SQLITE_DONE) return IoError(path_ + ": cannot store metadata: " + sqlite3_errmsg(db_));
    meta.Reset();
  }
  return id;
}

Status RunStore::PutDevices(int64_t run, const MetricSet& metrics) {
  Statement put(db_,
                "INSERT OR REPLACE INTO devices(run_id, device, gpu_index, uuid, pci_bus_id, name, driver_version,"
                " power_limit_w, max_sm_clock_mhz, memory_total_bytes, mig_mode, mig_instance, mig_profile, job_use,"
                " other_processes) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!put.ok()) return IoError(path_ + ": " + sqlite3_errmsg(db_));
  for (size_t i = 0; i < metrics.devices.size(); ++i) {
    const auto& d = metrics.devices[i];
    put.Bind(1, run);
    put.Bind(2, static_cast<int64_t>(i));
    put.Bind(3, static_cast<int64_t>(d.index));
    put.Bind(4, d.uuid);
    put.Bind(5, d.pci_bus_id);
    put.Bind(6, d.name);
    put.Bind(7, d.driver_version);
    put.Bind(8, d.power_limit_w);
    put.Bind(9, d.max_sm_clock_mhz);
    put.Bind(10, d.memory_total_bytes);
    put.Bind(11, static_cast<int64_t>(d.mig_mode ? 1 : 0));
    put.Bind(12, static_cast<int64_t>(d.mig_instance));
    put.Bind(13, d.mig_profile);
    put.Bind(14, static_cast<int64_t>(d.job_use == MetricDevice::JobUse::kUsed      ? 1
                                      : d.job_use == MetricDevice::JobUse::kNotUsed ? 2
                                                                                     : 0));
    put.Bind(15, Join(d.other_processes, kProcessSeparator));
    if (put.Step() != SQLITE_DONE) return IoError(path_ + ": cannot store devices: " + sqlite3_errmsg(db_));
    put.Reset();
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
    pending_.push_back(PendingRow{run, dev, t, 0, {}});
    row = &pending_.back();
  }
  row->present |= uint64_t{1} << slot;
  row->values[slot] = value;
  if (MonotonicMs() - last_flush_ms_ >= kFlushEveryMs) (void)Flush();
}

Status RunStore::Flush() {
  last_flush_ms_ = MonotonicMs();
  if (pending_.empty() || db_ == nullptr) return Status::Ok();
  // One transaction per second of samples: cheap for 10 Hz x 8 GPUs, and a crash
  // loses at most this batch.
  RETURN_IF_ERROR(Exec("BEGIN"));
  std::string sql = "INSERT INTO samples(run_id, device, t_ns, " + MetricColumns() + ") VALUES(?, ?, ?";
  for (int m = 0; m < kNumMetrics; ++m) sql += ", ?";
  sql += ")";
  Statement insert(db_, sql.c_str());
  Statement extent(db_,
                   "UPDATE runs SET first_sample = coalesce(first_sample, ?), last_sample = ?,"
                   " sample_count = sample_count + ? WHERE id = ?");
  if (!insert.ok() || !extent.ok()) {
    (void)Exec("ROLLBACK");
    return IoError(path_ + ": " + sqlite3_errmsg(db_));
  }
  struct Extent {
    int64_t first = 0, last = 0, values = 0;
    bool any = false;
  };
  std::map<int64_t, Extent> extents;  // by run: usually one
  for (const auto& row : pending_) {
    insert.Bind(1, row.run);
    insert.Bind(2, row.device);
    insert.Bind(3, static_cast<int64_t>(row.t));
    int values = 0;
    for (int m = 0; m < kNumMetrics; ++m) {
      if (row.present & (uint64_t{1} << m)) {
        insert.Bind(4 + m, row.values[static_cast<size_t>(m)]);
        ++values;
      } else {
        insert.BindNull(4 + m);
      }
    }
    if (insert.Step() != SQLITE_DONE) {
      const std::string err = sqlite3_errmsg(db_);
      insert.Reset();
      (void)Exec("ROLLBACK");
      return IoError(path_ + ": cannot store samples: " + err);
    }
    insert.Reset();
    Extent& e = extents[row.run];
    const int64_t rowid = sqlite3_last_insert_rowid(db_);
    if (!e.any) e.first = rowid;
    e.any = true;
    e.last = rowid;
    e.values += values;
  }
  for (const auto& [run, e] : extents) {
    extent.Bind(1, e.first);
    extent.Bind(2, e.last);
    extent.Bind(3, e.values);
    extent.Bind(4, run);
    if (extent.Step() != SQLITE_DONE) {
      const std::string err = sqlite3_errmsg(db_);
      (void)Exec("ROLLBACK");
      return IoError(path_ + ": cannot store samples: " + err);
    }
    extent.Reset();
  }
  pending_.clear();
  return Exec("COMMIT");
}

Status RunStore::EndRun(int64_t run, TimeNs ended_ns, std::optional<int> exit_code, const std::vector<Finding>& findings,
                        const std::map<std::string, double>& figures) {
  RETURN_IF_ERROR(Flush());
  RETURN_IF_ERROR(Exec("BEGIN"));
  Statement end(db_, "UPDATE runs SET status='complete', ended_ns=?, exit_code=? WHERE id=?");
  end.Bind(1, static_cast<int64_t>(ended_ns));
  if (exit_code) end.Bind(2, static_cast<int64_t>(*exit_code));
  else end.BindNull(2);
  end.Bind(3, run);
  if (!end.ok() || end.Step() != SQLITE_DONE) {
    (void)Exec("ROLLBACK");
    return IoError(path_ + ": cannot end the run: " + sqlite3_errmsg(db_));
  }
  Statement put(db_, "INSERT OR REPLACE INTO findings(run_id, position, verdict, severity, title, scope) VALUES(?, ?, ?, ?, ?, ?)");
  for (size_t i = 0; i < findings.size(); ++i) {
    put.Bind(1, run);
    put.Bind(2, static_cast<int64_t>(i));
    put.Bind(3, findings[i].verdict);
    put.Bind(4, std::string(SeverityName(findings[i].severity)));
    put.Bind(5, findings[i].title);
    put.Bind(6, findings[i].scope);
    if (put.Step() != SQLITE_DONE) {
      (void)Exec("ROLLBACK");
      return IoError(path_ + ": cannot store findings: " + sqlite3_errmsg(db_));
    }
    put.Reset();
  }
  Statement figure(db_, "INSERT OR REPLACE INTO run_figures(run_id, figure, value) VALUES(?, ?, ?)");
  for (const auto& [name, value] : figures) {
    if (!std::isfinite(value)) continue;
    figure.Bind(1, run);
    figure.Bind(2, name);
    figure.Bind(3, value);
    if (figure.Step() != SQLITE_DONE) {
      (void)Exec("ROLLBACK");
      return IoError(path_ + ": cannot store the run's figures: " + sqlite3_errmsg(db_));
    }
    figure.Reset();
  }
  return Exec("COMMIT");
}

Status RunStore::PutSteps(int64_t run, const std::vector<MarkedStep>& steps) {
  RETURN_IF_ERROR(Exec("BEGIN"));
  Statement put(db_,
                "INSERT OR REPLACE INTO steps(run_id, step, start_ns, end_ns, pid, samples, tokens, flops, data_ns,"
                " forward_ns, backward_ns, optimizer_ns, communication_ns, checkpoint_ns, other_ns, device_ns)"
                " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const auto& step : steps) {
    put.Bind(1, run);
    put.Bind(2, step.number);
    put.Bind(3, static_cast<int64_t>(step.span.start));
    put.Bind(4, static_cast<int64_t>(step.span.end));
    put.Bind(5, static_cast<int64_t>(step.pid));
    put.Bind(6, step.samples);
    put.Bind(7, step.tokens);
    put.Bind(8, step.flops);
    for (int phase = 1; phase <= 7; ++phase) put.Bind(8 + phase, static_cast<int64_t>(step.phase_ns[static_cast<size_t>(phase)]));
    put.Bind(16, static_cast<int64_t>(step.device_ns));
    if (!put.ok() || put.Step() != SQLITE_DONE) {
      const std::string why = sqlite3_errmsg(db_);
      (void)Exec("ROLLBACK");
      return IoError(path_ + ": cannot store steps: " + why);
    }
    put.Reset();
  }
  return Exec("COMMIT");
}

StatusOr<std::vector<RunInfo>> RunStore::ListRuns() {
  Statement q(db_,
              "SELECT r.id, r.name, r.command, r.host, r.status, r.started_ns, r.ended_ns, r.exit_code,"
              " r.sample_count,"
              " (SELECT count(*) FROM devices d WHERE d.run_id = r.id) FROM runs r ORDER BY r.id");
  if (!q.ok()) return IoError(path_ + ": " + sqlite3_errmsg(db_));
  std::vector<RunInfo> out;
  while (q.Step() == SQLITE_ROW) {
    RunInfo r;
    r.id = q.Int(0);
    r.name = q.Text(1);
    r.command = q.Text(2);
    r.host = q.Text(3);
    r.status = q.Text(4);
    r.started_ns = q.Int(5);
    r.ended_ns = q.Int(6);
    if (!q.Null(7)) r.exit_code = static_cast<int>(q.Int(7));
    r.samples = q.Int(8);
    r.devices = static_cast<int>(q.Int(9));
    out.push_back(std::move(r));
  }
  RETURN_IF_ERROR(ReadEnd(q, "listing runs"));
  Statement meta(db_, "SELECT run_id, key, value FROM run_metadata");
  while (meta.ok() && meta.Step() == SQLITE_ROW) {
    // Runs are in id order: a binary search, not a scan per row (10,000 runs).
    auto r = std::lower_bound(out.begin(), out.end(), meta.Int(0),
                              [](const RunInfo& info, int64_t id) { return info.id < id; });
    if (r != out.end() && r->id == meta.Int(0)) r->metadata[meta.Text(1)] = meta.Text(2);
  }
  RETURN_IF_ERROR(ReadEnd(meta, "listing run settings"));
  return out;
}

StatusOr<Recording> RunStore::LoadRun(int64_t run) {
  Statement head(db_, "SELECT name, command, status FROM runs WHERE id=?");
  head.Bind(1, run);
  if (!head.ok() || head.Step() != SQLITE_ROW) {
    RETURN_IF_ERROR(ReadEnd(head, "finding the run"));
    return NotFoundError(path_ + ": there is no run " + std::to_string(run) + " (gputriage runs lists them)");
  }
  Recording rec;
  rec.format = "nvml";
  rec.source_path = "run " + std::to_string(run) + (head.Text(0).empty() ? "" : " (" + head.Text(0) + ")");
  rec.metadata["command"] = head.Text(1);
  rec.metadata["status"] = head.Text(2);
  if (!head.Text(0).empty()) rec.metadata["name"] = head.Text(0);
  if (head.Text(2) != "complete")
    rec.stats.AddIssue(IssueSeverity::kWarning, "incomplete_run",
                       "run " + std::to_string(run) + " was not completed (the recorder stopped early); samples up to its last second are kept");
  // The run's settings and context (workload, price, tags, commit) travel with it.
  ASSIGN_OR_RETURN(auto settings, LoadSettings(run));
  for (auto& [key, value] : settings) rec.metadata.try_emplace(key, std::move(value));
  Statement devs(db_, kSelectDevices);
  devs.Bind(1, run);
  std::vector<size_t> position;  // stored device → recording device
  while (devs.ok() && devs.Step() == SQLITE_ROW) {
    // Positions are what the recorder wrote; a damaged file may hold anything.
    const int64_t stored_position = devs.Int(0);
    if (stored_position < 0 || stored_position >= static_cast<int64_t>(MetricSet::kMaxDevices)) {
      rec.stats.AddIssue(IssueSeverity::kWarning, "bad_stored_device",
                         "run " + std::to_string(run) + ": a device row with position " + std::to_string(stored_position) +
                             " (a damaged store?); its samples are skipped");
      continue;
    }
    auto pos = rec.metrics.FindOrAdd(static_cast<int>(devs.Int(1)), devs.Text(2), devs.Text(3), static_cast<int>(devs.Int(10)));
    if (!pos) break;
    ReadDeviceFacts(devs, rec.metrics.devices[*pos]);
    const auto stored = static_cast<size_t>(stored_position);
    if (position.size() <= stored) position.resize(stored + 1, SIZE_MAX);
    position[stored] = *pos;
  }
  if (rec.metrics.devices.size() < MetricSet::kMaxDevices) RETURN_IF_ERROR(ReadEnd(devs, "reading a run's GPUs"));
  // Samples stream in the order they were recorded (each series in time order,
  // no sort), through the same sketches a live recording fills.
  const std::string select = "SELECT s.device, s.t_ns, " + MetricColumns("s.") +
                             " FROM runs r JOIN samples s ON s.rowid BETWEEN r.first_sample AND r.last_sample"
                             " AND s.run_id = r.id WHERE r.id=? ORDER BY s.rowid";
  Statement samples(db_, select.c_str());
  samples.Bind(1, run);
  while (samples.ok() && samples.Step() == SQLITE_ROW) {
    const auto device = static_cast<size_t>(samples.Int(0));
    if (device >= position.size() || position[device] == SIZE_MAX) {
      rec.stats.AddIssue(IssueSeverity::kWarning, "bad_stored_sample", "run " + std::to_string(run) + ": a sample of an unknown device");
      continue;
    }
    const TimeNs t = samples.Int(1);
    for (int m = 0; m < kNumMetrics; ++m)
      if (!samples.Null(2 + m)) rec.metrics.Add(position[device], static_cast<Metric>(m), t, samples.Real(2 + m));
  }
  RETURN_IF_ERROR(ReadEnd(samples, "reading a run's samples"));
  ASSIGN_OR_RETURN(rec.marked_steps, LoadSteps(run));
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
  Statement steps(db_,
                  "SELECT step, start_ns, end_ns, pid, samples, tokens, flops, data_ns, forward_ns, backward_ns,"
                  " optimizer_ns, communication_ns, checkpoint_ns, other_ns, device_ns FROM steps WHERE run_id=?"
                  " ORDER BY start_ns, step");
  steps.Bind(1, run);
  while (steps.ok() && steps.Step() == SQLITE_ROW) {
    MarkedStep step;
    step.number = steps.Int(0);
    step.span = Interval{steps.Int(1), steps.Int(2)};
    step.pid = static_cast<uint32_t>(steps.Int(3));
    step.samples = steps.Int(4);
    step.tokens = steps.Int(5);
    step.flops = steps.Real(6);
    for (int phase = 1; phase <= 7; ++phase) step.phase_ns[static_cast<size_t>(phase)] = steps.Int(6 + phase);
    step.device_ns = steps.Int(14);
    out.push_back(step);
  }
  RETURN_IF_ERROR(ReadEnd(steps, "reading a run's steps"));
  return out;
}

StatusOr<std::map<std::string, std::string>> RunStore::LoadSettings(int64_t run) {
  std::map<std::string, std::string> out;
  Statement meta(db_, "SELECT key, value FROM run_metadata WHERE run_id=?");
  meta.Bind(1, run);
  while (meta.ok() && meta.Step() == SQLITE_ROW) out.emplace(meta.Text(0), meta.Text(1));
  RETURN_IF_ERROR(ReadEnd(meta, "reading a run's settings"));
  return out;
}

StatusOr<std::map<std::string, double>> RunStore::LoadFigures(int64_t run) {
  std::map<std::string, double> out;
  if (version_ < 4) return out;  // kept before figures were: the caller works them out
  Statement q(db_, "SELECT figure, value FROM run_figures WHERE run_id=?");
  q.Bind(1, run);
  while (q.ok() && q.Step() == SQLITE_ROW) out.emplace(q.Text(0), q.Real(1));
  RETURN_IF_ERROR(ReadEnd(q, "reading a run's figures"));
  return out;
}

StatusOr<std::vector<Finding>> RunStore::LoadFindings(int64_t run) {
  std::vector<Finding> out;
  Statement q(db_, "SELECT verdict, severity, title, scope FROM findings WHERE run_id=? ORDER BY position");
  q.Bind(1, run);
  while (q.ok() && q.Step() == SQLITE_ROW) {
    Finding f;
    f.verdict = q.Text(0);
    const std::string severity = q.Text(1);
    for (Severity s : {Severity::kInfo, Severity::kLow, Severity::kModerate, Severity::kHigh})
      if (severity == SeverityName(s)) f.severity = s;
    f.title = q.Text(2);
    f.scope = q.Text(3);
    out.push_back(std::move(f));
  }
  RETURN_IF_ERROR(ReadEnd(q, "reading a run's findings"));
  return out;
}

Status RunStore::PutSettings(int64_t run, const std::map<std::string, std::string>& settings) {
  RETURN_IF_ERROR(Exec("BEGIN"));
  Statement meta(db_, "INSERT OR REPLACE INTO run_metadata(run_id, key, value) VALUES(?, ?, ?)");
  for (const auto& [k, v] : settings) {
    meta.Bind(1, run);
    meta.Bind(2, k);
    meta.Bind(3, v);
    if (meta.Step() != SQLITE_DONE) {
      const std::string why = sqlite3_errmsg(db_);
      (void)Exec("ROLLBACK");
      return IoError(path_ + ": cannot store the run's settings: " + why);
    }
    meta.Reset();
  }
  return Exec("COMMIT");
}

}  // namespace gputriage

namespace gputriage {

Status RunStore::ForEachSample(int64_t run,
                               const std::function<void(const MetricDevice&, Metric, TimeNs, double)>& fn) {
  // The devices (facts, identity) as LoadRun reads them, without their samples.
  Statement devs(db_, kSelectDevices);
  devs.Bind(1, run);
  std::map<int64_t, MetricDevice> devices;
  while (devs.ok() && devs.Step() == SQLITE_ROW) {
    MetricDevice d;
    d.index = static_cast<int>(devs.Int(1));
    d.uuid = devs.Text(2);
    d.pci_bus_id = devs.Text(3);
    d.mig_instance = static_cast<int>(devs.Int(10));
    ReadDeviceFacts(devs, d);
    devices.emplace(devs.Int(0), std::move(d));
  }
  RETURN_IF_ERROR(ReadEnd(devs, "reading a run's GPUs"));
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
  for (const Metric metric : by_name) {
    const std::string column = std::string("s.\"") + MetricName(metric) + "\"";
    const std::string select = "SELECT s.device, s.t_ns, " + column +
                               " FROM runs r JOIN samples s ON s.rowid BETWEEN r.first_sample AND r.last_sample"
                               " AND s.run_id = r.id WHERE r.id=? AND " + column + " IS NOT NULL ORDER BY s.device, s.rowid";
    Statement samples(db_, select.c_str());
    samples.Bind(1, run);
    while (samples.ok() && samples.Step() == SQLITE_ROW) {
      auto dev = devices.find(samples.Int(0));
      if (dev == devices.end()) continue;
      fn(dev->second, metric, samples.Int(1), samples.Real(2));
    }
    RETURN_IF_ERROR(ReadEnd(samples, "reading a run's samples"));
  }
  return Status::Ok();
}

}  // namespace gputriage
