#include <filesystem>
#include <fstream>
#include <string>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/inventory.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::devices {
namespace {

using ::devlet::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::AddGpuServer;
using testing::FakePciDevice;
using testing::FakeSysfs;

const std::string kGpuServerXml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml";

const Gpu* FindGpu(const Inventory& inventory, const std::string& address) {
  for (const Gpu& gpu : inventory.gpus) {
    if (gpu.pci.address == address) return &gpu;
  }
  return nullptr;
}

const Nic* FindNic(const Inventory& inventory, const std::string& address) {
  for (const Nic& nic : inventory.nics) {
    if (nic.pci.address == address) return &nic;
  }
  return nullptr;
}

TEST(DiscoveryTest, GpuServerFromHwlocXmlOnly) {
  auto discoverer = NewDiscoverer({.topology_xml = kGpuServerXml, .use_sysfs = false});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());

  EXPECT_EQ(inventory.cpu.packages, 2);
  EXPECT_EQ(inventory.cpu.threads_per_core, 2);
  ASSERT_EQ(inventory.cpu.cores.size(), 16u);
  EXPECT_THAT(inventory.cpu.cores[3].threads, ElementsAre(3, 19));
  ASSERT_EQ(inventory.cpu.numa_nodes.size(), 2u);
  EXPECT_EQ(inventory.cpu.numa_nodes[1].id, 1);
  EXPECT_EQ(inventory.cpu.numa_nodes[1].package, 1);
  EXPECT_EQ(inventory.cpu.numa_nodes[1].cores, 8);
  EXPECT_EQ(inventory.cpu.numa_nodes[1].cpus.size(), 16u);
  EXPECT_EQ(inventory.cpu.numa_nodes[1].cpus.front(), 8);
  EXPECT_EQ(inventory.cpu.numa_nodes[0].memory_bytes, 256ull << 30);

  ASSERT_EQ(inventory.gpus.size(), 8u);
  const Gpu* gpu = FindGpu(inventory, "0000:18:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->pci.class_id, 0x0302);
  EXPECT_EQ(gpu->pci.vendor_id, 0x10de);
  EXPECT_EQ(gpu->pci.device_id, 0x2330);
  EXPECT_EQ(gpu->vendor, "nvidia");
  EXPECT_EQ(gpu->model, "H100-SXM5-80GB");
  EXPECT_EQ(gpu->memory_bytes, 80ull << 30);
  EXPECT_EQ(gpu->pci.numa_node, 0);
  EXPECT_EQ(gpu->pci.pcie_root, "pci0000:15");
  EXPECT_THAT(gpu->drm_nodes, ElementsAre("card1", "renderD129"));
  const Gpu* far_gpu = FindGpu(inventory, "0000:b9:00.0");
  ASSERT_NE(far_gpu, nullptr);
  EXPECT_EQ(far_gpu->pci.numa_node, 1);
  EXPECT_EQ(far_gpu->pci.pcie_root, "pci0000:b7");

  ASSERT_EQ(inventory.nics.size(), 2u);
  const Nic* nic = FindNic(inventory, "0000:9c:00.0");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->interface, "ens2f0np0");
  EXPECT_EQ(nic->mac, "b8:3f:d2:0a:01:10");
  EXPECT_THAT(nic->rdma_devices, ElementsAre("mlx5_1"));
  EXPECT_EQ(nic->model, "ConnectX-7");
  EXPECT_EQ(nic->pci.numa_node, 1);
  EXPECT_EQ(nic->pci.pcie_root, "pci0000:97");
  EXPECT_TRUE(nic->link_up);
}

TEST(DiscoveryTest, NicHeavyServerFromHwlocXml) {
  auto discoverer = NewDiscoverer({.topology_xml = std::string(DEVLET_DEVICES_TESTDATA) +
                                                   "/nic-1s-8port.xml",
                                   .use_sysfs = false});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  EXPECT_EQ(inventory.cpu.packages, 1);
  EXPECT_EQ(inventory.cpu.threads_per_core, 1);
  ASSERT_EQ(inventory.cpu.numa_nodes.size(), 1u);
  EXPECT_EQ(inventory.cpu.numa_nodes[0].cores, 12);
  EXPECT_EQ(inventory.cpu.numa_nodes[0].memory_bytes, 128ull << 30);
  ASSERT_EQ(inventory.nics.size(), 8u);
  const Nic* port = FindNic(inventory, "0000:4c:00.1");
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->interface, "ens3f1");
  EXPECT_EQ(port->mac, "40:a6:b7:02:01:15");
  EXPECT_EQ(port->model, "E810-C");
  EXPECT_EQ(port->vendor, "intel");
  EXPECT_EQ(port->pci.numa_node, 0);
  EXPECT_EQ(port->pci.pcie_root, "pci0000:4b");
  EXPECT_EQ(port->speed_mbps, std::nullopt);  // hwloc has no link speed of the netdev
  ASSERT_EQ(inventory.gpus.size(), 1u);  // the BMC's VGA controller
  EXPECT_EQ(inventory.gpus[0].pci.class_id, 0x0300);
  EXPECT_EQ(inventory.gpus[0].vendor, "0x1a03");
  EXPECT_EQ(inventory.gpus[0].memory_bytes, 0u);
}

