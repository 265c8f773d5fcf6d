// The writer side of the step markers (include/gputriage/markers.h): attaches
// to the ring named by $GPUTRIAGE_MARKERS_FD on first use; without one every
// call returns after one relaxed load.
#include "gputriage/markers.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "src/markers/marker_ring.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace gputriage {
namespace {

struct Attached {
  MarkerRingHeader* header = nullptr;
  MarkerRecord* records = nullptr;
  uint64_t mask = 0;
  bool tsc = false;  // the recorder asked for raw TSC ticks instead of the clock
};

enum State : int { kUnknown = 0, kAttached = 1, kNone = 2 };
std::atomic<int> g_state{kUnknown};
Attached g_ring;
std::mutex g_attach_mutex;
std::atomic<uint32_t> g_fork_generation{0};  // a fork makes every cached pid/tid stale

struct ThreadIds {
  uint32_t generation = ~0u;
  uint32_t pid = 0;
  uint32_t tid = 0;
};
thread_local ThreadIds t_ids;

void AfterForkInChild() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

/// Maps `fd` if it holds a ring; a descriptor that is something else (the
/// number reused after a launcher closed ours) is left alone.
Attached MapRing(int fd) {
  Attached a;
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(MarkerRingHeader))) return a;
  void* base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return a;
  auto* header = static_cast<MarkerRingHeader*>(base);
  if (!IsMarkerRingHeader(*header, static_cast<uint64_t>(st.st_size))) {
    munmap(base, static_cast<size_t>(st.st_size));
    return a;
  }
  a.header = header;
  a.records = reinterpret_cast<MarkerRecord*>(static_cast<char*>(base) + sizeof(MarkerRingHeader));
  a.mask = header->capacity - 1;
#if defined(__x86_64__)
  a.tsc = header->clock == kClockTsc;
#endif
  return a;
}

/// Attaches to the recorder's ring: the inherited descriptor in
/// $GPUTRIAGE_MARKERS_FD when it is still the ring, else the ring reopened
/// through $GPUTRIAGE_MARKERS_PATH (/proc/RECORDER/fd/N), which reaches
/// processes whose launcher closed inherited descriptors (Python's subprocess,
/// torchrun). The kernel lets only the recorder's user (or root) open it.
Attached Attach() {
  const char* fd_env = std::getenv(kMarkersFdEnv);
  const char* path = std::getenv(kMarkersPathEnv);
  struct stat ring_st {};
  const bool path_known = path != nullptr && *path != '\0' && stat(path, &ring_st) == 0;
  if (fd_env != nullptr && *fd_env != '\0') {
    char* end = nullptr;
    const long fd = std::strtol(fd_env, &end, 10);
    struct stat st {};
    if (end != fd_env && *end == '\0' && fd >= 0 && fd < (1 << 20) && fstat(static_cast<int>(fd), &st) == 0 &&
        (!path_known || (st.st_dev == ring_st.st_dev && st.st_ino == ring_st.st_ino))) {
      Attached a = MapRing(static_cast<int>(fd));
      if (a.header != nullptr) return a;
    }
  }
  if (!path_known) return Attached{};
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return Attached{};
  Attached a = MapRing(fd);
  close(fd);  // the mapping keeps the ring
  return a;
}

bool Ready() {
  const int state = g_state.load(std::memory_order_acquire);
  if (state == kAttached) return true;
  if (state == kNone) return false;
  std::lock_guard<std::mutex> lock(g_attach_mutex);
  if (g_state.load(std::memory_order_relaxed) == kUnknown) {
    static std::once_flag fork_handler;
    std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, AfterForkInChild); });
    g_ring = Attach();
    g_state.store(g_ring.header ? kAttached : kNone, std::memory_order_release);
  }
  return g_state.load(std::memory_order_relaxed) == kAttached;
}

