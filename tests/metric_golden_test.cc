// Golden tests on the real metric captures in tests/data/metrics (copied from
// shared/data/metrics with their attribution): device facts, sentinels, MIG,
// Kubernetes labels, and the verdicts each capture supports. The expectations
// come from the captures' documented states (shared/data/README.md), not from
// running the code.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/report.h"

namespace gputriage {
namespace {

const std::string kData = std::string(GPUTRIAGE_TEST_DATA_DIR) + "/metrics/";
constexpr double kMiB = 1024.0 * 1024.0;

gputriage::Run Load(const std::string& rel) {
  auto run = ImportRun({kData + rel});
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? std::move(*run) : gputriage::Run{};
}

const Recording* Phase(const gputriage::Run& run, const std::string& phase) {
  for (const auto& r : run.recordings)
    if (r.metadata.count("phase") && r.metadata.at("phase") == phase) return &r;
  return nullptr;
}

std::vector<const Finding*> FindingsFor(const Diagnosis& d, const std::string& scope_part) {
  std::vector<const Finding*> out;
  for (const auto& f : d.findings)
    if (f.scope.find(scope_part) != std::string::npos) out.push_back(&f);
  return out;
}

bool HasVerdict(const std::vector<const Finding*>& fs, const std::string& verdict) {
  return std::any_of(fs.begin(), fs.end(), [&](const Finding* f) { return f->verdict == verdict; });
}

TEST(MetricGolden, H100CaptureFactsAndPhases) {
  const gputriage::Run run = Load("nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt");
  ASSERT_EQ(run.recordings.size(), 2u);  // idle and load phases; "capabilities" holds no samples
  const Recording* idle = Phase(run, "idle");
  const Recording* load = Phase(run, "load");
  ASSERT_TRUE(idle && load);
  ASSERT_EQ(load->metrics.devices.size(), 1u);  // -q, CSV and dmon rows are one GPU
  const MetricDevice& g = load->metrics.devices[0];
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.architecture, "Hopper");
  EXPECT_EQ(g.driver_version, "590.48.01");
  EXPECT_EQ(g.pci_bus_id, "00000000:00:09.0");
  EXPECT_EQ(g.uuid, "GPU-00000000-0000-0000-0000-000000000000");  // masked by the collector
  EXPECT_DOUBLE_EQ(g.power_limit_w, 700.0);
  EXPECT_DOUBLE_EQ(g.max_sm_clock_mhz, 1980.0);
  EXPECT_EQ(g.memory_total_bytes, static_cast<int64_t>(81559 * kMiB));
  EXPECT_FALSE(g.mig_mode);
  // Under gpu-burn: utilization.gpu 100 % in the CSV, -q and all five dmon rows.
  EXPECT_EQ(g.Get(Metric::kGpuUtil).count(), 7);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kGpuUtil).min(), 100.0);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kSmClockMHz).max(), 1980.0);
  EXPECT_GE(g.Get(Metric::kPowerW).min(), 625.0);  // 631.95 W in the CSV, -q average 629.45 W, dmon 631-636
  EXPECT_LE(g.Get(Metric::kPowerW).max(), 636.0);
  EXPECT_EQ(g.limiting_reason_samples, 0);
  const MetricDevice& gi = idle->metrics.devices.at(0);
  EXPECT_DOUBLE_EQ(gi.Get(Metric::kGpuUtil).max(), 0.0);
  EXPECT_NEAR(gi.Get(Metric::kPowerW).mean(), 69.3, 0.5);
  EXPECT_EQ(gi.reason_counts[0], 2);  // gpu_idle active in -q and CSV

  const Diagnosis d = Diagnose(run);
  const auto load_findings = FindingsFor(d, "load phase");
  ASSERT_TRUE(HasVerdict(load_findings, "at_compute_limit"));
  for (const Finding* f : load_findings) {
    EXPECT_LT(f->severity, Severity::kModerate) << f->verdict;
    if (f->verdict == "at_compute_limit") {
      // Utilization and power say "busy", but not how efficiently: say which metric would.
      EXPECT_NE(f->to_separate.find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), std::string::npos);
      EXPECT_FALSE(f->cannot_exclude.empty());
    }
  }
  const auto idle_findings = FindingsFor(d, "idle phase");
  ASSERT_TRUE(HasVerdict(idle_findings, "idle"));
  EXPECT_EQ(d.summary.devices, 1);  // one GPU seen in two phases
}

