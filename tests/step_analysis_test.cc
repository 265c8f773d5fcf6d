// Step-marker measurements (src/analysis/step_markers.cc) and the verdicts drawn
// from them (src/verdicts/step_verdicts.cc), on steps built by hand.
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gputriage/diagnosis.h"
#include "gputriage/markers.hpp"
#include "gputriage/report.h"
#include "src/verdicts/compare.h"

namespace gputriage {
namespace {

constexpr TimeNs kMs = 1'000'000;

/// `n` steps of process `pid`, back to back from `start_ms`: each `wait_ms` of
/// data then `compute_ms` of compute, with `samples` each.
std::vector<MarkedStep> Steps(uint32_t pid, int n, double wait_ms, double compute_ms, int64_t samples = 32,
                              TimeNs start_ms = 0, double flops = 0) {
  std::vector<MarkedStep> out;
  TimeNs t = start_ms * kMs;
  for (int i = 0; i < n; ++i) {
    MarkedStep s;
    s.number = i;
    s.pid = pid;
    const auto wait = static_cast<TimeNs>(wait_ms * kMs), compute = static_cast<TimeNs>(compute_ms * kMs);
    s.span = Interval{t, t + wait + compute};
    s.phase_ns[GPUTRIAGE_PHASE_DATA] = wait;
    s.samples = samples;
    s.flops = flops;
    out.push_back(s);
    t += wait + compute;
  }
  return out;
}

const Finding* FindVerdict(const std::vector<Finding>& findings, const std::string& verdict) {
  for (const auto& f : findings)
    if (f.verdict == verdict) return &f;
  return nullptr;
}

Diagnosis DiagnoseSteps(std::vector<MarkedStep> steps, const std::string& gpu_name = "",
                        std::map<std::string, std::string> metadata = {}) {
  Run run;
  Recording rec;
  rec.metadata = std::move(metadata);
  rec.source_path = "record: train.py";
  rec.format = "step-markers";
  if (!gpu_name.empty()) {
    auto pos = rec.metrics.FindOrAdd(0, "GPU-0", "00000000:01:00.0", -1);
    EXPECT_TRUE(pos.has_value());
    rec.metrics.devices[*pos].name = gpu_name;
  }
  rec.marked_steps = std::move(steps);
  run.recordings.push_back(std::move(rec));
  return Diagnose(run);
}

TEST(StepAnalysis, DataWaitAgainstComputeAndThroughput) {
  const auto m = AnalyzeMarkedSteps(Steps(1, 20, 5, 10));
  EXPECT_EQ(m.steps, 20);
  EXPECT_EQ(m.warmup_steps, 0);
  EXPECT_NEAR(m.data_wait_ms_mean, 5, 1e-9);
  EXPECT_NEAR(m.compute_ms_mean, 10, 1e-9);
  EXPECT_NEAR(m.data_wait_percent_of_compute, 50, 1e-9);
  EXPECT_NEAR(m.samples_per_s, 32 / 0.015, 1e-6);
  EXPECT_TRUE(std::isnan(m.tokens_per_s));
}

TEST(StepAnalysis, DeviceTimeSaysHowMuchOfTheWaitLeftTheGpuIdle) {
  // The host waits 10 ms and launches for 2 ms. A GPU busy 12 ms per step was
  // never idle: the wait was spent on queued work. One busy 3 ms idles 9 ms.
  for (const auto& [device_ms, exposed_ms, input_bound] :
       {std::tuple{12.0, 0.0, false}, std::tuple{3.0, 9.0, true}}) {
    auto steps = Steps(1, 20, 10, 2);
    for (auto& s : steps) s.device_ns = static_cast<TimeNs>(device_ms * kMs);
    const auto m = AnalyzeMarkedSteps(steps);
    EXPECT_EQ(m.device_steps, 20);
    EXPECT_NEAR(m.device_ms_mean, device_ms, 1e-9);
    EXPECT_NEAR(m.data_wait_host_ms_mean, 10, 1e-9);
    EXPECT_NEAR(m.data_wait_ms_mean, exposed_ms, 1e-9);
    EXPECT_NEAR(m.gpu_idle_ms_mean, 12 - device_ms, 1e-9);
    const Diagnosis d = DiagnoseSteps(steps);
    EXPECT_EQ(FindVerdict(d.findings, "input_bound") != nullptr, input_bound) << device_ms;
  }
}

TEST(StepAnalysis, LeadingWarmUpStepsAreLeftOut) {
  auto steps = Steps(1, 1, 200, 10);               // worker start-up: 21x the median
  auto rest = Steps(1, 19, 0.1, 10, 32, 1000);
  steps.insert(steps.end(), rest.begin(), rest.end());
  const auto m = AnalyzeMarkedSteps(steps);
  EXPECT_EQ(m.warmup_steps, 1);
  EXPECT_EQ(m.steps, 19);
  EXPECT_NEAR(m.data_wait_percent_of_compute, 1, 1e-9);
  EXPECT_EQ(FindVerdict(DiagnoseSteps(steps).findings, "input_bound"), nullptr);
}

TEST(StepAnalysis, TheSummaryReflectsStepMarkers) {
  // Judged from step markers alone: the summary's step figures are the steps' (issue 12,
  // item 17: it said 0 steps of 0 ms).
  const Diagnosis d = DiagnoseSteps(Steps(1, 20, 8, 4));
  EXPECT_EQ(d.summary.steps, 20);
  EXPECT_NEAR(d.summary.avg_step_ms, 12.0, 1e-9);
  EXPECT_NEAR(d.summary.data_wait_percent, 100.0 * 8 / 12, 1e-9);
}

TEST(StepAnalysis, InputBoundFromStepsAloneWithItsShare) {
  const Diagnosis d = DiagnoseSteps(Steps(1, 20, 8, 4));
  const Finding* f = FindVerdict(d.findings, "input_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->origin, "markers");
  EXPECT_EQ(f->severity, Severity::kHigh);  // 200 % >= 50 %
  EXPECT_NEAR(f->evidence[0].value, 200, 1e-9);
  ASSERT_TRUE(f->gain.has_value());
  // 4 ms of the loop's own work, 15 % slower beside loader workers (0-35 %).
  EXPECT_NEAR(f->gain->best, 4, 1e-9);
  EXPECT_NEAR(f->gain->expected, 4.6, 1e-9);
  EXPECT_NEAR(f->gain->worst, 5.4, 1e-9);
  // No GPU measured at all: what holds the step next is the host's work, not launches.
  EXPECT_EQ(f->gain->bounded_by, "host_work");
  // 15 % is below the line: no finding.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(Steps(1, 20, 1.5, 10)).findings, "input_bound"), nullptr);
}

// Issue 24: the workers advice starts from what the run had.
TEST(StepAnalysis, InputBoundAdviceStartsFromTheWorkersTheRunHad) {
  auto advice = [](std::map<std::string, std::string> metadata) {
    const Diagnosis d = DiagnoseSteps(Steps(1, 20, 8, 4), "", std::move(metadata));
    const Finding* f = FindVerdict(d.findings, "input_bound");
    return f ? f->recommendations.front().action : std::string("no finding");
  };
  // 4 workers on 2 CPUs: more workers cannot help.
  const std::string saturated = advice({{"dataloader.num_workers", "4"}, {"host.cpus", "2"}});
  EXPECT_NE(saturated.find("already had num_workers=4 on 2 CPUs"), std::string::npos) << saturated;
  EXPECT_EQ(saturated.find("4-8"), std::string::npos) << saturated;
  // 0 workers on 16 CPUs for 2 GPUs: up to 8.
  const std::string room = advice({{"dataloader.num_workers", "0"}, {"host.cpus", "16"}, {"gpu.count", "2"}});
  EXPECT_NE(room.find("num_workers=8) (the run had 0; 16 CPUs for 2 GPUs"), std::string::npos) << room;
  // Nothing recorded: the general rule, bounded by the cores.
  EXPECT_NE(advice({}).find("never past the cores"), std::string::npos);
}

// Issue 24: `compare A B --fail-on regression` failed on a throughput gain when
// the batch doubled (step time +102 %). Step time is not judged across batches;
// throughput is.
TEST(StepAnalysis, CompareJudgesADoubledBatchByThroughput) {
  auto run_of = [](int64_t samples, double compute_ms) {
    gputriage::Run run;
    Recording rec;
    rec.source_path = "record: train.py";
    rec.format = "step-markers";
    rec.marked_steps = Steps(1, 40, 1, compute_ms, samples);
    run.recordings.push_back(std::move(rec));
    return run;
  };
  const gputriage::Run a = run_of(16, 39.8), b = run_of(32, 79.0), c = run_of(32, 120.0);  // 16/40.8 ms, 32/80 ms, 32/121 ms
  const Diagnosis da = Diagnose(a), db = Diagnose(b), dc = Diagnose(c);
  const Comparison same_rate = CompareRuns("A", a, da, "B", b, db);
  EXPECT_TRUE(same_rate.regressions().empty());
  bool step_shown = false;
  for (const auto& m : same_rate.metrics)
    if (m.metric == "step_time_ms") {
      step_shown = true;
      EXPECT_FALSE(m.worse);
      EXPECT_NE(m.noise_floor.find("not judged: samples per step 16 → 32"), std::string::npos) << m.noise_floor;
    }
  EXPECT_TRUE(step_shown);
  // Slower per sample at the larger batch: a regression, on throughput.
  const auto slower = CompareRuns("A", a, da, "C", c, dc).regressions();
  ASSERT_EQ(slower.size(), 1u);
  EXPECT_EQ(slower[0].metric, "samples_per_s");
}

TEST(StepAnalysis, OutliersAndThePhaseThatGrowsInThem) {
  auto steps = Steps(1, 40, 1, 10);
  for (size_t i = 9; i < steps.size(); i += 10) {  // every 10th step saves a 50 ms checkpoint
    steps[i].phase_ns[GPUTRIAGE_PHASE_CHECKPOINT] = 50 * kMs;
    steps[i].span.end += 50 * kMs;
    for (size_t j = i + 1; j < steps.size(); ++j) {
      steps[j].span.start += 50 * kMs;
      steps[j].span.end += 50 * kMs;
    }
  }
  const auto m = AnalyzeMarkedSteps(steps);
  EXPECT_EQ(m.outlier_steps, 4);
  EXPECT_EQ(m.outlier_phase, "checkpoint");
  EXPECT_NEAR(m.outlier_phase_ms, 50, 1e-9);
  EXPECT_NEAR(m.outlier_time_percent, 100.0 * 4 * 50 / (40 * 11 + 4 * 50), 1e-6);
  const Diagnosis d = DiagnoseSteps(steps);
  const Finding* f = FindVerdict(d.findings, "unstable_step_time");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kHigh);  // 31 % of step time
  EXPECT_NE(f->detail.find("'checkpoint' phase"), std::string::npos) << f->detail;
  EXPECT_NE(f->recommendations[0].action.find("async_save"), std::string::npos);
  // Steady steps: no finding.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(Steps(1, 40, 1, 10)).findings, "unstable_step_time"), nullptr);
}

/// A synchronous data-parallel job as its ranks live it: each step every rank
/// waits `data[r]` for its batch, does `host[r]` of host work, runs forward
/// (5 ms) and backward (10 ms of its own), and leaves backward's all-reduce when
/// the last rank has finished its gradients; then the optimizer (2 ms) and
/// `tail[r]` of host work after it. `synchronous` false: processes that never
/// wait for each other (no collective), each leaving backward on its own.
struct RankJob {
  std::vector<double> data, host, tail;
  bool synchronous = true;
};

std::vector<MarkedStep> SimulateRanks(const RankJob& job, int steps) {
  const size_t ranks = job.data.size();
  const auto ns = [](double ms) { return static_cast<TimeNs>(ms * kMs); };
  std::vector<TimeNs> start(ranks, 0);
  std::vector<MarkedStep> out;
  for (int k = 0; k < steps; ++k) {
    std::vector<TimeNs> arrival(ranks), grads_done(ranks);
    TimeNs last_done = 0;
    for (size_t r = 0; r < ranks; ++r) {
      arrival[r] = start[r] + ns(job.data[r] + job.host[r]);
      grads_done[r] = arrival[r] + ns(5 + 10);
      last_done = std::max(last_done, grads_done[r]);
    }
    for (size_t r = 0; r < ranks; ++r) {
      MarkedStep s;
      s.number = k;
      s.pid = static_cast<uint32_t>(100 + r);
      const TimeNs release = job.synchronous ? last_done + ns(0.2) : grads_done[r] + ns(0.2);
      const TimeNs end = release + ns(2 + job.tail[r]);
      s.span = Interval{start[r], end};
      s.phase_ns[GPUTRIAGE_PHASE_DATA] = ns(job.data[r]);
      s.phase_ns[GPUTRIAGE_PHASE_FORWARD] = ns(5);
      s.phase_ns[GPUTRIAGE_PHASE_BACKWARD] = release - (arrival[r] + ns(5));
      s.phase_ns[GPUTRIAGE_PHASE_OPTIMIZER] = ns(2);
      s.sync_arrival = arrival[r];
      s.sync_release = release;
      s.samples = 32;
      out.push_back(s);
      start[r] = end;
    }
  }
  return out;
}

Diagnosis DiagnoseRanks(std::vector<MarkedStep> steps, size_t ranks) {
  Run run;
  Recording rec;
  rec.source_path = "record: ddp.py";
  rec.format = "step-markers";
  rec.marked_steps = std::move(steps);
  for (size_t r = 0; r < ranks; ++r)
    rec.process_ranks.push_back({static_cast<uint32_t>(100 + r), static_cast<int>(r), static_cast<int>(r),
                                 static_cast<int>(ranks), "", "RANK"});
  run.recordings.push_back(std::move(rec));
  return Diagnose(run);
}

TEST(StepAnalysis, TheStragglerIsTheRankThatArrivesLateNotTheOneThatWaits) {
  // Two ranks, rank 1's loader 30 ms slower: rank 0 waits inside backward's
  // all-reduce for it, so rank 0's backward is the long one.
  const auto steps = SimulateRanks({{0.5, 30.5}, {0, 0}, {0, 0}}, 20);
  const Diagnosis d = DiagnoseRanks(steps, 2);
  const StepMarkerAnalysis& m = d.recordings[0].marked;
  EXPECT_TRUE(m.sync.synchronous);
  EXPECT_EQ(m.sync.matched_steps, 20);
  EXPECT_NEAR(m.sync.arrival_spread_ms_p50, 30.0, 1e-6);
  EXPECT_NEAR(m.sync.release_spread_ms_p50, 0.0, 1e-6);
  const Finding* f = FindVerdict(d.findings, "straggler_rank");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("rank 1 (pid 101)"), std::string::npos) << f->title;
  EXPECT_EQ(f->title.find("rank 0"), std::string::npos) << f->title;
  EXPECT_NE(f->detail.find("waiting for its next batch (30.0 ms more data wait"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find("stays with it"), std::string::npos) << f->detail;
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_NEAR(f->gain->current, 47.7, 1e-6);  // every step: rank 1's 30.5 ms wait, then 15 + 0.2 + 2 ms
  EXPECT_NEAR(f->gain->best, 47.7 - 30, 1e-6);
  // Its per-rank figures: rank 0 waited 30 ms of its backward for rank 1; that is not its work.
  for (const auto& p : m.by_process) {
    if (p.rank == 0) {
      EXPECT_NEAR(p.waited_ms_p50, 30.0, 1e-6);
      EXPECT_NEAR(p.phase_ms_mean[GPUTRIAGE_PHASE_BACKWARD], 40.2, 1e-6);
      EXPECT_NEAR(p.work_ms_p50, 47.7 - 0.5 - 30, 1e-6);
    } else {
      EXPECT_NEAR(p.late_ms_p50, 30.0, 1e-6);
      EXPECT_NEAR(p.late_data_ms, 30.0, 1e-6);
      EXPECT_NEAR(p.last_share, 1.0, 1e-9);
    }
  }
  // The input finding says whose wait it is instead of averaging 15.5 ms over both.
  const Finding* input = FindVerdict(d.findings, "input_bound");
  ASSERT_NE(input, nullptr);
  EXPECT_NE(input->title.find("on rank 1 (pid 101)"), std::string::npos) << input->title;
  // Balanced: nobody is named.
  EXPECT_EQ(FindVerdict(DiagnoseRanks(SimulateRanks({{0.5, 0.5}, {0, 0}, {0, 0}}, 20), 2).findings, "straggler_rank"),
            nullptr);
}

TEST(StepAnalysis, AHostStallAfterTheCollectivesMakesItsRankTheStraggler) {
  // Rank 1 stalls 30 ms on the host after its optimizer step (a per-step log, a
  // sync): it starts every next step late, and the others wait for it.
  const Diagnosis d = DiagnoseRanks(SimulateRanks({{0.5, 0.5, 0.5}, {0, 0, 0}, {0, 30, 0}}, 20), 3);
  const Finding* f = FindVerdict(d.findings, "straggler_rank");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("rank 1 (pid 101)"), std::string::npos) << f->title;
  EXPECT_NE(f->detail.find("finishing its previous step late (30.0 ms"), std::string::npos) << f->detail;
  const Finding* stall = FindVerdict(d.findings, "host_stall");
  if (stall) EXPECT_NE(stall->title.find("on rank 1"), std::string::npos) << stall->title;
}

TEST(StepAnalysis, GradientAccumulationIsToldAsMicroBatchesAndOptimizerSteps) {
  // A Trainer with gradient_accumulation_steps=2: one marked step per batch, the
  // optimizer every second one.
  auto steps = Steps(1, 48, 1, 10);
  for (size_t i = 1; i < steps.size(); i += 2) steps[i].phase_ns[GPUTRIAGE_PHASE_OPTIMIZER] = 2 * kMs;
  const Diagnosis d = DiagnoseSteps(steps);
  EXPECT_EQ(d.recordings[0].marked.optimizer_steps, 24);
  gputriage::Run run;
  run.recordings.emplace_back();
  run.recordings[0].marked_steps = steps;
  run.recordings[0].format = "step-markers";
  const std::string text = RenderTerminal(run, d, {});
  EXPECT_NE(text.find("the steps are micro-batches: 48 of them, 24 optimizer steps (gradient accumulation about 2)"),
            std::string::npos)
      << text;
  // Every step updating the model: nothing to say.
  EXPECT_EQ(DiagnoseSteps(Steps(1, 48, 1, 10)).recordings[0].marked.optimizer_steps, 0);
  // Every step but the last (a crash cut it short before its optimizer step): no accumulation either.
  for (auto& s : steps) s.phase_ns[GPUTRIAGE_PHASE_OPTIMIZER] = 2 * kMs;
  steps.back().phase_ns[GPUTRIAGE_PHASE_OPTIMIZER] = 0;
  run.recordings[0].marked_steps = steps;
  const std::string crashed = RenderTerminal(run, DiagnoseSteps(steps), {});
  EXPECT_EQ(crashed.find("micro-batches"), std::string::npos) << crashed;
}

TEST(StepAnalysis, ProcessesThatNeverWaitForEachOtherHaveNoStraggler) {
  // The same slow loader, but no collective: each process leaves backward on its
  // own. A slower process is not one the others wait for.
  const Diagnosis d = DiagnoseRanks(SimulateRanks({{0.5, 30.5}, {0, 0}, {0, 0}, false}, 20), 2);
  EXPECT_FALSE(d.recordings[0].marked.sync.synchronous);
  EXPECT_EQ(FindVerdict(d.findings, "straggler_rank"), nullptr);
  // Steps without sync times (phases not marked): no arrival, no straggler.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(Steps(100, 20, 0.5, 10)).findings, "straggler_rank"), nullptr);
  std::vector<MarkedStep> unmarked = Steps(100, 20, 0.5, 10);
  const auto slow = Steps(101, 20, 0.5, 14);
  unmarked.insert(unmarked.end(), slow.begin(), slow.end());
  EXPECT_EQ(FindVerdict(DiagnoseSteps(unmarked).findings, "straggler_rank"), nullptr);
  // A process with too few steps to judge is no straggler either.
  const auto few = SimulateRanks({{0.5, 30.5}, {0, 0}, {0, 0}}, 2);
  EXPECT_EQ(FindVerdict(DiagnoseRanks(few, 2).findings, "straggler_rank"), nullptr);
}

/// Steps with forward, backward and optimizer marked, and `rest_ms` of each in none of them.
std::vector<MarkedStep> TracedSteps(int n, double forward_ms, double backward_ms, double optimizer_ms, double rest_ms,
                                    double device_ms = 0) {
  std::vector<MarkedStep> out = Steps(1, n, 1.0, forward_ms + backward_ms + optimizer_ms + rest_ms);
  for (auto& s : out) {
    s.phase_ns[GPUTRIAGE_PHASE_FORWARD] = static_cast<TimeNs>(forward_ms * kMs);
    s.phase_ns[GPUTRIAGE_PHASE_BACKWARD] = static_cast<TimeNs>(backward_ms * kMs);
    s.phase_ns[GPUTRIAGE_PHASE_OPTIMIZER] = static_cast<TimeNs>(optimizer_ms * kMs);
    s.device_ns = static_cast<TimeNs>(device_ms * kMs);
  }
  return out;
}

TEST(StepAnalysis, TheRestOutsideEveryMarkedPhaseIsAHostStall) {
  Diagnosis d = DiagnoseSteps(TracedSteps(20, 10, 12, 2, 20));
  const StepMarkerAnalysis& m = d.recordings[0].marked;
  EXPECT_TRUE(m.phases_traced);
  EXPECT_NEAR(m.untraced_ms_mean, 20.0, 1e-6);
  EXPECT_NEAR(m.phase_ms_mean[GPUTRIAGE_PHASE_BACKWARD], 12.0, 1e-6);
  EXPECT_NEAR(m.untraced_percent_of_step, 100.0 * 20 / 45, 1e-6);
  const Finding* f = FindVerdict(d.findings, "host_stall");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_EQ(f->severity, Severity::kHigh);  // 44 % of the step
  EXPECT_EQ(f->gain->bounded_by, "marked_phases");
  EXPECT_NEAR(f->gain->current, 45.0, 1e-6);
  EXPECT_NEAR(f->gain->expected, 25.0, 1e-6);  // the step's phases, data included
  EXPECT_NEAR(f->gain->worst, 35.0, 1e-6);     // half the rest stays
  EXPECT_EQ(FindVerdict(d.findings, "input_bound"), nullptr);
  // The ledger charges the same time to host_stall (no GPU: all of it).
  const RunLedger& ledger = d.recordings[0].ledger;
  ASSERT_TRUE(ledger.valid);
  const LedgerBucket* stall = ledger.Find("host_stall");
  ASSERT_NE(stall, nullptr);
  EXPECT_TRUE(stall->known);
  EXPECT_NEAR(stall->hours * 3600e3, 20 * 20.0, 1e-6);  // 20 steps' 20 ms
  EXPECT_NEAR(ledger.Find("productive")->hours * 3600e3, 20 * 24.0, 1e-6);
}

TEST(StepAnalysis, NoHostStallWithoutTheStepsPhasesOrBelowItsThresholds) {
  // Only the data phase marked: the rest is not measured.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(Steps(1, 20, 1.0, 40.0)).findings, "host_stall"), nullptr);
  EXPECT_FALSE(DiagnoseSteps(Steps(1, 20, 1.0, 40.0)).recordings[0].marked.phases_traced);
  // 10 % of the step outside the phases: the loop's own overhead.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(TracedSteps(20, 20, 20, 4, 5)).findings, "host_stall"), nullptr);
  // 50 % but 0.5 ms: the Python between phases of a tiny step.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(TracedSteps(20, 0.2, 0.2, 0.05, 0.5)).findings, "host_stall"), nullptr);
}

TEST(StepAnalysis, AHostRestTheGpusOwnTimeCoversIsNoStall) {
  // The host waited 20 ms outside the phases, but the GPU was busy 44 ms of the
  // 45 ms step (a sync on queued work): nothing to win.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(TracedSteps(20, 10, 12, 2, 20, 44)).findings, "host_stall"), nullptr);
  // The GPU busy 30 ms: the step cannot go below it, whatever the host does.
  Diagnosis d = DiagnoseSteps(TracedSteps(20, 10, 12, 2, 20, 30), "NVIDIA H100 80GB HBM3");
  const Finding* f = FindVerdict(d.findings, "host_stall");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_NEAR(f->gain->expected, 30.0, 1e-6);
  EXPECT_EQ(f->gain->bounded_by, "gpu_busy_time");
}

/// Traced steps whose `copy_ms` of host-to-device copies is part of the rest.
std::vector<MarkedStep> CopyingSteps(int n, double copy_ms, double other_ms, double device_ms = 0) {
  std::vector<MarkedStep> out = TracedSteps(n, 4, 6, 1, copy_ms + other_ms, device_ms);
  for (auto& s : out) s.phase_ns[kCopySlot] = static_cast<TimeNs>(copy_ms * kMs);
  return out;
}

std::map<std::string, std::string> Copies(double pinned_percent, double non_blocking_percent) {
  // 20 steps of 64 MiB each, in 40 copies.
  return {{"copy.calls", "40"},
          {"copy.bytes", std::to_string(20.0 * 64 * 1024 * 1024)},
          {"copy.pinned_percent", std::to_string(pinned_percent)},
          {"copy.non_blocking_percent", std::to_string(non_blocking_percent)},
          {"dataloader.pin_memory", pinned_percent > 0 ? "true" : "false"}};
}

TEST(StepAnalysis, SynchronousCopiesOfTheBatchAreCopyBound) {
  // 6 ms of each 18 ms step copies 64 MiB from pageable memory, blocking.
  Diagnosis d = DiagnoseSteps(CopyingSteps(20, 6, 0.5), "", Copies(0, 0));
  const StepMarkerAnalysis& m = d.recordings[0].marked;
  EXPECT_NEAR(m.phase_ms_mean[kCopySlot], 6.0, 1e-6);
  EXPECT_NEAR(m.untraced_ms_mean, 0.5, 1e-6);  // the copies are a marked phase, not the rest
  EXPECT_EQ(FindVerdict(d.findings, "host_stall"), nullptr);
  const Finding* f = FindVerdict(d.findings, "copy_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kHigh);  // 6 of 18.5 ms
  ASSERT_GE(f->recommendations.size(), 2u);
  EXPECT_NE(f->recommendations[0].action.find("pin_memory=True"), std::string::npos);
  EXPECT_NE(f->recommendations[1].action.find("non_blocking=True"), std::string::npos);
  double mib = 0, gbs_in_detail = 0;
  for (const auto& e : f->evidence)
    if (e.name == "copy_mib_per_step") mib = e.value;
  EXPECT_NEAR(mib, 64.0, 1e-9);
  // 64 MiB in 6 ms: 11.2 GB/s, as the detail says.
  gbs_in_detail = 64.0 * 1024 * 1024 / 6e6;
  EXPECT_NE(f->detail.find(fmt::format("{:.1f} GB/s", gbs_in_detail)), std::string::npos) << f->detail;
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_NEAR(f->gain->current, 18.5, 1e-6);
  EXPECT_NEAR(f->gain->expected, 12.5, 1e-6);  // the copy overlapped
  EXPECT_NEAR(f->gain->worst, 15.5, 1e-6);     // half of it stays
  EXPECT_EQ(f->gain->bounded_by, "marked_phases");
  // Pinned already, not non-blocking: only the second fix is advised.
  Diagnosis pinned = DiagnoseSteps(CopyingSteps(20, 6, 0.5), "", Copies(100, 0));
  const Finding* p = FindVerdict(pinned.findings, "copy_bound");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->recommendations[0].action.find("non_blocking=True"), std::string::npos);
  // The GPU's own 16 ms per step: the copy can only be hidden down to it.
  Diagnosis gpu = DiagnoseSteps(CopyingSteps(20, 6, 0.5, 16), "NVIDIA H100 80GB HBM3", Copies(0, 0));
  const Finding* g = FindVerdict(gpu.findings, "copy_bound");
  ASSERT_NE(g, nullptr);
  EXPECT_NEAR(g->gain->expected, 16.0, 1e-6);
  EXPECT_EQ(g->gain->bounded_by, "gpu_busy_time");
}

TEST(StepAnalysis, NoCopyBoundForAsynchronousOrSmallCopies) {
  // Pinned and non-blocking already: the phase is the queueing, nothing left to give.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(CopyingSteps(20, 6, 0.5), "", Copies(100, 100)).findings, "copy_bound"), nullptr);
  // 5 % of the step.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(CopyingSteps(20, 0.6, 0.5), "", Copies(0, 0)).findings, "copy_bound"), nullptr);
  // 40 % but 0.4 ms: tiny steps.
  std::vector<MarkedStep> tiny = TracedSteps(20, 0.2, 0.2, 0.05, 0.4);
  for (auto& s : tiny) s.phase_ns[kCopySlot] = static_cast<TimeNs>(0.4 * kMs);
  EXPECT_EQ(FindVerdict(DiagnoseSteps(tiny, "", Copies(0, 0)).findings, "copy_bound"), nullptr);
  // A job that marked its copy phase itself (no copy.* figures): both fixes advised.
  const Diagnosis marked = DiagnoseSteps(CopyingSteps(20, 6, 0.5));
  const Finding* f = FindVerdict(marked.findings, "copy_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->detail.find("marked this phase itself"), std::string::npos);
  EXPECT_NE(f->recommendations[0].action.find("pin_memory=True"), std::string::npos);
}

std::map<std::string, std::string> Optimizer(const std::string& cls, const std::string& implementation,
                                             const std::string& device = "cuda", const std::string& torch = "2.1.0") {
  return {{"optimizer.class", cls},          {"optimizer.implementation", implementation},
          {"optimizer.device", device},      {"optimizer.param_tensors", "400"},
          {"optimizer.params", "120000000"}, {"version.torch", torch}};
}

TEST(StepAnalysis, AForLoopAdamOnAGpuWaitingForTheHostIsOptimizerBound) {
  // 6 ms of each 17.5 ms step in the optimizer; the GPU busy 10 ms of it.
  Diagnosis d = DiagnoseSteps(TracedSteps(20, 4, 6, 6, 0.5, 10), "NVIDIA H100 80GB HBM3",
                              Optimizer("Adam", "for-loop"));
  const Finding* f = FindVerdict(d.findings, "optimizer_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kHigh);  // 34 % of the step
  EXPECT_NE(f->title.find("for-loop Adam"), std::string::npos) << f->title;
  EXPECT_NE(f->detail.find("400 parameter tensors"), std::string::npos) << f->detail;
  ASSERT_GE(f->recommendations.size(), 2u);
  EXPECT_NE(f->recommendations[0].action.find("Adam(params, ..., fused=True)"), std::string::npos);
  EXPECT_NE(f->recommendations[1].action.find("foreach=True"), std::string::npos);
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_NEAR(f->gain->current, 17.5, 1e-6);
  EXPECT_NEAR(f->gain->expected, 17.5 - 6.0 * (1 - 1 / 3.0), 1e-6);
  EXPECT_NEAR(f->gain->best, 17.5 - 6.0 * (1 - 1 / 5.0), 1e-6);
  EXPECT_NEAR(f->gain->worst, 17.5 - 3.0, 1e-6);
  EXPECT_TRUE(f->cannot_exclude.empty());
  // Steps not timed on the GPU: moderate at most, and the GPU's time is named as
  // what the recording cannot rule out.
  Diagnosis unmeasured =
      DiagnoseSteps(TracedSteps(20, 4, 6, 6, 0.5), "NVIDIA H100 80GB HBM3", Optimizer("AdamW", "foreach"));
  const Finding* u = FindVerdict(unmeasured.findings, "optimizer_bound");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->severity, Severity::kModerate);
  EXPECT_EQ(u->cannot_exclude, std::vector<std::string>{"gpu_busy_time"});
  EXPECT_NE(u->recommendations[0].action.find("AdamW(params, ..., fused=True)"), std::string::npos);
  for (const auto& r : u->recommendations) EXPECT_EQ(r.action.find("foreach=True"), std::string::npos);  // already
}

std::map<std::string, std::string> Recompute(int64_t calls, double forward_seconds) {
  return {{"checkpointing.calls", std::to_string(calls)}, {"checkpointing.forward_seconds", std::to_string(forward_seconds)}};
}

TEST(StepAnalysis, ActivationCheckpointingCostsItsRecomputation) {
  // 20 steps of 4 ms forward, 14 ms backward; the checkpointed segments' forward
  // took 0.08 s over the run: 4 ms per step, which backward runs again.
  Diagnosis d = DiagnoseSteps(TracedSteps(20, 4, 14, 1, 0.5), "", Recompute(120, 0.08));
  const Finding* f = FindVerdict(d.findings, "recompute_overhead");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kLow);  // 4 of 20.5 ms: 19.5 %
  EXPECT_NE(f->detail.find("Backward takes 14.0 ms, 3.5x the 4.0 ms forward; the recomputation is 29% of it"),
            std::string::npos)
      << f->detail;
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_NEAR(f->gain->current, 20.5, 1e-6);
  EXPECT_NEAR(f->gain->expected, 16.5, 1e-6);
  EXPECT_NEAR(f->gain->worst, 18.5, 1e-6);  // half the segments stay checkpointed
  EXPECT_EQ(f->gain->bounded_by, "memory_headroom");
  EXPECT_NE(f->recommendations[0].action.find("gradient_checkpointing=False"), std::string::npos);
  // 6 ms of 22.5: moderate.
  Diagnosis more = DiagnoseSteps(TracedSteps(20, 4, 16, 1, 0.5), "", Recompute(120, 0.12));
  ASSERT_NE(FindVerdict(more.findings, "recompute_overhead"), nullptr);
  EXPECT_EQ(FindVerdict(more.findings, "recompute_overhead")->severity, Severity::kModerate);
}

TEST(StepAnalysis, RecomputationOnAFullGpuMayHaveNoCheapFix) {
  // The GPU's memory 95 % used at its peak: turning checkpointing off is not
  // advised, and at worst nothing is won.
  std::vector<MarkedStep> steps = TracedSteps(20, 4, 16, 1, 0.5);
  gputriage::Run run;
  Recording rec;
  rec.metadata = Recompute(120, 0.12);
  rec.source_path = "record: train.py";
  rec.format = "step-markers";
  auto pos = rec.metrics.FindOrAdd(0, "GPU-0", "00000000:01:00.0", -1);
  ASSERT_TRUE(pos.has_value());
  rec.metrics.devices[*pos].name = "NVIDIA H100 80GB HBM3";
  const TimeNs t0 = steps.front().span.start;
  for (int i = 0; i < 40; ++i) {
    const TimeNs t = t0 + static_cast<TimeNs>(i * 100 * kMs);
    rec.metrics.Add(*pos, Metric::kGpuUtil, t, 80);
    rec.metrics.Add(*pos, Metric::kFbUsedBytes, t, 0.95 * 80e9);
    rec.metrics.Add(*pos, Metric::kFbTotalBytes, t, 80e9);
  }
  rec.marked_steps = std::move(steps);
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  const Finding* f = FindVerdict(d.findings, "recompute_overhead");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kLow);
  EXPECT_NEAR(f->gain->worst, f->gain->current, 1e-6);
  for (const auto& r : f->recommendations) EXPECT_EQ(r.action.find("turn activation checkpointing off"), std::string::npos);
  // Under 10 % of the step, or under 1 ms: nothing to say.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(TracedSteps(20, 4, 16, 1, 0.5), "", Recompute(40, 0.02)).findings,
                        "recompute_overhead"),
            nullptr);
  EXPECT_EQ(FindVerdict(DiagnoseSteps(TracedSteps(20, 0.5, 1, 0.1, 0.2), "", Recompute(40, 0.016)).findings,
                        "recompute_overhead"),
            nullptr);
}

