// Kineto trace → canonical model. The splitter finds events, the simdjson adapter
// reads each one, and this file decides what each event means.
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gputriage/import.h"
#include "src/sources/kineto/kineto_json.h"
#include "src/sources/kineto/kineto_reader.h"
#include "src/sources/kineto/plain_run_parser.h"
#include "src/sources/kineto/trace_json_splitter.h"
#include "src/model/event_streams.h"
#include "src/util/byte_source.h"
#include "src/util/decimal.h"
#include "src/util/parallel.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

// Timestamps beyond ±2^62 ns (±146 years) or single events longer than 2^50 ns
// (13 days) are corrupt; rejecting them keeps every sum and difference of times
// inside int64.
constexpr TimeNs kMaxAbsTimeNs = TimeNs{1} << 62;
constexpr TimeNs kMaxDurationNs = TimeNs{1} << 50;

enum class Category {
  kKernel, kMemcpy, kMemset, kRuntime, kDriver, kCpu, kPythonOp, kUserAnnotation,
  kGpuAnnotation, kPythonFunction, kSync, kTrace, kIgnored, kUnknown,
};

Category Classify(std::string_view cat) {
  // Both schema generations: 2021 ("Kernel", "Runtime", "Operator", "Memcpy") and
  // 2022+ ("kernel", "cuda_runtime", "cpu_op", "gpu_memcpy"); ROCm reuses them.
  // Called once per event: compares case-insensitively without allocating.
  struct Entry {
    std::string_view lower;
    Category category;
  };
  static constexpr Entry kTable[] = {
      {"kernel", Category::kKernel},           {"gpu_memcpy", Category::kMemcpy},
      {"memcpy", Category::kMemcpy},           {"gpu_memset", Category::kMemset},
      {"memset", Category::kMemset},           {"cuda_runtime", Category::kRuntime},
      {"runtime", Category::kRuntime},         {"mtia_runtime", Category::kRuntime},
      {"xpu_runtime", Category::kRuntime},     {"privateuse1_runtime", Category::kRuntime},
      {"glow_runtime", Category::kRuntime},    {"cuda_driver", Category::kDriver},
      {"privateuse1_driver", Category::kDriver}, {"cpu_op", Category::kCpu},
      {"operator", Category::kCpu},            {"python", Category::kPythonOp},
      {"user_annotation", Category::kUserAnnotation}, {"gpu_user_annotation", Category::kGpuAnnotation},
      {"python_function", Category::kPythonFunction}, {"cuda_sync", Category::kSync},
      {"trace", Category::kTrace},             {"overhead", Category::kIgnored},
      {"cuda_profiler_range", Category::kIgnored}, {"cpu_instant_event", Category::kIgnored},
      {"ac2g", Category::kIgnored},            {"async", Category::kIgnored},
      {"fwdbwd", Category::kIgnored},          {"async_cpu_to_gpu", Category::kIgnored},
  };
  for (const auto& entry : kTable)
    if (EqualsLowered(cat, entry.lower)) return entry.category;
  return Category::kUnknown;
}

/// "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)": CUPTI's
/// memory kinds in Kineto's copy names.
HostMemory HostMemoryFromName(std::string_view name) {
  if (Contains(name, "Pageable")) return HostMemory::kPageable;
  if (Contains(name, "Pinned")) return HostMemory::kPinned;
  return HostMemory::kUnknown;
}

MemoryOpKind MemcpyKindFromName(std::string_view name) {
  if (Contains(name, "HtoD")) return MemoryOpKind::kMemcpyHtoD;
  if (Contains(name, "DtoH")) return MemoryOpKind::kMemcpyDtoH;
  if (Contains(name, "DtoD")) return MemoryOpKind::kMemcpyDtoD;
  if (Contains(name, "HtoH")) return MemoryOpKind::kMemcpyHtoH;
  if (Contains(name, "PtoP")) return MemoryOpKind::kMemcpyPtoP;
  return MemoryOpKind::kMemcpyOther;
}

