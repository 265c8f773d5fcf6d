// Verdicts from the memory a recorded job sampled at its step ends
// (src/analysis/step_memory.cc; docs/memory.md), origin "markers":
//
//   memory_creep     memory at the same point of each step grows steadily
//                    (a Theil-Sen slope over step numbers, rising through every
//                    quarter and in both halves): the growth per step and per
//                    hour, and when it reaches capacity at that rate.
//   memory_headroom  the peak against capacity, and how far the batch can grow
//                    before it no longer fits (with a safety margin).
//   out_of_memory    the job died of an OOM: what held memory, the request,
//                    the fixes ranked by what each frees.
//   memory_fragmentation  allocator retries, or an OOM while the cache's free
//                    blocks exceeded the request.
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
// Reserved above the allocated peak by this much (and this share of reserved)
// is memory the caching allocator could not reuse.
constexpr double kFragmentedGapBytes = 2.0 * kGiB;
constexpr double kFragmentedGapShare = 0.25;

std::string Who(const ProcessMemory& p) {
  return p.rank >= 0 ? fmt::format("rank {} (process {})", p.rank, p.pid) : fmt::format("process {}", p.pid);
}

/// "3.2 h", "14 min": how long until something happens.
std::string Hours(double h) { return h >= 1 ? fmt::format("{:.1f} h", h) : fmt::format("{:.0f} min", std::max(1.0, h * 60)); }

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
                        std::isnan(hours_left) ? "" : fmt::format(", full in about {} at this rate", Hours(hours_left)));
  f.detail = fmt::format(
      "Memory at the end of each step, {} sampled steps from step {} to {} (past the first tenth, where memory "
      "settles), rose from {} to {} (medians of the first and last quarter), in every quarter and in both halves: "
      "{} per step (Theil-Sen slope; {} to {} in the two halves). Something the loop keeps grows with every step.{}",
      t.points, t.first_step, t.last_step, Size(t.first_bytes), Size(t.last_bytes), Size(t.bytes_per_step),
      Size(t.bytes_per_step_low), Size(t.bytes_per_step_high),
      std::isnan(hours_left)
          ? " The capacity it will run into is unknown."
          : fmt::format(" At {:.1f} ms per step it reaches the {} {} has in about {}{}.", t.step_s * 1e3,
                        Size(capacity), gpu ? "the GPU" : m.host_limit_source.empty() ? "the host" : m.host_limit_source,
                        Hours(hours_left),
                        m.oom.known ? fmt::format("; the job ran out of memory first, in step {} (out_of_memory)", m.oom.step)
                                    : ", and the job dies of it"));
  f.evidence = {
      E("growth_per_step", t.bytes_per_step / kMiB, "MiB", "markers: Theil-Sen slope of memory at step ends"),
      E("growth_per_step_low", t.bytes_per_step_low / kMiB, "MiB", "markers: the slower half's slope"),
      E("growth_per_step_high", t.bytes_per_step_high / kMiB, "MiB", "markers: the faster half's slope"),
      E("growth_per_hour", t.bytes_per_hour / kGiB, "GiB", "markers: slope / mean step time"),
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
        {"find it: count the live tensors by shape between two steps (`collections.Counter(tuple(o.shape) for o in "
         "gc.get_objects() if torch.is_tensor(o))`), and for Python objects compare `tracemalloc.take_snapshot()` "
         "between two steps",
         "a tensor's storage comes from PyTorch's own allocator, which tracemalloc does not see; the growing "
         "shape names the tensor that is kept"},
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
      std::isnan(hours_left) ? "" : fmt::format(" in about {}", Hours(hours_left)));
  f.gain = g;
  out.push_back(std::move(f));
}

