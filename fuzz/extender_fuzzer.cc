// devlet-extender's verbs on the scheduler's request bodies (allocator/extender: Extender::Filter,
// Prioritize and Bind, what the HTTP server hands a complete POST body to): ExtenderArgs with a
// pod as JSON and NodeNames or a NodeList, ExtenderBindingArgs. Each input is given to every verb,
// in allocate mode, over a fresh copy of a small cluster (the extender's own test fixture: two
// nodes with GPUs, one without, claims for one and two GPUs), so that a bind in one input cannot
// change the next.
//
// Besides crashes: every verb answers JSON, whatever the body: an object for filter and bind, an
// array for prioritize (or nothing, for a body it cannot read).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "devlet/extender/extender.h"
#include "devlet/kube/codec.h"
#include "fuzz_util.h"
#include "nlohmann/json.hpp"

namespace {

using devlet::extender::ClusterState;
using devlet::extender::Extender;
using devlet::extender::MemoryWriter;

constexpr char kCluster[] = R"(apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  extendedResourceName: example.com/gpu
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {numaNode: {int: 0}}}
  - {name: gpu-1, attributes: {numaNode: {int: 1}}}
  - {name: gpu-2, attributes: {numaNode: {int: 0}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-b-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-b
  pool: {name: node-b, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0}
---
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b, labels: {kubernetes.io/hostname: node-b}}
---
apiVersion: v1
kind: Node
metadata: {name: node-c, labels: {kubernetes.io/hostname: node-c}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: default, uid: uid-one, resourceVersion: '1'}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: gpu, count: 1}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two, namespace: default, uid: uid-two, resourceVersion: '1'}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: gpu, count: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: bound, namespace: default, uid: uid-bound}
spec:
  containers: [{name: c, image: busybox}]
  resourceClaims: [{name: one, resourceClaimName: one}]
)";

const std::vector<devlet::kube::Object>& Cluster() {
  static const auto* objects = [] {
    absl::StatusOr<std::vector<devlet::kube::Object>> decoded = devlet::kube::Decode(kCluster);
    if (!decoded.ok()) devlet::fuzz::Fail("fixture", decoded.status().ToString());
    return new std::vector<devlet::kube::Object>(*std::move(decoded));
  }();
  return *objects;
}

void CheckReply(const std::string& reply, bool want_array, const char* verb) {
  // Prioritize answers a body it cannot read with nothing; the server turns that into a 400
  // (the scheduler reads a HostPriorityList or an error status, never an Error field).
  if (want_array && reply.empty()) return;
  const nlohmann::json parsed = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || (want_array ? !parsed.is_array() : !parsed.is_object())) {
    devlet::fuzz::Fail(verb, reply.substr(0, 500));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > (1u << 20)) {
    return -1;
  }
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ClusterState state(devlet::allocator::Features{});
  for (const devlet::kube::Object& object : Cluster()) {
    if (absl::Status status = state.Apply(object); !status.ok()) {
      devlet::fuzz::Fail("fixture", status.ToString());
    }
  }
  state.MarkSynced();
  MemoryWriter writer(state);
  Extender extender(state, writer,
                    {.mode = devlet::extender::Mode::kAllocate,
                     .filter_timeout = std::chrono::milliseconds(2000),
                     .parallelism = 1});
  CheckReply(extender.Filter(body), false, "filter");
  CheckReply(extender.Prioritize(body), true, "prioritize");
  CheckReply(extender.Bind(body), false, "bind");
  return 0;
}
