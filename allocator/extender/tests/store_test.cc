// The extender over the kube/client ManifestStore: list+watch into the state, bind through it.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/extender/extender.h"
#include "devlet/extender/store.h"
#include "devlet/kube/client.h"
#include "devlet/kube/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace devlet::extender {
namespace {

using json = nlohmann::json;

std::string ObjectsYaml() {
  return testing::Documents({testing::GpuClassYaml(),
                             testing::GpuSliceYaml("node-a", {std::nullopt}), R"(
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  resourceClaims: [{name: g, resourceClaimName: one}]
  containers: [{name: c, image: busybox}]
)"});
}

TEST(ExtenderStoreTest, SyncsFromManifestStoreAndBindsThroughIt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("extender-store-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  ASSERT_OK_AND_ASSIGN(auto store, kube::ManifestStore::Open(
                                       {.dir = dir.string(),
                                        .poll_interval = std::chrono::milliseconds(20)}));
  ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> objects, kube::Decode(ObjectsYaml()));
  for (const auto& object : objects) ASSERT_OK(store->Create(object).status());

  ClusterState state{allocator::Features{}};
  ASSERT_OK_AND_ASSIGN(auto watchers, StartSync(*store, state));
  EXPECT_TRUE(state.synced());
  EXPECT_EQ(state.num_slices(), 1u);
  ASSERT_TRUE(state.GetPod("default", "p").has_value());
  const std::string uid = state.GetPod("default", "p")->metadata.uid;

  StoreWriter writer(*store);
  Extender extender(state, writer, {.mode = Mode::kAllocate});
  json pod = json::parse(kube::EncodeJson(*state.GetPod("default", "p")));
  json reply =
      json::parse(extender.Filter(json({{"Pod", pod}, {"NodeNames", {"node-a"}}}).dump()));
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
  reply = json::parse(extender.Bind(json({{"PodName", "p"},
                                          {"PodNamespace", "default"},
                                          {"PodUID", uid},
                                          {"Node", "node-a"}})
                                        .dump()));
  EXPECT_EQ(reply["Error"], "");
  ASSERT_OK_AND_ASSIGN(auto claim, kube::GetAs<kube::ResourceClaim>(*store, "default", "one"));
  ASSERT_TRUE(claim.status.allocation.has_value());
  EXPECT_EQ(claim.status.allocation->devices.results.at(0).device, "gpu-0");
  ASSERT_EQ(claim.status.reserved_for.size(), 1u);
  EXPECT_EQ(claim.status.reserved_for[0].uid, uid);
  ASSERT_OK_AND_ASSIGN(auto bound, kube::GetAs<kube::Pod>(*store, "default", "p"));
  EXPECT_EQ(bound.spec.node_name, "node-a");
  EXPECT_TRUE(state.IsAllocated("gpu.example.com", "node-a", "gpu-0"));

  // Deleting the claim in the store frees the device through the watch.
  ASSERT_OK(store->Delete(kube::Kind::kResourceClaim, {"default", "one"}));
  for (int i = 0; i < 200 && state.IsAllocated("gpu.example.com", "node-a", "gpu-0"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(state.IsAllocated("gpu.example.com", "node-a", "gpu-0"));
  watchers.clear();
  std::filesystem::remove_all(dir);
}

// Allocate mode for a pod that asks for an extended resource: the synthesized claim is created in
// the store, allocated, reserved for the pod, and the pod's status names it.
TEST(ExtenderStoreTest, ExtendedResourceClaimIsCreatedAndNamedInThePodStatus) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("extender-store-ext-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  ASSERT_OK_AND_ASSIGN(auto store, kube::ManifestStore::Open(
                                       {.dir = dir.string(),
                                        .poll_interval = std::chrono::milliseconds(20)}));
  ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> objects,
                       kube::Decode(testing::Documents({testing::GpuClassYaml("example.com/gpu"),
                                                        testing::GpuSliceYaml("node-a", {0, 0}),
                                                        R"(
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers:
  - name: c
    image: busybox
    resources: {limits: {example.com/gpu: "2"}}
)"})));
  for (const auto& object : objects) ASSERT_OK(store->Create(object).status());
  allocator::Features features;
  features.extended_resource = true;
  ClusterState state{features};
  ASSERT_OK_AND_ASSIGN(auto watchers, StartSync(*store, state));
  ASSERT_TRUE(state.GetPod("default", "p").has_value());
  const std::string uid = state.GetPod("default", "p")->metadata.uid;

  StoreWriter writer(*store);
  Extender extender(state, writer, {.mode = Mode::kAllocate});
  json reply = json::parse(extender.Bind(json({{"PodName", "p"},
                                               {"PodNamespace", "default"},
                                               {"PodUID", uid},
                                               {"Node", "node-a"}})
                                             .dump()));
  EXPECT_EQ(reply["Error"], "");
  ASSERT_OK_AND_ASSIGN(auto claim,
                       kube::GetAs<kube::ResourceClaim>(*store, "default", "p-extended-resources"));
  ASSERT_TRUE(claim.status.allocation.has_value());
  EXPECT_EQ(claim.status.allocation->devices.results.size(), 2u);
  ASSERT_EQ(claim.metadata.owner_references.size(), 1u);
  EXPECT_EQ(claim.metadata.owner_references[0].uid, uid);
  ASSERT_OK_AND_ASSIGN(auto pod, kube::GetAs<kube::Pod>(*store, "default", "p"));
  EXPECT_EQ(pod.spec.node_name, "node-a");
  ASSERT_TRUE(pod.status.extended_resource_claim_status.has_value());
  EXPECT_EQ(pod.status.extended_resource_claim_status->resource_claim_name,
            "p-extended-resources");
  ASSERT_EQ(pod.status.extended_resource_claim_status->request_mappings.size(), 1u);
  EXPECT_EQ(pod.status.extended_resource_claim_status->request_mappings[0].request_name,
            "container-0-request-0");
  watchers.clear();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace devlet::extender
