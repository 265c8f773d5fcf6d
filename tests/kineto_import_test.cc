// The Kineto importer on small hand-written traces: both schema generations, every
// timestamp form, and bad input (truncated, corrupt, empty, wrong format).
#include <zlib.h>
#include <zstd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>
#include <string>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "src/analysis/shapes.h"

namespace gputriage {
namespace {

std::string Gzip(const std::string& in) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, in.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// 2021 generation: capitalised categories, "external id", tid "stream 7", integer µs.
const char* kOldSchema = R"json({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "Tesla V100-DGXS-32GB", "computeMajor": 7, "computeMinor": 0,
                        "numSms": 80, "maxThreadsPerMultiprocessor": 2048, "warpSize": 32}],
  "traceEvents": [
  {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 1, "tid": "1", "ts": 1000, "dur": 100},
  {"ph": "X", "cat": "Operator", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 1, "tid": "1", "ts": 1000, "dur": 40},
  {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 1, "tid": "1", "ts": 1040, "dur": 20,
   "args": {"External id": 7, "Input type": ["float", ""]}},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "1", "ts": 1045, "dur": 5,
   "args": {"correlation": 11, "external id": 7}},
  {"ph": "X", "cat": "Kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": "stream 7", "ts": 1060, "dur": 30,
   "args": {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 11, "external id": 7,
            "registers per thread": 128, "shared memory": 0, "blocks per SM": 0.5, "warps per SM": 4.0,
            "grid": [40, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 12}},
  {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 1050, "dur": 5,
   "args": {"device": 0, "stream": 7, "correlation": 12, "bytes": 4096}},
  {"ph": "f", "id": 11, "pid": 0, "tid": "stream 7", "ts": 1060, "cat": "async", "name": "launch"},
  {"name": "process_labels", "ph": "M", "ts": 1000, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}
]})json";

// 2024+ generation: lower-case categories, float µs with ns decimals, integer tids,
// cudaLaunchKernelExC, cuda_driver, baseTimeNanoseconds written after the events.
const char* kNewSchema = R"json({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 9, "tid": 9, "ts": 100.5, "dur": 200.25},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#2", "pid": 0, "tid": 7, "ts": 101.0, "dur": 0.02},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 9, "tid": 9, "ts": "110.125", "dur": 4.5,
   "args": {"correlation": 5, "External id": 3}},
  {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 9, "tid": 9, "ts": 120, "dur": 3,
   "args": {"correlation": 6, "External id": 4}},
  {"ph": "X", "cat": "kernel", "name": "nvjet_tst_128x256_64x4_1x2_h_bz_TNT", "pid": 0, "tid": 7, "ts": 115.0625, "dur": 50,
   "args": {"device": 0, "stream": 7, "correlation": 5, "External id": 3}},
  {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 0, "tid": 7, "ts": 170, "dur": 1.76,
   "args": {"device": 0, "stream": 7, "correlation": 6, "External id": 4}},
  {"ph": "X", "cat": "python_function", "name": "train.py(10): step", "pid": 9, "tid": 9, "ts": 100, "dur": 300}
  ],
  "traceName": "x.json", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000
})json";