void Headroom(const StepMemoryAnalysis& m, std::vector<Finding>& out) {
  // The process with the largest peak; its GPU's memory, else the host's.
  const ProcessMemory* p = nullptr;
  for (const auto& q : m.processes)
    if (p == nullptr || std::max(q.device_peak_bytes, q.host_rss_peak_bytes) > std::max(p->device_peak_bytes, p->host_rss_peak_bytes))
      p = &q;
  if (p == nullptr) return;
  const bool gpu = p->device >= 0 && p->device_peak_bytes > 0;
  // A run that ran out of memory, or whose memory grows every step, has no
  // steady peak to size a batch by: out_of_memory and memory_creep speak.
  if (m.oom.known || (gpu ? p->gpu.creeping : p->host.creeping)) return;
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
  const bool tight = peak >= kMemoryTightShare * capacity;
  if (!tight && !(largest >= kMemoryHeadroomGrowth * batch)) return;
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
      E("peak_percent_of_capacity", Percent(peak, capacity), "percent", "peak / capacity", kMemoryTightShare * 100, ">="),
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
  // On the host the transient memory is no bound (issue 53: "2918-19530494"):
  // the range then has no upper end, and says why.
  g.best = !gpu || std::isnan(largest_if_transient) ? g.expected : std::max(g.expected, largest_if_transient);
  g.bounded_by = "memory_capacity";
  g.basis = gpu ? fmt::format(
                      "the largest batch that fits with a 10 % margin, taking everything above the static memory as "
                      "growing with the batch (a lower bound on what fits); the range's other end takes only the "
                      "step's transient memory (peak − the {} at step ends) as growing. One run cannot split them; "
                      "runs at two batch sizes can",
                      Size(at_end))
                : "the largest batch that fits with a 10 % margin, taking everything above the static memory as "
                  "growing with the batch: a lower bound on what fits, with no upper end from this run (the host's "
                  "allocator keeps freed memory resident, so the step's own memory cannot be read at its end); runs "
                  "at two batch sizes measure what grows with the batch";
  f.gain = g;
  out.push_back(std::move(f));
}

/// One way out of an out-of-memory error, with the memory it frees (a range:
/// what the run measured bounds it, the model's shape decides where in it).
struct MemoryFix {
  std::string action, why;
  double frees_low = 0, frees_high = 0;  // bytes
};

void AddGpuFixes(const StepMemoryAnalysis& m, double cache, std::vector<MemoryFix>& fixes);

/// The fixes an OOM's memory allows, most memory freed first. `activations`:
/// what the allocator held beyond the static memory (activations and the step's
/// temporaries); `fixed`: parameters, gradients and optimizer state.
std::vector<MemoryFix> OutOfMemoryFixes(const StepMemoryAnalysis& m, bool gpu, double activations, double cache) {
  std::vector<MemoryFix> fixes;
  // Memory that grew every step until the error: the leak held it.
  for (const auto& p : m.processes) {
    const MemoryTrend& t = gpu ? p.gpu : p.host;
    if (!t.creeping || m.oom.step < t.first_step) continue;
    const double held = t.bytes_per_step * static_cast<double>(m.oom.step - t.first_step);
    fixes.push_back({fmt::format("stop the leak first (memory_creep: +{} per step since step {})", Size(t.bytes_per_step),
                                 t.first_step),
                     "what the loop kept from every step filled the memory; at the same rate any other fix only "
                     "delays the error",
                     held, held + t.bytes_per_step * static_cast<double>(t.first_step)});
    break;
  }
  if (activations > 0) {
    fixes.push_back({"activation checkpointing (torch.utils.checkpoint on each block, or the framework's "
                     "gradient_checkpointing)",
                     "keeps only each block's input in forward and recomputes the rest in backward, for about a third "
                     "more compute",
                     0.5 * activations, 0.9 * activations});
    fixes.push_back({"halve the micro-batch and accumulate gradients over 2 micro-batches (the same samples per update)",
                     "activations grow with the micro-batch; one more forward and backward launch per update",
                     0.25 * activations, 0.5 * activations});
  }
  if (gpu) AddGpuFixes(m, cache, fixes);  // sharding, 8-bit state, expandable segments: GPU remedies
  std::stable_sort(fixes.begin(), fixes.end(), [](const MemoryFix& a, const MemoryFix& b) { return a.frees_high > b.frees_high; });
  return fixes;
}

