// The NVML loader and sampler through the real dlopen path, against the fake
// libnvidia-ml.so.1 built in tests/fake_nvml and driven by scenario files.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_set>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "gputriage/diagnosis.h"
#include "src/record/host_usage.h"
#include "src/record/process_tree.h"
#include "src/sources/nvml/nvml_library.h"
#include "src/sources/nvml/nvml_sampler.h"

namespace gputriage {
namespace {

const std::string kFake = GPUTRIAGE_FAKE_NVML;

class Nvml : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("GPUTRIAGE_FAKE_NVML_SCENARIO");
    unsetenv(NvmlLibrary::kPathEnv);
    if (!scenario_.empty()) std::filesystem::remove(scenario_);
  }
  void Scenario(const std::string& text) {
    scenario_ = (std::filesystem::temp_directory_path() /
                 ("gputriage_nvml_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".txt"))
                    .string();
    std::ofstream(scenario_) << text;
    setenv("GPUTRIAGE_FAKE_NVML_SCENARIO", scenario_.c_str(), 1);
  }
  /// Loads the fake through the real loader, samples `n` times `interval` apart
  /// (and the processes every `process_every` samples, `job` being the job's pids).
  Recording Record(int n, TimeNs interval = 100 * kNsPerMs, const std::unordered_set<unsigned int>& job = {},
                   int process_every = 0) {
    auto nvml = NvmlLibrary::Load(kFake);
    EXPECT_TRUE(nvml.ok()) << nvml.status().ToString();
    Recording rec;
    if (!nvml.ok()) return rec;
    auto sampler = NvmlSampler::Open(**nvml, rec);
    EXPECT_TRUE(sampler.ok()) << sampler.status().ToString();
    if (!sampler.ok()) return rec;
    const TimeNs start = 1'700'000'000 * kNsPerS;
    for (int i = 0; i < n; ++i) {
      sampler->Sample(start + i * interval, rec);
      if (process_every > 0 && i % process_every == 0)
        sampler->SampleProcesses(start + i * interval, [&job](unsigned int pid) { return job.count(pid) > 0; }, rec);
    }
    if (process_every > 0) {
      sampler->FinishAttribution(rec);
      AttributeGpusToJob(rec);
    }
    lost_ = sampler->lost_devices();
    return rec;
  }
  std::string scenario_;
  int lost_ = 0;
};

TEST_F(Nvml, NoScenarioIsOneHealthyGpu) {
  Recording rec = Record(10);
  EXPECT_EQ(rec.format, "nvml");
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const auto& d = rec.metrics.devices[0];
  EXPECT_EQ(d.name, "Fake GPU (gputriage test)");
  EXPECT_EQ(d.uuid, "GPU-fake-0000");
  EXPECT_EQ(d.pci_bus_id, "00000000:01:00.0");
  EXPECT_EQ(d.driver_version, "999.99.99-fake");
  EXPECT_DOUBLE_EQ(d.power_limit_w, 300);
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 10);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kGpuUtil).mean(), 95);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kPowerW).mean(), 250);
  EXPECT_EQ(d.Get(Metric::kGpuUtil).MedianInterval(), 100 * kNsPerMs);
  EXPECT_EQ(rec.metrics.rows, 10);
}

TEST_F(Nvml, InputBoundSawtoothThroughTheLoaderEndsInTheSameVerdict) {
  Scenario(
      "driver 550.54.15\n"
      "device name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-h100 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980\n"
      "series gpu_util 97 97 97 97 97 0 0 0   # the loader refills for 0.3 s of every 0.8 s\n"
      "series power_w 420 430 440 430 420 120 110 115\n"
      "series sm_mhz 1980\n"
      "series mem_used_mib 60000\n"
      "series pcie_rx_kbs 2000 2000 2000 2000 2000 900000 900000 900000\n");
  Recording rec = Record(6000);  // 10 minutes at 100 ms
  const auto& d = rec.metrics.devices.at(0);
  EXPECT_EQ(d.name, "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(d.max_sm_clock_mhz, 1980);
  EXPECT_EQ(d.memory_total_bytes, 16384LL << 20);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kPcieRxBytesPerS).max(), 900000e3);
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis diagnosis = Diagnose(run);
  const Finding* input = nullptr;
  for (const auto& f : diagnosis.findings)
    if (f.verdict == "input_bound") input = &f;
  ASSERT_TRUE(input);
  bool period = false;
  for (const auto& e : input->evidence)
    if (e.name == "rhythm_period_s") period = std::abs(e.value - 0.8) < 1e-9;
  EXPECT_TRUE(period);
  EXPECT_NEAR(diagnosis.summary.gpu_util_mean_percent, 97.0 * 5 / 8, 1e-9);
}