TEST(KinetoImport, OldSchema) {
  auto rec = ImportKinetoTraceFromMemory("old.json", kOldSchema);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->devices.size(), 1u);
  EXPECT_EQ(rec->devices[0].vendor, Vendor::kNvidia);
  EXPECT_EQ(rec->devices[0].num_sms, 80);
  ASSERT_EQ(rec->steps.size(), 1u);
  EXPECT_EQ(rec->steps[0].number, 5);
  EXPECT_EQ(rec->steps[0].host, (Interval{1000000, 1100000}));
  ASSERT_EQ(rec->kernels.size(), 1u);
  const auto& k = rec->kernels[0];
  EXPECT_EQ(k.stream, 7);
  EXPECT_EQ(k.device, 0);
  EXPECT_EQ(k.correlation, 11);
  EXPECT_EQ(k.external_id, 7);
  EXPECT_EQ(k.grid[0], 40u);
  EXPECT_EQ(k.block[0], 256u);
  EXPECT_FLOAT_EQ(k.blocks_per_sm, 0.5f);
  EXPECT_FLOAT_EQ(k.est_occupancy_percent, 12.f);
  ASSERT_EQ(rec->memory_ops.size(), 1u);
  EXPECT_EQ(rec->memory_ops[0].kind, MemoryOpKind::kMemcpyHtoD);
  EXPECT_EQ(rec->memory_ops[0].bytes, 4096);
  EXPECT_EQ(rec->memory_ops[0].host_memory, HostMemory::kPageable);  // "(Pageable -> Device)" in its name
  ASSERT_EQ(rec->runtime_calls.size(), 1u);
  EXPECT_EQ(rec->runtime_calls[0].kind, RuntimeCallKind::kKernelLaunch);
  ASSERT_EQ(rec->cpu_spans.size(), 2u);
  EXPECT_EQ(rec->cpu_spans[0].kind, CpuSpanKind::kDataLoader);
  EXPECT_EQ(rec->names.View(rec->cpu_spans[1].first_input_type), "float");
  EXPECT_FALSE(rec->stats.truncated);
  EXPECT_TRUE(rec->stats.issues.empty()) << rec->stats.issues.front().message;
}

TEST(KinetoImport, NewSchemaWithBaseTimeAfterEvents) {
  auto rec = ImportKinetoTraceFromMemory("new.json", kNewSchema);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  const TimeNs base = 1700000000000000000LL;
  EXPECT_EQ(rec->rank, 3);
  EXPECT_EQ(rec->world_size, 8);
  EXPECT_EQ(rec->comm_backend, "nccl");
  ASSERT_EQ(rec->steps.size(), 1u);  // the GPU-lane copy is not a second step
  EXPECT_EQ(rec->steps[0].host, (Interval{base + 100500, base + 300750}));
  ASSERT_EQ(rec->runtime_calls.size(), 2u);
  EXPECT_EQ(rec->runtime_calls[0].time.start, base + 110125);  // "us.nnn" string
  EXPECT_EQ(rec->runtime_calls[0].kind, RuntimeCallKind::kKernelLaunch);
  EXPECT_TRUE(rec->runtime_calls[1].driver_api);
  EXPECT_EQ(rec->runtime_calls[1].kind, RuntimeCallKind::kKernelLaunch);
  ASSERT_EQ(rec->kernels.size(), 2u);
  EXPECT_EQ(rec->kernels[0].time.start, base + 115063);  // 115.0625 µs rounds to ns
  EXPECT_EQ(rec->kernels[1].time.duration(), 1760);
  EXPECT_EQ(rec->stats.python_function_events, 1);
  EXPECT_EQ(rec->metadata.at("traceName"), "x.json");
  EXPECT_TRUE(rec->clock_is_absolute);
}

TEST(KinetoImport, GzipIsDetectedByContent) {
  const std::string gz = Gzip(kOldSchema);
  auto rec = ImportKinetoTraceFromMemory("old.json.gz", gz);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->kernels.size(), 1u);
  EXPECT_FALSE(rec->stats.truncated);
}

TEST(KinetoImport, TruncatedFileKeepsCompleteEventsAndSaysWhatWasLost) {
  const std::string full = kOldSchema;
  const size_t cut = full.find("\"Memcpy HtoD");  // inside the memcpy event
  auto rec = ImportKinetoTraceFromMemory("crashed.json", full.substr(0, cut));
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->stats.truncated);
  EXPECT_NE(rec->stats.truncation_note.find("ends inside an event"), std::string::npos) << rec->stats.truncation_note;
  EXPECT_EQ(rec->kernels.size(), 1u);
  EXPECT_EQ(rec->memory_ops.size(), 0u);
}