TEST(StepAnalysis, NoOptimizerBoundWhereNothingCheapIsLeft) {
  const auto steps = [] { return TracedSteps(20, 4, 6, 6, 0.5, 10); };
  const char* gpu = "NVIDIA H100 80GB HBM3";
  // Fused already; an optimizer of another library; parameters on the CPU (foreach
  // there can be slower); a GPU busy through the launches; a small optimizer share.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(steps(), gpu, Optimizer("AdamW", "fused")).findings, "optimizer_bound"), nullptr);
  EXPECT_EQ(FindVerdict(DiagnoseSteps(steps(), gpu, Optimizer("Lion", "")).findings, "optimizer_bound"), nullptr);
  EXPECT_EQ(FindVerdict(DiagnoseSteps(steps(), "", Optimizer("Adam", "for-loop", "cpu")).findings, "optimizer_bound"),
            nullptr);
  EXPECT_EQ(FindVerdict(DiagnoseSteps(TracedSteps(20, 4, 6, 6, 0.5, 16.5), gpu, Optimizer("Adam", "for-loop")).findings,
                        "optimizer_bound"),
            nullptr);
  EXPECT_EQ(FindVerdict(DiagnoseSteps(TracedSteps(20, 10, 20, 2, 0.5, 10), gpu, Optimizer("Adam", "for-loop")).findings,
                        "optimizer_bound"),
            nullptr);
  // No zero-code optimizer figures (a job that marks its own phases): unknown update.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(steps(), gpu).findings, "optimizer_bound"), nullptr);
  // PyTorch 1.13 has no fused AdamW: foreach is the advice.
  const Diagnosis torch1 = DiagnoseSteps(steps(), gpu, Optimizer("AdamW", "for-loop", "cuda", "1.13.1"));
  const Finding* old = FindVerdict(torch1.findings, "optimizer_bound");
  ASSERT_NE(old, nullptr);
  EXPECT_NE(old->recommendations[0].action.find("foreach=True"), std::string::npos);
  for (const auto& r : old->recommendations) EXPECT_EQ(r.action.find("fused=True)"), std::string::npos);
}

