#include "devlet/devices/health.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/profile.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::devices {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::AddGpuServer;
using testing::FakePciDevice;
using testing::FakeSysfs;

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(AddGpuServer(fake_));
    auto discoverer = NewDiscoverer({.sysfs_root = fake_.Root(),
                                     .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) +
                                                     "/dgx-2s-8gpu-2nic.xml"});
    ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
    ASSERT_OK_AND_ASSIGN(
        ProfileConfig config,
        ParseProfileConfig("profiles:\n"
                           "- {name: vf, kind: vf, match: {interfaces: [ens1f0np0]}, numVFs: 2}\n"
                           "- {name: nic, kind: nic}\n"
                           "- {name: gpu, kind: gpu, match: {numaNodes: [0]}}\n"
                           "- {name: part, kind: gpu, sharing: {mode: partitions, partitions: 2}}\n"
                           "- {name: cpu, kind: cpu}\n"));
    ASSERT_OK_AND_ASSIGN(set_, BuildDeviceSet(inventory, config));
  }

  std::vector<std::string> Names(const std::vector<HealthEvent>& events) {
    std::vector<std::string> names;
    for (const auto& e : events) names.push_back(e.device + "=" + std::string(HealthStatusName(e.status)) + "/" + e.reason);
    return names;
  }

  FakeSysfs fake_;
  DeviceSet set_;
};

TEST_F(HealthTest, FirstCheckReportsEveryDeviceThenOnlyChanges) {
  HealthMonitor monitor(fake_);
  std::vector<HealthEvent> first = monitor.Check(set_.devices);
  EXPECT_EQ(first.size(), set_.devices.size());
  for (const HealthEvent& e : first) {
    EXPECT_EQ(e.status, HealthStatus::kHealthy) << e.device << ": " << e.message;
    EXPECT_EQ(TaintFor(e, "devlet.dev"), std::nullopt);
  }
  EXPECT_THAT(monitor.Check(set_.devices), IsEmpty());
  EXPECT_EQ(monitor.Snapshot().size(), set_.devices.size());
}

TEST_F(HealthTest, LinkDownAndRecoveryIncludingVfsOfThePf) {
  HealthMonitor monitor(fake_);
  monitor.Check(set_.devices);
  ASSERT_OK(fake_.SetOperstate("0000:1a:00.0", "down"));
  std::vector<HealthEvent> down = monitor.Check(set_.devices);
  // The PF is the vf profile's (nic-0 is the second NIC): both of its VF devices go down.
  EXPECT_THAT(Names(down), ElementsAre("vf-0-vf-0=Unhealthy/LinkDown", "vf-0-vf-1=Unhealthy/LinkDown"));
  EXPECT_THAT(down[0].message, HasSubstr("link of ens1f0np0 (0000:1a:00.0) is down"));
  auto taint = TaintFor(down[0], "devlet.dev");
  ASSERT_TRUE(taint.has_value());
  EXPECT_EQ(taint->key, "devlet.dev/unhealthy");
  EXPECT_EQ(taint->value, "LinkDown");
  EXPECT_EQ(taint->effect, "NoSchedule");

  ASSERT_OK(fake_.SetOperstate("0000:9c:00.0", "down"));
  EXPECT_THAT(Names(monitor.Check(set_.devices)), ElementsAre("nic-0=Unhealthy/LinkDown"));

  ASSERT_OK(fake_.SetOperstate("0000:1a:00.0", "up"));
  ASSERT_OK(fake_.SetOperstate("0000:9c:00.0", "up"));
  std::vector<HealthEvent> up = monitor.Check(set_.devices);
  EXPECT_THAT(Names(up), ElementsAre("vf-0-vf-0=Healthy/Healthy", "vf-0-vf-1=Healthy/Healthy",
                                     "nic-0=Healthy/Healthy"));
  EXPECT_EQ(up[0].message, "recovered from LinkDown");
}