void AddGpuFixes(const StepMemoryAnalysis& m, double cache, std::vector<MemoryFix>& fixes) {
  if (m.optimizer_state_bytes > 0)
    fixes.push_back({"8-bit optimizer state (bitsandbytes' Adam8bit), or bf16 state",
                     "Adam keeps two fp32 values per parameter: 8-bit keeps a quarter of them, bf16 half",
                     0.5 * static_cast<double>(m.optimizer_state_bytes), 0.75 * static_cast<double>(m.optimizer_state_bytes)});
  if (const int64_t fixed = m.StaticBytes(); fixed > 0) {
    const int n = std::max(2, m.world_size);
    fixes.push_back({fmt::format("shard parameters, gradients and optimizer state across {} GPUs (FSDP / ZeRO-3)", n),
                     "each GPU keeps 1/N of what every GPU holds now",
                     static_cast<double>(fixed) * (1.0 - 1.0 / n), static_cast<double>(fixed) * (1.0 - 1.0 / n)});
  }
  if (cache > 0)
    fixes.push_back({"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                     "the cache's free blocks, split in fixed segments, become usable for the failing request",
                     0, cache});
}

/// What a host (CPU) out-of-memory error ran into: the limit, in its own
/// measure (the address space for RLIMIT_AS, the resident set for a cgroup or
/// the machine), what the process had of it, and the step's own memory.
struct HostOom {
  std::string kind;  // "address_space", "cgroup", "host_memory"; "" when no limit was near
  std::string name;  // for the text
  double limit = 0, used = 0, shortfall = 0;
  // The failing step's memory beyond what stays between steps (activations and
  // temporaries, and the failed request), and the batch it ran; 0 unknown.
  double step_need = 0, held = 0, batch = 0;
  // Under the limit with the margin, above what stays between steps (in the
  // limit's own measure); what the batch may grow into.
  double room = 0;
  double fits = NAN;  // the largest batch that fits under the limit with the margin
};

HostOom HostOomOf(const StepMemoryAnalysis& m, double requested) {
  const OutOfMemoryError& e = m.oom;
  HostOom h;
  // The peaks: the failing step's tensors were freed by the time the error
  // was reported, and the peak is what the failing request came on top of.
  const double vm = static_cast<double>(e.host_vm_peak_bytes >= 0 ? e.host_vm_peak_bytes : e.host_vm_bytes);
  const double rss = static_cast<double>(e.host_rss_peak_bytes >= 0 ? e.host_rss_peak_bytes : e.host_rss_bytes);
  const double as_limit = static_cast<double>(e.address_space_limit_bytes);
  const double host_limit = static_cast<double>(e.host_limit_bytes);
  // The error's own request put the process past the limit: a limit it was
  // still far from (under 90 % with the request) did not fail it.
  if (as_limit > 0 && vm >= 0 && vm + requested >= 0.9 * as_limit) {
    h = {"address_space", "the address-space limit (RLIMIT_AS: what ulimit -v or a scheduler's vmem limit sets)",
         as_limit, vm, std::max(0.0, vm + requested - as_limit)};
  } else if (host_limit > 0 && rss >= 0 && rss + requested >= 0.9 * host_limit) {
    const bool cgroup = e.host_limit_source.rfind("cgroup", 0) == 0;
    h = {cgroup ? "cgroup" : "host_memory", cgroup ? "the container's memory limit (" + e.host_limit_source + ")"
                                                   : "the host's memory",
         host_limit, rss, std::max(0.0, rss + requested - host_limit)};
  }
  if (h.kind.empty() || rss < 0) return h;
  // The process that sampled its steps; what it held at step ends stays whatever the batch.
  const ProcessMemory* p = nullptr;
  for (const auto& q : m.processes)
    if (q.host_end_median_bytes > 0 && (p == nullptr || q.host_rss_peak_bytes > p->host_rss_peak_bytes)) p = &q;
  if (p == nullptr || p->host_end_median_bytes >= rss) return h;
  h.held = p->host_end_median_bytes;
  h.step_need = rss - h.held + requested;
  // In the address space, what stays between steps is the peak less the step's own resident memory.
  const double base = h.kind == "address_space" ? vm - (rss - h.held) : h.held;
  h.batch = p->samples_per_step;
  h.room = h.limit * (1.0 - kMemorySafetyMargin) - base;
  if (h.batch > 0 && h.room > 0) h.fits = std::floor(h.batch * h.room / h.step_need);
  return h;
}

