// The SQL database under the run store: one small interface, two adapters.
// SQLite (sqlite_database.cc) is the default, one file per machine; PostgreSQL
// (postgres_database.cc, libpq) is the team store that recorders on many
// machines share. Each adapter is the only file that includes its library.
//
// The run store (run_store.cc) writes its SQL once for both: `?` placeholders,
// INSERT ... ON CONFLICT DO UPDATE, RETURNING, and each adapter's
// sample_row_id() for the samples table's insertion order. What differs beyond
// that (where the schema version lives, how migrators exclude each other, the
// physical integrity check) is behind the methods below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/status.h"

namespace gputriage {

/// A prepared statement. Bind (1-based), then Step() until it returns false,
/// then Done() says whether the rows ended at the last one rather than at an
/// error; Reset() makes it ready to run again with new bindings.
class Query {
 public:
  virtual ~Query() = default;
  /// Whether the statement was prepared (a false one fails every Step()).
  virtual bool ok() const = 0;
  virtual void Bind(int i, int64_t v) = 0;
  virtual void Bind(int i, double v) = 0;
  virtual void Bind(int i, const std::string& v) = 0;
  virtual void BindNull(int i) = 0;
  /// Runs the statement on the first call; true while a row is available.
  virtual bool Step() = 0;
  /// After Step() returned false: true when the statement ended well.
  virtual bool Done() const = 0;
  virtual void Reset() = 0;
  virtual int64_t Int(int col) const = 0;
  virtual double Real(int col) const = 0;
  virtual bool Null(int col) const = 0;
  virtual std::string Text(int col) const = 0;
};

class Database {
 public:
  virtual ~Database() = default;

  /// "sqlite" or "postgresql".
  virtual const char* kind() const = 0;
  /// The store as messages name it: the file's path, or the URL without its password.
  virtual const std::string& display_name() const = 0;
  /// The samples table's insertion-order column ("rowid" in SQLite, "id" in PostgreSQL).
  virtual const char* sample_row_id() const = 0;

  /// `streaming`: the rows are read one at a time as Step() asks for them
  /// (a run's samples: memory stays bounded); no other statement may run on this
  /// database until they are read. Otherwise the rows are all fetched at once.
  virtual std::unique_ptr<Query> Prepare(std::string_view sql, bool streaming = false) = 0;
  /// Runs one or more statements that return no rows.
  virtual Status Exec(const std::string& sql) = 0;
  /// The database's last error message.
  virtual std::string LastError() const = 0;
  /// Whether the last error says the store is damaged (a corrupt page), rather
  /// than unreachable or refused.
  virtual bool LastErrorIsDamage() const = 0;

  /// Starts a write transaction that excludes every other migrator of this
  /// store until COMMIT or ROLLBACK.
  virtual Status BeginMigration() = 0;
  /// The store's schema version: 0 for an empty database.
  virtual StatusOr<int64_t> SchemaVersion() = 0;
  /// Inside BeginMigration's transaction.
  virtual Status SetSchemaVersion(int64_t version) = 0;
  /// Whether the database holds tables that are not a gputriage store's
  /// (asked when its schema version is 0).
  virtual StatusOr<bool> HoldsOtherTables() = 0;
  /// The column names of `table`.
  virtual StatusOr<std::vector<std::string>> Columns(const std::string& table) = 0;
  /// The engine's own check of its pages; `problems` empty when it passes.
  virtual Status CheckPages(std::vector<std::string>* problems) = 0;
};

/// Whether `location` names a PostgreSQL store (postgresql:// or postgres://).
bool IsPostgresUrl(std::string_view location);

/// SQLite: the file at `path`, opened for recording (created with its
/// directory, WAL) or for reading only (never created or written).
StatusOr<std::unique_ptr<Database>> OpenSqlite(const std::string& path, bool for_reading);
/// Another program's SQLite file (an Nsight Systems export), read-only and
/// immutable: nothing is written or locked. Only queries make sense on it.
StatusOr<std::unique_ptr<Database>> OpenSqliteImmutable(const std::string& path);
/// PostgreSQL at `url` (libpq's URI form). For reading, the session is read-only.
StatusOr<std::unique_ptr<Database>> OpenPostgres(const std::string& url, bool for_reading);

}  // namespace gputriage
