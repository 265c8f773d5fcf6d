// Format tests for the metric-log readers, written from the published formats
// (nvidia-smi --help-query-gpu and its CSV conventions, nvidia-smi dmon, dcgmi
// dmon, dcgm-exporter's render template and DCGM 4.6/4.7 names). Real captures
// are in metric_golden_test.cc.
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gputriage/import.h"
#include "gputriage/metrics.h"
#include "src/sources/metrics/metric_readers.h"
#include "src/sources/metrics/metric_text.h"
#include "src/util/line_reader.h"

namespace gputriage {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Recording ImportOne(const std::string& text, ImportOptions options = {}) {
  auto recs = ImportMetricLogFromMemory("test.log", text, options);
  EXPECT_TRUE(recs.ok()) << recs.status().ToString();
  if (!recs.ok() || recs->empty()) return Recording{};
  EXPECT_EQ(recs->size(), 1u);
  return std::move(recs->front());
}

const MetricDevice* FindIndex(const Recording& rec, int index, int instance = -1) {
  for (const auto& d : rec.metrics.devices)
    if (d.index == index && d.mig_instance == instance) return &d;
  return nullptr;
}

// ---- shared text pieces ---------------------------------------------------

TEST(MetricText, TimestampFormats) {
  using metric_text::ParseTimestamp;
  const TimeNs day = metric_text::DaysFromCivil(2026, 7, 14) * 86400 * kNsPerS;
  const TimeNs tod = ((8 * 60 + 12) * 60 + 38) * kNsPerS;
  EXPECT_EQ(ParseTimestamp("2026/07/14 08:12:38.696"), day + tod + 696 * kNsPerMs);
  EXPECT_EQ(ParseTimestamp("2026-07-14T08:12:38Z"), day + tod);
  EXPECT_EQ(ParseTimestamp("2026-07-14T10:12:38+02:00"), day + tod);
  EXPECT_EQ(ParseTimestamp("2026-07-14 08:12:38.5"), day + tod + 500 * kNsPerMs);
  EXPECT_EQ(ParseTimestamp("20260714 08:12:38"), day + tod);
  EXPECT_EQ(ParseTimestamp("Tue Jul 14 08:12:38 2026"), day + tod);
  EXPECT_EQ(ParseTimestamp("Sat Feb  1 00:00:00 2025"), metric_text::DaysFromCivil(2025, 2, 1) * 86400 * kNsPerS);
  EXPECT_EQ(ParseTimestamp("1752480758.5"), 1752480758500000000LL);
  EXPECT_EQ(ParseTimestamp("07-14-2026 08:12:38"), day + tod);  // date +%m-%d-%Y (a Jetson's log)
  EXPECT_EQ(ParseTimestamp("07/14/2026 08:12:38"), day + tod);
  EXPECT_EQ(ParseTimestamp("14-07-2026 08:12:38"), day + tod);  // a first field over 12 is the day
  EXPECT_FALSE(ParseTimestamp("14-13-2026 08:12:38"));
  EXPECT_FALSE(ParseTimestamp("2026/13/14 08:12:38"));
  EXPECT_FALSE(ParseTimestamp("yesterday"));
  EXPECT_FALSE(ParseTimestamp("2026/07/14 25:00:00"));
  EXPECT_FALSE(ParseTimestamp("12345"));
  // Fuzzer find: a far-future asctime year overflowed int64 nanoseconds.
  EXPECT_FALSE(ParseTimestamp("Tue Jul 14 08:12:38 9999"));
  EXPECT_FALSE(ParseTimestamp("Tue Jul 123456789012345678901 08:12:38 2026"));
}

TEST(MetricText, MissingValuesAndUnits) {
  for (const char* t : {"[N/A]", "N/A", "-", "", "[Not Supported]", "[Unknown Error]", "[GPU is lost]",
                        "[Requested functionality has been deprecated]", "[Insufficient Permissions]"})
    EXPECT_TRUE(metric_text::IsMissing(t)) << t;
  EXPECT_FALSE(metric_text::IsMissing("0"));
  auto v = metric_text::ParseValueWithUnit("631.95 W");
  ASSERT_TRUE(v);
  EXPECT_DOUBLE_EQ(v->value, 631.95);
  EXPECT_EQ(v->unit, "W");
  EXPECT_EQ(metric_text::ParseNumber("0x00000000000001FF"), 511.0);
  EXPECT_EQ(metric_text::BytesPerUnit("MiB"), kMiB);
  EXPECT_EQ(metric_text::BytesPerUnit("KB/s"), 1e3);
  EXPECT_FALSE(metric_text::ParseNumber("12abc"));
}

// ---- nvidia-smi --query-gpu CSV -----------------------------------------

TEST(SmiCsv, HeaderUnitsInterleavedGpus) {
  // nvidia-smi --query-gpu=timestamp,index,name,utilization.gpu,memory.used,memory.total,power.draw,power.limit
  //   --format=csv,nounits -l 1
  const std::string log =
      "timestamp, index, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]\n"
      "2026/07/14 08:00:00.100, 0, NVIDIA A100-SXM4-80GB, 90, 40000, 81920, 350.5, 400.00\n"
      "2026/07/14 08:00:00.102, 1, NVIDIA A100-SXM4-80GB, 10, 1000, 81920, 90.0, 400.00\n"
      "2026/07/14 08:00:01.100, 0, NVIDIA A100-SXM4-80GB, 100, 40000, 81920, 380.5, 400.00\n"
      "2026/07/14 08:00:01.102, 1, NVIDIA A100-SXM4-80GB, [N/A], 1000, 81920, 92.0, 400.00\n";
  Recording rec = ImportOne(log);
  EXPECT_EQ(rec.format, "nvidia-smi-csv");
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  const MetricDevice* g0 = FindIndex(rec, 0);
  const MetricDevice* g1 = FindIndex(rec, 1);
  ASSERT_TRUE(g0 && g1);
  EXPECT_EQ(g0->name, "NVIDIA A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(g0->Get(Metric::kGpuUtil).mean(), 95.0);
  EXPECT_EQ(g1->Get(Metric::kGpuUtil).count(), 1);  // [N/A] is missing, not 0
  EXPECT_DOUBLE_EQ(g0->Get(Metric::kFbUsedBytes).mean(), 40000 * kMiB);
  EXPECT_EQ(g0->memory_total_bytes, static_cast<int64_t>(81920 * kMiB));
  EXPECT_DOUBLE_EQ(g0->power_limit_w, 400.0);
  EXPECT_EQ(g0->Get(Metric::kGpuUtil).MedianInterval(), kNsPerS);
  EXPECT_EQ(rec.metrics.rows, 4);
  EXPECT_FALSE(rec.metrics.timestamps_synthetic);
}

TEST(SmiCsv, UnitsInValuesAndAnyColumnOrder) {
  // --format=csv (units in the values), fields in an unusual order, keyed by uuid.
  const std::string log =
      "power.draw [W], utilization.gpu [%], uuid, clocks.sm [MHz], clocks.max.sm [MHz], timestamp, temperature.gpu\n"
      "250.10 W, 45 %, GPU-aaaa, 1410 MHz, 1410 MHz, 2026/01/02 03:04:05.000, 60\n"
      "120.00 W, 5 %, GPU-bbbb, 1005 MHz, 1410 MHz, 2026/01/02 03:04:05.010, 50\n"
      "260.10 W, 55 %, GPU-aaaa, 1410 MHz, 1410 MHz, 2026/01/02 03:04:06.000, 61\n";
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  const auto& a = rec.metrics.devices[0];
  EXPECT_EQ(a.uuid, "GPU-aaaa");
  EXPECT_DOUBLE_EQ(a.Get(Metric::kGpuUtil).mean(), 50.0);
  EXPECT_DOUBLE_EQ(a.Get(Metric::kPowerW).mean(), 255.1);
  EXPECT_DOUBLE_EQ(a.max_sm_clock_mhz, 1410);
  EXPECT_DOUBLE_EQ(rec.metrics.devices[1].Get(Metric::kSmClockMHz).mean(), 1005);
}

TEST(SmiCsv, ColumnsAScriptNamedInNvidiaSmisShape) {
  // A pynvml logging script's CSV (anjana5anand/Distracted-Driving-Detection): the
  // unit glued to the name and NVML-ish names; read, not skipped as unknown columns.
  const std::string log =
      "timestamp,index,name,gpu_utilization[%],memory.total[MiB],memory.used[MiB],memory.free[MiB],temperature[°C]\n"
      "2025/05/25 00:13:19.084, 0, NVIDIA RTX A5000, 10, 24564, 11325, 12909, 72\n"
      "2025/05/25 00:13:20.102, 0, NVIDIA RTX A5000, 56, 24564, 11326, 12908, 70\n";
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const auto& g = rec.metrics.devices[0];
  EXPECT_EQ(g.Get(Metric::kGpuUtil).count(), 2);
  EXPECT_EQ(g.Get(Metric::kGpuTempC).count(), 2);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kFbUsedBytes).max(), 11326.0 * kMiB);
  // Units as suffixes and percent signs (ilapetrovic/best-llm-finder-pipeline's logger).
  const std::string other =
      "timestamp,gpu_name,gpu_util%,mem_util%,mem_used_MB,mem_total_MB,temp_C\n"
      "2025/10/28 11:25:36.562,NVIDIA A40,0,0,3,46068,27\n"
      "2025/10/28 11:25:37.562,NVIDIA A40,80,10,3000,46068,40\n";
  Recording rec2 = ImportOne(other);
  ASSERT_EQ(rec2.metrics.devices.size(), 1u);
  const auto& a40 = rec2.metrics.devices[0];
  EXPECT_EQ(a40.name, "NVIDIA A40");
  EXPECT_DOUBLE_EQ(a40.Get(Metric::kGpuUtil).max(), 80.0);
  EXPECT_DOUBLE_EQ(a40.Get(Metric::kGpuTempC).max(), 40.0);
  EXPECT_DOUBLE_EQ(a40.Get(Metric::kFbUsedBytes).max(), 3000.0 * kMiB);
}

