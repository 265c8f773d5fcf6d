#include "src/agent/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "src/agent/pod_resources.grpc.pb.h"

namespace gputriage {

struct PodResourcesClient::Impl {
  std::string socket_path;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

PodResourcesClient::PodResourcesClient(const std::string& socket_path) : impl_(std::make_unique<Impl>()) {
  impl_->socket_path = socket_path;
  grpc::ChannelArguments args;
  // A kubelet with many pods answers with more than gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(64 << 20);
  impl_->channel = grpc::CreateCustomChannel("unix://" + socket_path, grpc::InsecureChannelCredentials(), args);
  impl_->stub = v1::PodResourcesLister::NewStub(impl_->channel);
}

PodResourcesClient::~PodResourcesClient() = default;

StatusOr<PodAllocations> PodResourcesClient::List(int timeout_ms) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  const grpc::Status status = impl_->stub->List(&context, request, &response);
  if (!status.ok())
    return IoError("pod-resources " + impl_->socket_path + ": " + status.error_message() + " (gRPC code " +
                   std::to_string(static_cast<int>(status.error_code())) + ")");
  PodAllocations out;
  for (const auto& pod : response.pod_resources())
    for (const auto& container : pod.containers())
      for (const auto& devices : container.devices())
        for (const auto& id : devices.device_ids())
          out[id] = PodAllocation{pod.namespace_(), pod.name(), container.name(), devices.resource_name()};
  return out;
}

}  // namespace gputriage
