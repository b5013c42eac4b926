// The synthetic cluster of the extender benchmark (see cluster.h).
#include "cluster.h"

#include <cstdio>
#include <string>
#include <utility>

#include "devlet/common/status.h"
#include "devlet/kube/codec.h"
#include "nlohmann/json.hpp"

namespace devlet::extender::bench {
namespace {

using json = nlohmann::json;

constexpr int kGpusPerNode = 8;
constexpr int kNicsPerNode = 4;
constexpr char kGpuDriver[] = "gpu.example.com";
constexpr char kNicDriver[] = "nic.example.com";
// The standard PCIe-root attribute is shared across drivers, so one matchAttribute can tie a GPU
// to a NIC.
constexpr char kPcieRoot[] = "resource.kubernetes.io/pcieRoot";

kube::DeviceAttribute Str(std::string s) {
  kube::DeviceAttribute a;
  a.string_value = std::move(s);
  return a;
}

kube::DeviceAttribute Int(int64_t v) {
  kube::DeviceAttribute a;
  a.int_value = v;
  return a;
}

std::string PcieRoot(int root) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "pci0000:%02x", root * 0x20);
  return buf;
}

std::string BusId(int bus) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0000:%02x:00.0", bus);
  return buf;
}

kube::DeviceClass Class(const std::string& name, const std::string& driver) {
  kube::DeviceClass c;
  c.metadata.name = name;
  c.spec.selectors.push_back(
      {kube::CELDeviceSelector{"device.driver == \"" + driver + "\""}});
  return c;
}

kube::ResourceSlice GpuSlice(int n) {
  const std::string node = NodeName(n);
  kube::ResourceSlice s;
  s.metadata.name = node + "-gpu.example.com";
  s.spec.driver = kGpuDriver;
  s.spec.node_name = node;
  s.spec.pool = {node, 1, 1};
  for (int i = 0; i < kGpusPerNode; ++i) {
    kube::Device d;
    d.name = "gpu-" + std::to_string(i);
    d.attributes["model"] = Str(n % 3 == 0 ? "H100-SXM5-80GB" : "A100-SXM4-80GB");
    d.attributes["driverVersion"] = Str("570.86.15");
    d.attributes["numaNode"] = Int(i / 4);
    d.attributes[kPcieRoot] = Str(PcieRoot(i / 2));
    d.attributes["resource.kubernetes.io/pciBusID"] = Str(BusId(0x18 + i * 0x10));
    d.capacity["memory"].value = kube::Quantity::Parse("80Gi").value();
    s.spec.devices.push_back(std::move(d));
  }
  return s;
}

kube::ResourceSlice NicSlice(int n) {
  const std::string node = NodeName(n);
  kube::ResourceSlice s;
  s.metadata.name = node + "-nic.example.com";
  s.spec.driver = kNicDriver;
  s.spec.node_name = node;
  s.spec.pool = {node, 1, 1};
  for (int i = 0; i < kNicsPerNode; ++i) {
    kube::Device d;
    d.name = "nic-" + std::to_string(i);
    d.attributes["numaNode"] = Int(i / 2);
    d.attributes[kPcieRoot] = Str(PcieRoot(i));
    d.attributes["resource.kubernetes.io/pciBusID"] = Str(BusId(0x1a + i * 0x20));
    d.capacity["bandwidth"].value = kube::Quantity::Parse("400G").value();
    s.spec.devices.push_back(std::move(d));
  }
  return s;
}

kube::DeviceRequest Exact(std::string name, std::string device_class, int count) {
  kube::DeviceRequest r;
  r.name = std::move(name);
  r.exactly.emplace();
  r.exactly->device_class_name = std::move(device_class);
  r.exactly->allocation_mode = "ExactCount";
  r.exactly->count = count;
  return r;
}

std::string ClaimName(PodKind kind) { return "bench-" + std::string(PodKindName(kind)); }

