// The plain-form run reader (plain_run_parser.cc) against simdjson's reading of
// the same run (EventParser::ParseRun): whenever the plain reader accepts a run,
// the run must be one the importer's bracket check and simdjson accept too, with
// every field of every event the same. Checked on each bundled trace's runs, on
// forms chosen to sit at the edges of what the plain reader takes, and on many
// random mutations of real events.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "src/sources/kineto/kineto_json.h"
#include "src/sources/kineto/plain_run_parser.h"
#include "src/sources/kineto/trace_json_splitter.h"
#include "src/util/byte_source.h"

namespace gputriage::kineto {
namespace {

template <typename T>
std::string Opt(const std::optional<T>& v) {
  if (!v) return "-";
  std::ostringstream o;
  o.precision(17);
  o << *v;
  return o.str();
}

/// Every field of an event, as text.
std::string Describe(const RawEvent& e, size_t position) {
  std::ostringstream o;
  o << "@" << position << " ph=" << int(e.ph) << " cat=" << e.cat << " name=" << e.name << " pid=" << Opt(e.pid)
    << " cpufn=" << e.pid_cpu_functions << " tid=" << Opt(e.tid) << " ts=" << Opt(e.ts_ns) << "/" << e.ts_malformed
    << " dur=" << Opt(e.dur_ns) << "/" << e.dur_malformed << " ext=" << Opt(e.external_id)
    << " corr=" << Opt(e.correlation) << " stream=" << Opt(e.stream) << " dev=" << Opt(e.device)
    << " regs=" << Opt(e.registers_per_thread) << " smem=" << Opt(e.shared_memory) << " bytes=" << Opt(e.bytes)
    << " bpsm=" << Opt(e.blocks_per_sm) << " wpsm=" << Opt(e.warps_per_sm) << " occ=" << Opt(e.occupancy_percent)
    << " flops=" << Opt(e.flops) << " grid=" << e.has_grid;
  if (e.has_grid) o << ":" << e.grid[0] << "," << e.grid[1] << "," << e.grid[2];
  o << " block=" << e.has_block;
  if (e.has_block) o << ":" << e.block[0] << "," << e.block[1] << "," << e.block[2];
  o << " coll=" << e.collective << " itype=" << e.first_input_type << " dims=[" << e.input_dims << "]"
    << " alloc=" << Opt(e.total_allocated) << " resv=" << Opt(e.total_reserved) << " dtype=" << Opt(e.device_type)
    << " did=" << Opt(e.device_id) << " label=" << e.label << "\n";
  return o.str();
}

struct Readings {
  bool plain_ok = false;
  std::string plain;
  bool simdjson_ok = false;  // the importer's run path: bracket check, then simdjson
  std::string simdjson;
};

Readings ReadBothWays(std::string_view elements) {
  Readings r;
  std::string padded(elements);
  padded.append(kPlainRunPadding, 'x');  // readable, and no help to a reader that overruns
  r.plain_ok = ParsePlainRun(std::string_view(padded.data(), elements.size()),
                             [&](const RawEvent& e, size_t position) { r.plain += Describe(e, position); });
  std::string array;
  array.reserve(elements.size() + 2 + kSplitterPadding);
  array.append(1, '[').append(elements).append(1, ']');
  const size_t array_bytes = array.size();
  array.append(kSplitterPadding, '\0');
  EventParser parser;
  r.simdjson_ok = EventRunIsWellFormed(std::string_view(array.data() + 1, elements.size())) &&
                  parser.ParseRun(std::string_view(array.data(), array_bytes), [&](const RawEvent& e, size_t position) {
                    r.simdjson += Describe(e, position - 1);
                  });
  return r;
}

/// What the plain reader may do: give up, or read exactly what simdjson reads.
void ExpectAgreement(std::string_view elements) {
  const Readings r = ReadBothWays(elements);
  if (!r.plain_ok) return;
  ASSERT_TRUE(r.simdjson_ok) << "plain reader accepted what the importer's run path rejects:\n" << elements;
  ASSERT_EQ(r.plain, r.simdjson) << elements;
}

/// Collects the first runs the splitter cuts (and lets it go on as if each was
/// read), then stops it: a trace's forms show in its first few hundred KiB.
class RunCollector final : public RunHandler {
 public:
  static constexpr size_t kRunsPerTrace = 16;
  StatusOr<RunProgress> Submit(std::shared_ptr<const EventRun> run) override {
    runs.push_back(std::string(run->elements()));
    if (runs.size() >= kRunsPerTrace) return InternalError("enough runs");
    return RunProgress{run->index + 1, -1, 0};
  }
  StatusOr<RunProgress> Drain() override { return RunProgress{static_cast<int64_t>(runs.size()), -1, 0}; }
  std::vector<std::string> runs;
};

std::vector<std::string> RunsOf(const std::string& path, size_t run_bytes) {
  auto source = OpenFileSource(path);
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  if (!source.ok()) return {};
  RunCollector collector;
  TraceJsonSplitter splitter(**source, size_t{1} << 20);
  splitter.HandRunsTo(&collector, run_bytes);
  auto outcome = splitter.Run([](std::string_view, std::string_view) { return Status::Ok(); },
                              [](std::string_view, int64_t) { return Status::Ok(); });
  EXPECT_TRUE(outcome.ok() || collector.runs.size() == RunCollector::kRunsPerTrace) << path;
  return collector.runs;
}

TEST(PlainRunParser, ReadsEveryBundledTraceAsSimdjsonDoes) {
  int files = 0, runs = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(GPUTRIAGE_TEST_DATA_DIR "/traces")) {
    const std::string path = entry.path().string();
    if (!entry.is_regular_file() || path.find(".json") == std::string::npos) continue;
    ++files;
    for (const std::string& run : RunsOf(path, 16 << 10)) {
      ++runs;
      const Readings r = ReadBothWays(run);
      // Profilers write the plain form: the fast path must take these (else it is
      // never used), and must read them as simdjson does.
      ASSERT_TRUE(r.plain_ok) << path << ": a run the plain reader gave up on:\n" << run.substr(0, 2000);
      ASSERT_TRUE(r.simdjson_ok) << path;
      ASSERT_EQ(r.plain, r.simdjson) << path;
    }
  }
  EXPECT_GT(files, 20);
  EXPECT_GT(runs, 200);
}

/// An element whose innermost array is at `level` (the element's braces are level 1).
std::string Nested(int level) {
  return R"({"ph": "X", "a": )" + std::string(static_cast<size_t>(level - 1), '[') + "1" +
         std::string(static_cast<size_t>(level - 1), ']') + "}";
}

TEST(PlainRunParser, EdgeFormsAreReadAsSimdjsonReadsThemOrGivenUp) {
  const std::string escaped_name = R"({"ph": "X", "cat": "kernel", "name": "a\"b", "ts": 1})";
  const std::string escapes_skipped =
      R"({"ph": "X", "cat": "kernel", "name": "x", "Call stack": "C:\\Users\\me\\train.py(12): <module>\t\/", "ts": 1})";
  const std::string non_ascii = "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"caf\xc3\xa9\", \"ts\": 1}";
  const std::string kernel =
      R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1623142623460147.123, "dur": 5, "args": {"correlation": 12, "External id": 9, "grid": [1, 2, 3], "block": [128, 1, 1], "stream": 7, "device": 0}})";
  const std::vector<std::string> events = {
      kernel, escaped_name, escapes_skipped, non_ascii, Nested(63), Nested(64), Nested(65), Nested(200),
      R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":"CPU functions","tid":"stream 3","ts":"12.5","dur":"0.001","args":{"Input Dims":[[32, 64], [64, 128]]  ,"Input type":["", "float", "\u0041"]}})",
      R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {"Input Dims": [[32,64],[]] }, "ts": 1, "dur": 2})",
      R"({"ph": "X", "cat": "cpu_op", "args": {"Input type": ["\u0041", "x"]}})",  // first non-empty escaped: give up
      R"({"ph": "X", "cat": "cpu_op", "args": {"Input type": [1, null, {"a": []}, "", "half", "\n"]}})",
      R"({"ph": "X", "cat": "cpu_op", "args": {"Input type": "float", "Input Dims": "x"}})",
      R"({"ph": "X", "cat": "kernel", "pid": -3, "tid": -0, "ts": -12, "dur": 0, "args": {"bytes": 123456789012345678}})",
      R"({"ph": "X", "cat": "kernel", "ts": 9223372036854774.999, "dur": 9223372036854775.807})",
      R"({"ph": "X", "cat": "kernel", "ts": 9999999999999999, "dur": 0.0001, "pid": 0, "tid": 123456789012345678})",
      R"({"ph": "X", "cat": "kernel", "ts": -0.5, "dur": 0.25, "args": {"flops": 0.000000000000001, "blocks per SM": 1234567.12345678}})",
      R"({"ph": "X", "cat": "kernel", "pid": 1.5, "ts": 1})",                    // fraction in an int field
      R"({"ph": "X", "cat": "kernel", "pid": 1234567890123456789, "ts": 1})",  // 19 digits
      R"({"ph": "X", "cat": "kernel", "pid": 1e3, "ts": 1e3, "dur": 2.5E-1})",
      R"({"ph": "X", "cat": "kernel", "ts": null, "dur": true, "pid": false, "tid": null, "name": 5})",
      R"({"ph": "X", "cat": "kernel", "ts": [1], "dur": {"a": 1}, "args": [1, 2]})",
      R"({"ph": "X", "cat": "kernel", "ts": "abc", "dur": "", "pid": "", "tid": "t12 "})",
      R"({"ph": "X", "cat": "kernel", "args": {"blocks per SM": 0.1, "warps per SM": 123456789012345, "est. achieved occupancy %": -0, "flops": 1234567890123456})",
      R"({"ph": "X", "cat": "kernel", "args": {"flops": "2.5e9", "blocks per SM": "", "warps per SM": " 7", "est. achieved occupancy %": null}})",
      R"({"ph": "X", "cat": "kernel", "args": {"grid": [1, 2, 3, 4, 5], "block": [], "shared memory": "12 "}})",
      R"({"ph": "X", "cat": "kernel", "args": {"grid": [-1, 99999999999, 0], "block": [1.0, 2, 3]}})",
      R"({"ph": "X", "cat": "kernel", "args": {"grid": null, "block": "1,2,3"}})",
      R"({"ph": "X", "cat": "kernel", "args": {"Collective name": "allreduce", "labels": 5, "name": "x"}})",
      R"({"ph": "M", "name": "process_labels", "args": {"labels": "CPU"}})",
      R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "args": {"Total Allocated": 12, "Total Reserved": 34, "Device Type": 1, "Device Id": 0}})",
      R"({"ph": "X", "cat": "kernel", "name": "x", "junk": "bad escape \q", "ts": 1})",
      R"({"ph": "X", "cat": "kernel", "name": "x", "junk": "\u12G4", "ts": 1})",
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"tab\there\", \"ts\": 1}",    // control character
      R"({"ph": "X", "ph": "B", "cat": "kernel", "cat": "cpu_op", "ts": 1, "ts": 2, "ts": "x", "ts": 3})",
      R"({"ph": "X", "args": {"External id": 1}, "args": {"correlation": 2, "External id": 3}})",
      R"({"ph": "XX", "cat": "kernel"})",
      R"({"ph": 1, "cat": "kernel"})",
      R"({"ph": "X", "cat": 5})",
      R"({})",
      R"({"a": [1, 2,], "ph": "X"})",
      R"({"a": 01, "ph": "X"})",
      R"({"a": -, "ph": "X"})",
      R"({"a": 1., "ph": "X"})",
      R"({"a": tru, "ph": "X"})",
      R"({"a": [1}, "ph": "X"})",
      R"({"a" 1})",
      R"({"a": 1 "b": 2})",
      R"({"\u0070h": "X", "cat": "kernel"})",
      "{\"ph\" :\r\n\t\"X\" , \"cat\":\"kernel\"\n}",
  };
  int accepted = 0;
  for (const auto& e : events) {
    SCOPED_TRACE(e);
    ExpectAgreement(e);
    ExpectAgreement(e + ",\n  " + kernel);
    ExpectAgreement(kernel + ", " + e);
    accepted += ReadBothWays(e).plain_ok ? 1 : 0;
  }
  // Runs as such: separators, and what may not separate or end them.
  ExpectAgreement(kernel + "," + kernel);
  EXPECT_FALSE(ReadBothWays(kernel + ",, " + kernel).plain_ok);
  EXPECT_FALSE(ReadBothWays(kernel + " " + kernel).plain_ok);
  EXPECT_FALSE(ReadBothWays(kernel + ", [1]").plain_ok);
  EXPECT_FALSE(ReadBothWays(kernel + ",").plain_ok);
  EXPECT_FALSE(ReadBothWays(kernel + "]").plain_ok);
  // The plain reader does take the common forms, and gives up where it must.
  EXPECT_GE(accepted, 20);
  EXPECT_TRUE(ReadBothWays(events.back()).plain_ok);  // whitespace of every kind
  EXPECT_TRUE(ReadBothWays(escapes_skipped).plain_ok);  // escapes in a string no field reads
  EXPECT_FALSE(ReadBothWays(escaped_name).plain_ok);
  EXPECT_FALSE(ReadBothWays(non_ascii).plain_ok);
  EXPECT_TRUE(ReadBothWays(Nested(64)).plain_ok);   // the bracket check's depth
  EXPECT_FALSE(ReadBothWays(Nested(65)).plain_ok);
}