TEST(SmiCsv, PositionalGpusWithoutKeyColumns) {
  // No index/uuid/bus id: rows of one interval are milliseconds apart, intervals a second.
  const std::string log =
      "timestamp, utilization.gpu [%]\n"
      "2026/01/02 03:04:05.000, 10\n2026/01/02 03:04:05.003, 20\n"
      "2026/01/02 03:04:06.000, 30\n2026/01/02 03:04:06.004, 40\n"
      "2026/01/02 03:04:07.000, 50\n2026/01/02 03:04:07.002, 60\n";
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  // Time-weighted: GPU 1's rows are 0.997 and 0.998 s apart.
  EXPECT_NEAR(FindIndex(rec, 0)->Get(Metric::kGpuUtil).mean(), 30.0, 0.05);
  EXPECT_NEAR(FindIndex(rec, 1)->Get(Metric::kGpuUtil).mean(), 40.0, 0.05);
}

// An index-less log's rows as nvidia-smi writes them: `gpus` rows per cycle,
// queried `query_ms` apart, cycles `interval_ms` apart plus jitter; each GPU has
// its own memory use, and utilization alternates with a rhythm of its own.
std::string InterleavedLog(int gpus, int cycles, double interval_ms, double jitter_ms, double query_ms,
                           int skip_first_rows = 0) {
  std::string log = "timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB]\n";
  uint32_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<double>(seed >> 8) / static_cast<double>(1u << 24);
  };
  double t_ms = 0;
  int row = 0;
  for (int c = 0; c < cycles; ++c) {
    double at = t_ms;
    for (int g = 0; g < gpus; ++g, ++row) {
      if (g > 0) at += query_ms * (0.5 + next());  // each GPU queried after the one before
      if (row < skip_first_rows) continue;
      const int ms = static_cast<int>(at);
      const int util = (c % 2 == 0) ? 100 : 0;
      log += fmt::format("2026/01/02 03:{:02d}:{:02d}.{:03d}, {:.2f} W, {} %, {} MiB\n", 4 + ms / 60000,
                         (ms / 1000) % 60, ms % 1000, 250.0 + 5 * next(), util, 1000 * (g + 1) + (c / 10));
    }
    t_ms += interval_ms + jitter_ms * next();
  }
  return log;
}

const ImportIssue* FindIssue(const Recording& rec, std::string_view kind) {
  for (const auto& i : rec.stats.issues)
    if (i.kind == kind) return &i;
  return nullptr;
}

TEST(SmiCsv, OneGpuSampledFastAndIrregularlyIsOneGpu) {
  // -lms 10 on one GPU: rows 7-19 ms apart. Read once as 4-5 GPUs (rows < 20 ms
  // apart taken for one cycle of several).
  Recording rec = ImportOne(InterleavedLog(1, 600, 7, 12, 0));
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  EXPECT_EQ(rec.metrics.devices[0].Get(Metric::kGpuUtil).count(), 600);
  const ImportIssue* why = FindIssue(rec, "gpu_count_inferred");
  ASSERT_NE(why, nullptr);
  EXPECT_NE(why->message.find("1 GPU inferred"), std::string::npos) << why->message;
  EXPECT_NE(why->message.find("no repeating pattern"), std::string::npos) << why->message;
  EXPECT_NE(why->message.find("--gpus N"), std::string::npos);
}

TEST(SmiCsv, AScriptLoggingEveryFewMinutesIsOneGpuAndItsSpacedNamesAreRead) {
  // A monitoring script's CSV (its own header, one row each 5 minutes, two pauses):
  // the gaps 300 300 300 7063 300 2827 s once read as cycles of two GPUs. Gaps
  // inside a cycle are one sweep's queries (milliseconds), never minutes.
  const std::string text =
      "Time,GPU,Temp (C),Util (%),Memory Used (MB),Total Memory (MB)\n"
      "2025-05-19 16:19:26,NVIDIA GeForce RTX 3070 Laptop GPU,40,55,909.8,8192.0\n"
      "2025-05-19 16:24:26,NVIDIA GeForce RTX 3070 Laptop GPU,42,0,910.4,8192.0\n"
      "2025-05-19 16:29:26,NVIDIA GeForce RTX 3070 Laptop GPU,45,0,871.8,8192.0\n"
      "2025-05-19 16:34:26,NVIDIA GeForce RTX 3070 Laptop GPU,47,0,859.0,8192.0\n"
      "2025-05-19 18:32:09,NVIDIA GeForce RTX 3070 Laptop GPU,27,0,849.4,8192.0\n"
      "2025-05-19 18:37:09,NVIDIA GeForce RTX 3070 Laptop GPU,37,0,838.9,8192.0\n"
      "2025-05-19 19:24:16,NVIDIA GeForce RTX 3070 Laptop GPU,47,0,872.6,8192.0\n";
  Recording rec = ImportOne(text);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const MetricDevice& d = rec.metrics.devices[0];
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 7);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kFbUsedBytes).max(), 910.4 * kMiB);
  EXPECT_EQ(d.memory_total_bytes, static_cast<int64_t>(8192 * kMiB));
}

TEST(SmiCsv, InterleavedGpusAreInferredFromTheCycleOfGaps) {
  for (int gpus : {2, 3, 8}) {
    SCOPED_TRACE(gpus);
    // -lms 100: each GPU's query 1-3 ms after the one before, cycles ~100 ms apart.
    Recording rec = ImportOne(InterleavedLog(gpus, 700, 100, 5, 2));
    ASSERT_EQ(rec.metrics.devices.size(), static_cast<size_t>(gpus));
    for (int g = 0; g < gpus; ++g) {
      const MetricDevice* d = FindIndex(rec, g);
      ASSERT_NE(d, nullptr);
      EXPECT_EQ(d->Get(Metric::kGpuUtil).count(), 700);
      // Each GPU keeps its own memory use: no row was put on another GPU.
      EXPECT_NEAR(d->Get(Metric::kFbUsedBytes).min() / kMiB, 1000.0 * (g + 1), 0.5);
      EXPECT_NEAR(d->Get(Metric::kFbUsedBytes).max() / kMiB, 1000.0 * (g + 1) + 69, 0.5);
    }
    const ImportIssue* why = FindIssue(rec, "gpu_count_inferred");
    ASSERT_NE(why, nullptr);
    EXPECT_NE(why->message.find(fmt::format("cycles of {}", gpus)), std::string::npos) << why->message;
    EXPECT_NE(why->message.find("memory.used"), std::string::npos) << why->message;
  }
}

TEST(SmiCsv, ALogCutMidCycleStartsWithTheLastGpus) {
  Recording rec = ImportOne(InterleavedLog(4, 200, 1000, 50, 3, /*skip_first_rows=*/3));
  ASSERT_EQ(rec.metrics.devices.size(), 4u);
  EXPECT_EQ(FindIndex(rec, 3)->Get(Metric::kGpuUtil).count(), 200);
  EXPECT_EQ(FindIndex(rec, 0)->Get(Metric::kGpuUtil).count(), 199);
  EXPECT_NEAR(FindIndex(rec, 3)->Get(Metric::kFbUsedBytes).min() / kMiB, 4000.0, 0.5);
}

TEST(SmiCsv, EvenlySpacedRowsOfSeveralGpusShowInTheirMemory) {
  // A logging loop that queries one GPU at a time, evenly spaced: no cycles in
  // the timing, but each GPU's memory use continues every 3 rows.
  std::string log = "timestamp, utilization.gpu [%], memory.used [MiB]\n";
  for (int row = 0; row < 300; ++row)
    log += fmt::format("2026/01/02 03:{:02d}:{:02d}.{:03d}, {}, {} MiB\n", 4 + row / 600, (row / 10) % 60,
                       (row % 10) * 100, (row / 3) % 2 == 0 ? 100 : 0, 1000 * (row % 3 + 1) + row / 30);
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 3u);
  EXPECT_NEAR(FindIndex(rec, 2)->Get(Metric::kFbUsedBytes).min() / kMiB, 3000.0, 0.5);
  const ImportIssue* why = FindIssue(rec, "gpu_count_inferred");
  ASSERT_NE(why, nullptr);
  EXPECT_NE(why->message.find("no cycles in the timing"), std::string::npos) << why->message;
}

TEST(SmiCsv, GpusOptionSetsTheCount) {
  ImportOptions two;
  two.gpus = 2;
  Recording rec = ImportOne(InterleavedLog(1, 100, 7, 12, 0), two);
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  EXPECT_EQ(FindIssue(rec, "gpu_count_inferred"), nullptr);
}

// Integers 0-100 with no unit beside a timestamp: utilization, temperature or fan
// speed. Nothing tells which, so nothing is guessed: the error says what the rows
// are and how to name the columns.
TEST(SmiCsv, HeaderlessAmbiguousColumnsNeedTheColumnList) {
  const std::string log = "2026/01/02 03:04:05.000, 0, 77\n2026/01/02 03:04:06.000, 0, 79\n";
  ImportOptions bad;
  bad.format = "nvidia-smi-csv";
  auto recs = ImportMetricLogFromMemory("headerless.csv", log, bad);
  ASSERT_FALSE(recs.ok());
  EXPECT_NE(recs.status().message().find("--smi-columns"), std::string::npos);
  EXPECT_NE(recs.status().message().find("headerless.csv:1"), std::string::npos);
  ImportOptions good;
  good.smi_columns = {"timestamp", "index", "utilization.gpu"};
  Recording rec = ImportOne(log, good);  // detected as nvidia-smi CSV by the timestamp
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  EXPECT_DOUBLE_EQ(rec.metrics.devices[0].Get(Metric::kGpuUtil).mean(), 78.0);
}

