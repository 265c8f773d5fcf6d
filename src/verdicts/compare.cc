#include "src/verdicts/compare.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gputriage/markers.hpp"
#include "src/util/strings.h"

namespace gputriage {
namespace {

// A relative change a rerun of the same code can show (clocks, caches, other
// tenants) without anything having changed; shares move by points instead.
constexpr double kRelativeNoisePercent = 5.0;
constexpr double kShareNoisePoints = 2.0;
// Standard errors of the step-time difference a move must exceed.
constexpr double kStandardErrors = 3.0;

// Recorded context that differs between any two runs and explains nothing.
bool Incidental(const std::string& key) {
  return key == "status" || key == "exit_code" || key == "scrapes" || key == "unchanged_scrapes_skipped" ||
         key == "git_dirty" ||
         // measurements of the host and of the job's copies, not settings
         StartsWith(key, "host.usage.") || StartsWith(key, "copy.") || StartsWith(key, "checkpointing.") ||
         // how the run ended (an out-of-memory error's figures), not how it was set up
         StartsWith(key, "oom.") ||
         // which tracker run the job logged to: every run has its own
         StartsWith(key, "mlflow.job_");
}

std::map<std::string, std::string> Settings(const Run& run, const Diagnosis& d) {
  std::map<std::string, std::string> out;
  for (const auto& rec : run.recordings)
    for (const auto& [k, v] : rec.metadata)
      out.try_emplace(k, v);  // incidental context is left out by SettingsChanges
  if (!d.summary.device.empty()) out["gpu"] = d.summary.device;
  if (d.summary.devices > 0) out["gpu_count"] = std::to_string(d.summary.devices);
  return out;
}

/// The step-time CV of a run's marked steps (0 when it has none).
double StepCv(const Diagnosis& d) {
  double cv = 0;
  for (const auto& a : d.recordings) cv = std::max(cv, a.marked.step_ms_cv);
  return cv;
}

double MarkedThroughput(const Diagnosis& d) {
  double total = 0;
  for (const auto& a : d.recordings)
    if (!std::isnan(a.marked.samples_per_s)) total += a.marked.samples_per_s;
  return total > 0 ? total : NAN;
}

double Mfu(const Diagnosis& d) {
  for (const auto& a : d.recordings) {
    if (!std::isnan(a.marked.mfu_percent)) return a.marked.mfu_percent;
    if (!std::isnan(a.throughput.mfu_percent)) return a.throughput.mfu_percent;
  }
  return NAN;
}

/// A command line as argparse reads one: the program (the interpreter and its
/// script, "python train.py"), its flags by name ("--k v", "--k=v", "-k v"; a
/// flag followed by another flag, or last, is a switch), and the positional
/// arguments in order.
struct ParsedCommand {
  std::string program;
  std::map<std::string, std::string> flags;
  std::vector<std::string> positional;
};

bool IsFlag(const std::string& token) {
  if (token.size() < 2 || token[0] != '-') return false;
  // A negative number is a value ("--lr -1e-3"), not a flag.
  return !(std::isdigit(static_cast<unsigned char>(token[1])) || token[1] == '.');
}

bool IsInterpreter(const std::string& token) {
  const std::string base = token.substr(token.find_last_of('/') + 1);
  return StartsWith(base, "python") || base == "torchrun" || base == "accelerate" || base == "deepspeed" ||
         base == "uv" || base == "run" || base == "launch" || base == "-m";
}

ParsedCommand ParseCommand(const std::string& command) {
  ParsedCommand out;
  const auto tokens = Split(command, " ");
  size_t i = 0;
  // The program: interpreters and launchers (with their own flags) up to the script or module.
  for (; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.empty()) continue;
    out.program += (out.program.empty() ? "" : " ") + t;
    if (!IsInterpreter(t) && !IsFlag(t)) {
      ++i;
      break;
    }
  }
  for (; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.empty()) continue;
    if (!IsFlag(t)) {
      out.positional.push_back(t);
      continue;
    }
    if (const size_t eq = t.find('='); eq != std::string::npos) {
      out.flags[t.substr(0, eq)] = t.substr(eq + 1);
    } else if (i + 1 < tokens.size() && !IsFlag(tokens[i + 1])) {
      out.flags[t] = tokens[++i];
    } else {
      out.flags[t] = "";  // a switch
    }
  }
  return out;
}

/// What differs between two commands, flag by flag by name: "train.py --workers 4"
/// vs "train.py --steps 10 --workers 0" gives --workers 4 → 0 and --steps (unset) → 10,
/// never a flag matched to another by its position. A different program (another
/// script) comes first, as "command script".
std::vector<ConfigChange> CommandChanges(const std::string& a, const std::string& b) {
  std::vector<ConfigChange> out;
  const ParsedCommand pa = ParseCommand(a), pb = ParseCommand(b);
  if (pa.program != pb.program) out.push_back({"command script", pa.program, pb.program});
  const auto value = [](const std::map<std::string, std::string>& flags, const std::string& key) {
    auto it = flags.find(key);
    return it == flags.end() ? std::string() : it->second.empty() ? std::string("(set)") : it->second;
  };
  std::set<std::string> keys;
  for (const auto& [k, v] : pa.flags) keys.insert(k);
  for (const auto& [k, v] : pb.flags) keys.insert(k);
  for (const auto& k : keys)
    if (pa.flags.count(k) != pb.flags.count(k) || value(pa.flags, k) != value(pb.flags, k))
      out.push_back({"command " + k, value(pa.flags, k), value(pb.flags, k)});
  for (size_t i = 0; i < std::max(pa.positional.size(), pb.positional.size()); ++i) {
    const std::string before = i < pa.positional.size() ? pa.positional[i] : "";
    const std::string after = i < pb.positional.size() ? pb.positional[i] : "";
    if (before != after) out.push_back({fmt::format("command argument {}", i + 1), before, after});
  }
  return out;
}

/// The settings that move each figure, most direct first (matched as fragments
/// of the change's key).
const std::vector<std::string>& Movers(const std::string& metric) {
  static const std::vector<std::string> input = {"num_workers", "workers", "prefetch", "pin_memory", "persistent",
                                                 "batch_size", "batch", "dataset", "data", "storage"};
  static const std::vector<std::string> compute = {"batch_size", "batch", "autocast", "amp", "dtype", "precision",
                                                   "compile", "attention", "sdpa", "fused", "num_workers", "workers",
                                                   "gpu", "torch", "cuda", "cudnn", "nccl", "driver", "git_commit"};
  static const std::vector<std::string> comm = {"nccl", "world", "nodes", "gpu_count", "bucket", "ddp", "fsdp",
                                                "batch_size", "batch", "git_commit"};
  if (metric == "data_wait_percent") return input;
  if (metric == "exposed_communication_percent") return comm;
  return compute;
}

}  // namespace

std::string CommandProgram(const std::string& command) { return ParseCommand(command).program; }

const std::vector<FigureDefinition>& Figures() {
  static const std::vector<FigureDefinition> figures = {
      {"step_time_ms", "step time", "ms", false, true},
      {"data_wait_percent", "data wait (share of step)", "percent", false},
      {"samples_per_s", "throughput", "samples/s", true},
      {"gpu_busy_percent", "GPU busy", "percent", true},
      {"gpu_util_mean_percent", "utilization.gpu", "percent", true},
      {"sm_efficiency_percent", "SM efficiency", "percent", true},
      {"tensor_core_percent_of_matrix_time", "tensor cores (share of matrix time)", "percent", true},
      {"exposed_communication_percent", "exposed communication", "percent", false},
      {"mfu_percent", "MFU", "percent", true},
      // Peak memory at the same batch: 10 % apart is more than an allocator's
      // rounding or a host's arenas move between reruns (docs/memory.md).
      {"gpu_peak_memory_mib", "peak GPU memory (allocated)", "MiB", false, true, 10.0},
      {"host_peak_memory_mib", "peak host memory (resident)", "MiB", false, true, 10.0},
  };
  return figures;
}

const FigureDefinition* FindFigure(const std::string& id) {
  for (const auto& f : Figures())
    if (id == f.id) return &f;
  return nullptr;
}

bool IsLedgerFigure(const std::string& id) { return id == "goodput_percent" || StartsWith(id, "ledger_"); }

