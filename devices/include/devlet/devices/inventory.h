// File: devlet/devices/inventory.h
//
// The node's hardware inventory as discovery sees it (hwloc topology + sysfs), before profiles turn
// it into DRA devices. Plain value types with equality, so that a rescan of an unchanged machine
// compares equal and republishes nothing:
//
//   std::unique_ptr<Discoverer> discoverer = NewDiscoverer({.sysfs_root = "/sys"});
//   DEVLET_ASSIGN_OR_RETURN(Inventory inventory, discoverer->Discover());
//   for (const Gpu& gpu : inventory.gpus) { ... gpu.pci.address ... }
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::devices {

// PciFunction is what every PCI device has, from hwloc and sysfs.
struct PciFunction {
  std::string address;  // "0000:18:00.0"; the domain may have more than 4 digits (VMD)
  std::uint16_t class_id = 0;  // base class << 8 | subclass, e.g. 0x0302 (3D controller)
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint16_t subsystem_vendor_id = 0;
  std::uint16_t subsystem_device_id = 0;
  std::string driver;  // bound kernel driver; "" when unbound or unknown
  std::optional<int> numa_node;  // absent when the kernel says -1 or nothing is known
  std::string pcie_root;         // "pci0000:15"; "" when unknown
  std::optional<int> iommu_group;
  std::vector<std::uint64_t> prefetchable_bar_sizes;  // bytes, from sysfs `resource`
  double link_speed_gbps = 0;                         // hwloc's PCIe link speed (GB/s)
  bool operator==(const PciFunction&) const = default;
};

// Gpu is a PCI display/3D controller (class 0x03xx).
struct Gpu {
  PciFunction pci;
  std::string vendor;  // "nvidia", "amd", "intel" or the vendor id in hex
  std::string model;   // from hwloc's GPUModel/PCIDevice info or devlet's id table; may be ""
  std::uint64_t memory_bytes = 0;  // largest prefetchable BAR when the model table does not know
  std::vector<std::string> drm_nodes;  // "card1", "renderD129"
  std::string uuid;                    // NVIDIA: "GPU-..." from /proc/driver/nvidia/gpus/<bdf>
  std::optional<int> nvidia_minor;     // NVIDIA: /dev/nvidia<minor>
  bool operator==(const Gpu&) const = default;
};

// Nic is a PCI network controller (class 0x02xx), physical function or SR-IOV virtual function.
struct Nic {
  PciFunction pci;
  std::string vendor;
  std::string model;
  std::string interface;  // netdev name, "" when none (bound to vfio-pci, or a VF without driver)
  std::string mac;        // lowercase "aa:bb:cc:dd:ee:ff"
  bool link_up = false;   // operstate "up"
  std::optional<std::int64_t> speed_mbps;  // absent when the kernel reports -1 or nothing
  int sriov_total_vfs = 0;  // PF only
  int sriov_num_vfs = 0;
  std::vector<std::string> vfs;  // PF only: VF addresses by VF index
  std::string pf_address;        // VF only
  int vf_index = -1;             // VF only
  std::vector<std::string> rdma_devices;  // "mlx5_0"
  bool is_vf() const { return !pf_address.empty(); }
  bool operator==(const Nic&) const = default;
};

// CpuCore is one physical core and its hardware threads.
struct CpuCore {
  int id = 0;  // logical index across the machine
  int package = 0;
  int numa_node = 0;
  std::vector<int> threads;  // OS CPU numbers (SMT siblings), ascending
  bool operator==(const CpuCore&) const = default;
};

// NumaNode is one NUMA node with its CPUs and memory.
struct NumaNode {
  int id = 0;  // OS index (`/sys/devices/system/node/node<id>`)
  int package = 0;
  std::vector<int> cpus;  // OS CPU numbers, ascending
  int cores = 0;
  std::uint64_t memory_bytes = 0;
  bool operator==(const NumaNode&) const = default;
};

// CpuTopology summarises the CPUs.
struct CpuTopology {
  int packages = 0;
  int threads_per_core = 1;  // > 1 means SMT is on
  std::vector<NumaNode> numa_nodes;
  std::vector<CpuCore> cores;
  bool operator==(const CpuTopology&) const = default;
};

// Inventory is everything discovery found. Lists are sorted by PCI address / id.
struct Inventory {
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  CpuTopology cpu;
  bool operator==(const Inventory&) const = default;
};

// InventoryDiff names what changed between two inventories ("pci:0000:18:00.0", "numa:1", "cpu").
struct InventoryDiff {
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> changed;
  bool empty() const { return added.empty() && removed.empty() && changed.empty(); }
  std::string ToString() const;
};

// DiffInventories compares two inventories.
InventoryDiff DiffInventories(const Inventory& before, const Inventory& after);

// DiscoveryOptions says where discovery looks.
struct DiscoveryOptions {
  // The directory that plays `/sys` (`--sysfs-root`). Drivers, NUMA nodes, SR-IOV, netdev state,
  // IOMMU groups and BAR sizes come from here; PCI devices hwloc did not report (32-bit VMD domains,
  // VFs created after an XML snapshot) are added from `bus/pci/devices`.
  std::string sysfs_root = "/sys";
  // An hwloc XML topology (`--topology-xml`) instead of probing the live machine; the simulated
  // node's CPUs, NUMA nodes and PCI tree come from it. With an XML file and the real "/sys" as
  // sysfs root, sysfs is not read (it describes another machine); give a fake tree as sysfs root
  // to simulate drivers, SR-IOV, link state and hot-plug on top of the XML.
  std::string topology_xml;
  // Read sysfs at all. Off for "XML only" simulations.
  bool use_sysfs = true;
  // The directory that plays `/proc`, for NVIDIA's per-GPU information (UUID, device minor). Empty:
  // "/proc" when the sysfs root is the real "/sys", otherwise not read.
  std::string proc_root;
};

// Discoverer finds the node's devices. Each Discover call is a fresh scan (rescan on hot-plug or
// driver changes is just another call); implementations are not thread-safe.
class Discoverer {
 public:
  virtual ~Discoverer() = default;
  virtual absl::StatusOr<Inventory> Discover() = 0;
};

// NewDiscoverer returns the hwloc + sysfs discoverer.
std::unique_ptr<Discoverer> NewDiscoverer(DiscoveryOptions options);

// VendorName maps a PCI vendor id to devlet's short name ("nvidia", "amd", "intel", "mellanox",
// "broadcom"), or "0x1234" when unknown.
std::string VendorName(std::uint16_t vendor_id);

}  // namespace devlet::devices