/// GEMM, convolution and attention operators: their input shapes decide tensor-core
/// tiling and, with the dtype, their FLOPs and bytes.
bool IsMatrixOpName(std::string_view name) {
  // Called for every operator with Input Dims (most of a record_shapes trace): one
  // prefix test rejects almost all, then only the names sharing the first letter.
  static constexpr std::string_view kPrefix = "aten::";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix) return false;
  const std::string_view op = name.substr(kPrefix.size());
  static constexpr std::string_view kOps[] = {
      "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "conv1d", "conv2d", "conv3d", "convolution",
      "_convolution", "cudnn_convolution", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "_scaled_mm",
      "addbmm",
      // attention: its FLOPs and bytes (roofline.cc) come from the q, k, v shapes
      "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
      "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
      "_efficient_attention_forward"};
  for (auto candidate : kOps)
    if (candidate[0] == op[0] && candidate == op) return true;
  return false;
}

/// Reads "Input Dims" text ([[32, 512], [512, 1024], []]): the first kMaxInputs
/// entries; an entry that is not a list of integers (a tensor list, a scalar) has rank 0.
void ParseInputDims(std::string_view text, MatrixOpShapes& out) {
  int depth = 0, input = -1;
  bool plain = true;
  int rank = 0;
  int64_t number = 0;
  bool in_number = false;
  auto close_number = [&]() {
    if (!in_number) return;
    in_number = false;
    if (depth == 2 && input >= 0 && input < MatrixOpShapes::kMaxInputs) {
      if (rank < MatrixOpShapes::kMaxRank) out.dims[static_cast<size_t>(input)][static_cast<size_t>(rank)] = number;
      ++rank;
    }
  };
  for (char ch : text) {
    if (ch >= '0' && ch <= '9') {
      if (!in_number) number = 0, in_number = true;
      if (number < (int64_t{1} << 50)) number = number * 10 + (ch - '0');
      continue;
    }
    close_number();
    if (ch == '[') {
      ++depth;
      if (depth == 2) ++input, rank = 0, plain = true;
      if (depth > 2) plain = false;
    } else if (ch == ']') {
      if (depth == 2 && input >= 0 && input < MatrixOpShapes::kMaxInputs)
        out.rank[static_cast<size_t>(input)] = plain && rank <= MatrixOpShapes::kMaxRank ? static_cast<uint8_t>(rank) : 0;
      --depth;
    } else if (ch == '-' || ch == '.') {
      if (depth >= 2) plain = false;
    }
  }
  out.inputs = static_cast<uint8_t>(std::clamp(input + 1, 0, MatrixOpShapes::kMaxInputs));
}

bool IsDataLoaderName(std::string_view name) {
  return (StartsWith(name, "enumerate(DataLoader)#") && EndsWith(name, ".__next__")) ||
         StartsWith(name, "enumerate(DataPipe)#");
}

bool IsCommunicationOpName(std::string_view name) {
  return StartsWith(name, "nccl:") || StartsWith(name, "gloo:") || StartsWith(name, "rccl:");
}

