// Memory sampled at step ends: markers onto steps (src/markers/marked_steps.cc),
// the trends and peaks (src/analysis/step_memory.cc) and the memory verdicts
// (src/verdicts/memory_verdicts.cc), on steps built by hand.
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gputriage/diagnosis.h"
#include "gputriage/markers.hpp"
#include "src/markers/marked_steps.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

constexpr TimeNs kMs = 1'000'000;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

Marker M(MarkerKind kind, TimeNs t, int64_t step, uint16_t phase = 0, int64_t a = 0, int64_t b = 0, double c = 0) {
  Marker m;
  m.kind = kind;
  m.t_ns = t;
  m.step = step;
  m.phase = phase;
  m.pid = 10;
  m.tid = 10;
  m.samples = a;
  m.tokens = b;
  m.flops = c;
  return m;
}

TEST(StepMemoryMarkers, SamplesJoinTheirStepHostAndGpuApart) {
  using K = MarkerKind;
  std::vector<Marker> markers = {
      M(K::kStepBegin, 0, 0), M(K::kStepEnd, 10 * kMs, 0, 0, 32),
      // After the step ended: the host (phase 0), then GPU 1 (phase 2) with its events.
      M(K::kStepMemory, 10 * kMs + 1, 0, 0, 900 * kMiB, 950 * kMiB, 0),
      M(K::kStepMemory, 10 * kMs + 2, 0, 2, 5 * kGiB, 7 * kGiB, 8.0 * kGiB),
      M(K::kStepMemoryEvents, 10 * kMs + 3, 0, 2, 3, 1),
      // A smaller GPU 0 of the same process does not replace GPU 1; its events are not kept.
      M(K::kStepMemory, 10 * kMs + 4, 0, 1, 1 * kGiB, 1 * kGiB, 2.0 * kGiB),
      M(K::kStepMemoryEvents, 10 * kMs + 5, 0, 1, 9, 9),
      // A sample for a step that never was.
      M(K::kStepMemory, 10 * kMs + 6, 7, 0, kMiB, kMiB, 0),
  };
  const MarkedSteps steps = BuildMarkedSteps(markers);
  ASSERT_EQ(steps.steps.size(), 1u);
  const MarkedStep& s = steps.steps[0];
  EXPECT_EQ(s.host_rss_bytes, 900 * kMiB);
  EXPECT_EQ(s.host_rss_peak_bytes, 950 * kMiB);
  EXPECT_EQ(s.memory_device, 1);
  EXPECT_EQ(s.device_allocated_bytes, 5 * kGiB);
  EXPECT_EQ(s.device_peak_bytes, 7 * kGiB);
  EXPECT_EQ(s.device_reserved_bytes, 8 * kGiB);
  EXPECT_EQ(s.alloc_retries, 3);
  EXPECT_EQ(s.alloc_ooms, 1);
  EXPECT_EQ(steps.unmatched_memory, 1);
}

TEST(StepMemoryMarkers, TheCAbiWritesTheDeviceWhereTheReaderTakesIt) {
  // Device -1 (the host) and 1023 are in range; 1024 is refused by the writer.
  auto ring = MarkerRing::Create(64);
  ASSERT_TRUE(ring.ok());
  ASSERT_EQ(setenv(kMarkersFdEnv, std::to_string((*ring)->fd()).c_str(), 1), 0);
  ResetMarkersForTesting();
  gputriage_step_memory(4, GPUTRIAGE_HOST_MEMORY, 100, 200, 0);
  gputriage_step_memory(4, GPUTRIAGE_MAX_MEMORY_DEVICE, 300, 400, 500);
  gputriage_step_memory(4, GPUTRIAGE_MAX_MEMORY_DEVICE + 1, 1, 1, 1);
  gputriage_step_memory_events(4, 0, 6, 7);
  std::vector<Marker> out;
  (*ring)->Drain(out, true);
  unsetenv(kMarkersFdEnv);
  ResetMarkersForTesting();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ((*ring)->stats().corrupt, 0);
  EXPECT_EQ(out[0].kind, MarkerKind::kStepMemory);
  EXPECT_EQ(out[0].phase, 0);
  EXPECT_EQ(out[1].phase, 1024);
  EXPECT_EQ(out[1].flops, 500.0);
  EXPECT_EQ(out[2].kind, MarkerKind::kStepMemoryEvents);
  EXPECT_EQ(out[2].samples, 6);
  EXPECT_EQ(out[2].tokens, 7);
}

