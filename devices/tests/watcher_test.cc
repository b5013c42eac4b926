#include "devlet/devices/watcher.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::devices {
namespace {

using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::AddGpuServer;
using testing::FakePciDevice;
using testing::FakeSysfs;
using namespace std::chrono_literals;

std::string Bytes(const char* data, size_t size) { return std::string(data, size); }
#define DATAGRAM(literal) Bytes(literal, sizeof(literal) - 1)

// Recorded on the development machine: `echo change > /sys/class/net/lo/uevent` as received on a
// NETLINK_KOBJECT_UEVENT socket bound to group 1.
const std::string kRecordedLoChange = DATAGRAM(
    "change@/devices/virtual/net/lo\0ACTION=change\0DEVPATH=/devices/virtual/net/lo\0"
    "SUBSYSTEM=net\0SYNTH_UUID=0\0INTERFACE=lo\0IFINDEX=1\0SEQNUM=822\0");

// PCI hot-plug and rebinding, in the kernel's format (pci_uevent + driver core's DRIVER=).
const std::string kPciAdd = DATAGRAM(
    "add@/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:03.0/0000:1b:00.0\0ACTION=add\0"
    "DEVPATH=/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:03.0/0000:1b:00.0\0"
    "SUBSYSTEM=pci\0PCI_CLASS=30200\0PCI_ID=10DE:2330\0PCI_SUBSYS_ID=10DE:16C1\0"
    "PCI_SLOT_NAME=0000:1b:00.0\0MODALIAS=pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00\0"
    "SEQNUM=5120\0");
const std::string kPciBind = DATAGRAM(
    "bind@/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0\0ACTION=bind\0"
    "DEVPATH=/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0\0"
    "SUBSYSTEM=pci\0DRIVER=vfio-pci\0PCI_CLASS=30200\0PCI_ID=10DE:2330\0"
    "PCI_SLOT_NAME=0000:18:00.0\0SEQNUM=5121\0");
const std::string kBlockAdd = DATAGRAM(
    "add@/devices/virtual/block/loop7\0ACTION=add\0DEVPATH=/devices/virtual/block/loop7\0"
    "SUBSYSTEM=block\0MAJOR=7\0MINOR=7\0DEVNAME=loop7\0DEVTYPE=disk\0SEQNUM=5122\0");

TEST(UeventTest, ParsesRecordedAndKernelFormatPayloads) {
  ASSERT_OK_AND_ASSIGN(Uevent lo, ParseUevent(kRecordedLoChange));
  EXPECT_EQ(lo.action, "change");
  EXPECT_EQ(lo.devpath, "/devices/virtual/net/lo");
  EXPECT_EQ(lo.subsystem, "net");
  EXPECT_EQ(lo.seqnum, 822u);
  EXPECT_EQ(lo.env.at("INTERFACE"), "lo");
  EXPECT_FALSE(AffectsDevices(lo));  // link state is health, not inventory

  ASSERT_OK_AND_ASSIGN(Uevent add, ParseUevent(kPciAdd));
  EXPECT_EQ(add.action, "add");
  EXPECT_EQ(add.subsystem, "pci");
  EXPECT_EQ(add.env.at("PCI_SLOT_NAME"), "0000:1b:00.0");
  EXPECT_EQ(add.seqnum, 5120u);
  EXPECT_TRUE(AffectsDevices(add));

  ASSERT_OK_AND_ASSIGN(Uevent bind, ParseUevent(kPciBind));
  EXPECT_EQ(bind.driver, "vfio-pci");
  EXPECT_TRUE(AffectsDevices(bind));

  ASSERT_OK_AND_ASSIGN(Uevent block, ParseUevent(kBlockAdd));
  EXPECT_FALSE(AffectsDevices(block));

  // Without a trailing NUL, and with the minimum of fields.
  ASSERT_OK_AND_ASSIGN(Uevent bare, ParseUevent("remove@/devices/pci0000:00/0000:00:1f.6"));
  EXPECT_EQ(bare.action, "remove");
  EXPECT_EQ(bare.subsystem, "");
  EXPECT_FALSE(AffectsDevices(bare));
}

TEST(UeventTest, AffectsDevicesBySubsystemAndAction) {
  EXPECT_TRUE(AffectsDevices({.action = "unbind", .subsystem = "pci"}));
  EXPECT_TRUE(AffectsDevices({.action = "remove", .subsystem = "net"}));
  EXPECT_TRUE(AffectsDevices({.action = "add", .subsystem = "infiniband"}));
  EXPECT_TRUE(AffectsDevices({.action = "add", .subsystem = "mdev"}));
  EXPECT_TRUE(AffectsDevices({.action = "online", .subsystem = "cpu"}));
  EXPECT_TRUE(AffectsDevices({.action = "overflow"}));
  EXPECT_FALSE(AffectsDevices({.action = "change", .subsystem = "pci"}));
  EXPECT_FALSE(AffectsDevices({.action = "add", .subsystem = "tty"}));
}

TEST(UeventTest, BadPayloadsAreClearErrors) {
  EXPECT_THAT(ParseUevent(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(ParseUevent(std::string(5, '\0')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("only NUL")));
  EXPECT_THAT(ParseUevent(DATAGRAM("libudev\0\xfe\xed\xca\xfe\0\0\0\0")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("udev re-broadcast")));
  EXPECT_THAT(ParseUevent("add /devices/x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not ACTION@DEVPATH")));
  EXPECT_THAT(ParseUevent("@/devices/x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not ACTION@DEVPATH")));
  EXPECT_THAT(ParseUevent("add@devices/x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not start with /")));
  EXPECT_THAT(ParseUevent(DATAGRAM("add@/devices/x\0SUBSYSTEM\0")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"SUBSYSTEM\" is not KEY=VALUE")));
  EXPECT_THAT(ParseUevent(DATAGRAM("add@/devices/x\0ACTION=remove\0")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("contradicts the header")));
  EXPECT_THAT(ParseUevent(DATAGRAM("add@/devices/x\0DEVPATH=/devices/y\0")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("contradicts the header")));
  EXPECT_THAT(ParseUevent(DATAGRAM("add@/devices/x\0SEQNUM=12a\0")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("SEQNUM=\"12a\"")));
  // Binary garbage is reported, never crashes, and never leaks control characters.
  std::string garbage;
  for (int i = 0; i < 300; ++i) garbage.push_back(static_cast<char>((i * 37) % 256));
  auto parsed = ParseUevent(garbage);
  if (!parsed.ok()) {
    for (char c : Message(parsed.status())) EXPECT_GE(static_cast<unsigned char>(c), 0x20);
  }
  ManualUeventSource source;
  EXPECT_THAT(source.PushDatagram("nonsense"), StatusIs(absl::StatusCode::kInvalidArgument));
}

class WatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(AddGpuServer(fake_));
    discoverer_ = NewDiscoverer({.sysfs_root = fake_.Root(),
                                 .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) +
                                                 "/dgx-2s-8gpu-2nic.xml"});
    rescanner_ = std::make_unique<Rescanner>(*discoverer_, DefaultProfileConfig());
    ASSERT_OK_AND_ASSIGN(RescanResult first, rescanner_->Rescan());  // the agent's startup scan
    ASSERT_TRUE(first.changed);
  }

  FakePciDevice NewGpu() {
    return FakePciDevice{.address = "0000:1b:00.0",
                         .parent = "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:03.0",
                         .vendor_id = 0x10de, .device_id = 0x2330, .class_code = 0x030200,
                         .driver = "nvidia", .numa_node = 0, .iommu_group = 40,
                         .prefetchable_bars = {128ull << 30}};
  }

  FakeSysfs fake_;
  std::unique_ptr<Discoverer> discoverer_;
  std::unique_ptr<Rescanner> rescanner_;
  ManualUeventSource source_;
  WatcherOptions fast_{.period = 1h, .debounce = 30ms, .max_delay = 2s};
};

TEST_F(WatcherTest, UnchangedMachinePublishesNothingEvenOnEvents) {
  DeviceWatcher watcher(*rescanner_, &source_, fast_);
  ASSERT_OK(source_.PushDatagram(kPciBind));  // an event, but sysfs shows nothing new
  ASSERT_OK_AND_ASSIGN(std::optional<DeviceChange> change, watcher.RunOnce(1s));
  EXPECT_FALSE(change.has_value());
  EXPECT_EQ(watcher.Stats().rescans, 1u);
  EXPECT_EQ(watcher.Stats().changes, 0u);
  // No event at all: no rescan.
  ASSERT_OK_AND_ASSIGN(change, watcher.RunOnce(50ms));
  EXPECT_FALSE(change.has_value());
  EXPECT_EQ(watcher.Stats().rescans, 1u);
}