Vendor GuessVendor(const Device& d, const std::map<std::string, std::string>& metadata) {
  const std::string n = AsciiLower(d.name);
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

/// Reads events into a recording: the meaning of each event, shared by the
/// sequential reader and the workers that read runs of events in parallel (each
/// into its own partial recording, merged in file order by MergePartial).
/// Past kMaxRawPoints a device's raw points keep every other one (memory stays
/// bounded however long the trace; the peak may then be missed by one event's bytes).
void ThinMemoryPoints(DeviceMemoryUse& use) {
  if (use.curve.size() < DeviceMemoryUse::kMaxRawPoints) return;
  size_t kept = 0;
  for (size_t i = 0; i < use.curve.size(); i += 2) use.curve[kept++] = use.curve[i];
  use.thinned += static_cast<int64_t>(use.curve.size() - kept);
  use.curve.resize(kept);
}

class EventSink {
 public:
  explicit EventSink(Recording* out) : rec_(*out) {}

  /// One event's raw text, read on its own (the splitter's path).
  void OnEventText(std::string_view raw, int64_t offset, kineto::EventParser& parser) {
    ++rec_.stats.events_seen;
    Status s = parser.Parse(raw, &event_);
    if (!s.ok()) {
      rec_.stats.AddIssue(IssueSeverity::kWarning, "bad_event",
                          fmt::format("{}: byte {}: event skipped: {}", rec_.source_path, offset, s.message()));
      return;
    }
    Use(event_, offset);
  }

  /// One event already read (the run reader's path).
  void OnEvent(const kineto::RawEvent& e, int64_t offset) {
    ++rec_.stats.events_seen;
    Use(e, offset);
  }

  TimeNs first_ts() const { return first_ts_; }
  TimeNs last_ts() const { return last_ts_; }
  bool saw_profiler_window() const { return saw_profiler_window_; }
  /// Whether a profiler window was seen since the last call.
  bool TakeSawProfilerWindow() { return std::exchange(saw_profiler_window_, false); }

 private:
  /// A [memory] instant: one allocation or free, with the allocator's totals
  /// after it (PyTorch 1.10 and later; before, only its Bytes).
  void UseMemoryEvent(const kineto::RawEvent& e, int64_t offset) {
    const int64_t type = e.device_type.value_or(-1);  // c10::DeviceType: 0 CPU, 1 CUDA
    if ((type != 0 && type != 1) || !e.ts_ns || (!e.total_allocated && !e.bytes)) return;
    DeviceMemoryUse* use = MemoryUseOf(type == 0, type == 0 ? -1 : static_cast<int>(e.device_id.value_or(0)));
    if (use == nullptr) {
      rec_.stats.AddIssue(IssueSeverity::kWarning, "memory_devices_dropped",
                          fmt::format("{}: byte {}: [memory] events of more than 64 devices: the rest are left out",
                                      rec_.source_path, offset));
      return;
    }
    // One kind of point per device: totals, or Bytes to be summed (a device's
    // first event decides; an event of the other kind is left out, and said).
    if (use->events > 0 && use->relative != !e.total_allocated) {
      rec_.stats.AddIssue(IssueSeverity::kWarning, "memory_events_mixed",
                          fmt::format("{}: byte {}: a [memory] event {} allocator totals on a device whose first event "
                                      "{} them: left out of that device's curve",
                                      rec_.source_path, offset, e.total_allocated ? "with" : "without",
                                      use->relative ? "had none of" : "had"));
      return;
    }
    use->relative = !e.total_allocated;
    ++use->events;
    ThinMemoryPoints(*use);
    // Without totals the point holds the event's Bytes; FinishMemoryCurve sums them.
    use->curve.push_back({*e.ts_ns, e.total_allocated.value_or(e.bytes.value_or(0)), e.total_reserved.value_or(-1)});
  }

  DeviceMemoryUse* MemoryUseOf(bool host, int device) {
    auto it = std::find_if(rec_.memory_use.begin(), rec_.memory_use.end(),
                           [&](const DeviceMemoryUse& m) { return m.host == host && m.device == device; });
    if (it != rec_.memory_use.end()) return &*it;
    if (rec_.memory_use.size() >= 64) return nullptr;
    DeviceMemoryUse& added = rec_.memory_use.emplace_back();
    added.host = host;
    added.device = device;
    return &added;
  }

  void Use(const kineto::RawEvent& e, int64_t offset) {
    if (e.ph != 'X') {
      if (e.ph == 'M' || e.ph == 'i' || e.ph == 'I' || e.ph == 's' || e.ph == 'f' || e.ph == 't' ||
          e.ph == 'C' || e.ph == 'b' || e.ph == 'e' || e.ph == 'n') {
        if (e.ph == 'i' && e.name == "[memory]") UseMemoryEvent(e, offset);
        return;  // metadata, other instants, flows, counters: not used by the analyses
      }
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
    Category category = Classify(e.cat);
    // PyTorch without Kineto (CPU-only builds) exports torch.autograd.profiler's
    // own Chrome trace: host operator spans with no "cat", on pid "CPU functions".
    if (category == Category::kUnknown && e.cat.empty() && e.pid_cpu_functions) {
      category = Category::kCpu;
      rec_.stats.AddIssue(IssueSeverity::kInfo, "autograd_profiler_events",
                          fmt::format("{}: byte {}: events without \"cat\" on pid \"CPU functions\" "
                                      "(torch.autograd.profiler's export, no Kineto) read as CPU operators",
                                      rec_.source_path, offset));
    }
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
    if (*e.ts_ns > kMaxAbsTimeNs || *e.ts_ns < -kMaxAbsTimeNs || *e.dur_ns > kMaxDurationNs) {
      rec_.stats.AddIssue(IssueSeverity::kWarning, "time_out_of_range",
                          fmt::format("{}: byte {}: event with \"ts\" beyond ±146 years or \"dur\" over 13 days "
                                      "skipped",
                                      rec_.source_path, offset));
      return;
    }
    const Interval time{*e.ts_ns, *e.ts_ns + *e.dur_ns};
    first_ts_ = std::min(first_ts_, time.start);
    last_ts_ = std::max(last_ts_, time.end);
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
        if (category == Category::kMemcpy) m.host_memory = HostMemoryFromName(e.name);
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
        r.kind = RuntimeCallKindOfName(e.name);
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
          const auto number = ParseInt64(e.name.substr(13));
          if (!number) {
            rec_.stats.AddIssue(IssueSeverity::kWarning, "bad_step_name",
                                fmt::format("{}: byte {}: step marker \"{}\" has no step number; skipped",
                                            rec_.source_path, offset, e.name));
            break;
          }
          step.number = *number;
          rec_.steps.push_back(step);
          break;
        }
        CpuSpan c;
        c.time = time;
        c.name = rec_.names.Intern(e.name);
        c.thread = e.tid.value_or(-1);
        if (rec_.host_pid < 0 && e.pid && *e.pid > 0) rec_.host_pid = *e.pid;  // the profiled process
        c.external_id = e.external_id.value_or(-1);
        c.kind = category == Category::kPythonOp     ? CpuSpanKind::kPython
                 : category == Category::kUserAnnotation ? CpuSpanKind::kUserAnnotation
                                                          : CpuSpanKind::kOperator;
        if (category != Category::kPythonOp && IsDataLoaderName(e.name)) c.kind = CpuSpanKind::kDataLoader;
        else if (IsCommunicationOpName(e.name)) c.kind = CpuSpanKind::kCommunication;
        if (!e.first_input_type.empty()) c.first_input_type = rec_.names.Intern(e.first_input_type);
        if (e.flops) c.flops = *e.flops;
        if (!e.input_dims.empty() && IsMatrixOpName(e.name)) {
          MatrixOpShapes shapes;
          shapes.external_id = c.external_id;
          shapes.name = c.name;
          shapes.dtype = c.first_input_type;
          ParseInputDims(e.input_dims, shapes);
          rec_.matrix_shapes.push_back(shapes);
        }
        rec_.cpu_spans.push_back(c);
        break;
      }
      case Category::kGpuAnnotation:
        // GPU-lane copies of record_function ranges (ProfilerStep#N among them, on
        // ROCm almost zero-length): steps are counted once, from the host lane.
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
        if (StartsWith(e.name, "PyTorch Profiler")) rec_.profiler_window = time, saw_profiler_window_ = true;
        break;
      default: break;
    }
  }

  Recording& rec_;
  kineto::RawEvent event_;
  TimeNs first_ts_ = std::numeric_limits<TimeNs>::max();  // earliest start of a used event
  TimeNs last_ts_ = std::numeric_limits<TimeNs>::min();   // latest end
  bool saw_profiler_window_ = false;
};