const ImportIssue* Inferred(const Recording& rec) { return rec.stats.FindIssue("columns_inferred"); }

// --format=csv,noheader (units kept): the units tell the fields, the order tells
// utilization.gpu from utilization.memory; every assumption is in the report.
TEST(SmiCsv, HeaderlessWithUnitsReadsEveryField) {
  std::string log;
  for (int i = 0; i < 6; ++i)
    log += fmt::format("2026/01/02 03:04:{:02}.000, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 535.104.05, {} %, {} %, "
                       "{} MiB, 81559 MiB, {}.25 W, 700.00 W, 1980 MHz, 2619 MHz, 0x0000000000000000\n",
                       i, 40 + i, 10 + i, 70000 + i, 300 + i);
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const MetricDevice& d = rec.metrics.devices[0];
  EXPECT_EQ(d.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d.driver_version, "535.104.05");
  EXPECT_DOUBLE_EQ(d.Get(Metric::kGpuUtil).mean(), 42.5);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kMemCopyUtil).mean(), 12.5);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kFbUsedBytes).max(), 70005 * kMiB);
  EXPECT_EQ(d.memory_total_bytes, static_cast<int64_t>(81559 * kMiB));
  EXPECT_DOUBLE_EQ(d.Get(Metric::kPowerW).max(), 305.25);
  EXPECT_DOUBLE_EQ(d.power_limit_w, 700.0);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kSmClockMHz).mean(), 1980.0);
  EXPECT_EQ(d.Get(Metric::kClockEventReasons).count(), 6);
  EXPECT_FALSE(rec.metrics.timestamps_synthetic);
  const auto* note = Inferred(rec);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->severity, IssueSeverity::kInfo);
  EXPECT_NE(note->message.find("test.log:1: no CSV header"), std::string::npos) << note->message;
  EXPECT_NE(note->message.find("column 5 is utilization.gpu"), std::string::npos) << note->message;
  EXPECT_NE(note->message.find("column 8 is memory.total"), std::string::npos) << note->message;
  EXPECT_NE(note->message.find("--smi-columns"), std::string::npos) << note->message;
}

// The shortest form people log: `--query-gpu=utilization.gpu,memory.used
// --format=csv,noheader -l 1`: no clock, one row a second.
TEST(SmiCsv, HeaderlessWithoutTimestampIsReadAtTheInterval) {
  Recording rec = ImportOne("2 %, 588 MiB\n97 %, 60211 MiB\n98 %, 60211 MiB\n");
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const MetricDevice& d = rec.metrics.devices[0];
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 3);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kFbUsedBytes).max(), 60211 * kMiB);
  EXPECT_TRUE(rec.metrics.timestamps_synthetic);
  ASSERT_TRUE(Inferred(rec));
}

// nounits with a Unix time: memory by its constant total, power by its decimals;
// the integers 0-100 stay unknown and say so (utilization is not guessed).
TEST(SmiCsv, HeaderlessWithoutUnitsReadsWhatIsCertain) {
  std::string log;
  for (int i = 0; i < 8; ++i) log += fmt::format("{},0, {}.9, {}, 81920\n", 1767225600 + i, 71 + i, 70112 + i);
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const MetricDevice& d = rec.metrics.devices[0];
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 0);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kPowerW).min(), 71.9);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kFbUsedBytes).min(), 70112 * kMiB);
  EXPECT_EQ(d.memory_total_bytes, static_cast<int64_t>(81920 * kMiB));
  EXPECT_EQ(d.Get(Metric::kPowerW).first_time(), 1767225600LL * kNsPerS);
  const auto* note = Inferred(rec);
  ASSERT_TRUE(note);
  EXPECT_NE(note->message.find("Unix time"), std::string::npos) << note->message;
  EXPECT_NE(note->message.find("column 2 holds numbers 0-100"), std::string::npos) << note->message;
  EXPECT_NE(note->message.find("utilization is unknown"), std::string::npos) << note->message;
}

// Two GPUs, one row each per interval, with their index: the cycling integers.
TEST(SmiCsv, HeaderlessIndexColumnSeparatesGpus) {
  std::string log;
  for (int i = 0; i < 5; ++i)
    for (int g = 0; g < 2; ++g)
      log += fmt::format("2026/01/02 03:04:{:02}.{:03}, {}, {} %, {} MiB\n", i, g, g, g == 0 ? 90 : 0, 1000 + g);
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  EXPECT_DOUBLE_EQ(FindIndex(rec, 0)->Get(Metric::kGpuUtil).mean(), 90.0);
  EXPECT_DOUBLE_EQ(FindIndex(rec, 1)->Get(Metric::kGpuUtil).mean(), 0.0);
}

// A CSV of numbers that is not a GPU log is refused with what it is.
TEST(SmiCsv, HeaderlessRowsWithoutGpuDataAreRefusedSayingWhatTheyAre) {
  auto recs = ImportMetricLogFromMemory("loss.csv", "step,loss\n1,2.31\n2,2.05\n3,1.98\n", ImportOptions{});
  ASSERT_FALSE(recs.ok());
  EXPECT_NE(recs.status().message().find("loss.csv:1: no CSV header, and the values do not read as GPU data (3 rows "
                                         "of 2 columns: 2 numeric (2 without a unit), 0 text)"),
            std::string::npos)
      << recs.status().message();
}

// A log appended to: headerless rows, then a logger restarted with its header.
// Both parts are read; the header names the columns below it.
TEST(SmiCsv, HeaderlessRowsThenAHeaderAreBothRead) {
  const std::string log =
      "2026/01/02 03:04:05.000, 50 %, 1000 MiB\n2026/01/02 03:04:06.000, 52 %, 1000 MiB\n"
      "timestamp, index, utilization.gpu [%]\n"
      "2026/01/02 03:05:00.000, 0, 70\n2026/01/02 03:05:01.000, 0, 72\n";
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  EXPECT_EQ(rec.metrics.devices[0].Get(Metric::kGpuUtil).count(), 4);
  ASSERT_TRUE(Inferred(rec));
}

// A script's own header whose names gputriage does not know: the names it
// does know are kept, the rest read from the values.
TEST(SmiCsv, AScriptsUnknownHeaderIsReadFromItsValues) {
  const std::string log =
      "Time,GPU Load,VRAM\n2026/01/02 03:04:05.000, 50 %, 1000 MiB\n2026/01/02 03:04:06.000, 52 %, 1010 MiB\n";
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  EXPECT_EQ(rec.metrics.devices[0].Get(Metric::kGpuUtil).count(), 2);
  EXPECT_EQ(rec.metrics.devices[0].Get(Metric::kFbUsedBytes).count(), 2);
  ASSERT_TRUE(Inferred(rec));
}

// nvidia-smi's own rows (its timestamps, a cycling GPU index) with no units, from
// an idle start: a few MiB used and utilization 0 read like numbers 0-100, so the
// first 512 rows cannot tell memory from utilization. The reader reads on (bounded)
// until the job's memory shows: memory is read, utilization stays unknown.
TEST(SmiCsv, AnIdleStartIsReadOnUntilTheColumnsCanBeTold) {
  std::string log;
  for (int r = 0; r < 700; ++r) {
    const int used = r < 600 ? 4 : 10537;
    log += fmt::format("2025/09/21 16:{:02d}:{:02d}.315, 0, 0, 0, {}, 24564\n", r / 60 % 60, r % 60, used);
    log += fmt::format("2025/09/21 16:{:02d}:{:02d}.318, 1, 0, 0, {}, 24564\n", r / 60 % 60, r % 60, used);
  }
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  EXPECT_DOUBLE_EQ(rec.metrics.devices[0].Get(Metric::kFbUsedBytes).max(), 10537.0 * 1024 * 1024);
  EXPECT_EQ(rec.metrics.devices[0].Get(Metric::kGpuUtil).count(), 0);  // 0-100 without a unit: never guessed
  ASSERT_TRUE(rec.stats.FindIssue("columns_inferred"));
  EXPECT_NE(rec.stats.FindIssue("columns_inferred")->message.find("utilization is unknown"), std::string::npos)
      << rec.stats.FindIssue("columns_inferred")->message;
}

// A script's header above rows that hold one more field (its own time before
// nvidia-smi's noheader row): the names go with the rows' last fields, the rest
// is read from the values, and the report says so.
TEST(SmiCsv, RowsWiderThanTheirHeaderAreReadWithItsNamesAsHints) {
  std::string log = "time,gpu_index,gpu_name,gpu_util_percent,mem_used_mb,mem_total_mb,power_w\n";
  for (int s = 0; s < 6; ++s)
    log += fmt::format("2026-05-06 10:06:{:02d},2026/05/06 10:06:{:02d}.521, 0, NVIDIA GeForce RTX 4060 Laptop GPU, "
                       "{}, 410, 8188, 2.01\n", 40 + s, 40 + s, s * 10);
  Recording rec = ImportOne(log);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const MetricDevice& d = rec.metrics.devices[0];
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 6);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kGpuUtil).max(), 50.0);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kPowerW).max(), 2.01);
  ASSERT_TRUE(rec.stats.FindIssue("columns_inferred"));
  EXPECT_NE(rec.stats.FindIssue("columns_inferred")->message.find("the header names 7 columns, the rows hold 8"),
            std::string::npos)
      << rec.stats.FindIssue("columns_inferred")->message;
}

