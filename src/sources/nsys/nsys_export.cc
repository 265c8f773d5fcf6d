#include "src/sources/nsys/nsys_export.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "src/model/event_streams.h"
#include "src/store/database.h"
#include "src/util/decimal.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

constexpr std::string_view kSqliteMagic("SQLite format 3\0", 16);
constexpr std::string_view kReportMagic = "NVIDIA Tegra Profiler Report";  // .nsys-rep and .qdrep alike

// nsys serializes a process and thread as one GlobalId: the pid in bits 24-47,
// the tid in bits 0-23 (its documentation's `(globalTid >> 24) & 0xFFFFFF`).
uint32_t PidOf(int64_t global_id) { return static_cast<uint32_t>((global_id >> 24) & 0xFFFFFF); }
int64_t TidOf(int64_t global_id) { return global_id & 0xFFFFFF; }

// Values an export holds where ours are narrower, or sums could overflow: kept
// when they fit, else the "not recorded" value (an export nsys wrote never
// comes near these bounds; a damaged or hand-made one may).
int32_t Narrow32(int64_t v, int32_t unknown = -1) {
  return v >= INT32_MIN && v <= INT32_MAX ? static_cast<int32_t>(v) : unknown;
}
uint32_t Dimension(int64_t v) { return v >= 0 && v <= INT32_MAX ? static_cast<uint32_t>(v) : 0; }
int32_t SharedMemory(int64_t static_bytes, int64_t dynamic_bytes) {
  if (static_bytes < 0 || dynamic_bytes < 0 || static_bytes > INT32_MAX || dynamic_bytes > INT32_MAX) return -1;
  return Narrow32(static_bytes + dynamic_bytes);
}
// Times within ±2^62 ns (146 years) of the session's start, and the start
// itself within 2^62 ns of 1970: their sum cannot overflow.
constexpr int64_t kMaxTimeNs = int64_t{1} << 62;

// ENUM_CUDA_MEMCPY_OPER.
MemoryOpKind CopyKind(int64_t kind) {
  switch (kind) {
    case 1: case 11: return MemoryOpKind::kMemcpyHtoD;
    case 2: case 12: return MemoryOpKind::kMemcpyDtoH;
    case 8: case 13: return MemoryOpKind::kMemcpyDtoD;
    case 9: return MemoryOpKind::kMemcpyHtoH;
    case 10: return MemoryOpKind::kMemcpyPtoP;
    default: return MemoryOpKind::kMemcpyOther;
  }
}

// ENUM_CUPTI_SYNC_TYPE, in Kineto's cuda_sync names.
const char* SyncName(int64_t type) {
  switch (type) {
    case 1: return "Event Sync";
    case 2: return "Stream Wait Event";
    case 3: return "Stream Sync";
    case 4: return "Context Sync";
    default: return "Sync";
  }
}

/// The export's tables and their columns, read by name.
class Export {
 public:
  static StatusOr<Export> Open(const std::string& path) {
    Export out;
    out.path_ = path;
    ASSIGN_OR_RETURN(out.db_, OpenSqliteImmutable(path));
    auto q = out.db_->Prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')");
    while (q->Step()) out.tables_.insert(q->Text(0));
    if (!q->Done()) return DataLossError(path + ": cannot list its tables: " + out.db_->LastError());
    return out;
  }
  bool Has(const std::string& table) const { return tables_.count(table) > 0; }
  const std::set<std::string>& Columns(const std::string& table) {
    auto [it, added] = columns_.try_emplace(table);
    if (added) {
      auto cols = db_->Columns(table);
      if (cols.ok()) it->second.insert(cols->begin(), cols->end());
    }
    return it->second;
  }
  /// `alias.column` when `table` has the column, else `fallback` (an SQL expression).
  std::string Col(const std::string& table, const char* alias, const char* column, const char* fallback = "NULL") {
    return Columns(table).count(column) ? fmt::format("{}.{}", alias, column) : std::string(fallback);
  }
  /// Runs `sql`, handing each row to `row`; a damaged file ends with an error naming the table.
  template <typename Fn>
  Status Rows(const std::string& table, const std::string& sql, Fn&& row) {
    auto q = db_->Prepare(sql, /*streaming=*/true);
    if (!q->ok()) return DataLossError(fmt::format("{}: table {}: {}", path_, table, db_->LastError()));
    while (q->Step()) row(*q);
    if (!q->Done())
      return DataLossError(fmt::format("{}: table {} could not be read to its end: {}", path_, table, db_->LastError()));
    return Status::Ok();
  }
  const std::string& path() const { return path_; }

  /// A StringIds entry ("" for none): names are looked up once per id, not
  /// joined into every event row (a kernel's name repeats thousands of times).
  std::string StringOf(int64_t id) {
    if (!string_query_) string_query_ = db_->Prepare("SELECT value FROM StringIds WHERE id = ?");
    if (!string_query_->ok()) return "";
    string_query_->Reset();
    string_query_->Bind(1, id);
    std::string value = string_query_->Step() ? string_query_->Text(0) : std::string();
    string_query_->Reset();
    return value;
  }