/// Appends a run's partial recording: its events to the time-ordered streams, the
/// rest to `rec`, as if its events had been read there: names re-interned, issues
/// counted under the first occurrence's message.
Status MergePartial(Recording& rec, EventStreams& streams, Recording&& part) {
  std::vector<NameId> remap(part.names.size());
  for (size_t i = 0; i < remap.size(); ++i) remap[i] = rec.names.Intern(part.names.View(static_cast<NameId>(i)));
  auto name = [&](NameId id) { return remap[id]; };
  Status status;
  auto append = [&status](auto& to, auto& from, auto rename) {
    for (auto& item : from) rename(item);
    if (Status s = to.AddRange(from.data(), from.size()); !s.ok() && status.ok()) status = s;
  };
  append(streams.kernels, part.kernels, [&](KernelActivity& k) { k.name = name(k.name), k.collective = name(k.collective); });
  append(streams.memory_ops, part.memory_ops, [](MemoryActivity&) {});
  append(streams.runtime_calls, part.runtime_calls, [&](RuntimeCall& r) { r.name = name(r.name); });
  append(streams.cpu_spans, part.cpu_spans,
         [&](CpuSpan& c) { c.name = name(c.name), c.first_input_type = name(c.first_input_type); });
  append(streams.syncs, part.syncs, [&](SyncActivity& sy) { sy.name = name(sy.name); });
  append(streams.matrix_shapes, part.matrix_shapes, [&](MatrixOpShapes& m) { m.name = name(m.name), m.dtype = name(m.dtype); });
  for (auto& use : part.memory_use) {  // raw points: the curve is finished once every part is in
    auto it = std::find_if(rec.memory_use.begin(), rec.memory_use.end(),
                           [&](const DeviceMemoryUse& m) { return m.host == use.host && m.device == use.device; });
    if (it == rec.memory_use.end()) {
      if (rec.memory_use.size() >= 64) continue;
      rec.memory_use.push_back(std::move(use));
      continue;
    }
    if (it->relative != use.relative) continue;  // the other kind of point: left out, as within a part
    it->events += use.events;
    it->thinned += use.thinned;
    it->curve.insert(it->curve.end(), use.curve.begin(), use.curve.end());
    ThinMemoryPoints(*it);
  }
  rec.steps.insert(rec.steps.end(), part.steps.begin(), part.steps.end());
  if (rec.host_pid < 0) rec.host_pid = part.host_pid;  // the first in file order
  rec.stats.events_seen += part.stats.events_seen;
  rec.stats.events_used += part.stats.events_used;
  rec.stats.python_function_events += part.stats.python_function_events;
  for (auto& issue : part.stats.issues) {
    auto it = std::find_if(rec.stats.issues.begin(), rec.stats.issues.end(),
                           [&](const ImportIssue& i) { return i.kind == issue.kind; });
    if (it != rec.stats.issues.end()) it->count += issue.count;
    else rec.stats.issues.push_back(std::move(issue));
  }
  return status;
}

