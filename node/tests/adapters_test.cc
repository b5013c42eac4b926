#include "devlet/node/adapters.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/profile.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/kube/client.h"
#include "devlet/kube/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::node {
namespace {

namespace fs = std::filesystem;
using ::devlet::testing::StatusIs;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;
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

// CompletedRecord is claim `ref` prepared (PrepareCompleted) for pod "pod-uid": one device of
// pool node-1 for `request`, on NUMA node 1.
dra_kubelet::ClaimRecord CompletedRecord(const dra_kubelet::ClaimRef& ref,
                                         const std::string& request, const std::string& device) {
  dra_kubelet::ClaimRecord record;
  record.claim = ref;
  record.state = dra_kubelet::ClaimState::kPrepareCompleted;
  record.pod_uids = {"pod-uid"};
  dra_kubelet::PreparedDeviceRecord prepared;
  prepared.requests = {request};
  prepared.pool = "node-1";
  prepared.device = device;
  prepared.prepared.attributes["resource.kubernetes.io/numaNode"] = std::int64_t{1};
  record.devices.push_back(prepared);
  return record;
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

TEST_F(AdaptersTest, BackendPointsDeviceNodesBelowTheDevRoot) {
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  for (const std::string dev_root : {"", "/", "/run/simnode/dev"}) {
    SCOPED_TRACE("dev_root " + dev_root);
    DevicesBackend backend({.pool = "node-1",
                            .sysfs = &fake_,
                            .journal_dir = (dir_ / "journal").string(),
                            .dev_root = dev_root});
    backend.SetDevices(GpuServerDevices());
    ASSERT_OK_AND_ASSIGN(dra_kubelet::PreparedDevice prepared, backend.Prepare(Request("gpu-0")));
    ASSERT_THAT(prepared.edits.device_nodes, Not(IsEmpty()));
    for (const auto& node : prepared.edits.device_nodes) {
      ASSERT_EQ(node.path.rfind("/dev/", 0), 0u) << node.path;  // where the container sees it
      EXPECT_EQ(node.host_path, dev_root.size() > 1 ? dev_root + node.path : "");
    }
    EXPECT_OK(backend.Unprepare({.claim_uid = "claim-uid", .pool = "node-1", .device = "gpu-0"}));
  }
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

TEST_F(AdaptersTest, MdevClaimIsPreparedAndUnpreparedAcrossARestart) {
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  ASSERT_OK(fake_.AddMdevType("0000:18:00.0", "nvidia-63", "GRID H100-4C", 4));
  auto discoverer = devices::NewDiscoverer(
      {.sysfs_root = fake_.Root(),
       .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(devices::Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(devices::ProfileConfig profiles,
                       devices::ParseProfileConfig(
                           "profiles:\n- {name: vgpu, kind: gpu, match: {pciAddresses: "
                           "[\"0000:18:00.0\"]}, mdevType: nvidia-63}\n"));
  ASSERT_OK_AND_ASSIGN(devices::DeviceSet set, devices::BuildDeviceSet(inventory, profiles));
  ASSERT_NE(set.Find("vgpu-0"), nullptr);
  const std::string journal = (dir_ / "journal").string();
  const std::string journal_file = journal + "/claim-uid_vgpu-0.json";
  std::string uuid;
  {
    DevicesBackend backend({.pool = "node-1", .sysfs = &fake_, .journal_dir = journal});
    backend.SetDevices(set);
    ASSERT_OK_AND_ASSIGN(dra_kubelet::PreparedDevice prepared, backend.Prepare(Request("vgpu-0")));
    ASSERT_TRUE(prepared.attributes.contains("mdevUUID"));
    uuid = std::get<std::string>(prepared.attributes["mdevUUID"]);
    EXPECT_TRUE(fake_.Exists("bus/mdev/devices/" + uuid));
    // The parent's address is not offered as a passthrough device, nor its device nodes.
    EXPECT_FALSE(prepared.attributes.contains("resource.kubernetes.io/pciBusID"));
    for (const auto& node : prepared.edits.device_nodes) {
      EXPECT_EQ(node.path.rfind("/dev/dri/", 0), std::string::npos) << node.path;
    }
    EXPECT_EQ(std::get<std::string>(prepared.attributes["mdevType"]), "nvidia-63");
    std::ifstream in(journal_file);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_THAT(text.str(), ::testing::HasSubstr("\"kind\":\"mdev\""));
    EXPECT_THAT(text.str(), ::testing::HasSubstr(uuid));
    // A repeated prepare (kubelet retry) keeps the same instance.
    ASSERT_OK_AND_ASSIGN(prepared, backend.Prepare(Request("vgpu-0")));
    EXPECT_EQ(std::get<std::string>(prepared.attributes["mdevUUID"]), uuid);
  }
  // devlet-node restarts: a new backend knows the mdev only from the journal.
  DevicesBackend restarted({.pool = "node-1", .sysfs = &fake_, .journal_dir = journal});
  restarted.SetDevices(set);
  ASSERT_OK(restarted.Unprepare({.claim_uid = "claim-uid", .pool = "node-1", .device = "vgpu-0"}));
  EXPECT_FALSE(fake_.Exists("bus/mdev/devices/" + uuid));
  EXPECT_FALSE(fs::exists(journal_file));
}

// After a reboot (DevicePrepareRequest::after_reboot) the backend redoes what its journal says
// the kernel lost: the mediated device comes back with the UUID the container's edits name, and
// a second such call (the same boot, or a record without a boot id) changes nothing.
TEST_F(AdaptersTest, MdevIsCreatedAgainWithItsUuidAfterAReboot) {
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  ASSERT_OK(fake_.AddMdevType("0000:18:00.0", "nvidia-63", "GRID H100-4C", 4));
  auto discoverer = devices::NewDiscoverer(
      {.sysfs_root = fake_.Root(),
       .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(devices::Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(devices::ProfileConfig profiles,
                       devices::ParseProfileConfig(
                           "profiles:\n- {name: vgpu, kind: gpu, match: {pciAddresses: "
                           "[\"0000:18:00.0\"]}, mdevType: nvidia-63}\n"));
  ASSERT_OK_AND_ASSIGN(devices::DeviceSet set, devices::BuildDeviceSet(inventory, profiles));
  const std::string journal = (dir_ / "journal").string();
  DevicesBackend backend({.pool = "node-1", .sysfs = &fake_, .journal_dir = journal});
  backend.SetDevices(set);
  ASSERT_OK_AND_ASSIGN(dra_kubelet::PreparedDevice prepared, backend.Prepare(Request("vgpu-0")));
  const std::string uuid = std::get<std::string>(prepared.attributes["mdevUUID"]);
  const std::string journal_text = [&] {
    std::ifstream in(journal + "/claim-uid_vgpu-0.json");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }();

  // The reboot: the kernel's mediated devices are gone.
  ASSERT_OK(fake_.WriteFile("bus/mdev/devices/" + uuid + "/remove", "1"));
  ASSERT_FALSE(fake_.Exists("bus/mdev/devices/" + uuid));
  dra_kubelet::DevicePrepareRequest again = Request("vgpu-0");
  again.after_reboot = true;
  ASSERT_OK_AND_ASSIGN(prepared, backend.Prepare(again));
  EXPECT_TRUE(fake_.Exists("bus/mdev/devices/" + uuid));
  EXPECT_EQ(std::get<std::string>(prepared.attributes["mdevUUID"]), uuid);
  ASSERT_OK_AND_ASSIGN(prepared, backend.Prepare(again));
  EXPECT_EQ(std::get<std::string>(prepared.attributes["mdevUUID"]), uuid);
  {
    std::ifstream in(journal + "/claim-uid_vgpu-0.json");
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), journal_text);
  }
  ASSERT_OK(backend.Unprepare({.claim_uid = "claim-uid", .pool = "node-1", .device = "vgpu-0"}));
  EXPECT_FALSE(fake_.Exists("bus/mdev/devices/" + uuid));
}

TEST_F(AdaptersTest, VfsDevletCreatedGoWithTheirLastUserAcrossARestart) {
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  auto discoverer = devices::NewDiscoverer(
      {.sysfs_root = fake_.Root(),
       .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(devices::Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(devices::ProfileConfig profiles,
                       devices::ParseProfileConfig("profiles:\n- {name: vf, kind: vf, match: "
                                                   "{interfaces: [ens1f0np0]}, numVFs: 4}\n"));
  ASSERT_OK_AND_ASSIGN(devices::DeviceSet set, devices::BuildDeviceSet(inventory, profiles));
  auto num_vfs = [&] {
    absl::StatusOr<std::string> text = fake_.ReadFile("bus/pci/devices/0000:1a:00.0/sriov_numvfs");
    return text.ok() ? std::stoi(*text) : -1;
  };
  const std::string journal = (dir_ / "journal").string();
  const std::string ledger_path = (dir_ / "sriov-ledger").string();
  auto options = [&](devices::SriovLedger* ledger) {
    DevicesBackendOptions o{.pool = "node-1", .sysfs = &fake_, .journal_dir = journal};
    o.preparer.vf_wait_timeout = std::chrono::milliseconds(2000);
    o.preparer.poll_interval = std::chrono::milliseconds(5);
    o.preparer.sriov_ledger = ledger;
    return o;
  };
  dra_kubelet::DevicePrepareRequest second = Request("vf-0-vf-1");
  second.claim.uid = "claim-2";
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<devices::SriovLedger> ledger,
                         devices::SriovLedger::Open(ledger_path));
    DevicesBackend backend(options(ledger.get()));
    backend.SetDevices(set);
    ASSERT_OK(backend.Prepare(Request("vf-0-vf-0")).status());
    ASSERT_OK(backend.Prepare(second).status());
    EXPECT_EQ(num_vfs(), 4);
  }
  // devlet-node restarts: the journal's holders and the ledger file decide when the VFs go.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<devices::SriovLedger> ledger,
                       devices::SriovLedger::Open(ledger_path));
  DevicesBackend restarted(options(ledger.get()));
  restarted.SetDevices(set);
  ASSERT_OK(restarted.Unprepare({.claim_uid = "claim-uid", .pool = "node-1", .device = "vf-0-vf-0"}));
  EXPECT_EQ(num_vfs(), 4) << "vf-0-vf-1 still uses the VFs";
  ASSERT_OK(restarted.Unprepare({.claim_uid = "claim-2", .pool = "node-1", .device = "vf-0-vf-1"}));
  EXPECT_EQ(num_vfs(), 0);
  EXPECT_THAT(ledger->Entries(), IsEmpty());
}

TEST_F(AdaptersTest, JournalThatDoesNotParseFailsUnprepareAndIsKept) {
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  const std::string journal = (dir_ / "journal").string();
  fs::create_directories(journal);
  std::ofstream(journal + "/claim-uid_gpu-0.json") << "[{\"kind\":\"teleport\",\"device\":\"x\"}]\n";
  DevicesBackend backend({.pool = "node-1", .sysfs = &fake_, .journal_dir = journal});
  EXPECT_THAT(backend.Unprepare({.claim_uid = "claim-uid", .pool = "node-1", .device = "gpu-0"}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("teleport")));
  EXPECT_TRUE(fs::exists(journal + "/claim-uid_gpu-0.json"));
}

// Issue 14 §0.1: an unprepare from an old checkpoint record whose claim UID holds a path never
// reads or removes a file outside the journal directory (the name "<uid>_<device>.json").
TEST_F(AdaptersTest, UnprepareNeverTouchesAJournalOutsideItsDirectory) {
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  const std::string journal = (dir_ / "journal").string();
  fs::create_directories(journal + "/x");
  std::ofstream(dir_ / "victim_gpu-0.json") << "[]\n";  // a journal with nothing to undo
  DevicesBackend backend({.pool = "node-1", .sysfs = &fake_, .journal_dir = journal});
  EXPECT_OK(
      backend.Unprepare({.claim_uid = "x/../../victim", .pool = "node-1", .device = "gpu-0"}));
  EXPECT_TRUE(fs::exists(dir_ / "victim_gpu-0.json"));
}

TEST_F(AdaptersTest, CheckpointViewServesCompletedClaimsOfAPod) {
  // No CDI root at all: the view reads the edits recorded with the claim, no spec file.
  const std::string cdi_root = (dir_ / "no-cdi").string();
  ASSERT_OK_AND_ASSIGN(auto checkpoint, dra_kubelet::StateClaimRecordStore::Open(
                                            (dir_ / "state").string(), "gpu.devlet.io", cdi_root));
  dra_kubelet::ClaimRecord record = CompletedRecord({"ml", "train", "claim-uid"}, "gpu", "gpu-0");
  record.devices[0].cdi_device_ids = {"k8s.gpu.devlet.io/claim=claim-uid-gpu-0"};
  record.devices[0].container_edits = cdi::ContainerEdits{};
  record.devices[0].container_edits->env = {"A=1"};
  record.devices[0].container_edits->device_nodes.push_back({.path = "/dev/dri/card1"});
  record.devices[0].container_edits->hooks.push_back(
      {.hook_name = "createContainer", .path = "/usr/bin/vendor-hook"});
  record.cdi_spec_files = {"k8s.gpu.devlet.io-claim_claim-uid.json"};
  ASSERT_OK(checkpoint->Put(record));
  dra_kubelet::ClaimRecord started = record;
  started.claim.uid = "other-uid";
  started.state = dra_kubelet::ClaimState::kPrepareStarted;
  ASSERT_OK(checkpoint->Put(started));

  CheckpointClaimsView view(checkpoint->store());
  EXPECT_THAT(view.ClaimsForPod("nobody"), ::devlet::testing::IsOkAndHolds(IsEmpty()));
  ASSERT_OK_AND_ASSIGN(std::vector<nri::PreparedClaim> claims, view.ClaimsForPod("pod-uid"));
  ASSERT_THAT(claims, SizeIs(1));  // the PrepareStarted claim is not served
  EXPECT_EQ(claims[0].error, "");
  EXPECT_EQ(claims[0].name, "train");
  ASSERT_THAT(claims[0].devices, SizeIs(1));
  const nri::PreparedDevice& d = claims[0].devices[0];
  EXPECT_EQ(d.driver, "gpu.devlet.io");
  EXPECT_THAT(d.numa_nodes, ElementsAre(1));
  EXPECT_THAT(d.cdi_device_names, ElementsAre("k8s.gpu.devlet.io/claim=claim-uid-gpu-0"));
  EXPECT_THAT(d.edits.env, Contains("A=1"));
  ASSERT_THAT(d.edits.device_nodes, SizeIs(1));
  EXPECT_EQ(d.edits.device_nodes[0].path, "/dev/dri/card1");
  ASSERT_THAT(d.edits.hooks, SizeIs(1));
  EXPECT_EQ(d.edits.hooks[0].path, "/usr/bin/vendor-hook");
  EXPECT_FALSE(fs::exists(cdi_root));
}

// Fail closed: a claim with a device whose edits are not recorded comes back with an error
// naming the device; an unreadable checkpoint is an error of the whole view.
TEST_F(AdaptersTest, CheckpointViewReportsClaimsItCannotResolve) {
  ASSERT_OK_AND_ASSIGN(auto checkpoint,
                       dra_kubelet::StateClaimRecordStore::Open((dir_ / "state").string(),
                                                                "gpu.devlet.io", "/var/run/cdi"));
  dra_kubelet::ClaimRecord record = CompletedRecord({"ml", "train", "claim-uid"}, "gpu", "gpu-0");
  record.devices[0].cdi_device_ids = {"k8s.gpu.devlet.io/claim=claim-uid-gpu-0"};
  ASSERT_OK(checkpoint->Put(record));  // no container_edits: an older devlet's record
  CheckpointClaimsView view(checkpoint->store());
  ASSERT_OK_AND_ASSIGN(std::vector<nri::PreparedClaim> claims, view.ClaimsForPod("pod-uid"));
  ASSERT_THAT(claims, SizeIs(1));
  EXPECT_THAT(claims[0].error,
              ::testing::HasSubstr("no CDI edits are recorded for its device node-1/gpu-0"));

  // The checkpoint itself cannot be read.
  std::ofstream((dir_ / "state" / "checkpoint.json").string(), std::ios::trunc) << "garbage";
  EXPECT_THAT(view.ClaimsForPod("pod-uid"),
              StatusIs(absl::StatusCode::kDataLoss,
                       ::testing::HasSubstr("reading devlet's checkpoint of prepared claims")));
}

TEST_F(AdaptersTest, CheckpointViewMapsDraAllocatedCpusToCpuMillisAndMemory) {
  ASSERT_OK_AND_ASSIGN(auto checkpoint, dra_kubelet::StateClaimRecordStore::Open(
                                            (dir_ / "state").string(), "devlet.io", "/cdi"));
  dra_kubelet::ClaimRecord record =
      CompletedRecord({"ml", "cpus", "cpu-claim-uid"}, "cpu", "cpu-numa1");
  record.devices[0].prepared.attributes["type"] = std::string("cpu");
  record.devices[0].share_id = "8a1c2d3e-0000-4000-8000-000000000001";
  record.devices[0].container_edits = cdi::ContainerEdits{};
  record.devices[0].cpu_millis = 2500;
  record.devices[0].memory_bytes = 4LL << 30;
  // A GPU's consumed "memory" is not a container memory limit.
  dra_kubelet::PreparedDeviceRecord gpu = record.devices[0];
  gpu.device = "gpu-0";
  gpu.share_id.reset();
  gpu.prepared.attributes["type"] = std::string("gpu");
  record.devices.push_back(gpu);
  ASSERT_OK(checkpoint->Put(record));

  CheckpointClaimsView view(checkpoint->store());
  ASSERT_OK_AND_ASSIGN(std::vector<nri::PreparedClaim> claims, view.ClaimsForPod("pod-uid"));
  ASSERT_THAT(claims, SizeIs(1));
  ASSERT_THAT(claims[0].devices, SizeIs(2));
  // The device's own allocation: only containers that get the device get the limits.
  EXPECT_EQ(claims[0].devices[0].share_id, "8a1c2d3e-0000-4000-8000-000000000001");
  EXPECT_EQ(claims[0].devices[0].cpu_millis, 2500);
  EXPECT_EQ(claims[0].devices[0].memory_limit_bytes, 4LL << 30);
  EXPECT_FALSE(claims[0].cpu_millis.has_value());
  EXPECT_THAT(claims[0].devices[0].numa_nodes, ElementsAre(1));
  EXPECT_FALSE(claims[0].devices[1].memory_limit_bytes.has_value());

  // KEP-5517: the kubelet sizes them; only the NUMA alignment is served.
  view.SetKubeletSizesDraResources(true);
  ASSERT_OK_AND_ASSIGN(claims, view.ClaimsForPod("pod-uid"));
  EXPECT_FALSE(claims[0].devices[0].cpu_millis.has_value());
  EXPECT_THAT(claims[0].devices[0].numa_nodes, ElementsAre(1));
}

// The claim's consumed capacity goes through kube::Quantity exactly (fractions, binary suffixes,
// values at the int64 bound) when the claim is read for prepare.
TEST_F(AdaptersTest, ClaimSourceReadsCpuAndMemoryQuantitiesExactly) {
  ASSERT_OK_AND_ASSIGN(auto manifests, kube::ManifestStore::Open({.dir = (dir_ / "m").string()}));
  StoreClaimSource source(*manifests);
  struct Case {
    std::string cpus;
    std::string memory;
    std::optional<std::int64_t> cpu_millis;
    std::optional<std::int64_t> memory_bytes;
  };

  const std::vector<Case> cases = {
      {"100m", "1.5Gi", 100, 1610612736},
      {"1.5", "9007199254740993", 1500, 9007199254740993},
      {"0.0001", "9223372036854775807", 1, INT64_MAX},
      {"9223372036854775807m", "7.5Ei", INT64_MAX, 8646911284551352320},
      // Past int64: no limit from the claim (logged), never a wrapped or rounded one.
      {"9223372036854775808m", "8Ei", std::nullopt, std::nullopt},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.cpus + " " + c.memory);
    const std::string uid = "cpu-claim-" + std::to_string(i);
    const std::string name = "cpus-" + std::to_string(i);
    ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> objects, kube::Decode(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: )" + name + ", namespace: ml, uid: " + uid + R"(}
spec:
  devices:
    requests:
    - name: cpu
      exactly:
        deviceClassName: cpu.devlet.io
        capacity: {requests: {cpus: ")" + c.cpus + R"(", memory: ")" + c.memory +
                                                                             R"("}}
status:
  allocation:
    devices:
      results:
      - {request: cpu, driver: devlet.io, pool: node-1, device: cpu-numa1,
         consumedCapacity: {cpus: ")" + c.cpus + R"(", memory: ")" + c.memory +
                                                                             R"("}}
)",
                                                                         {}));
    ASSERT_THAT(objects, SizeIs(1));
    ASSERT_OK(manifests->Create(objects[0]).status());
    ASSERT_OK_AND_ASSIGN(dra_kubelet::ResourceClaim claim, source.GetClaim("ml", name, uid));
    ASSERT_THAT(claim.results, SizeIs(1));
    EXPECT_EQ(claim.results[0].cpu_millis, c.cpu_millis);
    EXPECT_EQ(claim.results[0].memory_bytes, c.memory_bytes);
  }
}

// A node upgraded from the previous format (state/tests/data/v2: checkpoint.json, its journal,
// the record annotation, written by the devlet before edits were recorded) keeps its prepared
// claims: the kubelet plugin's start (RefreshFiles) records each claim's edits and the CPU
// claim's allocated CPU/memory (read once from its claim), writes them in the new format, and the
// NRI view then serves them from state alone.
TEST_F(AdaptersTest, CheckpointOfThePreviousFormatIsUpgradedAtStart) {
  const fs::path state_dir = dir_ / "state";
  fs::create_directories(state_dir);
  for (const char* name : {"checkpoint.json", "checkpoint.journal"}) {
    fs::copy_file(fs::path(DEVLET_STATE_TESTDATA) / "v2" / name, state_dir / name);
  }
  ASSERT_OK_AND_ASSIGN(auto manifests, kube::ManifestStore::Open({.dir = (dir_ / "m").string()}));
  ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> objects, kube::Decode(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: cpus, namespace: ml, uid: cpu-claim-uid}
spec:
  devices:
    requests:
    - name: cpu
      exactly:
        deviceClassName: cpu.devlet.io
        capacity: {requests: {cpus: "1500m", memory: 2Gi}}
status:
  allocation:
    devices:
      results:
      - {request: cpu, driver: devlet.io, pool: node-1, device: cpu-numa1,
         shareID: 8a1c2d3e-0000-4000-8000-000000000001, consumedCapacity: {cpus: "1500m", memory: 2Gi}}
)",
                                                                       {}));
  ASSERT_OK(manifests->Create(objects[0]).status());
  const std::string cdi_root = (dir_ / "cdi").string();
  state::StoreOptions options{.dir = state_dir.string(), .journal_bytes = 16384};
  {
    ASSERT_OK_AND_ASSIGN(auto checkpoint,
                         dra_kubelet::StateClaimRecordStore::Open(options, "devlet.io", cdi_root));
    // Before the upgrade the view fails closed for the old records.
    CheckpointClaimsView view(checkpoint->store());
    ASSERT_OK_AND_ASSIGN(std::vector<nri::PreparedClaim> claims, view.ClaimsForPod("pod-uid"));
    ASSERT_THAT(claims, SizeIs(2));
    EXPECT_THAT(claims[0].error, ::testing::HasSubstr("no CDI edits are recorded"));

    StoreClaimSource source(*manifests);
    DevicesBackend backend({.pool = "node-1"});
    dra_kubelet::CdiSpecWriter cdi(cdi_root);
    dra_kubelet::ClaimPreparer preparer({.driver_name = "devlet.io"}, source, backend, cdi,
                                        *checkpoint);
    ASSERT_OK(preparer.RefreshFiles());
  }
  // Written in the new format: a fresh store (a restarted devlet) reads the recorded edits.
  ASSERT_OK_AND_ASSIGN(auto checkpoint,
                       dra_kubelet::StateClaimRecordStore::Open(options, "devlet.io", cdi_root));
  ASSERT_OK_AND_ASSIGN(std::vector<dra_kubelet::ClaimRecord> records, checkpoint->List());
  ASSERT_THAT(records, SizeIs(3));  // nothing prepared is lost (the PrepareStarted one included)
  CheckpointClaimsView view(checkpoint->store());
  ASSERT_OK_AND_ASSIGN(std::vector<nri::PreparedClaim> claims, view.ClaimsForPod("pod-uid"));
  ASSERT_THAT(claims, SizeIs(2));
  for (const nri::PreparedClaim& claim : claims) {
    SCOPED_TRACE(claim.name);
    EXPECT_EQ(claim.error, "");
    ASSERT_THAT(claim.devices, SizeIs(1));
    if (claim.name == "train") {
      const nri::CdiEdits& edits = claim.devices[0].edits;
      EXPECT_THAT(edits.env, Contains("A=1"));
      // The container marker this devlet's CDI spec adds (state/container_marker.h).
      EXPECT_THAT(edits.env, Contains(::testing::StartsWith("DEVLET_CLAIM_gpu_claim_uid_0=")));
      ASSERT_THAT(edits.device_nodes, SizeIs(2));
      EXPECT_EQ(edits.device_nodes[1].host_path, "/sim/dev/vfio/vfio");
      ASSERT_THAT(edits.mounts, SizeIs(1));
      EXPECT_EQ(claim.devices[0].cpu_millis, std::nullopt);
    } else {
      EXPECT_EQ(claim.name, "cpus");
      EXPECT_EQ(claim.devices[0].cpu_millis, 1500);
      EXPECT_EQ(claim.devices[0].memory_limit_bytes, 2LL << 30);
    }
  }
  // Nothing left to upgrade: the journal has the upgrade's record and the snapshot is unchanged.
}