 private:
  std::unique_ptr<Database> db_;
  std::unique_ptr<Query> string_query_;
  std::string path_;
  std::set<std::string> tables_;
  std::map<std::string, std::set<std::string>> columns_;
};

/// Reads one export into a recording per process.
class NsysReader {
 public:
  NsysReader(Export& db, const NsysReadOptions& options) : db_(db), options_(options) {}

  StatusOr<std::vector<Recording>> Read() {
    if (!db_.Has("StringIds"))
      return UnimplementedError(db_.path() + ": a SQLite database, but not an Nsight Systems export (it has no "
                                             "StringIds table); export a report with `nsys export --type sqlite`");
    RETURN_IF_ERROR(CheckPages());
    RETURN_IF_ERROR(ShareBudget());
    RETURN_IF_ERROR(ReadSession());
    RETURN_IF_ERROR(ReadDevices());
    RETURN_IF_ERROR(ReadKernels());
    RETURN_IF_ERROR(ReadMemoryOps("CUPTI_ACTIVITY_KIND_MEMCPY", /*memset=*/false));
    RETURN_IF_ERROR(ReadMemoryOps("CUPTI_ACTIVITY_KIND_MEMSET", /*memset=*/true));
    RETURN_IF_ERROR(ReadSyncs());
    RETURN_IF_ERROR(ReadRuntime());
    RETURN_IF_ERROR(ReadOsRuntime());
    RETURN_IF_ERROR(ReadCpuSamples());
    RETURN_IF_ERROR(ReadNvtx());
    RETURN_IF_ERROR(ReadDiagnostics());
    return Finish();
  }

  /// nsys's own account of what it lost (`DIAGNOSTIC_EVENT`: "Number of incomplete
  /// CUPTI events dropped: 24806", buffers that overflowed): said in every
  /// recording, beside the analysis's count of launches without records.
  Status ReadDiagnostics() {
    const std::string t = "DIAGNOSTIC_EVENT";
    if (!db_.Has(t)) return Status::Ok();
    return db_.Rows(t,
                    "SELECT " + db_.Col(t, "d", "text", "''") + " FROM " + t +
                        " d WHERE lower(" + db_.Col(t, "d", "text", "''") +
                        ") LIKE '%dropped%' OR lower(" + db_.Col(t, "d", "text", "''") + ") LIKE '%lost%' LIMIT 20",
                    [&](Query& q) {
                      const std::string text = q.Text(0);
                      // "... dropped: 0." says nothing was lost.
                      if (text.find("dropped: 0.") == std::string::npos && text.find("dropped: \t0.") == std::string::npos)
                        diagnostics_.push_back(text.substr(0, 300));
                    });
  }

 private:
  /// One process's recording while it is read: its events go to time-ordered
  /// streams under its share of the memory budget (a multi-GB export of many
  /// ranks is read in bounded memory, like a large trace).
  struct CallName {
    NameId name = 0;
    RuntimeCallKind kind = RuntimeCallKind::kOther;
    bool driver_api = false;
  };
  struct Process {
    Recording rec;
    std::shared_ptr<EventStreams> streams;
    int64_t gpu_events = 0;  // kernels, copies, memsets and CUDA calls: what makes a process a rank
    int64_t device_work = 0;  // kernels, copies and memsets alone
    int64_t nccl_ranges = 0;  // NCCL's NVTX ranges: a communicator's member, with work or not
    int64_t events = 0;      // every event and step kept
    std::unordered_map<int64_t, NameId> names_by_string_id;
    std::unordered_map<int64_t, CallName> calls_by_string_id;
    std::set<int64_t> cuda_threads;  // threads that made CUDA calls: whose OS calls are read
  };

  /// A CUDA runtime or driver call's name as nsys writes it ("cudaLaunchKernel_v7000"),
  /// classified once per name.
  CallName CallNameFrom(Process& p, std::string name) {
    // nsys names runtime calls with their ABI version: the suffix is dropped.
    if (const size_t v = name.rfind("_v"); v != std::string::npos && v + 2 < name.size() &&
                                           name.find_first_not_of("0123456789", v + 2) == std::string::npos)
      name.resize(v);
    CallName out;
    out.kind = RuntimeCallKindOfName(name);
    out.driver_api = StartsWith(name, "cu") && !StartsWith(name, "cuda");
    out.name = p.rec.names.Intern(name);
    return out;
  }
  const CallName& CallNameOf(Process& p, const Query& q, int col) {
    const int64_t id = q.Null(col) ? -1 : q.Int(col);
    auto [it, added] = p.calls_by_string_id.try_emplace(id);
    if (added) it->second = CallNameFrom(p, id < 0 ? std::string() : db_.StringOf(id));
    return it->second;
  }

