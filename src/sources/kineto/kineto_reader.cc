// Kineto trace → canonical model. The splitter finds events, the simdjson adapter
// reads each one, and this file decides what each event means.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "gputriage/import.h"
#include "src/sources/kineto/kineto_json.h"
#include "src/sources/kineto/trace_json_splitter.h"
#include "src/util/byte_source.h"

namespace gputriage {
namespace {

/// Lower-cases ASCII into a small stack buffer (category names are short).
std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

enum class Category {
  kKernel, kMemcpy, kMemset, kRuntime, kDriver, kCpu, kPythonOp, kUserAnnotation,
  kGpuAnnotation, kPythonFunction, kSync, kTrace, kIgnored, kUnknown,
};

Category Classify(std::string_view cat) {
  // Both schema generations: 2021 ("Kernel", "Runtime", "Operator", "Memcpy") and
  // 2022+ ("kernel", "cuda_runtime", "cpu_op", "gpu_memcpy"); ROCm reuses them.
  const std::string c = Lower(cat);
  if (c == "kernel") return Category::kKernel;
  if (c == "gpu_memcpy" || c == "memcpy") return Category::kMemcpy;
  if (c == "gpu_memset" || c == "memset") return Category::kMemset;
  if (c == "cuda_runtime" || c == "runtime" || c == "mtia_runtime" || c == "xpu_runtime" ||
      c == "privateuse1_runtime" || c == "glow_runtime")
    return Category::kRuntime;
  if (c == "cuda_driver" || c == "privateuse1_driver") return Category::kDriver;
  if (c == "cpu_op" || c == "operator") return Category::kCpu;
  if (c == "python") return Category::kPythonOp;
  if (c == "user_annotation") return Category::kUserAnnotation;
  if (c == "gpu_user_annotation") return Category::kGpuAnnotation;
  if (c == "python_function") return Category::kPythonFunction;
  if (c == "cuda_sync") return Category::kSync;
  if (c == "trace") return Category::kTrace;
  if (c == "overhead" || c == "cuda_profiler_range" || c == "cpu_instant_event" ||
      c == "ac2g" || c == "async" || c == "fwdbwd" || c == "async_cpu_to_gpu")
    return Category::kIgnored;
  return Category::kUnknown;
}

MemoryOpKind MemcpyKindFromName(std::string_view name) {
  if (Contains(name, "HtoD")) return MemoryOpKind::kMemcpyHtoD;
  if (Contains(name, "DtoH")) return MemoryOpKind::kMemcpyDtoH;
  if (Contains(name, "DtoD")) return MemoryOpKind::kMemcpyDtoD;
  if (Contains(name, "HtoH")) return MemoryOpKind::kMemcpyHtoH;
  if (Contains(name, "PtoP")) return MemoryOpKind::kMemcpyPtoP;
  return MemoryOpKind::kMemcpyOther;
}

RuntimeCallKind RuntimeKindFromName(std::string_view name) {
  // cudaLaunchKernel, cudaLaunchKernelExC (Hopper), cuLaunchKernel(Ex) (Triton),
  // hipLaunchKernel, hipExtLaunchKernel, hipModuleLaunchKernel, cudaLaunchCooperativeKernel.
  if (Contains(name, "LaunchKernel") || Contains(name, "LaunchCooperativeKernel"))
    return RuntimeCallKind::kKernelLaunch;
  if (Contains(name, "GraphLaunch")) return RuntimeCallKind::kGraphLaunch;
  if (Contains(name, "Synchronize")) return RuntimeCallKind::kSynchronize;
  if (Contains(name, "Memcpy") || Contains(name, "memcpy")) return RuntimeCallKind::kMemcpy;
  if (Contains(name, "Memset") || Contains(name, "memset")) return RuntimeCallKind::kMemset;
  return RuntimeCallKind::kOther;
}

bool IsDataLoaderName(std::string_view name) {
  return (StartsWith(name, "enumerate(DataLoader)#") && EndsWith(name, ".__next__")) ||
         StartsWith(name, "enumerate(DataPipe)#");
}

bool IsCommunicationOpName(std::string_view name) {
  return StartsWith(name, "nccl:") || StartsWith(name, "gloo:") || StartsWith(name, "rccl:");
}

Vendor GuessVendor(const Device& d, const std::map<std::string, std::string>& metadata) {
  const std::string n = Lower(d.name);
  if (Contains(n, "nvidia") || Contains(n, "tesla") || Contains(n, "quadro") || Contains(n, "geforce") ||
      Contains(n, "rtx"))
    return Vendor::kNvidia;
  if (Contains(n, "amd") || Contains(n, "instinct") || Contains(n, "radeon") || d.warp_size == 64)
    return Vendor::kAmd;
  if (metadata.count("roctracer_version") || metadata.count("hip_runtime_version")) return Vendor::kAmd;
  if (metadata.count("cupti_version")) return Vendor::kNvidia;
  if (Contains(n, "mtia")) return Vendor::kMeta;
  if (Contains(n, "intel")) return Vendor::kIntel;
  return Vendor::kUnknown;
}

class KinetoImporter {
 public:
  explicit KinetoImporter(Recording* out) : rec_(*out) {}

