// The run store: every recorded run, its GPUs, samples, findings and settings,
// with a versioned schema and migrations (src/store/schema.h). By default one
// SQLite file per machine (WAL mode); given a postgresql:// URL, a PostgreSQL
// database that a team's recorders on many machines share. The SQL is written
// once, over the adapters in src/store/database.h.
//
// Crash safety: a run is inserted as "incomplete" when recording starts and
// marked "complete" when it ends; samples are written in transactions at most
// one second apart, so a kill -9 of the recorder leaves a consistent store whose
// run is marked incomplete and has lost at most the last second of samples.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

class Database;  // src/store/database.h
class Query;

struct RunInfo {
  int64_t id = 0;
  std::string name;
  std::string command;
  std::string host;
  std::string status;  // "incomplete", "complete"
  TimeNs started_ns = 0;
  TimeNs ended_ns = 0;
  std::optional<int> exit_code;
  int64_t samples = 0;
  int devices = 0;
  std::map<std::string, std::string> metadata;  // tags and settings (--tag k=v)
};

class RunStore {
 public:
  /// The schema version this build writes; older stores are migrated on open
  /// (src/store/schema.h: kStoreSchemaVersion).
  static constexpr int kSchemaVersion = 9;
  /// Reading commands also read stores this old, as they are (version 3 has no
  /// stored figures: they are worked out from the samples when asked for).
  static constexpr int kOldestReadableVersion = 3;

  /// $GPUTRIAGE_STORE, else $XDG_DATA_HOME/gputriage/runs.db, else ~/.local/share/gputriage/runs.db.
  static std::string DefaultPath();

  /// Opens for recording and migrates; safe when several recorders open a new
  /// store at once. `location` is a file path (created with its directory if
  /// needed) or a postgresql:// URL (the database must exist). A file or
  /// database that is not a gputriage store, or is newer than this build, is an error.
  static StatusOr<std::unique_ptr<RunStore>> Open(const std::string& location);
  /// Opens for reading only: never creates, migrates or writes anything (a
  /// read-only file or directory is fine; a PostgreSQL session is read-only).
  /// A missing store, another database, or a schema older or newer than this
  /// build's is an error that says so.
  static StatusOr<std::unique_ptr<RunStore>> OpenForReading(const std::string& location);
  /// The engine's check of its pages (SQLite's integrity check), then the
  /// store's own: every run's status, and each run's samples inside its recorded
  /// range and adding up to its recorded count. `problems` is empty when it
  /// passes. Reads every row: for `runs --check`, not for every listing.
  Status CheckIntegrity(std::vector<std::string>* problems);
  ~RunStore();

  /// Starts a run (status "incomplete") and returns its id.
  StatusOr<int64_t> BeginRun(const RunInfo& info);
  /// Records the GPUs of a run as the recording knows them (call again when new ones appear).
  Status PutDevices(int64_t run, const MetricSet& metrics);
  /// Buffers one sample; written by Flush() or automatically once a second.
  /// While the store cannot be written (a team store's server down), rows wait
  /// for the next Flush(), at most kMaxPendingRows of them: past that the oldest
  /// are dropped and counted (dropped_rows()), so memory stays bounded.
  void AddSample(int64_t run, size_t device, Metric metric, TimeNs t, double value);
  /// About 20 minutes of 8 GPUs sampled at 10 Hz; 27 MB.
  static constexpr size_t kMaxPendingRows = 100'000;
  /// Sample rows dropped because the store could not take them in time.
  int64_t dropped_rows() const { return dropped_rows_; }
  /// Writes buffered samples in one transaction.
  Status Flush();
  /// Records training steps (step markers, a trace's ProfilerStep spans) of a run.
  Status PutSteps(int64_t run, const std::vector<MarkedStep>& steps);
  /// The job's phases outside its steps (step markers), at the run's end.
  Status PutRunPhases(int64_t run, const std::vector<RunPhase>& phases);
  /// Who each marked process was (rank, local rank, world size, host).
  Status PutProcessRanks(int64_t run, const std::vector<ProcessRank>& ranks);
  /// Marks the run complete with its end, exit code, findings and headline
  /// figures (src/verdicts/compare.h: step_time_ms, data_wait_percent, ...), in one transaction.
  /// Removes a run that recorded nothing (its command never started): its row and metadata.
  Status DiscardRun(int64_t run);
  Status EndRun(int64_t run, TimeNs ended_ns, std::optional<int> exit_code, const std::vector<Finding>& findings,
                const std::map<std::string, double>& figures = {});
  /// Adds or replaces settings of a run (what the job reported about itself:
  /// its DataLoader, optimizer, precision, versions).
  Status PutSettings(int64_t run, const std::map<std::string, std::string>& settings);

  StatusOr<std::vector<RunInfo>> ListRuns();
  /// Rebuilds a stored run as a Recording (devices, facts, every sample).
  StatusOr<Recording> LoadRun(int64_t run);
  /// A run's steps (step markers), in start order.
  StatusOr<std::vector<MarkedStep>> LoadSteps(int64_t run);
  /// Empty for stores written before run phases were kept (version < 5).
  StatusOr<std::vector<RunPhase>> LoadRunPhases(int64_t run);
  StatusOr<std::vector<ProcessRank>> LoadProcessRanks(int64_t run);
  /// A run's settings and context: workload, price_per_gpu_hour, interval_s,
  /// tag.KEY, git_commit, cwd, ...
  StatusOr<std::map<std::string, std::string>> LoadSettings(int64_t run);
  /// A run's headline figures as EndRun stored them; empty for a run that is
  /// incomplete or was kept by an older gputriage (version 3 store).
  StatusOr<std::map<std::string, double>> LoadFigures(int64_t run);
  /// A run's stored findings: verdict, severity, title and scope.
  StatusOr<std::vector<Finding>> LoadFindings(int64_t run);
  /// Every sample of a run in (metric, device, time) order, with its device as
  /// LoadRun builds it (for export). Unknown metrics are skipped.
  Status ForEachSample(int64_t run,
                       const std::function<void(const MetricDevice& device, Metric metric, TimeNs t, double value)>& fn);

  /// The store as messages name it: its file, or its URL without the password.
  const std::string& path() const { return path_; }
  /// "sqlite" or "postgresql".
  const char* kind() const;

 private:
  explicit RunStore(std::unique_ptr<Database> db);
  Status Migrate();
  /// Ok when `statement`'s rows ended at the last one; otherwise a damaged
  /// store, or one that could not be read, naming `what` was being done.
  Status ReadEnd(const Query& statement, const char* what) const;
  /// `what` failed, with the database's message.
  Status Failed(const char* what) const;
  /// Failed(what), after rolling the open transaction back.
  Status Rollback(const char* what);
  Status CheckSampleColumns();

  std::unique_ptr<Database> db_;
  int64_t version_ = 0;  // the schema version of the open store
  std::string path_;
  /// One device's values at one time: a samples row.
  struct PendingRow {
    int64_t run;
    int64_t device;
    TimeNs t;
    uint64_t present;  // bit m: values[m] was given
    std::array<double, kNumMetrics> values;
  };
  static_assert(kNumMetrics <= 64);
  std::vector<PendingRow> pending_;
  int64_t dropped_rows_ = 0;
  int64_t last_flush_ms_ = 0;
};

}  // namespace gputriage