  /// The name a StringIds id stands for, in the process's name table; column
  /// `col` of `q` is the id, NULL where the row has none.
  NameId NameOfStringId(Process& p, const Query& q, int col) {
    if (q.Null(col)) return p.rec.names.Intern("");
    const int64_t id = q.Int(col);
    auto [it, added] = p.names_by_string_id.try_emplace(id, 0);
    if (added) it->second = p.rec.names.Intern(db_.StringOf(id));
    return it->second;
  }
  /// A name column as a StringIds id: NULL where it holds none (a text, or nothing).
  static std::string StringIdColumn(const std::string& expression) {
    return fmt::format("CASE WHEN typeof({0}) = 'integer' THEN {0} END", expression);
  }

  Process& For(uint32_t pid) {
    auto [it, added] = by_pid_.try_emplace(pid);
    if (added) {
      Process& p = it->second;
      p.rec.source_path = db_.path();
      p.rec.format = "nsys";
      p.rec.clock_is_absolute = absolute_;
      p.streams = std::make_shared<EventStreams>(process_budget_, options_.scratch_directory);
    }
    return it->second;
  }
  /// Adds an event to a process's stream, keeping the first error (a full scratch disk).
  template <typename T, typename Less>
  void Add(Process& p, SortedSpill<T, Less>& stream, const T& item, bool gpu_event) {
    if (Status s = stream.Add(item); !s.ok() && first_error_.ok()) first_error_ = std::move(s);
    ++p.events;
    if (gpu_event) ++p.gpu_events;
  }

  /// Each process with CUDA contexts gets an equal share of the budget (the
  /// export's own list of them; one where it has none).
  Status ShareBudget() {
    const std::string t = "TARGET_INFO_CUDA_CONTEXT_INFO";
    int64_t processes = 1;
    if (db_.Has(t) && db_.Columns(t).count("processId"))
      RETURN_IF_ERROR(db_.Rows(t, "SELECT count(DISTINCT processId) FROM " + t,
                               [&](Query& q) { processes = std::max<int64_t>(1, q.Int(0)); }));
    const size_t budget = options_.memory_budget_bytes;
    process_budget_ = std::max(budget / static_cast<size_t>(std::min<int64_t>(processes, 1 << 16)),
                               std::min(budget, kMinTraceMemoryBudget));
    return Status::Ok();
  }

  /// SQLite's own check of every page (a damaged export must not read as a
  /// shorter one: a page no query reaches would otherwise go unnoticed).
  Status CheckPages() {
    std::string verdict;
    RETURN_IF_ERROR(db_.Rows("(pages)", "PRAGMA quick_check(1)", [&](Query& q) { verdict = q.Text(0); }));
    if (verdict != "ok")
      return DataLossError(fmt::format("{}: the export is damaged (SQLite's page check: {})", db_.path(), verdict));
    return Status::Ok();
  }

  /// The session's wall-clock start: export times are ns from it.
  Status ReadSession() {
    if (!db_.Has("TARGET_INFO_SESSION_START_TIME")) return Status::Ok();
    return db_.Rows("TARGET_INFO_SESSION_START_TIME",
                    "SELECT " + db_.Col("TARGET_INFO_SESSION_START_TIME", "t", "utcEpochNs") +
                        " FROM TARGET_INFO_SESSION_START_TIME t LIMIT 1",
                    [&](Query& q) {
                      if (!q.Null(0) && q.Int(0) > 0 && q.Int(0) < kMaxTimeNs) {
                        shift_ = q.Int(0);
                        absolute_ = true;
                      }
                    });
  }

  Status ReadDevices() {
    const std::string t = "TARGET_INFO_GPU";
    if (!db_.Has(t)) return Status::Ok();
    const std::string sql = fmt::format(
        "SELECT {}, {}, {}, {}, {}, {}, {}, {}, {} FROM {} g", db_.Col(t, "g", "cuDevice", "g.id"), db_.Col(t, "g", "name", "''"),
        db_.Col(t, "g", "smCount", "0"), db_.Col(t, "g", "totalMemory", "0"), db_.Col(t, "g", "computeMajor", "-1"),
        db_.Col(t, "g", "computeMinor", "-1"), db_.Col(t, "g", "threadsPerWarp", "0"),
        db_.Col(t, "g", "maxWarpsPerSm", "0"), db_.Col(t, "g", "maxShmemPerSm", "0"), t);
    return db_.Rows(t, sql, [&](Query& q) {
      Device d;
      d.id = Narrow32(q.Int(0));
      d.name = q.Text(1);
      d.vendor = Vendor::kNvidia;
      d.num_sms = std::max(0, Narrow32(q.Int(2), 0));
      d.total_memory_bytes = std::max<int64_t>(0, q.Int(3));
      d.compute_major = Narrow32(q.Int(4));
      d.compute_minor = Narrow32(q.Int(5));
      d.warp_size = std::max(0, Narrow32(q.Int(6), 0));
      const int64_t warps = q.Int(7);
      d.max_threads_per_sm = warps > 0 && warps <= 1 << 16 ? Narrow32(warps * d.warp_size, 0) : 0;
      d.shared_memory_per_sm_bytes = std::max(0, Narrow32(q.Int(8), 0));
      devices_.push_back(std::move(d));
    });
  }

