#include "devlet/devices/actions.h"
#include "devlet/devices/device_nodes.h"

#include <cerrno>
#include <filesystem>
#include <memory>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/profile.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::devices {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::AddGpuServer;
using testing::FakePciDevice;
using testing::FakeSysfs;

constexpr char kGpu[] = "0000:18:00.0";
constexpr char kPf[] = "0000:1a:00.0";

// Records journal entries, and checks each is announced before the sysfs write happens.
struct RecordingJournal {
  FakeSysfs* fake = nullptr;
  std::vector<JournalEntry> entries;
  std::vector<size_t> writes_at_entry;
  std::string fail_on;  // fail the step whose text contains this

  Journal AsJournal() {
    return [this](const JournalEntry& entry) -> absl::Status {
      if (!fail_on.empty() && entry.step.find(fail_on) != std::string::npos) {
        return Unavailable("checkpoint is read-only");
      }
      entries.push_back(entry);
      writes_at_entry.push_back(fake->writes().size());
      return absl::OkStatus();
    };
  }
  std::vector<std::string> Steps() const {
    std::vector<std::string> steps;
    for (const auto& e : entries) steps.push_back(e.step);
    return steps;
  }
};

class ActionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(AddGpuServer(fake_));
    journal_.fake = &fake_;
  }
  Preparer MakePreparer() {
    return Preparer(fake_, journal_.AsJournal(),
                    {.vf_wait_timeout = std::chrono::milliseconds(200),
                     .poll_interval = std::chrono::milliseconds(5)});
  }
  std::string Override(const std::string& address) {
    return ReadTrimmed(fake_, "bus/pci/devices/" + address + "/driver_override").value_or("?");
  }

  FakeSysfs fake_;
  RecordingJournal journal_;
};

// Kernel state (sysfs bindings, VFs, mdevs) is gone after a reboot; a command may persist.
TEST(ActionSurvivesReboot, OnlyCommandsMayPersist) {
  EXPECT_FALSE(ActionSurvivesReboot(ActionKind::kVfioBind));
  EXPECT_FALSE(ActionSurvivesReboot(ActionKind::kSriovNumVfs));
  EXPECT_FALSE(ActionSurvivesReboot(ActionKind::kMdev));
  EXPECT_TRUE(ActionSurvivesReboot(ActionKind::kCommand));
  EXPECT_TRUE(ActionSurvivesReboot(static_cast<ActionKind>(99)));
}

TEST_F(ActionsTest, BindVfioJournalsEachStepFirstAndUndoRestoresTheDriver) {
  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(ActionRecord record, preparer.BindVfio(kGpu));
  EXPECT_EQ(fake_.BoundDriver(kGpu), "vfio-pci");
  EXPECT_EQ(record.kind, ActionKind::kVfioBind);
  EXPECT_EQ(record.original_driver, "nvidia");
  EXPECT_EQ(record.original_override, "");
  EXPECT_FALSE(record.noop);
  EXPECT_THAT(journal_.Steps(),
              ElementsAre("write vfio-pci to bus/pci/devices/0000:18:00.0/driver_override",
                          "write 0000:18:00.0 to bus/pci/drivers/nvidia/unbind",
                          "write 0000:18:00.0 to bus/pci/drivers_probe"));
  EXPECT_THAT(journal_.writes_at_entry, ElementsAre(0u, 1u, 2u));  // each before its write
  EXPECT_THAT(fake_.writes(),
              ElementsAre("bus/pci/devices/0000:18:00.0/driver_override=vfio-pci",
                          "bus/pci/drivers/nvidia/unbind=0000:18:00.0",
                          "bus/pci/drivers_probe=0000:18:00.0"));
  for (const JournalEntry& entry : journal_.entries) EXPECT_EQ(entry.action, record);

  // Binding again is a no-op.
  ASSERT_OK_AND_ASSIGN(ActionRecord again, preparer.BindVfio(kGpu));
  EXPECT_TRUE(again.noop);
  EXPECT_OK(preparer.Undo(again));
  EXPECT_EQ(fake_.BoundDriver(kGpu), "vfio-pci");

  journal_.entries.clear();
  ASSERT_OK(preparer.Undo(record));
  EXPECT_EQ(fake_.BoundDriver(kGpu), "nvidia");
  EXPECT_EQ(Override(kGpu), "(null)");
  ASSERT_EQ(journal_.entries.size(), 3u);
  for (const JournalEntry& entry : journal_.entries) {
    EXPECT_EQ(entry.phase, JournalEntry::Phase::kUndo);
  }
  EXPECT_EQ(journal_.entries[0].step, "write 0000:18:00.0 to bus/pci/drivers/vfio-pci/unbind");
  // Undo is idempotent.
  size_t writes = fake_.writes().size();
  EXPECT_OK(preparer.Undo(record));
  EXPECT_EQ(fake_.writes().size(), writes);
}

