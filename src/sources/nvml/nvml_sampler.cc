#include "src/sources/nvml/nvml_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <utility>
#include <string>

namespace gputriage {
namespace {

constexpr const char* kCallNames[] = {"utilization", "memory info", "power usage", "SM clock", "memory clock",
                                      "temperature", "clock event reasons", "PCIe RX throughput", "PCIe TX throughput",
                                      "GPM metrics", "utilization sample buffer", "running processes",
                                      "per-process utilization"};
static_assert(std::size(kCallNames) == 13);

// GPM metric → canonical metric (DCGM computes its PROF fields from the same ids on Hopper+).
struct GpmMapping {
  unsigned int id;
  Metric metric;
  double scale;  // GPM unit → canonical (percent stays; MiB/s → bytes/s)
};
constexpr double kMiB = 1024.0 * 1024.0;
constexpr GpmMapping kGpmMetrics[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, Metric::kGrEngineActive, 1},
    {NVML_GPM_METRIC_SM_UTIL, Metric::kSmActive, 1},
    {NVML_GPM_METRIC_SM_OCCUPANCY, Metric::kSmOccupancy, 1},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, Metric::kTensorActive, 1},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, Metric::kDramActive, 1},
    {NVML_GPM_METRIC_FP64_UTIL, Metric::kFp64Active, 1},
    {NVML_GPM_METRIC_FP32_UTIL, Metric::kFp32Active, 1},
    {NVML_GPM_METRIC_FP16_UTIL, Metric::kFp16Active, 1},
    // Averages over the GPM interval: steadier than the 20 ms PCIe throughput window, which they replace.
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, Metric::kPcieTxBytesPerS, kMiB},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, Metric::kPcieRxBytesPerS, kMiB},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, Metric::kNvlinkRxBytesPerS, kMiB},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, Metric::kNvlinkTxBytesPerS, kMiB},
};
constexpr TimeNs kGpmMinInterval = 100 * kNsPerMs;  // "due to the internal sample refresh rate"

std::string Text(const char* buffer, size_t size) { return std::string(buffer, strnlen(buffer, size)); }

/// A device's name or UUID ("" when the call is missing or fails).
std::string DeviceText(nvmlDeviceGetString_fn get, nvmlDevice_t handle) {
  char buf[NVML_DEVICE_NAME_BUFFER_SIZE > NVML_DEVICE_UUID_BUFFER_SIZE ? NVML_DEVICE_NAME_BUFFER_SIZE
                                                                       : NVML_DEVICE_UUID_BUFFER_SIZE] = {};
  return get && get(handle, buf, sizeof buf) == NVML_SUCCESS ? Text(buf, sizeof buf) : std::string();
}

/// Device memory in bytes (0 when unknown).
int64_t MemoryTotal(const NvmlApi& api, nvmlDevice_t handle) {
  nvmlMemory_t mem{};
  return api.DeviceGetMemoryInfo && api.DeviceGetMemoryInfo(handle, &mem) == NVML_SUCCESS ? static_cast<int64_t>(mem.total)
                                                                                          : 0;
}