int64_t ClockNow() {
  int64_t t = 0;
#if defined(__x86_64__)
  if (g_ring.tsc) t = static_cast<int64_t>(__rdtsc());
#endif
  if (!g_ring.tsc) {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    t = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
  return t;
}

// `at`: the marker's clock reading, or -1 for now.
void Emit(MarkerKind kind, uint16_t phase, int64_t step, int64_t samples, int64_t tokens, double flops,
          int64_t at = -1) {
  if (!Ready()) return;
  const uint32_t generation = g_fork_generation.load(std::memory_order_relaxed);
  if (t_ids.generation != generation) {  // first marker of this thread, or first after a fork
    t_ids.pid = static_cast<uint32_t>(getpid());
    t_ids.tid = static_cast<uint32_t>(syscall(SYS_gettid));
    t_ids.generation = generation;
  }
  const int64_t now = ClockNow();
  const int64_t t = at >= 0 && at < now ? at : now;
  const uint64_t index = g_ring.header->write_index.fetch_add(1, std::memory_order_relaxed);
  MarkerPayload p;
  p.t_ns = t;
  p.pid = t_ids.pid;
  p.tid = t_ids.tid;
  p.kind = static_cast<uint16_t>(kind);
  p.phase = phase;
  p.checksum = 0;
  p.step = step;
  p.samples = samples;
  p.tokens = tokens;
  p.flops = flops;
  p.checksum = MarkerChecksum(p);
  uint64_t words[7];
  std::memcpy(words, &p, sizeof(words));
  MarkerRecord& slot = g_ring.records[index & g_ring.mask];
  // Claim the slot visibly before touching its words, so a reader still on an
  // older lap of it sees the change instead of a mix of two records.
  slot.seq.store((index + 1) | kMarkerBusy, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int w = 0; w < 7; ++w) slot.words[w].store(words[w], std::memory_order_relaxed);
  slot.seq.store(index + 1, std::memory_order_release);  // published: the reader may take it
}

}  // namespace

void ResetMarkersForTesting() {
  std::lock_guard<std::mutex> lock(g_attach_mutex);
  g_state.store(kUnknown, std::memory_order_release);
}

}  // namespace gputriage

extern "C" {

int gputriage_markers_enabled(void) { return gputriage::Ready() ? 1 : 0; }

void gputriage_step_begin(int64_t step) { gputriage::Emit(gputriage::MarkerKind::kStepBegin, 0, step, 0, 0, 0); }

void gputriage_step_begin_at(int64_t step, int64_t t) {
  gputriage::Emit(gputriage::MarkerKind::kStepBegin, 0, step, 0, 0, 0, t);
}

void gputriage_step_end(int64_t step, int64_t samples, int64_t tokens, double flops) {
  gputriage::Emit(gputriage::MarkerKind::kStepEnd, 0, step, samples, tokens, flops);
}

void gputriage_step_device_time(int64_t step, int64_t device_ns) {
  gputriage::Emit(gputriage::MarkerKind::kStepDeviceTime, 0, step, device_ns, 0, 0);
}

void gputriage_phase_device_time(int64_t step, gputriage_phase phase, int64_t device_ns) {
  gputriage::Emit(gputriage::MarkerKind::kPhaseDeviceTime, static_cast<uint16_t>(phase), step, device_ns, 0, 0);
}

void gputriage_phase_begin(gputriage_phase phase) {
  gputriage::Emit(gputriage::MarkerKind::kPhaseBegin, static_cast<uint16_t>(phase), 0, 0, 0, 0);
}

void gputriage_phase_end(gputriage_phase phase) {
  gputriage::Emit(gputriage::MarkerKind::kPhaseEnd, static_cast<uint16_t>(phase), 0, 0, 0, 0);
}

int64_t gputriage_markers_clock(void) {
  gputriage::Ready();  // the ring decides the clock
  return gputriage::ClockNow();
}

void gputriage_phase_switch_at(gputriage_phase from, gputriage_phase to, int64_t t) {
  gputriage::Emit(gputriage::MarkerKind::kPhaseEnd, static_cast<uint16_t>(from), 0, 0, 0, 0, t);
  gputriage::Emit(gputriage::MarkerKind::kPhaseBegin, static_cast<uint16_t>(to), 0, 0, 0, 0, t);
}

void gputriage_step_memory(int64_t step, int32_t device, int64_t current_bytes, int64_t peak_bytes,
                           int64_t reserved_bytes) {
  if (device < GPUTRIAGE_HOST_MEMORY || device > GPUTRIAGE_MAX_MEMORY_DEVICE) return;
  gputriage::Emit(gputriage::MarkerKind::kStepMemory, static_cast<uint16_t>(device + 1), step, current_bytes, peak_bytes,
                  static_cast<double>(reserved_bytes));
}

void gputriage_step_memory_events(int64_t step, int32_t device, int64_t alloc_retries, int64_t ooms) {
  if (device < 0 || device > GPUTRIAGE_MAX_MEMORY_DEVICE) return;
  gputriage::Emit(gputriage::MarkerKind::kStepMemoryEvents, static_cast<uint16_t>(device + 1), step, alloc_retries, ooms,
                  0);
}

}  // extern "C"
