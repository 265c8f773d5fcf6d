// Verdicts from the memory a recorded job sampled at its step ends
// (src/analysis/step_memory.cc; docs/memory.md), origin "markers":
//
//   memory_creep     memory at the same point of each step grows steadily
//                    (a Theil-Sen slope over step numbers, rising through every
//                    quarter and in both halves): the growth per step and per
//                    hour, and when it reaches capacity at that rate.
//   memory_headroom  the peak against capacity, and how far the batch can grow
//                    before it no longer fits (with a safety margin).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = kMiB * 1024.0;
// Reaching capacity within a day at the measured rate: the job will die of it.
constexpr double kCreepHighHours = 24.0;
// The batch can grow at least this much: worth saying.
constexpr double kHeadroomGrowth = 1.5;
// Past this share of capacity the job runs on the edge.
constexpr double kTightShare = 0.90;

std::string Who(const ProcessMemory& p) {
  return p.rank >= 0 ? fmt::format("rank {} (process {})", p.rank, p.pid) : fmt::format("process {}", p.pid);
}

std::string Size(double bytes) {
  return std::abs(bytes) >= kGiB ? fmt::format("{:.2f} GiB", bytes / kGiB) : fmt::format("{:.1f} MiB", bytes / kMiB);
}

void Creep(const StepMemoryAnalysis& m, const ProcessMemory& p, bool gpu, std::vector<Finding>& out) {
  const MemoryTrend& t = gpu ? p.gpu : p.host;
  if (!t.creeping) return;
  const double capacity = static_cast<double>(gpu ? m.device_total_bytes : m.host_total_bytes);
  const std::string where = gpu ? fmt::format("GPU {} (allocated by PyTorch)", p.device) : "host (resident set)";
  const double hours_left = capacity > t.last_bytes && t.bytes_per_hour > 0 ? (capacity - t.last_bytes) / t.bytes_per_hour : NAN;
  Finding f;
  f.verdict = "memory_creep";
  f.origin = "markers";
  f.rank = p.rank;
  f.scope = Who(p);
  f.severity = !std::isnan(hours_left) && hours_left < kCreepHighHours ? Severity::kHigh : Severity::kModerate;
  f.title = fmt::format("Memory creep on the {}: +{} per step ({}/h){}", where, Size(t.bytes_per_step),
                        Size(t.bytes_per_hour),
                        std::isnan(hours_left) ? "" : fmt::format(", full in about {:.1f} h at this rate", hours_left));
  f.detail = fmt::format(
      "Memory at the end of each step, {} sampled steps from step {} to {} (past the first tenth, where memory "
      "settles), rose from {} to {} (medians of the first and last quarter), in every quarter and in both halves: "
      "{} per step (Theil-Sen slope; {} to {} in the two halves). Something the loop keeps grows with every step.{}",
      t.points, t.first_step, t.last_step, Size(t.first_bytes), Size(t.last_bytes), Size(t.bytes_per_step),
      Size(t.bytes_per_step_low), Size(t.bytes_per_step_high),
      std::isnan(hours_left)
          ? " The capacity it will run into is unknown."
          : fmt::format(" At {:.1f} s per step it reaches the {} {} has in about {:.1f} h, and the job dies of it.",
                        t.step_s, Size(capacity), gpu ? "the GPU" : m.host_limit_source.empty() ? "the host" : m.host_limit_source,
                        hours_left));
  f.evidence = {
      E("growth_per_step", t.bytes_per_step / kMiB, "MiB", "markers: Theil-Sen slope of memory at step ends"),
      E("growth_per_step_low", t.bytes_per_step_low / kMiB, "MiB", "markers: the slower half's slope"),
      E("growth_per_step_high", t.bytes_per_step_high / kMiB, "MiB", "markers: the faster half's slope"),
      E("growth_per_hour", t.bytes_per_hour / kMiB, "MiB", "markers: slope / mean step time"),
      E("memory_first_quarter", t.first_bytes / kMiB, "MiB", "markers: median of the first quarter"),
      E("memory_last_quarter", t.last_bytes / kMiB, "MiB", "markers: median of the last quarter"),
      E("sampled_steps", static_cast<double>(t.points), "count", "markers: steps judged (the first tenth left out)"),
  };
  if (!std::isnan(hours_left))
    f.evidence.push_back(E("hours_to_capacity", hours_left, "h",
                           gpu ? "the GPU's memory (torch.cuda.get_device_properties)" : m.host_limit_source,
                           kCreepHighHours, "<"));
  if (gpu) {
    f.recommendations = {
        {"log `loss.item()` (a Python float), not `loss`: a kept loss tensor keeps its whole autograd graph and the "
         "activations it saved",
         "the most common leak in a training loop: each step's graph stays alive"},
        {"store outputs or metrics as `t.detach().cpu()` (or `.item()`), and bound any list or cache that grows per "
         "step",
         "tensors appended to a list stay on the GPU until the list goes"},
        {"find it: `torch.cuda.memory._record_memory_history()` early in the run, "
         "`torch.cuda.memory._dump_snapshot('snap.pickle')` later, then `gputriage diagnose snap.pickle`",
         "the snapshot names the frames that allocated what is still held"},
    };
  } else {
    f.recommendations = {
        {"log `loss.item()`, not `loss`, and keep metrics as Python numbers: a kept tensor keeps its autograd graph",
         "each step's graph and its saved activations stay alive"},
        {"bound caches that grow per step (a dict of seen samples, `functools.lru_cache` without maxsize) and "
         "lists of outputs",
         "host memory held per step grows the resident set the same way"},
        {"find it: `tracemalloc.start()` early, then compare `tracemalloc.take_snapshot()` between two steps",
         "names the lines whose allocations are still held"},
    };
  }
  // The fix removes the growth; what the data cannot rule out is growth under
  // the floor this recording could see (8 MiB or 2 % over its steps).
  const double span = static_cast<double>(std::max<int64_t>(1, t.last_step - t.first_step));
  const double unseen = std::max(8.0 * kMiB, 0.02 * t.first_bytes) / span / kMiB;
  ExpectedGain g;
  g.metric = "memory_growth_per_step";
  g.unit = "MiB";
  g.current = t.bytes_per_step / kMiB;
  g.expected = 0;
  g.best = 0;
  g.worst = std::min(g.current, unseen);
  g.bounded_by = "the_leak_found";
  g.basis = fmt::format(
      "a fixed loop holds no more per step: growth 0, and at worst growth this recording could not see ({:.3f} MiB per "
      "step: under its floor over {} steps); the job then runs as long as it needs instead of dying{}",
      unseen, t.last_step - t.first_step,
      std::isnan(hours_left) ? "" : fmt::format(" in about {:.1f} h", hours_left));
  f.gain = g;
  out.push_back(std::move(f));
}