/// The fixes of a host error beyond activations: the limit itself, and the batch.
void AddHostFixes(const HostOom& h, double rss, std::vector<MemoryFix>& fixes) {
  if (h.kind == "address_space")
    fixes.push_back({fmt::format("raise the address-space limit to at least {} with a margin, or lift it (ulimit -v "
                                 "unlimited; the scheduler's vmem limit)",
                                 Size(h.limit + h.shortfall)),
                     fmt::format("it counts address space reserved and never touched (thread stacks, the allocator's "
                                 "arenas, mapped libraries): at most {} of the {} were resident",
                                 Size(rss), Size(h.used)),
                     h.shortfall, h.shortfall});
  else if (h.kind == "cgroup")
    fixes.push_back({"raise the container's memory limit (memory.max: the pod's resources.limits.memory, the job's "
                     "--mem) by at least the shortfall",
                     "the container, not the machine, ran out", h.shortfall, h.shortfall});
  if (!std::isnan(h.fits) && h.fits >= 1 && h.fits < h.batch)
    fixes.push_back({fmt::format("a batch of {:.0f} (the run had {:.0f}), or {:.0f} with gradient accumulation over "
                                 "{:.0f} micro-batches for the same samples per update",
                                 h.fits, h.batch, h.fits, std::ceil(h.batch / h.fits)),
                     fmt::format("the failing step needed {} beyond what stays between steps, growing with the batch; "
                                 "{} is left under the limit with a 10 % margin",
                                 Size(h.step_need), Size(h.room)),
                     h.step_need * (1.0 - h.fits / h.batch), h.step_need * (1.0 - h.fits / h.batch)});
}

/// The fixes as recommendations, each with what it frees, and the gain: the
/// shortfall left after the first. `unsized`: why no fix has a figure, and what
/// would give one (said when there is none).
void AddOomFixesAndGain(const std::vector<MemoryFix>& fixes, double shortfall, const std::string& unsized, Finding& f) {
  for (const auto& fix : fixes)
    f.recommendations.push_back({fmt::format("{}: frees {}", fix.action,
                                             fix.frees_low == fix.frees_high ? Size(fix.frees_low)
                                                                             : Size(fix.frees_low) + "-" + Size(fix.frees_high)),
                                 fix.why});
  if (fixes.empty()) f.recommendations.push_back({unsized, "then each fix gets its figure"});
  ExpectedGain g;
  g.metric = "memory_short";
  g.unit = "MiB";
  g.current = shortfall / kMiB;
  const double freed_high = fixes.empty() ? 0 : fixes.front().frees_high, freed_low = fixes.empty() ? 0 : fixes.front().frees_low;
  g.expected = std::max(0.0, shortfall - freed_high) / kMiB;
  g.best = g.expected;
  g.worst = std::max(0.0, shortfall - freed_low) / kMiB;
  g.bounded_by = "device_capacity";
  g.basis = fixes.empty() ? "no fix could be sized: " + unsized
                          : fmt::format("the first fix frees {}-{} against a shortfall of {}: 0 means the request fits",
                                        Size(freed_low), Size(freed_high), Size(shortfall));
  f.gain = g;
}

/// The static memory's three parts, for a finding's text.
std::string StaticParts(const StepMemoryAnalysis& m) {
  return fmt::format("parameters {}, gradients {}, optimizer state {}", Size(static_cast<double>(m.parameters_bytes)),
                     Size(static_cast<double>(std::max<int64_t>(0, m.gradients_bytes))),
                     Size(static_cast<double>(std::max<int64_t>(0, m.optimizer_state_bytes))));
}