TEST_F(ActionsTest, DeviceNodesFollowTheBinding) {
  ASSERT_OK_AND_ASSIGN(DeviceNodeSet gpu, DeviceNodesFor(fake_, kGpu));
  EXPECT_THAT(gpu.device_nodes, ElementsAre("/dev/dri/card1", "/dev/dri/renderD129"));
  EXPECT_THAT(gpu.shared_nodes, IsEmpty());
  ASSERT_OK_AND_ASSIGN(DeviceNodeSet nic, DeviceNodesFor(fake_, "0000:9c:00.0"));
  EXPECT_THAT(nic.device_nodes, ElementsAre("/dev/infiniband/uverbs1"));
  EXPECT_THAT(nic.shared_nodes, ElementsAre("/dev/infiniband/rdma_cm"));

  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(ActionRecord record, preparer.BindVfio(kGpu));
  ASSERT_OK_AND_ASSIGN(DeviceNodeSet vfio, DeviceNodesFor(fake_, kGpu));
  EXPECT_THAT(vfio.device_nodes, ElementsAre("/dev/vfio/10"));
  EXPECT_THAT(vfio.shared_nodes, ElementsAre("/dev/vfio/vfio"));
  // With iommufd: the device's cdev and /dev/iommu as well.
  const std::filesystem::path root(fake_.Root());
  std::filesystem::create_directories(root / fake_.DeviceDir(kGpu) / "vfio-dev/vfio3");
  ASSERT_OK_AND_ASSIGN(vfio, DeviceNodesFor(fake_, kGpu));
  EXPECT_THAT(vfio.device_nodes, ElementsAre("/dev/vfio/10"));  // no iommu misc device yet
  std::filesystem::create_directories(root / "class/misc/iommu");
  ASSERT_OK_AND_ASSIGN(vfio, DeviceNodesFor(fake_, kGpu));
  EXPECT_THAT(vfio.device_nodes, ElementsAre("/dev/vfio/10", "/dev/vfio/devices/vfio3"));
  EXPECT_THAT(vfio.shared_nodes, ElementsAre("/dev/vfio/vfio", "/dev/iommu"));
  ASSERT_OK(preparer.Undo(record));
  EXPECT_THAT(DeviceNodesFor(fake_, "0000:77:00.0"), StatusIs(absl::StatusCode::kNotFound));
}

// A /proc whose NVIDIA driver never grants the unbindLock.
class RefusingProc final : public Sysfs {
 public:
  explicit RefusingProc(Sysfs& real) : real_(real) {}
  std::string Root() const override { return real_.Root(); }
  absl::StatusOr<std::string> ReadFile(std::string_view path) const override {
    return real_.ReadFile(path);
  }
  absl::Status WriteFile(std::string_view path, std::string_view value) override {
    if (path.ends_with("unbindLock")) return absl::OkStatus();
    return real_.WriteFile(path, value);
  }
  bool Exists(std::string_view path) const override { return real_.Exists(path); }
  absl::StatusOr<std::string> ReadLink(std::string_view path) const override {
    return real_.ReadLink(path);
  }
  absl::StatusOr<std::string> RealPath(std::string_view path) const override {
    return real_.RealPath(path);
  }
  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view path) const override {
    return real_.ListDir(path);
  }

 private:
  Sysfs& real_;
};

// A fake /proc/driver/nvidia with the GPU's information and unbindLock.
std::unique_ptr<Sysfs> FakeNvidiaProc(const std::string& root, const std::string& address) {
  std::filesystem::path dir = std::filesystem::path(root) / "driver/nvidia/gpus" / address;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "information") << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 114\n"
                                        "GPU UUID: \t GPU-6b9d6c2e-1f0a-4c7e-9d55-0f1e2d3c4b5a\n"
                                        "Video BIOS: \t 96.00.94.00.01\nDevice Minor: \t 3\n";
  std::ofstream(dir / "unbindLock") << "0\n";
  return NewRealSysfs(root);
}

TEST_F(ActionsTest, NvidiaUnbindLockAndDeviceNodes) {
  const std::string proc_root = fake_.Root() + "/proc";
  std::unique_ptr<Sysfs> procfs = FakeNvidiaProc(proc_root, kGpu);
  ASSERT_OK_AND_ASSIGN(DeviceNodeSet nodes, DeviceNodesFor(fake_, kGpu, procfs.get()));
  EXPECT_THAT(nodes.device_nodes, ElementsAre("/dev/nvidia3", "/dev/dri/card1", "/dev/dri/renderD129"));
  EXPECT_THAT(nodes.shared_nodes,
              ElementsAre("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"));
  NvidiaInfo info = ReadNvidiaInfo(*procfs, kGpu);
  EXPECT_EQ(info.uuid, "GPU-6b9d6c2e-1f0a-4c7e-9d55-0f1e2d3c4b5a");
  EXPECT_EQ(info.minor, 3);

  Preparer preparer(fake_, journal_.AsJournal(), {.procfs = procfs.get()});
  ASSERT_OK_AND_ASSIGN(ActionRecord record, preparer.BindVfio(kGpu));
  EXPECT_EQ(journal_.Steps().front(), "write 1 to /proc/driver/nvidia/gpus/0000:18:00.0/unbindLock");
  EXPECT_EQ(ReadTrimmed(*procfs, "driver/nvidia/gpus/0000:18:00.0/unbindLock").value_or(""), "1");
  ASSERT_OK(preparer.Undo(record));

  // A lock the driver refuses (a host process holds the GPU): the write "succeeds" but reads back
  // 0. Nothing else happens.
  const std::string busy = "0000:19:00.0";
  std::unique_ptr<Sysfs> busy_proc = FakeNvidiaProc(proc_root, busy);
  RefusingProc refusing(*busy_proc);
  Preparer refusing_preparer(fake_, nullptr, {.procfs = &refusing});
  auto refused = refusing_preparer.BindVfio(busy);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("binding 0000:19:00.0 to vfio-pci: the GPU is in use")));
  EXPECT_EQ(fake_.BoundDriver(busy), "nvidia");
  EXPECT_EQ(Override(busy), "(null)");
}

TEST_F(ActionsTest, FailedSysfsWriteLeavesTheHostAsItWas) {
  fake_.FailWrites("drivers_probe", EIO);
  Preparer preparer = MakePreparer();
  auto record = preparer.BindVfio(kGpu);
  ASSERT_FALSE(record.ok());
  EXPECT_THAT(Message(record.status()), HasSubstr("binding 0000:18:00.0 to vfio-pci"));
  EXPECT_THAT(Message(record.status()), HasSubstr("Input/output error"));
  // Rolled back: override cleared, nvidia bound again (directly, as drivers_probe fails).
  EXPECT_EQ(fake_.BoundDriver(kGpu), "nvidia");
  EXPECT_EQ(Override(kGpu), "(null)");
}

TEST_F(ActionsTest, JournalRefusalStopsBeforeTheStep) {
  journal_.fail_on = "unbind";
  Preparer preparer = MakePreparer();
  auto record = preparer.BindVfio(kGpu);
  EXPECT_THAT(record, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("checkpoint is read-only")));
  EXPECT_EQ(fake_.BoundDriver(kGpu), "nvidia");
  EXPECT_EQ(Override(kGpu), "(null)");
  for (const std::string& write : fake_.writes()) EXPECT_THAT(write, ::testing::Not(HasSubstr("unbind")));
}