TEST(KinetoImport, TruncatedGzipKeepsWhatDecompressed) {
  // A large enough trace that the cut falls after many events.
  std::string big = "{\"traceEvents\": [";
  for (int i = 0; i < 5000; ++i) {
    big += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k" + std::to_string(i % 7) +
           "\", \"pid\": 0, \"tid\": 7, \"ts\": " + std::to_string(1000 + i * 10) +
           ", \"dur\": 5, \"args\": {\"device\": 0, \"stream\": 7}},\n";
  }
  big += "{\"ph\": \"i\", \"name\": \"end\", \"ts\": 1}]}";
  const std::string gz = Gzip(big);
  auto rec = ImportKinetoTraceFromMemory("crashed.json.gz", gz.substr(0, gz.size() / 2));
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->stats.truncated);
  EXPECT_GT(rec->kernels.size(), 100u);
  EXPECT_LT(rec->kernels.size(), 5000u);
  EXPECT_NE(rec->stats.truncation_note.find("gzip"), std::string::npos) << rec->stats.truncation_note;
}

TEST(KinetoImport, BadEventsAreCountedAndSkipped) {
  const char* trace = R"json({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "a", "ts": 1, "dur": 2, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "no time", "args": {"device": 0}},
    {"ph": "X", "cat": "kernel", "name": "bad time", "ts": "soon", "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "negative", "ts": 5, "dur": -1},
    {"ph": "X", "cat": "kernel", "name": "broken" "ts": 5},
    42,
    {"ph": "X", "cat": "mystery", "name": "m", "ts": 1, "dur": 1}
  ]})json";
  auto rec = ImportKinetoTraceFromMemory("bad.json", trace);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->kernels.size(), 1u);
  int64_t counted = 0;
  for (const auto& issue : rec->stats.issues) {
    counted += issue.count;
    EXPECT_NE(issue.message.find("bad.json: byte "), std::string::npos) << issue.message;
  }
  EXPECT_EQ(counted, 6);
}

TEST(KinetoImport, ImpossibleTimesAreNamedNotOverflowed) {
  // 9e15 µs = 9e18 ns fits int64 but lies ~285 years out; a shift by such a base
  // would overflow. Both are reported and the trace still imports.
  const char* trace = R"json({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "ok", "ts": 10, "dur": 2, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "far", "ts": 9e15, "dur": 2, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "long", "ts": 10, "dur": 2e12, "args": {"device": 0, "stream": 7}}
  ], "baseTimeNanoseconds": 9000000000000000000})json";
  auto rec = ImportKinetoTraceFromMemory("times.json", trace);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->kernels.size(), 1u);
  EXPECT_EQ(rec->kernels[0].time.start, 10000);  // not shifted
  ASSERT_NE(rec->stats.FindIssue("time_out_of_range"), nullptr);
  EXPECT_EQ(rec->stats.FindIssue("time_out_of_range")->count, 2);
  EXPECT_NE(rec->stats.FindIssue("bad_base_time"), nullptr);
}

TEST(KinetoImport, BaseTimeWithoutTimedEventsIsHarmless) {
  // Found by the fuzzer: no usable event, so there is nothing to shift.
  auto rec = ImportKinetoTraceFromMemory(
      "meta_only.json", R"json({"traceEvents": [{"ph": "M", "name": "process_name"}], "baseTimeNanoseconds": -700000000000000000})json");
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->kernels.empty());
  EXPECT_FALSE(rec->clock_is_absolute);
}

