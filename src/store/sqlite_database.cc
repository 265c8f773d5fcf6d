// The SQLite adapter: the only file that includes sqlite3.h.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "src/store/database.h"

namespace gputriage {
namespace {

// How long a writer waits for another's lock: a recorder commits once a
// second; a new store's schema is made once.
constexpr int kBusyTimeoutMs = 30'000;

class SqliteQuery final : public Query {
 public:
  SqliteQuery(sqlite3* db, std::string_view sql) {
    rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  }
  ~SqliteQuery() override { sqlite3_finalize(stmt_); }
  bool ok() const override { return rc_ == SQLITE_OK; }
  void Bind(int i, int64_t v) override { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, double v) override { sqlite3_bind_double(stmt_, i, v); }
  void Bind(int i, const std::string& v) override {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void BindNull(int i) override { sqlite3_bind_null(stmt_, i); }
  bool Step() override {
    if (!ok()) return false;
    last_ = sqlite3_step(stmt_);
    return last_ == SQLITE_ROW;
  }
  // A damaged page ends a loop of rows with SQLITE_CORRUPT, not SQLITE_DONE.
  bool Done() const override { return rc_ == SQLITE_OK && last_ == SQLITE_DONE; }
  void Reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    last_ = SQLITE_OK;
  }
  int64_t Int(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const override { return sqlite3_column_double(stmt_, col); }
  bool Null(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const override {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
  int last_ = SQLITE_OK;
};

/// A path as the file: URI form wants it (%, ? and # escaped).
std::string UriPath(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out;
}

class SqliteDatabase final : public Database {
 public:
  explicit SqliteDatabase(std::string path) : path_(std::move(path)) {}
  ~SqliteDatabase() override {
    if (db_) sqlite3_close_v2(db_);
  }

  const char* kind() const override { return "sqlite"; }
  const std::string& display_name() const override { return path_; }
  const char* sample_row_id() const override { return "rowid"; }

  std::unique_ptr<Query> Prepare(std::string_view sql, bool /*streaming: SQLite always steps row by row*/) override {
    return std::make_unique<SqliteQuery>(db_, sql);
  }

  Status Exec(const std::string& sql) override {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = path_ + ": " + (err ? err : sqlite3_errmsg(db_));
      sqlite3_free(err);
      return IoError(message);
    }
    return Status::Ok();
  }

  std::string LastError() const override { return db_ ? sqlite3_errmsg(db_) : "out of memory"; }
  bool LastErrorIsDamage() const override {
    const int code = db_ ? sqlite3_errcode(db_) : SQLITE_OK;
    return code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
  }

  Status BeginMigration() override { return Exec("BEGIN IMMEDIATE"); }

  StatusOr<int64_t> SchemaVersion() override {
    SqliteQuery q(db_, "PRAGMA user_version");
    if (!q.Step()) {
      if (LastErrorIsDamage())
        return DataLossError(path_ + ": this file is not a gputriage run store (" + LastError() + ")");
      return IoError(path_ + ": cannot read the run store: " + LastError());
    }
    return q.Int(0);
  }

  Status SetSchemaVersion(int64_t version) override {
    return Exec("PRAGMA user_version=" + std::to_string(version));
  }

  StatusOr<bool> HoldsOtherTables() override {
    SqliteQuery tables(db_, "SELECT count(*) FROM sqlite_master");
    if (!tables.Step()) return IoError(path_ + ": " + LastError());
    return tables.Int(0) > 0;
  }

  StatusOr<std::vector<std::string>> Columns(const std::string& table) override {
    std::vector<std::string> out;
    SqliteQuery columns(db_, "SELECT name FROM pragma_table_info(?)");
    columns.Bind(1, table);
    while (columns.Step()) out.push_back(columns.Text(0));
    if (!columns.Done()) return IoError(path_ + ": " + LastError());
    return out;
  }

  Status CheckPages(std::vector<std::string>* problems) override {
    SqliteQuery check(db_, "PRAGMA integrity_check(100)");
    while (check.Step())
      if (check.Text(0) != "ok") problems->push_back(check.Text(0));
    if (!check.Done() && problems->empty()) problems->push_back(LastError());
    return Status::Ok();
  }

  Status OpenForRecording() {
    std::error_code ec;
    const auto dir = std::filesystem::path(path_).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      if (ec) return IoError(path_ + ": cannot create the run store's directory: " + ec.message());
    }
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
      return IoError(path_ + ": cannot open the run store: " + LastError());
    // Recorders share a store: one holds the write lock while it creates the
    // schema or commits a second of samples; the others wait for it.
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    // WAL: readers never block the recorder, and a crash loses only uncommitted transactions.
    if (Status s = SetJournalMode(); !s.ok()) return s;
    return Exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
  }

  /// Another program's SQLite file (an Nsight Systems export), read as it
  /// stands: read-only and immutable (no lock, no journal, nothing written).
  Status OpenImmutable() {
    const std::string uri = "file:" + UriPath(path_) + "?immutable=1";
    // NOMUTEX: a reader uses its connection from one thread at a time, and the
    // per-call locks of SQLite's serialized mode were 5% of reading a 0.1 GB export.
    if (sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK)
      return IoError(path_ + ": cannot open: " + LastError());
    // A damaged or foreign file fails here, on its first page, not in a query.
    SqliteQuery probe(db_, "SELECT count(*) FROM sqlite_master");
    if (!probe.Step()) return DataLossError(path_ + ": not a readable SQLite database (" + LastError() + ")");
    return Status::Ok();
  }

  Status OpenForReading() {
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec))
      return NotFoundError(path_ + ": there is no run store here (nothing recorded yet, or another --store path?)");
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      return IoError(path_ + ": cannot open the run store: " + LastError());
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    auto version = SchemaVersion();
    if (!version.ok() && db_ != nullptr &&
        (sqlite3_errcode(db_) == SQLITE_CANTOPEN || sqlite3_errcode(db_) == SQLITE_READONLY)) {
      // A WAL store in a directory we may not write: its shared-memory index cannot
      // be made. Read the file as it stands (no writer can change it under us: we
      // could not have opened it for writing either).
      sqlite3_close_v2(db_);
      db_ = nullptr;
      const std::string uri = "file:" + UriPath(path_) + "?immutable=1";
      if (sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) != SQLITE_OK)
        return IoError(path_ + ": cannot open the run store: " + LastError());
    }
    return Status::Ok();
  }

