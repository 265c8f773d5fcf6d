// Series sketches, metric verdicts, workload targets, cost and the GPU spec
// table. Verdict tests feed synthetic logs in the real formats through the real
// importers, shaped like the physics of each problem (a starved input pipeline
// makes a sawtooth, a tiny batch keeps SM activity low while a kernel is always
// running, ...).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gputriage/diagnosis.h"
#include "gputriage/markers.hpp"
#include "gputriage/import.h"
#include "gputriage/metrics.h"
#include "gputriage/report.h"
#include "src/analysis/gpu_specs.h"
#include "src/analysis/metric_analysis.h"

namespace gputriage {
namespace {

// ---- sketches -------------------------------------------------------------------

TEST(SeriesSketch, ExactStatisticsAndQuantiles) {
  SeriesSketch s;
  for (int i = 0; i < 101; ++i) s.Add(i * kNsPerS, i);  // 0..100
  EXPECT_EQ(s.count(), 101);
  EXPECT_DOUBLE_EQ(s.mean(), 50.0);
  EXPECT_DOUBLE_EQ(s.Quantile(0.5), 50.0);
  EXPECT_DOUBLE_EQ(s.Quantile(0.05), 5.0);
  EXPECT_DOUBLE_EQ(s.Quantile(0.95), 95.0);
  EXPECT_NEAR(s.ShareAtMost(5.0), 6.0 / 101, 1e-12);
  EXPECT_NEAR(s.ShareAtLeast(95.0), 6.0 / 101, 1e-12);
  EXPECT_EQ(s.MedianInterval(), kNsPerS);
  // Non-integer values: log-linear buckets, within 0.4 %.
  SeriesSketch p;
  for (int i = 0; i < 1000; ++i) p.Add(i, 600.0 + i * 0.05);  // 600 .. 649.95
  EXPECT_NEAR(p.Quantile(0.5), 625.0, 625.0 * 0.004);
}

TEST(SeriesSketch, ExtremeValuesStayDefined) {
  // Values at both ends of the double range land in log buckets far apart.
  SeriesSketch s;
  s.Add(0, -1e308);
  s.Add(1, 1e308);
  s.Add(2, -1e-300);
  s.Add(3, 0.5);
  EXPECT_EQ(s.count(), 4);
  EXPECT_NEAR(s.Quantile(0.0) / -1e308, 1.0, 0.01);
  EXPECT_NEAR(s.Quantile(1.0) / 1e308, 1.0, 0.01);
}

TEST(SeriesSketch, TimelineStaysBoundedAndKeepsTheMean) {
  SeriesSketch s;
  for (int64_t i = 0; i < 200000; ++i) s.Add(i * 100 * kNsPerMs, i < 100000 ? 10.0 : 90.0);
  const auto tl = s.Timeline();
  EXPECT_LE(tl.size(), static_cast<size_t>(SeriesSketch::kTimelineBuckets));
  EXPECT_GE(tl.size(), static_cast<size_t>(SeriesSketch::kTimelineBuckets / 2));
  EXPECT_DOUBLE_EQ(tl.front().mean, 10.0);
  EXPECT_DOUBLE_EQ(tl.back().mean, 90.0);
  int64_t total = 0;
  for (const auto& p : tl) total += p.count;
  EXPECT_EQ(total, 200000);
}

TEST(SeriesSketch, RhythmFindsASawtoothAndNotNoise) {
  SeriesSketch saw;
  saw.EnableRhythm();
  for (int i = 0; i < 5000; ++i) saw.Add(i * kNsPerS, (i % 12) < 4 ? 0.0 : 100.0);  // 12 s period
  const auto r = saw.rhythm();
  EXPECT_EQ(r.period_samples, 12);
  EXPECT_EQ(r.period_ns, 12 * kNsPerS);
  EXPECT_GT(r.strength, 0.8);
  EXPECT_DOUBLE_EQ(r.swing_p50, 100.0);

  SeriesSketch noise;
  noise.EnableRhythm();
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 100);
  for (int i = 0; i < 5000; ++i) noise.Add(i * kNsPerS, std::round(u(rng)));
  EXPECT_LT(noise.rhythm().strength, 0.2);