/// The run's peak memory (the largest of its processes), its capacity and
/// static memory: what compare shows and what memory_headroom fits over an
/// experiment's batch sizes (FitHeadroomOverRuns).
void PutMemoryFigures(const Diagnosis& d, std::map<std::string, double>& out) {
  constexpr double kMiB = 1024.0 * 1024.0;
  for (const auto& a : d.recordings) {
    const StepMemoryAnalysis& m = a.step_memory;
    if (!m.sampled) continue;
    int64_t gpu = 0, host = 0;
    double batch = 0;  // the samples per step of the process with the peak (the fit's x)
    for (const auto& p : m.processes) {
      if (std::max(p.device >= 0 ? p.device_peak_bytes : 0, p.host_rss_peak_bytes) > std::max(gpu, host))
        batch = p.samples_per_step;
      gpu = std::max(gpu, p.device >= 0 ? p.device_peak_bytes : 0);
      host = std::max(host, p.host_rss_peak_bytes);
    }
    if (batch > 0) out["memory_batch"] = batch;
    if (gpu > 0) out["gpu_peak_memory_mib"] = static_cast<double>(gpu) / kMiB;
    if (host > 0) out["host_peak_memory_mib"] = static_cast<double>(host) / kMiB;
    if (m.device_total_bytes > 0) out["gpu_memory_capacity_mib"] = static_cast<double>(m.device_total_bytes) / kMiB;
    if (m.host_total_bytes > 0) out["host_memory_capacity_mib"] = static_cast<double>(m.host_total_bytes) / kMiB;
    if (m.StaticBytes() >= 0) out["static_memory_mib"] = static_cast<double>(m.StaticBytes()) / kMiB;
    return;
  }
}

std::map<std::string, double> FiguresOf(const Diagnosis& d) {
  std::map<std::string, double> out;
  const auto put = [&](const char* id, double v) {
    if (std::isfinite(v)) out[id] = v;
  };
  const Summary& s = d.summary;
  if (s.steps > 0) {
    put("step_time_ms", s.avg_step_ms);
    put("data_wait_percent", s.data_wait_percent);
    put("exposed_communication_percent", s.exposed_communication_percent);
  }
  put("samples_per_s", MarkedThroughput(d));
  // Busy time only where something measured it (a trace's kernels, utilization samples).
  if (!s.gpu_busy_source.empty() && !StartsWith(s.gpu_busy_source, "none")) put("gpu_busy_percent", s.gpu_busy_percent);
  put("gpu_util_mean_percent", s.gpu_util_mean_percent);
  put("sm_efficiency_percent", s.sm_efficiency_percent);
  put("tensor_core_percent_of_matrix_time", s.tensor_core_percent_of_matrix);
  put("mfu_percent", Mfu(d));
  if (auto sps = out.find("samples_per_s"); sps != out.end() && s.steps > 0 && s.avg_step_ms > 0)
    put("samples_per_step", sps->second * s.avg_step_ms / 1000.0);
  out["step_time_cv"] = StepCv(d);
  out["steps"] = static_cast<double>(s.steps);
  // The goodput ledger of the job (a recorded run has one recording): kept with
  // the run, so an experiment's ledger adds its runs up without re-reading them.
  PutMemoryFigures(d, out);
  for (const auto& a : d.recordings) {
    if (!a.ledger.valid) continue;
    put("goodput_percent", 100.0 * a.ledger.goodput);
    put("ledger_total_hours", a.ledger.total);
    put("ledger_gpus", a.ledger.gpus);
    for (const auto& b : a.ledger.buckets)
      if (b.known) out["ledger_" + b.name + "_hours"] = b.hours;
    break;
  }
  return out;
}

double NoiseFloor(const FigureDefinition& figure, double step_time_cv, double steps) {
  if (figure.noise_percent > 0) return figure.noise_percent;
  if (figure.unit == std::string("percent")) return kShareNoisePoints;
  // Two runs' mean step times, each over `steps` steps with this CV, differ by
  // chance by about CV·√(2/steps) of the mean (the standard error of their
  // difference); three of those, and never less than a rerun's 5 %.
  const double chance = steps >= 2 ? 100.0 * kStandardErrors * step_time_cv * std::sqrt(2.0 / steps) : 0;
  return std::max(kRelativeNoisePercent, chance);
}

