#include "src/markers/marker_ring.h"

#include "gputriage/markers.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace gputriage {
namespace {

uint64_t RoundUpPowerOfTwo(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

constexpr int64_t kAbandonAfterMs = 2000;  // a claimed slot unpublished this long: its writer died

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// Whether every core's TSC ticks at one constant rate, in step (the kernel's
/// constant_tsc and nonstop_tsc flags): then a raw TSC read can stand for time.
bool InvariantTsc() {
#if defined(__x86_64__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0)
      return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
#endif
  return false;
}

uint64_t ReadTsc() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

}  // namespace

StatusOr<std::unique_ptr<MarkerRing>> MarkerRing::Create(uint64_t capacity) {
  std::unique_ptr<MarkerRing> ring(new MarkerRing());
  ring->capacity_ = RoundUpPowerOfTwo(capacity < 64 ? 64 : capacity);
  ring->bytes_ = sizeof(MarkerRingHeader) + ring->capacity_ * sizeof(MarkerRecord);
  // A memfd has no name anyone can open: the job inherits the descriptor, and
  // otherwise only the same user (or root) reaches it through /proc/PID/fd.
  ring->fd_ = memfd_create("gputriage-markers", MFD_ALLOW_SEALING);
  if (ring->fd_ < 0) return IoError(std::string("step markers: memfd_create: ") + std::strerror(errno));
  if (ftruncate(ring->fd_, static_cast<off_t>(ring->bytes_)) != 0)
    return IoError(std::string("step markers: cannot size the ring: ") + std::strerror(errno));
  // The job holds the descriptor and could truncate the ring under every
  // reader's mapping (a SIGBUS in the recorder or the node's agent): sealed at
  // its size, it can be written, never shrunk or grown.
  if (fcntl(ring->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return IoError(std::string("step markers: cannot seal the ring: ") + std::strerror(errno));
  ring->base_ = mmap(nullptr, ring->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, ring->fd_, 0);
  if (ring->base_ == MAP_FAILED) {
    ring->base_ = nullptr;
    return IoError(std::string("step markers: mmap: ") + std::strerror(errno));
  }
  auto* header = new (ring->base_) MarkerRingHeader{};
  header->magic = kMarkerRingMagic;
  header->version = kMarkerRingVersion;
  header->record_size = sizeof(MarkerRecord);
  header->capacity = ring->capacity_;
  ring->clock_ = InvariantTsc() ? kClockTsc : kClockRealtime;
  header->clock = ring->clock_;
  ring->tsc0_ = ring->tsc1_ = ReadTsc();
  ring->ns0_ = ring->ns1_ = RealtimeNs();
  header->write_index.store(0, std::memory_order_release);
  return ring;
}

namespace {

/// Opens a ring named by a job's environment for reading without trusting the
/// name: a FIFO would block a plain open for ever, a device's open alone can
/// act (a watchdog starts counting), and a file the job may truncate under the
/// mapping would end the reader with SIGBUS. So the object is looked at first
/// through an O_PATH descriptor (no open of the object itself), must be a
/// regular file (a memfd is one), is reopened non-blocking through that same
/// descriptor (the same inode, whatever the path names by then), and must be
/// sealed against shrinking, as the recorder's rings are.
StatusOr<int> OpenSealedRing(const std::string& path) {
  const int probe = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (probe < 0) return IoError("step markers: " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(probe, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(probe);
    return InvalidArgumentError("step markers: " + path + " is not a regular file (a FIFO, device or socket is never opened)");
  }
  const std::string self = "/proc/self/fd/" + std::to_string(probe);
  const int fd = open(self.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  const int open_errno = errno;
  close(probe);
  if (fd < 0) return IoError("step markers: " + path + ": " + std::strerror(open_errno));
  struct stat again {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (fstat(fd, &again) != 0 || again.st_ino != st.st_ino || again.st_dev != st.st_dev || seals < 0 ||
      (seals & F_SEAL_SHRINK) == 0) {
    close(fd);
    return InvalidArgumentError("step markers: " + path +
                                " is not a sealed marker ring (its writer could shrink it under the reader)");
  }
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<MarkerRing>> MarkerRing::Attach(const std::string& path) {
  std::unique_ptr<MarkerRing> ring(new MarkerRing());
  ASSIGN_OR_RETURN(ring->fd_, OpenSealedRing(path));
  struct stat st {};
  if (fstat(ring->fd_, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(MarkerRingHeader)) ||
      st.st_size > (off_t{1} << 34))
    return DataLossError("step markers: " + path + " is not a marker ring (size)");
  ring->bytes_ = static_cast<size_t>(st.st_size);
  // Read-only: a second reader never writes the job's ring (Drain only loads).
  ring->base_ = mmap(nullptr, ring->bytes_, PROT_READ, MAP_SHARED, ring->fd_, 0);
  if (ring->base_ == MAP_FAILED) {
    ring->base_ = nullptr;
    return IoError("step markers: mmap " + path + ": " + std::strerror(errno));
  }
  const auto* header = static_cast<const MarkerRingHeader*>(ring->base_);
  if (!IsMarkerRingHeader(*header, ring->bytes_)) return DataLossError("step markers: " + path + " is not a marker ring");
  ring->capacity_ = header->capacity;
  ring->clock_ = header->clock;
  ring->tsc0_ = ring->tsc1_ = ReadTsc();
  ring->ns0_ = ring->ns1_ = RealtimeNs();
  ring->read_index_ = header->write_index.load(std::memory_order_acquire);
  return ring;
}

MarkerRing::~MarkerRing() {
  if (base_) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

void MarkerRing::Drain(std::vector<Marker>& out, bool final) {
  if (stats_.header_damaged) return;
  auto* header = static_cast<MarkerRingHeader*>(base_);
  // The header is the job's to write too: check it before using anything in it.
  if (!IsMarkerRingHeader(*header, bytes_) || header->capacity != capacity_ || header->clock != clock_) {
    stats_.header_damaged = true;
    return;
  }
  auto* records = reinterpret_cast<MarkerRecord*>(static_cast<char*>(base_) + sizeof(MarkerRingHeader));
  const uint64_t written = header->write_index.load(std::memory_order_acquire);
  if (written < read_index_ || written - read_index_ > (uint64_t{1} << 48)) {
    stats_.header_damaged = true;  // the index went backwards or jumped absurdly: garbage
    return;
  }
  if (written - read_index_ > capacity_) {  // the writers lapped the reader
    stats_.lost += static_cast<int64_t>(written - capacity_ - read_index_);
    read_index_ = written - capacity_;
  }
  const int64_t now_ms = MonotonicMs();
  if (clock_ == kClockTsc) {
    tsc1_ = ReadTsc();
    ns1_ = RealtimeNs();
  }
  for (; read_index_ < written; ++read_index_) {
    MarkerRecord& slot = records[read_index_ & (capacity_ - 1)];
    const uint64_t expected = read_index_ + 1;
    const uint64_t raw = slot.seq.load(std::memory_order_acquire);
    const uint64_t seq = raw & ~kMarkerBusy;
    if (seq > expected) {  // overwritten by a later lap (published or being written)
      ++stats_.lost;
      continue;
    }
    if (seq < expected || (raw & kMarkerBusy) != 0) {
      // Claimed, not yet published: wait for it, unless its writer is gone.
      if (pending_index_ != read_index_) {
        pending_index_ = read_index_;
        pending_since_ms_ = now_ms;
      }
      if (!final && now_ms - pending_since_ms_ < kAbandonAfterMs) return;
      ++stats_.abandoned;
      continue;
    }
    uint64_t words[7];
    for (int w = 0; w < 7; ++w) words[w] = slot.words[w].load(std::memory_order_relaxed);
    MarkerPayload copy;
    std::memcpy(&copy, words, sizeof(copy));
    std::atomic_thread_fence(std::memory_order_acquire);  // the payload loads stay before the re-check
    if (slot.seq.load(std::memory_order_relaxed) != expected) {  // a later lap wrote while we copied
      ++stats_.lost;
      continue;
    }
    const bool kind_ok = copy.kind >= static_cast<uint16_t>(MarkerKind::kStepBegin) &&
                         copy.kind <= static_cast<uint16_t>(kLastMarkerKind);
    // 0 for step markers; a memory marker's holds its device.
    const bool phase_ok = kind_ok && IsMemoryMarker(static_cast<MarkerKind>(copy.kind)) ? copy.phase <= kMaxMemoryMarkerDevice
                                                                                         : copy.phase <= kLastPhase;
    if (copy.checksum != MarkerChecksum(copy) || !kind_ok || !phase_ok) {
      ++stats_.corrupt;
      continue;
    }
    out.push_back(Marker{ToWallNs(copy.t_ns), copy.pid, copy.tid, static_cast<MarkerKind>(copy.kind), copy.phase, copy.step,
                         copy.samples, copy.tokens, copy.flops});
    ++stats_.read;
  }
}

TimeNs MarkerRing::ToWallNs(int64_t t) const {
  if (clock_ != kClockTsc) return t;
  // Ticks → ns from the two calibration pairs (exact at both, linear between).
  const double ticks = static_cast<double>(tsc1_ - tsc0_);
  const double ns_per_tick = ticks > 0 ? static_cast<double>(ns1_ - ns0_) / ticks : 0.0;
  return ns0_ + static_cast<TimeNs>((static_cast<double>(static_cast<uint64_t>(t) - tsc0_)) * ns_per_tick);
}

}  // namespace gputriage