TEST_F(WatcherTest, HotPlugIsOneChangeAfterTheBurstSettles) {
  DeviceWatcher watcher(*rescanner_, &source_, fast_);
  const std::string before = DeviceSetFingerprint(rescanner_->devices());
  ASSERT_OK(fake_.AddPciDevice(NewGpu()));
  // A burst: the PCI add, its bind, and an unrelated block device, all before the rescan.
  ASSERT_OK(source_.PushDatagram(kPciAdd));
  ASSERT_OK(source_.PushDatagram(kPciBind));
  ASSERT_OK(source_.PushDatagram(kBlockAdd));
  ASSERT_OK_AND_ASSIGN(std::optional<DeviceChange> change, watcher.RunOnce(1s));
  ASSERT_TRUE(change.has_value());
  EXPECT_THAT(change->result.device_diff.added, ElementsAre("gpu-8"));
  EXPECT_THAT(change->result.inventory_diff.added, ElementsAre("pci:0000:1b:00.0"));
  EXPECT_EQ(change->trigger, "uevent add /devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:03.0/"
                             "0000:1b:00.0");
  EXPECT_NE(change->fingerprint, before);
  EXPECT_EQ(change->fingerprint, DeviceSetFingerprint(change->devices));
  EXPECT_NE(change->devices.Find("gpu-8"), nullptr);
  WatcherStats stats = watcher.Stats();
  EXPECT_EQ(stats.rescans, 1u);
  EXPECT_EQ(stats.changes, 1u);
  EXPECT_EQ(stats.events, 3u);
  EXPECT_EQ(stats.relevant_events, 2u);
  // Nothing more happens: nothing more is published.
  ASSERT_OK(source_.PushDatagram(kPciAdd));
  ASSERT_OK_AND_ASSIGN(change, watcher.RunOnce(1s));
  EXPECT_FALSE(change.has_value());
}

TEST_F(WatcherTest, DriverChangeAndRemovalAreChanges) {
  DeviceWatcher watcher(*rescanner_, &source_, fast_);
  ASSERT_OK(fake_.WriteFile("bus/pci/devices/0000:18:00.0/driver/unbind", "0000:18:00.0"));
  source_.Push({.action = "unbind", .devpath = "/devices/x/0000:18:00.0", .subsystem = "pci"});
  ASSERT_OK_AND_ASSIGN(std::optional<DeviceChange> change, watcher.RunOnce(1s));
  ASSERT_TRUE(change.has_value());
  EXPECT_THAT(change->result.device_diff.changed, ElementsAre("gpu-0"));  // its driver attribute

  ASSERT_OK(fake_.RemovePciDevice("0000:9c:00.0"));
  source_.Push({.action = "remove", .devpath = "/devices/x/0000:9c:00.0", .subsystem = "pci"});
  ASSERT_OK_AND_ASSIGN(change, watcher.RunOnce(1s));
  ASSERT_TRUE(change.has_value());
  EXPECT_THAT(change->result.device_diff.removed, ElementsAre("nic-1"));
  EXPECT_THAT(change->result.inventory_diff.removed, ElementsAre("pci:0000:9c:00.0"));
}

