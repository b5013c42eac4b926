// Whole-machine topologies, from discovery to the published DRA devices: a GPU server, a NIC-heavy
// server, a machine with no devices, a VM dumped with `lstopo --of xml`, and a VMD domain that
// hwloc skips. Attributes are checked for their exact formats, not only their presence.
#include <regex>
#include <string>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/inventory.h"
#include "devlet/devices/profile.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::devices {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::AddGpuServer;
using testing::AddNicServer;
using testing::FakePciDevice;
using testing::FakeSysfs;

const std::string kData = DEVLET_DEVICES_TESTDATA;

std::string StringAttr(const DraDevice& device, std::string_view name) {
  auto it = device.attributes.find(std::string(name));
  if (it == device.attributes.end()) return "<absent>";
  const std::string* value = std::get_if<std::string>(&it->second);
  return value ? *value : "<not a string>";
}

std::optional<std::int64_t> IntAttr(const DraDevice& device, std::string_view name) {
  auto it = device.attributes.find(std::string(name));
  if (it == device.attributes.end()) return std::nullopt;
  const std::int64_t* value = std::get_if<std::int64_t>(&it->second);
  if (value == nullptr) return std::nullopt;
  return *value;
}

// The standard attributes of every PCI device, in the exact forms the Go helpers produce.
void ExpectStandardPciAttributes(const DeviceSet& set) {
  const std::regex bus_id("^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$");
  const std::regex pcie_root("^pci[0-9a-f]{4,8}:[0-9a-f]{2}$");
  for (const DraDevice& device : set.devices) {
    if (device.pci_address.empty()) continue;
    if (device.pci_address.size() == 12) {
      EXPECT_TRUE(std::regex_match(StringAttr(device, kAttrPciBusId), bus_id))
          << device.name << ": " << StringAttr(device, kAttrPciBusId);
      EXPECT_EQ(StringAttr(device, kAttrPciBusId), device.pci_address);
    }
    EXPECT_TRUE(std::regex_match(StringAttr(device, kAttrPcieRoot), pcie_root))
        << device.name << ": " << StringAttr(device, kAttrPcieRoot);
    if (device.numa_node) {
      EXPECT_EQ(IntAttr(device, kAttrNumaNode), *device.numa_node) << device.name;
    } else {
      EXPECT_FALSE(device.attributes.contains(std::string(kAttrNumaNode))) << device.name;
    }
  }
  EXPECT_OK(ValidateDeviceSet(set));
}

TEST(TopologyTest, GpuServer) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  auto discoverer =
      NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kData + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, DefaultProfileConfig()));
  ExpectStandardPciAttributes(set);
  ASSERT_EQ(set.devices.size(), 8u + 2u + 2u);
  const DraDevice& gpu = *set.Find("gpu-4");
  EXPECT_EQ(StringAttr(gpu, kAttrPciBusId), "0000:9a:00.0");
  EXPECT_EQ(StringAttr(gpu, kAttrPcieRoot), "pci0000:97");
  EXPECT_EQ(IntAttr(gpu, kAttrNumaNode), 1);
  EXPECT_EQ(IntAttr(gpu, "iommuGroup"), 14);
  EXPECT_EQ(StringAttr(gpu, "driver"), "nvidia");
  EXPECT_EQ(gpu.capacities.at("memory").value, "80Gi");
  const DraDevice& nic = *set.Find("nic-0");
  EXPECT_EQ(StringAttr(nic, "interface"), "ens1f0np0");
  EXPECT_EQ(StringAttr(nic, "mac"), "b8:3f:d2:0a:00:10");
  EXPECT_EQ(StringAttr(nic, "rdmaDevice"), "mlx5_0");
  EXPECT_EQ(IntAttr(nic, "sriovTotalVFs"), 8);
  EXPECT_EQ(nic.capacities.at("bandwidth").value, "200G");
  const DraDevice& cpu = *set.Find("cpu-numa0");
  EXPECT_EQ(cpu.capacities.at("cpus").value, "16");
  EXPECT_EQ(cpu.capacities.at("memory").value, "256Gi");
  EXPECT_EQ(IntAttr(cpu, kAttrNumaNode), 0);
}

