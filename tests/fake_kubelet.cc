// A stand-in kubelet for the agent's tests: serves the pod-resources API's
// List on a unix socket, from a text file read again on every call (so a test
// can move a GPU to another pod), one allocation per line:
//   NAMESPACE POD CONTAINER RESOURCE DEVICE_ID
//
//   fake_kubelet SOCKET FILE      (runs until killed)
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include "src/agent/pod_resources.grpc.pb.h"

namespace {

class Lister final : public v1::PodResourcesLister::Service {
 public:
  explicit Lister(std::string path) : path_(std::move(path)) {}
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    std::ifstream in(path_);
    if (!in) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "cannot read " + path_);
    // (namespace, pod) → container → resource → device ids, in file order.
    std::map<std::pair<std::string, std::string>, v1::PodResources*> pods;
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string ns, pod, container, resource, device;
      if (!(fields >> ns >> pod >> container >> resource >> device)) continue;
      v1::PodResources*& p = pods[{ns, pod}];
      if (p == nullptr) {
        p = response->add_pod_resources();
        p->set_namespace_(ns);
        p->set_name(pod);
      }
      v1::ContainerResources* c = nullptr;
      for (auto& existing : *p->mutable_containers())
        if (existing.name() == container) c = &existing;
      if (c == nullptr) {
        c = p->add_containers();
        c->set_name(container);
      }
      v1::ContainerDevices* d = c->add_devices();
      d->set_resource_name(resource);
      d->add_device_ids(device);
    }
    return grpc::Status::OK;
  }

 private:
  std::string path_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fake_kubelet SOCKET FILE\n");
    return 2;
  }
  Lister lister(argv[2]);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("unix://") + argv[1], grpc::InsecureServerCredentials());
  builder.RegisterService(&lister);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "fake_kubelet: cannot listen on %s\n", argv[1]);
    return 1;
  }
  std::fprintf(stderr, "fake_kubelet: serving %s\n", argv[1]);
  server->Wait();
  return 0;
}
