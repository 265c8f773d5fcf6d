#include "src/sources/nvml/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

namespace gputriage {
namespace {

/// The first of `names` the library exports (versioned entry points first:
/// nvmlInit_v2 before nvmlInit, _v3 before _v2 before the plain name).
template <typename Fn>
Fn Resolve(void* handle, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (void* sym = dlsym(handle, name)) return reinterpret_cast<Fn>(sym);
  return nullptr;
}

const char* FallbackName(nvmlReturn_t code) {
  switch (code) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
    default: return "Unknown Error";
  }
}

}  // namespace

StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  std::vector<std::string> candidates;
  if (!path.empty()) {
    candidates.push_back(path);
  } else if (const char* env = std::getenv(kPathEnv); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    candidates = {"libnvidia-ml.so.1", "libnvidia-ml.so"};
  }
  void* handle = nullptr;
  std::string tried, chosen;
  for (const auto& c : candidates) {
    dlerror();
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      chosen = c;
      break;
    }
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + c + ": " + (why ? why : "not loadable");
  }
  if (handle == nullptr)
    return NotFoundError("no NVIDIA driver library (NVML) could be loaded (" + tried +
                         "). Is an NVIDIA driver installed? Use --nvml-library PATH or $" + kPathEnv +
                         " to point at libnvidia-ml.so.1");

  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->handle_ = handle;
  lib->path_ = chosen;
  NvmlApi& a = lib->api_;
  auto init = Resolve<nvmlInit_fn>(handle, {"nvmlInit_v2", "nvmlInit"});
  a.Shutdown = Resolve<nvmlShutdown_fn>(handle, {"nvmlShutdown"});
  a.ErrorString = Resolve<nvmlErrorString_fn>(handle, {"nvmlErrorString"});
  a.DeviceGetCount = Resolve<nvmlDeviceGetCount_fn>(handle, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  a.DeviceGetHandleByIndex =
      Resolve<nvmlDeviceGetHandleByIndex_fn>(handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  std::string missing;
  if (!init) missing += " nvmlInit_v2";
  if (!a.Shutdown) missing += " nvmlShutdown";
  if (!a.ErrorString) missing += " nvmlErrorString";
  if (!a.DeviceGetCount) missing += " nvmlDeviceGetCount_v2";
  if (!a.DeviceGetHandleByIndex) missing += " nvmlDeviceGetHandleByIndex_v2";
  if (!missing.empty()) {
    lib->api_.Shutdown = nullptr;  // never initialised: the destructor must not shut down
    return UnimplementedError(chosen + " is not a usable NVML library: missing" + missing);
  }
  a.SystemGetDriverVersion = Resolve<nvmlSystemGetDriverVersion_fn>(handle, {"nvmlSystemGetDriverVersion"});
  a.DeviceGetName = Resolve<nvmlDeviceGetString_fn>(handle, {"nvmlDeviceGetName"});
  a.DeviceGetUUID = Resolve<nvmlDeviceGetString_fn>(handle, {"nvmlDeviceGetUUID"});
  a.DeviceGetPciInfo =
      Resolve<nvmlDeviceGetPciInfo_fn>(handle, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"});
  a.DeviceGetUtilizationRates = Resolve<nvmlDeviceGetUtilizationRates_fn>(handle, {"nvmlDeviceGetUtilizationRates"});
  a.DeviceGetMemoryInfo = Resolve<nvmlDeviceGetMemoryInfo_fn>(handle, {"nvmlDeviceGetMemoryInfo"});
  a.DeviceGetPowerUsage = Resolve<nvmlDeviceGetUInt_fn>(handle, {"nvmlDeviceGetPowerUsage"});
  a.DeviceGetEnforcedPowerLimit = Resolve<nvmlDeviceGetUInt_fn>(handle, {"nvmlDeviceGetEnforcedPowerLimit"});
  a.DeviceGetClockInfo = Resolve<nvmlDeviceGetClockInfo_fn>(handle, {"nvmlDeviceGetClockInfo"});
  a.DeviceGetMaxClockInfo = Resolve<nvmlDeviceGetClockInfo_fn>(handle, {"nvmlDeviceGetMaxClockInfo"});
  a.DeviceGetTemperature = Resolve<nvmlDeviceGetTemperature_fn>(handle, {"nvmlDeviceGetTemperature"});
  // R535+ renamed "throttle" reasons to "clocks event" reasons; older drivers have only the old name.
  a.DeviceGetClocksEventReasons = Resolve<nvmlDeviceGetClocksEventReasons_fn>(
      handle, {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  a.DeviceGetPcieThroughput = Resolve<nvmlDeviceGetPcieThroughput_fn>(handle, {"nvmlDeviceGetPcieThroughput"});
  a.DeviceGetMigMode = Resolve<nvmlDeviceGetMigMode_fn>(handle, {"nvmlDeviceGetMigMode"});
  a.DeviceGetComputeRunningProcesses = Resolve<nvmlDeviceGetComputeRunningProcesses_fn>(
      handle, {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  if (!a.DeviceGetComputeRunningProcesses)
    a.DeviceGetComputeRunningProcessesV1 =
        Resolve<nvmlDeviceGetComputeRunningProcessesV1_fn>(handle, {"nvmlDeviceGetComputeRunningProcesses"});
  a.DeviceGetProcessUtilization =
      Resolve<nvmlDeviceGetProcessUtilization_fn>(handle, {"nvmlDeviceGetProcessUtilization"});
  a.DeviceGetSamples = Resolve<nvmlDeviceGetSamples_fn>(handle, {"nvmlDeviceGetSamples"});
  a.DeviceGetMaxMigDeviceCount = Resolve<nvmlDeviceGetMaxMigDeviceCount_fn>(handle, {"nvmlDeviceGetMaxMigDeviceCount"});
  a.DeviceGetMigDeviceHandleByIndex =
      Resolve<nvmlDeviceGetMigDeviceHandleByIndex_fn>(handle, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  a.DeviceGetGpuInstanceId = Resolve<nvmlDeviceGetGpuInstanceId_fn>(handle, {"nvmlDeviceGetGpuInstanceId"});
  a.GpmQueryDeviceSupport = Resolve<nvmlGpmQueryDeviceSupport_fn>(handle, {"nvmlGpmQueryDeviceSupport"});
  a.GpmSampleAlloc = Resolve<nvmlGpmSampleAlloc_fn>(handle, {"nvmlGpmSampleAlloc"});
  a.GpmSampleFree = Resolve<nvmlGpmSampleFree_fn>(handle, {"nvmlGpmSampleFree"});
  a.GpmSampleGet = Resolve<nvmlGpmSampleGet_fn>(handle, {"nvmlGpmSampleGet"});
  a.GpmMigSampleGet = Resolve<nvmlGpmMigSampleGet_fn>(handle, {"nvmlGpmMigSampleGet"});
  a.GpmMetricsGet = Resolve<nvmlGpmMetricsGet_fn>(handle, {"nvmlGpmMetricsGet"});

  const nvmlReturn_t rc = init();
  if (rc != NVML_SUCCESS) {
    const std::string what = lib->Describe(rc);
    lib->api_.Shutdown = nullptr;
    if (rc == NVML_ERROR_DRIVER_NOT_LOADED)
      return NotFoundError("NVML (" + chosen + ") found no running NVIDIA driver: " + what);
    if (rc == NVML_ERROR_NO_PERMISSION)
      return IoError("NVML (" + chosen + ") refused access: " + what + " (run as a user allowed to query the GPUs)");
    return IoError("NVML (" + chosen + ") failed to initialise: " + what);
  }
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (api_.Shutdown) api_.Shutdown();
  if (handle_) dlclose(handle_);
}

std::string NvmlLibrary::Describe(nvmlReturn_t code) const {
  const char* text = api_.ErrorString ? api_.ErrorString(code) : nullptr;
  return std::string(text && *text ? text : FallbackName(code)) + " (" + std::to_string(code) + ")";
}

}  // namespace gputriage
