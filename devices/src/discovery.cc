#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "devlet/common/status.h"
#include "devlet/devices/inventory.h"
#include "devlet/devices/sysfs.h"
#include "hwloc_topology.h"

namespace devlet::devices {
namespace {

struct KnownModel {
  std::uint16_t vendor_id;
  std::uint16_t device_id;
  const char* model;
  std::uint64_t memory_bytes;
};

constexpr std::uint64_t kGi = 1024ull * 1024 * 1024;

// A small table of common data-centre devices; anything else gets its model from hwloc's PCI
// names (when built with pci.ids) and its memory from the BAR sizes.
constexpr KnownModel kKnownModels[] = {
    {0x10de, 0x2330, "H100-SXM5-80GB", 80 * kGi},
    {0x10de, 0x2331, "H100-PCIe-80GB", 80 * kGi},
    {0x10de, 0x2335, "H200-SXM5-141GB", 141 * kGi},
    {0x10de, 0x20b0, "A100-SXM4-40GB", 40 * kGi},
    {0x10de, 0x20b2, "A100-SXM4-80GB", 80 * kGi},
    {0x10de, 0x20b5, "A100-PCIe-80GB", 80 * kGi},
    {0x10de, 0x26b9, "L40S", 48 * kGi},
    {0x10de, 0x1eb8, "Tesla-T4", 16 * kGi},
    {0x1002, 0x740c, "Instinct-MI250X", 128 * kGi},
    {0x1002, 0x74a1, "Instinct-MI300X", 192 * kGi},
    {0x15b3, 0x101b, "ConnectX-6", 0},
    {0x15b3, 0x101c, "ConnectX-6-VF", 0},
    {0x15b3, 0x101d, "ConnectX-6-Dx", 0},
    {0x15b3, 0x101e, "ConnectX-VF", 0},
    {0x15b3, 0x1021, "ConnectX-7", 0},
    {0x8086, 0x1592, "E810-C", 0},
    {0x8086, 0x1889, "Intel-AVF", 0},
    {0x1af4, 0x1041, "virtio-net", 0},
};

const KnownModel* FindModel(std::uint16_t vendor, std::uint16_t device) {
  for (const KnownModel& m : kKnownModels) {
    if (m.vendor_id == vendor && m.device_id == device) return &m;
  }
  return nullptr;
}

// Raw is one PCI function while discovery merges hwloc and sysfs.
struct Raw {
  PciFunction pci;
  std::map<std::string, std::string> infos;
  std::vector<internal::HwlocOsDevice> os_devices;
  bool in_sysfs = false;
};

std::string Dir(const std::string& address) { return "bus/pci/devices/" + address; }

std::optional<long long> OptInt(const Sysfs& sysfs, const std::string& path) {
  auto value = ReadInt(sysfs, path);
  if (!value.ok()) return std::nullopt;
  return *value;
}

std::optional<std::string> OptLinkBase(const Sysfs& sysfs, const std::string& path) {
  auto value = LinkBaseName(sysfs, path);
  if (!value.ok()) return std::nullopt;
  return *value;
}

std::vector<std::string> ListOrEmpty(const Sysfs& sysfs, const std::string& path) {
  auto names = sysfs.ListDir(path);
  if (!names.ok()) return {};
  return *names;
}

// Reads the prefetchable memory BAR sizes from `resource` ("start end flags" per line; the first
// six lines are BARs 0-5).
std::vector<std::uint64_t> ReadBars(const Sysfs& sysfs, const std::string& dir) {
  std::vector<std::uint64_t> sizes;
  auto content = sysfs.ReadFile(dir + "/resource");
  if (!content.ok()) return sizes;
  std::istringstream lines(*content);
  std::string line;
  for (int bar = 0; bar < 6 && std::getline(lines, line); ++bar) {
    unsigned long long start = 0, end = 0, flags = 0;
    if (std::sscanf(line.c_str(), "%llx %llx %llx", &start, &end, &flags) != 3) continue;
    constexpr unsigned long long kMem = 0x200, kPrefetch = 0x2000;
    if (end > start && (flags & kMem) && (flags & kPrefetch)) sizes.push_back(end - start + 1);
  }
  return sizes;
}

void FillFromSysfs(const Sysfs& sysfs, Raw& raw) {
  const std::string dir = Dir(raw.pci.address);
  PciFunction& pci = raw.pci;
  if (auto v = OptInt(sysfs, dir + "/vendor")) pci.vendor_id = static_cast<std::uint16_t>(*v);
  if (auto v = OptInt(sysfs, dir + "/device")) pci.device_id = static_cast<std::uint16_t>(*v);
  if (auto v = OptInt(sysfs, dir + "/subsystem_vendor")) {
    pci.subsystem_vendor_id = static_cast<std::uint16_t>(*v);
  }
  if (auto v = OptInt(sysfs, dir + "/subsystem_device")) {
    pci.subsystem_device_id = static_cast<std::uint16_t>(*v);
  }
  if (auto v = OptInt(sysfs, dir + "/class")) pci.class_id = static_cast<std::uint16_t>(*v >> 8);
  pci.driver = OptLinkBase(sysfs, dir + "/driver").value_or("");
  if (auto numa = OptInt(sysfs, dir + "/numa_node"); numa && *numa >= 0) {
    pci.numa_node = static_cast<int>(*numa);
  }
  if (auto group = OptLinkBase(sysfs, dir + "/iommu_group")) {
    try {
      pci.iommu_group = std::stoi(*group);
    } catch (...) {
    }
  }
  // pcieRoot: the first component under devices/ of the resolved device path, which must end in
  // the address (k8s.io/dynamic-resource-allocation/deviceattribute).
  if (auto real = sysfs.RealPath(dir); real.ok()) {
    std::filesystem::path path(*real);
    auto it = path.begin();
    if (it != path.end() && *it == "devices" && ++it != path.end() &&
        it->string().rfind("pci", 0) == 0 && path.filename() == pci.address) {
      pci.pcie_root = it->string();
    }
  }
  pci.prefetchable_bar_sizes = ReadBars(sysfs, dir);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string ModelOf(const Raw& raw) {
  if (const KnownModel* m = FindModel(raw.pci.vendor_id, raw.pci.device_id)) return m->model;
  for (const auto& os : raw.os_devices) {
    if (auto it = os.infos.find("GPUModel"); it != os.infos.end()) return it->second;
  }
  if (auto it = raw.infos.find("PCIDevice"); it != raw.infos.end()) return it->second;
  return "";
}

Gpu MakeGpu(const Sysfs* sysfs, const Raw& raw) {
  Gpu gpu;
  gpu.pci = raw.pci;
  gpu.vendor = VendorName(raw.pci.vendor_id);
  gpu.model = ModelOf(raw);
  if (const KnownModel* m = FindModel(raw.pci.vendor_id, raw.pci.device_id); m && m->memory_bytes) {
    gpu.memory_bytes = m->memory_bytes;
  } else if (!raw.pci.prefetchable_bar_sizes.empty()) {
    gpu.memory_bytes = *std::max_element(raw.pci.prefetchable_bar_sizes.begin(),
                                         raw.pci.prefetchable_bar_sizes.end());
  }
  if (sysfs && raw.in_sysfs) {
    gpu.drm_nodes = ListOrEmpty(*sysfs, Dir(raw.pci.address) + "/drm");
  } else {
    for (const auto& os : raw.os_devices) {
      if (os.type == internal::kOsDevGpu) gpu.drm_nodes.push_back(os.name);
    }
    std::sort(gpu.drm_nodes.begin(), gpu.drm_nodes.end());
  }
  return gpu;
}

Nic MakeNic(const Sysfs* sysfs, const Raw& raw) {
  Nic nic;
  nic.pci = raw.pci;
  nic.vendor = VendorName(raw.pci.vendor_id);
  nic.model = ModelOf(raw);
  if (sysfs && raw.in_sysfs) {
    const std::string dir = Dir(raw.pci.address);
    std::vector<std::string> netdevs = ListOrEmpty(*sysfs, dir + "/net");
    if (!netdevs.empty()) {
      nic.interface = netdevs.front();
      const std::string net = dir + "/net/" + nic.interface;
      nic.mac = Lower(ReadTrimmed(*sysfs, net + "/address").value_or(""));
      nic.link_up = ReadTrimmed(*sysfs, net + "/operstate").value_or("") == "up";
      if (auto speed = OptInt(*sysfs, net + "/speed"); speed && *speed > 0) nic.speed_mbps = *speed;
    }
    nic.rdma_devices = ListOrEmpty(*sysfs, dir + "/infiniband");
    nic.sriov_total_vfs = static_cast<int>(OptInt(*sysfs, dir + "/sriov_totalvfs").value_or(0));
    nic.sriov_num_vfs = static_cast<int>(OptInt(*sysfs, dir + "/sriov_numvfs").value_or(0));
    std::map<int, std::string> vfs;
    for (const std::string& name : ListOrEmpty(*sysfs, dir)) {
      if (name.rfind("virtfn", 0) != 0) continue;
      int index = std::atoi(name.c_str() + 6);
      if (auto vf = OptLinkBase(*sysfs, dir + "/" + name)) vfs[index] = *vf;
    }
    for (auto& [index, address] : vfs) nic.vfs.push_back(address);
    if (auto pf = OptLinkBase(*sysfs, dir + "/physfn")) {
      nic.pf_address = *pf;
      for (const std::string& name : ListOrEmpty(*sysfs, Dir(*pf))) {
        if (name.rfind("virtfn", 0) != 0) continue;
        if (OptLinkBase(*sysfs, Dir(*pf) + "/" + name) == raw.pci.address) {
          nic.vf_index = std::atoi(name.c_str() + 6);
        }
      }
    }
  } else {
    // Simulated from XML only: hwloc's OS devices; no link state, so the link counts as up.
    nic.link_up = true;
    for (const auto& os : raw.os_devices) {
      if (os.type == internal::kOsDevNetwork && nic.interface.empty()) {
        nic.interface = os.name;
        if (auto it = os.infos.find("Address"); it != os.infos.end()) nic.mac = Lower(it->second);
      } else if (os.type == internal::kOsDevOpenFabrics) {
        nic.rdma_devices.push_back(os.name);
      }
    }
    std::sort(nic.rdma_devices.begin(), nic.rdma_devices.end());
  }
  return nic;
}

}  // namespace

NvidiaInfo ReadNvidiaInfo(const Sysfs& procfs, std::string_view pci_address) {
  NvidiaInfo info;
  auto content = procfs.ReadFile("driver/nvidia/gpus/" + std::string(pci_address) + "/information");
  if (!content.ok()) return info;
  std::istringstream lines(*content);
  std::string line;
  auto value_of = [](const std::string& text) {
    size_t colon = text.find(':');
    std::string value = colon == std::string::npos ? "" : text.substr(colon + 1);
    size_t begin = value.find_first_not_of(" \t");
    size_t end = value.find_last_not_of(" \t\r");
    return begin == std::string::npos ? std::string() : value.substr(begin, end - begin + 1);
  };
  while (std::getline(lines, line)) {
    if (line.rfind("GPU UUID:", 0) == 0) {
      info.uuid = value_of(line);
    } else if (line.rfind("Device Minor:", 0) == 0) {
      try {
        info.minor = std::stoi(value_of(line));
      } catch (...) {
      }
    }
  }
  return info;
}

namespace {

class HwlocSysfsDiscoverer final : public Discoverer {
 public:
  explicit HwlocSysfsDiscoverer(DiscoveryOptions options) : options_(std::move(options)) {
    std::filesystem::path root = std::filesystem::path(options_.sysfs_root).lexically_normal();
    if (!root.has_filename()) root = root.parent_path();
    real_root_ = root == "/sys";
    // An XML machine is simulated: the real /sys describes another machine, so it is not read.
    if (options_.use_sysfs && !(real_root_ && !options_.topology_xml.empty())) {
      sysfs_ = NewRealSysfs(options_.sysfs_root);
    }
    if (!options_.proc_root.empty()) {
      procfs_ = NewRealSysfs(options_.proc_root);
    } else if (sysfs_ && real_root_) {
      procfs_ = NewRealSysfs("/proc");
    }
  }