  /// An SQL expression, 1 where a row's times can be used: integers within
  /// 2^62 ns of the session's start, the end not before the start. Selected as
  /// the last column of each event query (one pass over the table: the other
  /// rows are counted and said there; an export nsys wrote has none).
  /// `end`: the column that ends the row's span ("start" for an instant, a sample).
  static std::string ValidTimes(const char* alias, const char* end = "end") {
    return fmt::format(
        "(typeof({0}.start) = 'integer' AND typeof({0}.{2}) = 'integer' AND {0}.{2} >= {0}.start AND "
        "{0}.start >= -{1} AND {0}.{2} <= {1})",
        alias, kMaxTimeNs, end);
  }
  /// db_.Rows over events whose column `valid` is ValidTimes: `row` gets the
  /// usable ones, and the process they belong to has the row counted as seen.
  template <typename Fn>
  Status EventRows(const std::string& table, const std::string& sql, int valid, Fn&& row) {
    int64_t invalid = 0;
    RETURN_IF_ERROR(db_.Rows(table, sql, [&](Query& q) {
      if (q.Int(valid) == 0) {
        ++invalid;
        return;
      }
      row(q);
    }));
    if (!first_error_.ok()) return first_error_;
    if (invalid > 0)
      Unreadable(table, fmt::format("{} rows whose start or end is not an integer time (within 2^62 ns of the "
                                    "session's start), or that end before they start: left out",
                                    invalid));
    return Status::Ok();
  }

  /// The kernels' names: the demangled name where the export has it (a StringIds id).
  std::string KernelNameColumn(const std::string& t) {
    for (const char* c : {"demangledName", "shortName", "name"})
      if (db_.Columns(t).count(c)) return StringIdColumn(fmt::format("k.{}", c));
    return "NULL";
  }

  Status ReadKernels() {
    const std::string t = "CUPTI_ACTIVITY_KIND_KERNEL";
    if (!db_.Has(t)) {
      missing_.push_back("CUDA kernels (" + t + "; record with --trace=cuda)");
      return Status::Ok();
    }
    const std::string sql = fmt::format(
        "SELECT k.start, k.end, k.deviceId, k.streamId, {}, {}, {}, k.gridX, k.gridY, k.gridZ, k.blockX, "
        "k.blockY, k.blockZ, {}, {}, {}, {} FROM {} k",
        db_.Col(t, "k", "correlationId", "-1"), db_.Col(t, "k", "globalPid", "0"), KernelNameColumn(t),
        db_.Col(t, "k", "registersPerThread", "-1"), db_.Col(t, "k", "staticSharedMemory", "0"),
        db_.Col(t, "k", "dynamicSharedMemory", "0"), ValidTimes("k"), t);
    return EventRows(t, sql, 16, [&](Query& q) {
      Process& p = For(PidOf(q.Int(5)));
      KernelActivity k;
      k.time = {q.Int(0) + shift_, q.Int(1) + shift_};
      k.device = Narrow32(q.Int(2));
      k.stream = Narrow32(q.Int(3));
      k.correlation = q.Null(4) ? -1 : q.Int(4);
      k.name = NameOfStringId(p, q, 6);
      for (int i = 0; i < 3; ++i) {
        k.grid[i] = Dimension(q.Int(7 + i));
        k.block[i] = Dimension(q.Int(10 + i));
      }
      k.registers_per_thread = Narrow32(q.Int(13));
      k.shared_memory_bytes = SharedMemory(q.Int(14), q.Int(15));
      k.blocks_per_sm = BlocksPerSm(k);
      Add(p, p.streams->kernels, k, /*gpu_event=*/true);
      ++p.device_work;
    });
  }

  /// The kernel's thread blocks over its GPU's SMs, as Kineto's "blocks per SM"
  /// (torch-tb-profiler's SM efficiency caps it at 1): the export holds the grid
  /// and TARGET_INFO_GPU the SM count; not recorded where either is missing.
  float BlocksPerSm(const KernelActivity& k) const {
    for (const Device& d : devices_) {
      if (d.id != k.device || d.num_sms <= 0) continue;
      const double blocks = static_cast<double>(k.grid[0]) * k.grid[1] * k.grid[2];
      return blocks > 0 ? static_cast<float>(blocks / d.num_sms) : kNotRecorded;
    }
    return kNotRecorded;
  }

  /// A copy's memory kind column as 1 (pageable), 2 (pinned) or -1, by the
  /// export's own ENUM_CUDA_MEM_KIND names (its ids are nsys's, not CUPTI's:
  /// 0 is pageable there); -1 where the export lacks the column or the table.
  std::string HostMemoryKind(const std::string& t, const char* column) {
    if (!db_.Has("ENUM_CUDA_MEM_KIND")) return "-1";
    const std::string kind = db_.Col(t, "m", column, "NULL");
    return fmt::format(
        "CASE (SELECT e.name FROM ENUM_CUDA_MEM_KIND e WHERE e.id = {}) WHEN 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE' "
        "THEN 1 WHEN 'CUDA_MEMOPR_MEMORY_KIND_PINNED' THEN 2 ELSE -1 END",
        kind);
  }