  SeriesSketch flat;
  flat.EnableRhythm();
  for (int i = 0; i < 5000; ++i) flat.Add(i * kNsPerS, 100.0);
  EXPECT_EQ(flat.rhythm().blocks, 0);
  EXPECT_EQ(flat.rhythm().period_samples, 0);
}

// ---- synthetic logs in real formats ------------------------------------------------

/// nvidia-smi --query-gpu CSV at 1 s for `seconds`, one GPU; `util(t)` per second.
std::string SmiLog(int seconds, const std::function<double(int)>& util, double power = 300, const char* reasons = nullptr,
                   const char* name = "NVIDIA A100-SXM4-80GB") {
  std::string out = "timestamp, index, name, utilization.gpu [%], power.draw [W], power.limit [W], memory.used [MiB], memory.total [MiB]";
  out += reasons ? ", clocks_event_reasons.active\n" : "\n";
  for (int t = 0; t < seconds; ++t) {
    out += fmt::format("2026/03/01 {:02d}:{:02d}:{:02d}.000, 0, {}, {:.0f}, {:.2f}, 400.00, 30000, 81920", 10 + t / 3600,
                       (t / 60) % 60, t % 60, name, util(t), power);
    out += reasons ? fmt::format(", {}\n", reasons) : "\n";
  }
  return out;
}

/// dcgmi dmon rows (profiling ratios) at 1 s for `seconds`.
std::string DcgmiLog(int seconds, double gputl, double smact, double tenso, double drama, double fp32a) {
  std::string out = "#Entity   GPUTL  SMACT  SMOCC  TENSO  DRAMA  FP32A  POWER\nID\n";
  for (int t = 0; t < seconds; ++t)
    out += fmt::format("GPU 0     {:.0f}     {:.3f}  0.150  {:.3f}  {:.3f}  {:.3f}  300.0\n", gputl, smact, tenso, drama, fp32a);
  return out;
}

Diagnosis DiagnoseText(const std::string& text, DiagnoseOptions options = {}) {
  auto recs = ImportMetricLogFromMemory("synthetic.log", text);
  EXPECT_TRUE(recs.ok()) << recs.status().ToString();
  gputriage::Run run;
  if (recs.ok()) run.recordings = std::move(*recs);
  return Diagnose(run, options);
}

const Finding* Find(const Diagnosis& d, const std::string& verdict) {
  for (const auto& f : d.findings)
    if (f.verdict == verdict) return &f;
  return nullptr;
}

std::string Verdicts(const Diagnosis& d) {
  std::string s;
  for (const auto& f : d.findings) s += f.verdict + "(" + SeverityName(f.severity) + ") ";
  return s;
}

TEST(MetricVerdicts, StarvedInputPipelineIsASawtooth) {
  // 8 s batches-of-work rhythm: 5 s at ~97 %, 3 s at 0 % while the loader refills.
  const Diagnosis d = DiagnoseText(SmiLog(1800, [](int t) { return (t % 8) < 5 ? 97.0 : 0.0; }, 180));
  const Finding* f = Find(d, "input_bound");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_EQ(f->origin, "metrics");
  EXPECT_FALSE(f->cannot_exclude.empty());
  EXPECT_NE(f->to_separate.find("step markers"), std::string::npos);
  bool period = false;
  for (const auto& e : f->evidence)
    if (e.name == "rhythm_period_s") period = std::abs(e.value - 8.0) < 1e-9;
  EXPECT_TRUE(period);
  EXPECT_FALSE(Find(d, "idle"));
  EXPECT_FALSE(Find(d, "underutilized"));
  ASSERT_TRUE(f->gain);
  EXPECT_NEAR(f->gain->current, 97.0 * 5 / 8, 0.1);
}

TEST(MetricVerdicts, LongIdleStretchesAreIdlePhasesNotAStepRhythm) {
  // Busy for 90 s at ~97 %, then 40 s at 0 % (evaluation on the CPU, a checkpoint,
  // the wait for the next job), six times: not a per-step stop-and-go.
  const Diagnosis d = DiagnoseText(SmiLog(780, [](int t) { return (t % 130) < 90 ? 97.0 : 0.0; }, 300));
  EXPECT_FALSE(Find(d, "input_bound")) << Verdicts(d);
  EXPECT_FALSE(Find(d, "underutilized")) << Verdicts(d);
  const Finding* f = Find(d, "idle_phases");
  ASSERT_TRUE(f) << Verdicts(d);
  const auto& m = d.recordings[0].metric_devices[0];
  EXPECT_EQ(m.idle_phases.count, 6);
  // Each stretch: from the last busy sample to the last idle one (40 s: each sample
  // stands for the second before it).
  EXPECT_EQ(m.idle_phases.longest_ns, 40 * kNsPerS);
  EXPECT_NEAR(m.idle_phase_share, 6 * 40.0 / 780, 0.01);
  ASSERT_TRUE(f->gain);
  EXPECT_NEAR(f->gain->best, 100.0 * m.idle_phase_share, 1e-9);
  // The same log with 3 s waits in an 8 s rhythm is still input-bound, with no idle phases.
  const Diagnosis saw = DiagnoseText(SmiLog(780, [](int t) { return (t % 8) < 5 ? 97.0 : 0.0; }, 180));
  EXPECT_TRUE(Find(saw, "input_bound")) << Verdicts(saw);
  EXPECT_FALSE(Find(saw, "idle_phases")) << Verdicts(saw);
  EXPECT_EQ(saw.recordings[0].metric_devices[0].idle_phases.count, 0);
}

TEST(MetricVerdicts, SmallBatchKeepsSmActivityLow) {
  const Diagnosis d = DiagnoseText(DcgmiLog(600, 98, 0.30, 0.10, 0.20, 0.05));
  ASSERT_TRUE(Find(d, "undersized_work")) << Verdicts(d);
  EXPECT_FALSE(Find(d, "at_compute_limit"));
}

TEST(MetricVerdicts, Fp32OnATensorCoreGpu) {
  const Diagnosis d = DiagnoseText(DcgmiLog(600, 99, 0.88, 0.0, 0.22, 0.62));
  const Finding* f = Find(d, "low_precision");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_EQ(f->severity, Severity::kHigh);
}

TEST(MetricVerdicts, MemoryBound) {
  const Diagnosis d = DiagnoseText(DcgmiLog(600, 99, 0.85, 0.10, 0.75, 0.10));
  const Finding* f = Find(d, "memory_bound");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_EQ(f->severity, Severity::kHigh);
}

TEST(MetricVerdicts, HealthyDenseTrainingIsAtTheComputeLimit) {
  const Diagnosis d = DiagnoseText(DcgmiLog(600, 100, 0.91, 0.60, 0.41, 0.05));
  ASSERT_TRUE(Find(d, "at_compute_limit")) << Verdicts(d);
  for (const auto& f : d.findings) EXPECT_EQ(f.severity, Severity::kInfo) << f.verdict;
}

TEST(MetricVerdicts, TensorThroughputEstimateAgainstThePeak) {
  // An H100 scrape: tensor pipe 50 % at full clock is an estimated half of the 989 TFLOP/s bf16 peak.
  std::string scrape;
  for (int i = 0; i < 40; ++i) {
    scrape += "# TIME 2026-07-14T08:" + fmt::format("{:02d}:{:02d}", i / 4, (i % 4) * 15) + "Z\n";
    for (const char* line : {"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-h\",modelName=\"NVIDIA H100 80GB HBM3\"} 99",
                             "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-h\"} 0.90",
                             "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\",UUID=\"GPU-h\"} 0.50",
                             "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-h\"} 1980"})
      scrape += std::string(line) + "\n";
  }
  const Diagnosis d = DiagnoseText(scrape);
  const Finding* f = Find(d, "at_compute_limit");
  ASSERT_TRUE(f) << Verdicts(d);
  bool estimated = false;
  for (const auto& e : f->evidence)
    if (e.name == "estimated_tensor_tflops") estimated = std::abs(e.value - 0.5 * 989.4) < 1e-6;
  EXPECT_TRUE(estimated);
  // 40 scrapes 15 s apart: 10 minutes observed.
  EXPECT_NEAR(d.summary.gpu_hours, 600.0 / 3600.0, 1e-9);
}

TEST(MetricVerdicts, HolesInTheLogAreNotObservedTime) {
  // One hour logged, a three-hour hole, another hour: two hours observed, one gap.
  std::string log = "timestamp, index, utilization.gpu [%]\n";
  for (int t = 0; t < 3600; ++t) log += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, 0, 90\n", t / 60, t % 60);
  for (int t = 0; t < 3600; ++t) log += fmt::format("2026/03/01 14:{:02d}:{:02d}.000, 0, 90\n", t / 60, t % 60);
  const Diagnosis d = DiagnoseText(log);
  ASSERT_EQ(d.recordings.at(0).metric_devices.size(), 1u);
  const auto& g = d.recordings[0].metric_devices[0];
  EXPECT_NEAR(g.hours, 2.0, 1e-9);
  EXPECT_EQ(g.sampling_gaps, 1);
  EXPECT_NEAR(g.span_hours, (4 * 3600 + 3599) / 3600.0, 1e-9);
}

TEST(MetricVerdicts, ALogThatChangesItsRateKeepsItsSlowPartAndSameInstantReadingsAreNoSpacing) {
  // Eleven readings a minute apart (busy 3 minutes, then idle), then 200 seconds
  // logged ten times a second within whole-second timestamps (a logger's clock
  // shows seconds): 10 + 200 seconds of log, nothing of it a hole.
  std::string log = "timestamp, index, utilization.gpu [%]\n";
  for (int m = 0; m <= 10; ++m)
    log += fmt::format("2026/03/01 10:{:02d}:00.000, 0, {}\n", m, m >= 1 && m <= 3 ? 95 : 0);
  for (int t = 0; t < 200; ++t)
    for (int k = 0; k < 10; ++k)
      log += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, 0, {}\n", 11 + t / 60, t % 60, t < 18 ? 0 : 96);
  const Diagnosis d = DiagnoseText(log);
  ASSERT_EQ(d.recordings.at(0).metric_devices.size(), 1u);
  const auto& g = d.recordings[0].metric_devices[0];
  EXPECT_EQ(g.median_interval_ns, kNsPerS);  // the zero spacings of one instant are not the rhythm
  EXPECT_EQ(g.sampling_gaps, 0);
  EXPECT_NEAR(g.hours * 3600.0, 600 + 60 + 199 + 1, 61.0);  // the minutes kept: once about 200 s
  // The stretch from the fourth minute into the fast part: an idle phase between the two runs.
  ASSERT_TRUE(Find(d, "idle_phases")) << Verdicts(d);
  EXPECT_GT(g.idle_phases.longest_ns, 7 * 60 * kNsPerS);
}

TEST(MetricVerdicts, ZerosWithTheJobsMemoryReleasedAreNoWaitForData) {
  // The same 8 s sawtooth twice: a job waiting for data keeps its 10 GB; readings at
  // 0 with only the desktop's 600 MiB in use were taken while no job held the GPU.
  auto log = [](bool released) {
    std::string out = "timestamp, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n";
    for (int t = 0; t < 780; ++t) {
      const bool busy = (t % 8) < 5;
      out += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, 0, {}, {}, 11264\n", t / 60, t % 60, busy ? 97 : 0,
                         busy || !released ? 10240 : 600);
    }
    return out;
  };
  const Diagnosis held = DiagnoseText(log(false));
  EXPECT_TRUE(Find(held, "input_bound")) << Verdicts(held);
  EXPECT_NEAR(held.recordings[0].metric_devices[0].near_zero_without_job_share, 0.0, 1e-9);
  const Diagnosis gone = DiagnoseText(log(true));
  EXPECT_FALSE(Find(gone, "input_bound")) << Verdicts(gone);
  EXPECT_NEAR(gone.recordings[0].metric_devices[0].near_zero_without_job_share, 3.0 / 8, 0.01);
}