/// The first verdict of `diagnosis` with this id, or null.
const Finding* FindVerdict(const Diagnosis& d, const std::string& verdict) {
  for (const auto& f : d.findings)
    if (f.verdict == verdict) return &f;
  return nullptr;
}

Diagnosis DiagnoseRecording(Recording rec) {
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  return Diagnose(run);
}

TEST_F(Nvml, GpmSmallBatchIsUndersizedWork) {
  Scenario("device name=\"NVIDIA H100 80GB HBM3\" power_limit_w=700 gpm=1\n"
           "series gpu_util 98\nseries power_w 250\nseries sm_active 22\nseries sm_occupancy 8\n"
           "series tensor_active 3\nseries dram_active 10\nseries fp32_active 5\n");
  Recording rec = Record(600);  // 60 s at 100 ms
  const auto& d = rec.metrics.devices.at(0);
  EXPECT_GT(d.Get(Metric::kSmActive).count(), 500);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kSmActive).mean(), 22);
  EXPECT_FALSE(rec.stats.FindIssue("gpm_unavailable"));
  EXPECT_TRUE(FindVerdict(DiagnoseRecording(std::move(rec)), "undersized_work"));
}

TEST_F(Nvml, GpmFp32IsLowPrecision) {
  Scenario("device name=\"NVIDIA H100 80GB HBM3\" gpm=1\n"
           "series gpu_util 99\nseries sm_active 88\nseries tensor_active 0\nseries fp32_active 62\nseries dram_active 22\n");
  EXPECT_TRUE(FindVerdict(DiagnoseRecording(Record(600)), "low_precision"));
}

TEST_F(Nvml, GpmHealthyBf16IsAtTheComputeLimit) {
  Scenario("device name=\"NVIDIA H100 80GB HBM3\" gpm=1\n"
           "series gpu_util 100\nseries sm_active 91\nseries tensor_active 62\nseries fp32_active 4\nseries dram_active 41\n"
           "series sm_mhz 1980\n");
  const Diagnosis d = DiagnoseRecording(Record(600));
  const Finding* f = FindVerdict(d, "at_compute_limit");
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->cannot_exclude.empty());  // SM and tensor activity were measured
  for (const auto& finding : d.findings) EXPECT_EQ(finding.severity, Severity::kInfo) << finding.verdict;
}

TEST_F(Nvml, GpmPcieAndNvlinkRatesInBytes) {
  Scenario("device name=\"NVIDIA H100 80GB HBM3\" gpm=1\nseries gpu_util 90\nseries sm_active 80\n"
           "series pcie_rx_kbs 5000\nseries gpm_pcie_rx_mibs 1200\nseries gpm_pcie_tx_mibs 300\n"
           "series nvlink_rx_mibs 90000\nseries nvlink_tx_mibs 88000\n");
  Recording rec = Record(50, 200 * kNsPerMs);
  const auto& d = rec.metrics.devices.at(0);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kNvlinkRxBytesPerS).mean(), 90000.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kNvlinkTxBytesPerS).mean(), 88000.0 * 1024 * 1024);
  // PCIe: polled 20 ms readings until GPM's first interval average (the first
  // two ticks), then GPM's averages only (49 intervals).
  const auto& rx = d.Get(Metric::kPcieRxBytesPerS);
  EXPECT_EQ(rx.count(), 2 + 49);
  EXPECT_DOUBLE_EQ(rx.max(), 1200.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(rx.min(), 5000.0 * 1000);
  // By time: the two polled readings stand for their ticks, GPM's for its intervals.
  EXPECT_NEAR(rx.ShareAtLeast(1200.0 * 1024 * 1024), 49.0 / 51.0, 0.01);
}

