// File: devlet/devices/profile.h
//
// Device profiles: the administrator's configuration (YAML) saying which discovered devices become
// which DRA devices and how they may be shared. Profiles are tried in order; the first profile that
// matches a device owns it.
//
//   profiles:
//   - name: gpu                 # device names gpu-0, gpu-1, ... (index among this profile's matches)
//     kind: gpu                 # gpu | nic | vf | cpu
//     match:                    # every given criterion must hold; none given matches all of the kind
//       vendorIDs: ["0x10de"]
//       deviceIDs: ["0x2330"]
//       drivers: [nvidia]       # a device of a `vfio: true` profile also matches while on vfio-pci
//       pciAddresses: ["0000:18:00.0"]
//       interfaces: [ens1f0np0] # nic / vf: the (PF) netdev
//       models: [H100-SXM5-80GB]
//       numaNodes: [0]
//     sharing:
//       mode: whole             # whole | partitions (gpu) | consumable (nic, cpu)
//       partitions: 4           # partitions: shared counters "memory" and "slices" per GPU
//       bandwidthShare: 10G     # consumable nic: request granularity of the "bandwidth" capacity
//     numVFs: 8                 # vf: VFs published per PF, created on demand by preparation
//     vfio: true                # bind to vfio-pci at prepare (VM passthrough)
//     mdevType: nvidia-63       # gpu / vf: create a mediated device of this type at prepare
//                               # (not with vfio); attribute mdevType; the UUID comes from prepare
//     init: {command: [/usr/local/sbin/gpu-reset, --quiet], timeoutSeconds: 30}
//     cleanup: {command: [/usr/local/sbin/gpu-reset], timeoutSeconds: 30}
//     attributes: {tier: gold, rack: 7, ecc: true, firmware: {version: 1.2.3}, zones: [a, b]}
//                               # a list value is a list-typed attribute (DRAListTypeAttributes)
//     skipNodeOperations: true  # KEP-5945: nothing to prepare, nothing for the container
//     cdiDevices: ["nvidia.com/gpu={uuid}"]   # vendor CDI devices beside devlet's edits:
//                               # {uuid} (NVIDIA), {minor} (/dev/nvidia<minor>), {pciBusID},
//                               # {index} (gpu-3 -> 3), {name}; resolved in /etc/cdi, /var/run/cdi
//     nodeAllocatableResources:   # KEP-5517, published with the DRANodeAllocatableResources gate
//       memory: {overhead: {perPod: 2Gi, perContainer: 256Mi}}   # host memory the driver costs
//       cpu: {mapping: {capacityKey: cpus, capacityMultiplier: 1}}  # (cpu profiles' default)
//
// Devices produced (attributes without a domain are in the DRA driver's domain):
//   gpu   <name>-<i>: type=gpu, vendor, vendorID, deviceID, model, driver, pciBusID, pcieRoot,
//         numaNode, iommuGroup; capacity memory. Partitions add <name>-<i>-part-<j> devices and a
//         counter set <name>-<i>-counters (memory, slices) that the whole device and the partitions
//         consume.
//   nic   <name>-<i>: type=nic, ..., interface, mac, rdma, rdmaDevice, rdmaDevices (list),
//         sriovTotalVFs; capacity
//         bandwidth (bits/s); consumable mode allows multiple allocations with a request policy.
//   vf    <name>-<i>-vf-<j>: type=vf, pfPciBusID, pfInterface, vfIndex, and pciBusID/interface once
//         the VF exists; preparation creates it.
//   cpu   <name>-numa<id>: type=cpu, numaNode, package, smt; consumable capacities cpus and memory;
//         nodeAllocatableResources cpu <- cpus x 1, memory <- memory x 1.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/devices/dra_device.h"
#include "devlet/devices/inventory.h"