// Writes the checkpoint, journal, annotation and per-device journal formats of this devlet into
// $DEVLET_FIXTURE_OUT, for the upgrade test of the next format (state/tests/data/v2). Run on
// purpose only: node_test --gtest_also_run_disabled_tests
//   --gtest_filter='*WriteTodaysStateFormats*'
TEST_F(AdaptersTest, DISABLED_WriteTodaysStateFormats) {
  const char* out_env = std::getenv("DEVLET_FIXTURE_OUT");
  ASSERT_NE(out_env, nullptr);
  const fs::path out = out_env;
  fs::remove_all(out);
  const std::string cdi_root = "/var/run/cdi";
  state::StoreOptions options{.dir = (out / "state").string(), .journal_bytes = 16384,
                              .background_compaction = false};
  // Claim A goes into the snapshot (folded in by the second Open), claims B and C stay in the
  // journal.
  dra_kubelet::ClaimRecord a = CompletedRecord({"ml", "train", "gpu-claim-uid"}, "gpu", "gpu-1");
  a.pod_claim_name = "gpus";
  a.pod_uids = {"pod-uid", "pod-uid-2"};
  a.metadata_generation = 2;
  dra_kubelet::PreparedDeviceRecord& gpu = a.devices[0];
  gpu.requests = {"gpu", "gpu/large"};
  gpu.config.env = {{"A", "1"}};
  gpu.config.bind_driver = "vfio-pci";
  gpu.prepared.edits.env = {"DEVLET_DEVICE_GPU_1=node-1/gpu-1", "A=1",
                            "DEVLET_CLAIM_gpu_claim_uid_0=claim=gpu-claim-uid request=gpu "
                            "device=node-1/gpu-1"};
  gpu.prepared.edits.device_nodes = {{"/dev/vfio/12", "", "rw"}, {"/dev/vfio/vfio", "/sim/dev/vfio/vfio", ""}};
  gpu.prepared.edits.mounts = {{"/var/run/devlet/x", "/x", {"ro", "bind"}}};
  gpu.prepared.attributes["resource.kubernetes.io/pciBusID"] = std::string("0000:18:00.0");
  gpu.prepared.attributes["productName"] = std::string("H100");
  gpu.prepared.attributes["virtualized"] = false;
  gpu.prepared.attributes["driverVersion"] = dra_kubelet::VersionValue{"550.54.15"};
  gpu.prepared.network_data = dra_kubelet::NetworkData{"ens1f0np0", {"10.244.1.7/32"}, "b8:3f:d2:0a:00:10"};
  gpu.cdi_device_ids = {"k8s.devlet.io/claim=gpu-claim-uid-gpu-1"};
  a.cdi_spec_files = {"k8s.devlet.io-claim_gpu-claim-uid.json"};
  a.metadata_files = {"/var/run/devlet/metadata/gpu-claim-uid/gpu.json"};
  {
    ASSERT_OK_AND_ASSIGN(auto checkpoint,
                         dra_kubelet::StateClaimRecordStore::Open(options, "devlet.io", cdi_root));
    ASSERT_OK(checkpoint->Put(a));
  }
  ASSERT_OK_AND_ASSIGN(auto checkpoint,
                       dra_kubelet::StateClaimRecordStore::Open(options, "devlet.io", cdi_root));
  dra_kubelet::ClaimRecord b = CompletedRecord({"ml", "cpus", "cpu-claim-uid"}, "cpu", "cpu-numa1");
  b.devices[0].prepared.attributes["type"] = std::string("cpu");
  b.devices[0].share_id = "8a1c2d3e-0000-4000-8000-000000000001";
  b.devices[0].admin_access = true;
  b.devices[0].cdi_device_ids = {"k8s.devlet.io/claim=cpu-claim-uid-cpu-numa1"};
  b.cdi_spec_files = {"k8s.devlet.io-claim_cpu-claim-uid.json"};
  ASSERT_OK(checkpoint->Commit({b}, {}));
  dra_kubelet::ClaimRecord c = CompletedRecord({"ml", "starting", "started-claim-uid"}, "nic", "nic-0");
  c.state = dra_kubelet::ClaimState::kPrepareStarted;
  c.devices[0].prepared = {};
  ASSERT_OK(checkpoint->CommitDeferred({c}, {}));
  ASSERT_OK(checkpoint->store().Flush());

  // The per-device preparation journal of claim A's gpu-1 (vfio-pci binding).
  ASSERT_OK(devices::testing::AddGpuServer(fake_));
  (void)fake_.AddDriver("vfio-pci");
  DevicesBackend backend({.pool = "node-1", .sysfs = &fake_, .journal_dir = (out / "devices").string()});
  backend.SetDevices(GpuServerDevices());
  dra_kubelet::DevicePrepareRequest request = Request("gpu-1");
  request.claim = a.claim;
  request.config.bind_driver = "vfio-pci";
  ASSERT_OK(backend.Prepare(request).status());
  ASSERT_TRUE(fs::exists(out / "devices" / "gpu-claim-uid_gpu-1.json"));
}

}  // namespace
}  // namespace devlet::node