  Status OnMember(std::string_view key, std::string_view raw) {
    Status s = kineto::ApplyHeaderMember(key, raw, &header_);
    if (!s.ok()) rec_.stats.AddIssue(IssueSeverity::kWarning, "bad_member", s.message());
    return Status::Ok();
  }

  Status OnEvent(std::string_view raw, int64_t offset) {
    ++rec_.stats.events_seen;
    Status s = parser_.Parse(raw, &event_);
    if (!s.ok()) {
      rec_.stats.AddIssue(IssueSeverity::kWarning, "bad_event",
                          fmt::format("{}: byte {}: event skipped: {}", rec_.source_path, offset, s.message()));
      return Status::Ok();
    }
    Use(offset);
    return Status::Ok();
  }

  void Finish(const SplitOutcome& outcome) {
    rec_.stats.bytes_read = outcome.bytes;
    rec_.stats.truncated = outcome.truncated;
    rec_.stats.truncation_note = outcome.truncation_note;
    rec_.devices = std::move(header_.devices);
    rec_.rank = header_.rank;
    rec_.world_size = header_.world_size;
    rec_.comm_backend = header_.backend;
    rec_.metadata = std::move(header_.metadata);
    for (auto& d : rec_.devices) d.vendor = GuessVendor(d, rec_.metadata);
    // Kineto ≥ 2024 writes ts relative to baseTimeNanoseconds, often *after* the
    // events, so the shift is applied once everything is read.
    TimeNs base = header_.base_time_ns.value_or(0);
    if (base != 0) Shift(base);
    rec_.clock_is_absolute = base != 0 || first_ts_ > 100 * kNsPerS * 1000 * 1000;  // after ~1973
    Sort();
  }