std::string BatchChange(const std::map<std::string, double>& a_figures, const std::map<std::string, std::string>& a_settings,
                        const std::map<std::string, double>& b_figures, const std::map<std::string, std::string>& b_settings) {
  const auto sa = a_figures.find("samples_per_step"), sb = b_figures.find("samples_per_step");
  if (sa != a_figures.end() && sb != b_figures.end() && sa->second > 0) {
    // Markers count samples exactly; 1 % leaves room for a ragged last batch.
    if (std::fabs(sb->second - sa->second) > 0.01 * sa->second)
      return fmt::format("samples per step {:.4g} → {:.4g}", sa->second, sb->second);
    return "";
  }
  for (const auto& [key, before] : a_settings) {
    if (!Contains(AsciiLower(key), "batch")) continue;
    auto it = b_settings.find(key);
    if (it != b_settings.end() && it->second != before) return fmt::format("{} {} → {}", key, before, it->second);
  }
  if (auto ca = a_settings.find("command"), cb = b_settings.find("command"); ca != a_settings.end() && cb != b_settings.end())
    for (const auto& change : CommandChanges(ca->second, cb->second))
      if (Contains(AsciiLower(change.key), "batch"))
        return fmt::format("{} {} → {}", change.key, change.before.empty() ? "(unset)" : change.before,
                           change.after.empty() ? "(unset)" : change.after);
  return "";
}

double FigureOr(const std::map<std::string, double>& figures, const char* id, double fallback) {
  auto it = figures.find(id);
  return it == figures.end() ? fallback : it->second;
}

std::vector<ConfigChange> SettingsChanges(const std::map<std::string, std::string>& a,
                                          const std::map<std::string, std::string>& b) {
  std::vector<ConfigChange> out;
  for (const auto& [k, v] : a) {
    if (Incidental(k)) continue;
    auto it = b.find(k);
    if (it == b.end()) out.push_back({k, v, ""});
    else if (it->second != v) out.push_back({k, v, it->second});
  }
  for (const auto& [k, v] : b)
    if (!Incidental(k) && !a.count(k)) out.push_back({k, "", v});
  if (auto ca = a.find("command"), cb = b.find("command"); ca != a.end() && cb != b.end())
    for (auto& change : CommandChanges(ca->second, cb->second)) out.push_back(std::move(change));
  return out;
}

const ConfigChange* PlausibleCause(const std::string& figure, const std::vector<ConfigChange>& changes) {
  // The first of the figure's movers that a change's key names (the command's own flags count).
  for (const auto& fragment : Movers(figure))
    for (const auto& change : changes) {
      if (change.key == "command") continue;  // its flags are listed one by one
      if (Contains(AsciiLower(change.key), fragment)) return &change;
    }
  return nullptr;
}

std::string FormatFigureValue(const std::string& unit, double v) {
  if (unit == "percent") return fmt::format("{:.1f}%", v);
  if (unit == "ms") return fmt::format("{:.2f} ms", v);
  return fmt::format("{:.1f} {}", v, unit);
}

std::vector<ComparedMetric> Comparison::regressions() const {
  std::vector<ComparedMetric> out;
  for (const auto& m : metrics)
    if (m.worse) out.push_back(m);
  return out;
}

