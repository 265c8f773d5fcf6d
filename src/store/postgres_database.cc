// The PostgreSQL adapter (libpq, loaded at run time by libpq_library.cc): the
// only file that calls it.
//
// A team's recorders on many machines share one database. Each recorder holds
// one connection; a recorder killed mid-run loses its connection and the server
// rolls back its open transaction, so, as with SQLite, the store keeps every
// committed second and the run stays "incomplete".

#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "src/store/database.h"
#include "src/store/libpq_library.h"
#include "src/util/strings.h"

namespace gputriage {

bool IsPostgresUrl(std::string_view location) {
  return StartsWith(location, "postgresql://") || StartsWith(location, "postgres://");
}

namespace {

// libpq's entry points: loaded by OpenPostgres before any connection exists.
const Libpq* g_libpq = nullptr;
const Libpq& Pq() { return *g_libpq; }

// Migrators of one database exclude each other with this advisory lock
// (pg_advisory_xact_lock: released at COMMIT, ROLLBACK or a lost connection).
constexpr int64_t kMigrationLockKey = 0x67707574726961;  // "gputria"

/// The URL as messages show it: a password in the authority or the query is replaced by ***.
std::string WithoutPassword(const std::string& url) {
  std::string out = url;
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("/?", start);
    const size_t at = out.rfind('@', end == std::string::npos ? out.size() : end);
    if (at != std::string::npos && at >= start) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    if (p > 0 && out[p - 1] != '?' && out[p - 1] != '&') continue;
    const size_t value = p + 9;
    const size_t end = out.find('&', value);
    out.replace(value, (end == std::string::npos ? out.size() : end) - value, "***");
  }
  return out;
}

/// Text as a UTF-8 database takes it: bytes that are not UTF-8, and NULs,
/// become U+FFFD (a command or tag from a Latin-1 shell is kept, not refused).
std::string AsUtf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool valid = len > 0 && c != 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) valid = (p[i + k] & 0xC0) == 0x80;
    if (valid && len > 1) {  // no overlong forms, surrogates or code points past U+10FFFF
      uint32_t cp = c & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
      valid = (len == 2 && cp >= 0x80) || (len == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
              (len == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
    }
    if (valid) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

/// `?` placeholders as PostgreSQL's $1, $2, ... (quoted text and names are left alone).
std::string NumberedPlaceholders(std::string_view sql) {
  std::string out;
  int n = 0;
  char quote = 0;
  for (char c : sql) {
    if (quote) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += "$" + std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

class PostgresDatabase;

class PostgresQuery final : public Query {
 public:
  PostgresQuery(PostgresDatabase* db, std::string_view sql, bool streaming)
      : db_(db), sql_(NumberedPlaceholders(sql)), streaming_(streaming) {}
  ~PostgresQuery() override { Reset(); }
  bool ok() const override { return true; }  // prepared when it runs: errors come from Step()
  void Bind(int i, int64_t v) override { Set(i, std::to_string(v)); }
  void Bind(int i, double v) override { Set(i, fmt::format("{}", v)); }  // shortest text that reads back the same
  void Bind(int i, const std::string& v) override { Set(i, AsUtf8(v)); }
  void BindNull(int i) override {
    if (static_cast<size_t>(i) > params_.size()) params_.resize(static_cast<size_t>(i));
    params_[static_cast<size_t>(i - 1)].reset();
  }
  bool Step() override;
  bool Done() const override { return state_ == State::kDone; }
  void Reset() override;
  int64_t Int(int col) const override { return std::strtoll(Value(col), nullptr, 10); }
  double Real(int col) const override { return std::strtod(Value(col), nullptr); }
  bool Null(int col) const override { return res_ == nullptr || Pq().PQgetisnull(res_, row_, col); }
  std::string Text(int col) const override { return Value(col); }

 private:
  enum class State { kReady, kRows, kDone, kFailed };
  void Set(int i, std::string v) {
    if (static_cast<size_t>(i) > params_.size()) params_.resize(static_cast<size_t>(i));
    params_[static_cast<size_t>(i - 1)] = std::move(v);
  }
  const char* Value(int col) const {
    if (res_ == nullptr || row_ < 0 || row_ >= Pq().PQntuples(res_) || col >= Pq().PQnfields(res_)) return "";
    return Pq().PQgetvalue(res_, row_, col);
  }
  bool Run();
  bool NextStreamed();
  void Fail(PGresult* res);

  PostgresDatabase* db_;
  std::string sql_;
  bool streaming_;
  std::vector<std::optional<std::string>> params_;
  PGresult* res_ = nullptr;
  int row_ = -1;
  State state_ = State::kReady;
};

class PostgresDatabase final : public Database {
 public:
  PostgresDatabase(std::string url, bool for_reading)
      : url_(std::move(url)), display_(WithoutPassword(url_)), for_reading_(for_reading) {}
  ~PostgresDatabase() override {
    if (conn_) Pq().PQfinish(conn_);
  }

  const char* kind() const override { return "postgresql"; }
  const std::string& display_name() const override { return display_; }
  const char* sample_row_id() const override { return "id"; }

  std::unique_ptr<Query> Prepare(std::string_view sql, bool streaming) override {
    return std::make_unique<PostgresQuery>(this, sql, streaming);
  }

  Status Exec(const std::string& sql) override {
    if (!Usable()) return IoError(display_ + ": " + error_);
    PGresult* res = Pq().PQexec(conn_, sql.c_str());
    const ExecStatusType st = Pq().PQresultStatus(res);
    const bool good = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!good) Remember(res);
    Pq().PQclear(res);
    return good ? Status::Ok() : IoError(display_ + ": " + error_);
  }

  std::string LastError() const override { return error_; }
  // SQLSTATE class XX: data_corrupted, index_corrupted.
  bool LastErrorIsDamage() const override { return StartsWith(sqlstate_, "XX00"); }

  Status BeginMigration() override {
    RETURN_IF_ERROR(Exec("BEGIN"));
    Status s = Exec("SELECT pg_advisory_xact_lock(" + std::to_string(kMigrationLockKey) + ")");
    if (!s.ok()) (void)Exec("ROLLBACK");
    return s;
  }

  StatusOr<int64_t> SchemaVersion() override {
    auto exists = Scalar("SELECT to_regclass('gputriage_schema') IS NOT NULL");
    if (!exists.ok()) return exists.status();
    if (*exists != "t") return int64_t{0};
    auto version = Scalar("SELECT max(version) FROM gputriage_schema");
    if (!version.ok()) return version.status();
    return std::strtoll(version->c_str(), nullptr, 10);
  }

  Status SetSchemaVersion(int64_t version) override {
    return Exec("CREATE TABLE IF NOT EXISTS gputriage_schema(version BIGINT NOT NULL);"
                "DELETE FROM gputriage_schema; INSERT INTO gputriage_schema(version) VALUES(" +
                std::to_string(version) + ")");
  }

  StatusOr<bool> HoldsOtherTables() override {
    // Beside other tables a team keeps in the database, a store may be made;
    // not over tables with its own names that are someone else's.
    auto clash = Scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name IN"
        " ('runs', 'run_metadata', 'devices', 'samples', 'steps', 'findings', 'run_figures', 'run_phases')");
    if (!clash.ok()) return clash.status();
    return *clash != "0";
  }

  StatusOr<std::vector<std::string>> Columns(const std::string& table) override {
    auto q = Prepare("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                     " AND table_name = ? ORDER BY ordinal_position",
                     false);
    q->Bind(1, table);
    std::vector<std::string> out;
    while (q->Step()) out.push_back(q->Text(0));
    if (!q->Done()) return IoError(display_ + ": " + error_);
    return out;
  }

  // PostgreSQL checksums and WAL-replays its own pages; what a store can get
  // wrong is checked row by row by the run store (RunStore::CheckIntegrity).
  Status CheckPages(std::vector<std::string>* /*problems*/) override { return Status::Ok(); }

  Status Connect() {
    // Our defaults first: what the URL sets wins (expand_dbname).
    const char* keys[] = {"connect_timeout", "application_name", "client_encoding", "dbname", nullptr};
    const char* values[] = {"10", "gputriage", "UTF8", url_.c_str(), nullptr};
    conn_ = Pq().PQconnectdbParams(keys, values, 1);
    if (conn_ == nullptr) return IoError(display_ + ": cannot connect to the run store: out of memory");
    if (Pq().PQstatus(conn_) != CONNECTION_OK)
      return IoError(display_ + ": cannot connect to the run store: " + ConnectionError());
    // Server notices ("there is no transaction in progress") are not for the terminal.
    Pq().PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    if (for_reading_) return Exec("SET default_transaction_read_only = on");
    return Status::Ok();
  }

  // For PostgresQuery.
  PGconn* conn() { return conn_; }
  void Remember(const PGresult* res) {
    const char* message = res ? Pq().PQresultErrorMessage(res) : "";
    error_ = (message && *message) ? std::string(TrimAsciiSpace(message)) : ConnectionError();
    const char* state = res ? Pq().PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    sqlstate_ = state ? state : "";
  }
  void RememberConnection() {
    error_ = ConnectionError();
    sqlstate_.clear();
  }
  /// Whether a statement can be sent: not while another's rows are being
  /// streamed, and a lost connection is made again once (a server restart).
  bool Usable() {
    if (streaming_ != nullptr) {
      error_ = "another query's rows are still being read (a gputriage bug)";
      sqlstate_.clear();
      return false;
    }
    if (Pq().PQstatus(conn_) == CONNECTION_BAD) {
      Pq().PQreset(conn_);
      if (Pq().PQstatus(conn_) != CONNECTION_OK) {
        RememberConnection();
        return false;
      }
      if (for_reading_ && !Exec("SET default_transaction_read_only = on").ok()) return false;
    }
    return true;
  }
  const void* streaming_ = nullptr;  // the query whose rows are being streamed

 private:
  std::string ConnectionError() const {
    const char* message = conn_ ? Pq().PQerrorMessage(conn_) : nullptr;
    std::string text = message && *message ? std::string(TrimAsciiSpace(message)) : "the connection was lost";
    for (char& c : text)
      if (c == '\n') c = ' ';
    return text;
  }
  StatusOr<std::string> Scalar(const std::string& sql) {
    auto q = Prepare(sql, false);
    if (!q->Step()) return IoError(display_ + ": " + (q->Done() ? "no answer to " + sql : error_));
    return q->Text(0);
  }

  std::string url_;
  std::string display_;
  bool for_reading_;
  PGconn* conn_ = nullptr;
  std::string error_;
  std::string sqlstate_;
};

bool PostgresQuery::Run() {
  if (!db_->Usable()) {
    state_ = State::kFailed;
    return false;
  }
  std::vector<const char*> values(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) values[i] = params_[i] ? params_[i]->c_str() : nullptr;
  const int n = static_cast<int>(values.size());
  if (!streaming_) {
    res_ = Pq().PQexecParams(db_->conn(), sql_.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0);
    const ExecStatusType st = Pq().PQresultStatus(res_);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      Fail(res_);
      return false;
    }
    state_ = State::kRows;
    return true;
  }
  if (!Pq().PQsendQueryParams(db_->conn(), sql_.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0) ||
      !Pq().PQsetSingleRowMode(db_->conn())) {
    db_->RememberConnection();
    state_ = State::kFailed;
    return false;
  }
  db_->streaming_ = this;
  state_ = State::kRows;
  return true;
}

void PostgresQuery::Fail(PGresult* res) {
  db_->Remember(res);
  state_ = State::kFailed;
}

bool PostgresQuery::NextStreamed() {
  if (res_) Pq().PQclear(res_);
  res_ = Pq().PQgetResult(db_->conn());
  row_ = 0;
  const ExecStatusType st = res_ ? Pq().PQresultStatus(res_) : PGRES_FATAL_ERROR;
  if (st == PGRES_SINGLE_TUPLE) return true;
  // The end of the rows (an empty PGRES_TUPLES_OK) or an error; then the
  // connection's results run out.
  if (st == PGRES_TUPLES_OK) state_ = State::kDone;
  else Fail(res_);
  for (PGresult* rest; (rest = Pq().PQgetResult(db_->conn())) != nullptr;) Pq().PQclear(rest);
  db_->streaming_ = nullptr;
  return false;
}

bool PostgresQuery::Step() {
  if (state_ == State::kReady && !Run()) return false;
  if (state_ != State::kRows) return false;
  if (streaming_) return NextStreamed();
  if (++row_ < Pq().PQntuples(res_)) return true;
  state_ = State::kDone;
  return false;
}

void PostgresQuery::Reset() {
  if (db_->streaming_ == this) {
    // Rows left unread: cancel the query and drain what the server still sends.
    if (PGcancel* cancel = Pq().PQgetCancel(db_->conn())) {
      char why[256];
      (void)Pq().PQcancel(cancel, why, sizeof why);
      Pq().PQfreeCancel(cancel);
    }
    for (PGresult* rest; (rest = Pq().PQgetResult(db_->conn())) != nullptr;) Pq().PQclear(rest);
    db_->streaming_ = nullptr;
  }
  if (res_) Pq().PQclear(res_);
  res_ = nullptr;
  row_ = -1;
  params_.clear();
  state_ = State::kReady;
}

}  // namespace

StatusOr<std::unique_ptr<Database>> OpenPostgres(const std::string& url, bool for_reading) {
  ASSIGN_OR_RETURN(g_libpq, LoadLibpq());
  auto db = std::make_unique<PostgresDatabase>(url, for_reading);
  RETURN_IF_ERROR(db->Connect());
  return std::unique_ptr<Database>(std::move(db));
}

}  // namespace gputriage