TEST(DiscoveryTest, XmlWithTheRealSysfsRootIgnoresTheRealSysfs) {
  auto discoverer = NewDiscoverer({.sysfs_root = "/sys/", .topology_xml = kGpuServerXml});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  EXPECT_EQ(inventory.gpus.size(), 8u);
  EXPECT_EQ(inventory.nics.size(), 2u);
  EXPECT_EQ(inventory.nics[0].interface, "ens1f0np0");
}

TEST(DiscoveryTest, GpuServerFromXmlAndSysfs) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  auto discoverer = NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kGpuServerXml});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  ASSERT_EQ(inventory.gpus.size(), 8u);
  ASSERT_EQ(inventory.nics.size(), 2u);
  const Gpu* gpu = FindGpu(inventory, "0000:19:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->pci.driver, "nvidia");
  EXPECT_EQ(gpu->pci.iommu_group, 11);
  EXPECT_EQ(gpu->pci.pcie_root, "pci0000:15");
  EXPECT_THAT(gpu->pci.prefetchable_bar_sizes, ElementsAre(128ull << 30, 32ull << 20));
  EXPECT_THAT(gpu->drm_nodes, ElementsAre("card2", "renderD130"));
  EXPECT_GT(gpu->pci.link_speed_gbps, 60.0);  // from hwloc

  EXPECT_EQ(gpu->uuid, "");  // no /proc given for a simulated machine

  const Nic* nic = FindNic(inventory, "0000:1a:00.0");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->pci.driver, "mlx5_core");
  EXPECT_EQ(nic->interface, "ens1f0np0");
  EXPECT_EQ(nic->mac, "b8:3f:d2:0a:00:10");
  EXPECT_TRUE(nic->link_up);
  EXPECT_EQ(nic->speed_mbps, 200000);
  EXPECT_EQ(nic->sriov_total_vfs, 8);
  EXPECT_EQ(nic->sriov_num_vfs, 0);
  EXPECT_TRUE(nic->vfs.empty());
  EXPECT_THAT(nic->rdma_devices, ElementsAre("mlx5_0"));
}

TEST(DiscoveryTest, NvidiaUuidAndMinorFromProc) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  const std::string proc = fake.Root() + "/proc";
  std::filesystem::create_directories(proc + "/driver/nvidia/gpus/0000:9b:00.0");
  std::ofstream(proc + "/driver/nvidia/gpus/0000:9b:00.0/information")
      << "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-0a1b2c3d-0000-1111-2222-333344445555\n"
         "Device Minor: \t 5\n";
  auto discoverer = NewDiscoverer(
      {.sysfs_root = fake.Root(), .topology_xml = kGpuServerXml, .proc_root = proc});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  const Gpu* gpu = FindGpu(inventory, "0000:9b:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->uuid, "GPU-0a1b2c3d-0000-1111-2222-333344445555");
  EXPECT_EQ(gpu->nvidia_minor, 5);
  EXPECT_EQ(FindGpu(inventory, "0000:9a:00.0")->nvidia_minor, std::nullopt);
}

TEST(DiscoveryTest, RescanOfUnchangedMachineIsNoChange) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  auto discoverer = NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kGpuServerXml});
  ASSERT_OK_AND_ASSIGN(Inventory first, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(Inventory second, discoverer->Discover());
  EXPECT_TRUE(DiffInventories(first, second).empty()) << DiffInventories(first, second).ToString();
  EXPECT_EQ(first, second);
}

