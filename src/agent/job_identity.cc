#include "src/agent/job_identity.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "src/util/strings.h"

namespace gputriage {
namespace {

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

/// "pod1b2c..." or "kubepods-burstable-pod1b2c_..._.slice" → the UID with dashes.
std::string PodUid(std::string_view part) {
  const size_t at = part.rfind("pod");
  if (at == std::string_view::npos) return "";
  std::string_view uid = part.substr(at + 3);
  if (EndsWith(uid, ".slice")) uid.remove_suffix(6);
  std::string out(uid);
  std::replace(out.begin(), out.end(), '_', '-');  // the systemd driver writes dashes as underscores
  // A UID is 36 characters of hex and dashes.
  if (out.size() != 36) return "";
  for (char c : out)
    if (!(c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "";
  return out;
}

/// "cri-containerd-<id>.scope", "docker-<id>.scope", "crio-<id>.scope" or a bare 64-hex id.
std::string ContainerId(std::string_view part) {
  if (EndsWith(part, ".scope")) part.remove_suffix(6);
  const size_t dash = part.rfind('-');
  if (dash != std::string_view::npos) part = part.substr(dash + 1);
  return part.size() == 64 && IsHex(part) ? std::string(part.substr(0, 12)) : "";
}

}  // namespace

std::string JobIdentity::Key() const {
  if (!pod_name.empty()) return "pod:" + namespace_name + "/" + pod_name + "/" + container_name;
  if (!pod_uid.empty()) return "pod:" + pod_uid + "/" + container_id;
  if (!slurm_job.empty()) return "slurm:" + slurm_job;
  if (pid != 0) return "pid:" + std::to_string(pid);
  return "";
}

Labels JobIdentity::ToLabels() const {
  Labels out;
  if (!container_id.empty()) out.emplace_back("container_id", container_id);
  if (!slurm_job.empty()) out.emplace_back("hpc_job", slurm_job);
  if (!pod_uid.empty()) out.emplace_back("pod_uid", pod_uid);
  if (!pod_name.empty()) {  // dcgm-exporter's names for them
    out.emplace_back("namespace", namespace_name);
    out.emplace_back("pod", pod_name);
    if (!container_name.empty()) out.emplace_back("container", container_name);
  }
  // `job_name` says what ran in words: the pod's container, the Slurm job, or the
  // process (not `job`, which Prometheus sets to the scrape job's name).
  std::string job = !pod_name.empty()    ? "pod " + namespace_name + "/" + pod_name +
                                               (container_name.empty() ? "" : "/" + container_name)
                    : !pod_uid.empty()   ? "pod " + pod_uid.substr(0, 8) + (container_id.empty() ? "" : "/" + container_id)
                    : !slurm_job.empty() ? "slurm " + slurm_job
                    : pid != 0          ? command + " (pid " + std::to_string(pid) + ")"
                                        : "";
  if (!job.empty()) out.emplace_back("job_name", job);
  // Always set, "none" too: Prometheus gives a series without pod labels the
  // scrape target's (the agent's own pod under a PodMonitor), and `fleet` would
  // bill an unallocated GPU to the agent. This label says whose labels they are.
  out.emplace_back("job_source", !pod_name.empty() || !pod_uid.empty() ? "pod"
                                 : !slurm_job.empty()                  ? "slurm"
                                 : pid != 0                            ? "process"
                                                                       : "none");
  return out;
}

JobIdentity IdentityFromCgroup(std::string_view cgroup_text) {
  JobIdentity id;
  for (std::string_view line : Split(cgroup_text, "\n")) {
    // "hierarchy-ID:controllers:path"; the path is after the second colon.
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view path = line.substr(second + 1);
    for (std::string_view part : Split(path, "/")) {
      if (id.pod_uid.empty() && Contains(part, "pod")) id.pod_uid = PodUid(part);
      if (id.container_id.empty()) id.container_id = ContainerId(part);
      if (id.slurm_job.empty() && StartsWith(part, "job_")) {
        std::string_view number = part.substr(4);
        if (!number.empty() && std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
          id.slurm_job = std::string(number);
      }
    }
    if (!id.pod_uid.empty() || !id.slurm_job.empty()) break;
  }
  if (id.pod_uid.empty()) id.container_id.clear();  // a container outside Kubernetes: named by its process
  return id;
}

JobIdentity IdentifyProcess(unsigned int pid, const std::string& proc_root) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  std::ifstream cgroup(dir + "/cgroup");
  if (!cgroup) return {};
  std::stringstream text;
  text << cgroup.rdbuf();
  JobIdentity id = IdentityFromCgroup(text.str());
  id.pid = pid;
  id.command = ProcessName(pid, proc_root);
  return id;
}

std::string ProcessName(unsigned int pid, const std::string& proc_root) {
  std::ifstream comm(proc_root + "/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

JobIdentity JobOfProcesses(std::vector<unsigned int> pids, const std::string& proc_root) {
  std::sort(pids.begin(), pids.end());
  JobIdentity fallback;
  for (unsigned int pid : pids) {
    JobIdentity id = IdentifyProcess(pid, proc_root);
    if (!id.pod_uid.empty() || !id.slurm_job.empty()) return id;
    if (fallback.empty() && id.pid != 0) fallback = id;
  }
  return fallback;
}

}  // namespace gputriage