// A log several commands appended to: `nvidia-smi >> gpu.log` (a table), then a
// --query-gpu loop with its header, a blank line, and a row after the NUL hole a
// truncation under the logger leaves. Every part is read into one recording.
TEST(SmiCsv, AnAppendedLogIsReadPartByPart) {
  const std::string log =
      "Tue Jan  6 10:00:00 2026       \n"
      "+-----------------------------------------------------------------------------------------+\n"
      "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n"
      "|-----------------------------------------+------------------------+----------------------+\n"
      "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
      "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n"
      "|                                         |                        |               MIG M. |\n"
      "|=========================================+========================+======================|\n"
      "|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |                    0 |\n"
      "| N/A   34C    P0             62W /  400W |       4MiB /  81920MiB |      0%      Default |\n"
      "|                                         |                        |             Disabled |\n"
      "+-----------------------------------------+------------------------+----------------------+\n"
      "                                                                                         \n"
      "+-----------------------------------------------------------------------------------------+\n"
      "| Processes:                                                                              |\n"
      "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |\n"
      "|        ID   ID                                                             Usage      |\n"
      "|=========================================================================================|\n"
      "|  No running processes found                                                             |\n"
      "+-----------------------------------------------------------------------------------------+\n"
      "timestamp, name, utilization.gpu [%], memory.used [MiB], power.draw [W]\n"
      "2026/01/06 10:00:05.000, NVIDIA A100-SXM4-80GB, 97 %, 70112 MiB, 350.10 W\n"
      "2026/01/06 10:00:10.000, NVIDIA A100-SXM4-80GB, 98 %, 70112 MiB, 352.10 W\n"
      "   \n"
      "2026/01/06 10:00:15.000, NVIDIA A100-SXM4-80GB, 96 %, 70112 MiB, 349.10 W\n" +
      std::string(16, '\0') + "2026/01/06 10:00:20.000, NVIDIA A100-SXM4-80GB, 97 %, 70112 MiB, 351.10 W\n" +
      std::string(8, '\0') + "\n";
  Recording rec = ImportOne(log);
  EXPECT_EQ(rec.format, "nvidia-smi-table");
  EXPECT_EQ(rec.metadata["sections"], "nvidia-smi-csv, nvidia-smi-table");
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const MetricDevice& d = rec.metrics.devices[0];
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 5);  // the table's 0 % and four rows
  EXPECT_DOUBLE_EQ(d.Get(Metric::kGpuUtil).max(), 98.0);
  ASSERT_TRUE(rec.stats.FindIssue("appended_parts"));
  EXPECT_NE(rec.stats.FindIssue("appended_parts")->message.find("test.log:21: a nvidia-smi-csv part begins"),
            std::string::npos);
  ASSERT_TRUE(rec.stats.FindIssue("nul_padding"));
  EXPECT_NE(rec.stats.FindIssue("nul_padding")->message.find("test.log:26: 16 NUL bytes"), std::string::npos)
      << rec.stats.FindIssue("nul_padding")->message;
  ASSERT_TRUE(rec.stats.FindIssue("binary_line"));  // the NUL-only tail
  // Named with --format, the file is read as that format alone.
  ImportOptions table_only;
  table_only.format = "nvidia-smi-table";
  EXPECT_EQ(ImportOne(log, table_only).metrics.devices[0].Get(Metric::kGpuUtil).count(), 1);
}

TEST(SmiCsv, MalformedLinesAreCountedWithFileAndLine) {
  const std::string log =
      "timestamp, index, utilization.gpu [%], power.draw [W]\n"
      "2026/01/02 03:04:05.000, 0, 50, 100\n"
      "2026/01/02 03:04:06.000, 0, 50\n"                        // short row
      "not-a-time, 0, 50, 100\n"                                // bad timestamp
      "2026/01/02 03:04:07.000, 0, fifty, 100\n"                // bad value
      "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system\n"
      "2026/01/02 03:04:08.000, 0, 70, 120\n";
  Recording rec = ImportOne(log);
  const auto* short_row = rec.stats.FindIssue("bad_row");
  ASSERT_TRUE(short_row);
  EXPECT_NE(short_row->message.find("test.log:3"), std::string::npos) << short_row->message;
  ASSERT_TRUE(rec.stats.FindIssue("bad_timestamp"));
  EXPECT_NE(rec.stats.FindIssue("bad_timestamp")->message.find("test.log:4"), std::string::npos);
  ASSERT_TRUE(rec.stats.FindIssue("bad_value"));
  EXPECT_NE(rec.stats.FindIssue("bad_value")->message.find("'fifty'"), std::string::npos);
  ASSERT_TRUE(rec.stats.FindIssue("gpu_lost"));
  EXPECT_EQ(rec.stats.FindIssue("gpu_lost")->severity, IssueSeverity::kError);
  const auto& g = rec.metrics.devices.at(0);
  EXPECT_EQ(g.Get(Metric::kGpuUtil).count(), 2);  // rows 2 and 7; row 5 kept its power only
  EXPECT_EQ(g.Get(Metric::kPowerW).count(), 3);
}

TEST(SmiCsv, RepeatedHeaderAndClockEventReasons) {
  const std::string log =
      "timestamp, index, utilization.gpu [%], clocks_event_reasons.active\n"
      "2026/01/02 03:04:05.000, 0, 99, 0x0000000000000004\n"
      "timestamp, index, clocks_event_reasons.hw_slowdown, utilization.gpu [%]\n"  // a second run appended
      "2026/01/02 04:00:00.000, 0, Active, 98\n"
      "2026/01/02 04:00:01.000, 0, Not Active, 97\n";
  Recording rec = ImportOne(log);
  const auto& g = rec.metrics.devices.at(0);
  EXPECT_EQ(g.Get(Metric::kGpuUtil).count(), 3);
  EXPECT_EQ(g.Get(Metric::kClockEventReasons).count(), 3);
  EXPECT_EQ(g.limiting_reason_samples, 2);  // sw_power_cap, then hw_slowdown
  EXPECT_EQ(g.reason_counts[2], 1);         // bit 2 = sw_power_cap
  EXPECT_EQ(g.reason_counts[3], 1);         // bit 3 = hw_slowdown
}

TEST(SmiCsv, GzipFileThroughImportFile) {
  const std::string path = (std::filesystem::temp_directory_path() / "gputriage_smi_test.csv.gz").string();
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  const std::string text = "timestamp, index, utilization.gpu [%]\n2026/01/02 03:04:05.000, 0, 33\n";
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  auto recs = ImportFile(path);
  ASSERT_TRUE(recs.ok()) << recs.status().ToString();
  EXPECT_DOUBLE_EQ(recs->at(0).metrics.devices.at(0).Get(Metric::kGpuUtil).mean(), 33.0);
  std::filesystem::remove(path);
}

// ---- nvidia-smi dmon --------------------------------------------------------

TEST(SmiDmon, DefaultColumnsSyntheticTimePerCycle) {
  const std::string log =
      "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk\n"
      "# Idx      W      C      C      %      %      %      %    MHz    MHz\n"
      "    0    300     60     -      95     40      0      0   1593   1410\n"
      "    1     60     35     -       0      0      0      0   1593    210\n"
      "    0    310     61     -      97     42      0      0   1593   1410\n"
      "    1     61     35     -       0      0      0      0   1593    210\n";
  Recording rec = ImportOne(log);
  EXPECT_EQ(rec.format, "nvidia-smi-dmon");
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  const auto* g0 = FindIndex(rec, 0);
  EXPECT_DOUBLE_EQ(g0->Get(Metric::kGpuUtil).mean(), 96.0);  // dmon "sm" = utilization.gpu
  EXPECT_EQ(g0->Get(Metric::kMemTempC).count(), 0);          // "-" is missing
  EXPECT_EQ(g0->Get(Metric::kGpuUtil).MedianInterval(), kNsPerS);
  EXPECT_TRUE(rec.metrics.timestamps_synthetic);
  ImportOptions fast;
  fast.sample_interval_ns = 100 * kNsPerMs;
  Recording rec2 = ImportOne(log, fast);
  EXPECT_EQ(FindIndex(rec2, 0)->Get(Metric::kGpuUtil).MedianInterval(), 100 * kNsPerMs);
}

TEST(SmiDmon, DateTimeSelectionsAndGpmColumns) {
  // nvidia-smi dmon -s pucmt -o DT --gpm-metrics 2,3,5,10,12
  const std::string log =
      "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk     fb   bar1  rxpci  txpci "
      "smutil  smocc  mmaact  dram  fp32\n"
      "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %    MHz    MHz     MB     MB   MB/s   MB/s "
      "     %      %       %     %     %\n"
      " 20260714   08:12:53      0    631     63     57    100     10      0      0   2619   1980  15690      1   1200     30 "
      "    92     40      55    45     3\n"
      " 20260714   08:12:54      0    633     63     58    100      9      0      0   2619   1980  15690      1   1000     30 "
      "    94     42      57    47     3\n";
  Recording rec = ImportOne(log);
  const auto& g = rec.metrics.devices.at(0);
  EXPECT_FALSE(rec.metrics.timestamps_synthetic);
  EXPECT_EQ(g.Get(Metric::kGpuUtil).first_time(),
            metric_text::DaysFromCivil(2026, 7, 14) * 86400 * kNsPerS + ((8 * 60 + 12) * 60 + 53) * kNsPerS);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kSmActive).mean(), 93.0);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kSmOccupancy).mean(), 41.0);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kTensorActive).mean(), 56.0);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kDramActive).mean(), 46.0);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kFp32Active).mean(), 3.0);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kFbUsedBytes).mean(), 15690 * kMiB);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kPcieRxBytesPerS).mean(), 1100e6);
  ASSERT_TRUE(rec.stats.FindIssue("unused_columns"));  // bar1
}