TEST(MetricGolden, H100MigIsNotReadAsIdle) {
  const gputriage::Run run = Load("nvidia-smi/linux-x86_64__nvidia-h100-mig__590.48.01.txt");
  const Recording* load = Phase(run, "load");
  ASSERT_TRUE(load);
  const MetricDevice& g = load->metrics.devices.at(0);
  EXPECT_TRUE(g.mig_mode);
  EXPECT_EQ(g.Get(Metric::kGpuUtil).count(), 0);  // [N/A] in CSV and -q, '-' in dmon
  EXPECT_GT(g.Get(Metric::kPowerW).mean(), 400.0);  // ~438 W under load
  const Diagnosis d = Diagnose(run);
  const auto fs = FindingsFor(d, "load phase");
  EXPECT_FALSE(HasVerdict(fs, "idle"));
  ASSERT_TRUE(HasVerdict(fs, "utilization_unavailable"));
  for (const Finding* f : fs)
    if (f->verdict == "utilization_unavailable") { EXPECT_NE(f->to_separate.find("GR_ENGINE_ACTIVE"), std::string::npos); }
}

TEST(MetricGolden, L40sEncoderLoadIsVideoNotIdle) {
  const gputriage::Run run = Load("nvidia-smi/linux-x86_64__nvidia-l40s__595.80.txt");
  const Recording* load = Phase(run, "load");
  ASSERT_TRUE(load);
  const MetricDevice& g = load->metrics.devices.at(0);
  EXPECT_EQ(g.name, "NVIDIA L40S");
  EXPECT_GE(g.Get(Metric::kEncoderUtil).mean(), 55.0);  // dmon enc 59-67
  EXPECT_LE(g.Get(Metric::kGpuUtil).mean(), 10.0);      // utilization.gpu 9-10 %
  EXPECT_EQ(g.Get(Metric::kMemTempC).count(), 0);       // dmon mtemp '-'
  const Diagnosis d = Diagnose(run);
  const auto fs = FindingsFor(d, "load phase");
  EXPECT_TRUE(HasVerdict(fs, "video_engine_busy"));
  EXPECT_FALSE(HasVerdict(fs, "idle"));
  EXPECT_FALSE(HasVerdict(fs, "underutilized"));
  // The idle phase: one 100 % CSV sample among zeros is a snapshot's noise, not a high finding.
  for (const Finding* f : FindingsFor(d, "idle phase")) EXPECT_LT(f->severity, Severity::kModerate) << f->verdict;
}

TEST(MetricGolden, WindowsRtx2080SuperEncoder) {
  const gputriage::Run run = Load("nvidia-smi/windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.txt");
  const Recording* load = Phase(run, "load");
  ASSERT_TRUE(load);
  const MetricDevice& g = load->metrics.devices.at(0);
  EXPECT_EQ(g.name, "NVIDIA GeForce RTX 2080 SUPER");
  EXPECT_EQ(g.labels.at("driver_model"), "WDDM");
  EXPECT_GE(g.Get(Metric::kEncoderUtil).mean(), 90.0);
  EXPECT_DOUBLE_EQ(g.power_limit_w, 250.0);
  const Diagnosis d = Diagnose(run);
  EXPECT_TRUE(HasVerdict(FindingsFor(d, "load phase"), "video_engine_busy"));
}