TEST_F(ActionsTest, VfioPreconditions) {
  Preparer preparer = MakePreparer();
  EXPECT_THAT(preparer.BindVfio("0000:77:00.0"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("the PCI device is gone")));

  FakePciDevice no_iommu{.address = "0000:c1:00.0", .vendor_id = 0x10de, .device_id = 0x2330,
                         .class_code = 0x030200, .driver = "nvidia"};
  ASSERT_OK(fake_.AddPciDevice(no_iommu));
  EXPECT_THAT(preparer.BindVfio("0000:c1:00.0"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no IOMMU group")));

  // Two functions in one IOMMU group, the other one still on a host driver.
  FakePciDevice audio{.address = "0000:18:00.1", .parent = "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0",
                      .vendor_id = 0x10de, .device_id = 0x22bb, .class_code = 0x040300,
                      .driver = "snd_hda_intel", .iommu_group = 10};
  ASSERT_OK(fake_.AddDriver("snd_hda_intel"));
  ASSERT_OK(fake_.AddPciDevice(audio));
  EXPECT_THAT(preparer.BindVfio(kGpu),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("0000:18:00.1 in the same IOMMU group 10 is bound to snd_hda_intel")));
  EXPECT_EQ(fake_.BoundDriver(kGpu), "nvidia");
}

TEST(ActionsStandaloneTest, VfioDriverMustBeLoaded) {
  FakeSysfs fake;
  ASSERT_OK(fake.AddDriver("nvidia"));
  ASSERT_OK(fake.AddPciDevice({.address = "0000:18:00.0", .vendor_id = 0x10de, .device_id = 0x2330,
                               .class_code = 0x030200, .driver = "nvidia", .iommu_group = 3}));
  Preparer preparer(fake, nullptr);
  EXPECT_THAT(preparer.BindVfio("0000:18:00.0"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("modprobe vfio-pci")));
}

TEST_F(ActionsTest, UndoAfterDeviceRemovalSucceeds) {
  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(ActionRecord record, preparer.BindVfio(kGpu));
  ASSERT_OK(fake_.RemovePciDevice(kGpu));
  EXPECT_OK(preparer.Undo(record));
}

TEST_F(ActionsTest, SriovCreatesAndRemovesVfs) {
  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(ActionRecord record, preparer.EnsureNumVfs(kPf, 4));
  EXPECT_EQ(record.previous_num_vfs, 0);
  EXPECT_EQ(record.num_vfs, 4);
  EXPECT_THAT(journal_.Steps(), ElementsAre("write 4 to bus/pci/devices/0000:1a:00.0/sriov_numvfs"));
  EXPECT_THAT(preparer.VfAddress(kPf, 3), ::devlet::testing::IsOkAndHolds(std::string("0000:1a:00.5")));
  EXPECT_EQ(fake_.BoundDriver("0000:1a:00.5"), "mlx5_core");

  ASSERT_OK_AND_ASSIGN(ActionRecord fewer, preparer.EnsureNumVfs(kPf, 2));
  EXPECT_TRUE(fewer.noop);

  ASSERT_OK(preparer.Undo(record));
  EXPECT_EQ(ReadInt(fake_, "bus/pci/devices/0000:1a:00.0/sriov_numvfs").value_or(-1), 0);
  EXPECT_FALSE(fake_.Exists("bus/pci/devices/0000:1a:00.2"));
  EXPECT_THAT(preparer.VfAddress(kPf, 0), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(ActionsTest, SriovBadRequests) {
  Preparer preparer = MakePreparer();
  EXPECT_THAT(preparer.EnsureNumVfs(kPf, 9),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("supports 1 to 8 VFs")));
  EXPECT_THAT(preparer.EnsureNumVfs(kGpu, 1),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not SR-IOV capable")));
  ASSERT_OK(fake_.WriteFile("bus/pci/devices/0000:1a:00.0/sriov_numvfs", "2"));
  EXPECT_THAT(preparer.EnsureNumVfs(kPf, 4),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already has 2 VFs")));
  EXPECT_EQ(ReadInt(fake_, "bus/pci/devices/0000:1a:00.0/sriov_numvfs").value_or(-1), 2);
  ASSERT_OK(fake_.WriteFile("bus/pci/devices/0000:1a:00.0/sriov_numvfs", "0"));
  fake_.FailWrites("sriov_numvfs", ENOMEM);
  auto failed = preparer.EnsureNumVfs(kPf, 4);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(Message(failed.status()), HasSubstr("Cannot allocate memory"));
  EXPECT_EQ(ReadInt(fake_, "bus/pci/devices/0000:1a:00.0/sriov_numvfs").value_or(-1), 0);
}

class PrepareDeviceTest : public ActionsTest {
 protected:
  DeviceSet Build(const std::string& yaml) {
    auto discoverer = NewDiscoverer({.sysfs_root = fake_.Root(),
                                     .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) +
                                                     "/dgx-2s-8gpu-2nic.xml"});
    auto inventory = discoverer->Discover();
    EXPECT_OK(inventory);
    auto config = ParseProfileConfig(yaml);
    EXPECT_OK(config);
    auto set = BuildDeviceSet(*inventory, *config);
    EXPECT_OK(set);
    return *set;
  }
  std::string Scratch(const std::string& name) {
    return (std::filesystem::path(fake_.Root()) / name).string();
  }
};

TEST_F(PrepareDeviceTest, VfDeviceCreatesVfsAndBindsItsVf) {
  DeviceSet set = Build(
      "profiles:\n- name: vf\n  kind: vf\n  match: {interfaces: [ens1f0np0]}\n  numVFs: 4\n  vfio: true\n");
  const DraDevice* device = set.Find("vf-0-vf-2");
  ASSERT_NE(device, nullptr);
  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(std::vector<ActionRecord> done, preparer.Prepare(*device));
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].kind, ActionKind::kSriovNumVfs);
  EXPECT_EQ(done[0].previous_autoprobe, 1);
  EXPECT_EQ(done[1].kind, ActionKind::kVfioBind);
  EXPECT_EQ(done[1].device, "0000:1a:00.4");
  EXPECT_EQ(done[1].original_driver, "");  // autoprobe was off: the VF came up unbound
  EXPECT_THAT(journal_.Steps(),
              ElementsAre("write 0 to bus/pci/devices/0000:1a:00.0/sriov_drivers_autoprobe",
                          "write 4 to bus/pci/devices/0000:1a:00.0/sriov_numvfs",
                          "write vfio-pci to bus/pci/devices/0000:1a:00.4/driver_override",
                          "write 0000:1a:00.4 to bus/pci/drivers_probe"));
  EXPECT_EQ(fake_.BoundDriver("0000:1a:00.4"), "vfio-pci");
  EXPECT_EQ(fake_.BoundDriver("0000:1a:00.3"), "");

  ASSERT_OK(preparer.Unprepare(done));
  EXPECT_EQ(fake_.BoundDriver("0000:1a:00.4"), "");
  EXPECT_TRUE(fake_.Exists("bus/pci/devices/0000:1a:00.4"));  // VFs stay for their siblings
  ASSERT_OK(preparer.Undo(done[0]));
  EXPECT_FALSE(fake_.Exists("bus/pci/devices/0000:1a:00.4"));
  EXPECT_EQ(ReadInt(fake_, "bus/pci/devices/0000:1a:00.0/sriov_drivers_autoprobe").value_or(-1), 1);
}

TEST_F(PrepareDeviceTest, InitAndCleanupCommandsAroundVfioBinding) {
  const std::string out = Scratch("init.out");
  const std::string yaml =
      "profiles:\n- name: gpu\n  kind: gpu\n  vfio: true\n"
      "  init: {command: [/bin/sh, -c, 'echo \"$DEVLET_DEVICE $DEVLET_PCI_ADDRESS\" > " + out + "']}\n"
      "  cleanup: {command: [/bin/sh, -c, 'echo cleaned >> " + out + "']}\n";
  DeviceSet set = Build(yaml);
  const DraDevice* gpu = set.Find("gpu-0");
  ASSERT_NE(gpu, nullptr);
  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(std::vector<ActionRecord> done, preparer.Prepare(*gpu));
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(fake_.BoundDriver(kGpu), "vfio-pci");
  std::ifstream in(out);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), "gpu-0 0000:18:00.0\n");
  EXPECT_THAT(journal_.Steps().back(), HasSubstr("run /bin/sh -c"));

  ASSERT_OK(preparer.Unprepare(done));
  EXPECT_EQ(fake_.BoundDriver(kGpu), "nvidia");
  std::ifstream again(out);
  std::stringstream after;
  after << again.rdbuf();
  EXPECT_EQ(after.str(), "gpu-0 0000:18:00.0\ncleaned\n");
}

