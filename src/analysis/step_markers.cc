// Step-marker timing (include/gputriage/markers.h, recorded by `gputriage
// record`): step time and its spread, data wait against compute, throughput,
// outliers and the phase behind them, rank-to-rank skew, and MFU.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/markers.hpp"
#include "src/analysis/analysis_internal.h"
#include "src/analysis/gpu_specs.h"
#include "src/analysis/rank_sync.h"

namespace gputriage {
namespace {

// gpuprof's rule (shared/reference/trace-analysis.md §5.6): first steps >= 3x the
// median are warm-up (worker start, allocator growth, compilation).
constexpr double kWarmupFactor = 3.0;
constexpr double kOutlierFactor = 2.0;  // a step over twice the median is an outlier

double Ms(TimeNs ns) { return static_cast<double>(ns) / 1e6; }

/// A step as the loop lived it. Its span already holds a data wait that came
/// before its begin marker (BuildMarkedSteps starts the span there).
struct StepTime {
  const MarkedStep* step;
  double total_ms;    // wall time of the iteration
  double wait_ms;     // data wait
  double work_ms;     // compute without marked communication
  double device_ms;   // GPU time the job measured for the step, NaN unknown
};

StepTime Time(const MarkedStep& s) {
  const double total = Ms(s.span.duration());
  const double wait = std::min(total, Ms(s.data_wait_ns()));
  const double comm = Ms(s.phase_ns[GPUTRIAGE_PHASE_COMMUNICATION]);
  const double device = s.device_ns > 0 ? Ms(s.device_ns) : NAN;
  return {&s, total, wait, std::max(0.0, total - wait - comm), device};
}


/// One process's figures over its judged steps.
ProcessStepStats ProcessStats(uint32_t pid, const std::vector<StepTime>& list) {
  constexpr size_t kPhases = std::tuple_size_v<decltype(MarkedStep::phase_ns)>;
  ProcessStepStats p;
  p.pid = pid;
  p.steps = static_cast<int64_t>(list.size());
  std::vector<double> step_ms, work_ms;
  double wait = 0, untraced = 0;
  int64_t traced = 0;
  for (const auto& t : list) {
    step_ms.push_back(t.total_ms);
    work_ms.push_back(t.work_ms);
    wait += t.wait_ms;
    for (size_t phase = 1; phase < kPhases; ++phase) p.phase_ms_mean[phase] += Ms(t.step->phase_ns[phase]);
    if (t.step->phases_traced()) {
      untraced += Ms(t.step->untraced_ns());
      ++traced;
    }
  }
  p.step_ms_p50 = analysis::Median(step_ms);
  p.work_ms_p50 = analysis::Median(work_ms);
  const double n = std::max<double>(1.0, static_cast<double>(list.size()));
  p.data_wait_ms_mean = wait / n;
  for (auto& v : p.phase_ms_mean) v /= n;
  if (traced > 0 && 2 * static_cast<size_t>(traced) >= list.size()) p.untraced_ms_mean = untraced / static_cast<double>(traced);
  return p;
}

/// Names each process by its rank, where the recording knows it.
void NameRanks(const std::vector<ProcessRank>& ranks, std::vector<ProcessStepStats>& processes) {
  std::set<std::string> hosts;
  for (auto& p : processes)
    for (const auto& r : ranks)
      if (r.pid == p.pid) {
        p.rank = r.rank;
        p.local_rank = r.local_rank;
        p.host = r.host;
        hosts.insert(r.host);
      }
  for (auto& p : processes) p.several_hosts = hosts.size() > 1;
}

}  // namespace

std::string ProcessStepStats::Label() const {
  if (rank < 0) return fmt::format("process {}", pid);
  return host.empty() || !several_hosts ? fmt::format("rank {} (pid {})", rank, pid)
                                        : fmt::format("rank {} on {} (pid {})", rank, host, pid);
}

StepMarkerAnalysis AnalyzeMarkedSteps(const std::vector<MarkedStep>& steps, std::string_view gpu_name,
                                      const std::vector<ProcessRank>& ranks) {
  StepMarkerAnalysis m;
  if (steps.empty()) return m;

  // Per process, in time order; leading warm-up steps left out.
  std::map<uint32_t, std::vector<StepTime>> by_pid;
  for (const auto& s : steps) by_pid[s.pid].push_back(Time(s));
  std::vector<StepTime> judged;
  std::vector<std::vector<const MarkedStep*>> judged_by_process;
  for (auto& [pid, list] : by_pid) {
    std::sort(list.begin(), list.end(),
              [](const StepTime& a, const StepTime& b) { return a.step->span.start < b.step->span.start; });
    std::vector<double> totals;
    for (const auto& t : list) totals.push_back(t.total_ms);
    const double median = analysis::Median(totals);
    size_t first = 0;
    // Never all of them: a process's steps are its own baseline.
    while (list.size() - first > 2 && list[first].total_ms >= kWarmupFactor * median) ++first;
    m.warmup_steps += static_cast<int64_t>(first);
    list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(first));
    m.by_process.push_back(ProcessStats(pid, list));
    judged_by_process.emplace_back();
    for (const auto& t : list) judged_by_process.back().push_back(t.step);
    judged.insert(judged.end(), list.begin(), list.end());
  }
  std::vector<std::map<int64_t, double>> waited;
  m.sync = MeasureRankSync(judged_by_process, m.by_process, waited);
  if (m.sync.synchronous) {
    // Waiting for the last rank is not a rank's own work: taken out step by step.
    // Where the wait was marked (a communication phase: zero-code mode's DDP
    // hook), it is already out of work_ms; only the part outside it (an
    // all-reduce left inside backward) comes off.
    size_t p = 0;
    for (const auto& [pid, list] : by_pid) {
      std::vector<double> work;
      for (const auto& t : list) {
        auto it = waited[p].find(t.step->number);
        const double wait_ms = it == waited[p].end() ? 0.0 : it->second;
        const double marked_ms = Ms(t.step->phase_ns[GPUTRIAGE_PHASE_COMMUNICATION]);
        work.push_back(std::max(0.0, t.work_ms - std::max(0.0, wait_ms - marked_ms)));
      }
      m.by_process[p++].work_ms_p50 = analysis::Median(work);
    }
  }
  NameRanks(ranks, m.by_process);
  std::sort(m.by_process.begin(), m.by_process.end(),
            [](const ProcessStepStats& a, const ProcessStepStats& b) { return a.work_ms_p50 > b.work_ms_p50; });
  m.processes = static_cast<int>(by_pid.size());
  m.steps = static_cast<int64_t>(judged.size());
  if (judged.empty()) return m;

