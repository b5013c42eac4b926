#include "devlet/cdi/metadata.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "devlet/cdi/codec.h"
#include "devlet/common/testing/status_matchers.h"

namespace devlet::cdi {
namespace {

using ::devlet::testing::IsOk;

// The worked example of the research notes (kubelet-dra.md §3, cdi-devices-kubevirt.md §1.10).
TEST(MetadataTest, TemplateClaim) {
  const MetadataRequest r{.driver = "dev.example.com",
                          .claim_uid = "6f1c2a9e-0b7d-4c1e-9a35-1d2e3f4a5b6c",
                          .claim_name = "vm1-gpu-x7k2p",
                          .pod_claim_name = "gpu",
                          .request = "gpu/sub",
                          .host_file = "/var/lib/kubelet/plugins/dev.example.com/"
                                       "dra-device-metadata/vms_vm1-gpu-x7k2p/gpu/metadata.json"};
  EXPECT_EQ(MetadataSpecName(r), "dev.example.com_metadata_6f1c2a9e-0b7d-4c1e-9a35-1d2e3f4a5b6c_gpu");
  EXPECT_EQ(MetadataDeviceId(r),
            "dev.example.com/metadata=6f1c2a9e-0b7d-4c1e-9a35-1d2e3f4a5b6c_gpu");
  const Spec spec = MetadataSpec(r);
  EXPECT_THAT(ValidateSpec(spec), IsOk());
  EXPECT_EQ(
      EncodeSpecJson(spec),
      R"({"cdiVersion":"0.5.0","devices":[{"containerEdits":{"mounts":[{"containerPath":)"
      R"("/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/)"
      R"(dev.example.com-metadata.json","hostPath":"/var/lib/kubelet/plugins/dev.example.com/)"
      R"(dra-device-metadata/vms_vm1-gpu-x7k2p/gpu/metadata.json","options":["ro","bind"]}]},)"
      R"("name":"6f1c2a9e-0b7d-4c1e-9a35-1d2e3f4a5b6c_gpu"}],"kind":"dev.example.com/metadata"})"
      "\n");
}

TEST(MetadataTest, ClaimByName) {
  const MetadataRequest r{.driver = "devlet.dev", .claim_uid = "u", .claim_name = "shared",
                          .request = "nic", .host_file = "/h"};
  EXPECT_EQ(MetadataContainerPath(r),
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/shared/nic/"
            "devlet.dev-metadata.json");
}

}  // namespace
}  // namespace devlet::cdi
