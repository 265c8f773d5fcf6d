// Which job a GPU's processes belong to, from what the node itself says: the
// process's cgroup path names its Kubernetes pod (UID) and container, or its
// Slurm job; otherwise the job is the process itself (its pid and name).
// Pod names and namespaces need the kubelet (pod_resources.h); the UID is what
// the cgroup holds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/agent/exposition.h"

namespace gputriage {

struct JobIdentity {
  std::string pod_uid;       // Kubernetes pod UID (dashes restored)
  std::string container_id;  // the container runtime's id (64 hex digits), short form kept
  std::string slurm_job;     // Slurm job id
  unsigned int pid = 0;      // the process the identity was read from
  std::string command;       // its name (/proc/PID/comm)
  // From the kubelet's pod-resources API: the pod the GPU is allocated to.
  std::string namespace_name;
  std::string pod_name;
  std::string container_name;

  /// A stable key: "pod:NAMESPACE/POD/CONTAINER", "pod:UID/CONTAINER", "slurm:ID", "pid:N", "" for none.
  std::string Key() const;
  /// Labels for the agent's series: container_id, hpc_job, pod_uid, namespace,
  /// pod, container, job_name.
  Labels ToLabels() const;
  bool empty() const { return pid == 0 && pod_uid.empty() && slurm_job.empty() && pod_name.empty(); }
};

/// Parses one /proc/PID/cgroup text (v1 or v2; systemd or cgroupfs drivers).
JobIdentity IdentityFromCgroup(std::string_view cgroup_text);

/// Reads PROC_ROOT/PID/cgroup and comm; a process that has gone returns an empty identity.
JobIdentity IdentifyProcess(unsigned int pid, const std::string& proc_root = "/proc");

/// The process's name as top(1) shows it (<proc_root>/PID/comm); "" when it is gone.
std::string ProcessName(unsigned int pid, const std::string& proc_root = "/proc");

/// The job of a GPU's processes: the first one (lowest pid) in a container or
/// Slurm job, else the lowest pid itself; empty when there are none.
JobIdentity JobOfProcesses(std::vector<unsigned int> pids, const std::string& proc_root = "/proc");

}  // namespace gputriage
