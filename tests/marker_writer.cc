// A stand-in training process for the recorder's step-marker tests: writes
// steps (with a data phase) through the C ABI, then optionally misbehaves.
//
//   marker_writer STEPS [normal|garbage|crash] [DATA_MS COMPUTE_MS]
//     each step: DATA_MS asleep in the data phase (default 2), then COMPUTE_MS busy (default 0)
//     garbage: after the steps, scribbles over some published records
//     crash:   begins one more step and dies by SIGKILL inside it
//     closed-fd: first closes the inherited ring descriptor and puts /dev/null
//                under its number (what a launcher that closes descriptors leaves)
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
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
  const timespec pause{static_cast<time_t>(data_ms / 1000), static_cast<long>(std::fmod(data_ms, 1000.0) * 1e6)};
  auto now_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  };
  for (int i = 0; i < steps; ++i) {
    gputriage_step_begin(i);
    gputriage_phase_begin(GPUTRIAGE_PHASE_DATA);
    nanosleep(&pause, nullptr);
    gputriage_phase_end(GPUTRIAGE_PHASE_DATA);
    for (const double until = now_ms() + compute_ms; now_ms() < until;) {
    }
    gputriage_step_end(i, 32, 0, 0);
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