  /// Copies (`CUPTI_ACTIVITY_KIND_MEMCPY`, their direction from `copyKind`) or
  /// memsets (`…_MEMSET`).
  Status ReadMemoryOps(const std::string& t, bool memset) {
    if (!db_.Has(t)) return Status::Ok();
    const std::string sql = fmt::format(
        "SELECT m.start, m.end, m.deviceId, m.streamId, {}, {}, {}, {}, {}, {}, {} FROM {} m",
        db_.Col(t, "m", "correlationId", "-1"), db_.Col(t, "m", "globalPid", "0"), db_.Col(t, "m", "bytes", "-1"),
        memset ? "0" : db_.Col(t, "m", "copyKind", "0"), ValidTimes("m"), memset ? "-1" : HostMemoryKind(t, "srcKind"),
        memset ? "-1" : HostMemoryKind(t, "dstKind"), t);
    return EventRows(t, sql, 8, [&](Query& q) {
      MemoryActivity m;
      m.time = {q.Int(0) + shift_, q.Int(1) + shift_};
      m.device = Narrow32(q.Int(2));
      m.stream = Narrow32(q.Int(3));
      m.correlation = q.Null(4) ? -1 : q.Int(4);
      m.bytes = q.Int(6);
      m.kind = memset ? MemoryOpKind::kMemset : CopyKind(q.Int(7));
      // Pageable (1) or pinned (2), from HostMemoryKind; the host side is the
      // source of a copy to the device and the destination of one back.
      const int64_t host_kind = m.kind == MemoryOpKind::kMemcpyHtoD ? q.Int(9)
                                : m.kind == MemoryOpKind::kMemcpyDtoH ? q.Int(10)
                                                                      : -1;
      m.host_memory = host_kind == 1 ? HostMemory::kPageable : host_kind == 2 ? HostMemory::kPinned : HostMemory::kUnknown;
      Process& p = For(PidOf(q.Int(5)));
      Add(p, p.streams->memory_ops, m, /*gpu_event=*/true);
      ++p.device_work;
    });
  }

  Status ReadSyncs() {
    const std::string t = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
    if (!db_.Has(t)) return Status::Ok();
    const std::string sql = fmt::format(
        "SELECT s.start, s.end, {}, {}, {}, {}, {} FROM {} s",
        db_.Col(t, "s", "deviceId", "-1"), db_.Col(t, "s", "streamId", "-1"),
        db_.Col(t, "s", "syncType", db_.Col(t, "s", "deprecatedSyncType", "0").c_str()), db_.Col(t, "s", "globalPid", "0"),
        ValidTimes("s"), t);
    return EventRows(t, sql, 6, [&](Query& q) {
      Process& p = For(PidOf(q.Int(5)));
      SyncActivity s;
      s.time = {q.Int(0) + shift_, q.Int(1) + shift_};
      s.device = Narrow32(q.Int(2));
      s.stream = Narrow32(q.Int(3));
      s.name = p.rec.names.Intern(SyncName(q.Int(4)));
      Add(p, p.streams->syncs, s, /*gpu_event=*/false);
    });
  }

  Status ReadRuntime() {
    const std::string t = "CUPTI_ACTIVITY_KIND_RUNTIME";
    if (!db_.Has(t)) {
      missing_.push_back("CUDA API calls (" + t + "; launch delays and host-bound launches need them)");
      return Status::Ok();
    }
    const std::string sql = fmt::format(
        "SELECT r.start, r.end, r.globalTid, {}, {}, {} FROM {} r", db_.Col(t, "r", "correlationId", "-1"),
        StringIdColumn("r.nameId"), ValidTimes("r"), t);
    return EventRows(t, sql, 5, [&](Query& q) {
      const int64_t global_tid = q.Int(2);
      Process& p = For(PidOf(global_tid));
      RuntimeCall c;
      c.time = {q.Int(0) + shift_, q.Int(1) + shift_};
      c.thread = TidOf(global_tid);
      c.correlation = q.Null(3) ? -1 : q.Int(3);
      const CallName& name = CallNameOf(p, q, 4);
      c.name = name.name;
      c.kind = name.kind;
      c.driver_api = name.driver_api;
      p.cuda_threads.insert(c.thread);
      Add(p, p.streams->runtime_calls, c, /*gpu_event=*/true);
    });
  }

  /// The process of a thread (an nsys GlobalId) that made CUDA calls, else null:
  /// only those threads' OS calls and CPU samples are read.
  Process* CudaThreadsProcess(int64_t global_tid) {
    auto it = by_pid_.find(PidOf(global_tid));
    if (it == by_pid_.end() || it->second.cuda_threads.count(TidOf(global_tid)) == 0) return nullptr;
    return &it->second;
  }

