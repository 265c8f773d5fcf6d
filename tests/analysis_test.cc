// Analysis rules on small hand-built recordings, where the right answer is known
// by construction.
#include <gtest/gtest.h>

#include "gputriage/diagnosis.h"

namespace gputriage {
namespace {

constexpr TimeNs us = kNsPerUs;

KernelActivity Kernel(Recording& rec, const char* name, TimeNs start, TimeNs end, int64_t corr) {
  KernelActivity k;
  k.time = {start, end};
  k.name = rec.names.Intern(name);
  k.device = 0;
  k.stream = 7;
  k.correlation = corr;
  k.blocks_per_sm = 2.0f;
  k.est_occupancy_percent = 50.0f;
  return k;
}

RuntimeCall Launch(Recording& rec, TimeNs start, TimeNs end, int64_t corr) {
  RuntimeCall r;
  r.time = {start, end};
  r.name = rec.names.Intern("cudaLaunchKernel");
  r.correlation = corr;
  r.kind = RuntimeCallKind::kKernelLaunch;
  return r;
}

// One 1000 µs step:
//   host:   |--dataloader 0..400--| launch@400  launch@650
//   device:                         [k1 410..600]  [k2 660..1000]
// Idle: 0..400 data loader, 400..410 launch overhead, 600..650 host wait,
//       650..660 launch overhead.
/// An empty recording of one A100 (cc 8.0, 108 SMs), device 0.
Recording A100Recording() {
  Recording rec;
  Device d;
  d.id = 0;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.vendor = Vendor::kNvidia;
  d.compute_major = 8;
  d.num_sms = 108;
  rec.devices.push_back(d);
  return rec;
}

Recording InputBoundRecording() {
  Recording rec = A100Recording();
  rec.steps.push_back({1, {0, 1000 * us}});
  CpuSpan loader;
  loader.time = {0, 400 * us};
  loader.kind = CpuSpanKind::kDataLoader;
  loader.name = rec.names.Intern("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  rec.cpu_spans.push_back(loader);
  rec.runtime_calls.push_back(Launch(rec, 400 * us, 405 * us, 1));
  rec.runtime_calls.push_back(Launch(rec, 650 * us, 655 * us, 2));
  rec.kernels.push_back(Kernel(rec, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", 410 * us, 600 * us, 1));
  rec.kernels.push_back(Kernel(rec, "void at::native::vectorized_elementwise_kernel<4>(int)", 660 * us, 1000 * us, 2));
  return rec;
}

// Batch-1 inference: each 3 ms step the host issues 60 tiny kernels (5 µs, 4 %
// occupancy, a twentieth of the SMs with a block), one every 45 µs from Python; the
// GPU runs each the moment it arrives and then waits for the next.
Recording TinyKernelsRecording(int steps) {
  Recording rec = A100Recording();
  int64_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    const TimeNs base = s * 3000 * us;
    rec.steps.push_back({s, {base, base + 3000 * us}});
    for (int k = 0; k < 60; ++k) {
      const TimeNs t = base + 200 * us + k * 45 * us;
      rec.runtime_calls.push_back(Launch(rec, t, t + 5 * us, corr));
      KernelActivity kernel = Kernel(rec, "void at::native::vectorized_elementwise_kernel<4>(int)", t + 8 * us, t + 13 * us, corr);
      kernel.blocks_per_sm = 0.05f;
      kernel.est_occupancy_percent = 4.0f;
      rec.kernels.push_back(kernel);
      ++corr;
    }
  }
  return rec;
}

TEST(Diagnosis, RanksOfOneRunAreOneJob) {
  // Three ranks' traces of one run: two wait for data, one does not. One input_bound
  // finding names the ranks that show it and the one that differs.
  gputriage::Run run;
  for (int r = 0; r < 3; ++r) {
    Recording rec = InputBoundRecording();
    rec.rank = r;
    if (r == 2) rec.cpu_spans.clear();  // no DataLoader wait on rank 2
    run.recordings.push_back(std::move(rec));
  }
  const Diagnosis d = Diagnose(run);
  int input = 0;
  for (const auto& f : d.findings)
    if (f.verdict == "input_bound") {
      ++input;
      EXPECT_EQ(f.scope.rfind("ranks 0, 1 of 3", 0), 0u) << f.scope;
      EXPECT_NE(f.detail.find("not on ranks 2"), std::string::npos) << f.detail;
    }
  EXPECT_EQ(input, 1);
}

TEST(Diagnosis, TinyKernelsTheHostIssuesAreHostBoundNotIdle) {
  gputriage::Run run;
  run.recordings.push_back(TinyKernelsRecording(10));
  const Diagnosis d = Diagnose(run);
  bool launch = false, undersized = false;
  for (const auto& f : d.findings) {
    EXPECT_NE(f.verdict, "idle") << f.title;
    launch = launch || f.verdict == "launch_bound";
    undersized = undersized || f.verdict == "undersized_work";
  }
  EXPECT_TRUE(launch);
  EXPECT_TRUE(undersized);
  EXPECT_LT(d.recordings[0].gpu.busy_percent, 12.0);  // 300 µs of 3000
}

// Host gaps over one or two steps hold no steady state (warm-up looks the same):
// launch_bound stays low, promises no gain, and says what more steps would tell;
// over ten steps the same gaps decide.
TEST(Diagnosis, HostGapsOfOneOrTwoStepsDoNotDecide) {
  for (int steps : {1, 2, 10}) {
    gputriage::Run run;
    run.recordings.push_back(TinyKernelsRecording(steps));
    const Diagnosis d = Diagnose(run);
    const Finding* f = nullptr;
    for (const auto& x : d.findings)
      if (x.verdict == "launch_bound") f = &x;
    ASSERT_NE(f, nullptr) << steps << " steps";
    if (steps < 3) {
      EXPECT_EQ(f->severity, Severity::kLow) << steps;
      EXPECT_NE(f->detail.find("no steady state"), std::string::npos) << f->detail;
      EXPECT_NE(f->detail.find("3 or more steps after warm-up"), std::string::npos) << f->detail;
      ASSERT_TRUE(f->gain);
      EXPECT_DOUBLE_EQ(f->gain->expected, f->gain->current);
      EXPECT_LT(f->gain->best, f->gain->current);
    } else {
      EXPECT_GE(f->severity, Severity::kModerate);
      EXPECT_LT(f->gain->expected, f->gain->current);
    }
  }
}

// Copies are work, never idle: a step whose device copies 6 ms of every 10 and
// computes 1 ms is copy_bound (its own cause, with its bytes), not idle, and the
// idle verdict's sentence is not said; its numbers add up to the step.
TEST(Diagnosis, CopiesAreTheirOwnCauseNotIdle) {
  Recording rec = A100Recording();
  int64_t corr = 1;
  for (int s = 0; s < 4; ++s) {
    const TimeNs base = s * 10'000 * us;
    rec.steps.push_back({s, {base, base + 10'000 * us}});
    MemoryActivity copy;
    copy.time = {base + 100 * us, base + 6100 * us};
    copy.kind = MemoryOpKind::kMemcpyHtoD;
    copy.device = 0;
    copy.stream = 7;
    copy.correlation = corr++;
    copy.bytes = 96LL << 20;  // 96 MiB in 6 ms: 16.8 GB/s
    copy.host_memory = HostMemory::kPageable;  // "Memcpy HtoD (Pageable -> Device)"
    rec.memory_ops.push_back(copy);
    RuntimeCall call = Launch(rec, base + 90 * us, base + 95 * us, copy.correlation);
    call.name = rec.names.Intern("cudaMemcpyAsync");
    call.kind = RuntimeCallKind::kMemcpy;
    rec.runtime_calls.push_back(call);
    rec.runtime_calls.push_back(Launch(rec, base + 6200 * us, base + 6205 * us, corr));
    rec.kernels.push_back(Kernel(rec, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", base + 6210 * us,
                                 base + 7210 * us, corr++));
  }
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  const Finding* copy = nullptr;
  for (const auto& f : d.findings) {
    EXPECT_NE(f.verdict, "idle") << f.title;
    if (f.verdict == "copy_bound") copy = &f;
  }
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->severity, Severity::kHigh);
  EXPECT_NE(copy->detail.find("6.00 ms of every 10.00 ms step"), std::string::npos) << copy->detail;
  EXPECT_NE(copy->detail.find("96.0 MiB per step (96.0 MiB to the device, 0.0 MiB back)"), std::string::npos)
      << copy->detail;
  EXPECT_NE(copy->detail.find("100% of the host-device bytes whose host memory the trace names were pageable"),
            std::string::npos)
      << copy->detail;
  EXPECT_NE(copy->recommendations.front().action.find("pin_memory=True"), std::string::npos);
  ASSERT_TRUE(copy->gain);
  EXPECT_DOUBLE_EQ(copy->gain->expected, 7.0);
  EXPECT_DOUBLE_EQ(copy->gain->best, 4.0);
  // The step's time adds up: kernels, copies and the rest are the window.
  const StepBreakdown& avg = d.recordings[0].average;
  EXPECT_EQ(avg.ns[static_cast<int>(StepCategory::kKernel)] + avg.ns[static_cast<int>(StepCategory::kMemcpy)] +
                avg.ns[static_cast<int>(StepCategory::kMemset)] + avg.ns[static_cast<int>(StepCategory::kCommunication)] +
                avg.ns[static_cast<int>(StepCategory::kRuntime)] + avg.ns[static_cast<int>(StepCategory::kDataLoader)] +
                avg.ns[static_cast<int>(StepCategory::kCpuExec)] + avg.ns[static_cast<int>(StepCategory::kOther)],
            10'000 * us);
}

// Launch calls without any GPU record: CUDA activity was asked for (the calls
// are CUPTI's) and its records were lost; the advice is not "add CUDA".
TEST(Diagnosis, LaunchesWithoutGpuRecordsSayTheRecordsWereLost) {
  Recording rec = A100Recording();
  rec.steps.push_back({1, {0, 1000 * us}});
  for (int i = 0; i < 10; ++i) rec.runtime_calls.push_back(Launch(rec, (10 + 50 * i) * us, (15 + 50 * i) * us, i + 1));
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  ASSERT_EQ(d.findings.size(), 1u);
  const Finding& f = d.findings[0];
  EXPECT_EQ(f.verdict, "no_gpu_activity");
  EXPECT_NE(f.title.find("the host launched 10 kernels: the profiler lost its GPU activities"), std::string::npos)
      << f.title;
  for (const auto& r : f.recommendations) EXPECT_EQ(r.action.find("ProfilerActivity.CUDA"), std::string::npos);
}

// 300 kernel launches and 10 kernel records: the profiler dropped records. The
// gaps are not judged idle (or host-bound); a limitation says what was lost.
TEST(Diagnosis, DroppedKernelRecordsAreSaidNotJudgedIdle) {
  Recording rec = A100Recording();
  rec.steps.push_back({1, {0, 30'000 * us}});
  for (int i = 0; i < 300; ++i) {
    rec.runtime_calls.push_back(Launch(rec, (100 * i) * us, (100 * i + 5) * us, i + 1));
    if (i % 30 == 0)
      rec.kernels.push_back(Kernel(rec, "void at::native::vectorized_elementwise_kernel<4>(int)", (100 * i + 10) * us,
                                   (100 * i + 60) * us, i + 1));
  }
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  for (const auto& f : d.findings) {
    EXPECT_NE(f.verdict, "idle") << f.title;
    EXPECT_NE(f.verdict, "underutilized") << f.title;
    EXPECT_NE(f.verdict, "launch_bound") << f.title;
  }
  EXPECT_EQ(d.recordings[0].dropped_kernel_records, 290);
  bool said = false;
  for (const auto& l : d.recordings[0].limitations) said = said || l.find("290 more kernels") != std::string::npos;
  EXPECT_TRUE(said);
}

// The same 300 launches made while the thread captured a stream into a graph
// (TraceLens's graph-capture traces): no kernel runs, nothing was dropped. The
// capture is said, and the GPU, which idled while the host captured, is idle.
TEST(Diagnosis, LaunchesInAStreamCaptureAreNotDroppedRecords) {
  Recording rec = A100Recording();
  rec.steps.push_back({1, {0, 30'000 * us}});
  auto call = [&](const char* name, RuntimeCallKind kind, TimeNs at) {
    RuntimeCall r;
    r.time = {at, at + 2 * us};
    r.name = rec.names.Intern(name);
    r.kind = kind;
    rec.runtime_calls.push_back(r);
  };
  call("hipStreamBeginCapture", RuntimeCallKindOfName("hipStreamBeginCapture"), 50 * us);
  for (int i = 0; i < 300; ++i) rec.runtime_calls.push_back(Launch(rec, (100 + 90 * i) * us, (100 + 90 * i + 5) * us, i + 1));
  call("hipStreamEndCapture", RuntimeCallKindOfName("hipStreamEndCapture"), 27'200 * us);
  rec.runtime_calls.push_back(Launch(rec, 27'300 * us, 27'305 * us, 1000));
  rec.kernels.push_back(Kernel(rec, "void at::native::vectorized_elementwise_kernel<4>(int)", 27'310 * us, 27'320 * us, 1000));
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  const auto& a = d.recordings[0];
  EXPECT_EQ(a.dropped_kernel_records, 0);
  EXPECT_EQ(a.captured_kernel_launches, 300);
  EXPECT_EQ(a.kernel_launch_calls, 301);
  bool idle = false;
  for (const auto& f : d.findings) {
    EXPECT_NE(f.verdict, "launch_bound") << f.title;
    idle = idle || f.verdict == "idle";
  }
  EXPECT_TRUE(idle);
  bool said = false;
  for (const auto& l : a.limitations) said = said || l.find("this window shows the graph being built") != std::string::npos;
  EXPECT_TRUE(said);
}

// One 1000 µs step: a collective kernel 100..300 beside nothing, the host's
// nccl:all_reduce span 300..500 with nothing on the device, a compute kernel
// 600..700. torch-tb-profiler's communication holds both (400 µs); the device's
// own is the kernel's 200 µs, and kernels + device communication + idle make the step.
TEST(Diagnosis, StepCommunicationSaysWhatRanOnTheDevice) {
  Recording rec = A100Recording();
  rec.steps.push_back({1, {0, 1000 * us}});
  rec.runtime_calls.push_back(Launch(rec, 90 * us, 95 * us, 1));
  rec.kernels.push_back(Kernel(rec, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                               100 * us, 300 * us, 1));
  CpuSpan nccl;
  nccl.time = {300 * us, 500 * us};
  nccl.name = rec.names.Intern("nccl:all_reduce");
  nccl.kind = CpuSpanKind::kCommunication;
  rec.cpu_spans.push_back(nccl);
  rec.runtime_calls.push_back(Launch(rec, 590 * us, 595 * us, 2));
  rec.kernels.push_back(Kernel(rec, "void at::native::vectorized_elementwise_kernel<4>(int)", 600 * us, 700 * us, 2));
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  const StepBreakdown& step = d.recordings[0].steps.at(0);
  EXPECT_EQ(step.ns[static_cast<size_t>(StepCategory::kCommunication)], 400 * us);
  EXPECT_EQ(step.host_communication_ns, 200 * us);
  EXPECT_EQ(step.device_communication_ns(), 200 * us);
  EXPECT_EQ(step.ns[static_cast<size_t>(StepCategory::kKernel)], 100 * us);
  EXPECT_EQ(step.ns[static_cast<size_t>(StepCategory::kKernel)] + step.device_communication_ns() +
                d.recordings[0].device_idle.total(),
            step.total());
}

// A trace that does not describe its GPU (no deviceProperties: kineto's oldest
// samples): the kernels that ran were built for Volta (volta_sgemm_...), so the GPU
// has tensor cores, and fp32 SIMT matrix work is low precision; a limitation says
// where the compute capability came from.
TEST(Diagnosis, KernelNamesGiveTheLeastComputeCapabilityOfAnUndescribedGpu) {
  Recording rec;
  rec.format = "kineto";
  rec.steps.push_back({1, {0, 1000 * us}});
  for (int i = 0; i < 4; ++i) {
    rec.runtime_calls.push_back(Launch(rec, (10 + 240 * i) * us, (15 + 240 * i) * us, i + 1));
    rec.kernels.push_back(Kernel(rec, "volta_sgemm_128x64_nn", (20 + 240 * i) * us, (220 + 240 * i) * us, i + 1));
  }
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  EXPECT_EQ(d.recordings[0].device.compute_major, 7);
  EXPECT_EQ(d.recordings[0].device_from_kernel_names, "volta_sgemm_128x64_nn");
  bool low_precision = false;
  for (const auto& f : d.findings) low_precision = low_precision || f.verdict == "low_precision";
  EXPECT_TRUE(low_precision);
  bool said = false;
  for (const auto& l : d.recordings[0].limitations) said = said || l.find("at least 7.0") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Diagnosis, SparseWorkIsIdleNotHostBound) {
  // The same kernels, but the step lasts 300 ms: one launch every 5 ms is not the
  // host pacing the GPU; the job does something else.
  Recording rec = TinyKernelsRecording(3);
  for (auto& s : rec.steps) s.host = {s.host.start * 100, s.host.start * 100 + 300'000 * us};
  for (auto& r : rec.runtime_calls) r.time = {r.time.start * 100, r.time.start * 100 + 5 * us};
  for (auto& k : rec.kernels) k.time = {k.time.start * 100, k.time.start * 100 + 5 * us};
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  bool idle = false;
  for (const auto& f : d.findings) {
    EXPECT_NE(f.verdict, "launch_bound");
    idle = idle || f.verdict == "idle";
  }
  EXPECT_TRUE(idle);
}

TEST(Diagnosis, CudaGraphReplaysAreOneLaunchNotLaunchOverhead) {
  // The tiny-kernel step captured in a CUDA graph: one cudaGraphLaunch per step
  // replays its 60 kernels 3 µs apart. The host made one launch, not 60: the gaps
  // inside the replay are the graph's scheduling, not launch overhead.
  Recording rec = TinyKernelsRecording(10);
  std::vector<RuntimeCall> graph_launches;
  for (size_t s = 0; s < rec.steps.size(); ++s) {
    const TimeNs base = rec.steps[s].host.start;
    RuntimeCall r = Launch(rec, base + 100 * us, base + 110 * us, 100000 + static_cast<int64_t>(s));
    r.name = rec.names.Intern("cudaGraphLaunch");
    r.kind = RuntimeCallKind::kGraphLaunch;
    graph_launches.push_back(r);
    for (int k = 0; k < 60; ++k) {
      auto& kernel = rec.kernels[s * 60 + static_cast<size_t>(k)];
      kernel.correlation = r.correlation;  // graph kernels carry the graph launch's correlation
      kernel.time = {base + 120 * us + k * 8 * us, base + 125 * us + k * 8 * us};
    }
  }
  rec.runtime_calls = graph_launches;
  const RecordingAnalysis a = AnalyzeRecording(rec);
  EXPECT_EQ(a.launch.graph_launches, 10);
  EXPECT_EQ(a.launch.graph_kernels, 600);
  EXPECT_DOUBLE_EQ(a.launch.host_launches_per_step, 1.0);
  // 59 gaps of 3 µs per step inside the replays: not launch overhead. Only the one
  // launch's own latency is (graph launch call at 100 µs, first kernel at 120 µs).
  EXPECT_EQ(a.device_idle.ns[static_cast<int>(IdleCause::kLaunchOverhead)], 10 * 20 * us);
  EXPECT_GE(a.device_idle.ns[static_cast<int>(IdleCause::kOther)], 10 * 59 * 3 * us);
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  for (const auto& f : Diagnose(run).findings) EXPECT_NE(f.verdict, "launch_bound") << f.title;
}

TEST(Diagnosis, ElementwiseDominatedBusyGpuIsMemoryBound) {
  // A busy GPU (the host launches well ahead, then waits in cudaDeviceSynchronize)
  // whose ~1 ms steps are one 150 µs GEMM and 16 elementwise/norm kernels of 50 µs:
  // 84 % of kernel time moves bytes.
  Recording rec = A100Recording();
  int64_t corr = 1;
  TimeNs base = 0;
  for (int s = 0; s < 8; ++s) {
    TimeNs t = base + 20 * us;
    for (int k = 0; k < 17; ++k, ++corr) {
      const TimeNs len = k == 0 ? 150 * us : 50 * us;
      rec.runtime_calls.push_back(Launch(rec, base + k * 5 * us, base + k * 5 * us + 4 * us, corr));
      rec.kernels.push_back(Kernel(rec,
                                   k == 0 ? "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn"
                                          : "void at::native::vectorized_elementwise_kernel<4>(int)",
                                   t, t + len, corr));
      t += len + 2 * us;
    }
    RuntimeCall sync;
    sync.time = {base + 90 * us, t + 5 * us};
    sync.name = rec.names.Intern("cudaDeviceSynchronize");
    sync.kind = RuntimeCallKind::kSynchronize;
    rec.runtime_calls.push_back(sync);
    rec.steps.push_back({s, {base, t + 10 * us}});
    base = t + 10 * us;
  }
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis diag = Diagnose(run);
  const Finding* f = nullptr;
  for (const auto& x : diag.findings)
    if (x.verdict == "memory_bound") f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kHigh) << f->detail << " " << (f->gain ? f->gain->expected : -1.0);
  EXPECT_NEAR(f->evidence[0].value, 100.0 * 16 * 50 / (16 * 50 + 150), 0.1);
  ASSERT_TRUE(f->gain.has_value());  // the replay with those kernels fused
  EXPECT_LT(f->gain->expected, f->gain->current);
  EXPECT_EQ(f->gain->bounded_by, "gpu_busy_time");  // the device still runs nearly the whole step
}

TEST(Analysis, StepBreakdownFollowsCategoryPriority) {
  const RecordingAnalysis a = AnalyzeRecording(InputBoundRecording());
  ASSERT_EQ(a.steps.size(), 1u);
  EXPECT_EQ(a.avg_step_ns, 1000 * us);
  EXPECT_EQ(a.average.ns[static_cast<int>(StepCategory::kKernel)], 530 * us);
  // The runtime calls inside [0,400) do not exist; both launches are outside kernels.
  EXPECT_EQ(a.average.ns[static_cast<int>(StepCategory::kRuntime)], 10 * us);
  EXPECT_EQ(a.average.ns[static_cast<int>(StepCategory::kDataLoader)], 400 * us);
  EXPECT_EQ(a.average.ns[static_cast<int>(StepCategory::kOther)], 60 * us);
  EXPECT_NEAR(a.gpu.busy_percent, 53.0, 1e-9);
  EXPECT_NEAR(a.gpu.sm_efficiency_percent, 53.0, 1e-9);  // blocks/SM 2 caps at 1
  EXPECT_NEAR(a.gpu.achieved_occupancy_percent, 50.0, 1e-9);
}

TEST(Analysis, IdleGapsAreChargedToTheirCause) {
  const RecordingAnalysis a = AnalyzeRecording(InputBoundRecording());
  const auto& idle = a.device_idle;
  EXPECT_EQ(idle.ns[static_cast<int>(IdleCause::kDataLoader)], 400 * us);
  EXPECT_EQ(idle.ns[static_cast<int>(IdleCause::kLaunchOverhead)], 20 * us);
  EXPECT_EQ(idle.ns[static_cast<int>(IdleCause::kHostWait)], 50 * us);
  EXPECT_EQ(idle.ns[static_cast<int>(IdleCause::kOther)], 0);
  EXPECT_EQ(idle.total(), 470 * us);
  EXPECT_EQ(idle.gaps, 2);
}

TEST(Analysis, QueuedWorkGapsAreDeviceSide) {
  Recording rec = InputBoundRecording();
  // Launch k2 early (at 100 µs): the 60 µs gap before it is no longer the host's fault.
  rec.runtime_calls[1].time = {100 * us, 105 * us};
  std::sort(rec.runtime_calls.begin(), rec.runtime_calls.end(),
            [](const RuntimeCall& x, const RuntimeCall& y) { return x.time.start < y.time.start; });
  const RecordingAnalysis a = AnalyzeRecording(rec);
  EXPECT_EQ(a.device_idle.ns[static_cast<int>(IdleCause::kOther)], 60 * us);
  EXPECT_EQ(a.device_idle.ns[static_cast<int>(IdleCause::kHostWait)], 0);
}

TEST(Diagnosis, InputBoundVerdictWithGain) {
  gputriage::Run run;
  run.recordings.push_back(InputBoundRecording());
  const Diagnosis d = Diagnose(run);
  ASSERT_FALSE(d.findings.empty());
  const Finding& f = d.findings.front();
  EXPECT_EQ(f.verdict, "input_bound");
  EXPECT_EQ(f.severity, Severity::kHigh);
  ASSERT_TRUE(f.gain.has_value());
  EXPECT_NEAR(f.gain->current, 1.0, 1e-9);
  // Replayed without the 400 µs data wait: 600 µs at best; the host's own work
  // runs slower beside loader workers at the point estimate and worst.
  EXPECT_NEAR(f.gain->best, 0.6, 1e-6);
  EXPECT_GT(f.gain->expected, f.gain->best);
  EXPECT_LT(f.gain->expected, f.gain->worst);
  EXPECT_LT(f.gain->worst, 1.0);
  EXPECT_FALSE(f.gain->bounded_by.empty());
  bool has_threshold = false;
  for (const auto& e : f.evidence)
    if (e.name == "data_wait_percent") has_threshold = e.threshold.has_value() && std::abs(e.value - 40.0) < 1e-9;
  EXPECT_TRUE(has_threshold);
  EXPECT_NEAR(d.summary.data_wait_percent, 40.0, 1e-9);
}

/// The GPU busy the whole step: a bf16 GEMM, then `elementwise_us` of elementwise work.
Diagnosis BusyStep(TimeNs elementwise_us) {
  Recording rec = InputBoundRecording();
  rec.cpu_spans.clear();
  rec.kernels[0].time = {0, (1000 - elementwise_us) * us};
  rec.kernels[1].time = {(1000 - elementwise_us) * us, 1000 * us};
  rec.runtime_calls[0].time = {0, 1 * us};
  rec.runtime_calls[1].time = {2 * us, 3 * us};
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  return Diagnose(run);
}

// Warm-up: the first of six steps is ten times the others (the host autotunes cuDNN and
// grows the allocator while the GPU waits 9 ms), the rest keep a bf16 GEMM busy the whole
// step. The steady state is a busy GPU; warm-up decides no verdict about it.
TEST(Diagnosis, AWarmUpStepDecidesNoVerdictAboutTheSteadyState) {
  Recording rec = A100Recording();
  int64_t corr = 1;
  TimeNs t = 0;
  for (int s = 0; s < 6; ++s) {
    const TimeNs length = (s == 0 ? 10000 : 1000) * us;
    rec.steps.push_back({s, {t, t + length}});
    const TimeNs gemm_start = t + length - 995 * us;
    rec.runtime_calls.push_back(Launch(rec, gemm_start - 4 * us, gemm_start - 2 * us, corr));
    rec.kernels.push_back(Kernel(rec, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", gemm_start, t + length, corr));
    ++corr;
    t += length;
  }
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  const Diagnosis d = Diagnose(run);
  ASSERT_EQ(d.recordings.size(), 1u);
  const RecordingAnalysis& a = d.recordings[0];
  EXPECT_EQ(a.warmup_steps, 1);
  EXPECT_EQ(a.steps.size(), 6u);
  EXPECT_EQ(a.avg_step_ns, 1000 * us);
  EXPECT_GT(a.gpu.busy_percent, 99.0);
  // Totals over the steady steps are divided by the steady steps: one GEMM each.
  EXPECT_DOUBLE_EQ(a.launch.kernels_per_step, 1.0);
  for (const auto& f : d.findings)
    for (const char* v : {"idle", "underutilized", "launch_bound", "input_bound", "host_stall", "undersized_work"})
      EXPECT_NE(f.verdict, v) << f.title;
  bool said = false;
  for (const auto& l : a.limitations) said = said || l.find("warm-up") != std::string::npos;
  EXPECT_TRUE(said);
}

/// An LLM server's trace without shapes: ten model steps, each annotated by vLLM with
/// the tokens it processed, each a 9 ms fp8 GEMM and 1 ms of elementwise work.
Diagnosis ServingSteps(const char* annotation) {
  Recording rec = A100Recording();
  rec.devices[0].name = "NVIDIA H100 80GB HBM3";
  rec.devices[0].compute_major = 9;
  int64_t corr = 1;
  for (int s = 0; s < 10; ++s) {
    const TimeNs t = s * 10000 * us;
    CpuSpan step;
    step.time = {t, t + 10000 * us};
    step.kind = CpuSpanKind::kUserAnnotation;
    step.name = rec.names.Intern(annotation);
    rec.cpu_spans.push_back(step);
    rec.runtime_calls.push_back(Launch(rec, t, t + 2 * us, corr));
    rec.kernels.push_back(Kernel(rec, "sm90_xmma_gemm_e4m3bf16_bf16f32_f32_tn_n_tilesize64x64x128", t + 5 * us,
                                 t + 9000 * us, corr++));
    rec.runtime_calls.push_back(Launch(rec, t + 3 * us, t + 4 * us, corr));
    rec.kernels.push_back(Kernel(rec, "void at::native::vectorized_elementwise_kernel<4>(int)", t + 9000 * us,
                                 t + 9990 * us, corr++));
  }
  gputriage::Run run;
  run.recordings.push_back(std::move(rec));
  return Diagnose(run);
}

TEST(Diagnosis, DecodeStepsOfFewTokensStreamWeightsWithoutShapes) {
  // Four decode tokens a step: at most 2 x 4 FLOPs per half byte of weight, far below
  // an H100's ridge: the GEMMs wait on memory.
  const Diagnosis d = ServingSteps("execute_context_0(0)_generation_4(4)");
  ASSERT_EQ(d.recordings.size(), 1u);
  // The trace has no ProfilerStep: one window over every device operation, the
  // first step's included (it once began where that step's work ended, issue 54):
  // ten steps' midpoints fall in it, and their 40 tokens are what its time is divided by.
  EXPECT_EQ(d.recordings[0].serving.steps, 10);
  EXPECT_EQ(d.recordings[0].serving.tokens, 40);
  const Finding* f = nullptr;
  for (const auto& x : d.findings)
    if (x.verdict == "memory_bound") f = &x;
  ASSERT_NE(f, nullptr);
  bool intensity = false;
  for (const auto& e : f->evidence)
    if (e.name == "gemm_flops_per_byte_max") intensity = std::abs(e.value - 16.0) < 1e-9;
  EXPECT_TRUE(intensity);
  ASSERT_TRUE(f->gain.has_value());
  EXPECT_EQ(f->gain->unit, "ms/token");
  // Now 90 ms over 36 tokens; twice the tokens: the GEMMs' 81 ms stay, the other 9 ms double.
  EXPECT_NEAR(f->gain->current, 90.0 / 36, 0.01);
  EXPECT_NEAR(f->gain->expected, (81.0 + 2 * 9.0) / 72, 0.01);
  for (const auto& x : d.findings) EXPECT_NE(x.verdict, "at_compute_limit");

  // Prefill of 2048 tokens a step: up to 8192 FLOP/byte, above any ridge: nothing to claim without shapes.
  const Diagnosis prefill = ServingSteps("execute_context_1(2048)_generation_0(0)");
  for (const auto& x : prefill.findings) EXPECT_NE(x.verdict, "memory_bound") << x.title;
}

TEST(Diagnosis, BusyTensorCoreGpuIsAtTheComputeLimit) {
  const Diagnosis d = BusyStep(200);  // 20 % bytes-bound
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].verdict, "at_compute_limit");
  // 40 % of the kernel time bytes-bound: fusing it is a cheap fix still left, so no
  // "at the limit" (and under memory_bound's 50 % nothing else is claimed either).
  for (const auto& f : BusyStep(400).findings) EXPECT_NE(f.verdict, "at_compute_limit");
}

}  // namespace
}  // namespace gputriage
