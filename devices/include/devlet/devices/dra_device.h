// File: devlet/devices/dra_device.h
//
// DRA device descriptions in devlet's own plain structs. They carry what a resource.k8s.io/v1
// ResourceSlice needs (name, typed attributes, capacities as quantity strings, shared counters,
// consumable capacity) plus what preparation needs (PCI address, NUMA node, the profile's actions).
// An adapter in the node agent converts them into ResourceSlices; this module does not depend on
// kube/.
//
//   DraDevice gpu;
//   gpu.name = "gpu-0";
//   gpu.attributes[kAttrPciBusId] = std::string("0000:18:00.0");
//   gpu.capacities["memory"] = {.value = "80Gi"};
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::devices {

// Standard attribute names (k8s.io/dynamic-resource-allocation/deviceattribute).
inline constexpr std::string_view kAttrPciBusId = "resource.kubernetes.io/pciBusID";
inline constexpr std::string_view kAttrPcieRoot = "resource.kubernetes.io/pcieRoot";
inline constexpr std::string_view kAttrNumaNode = "resource.kubernetes.io/numaNode";

// SemVer is a `version` attribute value (semantic version 2.0, e.g. "535.104.5").
struct SemVer {
  std::string value;
  bool operator==(const SemVer&) const = default;
};

// AttributeValue is one DeviceAttribute: exactly one of int, bool, string or version.
using AttributeValue = std::variant<std::int64_t, bool, std::string, SemVer>;

// AttributeToString renders a value for logs and diffs: 3, true, "x", v1.2.3.
std::string AttributeToString(const AttributeValue& value);

// RequestPolicy limits how much of a consumable capacity one allocation may take (resource.k8s.io/v1
// CapacityRequestPolicy). Quantities are Kubernetes quantity strings.
struct RequestPolicy {
  std::string default_value;              // used when a request names no amount
  std::vector<std::string> valid_values;  // discrete choices; exclusive with the range
  std::string min;                        // valid range; empty when unset
  std::string max;
  std::string step;
  bool operator==(const RequestPolicy&) const = default;
};

// Capacity is one entry of Device.capacity.
struct Capacity {
  std::string value;  // quantity string, e.g. "80Gi", "100G", "16"
  std::optional<RequestPolicy> request_policy;
  bool operator==(const Capacity&) const = default;
};

// CounterConsumption is one Device.consumesCounters entry.
struct CounterConsumption {
  std::string counter_set;
  std::map<std::string, std::string> counters;  // counter name -> quantity
  bool operator==(const CounterConsumption&) const = default;
};

// CounterSet is one ResourceSlice.spec.sharedCounters entry.
struct CounterSet {
  std::string name;  // DNS label
  std::map<std::string, std::string> counters;
  bool operator==(const CounterSet&) const = default;
};

// CommandLine is an administrator-defined command from the profile configuration (never from a
// claim): absolute program path plus arguments, and a timeout.
struct CommandLine {
  std::vector<std::string> argv;
  int timeout_ms = 30000;
  bool operator==(const CommandLine&) const = default;
};

// Preparation says what NodePrepareResources must do to the hardware behind a device before the
// container or VM gets it, in this order, and what unprepare undoes in reverse order.
struct Preparation {
  bool bind_vfio = false;         // bind the PCI function to vfio-pci (VM passthrough)
  std::string sriov_pf;           // for VF devices: the PF whose sriov_numvfs must be >= sriov_num_vfs
  int sriov_num_vfs = 0;
  // Mediated device: create one instance of this type (mdev_supported_types/<type>) on the PCI
  // function at prepare (after the SR-IOV step, before init), remove it at unprepare. The
  // instance's UUID is in the returned kMdev ActionRecord (`mdev_uuid`); publish it as the
  // `mdevUUID` device-metadata attribute (KubeVirt prefers it over pciBusID).
  std::string mdev_type;
  // CDI devices from a vendor's own spec (e.g. "nvidia.com/gpu=GPU-<uuid>") handed to the
  // container beside devlet's edits; resolved against the vendor spec directories at prepare.
  std::vector<std::string> vendor_cdi_devices;
  std::optional<CommandLine> init;     // run at prepare
  std::optional<CommandLine> cleanup;  // run at unprepare (and when init fails)
  bool operator==(const Preparation&) const = default;
};

// NodeAllocatable says how allocating a device counts against one of the node's own allocatable
// resources (KEP-5517, resource.k8s.io/v1 Device.nodeAllocatableResources): quantities as strings,
// "" when unset. A mapping (the device *is* CPU or memory: a claim's consumedCapacity[capacity_key]
// x capacity_multiplier, or device count x device_multiplier) or an overhead (host memory a GPU's
// driver costs each pod / container using it), or both. Published only with the
// DRANodeAllocatableResources gate; the kubelet then sizes the pod's cgroups with it and the
// scheduler counts it once against the node's allocatable.
struct NodeAllocatable {
  std::string capacity_key;  // a key of the device's capacities
  std::string capacity_multiplier;
  std::string device_multiplier;
  std::string overhead_per_pod;
  std::string overhead_per_container;
  bool operator==(const NodeAllocatable&) const = default;
};

// DraDevice is one device of a ResourceSlice plus the facts preparation needs.
struct DraDevice {
  std::string name;  // DNS label, unique on the node
  std::map<std::string, AttributeValue> attributes;
  // List-typed attributes (KEP-5491, published only with the DRAListTypeAttributes gate): every
  // element of one list has the same type; a name is never in `attributes` too.
  std::map<std::string, std::vector<AttributeValue>> list_attributes;
  std::map<std::string, Capacity> capacities;
  std::vector<CounterConsumption> consumes_counters;
  bool allow_multiple_allocations = false;  // consumable capacity (DRAConsumableCapacity)
  // Node-allocatable resource name ("cpu", "memory", "hugepages-<size>") -> how the device maps
  // to it (KEP-5517). CPU devices map cpu <- capacity cpus and memory <- capacity memory.
  std::map<std::string, NodeAllocatable> node_allocatable;
  // The device needs no node operation (KEP-5945): nothing to prepare and nothing for the
  // container (no device nodes, no CDI edits; e.g. bandwidth or licence accounting). With the
  // DRAOptionalNodeOperations gate it goes into slices with skipNodeOperations ["*"], so the
  // kubelet calls neither NodePrepareResources nor NodeUnprepareResources for it.
  bool skip_node_operations = false;
  std::optional<int> numa_node;
  std::string pci_address;  // "" for devices that are not one PCI function (CPU sets)
  std::string profile;      // name of the profile that produced it
  Preparation preparation;
  bool operator==(const DraDevice&) const = default;
};

// DeviceSet is everything the node publishes: devices plus the shared counter sets they consume
// (the adapter puts counter sets in a slice of their own, as the API requires).
struct DeviceSet {
  std::vector<DraDevice> devices;
  std::vector<CounterSet> counter_sets;
  bool operator==(const DeviceSet&) const = default;

  // Find returns the device with that name, or nullptr.
  const DraDevice* Find(std::string_view name) const;
};

// DeviceSetDiff names what changed between two DeviceSets; empty() means "publish nothing".
struct DeviceSetDiff {
  std::vector<std::string> added;    // device names
  std::vector<std::string> removed;
  std::vector<std::string> changed;  // same name, different content
  bool counter_sets_changed = false;
  bool empty() const {
    return added.empty() && removed.empty() && changed.empty() && !counter_sets_changed;
  }
  // ToString summarises the diff for logs: "added [gpu-8] removed [] changed [nic-0]".
  std::string ToString() const;
};

// DiffDeviceSets compares two sets by device name.
DeviceSetDiff DiffDeviceSets(const DeviceSet& before, const DeviceSet& after);

// DeviceSetFingerprint returns a stable content hash of everything published from a set (names,
// attributes, capacities, counters, consumption, multiple-allocation flag, counter sets) as 16
// lowercase hex digits. Equal sets have equal fingerprints across processes and restarts (no
// pointer or hash-seed dependence), so the node agent can store it (for example in a slice
// annotation) and skip republishing after a restart on an unchanged machine. Preparation details
// and the profile name are not part of it: they are never published.
std::string DeviceSetFingerprint(const DeviceSet& set);

// ValidateDeviceSet checks the API limits a slice adapter would otherwise hit late: DNS-label
// names, unique names, attribute/capacity names (C identifier <= 32, optional DNS prefix <= 63),
// string and version values <= 64 characters, attributes + capacities <= 32 per device,
// consumesCounters <= 2 per device, counter sets referenced exist.
absl::Status ValidateDeviceSet(const DeviceSet& set);

// IsValidPciBusId says whether `address` has the exact `dddd:bb:dd.f` lowercase form the standard
// pciBusID attribute requires (16-bit domain).
bool IsValidPciBusId(std::string_view address);

// FormatBinaryQuantity renders a byte count as a Kubernetes quantity, exact and as short as possible:
// 85899345920 -> "80Gi", 1000 -> "1000".
std::string FormatBinaryQuantity(std::uint64_t bytes);

// FormatDecimalQuantity renders a count with decimal SI suffixes: 100000000000 -> "100G".
std::string FormatDecimalQuantity(std::uint64_t value);

}  // namespace devlet::devices