 private:
  void Use(int64_t offset) {
    const kineto::RawEvent& e = event_;
    if (e.ph != 'X') {
      if (e.ph == 'M' || e.ph == 'i' || e.ph == 'I' || e.ph == 's' || e.ph == 'f' || e.ph == 't' ||
          e.ph == 'C' || e.ph == 'b' || e.ph == 'e' || e.ph == 'n')
        return;  // metadata, instants, flows, counters: not used by the analyses yet
      if (e.ph == 0) {
        rec_.stats.AddIssue(IssueSeverity::kWarning, "missing_ph",
                            fmt::format("{}: byte {}: event without \"ph\" skipped", rec_.source_path, offset));
      } else {
        rec_.stats.AddIssue(IssueSeverity::kInfo, "unsupported_phase",
                            fmt::format("{}: byte {}: events with \"ph\": \"{}\" are not used", rec_.source_path,
                                        offset, e.ph));
      }
      return;
    }
    const Category category = Classify(e.cat);
    if (category == Category::kPythonFunction) {
      ++rec_.stats.python_function_events;  // Python stacks: many, and no analysis needs them yet
      return;
    }
    if (category == Category::kIgnored) return;
    if (category == Category::kUnknown) {
      rec_.stats.AddIssue(IssueSeverity::kInfo, "unknown_category",
                          fmt::format("{}: byte {}: category \"{}\" is not used", rec_.source_path, offset, e.cat));
      return;
    }
    if (!e.ts_ns || !e.dur_ns) {
      rec_.stats.AddIssue(IssueSeverity::kWarning, "bad_time",
                          fmt::format("{}: byte {}: \"{}\" event with {} \"ts\"/\"dur\" skipped", rec_.source_path,
                                      offset, e.cat, (e.ts_malformed || e.dur_malformed) ? "unreadable" : "missing"));
      return;
    }
    if (*e.dur_ns < 0) {
      rec_.stats.AddIssue(IssueSeverity::kWarning, "negative_duration",
                          fmt::format("{}: byte {}: event with negative \"dur\" skipped", rec_.source_path, offset));
      return;
    }
    const Interval time{*e.ts_ns, *e.ts_ns + *e.dur_ns};
    if (first_ts_ == 0 || time.start < first_ts_) first_ts_ = time.start;
    ++rec_.stats.events_used;
    switch (category) {
      case Category::kKernel: {
        KernelActivity k;
        k.time = time;
        k.name = rec_.names.Intern(e.name);
        k.device = static_cast<int32_t>(e.device.value_or(e.pid.value_or(-1)));
        k.stream = static_cast<int32_t>(e.stream.value_or(e.tid.value_or(-1)));
        k.correlation = e.correlation.value_or(-1);
        k.external_id = e.external_id.value_or(-1);
        if (e.has_grid) std::copy(e.grid, e.grid + 3, k.grid);
        if (e.has_block) std::copy(e.block, e.block + 3, k.block);
        k.registers_per_thread = static_cast<int32_t>(e.registers_per_thread.value_or(-1));
        k.shared_memory_bytes = static_cast<int32_t>(e.shared_memory.value_or(-1));
        if (e.blocks_per_sm) k.blocks_per_sm = static_cast<float>(*e.blocks_per_sm);
        if (e.warps_per_sm) k.warps_per_sm = static_cast<float>(*e.warps_per_sm);
        if (e.occupancy_percent) k.est_occupancy_percent = static_cast<float>(*e.occupancy_percent);
        if (!e.collective.empty()) k.collective = rec_.names.Intern(e.collective);
        rec_.kernels.push_back(k);
        break;
      }
      case Category::kMemcpy:
      case Category::kMemset: {
        MemoryActivity m;
        m.time = time;
        m.kind = category == Category::kMemset ? MemoryOpKind::kMemset : MemcpyKindFromName(e.name);
        m.device = static_cast<int32_t>(e.device.value_or(e.pid.value_or(-1)));
        m.stream = static_cast<int32_t>(e.stream.value_or(e.tid.value_or(-1)));
        m.correlation = e.correlation.value_or(-1);
        m.external_id = e.external_id.value_or(-1);
        m.bytes = e.bytes.value_or(-1);
        rec_.memory_ops.push_back(m);
        break;
      }
      case Category::kRuntime:
      case Category::kDriver: {
        RuntimeCall r;
        r.time = time;
        r.name = rec_.names.Intern(e.name);
        r.thread = e.tid.value_or(-1);
        r.correlation = e.correlation.value_or(-1);
        r.external_id = e.external_id.value_or(-1);
        r.kind = RuntimeKindFromName(e.name);
        r.driver_api = category == Category::kDriver;
        rec_.runtime_calls.push_back(r);
        break;
      }
      case Category::kCpu:
      case Category::kUserAnnotation:
      case Category::kPythonOp: {
        if (category != Category::kPythonOp && StartsWith(e.name, "ProfilerStep#")) {
          Step step;
          step.host = time;
          step.number = std::strtoll(std::string(e.name.substr(13)).c_str(), nullptr, 10);
          rec_.steps.push_back(step);
          break;
        }
        CpuSpan c;
        c.time = time;
        c.name = rec_.names.Intern(e.name);
        c.thread = e.tid.value_or(-1);
        c.external_id = e.external_id.value_or(-1);
        c.kind = category == Category::kPythonOp     ? CpuSpanKind::kPython
                 : category == Category::kUserAnnotation ? CpuSpanKind::kUserAnnotation
                                                          : CpuSpanKind::kOperator;
        if (category != Category::kPythonOp && IsDataLoaderName(e.name)) c.kind = CpuSpanKind::kDataLoader;
        else if (IsCommunicationOpName(e.name)) c.kind = CpuSpanKind::kCommunication;
        if (!e.first_input_type.empty()) c.first_input_type = rec_.names.Intern(e.first_input_type);
        if (e.flops) c.flops = *e.flops;
        rec_.cpu_spans.push_back(c);
        break;
      }
      case Category::kGpuAnnotation:
        // GPU-lane copies of record_function ranges (ProfilerStep#N among them, on
        // ROCm almost zero-length): steps are counted once, from the host lane.
        ++gpu_annotations_;
        break;
      case Category::kSync: {
        SyncActivity s;
        s.time = time;
        s.name = rec_.names.Intern(e.name);
        s.device = static_cast<int32_t>(e.device.value_or(e.pid.value_or(-1)));
        s.stream = static_cast<int32_t>(e.stream.value_or(e.tid.value_or(-1)));
        rec_.syncs.push_back(s);
        break;
      }
      case Category::kTrace:
        if (StartsWith(e.name, "PyTorch Profiler")) rec_.profiler_window = time;
        break;
      default: break;
    }
  }

