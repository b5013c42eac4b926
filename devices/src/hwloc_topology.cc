#include "hwloc_topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "devlet/common/status.h"

namespace devlet::devices::internal {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::vector<int> BitmapToVector(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (set == nullptr) return out;
  int index = hwloc_bitmap_first(set);
  while (index >= 0) {
    out.push_back(index);
    index = hwloc_bitmap_next(set, index);
  }
  return out;
}

int PackageOf(hwloc_topology_t topology, hwloc_const_cpuset_t cpuset) {
  hwloc_obj_t package = nullptr;
  while ((package = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, package)) != nullptr) {
    if (package->cpuset && hwloc_bitmap_isincluded(cpuset, package->cpuset)) {
      return static_cast<int>(package->logical_index);
    }
  }
  return 0;
}

CpuTopology ReadCpus(hwloc_topology_t topology) {
  CpuTopology cpu;
  cpu.packages = std::max(1, hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PACKAGE));
  hwloc_obj_t node = nullptr;
  while ((node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
    NumaNode numa;
    numa.id = static_cast<int>(node->os_index);
    numa.memory_bytes = node->attr ? node->attr->numanode.local_memory : 0;
    numa.cpus = BitmapToVector(node->cpuset);
    numa.package = node->cpuset && !hwloc_bitmap_iszero(node->cpuset)
                       ? PackageOf(topology, node->cpuset)
                       : 0;
    cpu.numa_nodes.push_back(std::move(numa));
  }
  auto numa_of = [&](hwloc_const_cpuset_t set) {
    hwloc_obj_t n = nullptr;
    while ((n = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, n)) != nullptr) {
      if (n->cpuset && hwloc_bitmap_intersects(set, n->cpuset)) return static_cast<int>(n->os_index);
    }
    return 0;
  };
  hwloc_obj_type_t core_type =
      hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  hwloc_obj_t core = nullptr;
  while ((core = hwloc_get_next_obj_by_type(topology, core_type, core)) != nullptr) {
    CpuCore c;
    c.id = static_cast<int>(core->logical_index);
    c.threads = BitmapToVector(core->cpuset);
    c.package = PackageOf(topology, core->cpuset);
    c.numa_node = numa_of(core->cpuset);
    cpu.threads_per_core = std::max<int>(cpu.threads_per_core, static_cast<int>(c.threads.size()));
    cpu.cores.push_back(std::move(c));
  }
  for (NumaNode& numa : cpu.numa_nodes) {
    numa.cores = static_cast<int>(std::count_if(cpu.cores.begin(), cpu.cores.end(),
                                                [&](const CpuCore& c) { return c.numa_node == numa.id; }));
  }
  std::sort(cpu.numa_nodes.begin(), cpu.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return cpu;
}

std::map<std::string, std::string> Infos(hwloc_obj_t obj) {
  std::map<std::string, std::string> infos;
  for (unsigned i = 0; i < obj->infos_count; ++i) {
    if (obj->infos[i].name && obj->infos[i].value) infos[obj->infos[i].name] = obj->infos[i].value;
  }
  return infos;
}

std::string PcieRootOf(hwloc_obj_t obj) {
  for (hwloc_obj_t p = obj->parent; p != nullptr; p = p->parent) {
    if (p->type != HWLOC_OBJ_BRIDGE) {
      if (p->type == HWLOC_OBJ_PCI_DEVICE) continue;
      break;
    }
    if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST &&
        p->attr->bridge.downstream_type == HWLOC_OBJ_BRIDGE_PCI) {
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "pci%04x:%02x",
                    static_cast<unsigned>(p->attr->bridge.downstream.pci.domain),
                    static_cast<unsigned>(p->attr->bridge.downstream.pci.secondary_bus));
      return buffer;
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<HwlocSnapshot> LoadHwloc(const std::string& xml_path, bool with_io) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return ErrnoToStatus(errno, "initialising hwloc");
  TopologyPtr topology(raw);
  if (with_io) {
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    hwloc_topology_set_type_filter(raw, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
  }
  if (!xml_path.empty()) {
    if (hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) {
      return ErrnoToStatus(errno, "reading hwloc topology XML " + xml_path);
    }
  }
  if (hwloc_topology_load(raw) != 0) {
    return ErrnoToStatus(errno, xml_path.empty() ? std::string("loading the machine topology")
                                                 : "loading hwloc topology XML " + xml_path +
                                                       " (is it hwloc XML?)");
  }
  HwlocSnapshot snapshot;
  snapshot.cpu = ReadCpus(raw);
  hwloc_obj_t obj = nullptr;
  while ((obj = hwloc_get_next_pcidev(raw, obj)) != nullptr) {
    const auto& pci = obj->attr->pcidev;
    HwlocPciDevice device;
    char address[32];
    std::snprintf(address, sizeof(address), "%04x:%02x:%02x.%x", static_cast<unsigned>(pci.domain),
                  static_cast<unsigned>(pci.bus), static_cast<unsigned>(pci.dev),
                  static_cast<unsigned>(pci.func));
    device.address = address;
    device.class_id = pci.class_id;
    device.vendor_id = pci.vendor_id;
    device.device_id = pci.device_id;
    device.subsystem_vendor_id = pci.subvendor_id;
    device.subsystem_device_id = pci.subdevice_id;
    device.link_speed_gbps = pci.linkspeed;
    hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(raw, obj);
    if (ancestor && ancestor->nodeset && hwloc_bitmap_weight(ancestor->nodeset) == 1) {
      device.numa_node = hwloc_bitmap_first(ancestor->nodeset);
    }
    device.pcie_root = PcieRootOf(obj);
    device.infos = Infos(obj);
    for (hwloc_obj_t child = obj->io_first_child; child; child = child->next_sibling) {
      if (child->type != HWLOC_OBJ_OS_DEVICE) continue;
      HwlocOsDevice os;
      os.name = child->name ? child->name : "";
      os.type = static_cast<int>(child->attr->osdev.type);
      os.infos = Infos(child);
      device.os_devices.push_back(std::move(os));
    }
    snapshot.pci.push_back(std::move(device));
  }
  return snapshot;
}

}  // namespace devlet::devices::internal