/// A loop's steps as its markers time them: `n` steps of `step_ms`, `wait_ms` of each waiting for data.
std::vector<MarkedStep> MarkedLoop(int n, double step_ms, double wait_ms) {
  std::vector<MarkedStep> out;
  for (int i = 0; i < n; ++i) {
    MarkedStep s;
    s.number = i;
    s.pid = 77;
    s.span = Interval{i * static_cast<TimeNs>(step_ms * 1e6), (i + 1) * static_cast<TimeNs>(step_ms * 1e6)};
    s.phase_ns[GPUTRIAGE_PHASE_DATA] = static_cast<TimeNs>(wait_ms * 1e6);
    out.push_back(s);
  }
  return out;
}

int Count(const Diagnosis& d, const std::string& verdict) {
  return static_cast<int>(std::count_if(d.findings.begin(), d.findings.end(),
                                        [&](const Finding& f) { return f.verdict == verdict; }));
}

TEST(MetricVerdicts, StepMarkersDecideOverUtilizationsGuess) {
  // Utilization in an 8 s sawtooth looks input-bound; the job's markers timed its
  // data wait at 0.5 % of each step: the markers decide, and a note says so.
  auto recs = ImportMetricLogFromMemory("loop.log", SmiLog(1800, [](int t) { return (t % 8) < 5 ? 97.0 : 0.0; }, 180));
  ASSERT_TRUE(recs.ok());
  gputriage::Run run;
  run.recordings = std::move(*recs);
  EXPECT_EQ(Count(Diagnose(run), "input_bound"), 1);  // the guess stands where nothing measured better
  run.recordings[0].marked_steps = MarkedLoop(40, 100, 0.5);
  const Diagnosis ruled_out = Diagnose(run);
  EXPECT_EQ(Count(ruled_out, "input_bound"), 0) << Verdicts(ruled_out);
  bool noted = false;
  for (const auto& n : ruled_out.notes) noted = noted || n.find("Step markers decided") != std::string::npos;
  EXPECT_TRUE(noted);
  // Markers that measure a real wait: one finding, the markers', with the metrics' evidence beside.
  run.recordings[0].marked_steps = MarkedLoop(40, 100, 40);
  const Diagnosis measured = Diagnose(run);
  ASSERT_EQ(Count(measured, "input_bound"), 1) << Verdicts(measured);
  const Finding* f = Find(measured, "input_bound");
  EXPECT_EQ(f->origin, "markers");
  EXPECT_TRUE(std::any_of(f->evidence.begin(), f->evidence.end(),
                          [](const Evidence& e) { return e.source.rfind("metrics, ", 0) == 0; }));
}

