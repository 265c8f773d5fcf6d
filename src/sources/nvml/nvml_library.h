// Loads NVML (libnvidia-ml) at run time with dlopen: gputriage builds and runs on
// machines without an NVIDIA driver, and says so clearly when asked to record.
// This file and nvml_library.cc use dlopen/dlsym (libpq is loaded likewise: src/store/libpq_library.cc).
#pragma once

#include <memory>
#include <string>

#include "gputriage/status.h"
#include "src/sources/nvml/nvml_api.h"

namespace gputriage {

/// The NVML entry points gputriage uses. Required ones are never null after
/// Load(); optional ones are null when the driver's library lacks them (older
/// drivers), and the sampler treats that metric as unsupported.
struct NvmlApi {
  // required
  nvmlShutdown_fn Shutdown = nullptr;
  nvmlErrorString_fn ErrorString = nullptr;
  nvmlDeviceGetCount_fn DeviceGetCount = nullptr;
  nvmlDeviceGetHandleByIndex_fn DeviceGetHandleByIndex = nullptr;
  // optional
  nvmlSystemGetDriverVersion_fn SystemGetDriverVersion = nullptr;
  nvmlDeviceGetString_fn DeviceGetName = nullptr;
  nvmlDeviceGetString_fn DeviceGetUUID = nullptr;
  nvmlDeviceGetPciInfo_fn DeviceGetPciInfo = nullptr;
  nvmlDeviceGetUtilizationRates_fn DeviceGetUtilizationRates = nullptr;
  nvmlDeviceGetMemoryInfo_fn DeviceGetMemoryInfo = nullptr;
  nvmlDeviceGetUInt_fn DeviceGetPowerUsage = nullptr;        // mW
  nvmlDeviceGetUInt_fn DeviceGetEnforcedPowerLimit = nullptr;  // mW
  nvmlDeviceGetClockInfo_fn DeviceGetClockInfo = nullptr;
  nvmlDeviceGetClockInfo_fn DeviceGetMaxClockInfo = nullptr;
  nvmlDeviceGetTemperature_fn DeviceGetTemperature = nullptr;
  nvmlDeviceGetClocksEventReasons_fn DeviceGetClocksEventReasons = nullptr;
  nvmlDeviceGetPcieThroughput_fn DeviceGetPcieThroughput = nullptr;
  nvmlDeviceGetMigMode_fn DeviceGetMigMode = nullptr;
  // Processes: the _v3/_v2 form, else the pre-R470 one (16-byte entries).
  nvmlDeviceGetComputeRunningProcesses_fn DeviceGetComputeRunningProcesses = nullptr;
  nvmlDeviceGetComputeRunningProcessesV1_fn DeviceGetComputeRunningProcessesV1 = nullptr;
  nvmlDeviceGetProcessUtilization_fn DeviceGetProcessUtilization = nullptr;
  nvmlDeviceGetSamples_fn DeviceGetSamples = nullptr;
  // MIG instances (R450+)
  nvmlDeviceGetMaxMigDeviceCount_fn DeviceGetMaxMigDeviceCount = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn DeviceGetMigDeviceHandleByIndex = nullptr;
  nvmlDeviceGetGpuInstanceId_fn DeviceGetGpuInstanceId = nullptr;
  // GPM (NVML 11.8+, Hopper+ devices)
  nvmlGpmQueryDeviceSupport_fn GpmQueryDeviceSupport = nullptr;
  nvmlGpmSampleAlloc_fn GpmSampleAlloc = nullptr;
  nvmlGpmSampleFree_fn GpmSampleFree = nullptr;
  nvmlGpmSampleGet_fn GpmSampleGet = nullptr;
  nvmlGpmMigSampleGet_fn GpmMigSampleGet = nullptr;
  nvmlGpmMetricsGet_fn GpmMetricsGet = nullptr;
};

class NvmlLibrary {
 public:
  /// Environment variable naming the library to load instead of the driver's.
  static constexpr const char* kPathEnv = "GPUTRIAGE_NVML_LIBRARY";

  /// Loads and initialises NVML. `path` (e.g. from --nvml-library) wins, then
  /// $GPUTRIAGE_NVML_LIBRARY, then libnvidia-ml.so.1 and libnvidia-ml.so from the
  /// system search path. Errors name what was tried and why it failed: no
  /// driver installed (kNotFound), not an NVML library or too old (kUnimplemented),
  /// nvmlInit failed, e.g. driver not loaded or no permission (kUnavailable-like kIoError).
  static StatusOr<std::unique_ptr<NvmlLibrary>> Load(const std::string& path = "");

  ~NvmlLibrary();  // nvmlShutdown, then dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const NvmlApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  /// "Not Supported (3)"; safe for any code.
  std::string Describe(nvmlReturn_t code) const;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
  NvmlApi api_;
};

}  // namespace gputriage
