#include "src/agent/ring_attacher.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "src/util/strings.h"

namespace gputriage {

struct RingAttacher::Shared {
  struct Request {
    size_t gpu = 0;
    std::string job_key;
    std::vector<unsigned int> pids;
  };
  std::string proc_root;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Request> requests;  // at most one per GPU
  std::vector<Found> found;
  bool stop = false;
  bool thread_started = false;
};

RingAttacher::RingAttacher(std::string proc_root) : shared_(std::make_shared<Shared>()) {
  shared_->proc_root = std::move(proc_root);
}

RingAttacher::~RingAttacher() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stop = true;
  }
  shared_->wake.notify_all();
}

void RingAttacher::Request(size_t gpu, std::string job_key, std::vector<unsigned int> pids) {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    bool replaced = false;
    for (auto& r : shared_->requests)
      if (r.gpu == gpu) {
        r.job_key = job_key;
        r.pids = pids;
        replaced = true;
      }
    if (!replaced) shared_->requests.push_back({gpu, std::move(job_key), std::move(pids)});
    if (!shared_->thread_started) {
      // Started on the first request: an agent whose jobs write no markers
      // never has the thread. Detached: nothing ever waits for an open to end.
      shared_->thread_started = true;
      std::thread([shared = shared_] { Loop(shared); }).detach();
    }
  }
  shared_->wake.notify_one();
}

std::vector<RingAttacher::Found> RingAttacher::Take() {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  std::vector<Found> out;
  out.swap(shared_->found);
  return out;
}

std::string MarkerRingPath(unsigned int pid, const std::string& proc_root) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  std::ifstream in(dir + "/environ", std::ios::binary);
  std::string fd, path, entry;
  while (std::getline(in, entry, '\0')) {
    if (StartsWith(entry, std::string(kMarkersFdEnv) + "=")) fd = entry.substr(std::strlen(kMarkersFdEnv) + 1);
    else if (StartsWith(entry, std::string(kMarkersPathEnv) + "=")) path = entry.substr(std::strlen(kMarkersPathEnv) + 1);
  }
  if (!fd.empty() && fd.find_first_not_of("0123456789") == std::string::npos && fd.size() < 8) return dir + "/fd/" + fd;
  return path;
}

void RingAttacher::Loop(const std::shared_ptr<Shared>& shared) {
  std::unique_lock<std::mutex> lock(shared->mutex);
  while (true) {
    shared->wake.wait(lock, [&] { return shared->stop || !shared->requests.empty(); });
    if (shared->stop) return;
    Shared::Request request = std::move(shared->requests.front());
    shared->requests.pop_front();
    lock.unlock();
    Found found;
    for (unsigned int pid : request.pids) {
      const std::string path = MarkerRingPath(pid, shared->proc_root);
      if (path.empty()) continue;
      auto ring = MarkerRing::Attach(path);
      if (!ring.ok()) continue;  // not a ring, not ours to read (another user), or gone
      found = {request.gpu, request.job_key, path, std::move(*ring)};
      break;
    }
    lock.lock();
    if (found.ring) shared->found.push_back(std::move(found));
  }
}

}  // namespace gputriage
