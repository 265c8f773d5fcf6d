#include "gputriage/model.h"

#include <fmt/format.h>

#include "gputriage/markers.h"
#include "src/util/strings.h"

namespace gputriage {

bool MarkedStep::phases_traced() const {
  return phase_ns[GPUTRIAGE_PHASE_FORWARD] > 0 &&
         (phase_ns[GPUTRIAGE_PHASE_BACKWARD] > 0 || phase_ns[GPUTRIAGE_PHASE_OPTIMIZER] > 0);
}

TimeNs MarkedStep::marked_phases_ns() const {
  TimeNs marked = 0;
  for (size_t id = 1; id < phase_ns.size(); ++id) marked += phase_ns[id];
  return marked;
}

StringTable::StringTable() {
  strings_.emplace_back();
  index_.emplace(std::string_view(strings_.back()), kNoName);
}

NameId StringTable::Intern(std::string_view text) {
  if (auto it = index_.find(text); it != index_.end()) return it->second;
  strings_.emplace_back(text);
  const auto id = static_cast<NameId>(strings_.size() - 1);
  index_.emplace(std::string_view(strings_.back()), id);
  return id;
}

const char* VendorName(Vendor vendor) {
  switch (vendor) {
    case Vendor::kNvidia: return "nvidia";
    case Vendor::kAmd: return "amd";
    case Vendor::kIntel: return "intel";
    case Vendor::kMeta: return "meta";
    case Vendor::kUnknown: break;
  }
  return "unknown";
}

const char* MemoryOpKindName(MemoryOpKind kind) {
  switch (kind) {
    case MemoryOpKind::kMemcpyHtoD: return "memcpy_htod";
    case MemoryOpKind::kMemcpyDtoH: return "memcpy_dtoh";
    case MemoryOpKind::kMemcpyDtoD: return "memcpy_dtod";
    case MemoryOpKind::kMemcpyHtoH: return "memcpy_htoh";
    case MemoryOpKind::kMemcpyPtoP: return "memcpy_ptop";
    case MemoryOpKind::kMemcpyOther: return "memcpy";
    case MemoryOpKind::kMemset: return "memset";
  }
  return "memcpy";
}

void ImportStats::AddIssue(IssueSeverity severity, std::string_view kind, std::string message) {
  for (auto& issue : issues) {
    if (issue.kind == kind) {
      ++issue.count;
      return;
    }
  }
  issues.push_back(ImportIssue{severity, std::string(kind), std::move(message), 1});
}

const ImportIssue* ImportStats::FindIssue(std::string_view kind) const {
  for (const auto& issue : issues)
    if (issue.kind == kind) return &issue;
  return nullptr;
}

const Device* Recording::FindDevice(int id) const {
  for (const auto& d : devices)
    if (d.id == id) return &d;
  return nullptr;
}

void ReportRejectedValues(Recording& recording) {
  const MetricSet& m = recording.metrics;
  for (int i = 0; i < kNumMetrics; ++i) {
    if (m.rejected[static_cast<size_t>(i)] == 0) continue;
    const auto metric = static_cast<Metric>(i);
    ImportIssue issue;
    issue.severity = IssueSeverity::kWarning;
    issue.kind = std::string("value_out_of_range.") + MetricName(metric);
    issue.count = m.rejected[static_cast<size_t>(i)];
    issue.message = fmt::format(
        "{}: {} {} value(s) impossible for the metric were rejected, not averaged in (first: {:g} {})",
        recording.source_path, issue.count, MetricName(metric), m.first_rejected[static_cast<size_t>(i)],
        MetricUnit(metric));
    recording.stats.issues.push_back(std::move(issue));
  }
}

void AttributeGpusToJob(Recording& recording) {
  MetricSet& set = recording.metrics;
  std::vector<std::string> used, shared;
  bool any_listed = false;
  for (const auto& d : set.devices) {
    any_listed = any_listed || d.job_use != MetricDevice::JobUse::kUnknown;
    if (d.job_use != MetricDevice::JobUse::kUsed) continue;
    used.push_back(d.Label());
    if (d.other_processes.empty()) continue;
    const SeriesSketch& other = d.Get(Metric::kOtherSmUtil);
    shared.push_back(d.Label() + " also ran " + Join(d.other_processes, ", ") +
                     (other.count() > 0 ? " (their SM utilization averaged " +
                                              std::to_string(static_cast<int>(other.mean() + 0.5)) + "%, peak " +
                                              std::to_string(static_cast<int>(other.max() + 0.5)) + "%)"
                                        : ""));
  }
  const std::vector<std::string> dropped = set.KeepJobDevices();
  if (!used.empty()) {
    std::string message = "the job ran on " + Join(used, ", ") + " (its process tree, from NVML's running processes)";
    if (!dropped.empty()) message += "; left out as not the job's: " + Join(dropped, " ");
    recording.stats.AddIssue(IssueSeverity::kInfo, "job_gpus", message);
  } else if (any_listed) {
    recording.stats.AddIssue(IssueSeverity::kWarning, "job_not_on_gpu",
                             "no process of the job's tree appeared on any GPU (a job that did not use the GPU, or "
                             "one in another PID namespace such as a container); every GPU is diagnosed");
  }
  if (!shared.empty())
    recording.stats.AddIssue(IssueSeverity::kWarning, "gpu_shared",
                             Join(shared, "; ") + ": utilization and memory are not all this job's");
}

RuntimeCallKind RuntimeCallKindOfName(std::string_view name) {
  // cudaLaunchKernel, cudaLaunchKernelExC (Hopper), cuLaunchKernel(Ex) (Triton),
  // hipLaunchKernel, hipExtLaunchKernel, hipModuleLaunchKernel, cudaLaunchCooperativeKernel.
  if (Contains(name, "LaunchKernel") || Contains(name, "LaunchCooperativeKernel"))
    return RuntimeCallKind::kKernelLaunch;
  if (Contains(name, "GraphLaunch")) return RuntimeCallKind::kGraphLaunch;
  if (Contains(name, "Synchronize")) return RuntimeCallKind::kSynchronize;
  // cudaStreamBeginCapture(_v10000), hipStreamBeginCapture, cuStreamBeginCapture(_v2)
  if (Contains(name, "StreamBeginCapture")) return RuntimeCallKind::kCaptureBegin;
  if (Contains(name, "StreamEndCapture")) return RuntimeCallKind::kCaptureEnd;
  if (Contains(name, "Memcpy") || Contains(name, "memcpy")) return RuntimeCallKind::kMemcpy;
  if (Contains(name, "Memset") || Contains(name, "memset")) return RuntimeCallKind::kMemset;
  return RuntimeCallKind::kOther;
}

}  // namespace gputriage