/// The whole trace: the header members, the events (through EventSink, or as
/// runs read elsewhere) into time-ordered streams, then the time base shift.
class KinetoImporter {
 public:
  KinetoImporter(Recording* out, const KinetoReadOptions& options)
      : rec_(*out),
        streams_(std::make_shared<EventStreams>(options.memory_budget_bytes, options.scratch_directory)),
        sink_(&pending_) {
    pending_.source_path = rec_.source_path;
  }

  Status OnMember(std::string_view key, std::string_view raw) {
    // The events read before it first: issues are counted in file order.
    Keep(FlushPending());
    Status s = kineto::ApplyHeaderMember(key, raw, &header_);
    if (!s.ok()) rec_.stats.AddIssue(IssueSeverity::kWarning, "bad_member", s.message());
    return Status::Ok();
  }

  /// One event read here, one at a time; gathered into a partial recording that
  /// joins the streams like a run's.
  Status OnEvent(std::string_view raw, int64_t offset) {
    sink_.OnEventText(raw, offset, parser_);
    if (pending_.stats.events_seen >= kPendingEvents) return FlushPending();
    return first_error_;
  }

  /// A run's events, read elsewhere, in file order.
  void TakePartial(Recording&& part, TimeNs first_ts, TimeNs last_ts, bool saw_window, Interval window) {
    Keep(FlushPending());
    Keep(MergePartial(rec_, *streams_, std::move(part)));
    first_runs_ts_ = std::min(first_runs_ts_, first_ts);
    last_runs_ts_ = std::max(last_runs_ts_, last_ts);
    if (saw_window) rec_.profiler_window = window;
  }

  /// Every event read so far joins the recording (its counts and issues too).
  Status Flush() {
    Keep(FlushPending());
    return first_error_;
  }

  Status Finish(const SplitOutcome& outcome, bool parallel) {
    Keep(FlushPending());
    if (!first_error_.ok()) return first_error_;
    first_ts_ = std::min(sink_.first_ts(), first_runs_ts_);
    last_ts_ = std::max(sink_.last_ts(), last_runs_ts_);
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
    const TimeNs base = header_.base_time_ns.value_or(0);
    const bool any_time = first_ts_ <= last_ts_;
    TimeNs shift = 0;
    if (base != 0 && any_time &&
        (base > kMaxAbsTimeNs || base < -kMaxAbsTimeNs || base + last_ts_ > kMaxAbsTimeNs ||
         base + first_ts_ < -kMaxAbsTimeNs)) {
      rec_.stats.AddIssue(IssueSeverity::kWarning, "bad_base_time",
                          fmt::format("{}: baseTimeNanoseconds {} puts events beyond ±146 years; times kept "
                                      "relative to the trace's own zero",
                                      rec_.source_path, base));
    } else if (base != 0 && any_time) {
      shift = base;
      for (auto& s : rec_.steps) s.host.start += base, s.host.end += base;
      if (rec_.profiler_window.end != 0) rec_.profiler_window.start += base, rec_.profiler_window.end += base;
      first_ts_ += base;
      last_ts_ += base;
    }
    rec_.clock_is_absolute = any_time && first_ts_ > 100 * kNsPerS * 1000 * 1000;  // after ~1973
    return Materialize(shift, parallel);
  }

