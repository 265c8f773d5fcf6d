// A fake libnvidia-ml.so.1: the same C ABI as NVML (src/sources/nvml/nvml_api.h),
// driven by a scenario file, so the real loader and sampler can be tested on
// machines without a GPU. With no scenario it presents one healthy GPU.
//
// Scenario ($GPUTRIAGE_FAKE_NVML_SCENARIO), one directive per line, '#' comments:
//   driver 550.54.15
//   init_error 9                     nvmlInit returns this code (9 = driver not loaded)
//   device name="NVIDIA H100 80GB HBM3" uuid=GPU-1 bus=00000000:18:00.0 power_limit_w=700
//          max_sm_mhz=1980 memory_total_mib=81559 mig=0
//   series gpu_util 97 97 0 0        for the last device; cycles, one value per sample
//          (gpu_util mem_util power_w sm_mhz mem_mhz temp_c mem_used_mib reasons pcie_rx_kbs pcie_tx_kbs)
//   unsupported power reasons        these calls return NVML_ERROR_NOT_SUPPORTED
//   lost_after 20                    from the 21st sample on, every call returns GPU_IS_LOST
//   error util 4                     this call always returns the code (4 = no permission)
//   gpm 1                            GPM supported; series sm_active tensor_active dram_active fp32_active
//                                    fp16_active fp64_active gr_engine sm_occupancy give its percentages,
//                                    gpm_pcie_rx_mibs gpm_pcie_tx_mibs nvlink_rx_mibs nvlink_tx_mibs its MiB/s
//   buffer 5 boot                    the driver's utilization buffer: 5 entries per sample, spread over
//                                    the 100 ms up to it, values from series gpu_util_fast (else gpu_util) by entry
//                                    number; "boot": timestamps on a boot-based clock (else Unix time);
//                                    "dry": no entries while the value is 0 (an idle GPU)
//   process child sm=60 used_mib=2000   a compute process: "child"/"grandchild" are the calling
//                                    process's children/grandchildren (the recorded job), or pid=N
//   instance gi=3 profile=3g.40gb memory_total_mib=40192 gpm=1
//                                    a MIG instance of the last device (mig=1); later series,
//                                    process and unsupported lines apply to it
// A "sample" is one nvmlDeviceGetUtilizationRates call on that device (the
// sampler asks for utilization first); other getters read the current sample.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "src/sources/nvml/nvml_api.h"

namespace {

struct FakeProcess {
  std::string who;  // "child", "grandchild" or a pid
  unsigned sm = 0;
  unsigned long long used_mib = 0;
};

struct FakeDevice {
  std::string name = "Fake GPU (gputriage test)";
  std::string uuid = "GPU-fake-0000";
  std::string bus = "00000000:01:00.0";
  unsigned power_limit_w = 300;
  unsigned max_sm_mhz = 1500;
  unsigned long long memory_total_mib = 16384;
  unsigned mig = 0;
  unsigned gpm = 0;
  // Transparent comparators: every fake call looks these up by a literal, without allocating.
  std::map<std::string, std::vector<double>, std::less<>> series;
  std::map<std::string, int, std::less<>> errors;  // call → return code
  long lost_after = -1;
  long sample = -1;  // advanced by each utilization call
  std::vector<FakeProcess> processes;
  // utilization buffer
  int buffer_per_sample = 0;
  bool buffer_boot_clock = false;
  bool buffer_dry = false;
  long buffer_entries = 0;
  std::vector<nvmlSample_t> buffer;
  // MIG
  unsigned gpu_instance = 0;
  std::string profile;
  std::vector<FakeDevice> instances;
  FakeDevice* parent = nullptr;
};

struct Scenario {
  bool loaded = false;
  std::string driver = "999.99.99-fake";
  int init_error = 0;
  bool initialised = false;
  std::vector<FakeDevice> devices;
};

Scenario& State() {
  static Scenario s;
  return s;
}

std::map<std::string, std::string> KeyValues(std::istringstream& in) {
  std::map<std::string, std::string> kv;
  std::string rest;
  std::getline(in, rest);
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    const size_t eq = rest.find('=', i);
    if (eq == std::string::npos) break;
    const std::string key = rest.substr(i, eq - i);
    std::string value;
    size_t j = eq + 1;
    if (j < rest.size() && rest[j] == '"') {
      const size_t close = rest.find('"', j + 1);
      value = rest.substr(j + 1, close - j - 1);
      j = close == std::string::npos ? rest.size() : close + 1;
    } else {
      const size_t sp = rest.find(' ', j);
      value = rest.substr(j, sp == std::string::npos ? std::string::npos : sp - j);
      j = sp == std::string::npos ? rest.size() : sp;
    }
    kv[key] = value;
    i = j;
  }
  return kv;
}