  const double n = static_cast<double>(judged.size());
  double sum = 0, wait_sum = 0, host_wait_sum = 0, samples = 0, tokens = 0, flops = 0;
  double device_sum = 0, idle_sum = 0;
  std::vector<double> totals;
  for (const auto& t : judged) {
    sum += t.total_ms;
    host_wait_sum += t.wait_ms;
    double wait = t.wait_ms;
    if (!std::isnan(t.device_ms)) {
      // The GPU was idle at most for the part of the iteration its own time
      // does not cover; a longer host wait was spent on queued GPU work.
      const double idle = std::max(0.0, t.total_ms - t.device_ms);
      wait = std::min(wait, idle);
      ++m.device_steps;
      device_sum += t.device_ms;
      idle_sum += idle;
    }
    wait_sum += wait;
    samples += static_cast<double>(t.step->samples);
    tokens += static_cast<double>(t.step->tokens);
    flops += t.step->flops;
    totals.push_back(t.total_ms);
    m.phases_known = m.phases_known || t.step->data_wait_ns() > 0;
    if (t.step->phase_ns[GPUTRIAGE_PHASE_OPTIMIZER] > 0) ++m.optimizer_steps;
  }
  m.step_ms_mean = sum / n;
  std::vector<double> sorted = totals;
  std::sort(sorted.begin(), sorted.end());
  m.step_ms_p50 = sorted[sorted.size() / 2];
  m.step_ms_p95 = sorted[std::min(sorted.size() - 1, static_cast<size_t>(0.95 * n))];
  double var = 0;
  for (double v : totals) var += (v - m.step_ms_mean) * (v - m.step_ms_mean);
  m.step_ms_cv = m.step_ms_mean > 0 ? std::sqrt(var / n) / m.step_ms_mean : 0;
  m.data_wait_host_ms_mean = host_wait_sum / n;
  m.data_wait_ms_mean = wait_sum / n;
  m.compute_ms_mean = (sum - wait_sum) / n;
  m.data_wait_percent_of_compute = sum - wait_sum > 0 ? 100.0 * wait_sum / (sum - wait_sum) : 0;
  if (m.device_steps > 0) {
    m.device_ms_mean = device_sum / static_cast<double>(m.device_steps);
    m.gpu_idle_ms_mean = idle_sum / static_cast<double>(m.device_steps);
  }