TEST(TopologyTest, NicHeavyServer) {
  FakeSysfs fake;
  ASSERT_OK(AddNicServer(fake));
  auto discoverer =
      NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kData + "/nic-1s-8port.xml"});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  ASSERT_EQ(inventory.nics.size(), 8u);
  ASSERT_EQ(inventory.gpus.size(), 1u);  // the BMC: found, not published
  EXPECT_EQ(inventory.gpus[0].pci.driver, "ast");
  EXPECT_EQ(inventory.gpus[0].memory_bytes, 64ull << 20);  // from its BAR
  for (const Nic& nic : inventory.nics) {
    EXPECT_EQ(nic.speed_mbps, 100000) << nic.pci.address;
    EXPECT_TRUE(nic.link_up) << nic.pci.address;
    EXPECT_EQ(nic.sriov_total_vfs, 64) << nic.pci.address;
  }

  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, DefaultProfileConfig()));
  ExpectStandardPciAttributes(set);
  EXPECT_EQ(set.devices.size(), 8u + 1u);
  const DraDevice& port = *set.Find("nic-5");
  EXPECT_EQ(StringAttr(port, kAttrPciBusId), "0000:4c:00.1");
  EXPECT_EQ(StringAttr(port, kAttrPcieRoot), "pci0000:4b");
  EXPECT_EQ(StringAttr(port, "interface"), "ens3f1");
  EXPECT_EQ(StringAttr(port, "mac"), "40:a6:b7:02:01:15");
  EXPECT_EQ(StringAttr(port, "model"), "E810-C");
  EXPECT_EQ(port.capacities.at("bandwidth").value, "100G");

  // With link speeds known, the ports can be shared by bandwidth, and VFs carved from them.
  ASSERT_OK_AND_ASSIGN(
      ProfileConfig config,
      ParseProfileConfig("profiles:\n"
                         "- {name: vf, kind: vf, match: {interfaces: [ens1f0]}, numVFs: 16}\n"
                         "- {name: port, kind: nic, sharing: {mode: consumable, "
                         "bandwidthShare: 25G}}\n"
                         "- {name: cpu, kind: cpu}\n"));
  ASSERT_OK_AND_ASSIGN(DeviceSet shared, BuildDeviceSet(inventory, config));
  ExpectStandardPciAttributes(shared);
  const DraDevice& consumable = *shared.Find("port-0");
  EXPECT_EQ(StringAttr(consumable, "interface"), "ens1f1");
  EXPECT_TRUE(consumable.allow_multiple_allocations);
  const Capacity& bandwidth = consumable.capacities.at("bandwidth");
  EXPECT_EQ(bandwidth.value, "100G");
  ASSERT_TRUE(bandwidth.request_policy.has_value());
  EXPECT_EQ(bandwidth.request_policy->step, "25G");
  const DraDevice& vf = *shared.Find("vf-0-vf-15");
  EXPECT_EQ(StringAttr(vf, "pfPciBusID"), "0000:18:00.0");
  EXPECT_EQ(IntAttr(vf, "vfIndex"), 15);
  EXPECT_EQ(vf.preparation.sriov_num_vfs, 16);
}

TEST(TopologyTest, MachineWithNoDevices) {
  // The VM's XML (dumped on the development VM with `lstopo --of xml`) lists a virtio NIC, but
  // this machine's sysfs has no PCI devices at all: sysfs wins, only the CPU device remains.
  FakeSysfs fake;
  auto discoverer = NewDiscoverer(
      {.sysfs_root = fake.Root(), .topology_xml = kData + "/vm-2c-virtio-lstopo.xml"});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  EXPECT_THAT(inventory.gpus, IsEmpty());
  EXPECT_THAT(inventory.nics, IsEmpty());
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, DefaultProfileConfig()));
  ASSERT_EQ(set.devices.size(), 1u);
  EXPECT_EQ(set.devices[0].name, "cpu-numa0");
  EXPECT_EQ(set.devices[0].capacities.at("cpus").value, "2");
  EXPECT_THAT(set.counter_sets, IsEmpty());
  EXPECT_OK(ValidateDeviceSet(set));
}

TEST(TopologyTest, VirtualMachineFromLstopo) {
  auto discoverer =
      NewDiscoverer({.topology_xml = kData + "/vm-2c-virtio-lstopo.xml", .use_sysfs = false});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  EXPECT_EQ(inventory.cpu.packages, 1);
  EXPECT_EQ(inventory.cpu.threads_per_core, 1);
  ASSERT_EQ(inventory.cpu.numa_nodes.size(), 1u);
  EXPECT_EQ(inventory.cpu.numa_nodes[0].memory_bytes, 25275990016ull);
  EXPECT_THAT(inventory.cpu.numa_nodes[0].cpus, ElementsAre(0, 1));
  ASSERT_EQ(inventory.nics.size(), 1u);
  EXPECT_EQ(inventory.nics[0].model, "virtio-net");
  EXPECT_EQ(inventory.nics[0].interface, "eth0");
  EXPECT_EQ(inventory.nics[0].mac, "02:fc:00:00:00:01");
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, DefaultProfileConfig()));
  ExpectStandardPciAttributes(set);
  const DraDevice* nic = set.Find("nic-0");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(StringAttr(*nic, kAttrPciBusId), "0000:00:03.0");
  EXPECT_EQ(StringAttr(*nic, kAttrPcieRoot), "pci0000:00");
  EXPECT_FALSE(nic->capacities.contains("bandwidth"));  // no link speed known
  // The NUMA node memory as an exact binary quantity (25275990016 bytes = 24683584Ki).
  EXPECT_EQ(set.Find("cpu-numa0")->capacities.at("memory").value,
            "24683584Ki");
}

