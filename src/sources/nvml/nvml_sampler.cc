#include "src/sources/nvml/nvml_sampler.h"

#include <cstring>
#include <iterator>
#include <utility>
#include <string>

namespace gputriage {
namespace {

constexpr const char* kCallNames[] = {"utilization", "memory info", "power usage", "SM clock", "memory clock",
                                      "temperature", "clock event reasons", "PCIe RX throughput", "PCIe TX throughput",
                                      "GPM metrics"};

// GPM metric → canonical metric (DCGM computes its PROF fields from the same ids on Hopper+).
struct GpmMapping {
  unsigned int id;
  Metric metric;
};
constexpr GpmMapping kGpmMetrics[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, Metric::kGrEngineActive}, {NVML_GPM_METRIC_SM_UTIL, Metric::kSmActive},
    {NVML_GPM_METRIC_SM_OCCUPANCY, Metric::kSmOccupancy},     {NVML_GPM_METRIC_ANY_TENSOR_UTIL, Metric::kTensorActive},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, Metric::kDramActive},      {NVML_GPM_METRIC_FP64_UTIL, Metric::kFp64Active},
    {NVML_GPM_METRIC_FP32_UTIL, Metric::kFp32Active},         {NVML_GPM_METRIC_FP16_UTIL, Metric::kFp16Active},
};
constexpr TimeNs kGpmMinInterval = 100 * kNsPerMs;  // "due to the internal sample refresh rate"

std::string Text(const char* buffer, size_t size) { return std::string(buffer, strnlen(buffer, size)); }

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
    std::string uuid, bus;
    if (api.DeviceGetUUID) {
      char buf[NVML_DEVICE_UUID_BUFFER_SIZE] = {};
      if (api.DeviceGetUUID(handle, buf, sizeof buf) == NVML_SUCCESS) uuid = Text(buf, sizeof buf);
    }
    if (api.DeviceGetPciInfo) {
      nvmlPciInfo_t pci{};
      if (api.DeviceGetPciInfo(handle, &pci) == NVML_SUCCESS) bus = Text(pci.busId, sizeof pci.busId);
    }
    auto pos = recording.metrics.FindOrAdd(static_cast<int>(i), uuid, bus, -1);
    if (!pos) break;
    MetricDevice& d = recording.metrics.devices[*pos];
    d.driver_version = driver;
    if (api.DeviceGetName) {
      char buf[NVML_DEVICE_NAME_BUFFER_SIZE] = {};
      if (api.DeviceGetName(handle, buf, sizeof buf) == NVML_SUCCESS) d.name = Text(buf, sizeof buf);
    }
    unsigned int milliwatts = 0, mhz = 0, current = 0, pending = 0;
    if (api.DeviceGetEnforcedPowerLimit && api.DeviceGetEnforcedPowerLimit(handle, &milliwatts) == NVML_SUCCESS)
      d.power_limit_w = milliwatts / 1000.0;
    if (api.DeviceGetMaxClockInfo && api.DeviceGetMaxClockInfo(handle, NVML_CLOCK_SM, &mhz) == NVML_SUCCESS)
      d.max_sm_clock_mhz = mhz;
    if (api.DeviceGetMigMode && api.DeviceGetMigMode(handle, &current, &pending) == NVML_SUCCESS) d.mig_mode = current == 1;
    if (api.DeviceGetMemoryInfo) {
      nvmlMemory_t mem{};
      if (api.DeviceGetMemoryInfo(handle, &mem) == NVML_SUCCESS) d.memory_total_bytes = static_cast<int64_t>(mem.total);
    }
    Gpu gpu;
    gpu.handle = handle;
    gpu.metric_device = *pos;
    // GPM where the device supports it (Hopper+, not under MIG, where it needs instance handles).
    bool gpm = false;
    if (api.GpmQueryDeviceSupport && api.GpmSampleAlloc && api.GpmSampleFree && api.GpmSampleGet && api.GpmMetricsGet &&
        !d.mig_mode) {
      nvmlGpmSupport_t support{};
      support.version = NVML_GPM_SUPPORT_VERSION;
      gpm = api.GpmQueryDeviceSupport(handle, &support) == NVML_SUCCESS && support.isSupportedDevice != 0 &&
            api.GpmSampleAlloc(&gpu.gpm_previous) == NVML_SUCCESS && api.GpmSampleAlloc(&gpu.gpm_current) == NVML_SUCCESS &&
            api.GpmSampleGet(handle, gpu.gpm_previous) == NVML_SUCCESS;
    }
    if (!gpm) {
      gpu.unsupported[kGpm] = true;
      recording.stats.AddIssue(IssueSeverity::kInfo, "gpm_unavailable",
                               d.Label() + ": no GPM metrics (needs Hopper or newer and NVML 11.8+, and no MIG): SM, "
                                           "tensor and DRAM activity will be missing");
    }
    sampler.devices_.push_back(gpu);
  }
  return sampler;
}

NvmlSampler::NvmlSampler(NvmlSampler&& other) noexcept : nvml_(other.nvml_), devices_(std::move(other.devices_)),
                                                        sink_(std::move(other.sink_)) {
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
  if (!Check(api.GpmSampleGet(gpu.handle, gpu.gpm_current), gpu, kGpm, recording)) return;
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
    if (m.nvmlReturn != NVML_SUCCESS) continue;  // that counter is not on this chip: stays missing
    recording.metrics.Add(gpu.metric_device, kGpmMetrics[i].metric, t, m.value);
    if (sink_) sink_(gpu.metric_device, kGpmMetrics[i].metric, t, m.value);
  }
}

int NvmlSampler::lost_devices() const {
  int n = 0;
  for (const auto& g : devices_) n += g.lost ? 1 : 0;
  return n;
}

bool NvmlSampler::Check(nvmlReturn_t rc, Gpu& gpu, Call call, Recording& recording) {
  if (rc == NVML_SUCCESS) return true;
  const std::string label = recording.metrics.devices[gpu.metric_device].Label();
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

void NvmlSampler::Sample(TimeNs t, Recording& recording) {
  const NvmlApi& api = nvml_->api();
  MetricSet& set = recording.metrics;
  auto put = [&](size_t device, Metric m, TimeNs at, double value) {
    set.Add(device, m, at, value);
    if (sink_) sink_(device, m, at, value);
  };
  for (auto& gpu : devices_) {
    if (gpu.lost) continue;
    const size_t dev = gpu.metric_device;
    auto want = [&](Call call, bool resolved) { return resolved && !gpu.unsupported[call] && !gpu.lost; };
    if (want(kUtil, api.DeviceGetUtilizationRates != nullptr)) {
      nvmlUtilization_t u{};
      if (Check(api.DeviceGetUtilizationRates(gpu.handle, &u), gpu, kUtil, recording)) {
        put(dev, Metric::kGpuUtil, t, u.gpu);
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