kube::ResourceClaim Claim(PodKind kind) {
  kube::ResourceClaim c;
  c.metadata.namespace_ = "default";
  c.metadata.name = ClaimName(kind);
  c.metadata.uid = "uid-" + c.metadata.name;
  c.metadata.resource_version = "1";
  switch (kind) {
    case PodKind::kOneGpu:
      c.spec.devices.requests.push_back(Exact("gpu", "gpu", 1));
      break;
    case PodKind::kTwoGpusSameNuma:
      c.spec.devices.requests.push_back(Exact("gpus", "gpu", 2));
      c.spec.devices.constraints.push_back({{}, std::string("gpu.example.com/numaNode"), {}});
      break;
    case PodKind::kGpuNicSamePcieRoot:
      c.spec.devices.requests.push_back(Exact("gpu", "gpu", 1));
      c.spec.devices.requests.push_back(Exact("nic", "nic", 1));
      c.spec.devices.constraints.push_back({{}, std::string(kPcieRoot), {}});
      break;
  }
  return c;
}

// BusyClaim holds `count` GPUs of node `n` (gpu-7 downwards, so the free ones stay first-fit).
kube::ResourceClaim BusyClaim(int n, int count) {
  const std::string node = NodeName(n);
  kube::ResourceClaim c;
  c.metadata.namespace_ = "training";
  c.metadata.name = "busy-" + node;
  c.metadata.uid = "uid-busy-" + node;
  c.metadata.resource_version = "1";
  c.spec.devices.requests.push_back(Exact("gpus", "gpu", count));
  kube::AllocationResult allocation;
  for (int i = 0; i < count; ++i) {
    allocation.devices.results.push_back(
        {"gpus", kGpuDriver, node, "gpu-" + std::to_string(kGpusPerNode - 1 - i)});
  }
  kube::NodeSelector selector;
  selector.node_selector_terms.push_back({{}, {{"metadata.name", "In", {node}}}});
  allocation.node_selector = std::move(selector);
  c.status.allocation = std::move(allocation);
  kube::ResourceClaimConsumerReference consumer;
  consumer.resource = "pods";
  consumer.name = "trainer-" + node;
  consumer.uid = "uid-trainer-" + node;
  c.status.reserved_for.push_back(std::move(consumer));
  return c;
}

kube::Node MakeNode(int n) {
  kube::Node node;
  node.metadata.name = NodeName(n);
  node.metadata.uid = "uid-" + node.metadata.name;
  node.metadata.labels = {
      {"kubernetes.io/hostname", node.metadata.name},
      {"kubernetes.io/os", "linux"},
      {"kubernetes.io/arch", "amd64"},
      {"node.kubernetes.io/instance-type", "p5.48xlarge"},
      {"topology.kubernetes.io/zone", "zone-" + std::to_string(n % 3)},
  };
  return node;
}

}  // namespace

kube::ResourceClaim ChurnClaim(int slot, int n) {
  const std::string node = NodeName(n);
  kube::ResourceClaim c;
  c.metadata.namespace_ = "training";
  c.metadata.name = "churn-" + std::to_string(slot);
  c.metadata.uid = "uid-churn-" + std::to_string(slot);
  c.metadata.resource_version = "1";
  c.spec.devices.requests.push_back(Exact("gpu", "gpu", 1));
  kube::AllocationResult allocation;
  allocation.devices.results.push_back({"gpu", kGpuDriver, node, "gpu-4"});
  kube::NodeSelector selector;
  selector.node_selector_terms.push_back({{}, {{"metadata.name", "In", {node}}}});
  allocation.node_selector = std::move(selector);
  c.status.allocation = std::move(allocation);
  return c;
}

std::vector<PodKind> AllPodKinds() {
  return {PodKind::kOneGpu, PodKind::kTwoGpusSameNuma, PodKind::kGpuNicSamePcieRoot};
}

std::string_view PodKindName(PodKind kind) {
  switch (kind) {
    case PodKind::kOneGpu:
      return "1gpu";
    case PodKind::kTwoGpusSameNuma:
      return "2gpu-numa";
    case PodKind::kGpuNicSamePcieRoot:
      return "gpu+nic-pcie";
  }
  return "?";
}

std::string NodeName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "node-%05d", i);
  return buf;
}

