// Private: what devlet reads from an hwloc topology (live machine or XML), as plain data.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/devices/inventory.h"

namespace devlet::devices::internal {

struct HwlocOsDevice {
  std::string name;
  int type = -1;  // hwloc 2.x hwloc_obj_osdev_type_e
  std::map<std::string, std::string> infos;
};

struct HwlocPciDevice {
  std::string address;
  std::uint16_t class_id = 0;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint16_t subsystem_vendor_id = 0;
  std::uint16_t subsystem_device_id = 0;
  double link_speed_gbps = 0;
  std::optional<int> numa_node;
  std::string pcie_root;
  std::map<std::string, std::string> infos;
  std::vector<HwlocOsDevice> os_devices;
};

struct HwlocSnapshot {
  CpuTopology cpu;
  std::vector<HwlocPciDevice> pci;
};

// LoadHwloc loads the topology from `xml_path` (or the live machine when empty), with I/O discovery
// on when `with_io` is true (KEEP_IMPORTANT for PCI and bridges, KEEP_ALL for OS devices).
absl::StatusOr<HwlocSnapshot> LoadHwloc(const std::string& xml_path, bool with_io);

inline constexpr int kOsDevGpu = 1;
inline constexpr int kOsDevNetwork = 2;
inline constexpr int kOsDevOpenFabrics = 3;

}  // namespace devlet::devices::internal