/// `n` steps of 100 ms, each sampled: the host's resident set `host(i)` and,
/// where `gpu` is given, GPU 0's allocated `gpu(i)`.
template <typename Host, typename Gpu>
std::vector<MarkedStep> Sampled(int n, Host host, Gpu gpu, bool with_gpu = true, int64_t samples = 16) {
  std::vector<MarkedStep> out;
  for (int i = 0; i < n; ++i) {
    MarkedStep s;
    s.number = i;
    s.pid = 77;
    s.span = Interval{i * 100 * kMs, (i + 1) * 100 * kMs};
    s.samples = samples;
    s.host_rss_bytes = host(i);
    s.host_rss_peak_bytes = host(i) + 10 * kMiB;
    if (with_gpu) {
      s.memory_device = 0;
      s.device_allocated_bytes = gpu(i);
      s.device_peak_bytes = gpu(i) + 2 * kGiB;
      s.device_reserved_bytes = gpu(i) + 3 * kGiB;
    }
    out.push_back(s);
  }
  return out;
}

const Finding* Find(const std::vector<Finding>& findings, const std::string& verdict, const std::string& scope_part = "") {
  for (const auto& f : findings)
    if (f.verdict == verdict && f.title.find(scope_part) != std::string::npos) return &f;
  return nullptr;
}

const Evidence* Ev(const Finding& f, const std::string& name) {
  for (const auto& e : f.evidence)
    if (e.name == name) return &e;
  return nullptr;
}

Diagnosis DiagnoseSampled(std::vector<MarkedStep> steps, std::map<std::string, std::string> settings = {}) {
  Run run;
  Recording rec;
  rec.source_path = "record: train.py";
  rec.format = "step-markers";
  rec.metadata = std::move(settings);
  rec.marked_steps = std::move(steps);
  run.recordings.push_back(std::move(rec));
  return Diagnose(run);
}

TEST(StepMemory, ASteadyLeakIsMeasuredPerStepAndPerHour) {
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 2.0 * kMiB);
  // The GPU: 20 GiB + 12 MiB per step with noise; the host steady around 3 GiB.
  const auto gpu = [&](int i) { return 20 * kGiB + i * 12 * kMiB + static_cast<int64_t>(noise(rng)); };
  const auto host = [&](int i) { return 3 * kGiB + static_cast<int64_t>(noise(rng)); };
  const auto steps = Sampled(400, host, gpu);
  const StepMemoryAnalysis m = AnalyzeStepMemory(steps, {{"memory.cuda0.total_bytes", std::to_string(80 * kGiB)}});
  ASSERT_TRUE(m.sampled);
  ASSERT_EQ(m.processes.size(), 1u);
  const ProcessMemory& p = m.processes[0];
  EXPECT_EQ(p.device, 0);
  EXPECT_EQ(m.device_total_bytes, 80 * kGiB);
  EXPECT_TRUE(p.gpu.creeping) << p.gpu.why_not;
  EXPECT_NEAR(p.gpu.bytes_per_step / kMiB, 12.0, 0.2);
  EXPECT_NEAR(p.gpu.bytes_per_hour / kMiB, 12.0 * 36000, 0.02 * 12 * 36000);  // 10 steps a second
  EXPECT_EQ(p.gpu.first_step, 40);  // the first tenth left out
  EXPECT_FALSE(p.host.creeping);
  const Diagnosis d = DiagnoseSampled(steps, {{"memory.cuda0.total_bytes", std::to_string(80 * kGiB)}});
  const Finding* f = Find(d.findings, "memory_creep", "GPU 0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Find(d.findings, "memory_creep", "host"), nullptr);
  // 80 GiB − ~24.5 GiB at 12 MiB × 36,000 steps an hour: about 0.13 h.
  ASSERT_NE(Ev(*f, "hours_to_capacity"), nullptr);
  EXPECT_NEAR(Ev(*f, "hours_to_capacity")->value, (80.0 - 24.5) * 1024 / (12.0 * 36000), 0.02);
  EXPECT_EQ(f->severity, Severity::kHigh);
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_EQ(f->gain->metric, "memory_growth_per_step");
  EXPECT_NEAR(f->gain->current, 12.0, 0.2);
  EXPECT_EQ(f->gain->expected, 0);
}