TEST(DiscoveryTest, RescanSeesNewVfsDriverChangesAndRemoval) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  auto discoverer = NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kGpuServerXml});
  ASSERT_OK_AND_ASSIGN(Inventory before, discoverer->Discover());

  ASSERT_OK(fake.WriteFile("bus/pci/devices/0000:1a:00.0/sriov_numvfs", "2\n"));
  ASSERT_OK_AND_ASSIGN(Inventory with_vfs, discoverer->Discover());
  InventoryDiff diff = DiffInventories(before, with_vfs);
  EXPECT_THAT(diff.added, ElementsAre("pci:0000:1a:00.2", "pci:0000:1a:00.3"));
  EXPECT_THAT(diff.changed, ElementsAre("pci:0000:1a:00.0"));
  const Nic* pf = FindNic(with_vfs, "0000:1a:00.0");
  ASSERT_NE(pf, nullptr);
  EXPECT_THAT(pf->vfs, ElementsAre("0000:1a:00.2", "0000:1a:00.3"));
  const Nic* vf = FindNic(with_vfs, "0000:1a:00.3");
  ASSERT_NE(vf, nullptr);
  EXPECT_TRUE(vf->is_vf());
  EXPECT_EQ(vf->pf_address, "0000:1a:00.0");
  EXPECT_EQ(vf->vf_index, 1);
  EXPECT_EQ(vf->interface, "ens1f0np0v1");
  EXPECT_EQ(vf->pci.numa_node, 0);
  EXPECT_EQ(vf->pci.pcie_root, "pci0000:15");
  EXPECT_EQ(vf->pci.device_id, 0x101e);

  ASSERT_OK(fake.WriteFile("bus/pci/devices/0000:18:00.0/driver/unbind", "0000:18:00.0"));
  ASSERT_OK(fake.RemovePciDevice("0000:b9:00.0"));
  ASSERT_OK_AND_ASSIGN(Inventory after, discoverer->Discover());
  diff = DiffInventories(with_vfs, after);
  EXPECT_THAT(diff.changed, ElementsAre("pci:0000:18:00.0"));
  EXPECT_THAT(diff.removed, ElementsAre("pci:0000:b9:00.0"));
  EXPECT_EQ(FindGpu(after, "0000:18:00.0")->pci.driver, "");
}

TEST(DiscoveryTest, SysfsOnlyFindsVmdDomainDevicesHwlocSkips) {
  FakeSysfs fake;
  ASSERT_OK(fake.AddDriver("nvme"));
  ASSERT_OK(fake.AddDriver("ice"));
  FakePciDevice nic;
  nic.address = "10000:e1:00.0";
  nic.parent = "pci0000:5d/0000:5d:05.5/pci10000:e0/10000:e0:1d.0";
  nic.vendor_id = 0x8086;
  nic.device_id = 0x1592;
  nic.class_code = 0x020000;
  nic.driver = "ice";
  nic.numa_node = -1;  // unknown
  nic.netdev = testing::FakeNetdev{.name = "ens9", .mac = "3C:FD:FE:00:00:01", .operstate = "down",
                                   .speed_mbps = -1};
  ASSERT_OK(fake.AddPciDevice(nic));
  auto discoverer = NewDiscoverer({.sysfs_root = fake.Root()});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  EXPECT_TRUE(inventory.gpus.empty());
  ASSERT_EQ(inventory.nics.size(), 1u);
  const Nic& found = inventory.nics[0];
  EXPECT_EQ(found.pci.address, "10000:e1:00.0");
  EXPECT_EQ(found.pci.numa_node, std::nullopt);
  EXPECT_EQ(found.pci.pcie_root, "pci0000:5d");
  EXPECT_EQ(found.model, "E810-C");
  EXPECT_EQ(found.mac, "3c:fd:fe:00:00:01");
  EXPECT_FALSE(found.link_up);
  EXPECT_EQ(found.speed_mbps, std::nullopt);
  EXPECT_FALSE(inventory.cpu.numa_nodes.empty());  // the live machine's CPUs
}

TEST(DiscoveryTest, LiveMachine) {
  auto discoverer = NewDiscoverer({});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  EXPECT_GE(inventory.cpu.numa_nodes.size(), 1u);
  EXPECT_GE(inventory.cpu.cores.size(), 1u);
  for (const Nic& nic : inventory.nics) EXPECT_FALSE(nic.pci.address.empty());
}

TEST(DiscoveryTest, MachineWithoutDevices) {
  FakeSysfs fake;
  auto discoverer = NewDiscoverer({.sysfs_root = fake.Root()});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  EXPECT_TRUE(inventory.gpus.empty());
  EXPECT_TRUE(inventory.nics.empty());
  EXPECT_GE(inventory.cpu.cores.size(), 1u);
}

TEST(DiscoveryTest, BadTopologyXmlIsAClearError) {
  auto missing = NewDiscoverer({.topology_xml = "/nonexistent/topo.xml", .use_sysfs = false});
  auto result = missing->Discover();
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(Message(result.status()), HasSubstr("/nonexistent/topo.xml"));
  FakeSysfs fake;
  std::string path = fake.Root() + "/garbage.xml";
  std::ofstream(path) << "this is not xml";
  auto garbage = NewDiscoverer({.topology_xml = path, .use_sysfs = false});
  result = garbage->Discover();
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(Message(result.status()), HasSubstr("garbage.xml"));
}

}  // namespace
}  // namespace devlet::devices