  /// OS runtime calls (--trace=osrt) on the threads that made CUDA calls: where
  /// such a thread was inside the OS (a lock, a condition variable, a pipe, a
  /// file) when it was not launching work. The outermost call of a nest only.
  Status ReadOsRuntime() {
    const std::string t = "OSRT_API";
    if (!db_.Has(t)) return Status::Ok();
    os_runtime_traced_ = true;
    const std::string sql =
        fmt::format("SELECT o.start, o.end, o.globalTid, {}, {}, {} FROM {} o", StringIdColumn("o.nameId"),
                    db_.Col(t, "o", "nestingLevel", "0"), ValidTimes("o"), t);
    return EventRows(t, sql, 5, [&](Query& q) {
      if (!q.Null(4) && q.Int(4) != 0) return;  // nested in another traced call
      Process* p = CudaThreadsProcess(q.Int(2));
      if (p == nullptr) return;
      const OsCall call{{q.Int(0) + shift_, q.Int(1) + shift_}, NameOfStringId(*p, q, 3), TidOf(q.Int(2))};
      Add(*p, p->streams->os_calls, call, /*gpu_event=*/false);
    });
  }

  /// CPU samples (--sample=cpu) of the threads that made CUDA calls: the
  /// innermost frame of each, where the thread was running (not waiting).
  Status ReadCpuSamples() {
    const std::string t = "COMPOSITE_EVENTS", chains = "SAMPLING_CALLCHAINS";
    if (!db_.Has(t) || !db_.Has(chains)) return Status::Ok();
    cpu_sampled_ = true;
    // 1: Running (ENUM_SAMPLING_THREAD_STATE); a sample without a state was running.
    const std::string sql = fmt::format(
        "SELECT c.start, c.start, c.globalTid, {}, {}, {}, {} FROM {} c LEFT JOIN {} s ON s.id = c.id AND "
        "s.stackDepth = 0",
        StringIdColumn("s.symbol"), StringIdColumn("s.module"), db_.Col(t, "c", "threadState", "1"),
        ValidTimes("c", "start"), t, chains);
    return EventRows(t, sql, 6, [&](Query& q) {
      if (!q.Null(5) && q.Int(5) != 1) return;
      Process* p = CudaThreadsProcess(q.Int(2));
      if (p == nullptr) return;
      const TimeNs at = q.Int(0) + shift_;
      const CpuSample sample{{at, at}, NameOfStringId(*p, q, 3), NameOfStringId(*p, q, 4), TidOf(q.Int(2))};
      Add(*p, p->streams->cpu_samples, sample, /*gpu_event=*/false);
    });
  }