TEST(SmiDmon, TimeOnlyColumnRollsOverMidnight) {
  // nvidia-smi dmon -o T: time of day only; a jump back by hours is the next day.
  const std::string log =
      "#Time        gpu    pwr     sm\n#HH:MM:SS    Idx      W      %\n"
      " 23:59:59      0    300     90\n 00:00:00      0    300     92\n 00:00:01      0    300     94\n";
  Recording rec = ImportOne(log);
  const auto& u = rec.metrics.devices.at(0).Get(Metric::kGpuUtil);
  EXPECT_EQ(u.count(), 3);
  EXPECT_EQ(u.MedianInterval(), kNsPerS);
  EXPECT_EQ(u.out_of_order(), 0);
  EXPECT_EQ(u.last_time() - u.first_time(), 2 * kNsPerS);
}

TEST(SmiDmon, CsvFormat) {
  // nvidia-smi dmon --format csv: comma separated, header kept.
  const std::string log =
      "#gpu, pwr, gtemp, mtemp, sm, mem, enc, dec, mclk, pclk\n"
      "#Idx, W, C, C, %, %, %, %, MHz, MHz\n"
      "0, 80, 40, -, 12, 3, 0, 0, 1215, 300\n"
      "0, 82, 41, -, 14, 3, 0, 0, 1215, 300\n";
  Recording rec = ImportOne(log);
  EXPECT_DOUBLE_EQ(rec.metrics.devices.at(0).Get(Metric::kGpuUtil).mean(), 13.0);
}

TEST(SmiDmon, CsvHeaderWithoutHash) {
  const std::string log = "gpu, pwr, sm, smutil\nIdx, W, %, %\n0, 80, 12, 5\n0, 82, 14, 7\n";
  Recording rec = ImportOne(log);
  EXPECT_EQ(rec.format, "nvidia-smi-dmon");
  EXPECT_DOUBLE_EQ(rec.metrics.devices.at(0).Get(Metric::kSmActive).mean(), 6.0);
}

// pmon is GPU data (issue 54: read, not refused): each GPU's utilization per
// interval is its processes' sm % summed, memory their fb; '-' reads as 0 and a GPU
// with no process as idle; an interval ends where a GPU and process repeat.
TEST(SmiDmon, PmonIsReadAsTheSumOverEachGpusProcesses) {
  const std::string text =
      "# gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   ccpm    command \n"
      "# Idx           #    C/G      %      %      %      %      %      %     MB     MB    name \n"
      "    0     439323     C     40      3      0      0      0      0     10      0    demo           \n"
      "    0     439324     C     30      3      0      0      0      0     10      0    demo two       \n"
      "    1          -     -      -      -      -      -      -      -      -      -    -              \n"
      "    0     439323     C     90      5      0      0      0      0     10      0    demo           \n"
      "    0     439324     C      -      -      -      -      -      -     10      0    demo two       \n"
      "    1          -     -      -      -      -      -      -      -      -      -    -              \n";
  auto recs = ImportMetricLogFromMemory("pmon.log", text);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  const Recording& rec = recs->front();
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  const auto& util = rec.metrics.devices[0].Get(Metric::kGpuUtil);
  ASSERT_EQ(util.count(), 2);
  EXPECT_DOUBLE_EQ(util.max(), 90.0);  // 90 + '-'
  EXPECT_DOUBLE_EQ(util.min(), 70.0);  // 40 + 30
  EXPECT_DOUBLE_EQ(rec.metrics.devices[0].Get(Metric::kFbUsedBytes).max(), 20.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(rec.metrics.devices[1].Get(Metric::kGpuUtil).max(), 0.0);
  ASSERT_TRUE(rec.stats.FindIssue("pmon_read"));
  EXPECT_NE(rec.stats.FindIssue("pmon_read")->message.find("2 intervals"), std::string::npos)
      << rec.stats.FindIssue("pmon_read")->message;
}

TEST(SmiDmon, MalformedRows) {
  const std::string log =
      "0 1 2 3\n"  // before the header
      "# gpu    pwr     sm\n# Idx      W      %\n"
      "    0    300     95\n"
      "    0    300\n"
      "    0    abc     95\n";
  Recording rec = ImportOne(log, ImportOptions{"nvidia-smi-dmon", {}, 0});
  ASSERT_TRUE(rec.stats.FindIssue("row_before_header"));
  ASSERT_TRUE(rec.stats.FindIssue("bad_row"));
  EXPECT_NE(rec.stats.FindIssue("bad_row")->message.find("test.log:5"), std::string::npos);
  ASSERT_TRUE(rec.stats.FindIssue("bad_value"));
  EXPECT_EQ(rec.metrics.devices.at(0).Get(Metric::kGpuUtil).count(), 2);
}

// ---- dcgmi dmon ---------------------------------------------------------------

TEST(DcgmiDmon, RatiosBecomePercentAndInstancesAreDevices) {
  // dcgmi dmon -e 203,252,1001,1002,1004,1005,155
  const std::string log =
      "#Entity   GPUTL  FBUSD  GRACT  SMACT  TENSO  DRAMA  POWER\n"
      "ID\n"
      "GPU 0     98     70000  0.990  0.350  0.020  0.100  250.5\n"
      "GPU 1     N/A    500    0.000  0.000  0.000  0.000  60.0\n"
      "GPU-I 3   N/A    N/A    0.500  0.400  0.300  0.200  N/A\n"
      "GPU 0     96     70000  0.970  0.330  0.040  0.100  251.5\n"
      "GPU 1     N/A    500    0.000  0.000  0.000  0.000  60.0\n"
      "GPU-I 3   N/A    N/A    0.700  0.600  0.500  0.400  N/A\n"
      "GPU 7     1 2\n"        // wrong column count
      "Switch 0  1 2 3 4 5 6 7\n";  // not a GPU
  Recording rec = ImportOne(log);
  EXPECT_EQ(rec.format, "dcgmi-dmon");
  const auto* g0 = FindIndex(rec, 0);
  ASSERT_TRUE(g0);
  EXPECT_DOUBLE_EQ(g0->Get(Metric::kGpuUtil).mean(), 97.0);
  EXPECT_NEAR(g0->Get(Metric::kSmActive).mean(), 34.0, 1e-9);
  EXPECT_NEAR(g0->Get(Metric::kTensorActive).mean(), 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(g0->Get(Metric::kFbUsedBytes).mean(), 70000 * kMiB);
  EXPECT_EQ(g0->Get(Metric::kGpuUtil).MedianInterval(), kNsPerS);
  const auto* inst = FindIndex(rec, -1, 3);
  ASSERT_TRUE(inst);
  EXPECT_NEAR(inst->Get(Metric::kGrEngineActive).mean(), 60.0, 1e-9);
  EXPECT_TRUE(rec.stats.FindIssue("bad_row"));
  EXPECT_TRUE(rec.stats.FindIssue("other_entity"));
}

TEST(DcgmiDmon, CsvWithEpochTimestamps) {
  // The CSV scripts write around dcgmi / DCGM's bindings: entity id, field tags, epoch seconds.
  const std::string log =
      "EntityId,GRACT,FBUSD,TimeStamp\n"
      "0,0.000,4,1657289505\n0,0.972,3934,1657289516\n0,0.486,3934,1657289596\n"
      "0,bad,3934,1657289597\n"
      "0,0.5,3934\n";
  Recording rec = ImportOne(log);
  EXPECT_EQ(rec.format, "dcgmi-dmon");
  const auto& g = rec.metrics.devices.at(0);
  // By time: each sample stands for the spacing before it (11 s, 80 s); the first
  // for the median spacing (80 s, the upper middle of two).
  EXPECT_NEAR(g.Get(Metric::kGrEngineActive).mean(), (0 * 80e9 + 97.2 * 11e9 + 48.6 * 80e9) / (171e9 + 3), 1e-6);
  EXPECT_EQ(g.Get(Metric::kGrEngineActive).first_time(), 1657289505LL * kNsPerS);
  EXPECT_EQ(g.Get(Metric::kFbUsedBytes).count(), 4);
  EXPECT_FALSE(rec.metrics.timestamps_synthetic);
  EXPECT_TRUE(rec.stats.FindIssue("bad_value"));
  EXPECT_TRUE(rec.stats.FindIssue("bad_row"));
}

// ---- dcgm-exporter ------------------------------------------------------------

TEST(DcgmExporter, LegacyNamesHelpUnitsLabelsAndSentinels) {
  const std::string scrape =
      "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
      "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-a\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\","
      "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-7\",DCGM_FI_DRIVER_VERSION=\"550.127.05\","
      "container=\"trainer\",namespace=\"ml\",pod=\"llm-0\"} 1755\n"
      "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA H100 80GB HBM3\"} 100\n"
      "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-a\"} 0.912305\n"
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\",UUID=\"GPU-a\"} 0.47\n"
      "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\"} 77201\n"
      "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\"} 88412650331\n"
      "DCGM_FI_DEV_MEMORY_TEMP{gpu=\"0\",UUID=\"GPU-a\"} 9223372036854775794\n"
      "DCGM_FI_PROF_DRAM_ACTIVE{gpu=\"0\",UUID=\"GPU-a\"} 140737488355330\n"
      "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\",exported_pod=\"renamed\"} 61\n";
  Recording rec = ImportOne(scrape);
  EXPECT_EQ(rec.format, "dcgm-exporter");
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const auto& g = rec.metrics.devices[0];
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.hostname, "node-7");
  EXPECT_EQ(g.driver_version, "550.127.05");
  EXPECT_EQ(g.labels.at("pod"), "llm-0");
  EXPECT_EQ(g.labels.at("namespace"), "ml");
  EXPECT_EQ(g.labels.at("container"), "trainer");
  EXPECT_DOUBLE_EQ(g.Get(Metric::kSmClockMHz).mean(), 1755);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kGpuUtil).mean(), 100);
  EXPECT_NEAR(g.Get(Metric::kSmActive).mean(), 91.2305, 1e-9);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kFbUsedBytes).mean(), 77201 * kMiB);
  EXPECT_NEAR(g.Get(Metric::kEnergyJ).mean(), 88412650.331, 1e-3);
  EXPECT_EQ(g.Get(Metric::kMemTempC).count(), 0);     // DCGM_INT64 not-supported sentinel
  EXPECT_EQ(g.Get(Metric::kDramActive).count(), 0);   // DCGM_FP64 blank + 2
  ASSERT_TRUE(rec.stats.FindIssue("dcgm_blank_value"));
  EXPECT_EQ(rec.stats.FindIssue("dcgm_blank_value")->count, 2);
}

