// Reading a trace's events in parallel runs (kineto_reader.cc, the splitter's
// runs) must give exactly what reading them one by one gives: the same events in
// the same order, the same counts, the same issues with the same messages and
// byte offsets, the same truncation notes and errors. Checked on every bundled
// trace and on generated traces built to trip the run cutting (braces and commas
// inside strings, arrays of objects, bad events, cuts at every position).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "gputriage/import.h"
#include "src/analysis/trace_events.h"
#include "src/sources/kineto/kineto_reader.h"
#include "src/util/byte_source.h"

namespace gputriage {
namespace {

/// Everything a reader produces, as text (names resolved), so two ways of reading
/// compare with one EXPECT_EQ and a readable difference.
std::string Fingerprint(const StatusOr<Recording>& result) {
  if (!result.ok()) return "error: " + result.status().ToString();
  const Recording& r = *result;
  std::ostringstream o;
  auto name = [&](NameId id) { return std::string(r.names.View(id)); };
  auto t = [](Interval i) { return fmt::format("[{},{})", i.start, i.end); };
  o << "format " << r.format << " rank " << r.rank << "/" << r.world_size << " " << r.comm_backend << " abs "
    << r.clock_is_absolute << "\n";
  for (const auto& d : r.devices) o << "device " << d.id << " " << d.name << " " << d.num_sms << "\n";
  for (const auto& [k, v] : r.metadata) o << "meta " << k << "=" << v << "\n";
  // Through the analyses' cursors: the same whether the events are in the
  // vectors or were left in (spilled) streams past the memory budget.
  const analysis::TraceEvents events(r);
  auto each = [](auto cursor, auto&& print) {
    for (const auto* item = cursor.Next(); item != nullptr; item = cursor.Next()) print(*item);
    EXPECT_TRUE(cursor.status().ok()) << cursor.status().ToString();
  };
  each(events.kernels(), [&](const KernelActivity& k) {
    o << "K " << t(k.time) << " " << name(k.name) << " " << k.device << " " << k.stream << " " << k.correlation << " "
      << k.external_id << " " << k.grid[0] << "," << k.grid[1] << "," << k.grid[2] << " " << k.block[0] << " "
      << k.registers_per_thread << " " << k.shared_memory_bytes << " " << k.blocks_per_sm << " " << k.warps_per_sm
      << " " << k.est_occupancy_percent << " " << name(k.collective) << "\n";
  });
  each(events.memory_ops(), [&](const MemoryActivity& m) {
    o << "M " << t(m.time) << " " << static_cast<int>(m.kind) << " " << m.device << " " << m.stream << " "
      << m.correlation << " " << m.bytes << "\n";
  });
  each(events.runtime_calls(), [&](const RuntimeCall& c) {
    o << "R " << t(c.time) << " " << name(c.name) << " " << c.thread << " " << c.correlation << " " << c.external_id
      << " " << static_cast<int>(c.kind) << " " << c.driver_api << "\n";
  });
  each(events.cpu_spans(), [&](const CpuSpan& c) {
    o << "C " << t(c.time) << " " << name(c.name) << " " << c.thread << " " << c.external_id << " "
      << static_cast<int>(c.kind) << " " << name(c.first_input_type) << " " << c.flops << "\n";
  });
  each(events.syncs(), [&](const SyncActivity& s) { o << "S " << t(s.time) << " " << name(s.name) << " " << s.device << "\n"; });
  each(events.matrix_shapes(), [&](const MatrixOpShapes& m) {
    o << "X " << m.external_id << " " << name(m.name) << " " << name(m.dtype) << " " << int(m.inputs);
    for (int i = 0; i < MatrixOpShapes::kMaxInputs; ++i)
      for (int j = 0; j < MatrixOpShapes::kMaxRank; ++j) o << " " << m.dims[i][j];
    o << "\n";
  });
  for (const auto& m : r.memory_use)
    o << "mem " << m.device << " " << m.peak_allocated << " " << m.peak_reserved << " " << m.events << "\n";
  for (const auto& s : r.steps) o << "step " << s.number << " " << t(s.host) << "\n";
  o << "window " << t(r.profiler_window) << "\n";
  const auto& st = r.stats;
  o << "stats " << st.bytes_read << " " << st.events_seen << " " << st.events_used << " "
    << st.python_function_events << " truncated " << st.truncated << " " << st.truncation_note << "\n";
  for (const auto& i : st.issues)
    o << "issue " << static_cast<int>(i.severity) << " " << i.kind << " x" << i.count << " " << i.message << "\n";
  return o.str();
}

std::string Decompressed(const std::string& path) {
  auto source = OpenFileSource(path);
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  std::string out;
  char buf[1 << 16];
  while (true) {
    auto n = (*source)->Read(buf, sizeof(buf));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    if (!n.ok() || *n == 0) break;
    out.append(buf, *n);
  }
  return out;
}

StatusOr<Recording> OneByOne(const std::string& name, const std::string& bytes) {
  KinetoReadOptions options;
  options.runs = false;
  return ImportKinetoTraceFromMemory(name, bytes, options);
}

StatusOr<Recording> InRuns(const std::string& name, const std::string& bytes, int threads, size_t run_bytes,
                           size_t budget = kDefaultTraceMemoryBudget) {
  KinetoReadOptions options;
  options.threads = threads;
  options.run_bytes = run_bytes;
  options.memory_budget_bytes = budget;
  return ImportKinetoTraceFromMemory(name, bytes, options);
}

TEST(ParallelImport, EveryBundledTraceReadsTheSameInRuns) {
  int traces = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(GPUTRIAGE_TEST_DATA_DIR) + "/traces")) {
    const std::string path = entry.path().string();
    if (!entry.is_regular_file() || path.find(".json") == std::string::npos) continue;
    const std::string bytes = Decompressed(path);
    const std::string expected = Fingerprint(OneByOne(path, bytes));
    // Small runs and several workers: many cuts, runs finishing out of order.
    EXPECT_EQ(Fingerprint(InRuns(path, bytes, 3, 4096)), expected) << path;
    // No workers (the runs read on the splitter's thread as they are cut) and a
    // memory budget of a few KiB: every stream sorted through runs in a scratch
    // file (many of them, merged in levels). Workers and spilling together: the
    // BoundedMemory tests.
    EXPECT_EQ(Fingerprint(InRuns(path, bytes, -1, 65536, 6000)), expected) << path;
    ++traces;
  }
  EXPECT_GE(traces, 20);
}