TEST_F(Nvml, GpmUnsupportedSaysWhatIsMissing) {
  Scenario("device name=\"NVIDIA A100-SXM4-80GB\" gpm=0\nseries gpu_util 100\n");
  Recording rec = Record(100);
  ASSERT_TRUE(rec.stats.FindIssue("gpm_unavailable"));
  EXPECT_EQ(rec.metrics.devices.at(0).Get(Metric::kSmActive).count(), 0);
  const Diagnosis d = DiagnoseRecording(std::move(rec));
  // Busy time alone is no evidence of efficiency: not "at the compute limit".
  EXPECT_FALSE(FindVerdict(d, "at_compute_limit"));
  const Finding* f = FindVerdict(d, "efficiency_unknown");
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->cannot_exclude.empty());
  EXPECT_NE(f->to_separate.find("DCGM_FI_PROF_SM_ACTIVE"), std::string::npos);
}

TEST_F(Nvml, PowerAndClocksAtTheirLimitsAreEvidenceOfTheComputeLimit) {
  // No GPM, but the board draws 92 % of its limit at full clock without stopping.
  Scenario("device name=\"NVIDIA A100-SXM4-80GB\" gpm=0 power_limit_w=400 max_sm_mhz=1410\nseries gpu_util 100\n"
           "series power_w 368\nseries sm_mhz 1410\n");
  const Diagnosis d = DiagnoseRecording(Record(100));
  const Finding* f = FindVerdict(d, "at_compute_limit");
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->cannot_exclude.empty());  // SM and tensor activity are still unknown
}

TEST_F(Nvml, GpuLostMidRunKeepsWhatWasSampled) {
  Scenario("device name=\"NVIDIA A100-SXM4-80GB\"\nseries gpu_util 90\nlost_after 20\n"
           "device name=\"NVIDIA A100-SXM4-80GB\" uuid=GPU-second\nseries gpu_util 80\n");
  Recording rec = Record(50);
  EXPECT_EQ(lost_, 1);
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  EXPECT_EQ(rec.metrics.devices[0].Get(Metric::kGpuUtil).count(), 20);
  EXPECT_EQ(rec.metrics.devices[1].Get(Metric::kGpuUtil).count(), 50);  // the other GPU goes on
  const auto* lost = rec.stats.FindIssue("gpu_lost");
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->severity, IssueSeverity::kError);
  EXPECT_EQ(lost->count, 1);
  EXPECT_NE(lost->message.find("GPU 0"), std::string::npos);
}

TEST_F(Nvml, UnsupportedMetricsAreMissingAndSamplingGoesOn) {
  Scenario("device name=\"Tesla T4\"\nseries gpu_util 40\nseries power_w 35\nunsupported power reasons pcie\n"
           "error temperature 4\n");
  Recording rec = Record(30);
  const auto& d = rec.metrics.devices.at(0);
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 30);
  EXPECT_EQ(d.Get(Metric::kPowerW).count(), 0);
  EXPECT_EQ(d.Get(Metric::kClockEventReasons).count(), 0);
  EXPECT_EQ(d.Get(Metric::kPcieRxBytesPerS).count(), 0);
  EXPECT_EQ(d.Get(Metric::kGpuTempC).count(), 0);
  const auto* unsupported = rec.stats.FindIssue("nvml_not_supported");
  ASSERT_TRUE(unsupported);
  // power, reasons, PCIe RX and TX, and the utilization buffer this scenario has none of: asked once each
  EXPECT_EQ(unsupported->count, 5);
  const auto* permission = rec.stats.FindIssue("nvml_no_permission");
  ASSERT_TRUE(permission);
  EXPECT_NE(permission->message.find("Insufficient Permissions"), std::string::npos);
}