/// An out-of-memory error on the host (PyTorch's CPU allocator): which limit it
/// met, what the failing step needed, and the fixes sized from those figures.
void HostOutOfMemory(const StepMemoryAnalysis& m, std::vector<Finding>& out) {
  const OutOfMemoryError& e = m.oom;
  const double requested = static_cast<double>(std::max<int64_t>(0, e.requested_bytes));
  const double rss = static_cast<double>(e.host_rss_peak_bytes >= 0 ? e.host_rss_peak_bytes : e.host_rss_bytes);
  const HostOom h = HostOomOf(m, requested);
  const bool static_here = m.StaticBytes() >= 0 && m.static_device == "cpu";
  Finding f;
  f.verdict = "out_of_memory";
  f.origin = "markers";
  f.scope = e.device;
  f.severity = m.exit_code == 0 ? Severity::kModerate : Severity::kHigh;
  f.title = fmt::format("Out of memory on the host{}: asked for {}{}", e.step >= 0 ? fmt::format(" in step {}", e.step) : "",
                        Size(requested),
                        h.kind == "address_space"
                            ? fmt::format(" at its address-space limit ({} of {}) with at most {} resident", Size(h.used),
                                          Size(h.limit), Size(rss))
                        : h.kind.empty() ? "" : fmt::format(" at {} ({} of {})", h.name, Size(h.used), Size(h.limit)));
  f.detail = fmt::format(
      "The job {} with an out-of-memory error{} from PyTorch's CPU allocator. {}{}{} The fixes below are ranked by "
      "what each frees of this run's memory.",
      m.exit_code > 0 ? fmt::format("ended (exit {})", m.exit_code) : "raised", e.where.empty() ? "" : " at " + e.where,
      h.kind.empty() ? fmt::format("Its resident set peaked at {}; no limit it was near is known (address space {}).", Size(rss),
                                   e.host_vm_bytes >= 0 ? Size(static_cast<double>(e.host_vm_bytes)) : "unknown")
                     : fmt::format("It met {}: {} of {} with the request, {} short.{}", h.name,
                                   Size(h.used + requested), Size(h.limit), Size(h.shortfall),
                                   h.kind == "address_space" && e.host_limit_bytes > 0
                                       ? fmt::format(" The host's memory was not what ran out: at most {} of its {} ({}) "
                                                     "was resident.",
                                                     Size(rss), Size(static_cast<double>(e.host_limit_bytes)),
                                                     e.host_limit_source)
                                       : ""),
      static_here ? fmt::format(" Of it, {} stay whatever the batch.", StaticParts(m)) : "",
      h.step_need > 0 ? fmt::format(" The failing step needed {} beyond the {} held between steps (activations and "
                                    "temporaries, with the request), at a batch of {:.0f}.",
                                    Size(h.step_need), Size(h.held),
                                    h.batch)
                      : " No step ended with its memory sampled before the error, so the step's own memory is unknown.");
  f.evidence.push_back(E("requested", requested / kMiB, "MiB", "the error's message"));
  f.evidence.push_back(E("host_resident_peak", rss / kMiB, "MiB", "/proc/self/status VmHWM at the error"));
  if (e.host_vm_peak_bytes >= 0 || e.host_vm_bytes >= 0)
    f.evidence.push_back(E("host_address_space_peak",
                           static_cast<double>(e.host_vm_peak_bytes >= 0 ? e.host_vm_peak_bytes : e.host_vm_bytes) / kMiB,
                           "MiB", "/proc/self/status VmPeak at the error"));
  if (e.address_space_limit_bytes > 0)
    f.evidence.push_back(E("address_space_limit", static_cast<double>(e.address_space_limit_bytes) / kMiB, "MiB",
                           "RLIMIT_AS (ulimit -v)"));
  if (e.host_limit_bytes > 0)
    f.evidence.push_back(E("host_limit", static_cast<double>(e.host_limit_bytes) / kMiB, "MiB", e.host_limit_source));
  if (static_here)
    f.evidence.push_back(E("static_memory", static_cast<double>(m.StaticBytes()) / kMiB, "MiB",
                           "job: parameters + gradients + optimizer state"));
  if (h.step_need > 0)
    f.evidence.push_back(E("step_memory", h.step_need / kMiB, "MiB",
                           "resident peak − the median at step ends + the request"));
  if (h.batch > 0) f.evidence.push_back(E("batch", h.batch, "samples", "markers: samples per step"));
  if (!std::isnan(h.fits))
    f.evidence.push_back(E("largest_batch_that_fits", h.fits, "samples",
                           "batch × (limit × 0.9 − what stays between steps) / the step's own memory"));
  f.evidence.push_back(E("shortfall", (h.kind.empty() ? requested : h.shortfall) / kMiB, "MiB",
                         h.kind.empty() ? "the request (no limit it was near is known)" : "used + requested − limit"));
  std::vector<MemoryFix> fixes;
  AddHostFixes(h, rss, fixes);
  for (auto& fix : OutOfMemoryFixes(m, false, h.step_need > 0 ? h.step_need - requested : 0, 0)) fixes.push_back(fix);
  std::stable_sort(fixes.begin(), fixes.end(), [](const MemoryFix& a, const MemoryFix& b) { return a.frees_high > b.frees_high; });
  AddOomFixesAndGain(fixes, h.kind.empty() ? requested : h.shortfall,
                     h.kind.empty() ? "record with --python (zero-code mode) so that the steps' memory is sampled"
                                    : "no step ended with its memory sampled before the error: a run at a smaller batch "
                                      "that completes a step measures what grows with it",
                     f);
  out.push_back(std::move(f));
}

