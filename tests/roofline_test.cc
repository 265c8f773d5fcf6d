// The per-operator roofline and cross-rank collective skew, on hand-built
// recordings whose answer is known by construction.
#include <gtest/gtest.h>

#include <functional>

#include "gputriage/diagnosis.h"
#include "gputriage/report.h"
#include "src/report/chart_data.h"
#include "src/analysis/collective_skew.h"
#include "src/analysis/roofline.h"

namespace gputriage {
namespace {

constexpr TimeNs us = kNsPerUs;
constexpr TimeNs ms = kNsPerMs;

MatrixOpShapes Shapes(Recording& rec, const char* op, const char* dtype, std::vector<std::vector<int64_t>> inputs,
                      int64_t external_id) {
  MatrixOpShapes s;
  s.external_id = external_id;
  s.name = rec.names.Intern(op);
  s.dtype = rec.names.Intern(dtype);
  s.inputs = static_cast<uint8_t>(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    s.rank[i] = static_cast<uint8_t>(inputs[i].size());
    for (size_t k = 0; k < inputs[i].size(); ++k) s.dims[i][k] = inputs[i][k];
  }
  return s;
}

Recording H100Recording() {
  Recording rec;
  Device d;
  d.id = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.vendor = Vendor::kNvidia;
  d.compute_major = 9;
  d.num_sms = 132;
  rec.devices.push_back(d);
  rec.format = "kineto";
  return rec;
}

/// Ten 1 ms steps, each one GEMM of `m` rows against a 4096 x 4096 bf16 weight
/// filling 950 µs: the GPU is 95 % busy. `kernel`: the GEMM kernel's name.
Recording GemmSteps(int64_t m, const char* kernel) {
  Recording rec = H100Recording();
  for (int s = 0; s < 10; ++s) {
    const TimeNs base = s * ms;
    rec.steps.push_back({s, {base, base + ms}});
    RuntimeCall launch;
    launch.time = {base + 10 * us, base + 15 * us};
    launch.name = rec.names.Intern("cudaLaunchKernel");
    launch.correlation = s + 1;
    launch.kind = RuntimeCallKind::kKernelLaunch;
    rec.runtime_calls.push_back(launch);
    KernelActivity k;
    k.time = {base + 30 * us, base + 980 * us};
    k.name = rec.names.Intern(kernel);
    k.device = 0;
    k.stream = 7;
    k.correlation = s + 1;
    k.external_id = 100 + s;
    rec.kernels.push_back(k);
    CpuSpan op;
    op.time = {base + 5 * us, base + 20 * us};
    op.name = rec.names.Intern("aten::mm");
    op.external_id = 100 + s;
    op.first_input_type = rec.names.Intern("c10::BFloat16");
    rec.cpu_spans.push_back(op);
    rec.matrix_shapes.push_back(Shapes(rec, "aten::mm", "c10::BFloat16", {{m, 4096}, {4096, 4096}}, 100 + s));
  }
  return rec;
}

const Finding* FindVerdict(const Diagnosis& d, const char* verdict) {
  for (const auto& f : d.findings)
    if (f.verdict == verdict) return &f;
  return nullptr;
}

TEST(Roofline, GemmAndAttentionCostsFromShapes) {
  Recording rec;
  analysis::OpCost c;
  // linear: input [2, 3, 64] (M = 6), weight [128, 64], bias [128], bf16.
  ASSERT_TRUE(analysis::MatrixOpCost("aten::linear", Shapes(rec, "aten::linear", "c10::BFloat16", {{2, 3, 64}, {128, 64}, {128}}, 1),
                                     2, c));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 6 * 64 * 128);
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * (6 * 64 + 6 * 128 + 128 + 64 * 128));
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2.0 * 64 * 128);
  // addmm: bias [N], A [M, K], B [K, N]
  ASSERT_TRUE(analysis::MatrixOpCost("aten::addmm", Shapes(rec, "aten::addmm", "float", {{32}, {16, 8}, {8, 32}}, 1), 4, c));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 16 * 8 * 32);
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * (16 * 8 + 16 * 32 + 32 + 8 * 32));
  // SDPA decode: one query token against 1024 keys, 8 heads of 128.
  ASSERT_TRUE(analysis::MatrixOpCost(
      "aten::scaled_dot_product_attention",
      Shapes(rec, "aten::scaled_dot_product_attention", "c10::BFloat16", {{4, 8, 1, 128}, {4, 8, 1024, 128}, {4, 8, 1024, 128}}, 1),
      2, c));
  EXPECT_DOUBLE_EQ(c.flops, 4.0 * 4 * 8 * 1 * 1024 * 128);
  EXPECT_LT(c.flops / c.bytes, 2.0);  // about one FLOP per byte: far below any ridge point
  // Mismatched inner dimensions are not a GEMM the model believes.
  EXPECT_FALSE(analysis::MatrixOpCost("aten::mm", Shapes(rec, "aten::mm", "float", {{4, 8}, {9, 2}}, 1), 4, c));
  EXPECT_EQ(analysis::DtypeBytes("c10::Float8_e4m3fn"), 1);
  EXPECT_EQ(analysis::DtypeBytes("some::Unknown"), 0);
}

