// Which Kubernetes pod each GPU is allocated to, from the kubelet's
// pod-resources socket (the gRPC API device monitoring agents use, as
// dcgm-exporter does). gRPC is used only in pod_resources.cc.
//
// The allocation names the pod even where the agent cannot see the job's
// processes (a GPU held but idle, or a container in another pid namespace),
// and gives the names a cgroup path cannot: namespace, pod, container.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "gputriage/status.h"

namespace gputriage {

struct PodAllocation {
  std::string namespace_name;
  std::string pod;
  std::string container;
  std::string resource;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
};

/// Device id (GPU-… or MIG-… UUID) → the pod and container it is allocated to.
using PodAllocations = std::map<std::string, PodAllocation>;

class PodResourcesClient {
 public:
  /// A client of the socket at `socket_path` (a path; nothing is sent yet).
  explicit PodResourcesClient(const std::string& socket_path);
  ~PodResourcesClient();
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;

  /// Calls List with a deadline. Errors name the socket and gRPC's status
  /// (no kubelet, permission denied, deadline exceeded).
  StatusOr<PodAllocations> List(int timeout_ms);

  /// The kubelet's default socket.
  static constexpr const char* kDefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputriage
