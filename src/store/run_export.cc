#include "src/store/run_export.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gputriage/markers.hpp"
#include "src/util/output_path.h"

namespace gputriage {
namespace {

struct DcgmName {
  const char* name;
  double scale;  // canonical unit → the DCGM field's unit
  const char* help;
};

/// The legacy dcgm-exporter field for each canonical metric (docs/metrics.md).
DcgmName NameFor(Metric m) {
  switch (m) {
    case Metric::kGpuUtil: return {"DCGM_FI_DEV_GPU_UTIL", 1, "GPU utilization (in %)."};
    case Metric::kMemCopyUtil: return {"DCGM_FI_DEV_MEM_COPY_UTIL", 1, "Memory utilization (in %)."};
    case Metric::kEncoderUtil: return {"DCGM_FI_DEV_ENC_UTIL", 1, "Encoder utilization (in %)."};
    case Metric::kDecoderUtil: return {"DCGM_FI_DEV_DEC_UTIL", 1, "Decoder utilization (in %)."};
    case Metric::kGrEngineActive: return {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.01, "Ratio of time the graphics engine is active."};
    case Metric::kSmActive: return {"DCGM_FI_PROF_SM_ACTIVE", 0.01, "The ratio of cycles an SM has at least 1 warp assigned."};
    case Metric::kSmOccupancy: return {"DCGM_FI_PROF_SM_OCCUPANCY", 0.01, "The ratio of number of warps resident on an SM."};
    case Metric::kTensorActive: return {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.01, "Ratio of cycles the tensor (HMMA) pipe is active."};
    case Metric::kDramActive: return {"DCGM_FI_PROF_DRAM_ACTIVE", 0.01, "Ratio of cycles the device memory interface is active."};
    case Metric::kFp64Active: return {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", 0.01, "Ratio of cycles the fp64 pipes are active."};
    case Metric::kFp32Active: return {"DCGM_FI_PROF_PIPE_FP32_ACTIVE", 0.01, "Ratio of cycles the fp32 pipes are active."};
    case Metric::kFp16Active: return {"DCGM_FI_PROF_PIPE_FP16_ACTIVE", 0.01, "Ratio of cycles the fp16 pipes are active."};
    case Metric::kPcieRxBytesPerS: return {"DCGM_FI_PROF_PCIE_RX_BYTES", 1, "PCIe receive rate (in bytes/s)."};
    case Metric::kPcieTxBytesPerS: return {"DCGM_FI_PROF_PCIE_TX_BYTES", 1, "PCIe transmit rate (in bytes/s)."};
    case Metric::kNvlinkRxBytesPerS: return {"DCGM_FI_PROF_NVLINK_RX_BYTES", 1, "NVLink receive rate (in bytes/s)."};
    case Metric::kNvlinkTxBytesPerS: return {"DCGM_FI_PROF_NVLINK_TX_BYTES", 1, "NVLink transmit rate (in bytes/s)."};
    case Metric::kPowerW: return {"DCGM_FI_DEV_POWER_USAGE", 1, "Power draw (in W)."};
    case Metric::kPowerLimitW: return {"DCGM_FI_DEV_POWER_MGMT_LIMIT", 1, "Power management limit (in W)."};
    case Metric::kSmClockMHz: return {"DCGM_FI_DEV_SM_CLOCK", 1, "SM clock frequency (in MHz)."};
    case Metric::kMemClockMHz: return {"DCGM_FI_DEV_MEM_CLOCK", 1, "Memory clock frequency (in MHz)."};
    case Metric::kGpuTempC: return {"DCGM_FI_DEV_GPU_TEMP", 1, "GPU temperature (in C)."};
    case Metric::kMemTempC: return {"DCGM_FI_DEV_MEMORY_TEMP", 1, "Memory temperature (in C)."};
    case Metric::kFbUsedBytes: return {"DCGM_FI_DEV_FB_USED", 1.0 / (1 << 20), "Framebuffer memory used (in MiB)."};
    case Metric::kFbFreeBytes: return {"DCGM_FI_DEV_FB_FREE", 1.0 / (1 << 20), "Framebuffer memory free (in MiB)."};
    case Metric::kFbTotalBytes: return {"DCGM_FI_DEV_FB_TOTAL", 1.0 / (1 << 20), "Framebuffer memory total (in MiB)."};
    case Metric::kClockEventReasons: return {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 1, "Current clock event reasons (bitmask)."};
    case Metric::kEnergyJ: return {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1000, "Total energy consumption (in mJ)."};
    default: return {nullptr, 1, nullptr};
  }
}

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string Labels(const MetricDevice& d) {
  std::string l = fmt::format("gpu=\"{}\"", d.index);
  if (!d.uuid.empty()) l += fmt::format(",UUID=\"{}\"", Escape(d.uuid));
  if (!d.pci_bus_id.empty()) l += fmt::format(",pci_bus_id=\"{}\"", Escape(d.pci_bus_id));
  if (!d.name.empty()) l += fmt::format(",modelName=\"{}\"", Escape(d.name));
  if (d.mig_instance >= 0) l += fmt::format(",GPU_I_ID=\"{}\"", d.mig_instance);
  if (!d.mig_profile.empty()) l += fmt::format(",GPU_I_PROFILE=\"{}\"", Escape(d.mig_profile));
  if (!d.driver_version.empty()) l += fmt::format(",DCGM_FI_DRIVER_VERSION=\"{}\"", Escape(d.driver_version));
  return l;
}

}  // namespace

StatusOr<ExportCounts> ExportRun(RunStore& store, int64_t run, const std::string& final_path) {
  ASSIGN_OR_RETURN(const auto runs, store.ListRuns());
  if (std::none_of(runs.begin(), runs.end(), [run](const RunInfo& r) { return r.id == run; }))
    return NotFoundError(store.path() + ": no run " + std::to_string(run) + " (gputriage runs lists the stored runs)");
  ASSIGN_OR_RETURN(const auto settings, store.LoadSettings(run));
  ASSIGN_OR_RETURN(const auto steps, store.LoadSteps(run));
  ASSIGN_OR_RETURN(const auto ranks, store.LoadProcessRanks(run));
  // Written beside the file and renamed over it at the end: a failure leaves
  // no half-written export (and no file where there was none). A device or a
  // FIFO is written into: a rename would replace it with a regular file.
  const bool in_place = WrittenInPlace(final_path);
  const std::string path = in_place ? final_path : final_path + ".tmp-" + std::to_string(getpid());
  FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) return IoError(final_path + ": cannot write the export");
  std::fprintf(out, "# gputriage export of run %lld from %s: dcgm-exporter text with sample timestamps (ms)\n",
               static_cast<long long>(run), store.path().c_str());
  // What diagnose used besides the samples, as comment lines (Prometheus tools
  // skip them; gputriage's reader takes them back): the run's settings, then
  // its steps in nanoseconds (docs/formats.md, "gputriage export").
  ExportCounts counts;
  for (const auto& [key, value] : settings)
    if (!key.empty() && key.find_first_of(" \t\r\n") == std::string::npos && ++counts.settings)
      std::fprintf(out, "# gputriage_setting %s \"%s\"\n", key.c_str(), Escape(value).c_str());
  if (!steps.empty())
    std::fprintf(out, "# gputriage_step fields: number pid start_ns end_ns samples tokens flops data_ns forward_ns "
                      "backward_ns optimizer_ns communication_ns checkpoint_ns other_ns device_ns copy_ns "
                      "forward_device_ns backward_device_ns optimizer_device_ns copy_device_ns sync_arrival_ns "
                      "sync_release_ns host_rss_bytes host_rss_peak_bytes memory_device device_allocated_bytes "
                      "device_peak_bytes device_reserved_bytes alloc_retries alloc_ooms\n");
  for (const auto& step : steps) {
    std::fprintf(out, "# gputriage_step %lld %u %lld %lld %lld %lld %.17g", static_cast<long long>(step.number), step.pid,
                 static_cast<long long>(step.span.start), static_cast<long long>(step.span.end),
                 static_cast<long long>(step.samples), static_cast<long long>(step.tokens), step.flops);
    for (size_t phase = 1; phase <= 7; ++phase) std::fprintf(out, " %lld", static_cast<long long>(step.phase_ns[phase]));
    std::fprintf(out, " %lld %lld", static_cast<long long>(step.device_ns), static_cast<long long>(step.phase_ns[kCopySlot]));
    for (int slot : kDeviceTimedSlots)
      std::fprintf(out, " %lld", static_cast<long long>(step.phase_device_ns[static_cast<size_t>(slot)]));
    std::fprintf(out, " %lld %lld", static_cast<long long>(step.sync_arrival), static_cast<long long>(step.sync_release));
    std::fprintf(out, " %lld %lld %d %lld %lld %lld %lld %lld\n", static_cast<long long>(step.host_rss_bytes),
                 static_cast<long long>(step.host_rss_peak_bytes), step.memory_device,
                 static_cast<long long>(step.device_allocated_bytes), static_cast<long long>(step.device_peak_bytes),
                 static_cast<long long>(step.device_reserved_bytes), static_cast<long long>(step.alloc_retries),
                 static_cast<long long>(step.alloc_ooms));
  }
  // Hosts and sources are one word each (a host name has no space; "-" when unknown).
  for (const auto& r : ranks)
    std::fprintf(out, "# gputriage_process %u %d %d %d %s %s\n", r.pid, r.rank, r.local_rank, r.world_size,
                 r.host.empty() || r.host.find_first_of(" \t\r\n") != std::string::npos ? "-" : r.host.c_str(),
                 r.source.empty() || r.source.find_first_of(" \t\r\n") != std::string::npos ? "-" : r.source.c_str());
  int64_t written = 0;
  std::set<std::string> helped;
  // Device facts (limit, max clock, memory), each family written after the samples
  // so every family stays contiguous, as the exposition format wants.
  struct Facts {
    double power_limit_w;
    double max_sm_clock_mhz;
    double memory_total_mib;
    long long first_ms;  // facts are stamped at the device's first sample
  };
  std::map<std::string, Facts> devices;  // by label set
  const Status s = store.ForEachSample(run, [&](const MetricDevice& d, Metric m, TimeNs t, double value) {
    const DcgmName name = NameFor(m);
    if (name.name == nullptr || !std::isfinite(value)) return;
    const std::string labels = Labels(d);
    const long long ms = static_cast<long long>(t / kNsPerMs);
    auto [it, fresh] = devices.try_emplace(
        labels, Facts{d.power_limit_w, d.max_sm_clock_mhz, static_cast<double>(d.memory_total_bytes) / (1 << 20), ms});
    if (!fresh) it->second.first_ms = std::min(it->second.first_ms, ms);
    if (helped.insert(name.name).second)
      std::fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", name.name, name.help, name.name);
    std::fprintf(out, "%s{%s} %.17g %lld\n", name.name, labels.c_str(), value * name.scale, ms);
    ++written;
  });
  struct Fact {
    const char* name;
    const char* help;
    double Facts::*value;
  };
  static constexpr Fact kFacts[] = {
      {"DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W).", &Facts::power_limit_w},
      {"DCGM_FI_DEV_MAX_SM_CLOCK", "Maximum SM clock (in MHz).", &Facts::max_sm_clock_mhz},
      {"DCGM_FI_DEV_FB_TOTAL", "Framebuffer memory total (in MiB).", &Facts::memory_total_mib},
  };
  for (const auto& fact : kFacts) {
    if (helped.count(fact.name)) continue;  // already a sampled family
    bool header = false;
    for (const auto& [labels, entry] : devices) {
      const double v = entry.*fact.value;
      if (v <= 0) continue;
      if (!header) std::fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", fact.name, fact.help, fact.name);
      header = true;
      std::fprintf(out, "%s{%s} %.17g %lld\n", fact.name, labels.c_str(), v, entry.first_ms);
    }
  }
  const bool write_failed = std::ferror(out) != 0;
  const bool close_failed = std::fclose(out) != 0;
  // A run recorded without GPU metrics is its steps: exported all the same.
  if (!s.ok() && !(s.code() == StatusCode::kNotFound && !steps.empty())) {
    if (!in_place) std::remove(path.c_str());
    if (s.code() == StatusCode::kNotFound)
      return NotFoundError(store.path() + ": run " + std::to_string(run) + " has neither GPU samples nor steps to export");
    return s;
  }
  if (write_failed || close_failed || (!in_place && std::rename(path.c_str(), final_path.c_str()) != 0)) {
    if (!in_place) std::remove(path.c_str());
    return IoError(final_path + ": write failed");
  }
  counts.samples = written;
  counts.steps = static_cast<int64_t>(steps.size());
  return counts;
}

}  // namespace gputriage