TEST(StepMemory, NoiseAJumpOrSettlingIsNoCreep) {
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0, 30.0 * kMiB);
  const auto flat = [&](int) { return 10 * kGiB + static_cast<int64_t>(noise(rng)); };
  // One jump in the middle (a cache filled once, a larger batch once).
  const auto jump = [&](int i) { return 10 * kGiB + (i >= 200 ? 2 * kGiB : 0); };
  // Growth that stops: the allocator and the optimizer settling in the first half.
  const auto settling = [&](int i) { return 10 * kGiB + std::min(i, 150) * 8 * kMiB; };
  for (const auto& [name, series] : std::vector<std::pair<std::string, std::function<int64_t(int)>>>{
           {"flat", flat}, {"jump", jump}, {"settling", settling}}) {
    const auto steps = Sampled(400, series, series);
    const StepMemoryAnalysis m = AnalyzeStepMemory(steps, {});
    ASSERT_EQ(m.processes.size(), 1u);
    EXPECT_FALSE(m.processes[0].gpu.creeping) << name;
    EXPECT_FALSE(m.processes[0].gpu.why_not.empty()) << name;
    EXPECT_EQ(Find(DiagnoseSampled(steps).findings, "memory_creep"), nullptr) << name;
  }
}

TEST(StepMemory, TooFewSampledStepsSayWhy) {
  const auto steps = Sampled(10, [](int i) { return kGiB + i * 100 * kMiB; }, [](int) { return 0; }, false);
  const StepMemoryAnalysis m = AnalyzeStepMemory(steps, {});
  ASSERT_EQ(m.processes.size(), 1u);
  EXPECT_FALSE(m.processes[0].host.creeping);
  EXPECT_NE(m.processes[0].host.why_not.find("10 sampled steps"), std::string::npos) << m.processes[0].host.why_not;
}

TEST(StepMemory, AHostLeakNamesTheHostAndItsLimit) {
  const auto steps = Sampled(200, [](int i) { return 500 * kMiB + i * 2 * kMiB; }, [](int) { return 0; }, false);
  const Diagnosis d = DiagnoseSampled(
      steps, {{"memory.host_total_bytes", std::to_string(24 * kGiB)}, {"memory.host_limit_source", "MemTotal"}});
  const Finding* f = Find(d.findings, "memory_creep", "host");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(Ev(*f, "growth_per_step")->value, 2.0, 1e-6);
  EXPECT_EQ(Ev(*f, "hours_to_capacity")->source, "MemTotal");
}

TEST(StepMemory, HeadroomIsALowerBoundFromTheStaticMemory) {
  // Peak 30 GiB of 80 with a batch of 16; parameters, gradients and optimizer
  // state 10 GiB on cuda:0: 20 GiB grows at most with the batch, so
  // 16 × (72 − 10) / 20 = 49.6 → 49 fits at least.
  const auto steps = Sampled(50, [](int) { return 4 * kGiB; }, [](int) { return 28 * kGiB; });
  const Diagnosis d = DiagnoseSampled(steps, {{"memory.cuda0.total_bytes", std::to_string(80 * kGiB)},
                                              {"memory.parameters_bytes", std::to_string(2 * kGiB)},
                                              {"memory.gradients_bytes", std::to_string(2 * kGiB)},
                                              {"memory.optimizer_state_bytes", std::to_string(6 * kGiB)},
                                              {"memory.static_device", "cuda:0"}});
  const Finding* f = Find(d.findings, "memory_headroom");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kLow);
  ASSERT_NE(Ev(*f, "largest_batch_lower_bound"), nullptr);
  EXPECT_EQ(Ev(*f, "largest_batch_lower_bound")->value, 49);
  EXPECT_NE(f->title.find("batch 16 → at least 49 fits"), std::string::npos) << f->title;
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_EQ(f->gain->worst, 49);
}

