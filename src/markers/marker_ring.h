// The shared-memory ring behind include/gputriage/markers.h. The recorder
// creates it (a memfd, so only processes that inherit the descriptor, or the
// same user through /proc, can open it), passes it to the job in
// $GPUTRIAGE_MARKERS_FD, and reads it while the job runs. Writers in any thread
// or process claim a slot with one atomic add and publish it by storing its
// sequence number last; the reader trusts nothing it finds: every record is
// checked (sequence, checksum, kind) before it is used.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

inline constexpr const char* kMarkersFdEnv = "GPUTRIAGE_MARKERS_FD";
// /proc/RECORDER_PID/fd/N: the ring for a process that did not inherit the descriptor.
inline constexpr const char* kMarkersPathEnv = "GPUTRIAGE_MARKERS_PATH";

// kStepDeviceTime carries the step's device time (ns) in `samples`;
// kPhaseDeviceTime a phase's of that step (`phase`, `step`, ns in `samples`).
// kStepMemory: a step's memory at its end, `phase` = device + 1 (0: the host),
// current bytes in `samples`, peak in `tokens`, reserved in `flops`;
// kStepMemoryEvents: `phase` as kStepMemory, allocator retries in `samples`,
// out-of-memory errors in `tokens` (both since the process started).
enum class MarkerKind : uint16_t {
  kStepBegin = 1,
  kStepEnd = 2,
  kPhaseBegin = 3,
  kPhaseEnd = 4,
  kStepDeviceTime = 5,
  kPhaseDeviceTime = 6,
  kStepMemory = 7,
  kStepMemoryEvents = 8,
};
inline constexpr MarkerKind kLastMarkerKind = MarkerKind::kStepMemoryEvents;
/// The `phase` field of a memory marker: the device + 1, 0 for the host.
inline bool IsMemoryMarker(MarkerKind k) { return k == MarkerKind::kStepMemory || k == MarkerKind::kStepMemoryEvents; }
inline constexpr uint16_t kMaxMemoryMarkerDevice = 1024;  // GPUTRIAGE_MAX_MEMORY_DEVICE + 1

/// One marker's content, 56 bytes.
struct MarkerPayload {
  int64_t t_ns;  // CLOCK_REALTIME ns, or raw TSC ticks (MarkerRingHeader::clock)
  uint32_t pid;
  uint32_t tid;
  uint16_t kind;
  uint16_t phase;
  uint32_t checksum;  // over the rest of the payload: garbage is told from a record
  int64_t step;
  int64_t samples;
  int64_t tokens;
  double flops;
};
static_assert(sizeof(MarkerPayload) == 56);

/// A ring slot: 64 bytes, one cache line. Every access is atomic (the payload
/// as relaxed words, published by the release store of seq), so a reader that
/// meets a writer mid-slot reads a torn record, which seq and the checksum
/// catch, and never undefined behaviour.
struct MarkerRecord {
  std::atomic<uint64_t> seq;  // slot index + 1 once published; with kMarkerBusy while being written
  std::atomic<uint64_t> words[7];
};
static_assert(sizeof(MarkerRecord) == 64);

struct MarkerRingHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t record_size;
  uint64_t capacity;  // records, a power of two
  uint32_t clock;     // what writers put in t_ns: kClockRealtime (ns) or kClockTsc (raw x86 TSC ticks)
  uint32_t reserved0;
  uint64_t reserved[4];
  alignas(64) std::atomic<uint64_t> write_index;  // next slot a writer claims
};
static_assert(sizeof(MarkerRingHeader) == 128);

inline constexpr uint64_t kMarkerRingMagic = 0x314B52414D545047ULL;  // "GPTMARK1"
inline constexpr uint32_t kMarkerRingVersion = 1;
inline constexpr uint64_t kMarkerBusy = uint64_t{1} << 63;  // seq flag: a writer is filling the slot
inline constexpr uint32_t kClockRealtime = 0;
inline constexpr uint32_t kClockTsc = 1;  // an invariant TSC: a few ns to read instead of ~25 for the clock

/// Whether `h` heads a version-1 ring of `bytes` bytes in all. Writers check
/// a file they map; the reader re-checks its own ring, whose header the job
/// can scribble over as well.
inline bool IsMarkerRingHeader(const MarkerRingHeader& h, uint64_t bytes) {
  const uint64_t cap = h.capacity;
  return bytes >= sizeof(MarkerRingHeader) && h.magic == kMarkerRingMagic && h.version == kMarkerRingVersion &&
         h.record_size == sizeof(MarkerRecord) && cap != 0 && (cap & (cap - 1)) == 0 &&
         (h.clock == kClockRealtime || h.clock == kClockTsc) &&
         cap <= (bytes - sizeof(MarkerRingHeader)) / sizeof(MarkerRecord) &&  // no overflow below
         bytes == sizeof(MarkerRingHeader) + cap * sizeof(MarkerRecord);
}