  void Shift(TimeNs base) {
    auto shift = [base](Interval& t) {
      t.start += base;
      t.end += base;
    };
    for (auto& k : rec_.kernels) shift(k.time);
    for (auto& m : rec_.memory_ops) shift(m.time);
    for (auto& r : rec_.runtime_calls) shift(r.time);
    for (auto& c : rec_.cpu_spans) shift(c.time);
    for (auto& s : rec_.syncs) shift(s.time);
    for (auto& s : rec_.steps) shift(s.host);
    if (rec_.profiler_window.end != 0) shift(rec_.profiler_window);
    first_ts_ += base;
  }

  void Sort() {
    auto by_start = [](const auto& a, const auto& b) {
      return a.time.start < b.time.start || (a.time.start == b.time.start && a.time.end > b.time.end);
    };
    std::sort(rec_.kernels.begin(), rec_.kernels.end(), by_start);
    std::sort(rec_.memory_ops.begin(), rec_.memory_ops.end(), by_start);
    std::sort(rec_.runtime_calls.begin(), rec_.runtime_calls.end(), by_start);
    std::sort(rec_.cpu_spans.begin(), rec_.cpu_spans.end(), by_start);
    std::sort(rec_.syncs.begin(), rec_.syncs.end(), by_start);
    std::sort(rec_.steps.begin(), rec_.steps.end(),
              [](const Step& a, const Step& b) { return a.host.start < b.host.start; });
    // A step recorded twice on the host (same number, e.g. nested profilers) counts once.
    rec_.steps.erase(std::unique(rec_.steps.begin(), rec_.steps.end(),
                                 [](const Step& a, const Step& b) { return a.number == b.number; }),
                     rec_.steps.end());
  }

  Recording& rec_;
  kineto::EventParser parser_;
  kineto::RawEvent event_;
  kineto::TraceHeader header_;
  TimeNs first_ts_ = 0;
  int64_t gpu_annotations_ = 0;
};

StatusOr<Recording> ImportFromSource(ByteSource& source, size_t chunk_bytes = size_t{4} << 20) {
  Recording rec;
  rec.source_path = source.name();
  rec.format = "kineto";
  KinetoImporter importer(&rec);
  TraceJsonSplitter splitter(source, chunk_bytes);
  ASSIGN_OR_RETURN(SplitOutcome outcome,
                   splitter.Run([&](std::string_view k, std::string_view v) { return importer.OnMember(k, v); },
                                [&](std::string_view e, int64_t o) { return importer.OnEvent(e, o); }));
  if (!outcome.saw_trace_events) {
    if (outcome.truncated)
      return DataLossError(fmt::format("{}: {}", source.name(), outcome.truncation_note));
    return UnimplementedError(fmt::format(
        "{}: JSON without a \"traceEvents\" array: not a PyTorch profiler / Chrome trace", source.name()));
  }
  if (outcome.events > 0 && rec.stats.events_seen > 0 && rec.stats.events_used == 0 &&
      rec.stats.issues.size() > 0 && rec.stats.issues.front().kind == "bad_event" &&
      rec.stats.issues.front().count == rec.stats.events_seen) {
    return DataLossError(fmt::format("{}: none of the {} events could be read; first problem: {}", source.name(),
                                     rec.stats.events_seen, rec.stats.issues.front().message));
  }
  importer.Finish(outcome);
  return rec;
}

}  // namespace

StatusOr<Recording> ImportKinetoTrace(const std::string& path) {
  ASSIGN_OR_RETURN(auto source, OpenFileSource(path));
  return ImportFromSource(*source);
}

StatusOr<Recording> ImportKinetoTraceFromMemory(const std::string& name, std::string_view bytes) {
  auto source = MemorySource(name, bytes.data(), bytes.size());
  // Small inputs (tests, fuzzing) need no 4 MiB buffer; the splitter grows on demand.
  return ImportFromSource(*source, std::clamp<size_t>(bytes.size(), 4096, size_t{4} << 20));
}

StatusOr<Run> ImportRun(const std::vector<std::string>& paths) {
  Run run;
  for (size_t i = 0; i < paths.size(); ++i) {
    ASSIGN_OR_RETURN(Recording rec, ImportKinetoTrace(paths[i]));
    if (rec.rank < 0 && paths.size() > 1) rec.rank = static_cast<int>(i);
    run.recordings.push_back(std::move(rec));
  }
  return run;
}

}  // namespace gputriage