 private:
  static constexpr int64_t kPendingEvents = 4096;

  void Keep(Status s) {
    if (!s.ok() && first_error_.ok()) first_error_ = std::move(s);
  }

  Status FlushPending() {
    if (sink_.TakeSawProfilerWindow()) rec_.profiler_window = pending_.profiler_window;
    if (pending_.stats.events_seen == 0) return first_error_;
    Keep(MergePartial(rec_, *streams_, std::move(pending_)));
    pending_ = Recording();
    pending_.source_path = rec_.source_path;
    return first_error_;
  }

  /// Every stream sorted (start, then the longer first, then file order); the host
  /// spans (about half the events) on a second thread when one is to be had. Past
  /// the memory budget the events stay in the streams, which the analyses read as
  /// they would the vectors (src/analysis/trace_events.h); else they move into the
  /// recording's vectors, uncopied.
  Status Materialize(TimeNs shift, bool parallel) {
    RETURN_IF_ERROR(SortSteps());
    for (auto& use : rec_.memory_use) {
      for (auto& p : use.curve) p.t += shift;
      FinishMemoryCurve(use);
    }
    RETURN_IF_ERROR(FinishEventStreams(*streams_, parallel));
    PlaceEvents(rec_, std::move(streams_), shift);
    return Status::Ok();
  }

  Status SortSteps() {
    std::sort(rec_.steps.begin(), rec_.steps.end(),
              [](const Step& a, const Step& b) { return a.host.start < b.host.start; });
    // A step recorded twice on the host (same number, e.g. nested profilers) counts once.
    rec_.steps.erase(std::unique(rec_.steps.begin(), rec_.steps.end(),
                                 [](const Step& a, const Step& b) { return a.number == b.number; }),
                     rec_.steps.end());
    return Status::Ok();
  }

  Recording& rec_;
  std::shared_ptr<EventStreams> streams_;
  Recording pending_;  // events read here since the last flush
  EventSink sink_;
  Status first_error_;
  kineto::EventParser parser_;
  kineto::TraceHeader header_;
  TimeNs first_ts_ = 0, last_ts_ = 0;
  TimeNs first_runs_ts_ = std::numeric_limits<TimeNs>::max();
  TimeNs last_runs_ts_ = std::numeric_limits<TimeNs>::min();
};

/// The splitter's thread is the pipeline's one serial stage: it inflates, cuts
/// runs and merges them in file order, and every worker waits on it. Scheduled
/// fairly beside the workers it feeds, it gets a third of two cores, the queue
/// runs dry and the workers wait (0.4 GB .gz trace, 2 cores: workers idle 220 ms
/// of a 400 ms read). The workers therefore run 10 nice levels below it (and,
/// beside other work on the machine, yield to it): the .gz read took 0.53 s fairly
/// scheduled, 0.50 s so.
void LowerThisThreadsPriority() {
  const auto tid = static_cast<id_t>(gettid());
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, tid);
  if (nice == -1 && errno != 0) return;
  setpriority(PRIO_PROCESS, tid, std::min(19, nice + 10));  // a failure leaves the priority as it was
}

