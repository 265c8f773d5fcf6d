// Samples every GPU through NVML into the canonical model: the same MetricSet
// and series the metric-log readers fill, so a live recording ends in the same
// analysis, verdicts and report as an nvidia-smi log.
#pragma once

#include <array>
#include <functional>
#include <utility>
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

  /// Lists each GPU's compute processes and their utilization since the last
  /// call, and attributes them: `is_job` says whether a pid is in the recorded
  /// job's process tree. Records job_sm_util, other_sm_util and job_fb_used, and marks
  /// GPUs the job used (MetricDevice::job_use). Call about once a second: the
  /// driver keeps per-process samples, so nothing is lost between calls.
  void SampleProcesses(TimeNs t, const std::function<bool(unsigned int pid)>& is_job, Recording& recording);
  /// Marks GPUs whose processes could be listed but never showed the job as not
  /// used by it (call when the job has ended).
  void FinishAttribution(Recording& recording);


  size_t devices() const { return devices_.size(); }
  int lost_devices() const;
  /// Whether the device at `metric_device` (its position in the recording) has
  /// fallen off the bus (or its physical GPU has).
  bool Lost(size_t metric_device) const;
  /// What fails on the device at `metric_device` now, one entry per NVML call:
  /// the call ("utilization") and the driver's answer in words. A call that
  /// is merely not supported is listed only when it is utilization on a whole
  /// GPU (verdicts and idle dollars rest on it); a call that succeeds again
  /// leaves the list.
  std::vector<std::pair<std::string, std::string>> Failures(size_t metric_device) const;
  /// The compute processes SampleProcesses last listed on the device at
  /// `metric_device` (empty before the first listing or when it failed).
  std::vector<unsigned int> ProcessIds(size_t metric_device) const;

 private:
  enum Call {
    kUtil, kMemory, kPower, kSmClock, kMemClock, kTemp, kReasons, kPcieRx, kPcieTx, kGpm,
    kUtilBuffer, kProcesses, kProcessUtil, kNumCalls
  };
  struct Gpu {
    nvmlDevice_t handle = nullptr;
    size_t metric_device = 0;  // position in recording.metrics.devices
    bool lost = false;
    bool mig_instance = false;  // a MIG device handle: memory, GPM and processes only
    int parent = -1;            // for an instance: the physical GPU's position in devices_
    nvmlDevice_t parent_handle = nullptr;  // for an instance: the physical GPU (GPM's MIG call takes it)
    unsigned int gpu_instance = 0;         // for an instance: its GPU instance id
    std::array<bool, kNumCalls> unsupported{};
    std::array<std::string, kNumCalls> failing;  // the last failure of each call, "" once it succeeds
    // The driver's high-rate utilization buffer: raw timestamps (µs, on the
    // driver's clock) map to wall time by one offset fixed at the first read.
    unsigned long long buffer_last_seen = 0;
    TimeNs buffer_offset_ns = 0;
    bool buffer_anchored = false;
    std::vector<nvmlSample_t> buffer;
    // Processes.
    unsigned long long process_util_last_seen = 0;
    bool processes_listed = false;  // a listing succeeded at least once
    bool job_seen = false;
    std::vector<nvmlProcessInfo_t> processes;
    std::vector<nvmlProcessUtilizationSample_t> process_util;
    // GPM: metrics are averages between two samples at least 100 ms apart.
    nvmlGpmSample_t gpm_previous = nullptr;
    nvmlGpmSample_t gpm_current = nullptr;
    TimeNs gpm_previous_t = 0;
  };
  void SampleGpm(Gpu& gpu, TimeNs t, Recording& recording);
  /// New samples from the driver's utilization buffer; false when it has none
  /// (it runs dry while the GPU idles) or is unsupported.
  bool SampleUtilBuffer(Gpu& gpu, TimeNs t, Recording& recording);
  void OpenMigInstances(size_t parent, Recording& recording);
  void SetUpGpm(Gpu& gpu, Recording& recording);
  /// One GPM sample: through nvmlGpmMigSampleGet(physical GPU, instance id) for a
  /// MIG instance where the library has it (NVML's call for per-instance GPM), else
  /// nvmlGpmSampleGet on the device's own handle.
  nvmlReturn_t GpmSample(const Gpu& gpu, nvmlGpmSample_t sample) const;
  bool ListProcesses(Gpu& gpu, Recording& recording);
  /// Lost, or a MIG instance of a lost GPU: not sampled any more.
  bool Gone(const Gpu& gpu) const;
  explicit NvmlSampler(const NvmlLibrary& nvml) : nvml_(&nvml) {}
  /// True when the value is usable; handles and counts every other outcome.
  bool Check(nvmlReturn_t rc, Gpu& gpu, Call call, Recording& recording);


  const NvmlLibrary* nvml_;
  std::vector<Gpu> devices_;
};

}  // namespace gputriage