TEST(DcgmExporter, NewNamesAndUnits) {
  // DCGM 4.6/4.7 canonical names (dcgm-exporter 4.9): ratios, Hz, bytes, joules.
  const std::string scrape =
      "DCGM_FI_DEV_GPU_UTIL_RATIO{gpu=\"1\",UUID=\"GPU-b\",hostname=\"n\",DCGM_FI_SYSTEM_DRIVER_VERSION=\"580.1\"} 0.38\n"
      "DCGM_FI_PROF_SM_UTIL_RATIO{gpu=\"1\",UUID=\"GPU-b\"} 0.31\n"
      "DCGM_FI_PROF_TENSOR_UTIL_RATIO{gpu=\"1\",UUID=\"GPU-b\"} 0.05\n"
      "DCGM_FI_PROF_DRAM_UTIL_RATIO{gpu=\"1\",UUID=\"GPU-b\"} 0.08\n"
      "DCGM_FI_DEV_SM_CLOCK_HZ{gpu=\"1\",UUID=\"GPU-b\"} 1980000000\n"
      "DCGM_FI_DEV_FB_USED_BYTES{gpu=\"1\",UUID=\"GPU-b\"} 21474836480\n"
      "DCGM_FI_DEV_FB_CAPACITY_BYTES{gpu=\"1\",UUID=\"GPU-b\"} 85899345920\n"
      "DCGM_FI_DEV_BOARD_POWER_WATTS{gpu=\"1\",UUID=\"GPU-b\"} 231.5\n"
      "DCGM_FI_DEV_GPU_TEMP_CELSIUS{gpu=\"1\",UUID=\"GPU-b\"} 44\n"
      "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu=\"1\",UUID=\"GPU-b\"} 8\n"
      "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_JOULES{gpu=\"1\",UUID=\"GPU-b\"} 88412650.5\n";
  Recording rec = ImportOne(scrape);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const auto& g = rec.metrics.devices[0];
  EXPECT_EQ(g.driver_version, "580.1");
  EXPECT_NEAR(g.Get(Metric::kGpuUtil).mean(), 38.0, 1e-9);
  EXPECT_NEAR(g.Get(Metric::kSmActive).mean(), 31.0, 1e-9);
  EXPECT_NEAR(g.Get(Metric::kSmClockMHz).mean(), 1980.0, 1e-6);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kFbUsedBytes).mean(), 21474836480.0);
  EXPECT_EQ(g.memory_total_bytes, 85899345920LL);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kPowerW).mean(), 231.5);
  EXPECT_EQ(g.limiting_reason_samples, 1);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kEnergyJ).mean(), 88412650.5);  // joules stay joules (legacy mJ are divided)
}

TEST(DcgmExporter, OldNamespaceAndMig) {
  const std::string scrape =
      "dcgm_gpu_utilization{gpu=\"0\",uuid=\"GPU-c\",device=\"nvidia0\",pod_name=\"p\",pod_namespace=\"ns\",container_name=\"c\"} 44\n"
      "dcgm_fi_prof_dram_active{gpu=\"0\",uuid=\"GPU-c\"} 0.5\n"
      "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",UUID=\"GPU-c\",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"7\"} 0.25\n";
  Recording rec = ImportOne(scrape);
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  const auto& whole = rec.metrics.devices[0];
  EXPECT_DOUBLE_EQ(whole.Get(Metric::kGpuUtil).mean(), 44);
  EXPECT_DOUBLE_EQ(whole.Get(Metric::kDramActive).mean(), 50);
  EXPECT_EQ(whole.labels.at("pod"), "p");
  const auto& mig = rec.metrics.devices[1];
  EXPECT_EQ(mig.mig_instance, 7);
  EXPECT_EQ(mig.mig_profile, "1g.10gb");
  EXPECT_DOUBLE_EQ(mig.Get(Metric::kGrEngineActive).mean(), 25);
  EXPECT_EQ(mig.Label(), "GPU 0 / MIG 1g.10gb (7)");
}

TEST(DcgmExporter, ScrapeSeriesInOneFile) {
  std::string timed;
  for (int i = 0; i < 4; ++i) {
    timed += "# TIME 2026-07-14T08:00:" + std::string(i < 1 ? "0" : "") + std::to_string(i * 15) + "Z\n";
    timed += "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} " + std::to_string(i * 10) + "\n";
  }
  Recording rec = ImportOne(timed);
  const auto& u = rec.metrics.devices.at(0).Get(Metric::kGpuUtil);
  EXPECT_EQ(u.count(), 4);
  EXPECT_EQ(u.MedianInterval(), 15 * kNsPerS);
  EXPECT_FALSE(rec.metrics.timestamps_synthetic);
  EXPECT_EQ(rec.metrics.rows, 4);

  // Untimed repeats: each repeat of a series starts the next scrape, 15 s apart by default.
  const std::string untimed = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\nDCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 100\n"
                              "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 3\nDCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 110\n";
  Recording rec2 = ImportOne(untimed);
  EXPECT_EQ(rec2.metrics.devices.at(0).Get(Metric::kGpuUtil).MedianInterval(), 15 * kNsPerS);
  EXPECT_TRUE(rec2.metrics.timestamps_synthetic);
  EXPECT_EQ(rec2.metrics.rows, 2);

  // Prometheus sample timestamps (ms).
  const std::string stamped = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5 1752480000000\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 7 1752480030000\n";
  Recording rec3 = ImportOne(stamped);
  EXPECT_EQ(rec3.metrics.devices.at(0).Get(Metric::kGpuUtil).MedianInterval(), 30 * kNsPerS);
}

TEST(DcgmExporter, MalformedLines) {
  const std::string scrape =
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 5\n"         // unterminated labels
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} five\n"      // bad value
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5 6 7\n"     // too many fields
      "DCGM_FI_DEV_GPU_UTIL 9\n"                    // no gpu label
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5\n";
  Recording rec = ImportOne(scrape);
  const auto* bad = rec.stats.FindIssue("bad_sample");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->count, 3);
  EXPECT_NE(bad->message.find("test.log:1"), std::string::npos);
  EXPECT_TRUE(rec.stats.FindIssue("unlabelled_series"));
  EXPECT_EQ(rec.metrics.devices.at(0).Get(Metric::kGpuUtil).count(), 1);
}

TEST(DcgmExporter, DirectoryOfScrapes) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "gputriage_scrapes_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int i = 0; i < 3; ++i) {
    std::ofstream f(dir / ("scrape-" + std::to_string(i) + ".prom"));
    f << "# TIME 2026-07-14T08:00:" << (i * 20 + 10) << "Z\n";
    f << "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} " << (i * 10) << "\n";
  }
  auto recs = ImportFile(dir.string());
  ASSERT_TRUE(recs.ok()) << recs.status().ToString();
  const auto& u = recs->at(0).metrics.devices.at(0).Get(Metric::kGpuUtil);
  EXPECT_EQ(u.count(), 3);
  EXPECT_EQ(u.MedianInterval(), 20 * kNsPerS);
  EXPECT_DOUBLE_EQ(u.mean(), 10.0);
  fs::remove_all(dir);
}

// ---- nvidia-smi -q -------------------------------------------------------------

TEST(SmiQuery, OlderDriverLayoutAndTwoGpus) {
  // R470-era layout: "Power Readings" with "Power Draw"/"Power Limit", "Clocks Throttle Reasons".
  const std::string text =
      "==============NVSMI LOG==============\n\n"
      "Timestamp                                 : Mon Mar  1 10:00:00 2021\n"
      "Driver Version                            : 470.57.02\n\n"
      "Attached GPUs                             : 2\n"
      "GPU 00000000:3B:00.0\n"
      "    Product Name                          : Tesla V100-SXM2-32GB\n"
      "    Clocks Throttle Reasons\n"
      "        Idle                              : Not Active\n"
      "        SW Power Cap                      : Active\n"
      "    Utilization\n"
      "        Gpu                               : 87 %\n"
      "    Power Readings\n"
      "        Power Draw                        : 290.11 W\n"
      "        Power Limit                       : 300.00 W\n"
      "    Max Clocks\n"
      "        SM                                : 1530 MHz\n"
      "GPU 00000000:5E:00.0\n"
      "    Product Name                          : Tesla V100-SXM2-32GB\n"
      "    Utilization\n"
      "        Gpu                               : 0 %\n";
  Recording rec = ImportOne(text);
  EXPECT_EQ(rec.format, "nvidia-smi-q");
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  const auto& a = rec.metrics.devices[0];
  EXPECT_EQ(a.pci_bus_id, "00000000:3B:00.0");
  EXPECT_EQ(a.driver_version, "470.57.02");
  EXPECT_DOUBLE_EQ(a.power_limit_w, 300.0);
  EXPECT_DOUBLE_EQ(a.max_sm_clock_mhz, 1530);
  EXPECT_DOUBLE_EQ(a.Get(Metric::kGpuUtil).mean(), 87);
  EXPECT_EQ(a.limiting_reason_samples, 1);
  EXPECT_EQ(a.Get(Metric::kGpuUtil).first_time(), metric_text::DaysFromCivil(2021, 3, 1) * 86400 * kNsPerS + 10 * 3600 * kNsPerS);
  EXPECT_DOUBLE_EQ(rec.metrics.devices[1].Get(Metric::kGpuUtil).mean(), 0);
}