TEST(MetricVerdicts, IdleTimeAMeasuredCauseExplainsIsCountedOnce) {
  // The GPU sits near 0 because each step waits 90 ms of 100 for data: one
  // input_bound finding, not an idle GPU beside it.
  auto recs = ImportMetricLogFromMemory("starved.log", SmiLog(600, [](int t) { return t % 10 == 0 ? 90.0 : 0.0; }, 60));
  ASSERT_TRUE(recs.ok());
  gputriage::Run run;
  run.recordings = std::move(*recs);
  EXPECT_EQ(Count(Diagnose(run), "idle"), 1);
  run.recordings[0].marked_steps = MarkedLoop(40, 100, 90);
  const Diagnosis d = Diagnose(run);
  EXPECT_EQ(Count(d, "idle"), 0) << Verdicts(d);
  const Finding* f = Find(d, "input_bound");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_NE(f->detail.find("is this cause's, counted once here"), std::string::npos) << f->detail;
}

TEST(MetricVerdicts, SamplesMinutesApartNameNoIdleStretch) {
  // An nvidia-smi reading every 5 minutes for 10 hours, busy one reading in three:
  // two readings at 0 say nothing of the minutes between them.
  std::string log = "timestamp, index, utilization.gpu [%]\n";
  for (int i = 0; i < 120; ++i)
    log += fmt::format("2026/03/01 {:02d}:{:02d}:00.000, 0, {}\n", 8 + i * 5 / 60, (i * 5) % 60, i % 3 == 0 ? 90 : 0);
  const Diagnosis d = DiagnoseText(log);
  const auto& g = d.recordings.at(0).metric_devices.at(0);
  EXPECT_EQ(g.idle_phases.count, 0);
  EXPECT_FALSE(Find(d, "idle_phases")) << Verdicts(d);
  EXPECT_TRUE(Find(d, "underutilized")) << Verdicts(d);
}

TEST(MetricVerdicts, PowerNearTheLimitWithoutALoggedClockIsNoComputeLimit) {
  // Utilization 100 % and power at 95 % of its limit, no clock logged: a capped or
  // memory-bound board draws that too. Efficiency unknown, not the compute limit.
  std::string log = "timestamp, index, utilization.gpu [%], power.draw [W], power.limit [W]\n";
  for (int t = 0; t < 600; ++t) log += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, 0, 100, 380.0, 400.0\n", t / 60, t % 60);
  const Diagnosis d = DiagnoseText(log);
  EXPECT_FALSE(Find(d, "at_compute_limit")) << Verdicts(d);
  EXPECT_TRUE(Find(d, "efficiency_unknown")) << Verdicts(d);
  // With the SM clock logged at its maximum, the same power is evidence.
  std::string clocked = "timestamp, index, utilization.gpu [%], power.draw [W], power.limit [W], clocks.sm [MHz], clocks.max.sm [MHz]\n";
  for (int t = 0; t < 600; ++t)
    clocked += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, 0, 100, 380.0, 400.0, 1400, 1410\n", t / 60, t % 60);
  const Diagnosis c = DiagnoseText(clocked);
  EXPECT_TRUE(Find(c, "at_compute_limit")) << Verdicts(c);
}

TEST(MetricVerdicts, BusyButLowTensorActivity) {
  const Diagnosis d = DiagnoseText(DcgmiLog(600, 99, 0.85, 0.15, 0.30, 0.10));
  ASSERT_TRUE(Find(d, "low_tensor_activity")) << Verdicts(d);
  EXPECT_FALSE(Find(d, "at_compute_limit"));
}

TEST(MetricVerdicts, IdleAllocation) {
  const Diagnosis d = DiagnoseText(SmiLog(3600, [](int) { return 0.0; }, 62));
  const Finding* f = Find(d, "idle");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_EQ(f->severity, Severity::kHigh);
  EXPECT_NE(f->detail.find("allocated"), std::string::npos);  // 30 GB held, no kernels
}

TEST(MetricVerdicts, OneProblemOnManyGpusIsOneFinding) {
  std::string log = "timestamp, index, name, utilization.gpu [%]\n";
  for (int t = 0; t < 600; ++t)
    for (int g = 0; g < 4; ++g) log += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, {}, NVIDIA L4, 0\n", t / 60, t % 60, g);
  const Diagnosis d = DiagnoseText(log);
  ASSERT_EQ(d.findings.size(), 1u) << Verdicts(d);
  EXPECT_EQ(d.findings[0].verdict, "idle");
  EXPECT_NE(d.findings[0].scope.find("and 3 more"), std::string::npos);
  EXPECT_NE(d.findings[0].scope.find("4 of 4 GPUs"), std::string::npos);
  EXPECT_NE(d.findings[0].detail.find("GPU 3"), std::string::npos);
  EXPECT_EQ(d.recordings.at(0).metric_devices.size(), 4u);
}