/// Reads runs of events on worker threads (or, with none, on the splitter's
/// thread as they are cut), each run into its own partial recording, and hands
/// them to the importer in file order. A run that does not read cleanly is
/// reported back to the splitter, which reads it again one event at a time; runs
/// handed out after it are dropped and re-cut.
class RunPool final : public RunHandler {
 public:
  /// `threads` 0: no workers, each run read by Submit itself.
  RunPool(KinetoImporter* importer, std::string source_path, int threads)
      : importer_(*importer), source_path_(std::move(source_path)), threads_(std::max(0, threads)),
        max_in_flight_(static_cast<size_t>(2 * threads_ + 2)) {}
  ~RunPool() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      queue_.clear();
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  StatusOr<RunProgress> Submit(std::shared_ptr<const EventRun> run) override {
    if (threads_ == 0) {
      // Read here and taken at once: nothing waits in flight.
      auto slot = std::make_unique<Slot>();
      slot->run = std::move(run);
      Read(*slot, inline_parser_);
      slot->done = true;
      slots_.push_back(std::move(slot));
      return Take(1);
    }
    if (workers_.empty())
      for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { Work(); });
    // Bounded: at most max_in_flight_ runs (a few MiB each) read or waiting.
    RunProgress progress = Take(slots_.size() >= max_in_flight_ ? 1 : 0);
    if (progress.failed >= 0) return progress;  // the splitter re-reads from there, this run included
    auto slot = std::make_unique<Slot>();
    slot->run = std::move(run);
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(slot.get());
    }
    slots_.push_back(std::move(slot));
    work_cv_.notify_one();
    return progress;
  }

  StatusOr<RunProgress> Drain() override { return Take(slots_.size()); }

 private:
  struct Slot {
    std::shared_ptr<const EventRun> run;
    bool done = false;  // under mu_
    bool ok = false;
    Recording part;
    TimeNs first_ts = 0, last_ts = 0;
    bool saw_window = false;
  };

  void Work() {
    LowerThisThreadsPriority();
    kineto::EventParser parser;
    while (true) {
      Slot* slot = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        slot = queue_.front();
        queue_.pop_front();
      }
      Read(*slot, parser);
      {
        std::lock_guard<std::mutex> lock(mu_);
        slot->done = true;
      }
      done_cv_.notify_all();
    }
  }

  void Read(Slot& slot, kineto::EventParser& parser) {
    const EventRun& run = *slot.run;
    // The plain form first (no simdjson); anything else through simdjson, whose
    // reading of a plain run is the same.
    if (!ReadWith(slot, [&](EventSink& sink) {
          return kineto::ParsePlainRun(run.elements(), [&](const kineto::RawEvent& e, size_t position) {
            sink.OnEvent(e, run.offset + static_cast<int64_t>(position));
          });
        })) {
      // simdjson reads an array: '[' + elements + ']', with its padding after.
      const std::string_view elements = run.elements();
      std::string array;
      array.reserve(elements.size() + 2 + kSplitterPadding);
      array.append(1, '[').append(elements).append(1, ']');
      const size_t array_bytes = array.size();
      array.resize(array_bytes + kSplitterPadding);
      // Positions are in the array text, whose byte 0 is the added '['.
      ReadWith(slot, [&](EventSink& sink) {
        return EventRunIsWellFormed(elements) &&
               parser.ParseRun(std::string_view(array.data(), array_bytes),
                               [&](const kineto::RawEvent& e, size_t position) {
                                 sink.OnEvent(e, run.offset + static_cast<int64_t>(position) - 1);
                               });
      });
    }
  }

  /// Reads the run into a fresh partial recording with `parse`; false when it gave up.
  template <typename Parse>
  bool ReadWith(Slot& slot, Parse&& parse) {
    slot.part = Recording();
    slot.part.source_path = source_path_;
    EventSink sink(&slot.part);
    slot.ok = parse(sink);
    slot.first_ts = sink.first_ts();
    slot.last_ts = sink.last_ts();
    slot.saw_window = sink.saw_profiler_window();
    return slot.ok;
  }

  /// Takes finished runs from the front in order, waiting for the first `wait_for`
  /// of them; stops at a failed run, and then drops every run after it.
  RunProgress Take(size_t wait_for) {
    RunProgress progress;
    size_t waited = 0;
    while (!slots_.empty()) {
      Slot& front = *slots_.front();
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!front.done) {
          if (waited >= wait_for) break;
          done_cv_.wait(lock, [&] { return front.done; });
        }
      }
      ++waited;
      if (!front.ok) {
        progress.failed = front.run->index;
        Abandon();
        break;
      }
      events_ += front.part.stats.events_seen;
      merged_ = front.run->index + 1;
      const Interval window = front.part.profiler_window;
      importer_.TakePartial(std::move(front.part), front.first_ts, front.last_ts, front.saw_window, window);
      slots_.pop_front();
    }
    progress.merged = progress.failed >= 0 ? progress.failed : merged_;
    progress.events = events_;
    return progress;
  }

  /// Drops every run in flight: those not started, and (once finished) the rest.
  void Abandon() {
    std::unique_lock<std::mutex> lock(mu_);
    for (Slot* waiting : queue_) waiting->done = true;  // never started: nothing to wait for
    queue_.clear();
    done_cv_.wait(lock, [&] { return std::all_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->done; }); });
    lock.unlock();
    slots_.clear();
  }

  KinetoImporter& importer_;
  const std::string source_path_;
  const int threads_;
  const size_t max_in_flight_;
  std::deque<std::unique_ptr<Slot>> slots_;  // in file order; only this thread changes it
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Slot*> queue_;  // runs no worker has started
  bool stop_ = false;
  std::vector<std::thread> workers_;
  int64_t merged_ = 0;
  int64_t events_ = 0;
  kineto::EventParser inline_parser_;  // runs read by Submit (no workers)
};

