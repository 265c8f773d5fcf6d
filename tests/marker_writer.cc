// A stand-in training process for the recorder's step-marker tests: writes
// steps (with a data phase) through the C ABI, then optionally misbehaves.
//
//   marker_writer STEPS [normal|garbage|crash] [DATA_MS COMPUTE_MS [COPY_MS]]
//     each step: DATA_MS asleep in the data phase (default 2), then COPY_MS asleep in
//     the copy phase (default 0: none), then COMPUTE_MS busy (default 0)
//     garbage: after the steps, scribbles over some published records
//     crash:   begins one more step and dies by SIGKILL inside it
//     closed-fd: first closes the inherited ring descriptor and puts /dev/null
//                under its number (what a launcher that closes descriptors leaves)
//     leak:      after each step, GPU 0's allocator as a C++ job would report it
//                (gputriage_step_memory): 10 GiB + 32 MiB more every step
//     ledger:    every 20 steps a checkpoint phase of DATA_MS*10 ms and an eval
//                phase of DATA_MS*20 ms (both asleep), between steps; its own
//                timers (ms: data, compute, checkpoint, eval, and the cycles
//                done) rewritten after each cycle to $MARKER_WRITER_TIMERS
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gputriage/markers.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int steps = std::atoi(argv[1]);
  const std::string mode = argc > 2 ? argv[2] : "normal";
  if (mode == "closed-fd") {
    const char* fd_env = std::getenv("GPUTRIAGE_MARKERS_FD");
    if (fd_env == nullptr) return 5;
    const int fd = std::atoi(fd_env);
    const int null_fd = open("/dev/null", O_RDWR);
    if (null_fd < 0 || dup2(null_fd, fd) != fd) return 6;
    close(null_fd);
  }
  if (!gputriage_markers_enabled()) return 3;  // the recorder's ring must reach us
  const double data_ms = argc > 3 ? std::atof(argv[3]) : 2.0;
  const double compute_ms = argc > 4 ? std::atof(argv[4]) : 0.0;
  const double copy_ms = argc > 5 ? std::atof(argv[5]) : 0.0;
  const timespec pause{static_cast<time_t>(data_ms / 1000), static_cast<long>(std::fmod(data_ms, 1000.0) * 1e6)};
  auto now_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  };
  double timers[4] = {0, 0, 0, 0};  // data, compute, checkpoint, eval (ms)
  auto asleep = [&](double ms) {
    const timespec p{static_cast<time_t>(ms / 1000), static_cast<long>(std::fmod(ms, 1000.0) * 1e6)};
    nanosleep(&p, nullptr);
  };
  for (int i = 0; i < steps; ++i) {
    gputriage_step_begin(i);
    double t0 = now_ms();
    gputriage_phase_begin(GPUTRIAGE_PHASE_DATA);
    if (data_ms > 0) nanosleep(&pause, nullptr);  // 0: a batch already there
    gputriage_phase_end(GPUTRIAGE_PHASE_DATA);
    double t1 = now_ms();
    if (copy_ms > 0) {
      gputriage_phase_begin(GPUTRIAGE_PHASE_COPY);
      asleep(copy_ms);
      gputriage_phase_end(GPUTRIAGE_PHASE_COPY);
    }
    for (const double until = now_ms() + compute_ms; now_ms() < until;) {
    }
    gputriage_step_end(i, 32, 0, 0);
    if (mode == "leak") {
      const int64_t allocated = (int64_t{10} << 30) + int64_t{i} * (int64_t{32} << 20);
      gputriage_step_memory(i, 0, allocated, allocated + (int64_t{2} << 30), allocated + (int64_t{4} << 30));
      gputriage_step_memory_events(i, 0, 0, 0);
    }
    timers[0] += t1 - t0;
    timers[1] += now_ms() - t1;
    if (mode == "ledger" && i % 20 == 19) {
      t0 = now_ms();
      gputriage_phase_begin(GPUTRIAGE_PHASE_CHECKPOINT);
      asleep(data_ms * 10);
      gputriage_phase_end(GPUTRIAGE_PHASE_CHECKPOINT);
      t1 = now_ms();
      gputriage_phase_begin(GPUTRIAGE_PHASE_EVAL);
      asleep(data_ms * 20);
      gputriage_phase_end(GPUTRIAGE_PHASE_EVAL);
      timers[2] += t1 - t0;
      timers[3] += now_ms() - t1;
      if (const char* path = std::getenv("MARKER_WRITER_TIMERS")) {
        const std::string tmp = std::string(path) + ".tmp";
        if (FILE* f = std::fopen(tmp.c_str(), "w")) {
          std::fprintf(f, "%.3f %.3f %.3f %.3f %d\n", timers[0], timers[1], timers[2], timers[3], (i + 1) / 20);
          std::fclose(f);
          std::rename(tmp.c_str(), path);
        }
      }
    }
  }
  if (mode == "garbage") {
    const int fd = std::atoi(std::getenv("GPUTRIAGE_MARKERS_FD"));
    struct stat st {};
    fstat(fd, &st);
    void* base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return 4;
    // The payload of records 8..11 (after the 128-byte header; their seq words stay).
    for (int r = 8; r < 12; ++r) std::memset(static_cast<char*>(base) + 128 + r * 64 + 8, 0x5A, 56);
  } else if (mode == "crash") {
    gputriage_step_begin(steps);
    kill(getpid(), SIGKILL);
  }
  return 0;
}