TEST(MetricVerdicts, StopAndGoOnEveryGpuOfAJobIsOneJobVerdict) {
  // An 8-GPU data-parallel job logged at 100 ms: every GPU sits near 0 for 3 of
  // every 14 samples (1.4 s), in lockstep (they wait for each other at every step),
  // and near 95-100 % otherwise, so each GPU's mean is ~80 %: above the 70 % target.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> busy(93, 100), low(0, 3);
  std::string log = "timestamp, index, name, utilization.gpu [%], power.draw [W], power.limit [W]\n";
  for (int t = 0; t < 3000; ++t)
    for (int g = 0; g < 8; ++g) {
      const bool stopped = (t % 14) >= 11;
      log += fmt::format("2026/03/01 10:{:02d}:{:02d}.{:03d}, {}, NVIDIA A100-SXM4-80GB, {}, {}, 400.00\n", t / 600,
                         (t / 10) % 60, (t % 10) * 100, g, stopped ? low(rng) : busy(rng), stopped ? 90 : 330);
    }
  const Diagnosis d = DiagnoseText(log);
  EXPECT_FALSE(Find(d, "at_compute_limit")) << Verdicts(d);
  EXPECT_FALSE(Find(d, "efficiency_unknown")) << Verdicts(d);
  int input = 0;
  for (const auto& f : d.findings) input += f.verdict == "input_bound";
  ASSERT_EQ(input, 1) << Verdicts(d);
  const Finding* f = Find(d, "input_bound");
  EXPECT_NE(f->scope.find("8 of 8 GPUs"), std::string::npos) << f->scope;
  EXPECT_NE(f->detail.find("GPU 7"), std::string::npos);
  bool period = false;
  for (const auto& e : f->evidence)
    if (e.name == "rhythm_period_s") period = std::abs(e.value - 1.4) < 0.05;
  EXPECT_TRUE(period);
  // The gain comes from the log: the level the GPUs hold while fed, not a target.
  ASSERT_TRUE(f->gain);
  EXPECT_GT(f->gain->expected, f->gain->current);
  EXPECT_LE(f->gain->best, 100.0);
  EXPECT_NEAR(d.recordings.at(0).metric_devices.at(0).fed_mean_percent, 96.5, 1.0);
}

TEST(MetricVerdicts, PowerCapThrottling) {
  // The driver reports sw_power_cap in every sample, but no clock is logged: the
  // verdict stands, and since what it costs cannot be measured it promises nothing (low).
  const Diagnosis d = DiagnoseText(SmiLog(600, [](int) { return 99.0; }, 399, "0x0000000000000004"));
  const Finding* f = Find(d, "throttled");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_EQ(f->severity, Severity::kLow);
  EXPECT_NE(f->title.find("sw_power_cap"), std::string::npos);
  EXPECT_NE(f->detail.find("clocks.sm"), std::string::npos) << f->detail;
  // With the clock logged (1100 of 1410 MHz under the cap): high, and the gain is the headroom.
  std::string log = "timestamp, index, name, utilization.gpu [%], power.draw [W], clocks.sm [MHz], clocks.max.sm [MHz], "
                    "clocks_event_reasons.active\n";
  for (int t = 0; t < 600; ++t)
    log += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, 0, NVIDIA A100-SXM4-80GB, 99, 399.00, 1100, 1410, "
                       "0x0000000000000004\n", t / 60, t % 60);
  const Diagnosis clocked = DiagnoseText(log);
  const Finding* g = Find(clocked, "throttled");
  ASSERT_TRUE(g) << Verdicts(clocked);
  EXPECT_EQ(g->severity, Severity::kHigh);
  ASSERT_TRUE(g->gain);
  EXPECT_NEAR(g->gain->current, 1100.0, 1e-9);
  EXPECT_NEAR(g->gain->expected, 1410.0, 1e-9);
  EXPECT_EQ(g->gain->bounded_by, "power_limit");
}

/// Power and clocks without reason columns: `loaded_s` seconds of GEMM bursts
/// between idle stretches, at `power(t)` W and `clock(t)` MHz while loaded; idle
/// at 60 W and 345 MHz (where clocks drop on their own and must not count).
std::string PowerClockLog(int seconds, int loaded_s, const std::function<double(int)>& power,
                          const std::function<double(int)>& clock, const char* limit = nullptr,
                          const char* name = nullptr) {
  std::string out = "timestamp, utilization.gpu [%], power.draw [W], clocks.current.sm [MHz]";
  out += limit ? ", power.limit [W]" : "";
  out += name ? ", name\n" : "\n";
  for (int t = 0; t < seconds; ++t) {
    const bool loaded = (t % 60) < loaded_s;
    out += fmt::format("2026/03/01 {:02d}:{:02d}:{:02d}.000, {}, {:.2f}, {:.0f}", 10 + t / 3600, (t / 60) % 60, t % 60,
                       loaded ? 100 : 0, loaded ? power(t) : 60.0, loaded ? clock(t) : 345.0);
    out += limit ? fmt::format(", {}", limit) : "";
    out += name ? fmt::format(", {}\n", name) : "\n";
  }
  return out;
}

TEST(MetricVerdicts, PowerCapWithoutReasonColumnsFromPowerAndClocks) {
  // An H100 PCIe GEMM burst as logged by -lms with no reasons, no limit, no name:
  // power flat near 348 W while the clock wanders 990-1740 MHz (the highest
  // reading, 1755, is the maximum).
  const Diagnosis d = DiagnoseText(PowerClockLog(
      1200, 45, [](int t) { return 346.0 + (t % 3); }, [](int t) { return t == 5 ? 1755.0 : 990.0 + (t % 7) * 15; }));
  const Finding* f = Find(d, "throttled");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_EQ(f->severity, Severity::kHigh);  // 1755 / ~1035 MHz: +70 % headroom
  EXPECT_NE(f->title.find("power cap"), std::string::npos) << f->title;
  EXPECT_NE(f->detail.find("not logged"), std::string::npos) << f->detail;
  ASSERT_TRUE(f->gain);
  EXPECT_EQ(f->gain->bounded_by, "power_limit");
  EXPECT_NEAR(f->gain->expected, 1755.0, 1e-9);
  EXPECT_GT(f->gain->speedup_percent, 50.0);
  EXPECT_FALSE(Find(d, "at_compute_limit")) << Verdicts(d);
  // The clock under load, not the idle stretches' 345 MHz, is the evidence.
  const auto& dev = d.recordings.at(0).metric_devices.at(0);
  EXPECT_NEAR(dev.loaded_sm_clock_mean_mhz, 1035.0, 25.0);
  EXPECT_NEAR(dev.loaded_share, 0.75, 0.01);
}