TEST(KinetoImport, EmptyAndWrongFormatInputsAreClearErrors) {
  auto empty = ImportKinetoTraceFromMemory("empty.json", "");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(empty.status().message().find("empty.json"), std::string::npos);

  auto blank = ImportKinetoTraceFromMemory("blank.json", "   \n ");
  ASSERT_FALSE(blank.ok());

  auto csv = ImportKinetoTraceFromMemory("util.csv", "timestamp,gpu_util\n1,50\n");
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(csv.status().message().find("not a JSON trace"), std::string::npos);

  auto other_json = ImportKinetoTraceFromMemory("config.json", R"json({"lr": 0.1, "layers": [1, 2]})json");
  ASSERT_FALSE(other_json.ok());
  EXPECT_NE(other_json.status().message().find("traceEvents"), std::string::npos);

  auto garbage = ImportKinetoTraceFromMemory("garbage.json", "{\"traceEvents\": [{\"ph\": \"X\"} junk ]}");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(garbage.status().message().find("byte"), std::string::npos);

  const std::string binary("\x89PNG\r\n\x1a\n\0\0", 10);
  auto png = ImportKinetoTraceFromMemory("picture.png", binary);
  ASSERT_FALSE(png.ok());
  EXPECT_EQ(png.status().code(), StatusCode::kUnimplemented);

  auto missing = ImportKinetoTrace("/nonexistent/trace.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(KinetoImport, CorruptGzipIsNamed) {
  std::string gz = Gzip(kOldSchema);
  for (size_t i = 20; i < gz.size() - 10; i += 3) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  auto rec = ImportKinetoTraceFromMemory("corrupt.json.gz", gz);
  if (rec.ok()) {
    EXPECT_TRUE(rec->stats.truncated);  // whatever decoded before the damage, with the loss stated
  } else {
    EXPECT_NE(rec.status().message().find("corrupt.json.gz"), std::string::npos) << rec.status().ToString();
  }
}

std::string Zstd(const std::string& in, int window_log = 0) {
  ZSTD_CCtx* ctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(ctx, ZSTD_c_compressionLevel, 3);
  if (window_log > 0) {
    ZSTD_CCtx_setParameter(ctx, ZSTD_c_enableLongDistanceMatching, 1);
    ZSTD_CCtx_setParameter(ctx, ZSTD_c_windowLog, window_log);
  }
  // Streamed without the size, as a pipe into `zstd` writes it: the frame keeps
  // the window it was given (a known small size would shrink it).
  std::string out(ZSTD_compressBound(in.size()) + 1024, '\0');
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  ZSTD_outBuffer output{out.data(), out.size(), 0};
  // A first call that does not end the frame: zstd then cannot know the size.
  size_t left = ZSTD_compressStream2(ctx, &output, &input, ZSTD_e_continue);
  ZSTD_inBuffer none{nullptr, 0, 0};
  if (!ZSTD_isError(left)) left = ZSTD_compressStream2(ctx, &output, &none, ZSTD_e_end);
  ZSTD_freeCCtx(ctx);
  out.resize(ZSTD_isError(left) || left != 0 ? 0 : output.pos);
  return out;
}

TEST(KinetoImport, ZstdIsDetectedByContentAndFramesConcatenate) {
  // Two frames back to back (zstd -c a b, or a file appended to) are one stream.
  const std::string full = kOldSchema;
  const size_t half = full.size() / 2;
  const std::string zst = Zstd(full.substr(0, half)) + Zstd(full.substr(half));
  auto rec = ImportKinetoTraceFromMemory("old.json.zst", zst);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  auto plain = ImportKinetoTraceFromMemory("old.json", full);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(rec->kernels.size(), plain->kernels.size());
  EXPECT_EQ(rec->stats.events_seen, plain->stats.events_seen);
  EXPECT_FALSE(rec->stats.truncated);
}

TEST(KinetoImport, TruncatedAndCorruptZstdAreNamed) {
  std::string big = "{\"traceEvents\": [";
  for (int i = 0; i < 20000; ++i)
    big += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k" + std::to_string(i * 7919 % 1000) +
           "\", \"ts\": " + std::to_string(1000 + i * 10) + ", \"dur\": 5, \"args\": {\"device\": 0}},\n";
  big += "{\"ph\": \"i\", \"name\": \"end\", \"ts\": 1}]}";
  const std::string zst = Zstd(big);
  auto cut = ImportKinetoTraceFromMemory("crashed.json.zst", zst.substr(0, zst.size() / 2));
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_TRUE(cut->stats.truncated);
  EXPECT_GT(cut->kernels.size(), 100u);
  EXPECT_NE(cut->stats.truncation_note.find("zstd stream ends early"), std::string::npos) << cut->stats.truncation_note;

  std::string damaged = zst;
  for (size_t i = damaged.size() / 3; i < damaged.size() / 3 + 64; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
  // Damage is met either by the decoder or, in what it decoded, by the reader:
  // each says which file (the run is never diagnosed as if nothing happened).
  auto bad = ImportKinetoTraceFromMemory("damaged.json.zst", damaged);
  const std::string said = bad.ok() ? bad->stats.truncation_note : bad.status().message();
  EXPECT_NE(said.find("damaged.json.zst"), std::string::npos) << said;
}

TEST(KinetoImport, ZstdWindowOverTheMemoryBoundIsRefusedWithTheFix) {
  // zstd --long=28 writes frames that need a 256 MiB window to decode.
  const std::string zst = Zstd(kOldSchema, 28);
  ASSERT_FALSE(zst.empty());
  auto rec = ImportKinetoTraceFromMemory("long.json.zst", zst);
  const std::string said = rec.ok() ? rec->stats.truncation_note : rec.status().message();
  EXPECT_NE(said.find("--long=27"), std::string::npos) << said;
}

TEST(KinetoImport, EventsLargerThanTheReadBufferAndBareArrays) {
  std::string long_name(9 << 20, 'x');  // 9 MiB name: larger than the 4 MiB read chunk
  std::string trace = "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" + long_name +
                      "\", \"ts\": 1, \"dur\": 1, \"args\": {\"device\": 0, \"stream\": 7}}]";
  auto rec = ImportKinetoTraceFromMemory("bare.json", trace);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->kernels.size(), 1u);
  EXPECT_EQ(rec->names.View(rec->kernels[0].name).size(), long_name.size());
}

TEST(KinetoImport, EscapedQuotesInStrings) {
  const char* trace = R"json({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "a \"quoted\" {name} [x]\\", "ts": 1, "dur": 2}]})json";
  auto rec = ImportKinetoTraceFromMemory("esc.json", trace);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->cpu_spans.size(), 1u);
  EXPECT_EQ(rec->names.View(rec->cpu_spans[0].name), "a \"quoted\" {name} [x]\\");
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