void Load() {
  Scenario& s = State();
  if (s.loaded) return;
  s.loaded = true;
  const char* path = std::getenv("GPUTRIAGE_FAKE_NVML_SCENARIO");
  if (path == nullptr || *path == '\0') {
    FakeDevice healthy;
    healthy.series["gpu_util"] = {95};
    healthy.series["power_w"] = {250};
    healthy.series["sm_mhz"] = {1500};
    s.devices.push_back(healthy);
    return;
  }
  std::ifstream file(path);
  std::string line;
  FakeDevice* current = nullptr;
  while (std::getline(file, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream in(line);
    std::string word;
    if (!(in >> word)) continue;
    if (word == "driver") {
      in >> s.driver;
    } else if (word == "init_error") {
      in >> s.init_error;
    } else if (word == "device") {
      FakeDevice d;
      d.uuid = "GPU-fake-" + std::to_string(s.devices.size());
      auto kv = KeyValues(in);
      if (kv.count("name")) d.name = kv["name"];
      if (kv.count("uuid")) d.uuid = kv["uuid"];
      if (kv.count("bus")) d.bus = kv["bus"];
      if (kv.count("power_limit_w")) d.power_limit_w = static_cast<unsigned>(std::stoul(kv["power_limit_w"]));
      if (kv.count("max_sm_mhz")) d.max_sm_mhz = static_cast<unsigned>(std::stoul(kv["max_sm_mhz"]));
      if (kv.count("memory_total_mib")) d.memory_total_mib = std::stoull(kv["memory_total_mib"]);
      if (kv.count("mig")) d.mig = static_cast<unsigned>(std::stoul(kv["mig"]));
      if (kv.count("gpm")) d.gpm = static_cast<unsigned>(std::stoul(kv["gpm"]));
      s.devices.push_back(d);
      current = &s.devices.back();
      for (auto& dev : s.devices)
        for (auto& inst : dev.instances) inst.parent = &dev;  // the vector may have moved
    } else if (word == "instance" && !s.devices.empty()) {
      FakeDevice& parent = s.devices.back();
      FakeDevice inst;
      auto kv = KeyValues(in);
      inst.gpu_instance = kv.count("gi") ? static_cast<unsigned>(std::stoul(kv["gi"])) : 0;
      inst.profile = kv.count("profile") ? kv["profile"] : "1g.10gb";
      inst.name = parent.name + " MIG " + inst.profile;
      inst.uuid = "MIG-fake-" + std::to_string(s.devices.size() - 1) + "-" + std::to_string(inst.gpu_instance);
      inst.bus = parent.bus;
      if (kv.count("memory_total_mib")) inst.memory_total_mib = std::stoull(kv["memory_total_mib"]);
      if (kv.count("gpm")) inst.gpm = static_cast<unsigned>(std::stoul(kv["gpm"]));
      parent.instances.push_back(inst);
      for (auto& i : parent.instances) i.parent = &parent;
      current = &parent.instances.back();
    } else if (current != nullptr) {
      FakeDevice& d = *current;
      if (word == "series") {
        std::string metric;
        in >> metric;
        double v;
        while (in >> v) d.series[metric].push_back(v);
      } else if (word == "unsupported") {
        std::string call;
        while (in >> call) d.errors[call] = NVML_ERROR_NOT_SUPPORTED;
      } else if (word == "error") {
        std::string call;
        int code = 0;
        in >> call >> code;
        d.errors[call] = code;
      } else if (word == "lost_after") {
        in >> d.lost_after;
      } else if (word == "gpm") {
        in >> d.gpm;
      } else if (word == "buffer") {
        in >> d.buffer_per_sample;
        std::string flag;
        while (in >> flag) {
          if (flag == "boot") d.buffer_boot_clock = true;
          if (flag == "dry") d.buffer_dry = true;
        }
      } else if (word == "process") {
        FakeProcess p;
        in >> p.who;
        auto kv = KeyValues(in);
        if (kv.count("sm")) p.sm = static_cast<unsigned>(std::stoul(kv["sm"]));
        if (kv.count("used_mib")) p.used_mib = std::stoull(kv["used_mib"]);
        if (p.who.rfind("pid=", 0) == 0) p.who = p.who.substr(4);
        d.processes.push_back(p);
      }
    }
  }
}

// Handles: index + 1 for a GPU; (index + 1) | (instance + 1) << 16 for a MIG instance.
FakeDevice* Get(nvmlDevice_t handle) {
  Scenario& s = State();
  const auto value = reinterpret_cast<uintptr_t>(handle);
  const uintptr_t index = value & 0xFFFF, instance = value >> 16;
  if (!s.initialised || index == 0 || index > s.devices.size()) return nullptr;
  FakeDevice& d = s.devices[index - 1];
  if (instance == 0) return &d;
  if (instance > d.instances.size()) return nullptr;
  FakeDevice& inst = d.instances[instance - 1];
  inst.sample = d.sample;  // an instance lives on its GPU's sample clock
  inst.lost_after = d.lost_after;
  return &inst;
}

/// Direct children of `parent` (from /proc), the processes a recorder starts.
std::vector<unsigned> ChildrenOf(unsigned parent) {
  std::vector<unsigned> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const unsigned long pid = std::strtoul(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    // A process that exits between the listing and the read fails the read with
    // ESRCH: libstdc++'s filebuf throws then, and an istreambuf_iterator lets it
    // out (it aborted `record` in CI); the stream's own << catches it.
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::ostringstream read;
    read << stat.rdbuf();
    const std::string text = read.str();
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    unsigned ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<unsigned>(pid));
  }
  closedir(proc);
  return out;
}