  /// The regex NVTX step ranges are named by: the user's, else the names PyTorch,
  /// Megatron and NeMo write.
  StatusOr<std::regex> StepPattern() const {
    try {
      return std::regex(options_.step_range_regex.empty()
                            ? std::string(R"(^(?:ProfilerStep#|[Ii]teration[ _#]?|[Ss]tep[ _#]?|train_step[ _#]?)(\d+)$)")
                            : options_.step_range_regex,
                        std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return InvalidArgumentError("--step-range: not a regular expression: " + std::string(e.what()));
    }
  }

  /// (pid, domainId) of each NVTX domain named "NCCL": NCCL's own ranges, one per
  /// collective call on the host (a domain's id is its process's).
  StatusOr<std::set<std::pair<uint32_t, int64_t>>> NcclDomains(const std::string& text, const std::string& join) {
    std::set<std::pair<uint32_t, int64_t>> out;
    const std::string t = "NVTX_EVENTS";
    if (!db_.Columns(t).count("domainId")) return out;
    // 75: NvtxDomainCreate, its text the domain's name.
    RETURN_IF_ERROR(db_.Rows(t,
                             fmt::format("SELECT n.globalTid, n.domainId FROM {} n{} WHERE n.eventType = 75 AND {} = "
                                         "'NCCL' AND n.domainId IS NOT NULL",
                                         t, join, text),
                             [&](Query& q) { out.emplace(PidOf(q.Int(0)), q.Int(1)); }));
    return out;
  }

  /// NVTX ranges: user annotations, the steps where their names say so, and
  /// NCCL's collective calls.
  Status ReadNvtx() {
    const std::string t = "NVTX_EVENTS";
    if (!db_.Has(t)) return Status::Ok();
    const auto& cols = db_.Columns(t);
    const std::string text = cols.count("textId") ? "COALESCE(n.text, s.value)" : "n.text";
    const std::string join = cols.count("textId") ? " LEFT JOIN StringIds s ON s.id = n.textId" : "";
    ASSIGN_OR_RETURN(const auto nccl_domains, NcclDomains(text, join));
    ASSIGN_OR_RETURN(const std::regex step_pattern, StepPattern());
    // 59: NvtxPushPopRange, 60: NvtxStartEndRange (ENUM_NSYS_EVENT_TYPE); marks have no end.
    const std::string sql = fmt::format(
        "SELECT n.start, n.end, n.globalTid, {}, {}, {} FROM {} n{} WHERE n.eventType IN (59, 60, 70, 71) AND n.end IS "
        "NOT NULL",
        text, cols.count("domainId") ? "n.domainId" : "NULL", ValidTimes("n"), t, join);
    const bool user_pattern = !options_.step_range_regex.empty();
    return EventRows(t, sql, 5, [&](Query& q) {
      const uint32_t pid = PidOf(q.Int(2));
      Process& p = For(pid);
      const std::string name = q.Text(3);
      const Interval span{q.Int(0) + shift_, q.Int(1) + shift_};
      const bool nccl = !q.Null(4) && nccl_domains.count({pid, q.Int(4)}) > 0;
      // The default names end in the step's number: other ranges (emit_nvtx
      // writes one per operator) skip the regex.
      const bool may_be_step = !nccl && (user_pattern || (!name.empty() && name.back() >= '0' && name.back() <= '9'));
      std::smatch m;
      if (may_be_step && std::regex_search(name, m, step_pattern)) {  // a step, as Kineto's ProfilerStep#N is
        Step step;
        // The first group, where it is a number, is the step's; else the steps
        // count in order of their starts (numbered in Finish).
        const auto number = m.size() > 1 && m[1].matched ? ParseInt64(m[1].str()) : std::nullopt;
        step.number = number && *number >= 0 ? *number : -1;
        step.host = span;
        p.rec.steps.push_back(step);
        ++p.events;
        return;
      }
      CpuSpan s;
      s.time = span;
      s.name = p.rec.names.Intern(name);
      s.thread = TidOf(q.Int(2));
      // NCCL's ranges are its collective calls, as Kineto's nccl:* host ops are.
      s.kind = nccl ? CpuSpanKind::kCommunication : CpuSpanKind::kUserAnnotation;
      if (nccl) ++p.nccl_ranges;
      Add(p, p.streams->cpu_spans, s, /*gpu_event=*/false);
    });
  }

  void Unreadable(const std::string& table, const std::string& what) { bad_rows_.emplace(table, what); }

  /// A process that made CUDA calls but ran no GPU work, beside one that did: a
  /// helper (a launcher that queried the GPU, a DataLoader worker, a compile
  /// worker), not a rank, unless NCCL ranges or steps say it is one.
  bool Helper(const Process& p, bool any_device_work) const {
    return any_device_work && p.device_work == 0 && p.nccl_ranges == 0 && p.rec.steps.empty();
  }

  StatusOr<std::vector<Recording>> Finish() {
    std::vector<Recording> out;
    bool any_device_work = false;
    std::vector<std::string> helpers;
    for (const auto& [pid, process] : by_pid_) any_device_work = any_device_work || process.device_work > 0;
    for (auto& [pid, process] : by_pid_) {
      // Processes with CUDA calls, GPU work or steps: a host process with none of
      // them (a launcher, a DataLoader worker) is not a rank.
      if (process.gpu_events == 0 && process.rec.steps.empty()) continue;
      if (Helper(process, any_device_work)) {
        helpers.push_back(fmt::format("pid {} ({} CUDA API call{})", pid, process.gpu_events,
                                      process.gpu_events == 1 ? "" : "s"));
        continue;
      }
      Recording& rec = process.rec;
      RETURN_IF_ERROR(FinishEventStreams(*process.streams, /*parallel=*/false));
      PlaceEvents(rec, std::move(process.streams), /*shift=*/0);
      NumberSteps(rec.steps);
      rec.devices = devices_;
      rec.os_calls_traced = os_runtime_traced_;
      rec.cpu_sampled = cpu_sampled_;
      // This process's rows: its events and steps (the rows left out are said in
      // the issues, unattributed).
      rec.stats.events_used = process.events;
      rec.stats.events_seen = process.events;
      rec.metadata["process.pid"] = std::to_string(pid);
      rec.host_pid = pid;
      for (const auto& what : missing_)
        rec.stats.AddIssue(IssueSeverity::kWarning, "nsys_table_missing", db_.path() + ": the export has no " + what);
      for (const auto& text : diagnostics_)
        rec.stats.AddIssue(IssueSeverity::kWarning, "nsys_dropped_events",
                           fmt::format("{}: Nsight Systems says: {}", db_.path(), text));
      for (const auto& [table, what] : bad_rows_)
        rec.stats.AddIssue(IssueSeverity::kWarning, "bad_event", fmt::format("{}: table {}: {}", db_.path(), table, what));
      out.push_back(std::move(rec));
    }
    if (!helpers.empty())
      for (auto& rec : out)
        rec.stats.AddIssue(IssueSeverity::kInfo, "helper_processes",
                           fmt::format("{}: {} process{} made CUDA calls but ran no GPU work, no NCCL ranges and no "
                                       "steps: {}; helpers (a launcher, a DataLoader or compile worker), not ranks, "
                                       "so they get no verdict of their own",
                                       db_.path(), helpers.size(), helpers.size() == 1 ? "" : "es",
                                       fmt::format("{}", fmt::join(helpers, ", "))));
    if (out.empty())
      return DataLossError(db_.path() + ": an Nsight Systems export with no CUDA kernels, copies or API calls, and "
                                        "no NVTX step ranges: nothing to judge (record with `nsys profile "
                                        "--trace=cuda,nvtx`)");
    return out;
  }

  /// Steps in order of their starts; those whose names hold no number are
  /// numbered by that order.
  static void NumberSteps(std::vector<Step>& steps) {
    std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.host.start < b.host.start; });
    for (size_t i = 0; i < steps.size(); ++i)
      if (steps[i].number < 0) steps[i].number = static_cast<int64_t>(i);
  }

  Export& db_;
  const NsysReadOptions& options_;
  TimeNs shift_ = 0;
  bool absolute_ = false;
  std::vector<Device> devices_;
  std::map<uint32_t, Process> by_pid_;
  size_t process_budget_ = kDefaultTraceMemoryBudget;
  bool os_runtime_traced_ = false;
  bool cpu_sampled_ = false;
  Status first_error_;
  std::vector<std::string> missing_;
  std::map<std::string, std::string> bad_rows_;
  std::vector<std::string> diagnostics_;  // DIAGNOSTIC_EVENT lines that say events were dropped or lost
};

}  // namespace