TEST_F(PrepareDeviceTest, FailingOrHangingInitRollsEverythingBack) {
  const std::string marker = Scratch("cleanup.marker");
  const std::string yaml =
      "profiles:\n- name: gpu\n  kind: gpu\n  vfio: true\n"
      "  init: {command: [/bin/sh, -c, 'echo no GPU firmware >&2; exit 4']}\n"
      "  cleanup: {command: [/bin/sh, -c, 'touch " + marker + "']}\n"
      "  attributes: {}\n";
  DeviceSet set = Build(yaml);
  Preparer preparer = MakePreparer();
  auto result = preparer.Prepare(*set.Find("gpu-1"));
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(Message(result.status()),
              HasSubstr("preparing gpu-1: init command for gpu-1: /bin/sh exited with status 4: no GPU firmware"));
  EXPECT_EQ(fake_.BoundDriver("0000:19:00.0"), "nvidia");
  EXPECT_TRUE(std::filesystem::exists(marker));

  DraDevice hanging = *set.Find("gpu-2");
  hanging.preparation.init = CommandLine{.argv = {"/bin/sleep", "30"}, .timeout_ms = 200};
  hanging.preparation.cleanup.reset();
  const auto start = std::chrono::steady_clock::now();
  auto hung = preparer.Prepare(hanging);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_THAT(hung, StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("did not finish")));
  EXPECT_EQ(fake_.BoundDriver("0000:39:00.0"), "nvidia");
}

TEST_F(PrepareDeviceTest, PartitionInitCommandLearnsWhichPartition) {
  const std::string out = Scratch("partition.out");
  const std::string yaml =
      "profiles:\n- name: gpu\n  kind: gpu\n  sharing: {mode: partitions, partitions: 4}\n"
      "  init: {command: [/bin/sh, -c, 'echo \"$DEVLET_PARENT_DEVICE $DEVLET_PARTITION/$DEVLET_PARTITIONS "
      "$DEVLET_PCI_ADDRESS\" > " + out + "']}\n";
  DeviceSet set = Build(yaml);
  const DraDevice* part = set.Find("gpu-7-part-2");
  ASSERT_NE(part, nullptr);
  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(std::vector<ActionRecord> done, preparer.Prepare(*part));
  ASSERT_EQ(done.size(), 1u);
  std::ifstream in(out);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), "gpu-7 2/4 0000:b9:00.0\n");
  EXPECT_OK(preparer.Unprepare(done));  // no cleanup configured: nothing to do
}

}  // namespace
}  // namespace devlet::devices