// record_shapes=True and profile_memory=True: a bf16 nn.Linear(1000 -> 1001) whose
// output width misses the 8-element tile, an aligned one, and the allocator's totals.
std::string ShapesTrace(int steps) {
  std::string events;
  int64_t corr = 1, ext = 1;
  for (int s = 0; s < steps; ++s) {
    const int base = 1000 + s * 1000;
    events += fmt::format(R"({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "pid": 1, "tid": 1, "ts": {}, "dur": 1000}},)",
                          s, base);
    for (int op = 0; op < 2; ++op, ++corr, ++ext) {
      const int t = base + 10 + op * 300;
      const char* dims = op == 0 ? "[[4096, 1000], [1001, 1000], [1001]]" : "[[4096, 1024], [1024, 1024], [1024]]";
      events += fmt::format(
          R"({{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": {}, "dur": 60, "args": {{"External id": {}, "Input Dims": {}, "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]}}}},)"
          R"({{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {}, "dur": 5, "args": {{"correlation": {}, "External id": {}}}}},)"
          R"({{"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", "pid": 0, "tid": 7, "ts": {}, "dur": 250, "args": {{"device": 0, "stream": 7, "correlation": {}, "External id": {}}}}},)",
          t, ext, dims, t + 20, corr, ext, t + 30, corr, ext);
    }
    events += fmt::format(
        R"({{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": {}, "args": {{"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": 1048576, "Total Allocated": {}, "Total Reserved": {}}}}},)",
        base + 5, (s + 1) * (int64_t{1} << 30), (s + 2) * (int64_t{1} << 30));
  }
  events.pop_back();
  return R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8,
    "computeMinor": 0, "numSms": 108, "totalGlobalMem": 85899345920}], "traceEvents": [)" + events + "]}";
}

