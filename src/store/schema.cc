#include "src/store/schema.h"

#include <iterator>

#include "gputriage/metrics.h"

namespace gputriage {
namespace {

// SQLite's migrations: each brings a store from version N to N + 1; the
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

/// 4 → 5: the job's own phases outside its steps (checkpoint saves, evaluation,
/// compilation, restores), which the goodput ledger charges.
constexpr const char* kMigrationToVersion5 =
    "CREATE TABLE run_phases(run_id INTEGER NOT NULL REFERENCES runs(id), phase INTEGER NOT NULL,"
    " pid INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL);"
    "CREATE INDEX run_phases_by_run ON run_phases(run_id, start_ns);";

/// The same for PostgreSQL (version 4 → 5).
constexpr const char* kPostgresMigrationToVersion5 =
    "CREATE TABLE run_phases(run_id BIGINT NOT NULL REFERENCES runs(id), phase BIGINT NOT NULL,"
    " pid BIGINT NOT NULL, start_ns BIGINT NOT NULL, end_ns BIGINT NOT NULL);"
    "CREATE INDEX run_phases_by_run ON run_phases(run_id, start_ns);";

/// 5 → 6: a step's host-to-device copy phase (zero-code mode's .to()/.cuda()
/// hook, or gputriage_phase(GPUTRIAGE_PHASE_COPY)). Both kinds: the same SQL.
constexpr const char* kMigrationToVersion6 = "ALTER TABLE steps ADD COLUMN copy_ns BIGINT NOT NULL DEFAULT 0;";

/// 6 → 7: the GPU time of a step's forward, backward, optimizer and copy phases
/// (CUDA events at each phase's begin and end). Both kinds: the same SQL.
constexpr const char* kMigrationToVersion7 =
    "ALTER TABLE steps ADD COLUMN forward_device_ns BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN backward_device_ns BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN optimizer_device_ns BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN copy_device_ns BIGINT NOT NULL DEFAULT 0;";

/// 7 → 8: ranks. Where a step met its peers (its arrival at the first phase that
/// can hold a collective, and its release from the last), and who each marked
/// process was in the distributed run.
/// Both kinds: the same SQL.
constexpr const char* kMigrationToVersion8 =
    "ALTER TABLE steps ADD COLUMN sync_arrival_ns BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN sync_release_ns BIGINT NOT NULL DEFAULT 0;"
    "CREATE TABLE run_processes(run_id BIGINT NOT NULL REFERENCES runs(id), pid BIGINT NOT NULL,"
    " rank BIGINT NOT NULL DEFAULT -1, local_rank BIGINT NOT NULL DEFAULT -1, world_size BIGINT NOT NULL DEFAULT -1,"
    " host TEXT, source TEXT, PRIMARY KEY(run_id, pid));";

/// 8 → 9: a step's memory at its end (zero-code mode's sampler, docs/memory.md):
/// the host's resident set and high-water mark, the GPU the process used most
/// (-1 none) with its allocator's allocated, peak and reserved bytes, retries
/// and out-of-memory errors. Both kinds: the same SQL.
constexpr const char* kMigrationToVersion9 =
    "ALTER TABLE steps ADD COLUMN host_rss_bytes BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN host_rss_peak_bytes BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN memory_device BIGINT NOT NULL DEFAULT -1;"
    "ALTER TABLE steps ADD COLUMN device_allocated_bytes BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN device_peak_bytes BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN device_reserved_bytes BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN alloc_retries BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE steps ADD COLUMN alloc_ooms BIGINT NOT NULL DEFAULT 0;";

/// 3 → 4: each complete run's headline figures (step time, data wait, busy, ...),
/// written with its findings, so an experiment's history is judged without
/// re-reading every run's samples.
constexpr const char* kMigrationToVersion4 =
    "CREATE TABLE run_figures(run_id INTEGER NOT NULL REFERENCES runs(id), figure TEXT NOT NULL,"
    " value REAL NOT NULL, PRIMARY KEY(run_id, figure));";

/// A new PostgreSQL store: the version 4 schema in one step. Times and counts
/// are BIGINT (INTEGER is 32 bits there), values DOUBLE PRECISION (REAL is 4
/// bytes there). Samples are ordered by an identity column: a run's rows are
/// read back by its range of ids, through the (run_id, id) key, since
/// recorders on other machines insert theirs in between.
std::string PostgresVersion4() {
  std::string metric_columns;
  for (const char* c : kSampleColumnsV2) metric_columns += std::string(", \"") + c + "\" DOUBLE PRECISION";
  return "CREATE TABLE runs(id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name TEXT, command TEXT, host TEXT,"
         " status TEXT NOT NULL, started_ns BIGINT, ended_ns BIGINT, exit_code BIGINT, first_sample BIGINT,"
         " last_sample BIGINT, sample_count BIGINT NOT NULL DEFAULT 0);"
         "CREATE TABLE run_metadata(run_id BIGINT NOT NULL REFERENCES runs(id), key TEXT NOT NULL, value TEXT,"
         " PRIMARY KEY(run_id, key));"
         "CREATE TABLE devices(run_id BIGINT NOT NULL REFERENCES runs(id), device BIGINT NOT NULL, gpu_index BIGINT,"
         " uuid TEXT, pci_bus_id TEXT, name TEXT, driver_version TEXT, power_limit_w DOUBLE PRECISION,"
         " max_sm_clock_mhz DOUBLE PRECISION, memory_total_bytes BIGINT, mig_mode BIGINT, mig_instance BIGINT,"
         " mig_profile TEXT, job_use BIGINT NOT NULL DEFAULT 0, other_processes TEXT, PRIMARY KEY(run_id, device));"
         "CREATE TABLE samples(id BIGINT GENERATED ALWAYS AS IDENTITY, run_id BIGINT NOT NULL, device BIGINT NOT NULL,"
         " t_ns BIGINT NOT NULL" + metric_columns + ", PRIMARY KEY(run_id, id));"
         "CREATE TABLE steps(run_id BIGINT NOT NULL REFERENCES runs(id), step BIGINT NOT NULL, start_ns BIGINT NOT NULL,"
         " end_ns BIGINT NOT NULL, pid BIGINT NOT NULL DEFAULT 0, samples BIGINT NOT NULL DEFAULT 0,"
         " tokens BIGINT NOT NULL DEFAULT 0, flops DOUBLE PRECISION NOT NULL DEFAULT 0, data_ns BIGINT NOT NULL DEFAULT 0,"
         " forward_ns BIGINT NOT NULL DEFAULT 0, backward_ns BIGINT NOT NULL DEFAULT 0,"
         " optimizer_ns BIGINT NOT NULL DEFAULT 0, communication_ns BIGINT NOT NULL DEFAULT 0,"
         " checkpoint_ns BIGINT NOT NULL DEFAULT 0, other_ns BIGINT NOT NULL DEFAULT 0, device_ns BIGINT NOT NULL DEFAULT 0,"
         " PRIMARY KEY(run_id, step, start_ns));"
         "CREATE TABLE findings(run_id BIGINT NOT NULL REFERENCES runs(id), position BIGINT NOT NULL,"
         " verdict TEXT NOT NULL, severity TEXT NOT NULL, title TEXT, scope TEXT, PRIMARY KEY(run_id, position));"
         "CREATE TABLE run_figures(run_id BIGINT NOT NULL REFERENCES runs(id), figure TEXT NOT NULL,"
         " value DOUBLE PRECISION NOT NULL, PRIMARY KEY(run_id, figure));";
}

}  // namespace

SchemaMigration NextMigration(const std::string& kind, int64_t from) {
  if (kind == "postgresql") {
    if (from == 0) return {4, PostgresVersion4()};
    if (from == 4) return {5, kPostgresMigrationToVersion5};
    if (from == 5) return {6, kMigrationToVersion6};
    if (from == 6) return {7, kMigrationToVersion7};
    if (from == 7) return {8, kMigrationToVersion8};
    if (from == 8) return {9, kMigrationToVersion9};
    return {};
  }
  if (from == 0) return {1, kMigrations[0]};
  if (from == 1) return {2, MigrationToVersion2()};
  if (from == 2) return {3, kMigrationToVersion3};
  if (from == 3) return {4, kMigrationToVersion4};
  if (from == 4) return {5, kMigrationToVersion5};
  if (from == 5) return {6, kMigrationToVersion6};
  if (from == 6) return {7, kMigrationToVersion7};
  if (from == 7) return {8, kMigrationToVersion8};
  if (from == 8) return {9, kMigrationToVersion9};
  return {};
}
static_assert(kStoreSchemaVersion == 9, "a new schema version needs its migration, for each kind, in NextMigration()");

}  // namespace gputriage