TEST_F(HealthTest, AerErrorsMarkEveryDeviceOfTheFunctionAndRecoverAfterQuietChecks) {
  ASSERT_OK(fake_.SetAerCounter("0000:9a:00.0", "nonfatal", 5));  // old errors: the baseline
  HealthMonitor monitor(fake_, {.aer_recovery_checks = 2});
  monitor.Check(set_.devices);
  ASSERT_OK(fake_.SetAerCounter("0000:9a:00.0", "nonfatal", 6));
  std::vector<HealthEvent> events = monitor.Check(set_.devices);
  EXPECT_THAT(Names(events), ElementsAre("part-0=Unhealthy/AERNonFatalError",
                                         "part-0-part-0=Unhealthy/AERNonFatalError",
                                         "part-0-part-1=Unhealthy/AERNonFatalError"));
  EXPECT_THAT(events[0].message, HasSubstr("1 new non-fatal PCIe AER error(s) on 0000:9a:00.0"));

  ASSERT_OK(fake_.SetAerCounter("0000:9a:00.0", "fatal", 1));
  events = monitor.Check(set_.devices);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].reason, "AERFatalError");
  EXPECT_EQ(TaintFor(events[0], "devlet.dev")->effect, "NoExecute");

  EXPECT_THAT(monitor.Check(set_.devices), IsEmpty());  // quiet check 1: still unhealthy
  events = monitor.Check(set_.devices);                 // quiet check 2: recovered
  EXPECT_THAT(Names(events), ElementsAre("part-0=Healthy/Healthy", "part-0-part-0=Healthy/Healthy",
                                         "part-0-part-1=Healthy/Healthy"));
}

TEST_F(HealthTest, RemovalAndReturn) {
  HealthMonitor monitor(fake_);
  monitor.Check(set_.devices);
  ASSERT_OK(fake_.RemovePciDevice("0000:19:00.0"));
  std::vector<HealthEvent> events = monitor.Check(set_.devices);
  EXPECT_THAT(Names(events), ElementsAre("gpu-1=Unhealthy/DeviceRemoved"));
  EXPECT_EQ(events[0].message, "PCI device 0000:19:00.0 is gone");
  EXPECT_EQ(TaintFor(events[0], "devlet.dev")->effect, "NoExecute");

  FakePciDevice gpu{.address = "0000:19:00.0",
                    .parent = "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0",
                    .vendor_id = 0x10de, .device_id = 0x2330, .class_code = 0x030200,
                    .driver = "nvidia", .numa_node = 0, .iommu_group = 11};
  ASSERT_OK(fake_.AddPciDevice(gpu));
  EXPECT_THAT(Names(monitor.Check(set_.devices)), ElementsAre("gpu-1=Healthy/Healthy"));
}

TEST_F(HealthTest, CpuDevicesAreHealthyAndForgottenDevicesDropOut) {
  HealthMonitor monitor(fake_);
  std::vector<DraDevice> cpus;
  for (const DraDevice& d : set_.devices) {
    if (d.pci_address.empty() && d.preparation.sriov_pf.empty()) cpus.push_back(d);
  }
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_THAT(Names(monitor.Check(cpus)),
              ElementsAre("cpu-numa0=Healthy/Healthy", "cpu-numa1=Healthy/Healthy"));
  monitor.Check({cpus[0]});
  ASSERT_EQ(monitor.Snapshot().size(), 1u);
  EXPECT_EQ(monitor.Snapshot()[0].device, "cpu-numa0");
}

TEST_F(HealthTest, NotRespondingDeviceIsEvictedAndRecovers) {
  HealthMonitor monitor(fake_);
  monitor.Check(set_.devices);
  ASSERT_OK(fake_.SetNotResponding("0000:18:00.0", true));
  std::vector<HealthEvent> events = monitor.Check(set_.devices);
  EXPECT_THAT(Names(events), ElementsAre("gpu-0=Unhealthy/DeviceNotResponding"));
  EXPECT_THAT(events[0].message, HasSubstr("config space reads 0xffff"));
  EXPECT_EQ(TaintFor(events[0], "devlet.dev")->effect, "NoExecute");
  ASSERT_OK(fake_.SetNotResponding("0000:18:00.0", false));
  events = monitor.Check(set_.devices);
  EXPECT_THAT(Names(events), ElementsAre("gpu-0=Healthy/Healthy"));
  EXPECT_EQ(events[0].message, "recovered from DeviceNotResponding");
}