TEST(MetricGolden, DataDogT4ScrapeLabelsAndHosts) {
  const gputriage::Run run = Load("dcgm-exporter/datadog_t4_idle_metrics.txt");
  ASSERT_EQ(run.recordings.size(), 1u);
  const auto& devs = run.recordings[0].metrics.devices;
  ASSERT_EQ(devs.size(), 3u);  // two T4 hosts and one A10G, all gpu="0"
  int t4 = 0;
  const MetricDevice* a10g = nullptr;
  for (const auto& d : devs) {
    if (d.name == "Tesla T4") ++t4;
    if (d.name == "NVIDIA A10G") a10g = &d;
  }
  EXPECT_EQ(t4, 2);
  ASSERT_TRUE(a10g);
  EXPECT_EQ(a10g->labels.at("pod"), "ray-1111111");
  EXPECT_EQ(a10g->labels.at("namespace"), "ray-llm");
  EXPECT_EQ(a10g->labels.at("container"), "ray-worker");
  const auto& first = devs[0];
  EXPECT_EQ(first.hostname, "424773df46e0");
  EXPECT_DOUBLE_EQ(first.Get(Metric::kGpuUtil).mean(), 0.0);
  EXPECT_TRUE(run.recordings[0].stats.FindIssue("unlabelled_series"));  // DataDog's dummy rows
  const Diagnosis d = Diagnose(run);
  bool idle_t4 = false;
  for (const auto& f : d.findings) idle_t4 |= f.verdict == "idle" && f.scope.find("Tesla T4") != std::string::npos;
  EXPECT_TRUE(idle_t4);
}

TEST(MetricGolden, A100MigUnderLoadIsTheTensorSaturatedReference) {
  const gputriage::Run run = Load("dcgm-exporter/nvidia_docs_a100_mig_load.prom");
  const auto& devs = run.recordings.at(0).metrics.devices;
  ASSERT_EQ(devs.size(), 2u);
  const MetricDevice& whole = devs[0];
  EXPECT_EQ(whole.mig_instance, -1);
  EXPECT_NEAR(whole.Get(Metric::kGrEngineActive).mean(), 99.6, 0.05);
  EXPECT_NEAR(whole.Get(Metric::kTensorActive).mean(), 92.9, 0.05);
  EXPECT_NEAR(whole.Get(Metric::kDramActive).mean(), 69.1, 0.05);
  EXPECT_NEAR(whole.Get(Metric::kPowerW).mean(), 409.692, 1e-6);
  const MetricDevice& mig = devs[1];
  EXPECT_EQ(mig.mig_instance, 13);
  EXPECT_EQ(mig.mig_profile, "1g.5gb");
  const Diagnosis d = Diagnose(run);
  bool limit = false;
  for (const auto& f : d.findings) {
    EXPECT_NE(f.verdict, "memory_bound");  // DRAM 69 % but tensor cores saturated
    limit |= f.verdict == "at_compute_limit";
  }
  EXPECT_TRUE(limit);
  EXPECT_NE(d.summary.gpu_busy_source.find("GR_ENGINE_ACTIVE"), std::string::npos);
}

TEST(MetricGolden, BlankSentinelIsMissing) {
  const gputriage::Run run = Load("dcgm-exporter/nvidia_docs_blank_sentinel.prom");
  const auto& rec = run.recordings.at(0);
  const MetricDevice& g = rec.metrics.devices.at(0);
  EXPECT_EQ(g.Get(Metric::kMemTempC).count(), 0);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kSmClockMHz).mean(), 139);
  EXPECT_DOUBLE_EQ(g.Get(Metric::kMemClockMHz).mean(), 405);
  ASSERT_TRUE(rec.stats.FindIssue("dcgm_blank_value"));
}