TEST(MetricVerdicts, PowerAtTheBoardsLimitAssumedFromItsName) {
  const Diagnosis d = DiagnoseText(PowerClockLog(
      600, 50, [](int) { return 247.0; }, [](int t) { return t == 3 ? 1410.0 : 1275.0; }, nullptr,
      "NVIDIA A100-PCIE-40GB"));
  const Finding* f = Find(d, "throttled");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_EQ(f->severity, Severity::kModerate);  // +10 % headroom
  EXPECT_NE(f->detail.find("assumed"), std::string::npos) << f->detail;
}

TEST(MetricVerdicts, ClocksAtMaximumOrLockedLowAreNotThrottling) {
  // Uncapped: clocks at their maximum under load, power below the limit.
  EXPECT_FALSE(Find(DiagnoseText(PowerClockLog(600, 50, [](int) { return 228.0; }, [](int) { return 1410.0; })),
                    "throttled"));
  // Locked application clocks: low and flat, power steady and nowhere near a limit
  // that is logged.
  EXPECT_FALSE(Find(DiagnoseText(PowerClockLog(
                        600, 50, [](int) { return 180.0; }, [](int t) { return t == 1 ? 1410.0 : 1005.0; }, "250.00")),
                    "throttled"));
}

TEST(MetricVerdicts, AClockFlatWhilePowerMovesIsNoPowerCap) {
  // An H100 PCIe HGEMM on random operands, no limit or name logged: the clock sits
  // at 1470-1480 MHz (84 % of the 1755 the first loaded sample reaches) while power
  // follows the data over 297-306 W. A cap would hold power and move the clock.
  const Diagnosis flat = DiagnoseText(PowerClockLog(
      1200, 50, [](int t) { return 297.0 + (t * 7 % 10); }, [](int t) { return t == 0 ? 1755.0 : 1470.0 + (t % 3) * 5; }));
  EXPECT_FALSE(Find(flat, "throttled")) << Verdicts(flat);
  const auto& dev = flat.recordings.at(0).metric_devices.at(0);
  EXPECT_LT(dev.loaded_sm_clock_cv / dev.loaded_power_cv, 0.6);
  // The same power with the clock moving to hold it: capped.
  const Diagnosis capped = DiagnoseText(PowerClockLog(
      1200, 50, [](int t) { return 348.0 + (t % 2); }, [](int t) { return t == 0 ? 1755.0 : 820.0 + (t * 7 % 10) * 5; }));
  EXPECT_TRUE(Find(capped, "throttled")) << Verdicts(capped);
}

TEST(MetricVerdicts, OneScrapeAtThePowerLimitWithTheClockFarBelowItsBoostIsThrottled) {
  // A Tesla T4 scraped once (Kubernetes AI conformance page): 91 % busy at 68.2 of
  // its 70 W with the SM clock at 660 MHz. The one reading is no maximum: the T4's
  // 1590 MHz boost clock from the spec table is.
  const std::string labels =
      R"({gpu="0",UUID="GPU-6d5c0ac5",device="nvidia0",modelName="Tesla T4",Hostname="n1"})";
  const Diagnosis d = DiagnoseText("DCGM_FI_DEV_SM_CLOCK" + labels + " 660\nDCGM_FI_DEV_POWER_USAGE" + labels +
                                   " 68.244000\nDCGM_FI_DEV_GPU_UTIL" + labels + " 91\n");
  const Finding* f = Find(d, "throttled");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_EQ(f->severity, Severity::kLow);  // a snapshot
  const auto& dev = d.recordings.at(0).metric_devices.at(0);
  EXPECT_NEAR(dev.max_sm_clock_mhz, 1590.0, 1e-9);
  EXPECT_NE(dev.max_sm_clock_source.find("T4"), std::string::npos) << dev.max_sm_clock_source;
}

TEST(MetricVerdicts, AFindingNamesThePodThatHoldsTheGpu) {
  // One scrape of an idle RTX 4000 Ada that dcgm-exporter attributes to a pod.
  const std::string labels =
      R"({gpu="0",UUID="GPU-a8394b51",device="nvidia0",modelName="NVIDIA RTX 4000 Ada Generation",Hostname="lke1",)"
      R"(container="cuda",namespace="default",pod="cuda-75454ffb9f-8ljq7",pod_uid=""})";
  const Diagnosis d = DiagnoseText("DCGM_FI_DEV_GPU_UTIL" + labels + " 0\nDCGM_FI_DEV_POWER_USAGE" + labels + " 40.9\n");
  const Finding* f = Find(d, "idle");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_NE(f->scope.find("pod default/cuda-75454ffb9f-8ljq7 (container cuda)"), std::string::npos) << f->scope;
}

TEST(MetricVerdicts, ALogWithNoUtilizationSaysSoInsteadOfNothing) {
  // Temperature and memory only: no verdict can be drawn, and the report says why
  // (not "no rule crossed its threshold").
  std::string log = "timestamp, index, temperature.gpu, memory.used [MiB]\n";
  for (int t = 0; t < 120; ++t) log += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, 0, 60, 1000\n", t / 60, t % 60);
  const Diagnosis d = DiagnoseText(log);
  const Finding* f = Find(d, "utilization_unavailable");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_NE(f->to_separate.find("--smi-columns"), std::string::npos) << f->to_separate;
}

TEST(MetricVerdicts, UtilizationOnlyLowSaysWhichMetricWouldTell) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(25, 45);  // steady ~35 %, no rhythm, no zeros
  const Diagnosis d = DiagnoseText(SmiLog(1200, [&](int) { return std::round(u(rng)); }));
  const Finding* f = Find(d, "underutilized");
  ASSERT_TRUE(f) << Verdicts(d);
  EXPECT_NE(f->to_separate.find("DCGM_FI_PROF_DRAM_ACTIVE"), std::string::npos);
  EXPECT_NE(f->to_separate.find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), std::string::npos);
  EXPECT_NE(f->to_separate.find("GPM"), std::string::npos);
  EXPECT_GE(f->cannot_exclude.size(), 2u);
}