TEST(ParallelImport, IssuesOfEventsBeforeAMemberComeFirstEitherWay) {
  // A bad event, then (after the events) a bad header member: the issues are
  // counted in file order whether the events were read one by one (gathered
  // before they join the recording) or in runs. Found by the Kineto fuzzer.
  const std::string trace = std::string(R"({"traceEvents": [)") +
                            R"({"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"device": 0}}, )" +
                            "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"\xff\", \"ts\": 3, \"dur\": 1}" +
                            R"(], "baseTimeNanoseconds": "late"})";
  const std::string expected = Fingerprint(OneByOne("order.json", trace));
  EXPECT_NE(expected.find("bad_event"), std::string::npos) << expected;
  EXPECT_LT(expected.find("bad_event"), expected.find("bad_member")) << expected;
  EXPECT_EQ(Fingerprint(InRuns("order.json", trace, 2, 64)), expected);
}

/// A trace whose text is hostile to cutting at "}, {": those bytes inside names,
/// arrays of objects inside args, escapes, deep nesting, events that are not
/// objects and events the one-by-one reader only counts.
std::string HostileTrace(std::mt19937& rng, int events, bool with_bad_events) {
  std::string t = R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100", "numSms": 108}],)";
  t += "\n\"traceEvents\": [\n";
  for (int i = 0; i < events; ++i) {
    if (i) t += (rng() % 3 == 0) ? ",\n  " : (rng() % 2 ? "," : ", ");
    const int kind = static_cast<int>(rng() % 12);
    const int64_t ts = 1000 + i * 7;
    switch (kind) {
      case 0:  // a name that looks like an element boundary
        t += fmt::format(R"({{"ph": "X", "cat": "kernel", "name": "k}}, {{\"x\": [{}]}}", "ts": {}, "dur": 3, )"
                         R"("args": {{"device": 0, "stream": 7, "correlation": {}}}}})",
                         i, ts, i);
        break;
      case 1:  // arrays of objects in args: "}, {" at depth 3
        t += fmt::format(R"({{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": {}, "dur": 5, "args": )"
                         R"({{"External id": {}, "list": [{{"a": 1}}, {{"b": [{{"c": 2}}, {{"d": 3}}]}}], )"
                         R"("Input Dims": [[32, 64], [64, 128]], "Input type": ["float", "float"]}}}})",
                         ts, i);
        break;
      case 2:  // escapes and unicode
        t += fmt::format(R"({{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel \"}}, {{\" \\ \u00e9", )"
                         R"("ts": {}, "dur": 2, "tid": 3, "args": {{"correlation": {}}}}})",
                         ts, i);
        break;
      case 3:
        t += fmt::format(R"({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "ts": {}, "dur": 6}})",
                         i, ts);
        break;
      case 4:  // deep nesting inside an event
        t += fmt::format(R"({{"ph": "i", "name": "deep", "ts": {}, "args": {{"v": [[[[{{"a": [{{}}, {{}}]}}]]]]}}}})", ts);
        break;
      case 5:
        if (with_bad_events) {
          t += (rng() % 2) ? R"({"ph": 5, "cat": "kernel", "ts": 1, "dur": 1})"   // counted as a bad event
                           : R"(17)";                                            // not an object
          break;
        }
        [[fallthrough]];
      case 6:
        t += fmt::format(R"({{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": {}, "dur": 4, )"
                         R"("args": {{"device": 0, "stream": 7, "bytes": 4096}}}})",
                         ts);
        break;
      case 7:
        t += fmt::format(R"({{"ph": "X", "cat": "mystery", "name": "m", "ts": {}, "dur": 1}})", ts);
        break;
      case 8:
        t += fmt::format(R"({{"ph": "X", "cat": "kernel", "name": "nodur", "ts": {}}})", ts);
        break;
      case 9:
        t += fmt::format(R"({{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": {}, )"
                         R"("args": {{"Device Type": 1, "Device Id": 0, "Total Allocated": {}, "Total Reserved": {}}}}})",
                         ts, i * 100, i * 200);
        break;
      default:
        t += fmt::format(R"({{"ph": "X", "cat": "kernel", "name": "k{}", "pid": 0, "tid": 7, "ts": {}, "dur": 3, )"
                         R"("args": {{"device": 0, "stream": 7, "correlation": {}, "grid": [1, 2, 3], )"
                         R"("block": [128, 1, 1], "blocks per SM": 0.5}}}})",
                         i % 5, ts, i);
        break;
    }
  }
  // Members after the array, one with arrays of objects (a run cut there would close
  // the array early), as Kineto writes baseTimeNanoseconds after the events.
  t += "\n],\n\"extra\": [{\"a\": 1}, {\"b\": 2}, {\"c\": [{\"d\": 4}, {\"e\": 5}]}],\n";
  t += "\"baseTimeNanoseconds\": 1700000000000000000}\n";
  return t;
}