namespace {

/// A run's parts in ms per step (by "kind\tname"): the first recording that
/// has steps, as compare's headline figures take it.
std::map<std::string, double> PartsOf(const Diagnosis& d, std::string* basis) {
  std::map<std::string, double> out;
  const RecordingAnalysis* r = nullptr;
  for (const auto& rec : d.recordings)
    if (!rec.steps.empty() || rec.marked.steps > 0) {
      r = &rec;
      break;
    }
  if (r == nullptr) return out;
  const auto add = [&](const char* kind, const std::string& name, double ms) {
    if (ms > 0 && std::isfinite(ms)) out[std::string(kind) + "\t" + name] += ms;
  };
  if (!r->steps.empty()) {
    const double steady = std::max<double>(1, static_cast<double>(r->SteadySteps().size()));
    // Kernel tables are kept for the whole trace, not per step: their totals over all its steps.
    const double all = std::max(1.0, static_cast<double>(r->steps.size()));
    for (int c = 0; c < kNumStepCategories; ++c)
      add("step_part", StepCategoryName(static_cast<StepCategory>(c)), ToMs(r->average.ns[static_cast<size_t>(c)]));
    for (int c = 0; c < kNumIdleCauses; ++c)
      add("idle_cause", IdleCauseName(static_cast<IdleCause>(c)), ToMs(r->device_idle.ns[static_cast<size_t>(c)]) / steady);
    for (const auto& [cls, ns] : r->kernel_class_ns) add("kernel_class", cls, ToMs(ns) / all);
    for (const auto& k : r->top_kernels) add("kernel", k.name, ToMs(k.total_ns) / all);
    *basis += fmt::format("{} step{} ({} steady)", r->steps.size(), r->steps.size() == 1 ? "" : "s", r->SteadySteps().size());
  }
  if (r->marked.steps > 0) {
    for (size_t slot = 1; slot < std::size(kPhaseNames); ++slot) add("phase", kPhaseNames[slot], r->marked.phase_ms_mean[slot]);
    *basis += fmt::format("{}{} marked step{}", basis->empty() ? "" : ", ", r->marked.steps, r->marked.steps == 1 ? "" : "s");
  }
  return out;
}

/// Every part either run has, ranked by how far it moved (ms per step).
std::vector<ComparedPart> CompareParts(const Diagnosis& a, const Diagnosis& b, std::string* basis) {
  std::string basis_a, basis_b;
  const auto pa = PartsOf(a, &basis_a), pb = PartsOf(b, &basis_b);
  if (pa.empty() || pb.empty()) return {};  // one run has no steps: nothing underneath to set side by side
  std::map<std::string, ComparedPart> joined;
  for (const auto& [key, ms] : pa) joined[key].before_ms = ms;
  for (const auto& [key, ms] : pb) joined[key].after_ms = ms;
  std::vector<ComparedPart> out;
  for (auto& [key, part] : joined) {
    const size_t tab = key.find('\t');
    part.kind = key.substr(0, tab);
    part.name = key.substr(tab + 1);
    part.unknown_move = part.kind == "kernel" && (std::isnan(part.before_ms) || std::isnan(part.after_ms));
    out.push_back(part);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ComparedPart& x, const ComparedPart& y) { return std::fabs(x.delta_ms()) > std::fabs(y.delta_ms()); });
  if (!out.empty())
    *basis = fmt::format("ms per step: kernels and kernel classes over each trace's steps, the other parts over its "
                         "steady steps (A: {}; B: {})",
                         basis_a.empty() ? "no steps" : basis_a, basis_b.empty() ? "no steps" : basis_b);
  return out;
}

/// Why two runs are no comparison ("" when they are one).
std::string NotComparable(const Comparison& c) {
  for (const auto& ch : c.config_changes)
    if (ch.key == "command script")
      return fmt::format("they are runs of two different programs ({} → {}): their figures measure different work",
                         ch.before, ch.after);
  if (c.metrics.empty() && c.parts.empty())
    return "they have no figure in common (one measures steps or kernels the other does not: a trace beside a "
           "metric log, or a run without steps)";
  return "";
}

}  // namespace