/// A sample buffer value as a double, by the type the driver says it wrote.
double ValueOf(nvmlValueType_t type, const nvmlValue_t& v) {
  switch (type) {
    case NVML_VALUE_TYPE_DOUBLE: return v.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT: return v.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return static_cast<double>(v.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return static_cast<double>(v.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return static_cast<double>(v.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT: return v.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT: return v.usVal;
    default: return NAN;
  }
}

// Buffer timestamps within this of the host's wall clock are taken as Unix time;
// others (a boot-based driver clock) are anchored at the first read.
constexpr TimeNs kEpochTolerance = 10 * 60 * kNsPerS;
constexpr size_t kMaxOtherProcesses = 8;
constexpr unsigned long long kMaxBufferTimestampUs = 1ULL << 52;  // far past 2100 in µs: nonsense beyond

}  // namespace

StatusOr<NvmlSampler> NvmlSampler::Open(const NvmlLibrary& nvml, Recording& recording) {
  const NvmlApi& api = nvml.api();
  NvmlSampler sampler(nvml);
  recording.format = "nvml";
  recording.metrics.clock_note = "host wall clock at each NVML sample";
  std::string driver;
  if (api.SystemGetDriverVersion) {
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (api.SystemGetDriverVersion(buf, sizeof buf) == NVML_SUCCESS) driver = Text(buf, sizeof buf);
  }
  unsigned int count = 0;
  if (const nvmlReturn_t rc = api.DeviceGetCount(&count); rc != NVML_SUCCESS)
    return IoError("NVML (" + nvml.path() + ") could not count GPUs: " + nvml.Describe(rc));
  for (unsigned int i = 0; i < count && i < MetricSet::kMaxDevices; ++i) {
    nvmlDevice_t handle = nullptr;
    if (const nvmlReturn_t rc = api.DeviceGetHandleByIndex(i, &handle); rc != NVML_SUCCESS) {
      recording.stats.AddIssue(IssueSeverity::kError, "gpu_unavailable",
                               "GPU " + std::to_string(i) + ": no NVML handle: " + nvml.Describe(rc));
      continue;
    }
    const std::string uuid = DeviceText(api.DeviceGetUUID, handle);
    std::string bus;
    if (api.DeviceGetPciInfo) {
      nvmlPciInfo_t pci{};
      if (api.DeviceGetPciInfo(handle, &pci) == NVML_SUCCESS) bus = Text(pci.busId, sizeof pci.busId);
    }
    auto pos = recording.metrics.FindOrAdd(static_cast<int>(i), uuid, bus, -1);
    if (!pos) break;
    MetricDevice& d = recording.metrics.devices[*pos];
    d.driver_version = driver;
    d.name = DeviceText(api.DeviceGetName, handle);
    unsigned int milliwatts = 0, mhz = 0, current = 0, pending = 0;
    if (api.DeviceGetEnforcedPowerLimit && api.DeviceGetEnforcedPowerLimit(handle, &milliwatts) == NVML_SUCCESS)
      d.power_limit_w = milliwatts / 1000.0;
    if (api.DeviceGetMaxClockInfo && api.DeviceGetMaxClockInfo(handle, NVML_CLOCK_SM, &mhz) == NVML_SUCCESS)
      d.max_sm_clock_mhz = mhz;
    if (api.DeviceGetMigMode && api.DeviceGetMigMode(handle, &current, &pending) == NVML_SUCCESS) d.mig_mode = current == 1;
    d.memory_total_bytes = MemoryTotal(api, handle);
    Gpu gpu;
    gpu.handle = handle;
    gpu.metric_device = *pos;
    // GPM where the device supports it (Hopper+); under MIG it is read per instance.
    if (!d.mig_mode) sampler.SetUpGpm(gpu, recording);
    else gpu.unsupported[kGpm] = true;
    // The driver's high-rate utilization buffer replaces polled utilization where it has samples.
    gpu.unsupported[kUtilBuffer] = d.mig_mode;  // not kept for MIG GPUs
    sampler.devices_.push_back(gpu);
    if (d.mig_mode) sampler.OpenMigInstances(sampler.devices_.size() - 1, recording);
  }
  return sampler;
}

nvmlReturn_t NvmlSampler::GpmSample(const Gpu& gpu, nvmlGpmSample_t sample) const {
  const NvmlApi& api = nvml_->api();
  if (gpu.mig_instance && gpu.parent_handle && api.GpmMigSampleGet)
    return api.GpmMigSampleGet(gpu.parent_handle, gpu.gpu_instance, sample);
  return api.GpmSampleGet(gpu.handle, sample);
}

void NvmlSampler::SetUpGpm(Gpu& gpu, Recording& recording) {
  const NvmlApi& api = nvml_->api();
  bool gpm = false;
  if (api.GpmQueryDeviceSupport && api.GpmSampleAlloc && api.GpmSampleFree && api.GpmSampleGet && api.GpmMetricsGet) {
    nvmlGpmSupport_t support{};
    support.version = NVML_GPM_SUPPORT_VERSION;
    gpm = api.GpmQueryDeviceSupport(gpu.handle, &support) == NVML_SUCCESS && support.isSupportedDevice != 0 &&
          api.GpmSampleAlloc(&gpu.gpm_previous) == NVML_SUCCESS && api.GpmSampleAlloc(&gpu.gpm_current) == NVML_SUCCESS &&
          GpmSample(gpu, gpu.gpm_previous) == NVML_SUCCESS;
  }
  if (!gpm) {
    gpu.unsupported[kGpm] = true;
    recording.stats.AddIssue(IssueSeverity::kInfo, "gpm_unavailable",
                             recording.metrics.devices[gpu.metric_device].Label() +
                                 ": no GPM metrics (needs Hopper or newer and NVML 11.8+): SM, tensor and DRAM "
                                 "activity will be missing");
  }
}

void NvmlSampler::OpenMigInstances(size_t parent, Recording& recording) {
  const NvmlApi& api = nvml_->api();
  const Gpu physical = devices_[parent];
  struct {
    int index;
    std::string pci_bus_id, name, driver_version, label;
  } facts;  // copied: adding instances may move the devices
  {
    const MetricDevice& d = recording.metrics.devices[physical.metric_device];
    facts = {d.index, d.pci_bus_id, d.name, d.driver_version, d.Label()};
  }
  unsigned int max = 0;
  if (!api.DeviceGetMaxMigDeviceCount || !api.DeviceGetMigDeviceHandleByIndex ||
      api.DeviceGetMaxMigDeviceCount(physical.handle, &max) != NVML_SUCCESS) {
    recording.stats.AddIssue(IssueSeverity::kWarning, "mig_instances_unavailable",
                             facts.label + " is in MIG mode but its instances could not be listed: only board "
                                             "power, clocks and temperature are recorded");
    return;
  }
  for (unsigned int i = 0; i < max; ++i) {
    nvmlDevice_t handle = nullptr;
    const nvmlReturn_t rc = api.DeviceGetMigDeviceHandleByIndex(physical.handle, i, &handle);
    if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT) continue;  // no instance in that slot
    if (rc != NVML_SUCCESS) {
      recording.stats.AddIssue(IssueSeverity::kWarning, "mig_instances_unavailable",
                               facts.label + ": MIG instance " + std::to_string(i) + ": " + nvml_->Describe(rc));
      continue;
    }
    unsigned int gpu_instance = i;
    if (api.DeviceGetGpuInstanceId) (void)api.DeviceGetGpuInstanceId(handle, &gpu_instance);
    const std::string uuid = DeviceText(api.DeviceGetUUID, handle);
    const std::string name = DeviceText(api.DeviceGetName, handle);
    auto pos = recording.metrics.FindOrAdd(facts.index, uuid, facts.pci_bus_id, static_cast<int>(gpu_instance));
    if (!pos) return;
    MetricDevice& d = recording.metrics.devices[*pos];
    d.name = facts.name;
    d.driver_version = facts.driver_version;
    d.mig_mode = true;
    // The instance's name is "<board> MIG <profile>" ("NVIDIA H100 80GB HBM3 MIG 1g.10gb").
    if (const size_t at = name.rfind("MIG "); at != std::string::npos) d.mig_profile = name.substr(at + 4);
    d.memory_total_bytes = MemoryTotal(api, handle);
    Gpu instance;
    instance.handle = handle;
    instance.metric_device = *pos;
    instance.mig_instance = true;
    instance.parent = static_cast<int>(parent);
    instance.parent_handle = physical.handle;
    instance.gpu_instance = gpu_instance;
    for (Call c : {kUtil, kUtilBuffer, kPower, kSmClock, kMemClock, kTemp, kReasons, kPcieRx, kPcieTx, kProcessUtil})
      instance.unsupported[c] = true;  // board-level readings stay on the physical GPU; NVML has no MIG utilization
    SetUpGpm(instance, recording);
    devices_.push_back(instance);
    devices_[parent].unsupported[kProcesses] = true;  // listed per instance (the parent needs privileges)
  }
}

NvmlSampler::NvmlSampler(NvmlSampler&& other) noexcept : nvml_(other.nvml_), devices_(std::move(other.devices_)) {
  other.devices_.clear();
}

NvmlSampler::~NvmlSampler() {
  const NvmlApi& api = nvml_->api();
  for (auto& gpu : devices_) {
    if (gpu.gpm_previous && api.GpmSampleFree) api.GpmSampleFree(gpu.gpm_previous);
    if (gpu.gpm_current && api.GpmSampleFree) api.GpmSampleFree(gpu.gpm_current);
  }
}

void NvmlSampler::SampleGpm(Gpu& gpu, TimeNs t, Recording& recording) {
  if (gpu.unsupported[kGpm] || gpu.lost || t - gpu.gpm_previous_t < kGpmMinInterval) return;
  const NvmlApi& api = nvml_->api();
  if (!Check(GpmSample(gpu, gpu.gpm_current), gpu, kGpm, recording)) return;
  nvmlGpmMetricsGet_t request{};  // ~13 KB: the struct for every NVML release's metric count
  request.version = NVML_GPM_METRICS_GET_VERSION;
  request.numMetrics = static_cast<unsigned int>(std::size(kGpmMetrics));
  request.sample1 = gpu.gpm_previous;
  request.sample2 = gpu.gpm_current;
  for (size_t i = 0; i < std::size(kGpmMetrics); ++i) request.metrics[i].metricId = kGpmMetrics[i].id;
  const bool first = gpu.gpm_previous_t == 0;  // the Open() sample's time is unknown: skip its interval
  std::swap(gpu.gpm_previous, gpu.gpm_current);
  gpu.gpm_previous_t = t;
  if (first || !Check(api.GpmMetricsGet(&request), gpu, kGpm, recording)) return;
  for (size_t i = 0; i < std::size(kGpmMetrics); ++i) {
    const auto& m = request.metrics[i];
    if (m.nvmlReturn != NVML_SUCCESS || !std::isfinite(m.value)) continue;  // not on this chip: stays missing
    recording.metrics.Add(gpu.metric_device, kGpmMetrics[i].metric, t, m.value * kGpmMetrics[i].scale);
    // One source per series: GPM's PCIe rates stand in for the polled throughput from now on.
    if (kGpmMetrics[i].metric == Metric::kPcieRxBytesPerS) gpu.unsupported[kPcieRx] = true;
    if (kGpmMetrics[i].metric == Metric::kPcieTxBytesPerS) gpu.unsupported[kPcieTx] = true;
  }
}

bool NvmlSampler::Gone(const Gpu& gpu) const {
  return gpu.lost || (gpu.parent >= 0 && devices_[static_cast<size_t>(gpu.parent)].lost);
}

bool NvmlSampler::Lost(size_t metric_device) const {
  for (const auto& g : devices_)
    if (g.metric_device == metric_device) return Gone(g);
  return false;
}

std::vector<unsigned int> NvmlSampler::ProcessIds(size_t metric_device) const {
  std::vector<unsigned int> out;
  for (const auto& g : devices_)
    if (g.metric_device == metric_device && !Gone(g))
      for (const auto& p : g.processes) out.push_back(p.pid);
  return out;
}

int NvmlSampler::lost_devices() const {
  int n = 0;
  for (const auto& g : devices_) n += g.lost ? 1 : 0;
  return n;
}

bool NvmlSampler::Check(nvmlReturn_t rc, Gpu& gpu, Call call, Recording& recording) {
  if (rc == NVML_SUCCESS) {
    if (!gpu.failing[call].empty()) gpu.failing[call].clear();
    return true;
  }
  const std::string label = recording.metrics.devices[gpu.metric_device].Label();
  gpu.failing[call] = nvml_->Describe(rc);
  if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
    gpu.unsupported[call] = true;  // stop asking; the series stays missing
    recording.stats.AddIssue(IssueSeverity::kInfo, "nvml_not_supported",
                             label + ": " + kCallNames[call] + " not supported (" + nvml_->Describe(rc) +
                                 "); recorded as missing");
  } else if (rc == NVML_ERROR_GPU_IS_LOST) {
    gpu.lost = true;
    recording.stats.AddIssue(IssueSeverity::kError, "gpu_lost",
                             label + " fell off the bus (" + nvml_->Describe(rc) + "); no further samples from it");
  } else if (rc == NVML_ERROR_NO_PERMISSION) {
    gpu.unsupported[call] = true;
    recording.stats.AddIssue(IssueSeverity::kWarning, "nvml_no_permission",
                             label + ": " + kCallNames[call] + ": " + nvml_->Describe(rc));
  } else {
    recording.stats.AddIssue(IssueSeverity::kWarning, "nvml_error",
                             label + ": " + kCallNames[call] + ": " + nvml_->Describe(rc));
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> NvmlSampler::Failures(size_t metric_device) const {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Gpu& gpu = devices_[i];
    if (gpu.metric_device != metric_device) continue;
    // A board in MIG mode reports no utilization by design; its instances are judged.
    const bool mig_board = std::any_of(devices_.begin(), devices_.end(),
                                       [i](const Gpu& other) { return other.parent == static_cast<int>(i); });
    for (int call = 0; call < kNumCalls; ++call) {
      if (gpu.failing[call].empty()) continue;
      // Not supported is how a device says it has no such counter: news only
      // for a whole GPU's utilization, which every verdict rests on.
      if (gpu.unsupported[call] && !(call == kUtil && !gpu.mig_instance && !mig_board)) continue;
      out.emplace_back(kCallNames[call], gpu.failing[call]);
    }
  }
  return out;
}

bool NvmlSampler::SampleUtilBuffer(Gpu& gpu, TimeNs t, Recording& recording) {
  const NvmlApi& api = nvml_->api();
  nvmlValueType_t type = NVML_VALUE_TYPE_UNSIGNED_INT;
  unsigned int count = 0;
  nvmlReturn_t rc = NVML_SUCCESS;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (gpu.buffer.empty() || rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      // The ring's capacity, asked once (samples = NULL) and again only if it grows.
      rc = api.DeviceGetSamples(gpu.handle, NVML_GPU_UTILIZATION_SAMPLES, gpu.buffer_last_seen, &type, &count, nullptr);
      if (rc == NVML_ERROR_NOT_FOUND || (rc == NVML_SUCCESS && count == 0)) return false;  // dry: the GPU idled
      if (!Check(rc, gpu, kUtilBuffer, recording)) return false;
      gpu.buffer.resize(std::min(count, 4096u));
    }
    count = static_cast<unsigned int>(gpu.buffer.size());
    rc = api.DeviceGetSamples(gpu.handle, NVML_GPU_UTILIZATION_SAMPLES, gpu.buffer_last_seen, &type, &count,
                              gpu.buffer.data());
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) break;
  }
  if (rc == NVML_ERROR_NOT_FOUND) return false;
  if (!Check(rc, gpu, kUtilBuffer, recording)) return false;
  count = std::min<unsigned int>(count, static_cast<unsigned int>(gpu.buffer.size()));
  std::sort(gpu.buffer.begin(), gpu.buffer.begin() + count,
            [](const nvmlSample_t& a, const nvmlSample_t& b) { return a.timeStamp < b.timeStamp; });
  if (count == 0) return false;
  const unsigned long long newest = gpu.buffer[count - 1].timeStamp;
  if (!gpu.buffer_anchored) {
    // The first read returns what the driver buffered before the recording: it
    // only fixes the clock and the starting point.
    const TimeNs raw = static_cast<TimeNs>(std::min<unsigned long long>(newest, kMaxBufferTimestampUs)) * 1000;
    gpu.buffer_offset_ns = std::llabs(raw - t) < kEpochTolerance ? 0 : t - raw;
    gpu.buffer_anchored = true;
    gpu.buffer_last_seen = newest;
    return false;
  }
  int added = 0;
  for (unsigned int i = 0; i < count; ++i) {
    const nvmlSample_t& sample = gpu.buffer[i];
    if (sample.timeStamp <= gpu.buffer_last_seen || sample.timeStamp > kMaxBufferTimestampUs) continue;
    const double value = ValueOf(type, sample.sampleValue);
    if (!std::isfinite(value) || value < 0 || value > 100) continue;
    recording.metrics.Add(gpu.metric_device, Metric::kGpuUtil,
                          static_cast<TimeNs>(sample.timeStamp) * 1000 + gpu.buffer_offset_ns, value);
    ++added;
  }
  gpu.buffer_last_seen = std::max(gpu.buffer_last_seen, newest);
  return added > 0;
}