// Issue 53: a host OOM names the limit it met and sizes the batch that fits
// from the run's own figures: 3 GiB held between steps at a batch of 16, a
// resident peak of 7 GiB 900 MiB under an 8 GiB cgroup when 256 MiB more was
// asked: the step needs 5,252 MiB; 8,192 × 0.9 − 3,072 = 4,301 MiB is left;
// 16 × 4,301 / 5,252 → 13.
TEST(StepMemory, AHostOomNamesItsLimitAndTheBatchThatFits) {
  const auto steps = Sampled(20, [](int) { return 3 * kGiB; }, [](int) { return 0; }, /*with_gpu=*/false);
  std::map<std::string, std::string> settings = {
      {"oom.device", "cpu"}, {"oom.requested_bytes", std::to_string(256 * kMiB)}, {"oom.step", "19"},
      {"oom.host_rss_bytes", std::to_string(3 * kGiB)}, {"oom.host_rss_peak_bytes", std::to_string(7 * kGiB + 900 * kMiB)},
      {"oom.host_vm_peak_bytes", std::to_string(40 * kGiB)}, {"oom.host_limit_bytes", std::to_string(8 * kGiB)},
      {"oom.host_limit_source", "cgroup memory.max (/job)"}, {"exit_code", "1"}};
  const Diagnosis d = DiagnoseSampled(steps, settings);
  const Finding* f = Find(d.findings, "out_of_memory");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("the container's memory limit"), std::string::npos) << f->title;
  ASSERT_NE(Ev(*f, "largest_batch_that_fits"), nullptr);
  EXPECT_EQ(Ev(*f, "largest_batch_that_fits")->value, 13);
  std::string actions;
  for (const auto& r : f->recommendations) actions += r.action + "\n";
  EXPECT_NE(actions.find("a batch of 13 (the run had 16)"), std::string::npos) << actions;
  EXPECT_NE(actions.find("raise the container's memory limit"), std::string::npos) << actions;
  EXPECT_EQ(actions.find("--memory-history"), std::string::npos) << actions;
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_NEAR(f->gain->current, 132, 1e-6);  // MiB: 8,068 + 256 − 8,192
  EXPECT_EQ(f->gain->expected, 0);
  // No limit near (a 64 GiB machine, under 8 GiB resident): said so, nothing claimed of a limit.
  settings["oom.host_limit_bytes"] = std::to_string(64 * kGiB);
  settings["oom.host_limit_source"] = "MemTotal";
  const Diagnosis far = DiagnoseSampled(steps, settings);
  const Finding* g = Find(far.findings, "out_of_memory");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->detail.find("no limit it was near is known"), std::string::npos) << g->detail;
  EXPECT_EQ(Ev(*g, "largest_batch_that_fits"), nullptr);
}

TEST(StepMemory, APeakNearCapacityHasNoHeadroom) {
  const auto steps = Sampled(50, [](int) { return 4 * kGiB; }, [](int) { return 70 * kGiB; });
  const Diagnosis d = DiagnoseSampled(steps, {{"memory.cuda0.total_bytes", std::to_string(80 * kGiB)}});
  const Finding* f = Find(d.findings, "memory_headroom");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kModerate);
  EXPECT_NE(f->title.find("No memory headroom"), std::string::npos) << f->title;
  EXPECT_NE(f->recommendations[0].action.find("gradient accumulation"), std::string::npos);
}