/// The memory a batch of `batch` would need, from one run's peak: the static
/// part stays, the rest is taken to grow with the batch (an upper bound: what
/// does not grow with it -- workspaces, the runtime -- counts as if it did).
double Projected(double peak, double fixed, double batch, double at_batch) {
  return fixed + (peak - fixed) * at_batch / batch;
}

void Headroom(const StepMemoryAnalysis& m, std::vector<Finding>& out) {
  // The process with the largest peak; its GPU's memory, else the host's.
  const ProcessMemory* p = nullptr;
  for (const auto& q : m.processes)
    if (p == nullptr || std::max(q.device_peak_bytes, q.host_rss_peak_bytes) > std::max(p->device_peak_bytes, p->host_rss_peak_bytes))
      p = &q;
  if (p == nullptr) return;
  const bool gpu = p->device >= 0 && p->device_peak_bytes > 0;
  const double capacity = static_cast<double>(gpu ? m.device_total_bytes : m.host_total_bytes);
  const double peak = static_cast<double>(gpu ? p->device_peak_bytes : p->host_rss_peak_bytes);
  if (capacity <= 0 || peak <= 0) return;
  const double usable = capacity * (1.0 - kMemorySafetyMargin);
  const bool static_here = m.StaticBytes() >= 0 && (gpu ? m.static_device == fmt::format("cuda:{}", p->device)
                                                        : m.static_device == "cpu");
  const double fixed = static_here ? std::min(peak, static_cast<double>(m.StaticBytes())) : 0.0;
  const double batch = p->samples_per_step;
  const double per_sample = batch > 0 ? (peak - fixed) / batch : 0;
  const double largest = per_sample > 0 ? std::floor(batch * (usable - fixed) / (peak - fixed)) : NAN;
  const bool tight = peak >= kTightShare * capacity;
  if (!tight && !(largest >= kHeadroomGrowth * batch)) return;
  const std::string where = gpu ? fmt::format("GPU {}", p->device) : "host";
  Finding f;
  f.verdict = "memory_headroom";
  f.origin = "markers";
  f.rank = p->rank;
  f.scope = Who(*p);
  // Room on a GPU is a batch the GPU could run wider; on a host it says only
  // that memory is not what limits a CPU job (information, not a problem).
  f.severity = tight ? Severity::kModerate : gpu ? Severity::kLow : Severity::kInfo;
  if (tight)
    f.title = fmt::format("No memory headroom on the {}: peak {} of {} ({:.0f}%)", where, Size(peak), Size(capacity),
                          Percent(peak, capacity));
  else
    f.title = fmt::format("Memory headroom on the {}: batch {:.0f} → at least {:.0f} fits (peak {} of {})", where, batch,
                          largest, Size(peak), Size(capacity));
  f.detail = fmt::format(
      "The {} peak was {} of {} ({:.0f}%{}). {} With {:.0f}% kept free, {} is usable; taking everything above the {} "
      "that does not grow with the batch as if it did ({} per sample, an upper bound), a batch of {} fits{}. A run "
      "at another batch size measures what does not grow with it, and so the real limit.",
      gpu ? "allocator's allocated" : "resident set's", Size(peak), Size(capacity), Percent(peak, capacity),
      gpu ? "" : fmt::format(", {}", m.host_limit_source.empty() ? "host memory" : m.host_limit_source),
      static_here ? fmt::format("Parameters {}, gradients {} and optimizer state {} stay whatever the batch.",
                                Size(static_cast<double>(m.parameters_bytes)),
                                Size(static_cast<double>(std::max<int64_t>(0, m.gradients_bytes))),
                                Size(static_cast<double>(std::max<int64_t>(0, m.optimizer_state_bytes))))
                  : "The static memory (parameters, gradients, optimizer state) was not counted on this device.",
      kMemorySafetyMargin * 100, Size(usable), Size(fixed), Size(per_sample),
      std::isnan(largest) ? "(unknown: the steps did not count their samples)" : fmt::format("{:.0f}", largest),
      batch > 0 ? fmt::format(" (now {:.0f})", batch) : "");
  f.evidence = {
      E("peak_memory", peak / kMiB, "MiB", gpu ? "markers: torch.cuda allocated_bytes peak" : "markers: VmHWM"),
      E("capacity", capacity / kMiB, "MiB", gpu ? "torch.cuda.get_device_properties" : m.host_limit_source),
      E("peak_percent_of_capacity", Percent(peak, capacity), "percent", "peak / capacity", kTightShare * 100, ">="),
      E("static_memory", fixed / kMiB, "MiB", "job: parameters + gradients + optimizer state"),
      E("batch", batch, "samples", "markers: samples per step"),
      E("memory_per_sample_upper", per_sample / kMiB, "MiB", "(peak − static) / batch"),
  };
  if (!std::isnan(largest))
    f.evidence.push_back(E("largest_batch_lower_bound", largest, "samples",
                           fmt::format("batch × (capacity × {:.2f} − static) / (peak − static)", 1 - kMemorySafetyMargin)));
  if (tight) {
    f.recommendations = {
        {"keep the batch and add gradient accumulation for a larger effective batch (no_sync() on all but the last "
         "micro-batch under DDP)",
         "the same samples per update with less memory per step; costs one more forward/backward launch per micro-batch"},
        {"activation checkpointing (torch.utils.checkpoint) on the largest blocks", "frees activations for ~30% more compute"},
        {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "returns memory the caching allocator fragments"},
    };
  } else {
    f.recommendations = {{fmt::format("raise the batch toward {:.0f} (scale the learning rate with it), or record a "
                                      "run at another batch size under the same --name: the two measure what grows "
                                      "with the batch",
                                      largest),
                          gpu ? "fewer, larger steps fill the GPU; the memory is there"
                              : "fewer, larger steps do more work per optimizer update; the memory is there"}};
  }
  // The other end: memory held at the step's end (parameters, gradients,
  // optimizer state, caches) taken as all that does not grow, the step's
  // transient memory as all that does. Not a bound: a host's allocator keeps
  // freed memory resident, so its level at the step's end can hide growth.
  const double at_end = std::min(peak, gpu ? p->gpu_end_median_bytes : p->host_end_median_bytes);
  const double largest_if_transient = at_end > fixed && peak > at_end ? std::floor(batch * (usable - at_end) / (peak - at_end)) : NAN;
  ExpectedGain g;
  g.metric = "batch_size";
  g.unit = "samples";
  g.current = batch;
  g.expected = std::isnan(largest) ? batch : largest;
  g.worst = g.expected;  // a lower bound: what fits at least
  g.best = std::isnan(largest_if_transient) ? g.expected : std::max(g.expected, largest_if_transient);
  g.bounded_by = "memory_capacity";
  g.basis = fmt::format(
      "the largest batch that fits with a 10 % margin, taking everything above the static memory as growing with the "
      "batch (a lower bound on what fits); the range's other end takes only the step's transient memory (peak − the "
      "{} at step ends) as growing. One run cannot split them; runs at two batch sizes can",
      Size(at_end));
  f.gain = g;
  out.push_back(std::move(f));
}

}  // namespace