TEST(PlainRunParser, RandomMutationsOfRealEventsNeverReadDifferently) {
  const std::vector<std::string> seeds = {
      R"({"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>", "pid": 0, "tid": 7, "ts": 1623142623460147.123, "dur": 5, "args": {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 12, "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.25, "warps per SM": 1.5, "grid": [80, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 13, "External id": 9}})",
      R"({"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 25738, "tid": "25738", "ts": 1623142623460072, "dur": 85, "args": {"Device": 25738, "External id": 1, "Trace name": "PyTorch Profiler", "Input Dims": [[1024], [32, 2048], [2048, 1024], [], []], "Call stack": "train.py(54): <module>", "Input type": ["float", "float", "", "Scalar"], "flops": 134217728}})",
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 25738, "tid": 25738, "ts": 1623142623460100, "dur": 4, "args": {"cbid": 211, "correlation": 12, "external id": 9}})",
      R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": {"Total Reserved": 2097152, "Total Allocated": 512, "Bytes": 512, "Addr": 139, "Device Type": 1, "Device Id": 0}})",
  };
  // Bytes that change JSON's structure or the readings' choices.
  const std::string alphabet = "{}[]\",:. -+eE0123456789tfnul\\/\x7f\x80\xc3\t\nXa\"";
  std::mt19937 rng(2512);
  int accepted = 0;
  for (int round = 0; round < 60000; ++round) {
    std::string text = seeds[rng() % seeds.size()];
    if (rng() % 3 == 0) text += ",\n" + seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits && !text.empty(); ++k) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text[at] = c; break;
        case 1: text.insert(at, 1, c); break;
        default: text.erase(at, 1); break;
      }
    }
    const Readings r = ReadBothWays(text);
    if (!r.plain_ok) continue;
    ++accepted;
    ASSERT_TRUE(r.simdjson_ok) << "round " << round << ": accepted what the run path rejects:\n" << text;
    ASSERT_EQ(r.plain, r.simdjson) << "round " << round << ":\n" << text;
  }
  EXPECT_GT(accepted, 6000);  // the mutations that stay valid do reach the comparison
}

}  // namespace
}  // namespace gputriage::kineto