  absl::StatusOr<Inventory> Discover() override {
    // hwloc probes the live machine's PCI tree only when the sysfs root is the real one; a
    // simulated machine gets its PCI devices from the XML and the fake sysfs tree.
    const bool live_io = options_.topology_xml.empty() && sysfs_ != nullptr && real_root_;
    const bool with_io = !options_.topology_xml.empty() || live_io;
    DEVLET_ASSIGN_OR_RETURN(internal::HwlocSnapshot snapshot,
                            internal::LoadHwloc(options_.topology_xml, with_io));
    std::map<std::string, Raw> devices;
    for (auto& hw : snapshot.pci) {
      Raw raw;
      raw.pci.address = hw.address;
      raw.pci.class_id = hw.class_id;
      raw.pci.vendor_id = hw.vendor_id;
      raw.pci.device_id = hw.device_id;
      raw.pci.subsystem_vendor_id = hw.subsystem_vendor_id;
      raw.pci.subsystem_device_id = hw.subsystem_device_id;
      raw.pci.link_speed_gbps = hw.link_speed_gbps;
      raw.pci.numa_node = hw.numa_node;
      raw.pci.pcie_root = hw.pcie_root;
      raw.infos = std::move(hw.infos);
      raw.os_devices = std::move(hw.os_devices);
      devices[raw.pci.address] = std::move(raw);
    }
    if (sysfs_) {
      auto listed = sysfs_->ListDir("bus/pci/devices");
      if (listed.ok()) {
        // sysfs is authoritative for presence: a device hwloc's XML lists but sysfs lacks was
        // removed; a device sysfs has but hwloc skipped (32-bit VMD domain, a VF created later)
        // is added.
        std::set<std::string> present(listed->begin(), listed->end());
        for (auto it = devices.begin(); it != devices.end();) {
          it = present.contains(it->first) ? std::next(it) : devices.erase(it);
        }
        for (const std::string& address : present) {
          // Only display and network controllers are read in full (a node has hundreds of PCI
          // functions: bridges, storage, ...).
          auto known = devices.find(address);
          std::uint16_t class_id = known != devices.end() ? known->second.pci.class_id : 0;
          if (known == devices.end()) {
            auto code = ReadInt(*sysfs_, Dir(address) + "/class");
            class_id = code.ok() ? static_cast<std::uint16_t>(*code >> 8) : 0;
          }
          if ((class_id >> 8) != 0x02 && (class_id >> 8) != 0x03) {
            if (known != devices.end()) devices.erase(known);
            continue;
          }
          Raw& raw = devices[address];
          if (raw.pci.address.empty()) raw.pci.address = address;
          raw.in_sysfs = true;
          std::optional<int> hwloc_numa = raw.pci.numa_node;
          std::string hwloc_root = raw.pci.pcie_root;
          FillFromSysfs(*sysfs_, raw);
          if (!raw.pci.numa_node) raw.pci.numa_node = hwloc_numa;
          if (raw.pci.pcie_root.empty()) raw.pci.pcie_root = hwloc_root;
        }
      } else if (listed.status().code() != absl::StatusCode::kNotFound) {
        return WithContext(listed.status(), "discovering PCI devices");
      }
    }
    Inventory inventory;
    inventory.cpu = std::move(snapshot.cpu);
    for (const auto& [address, raw] : devices) {
      const std::uint16_t base_class = raw.pci.class_id >> 8;
      if (base_class == 0x03) {
        inventory.gpus.push_back(MakeGpu(sysfs_.get(), raw));
        if (procfs_) {
          NvidiaInfo info = ReadNvidiaInfo(*procfs_, address);
          inventory.gpus.back().uuid = info.uuid;
          inventory.gpus.back().nvidia_minor = info.minor;
        }
      } else if (base_class == 0x02) {
        inventory.nics.push_back(MakeNic(sysfs_.get(), raw));
      }
    }
    return inventory;
  }