TEST(MetricVerdicts, WorkloadClassChangesTheTarget) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(30, 50);  // ~40 %
  const std::string log = SmiLog(1200, [&](int) { return std::round(u(rng)); });
  EXPECT_TRUE(Find(DiagnoseText(log), "underutilized"));
  DiagnoseOptions rl;
  rl.workload = WorkloadClass::kRl;
  const Diagnosis d = DiagnoseText(log, rl);
  EXPECT_FALSE(Find(d, "underutilized")) << Verdicts(d);
  EXPECT_EQ(d.summary.workload, "rl");
  EXPECT_EQ(TargetsFor(WorkloadClass::kDenseTransformer).util_good_percent, 70);
  EXPECT_EQ(TargetsFor(WorkloadClass::kDenseTransformer).tensor_active_percent, 50);
  EXPECT_EQ(TargetsFor(WorkloadClass::kDenseTransformer).sm_active_percent, 70);
  EXPECT_EQ(TargetsFor(WorkloadClass::kDenseTransformer).util_investigate_percent, 50);
  EXPECT_LT(TargetsFor(WorkloadClass::kMoe).util_good_percent, 70);
  EXPECT_EQ(ParseWorkloadClass("multimodal"), WorkloadClass::kMultimodal);
  EXPECT_FALSE(ParseWorkloadClass("bogus"));
}

// ---- cost ---------------------------------------------------------------------------

TEST(Cost, FleetIdleCapacityAndWhatIf) {
  EXPECT_DOUBLE_EQ(IdleMonthlyCost(40000, 45), 22000);
  const WhatIf w = MakeWhatIf(40, 75, 40000);
  EXPECT_DOUBLE_EQ(w.more_compute_percent, 87.5);
  EXPECT_NEAR(w.spend_saved_percent, 46.6667, 1e-3);
  const std::string line = WhatIfLine(w);
  EXPECT_NE(line.find("40% → 75%: +87% more compute for the same spend"), std::string::npos) << line;
  EXPECT_EQ(FormatUsd(22000), "$22,000");
  EXPECT_EQ(FormatUsd(3.9), "$3.90");
}

TEST(Cost, MonthlySpendAtMeasuredUtilization) {
  // A fleet log at 45 % average utilization and a 40,000 $/month spend.
  DiagnoseOptions o;
  o.monthly_spend = 40000;
  const Diagnosis d = DiagnoseText(SmiLog(3600, [](int t) { return t % 2 ? 40.0 : 50.0; }), o);
  ASSERT_TRUE(d.summary.idle_cost_usd_per_month);
  EXPECT_NEAR(*d.summary.idle_cost_usd_per_month, 22000, 1e-6);
  EXPECT_NEAR(d.summary.gpu_util_mean_percent, 45, 1e-9);
  const std::string text = RenderTerminal(gputriage::Run{}, d, {});
  EXPECT_NE(text.find("$22,000 of idle capacity"), std::string::npos) << text;
}

TEST(Cost, PricePerGpuHourPerDeviceAndRun) {
  DiagnoseOptions o;
  o.price_per_gpu_hour = 2.0;
  // 2 GPUs for one hour (3600 samples each at 1 s; the last sample covers its own second): 25 % and 75 % busy.
  std::string log = "timestamp, index, utilization.gpu [%]\n";
  for (int t = 0; t < 3600; ++t)
    for (int g = 0; g < 2; ++g)
      log += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, {}, {}\n", t / 60, t % 60, g, g == 0 ? 25 : 75);
  const Diagnosis d = DiagnoseText(log, o);
  EXPECT_EQ(d.summary.devices, 2);
  EXPECT_NEAR(d.summary.gpu_hours, 2.0, 1e-9);
  ASSERT_TRUE(d.summary.idle_cost_usd);
  EXPECT_NEAR(*d.summary.idle_cost_usd, 2.0 * 0.75 + 2.0 * 0.25, 1e-6);
  EXPECT_NEAR(d.cost.cost_usd, 4.0, 1e-6);
  EXPECT_EQ(d.cost.price_basis, "--price-per-gpu-hour");
  EXPECT_NE(d.summary.gpu_busy_source.find("utilization.gpu"), std::string::npos);
}

TEST(MetricVerdicts, ImpossibleValuesAreRejectedNotAveragedIn) {
  // Issue 12, item 8: utilization 250 %, -100 %, 1e308 %; power -100 W, 1e30 W; an
  // exporter value -1e300. Each is counted per field and never reaches a mean.
  std::string log = "timestamp, index, name, utilization.gpu [%], power.draw [W]\n";
  for (int t = 0; t < 600; ++t) {
    const char* util = t == 10 ? "250" : t == 11 ? "-100" : t == 12 ? "1e308" : "80";
    const char* power = t == 20 ? "-100" : t == 21 ? "1e30" : "300";
    log += fmt::format("2026/03/01 10:{:02d}:{:02d}.000, 0, NVIDIA A100-SXM4-80GB, {}, {}\n", t / 60, t % 60, util, power);
  }
  const std::string path = ::testing::TempDir() + "impossible_values.csv";
  { std::ofstream(path) << log; }
  auto run = ImportRun({path});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const auto& rec = run->recordings.at(0);
  const auto& d = rec.metrics.devices.at(0);
  EXPECT_EQ(d.Get(Metric::kGpuUtil).count(), 597);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kGpuUtil).max(), 80);
  EXPECT_DOUBLE_EQ(d.Get(Metric::kPowerW).min(), 300);
  const auto* util = rec.stats.FindIssue("value_out_of_range.gpu_util");
  ASSERT_NE(util, nullptr);
  EXPECT_EQ(util->count, 3);
  EXPECT_NE(util->message.find("first: 250"), std::string::npos) << util->message;
  ASSERT_NE(rec.stats.FindIssue("value_out_of_range.power"), nullptr);
  EXPECT_EQ(rec.stats.FindIssue("value_out_of_range.power")->count, 2);
  // A scrape whose utilization is -1e300: no idle verdict, no negative dollars.
  DiagnoseOptions o;
  o.price_per_gpu_hour = 3.0;
  std::string scrapes;
  for (int t = 0; t < 120; ++t)
    scrapes += fmt::format("DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-1\",modelName=\"NVIDIA H100 80GB HBM3\"}} {} {}\n",
                           t == 5 ? "-1e300" : "90", 1772359200000LL + t * 1000LL);
  const Diagnosis diag = DiagnoseText(scrapes, o);
  EXPECT_FALSE(Find(diag, "idle")) << Verdicts(diag);
  EXPECT_GE(diag.cost.cost_usd, 0.0);
  EXPECT_NEAR(diag.cost.util_mean_percent, 90.0, 1e-9);
}

