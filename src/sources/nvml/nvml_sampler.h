// Samples every GPU through NVML into the canonical model: the same MetricSet
// and series the metric-log readers fill, so a live recording ends in the same
// analysis, verdicts and report as an nvidia-smi log.
#pragma once

#include <array>
#include <functional>
#include <vector>

#include "gputriage/model.h"
#include "gputriage/status.h"
#include "src/sources/nvml/nvml_library.h"

namespace gputriage {

class NvmlSampler {
 public:
  /// Enumerates the GPUs and records their facts (name, uuid, bus id, power
  /// limit, max SM clock, memory, MIG mode, driver) in `recording`.
  static StatusOr<NvmlSampler> Open(const NvmlLibrary& nvml, Recording& recording);
  ~NvmlSampler();  // frees GPM samples
  NvmlSampler(NvmlSampler&& other) noexcept;
  NvmlSampler& operator=(NvmlSampler&&) = delete;
  NvmlSampler(const NvmlSampler&) = delete;

  /// One sample of every GPU at time `t`. A metric the device does not support is
  /// recorded as missing from then on (one `nvml_not_supported` issue naming it);
  /// a GPU that falls off the bus is marked lost (`gpu_lost`, error) and skipped;
  /// other failures are counted per call. Never fails as a whole.
  void Sample(TimeNs t, Recording& recording);

  /// Also hands every sample to `sink` (the run store), after the recording has it.
  using Sink = std::function<void(size_t device, Metric metric, TimeNs t, double value)>;
  void set_sink(Sink sink) { sink_ = std::move(sink); }

  size_t devices() const { return devices_.size(); }
  int lost_devices() const;

 private:
  enum Call { kUtil, kMemory, kPower, kSmClock, kMemClock, kTemp, kReasons, kPcieRx, kPcieTx, kGpm, kNumCalls };
  struct Gpu {
    nvmlDevice_t handle = nullptr;
    size_t metric_device = 0;  // position in recording.metrics.devices
    bool lost = false;
    std::array<bool, kNumCalls> unsupported{};
    // GPM: metrics are averages between two samples at least 100 ms apart.
    nvmlGpmSample_t gpm_previous = nullptr;
    nvmlGpmSample_t gpm_current = nullptr;
    TimeNs gpm_previous_t = 0;
  };
  void SampleGpm(Gpu& gpu, TimeNs t, Recording& recording);
  explicit NvmlSampler(const NvmlLibrary& nvml) : nvml_(&nvml) {}
  /// True when the value is usable; handles and counts every other outcome.
  bool Check(nvmlReturn_t rc, Gpu& gpu, Call call, Recording& recording);

  const NvmlLibrary* nvml_;
  std::vector<Gpu> devices_;
  Sink sink_;
};

}  // namespace gputriage