TEST_F(Nvml, MigHidesUtilizationButNotPower) {
  Scenario("device name=\"NVIDIA H100 80GB HBM3\" power_limit_w=700 mig=1\nseries power_w 438\n");
  Recording rec = Record(100, kNsPerS);
  const auto& d = rec.metrics.devices.at(0);
  EXPECT_TRUE(d.mig_mode);
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 0);
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis diagnosis = Diagnose(run);
  ASSERT_FALSE(diagnosis.findings.empty());
  EXPECT_EQ(diagnosis.findings[0].verdict, "utilization_unavailable");
  for (const auto& f : diagnosis.findings) EXPECT_NE(f.verdict, "idle");
}

TEST_F(Nvml, NoDriverIsAClearError) {
  auto missing = NvmlLibrary::Load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_NE(missing.status().message().find("--nvml-library"), std::string::npos);

  Scenario("init_error 9\n");  // the library is there, the kernel driver is not
  auto not_loaded = NvmlLibrary::Load(kFake);
  ASSERT_FALSE(not_loaded.ok());
  EXPECT_NE(not_loaded.status().message().find("Driver Not Loaded"), std::string::npos);

  auto not_nvml = NvmlLibrary::Load("libz.so.1");  // loads, but is not NVML
  ASSERT_FALSE(not_nvml.ok());
  EXPECT_EQ(not_nvml.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(not_nvml.status().message().find("nvmlInit_v2"), std::string::npos);
}

TEST_F(Nvml, EnvironmentNamesTheLibrary) {
  setenv(NvmlLibrary::kPathEnv, kFake.c_str(), 1);
  auto nvml = NvmlLibrary::Load();
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  EXPECT_EQ((*nvml)->path(), kFake);
  // The fake exports only the pre-R535 throttle-reasons name: the fallback finds it.
  EXPECT_NE((*nvml)->api().DeviceGetClocksEventReasons, nullptr);
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

TEST_F(Nvml, HighRateBufferSeesWhatPollingAliases) {
  // A 120 ms sawtooth (6 buffer entries of 20 ms): polling every 100 ms would
  // alias it; the driver's buffer, on a boot-based clock, resolves it.
  Scenario("device name=\"NVIDIA A100-SXM4-80GB\"\nbuffer 5 boot\nseries gpu_util 50\n"
           "series gpu_util_fast 100 100 100 0 0 0\n");
  const TimeNs start = 1'700'000'000 * kNsPerS;
  Recording rec = Record(600);
  const auto& util = rec.metrics.devices.at(0).Get(Metric::kGpuUtil);
  // The first read only anchors the clock (its entries predate the recording);
  // then 5 entries per poll.
  EXPECT_EQ(util.count(), 1 + 599 * 5);
  EXPECT_EQ(util.MedianInterval(), 20 * kNsPerMs);
  EXPECT_NEAR(util.mean(), 50, 0.5);
  EXPECT_GE(util.first_time(), start);
  EXPECT_LE(util.last_time(), start + 599 * 100 * kNsPerMs);
  EXPECT_EQ(util.out_of_order(), 0);
  // Really 0 or 100, not the polled 50 (which only the anchoring first poll records).
  EXPECT_DOUBLE_EQ(util.ShareAtLeast(100) + util.ShareAtMost(0), static_cast<double>(util.count() - 1) / static_cast<double>(util.count()));
  EXPECT_EQ(rec.stats.FindIssue("nvml_not_supported"), nullptr);
}

TEST_F(Nvml, HalfBusyGpuReadsHalfBusyByTime) {
  // Busy 1 s, idle 1 s. The driver fills its buffer only while busy (5 entries per
  // 100 ms poll); while idle the polled 0 % stands in, one reading per poll. By
  // entries the mean would be 50 / 60 = 83 % and read as a GPU at its limit; each
  // entry stands for the time it covers, so it is 50 %.
  std::string busy, idle, fast_busy, fast_idle;
  for (int i = 0; i < 10; ++i) busy += " 100", idle += " 0";
  for (int i = 0; i < 50; ++i) fast_busy += " 100", fast_idle += " 0";
  Scenario("device name=\"NVIDIA H100 80GB HBM3\"\nbuffer 5 dry\nseries gpu_util" + busy + idle +
           "\nseries gpu_util_fast" + fast_busy + fast_idle + "\n");
  Recording rec = Record(400);
  const auto& util = rec.metrics.devices.at(0).Get(Metric::kGpuUtil);
  EXPECT_GT(util.count(), 900);  // ~1000 buffer entries and ~200 polled zeros
  EXPECT_NEAR(util.mean(), 50.0, 3.0);
  EXPECT_NEAR(util.ShareAtMost(5), 0.5, 0.03);
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  for (const auto& f : d.findings) EXPECT_NE(f.verdict, "at_compute_limit") << f.title;
  EXPECT_NEAR(d.summary.gpu_util_mean_percent, 50.0, 3.0);
}

TEST_F(Nvml, DryBufferFallsBackToPolledUtilization) {
  // An idle GPU: the driver stops filling the buffer; the polled 0 % stands in.
  Scenario("device\nbuffer 4 dry\nseries gpu_util 0\n");
  Recording rec = Record(50);
  const auto& util = rec.metrics.devices.at(0).Get(Metric::kGpuUtil);
  EXPECT_EQ(util.count(), 50);
  EXPECT_EQ(util.max(), 0);
  EXPECT_EQ(util.MedianInterval(), 100 * kNsPerMs);
}

TEST_F(Nvml, ProcessesAttributeGpusToTheJob) {
  Scenario(
      "device name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-a\nseries gpu_util 90\n"
      "process pid=4242 sm=70 used_mib=30000\nprocess pid=777 sm=20 used_mib=1000\n"
      "device name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-b\nseries gpu_util 60\nprocess pid=555 sm=60\n"
      "device name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-c\nseries gpu_util 0\n");
  Recording rec = Record(100, 100 * kNsPerMs, {4242, 4243}, 10);
  // GPU-b ran someone else's process and GPU-c none: only GPU-a is the job's.
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  const auto& d = rec.metrics.devices[0];
  EXPECT_EQ(d.uuid, "GPU-a");
  EXPECT_EQ(d.job_use, MetricDevice::JobUse::kUsed);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kJobFbUsedBytes).max(), 30000.0 * (1 << 20));
  // The first per-process read is the driver's history: 9 of 10 reads count.
  EXPECT_EQ(d.Get(Metric::kJobSmUtil).count(), 9);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kJobSmUtil).mean(), 70);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kOtherSmUtil).mean(), 20);
  ASSERT_EQ(d.other_processes.size(), 1u);
  EXPECT_EQ(d.other_processes[0], "pid 777");
  const auto* gpus = rec.stats.FindIssue("job_gpus");
  ASSERT_TRUE(gpus);
  EXPECT_NE(gpus->message.find("GPU 0"), std::string::npos) << gpus->message;
  EXPECT_NE(gpus->message.find("left out as not the job's: GPU 1 GPU 2"), std::string::npos) << gpus->message;
  const auto* shared = rec.stats.FindIssue("gpu_shared");
  ASSERT_TRUE(shared);
  EXPECT_NE(shared->message.find("pid 777 (their SM utilization averaged 20%"), std::string::npos) << shared->message;
}