 private:
  Status SetJournalMode() {
    // Changing the journal mode needs the whole file; on a new store several
    // recorders may race for it. SQLITE_BUSY here does not go through the busy
    // handler in every SQLite version, so retry for as long as it would.
    for (int64_t waited_ms = 0;; waited_ms += 10) {
      SqliteQuery mode(db_, "PRAGMA journal_mode=WAL");
      if (mode.Step()) return Status::Ok();
      const int rc = sqlite3_errcode(db_);
      if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || waited_ms >= kBusyTimeoutMs) {
        if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
          return DataLossError(path_ + ": this file is not a gputriage run store (" + LastError() + ")");
        return IoError(path_ + ": cannot use the run store: " + LastError());
      }
      usleep(10'000);
    }
  }

  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<Database>> OpenSqlite(const std::string& path, bool for_reading) {
  auto db = std::make_unique<SqliteDatabase>(path);
  if (Status s = for_reading ? db->OpenForReading() : db->OpenForRecording(); !s.ok()) return s;
  return std::unique_ptr<Database>(std::move(db));
}

StatusOr<std::unique_ptr<Database>> OpenSqliteImmutable(const std::string& path) {
  auto db = std::make_unique<SqliteDatabase>(path);
  if (Status s = db->OpenImmutable(); !s.ok()) return s;
  return std::unique_ptr<Database>(std::move(db));
}

}  // namespace gputriage
