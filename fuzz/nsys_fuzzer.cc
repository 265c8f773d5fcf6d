// The Nsight Systems export reader (src/sources/nsys/nsys_export.cc), fed
// exports built from the fuzz input: which of each table's columns exist (any
// schema generation, and ones that never were), and rows whose values are
// integers, text, reals or NULL; read in memory, or through scratch files under
// a budget of a few records. SQLite's own file parsing is fuzzed by its authors;
// what is ours is reading whatever tables and values an export holds.
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "src/sources/nsys/nsys_export.h"

namespace {

struct Table {
  const char* name;
  std::vector<const char*> columns;
};

const std::vector<Table>& Tables() {
  static const std::vector<Table> tables = {
      {"StringIds", {"id", "value"}},
      {"TARGET_INFO_SESSION_START_TIME", {"utcEpochNs"}},
      {"TARGET_INFO_GPU", {"id", "cuDevice", "name", "smCount", "totalMemory", "computeMajor", "computeMinor",
                           "threadsPerWarp", "maxWarpsPerSm", "maxShmemPerSm"}},
      {"CUPTI_ACTIVITY_KIND_KERNEL", {"start", "end", "deviceId", "streamId", "correlationId", "globalPid",
                                      "demangledName", "shortName", "gridX", "gridY", "gridZ", "blockX", "blockY",
                                      "blockZ", "registersPerThread", "staticSharedMemory", "dynamicSharedMemory"}},
      {"CUPTI_ACTIVITY_KIND_MEMCPY", {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes",
                                      "copyKind"}},
      {"CUPTI_ACTIVITY_KIND_MEMSET", {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes"}},
      {"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", {"start", "end", "deviceId", "streamId", "syncType", "globalPid"}},
      {"CUPTI_ACTIVITY_KIND_RUNTIME", {"start", "end", "globalTid", "correlationId", "nameId"}},
      {"NVTX_EVENTS", {"start", "end", "eventType", "text", "textId", "globalTid", "domainId"}},
      {"TARGET_INFO_CUDA_CONTEXT_INFO", {"processId", "deviceId"}},
      {"OSRT_API", {"start", "end", "globalTid", "nameId", "nestingLevel"}},
      {"COMPOSITE_EVENTS", {"id", "start", "globalTid", "threadState"}},
      {"SAMPLING_CALLCHAINS", {"id", "stackDepth", "symbol", "module"}},
  };
  return tables;
}

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  int64_t Int() {
    uint64_t v = 0;
    const int n = 1 + Byte() % 8;
    for (int i = 0; i < n; ++i) v = (v << 8) | Byte();
    return static_cast<int64_t>((Byte() & 1) ? ~v + 1 : v);  // two's complement, any bit pattern
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// One value, bound to the statement: mostly small integers (times, ids), and
/// text, reals, NULL and extreme integers.
void BindValue(sqlite3_stmt* stmt, int i, Input& in) {
  switch (in.Byte() % 8) {
    case 0: sqlite3_bind_null(stmt, i); break;
    case 1: sqlite3_bind_text(stmt, i, in.Byte() % 2 ? "ProfilerStep#7" : "NCCL", -1, SQLITE_STATIC); break;
    case 2: sqlite3_bind_double(stmt, i, static_cast<double>(in.Int()) * 1e290); break;
    case 3: sqlite3_bind_int64(stmt, i, INT64_MAX - in.Byte()); break;
    default: sqlite3_bind_int64(stmt, i, in.Int()); break;
  }
}

void Build(sqlite3* db, Input& in, int max_rows) {
  for (const auto& t : Tables()) {
    const uint8_t mask = in.Byte();
    if (mask == 0 && t.name != std::string("StringIds")) continue;  // the table is absent
    std::string create = std::string("CREATE TABLE ") + t.name + " (";
    std::vector<const char*> kept;
    for (size_t c = 0; c < t.columns.size(); ++c)
      if (t.name == std::string("StringIds") || ((mask >> (c % 8)) & 1) || c < 2) kept.push_back(t.columns[c]);
    for (size_t c = 0; c < kept.size(); ++c) create += std::string(c ? ", " : "") + kept[c];
    create += ")";
    if (sqlite3_exec(db, create.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) continue;
    std::string insert = std::string("INSERT INTO ") + t.name + " VALUES (";
    for (size_t c = 0; c < kept.size(); ++c) insert += c ? ", ?" : "?";
    insert += ")";
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, insert.c_str(), -1, &stmt, nullptr) != SQLITE_OK) continue;
    const int rows = in.Byte() % max_rows;
    for (int r = 0; r < rows && !in.empty(); ++r) {
      for (size_t c = 0; c < kept.size(); ++c) BindValue(stmt, static_cast<int>(c + 1), in);
      sqlite3_step(stmt);
      sqlite3_reset(stmt);
    }
    sqlite3_finalize(stmt);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/gputriage_nsys_fuzz_" + std::to_string(getpid()) + ".sqlite";
  std::remove(path.c_str());
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return 0;
  sqlite3_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN", nullptr, nullptr, nullptr);
  Input in(data, size);
  const uint8_t flags = in.Byte();
  // A budget of a few records (SortedSpill keeps at least 16 in memory): more
  // rows than that go through scratch files.
  const bool spill = flags & 2;
  Build(db, in, spill ? 64 : 16);
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  gputriage::NsysReadOptions options;
  if (flags & 1) options.step_range_regex = R"(^(\d+)$)";
  if (spill) options.memory_budget_bytes = 1024;
  auto read = gputriage::ImportNsysExport(path, options);
  (void)read;
  std::remove(path.c_str());
  return 0;
}