namespace devlet::devices {

// ProfileKind is the kind of inventory item a profile turns into devices.
enum class ProfileKind { kGpu, kNic, kVf, kCpu };

// SharingMode says how one inventory item may be shared.
enum class SharingMode { kWhole, kPartitions, kConsumable };

// DeviceMatch selects inventory items; empty lists do not constrain.
struct DeviceMatch {
  std::vector<std::uint16_t> vendor_ids;
  std::vector<std::uint16_t> device_ids;
  std::vector<std::string> drivers;
  std::vector<std::string> pci_addresses;
  std::vector<std::string> interfaces;
  std::vector<std::string> models;
  std::vector<int> numa_nodes;
  bool operator==(const DeviceMatch&) const = default;
};

// Profile is one entry of the configuration.
struct Profile {
  std::string name;  // DNS label prefix of the device names
  ProfileKind kind = ProfileKind::kGpu;
  DeviceMatch match;
  SharingMode sharing = SharingMode::kWhole;
  int partitions = 0;           // kPartitions
  std::string bandwidth_share;  // kConsumable NICs, quantity string (bits/s); default "1G"
  int num_vfs = 0;              // kVf
  bool vfio = false;
  std::string mdev_type;  // mediated device type created at prepare; "" for none
  std::optional<CommandLine> init;
  std::optional<CommandLine> cleanup;
  std::map<std::string, AttributeValue> attributes;
  // Attributes given as YAML lists (list-typed, KEP-5491; published with DRAListTypeAttributes).
  std::map<std::string, std::vector<AttributeValue>> list_attributes;
  // skipNodeOperations: true (KEP-5945): the devices need no node operation; refused for cpu and
  // vf profiles and with vfio, mdevType, init or cleanup.
  bool skip_node_operations = false;
  // cdiDevices: templates of vendor CDI device names, expanded per device ({uuid}, {minor},
  // {pciBusID}, {index}, {name}); gpu and nic profiles.
  std::vector<std::string> cdi_devices;
  // KEP-5517 entries by resource name; they replace the kind's defaults for that resource (cpu
  // devices map cpu <- cpus and memory <- memory).
  std::map<std::string, NodeAllocatable> node_allocatable;
  bool operator==(const Profile&) const = default;
};

// ProfileConfig is the whole configuration.
struct ProfileConfig {
  std::vector<Profile> profiles;
  bool operator==(const ProfileConfig&) const = default;
};

// ParseProfileConfig parses the YAML above; errors name the profile, the field and the line.
absl::StatusOr<ProfileConfig> ParseProfileConfig(std::string_view yaml);

// LoadProfileConfig reads and parses a file.
absl::StatusOr<ProfileConfig> LoadProfileConfig(const std::string& path);

// DefaultProfileConfig publishes every NVIDIA, AMD and Intel GPU (gpu-<i>; not BMC display
// controllers) and every NIC physical function (nic-<i>) whole, and one consumable CPU device per
// NUMA node (cpu-numa<id>).
ProfileConfig DefaultProfileConfig();

// BuildDeviceSet applies the profiles to an inventory. The result is deterministic (inventory
// order), so an unchanged inventory yields an equal DeviceSet, and it passes ValidateDeviceSet.
// Device indices count a profile's matches in address order; with `previous` (the set published
// last), a device that was published keeps its name even when devices before it disappeared
// (unplugging gpu-3 does not rename gpu-4..7 under running claims), and new devices take the
// lowest free indices.
absl::StatusOr<DeviceSet> BuildDeviceSet(const Inventory& inventory, const ProfileConfig& config,
                                         const DeviceSet* previous = nullptr);

// RescanResult is what one rescan found.
struct RescanResult {
  bool changed = false;  // false: nothing to republish
  InventoryDiff inventory_diff;
  DeviceSetDiff device_diff;
};

// Rescanner keeps the last inventory and device set, and tells on each rescan (hot-plug, driver
// change, periodic timer) whether the published devices must change. Device names stay stable
// across rescans (BuildDeviceSet with the previous set). Not thread-safe.
class Rescanner {
 public:
  Rescanner(Discoverer& discoverer, ProfileConfig config);

  // Rescan discovers the machine again and rebuilds the devices. The first call always reports a
  // change. On error the previous state is kept.
  absl::StatusOr<RescanResult> Rescan();

  const Inventory& inventory() const { return inventory_; }
  const DeviceSet& devices() const { return devices_; }

 private:
  Discoverer& discoverer_;
  ProfileConfig config_;
  bool first_ = true;
  Inventory inventory_;
  DeviceSet devices_;
};

}  // namespace devlet::devices