 private:
  DiscoveryOptions options_;
  bool real_root_ = false;
  std::unique_ptr<Sysfs> sysfs_;
  std::unique_ptr<Sysfs> procfs_;
};

template <typename T>
void DiffById(const std::vector<T>& before, const std::vector<T>& after, InventoryDiff& diff) {
  std::map<std::string, const T*> old_items;
  for (const T& item : before) old_items["pci:" + item.pci.address] = &item;
  std::set<std::string> seen;
  for (const T& item : after) {
    std::string id = "pci:" + item.pci.address;
    seen.insert(id);
    auto it = old_items.find(id);
    if (it == old_items.end()) {
      diff.added.push_back(id);
    } else if (!(*it->second == item)) {
      diff.changed.push_back(id);
    }
  }
  for (const auto& [id, item] : old_items) {
    if (!seen.contains(id)) diff.removed.push_back(id);
  }
}

std::string Join(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? " " : "") + names[i];
  return out + "]";
}

}  // namespace

std::unique_ptr<Discoverer> NewDiscoverer(DiscoveryOptions options) {
  return std::make_unique<HwlocSysfsDiscoverer>(std::move(options));
}

std::string VendorName(std::uint16_t vendor_id) {
  switch (vendor_id) {
    case 0x10de: return "nvidia";
    case 0x1002: return "amd";
    case 0x8086: return "intel";
    case 0x15b3: return "mellanox";
    case 0x14e4: return "broadcom";
    case 0x1af4: return "virtio";
    default: {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "0x%04x", vendor_id);
      return buffer;
    }
  }
}

std::string InventoryDiff::ToString() const {
  return "added " + Join(added) + " removed " + Join(removed) + " changed " + Join(changed);
}

InventoryDiff DiffInventories(const Inventory& before, const Inventory& after) {
  InventoryDiff diff;
  DiffById(before.gpus, after.gpus, diff);
  DiffById(before.nics, after.nics, diff);
  if (!(before.cpu == after.cpu)) diff.changed.push_back("cpu");
  std::sort(diff.added.begin(), diff.added.end());
  std::sort(diff.removed.begin(), diff.removed.end());
  std::sort(diff.changed.begin(), diff.changed.end());
  return diff;
}

}  // namespace devlet::devices
