// What-if replay of a trace: the recorded host and device timelines are played
// again with one thing changed (the data wait removed, matrix kernels faster, host
// work slower), keeping every dependency the trace shows: a kernel cannot start
// before its launch call nor before the previous work on its stream ends, and a
// blocking call (synchronize, a pageable copy) holds the host until the device work
// it waits for is done. Removing one bottleneck thus exposes the next one, which is
// what a fixed run measures. See replay.cc for the rules and docs/verdicts.md.
//
// A replay is one pass over the operations in launch order, holding only what is
// in flight: a trace of any length replays in bounded memory.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "gputriage/model.h"
#include "src/analysis/analysis_internal.h"

namespace gputriage::analysis {

/// What a replay may scale a kernel by: bits of what the kernel is.
enum ReplayKernelBits : uint8_t {
  kReplayKernel = 1,           // a kernel (not a copy or memset)
  kReplayMatrixFp32Simt = 2,   // matrix class, fp32 on SIMT cores
  kReplayMatrixTf32 = 4,       // matrix class, tf32
  kReplayAttentionPart = 8,    // softmax or batched GEMM (unfused attention)
  kReplayMemoryBound = 16,     // a bytes-bound class
  kReplayMisalignedMatrix = 32,  // matrix class, its operator off the tensor-core tile
};
constexpr int kReplayKernelKinds = 64;

/// The bits of a kernel of `kind` (`misaligned`: its operator is off-tile).
uint8_t ReplayBitsOf(const KernelKind& kind, bool misaligned);

struct ReplayChange {
  bool remove_data_wait = false;  // DataLoader spans on the host take no time
  double host_stretch = 1.0;      // host work (not its waits) takes this many times as long
  /// The factor a kernel's duration is multiplied by, by its ReplayKernelBits.
  std::array<float, kReplayKernelKinds> kernel_scale;
  ReplayChange() { kernel_scale.fill(1.0f); }
};

struct ReplayResult {
  bool valid = false;
  int steps = 0;
  double step_ms = 0;          // mean device-aligned step, as AlignSteps measures the recorded one
  double gpu_busy_ms = 0;      // per step: union of device work inside the steps
};

/// A trace prepared for replays: its device operations with their launches and
/// recorded delays, its blocking calls and data waits, in the order a replay walks
/// them (in memory or scratch files, as the trace's events are).
class TraceReplay {
 public:
  /// `misaligned`: the kernels whose operator is off-tile (joins.h), by index.
  static StatusOr<std::unique_ptr<TraceReplay>> Prepare(const TracePrep& prep, const StepWindows& steps,
                                                        const SortedSpill<ShapeJoin::Misaligned, BySeq>& misaligned);
  /// Replays with `change` over the steps AlignSteps kept.
  StatusOr<ReplayResult> Run(const ReplayChange& change) const;
  /// Threads a caller may run replays on at once (Run is const and thread-safe).
  int threads() const { return threads_; }
  /// How many kernels carry each ReplayKernelBits value.
  const std::array<int64_t, kReplayKernelKinds>& kernels_by_bits() const { return kernels_by_bits_; }

  struct Op {
    Interval time;      // recorded
    TimeNs launch = 0;  // recorded start of the launch call (op start when unknown)
    TimeNs delay = 0;   // recorded launch latency or queueing (see replay.cc)
    int32_t stream = 0;   // dense stream number
    int32_t step = -1;    // the host step its launch lies in, -1 if none or unknown
    uint8_t bits = 0;     // ReplayKernelBits
  };
  struct ByLaunch {
    bool operator()(const Op& a, const Op& b) const { return a.launch < b.launch; }
  };
  struct HostItem {
    Interval time;
    bool data_wait = false;  // else a blocking call
  };

 private:
  explicit TraceReplay(const SpillOptions& spill) : ops_(spill), items_(spill) {}

  SortedSpill<Op, ByLaunch> ops_;               // in launch order (device order among equal launches)
  SortedSpill<HostItem, InAddedOrder> items_;   // in recorded start order
  std::vector<Interval> host_steps_;
  int streams_ = 0;
  int threads_ = 1;
  TimeNs origin_ = 0;
  std::array<int64_t, kReplayKernelKinds> kernels_by_bits_{};
};

}  // namespace gputriage::analysis