// The splitter's read buffer: runs (1 MiB) are read in place there, and what is
// left when it runs low moves to a new one, so a larger buffer moves less.
constexpr size_t kReadBufferBytes = size_t{8} << 20;
static_assert(kSplitterPadding >= kineto::kPlainRunPadding);

StatusOr<Recording> ImportFromSource(ByteSource& source, const KinetoReadOptions& options,
                                     size_t chunk_bytes = kReadBufferBytes) {
  Recording rec;
  rec.source_path = source.name();
  rec.format = "kineto";
  KinetoImporter importer(&rec, options);
  TraceJsonSplitter splitter(source, chunk_bytes);
  const int cores = CoreCount();
  const int threads = options.threads > 0 ? options.threads : cores;
  std::optional<RunPool> pool;
  if (options.runs) {
    // Workers where there are cores to spare, else the runs read on this thread.
    const bool workers = options.threads > 0 || (options.threads == 0 && cores > 1);
    pool.emplace(&importer, source.name(), workers ? threads : 0);
    splitter.HandRunsTo(&*pool, options.run_bytes);
  }
  ASSIGN_OR_RETURN(SplitOutcome outcome,
                   splitter.Run([&](std::string_view k, std::string_view v) { return importer.OnMember(k, v); },
                                [&](std::string_view e, int64_t o) { return importer.OnEvent(e, o); }));
  pool.reset();
  RETURN_IF_ERROR(importer.Flush());  // the events read one by one count from here on
  if (!outcome.saw_trace_events) {
    if (outcome.truncated)
      return DataLossError(fmt::format("{}: {}", source.name(), outcome.truncation_note));
    return UnimplementedError(fmt::format(
        "{}: JSON without a \"traceEvents\" array: not a PyTorch profiler / Chrome trace", source.name()));
  }
  if (const ImportIssue* unreadable = rec.stats.FindIssue("bad_event");
      unreadable != nullptr && unreadable->count == rec.stats.events_seen) {
    return DataLossError(fmt::format("{}: none of the {} events could be read; first problem: {}", source.name(),
                                     rec.stats.events_seen, unreadable->message));
  }
  RETURN_IF_ERROR(importer.Finish(outcome, threads > 1 && options.threads >= 0 && rec.stats.events_seen > 200'000));
  if (outcome.trailing_bytes > 0)
    rec.stats.AddIssue(IssueSeverity::kWarning, "trailing_data",
                       fmt::format("{}: {} bytes after the end of the trace (from byte {}) were ignored: a second "
                                   "trace appended, or damage",
                                   source.name(), outcome.trailing_bytes, outcome.trailing_offset));
  return rec;
}

}  // namespace

StatusOr<Recording> ImportKinetoTrace(const std::string& path) {
  ASSIGN_OR_RETURN(auto source, OpenFileSource(path));
  return ImportFromSource(*source, {});
}

StatusOr<Recording> ImportKinetoTraceFromSource(std::unique_ptr<ByteSource> source, const KinetoReadOptions& options) {
  return ImportFromSource(*source, options);
}

StatusOr<Recording> ImportKinetoTraceFromMemory(const std::string& name, std::string_view bytes) {
  return ImportKinetoTraceFromMemory(name, bytes, KinetoReadOptions{});
}

StatusOr<Recording> ImportKinetoTraceFromMemory(const std::string& name, std::string_view bytes,
                                                const KinetoReadOptions& options) {
  auto source = MemorySource(name, bytes.data(), bytes.size());
  // Small inputs (tests, fuzzing) need no full-size read buffer; the splitter grows on demand.
  return ImportFromSource(*source, options, std::clamp<size_t>(bytes.size(), 4096, kReadBufferBytes));
}

}  // namespace gputriage