// R535+ layout, as Windows drivers print it: "Temperature" is a section of the
// report (indented), not the header of a --query-gpu part appended after it; a
// query loop appended at the line's start still begins its own part.
TEST(SmiQuery, AnIndentedSectionNamedLikeAFieldIsNotAnAppendedPart) {
  const std::string report =
      "==============NVSMI LOG==============\n\n"
      "Timestamp                                 : Wed Aug 30 12:18:12 2023\n"
      "Driver Version                            : 537.13\n\n"
      "Attached GPUs                             : 1\n"
      "GPU 00000000:08:00.0\n"
      "    Product Name                          : NVIDIA GeForce RTX 4090\n"
      "    Utilization\n"
      "        Gpu                               : 2 %\n"
      "    Temperature\n"
      "        GPU Current Temp                  : 38 C\n"
      "        GPU T.Limit Temp                  : 45 C\n"
      "    GPU Power Readings\n"
      "        Power Draw                        : 72.62 W\n"
      "        Current Power Limit               : 450.00 W\n";
  Recording rec = ImportOne(report);
  EXPECT_EQ(rec.format, "nvidia-smi-q");
  EXPECT_FALSE(rec.stats.FindIssue("appended_parts"));
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  EXPECT_DOUBLE_EQ(rec.metrics.devices[0].Get(Metric::kGpuTempC).mean(), 38);
  EXPECT_DOUBLE_EQ(rec.metrics.devices[0].power_limit_w, 450);
  Recording appended = ImportOne(report + "temperature.gpu, utilization.gpu [%]\n40, 97 %\n");
  ASSERT_TRUE(appended.stats.FindIssue("appended_parts"));
  EXPECT_EQ(appended.metrics.devices[0].Get(Metric::kGpuUtil).count(), 2);
}

// A terminal recording of `watch nvidia-smi` (issue 54: read, not refused): the
// screen is drawn once, then only the cells that change are redrawn in place
// (cursor moves, erases); each frame is read as a table with its own time.
TEST(SmiTable, ATerminalRecordingOfWatchIsReplayedFrameByFrame) {
  const std::vector<std::string> screen = {
      "Every 2.0s: nvidia-smi                    host: Fri Dec  5 10:01:25 2025",
      "",
      "Fri Dec  5 10:01:25 2025",
      "+-----------------------------------------------------------------------------------------+",
      "| NVIDIA-SMI 570.148.08             Driver Version: 570.148.08     CUDA Version: 12.8     |",
      "|-----------------------------------------+------------------------+----------------------+",
      "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
      "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
      "|=========================================+========================+======================|",
      "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:07:00.0 Off |                    0 |",
      "| N/A   34C    P0             70W /  700W |       4MiB /  81559MiB |      0%      Default |",
      "+-----------------------------------------+------------------------+----------------------+"};
  std::string rec_bytes = "\x1b[?1049h\x1b[22;0;0t\x1b[1;24r\x1b(B\x1b[m\x1b[4l\x1b[?7h\x1b[H\x1b[2J";
  for (size_t r = 0; r < screen.size(); ++r) rec_bytes += fmt::format("\x1b[{};1H{}", r + 1, screen[r]);
  // Two seconds later: the clocks and the GPU's row change, nothing else is redrawn.
  rec_bytes += "\x1b[1;49HFri Dec  5 10:01:27 2025\x1b[3;1HFri Dec  5 10:01:27 2025";
  rec_bytes += "\x1b[11;7H\x1b[K36C    P0            350W /  700W |   70112MiB /  81559MiB |     97%      Default |";
  rec_bytes += "\x1b[24;1H\x1b[?1049l";
  Recording rec = ImportOne(rec_bytes);
  EXPECT_EQ(rec.format, "nvidia-smi-table");
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const auto& util = rec.metrics.devices[0].Get(Metric::kGpuUtil);
  ASSERT_EQ(util.count(), 2);
  EXPECT_DOUBLE_EQ(util.min(), 0.0);
  EXPECT_DOUBLE_EQ(util.max(), 97.0);
  EXPECT_EQ(util.last_time() - util.first_time(), 2 * kNsPerS);
  ASSERT_TRUE(rec.stats.FindIssue("terminal_recording"));
}

// nvidia-smi's default table, R535 layout: the date line nvidia-smi prints above
// each table, two snapshots, a GPU whose power reads N/A, the Processes block.
TEST(SmiTable, SnapshotsWithDatesPowerCapMemoryAndProcessesSkipped) {
  const std::string table =
      "+---------------------------------------------------------------------------------------+\n"
      "| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |\n"
      "|-----------------------------------------+----------------------+----------------------+\n"
      "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
      "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |\n"
      "|=========================================+======================+======================|\n"
      "|   0  NVIDIA GeForce RTX 3090        Off | 00000000:04:00.0 Off |                  N/A |\n"
      "| 30%   58C    P2             {}W / 350W |  24050MiB / 24576MiB |     {}%      Default |\n"
      "|                                         |                      |                  N/A |\n"
      "+-----------------------------------------+----------------------+----------------------+\n"
      "|   1  NVIDIA A100-SXM4-80GB          On  | 00000000:05:00.0 Off |                    0 |\n"
      "| N/A   30C    P0              N/A /  N/A |      3MiB / 81920MiB |      0%      Default |\n"
      "+-----------------------------------------+----------------------+----------------------+\n"
      "\n"
      "+---------------------------------------------------------------------------------------+\n"
      "| Processes:                                                                            |\n"
      "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |\n"
      "|=======================================================================================|\n"
      "|    0   N/A  N/A   2442391      C   python                                    24040MiB |\n"
      "+---------------------------------------------------------------------------------------+\n";
  const std::string text = "Wed Apr  9 10:26:15 2025       \n" + fmt::format(fmt::runtime(table), 246, 48) +
                           "Wed Apr  9 10:26:25 2025\n" + fmt::format(fmt::runtime(table), 266, 84);
  Recording rec = ImportOne(text);
  EXPECT_EQ(rec.format, "nvidia-smi-table");
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  EXPECT_FALSE(rec.metrics.timestamps_synthetic);
  const MetricDevice* a = FindIndex(rec, 0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "NVIDIA GeForce RTX 3090");
  EXPECT_EQ(a->pci_bus_id, "00000000:04:00.0");
  EXPECT_EQ(a->driver_version, "535.183.01");
  EXPECT_DOUBLE_EQ(a->power_limit_w, 350);
  EXPECT_EQ(a->memory_total_bytes, static_cast<int64_t>(24576 * kMiB));
  const auto& util = a->Get(Metric::kGpuUtil);
  EXPECT_EQ(util.count(), 2);
  EXPECT_EQ(util.last_time() - util.first_time(), 10 * kNsPerS);
  EXPECT_EQ(util.first_time(), metric_text::DaysFromCivil(2025, 4, 9) * 86400 * kNsPerS + (10 * 3600 + 26 * 60 + 15) * kNsPerS);
  EXPECT_DOUBLE_EQ(util.max(), 84);
  EXPECT_DOUBLE_EQ(a->Get(Metric::kPowerW).min(), 246);
  EXPECT_DOUBLE_EQ(a->Get(Metric::kGpuTempC).mean(), 58);
  EXPECT_DOUBLE_EQ(a->Get(Metric::kFbUsedBytes).max(), 24050 * kMiB);
  const MetricDevice* b = FindIndex(rec, 1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name, "NVIDIA A100-SXM4-80GB");
  EXPECT_FALSE(b->Has(Metric::kPowerW));  // "N/A /  N/A" is no reading
  EXPECT_EQ(b->Get(Metric::kGpuUtil).count(), 2);
  EXPECT_EQ(rec.metrics.rows, 4);
}