/// The pids a scripted process stands for now.
std::vector<unsigned> Pids(const FakeProcess& p) {
  if (p.who == "child") return ChildrenOf(static_cast<unsigned>(getpid()));
  if (p.who == "grandchild") {
    std::vector<unsigned> out;
    for (unsigned c : ChildrenOf(static_cast<unsigned>(getpid())))
      for (unsigned g : ChildrenOf(c)) out.push_back(g);
    return out;
  }
  return {static_cast<unsigned>(std::strtoul(p.who.c_str(), nullptr, 10))};
}

/// The code a call returns on this device now (0 = success).
int Outcome(FakeDevice& d, std::string_view call) {
  if (d.lost_after >= 0 && d.sample >= d.lost_after) return NVML_ERROR_GPU_IS_LOST;
  auto it = d.errors.find(call);
  return it == d.errors.end() ? NVML_SUCCESS : it->second;
}

double Value(const FakeDevice& d, std::string_view metric, double fallback) {
  auto it = d.series.find(metric);
  if (it == d.series.end() || it->second.empty()) return fallback;
  const long i = d.sample < 0 ? 0 : d.sample;
  return it->second[static_cast<size_t>(i) % it->second.size()];
}

/// The shape of every simple getter: an invalid handle is INVALID_ARGUMENT, then
/// the scripted outcome of `call` (none when null), then `fill` writes the answer.
template <typename Fill>
nvmlReturn_t Answer(nvmlDevice_t device, const char* call, Fill&& fill) {
  FakeDevice* d = Get(device);
  if (!d) return NVML_ERROR_INVALID_ARGUMENT;
  if (call != nullptr)
    if (int rc = Outcome(*d, call)) return rc;
  fill(*d);
  return NVML_SUCCESS;
}

void Copy(const std::string& text, char* out, unsigned int length) {
  if (length == 0) return;
  std::snprintf(out, length, "%s", text.c_str());
}

}  // namespace

