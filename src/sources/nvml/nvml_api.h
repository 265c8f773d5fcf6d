// Our own declarations of the NVML C ABI subset gputriage calls. No NVIDIA header
// is installable here (nvml.h ships in non-free packages), and NVIDIA's header
// carries its notice, so the types, enums and signatures are written from the
// published API (shared/reference/gpu-metrics.md §3, checked against go-nvml's
// nvml.h): layouts and sizes must match the driver's library exactly.
//
// Used by the loader (nvml_library.cc) and by the fake library the tests load
// through it (tests/fake_nvml/), so both sides agree on one definition.
#pragma once

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;
enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_UNKNOWN = 999,
};

struct nvmlDevice_st;
typedef struct nvmlDevice_st* nvmlDevice_t;  // pointer-sized opaque handle

typedef struct nvmlUtilization_st {
  unsigned int gpu;     // % of the sample period with a kernel executing
  unsigned int memory;  // % of the sample period with device memory read or written
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef int nvmlClockType_t;
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };

typedef int nvmlTemperatureSensors_t;
enum : int { NVML_TEMPERATURE_GPU = 0 };

typedef int nvmlPcieUtilCounter_t;
enum : int { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };

constexpr unsigned int NVML_DEVICE_NAME_BUFFER_SIZE = 96;
constexpr unsigned int NVML_DEVICE_UUID_BUFFER_SIZE = 96;
constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;

// GPM (GPU performance monitoring, Hopper and newer): DCGM's profiling metrics
// without DCGM. The metrics array grew across NVML releases (98, 210, 333 entries)
// while the struct version stayed 1: declare the largest and read numMetrics only.
struct nvmlGpmSample_st;
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;
constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1;
constexpr unsigned int NVML_GPM_SUPPORT_VERSION = 1;
constexpr int kNvmlGpmMetricMax = 333;
enum : unsigned int {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
  NVML_GPM_METRIC_SM_UTIL = 2,
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
  NVML_GPM_METRIC_FP64_UTIL = 11,
  NVML_GPM_METRIC_FP32_UTIL = 12,
  NVML_GPM_METRIC_FP16_UTIL = 13,
  NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20,  // MiB/s, per the header
  NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,
  NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60,
  NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61,
};
typedef struct {
  char* shortName;
  char* longName;
  char* unit;
} nvmlGpmMetricMetricInfo_t;
typedef struct {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;  // percent for the *_UTIL metrics
  nvmlGpmMetricMetricInfo_t metricInfo;
} nvmlGpmMetric_t;
typedef struct {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[kNvmlGpmMetricMax];
} nvmlGpmMetricsGet_t;
typedef struct {
  unsigned int version;
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

// Running processes. The _v3/_v2 entry points fill the 24-byte struct (MIG
// instance ids added); the plain, pre-R470 one fills the 16-byte v1 struct.
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE on WDDM
  unsigned int gpuInstanceId;        // 0xFFFFFFFF when not MIG
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;
typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;

// Per-process utilization since a timestamp (one sample per process with activity).
typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp, microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

// The driver's high-rate sample ring buffers (nvmlDeviceGetSamples).
typedef int nvmlSamplingType_t;
enum : int { NVML_TOTAL_POWER_SAMPLES = 0, NVML_GPU_UTILIZATION_SAMPLES = 1, NVML_MEMORY_UTILIZATION_SAMPLES = 2 };
typedef int nvmlValueType_t;
enum : int {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
  NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};
typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;
typedef struct nvmlSample_st {
  unsigned long long timeStamp;  // CPU timestamp, microseconds (boot-based on some drivers)
  nvmlValue_t sampleValue;
} nvmlSample_t;

// Function signatures, as pointer types the loader resolves with dlsym.
using nvmlInit_fn = nvmlReturn_t (*)();
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t);
using nvmlSystemGetDriverVersion_fn = nvmlReturn_t (*)(char*, unsigned int);
using nvmlDeviceGetCount_fn = nvmlReturn_t (*)(unsigned int*);
using nvmlDeviceGetHandleByIndex_fn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using nvmlDeviceGetString_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);  // name, UUID
using nvmlDeviceGetPciInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using nvmlDeviceGetUtilizationRates_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using nvmlDeviceGetMemoryInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using nvmlDeviceGetUInt_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);  // power (mW), limit (mW)
using nvmlDeviceGetClockInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlClockType_t, unsigned int*);
using nvmlDeviceGetTemperature_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int*);
using nvmlDeviceGetClocksEventReasons_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using nvmlDeviceGetPcieThroughput_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPcieUtilCounter_t, unsigned int*);
using nvmlDeviceGetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using nvmlDeviceGetComputeRunningProcesses_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
using nvmlDeviceGetComputeRunningProcessesV1_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
using nvmlDeviceGetProcessUtilization_fn =
    nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*, unsigned long long);
using nvmlDeviceGetSamples_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlSamplingType_t, unsigned long long, nvmlValueType_t*,
                                                 unsigned int*, nvmlSample_t*);
using nvmlDeviceGetMaxMigDeviceCount_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetMigDeviceHandleByIndex_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
using nvmlDeviceGetGpuInstanceId_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using nvmlGpmQueryDeviceSupport_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSupport_t*);
using nvmlGpmSampleAlloc_fn = nvmlReturn_t (*)(nvmlGpmSample_t*);
using nvmlGpmSampleFree_fn = nvmlReturn_t (*)(nvmlGpmSample_t);
using nvmlGpmSampleGet_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSample_t);
// MIG: the physical GPU's handle and the GPU instance id (NVML 11.8+).
using nvmlGpmMigSampleGet_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlGpmSample_t);
using nvmlGpmMetricsGet_fn = nvmlReturn_t (*)(nvmlGpmMetricsGet_t*);

}  // extern "C"

static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlGpmMetric_t) == 40);
static_assert(sizeof(nvmlProcessInfo_t) == 24);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32);
static_assert(sizeof(nvmlSample_t) == 16);
static_assert(sizeof(nvmlGpmMetricsGet_t) == 24 + 40 * kNvmlGpmMetricMax);