TEST_F(WatcherTest, IrrelevantEventsDoNotRescan) {
  DeviceWatcher watcher(*rescanner_, &source_, fast_);
  ASSERT_OK(fake_.AddPciDevice(NewGpu()));  // changed, but nobody said so
  ASSERT_OK(source_.PushDatagram(kBlockAdd));
  ASSERT_OK(source_.PushDatagram(kRecordedLoChange));
  ASSERT_OK_AND_ASSIGN(std::optional<DeviceChange> change, watcher.RunOnce(100ms));
  EXPECT_FALSE(change.has_value());
  EXPECT_EQ(watcher.Stats().rescans, 0u);
  EXPECT_EQ(watcher.Stats().events, 2u);
}

TEST_F(WatcherTest, PeriodicRescanCatchesWhatNoEventAnnounced) {
  DeviceWatcher watcher(*rescanner_, /*source=*/nullptr,
                        {.period = 50ms, .debounce = 10ms, .max_delay = 1s});
  ASSERT_OK_AND_ASSIGN(std::optional<DeviceChange> change, watcher.RunOnce(1s));
  EXPECT_FALSE(change.has_value());
  EXPECT_EQ(watcher.Stats().rescans, 1u);
  // New VFs change the inventory but no device of the default profiles: still nothing to publish.
  ASSERT_OK(fake_.WriteFile("bus/pci/devices/0000:1a:00.0/sriov_numvfs", "2"));
  ASSERT_OK_AND_ASSIGN(change, watcher.RunOnce(1s));
  EXPECT_FALSE(change.has_value());
  EXPECT_EQ(watcher.Stats().rescans, 2u);
  ASSERT_OK(fake_.RemovePciDevice("0000:b9:00.0"));
  ASSERT_OK_AND_ASSIGN(change, watcher.RunOnce(1s));
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->trigger, "periodic");
  EXPECT_THAT(change->result.device_diff.removed, ElementsAre("gpu-7"));
}

TEST_F(WatcherTest, BrokenSourceFallsBackToPeriodicRescans) {
  DeviceWatcher watcher(*rescanner_, &source_, {.period = 50ms, .debounce = 10ms});
  source_.Fail(Internal("netlink socket died"));
  ASSERT_OK(fake_.RemovePciDevice("0000:b9:00.0"));
  ASSERT_OK_AND_ASSIGN(std::optional<DeviceChange> change, watcher.RunOnce(1s));
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->trigger, "periodic");
  EXPECT_THAT(watcher.Stats().last_error, HasSubstr("netlink socket died"));
  EXPECT_EQ(watcher.Stats().errors, 1u);
}

TEST_F(WatcherTest, RescanErrorsKeepThePreviousDevices) {
  auto broken = NewDiscoverer({.topology_xml = "/nonexistent.xml", .use_sysfs = false});
  Rescanner rescanner(*broken, DefaultProfileConfig());
  DeviceWatcher watcher(rescanner, &source_, fast_);
  watcher.RequestRescan();
  auto result = watcher.RunOnce(1s);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(Message(result.status()), HasSubstr("rescanning devices (requested)"));
  EXPECT_THAT(Message(result.status()), HasSubstr("/nonexistent.xml"));
  EXPECT_EQ(watcher.Stats().errors, 1u);
}