TEST(Roofline, BusyDecodeGemmsAreMemoryBoundNotAtTheComputeLimit) {
  // M = 4: 2*4*4096*4096 FLOPs over 2*(4*4096*2 + 4096^2) bytes = 4 FLOP/B, against
  // an H100's bf16 ridge of 989.4 TFLOP/s / 3350 GB/s = 295 FLOP/B.
  gputriage::Run run;
  run.recordings.push_back(GemmSteps(4, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"));
  const Diagnosis d = Diagnose(run);
  const Roofline& r = d.recordings[0].roofline;
  ASSERT_TRUE(r.available) << r.unavailable_reason;
  EXPECT_NEAR(r.memory_bound_percent_of_checked, 100.0, 1e-9);
  EXPECT_NEAR(r.intensity_p50, 2.0 * 4 * 4096 * 4096 / (2.0 * (4 * 4096 * 2 + 4096.0 * 4096)), 1e-6);
  EXPECT_NEAR(r.ridge_p50, 989.4e12 / 3350e9, 1e-6);
  EXPECT_EQ(FindVerdict(d, "at_compute_limit"), nullptr);
  const Finding* f = FindVerdict(d, "memory_bound");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->gain.has_value());  // 8-bit weights by Amdahl over the memory-bound GEMM time
  EXPECT_LT(f->gain->expected, f->gain->current);
  EXPECT_LE(f->gain->best, f->gain->expected);
  EXPECT_GE(f->gain->worst, f->gain->expected);
  EXPECT_EQ(f->gain->bounded_by, "memory_bandwidth");
}

TEST(Roofline, BusyPrefillGemmsStayComputeBound) {
  gputriage::Run run;
  run.recordings.push_back(GemmSteps(8192, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"));
  const Diagnosis d = Diagnose(run);
  EXPECT_NEAR(d.recordings[0].roofline.memory_bound_percent_of_checked, 0.0, 1e-9);
  EXPECT_EQ(FindVerdict(d, "memory_bound"), nullptr);
  EXPECT_NE(FindVerdict(d, "at_compute_limit"), nullptr);
}

TEST(Roofline, MangledKernelOfABf16MatmulIsABf16Gemm) {
  // A custom decode kernel whose name says nothing: the aten::mm that launched it
  // makes it a matrix kernel in its input's format, not elementwise work.
  gputriage::Run run;
  run.recordings.push_back(GemmSteps(4, "_Z19fused_w4a16_kernelPKvS0_Pvii"));
  const Diagnosis d = Diagnose(run);
  const auto& p = d.recordings[0].precision;
  EXPECT_EQ(p.matrix_total_ns, p.kernel_total_ns);
  EXPECT_EQ(p.memory_bound_ns, 0);
  EXPECT_EQ(p.matrix_ns[static_cast<int>(Precision::kBf16)], p.matrix_total_ns);
  EXPECT_EQ(FindVerdict(d, "low_precision"), nullptr);
  EXPECT_NE(FindVerdict(d, "memory_bound"), nullptr);
}

TEST(Roofline, UnknownGpuHasNoRidgePoint) {
  Recording rec = GemmSteps(4, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
  rec.devices[0].name = "Imaginary Accelerator 9000";
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  EXPECT_FALSE(d.recordings[0].roofline.available);
  EXPECT_NE(d.recordings[0].roofline.unavailable_reason.find("no published peaks"), std::string::npos);
  // Busy 95 % with no peak to compare against: not "at the compute limit" (these
  // decode GEMMs are memory-bound on any GPU), but efficiency unknown, saying what would tell.
  EXPECT_EQ(FindVerdict(d, "at_compute_limit"), nullptr);
  const Finding* f = FindVerdict(d, "efficiency_unknown");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("not in the spec table"), std::string::npos) << f->title;
  EXPECT_NE(f->to_separate.find("record_shapes=True"), std::string::npos);
}

TEST(Roofline, Fp32GemmsOnAGpuMissingFromTheSpecTableStillGetAGain) {
  // An RTX 3080 (cc 8.6, not in the spec table) running fp32 SIMT GEMMs: tensor cores
  // exist from cc 7.0, so low_precision holds; its gain comes from the replay with the
  // published speedup range, uncapped (the peak ratio is unknown), not from nothing.
  Recording rec = GemmSteps(512, "ampere_sgemm_128x64_nn");
  rec.devices[0].name = "NVIDIA GeForce RTX 3080";
  rec.devices[0].compute_major = 8;
  rec.devices[0].compute_minor = 6;
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  const Finding* f = FindVerdict(d, "low_precision");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->gain.has_value());  // the host paces these steps (no sync): the replay shows how little it gains
  EXPECT_LE(f->gain->best, f->gain->expected);
  EXPECT_LE(f->gain->expected, f->gain->current);
  EXPECT_FALSE(f->gain->bounded_by.empty());
  EXPECT_NE(f->gain->basis.find("not in the spec table"), std::string::npos) << f->gain->basis;
}

TEST(Roofline, AGpuIdleMostOfTheStepIsNeverLeftSilent) {
  // One 300 µs GEMM a 1 ms step: busy 30 %, above idle's line, below launch_bound's
  // kernel count, no loader: no rule's pattern, yet the GPU waits 70 % of the step.
  Recording rec = GemmSteps(4096, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
  for (auto& k : rec.kernels) k.time.end = k.time.start + 300 * us;
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  const Finding* f = FindVerdict(d, "underutilized");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kModerate);
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_NEAR(f->gain->best, 0.3, 1e-6);  // the step down to the GPU's own work
  EXPECT_NEAR(f->gain->worst, 1.0, 1e-6);
  EXPECT_EQ(FindVerdict(d, "at_compute_limit"), nullptr);
}

// ---- Cross-rank collective skew --------------------------------------------

/// One rank of a 4-rank run: ten 20 ms steps, each compute then an all-reduce
/// that ends for everyone 2 ms after the last rank enters it. `arrive(step)`: the
/// rank's arrival at the all-reduce, in ms after the step's start; `clock_ms`: an
/// offset of this rank's clock.
Recording RankTraceOf(int rank, const std::function<double(int)>& arrive, const std::function<double(int)>& last,
                      double clock_ms = 0) {
  Recording rec = H100Recording();
  rec.rank = rank;
  rec.world_size = 4;
  const TimeNs t0 = 1'700'000'000'000'000'000 + static_cast<TimeNs>(clock_ms * 1e6);
  for (int s = 0; s < 10; ++s) {
    const TimeNs base = t0 + s * 20 * ms;
    rec.steps.push_back({s, {base, base + 20 * ms}});
    const TimeNs arrival = base + static_cast<TimeNs>(arrive(s) * 1e6);
    const TimeNs end = base + static_cast<TimeNs>((last(s) + 2.0) * 1e6);
    KernelActivity compute;
    compute.time = {base + 100 * us, arrival - 50 * us};
    compute.name = rec.names.Intern("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
    compute.device = 0;
    compute.stream = 7;
    compute.correlation = 2 * s + 1;
    rec.kernels.push_back(compute);
    KernelActivity comm;
    comm.time = {arrival, end};
    comm.name = rec.names.Intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
    comm.device = 0;
    comm.stream = 20;
    comm.correlation = 2 * s + 2;
    rec.kernels.push_back(comm);
  }
  return rec;
}

TEST(CollectiveSkew, PersistentStragglerIsNamedWithItsCause) {
  // Rank 2 computes 5 ms longer every step; the others reach the all-reduce at 10 ms.
  const auto arrive = [](int rank) { return [rank](int) { return rank == 2 ? 15.0 : 10.0; }; };
  const auto last = [](int) { return 15.0; };
  gputriage::Run run;
  for (int r = 0; r < 4; ++r) run.recordings.push_back(RankTraceOf(r, arrive(r), last));
  const Diagnosis d = Diagnose(run);
  ASSERT_EQ(d.collective_skew.size(), 1u);
  const CollectiveSkew& s = d.collective_skew[0];
  ASSERT_TRUE(s.available) << s.unavailable_reason;
  EXPECT_EQ(s.collectives, 10);
  EXPECT_EQ(s.straggler_rank, 2);
  EXPECT_TRUE(s.persistent);
  EXPECT_EQ(s.cause, "compute");
  // Three ranks wait 5 ms per step, one none: 3.75 ms mean; transfer 2 ms each.
  EXPECT_NEAR(s.wait_ms_per_step, 3.75, 1e-6);
  EXPECT_NEAR(s.transfer_ms_per_step, 2.0, 1e-6);
  EXPECT_NEAR(s.saving_ms_per_step, 5.0, 1e-6);
  const Finding* f = FindVerdict(d, "straggler_rank");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->severity, Severity::kHigh);  // a 5 ms gap of a 20 ms step
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_NEAR(f->gain->expected, 15.0, 1e-6);
  EXPECT_EQ(FindVerdict(d, "load_imbalance"), nullptr);
}

TEST(CollectiveSkew, OneProfiledStepNamesTheLateRankWithoutCallingItPersistent) {
  // The same late rank 2 in all ten all-reduces, but profiled as one step (a single
  // iteration holding many collectives, as DLRM's et_replay inputs do): the rank is
  // named, at most moderate, and the finding says one step cannot tell a slow rank
  // from a one-off delay.
  const auto arrive = [](int rank) { return [rank](int) { return rank == 2 ? 15.0 : 10.0; }; };
  const auto last = [](int) { return 15.0; };
  gputriage::Run run;
  for (int r = 0; r < 4; ++r) {
    Recording rec = RankTraceOf(r, arrive(r), last);
    rec.steps = {{0, {rec.steps.front().host.start, rec.steps.back().host.end}}};
    run.recordings.push_back(std::move(rec));
  }
  const Diagnosis d = Diagnose(run);
  const Finding* f = FindVerdict(d, "straggler_rank");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->severity, Severity::kModerate);
  EXPECT_NE(f->detail.find("1 profiled step"), std::string::npos) << f->detail;
  EXPECT_NE(f->to_separate.find("at least 3 steps"), std::string::npos);
}

TEST(CollectiveSkew, TheSameRankLastByChanceIsNoStraggler) {
  // Two ranks whose lateness is jitter: rank 1 last in 3 of the 5 late all-reduces,
  // rank 0 in 2 (the corpus's re-recorded no-stall control). One of two ranks leads
  // 3 of 5 half the time by chance: not persistent, no straggler named.
  const auto arrive = [](int rank) {
    return [rank](int s) {
      const bool late = rank == 1 ? (s == 0 || s == 2 || s == 4) : (s == 1 || s == 7);
      return late ? 13.0 : 10.0;
    };
  };
  const auto last = [](int) { return 13.0; };
  gputriage::Run run;
  for (int r = 0; r < 2; ++r) {
    Recording rec = RankTraceOf(r, arrive(r), last);
    rec.world_size = 2;
    run.recordings.push_back(std::move(rec));
  }
  const Diagnosis d = Diagnose(run);
  ASSERT_EQ(d.collective_skew.size(), 1u);
  const CollectiveSkew& s = d.collective_skew[0];
  EXPECT_EQ(s.with_late_rank, 5);
  EXPECT_FALSE(s.persistent) << s.straggler_chance;
  EXPECT_GT(s.straggler_chance, 0.05);
  EXPECT_EQ(FindVerdict(d, "straggler_rank"), nullptr);
}

TEST(CollectiveSkew, RanksAnalysedAsTheyAreReadJudgeTheSameWithoutTheirEvents) {
  // The ranks of a large run are analysed as they are read and their events
  // dropped (AnalyzeAndDropEvents): the cross-rank analysis, the report and the
  // charts read the summaries and must say exactly what they say from the events.
  const auto arrive = [](int rank) { return [rank](int step) { return rank == 2 ? 15.0 : 10.0 + 0.1 * step; }; };
  const auto last = [](int) { return 15.0; };
  gputriage::Run whole, summarised;
  for (int r = 0; r < 4; ++r) {
    whole.recordings.push_back(RankTraceOf(r, arrive(r), last));
    summarised.recordings.push_back(RankTraceOf(r, arrive(r), last));
    Recording& rec = summarised.recordings.back();
    rec.rank = -1;  // numbered after it was read, as ImportRun numbers traces without distributedInfo
    AnalyzeAndDropEvents(rec, 1);
    rec.rank = r;
    EXPECT_TRUE(rec.kernels.empty());
    ASSERT_NE(rec.analysis, nullptr);
    EXPECT_TRUE(rec.analysis->collectives.gathered);
    EXPECT_EQ(rec.analysis->collectives.device.size(), 10u);
  }
  const Diagnosis a = Diagnose(whole), b = Diagnose(summarised);
  ASSERT_EQ(b.collective_skew.size(), 1u);
  EXPECT_EQ(b.collective_skew[0].straggler_rank, 2);
  EXPECT_EQ(b.collective_skew[0].cause, "compute");
  EXPECT_EQ(RenderJson(summarised, b), RenderJson(whole, a));
  EXPECT_EQ(RenderChartJson(summarised, b), RenderChartJson(whole, a));
  EXPECT_NE(RenderChartJson(summarised, b).find("\"busy\":{"), std::string::npos);
}

TEST(CollectiveSkew, LatenessThatMovesIsLoadImbalance) {
  const auto arrive = [](int rank) { return [rank](int step) { return step % 4 == rank ? 15.0 : 10.0; }; };
  const auto last = [](int) { return 15.0; };
  gputriage::Run run;
  for (int r = 0; r < 4; ++r) run.recordings.push_back(RankTraceOf(r, arrive(r), last));
  const Diagnosis d = Diagnose(run);
  ASSERT_EQ(d.collective_skew.size(), 1u);
  EXPECT_FALSE(d.collective_skew[0].persistent);
  EXPECT_EQ(FindVerdict(d, "straggler_rank"), nullptr);
  EXPECT_NE(FindVerdict(d, "load_imbalance"), nullptr);
}

TEST(CollectiveSkew, UnalignedClocksAreNotJudged) {
  // No rank is late, but rank 3's clock runs 40 ms ahead: its collectives start and
  // end 40 ms "later". Ends spread as much as starts: nothing is concluded.
  const auto arrive = [](int) { return [](int) { return 10.0; }; };
  const auto last = [](int) { return 10.0; };
  gputriage::Run run;
  for (int r = 0; r < 4; ++r) run.recordings.push_back(RankTraceOf(r, arrive(r), last, r == 3 ? 40.0 : 0.0));
  const Diagnosis d = Diagnose(run);
  ASSERT_EQ(d.collective_skew.size(), 1u);
  EXPECT_FALSE(d.collective_skew[0].available);
  EXPECT_EQ(FindVerdict(d, "straggler_rank"), nullptr);
  bool noted = false;
  for (const auto& n : d.notes) noted = noted || n.find("clocks are not aligned") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(CollectiveSkew, PointToPointIsNotASynchronisingCollective) {
  EXPECT_EQ(analysis::SynchronisingCollective("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"), "");
  EXPECT_EQ(analysis::SynchronisingCollective("ncclDevKernel_Broadcast_RING_LL"), "");
  EXPECT_EQ(analysis::SynchronisingCollective("gloo:all_reduce"), "all_reduce");
  EXPECT_EQ(analysis::SynchronisingCollective("ncclDevKernel_AllGather_RING_LL"), "all_gather");
}

}  // namespace
}  // namespace gputriage