void OutOfMemory(const StepMemoryAnalysis& m, std::vector<Finding>& out) {
  const OutOfMemoryError& e = m.oom;
  if (!e.known) return;
  if (e.device.rfind("cuda", 0) != 0 && e.host_rss_bytes >= 0) return HostOutOfMemory(m, out);
  const bool gpu = e.device.rfind("cuda", 0) == 0;
  const double requested = static_cast<double>(std::max<int64_t>(0, e.requested_bytes));
  const double free = static_cast<double>(std::max<int64_t>(0, e.free_bytes));
  // Without the device's free memory (a host allocator's error, a limit on the
  // address space) the request is all that is known to be short.
  const bool free_known = e.free_bytes >= 0;
  const double shortfall = free_known ? std::max(0.0, requested - free) : requested;
  const bool static_here = m.StaticBytes() >= 0 && m.static_device == e.device;
  const double fixed = static_here ? static_cast<double>(m.StaticBytes()) : 0;
  const double allocated = static_cast<double>(std::max<int64_t>(0, e.allocated_bytes));
  const double activations = e.allocated_bytes >= 0 && static_here ? std::max(0.0, allocated - fixed) : 0;
  const double cache = static_cast<double>(std::max<int64_t>(0, e.reserved_unallocated_bytes));
  Finding f;
  f.verdict = "out_of_memory";
  f.origin = e.from_snapshot ? "snapshot" : "markers";
  f.scope = e.device;
  f.severity = m.exit_code == 0 ? Severity::kModerate : Severity::kHigh;
  f.title = fmt::format("Out of memory on {}{}: asked for {}{}", e.device,
                        e.step >= 0 ? fmt::format(" in step {}", e.step) : "", Size(requested),
                        e.free_bytes >= 0 ? fmt::format(" with {} free", Size(free)) : "");
  std::string held;
  if (e.allocated_bytes >= 0) {
    held = static_here
               ? fmt::format(" PyTorch held {}: parameters {}, gradients {}, optimizer state {}, and {} of activations and "
                             "the step's temporaries{}.",
                             Size(allocated), Size(static_cast<double>(m.parameters_bytes)),
                             Size(static_cast<double>(std::max<int64_t>(0, m.gradients_bytes))),
                             Size(static_cast<double>(std::max<int64_t>(0, m.optimizer_state_bytes))), Size(activations),
                             cache > 0 ? fmt::format("; its cache held {} more, free", Size(cache)) : "")
               : fmt::format(" PyTorch held {} allocated{} ({}).", Size(allocated),
                             cache > 0 ? fmt::format(" and {} cached, free", Size(cache)) : "",
                             e.from_snapshot ? "the allocator's history replayed to the error; a snapshot does not tell "
                                               "parameters from activations"
                                             : "the static memory was not counted: the job had not trained yet, or it "
                                               "ran outside zero-code mode");
  }
  f.detail = fmt::format("The job {} with an out-of-memory error{}{}.{}{} The fixes below are ranked by what each frees "
                         "of this run's memory.",
                         e.from_snapshot ? "met" : m.exit_code > 0 ? fmt::format("ended (exit {})", m.exit_code) : "raised",
                         e.where.empty() ? "" : " at " + e.where,
                         e.total_bytes > 0 ? fmt::format(" on a device of {}", Size(static_cast<double>(e.total_bytes))) : "",
                         held,
                         e.snapshot.empty() ? "" : fmt::format(" The allocator's snapshot is in {}: `gputriage diagnose {}` "
                                                               "shows its segments and history.", e.snapshot, e.snapshot));
  const char* said_by = e.from_snapshot ? "the snapshot's 'oom' history entry" : "the error's message";
  f.evidence.push_back(E("requested", requested / kMiB, "MiB", said_by));
  if (e.free_bytes >= 0) f.evidence.push_back(E("device_free", free / kMiB, "MiB", said_by));
  if (e.total_bytes >= 0) f.evidence.push_back(E("device_total", static_cast<double>(e.total_bytes) / kMiB, "MiB", "the error's message"));
  if (e.allocated_bytes >= 0) f.evidence.push_back(E("allocated", allocated / kMiB, "MiB", "PyTorch's allocator at the error"));
  if (e.reserved_unallocated_bytes >= 0)
    f.evidence.push_back(E("reserved_unallocated", cache / kMiB, "MiB", "PyTorch's cache at the error"));
  if (static_here) f.evidence.push_back(E("static_memory", fixed / kMiB, "MiB", "job: parameters + gradients + optimizer state"));
  f.evidence.push_back(E("shortfall", shortfall / kMiB, "MiB",
                         free_known ? "requested − free" : "the request (the device's free memory is not in the message)"));
  AddOomFixesAndGain(OutOfMemoryFixes(m, gpu, activations, gpu ? cache : 0), shortfall,
                     static_here ? "the allocator's figures at the error were not read: record with --python (zero-code "
                                   "mode), and on a GPU with --memory-history for the allocator's snapshot"
                                 : "the static memory was not counted: record with --python (zero-code mode), and on a "
                                   "GPU with --memory-history for the allocator's snapshot",
                     f);
  out.push_back(std::move(f));
}