TEST(Cost, AMigSliceCostsItsShareOfTheBoard) {
  // dcgm-exporter scrapes of an H100's 3g.40gb instance, once a second for an hour,
  // GR engine 50 %: it is 3 of the board's 7 compute slices, so 3/7 of a GPU-hour.
  DiagnoseOptions o;
  o.price_per_gpu_hour = 7.0;
  std::string scrapes;
  for (int t = 0; t < 3600; ++t)
    scrapes += fmt::format(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu=\"0\",UUID=\"GPU-1\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\","
        "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node\"}} 0.5 {}\n",
        1772359200000LL + t * 1000LL);
  const Diagnosis d = DiagnoseText(scrapes, o);
  ASSERT_EQ(d.cost.devices.size(), 1u) << d.cost.devices.size();
  const auto& c = d.cost.devices[0];
  EXPECT_NEAR(c.board_share, 3.0 / 7.0, 1e-12);
  EXPECT_NEAR(c.hours, 3.0 / 7.0, 1e-3);
  EXPECT_NEAR(c.cost_usd, 3.0, 0.01);
  EXPECT_NEAR(c.idle_cost_by_util_usd, 1.5, 0.01);
  EXPECT_NE(c.price_source.find("MIG 3g.40gb"), std::string::npos);
  EXPECT_NEAR(MigBoardShare("1g.10gb", "NVIDIA H100 80GB HBM3"), 1.0 / 7, 1e-12);
  EXPECT_NEAR(MigBoardShare("1c.2g.20gb", "NVIDIA A100-SXM4-40GB"), 2.0 / 7, 1e-12);
  EXPECT_NEAR(MigBoardShare("2g.12gb", "NVIDIA A30"), 2.0 / 4, 1e-12);
  EXPECT_EQ(MigBoardShare("", "NVIDIA A30"), 1.0);
}

TEST(Cost, DefaultPricesAreDatedAndSourced) {
  DiagnoseOptions none;
  const Diagnosis d = DiagnoseText(SmiLog(600, [](int) { return 50.0; }, 300, nullptr, "NVIDIA H100 80GB HBM3"), none);
  ASSERT_EQ(d.cost.devices.size(), 1u);
  EXPECT_GT(d.cost.devices[0].price_per_hour, 0);
  EXPECT_NE(d.cost.devices[0].price_source.find("2026"), std::string::npos);
  // A model without a sourced price asks for one instead of guessing.
  const Diagnosis t4 = DiagnoseText(SmiLog(600, [](int) { return 50.0; }, 60, nullptr, "Tesla T4"), none);
  EXPECT_FALSE(t4.cost.available);
  EXPECT_FALSE(t4.summary.idle_cost_usd);
}

// ---- GPU specs --------------------------------------------------------------------

TEST(GpuSpecs, NamesResolveToTheRightRow) {
  auto model = [](const char* name) { auto s = FindGpuSpec(name); return s ? std::string(s->model) : std::string("-"); };
  EXPECT_EQ(model("NVIDIA H100 80GB HBM3"), "H100 SXM");
  EXPECT_EQ(model("NVIDIA H100 PCIe"), "H100 PCIe");
  EXPECT_EQ(model("NVIDIA H200"), "H200 SXM");
  EXPECT_EQ(model("NVIDIA B200"), "B200");
  EXPECT_EQ(model("NVIDIA A100-SXM4-40GB"), "A100 SXM4 40GB");
  EXPECT_EQ(model("NVIDIA A100-SXM4-80GB"), "A100 SXM4 80GB");
  EXPECT_EQ(model("NVIDIA A100 80GB PCIe"), "A100 PCIe 80GB");
  EXPECT_EQ(model("NVIDIA A10G"), "A10G");
  EXPECT_EQ(model("NVIDIA A10"), "A10");
  EXPECT_EQ(model("NVIDIA L4"), "L4");
  EXPECT_EQ(model("NVIDIA L40S"), "L40S");
  EXPECT_EQ(model("Tesla T4"), "T4");
  EXPECT_EQ(model("Tesla V100-SXM2-32GB"), "V100 SXM2");
  EXPECT_EQ(model("Tesla V100-PCIE-16GB"), "V100 PCIe");
  EXPECT_EQ(model("NVIDIA GeForce RTX 2080 SUPER"), "GeForce RTX 2080 SUPER");
  EXPECT_EQ(model("Some Future GPU"), "-");
  // The exact model, not a prefix of another one's name.
  EXPECT_EQ(model("NVIDIA L40"), "-");
  EXPECT_EQ(model("NVIDIA RTX A1000"), "-");
  EXPECT_EQ(model("NVIDIA RTX A1000 6GB Laptop GPU"), "-");
  EXPECT_EQ(model("NVIDIA A100SXM4"), "A100 SXM4 40GB");
  for (const auto& s : AllGpuSpecs()) {
    EXPECT_GT(std::string(s.source).size(), 10u) << s.model;
    EXPECT_GT(std::string(s.tensor_cores).size(), 3u) << s.model;
    // Dense tensor peaks are at least the non-tensor fp32 peak where both are published.
    if (s.fp32_tflops > 0 && s.bf16_tflops > 0) {
      EXPECT_GE(s.bf16_tflops, s.fp32_tflops) << s.model;
    }
  }
}

}  // namespace
}  // namespace gputriage