bool NvmlSampler::ListProcesses(Gpu& gpu, Recording& recording) {
  const NvmlApi& api = nvml_->api();
  if (gpu.unsupported[kProcesses] || (!api.DeviceGetComputeRunningProcesses && !api.DeviceGetComputeRunningProcessesV1))
    return false;
  if (gpu.processes.empty()) gpu.processes.resize(32);
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned int n = static_cast<unsigned int>(gpu.processes.size());
    nvmlReturn_t rc;
    if (api.DeviceGetComputeRunningProcesses) {
      rc = api.DeviceGetComputeRunningProcesses(gpu.handle, &n, gpu.processes.data());
    } else {
      std::vector<nvmlProcessInfo_v1_t> v1(gpu.processes.size());
      rc = api.DeviceGetComputeRunningProcessesV1(gpu.handle, &n, v1.data());
      for (unsigned int i = 0; rc == NVML_SUCCESS && i < n && i < v1.size(); ++i)
        gpu.processes[i] = {v1[i].pid, v1[i].usedGpuMemory, ~0u, ~0u};
    }
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE && n > gpu.processes.size() && n < 65536) {
      gpu.processes.resize(n + 16);  // processes started between the calls
      continue;
    }
    if (!Check(rc, gpu, kProcesses, recording)) return false;
    gpu.processes.resize(std::min<size_t>(n, gpu.processes.size()));
    gpu.processes_listed = true;
    return true;
  }
  return false;
}