TEST(ParallelImport, HostileTextReadsTheSameInRuns) {
  std::mt19937 rng(25);
  for (int round = 0; round < 6; ++round) {
    const std::string trace = HostileTrace(rng, 1500, round % 2 == 1);
    const std::string expected = Fingerprint(OneByOne("hostile.json", trace));
    ASSERT_EQ(expected.rfind("error", 0), std::string::npos) << expected.substr(0, 300);
    for (size_t run_bytes : {64u, 700u, 4096u})
      EXPECT_EQ(Fingerprint(InRuns("hostile.json", trace, 2, run_bytes)), expected)
          << "round " << round << " runs of " << run_bytes;
  }
}

TEST(ParallelImport, CutsAnywhereReadTheSameInRuns) {
  // A file cut at any byte (a crashed job, a partial copy), or followed by
  // garbage: the same events, truncation note, error or trailing-data count.
  std::mt19937 rng(7);
  const std::string trace = HostileTrace(rng, 300, true);
  for (size_t cut = 1; cut < trace.size(); cut += 1 + rng() % 301) {
    const std::string part = trace.substr(0, cut);
    EXPECT_EQ(Fingerprint(InRuns("cut.json", part, 2, 256)), Fingerprint(OneByOne("cut.json", part)))
        << "cut at " << cut;
    const std::string damaged = part + "\x01garbage}]{";
    EXPECT_EQ(Fingerprint(InRuns("dmg.json", damaged, 2, 256)), Fingerprint(OneByOne("dmg.json", damaged)))
        << "damage at " << cut;
  }
}

TEST(ParallelImport, ByteFlipsReadTheSameInRuns) {
  std::mt19937 rng(11);
  const std::string trace = HostileTrace(rng, 400, false);
  const char flips[] = {'{', '}', '[', ']', '"', ',', '\\', 'x', '\n'};
  for (int i = 0; i < 300; ++i) {
    std::string damaged = trace;
    const size_t at = rng() % damaged.size();
    damaged[at] = flips[rng() % sizeof(flips)];
    EXPECT_EQ(Fingerprint(InRuns("flip.json", damaged, 2, 512)), Fingerprint(OneByOne("flip.json", damaged)))
        << "flip " << i << " at byte " << at << ": ..." << damaged.substr(at > 60 ? at - 60 : 0, 120) << "...";
  }
}

TEST(ParallelImport, RanksOfARunReadAtOnceAreTheSameRecordingsInTheSameOrder) {
  // A directory of rank traces, and the same traces named one by one: read at
  // once (one per core) or one after another, the same recordings in file order.
  const std::string dir = std::string(GPUTRIAGE_TEST_DATA_DIR) + "/traces/recorded/gloo4_cpu_late_rank1_15ms";
  std::vector<std::string> files;
  for (int r = 0; r < 4; ++r) files.push_back(dir + "/rank-" + std::to_string(r) + ".pt.trace.json.gz");
  for (const std::vector<std::string>& inputs : {std::vector<std::string>{dir}, files}) {
    ImportOptions one_by_one;
    one_by_one.threads = -1;
    auto a = ImportRun(inputs, one_by_one);
    auto b = ImportRun(inputs, ImportOptions{});
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->recordings.size(), b->recordings.size());
    ASSERT_GE(a->recordings.size(), 4u);
    for (size_t i = 0; i < a->recordings.size(); ++i) {
      EXPECT_EQ(a->recordings[i].source_path, b->recordings[i].source_path);
      EXPECT_EQ(a->recordings[i].rank, b->recordings[i].rank);
      EXPECT_EQ(Fingerprint(std::move(a->recordings[i])), Fingerprint(std::move(b->recordings[i])));
    }
  }
}

}  // namespace
}  // namespace gputriage