TEST_F(HealthTest, NoCarrierAndRdmaPortDownAreLinkDown) {
  HealthMonitor monitor(fake_);
  monitor.Check(set_.devices);
  // Some drivers leave operstate "unknown"; the carrier still tells.
  const std::string net = fake_.DeviceDir("0000:9c:00.0") + "/net/ens2f0np0/";
  ASSERT_OK(fake_.WriteFile(net + "operstate", "unknown\n"));
  ASSERT_OK(fake_.WriteFile(net + "carrier", "0\n"));
  std::vector<HealthEvent> events = monitor.Check(set_.devices);
  EXPECT_THAT(Names(events), ElementsAre("nic-0=Unhealthy/LinkDown"));
  EXPECT_THAT(events[0].message, HasSubstr("ens2f0np0 (0000:9c:00.0) has no carrier"));
  ASSERT_OK(fake_.WriteFile(net + "carrier", "1\n"));
  EXPECT_THAT(Names(monitor.Check(set_.devices)), ElementsAre("nic-0=Healthy/Healthy"));

  ASSERT_OK(fake_.SetRdmaPortState("0000:9c:00.0", "1: DOWN"));
  events = monitor.Check(set_.devices);
  EXPECT_THAT(Names(events), ElementsAre("nic-0=Unhealthy/LinkDown"));
  EXPECT_THAT(events[0].message, HasSubstr("RDMA port mlx5_1/1 (0000:9c:00.0) is DOWN"));
  EXPECT_EQ(TaintFor(events[0], "devlet.dev")->effect, "NoSchedule");
  ASSERT_OK(fake_.SetRdmaPortState("0000:9c:00.0", "4: ACTIVE"));
  EXPECT_THAT(Names(monitor.Check(set_.devices)), ElementsAre("nic-0=Healthy/Healthy"));
}

TEST_F(HealthTest, UnreadableDeviceIsUnknownWithoutTaint) {
  HealthMonitor monitor(fake_);
  monitor.Check(set_.devices);
  // A vendor attribute that cannot be read (here: a directory in its place).
  const std::filesystem::path vendor =
      std::filesystem::path(fake_.Root()) / fake_.DeviceDir("0000:19:00.0") / "vendor";
  std::filesystem::remove(vendor);
  std::filesystem::create_directory(vendor);
  std::vector<HealthEvent> events = monitor.Check(set_.devices);
  EXPECT_THAT(Names(events), ElementsAre("gpu-1=Unknown/Unknown"));
  EXPECT_THAT(events[0].message, HasSubstr("cannot read the state of 0000:19:00.0"));
  EXPECT_EQ(TaintFor(events[0], "devlet.dev"), std::nullopt);
  std::filesystem::remove(vendor);
  std::ofstream(vendor) << "0x10de\n";
  EXPECT_THAT(Names(monitor.Check(set_.devices)), ElementsAre("gpu-1=Healthy/Healthy"));
}

TEST_F(HealthTest, CorrectableErrorBurstsCountOnlyAboveTheThreshold) {
  HealthMonitor monitor(fake_, {.aer_recovery_checks = 1, .correctable_errors_threshold = 10});
  monitor.Check(set_.devices);
  ASSERT_OK(fake_.SetAerCounter("0000:18:00.0", "correctable", 9));  // below: still healthy
  EXPECT_THAT(monitor.Check(set_.devices), IsEmpty());
  ASSERT_OK(fake_.SetAerCounter("0000:18:00.0", "correctable", 25));
  std::vector<HealthEvent> events = monitor.Check(set_.devices);
  EXPECT_THAT(Names(events), ElementsAre("gpu-0=Unhealthy/AERNonFatalError"));
  EXPECT_THAT(events[0].message, HasSubstr("16 new correctable PCIe AER errors on 0000:18:00.0"));
  EXPECT_THAT(Names(monitor.Check(set_.devices)), ElementsAre("gpu-0=Healthy/Healthy"));
  // Counters that go down (device reset) are a new baseline, not errors.
  ASSERT_OK(fake_.SetAerCounter("0000:18:00.0", "correctable", 0));
  EXPECT_THAT(monitor.Check(set_.devices), IsEmpty());
}

}  // namespace
}  // namespace devlet::devices