void BoundBatchByMemory(std::vector<Finding>& findings) {
  const Finding* headroom = nullptr;
  for (const auto& f : findings)
    if (f.verdict == "memory_headroom" && f.gain && f.gain->metric == "batch_size") headroom = &f;
  if (headroom == nullptr) return;
  const ExpectedGain& h = *headroom->gain;
  const bool tight = headroom->severity >= Severity::kModerate;
  for (auto& f : findings) {
    if (f.verdict != "undersized_work") continue;
    const std::string line =
        tight ? fmt::format("the batch cannot grow in memory ({}): keep it and add gradient accumulation for a "
                            "larger effective batch, or free memory first (activation checkpointing)",
                            headroom->title)
              : fmt::format("batch {:.0f} → up to {:.0f} fits (range {:.0f}-{:.0f}; {})", h.current, h.expected, h.worst,
                            h.best, headroom->title);
    // Judged again once an experiment's runs fit the batch (FitHeadroomOverRuns): the line is replaced.
    const Recommendation bound{line, "memory_headroom: " + h.basis};
    auto old = std::find_if(f.recommendations.begin(), f.recommendations.end(),
                            [](const Recommendation& r) { return r.why.rfind("memory_headroom: ", 0) == 0; });
    if (old != f.recommendations.end()) *old = bound;
    else f.recommendations.insert(f.recommendations.begin(), bound);
    if (f.gain && f.gain->bounded_by == "memory_capacity") {
      std::string& basis = f.gain->basis;
      if (auto at = basis.find("; memory_headroom: "); at != std::string::npos) basis.erase(at);
      basis += tight ? "; memory_headroom: no room for a larger batch"
                     : fmt::format("; memory_headroom: up to batch {:.0f} fits", h.expected);
    }
  }
}

std::vector<Finding> JudgeStepMemory(const RecordingAnalysis& a) {
  std::vector<Finding> out;
  const StepMemoryAnalysis& m = a.step_memory;
  if (!m.sampled) return out;
  for (const auto& p : m.processes) {
    Creep(m, p, true, out);
    Creep(m, p, false, out);
  }
  Headroom(m, out);
  return out;
}

}  // namespace gputriage
