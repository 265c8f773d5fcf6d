// The goodput ledger (src/analysis/ledger.cc) on jobs built by hand: every bucket
// against the time put into it, the buckets adding up to the job, what a source
// cannot see reported as unknown, and run phases kept apart from steps by the
// step builder (src/markers/marked_steps.cc).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/markers.h"
#include "src/analysis/ledger.h"
#include "src/analysis/live_ledger.h"
#include "src/markers/marked_steps.h"

namespace gputriage {
namespace {

constexpr TimeNs kMs = 1'000'000;

/// A job of one process: steps of `step_ms` (the first `wait_ms` of each its data
/// wait), laid out by the caller with Add* calls in time order.
struct JobBuilder {
  Recording rec;
  TimeNs t = 0;
  int64_t number = 0;
  explicit JobBuilder(TimeNs start_ms = 0) : t(start_ms * kMs) { rec.job_span.start = t; }
  JobBuilder& Wait(double ms) {
    t += static_cast<TimeNs>(ms * kMs);
    return *this;
  }
  JobBuilder& Steps(int n, double step_ms, double wait_ms = 0, uint32_t pid = 1) {
    for (int i = 0; i < n; ++i) {
      MarkedStep s;
      s.number = number++;
      s.pid = pid;
      s.span = {t, t + static_cast<TimeNs>(step_ms * kMs)};
      s.phase_ns[GPUTRIAGE_PHASE_DATA] = static_cast<TimeNs>(wait_ms * kMs);
      rec.marked_steps.push_back(s);
      t = s.span.end;
    }
    return *this;
  }
  JobBuilder& Phase(uint16_t phase, double ms, uint32_t pid = 1) {
    rec.run_phases.push_back({phase, pid, {t, t + static_cast<TimeNs>(ms * kMs)}});
    t += static_cast<TimeNs>(ms * kMs);
    return *this;
  }
  Recording End(double after_ms, std::optional<int> exit_code = 0) {
    rec.job_span.end = t + static_cast<TimeNs>(after_ms * kMs);
    rec.exit_code = exit_code;
    return std::move(rec);
  }
};

/// The bucket's time in ms (job-hours ledgers: the job's wall time).
double Ms(const RunLedger& l, const char* name) {
  const LedgerBucket* b = l.Find(name);
  EXPECT_NE(b, nullptr) << name;
  return b == nullptr ? NAN : b->hours * 3600.0 * 1000.0;
}

void ExpectAddsUp(const RunLedger& l) {
  double sum = 0;
  for (const auto& b : l.buckets)
    if (b.known) sum += b.hours;
  EXPECT_NEAR(sum, l.total, l.total * 1e-9);
}

TEST(Ledger, EveryBucketOfACleanJobIsTheTimePutInIt) {
  const Recording rec = JobBuilder(1000)
                            .Wait(2000)                            // start-up: imports, model load
                            .Phase(GPUTRIAGE_PHASE_RESTORE, 400)   // resume
                            .Phase(GPUTRIAGE_PHASE_COMPILE, 600)   // torch.compile's first calls
                            .Steps(10, 100, 20)                    // 10 x (20 data + 80 work)
                            .Phase(GPUTRIAGE_PHASE_CHECKPOINT, 500)
                            .Wait(30)                              // the loop's own overhead
                            .Steps(10, 100, 20)
                            .Phase(GPUTRIAGE_PHASE_EVAL, 300)
                            .Wait(5000)                            // nothing runs: idle
                            .Steps(5, 100, 20)
                            .End(700);                             // tear-down
  const RunLedger l = analysis::BuildLedger(rec, {});
  ASSERT_TRUE(l.valid);
  EXPECT_EQ(l.unit, "job_hours");
  ExpectAddsUp(l);
  EXPECT_NEAR(Ms(l, "startup"), 2000, 1e-6);
  EXPECT_NEAR(Ms(l, "checkpoint_restore"), 400, 1e-6);
  EXPECT_NEAR(Ms(l, "compile_warmup"), 600, 1e-6);
  EXPECT_NEAR(Ms(l, "productive"), 25 * 80, 1e-6);
  EXPECT_NEAR(Ms(l, "data_wait"), 25 * 20, 1e-6);
  EXPECT_NEAR(Ms(l, "checkpoint_save"), 500, 1e-6);
  EXPECT_NEAR(Ms(l, "between_steps"), 30, 1e-6);
  EXPECT_NEAR(Ms(l, "evaluation"), 300, 1e-6);
  EXPECT_NEAR(Ms(l, "idle"), 5000, 1e-6);
  EXPECT_NEAR(Ms(l, "teardown"), 700, 1e-6);
  EXPECT_NEAR(Ms(l, "lost_work"), 0, 1e-6);
  EXPECT_NEAR(l.goodput, 2000.0 / (2000 + 400 + 600 + 2500 + 500 + 30 + 300 + 5000 + 700), 1e-9);
  // What step markers cannot see is unknown, not zero.
  EXPECT_FALSE(l.Find("host_stall")->known);
  EXPECT_FALSE(l.Find("communication")->known);
  EXPECT_TRUE(l.Find("data_wait")->known);
  EXPECT_EQ(l.Find("checkpoint_save")->count, 1);
  EXPECT_EQ(l.Find("productive")->count, 25);
  // The timeline the reports draw is the same bucketing: gaps and runs of steps
  // by start (the 30 ms between-steps gap inside its run), then the phases.
  std::vector<std::string> kinds;
  for (const auto& seg : l.timeline) kinds.push_back(seg.bucket);
  EXPECT_EQ(kinds, (std::vector<std::string>{"startup", "productive", "productive", "idle", "productive", "teardown",
                                             "checkpoint_restore", "compile_warmup", "checkpoint_save", "evaluation"}));
  EXPECT_EQ(l.timeline[2].span.end - l.timeline[2].span.start, (30 + 1000) * kMs);  // the gap and 10 steps
}

TEST(Ledger, AFailedJobLosesTheStepsSinceItsLastCheckpoint) {
  const Recording rec = JobBuilder()
                            .Wait(1000)
                            .Steps(10, 100)
                            .Phase(GPUTRIAGE_PHASE_CHECKPOINT, 200)
                            .Steps(7, 100)  // then an exception
                            .End(150, 1);
  const RunLedger l = analysis::BuildLedger(rec, {});
  ExpectAddsUp(l);
  EXPECT_NEAR(Ms(l, "productive"), 1000, 1e-6);
  EXPECT_NEAR(Ms(l, "lost_work"), 700, 1e-6);
  EXPECT_EQ(l.Find("lost_work")->count, 7);
  EXPECT_NEAR(Ms(l, "crash"), 150, 1e-6);
  EXPECT_NEAR(Ms(l, "teardown"), 0, 1e-6);
  EXPECT_NEAR(Ms(l, "hang"), 0, 1e-6);
  ASSERT_FALSE(l.notes.empty());
  EXPECT_NE(l.notes[0].find("exit code 1"), std::string::npos);
}

TEST(Ledger, AJobKilledLongAfterItsLastStepWasHung) {
  const Recording rec = JobBuilder().Steps(20, 100).Wait(0).End(60'000, 128 + 9);
  const RunLedger l = analysis::BuildLedger(rec, {});
  ExpectAddsUp(l);
  EXPECT_NEAR(Ms(l, "hang"), 60'000, 1e-6);
  EXPECT_NEAR(Ms(l, "lost_work"), 2000, 1e-6);  // never checkpointed
  EXPECT_NEAR(l.goodput, 0, 1e-12);
  // Killed soon after its last step: a crash, not a hang.
  const RunLedger soon = analysis::BuildLedger(JobBuilder().Steps(20, 100).End(500, 128 + 15), {});
  EXPECT_NEAR(Ms(soon, "crash"), 500, 1e-6);
  EXPECT_NEAR(Ms(soon, "hang"), 0, 1e-6);
}

TEST(Ledger, SlowFirstStepsAreWarmUp) {
  const Recording rec = JobBuilder().Steps(2, 1500).Steps(30, 100).End(0);
  const RunLedger l = analysis::BuildLedger(rec, {});
  ExpectAddsUp(l);
  EXPECT_NEAR(Ms(l, "compile_warmup"), 3000, 1e-6);
  EXPECT_NEAR(Ms(l, "productive"), 3000, 1e-6);
  EXPECT_EQ(l.Find("compile_warmup")->count, 2);
}

TEST(Ledger, MarkersAloneLeaveStartAndEndUnknown) {
  Recording rec = JobBuilder(5000).Steps(10, 100).End(0);
  rec.job_span = {};
  rec.exit_code.reset();
  const RunLedger l = analysis::BuildLedger(rec, {});
  ASSERT_TRUE(l.valid);
  ExpectAddsUp(l);
  EXPECT_EQ(l.span_source, "first to last step marker");
  EXPECT_FALSE(l.Find("startup")->known);
  EXPECT_FALSE(l.Find("teardown")->known);
  EXPECT_FALSE(l.Find("lost_work")->known);
  EXPECT_FALSE(l.Find("checkpoint_save")->known);
  EXPECT_FALSE(l.Find("data_wait")->known);  // no data phase marked
  EXPECT_NEAR(Ms(l, "productive"), 1000, 1e-6);
  EXPECT_FALSE(analysis::BuildLedger(Recording{}, {}).valid);
}

TEST(Ledger, GpuHoursArePricedAndProcessesAveraged) {
  // Two processes (one per GPU): one waits for data half of each step.
  JobBuilder a;
  a.Steps(10, 100, 0, 1);
  JobBuilder b;
  b.Steps(10, 100, 50, 2);
  Recording rec = a.End(0);
  for (const auto& s : b.rec.marked_steps) rec.marked_steps.push_back(s);
  RunLedger l = analysis::BuildLedger(rec, {2.0, "2 GPUs the job used"});
  EXPECT_EQ(l.unit, "gpu_hours");
  EXPECT_NEAR(l.total, 2.0 * 1.0 / 3600.0, 1e-12);
  EXPECT_NEAR(l.Find("data_wait")->share, 0.25, 1e-9);
  EXPECT_NEAR(l.goodput, 0.75, 1e-9);
  analysis::PriceLedger(l, 3.6, "--price-per-gpu-hour");
  EXPECT_NEAR(l.Find("productive")->dollars, 0.75 * 2.0 / 3600.0 * 3.6, 1e-12);
  EXPECT_TRUE(std::isnan(l.Find("host_stall")->dollars));
}

TEST(Ledger, JobGpusCountMigInstancesByTheirShare) {
  DeviceMetricAnalysis parent, one, two, unused;
  parent.mig_mode = true;
  one.mig_instance = two.mig_instance = true;
  one.board_share = 3.0 / 7, two.board_share = 2.0 / 7;
  unused.job_use = "not_used";
  const auto gpus = analysis::JobGpus({parent, one, two, unused});
  EXPECT_NEAR(gpus.gpus, 5.0 / 7, 1e-12);
  EXPECT_NE(gpus.source.find("1 it did not use"), std::string::npos) << gpus.source;
}

/// Markers in time order, one process and thread.
Marker At(double ms, MarkerKind kind, int64_t step = 0, uint16_t phase = 0) {
  Marker m;
  m.t_ns = static_cast<TimeNs>(ms * kMs);
  m.pid = 7;
  m.tid = 7;
  m.kind = kind;
  m.step = step;
  m.phase = phase;
  return m;
}

TEST(Ledger, StepBuilderKeepsTheJobsPhasesOutOfItsSteps) {
  using K = MarkerKind;
  const auto marked = BuildMarkedSteps({
      At(0, K::kPhaseBegin, 0, GPUTRIAGE_PHASE_DATA), At(10, K::kPhaseEnd, 0, GPUTRIAGE_PHASE_DATA),
      At(10, K::kStepBegin, 0), At(40, K::kPhaseBegin, 0, GPUTRIAGE_PHASE_CHECKPOINT),
      At(50, K::kPhaseEnd, 0, GPUTRIAGE_PHASE_CHECKPOINT), At(100, K::kStepEnd, 0),
      // Between steps: a checkpoint and an evaluation are the job's, not the next step's.
      At(100, K::kPhaseBegin, 0, GPUTRIAGE_PHASE_CHECKPOINT), At(300, K::kPhaseEnd, 0, GPUTRIAGE_PHASE_CHECKPOINT),
      At(300, K::kPhaseBegin, 0, GPUTRIAGE_PHASE_EVAL), At(450, K::kPhaseEnd, 0, GPUTRIAGE_PHASE_EVAL),
      At(450, K::kPhaseBegin, 0, GPUTRIAGE_PHASE_DATA), At(460, K::kPhaseEnd, 0, GPUTRIAGE_PHASE_DATA),
      At(460, K::kStepBegin, 1), At(550, K::kStepEnd, 1)});
  ASSERT_EQ(marked.steps.size(), 2u);
  EXPECT_EQ(marked.steps[0].phase_ns[GPUTRIAGE_PHASE_CHECKPOINT], 10 * kMs);  // inside its step
  EXPECT_EQ(marked.steps[1].span.start, 450 * kMs);  // its data wait, not the checkpoint
  EXPECT_EQ(marked.steps[1].phase_ns[GPUTRIAGE_PHASE_CHECKPOINT], 0);
  ASSERT_EQ(marked.run_phases.size(), 2u);
  EXPECT_EQ(marked.run_phases[0].phase, GPUTRIAGE_PHASE_CHECKPOINT);
  EXPECT_EQ(marked.run_phases[0].span.duration(), 200 * kMs);
  EXPECT_EQ(marked.run_phases[1].phase, GPUTRIAGE_PHASE_EVAL);
  EXPECT_EQ(marked.unassigned_phases, 0);
}


/// The job as an agent sees it: every `tick_ms` the steps and phases that ended
/// a hold ago arrive (as the step builder releases them), and the time before
/// anything still open is settled. Returns the live ledger's ms per bucket.
std::map<std::string, double> LiveMs(const Recording& rec, double tick_ms, double hold_ms) {
  analysis::MarkedLedger live(rec.job_span.start);
  std::vector<bool> step_sent(rec.marked_steps.size()), phase_sent(rec.run_phases.size());
  const TimeNs tick = static_cast<TimeNs>(tick_ms * kMs), hold = static_cast<TimeNs>(hold_ms * kMs);
  for (TimeNs now = rec.job_span.start + tick; now < rec.job_span.end; now += tick) {
    std::vector<MarkedStep> steps;
    std::vector<RunPhase> phases;
    TimeNs settled = now;
    for (size_t i = 0; i < rec.marked_steps.size(); ++i) {
      const auto& s = rec.marked_steps[i];
      if (step_sent[i] || s.span.start >= now) continue;
      if (s.span.end <= now - hold) {
        steps.push_back(s);
        step_sent[i] = true;
      } else {
        settled = std::min(settled, s.span.start);  // open, or held
      }
    }
    for (size_t i = 0; i < rec.run_phases.size(); ++i) {
      const auto& p = rec.run_phases[i];
      if (phase_sent[i] || p.span.start >= now) continue;
      if (p.span.end <= now) {
        phases.push_back(p);
        phase_sent[i] = true;
      } else {
        settled = std::min(settled, p.span.start);
      }
    }
    live.Add(std::move(steps), std::move(phases));
    live.Advance(settled);
  }
  std::vector<MarkedStep> steps;
  std::vector<RunPhase> phases;
  for (size_t i = 0; i < rec.marked_steps.size(); ++i)
    if (!step_sent[i]) steps.push_back(rec.marked_steps[i]);
  for (size_t i = 0; i < rec.run_phases.size(); ++i)
    if (!phase_sent[i]) phases.push_back(rec.run_phases[i]);
  live.Add(std::move(steps), std::move(phases));
  live.End(rec.job_span.end);
  std::map<std::string, double> out;
  for (size_t b = 0; b < live.seconds().size(); ++b) out[analysis::LedgerBucketNames()[b]] = live.seconds()[b] * 1000;
  return out;
}

/// The run's ledger and the live one agree on every bucket the agent shows.
void ExpectLiveMatchesRun(const Recording& rec, double tick_ms, double hold_ms) {
  const RunLedger run = analysis::BuildLedger(rec, {});
  ASSERT_TRUE(run.valid);
  const auto live = LiveMs(rec, tick_ms, hold_ms);
  double total = 0;
  for (const auto& [name, ms] : live) total += ms;
  EXPECT_NEAR(total, run.wall_hours * 3600 * 1000, 1e-3) << "tick " << tick_ms;
  for (size_t b = 0; b < analysis::LedgerBucketNames().size(); ++b) {
    const std::string& name = analysis::LedgerBucketNames()[b];
    if (!analysis::MarkedLedger::Shows(static_cast<int>(b))) {
      EXPECT_EQ(live.at(name), 0) << name;
      continue;
    }
    EXPECT_NEAR(live.at(name), Ms(run, name.c_str()), 1e-3) << name << " at a tick of " << tick_ms << " ms";
  }
}

TEST(LiveLedger, AJobAccountedAsItRunsEndsWithTheRunsLedger) {
  const Recording rec = JobBuilder(1000)
                            .Wait(2000)
                            .Phase(GPUTRIAGE_PHASE_RESTORE, 400)
                            .Phase(GPUTRIAGE_PHASE_COMPILE, 600)
                            .Steps(10, 100, 20)
                            .Phase(GPUTRIAGE_PHASE_CHECKPOINT, 500)
                            .Wait(30)
                            .Steps(10, 100, 20)
                            .Phase(GPUTRIAGE_PHASE_EVAL, 300)
                            .Wait(5000)
                            .Steps(5, 100, 20)
                            .End(700);
  // Ticks finer and coarser than a step, and than the idle gap's threshold.
  for (double tick : {7.0, 50.0, 230.0, 1000.0}) ExpectLiveMatchesRun(rec, tick, 500);
}

TEST(LiveLedger, WarmUpStepsAndShortGapsAsTheRunsLedgerDraws) {
  // Slow first steps (warm-up), gaps under the idle threshold between steps,
  // a long one (idle), steps that a tick cuts in two.
  const Recording rec = JobBuilder(0)
                            .Wait(300)
                            .Steps(3, 1500, 100)
                            .Steps(20, 100, 30)
                            .Wait(150)
                            .Steps(20, 100, 30)
                            .Wait(4000)
                            .Steps(8, 100, 30)
                            .End(200);
  for (double tick : {13.0, 100.0, 777.0}) ExpectLiveMatchesRun(rec, tick, 300);
  const auto live = LiveMs(rec, 100, 300);
  EXPECT_NEAR(live.at("compile_warmup"), 3 * 1500, 1e-3);
  EXPECT_NEAR(live.at("idle"), 4000, 1e-3);
  EXPECT_NEAR(live.at("between_steps"), 150, 1e-3);
}

TEST(LiveLedger, AnOpenGapIsIdleOnceLongEnoughAndCountersNeverShrink) {
  // Steps, then nothing for 20 s while the job lives: the agent counts it as idle
  // as it grows (its counters never wait for the gap to close).
  analysis::MarkedLedger live(0);
  std::vector<MarkedStep> steps;
  for (int i = 0; i < 10; ++i) {
    MarkedStep s;
    s.number = i;
    s.pid = 1;
    s.span = {i * 100 * kMs, (i + 1) * 100 * kMs};
    steps.push_back(s);
  }
  live.Add(steps, {});
  live.Advance(1000 * kMs);
  EXPECT_NEAR(live.seconds()[0], 1.0, 1e-9);  // productive
  double idle_before = 0;
  for (TimeNs t = 1100; t <= 21000; t += 100) {
    live.Advance(t * kMs);
    const double idle = live.seconds()[10];
    EXPECT_GE(idle, idle_before);
    idle_before = idle;
  }
  // 1 s of gap is the threshold (3 median steps is less): then all 20 s of it.
  EXPECT_NEAR(idle_before, 20.0, 1e-9);
  EXPECT_EQ(live.accounted_until(), 21000 * kMs);
  // A short gap is not counted until it closes.
  analysis::MarkedLedger short_gap(0);
  short_gap.Add(steps, {});
  short_gap.Advance(1500 * kMs);
  EXPECT_EQ(short_gap.accounted_until(), 1000 * kMs);
}

TEST(LiveLedger, UtilizationIdlePhasesAndTheRest) {
  analysis::UtilizationLedger u;
  auto run = [&](int seconds, double percent) {
    for (int i = 0; i < seconds * 10; ++i) u.Add(100 * kMs, percent);
  };
  run(20, 90);
  run(15, 0);   // an idle phase
  run(10, 90);
  run(5, 3);    // a dip, too short
  run(30, 80);
  run(12, 2);   // idle, still open at the end
  u.End();
  EXPECT_NEAR(u.seconds()[10], 15 + 12, 1e-6);  // idle
  EXPECT_NEAR(u.seconds()[15], 20 + 10 + 5 + 30, 1e-6);  // unsplit
  analysis::UtilizationLedger short_end;
  for (int i = 0; i < 50; ++i) short_end.Add(100 * kMs, 0);  // 5 s low, then the job ends
  short_end.End();
  EXPECT_NEAR(short_end.seconds()[10], 0, 1e-9);
  EXPECT_NEAR(short_end.seconds()[15], 5, 1e-6);
}

TEST(Ledger, AMetricLogShowsItsIdlePhasesAndLeavesTheRestUnsplit) {
  DeviceMetricAnalysis d;
  d.hours = 1.0;
  d.idle_phases.count = 3;
  d.idle_phases.total_ns = 900 * kNsPerS;  // 15 minutes
  DeviceMetricAnalysis other = d;
  other.idle_phases = {};
  const RunLedger l = analysis::BuildMetricLedger({d, other}, analysis::JobGpus({d, other}));
  ASSERT_TRUE(l.valid);
  EXPECT_EQ(l.unit, "gpu_hours");
  EXPECT_NEAR(l.total, 2.0, 1e-12);
  EXPECT_NEAR(l.Find("idle")->hours, 0.25, 1e-12);
  EXPECT_NEAR(l.Find("unsplit")->hours, 1.75, 1e-12);
  EXPECT_FALSE(l.Find("productive")->known);
  EXPECT_TRUE(std::isnan(l.goodput));
  ExpectAddsUp(l);
  // No idle phase: nothing a metric log can tell apart, no ledger.
  EXPECT_FALSE(analysis::BuildMetricLedger({other}, analysis::JobGpus({other})).valid);
}


TEST(LedgerVerdicts, CheckpointsTakingAShareOfTheJobPointAtAsyncSavingWithTheirTime) {
  // 10 cycles of 20 steps of 100 ms and a 400 ms checkpoint: saves are 400 of
  // 2,400 ms of each cycle (about 16 % of the job).
  JobBuilder job(0);
  job.Wait(500);
  for (int i = 0; i < 10; ++i) job.Steps(20, 100).Phase(GPUTRIAGE_PHASE_CHECKPOINT, 400);
  gputriage::Run run;
  run.recordings.push_back(job.End(100));
  const Diagnosis d = Diagnose(run, DiagnoseOptions{});
  const RunLedger& l = d.recordings[0].ledger;
  ASSERT_TRUE(l.valid);
  const Finding* f = nullptr;
  for (const auto& x : d.findings)
    if (x.verdict == "checkpoint_overhead") f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->origin, "ledger");
  const double total_ms = 500 + 10 * 2400 + 100, save_ms = 4000, productive_ms = 20000;
  EXPECT_NEAR(f->evidence[0].value, 100 * save_ms / total_ms, 1e-6);
  EXPECT_EQ(f->severity, Severity::kHigh);  // >= 15 %
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_EQ(f->gain->metric, "goodput_percent");
  EXPECT_NEAR(f->gain->current, 100 * productive_ms / total_ms, 1e-6);
  EXPECT_NEAR(f->gain->best, 100 * productive_ms / (total_ms - save_ms), 1e-6);          // all of it hidden
  EXPECT_NEAR(f->gain->worst, 100 * productive_ms / (total_ms - save_ms / 2), 1e-6);     // half as often
  EXPECT_NEAR(f->gain->expected, 100 * productive_ms / (total_ms - 0.75 * save_ms), 1e-6);
  EXPECT_NEAR(f->gain->speedup_percent, 100 * (total_ms / (total_ms - 0.75 * save_ms) - 1), 1e-6);
  EXPECT_EQ(f->gain->bounded_by, "startup");  // the next largest badput bucket (500 ms)

  // Under the threshold, or a single save: nothing to say.
  JobBuilder light(0);
  for (int i = 0; i < 10; ++i) light.Steps(40, 100).Phase(GPUTRIAGE_PHASE_CHECKPOINT, 100);
  gputriage::Run light_run;
  light_run.recordings.push_back(light.End(0));
  for (const auto& x : Diagnose(light_run, DiagnoseOptions{}).findings) EXPECT_NE(x.verdict, "checkpoint_overhead");
  JobBuilder once(0);
  once.Steps(20, 100).Phase(GPUTRIAGE_PHASE_CHECKPOINT, 2000).Steps(20, 100);
  gputriage::Run once_run;
  once_run.recordings.push_back(once.End(0));
  for (const auto& x : Diagnose(once_run, DiagnoseOptions{}).findings) EXPECT_NE(x.verdict, "checkpoint_overhead");
}

TEST(LedgerVerdicts, EvaluationTakingTheTrainingGpus) {
  JobBuilder job(0);
  for (int i = 0; i < 5; ++i) job.Steps(30, 100).Phase(GPUTRIAGE_PHASE_EVAL, 1500);
  gputriage::Run run;
  run.recordings.push_back(job.End(0));
  const Diagnosis d = Diagnose(run, DiagnoseOptions{});
  const Finding* f = nullptr;
  for (const auto& x : d.findings)
    if (x.verdict == "evaluation_overhead") f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->evidence[0].value, 100.0 * 7500 / 22500, 1e-6);
  EXPECT_EQ(f->severity, Severity::kHigh);  // >= 30 %
  EXPECT_NEAR(f->gain->best, 100.0, 1e-6);   // evaluated elsewhere: every remaining instant is a step
}


TEST(Ledger, ATraceNamesItsPhasesWithRecordFunction) {
  // Three profiled steps of 10 ms (a 6 ms kernel each), then an evaluation and
  // a checkpoint the job wrapped in record_function, then a fourth step.
  std::string events;
  auto add = [&](const std::string& e) { events += (events.empty() ? "" : ",\n") + e; };
  int64_t t = 1000;
  auto step = [&](int n) {
    add(R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" + std::to_string(n) + R"(", "pid": 9, "tid": 9, "ts": )" +
        std::to_string(t) + R"(, "dur": 10000})");
    add(R"({"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": )" + std::to_string(t + 2000) +
        R"(, "dur": 6000, "args": {"device": 0, "stream": 7, "correlation": )" + std::to_string(n) + R"(}})");
    t += 10000;
  };
  step(1), step(2), step(3);
  add(R"({"ph": "X", "cat": "user_annotation", "name": "evaluate", "pid": 9, "tid": 9, "ts": )" + std::to_string(t) + R"(, "dur": 20000})");
  t += 20000;
  add(R"({"ph": "X", "cat": "user_annotation", "name": "save_checkpoint#3", "pid": 9, "tid": 9, "ts": )" + std::to_string(t) + R"(, "dur": 5000})");
  t += 5000;
  step(4);
  const std::string trace = R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Tesla V100-SXM2-16GB", "computeMajor": 7, "computeMinor": 0, "numSms": 80}],
"traceEvents": [)" + events + "]}";
  auto rec = ImportKinetoTraceFromMemory("phases.json", trace);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  gputriage::Run run;
  run.recordings.push_back(std::move(*rec));
  const Diagnosis d = Diagnose(run, DiagnoseOptions{});
  const RunLedger& l = d.recordings[0].ledger;
  ASSERT_TRUE(l.valid);
  ExpectAddsUp(l);
  EXPECT_NEAR(l.wall_hours * 3600 * 1000, 65.0, 0.01);  // 4 steps, 25 ms of phases
  EXPECT_NEAR(l.Find("evaluation")->share, 20.0 / 65, 0.01);
  EXPECT_NEAR(l.Find("checkpoint_save")->share, 5.0 / 65, 0.01);
  EXPECT_TRUE(l.Find("evaluation")->known);
  EXPECT_FALSE(l.Find("checkpoint_restore")->known);
  EXPECT_NEAR(l.Find("productive")->share, 4 * 6.0 / 65, 0.01);
  EXPECT_EQ(analysis::AnnotationPhase("Validation: epoch 3"), GPUTRIAGE_PHASE_EVAL);
  EXPECT_EQ(analysis::AnnotationPhase("gputriage.restore"), GPUTRIAGE_PHASE_RESTORE);
  EXPECT_EQ(analysis::AnnotationPhase("ProfilerStep#4"), 0);
  EXPECT_EQ(analysis::AnnotationPhase("aten::evaluate_something"), 0);
}

}  // namespace
}  // namespace gputriage