/// The caching allocator holds memory no request could use: retries (a
/// cudaMalloc failed, the cache was flushed and the allocation retried), or an
/// OOM while the cache's free blocks exceeded the failing request.
void Fragmentation(const StepMemoryAnalysis& m, std::vector<Finding>& out) {
  const OutOfMemoryError& e = m.oom;
  const bool oom_in_cache = e.known && e.requested_bytes > 0 && e.reserved_unallocated_bytes >= e.requested_bytes &&
                            e.device.rfind("cuda", 0) == 0;
  // Reserved far above the allocated peak: the cache asked the driver for new
  // segments while its free blocks, split to other sizes (or held by other
  // streams), could not serve the request.
  const auto gap = [](const ProcessMemory& q) {
    return static_cast<double>(std::max<int64_t>(0, q.device_reserved_max_bytes - q.device_peak_bytes));
  };
  const auto split_cache = [&](const ProcessMemory& q) {
    return gap(q) >= std::max(kFragmentedGapBytes, kFragmentedGapShare * static_cast<double>(q.device_reserved_max_bytes));
  };
  const ProcessMemory* p = nullptr;
  for (const auto& q : m.processes)
    if (q.device >= 0 && (q.alloc_retries > 0 || split_cache(q)) &&
        (p == nullptr || q.alloc_retries > p->alloc_retries || (q.alloc_retries == p->alloc_retries && gap(q) > gap(*p))))
      p = &q;
  if (!oom_in_cache && p == nullptr) return;
  Finding f;
  f.verdict = "memory_fragmentation";
  f.origin = "markers";
  f.severity = oom_in_cache ? Severity::kHigh : Severity::kModerate;
  const double cache = static_cast<double>(std::max<int64_t>(0, e.reserved_unallocated_bytes));
  if (oom_in_cache) {
    f.scope = e.device;
    f.title = fmt::format("Memory fragmentation on {}: out of memory asking for {} while PyTorch's cache held {} free",
                          e.device, Size(static_cast<double>(e.requested_bytes)), Size(cache));
    f.detail = "The caching allocator reserves memory in segments and splits them; freed blocks stay in their segments. "
               "The request found no free block large enough although the free blocks together were larger: the "
               "memory was there, in pieces.";
    f.evidence = {E("requested", static_cast<double>(e.requested_bytes) / kMiB, "MiB", "the error's message"),
                  E("reserved_unallocated", cache / kMiB, "MiB", "PyTorch's cache at the error",
                    static_cast<double>(e.requested_bytes) / kMiB, ">=")};
  } else {
    f.rank = p->rank;
    f.scope = Who(*p);
    if (p->alloc_retries == 0) f.severity = Severity::kLow;
    f.title = p->alloc_retries > 0
                  ? fmt::format("Memory fragmentation on GPU {}: {} allocator retries (cache flushed to make room); "
                                "reserved up to {} for an allocated peak of {}",
                                p->device, p->alloc_retries, Size(static_cast<double>(p->device_reserved_max_bytes)),
                                Size(static_cast<double>(p->device_peak_bytes)))
                  : fmt::format("Memory fragmentation on GPU {}: reserved up to {} for an allocated peak of {} ({} "
                                "the cache could not reuse)",
                                p->device, Size(static_cast<double>(p->device_reserved_max_bytes)),
                                Size(static_cast<double>(p->device_peak_bytes)), Size(gap(*p)));
    f.detail = p->alloc_retries > 0
                   ? "A cudaMalloc failed and PyTorch freed its cached blocks to retry it: each retry synchronises the "
                     "device and costs a flush, and the next out-of-memory error is close. The cache held blocks that no "
                     "request could use."
                   : "Tensors never needed more than the allocated peak at once, yet the allocator reserved this much "
                     "more from the driver: its free blocks, split to other sizes (or kept for other streams), could not "
                     "serve later requests, so it asked for new segments. That memory is lost to the job and to a "
                     "larger batch.";
    f.evidence = {E("alloc_retries", static_cast<double>(p->alloc_retries), "count",
                    "torch.cuda.memory_stats num_alloc_retries", 0.0, ">"),
                  E("reserved_above_peak", gap(*p) / kMiB, "MiB", "reserved max − allocated peak",
                    std::max(kFragmentedGapBytes, kFragmentedGapShare * static_cast<double>(p->device_reserved_max_bytes)) / kMiB,
                    ">=")};
  }
  f.recommendations = {
      {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PyTorch 2.1 and later)",
       "segments grow in place instead of being split: freed memory is usable for any size"},
      {"before that: PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512", "large blocks are no longer split for small requests"},
  };
  ExpectedGain g;
  g.unit = oom_in_cache ? "MiB" : "count";
  g.bounded_by = "device_capacity";
  if (oom_in_cache) {
    g.metric = "memory_usable_for_request";
    g.current = static_cast<double>(std::max<int64_t>(0, e.free_bytes)) / kMiB;
    g.best = g.expected = g.current + cache / kMiB;
    g.worst = g.current;
    g.basis = "at best the cache's free blocks serve the request (expandable segments), at worst they stay in pieces";
  } else if (p->alloc_retries > 0) {
    g.metric = "alloc_retries";
    g.current = static_cast<double>(p->alloc_retries);
    g.expected = g.best = 0;
    g.worst = g.current;
    g.basis = "expandable segments leave no split block a request cannot use: no retries; at worst the working set "
              "itself does not fit and they stay";
  } else {
    g.metric = "reserved_above_peak";
    g.unit = "MiB";
    g.current = gap(*p) / kMiB;
    g.expected = g.best = 0;
    g.worst = g.current;
    g.basis = "with expandable segments the reserved memory follows the allocated peak (to a segment's rounding): the "
              "gap is returned; at worst (blocks held by other streams) it stays";
  }
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
  OutOfMemory(m, out);
  Fragmentation(m, out);
  if (!m.sampled) return out;
  for (const auto& p : m.processes) {
    Creep(m, p, true, out);
    Creep(m, p, false, out);
  }
  Headroom(m, out);
  return out;
}

}  // namespace gputriage