Comparison CompareRuns(const std::string& a_name, const Run& a_run, const Diagnosis& a, const std::string& b_name,
                       const Run& b_run, const Diagnosis& b) {
  Comparison c;
  c.a_name = a_name;
  c.b_name = b_name;
  const auto fa = FiguresOf(a), fb = FiguresOf(b);
  const double cv = std::max(FigureOr(fa, "step_time_cv", 0), FigureOr(fb, "step_time_cv", 0));
  const double steps = std::min(FigureOr(fa, "steps", 0), FigureOr(fb, "steps", 0));
  const auto ma = Settings(a_run, a), mb = Settings(b_run, b);
  // A step of 32 samples takes longer than one of 16: with the batch changed,
  // step time is shown but not judged; throughput (samples/s) is.
  const std::string batch_change = BatchChange(fa, ma, fb, mb);
  for (const auto& def : Figures()) {
    const auto ia = fa.find(def.id), ib = fb.find(def.id);
    if (ia == fa.end() || ib == fb.end()) continue;
    const double before = ia->second, after = ib->second;
    ComparedMetric m{def.id, def.label, def.unit, before, after, 0, def.higher_is_better, false, false, ""};
    m.change_percent = before != 0 ? 100.0 * (after - before) / std::fabs(before) : 0;
    const double delta = def.higher_is_better ? before - after : after - before;  // > 0: B is worse
    const double floor = NoiseFloor(def, cv, steps);
    if (m.unit == std::string("percent")) {
      m.noise_floor = fmt::format("{:.0f} points", floor);
      m.worse = delta > floor;
      m.better = -delta > floor;
    } else {
      m.noise_floor = cv > 0 && steps >= 2 && def.noise_percent <= 0
                          ? fmt::format("{:.0f}% (at least 5%, and 3 standard errors of the step-time difference: "
                                        "CV {:.2f} over {:.0f} steps)", floor, cv, steps)
                          : fmt::format("{:.0f}%", floor);
      const double relative = before != 0 ? 100.0 * delta / std::fabs(before) : 0;
      m.worse = relative > floor;
      m.better = -relative > floor;
      if (def.per_batch && !batch_change.empty()) {
        m.worse = m.better = false;
        m.noise_floor = "not judged: " + batch_change + " (throughput compares the runs per sample)";
      }
    }
    c.metrics.push_back(std::move(m));
  }

  // What changed: settings, tags and context, the command's flags, the GPU.
  c.config_changes = SettingsChanges(ma, mb);
  c.parts = CompareParts(a, b, &c.parts_basis);
  c.not_comparable = NotComparable(c);

  // Whether there is anything to explain with: stored runs and exports carry
  // their settings; a trace or a metric log carries none beyond the GPU.
  const auto recorded = [](const std::map<std::string, std::string>& m) {
    return std::any_of(m.begin(), m.end(), [](const auto& kv) {
      return kv.first == "command" || kv.first == "git_commit" || kv.first == "workload" || StartsWith(kv.first, "tag.");
    });
  };
  const bool settings_recorded = recorded(ma) && recorded(mb);
  c.settings_recorded = settings_recorded;
  for (const auto& f : a.findings) c.a_verdicts.push_back(fmt::format("{} ({})", f.verdict, SeverityName(f.severity)));
  for (const auto& f : b.findings) c.b_verdicts.push_back(fmt::format("{} ({})", f.verdict, SeverityName(f.severity)));

  // Each move, with the change most plausibly behind it: the first of the
  // metric's movers that a change's key names (the command's own flags count).
  for (const auto& m : c.metrics) {
    if (!m.worse && !m.better) continue;
    const ConfigChange* cause = PlausibleCause(m.metric, c.config_changes);
    Explanation e;
    e.metric = m.metric;
    const std::string change = m.unit == "percent" ? fmt::format("{:+.1f} points", m.after - m.before)
                                                   : fmt::format("{:+.0f}%", m.change_percent);
    const std::string move = fmt::format("{} {} → {} ({}, {})", m.label, FormatComparedValue(m, m.before),
                                         FormatComparedValue(m, m.after),
                                         change, m.worse ? "worse" : "better");
    if (cause) {
      e.config_key = cause->key;
      e.text = fmt::format("{}, with {} {} → {}", move, cause->key, cause->before.empty() ? "(unset)" : cause->before,
                           cause->after.empty() ? "(unset)" : cause->after);
    } else {
      e.text = !settings_recorded
                   ? move + ": neither input records its settings (a profiler trace or metric log keeps none); "
                            "`gputriage record --tag KEY=VALUE` keeps them for the next comparison"
                   : move + ": no recorded setting that moves it changed" +
                         (c.config_changes.empty() ? " (the code, command and settings are the same: the data, "
                                                     "the machine's load, or a cause outside what is recorded)"
                                                   : "; see what changed");
    }
    c.explanations.push_back(std::move(e));
  }
  return c;
}

}  // namespace gputriage