TEST(StepMemory, ReservedFarAboveThePeakIsFragmentation) {
  // Allocated peak 30 GiB, reserved 36 GiB: 6 GiB (17 %) is under the 25 % share;
  // reserved 44 GiB: 14 GiB (32 %) is the cache's loss.
  const auto with_reserved = [](int64_t reserved) {
    auto steps = Sampled(40, [](int) { return 4 * kGiB; }, [](int) { return 20 * kGiB; });
    for (auto& s : steps) s.device_peak_bytes = 30 * kGiB, s.device_reserved_bytes = reserved;
    return steps;
  };
  EXPECT_EQ(Find(DiagnoseSampled(with_reserved(36 * kGiB)).findings, "memory_fragmentation"), nullptr);
  const Diagnosis d = DiagnoseSampled(with_reserved(44 * kGiB));
  const Finding* f = Find(d.findings, "memory_fragmentation");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kLow);
  EXPECT_NEAR(Ev(*f, "reserved_above_peak")->value, 14 * 1024, 1e-6);
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_EQ(f->gain->metric, "reserved_above_peak");
  EXPECT_NEAR(f->gain->current, 14 * 1024, 1e-6);
}

TEST(StepMemory, UndersizedWorkSaysHowFarTheBatchCanGrow) {
  Finding undersized;
  undersized.verdict = "undersized_work";
  undersized.recommendations = {{"increase the per-GPU batch size", "larger kernels occupy more SMs"}};
  undersized.gain = ExpectedGain{};
  undersized.gain->bounded_by = "memory_capacity";
  undersized.gain->basis = "twice the batch";
  Finding headroom;
  headroom.verdict = "memory_headroom";
  headroom.severity = Severity::kLow;
  headroom.title = "Memory headroom on the GPU 0: batch 16 → at least 49 fits";
  headroom.gain = ExpectedGain{};
  headroom.gain->metric = "batch_size";
  headroom.gain->current = 16;
  headroom.gain->expected = headroom.gain->worst = 49;
  headroom.gain->best = 70;
  std::vector<Finding> findings = {undersized, headroom};
  BoundBatchByMemory(findings);
  ASSERT_EQ(findings[0].recommendations.size(), 2u);
  EXPECT_NE(findings[0].recommendations[0].action.find("batch 16 → up to 49 fits (range 49-70"), std::string::npos)
      << findings[0].recommendations[0].action;
  EXPECT_NE(findings[0].gain->basis.find("memory_headroom: up to batch 49 fits"), std::string::npos);
  // Judged again (an experiment's fit replaced the figure): the line is replaced, not repeated.
  findings[1].gain->expected = 83;
  BoundBatchByMemory(findings);
  ASSERT_EQ(findings[0].recommendations.size(), 2u);
  EXPECT_NE(findings[0].recommendations[0].action.find("up to 83 fits"), std::string::npos);
  EXPECT_EQ(findings[0].gain->basis.find("up to batch 49"), std::string::npos) << findings[0].gain->basis;
  // No headroom: gradient accumulation, not a larger batch.
  findings[1].severity = Severity::kModerate;
  BoundBatchByMemory(findings);
  EXPECT_NE(findings[0].recommendations[0].action.find("gradient accumulation"), std::string::npos);
}

TEST(StepMemory, WithoutCapacityOrSamplesNothingIsClaimed) {
  // No capacity known: no headroom claim. No memory sampled: no section.
  const auto steps = Sampled(50, [](int) { return 4 * kGiB; }, [](int) { return 20 * kGiB; });
  EXPECT_EQ(Find(DiagnoseSampled(steps).findings, "memory_headroom"), nullptr);
  std::vector<MarkedStep> bare(20);
  for (int i = 0; i < 20; ++i) bare[i].number = i, bare[i].span = Interval{i * kMs, (i + 1) * kMs};
  EXPECT_FALSE(AnalyzeStepMemory(bare, {}).sampled);
}

}  // namespace
}  // namespace gputriage