TEST_F(Nvml, JobInAnotherPidNamespaceKeepsEveryGpu) {
  Scenario("device\nprocess pid=31337 sm=50\ndevice\n");
  Recording rec = Record(20, 100 * kNsPerMs, {100}, 5);
  EXPECT_EQ(rec.metrics.devices.size(), 2u);
  EXPECT_TRUE(rec.stats.FindIssue("job_not_on_gpu"));
}

TEST_F(Nvml, UnlistableProcessesLeaveAttributionUnknown) {
  Scenario("device\nunsupported processes\n");
  Recording rec = Record(20, 100 * kNsPerMs, {100}, 5);
  ASSERT_EQ(rec.metrics.devices.size(), 1u);
  EXPECT_EQ(rec.metrics.devices[0].job_use, MetricDevice::JobUse::kUnknown);
  EXPECT_FALSE(rec.stats.FindIssue("job_not_on_gpu"));
  EXPECT_FALSE(rec.stats.FindIssue("job_gpus"));
}

TEST_F(Nvml, MigInstancesGetTheirOwnGpmAndProcesses) {
  Scenario(
      "device name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-h bus=00000000:18:00.0 power_limit_w=700 mig=1 gpm=1\n"
      "series power_w 350\n"
      "instance gi=1 profile=3g.40gb memory_total_mib=40192 gpm=1\n"
      "series gr_engine 93\nseries sm_active 85\nseries tensor_active 62\nseries mem_used_mib 30000\n"
      "process pid=900 sm=0 used_mib=30000\n"
      "instance gi=2 profile=3g.40gb memory_total_mib=40192 gpm=1\n"
      "series sm_active 5\nprocess pid=1234 used_mib=2000\n");
  Recording rec = Record(50, 200 * kNsPerMs, {900}, 5);
  // The board (power, clocks) and the job's instance stay; the other instance is someone else's.
  ASSERT_EQ(rec.metrics.devices.size(), 2u);
  const auto& board = rec.metrics.devices[0];
  const auto& mine = rec.metrics.devices[1];
  EXPECT_EQ(board.mig_instance, -1);
  EXPECT_TRUE(board.mig_mode);
  EXPECT_DOUBLE_EQ(board.Get(Metric::kPowerW).mean(), 350);
  EXPECT_EQ(board.Get(Metric::kSmActive).count(), 0);  // GPM is per instance under MIG
  EXPECT_EQ(mine.mig_instance, 1);
  EXPECT_EQ(mine.mig_profile, "3g.40gb");
  EXPECT_EQ(mine.uuid, "MIG-fake-0-1");
  EXPECT_EQ(mine.pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(mine.memory_total_bytes, 40192LL << 20);
  EXPECT_EQ(mine.Label(), "GPU 0 / MIG 3g.40gb (1)");
  EXPECT_DOUBLE_EQ(mine.Get(Metric::kSmActive).mean(), 85);
  EXPECT_DOUBLE_EQ(mine.Get(Metric::kTensorActive).mean(), 62);
  EXPECT_DOUBLE_EQ(mine.Get(Metric::kFbUsedBytes).mean(), 30000.0 * (1 << 20));
  EXPECT_EQ(mine.Get(Metric::kGpuUtil).count(), 0);
  const auto* gpus = rec.stats.FindIssue("job_gpus");
  ASSERT_TRUE(gpus);
  EXPECT_NE(gpus->message.find("GPU 0 / MIG 3g.40gb (2)"), std::string::npos) << gpus->message;
  // Judged per instance, from its GPM activity; the board's missing utilization is no finding.
  const Diagnosis diagnosis = DiagnoseRecording(std::move(rec));
  ASSERT_EQ(diagnosis.findings.size(), 1u);
  EXPECT_EQ(diagnosis.findings[0].verdict, "at_compute_limit");
  EXPECT_NE(diagnosis.findings[0].scope.find("MIG 3g.40gb (1)"), std::string::npos) << diagnosis.findings[0].scope;
}

TEST(ProcessTree, FollowsParentsThroughOddCommandNames) {
  const auto root = std::filesystem::temp_directory_path() / "gputriage_proc_test";
  std::filesystem::remove_all(root);
  auto stat = [&](int pid, const std::string& comm, int ppid) {
    std::filesystem::create_directories(root / std::to_string(pid));
    std::ofstream(root / std::to_string(pid) / "stat") << pid << " (" << comm << ") S " << ppid << " 1 1 0 -1\n";
  };
  stat(100, "python", 50);
  stat(50, "bash", 1);
  stat(101, "pt_data_worker) S 1", 100);  // a name with ") S 1" inside it
  stat(102, "nested worker", 101);
  stat(200, "other", 1);
  stat(201, "other's child", 200);
  stat(300, "loop", 301);  // a corrupt chain that never reaches init
  stat(301, "loop", 300);
  JobProcesses job(100, root.string());
  EXPECT_TRUE(job.Contains(100));
  EXPECT_TRUE(job.Contains(102));
  EXPECT_TRUE(job.Contains(101));
  EXPECT_FALSE(job.Contains(201));
  EXPECT_FALSE(job.Contains(50));   // the job's parent is not the job
  EXPECT_FALSE(job.Contains(300));
  EXPECT_FALSE(job.Contains(999));  // exited or in another PID namespace: no stat to read
  std::filesystem::remove_all(root);
  EXPECT_TRUE(job.Contains(102));   // remembered: no /proc read needed
  EXPECT_FALSE(job.Contains(201));
  stat(999, "late", 100);
  EXPECT_FALSE(job.Contains(999));  // remembered as not the job's
  std::filesystem::remove_all(root);
}

/// A fake /proc for the host usage reader: the machine's counters and each
/// process's CPU ticks and resident pages, its children listed where the kernel lists them.
struct FakeProc {
  std::filesystem::path root;
  void Machine(uint64_t busy, uint64_t idle) {
    std::filesystem::create_directories(root);
    // user nice system idle iowait irq softirq steal: busy split over user and system.
    std::ofstream(root / "stat") << "cpu  " << busy / 2 << " 0 " << busy - busy / 2 << " " << idle
                                 << " 0 0 0 0 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\ncpu1 1 0 1 1 0 0 0 0 0 0\nintr 0\n";
  }
  void Process(int pid, const std::string& comm, int ppid, uint64_t utime, uint64_t stime, int64_t rss_pages,
               const std::vector<int>& children) {
    const auto dir = root / std::to_string(pid);
    std::filesystem::create_directories(dir / "task" / std::to_string(pid));
    std::ofstream(dir / "stat") << pid << " (" << comm << ") S " << ppid
                                << " 1 1 0 -1 4194560 100 0 0 0 " << utime << " " << stime
                                << " 0 0 20 0 1 0 100 1000000 " << rss_pages << " 18446744073709551615\n";
    std::ofstream children_file(dir / "task" / std::to_string(pid) / "children");
    for (int c : children) children_file << c << " ";
  }
};

TEST(HostUsage, TimeWeightedCpuOfTheJobItsWorkersAndTheMachine) {
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  FakeProc proc{std::filesystem::temp_directory_path() / ("gputriage_fake_proc_host_" + std::to_string(getpid()))};
  std::filesystem::remove_all(proc.root);
  // The recorder (10) runs the training process (11) with two workers (12, 13);
  // a process that is not the job's (20) uses CPU too.
  proc.Machine(1000, 1000);
  proc.Process(10, "gputriage", 1, 5, 5, 100, {11});
  proc.Process(11, "python) R 1", 10, 100, 0, 1000, {12, 13});  // a name with ") R 1" inside it
  proc.Process(12, "python", 11, 10, 0, 500, {});
  proc.Process(13, "python", 11, 10, 0, 500, {});
  proc.Process(20, "other", 1, 1000, 0, 9000, {});
  HostUsageSampler sampler(10, 11, 2, proc.root.string());
  sampler.Sample(0);
  EXPECT_EQ(sampler.summary().intervals, 0);  // one read is no interval
  // One second: the training process 0.5 core, each worker 0.75; the machine 95 % busy.
  const auto ticks = [&](double seconds) { return static_cast<uint64_t>(std::llround(seconds * hz)); };
  proc.Machine(1000 + ticks(1.9), 1000 + ticks(0.1));
  proc.Process(11, "python) R 1", 10, 100 + ticks(0.25), ticks(0.25), 1000, {12, 13});
  proc.Process(12, "python", 11, 10 + ticks(0.75), 0, 500, {});
  proc.Process(13, "python", 11, 10 + ticks(0.75), 0, 500, {});
  sampler.Sample(kNsPerS);
  // Three more seconds: a worker ended, and the rest idles; the machine 10 % busy.
  proc.Machine(1000 + ticks(1.9) + ticks(0.6), 1000 + ticks(0.1) + ticks(5.4));
  std::filesystem::remove_all(proc.root / "13");
  proc.Process(11, "python) R 1", 10, 100 + ticks(0.25) + ticks(0.3), ticks(0.25), 1000, {12});
  sampler.Sample(4 * kNsPerS);
  const HostUsageSummary& s = sampler.summary();
  EXPECT_EQ(s.intervals, 2);
  EXPECT_EQ(s.covered_ns, 4 * kNsPerS);
  EXPECT_EQ(s.machine_cpus, 2);
  // Time-weighted: (2.0 cores × 1 s + 0.1 × 3 s) / 4 s.
  EXPECT_NEAR(s.job_cores_mean, (2.0 + 0.1 * 3) / 4, 0.02);
  EXPECT_NEAR(s.main_cores_mean, (0.5 + 0.1 * 3) / 4, 0.02);
  EXPECT_NEAR(s.other_cores_mean, 1.5 / 4, 0.02);
  EXPECT_NEAR(s.machine_busy_percent_mean, (95.0 + 10.0 * 3) / 4, 0.5);
  EXPECT_NEAR(s.saturated_percent_of_time, 25.0, 1e-9);  // the first second
  EXPECT_EQ(s.job_processes_max, 3);
  EXPECT_EQ(s.job_rss_peak_bytes, 2000 * sysconf(_SC_PAGESIZE));
  const auto m = s.AsMetadata();
  EXPECT_EQ(m.at("host.usage.intervals"), "2");
  EXPECT_EQ(m.count("host.usage.job_cpu_seconds"), 0u);  // not known here
  std::filesystem::remove_all(proc.root);
}

TEST(HostUsage, TheJobsWaitForACpuIsReadFromSchedstat) {
  // The training process (11) waits 0.3 s for a CPU over 2 s; without schedstat
  // files (a kernel without CONFIG_SCHEDSTATS) the wait is not claimed at all.
  FakeProc proc{std::filesystem::temp_directory_path() / ("gputriage_fake_proc_wait_" + std::to_string(getpid()))};
  std::filesystem::remove_all(proc.root);
  proc.Machine(1000, 1000);
  proc.Process(10, "gputriage", 1, 5, 5, 100, {11});
  proc.Process(11, "python", 10, 100, 0, 1000, {});
  HostUsageSampler without(10, 11, 2, proc.root.string());
  without.Sample(0);
  proc.Machine(1100, 1100);
  without.Sample(kNsPerS);
  EXPECT_LT(without.summary().job_wait_cores_mean, 0);
  EXPECT_EQ(without.summary().AsMetadata().count("host.usage.job_cpu_wait_mean"), 0u);
  std::ofstream(proc.root / "11" / "schedstat") << "5000000 100000000 40\n";
  HostUsageSampler sampler(10, 11, 2, proc.root.string());
  sampler.Sample(0);
  std::ofstream(proc.root / "11" / "schedstat") << "900000000 400000000 90\n";
  proc.Machine(1200, 1200);
  sampler.Sample(2 * kNsPerS);
  EXPECT_NEAR(sampler.summary().job_wait_cores_mean, 0.15, 1e-9);
  EXPECT_EQ(sampler.summary().AsMetadata().at("host.usage.job_cpu_wait_mean"), "0.150");
  std::filesystem::remove_all(proc.root);
}

TEST(HostUsage, UnreadableProcGivesNoIntervalsNotNumbers) {
  HostUsageSampler sampler(10, 11, 2, "/nonexistent/proc");
  sampler.Sample(0);
  sampler.Sample(kNsPerS);
  EXPECT_EQ(sampler.summary().intervals, 0);
  EXPECT_TRUE(sampler.summary().AsMetadata().empty());  // nothing to keep: the report says nothing of the host
  EXPECT_EQ(sampler.summary().job_cores_mean, 0);
  EXPECT_EQ(sampler.summary().machine_busy_percent_mean, 0);
  EXPECT_EQ(sampler.summary().job_processes_max, 0);
}

TEST(ProcessTree, FindsARealGrandchild) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      pause();
      _exit(0);
    }
    (void)!write(ready[1], &grandchild, sizeof grandchild);
    pause();
    _exit(0);
  }
  pid_t grandchild = 0;
  ASSERT_EQ(read(ready[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  JobProcesses job(child);
  EXPECT_TRUE(job.Contains(static_cast<unsigned int>(child)));
  EXPECT_TRUE(job.Contains(static_cast<unsigned int>(grandchild)));
  EXPECT_FALSE(job.Contains(static_cast<unsigned int>(getpid())));
  kill(grandchild, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace gputriage
