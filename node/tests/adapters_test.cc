#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/profile.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/node/adapters.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::node {
namespace {

namespace fs = std::filesystem;
using ::devlet::testing::StatusIs;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class AdaptersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("node-adapters-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  devices::DeviceSet GpuServerDevices() {
    auto discoverer = devices::NewDiscoverer(
        {.sysfs_root = fake_.Root(),
         .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml"});
    absl::StatusOr<devices::Inventory> inventory = discoverer->Discover();
    EXPECT_OK(inventory.status());
    absl::StatusOr<devices::DeviceSet> set =
        devices::BuildDeviceSet(*inventory, devices::DefaultProfileConfig());
    EXPECT_OK(set.status());
    return *set;
  }

  fs::path dir_;
  devices::testing::FakeSysfs fake_;
};

dra_kubelet::DevicePrepareRequest Request(const std::string& device) {
  dra_kubelet::DevicePrepareRequest request;
  request.claim = {"ml", "train", "claim-uid"};
  request.request = "gpu";
  request.pool = "node-1";
  request.device = device;
  return request;
}

TEST_F(AdaptersTest, BackendPreparesAGpuWithItsNumaNodeAndNodes) {
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  DevicesBackend backend(
      {.pool = "node-1", .sysfs = &fake_, .journal_dir = (dir_ / "journal").string()});
  backend.SetDevices(GpuServerDevices());
  ASSERT_OK_AND_ASSIGN(dra_kubelet::PreparedDevice prepared, backend.Prepare(Request("gpu-0")));
  EXPECT_THAT(prepared.edits.env, Contains("DEVLET_DEVICE_GPU_0=node-1/gpu-0"));
  EXPECT_TRUE(prepared.attributes.contains("resource.kubernetes.io/pciBusID"));
  ASSERT_TRUE(prepared.attributes.contains("resource.kubernetes.io/numaNode"));
  EXPECT_EQ(std::get<std::int64_t>(prepared.attributes["resource.kubernetes.io/numaNode"]), 0);

  EXPECT_THAT(backend.Prepare(Request("gpu-99")), StatusIs(absl::StatusCode::kNotFound));
  dra_kubelet::DevicePrepareRequest other = Request("gpu-0");
  other.pool = "node-2";
  EXPECT_THAT(backend.Prepare(other), StatusIs(absl::StatusCode::kFailedPrecondition));
  dra_kubelet::DevicePrepareRequest bad_driver = Request("gpu-0");
  bad_driver.config.bind_driver = "nouveau";
  EXPECT_THAT(backend.Prepare(bad_driver), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(backend.Unprepare({.claim_uid = "claim-uid", .pool = "node-1", .device = "gpu-0"}));
}

TEST_F(AdaptersTest, BackendBindsVfioFromClassConfigAndRestoresOnUnprepare) {
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  (void)fake_.AddDriver("vfio-pci");  // may already be registered
  DevicesBackend backend(
      {.pool = "node-1", .sysfs = &fake_, .journal_dir = (dir_ / "journal").string()});
  devices::DeviceSet set = GpuServerDevices();
  const devices::DraDevice* gpu = set.Find("gpu-1");
  ASSERT_NE(gpu, nullptr);
  const std::string pci = gpu->pci_address;
  const std::string original = fake_.BoundDriver(pci);
  backend.SetDevices(set);
  dra_kubelet::DevicePrepareRequest request = Request("gpu-1");
  request.config.bind_driver = "vfio-pci";
  absl::StatusOr<dra_kubelet::PreparedDevice> prepared = backend.Prepare(request);
  ASSERT_OK(prepared.status());
  EXPECT_EQ(fake_.BoundDriver(pci), "vfio-pci");
  bool has_vfio = false;
  for (const auto& node : prepared->edits.device_nodes) has_vfio |= node.path.rfind("/dev/vfio/", 0) == 0;
  EXPECT_TRUE(has_vfio);
  EXPECT_TRUE(fs::exists(dir_ / "journal" / "claim-uid_gpu-1.json"));
  // Idempotent: a repeated prepare does not bind again.
  ASSERT_OK(backend.Prepare(request).status());
  ASSERT_OK(backend.Unprepare({.claim_uid = "claim-uid", .pool = "node-1", .device = "gpu-1"}));
  EXPECT_EQ(fake_.BoundDriver(pci), original);
  EXPECT_FALSE(fs::exists(dir_ / "journal" / "claim-uid_gpu-1.json"));
  ASSERT_OK(backend.Unprepare({.claim_uid = "claim-uid", .pool = "node-1", .device = "gpu-1"}));
}

TEST_F(AdaptersTest, CheckpointViewServesCompletedClaimsOfAPod) {
  const std::string cdi_root = (dir_ / "cdi").string();
  ASSERT_OK_AND_ASSIGN(auto checkpoint, dra_kubelet::StateCheckpointStore::Open(
                                            (dir_ / "state").string(), "gpu.devlet.io", cdi_root));
  dra_kubelet::CdiSpecWriter cdi(cdi_root);
  dra_kubelet::CdiSpec spec;
  spec.kind = "k8s.gpu.devlet.io/claim";
  spec.devices.push_back({"claim-uid-gpu-0", {{"A=1"}, {{"/dev/dri/card1", "", ""}}, {}}});
  ASSERT_OK(cdi.WriteSpec("k8s.gpu.devlet.io-claim_claim-uid.json", spec));

  dra_kubelet::ClaimRecord record;
  record.claim = {"ml", "train", "claim-uid"};
  record.state = dra_kubelet::ClaimState::kPrepareCompleted;
  record.pod_uids = {"pod-uid"};
  dra_kubelet::PreparedDeviceRecord device;
  device.requests = {"gpu"};
  device.pool = "node-1";
  device.device = "gpu-0";
  device.prepared.attributes["resource.kubernetes.io/numaNode"] = std::int64_t{1};
  device.cdi_device_ids = {"k8s.gpu.devlet.io/claim=claim-uid-gpu-0"};
  record.devices.push_back(device);
  record.cdi_spec_files = {"k8s.gpu.devlet.io-claim_claim-uid.json"};
  ASSERT_OK(checkpoint->Put(record));
  dra_kubelet::ClaimRecord started = record;
  started.claim.uid = "other-uid";
  started.state = dra_kubelet::ClaimState::kPrepareStarted;
  ASSERT_OK(checkpoint->Put(started));

  CheckpointClaimsView view(checkpoint->store(), cdi_root);
  EXPECT_THAT(view.ClaimsForPod("nobody"), IsEmpty());
  std::vector<nri::PreparedClaim> claims = view.ClaimsForPod("pod-uid");
  ASSERT_THAT(claims, SizeIs(1));  // the PrepareStarted claim is not served
  EXPECT_EQ(claims[0].name, "train");
  ASSERT_THAT(claims[0].devices, SizeIs(1));
  const nri::PreparedDevice& d = claims[0].devices[0];
  EXPECT_EQ(d.driver, "gpu.devlet.io");
  EXPECT_THAT(d.numa_nodes, ElementsAre(1));
  EXPECT_THAT(d.cdi_device_names, ElementsAre("k8s.gpu.devlet.io/claim=claim-uid-gpu-0"));
  EXPECT_THAT(d.edits.env, Contains("A=1"));
  ASSERT_THAT(d.edits.device_nodes, SizeIs(1));
  EXPECT_EQ(d.edits.device_nodes[0].path, "/dev/dri/card1");
}

}  // namespace
}  // namespace devlet::node