void NvmlSampler::SampleProcesses(TimeNs t, const std::function<bool(unsigned int pid)>& is_job, Recording& recording) {
  const NvmlApi& api = nvml_->api();
  for (auto& gpu : devices_) {
    if (Gone(gpu)) continue;
    if (!ListProcesses(gpu, recording)) continue;
    MetricDevice& d = recording.metrics.devices[gpu.metric_device];
    double job_bytes = 0;
    for (const auto& p : gpu.processes) {
      if (is_job(p.pid)) {
        gpu.job_seen = true;
        d.job_use = MetricDevice::JobUse::kUsed;
        if (p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) job_bytes += static_cast<double>(p.usedGpuMemory);
        continue;
      }
      const std::string who = "pid " + std::to_string(p.pid);
      if (d.other_processes.size() < kMaxOtherProcesses &&
          std::find(d.other_processes.begin(), d.other_processes.end(), who) == d.other_processes.end())
        d.other_processes.push_back(who);
    }
    recording.metrics.Add(gpu.metric_device, Metric::kJobFbUsedBytes, t, job_bytes);
    if (gpu.unsupported[kProcessUtil] || !api.DeviceGetProcessUtilization) continue;
    // One sample per process with activity since the last call; NOT_FOUND: none had any.
    // The buffer keeps its size between calls; the driver says when it needs more.
    if (gpu.process_util.empty()) gpu.process_util.resize(64);
    unsigned int n = static_cast<unsigned int>(gpu.process_util.size());
    nvmlReturn_t rc =
        api.DeviceGetProcessUtilization(gpu.handle, gpu.process_util.data(), &n, gpu.process_util_last_seen);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE && n > gpu.process_util.size()) {
      gpu.process_util.resize(std::min(n + 16u, 4096u));
      n = static_cast<unsigned int>(gpu.process_util.size());
      rc = api.DeviceGetProcessUtilization(gpu.handle, gpu.process_util.data(), &n, gpu.process_util_last_seen);
    }
    if (rc == NVML_ERROR_NOT_FOUND) n = 0;
    else if (!Check(rc, gpu, kProcessUtil, recording)) continue;
    n = std::min<unsigned int>(n, static_cast<unsigned int>(gpu.process_util.size()));
    std::map<unsigned int, std::pair<double, int>> per_pid;  // sum, samples
    unsigned long long newest = gpu.process_util_last_seen;
    for (unsigned int i = 0; i < n; ++i) {
      const auto& u = gpu.process_util[i];
      newest = std::max(newest, u.timeStamp);
      if (u.smUtil > 100) continue;
      auto& [sum, samples] = per_pid[u.pid];
      sum += u.smUtil;
      ++samples;
    }
    const bool first = gpu.process_util_last_seen == 0;  // the driver's whole history: not this run's
    gpu.process_util_last_seen = newest;
    if (first && n > 0) continue;
    double job_sm = 0, other_sm = 0;
    for (const auto& [pid, acc] : per_pid) (is_job(pid) ? job_sm : other_sm) += acc.first / acc.second;
    recording.metrics.Add(gpu.metric_device, Metric::kJobSmUtil, t, std::min(job_sm, 100.0));
    recording.metrics.Add(gpu.metric_device, Metric::kOtherSmUtil, t, std::min(other_sm, 100.0));
  }
}