std::map<std::string, std::string> SaturatedHost(int workers, double saturated_percent) {
  return {{"dataloader.num_workers", std::to_string(workers)},
          {"host.cpus", "2"},
          {"host.usage.seconds", "30.0"},
          {"host.usage.intervals", "60"},
          {"host.usage.job_cpu_cores_mean", "1.85"},
          {"host.usage.main_cpu_cores_mean", "0.70"},
          {"host.usage.other_cpu_cores_mean", "1.15"},
          {"host.usage.job_processes_max", std::to_string(workers + 1)},
          {"host.usage.machine_busy_percent_mean", "94.0"},
          {"host.usage.machine_cpus", "2"},
          {"host.usage.saturated_percent_of_time", std::to_string(saturated_percent)},
          {"host.usage.job_rss_peak_bytes", "1073741824"}};
}

TEST(StepAnalysis, WorkersBeyondTheCoresSaturateTheHostAndTheAdviceNeverAddsWorkers) {
  Diagnosis d = DiagnoseSteps(Steps(1, 20, 30.0, 50.0), "", SaturatedHost(4, 85));
  const HostUsageAnalysis& h = d.recordings[0].host;
  ASSERT_TRUE(h.known);
  EXPECT_NEAR(h.job_cores_mean, 1.85, 1e-9);
  EXPECT_NEAR(h.job_rss_peak_mib, 1024, 1e-9);
  const Finding* host = FindVerdict(d.findings, "host_saturated");
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->severity, Severity::kHigh);
  EXPECT_EQ(host->origin, "host");
  EXPECT_NE(host->recommendations.at(0).action.find("num_workers=1) at most"), std::string::npos);
  const Finding* input = FindVerdict(d.findings, "input_bound");
  ASSERT_NE(input, nullptr);
  // Saturated CPUs: cheaper batches, never more workers, whatever the run had.
  for (int workers : {0, 1, 4}) {
    Diagnosis again = DiagnoseSteps(Steps(1, 20, 30.0, 50.0), "", SaturatedHost(workers, 85));
    const Finding* f = FindVerdict(again.findings, "input_bound");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->recommendations.at(0).action.find("cheaper"), std::string::npos) << f->recommendations.at(0).action;
    EXPECT_EQ(f->recommendations.at(0).action.find("num_workers=2"), std::string::npos);
  }
  // The machine full but the job on 0.3 of its 2 CPUs (others keep it busy): not
  // saturated by the job; contention instead, and the advice counts the one CPU
  // left to it, not the machine's two (issue 41).
  auto others = SaturatedHost(0, 95);
  others["host.usage.job_cpu_cores_mean"] = "0.3";
  Diagnosis crowded = DiagnoseSteps(Steps(1, 20, 30.0, 50.0), "", others);
  EXPECT_EQ(FindVerdict(crowded.findings, "host_saturated"), nullptr);
  const Finding* contention = FindVerdict(crowded.findings, "host_contention");
  ASSERT_NE(contention, nullptr);
  EXPECT_EQ(contention->severity, Severity::kHigh);  // 1.58 of 2 CPUs
  ASSERT_TRUE(contention->gain.has_value());
  EXPECT_NEAR(contention->gain->current, 2 - 1.58, 1e-9);
  const std::string advice = FindVerdict(crowded.findings, "input_bound")->recommendations.at(0).action;
  EXPECT_NE(advice.find("num_workers=1"), std::string::npos) << advice;
  EXPECT_NE(advice.find("1.6 of them busy with other processes"), std::string::npos) << advice;
  // The same load, niced: the job's processes never waited for a CPU (schedstat),
  // so it cost the job nothing: no contention, and the advice counts both CPUs.
  others["host.usage.job_cpu_wait_mean"] = "0.010";
  Diagnosis niced = DiagnoseSteps(Steps(1, 20, 30.0, 50.0), "", others);
  EXPECT_EQ(FindVerdict(niced.findings, "host_contention"), nullptr);
  EXPECT_NE(FindVerdict(niced.findings, "input_bound")->recommendations.at(0).action.find("num_workers=2"),
            std::string::npos);
  // Waiting behind it: contention, with the wait as evidence.
  others["host.usage.job_cpu_wait_mean"] = "0.400";
  const Finding* waited = FindVerdict(DiagnoseSteps(Steps(1, 20, 30.0, 50.0), "", others).findings, "host_contention");
  ASSERT_NE(waited, nullptr);
  // Not saturated: no finding, and the advice may add workers up to the cores.
  Diagnosis calm = DiagnoseSteps(Steps(1, 20, 30.0, 50.0), "", SaturatedHost(0, 20));
  EXPECT_EQ(FindVerdict(calm.findings, "host_saturated"), nullptr);
  EXPECT_NE(FindVerdict(calm.findings, "input_bound")->recommendations.at(0).action.find("num_workers=2"),
            std::string::npos);
}

