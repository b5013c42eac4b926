#include "devlet/dra_kubelet/devlet_adapters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "devlet/cdi/spec_dir.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/local.h"
#include "devlet/dra_kubelet/preparer.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::testing::IsOk;
using testing::TempDir;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kClaimsYaml[] = R"(apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, uid: pod-1}
spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: gpu-a
  namespace: default
  uid: 0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61
  annotations: {resource.kubernetes.io/pod-claim-name: gpus}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.devlet.test}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.devlet.test, pool: node-1, device: gpu-0}
      config:
      - source: FromClass
        opaque:
          driver: gpu.devlet.test
          parameters: {apiVersion: devlet.io/v1alpha1, kind: DeviceConfig, env: {A: "1"}}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  reservedFor:
  - {resource: pods, name: p, uid: pod-1}
)";

TEST(DevletAdapters, PrepareAndUnprepareOnKubeCdiAndState) {
  TempDir dir;
  const std::string manifests = dir.path() + "/manifests";
  const std::string cdi_root = dir.path() + "/cdi";
  const std::string data = dir.path() + "/data";
  std::filesystem::create_directories(manifests);
  testing::WriteFile(manifests + "/claims.yaml", kClaimsYaml);

  ManifestClaimSource claims(manifests);
  ASSERT_OK_AND_ASSIGN(ResourceClaim claim,
                       claims.GetClaim("default", "gpu-a", "0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61"));
  EXPECT_TRUE(claim.allocated);
  EXPECT_THAT(claim.allocation_node_names, ElementsAre("node-1"));
  EXPECT_THAT(claim.reserved_for_uids, ElementsAre("pod-1"));
  ASSERT_EQ(claim.config.size(), 1u);
  EXPECT_EQ(claim.config[0].source, ConfigSource::kFromClass);
  EXPECT_FALSE(claims.GetClaim("default", "nope", "").ok());

  SimulatedBackend backend("node-1", SimulatedBackend::Gpus(2));
  CdiSpecWriter cdi(cdi_root);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StateCheckpointStore> checkpoint,
                       StateCheckpointStore::Open(data, "gpu.devlet.test", cdi_root));
  PreparerOptions options;
  options.driver_name = "gpu.devlet.test";
  options.node_name = "node-1";
  options.plugin_data_dir = data;
  options.enable_device_metadata = true;
  ClaimPreparer preparer(options, claims, backend, cdi, *checkpoint);

  PrepareResult result = preparer.Prepare({claim.Ref()})[claim.uid];
  ASSERT_THAT(result.error, IsEmpty());
  ASSERT_EQ(result.devices.size(), 1u);

  // The state/ view the NRI plugin reads.
  ASSERT_OK_AND_ASSIGN(std::vector<state::PreparedClaim> by_pod,
                       checkpoint->store().FindByPod("pod-1"));
  ASSERT_EQ(by_pod.size(), 1u);
  const state::PreparedClaim& prepared = by_pod[0];
  EXPECT_EQ(prepared.state, state::ClaimState::kPrepareCompleted);
  ASSERT_EQ(prepared.devices.size(), 1u);
  EXPECT_EQ(prepared.devices[0].driver, "gpu.devlet.test");
  EXPECT_EQ(prepared.devices[0].attributes.at("resource.kubernetes.io/pciBusID"), "0000:10:00.0");
  EXPECT_EQ(prepared.devices[0].attributes.at("index"), "0");
  EXPECT_EQ(prepared.devices[0].cdi_device_ids, result.devices[0].cdi_device_ids);
  EXPECT_THAT(prepared.files,
              Contains(cdi_root + "/k8s.gpu.devlet.test-claim_" + claim.uid + ".json"));
  EXPECT_THAT(prepared.applied_config, HasSubstr(R"("A":"1")"));

  // What we wrote loads and resolves in the cdi/ registry (the reference library's rules).
  cdi::Registry registry = cdi::Registry::Load({cdi_root});
  EXPECT_THAT(registry.errors(), IsEmpty());
  absl::StatusOr<cdi::ContainerEdits> edits = registry.Resolve(result.devices[0].cdi_device_ids);
  ASSERT_THAT(edits, IsOk());
  EXPECT_THAT(edits->env, Contains("A=1"));
  ASSERT_EQ(edits->mounts.size(), 1u);
  EXPECT_EQ(edits->mounts[0].container_path,
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpus/gpu/"
            "gpu.devlet.test-metadata.json");

  // Idempotent, regenerates a lost spec, then unprepare from the checkpoint alone.
  std::filesystem::remove_all(cdi_root);
  EXPECT_EQ(preparer.Prepare({claim.Ref()})[claim.uid].devices, result.devices);
  EXPECT_TRUE(std::filesystem::exists(cdi_root + "/k8s.gpu.devlet.test-claim_" + claim.uid + ".json"));
  std::filesystem::remove(manifests + "/claims.yaml");
  EXPECT_THAT(preparer.Unprepare({claim.Ref()})[claim.uid], IsEmpty());
  EXPECT_TRUE(std::filesystem::is_empty(cdi_root));
  ASSERT_OK_AND_ASSIGN(state::Checkpoint all, checkpoint->store().Load());
  EXPECT_THAT(all.claims, IsEmpty());
  EXPECT_THAT(backend.PreparedDevices(), IsEmpty());
}

}  // namespace
}  // namespace devlet::dra_kubelet
