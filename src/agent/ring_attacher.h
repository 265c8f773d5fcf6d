// Opens jobs' step-marker rings for the agent on a thread of its own. The ring's
// path comes from the job's environment, and opening anything a job names can
// take unbounded time (a file on a hung network filesystem; before
// MarkerRing::Attach looked first, a FIFO without a writer). The sampling thread
// only asks and later collects: a stuck open delays that one job's markers, never
// a tick, /healthz or the agent's exit.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "src/markers/marker_ring.h"

namespace gputriage {

class RingAttacher {
 public:
  explicit RingAttacher(std::string proc_root);
  /// Returns at once, even while the thread is inside an open that never ends
  /// (the thread is detached and ends with the process).
  ~RingAttacher();
  RingAttacher(const RingAttacher&) = delete;
  RingAttacher& operator=(const RingAttacher&) = delete;

  /// Looks for the ring of the first of `pids` that has one, for the job
  /// `job_key` on GPU `gpu`; replaces a request for that GPU not yet started.
  void Request(size_t gpu, std::string job_key, std::vector<unsigned int> pids);

  struct Found {
    size_t gpu = 0;
    std::string job_key;
    std::string path;
    std::unique_ptr<MarkerRing> ring;
  };
  /// The rings opened since the last call.
  std::vector<Found> Take();

 private:
  struct Shared;
  static void Loop(const std::shared_ptr<Shared>& shared);
  std::shared_ptr<Shared> shared_;
};

/// The marker ring a process writes to, from its environment: its inherited
/// descriptor ($GPUTRIAGE_MARKERS_FD, reached as /proc/PID/fd/N), else the
/// path it was given ($GPUTRIAGE_MARKERS_PATH). "" when it has none.
std::string MarkerRingPath(unsigned int pid, const std::string& proc_root);

}  // namespace gputriage