// Issue 53: 2 workers on 2 CPUs that used 0.26 cores in all wait on I/O (a
// sleeping __getitem__): more workers help, past the cores (4 ran 11.9 ms a
// step against 20.2 at 2). The advice was num_workers=1 and "workers beyond 2
// add nothing".
TEST(StepAnalysis, WorkersThatWaitAreAdvisedMoreEvenPastTheCores) {
  auto waiting = SaturatedHost(2, 5);
  waiting["host.usage.job_cpu_cores_mean"] = "0.45";
  waiting["host.usage.main_cpu_cores_mean"] = "0.20";
  waiting["host.usage.other_cpu_cores_mean"] = "0.26";
  waiting["host.usage.machine_busy_percent_mean"] = "23.0";
  const Diagnosis d = DiagnoseSteps(Steps(1, 20, 30.0, 50.0), "", waiting);
  const Finding* f = FindVerdict(d.findings, "input_bound");
  ASSERT_NE(f, nullptr);
  const std::string advice = f->recommendations.at(0).action;
  EXPECT_NE(advice.find("num_workers=4) or more, past the cores"), std::string::npos) << advice;
  EXPECT_NE(advice.find("0.26 cores in all, 0.13 each"), std::string::npos) << advice;
  EXPECT_EQ(advice.find("only share the same cores"), std::string::npos) << advice;
  // Workers that use their cores (1.15 of 2 for 2 workers): the cores bound them, as before.
  const Diagnosis computing = DiagnoseSteps(Steps(1, 20, 30.0, 50.0), "", SaturatedHost(2, 20));
  const Finding* busy = FindVerdict(computing.findings, "input_bound");
  ASSERT_NE(busy, nullptr);
  EXPECT_EQ(busy->recommendations.at(0).action.find("past the cores"), std::string::npos);
}

