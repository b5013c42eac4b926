// File: devlet/node/slices.h
//
// The node's devices as resource.k8s.io/v1 ResourceSlices, and publishing them through an
// ObjectStore the way the upstream resourceslice controller does (kubelet-dra.md §4.3, §4.4):
//
//   - one pool per node, named after the node, `spec.nodeName` set;
//   - at most 128 devices per slice, 64 when a slice holds a device with taints, consumesCounters
//     or list-typed attributes;
//   - shared counter sets in slices of their own (a slice carries devices or sharedCounters, never
//     both), at most 8 sets per slice;
//   - every slice of one publication carries the same pool generation and resourceSliceCount; a
//     changed device set is published under generation + 1, an unchanged one is not written;
//   - owner reference to the Node object when the store has it.
//
//   DEVLET_ASSIGN_OR_RETURN(std::vector<kube::ResourceSlice> slices,
//                           BuildResourceSlices(device_set, {.driver = d, .node_name = n}));
//   SlicePublisher publisher(store, {.driver = d, .node_name = n});
//   DEVLET_ASSIGN_OR_RETURN(PublishResult result, publisher.Publish(device_set));
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/devices/dra_device.h"
#include "devlet/kube/client.h"
#include "devlet/kube/resource.h"

namespace devlet::node {

// PublishFeatures are the Kubernetes feature gates (devlet-node --feature-gates, 1.37 names and
// defaults) that decide what the node publishes. The API server drops fields of a disabled gate
// and the kubelet and scheduler ignore them, so each is off unless the cluster has it on.
struct PublishFeatures {
  // DRANodeAllocatableResources (alpha, off): devices publish nodeAllocatableResources (CPU
  // devices: cpu <- capacity cpus, memory <- capacity memory; profile overheads), and the NRI
  // plugin leaves the CFS quota and memory limit of those devices to the kubelet, which sizes
  // them from the same mapping.
  bool node_allocatable_resources = false;
  // DRAListTypeAttributes (alpha, off): list-typed attributes (NICs' rdmaDevices, profile
  // attributes given as lists) are published; off, they are left out.
  bool list_type_attributes = false;
  // DRAPartitionableDevicesType (alpha, off): every device that consumes counters (a
  // partitioned GPU and its partitions) gets the string attribute partitionType, its counter
  // cost ("memory80Gi-slices4"), and its slices name it in spec.partitionTypeAttribute.
  bool partitionable_devices_type = false;
  // DRAOptionalNodeOperations (alpha, off): devices of profiles with skipNodeOperations go into
  // slices of their own with spec.skipNodeOperations ["*"]: the kubelet does not call
  // NodePrepareResources / NodeUnprepareResources for claims of only such devices.
  bool optional_node_operations = false;
};

// ParseNodeFeatureGates parses --feature-gates ("A=true,B=false"). Gates that change nothing
// devlet-node publishes (the other 1.37 DRA gates) are accepted; unknown names, bad values and
// turning off a GA gate are InvalidArgument naming the gate.
absl::StatusOr<PublishFeatures> ParseNodeFeatureGates(std::string_view spec);

// NodeFeatureGatesHelp describes each gate devlet-node knows and what it changes (for --help).
std::string NodeFeatureGatesHelp();

// SliceOptions names the driver and node a publication is for.
struct SliceOptions {
  std::string driver;
  std::string node_name;
  // Device taints by device name (from health monitoring), copied into the devices.
  std::map<std::string, std::vector<kube::DeviceTaint>> taints;
  // Publish only when the Node object exists (API server mode: the slices are owned by the Node,
  // so the garbage collector removes them with it, and the kubelet expects them so). Publish then
  // fails with FailedPrecondition while the Node is missing.
  bool require_node = false;
  PublishFeatures features;
};

// ToKubeDevice converts one devices/ device into a slice device; InvalidArgument when a
// capacity or counter is not a valid quantity (naming the device and field).
absl::StatusOr<kube::Device> ToKubeDevice(const devices::DraDevice& device,
                                          const PublishFeatures& features = {});

// kPartitionTypeAttribute is the attribute (in the driver's domain) that carries a partitioned
// device's type with DRAPartitionableDevicesType.
inline constexpr std::string_view kPartitionTypeAttribute = "partitionType";

// UsesAdvancedFeatures reports whether a device lowers its slice's limit to 64 devices (taints,
// consumesCounters, list-typed attributes).
bool UsesAdvancedFeatures(const kube::Device& device);

// SliceName returns the name of slice `index` of a node's pool: "<node>-<driver>-<index>" with
// dots in the driver replaced by dashes, shortened with a hash to stay a valid object name.
std::string SliceName(const std::string& node_name, const std::string& driver, int index);

// BuildResourceSlices splits a device set into slices (generation 1, names from SliceName, counter
// sets first). Devices keep the set's order. An empty set yields one empty slice, so that the
// pool exists and says "no devices".
absl::StatusOr<std::vector<kube::ResourceSlice>> BuildResourceSlices(
    const devices::DeviceSet& set, const SliceOptions& options);

// PublishResult says what one Publish did.
struct PublishResult {
  bool changed = false;  // false: the store already held exactly these slices
  std::int64_t generation = 0;
  int slices = 0;
  int created = 0;
  int updated = 0;
  int deleted = 0;
};

// SlicePublisher keeps a node's pool in an ObjectStore in line with its device set. Repeated
// Publish calls with an unchanged set write nothing, and repair drift (slices deleted or edited
// behind our back are rewritten under a new generation). Not thread-safe.
class SlicePublisher {
 public:
  SlicePublisher(kube::ObjectStore& store, SliceOptions options);

  absl::StatusOr<PublishResult> Publish(const devices::DeviceSet& set);

  // set_taints replaces the device taints used by the next Publish.
  void set_taints(std::map<std::string, std::vector<kube::DeviceTaint>> taints) {
    options_.taints = std::move(taints);
  }

 private:
  kube::ObjectStore& store_;
  SliceOptions options_;
};

}  // namespace devlet::node
