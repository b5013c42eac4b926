// dra-kubelet's ResourceClaim status.devices writer (KubeClaimStatusWriter, server-side apply
// with field manager = driver) against a real kube-apiserver v1.37.2, started by apiserver-runner
// (DEVLET_TEST_KUBECONFIG). Two drivers share one claim: each writes and clears only its own
// entries; the API server validates the entries against the allocation. Skips without the runner.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apiserver_fixture.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/claim_status.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kGpuDriver[] = "gpu.devlet.test";
constexpr char kNicDriver[] = "nic.other.test";

// The claims have two requests: gpu-0 allocated from our driver, eth1 from the NIC driver.
class ClaimStatusApiServerTest : public apiserver_testing::ApiServerFixture {
 protected:
  kube::ResourceClaim CreateAllocated(const std::string& name) {
    kube::ResourceClaim claim =
        Decode<kube::ResourceClaim>(testing::TwoDriverClaimYaml("gpu-0"));
    claim.metadata.name = name;
    return ApiServerFixture::CreateAllocated(std::move(claim));
  }
};

TEST_F(ClaimStatusApiServerTest, EachDriverOwnsOnlyItsEntries) {
  kube::ResourceClaim claim = CreateAllocated("two-drivers");
  const ClaimRef ref{"default", "two-drivers", claim.metadata.uid};
  KubeClaimStatusWriter gpu_writer(*store_, kGpuDriver);
  KubeClaimStatusWriter nic_writer(*store_, kNicDriver);
  ASSERT_TRUE(gpu_writer.UsesServerSideApply());

  DeviceStatus nic;
  nic.pool = "node-1";
  nic.device = "eth1";
  nic.conditions.push_back({"Ready", "True", "InterfaceUp", "net1 configured", 0});
  nic.network_data = NetworkData{"net1", {"10.1.0.2/16", "fd00::2/64"}, "02:00:00:00:00:01"};
  ASSERT_THAT(nic_writer.SetDeviceStatus(ref, {nic}), IsOk());

  ClaimRecord record;
  record.claim = ref;
  PreparedDeviceRecord gpu;
  gpu.pool = "node-1";
  gpu.device = "gpu-0";
  record.devices = {gpu};
  std::vector<DeviceStatus> ready = ReadyDeviceStatuses(record, 0);
  ready[0].data = R"({"uuid":"gpu-00000000-0000-0000-0000-000000000000"})";
  ASSERT_THAT(gpu_writer.SetDeviceStatus(ref, ready), IsOk());

  kube::ResourceClaim both = ReadClaim("two-drivers");
  ASSERT_EQ(both.status.devices.size(), 2u);
  int ours = 0;
  for (const kube::AllocatedDeviceStatus& entry : both.status.devices) {
    if (entry.driver == kGpuDriver) {
      ++ours;
      EXPECT_EQ(entry.device, "gpu-0");
      ASSERT_EQ(entry.conditions.size(), 1u);
      EXPECT_EQ(entry.conditions[0].type, "Ready");
      EXPECT_EQ(entry.conditions[0].status, "True");
      EXPECT_THAT(entry.data.json, HasSubstr("gpu-00000000"));
    } else {
      EXPECT_EQ(entry.driver, kNicDriver);
      ASSERT_TRUE(entry.network_data.has_value());
      EXPECT_EQ(entry.network_data->interface_name, "net1");
      EXPECT_EQ(entry.network_data->ips.size(), 2u);
    }
  }
  EXPECT_EQ(ours, 1);
  EXPECT_TRUE(both.status.allocation.has_value());

  // Re-applying the same status is accepted (prepare repeated after a kubelet restart).
  ASSERT_THAT(gpu_writer.SetDeviceStatus(ref, ready), IsOk());

  // Unprepare clears ours; the NIC driver's entry stays as it was.
  ASSERT_THAT(gpu_writer.SetDeviceStatus(ref, {}), IsOk());
  kube::ResourceClaim cleared = ReadClaim("two-drivers");
  ASSERT_EQ(cleared.status.devices.size(), 1u);
  EXPECT_EQ(cleared.status.devices[0].driver, kNicDriver);
  EXPECT_EQ(cleared.status.devices[0].conditions[0].reason, "InterfaceUp");
}

TEST_F(ClaimStatusApiServerTest, ApiServerRefusesWhatIsNotOurs) {
  kube::ResourceClaim claim = CreateAllocated("refusals");
  KubeClaimStatusWriter gpu_writer(*store_, kGpuDriver);
  DeviceStatus not_allocated;
  not_allocated.pool = "node-1";
  not_allocated.device = "gpu-7";
  not_allocated.conditions.push_back({"Ready", "True", "Prepared", "", 0});
  // The API server validates status.devices against the allocation.
  absl::Status status =
      gpu_writer.SetDeviceStatus({"default", "refusals", claim.metadata.uid}, {not_allocated});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("refusals"));
  // A re-created claim (other UID) is not written.
  DeviceStatus gpu = not_allocated;
  gpu.device = "gpu-0";
  EXPECT_FALSE(gpu_writer.SetDeviceStatus({"default", "refusals", "not-the-uid"}, {gpu}).ok());
  EXPECT_TRUE(ReadClaim("refusals").status.devices.empty());
  // A deleted claim is NotFound (unprepare after deletion treats that as done).
  EXPECT_THAT(gpu_writer.SetDeviceStatus({"default", "never-created", "x"}, {}),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace devlet::dra_kubelet