namespace devlet::devices {
namespace {

// ---- Mediated devices ----------------------------------------------------------------------

TEST_F(ActionsTest, MdevCreateAndRemove) {
  ASSERT_OK(fake_.AddMdevType(kGpu, "nvidia-63", "GRID H100-4C", 2));
  const std::string type_dir = "bus/pci/devices/0000:18:00.0/mdev_supported_types/nvidia-63";
  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(ActionRecord record, preparer.CreateMdev(kGpu, "nvidia-63"));
  EXPECT_EQ(record.kind, ActionKind::kMdev);
  EXPECT_EQ(record.device, kGpu);
  ASSERT_EQ(record.mdev_uuid.size(), 36u);
  EXPECT_EQ(record.mdev_uuid[14], '4');  // a version-4 UUID
  EXPECT_TRUE(fake_.Exists("bus/mdev/devices/" + record.mdev_uuid));
  EXPECT_EQ(ReadInt(fake_, type_dir + "/available_instances").value_or(-1), 1);
  EXPECT_THAT(journal_.Steps(), ElementsAre("write " + record.mdev_uuid + " to " + type_dir +
                                            "/create"));
  // A given UUID is used as given (lowercased).
  ASSERT_OK_AND_ASSIGN(ActionRecord second, preparer.CreateMdev(kGpu, "nvidia-63",
                                                                "A5B8C3D2-1111-4222-8333-444455556666"));
  EXPECT_EQ(second.mdev_uuid, "a5b8c3d2-1111-4222-8333-444455556666");
  EXPECT_THAT(preparer.CreateMdev(kGpu, "nvidia-63"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no instance")));

  ASSERT_OK(preparer.Undo(record));
  ASSERT_OK(preparer.Undo(second));
  EXPECT_FALSE(fake_.Exists("bus/mdev/devices/" + record.mdev_uuid));
  EXPECT_EQ(ReadInt(fake_, type_dir + "/available_instances").value_or(-1), 2);
  EXPECT_OK(preparer.Undo(record));  // idempotent
  EXPECT_EQ(journal_.entries.back().phase, JournalEntry::Phase::kUndo);
}

TEST_F(ActionsTest, MdevBadRequestsLeaveTheHostAsItWas) {
  ASSERT_OK(fake_.AddMdevType(kGpu, "nvidia-63", "GRID H100-4C", 1));
  ASSERT_OK(fake_.AddMdevType(kGpu, "nvidia-64", "GRID H100-8C", 1));
  Preparer preparer = MakePreparer();
  EXPECT_THAT(preparer.CreateMdev(kGpu, "nvidia-99"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("it offers [nvidia-63 nvidia-64]")));
  EXPECT_THAT(preparer.CreateMdev("0000:19:00.0", "nvidia-63"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no mediated device types")));
  EXPECT_THAT(preparer.CreateMdev(kGpu, "../../x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an mdev type name")));
  EXPECT_THAT(preparer.CreateMdev(kGpu, "nvidia-63", "not-a-uuid"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a UUID")));
  EXPECT_THAT(preparer.CreateMdev("0000:ff:00.0", "nvidia-63"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("gone")));
  fake_.FailWrites("/create", ENOSPC);
  auto failed = preparer.CreateMdev(kGpu, "nvidia-63");
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(Message(failed.status()), HasSubstr("No space left on device"));
  EXPECT_THAT(fake_.ListDir("bus/mdev/devices").value_or(std::vector<std::string>{}), IsEmpty());
}

// ---- SR-IOV ownership --------------------------------------------------------------------------

class SriovLedgerTest : public PrepareDeviceTest {
 protected:
  Preparer MakeLedgerPreparer(SriovLedger* ledger) {
    return Preparer(fake_, journal_.AsJournal(),
                    {.vf_wait_timeout = std::chrono::milliseconds(200),
                     .poll_interval = std::chrono::milliseconds(5),
                     .sriov_ledger = ledger});
  }
  int NumVfs() {
    return static_cast<int>(
        ReadInt(fake_, "bus/pci/devices/0000:1a:00.0/sriov_numvfs").value_or(-1));
  }
  int Autoprobe() {
    return static_cast<int>(
        ReadInt(fake_, "bus/pci/devices/0000:1a:00.0/sriov_drivers_autoprobe").value_or(-1));
  }
  const std::string kYaml =
      "profiles:\n- {name: vf, kind: vf, match: {interfaces: [ens1f0np0]}, numVFs: 4, vfio: true}\n";
};

TEST_F(SriovLedgerTest, LastUnprepareRemovesTheVfsDevletCreatedAlsoAcrossRestarts) {
  DeviceSet set = Build(kYaml);
  const std::string path = Scratch("sriov-ledger");
  std::vector<ActionRecord> first_done, second_done;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<SriovLedger> ledger, SriovLedger::Open(path));
    Preparer preparer = MakeLedgerPreparer(ledger.get());
    ASSERT_OK_AND_ASSIGN(first_done, preparer.Prepare(*set.Find("vf-0-vf-0")));
    ASSERT_OK_AND_ASSIGN(second_done, preparer.Prepare(*set.Find("vf-0-vf-3")));
    EXPECT_FALSE(first_done[0].noop);
    EXPECT_EQ(first_done[0].holder, "vf-0-vf-0");
    EXPECT_TRUE(second_done[0].noop);
    EXPECT_EQ(NumVfs(), 4);
    EXPECT_EQ(Autoprobe(), 0);
    auto entries = ledger->Entries();
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_THAT(entries.at(kPf).holders, ElementsAre("vf-0-vf-0", "vf-0-vf-3"));
    EXPECT_EQ(entries.at(kPf).creation.previous_autoprobe, 1);
    // The creator goes first: the VFs stay for vf-0-vf-3.
    ASSERT_OK(preparer.Unprepare(first_done));
    EXPECT_EQ(NumVfs(), 4);
    EXPECT_EQ(fake_.BoundDriver("0000:1a:00.2"), "");
    EXPECT_EQ(fake_.BoundDriver("0000:1a:00.5"), "vfio-pci");
  }
  // devlet restarts: the ledger file still knows the VFs are devlet's.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SriovLedger> ledger, SriovLedger::Open(path));
  ASSERT_EQ(ledger->Entries().size(), 1u);
  Preparer preparer = MakeLedgerPreparer(ledger.get());
  ASSERT_OK(preparer.Unprepare(second_done));
  EXPECT_EQ(NumVfs(), 0);
  EXPECT_EQ(Autoprobe(), 1);
  EXPECT_FALSE(fake_.Exists("bus/pci/devices/0000:1a:00.5"));
  EXPECT_THAT(ledger->Entries(), IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SriovLedger> reopened, SriovLedger::Open(path));
  EXPECT_THAT(reopened->Entries(), IsEmpty());
  EXPECT_OK(preparer.Unprepare(second_done));  // idempotent
}

TEST_F(SriovLedgerTest, VfsDevletDidNotCreateAreLeftAlone) {
  DeviceSet set = Build(kYaml);
  ASSERT_OK(fake_.WriteFile("bus/pci/devices/0000:1a:00.0/sriov_numvfs", "8"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SriovLedger> ledger, SriovLedger::Open(""));
  Preparer preparer = MakeLedgerPreparer(ledger.get());
  ASSERT_OK_AND_ASSIGN(std::vector<ActionRecord> done, preparer.Prepare(*set.Find("vf-0-vf-1")));
  EXPECT_TRUE(done[0].noop);
  EXPECT_THAT(ledger->Entries(), IsEmpty());
  ASSERT_OK(preparer.Unprepare(done));
  EXPECT_EQ(NumVfs(), 8);
  EXPECT_EQ(fake_.BoundDriver("0000:1a:00.3"), "mlx5_core");  // restored to its driver
}

TEST_F(SriovLedgerTest, FailedPrepareRemovesTheVfsItCreated) {
  DeviceSet set = Build(kYaml);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SriovLedger> ledger, SriovLedger::Open(Scratch("ledger")));
  Preparer preparer = MakeLedgerPreparer(ledger.get());
  fake_.FailWrites("drivers_probe", EIO);
  auto failed = preparer.Prepare(*set.Find("vf-0-vf-2"));
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(Message(failed.status()), HasSubstr("Input/output error"));
  EXPECT_EQ(NumVfs(), 0);
  EXPECT_EQ(Autoprobe(), 1);
  EXPECT_THAT(ledger->Entries(), IsEmpty());
  // A device that disappears mid-prepare: the PF is gone before the VFs are created.
  fake_.ClearFailures();
  ASSERT_OK(fake_.RemovePciDevice(kPf));
  EXPECT_THAT(preparer.Prepare(*set.Find("vf-0-vf-2")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("gone")));
  EXPECT_THAT(ledger->Entries(), IsEmpty());
}

TEST_F(SriovLedgerTest, LedgerFileErrorsAreClear) {
  const std::string path = Scratch("bad-ledger");
  std::ofstream(path) << "# header\npf=0000:1a:00.0 numVfs=four previousNumVfs=0 "
                         "previousAutoprobe=-1 holders=a\n";
  EXPECT_THAT(SriovLedger::Open(path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad-ledger line 2")));
  std::ofstream(path) << "garbage\n";
  EXPECT_THAT(SriovLedger::Open(path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not key=value")));
  // A ledger that cannot be written refuses the hold, and nothing is created.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SriovLedger> ledger,
                       SriovLedger::Open(Scratch("no-such-dir/ledger")));
  DeviceSet set = Build(kYaml);
  Preparer preparer = MakeLedgerPreparer(ledger.get());
  auto failed = preparer.Prepare(*set.Find("vf-0-vf-0"));
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(Message(failed.status()), HasSubstr("SR-IOV ledger"));
  EXPECT_EQ(NumVfs(), 0);
  EXPECT_EQ(Autoprobe(), 1);
}

TEST_F(PrepareDeviceTest, MdevProfileCreatesAndRemovesItsInstance) {
  ASSERT_OK(fake_.AddMdevType(kGpu, "nvidia-63", "GRID H100-4C", 4));
  DeviceSet set = Build("profiles:\n- {name: vgpu, kind: gpu, match: {pciAddresses: [\"0000:18:00.0\"]}, "
                        "mdevType: nvidia-63}\n");
  const DraDevice* device = set.Find("vgpu-0");
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(std::get<std::string>(device->attributes.at("mdevType")), "nvidia-63");
  Preparer preparer = MakePreparer();
  ASSERT_OK_AND_ASSIGN(std::vector<ActionRecord> done, preparer.Prepare(*device));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].kind, ActionKind::kMdev);
  EXPECT_TRUE(fake_.Exists("bus/mdev/devices/" + done[0].mdev_uuid));
  EXPECT_EQ(fake_.BoundDriver(kGpu), "nvidia");  // the parent stays on its driver
  ASSERT_OK(preparer.Unprepare(done));
  EXPECT_FALSE(fake_.Exists("bus/mdev/devices/" + done[0].mdev_uuid));

  auto config = ParseProfileConfig("profiles:\n- {name: x, kind: gpu, vfio: true, mdevType: nvidia-63}\n");
  EXPECT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mdevType")));
  config = ParseProfileConfig("profiles:\n- {name: x, kind: cpu, mdevType: nvidia-63}\n");
  EXPECT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("only for gpu and vf")));
}

}  // namespace
}  // namespace devlet::devices

namespace devlet::devices {
namespace {

TEST_F(PrepareDeviceTest, CrashingInitAndADeviceThatVanishesMidPrepare) {
  DeviceSet set = Build("profiles:\n- name: gpu\n  kind: gpu\n  vfio: true\n"
                        "  init: {command: [/bin/sh, -c, 'kill -SEGV $$']}\n");
  Preparer preparer = MakePreparer();
  auto crashed = preparer.Prepare(*set.Find("gpu-0"));
  ASSERT_FALSE(crashed.ok());
  EXPECT_THAT(Message(crashed.status()), HasSubstr("init command for gpu-0"));
  EXPECT_THAT(Message(crashed.status()), HasSubstr("signal"));
  EXPECT_EQ(fake_.BoundDriver(kGpu), "nvidia");
  EXPECT_EQ(Override(kGpu), "(null)");

  // The GPU is hot-unplugged between the driver_override write and the unbind.
  const std::string victim = "0000:19:00.0";
  Preparer vanishing(fake_, [&](const JournalEntry& entry) -> absl::Status {
    if (entry.phase == JournalEntry::Phase::kDo && entry.step.find("/unbind") != std::string::npos) {
      EXPECT_OK(fake_.RemovePciDevice(victim));
    }
    return absl::OkStatus();
  });
  auto gone = vanishing.Prepare(*set.Find("gpu-1"));
  ASSERT_FALSE(gone.ok());
  EXPECT_THAT(Message(gone.status()), HasSubstr("preparing gpu-1: binding 0000:19:00.0 to vfio-pci"));
  EXPECT_THAT(Message(gone.status()), HasSubstr("No such device"));
  EXPECT_FALSE(fake_.Exists("bus/pci/devices/" + victim));
  // Nothing else was touched: the other GPUs are still on nvidia.
  EXPECT_EQ(fake_.BoundDriver("0000:39:00.0"), "nvidia");
}

}  // namespace
}  // namespace devlet::devices