TEST(KinetoImport, RecordShapesAndMemoryEvents) {
  auto rec = ImportKinetoTraceFromMemory("shapes.json", ShapesTrace(4));
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->matrix_shapes.size(), 8u);
  const auto& s = rec->matrix_shapes[0];
  EXPECT_EQ(rec->names.View(s.name), "aten::linear");
  EXPECT_EQ(rec->names.View(s.dtype), "c10::BFloat16");
  ASSERT_EQ(s.inputs, 3);
  EXPECT_EQ(s.rank[0], 2);
  EXPECT_EQ(s.dims[1][0], 1001);
  EXPECT_EQ(s.dims[2][0], 1001);
  ASSERT_EQ(rec->memory_use.size(), 1u);
  EXPECT_EQ(rec->memory_use[0].peak_allocated, int64_t{4} << 30);
  EXPECT_EQ(rec->memory_use[0].peak_reserved, int64_t{5} << 30);
  EXPECT_EQ(rec->memory_use[0].events, 4);
}

/// [memory] events: per device, out of file order; `totals` false writes PyTorch
/// 1.8's form (Bytes only).
std::string MemoryTrace(const std::vector<std::tuple<int, int, int64_t, int64_t, int64_t>>& events, bool totals) {
  std::string out = R"({"schemaVersion": 1, "traceEvents": [)";
  for (const auto& [type, ts, bytes, allocated, reserved] : events) {
    out += fmt::format(R"({{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": {}, "args": {{"Device Type": {}, "Device Id": {}, "Bytes": {})",
                       ts, type, type == 1 ? 2 : -1, bytes);
    if (totals) out += fmt::format(R"(, "Total Allocated": {}, "Total Reserved": {})", allocated, reserved);
    out += "}},";
  }
  out.pop_back();
  return out + "]}";
}

// Issue 42: each device's curve (the host's too), in time order whatever the file's.
TEST(KinetoImport, MemoryEventsGiveEachDeviceItsCurveAndPeak) {
  auto rec = ImportKinetoTraceFromMemory(
      "memory.json", MemoryTrace({{1, 30, -512, 1024, 4096}, {1, 10, 1024, 1024, 2048}, {1, 20, 512, 1536, 4096},
                                  {0, 15, 64, 64, 64}},
                                 true));
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->memory_use.size(), 2u);
  const DeviceMemoryUse* gpu = nullptr;
  const DeviceMemoryUse* host = nullptr;
  for (const auto& m : rec->memory_use) (m.host ? host : gpu) = &m;
  ASSERT_TRUE(gpu != nullptr && host != nullptr);
  EXPECT_EQ(gpu->device, 2);
  EXPECT_FALSE(gpu->relative);
  EXPECT_EQ(gpu->peak_allocated, 1536);
  EXPECT_EQ(gpu->peak_reserved, 4096);
  EXPECT_EQ(gpu->peak_at, 20'000);
  ASSERT_EQ(gpu->curve.size(), 3u);
  EXPECT_EQ(gpu->curve[0].t, 10'000);
  EXPECT_EQ(gpu->curve[2].allocated, 1024);
  EXPECT_EQ(host->peak_allocated, 64);
}

// PyTorch before 1.10: Bytes only. The curve is their running sum from the trace's
// start (a free of memory allocated before it takes it below zero), relative.
TEST(KinetoImport, MemoryEventsWithoutTotalsAreARelativeCurve) {
  auto rec = ImportKinetoTraceFromMemory(
      "old_memory.json", MemoryTrace({{1, 10, -100, 0, 0}, {1, 20, 300, 0, 0}, {1, 30, 200, 0, 0}, {1, 40, -300, 0, 0}},
                                     false));
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->memory_use.size(), 1u);
  const auto& m = rec->memory_use[0];
  EXPECT_TRUE(m.relative);
  EXPECT_EQ(m.peak_reserved, -1);  // unknown
  ASSERT_EQ(m.curve.size(), 4u);
  EXPECT_EQ(m.curve[0].allocated, -100);
  EXPECT_EQ(m.curve[2].allocated, 400);
  EXPECT_EQ(m.peak_allocated, 400);
  EXPECT_EQ(m.peak_at, 30'000);
  // A relative curve is not the GPU's level: the device's memory figures stay unknown.
  EXPECT_FALSE(analysis::MeasureTraceMemory(*rec, Device{}).available);
}

TEST(KinetoImport, MemoryEventsWithAndWithoutTotalsOnOneDeviceAreSaid) {
  // The first event has totals; a later one on the same GPU has Bytes only: left out, and said.
  std::string trace = MemoryTrace({{1, 10, 1024, 1024, 2048}, {1, 20, 512, 1536, 4096}}, true);
  trace.insert(trace.size() - 2, R"(, {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30, )"
                                 R"("args": {"Device Type": 1, "Device Id": 2, "Bytes": -512}})");
  auto rec = ImportKinetoTraceFromMemory("mixed_memory.json", trace);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->memory_use.size(), 1u);
  EXPECT_EQ(rec->memory_use[0].events, 2);
  const auto* issue = rec->stats.FindIssue("memory_events_mixed");
  ASSERT_NE(issue, nullptr);
  EXPECT_EQ(issue->count, 1);
  EXPECT_NE(issue->message.find("without allocator totals"), std::string::npos) << issue->message;
}

// A long trace: the curve a chart gets keeps every run's lowest and highest point,
// so the single highest event survives decimation.
TEST(KinetoImport, ADecimatedMemoryCurveKeepsItsPeak) {
  DeviceMemoryUse use;
  for (int i = 0; i < 100'000; ++i) use.curve.push_back({i, 1000 + (i % 7) * 10, 5000});
  use.curve[77'777].allocated = 1'000'000;
  FinishMemoryCurve(use);
  EXPECT_LE(use.curve.size(), DeviceMemoryUse::kMaxCurvePoints);
  EXPECT_EQ(use.peak_allocated, 1'000'000);
  EXPECT_EQ(use.peak_at, 77'777);
  EXPECT_TRUE(std::any_of(use.curve.begin(), use.curve.end(), [](const MemoryPoint& p) { return p.allocated == 1'000'000; }));
  EXPECT_TRUE(std::is_sorted(use.curve.begin(), use.curve.end(),
                             [](const MemoryPoint& a, const MemoryPoint& b) { return a.t < b.t; }));
}

TEST(KinetoImport, OffTileShapesAreNamedWithTheirOp) {
  auto rec = ImportKinetoTraceFromMemory("shapes.json", ShapesTrace(6));
  ASSERT_TRUE(rec.ok());
  gputriage::Run run;
  run.recordings.push_back(std::move(*rec));
  const Diagnosis d = Diagnose(run);
  const auto& a = d.recordings[0];
  EXPECT_NEAR(a.shapes.misaligned_percent_of_matrix, 50.0, 1e-9);
  ASSERT_EQ(a.shapes.top.size(), 1u);
  EXPECT_EQ(a.shapes.top[0].dims, "N=1001 (not a multiple of 8)");
  EXPECT_NEAR(a.memory.peak_reserved_gib, 7.0, 1e-9);
  EXPECT_NEAR(a.memory.total_gib, 80.0, 1e-9);
  const Finding* f = nullptr;
  for (const auto& x : d.findings)
    if (x.verdict == "misaligned_shapes") f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("aten::linear"), std::string::npos);
  EXPECT_NE(f->detail.find("[[4096, 1000], [1001, 1000], [1001]]"), std::string::npos);
  ASSERT_TRUE(f->gain.has_value());
}

}  // namespace
}  // namespace gputriage