absl::Status Populate(const ClusterSpec& spec, ClusterState& state) {
  if (spec.nodes <= 0) return InvalidArgument("cluster: --nodes must be positive");
  DEVLET_RETURN_IF_ERROR(state.Apply(Class("gpu", kGpuDriver)));
  DEVLET_RETURN_IF_ERROR(state.Apply(Class("nic", kNicDriver)));
  for (int n = 0; n < spec.nodes; ++n) {
    DEVLET_RETURN_IF_ERROR(state.Apply(MakeNode(n)));
    DEVLET_RETURN_IF_ERROR(state.Apply(GpuSlice(n)));
    DEVLET_RETURN_IF_ERROR(state.Apply(NicSlice(n)));
    const int busy = spec.busy_modulus > 0 ? n % spec.busy_modulus : 0;
    if (busy > 0) DEVLET_RETURN_IF_ERROR(state.Apply(BusyClaim(n, busy)));
  }
  for (PodKind kind : AllPodKinds()) DEVLET_RETURN_IF_ERROR(state.Apply(Claim(kind)));
  state.MarkSynced();
  return absl::OkStatus();
}

std::string PodJson(PodKind kind) {
  const std::string name = "bench-" + std::string(PodKindName(kind)) + "-7d9f8b6c5-x2x4q";
  json pod = {
      {"metadata",
       {{"name", name},
        {"generateName", "bench-7d9f8b6c5-"},
        {"namespace", "default"},
        {"uid", "5f0c3a52-8b1e-4d7e-9a43-" + std::string(PodKindName(kind))},
        {"resourceVersion", "123456"},
        {"creationTimestamp", "2026-12-02T18:00:00Z"},
        {"labels", {{"app", "bench"}, {"pod-template-hash", "7d9f8b6c5"}}},
        {"annotations", {{"kubectl.kubernetes.io/restartedAt", "2026-12-02T17:59:00Z"}}},
        {"ownerReferences",
         json::array({{{"apiVersion", "apps/v1"},
                       {"kind", "ReplicaSet"},
                       {"name", "bench-7d9f8b6c5"},
                       {"uid", "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}})}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "trainer"},
                       {"image", "registry.example.com/ml/trainer:2026.11"},
                       {"command", json::array({"python", "-m", "train"})},
                       {"env", json::array({{{"name", "NCCL_DEBUG"}, {"value", "WARN"}}})},
                       {"resources",
                        {{"requests", {{"cpu", "8"}, {"memory", "64Gi"}}},
                         {"limits", {{"memory", "64Gi"}}},
                         {"claims", json::array({{{"name", "devices"}}})}}},
                       {"volumeMounts",
                        json::array({{{"name", "kube-api-access-abcde"},
                                      {"mountPath", "/var/run/secrets/kubernetes.io/"
                                                    "serviceaccount"},
                                      {"readOnly", true}}})},
                       {"terminationMessagePath", "/dev/termination-log"},
                       {"terminationMessagePolicy", "File"},
                       {"imagePullPolicy", "IfNotPresent"}}})},
        {"resourceClaims",
         json::array({{{"name", "devices"}, {"resourceClaimName", ClaimName(kind)}}})},
        {"restartPolicy", "Always"},
        {"terminationGracePeriodSeconds", 30},
        {"dnsPolicy", "ClusterFirst"},
        {"serviceAccountName", "default"},
        {"schedulerName", "default-scheduler"},
        {"tolerations",
         json::array({{{"key", "node.kubernetes.io/not-ready"},
                       {"operator", "Exists"},
                       {"effect", "NoExecute"},
                       {"tolerationSeconds", 300}},
                      {{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}})},
        {"priority", 0},
        {"enableServiceLinks", true},
        {"preemptionPolicy", "PreemptLowerPriority"}}},
      {"status",
       {{"phase", "Pending"},
        {"qosClass", "Burstable"},
        {"conditions",
         json::array({{{"type", "PodScheduled"},
                       {"status", "False"},
                       {"lastProbeTime", nullptr},
                       {"lastTransitionTime", "2026-12-02T18:00:01Z"},
                       {"reason", "Unschedulable"}}})}}}};
  return pod.dump();
}

std::string ExtenderArgsJson(PodKind kind, const ClusterSpec& spec) {
  // Built as text, in the field order Go's encoder writes (struct order).
  std::string body = "{\"Pod\":" + PodJson(kind) + ",\"Nodes\":null,\"NodeNames\":[";
  for (int n = 0; n < spec.nodes; ++n) {
    if (n > 0) body += ',';
    body += '"' + NodeName(n) + '"';
  }
  body += "]}";
  return body;
}

}  // namespace devlet::extender::bench