  // Throughput of the whole job: processes run side by side, so per-process
  // rates add (each process's samples over its own step time).
  const double per_process_seconds = sum / 1e3 / static_cast<double>(m.processes);
  if (samples > 0 && per_process_seconds > 0) m.samples_per_s = samples / per_process_seconds;
  if (tokens > 0 && per_process_seconds > 0) m.tokens_per_s = tokens / per_process_seconds;

  constexpr size_t kPhases = std::tuple_size_v<decltype(MarkedStep::phase_ns)>;  // index = StepPhaseSlot

  // Inside the step: each phase's mean, and where forward and backward or the
  // optimizer are marked, the time outside every marked phase.
  std::vector<double> untraced, in_phases;
  double traced_steps_ms = 0;
  std::array<double, kPhases> device_phase_sum{};
  for (const auto& t : judged) {
    for (size_t p = 1; p < kPhases; ++p) m.phase_ms_mean[p] += Ms(t.step->phase_ns[p]) / n;
    bool device_timed = false;
    for (int slot : kDeviceTimedSlots) {
      const TimeNs ns = t.step->phase_device_ns[static_cast<size_t>(slot)];
      device_phase_sum[static_cast<size_t>(slot)] += Ms(ns);
      device_timed = device_timed || ns > 0;
    }
    if (device_timed) ++m.phase_device_steps;
    if (t.step->phases_traced()) {
      untraced.push_back(Ms(t.step->untraced_ns()));
      in_phases.push_back(t.total_ms - untraced.back());
      traced_steps_ms += t.total_ms;
    }
  }
  if (m.phase_device_steps > 0)
    for (int slot : kDeviceTimedSlots)
      m.phase_device_ms_mean[static_cast<size_t>(slot)] =
          device_phase_sum[static_cast<size_t>(slot)] / static_cast<double>(m.phase_device_steps);
  if (!untraced.empty() && 2 * untraced.size() >= judged.size()) {
    m.phases_traced = true;
    double sum_untraced = 0;
    for (double u : untraced) sum_untraced += u;
    m.untraced_ms_mean = sum_untraced / static_cast<double>(untraced.size());
    m.untraced_percent_of_step = traced_steps_ms > 0 ? 100.0 * sum_untraced / traced_steps_ms : 0;
    m.untraced_ms_p50 = analysis::Median(untraced);
    std::sort(in_phases.begin(), in_phases.end());
    m.in_phases_ms_p10 = in_phases[in_phases.size() / 10];
  }

  // Outliers, and which marked phase made them slow: its mean in outlier steps
  // against its mean in the others.
  std::array<double, kPhases> phase_in_outliers{}, phase_in_typical{};
  double excess = 0;
  int64_t typical = 0;
  for (const auto& t : judged) {
    const bool outlier = t.total_ms > kOutlierFactor * m.step_ms_p50;
    auto& acc = outlier ? phase_in_outliers : phase_in_typical;
    for (size_t p = 1; p < kPhases; ++p) acc[p] += Ms(t.step->phase_ns[p]);
    if (outlier) {
      ++m.outlier_steps;
      excess += t.total_ms - m.step_ms_p50;
    } else {
      ++typical;
    }
  }
  m.outlier_time_percent = sum > 0 ? 100.0 * excess / sum : 0;
  if (m.outlier_steps > 0 && typical > 0) {
    for (size_t p = 1; p < kPhases; ++p) {
      const double grow = phase_in_outliers[p] / static_cast<double>(m.outlier_steps) -
                          phase_in_typical[p] / static_cast<double>(typical);
      if (grow > m.outlier_phase_ms) {
        m.outlier_phase_ms = grow;
        m.outlier_phase = kPhaseNames[p];
      }
    }
  }

  // MFU: model FLOPs per step over step time, per process (one GPU each).
  if (flops > 0) {
    m.flops_per_step = flops / n;
    m.achieved_tflops = m.flops_per_step / (m.step_ms_mean / 1e3) / 1e12;
    if (auto spec = FindGpuSpec(gpu_name)) {
      m.gpu_model = spec->model;
      const double peak = MfuPeakTflops(*spec);
      // Above the dense bf16 peak the job's FLOPs are not bf16 dense work (fp8,
      // sparsity, a miscounted model): no share of a peak it did not run against.
      if (peak > 0) {
        m.peak_tflops = peak;
        if (m.achieved_tflops <= peak) m.mfu_percent = 100.0 * m.achieved_tflops / peak;
      }
    }
  }
  return m;
}

}  // namespace gputriage
