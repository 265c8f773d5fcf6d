// The run store's schema and its migrations, for each database kind.
//
// SQLite stores have existed since version 1 and are migrated step by step.
// PostgreSQL stores start at version 4 (the first with a team store): a new
// database gets the version 4 tables at once, with PostgreSQL's types
// (BIGINT, DOUBLE PRECISION, an identity column for the samples' order). A
// later version adds one migration for each kind (the static_assert in
// schema.cc says when).
#pragma once

#include <cstdint>
#include <string>

namespace gputriage {

/// The store's schema version this build writes.
inline constexpr int kStoreSchemaVersion = 9;

struct SchemaMigration {
  int64_t to = 0;   // the version the SQL brings the store to; 0: none known
  std::string sql;  // run inside one transaction
};

/// The migration that starts from `from` for a database of `kind` ("sqlite" or
/// "postgresql"); `to` is 0 when there is none (a version this kind never had).
SchemaMigration NextMigration(const std::string& kind, int64_t from);

/// The tables of a version `kStoreSchemaVersion` store.
inline constexpr const char* kStoreTables[] = {"runs",  "run_metadata", "devices",    "samples",
                                               "steps", "findings",     "run_figures"};

}  // namespace gputriage