TEST(TopologyTest, VmdDomainThatHwlocSkipsIsFoundInSysfs) {
  // The GPU server's XML has no 32-bit domains (hwloc 2.9 drops them); its sysfs has an E810
  // behind a VMD controller at 0000:5d:05.5, domain 10000.
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  ASSERT_OK(fake.AddDriver("ice"));
  FakePciDevice vmd_nic{.address = "10000:e1:00.0",
                        .parent = "pci0000:5d/0000:5d:05.5/pci10000:e0/10000:e0:1d.0",
                        .vendor_id = 0x8086, .device_id = 0x1592, .class_code = 0x020000,
                        .driver = "ice", .numa_node = 1, .iommu_group = 90};
  vmd_nic.netdev = testing::FakeNetdev{.name = "ens9", .mac = "3c:fd:fe:00:00:01",
                                       .operstate = "up", .speed_mbps = 25000};
  ASSERT_OK(fake.AddPciDevice(vmd_nic));
  auto discoverer =
      NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kData + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  ASSERT_EQ(inventory.nics.size(), 3u);
  const Nic& found = inventory.nics.back();  // sorted by address: "10000:..." after "0000:..."
  EXPECT_EQ(found.pci.address, "10000:e1:00.0");
  EXPECT_EQ(found.pci.pcie_root, "pci0000:5d");
  EXPECT_EQ(found.pci.numa_node, 1);
  EXPECT_EQ(found.pci.driver, "ice");
  EXPECT_EQ(found.interface, "ens9");
  EXPECT_EQ(found.speed_mbps, 25000);
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, DefaultProfileConfig()));
  ExpectStandardPciAttributes(set);
  const DraDevice* nic = set.Find("nic-2");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->pci_address, "10000:e1:00.0");
  EXPECT_EQ(StringAttr(*nic, kAttrPciBusId), "<absent>");  // the standard form has 4 digits
  EXPECT_EQ(StringAttr(*nic, "pciAddress"), "10000:e1:00.0");
  EXPECT_EQ(StringAttr(*nic, kAttrPcieRoot), "pci0000:5d");
  EXPECT_EQ(IntAttr(*nic, kAttrNumaNode), 1);
  EXPECT_EQ(nic->capacities.at("bandwidth").value, "25G");
}

TEST(TopologyTest, UnknownGpuModelGetsItsMemoryFromTheLargestPrefetchableBar) {
  FakeSysfs fake;
  ASSERT_OK(fake.AddDriver("amdgpu"));
  FakePciDevice gpu{.address = "0000:c3:00.0", .parent = "pci0000:c0/0000:c0:01.1",
                    .vendor_id = 0x1002, .device_id = 0x7551, .class_code = 0x030000,
                    .driver = "amdgpu", .numa_node = 1, .iommu_group = 7,
                    .prefetchable_bars = {256ull << 20, 16ull << 30}};
  gpu.drm_nodes = {"card0", "renderD128"};
  ASSERT_OK(fake.AddPciDevice(gpu));
  auto discoverer = NewDiscoverer({.sysfs_root = fake.Root()});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  ASSERT_EQ(inventory.gpus.size(), 1u);
  EXPECT_EQ(inventory.gpus[0].memory_bytes, 16ull << 30);
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, DefaultProfileConfig()));
  ExpectStandardPciAttributes(set);
  const DraDevice* published = set.Find("gpu-0");
  ASSERT_NE(published, nullptr);
  EXPECT_EQ(StringAttr(*published, "vendor"), "amd");
  EXPECT_EQ(StringAttr(*published, "deviceID"), "0x7551");
  EXPECT_EQ(StringAttr(*published, kAttrPcieRoot), "pci0000:c0");
  EXPECT_EQ(IntAttr(*published, kAttrNumaNode), 1);
  EXPECT_EQ(published->capacities.at("memory").value, "16Gi");
}

}  // namespace
}  // namespace devlet::devices