TEST(StepAnalysis, MfuNeedsFlopsAndAKnownGpu) {
  // 2e14 FLOPs per 1 s step = 200 TFLOPS; an H100 SXM's dense bf16 peak is 989.4.
  const auto steps = Steps(1, 10, 0, 1000, 32, 0, 2e14);
  const auto unknown = AnalyzeMarkedSteps(steps);
  EXPECT_NEAR(unknown.achieved_tflops, 200, 1e-9);
  EXPECT_TRUE(std::isnan(unknown.mfu_percent));
  const auto m = AnalyzeMarkedSteps(steps, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(m.gpu_model, "H100 SXM");
  EXPECT_NEAR(m.mfu_percent, 100.0 * 200 / 989.4, 1e-9);
  const Diagnosis d = DiagnoseSteps(steps, "NVIDIA H100 80GB HBM3");
  const Finding* f = FindVerdict(d.findings, "low_mfu");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kModerate);  // 20 %: below 30, above 10
  EXPECT_EQ(FindVerdict(DiagnoseSteps(steps).findings, "low_mfu"), nullptr);  // GPU unknown: not judged
  // 400 TFLOPS is 40 %: no finding.
  EXPECT_EQ(FindVerdict(DiagnoseSteps(Steps(1, 10, 0, 1000, 32, 0, 4e14), "NVIDIA H100 80GB HBM3").findings, "low_mfu"),
            nullptr);
}

}  // namespace
}  // namespace gputriage