TEST(MetricGolden, TraceAndMetricLogOfOneRunGiveOneDiagnosis) {
  // The ResNet-50 num_workers=0 trace (input-bound by its DataLoader share) with an
  // nvidia-smi log of the same run (the trace was taken at 2021-06-08 08:57 UTC):
  // a sawtooth in the rhythm of batches.
  const std::string csv = (std::filesystem::temp_directory_path() / "gputriage_same_run.csv").string();
  {
    std::ofstream f(csv);
    f << "timestamp, index, name, utilization.gpu [%], power.draw [W]\n";
    for (int t = 0; t < 840; ++t)
      f << "2021/06/08 08:" << (t / 60 + 45 < 10 ? "0" : "") << t / 60 + 45 << ":" << (t % 60 < 10 ? "0" : "") << t % 60
        << ".000, 0, Tesla V100-DGXS-32GB, " << ((t % 6) < 4 ? 96 : 0) << ", 180.00\n";
  }
  auto run = ImportRun({std::string(GPUTRIAGE_TEST_DATA_DIR) + "/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz", csv});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->recordings.size(), 2u);
  const Diagnosis d = Diagnose(*run);
  int input_bound = 0;
  for (const auto& f : d.findings) {
    if (f.verdict != "input_bound") continue;
    ++input_bound;
    EXPECT_EQ(f.origin, "trace");  // the trace measures the data wait; the metrics corroborate
    bool from_metrics = false;
    for (const auto& e : f.evidence) from_metrics |= e.source.rfind("metrics, ", 0) == 0;
    EXPECT_TRUE(from_metrics);
  }
  EXPECT_EQ(input_bound, 1);
  EXPECT_NE(d.summary.gpu_busy_source.find("trace"), std::string::npos);
  EXPECT_NEAR(d.summary.gpu_util_mean_percent, 64.0, 0.01);
  EXPECT_EQ(d.summary.devices, 1);
  std::filesystem::remove(csv);
}

TEST(MetricGolden, SourcesOfDifferentRunsAreJudgedApart) {
  // Issue 12, item 9: an H100 log from 2026 beside a V100 trace from 2021 was
  // "the GPU metrics of the same run agree". Now they are set apart, and said so.
  const std::string csv = (std::filesystem::temp_directory_path() / "gputriage_other_run.csv").string();
  {
    std::ofstream f(csv);
    f << "timestamp, index, name, utilization.gpu [%], power.draw [W]\n";
    for (int t = 0; t < 600; ++t)
      f << "2026/03/02 10:" << (t / 60 < 10 ? "0" : "") << t / 60 << ":" << (t % 60 < 10 ? "0" : "") << t % 60
        << ".000, 0, NVIDIA H100 80GB HBM3, " << ((t % 6) < 4 ? 96 : 0) << ", 500.00\n";
  }
  const std::string trace = std::string(GPUTRIAGE_TEST_DATA_DIR) + "/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz";
  auto run = ImportRun({trace, csv});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  Diagnosis d = Diagnose(*run);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("do not overlap in time"), std::string::npos) << d.notes[0];
  for (const auto& f : d.findings) {
    EXPECT_EQ(f.detail.find("same run agree"), std::string::npos) << f.verdict;
    for (const auto& e : f.evidence) EXPECT_NE(e.source.rfind("metrics, ", 0), 0u) << f.verdict << ": " << e.source;
    EXPECT_FALSE(f.scope.empty());  // each names its file
  }
  // Two traces that both say rank 0 are not two ranks of one run, nor renumbered.
  const std::string nccl = std::string(GPUTRIAGE_TEST_DATA_DIR) + "/traces/hta/nccl_a100_rank0.json.gz";
  run = ImportRun({nccl, nccl});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->recordings[0].rank, 0);
  EXPECT_EQ(run->recordings[1].rank, 0);
  d = Diagnose(*run);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("both say they are rank 0"), std::string::npos) << d.notes[0];
  std::filesystem::remove(csv);
}

TEST(MetricGolden, EveryCaptureRendersBothReports) {
  for (const char* rel : {"nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt",
                          "nvidia-smi/linux-x86_64__nvidia-h100-mig__590.48.01.txt",
                          "nvidia-smi/linux-x86_64__nvidia-l40s__595.80.txt",
                          "nvidia-smi/windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.txt",
                          "dcgm-exporter/datadog_t4_idle_metrics.txt", "dcgm-exporter/nvidia_docs_a100_mig_load.prom",
                          "dcgm-exporter/nvidia_docs_blank_sentinel.prom"}) {
    const gputriage::Run run = Load(rel);
    const Diagnosis d = Diagnose(run);
    EXPECT_FALSE(RenderTerminal(run, d, {}).empty()) << rel;
    const std::string json = RenderJson(run, d);
    EXPECT_NE(json.find("\"gpu_util_mean_percent\""), std::string::npos) << rel;
    EXPECT_NE(json.find("\"metric_devices\""), std::string::npos) << rel;
  }
}

}  // namespace
}  // namespace gputriage