TEST_F(WatcherTest, ThreadedLoopReportsChangesAndStops) {
  DeviceWatcher watcher(*rescanner_, &source_, fast_);
  std::mutex mu;
  std::vector<std::string> seen;
  std::atomic<int> calls = 0;
  watcher.Start([&](const DeviceChange& change) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(change.trigger + ": " + change.result.device_diff.ToString());
    ++calls;
  });
  ASSERT_OK(fake_.AddPciDevice(NewGpu()));
  ASSERT_OK(source_.PushDatagram(kPciAdd));
  for (int i = 0; i < 200 && calls.load() < 1; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_OK(fake_.RemovePciDevice("0000:1b:00.0"));
  watcher.RequestRescan();
  for (int i = 0; i < 200 && calls.load() < 2; ++i) std::this_thread::sleep_for(10ms);
  const auto stop_started = std::chrono::steady_clock::now();
  watcher.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_started, 1s);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_THAT(seen[0], HasSubstr("added [gpu-8]"));
  EXPECT_THAT(seen[1], HasSubstr("requested"));
  EXPECT_THAT(seen[1], HasSubstr("removed [gpu-8]"));
}

TEST(DeviceSetFingerprintTest, StableOrderIndependentAndContentSensitive) {
  DeviceSet set;
  set.devices.push_back({.name = "gpu-0", .attributes = {{"model", std::string("H100")}},
                         .capacities = {{"memory", {.value = "80Gi"}}}});
  set.devices.push_back({.name = "gpu-1", .attributes = {{"index", std::int64_t{1}}}});
  set.counter_sets.push_back({.name = "gpu-0-counters", .counters = {{"memory", "80Gi"}}});
  const std::string fingerprint = DeviceSetFingerprint(set);
  EXPECT_EQ(fingerprint.size(), 16u);
  // A golden value: the fingerprint must not depend on the process (it is stored across restarts).
  EXPECT_EQ(fingerprint, "3801f8a39d902309");

  DeviceSet reordered = set;
  std::swap(reordered.devices[0], reordered.devices[1]);
  EXPECT_EQ(DeviceSetFingerprint(reordered), fingerprint);

  DeviceSet string_index = set;
  string_index.devices[1].attributes["index"] = std::string("1");
  EXPECT_NE(DeviceSetFingerprint(string_index), fingerprint);
  DeviceSet more_memory = set;
  more_memory.counter_sets[0].counters["memory"] = "96Gi";
  EXPECT_NE(DeviceSetFingerprint(more_memory), fingerprint);
  DeviceSet shared = set;
  shared.devices[0].allow_multiple_allocations = true;
  EXPECT_NE(DeviceSetFingerprint(shared), fingerprint);
  // What is never published does not count.
  DeviceSet prepared = set;
  prepared.devices[0].preparation.bind_vfio = true;
  prepared.devices[0].profile = "gpu";
  EXPECT_EQ(DeviceSetFingerprint(prepared), fingerprint);
}

// The real netlink socket: opened, interrupted, and (as root, where the kernel lets us announce a
// harmless "change" of the loopback interface) receiving a real uevent.
TEST(NetlinkUeventSourceTest, ReceivesRealEventsWhenPossible) {
  absl::StatusOr<std::unique_ptr<UeventSource>> source = NewNetlinkUeventSource();
  if (!source.ok()) GTEST_SKIP() << "no uevent socket here: " << Message(source.status());
  (*source)->Interrupt();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(std::optional<Uevent> none, (*source)->Next(5s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  if (none.has_value()) GTEST_SKIP() << "a real event arrived first: " << none->devpath;
  if (::geteuid() != 0) GTEST_SKIP() << "not root: cannot trigger a uevent";
  {
    std::ofstream trigger("/sys/class/net/lo/uevent");
    trigger << "change";
    trigger.flush();
    if (!trigger) GTEST_SKIP() << "cannot write /sys/class/net/lo/uevent";
  }
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK_AND_ASSIGN(std::optional<Uevent> event, (*source)->Next(200ms));
    if (!event.has_value()) continue;
    if (event->devpath == "/devices/virtual/net/lo" && event->action == "change") {
      EXPECT_EQ(event->subsystem, "net");
      EXPECT_GT(event->seqnum, 0u);
      return;
    }
  }
  GTEST_SKIP() << "the loopback uevent did not arrive (network namespace without uevents?)";
}

}  // namespace
}  // namespace devlet::devices