#define FAKE_API extern "C" __attribute__((visibility("default")))

FAKE_API nvmlReturn_t nvmlInit_v2() {
  // Each init reads the scenario afresh: a test process loads the library
  // several times, and dlclose need not unload it.
  State() = Scenario{};
  Load();
  Scenario& s = State();
  if (s.init_error != 0) return s.init_error;
  s.initialised = true;
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlShutdown() {
  State().initialised = false;
  return NVML_SUCCESS;
}

FAKE_API const char* nvmlErrorString(nvmlReturn_t code) {
  switch (code) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

FAKE_API nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!State().initialised) return NVML_ERROR_UNINITIALIZED;
  Copy(State().driver, version, length);
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!State().initialised) return NVML_ERROR_UNINITIALIZED;
  *count = static_cast<unsigned int>(State().devices.size());
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!State().initialised) return NVML_ERROR_UNINITIALIZED;
  if (index >= State().devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(index) + 1);
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return Answer(device, nullptr, [&](FakeDevice& d) {
    Copy(d.name, name, length);
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return Answer(device, nullptr, [&](FakeDevice& d) {
    Copy(d.uuid, uuid, length);
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return Answer(device, nullptr, [&](FakeDevice& d) {
    std::memset(pci, 0, sizeof *pci);
    Copy(d.bus, pci->busId, sizeof pci->busId);
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current, unsigned int* pending) {
  return Answer(device, nullptr, [&](FakeDevice& d) {
    *current = *pending = d.mig;
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  FakeDevice* d = Get(device);
  if (!d) return NVML_ERROR_INVALID_ARGUMENT;
  ++d->sample;
  if (d->mig || d->parent) return NVML_ERROR_NOT_SUPPORTED;  // NVML reports no utilization under MIG
  // The driver keeps sampling between our polls: this sample's share of buffer entries.
  auto fast = d->series.find("gpu_util_fast");
  if (fast == d->series.end()) fast = d->series.find("gpu_util");
  static const std::vector<double> kNone;
  const std::vector<double>& series = fast == d->series.end() ? kNone : fast->second;
  for (int i = 0; i < d->buffer_per_sample; ++i, ++d->buffer_entries) {
    const double v = series.empty() ? 0 : series[static_cast<size_t>(d->buffer_entries) % series.size()];
    if (d->buffer_dry && v == 0) continue;
    nvmlSample_t e{};
    const unsigned long long base = d->buffer_boot_clock ? 5'000'000'000ULL : 1'700'000'000'000'000ULL;  // µs
    // Entries the driver took since the last poll: the newest at the poll itself,
    // the others before it (a real buffer holds the past, never the future).
    const unsigned long long step = 100'000ULL / static_cast<unsigned long long>(d->buffer_per_sample);
    e.timeStamp = base + static_cast<unsigned long long>(d->buffer_entries) * step -
                  static_cast<unsigned long long>(d->buffer_per_sample - 1) * step;
    e.sampleValue.uiVal = static_cast<unsigned>(v);
    d->buffer.push_back(e);
    if (d->buffer.size() > 120) d->buffer.erase(d->buffer.begin());  // a ring: the oldest go
  }
  if (int rc = Outcome(*d, "util")) return rc;
  u->gpu = static_cast<unsigned>(Value(*d, "gpu_util", 0));
  u->memory = static_cast<unsigned>(Value(*d, "mem_util", 0));
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  return Answer(device, "memory", [&](FakeDevice& d) {
    m->total = d.memory_total_mib << 20;
    m->used = static_cast<unsigned long long>(Value(d, "mem_used_mib", 0)) << 20;
    m->free = m->total > m->used ? m->total - m->used : 0;
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  return Answer(device, "power", [&](FakeDevice& d) {
    *milliwatts = static_cast<unsigned>(Value(d, "power_w", 0) * 1000.0);
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* milliwatts) {
  return Answer(device, nullptr, [&](FakeDevice& d) {
    *milliwatts = d.power_limit_w * 1000;
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  return Answer(device, "clocks", [&](FakeDevice& d) {
    *mhz = static_cast<unsigned>(type == NVML_CLOCK_MEM ? Value(d, "mem_mhz", 1593) : Value(d, "sm_mhz", 0));
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  return Answer(device, nullptr, [&](FakeDevice& d) {
    *mhz = type == NVML_CLOCK_SM ? d.max_sm_mhz : 1593;
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t, unsigned int* celsius) {
  return Answer(device, "temperature", [&](FakeDevice& d) {
    *celsius = static_cast<unsigned>(Value(d, "temp_c", 50));
  });
}

// Only the pre-R535 name, so the loader's fallback is what finds it.
FAKE_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return Answer(device, "reasons", [&](FakeDevice& d) {
    *reasons = static_cast<unsigned long long>(Value(d, "reasons", 0));
  });
}

FAKE_API nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter, unsigned int* kbs) {
  return Answer(device, "pcie", [&](FakeDevice& d) {
    *kbs = static_cast<unsigned>(counter == NVML_PCIE_UTIL_RX_BYTES ? Value(d, "pcie_rx_kbs", 0) : Value(d, "pcie_tx_kbs", 0));
  });
}

// ---- GPM ----------------------------------------------------------------------

struct nvmlGpmSample_st {
  FakeDevice* device = nullptr;
  long sample = -1;
};

FAKE_API nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  FakeDevice* d = Get(device);
  if (!d || support == nullptr || support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_INVALID_ARGUMENT;
  support->isSupportedDevice = d->gpm;
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  *sample = new nvmlGpmSample_st();
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  delete sample;
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  FakeDevice* d = Get(device);
  if (!d || sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // This fake answers per-instance GPM only through nvmlGpmMigSampleGet, NVML's
  // call for it: a sampler that used the plain call on a MIG handle gets nothing.
  if (d->parent) return NVML_ERROR_NOT_SUPPORTED;
  if (!d->gpm) return NVML_ERROR_NOT_SUPPORTED;
  if (int rc = Outcome(*d, "gpm")) return rc;
  sample->device = d;
  sample->sample = d->sample;
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpu_instance, nvmlGpmSample_t sample) {
  FakeDevice* board = Get(device);
  if (!board || board->parent || sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (auto& inst : board->instances) {
    if (inst.gpu_instance != gpu_instance) continue;
    if (!inst.gpm) return NVML_ERROR_NOT_SUPPORTED;
    if (int rc = Outcome(inst, "gpm")) return rc;
    sample->device = &inst;
    sample->sample = inst.sample;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}

FAKE_API nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* request) {
  if (request == nullptr || request->version != NVML_GPM_METRICS_GET_VERSION || request->sample1 == nullptr ||
      request->sample2 == nullptr || request->sample2->device == nullptr || request->numMetrics > kNvmlGpmMetricMax)
    return NVML_ERROR_INVALID_ARGUMENT;
  FakeDevice d = *request->sample2->device;
  d.sample = request->sample2->sample;  // the average "between" the samples: the later tick's value
  for (unsigned i = 0; i < request->numMetrics; ++i) {
    auto& m = request->metrics[i];
    const char* name = nullptr;
    switch (m.metricId) {
      case NVML_GPM_METRIC_GRAPHICS_UTIL: name = "gr_engine"; break;
      case NVML_GPM_METRIC_SM_UTIL: name = "sm_active"; break;
      case NVML_GPM_METRIC_SM_OCCUPANCY: name = "sm_occupancy"; break;
      case NVML_GPM_METRIC_ANY_TENSOR_UTIL: name = "tensor_active"; break;
      case NVML_GPM_METRIC_DRAM_BW_UTIL: name = "dram_active"; break;
      case NVML_GPM_METRIC_FP64_UTIL: name = "fp64_active"; break;
      case NVML_GPM_METRIC_FP32_UTIL: name = "fp32_active"; break;
      case NVML_GPM_METRIC_FP16_UTIL: name = "fp16_active"; break;
      case NVML_GPM_METRIC_PCIE_TX_PER_SEC: name = "gpm_pcie_tx_mibs"; break;
      case NVML_GPM_METRIC_PCIE_RX_PER_SEC: name = "gpm_pcie_rx_mibs"; break;
      case NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: name = "nvlink_rx_mibs"; break;
      case NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: name = "nvlink_tx_mibs"; break;
      default: break;
    }
    if (name == nullptr || !d.series.count(name)) {
      m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      continue;
    }
    m.nvmlReturn = NVML_SUCCESS;
    m.value = Value(d, name, 0);
  }
  return NVML_SUCCESS;
}

// ---- processes, sample buffer, MIG --------------------------------------------

FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                              nvmlProcessInfo_t* infos) {
  FakeDevice* d = Get(device);
  if (!d || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (int rc = Outcome(*d, "processes")) return rc;
  std::vector<nvmlProcessInfo_t> all;
  for (const auto& p : d->processes)
    for (unsigned pid : Pids(p))
      all.push_back({pid, p.used_mib << 20, d->parent ? d->gpu_instance : ~0u, d->parent ? 0u : ~0u});
  const unsigned room = *count;
  *count = static_cast<unsigned>(all.size());
  if (all.size() > room || (infos == nullptr && !all.empty())) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::copy(all.begin(), all.end(), infos);
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* out,
                                                      unsigned int* count, unsigned long long last_seen) {
  FakeDevice* d = Get(device);
  if (!d || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (d->parent) return NVML_ERROR_NOT_SUPPORTED;
  if (int rc = Outcome(*d, "process_util")) return rc;
  // One entry per process with activity, stamped at the current sample (µs).
  const unsigned long long now = 1'700'000'000'000'000ULL + static_cast<unsigned long long>(d->sample + 1) * 100'000ULL;
  if (now <= last_seen) return NVML_ERROR_NOT_FOUND;
  std::vector<nvmlProcessUtilizationSample_t> all;
  for (const auto& p : d->processes)
    if (p.sm > 0)
      for (unsigned pid : Pids(p)) all.push_back({pid, now, p.sm, 0, 0, 0});
  if (all.empty()) return NVML_ERROR_NOT_FOUND;
  const unsigned room = *count;
  *count = static_cast<unsigned>(all.size());
  if (out == nullptr || all.size() > room) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::copy(all.begin(), all.end(), out);
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type, unsigned long long last_seen,
                                           nvmlValueType_t* value_type, unsigned int* count, nvmlSample_t* samples) {
  FakeDevice* d = Get(device);
  if (!d || count == nullptr || value_type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (type != NVML_GPU_UTILIZATION_SAMPLES || d->buffer_per_sample == 0 || d->parent) return NVML_ERROR_NOT_SUPPORTED;
  if (int rc = Outcome(*d, "buffer")) return rc;
  std::vector<nvmlSample_t> newer;
  for (const auto& e : d->buffer)
    if (e.timeStamp > last_seen) newer.push_back(e);
  if (newer.empty()) return NVML_ERROR_NOT_FOUND;
  *value_type = NVML_VALUE_TYPE_UNSIGNED_INT;
  if (samples == nullptr) {  // sizing call: how many the buffer could hold
    *count = static_cast<unsigned>(d->buffer.size());
    return NVML_SUCCESS;
  }
  const size_t n = std::min<size_t>(*count, newer.size());
  std::copy(newer.end() - static_cast<long>(n), newer.end(), samples);
  *count = static_cast<unsigned>(n);
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  FakeDevice* d = Get(device);
  if (!d || d->parent || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->mig) return NVML_ERROR_NOT_SUPPORTED;
  *count = 7;  // an H100/A100 has room for seven instances
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t* mig) {
  FakeDevice* d = Get(device);
  if (!d || d->parent || mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= d->instances.size()) return NVML_ERROR_NOT_FOUND;
  *mig = reinterpret_cast<nvmlDevice_t>(reinterpret_cast<uintptr_t>(device) | (static_cast<uintptr_t>(index) + 1) << 16);
  return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  FakeDevice* d = Get(device);
  if (!d || id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->parent) return NVML_ERROR_INVALID_ARGUMENT;  // only MIG device handles have one
  *id = d->gpu_instance;
  return NVML_SUCCESS;
}