// R418-era layout (no third row, no date line): times are synthetic, one interval apart;
// a name cut by nvidia-smi keeps its "..."; Windows' driver-model column is read.
TEST(SmiTable, OlderLayoutWithoutDatesIsSpacedByTheInterval) {
  const std::string table =
      "+-----------------------------------------------------------------------------+\n"
      "| NVIDIA-SMI 418.67       Driver Version: 418.67       CUDA Version: 10.1     |\n"
      "|-------------------------------+----------------------+----------------------+\n"
      "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
      "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
      "|===============================+======================+======================|\n"
      "|   0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |                    0 |\n"
      "| N/A   41C    P0    52W / 300W |   1024MiB / 16130MiB |     {:>2}%      Default |\n"
      "+-------------------------------+----------------------+----------------------+\n"
      "|   1  GeForce RTX 2080   WDDM  | 00000000:01:00.0  On |                  N/A |\n"
      "| 27%   35C    P8    11W / 225W |    512MiB /  8192MiB |      3%      Default |\n"
      "+-------------------------------+----------------------+----------------------+\n";
  ImportOptions options;
  options.sample_interval_ns = 2 * kNsPerS;
  Recording rec = ImportOne(fmt::format(fmt::runtime(table), 90) + fmt::format(fmt::runtime(table), 70) +
                                fmt::format(fmt::runtime(table), 80),
                            options);
  EXPECT_TRUE(rec.metrics.timestamps_synthetic);
  const MetricDevice* a = FindIndex(rec, 0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "Tesla V100-SXM2...");
  EXPECT_EQ(a->Get(Metric::kGpuUtil).count(), 3);
  EXPECT_EQ(a->Get(Metric::kGpuUtil).last_time() - a->Get(Metric::kGpuUtil).first_time(), 4 * kNsPerS);
  EXPECT_DOUBLE_EQ(a->Get(Metric::kGpuUtil).min(), 70);
  const MetricDevice* b = FindIndex(rec, 1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name, "GeForce RTX 2080");
  EXPECT_EQ(b->labels.at("driver_model"), "WDDM");
  EXPECT_DOUBLE_EQ(b->power_limit_w, 225);
}

TEST(SmiTable, AppendedJobsKeepTheirOwnTimesWhenTheyRunBackwards) {
  // Two jobs' logs appended to one file: the second ran earlier, on another GPU.
  const std::string table =
      "{}\n| NVIDIA-SMI 550.144.03             Driver Version: 550.144.03     CUDA Version: 12.4     |\n"
      "|   0  Tesla V100-PCIE-32GB           Off |   00000000:{}:00.0 Off |                    0 |\n"
      "| N/A   59C    P0            106W /  250W |    8758MiB /  32768MiB |     {}%      Default |\n";
  const std::string text = fmt::format(fmt::runtime(table), "Sat May 17 19:50:19 2025", "3D", 80) +
                           fmt::format(fmt::runtime(table), "Sat May 17 20:06:59 2025", "3D", 82) +
                           fmt::format(fmt::runtime(table), "Sat May 17 04:46:25 2025", "3F", 83) +
                           fmt::format(fmt::runtime(table), "Sat May 17 05:03:05 2025", "3F", 85);
  Recording rec = ImportOne(text);
  EXPECT_FALSE(rec.metrics.timestamps_synthetic);
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  for (const auto& d : rec.metrics.devices) {
    const auto& util = d.Get(Metric::kGpuUtil);
    EXPECT_EQ(util.last_time() - util.first_time(), 1000 * kNsPerS) << d.pci_bus_id;
    EXPECT_EQ(util.out_of_order(), 0);
  }
}

TEST(SmiTable, WatchHeaderGivesTheTimeAndANoTableFileIsAnError) {
  const std::string text =
      "Every 1.0s: nvidia-smi                      host1: Thu Oct  9 23:47:45 2025\n\n"
      "| NVIDIA-SMI 581.29                 Driver Version: 581.29         CUDA Version: 13.0     |\n"
      "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |\n"
      "| N/A   35C    P0             72W /  700W |       0MiB /  81559MiB |      0%      Default |\n";
  Recording rec = ImportOne(text);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  EXPECT_FALSE(rec.metrics.timestamps_synthetic);
  EXPECT_EQ(rec.metrics.devices[0].Get(Metric::kPowerW).mean(), 72);
  auto screen = ImportMetricLogFromMemory(
      "w.log", "\x1b[H\x1b[2JEvery 2.0s: nvidia-smi\x1b[6d| NVIDIA-SMI 570.148.08\x1b[6;37HDriver Version: 570.148.08 |\n");
  ASSERT_FALSE(screen.ok());
  EXPECT_NE(screen.status().message().find("w.log:1: a terminal recording whose screen showed nvidia-smi tables with "
                                           "no GPU rows"),
            std::string::npos)
      << screen.status().message();
  auto none = ImportMetricLogFromMemory("t.txt", "| a | b | c |\n", ImportOptions{"nvidia-smi-table", {}, 0});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("t.txt"), std::string::npos);
}

// ---- detection -------------------------------------------------------------------

TEST(MetricSniff, EachFormatIsRecognised) {
  EXPECT_EQ(SniffMetricFormat("timestamp, index, utilization.gpu [%]\n"), "nvidia-smi-csv");
  EXPECT_EQ(SniffMetricFormat("\n==============NVSMI LOG==============\n"), "nvidia-smi-q");
  EXPECT_EQ(SniffMetricFormat("Wed Apr  9 10:26:15 2025\n+---+\n| NVIDIA-SMI 535.1  Driver Version: 535.1 |\n"),
            "nvidia-smi-table");
  EXPECT_EQ(SniffMetricFormat("# gpu   pwr  gtemp  sm\n# Idx W C %\n"), "nvidia-smi-dmon");
  EXPECT_EQ(SniffMetricFormat("#Entity   GPUTL\nID\n"), "dcgmi-dmon");
  EXPECT_EQ(SniffMetricFormat("# HELP DCGM_FI_DEV_SM_CLOCK x\n# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"), "dcgm-exporter");
  EXPECT_EQ(SniffMetricFormat("####\n# idle :: query\n# $ nvidia-smi -q\n"), "capture-bundle");
  // Rows of bare numbers may be a headerless --query-gpu log: its reader tells
  // (from the values) or says what they are; in a directory they are not taken.
  EXPECT_EQ(SniffMetricFormat("a,b\n1,2\n"), "nvidia-smi-csv");
  EXPECT_EQ(SniffMetricFormat("a,b\n1,2\n", /*strict=*/true), "");
  EXPECT_EQ(SniffMetricFormat("2 %, 588 MiB\n", /*strict=*/true), "nvidia-smi-csv");
}

TEST(MetricImport, UnrecognisedAndEmptyInputsAreErrors) {
  auto r = ImportMetricLogFromMemory("x.txt", "hello world\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x.txt"), std::string::npos);
  auto empty = ImportMetricLogFromMemory("e.prom", "", ImportOptions{"dcgm-exporter", {}, 0});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("e.prom"), std::string::npos);
  std::string long_line(LineReader::kMaxLineBytes + 10, 'x');
  auto too_long = ImportMetricLogFromMemory("long.csv", "timestamp, utilization.gpu\n" + long_line,
                                            ImportOptions{"nvidia-smi-csv", {}, 0});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("long.csv:2"), std::string::npos);
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

const ImportIssue* IssueOf(const Recording& rec, std::string_view kind) { return rec.stats.FindIssue(kind); }

TEST(HostileInput, DamageInALogIsNamedNotReadAsData) {
  // Found by the hostile-input campaign (tests/hostile): a value with trailing
  // garbage read as its number, an index that is no index making a GPU of its
  // own, NUL bytes (a log's zero-filled tail after a crash) and a cut last line
  // passing in silence.
  const std::string header = "timestamp, index, name, utilization.gpu [%], power.draw [W]\n";
  const std::string row = "2026/11/01 10:00:0{}.000, 0, NVIDIA H100 80GB HBM3, {} %, 300.00 W\n";
  std::string log = header;
  for (int i = 0; i < 5; ++i) log += fmt::format(fmt::runtime(row), i, 50);
  log += "2026/11/01 10:00:05.000, 0, NVIDIA H100 80GB HBM3, 37 -250 %, 300.00 W\n";
  log += "2026/11/01 10:00:06.000, 1e308, NVIDIA H100 80GB HBM3, 50 %, 300.00 W\n";
  log += std::string("2026/11/01 10:00:07.000, 0, NVIDIA H1\0\0\0 80GB HBM3, 50 %, 300.00 W\n", 67);
  log += "2026/11/01 10:00:08.000, 0, NVIDIA H100 80GB HBM3, 5";  // cut mid-line
  auto recs = ImportMetricLogFromMemory("damaged.csv", log);
  ASSERT_TRUE(recs.ok()) << recs.status().ToString();
  const Recording& rec = recs->front();
  ASSERT_EQ(rec.metrics.devices.size(), 1u) << "a bad index made a GPU of its own";
  EXPECT_TRUE(IssueOf(rec, "bad_value")) << "37 -250 % was read as a number";
  EXPECT_TRUE(IssueOf(rec, "bad_row"));
  EXPECT_TRUE(IssueOf(rec, "binary_line"));
  EXPECT_TRUE(IssueOf(rec, "unterminated_last_line"));
  EXPECT_FALSE(metric_text::ParseValueWithUnit("37 -250 %"));
  EXPECT_TRUE(metric_text::ParseValueWithUnit("300.5 W"));
  EXPECT_TRUE(metric_text::ParseValueWithUnit("1.5 KB/s"));
}

TEST(HostileInput, BytesAfterATraceAreCountedNotIgnored) {
  const std::string trace = R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2,
                               "args": {"device": 0, "stream": 7}}]})";
  auto clean = ImportKinetoTraceFromMemory("clean.json", trace + "\n\n");
  ASSERT_TRUE(clean.ok());
  EXPECT_FALSE(clean->stats.FindIssue("trailing_data"));
  auto appended = ImportKinetoTraceFromMemory("appended.json", trace + "\n" + trace + "garbage");
  ASSERT_TRUE(appended.ok());
  const ImportIssue* trailing = appended->stats.FindIssue("trailing_data");
  ASSERT_TRUE(trailing);
  EXPECT_NE(trailing->message.find(std::to_string(trace.size() + 7) + " bytes after the end"), std::string::npos)
      << trailing->message;
}

}  // namespace
}  // namespace gputriage