void NvmlSampler::FinishAttribution(Recording& recording) {
  for (const auto& gpu : devices_)
    if (gpu.processes_listed && !gpu.job_seen)
      recording.metrics.devices[gpu.metric_device].job_use = MetricDevice::JobUse::kNotUsed;
  // A MIG-mode GPU is the job's when one of its instances is.
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].parent < 0) continue;
    const auto use = recording.metrics.devices[devices_[i].metric_device].job_use;
    auto& parent = recording.metrics.devices[devices_[static_cast<size_t>(devices_[i].parent)].metric_device];
    if (use == MetricDevice::JobUse::kUsed) parent.job_use = use;
    else if (use == MetricDevice::JobUse::kNotUsed && parent.job_use == MetricDevice::JobUse::kUnknown) parent.job_use = use;
  }
}

void NvmlSampler::Sample(TimeNs t, Recording& recording) {
  const NvmlApi& api = nvml_->api();
  MetricSet& set = recording.metrics;
  auto put = [&set](size_t device, Metric m, TimeNs at, double value) { set.Add(device, m, at, value); };
  for (auto& gpu : devices_) {
    if (Gone(gpu)) continue;
    const size_t dev = gpu.metric_device;
    auto want = [&](Call call, bool resolved) { return resolved && !gpu.unsupported[call] && !gpu.lost; };
    if (want(kUtil, api.DeviceGetUtilizationRates != nullptr)) {
      nvmlUtilization_t u{};
      if (Check(api.DeviceGetUtilizationRates(gpu.handle, &u), gpu, kUtil, recording)) {
        // The driver's buffer has the utilization at its own, finer rate; the
        // polled value stands in while the buffer is dry (an idle GPU).
        const bool buffered = want(kUtilBuffer, api.DeviceGetSamples != nullptr) && SampleUtilBuffer(gpu, t, recording);
        if (!buffered) put(dev, Metric::kGpuUtil, t, u.gpu);
        put(dev, Metric::kMemCopyUtil, t, u.memory);
      }
    }
    if (want(kMemory, api.DeviceGetMemoryInfo != nullptr)) {
      nvmlMemory_t m{};
      if (Check(api.DeviceGetMemoryInfo(gpu.handle, &m), gpu, kMemory, recording)) {
        put(dev, Metric::kFbUsedBytes, t, static_cast<double>(m.used));
        put(dev, Metric::kFbFreeBytes, t, static_cast<double>(m.free));
      }
    }
    unsigned int v = 0;
    if (want(kPower, api.DeviceGetPowerUsage != nullptr) &&
        Check(api.DeviceGetPowerUsage(gpu.handle, &v), gpu, kPower, recording))
      put(dev, Metric::kPowerW, t, v / 1000.0);  // mW
    if (want(kSmClock, api.DeviceGetClockInfo != nullptr) &&
        Check(api.DeviceGetClockInfo(gpu.handle, NVML_CLOCK_SM, &v), gpu, kSmClock, recording))
      put(dev, Metric::kSmClockMHz, t, v);
    if (want(kMemClock, api.DeviceGetClockInfo != nullptr) &&
        Check(api.DeviceGetClockInfo(gpu.handle, NVML_CLOCK_MEM, &v), gpu, kMemClock, recording))
      put(dev, Metric::kMemClockMHz, t, v);
    if (want(kTemp, api.DeviceGetTemperature != nullptr) &&
        Check(api.DeviceGetTemperature(gpu.handle, NVML_TEMPERATURE_GPU, &v), gpu, kTemp, recording))
      put(dev, Metric::kGpuTempC, t, v);
    unsigned long long reasons = 0;
    if (want(kReasons, api.DeviceGetClocksEventReasons != nullptr) &&
        Check(api.DeviceGetClocksEventReasons(gpu.handle, &reasons), gpu, kReasons, recording))
      put(dev, Metric::kClockEventReasons, t, static_cast<double>(reasons));
    if (want(kPcieRx, api.DeviceGetPcieThroughput != nullptr) &&
        Check(api.DeviceGetPcieThroughput(gpu.handle, NVML_PCIE_UTIL_RX_BYTES, &v), gpu, kPcieRx, recording))
      put(dev, Metric::kPcieRxBytesPerS, t, v * 1000.0);  // KB/s
    if (want(kPcieTx, api.DeviceGetPcieThroughput != nullptr) &&
        Check(api.DeviceGetPcieThroughput(gpu.handle, NVML_PCIE_UTIL_TX_BYTES, &v), gpu, kPcieTx, recording))
      put(dev, Metric::kPcieTxBytesPerS, t, v * 1000.0);
    SampleGpm(gpu, t, recording);
  }
  ++set.rows;
}

}  // namespace gputriage