bool LooksLikeSqlite(std::string_view head) { return StartsWith(head, kSqliteMagic); }
bool LooksLikeNsysReport(std::string_view head) { return StartsWith(head, kReportMagic); }

std::string NsysExportCommand(const std::string& report_path) {
  return fmt::format("nsys export --type sqlite --output REPORT.sqlite {}", report_path);
}

namespace {

// An export of a multi-GB report takes minutes; one that runs past this is stuck.
constexpr auto kNsysExportDeadline = std::chrono::minutes(30);

/// nsys: $GPUTRIAGE_NSYS, else the first executable `nsys` on PATH; "" for none.
std::string FindNsys() {
  if (const char* env = std::getenv(kNsysPathEnv); env != nullptr && *env != '\0') return env;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = (end > start ? dirs.substr(start, end - start) : ".") + "/nsys";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

/// The last `bytes` of a file, for an error message.
std::string TailOf(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : 0;
  const std::streamoff from = std::max<std::streamoff>(0, size - static_cast<std::streamoff>(bytes));
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  if (from > 0) text = "..." + text;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

/// Runs `nsys export --type sqlite` of `report` into `out`; its stderr into `err`.
Status RunNsysExport(const std::string& nsys, const std::string& report, const std::string& out,
                     const std::string& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> args = {nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", out,
                                   report};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, nsys.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return IoError(fmt::format("cannot run {}: {}", nsys, std::strerror(rc)));
  const auto deadline = std::chrono::steady_clock::now() + kNsysExportDeadline;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return IoError(fmt::format("waiting for {}: {}", nsys, std::strerror(errno)));
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return IoError(fmt::format("`nsys export` did not finish in {} minutes: stopped",
                                 std::chrono::duration_cast<std::chrono::minutes>(kNsysExportDeadline).count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return IoError(fmt::format("`nsys export` {} {}: {}",
                             WIFEXITED(status) ? "exited with" : "was killed by signal",
                             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), TailOf(err, 600)));
}

}  // namespace

StatusOr<std::vector<Recording>> ImportNsysReport(const std::string& report_path, const NsysReadOptions& options) {
  const std::string nsys = FindNsys();
  if (nsys.empty())
    return UnimplementedError(fmt::format(
        "{}: an Nsight Systems report (.nsys-rep); gputriage reads its SQLite export, and there is no nsys on PATH "
        "to make it (or set {}): run `{}` where nsys is, and diagnose REPORT.sqlite",
        report_path, kNsysPathEnv, NsysExportCommand(report_path)));
  std::error_code ec;
  const auto tmp_root = std::filesystem::temp_directory_path(ec);
  std::string dir = (ec ? std::filesystem::path("/tmp") : tmp_root).string() + "/gputriage-nsys-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr)
    return IoError(fmt::format("{}: cannot make a directory for its export: {}", report_path, std::strerror(errno)));
  struct RemoveAfter {
    std::string dir;
    ~RemoveAfter() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove_after{dir};
  const std::string out = dir + "/report.sqlite";
  if (Status s = RunNsysExport(nsys, report_path, out, dir + "/nsys.err"); !s.ok())
    return IoError(fmt::format("{}: {}", report_path, s.message()));
  ASSIGN_OR_RETURN(auto recordings, ImportNsysExport(out, options));
  for (auto& rec : recordings) {
    rec.source_path = report_path;
    rec.stats.AddIssue(IssueSeverity::kInfo, "nsys_exported",
                       fmt::format("{}: exported to SQLite with {} for this reading (nothing kept)", report_path, nsys));
  }
  return recordings;
}

StatusOr<std::vector<Recording>> ImportNsysExport(const std::string& path, const NsysReadOptions& options) {
  ASSIGN_OR_RETURN(Export db, Export::Open(path));
  NsysReader reader(db, options);
  ASSIGN_OR_RETURN(auto recordings, reader.Read());
  struct stat st {};
  if (stat(path.c_str(), &st) == 0)
    for (auto& rec : recordings) rec.stats.bytes_read = st.st_size;
  return recordings;
}

}  // namespace gputriage