/// Checksum of a payload (every field but the checksum itself); inline, as
/// every marker computes it.
inline uint32_t MarkerChecksum(const MarkerPayload& p) {
  // Mixes the payload's seven 64-bit words (the checksum field read as zero):
  // a few cycles per marker, and a stray write changes it with near certainty.
  uint64_t words[7];
  static_assert(sizeof(words) == sizeof(MarkerPayload));
  std::memcpy(words, &p, sizeof(words));
  words[2] &= 0x00000000FFFFFFFFULL;  // kind and phase stay; the checksum (upper half) does not count
  // Independent multiplies (they pipeline; a chained hash costs twice as much
  // on every marker), then one mixing round.
  constexpr uint64_t kOdd[7] = {0x9E3779B97F4A7C15ULL, 0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL,
                                0xD6E8FEB86659FD93ULL, 0xFF51AFD7ED558CCDULL, 0xC4CEB9FE1A85EC53ULL,
                                0x94D049BB133111EBULL};
  uint64_t h = 0;
  for (int i = 0; i < 7; ++i) h += (words[i] ^ static_cast<uint64_t>(i)) * kOdd[i];
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 29;
  return static_cast<uint32_t>(h ^ (h >> 32));
}


/// A marker as the reader hands it out (validated).
struct Marker {
  TimeNs t_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  MarkerKind kind = MarkerKind::kStepBegin;
  uint16_t phase = 0;
  int64_t step = 0;
  int64_t samples = 0;
  int64_t tokens = 0;
  double flops = 0;
};

/// The recorder's side: creates the ring and drains it.
class MarkerRing {
 public:
  /// A ring of `capacity` records (rounded up to a power of two).
  static StatusOr<std::unique_ptr<MarkerRing>> Create(uint64_t capacity = 1 << 16);
  /// A second reader of a ring someone else created (the node agent reading a
  /// job's ring through /proc/PID/fd/N): mapped read-only, read from the
  /// markers published after this call. The path is the job's to choose: it
  /// is never opened unless it is a regular file, never blocks (a FIFO), and
  /// must be sealed against shrinking (Create's rings are). Errors: the path
  /// cannot be opened, is not such a file, or does not hold a ring.
  static StatusOr<std::unique_ptr<MarkerRing>> Attach(const std::string& path);
  ~MarkerRing();
  MarkerRing(const MarkerRing&) = delete;
  MarkerRing& operator=(const MarkerRing&) = delete;

  /// The descriptor the job inherits (its number goes in $GPUTRIAGE_MARKERS_FD).
  int fd() const { return fd_; }

  struct DrainStats {
    int64_t read = 0;       // valid markers handed out, in total
    int64_t lost = 0;       // overwritten before they were read (the ring was full)
    int64_t corrupt = 0;    // slots whose content failed the checks
    int64_t abandoned = 0;  // slots claimed but never published (a writer died mid-marker)
    bool header_damaged = false;
  };
  /// Appends every marker published since the last call to `out`. A slot
  /// claimed but not yet published is waited for until `final` (the job has
  /// ended), then counted as abandoned.
  void Drain(std::vector<Marker>& out, bool final = false);
  const DrainStats& stats() const { return stats_; }

 private:
  MarkerRing() = default;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint64_t capacity_ = 0;
  uint64_t read_index_ = 0;
  uint64_t pending_index_ = ~0ULL;  // the unpublished slot being waited for
  // TSC → wall clock: two (tsc, realtime) pairs, the first taken at creation,
  // the second refreshed at every drain; markers are placed on the line between.
  uint32_t clock_ = kClockRealtime;
  uint64_t tsc0_ = 0, tsc1_ = 0;
  int64_t ns0_ = 0, ns1_ = 0;
  TimeNs ToWallNs(int64_t t) const;
  int64_t pending_since_ms_ = 0;
  DrainStats stats_;
};

/// For tests and the writer library: attaches this process to the ring given
/// by $GPUTRIAGE_MARKERS_FD again (after the variable changed).
void ResetMarkersForTesting();

}  // namespace gputriage
