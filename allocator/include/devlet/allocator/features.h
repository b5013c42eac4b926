// File: devlet/allocator/features.h
//
// Feature gates that change what the structured allocator does, with their Kubernetes 1.37
// defaults, and the `--feature-gates=A=true,B=false` parser.
//
//   DEVLET_ASSIGN_OR_RETURN(devlet::allocator::Features features,
//                           devlet::allocator::ParseFeatureGates("DRAConsumableCapacity=false"));
//
// Semantics follow upstream (research §1.8): a claim that uses a disabled feature is an error for
// the whole pod; slices and devices that use a disabled feature are hidden.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace devlet::allocator {

// Features are the allocator-relevant gates. Defaults are Kubernetes 1.37's.
struct Features {
  bool admin_access = true;               // DRAAdminAccess
  bool prioritized_list = true;           // DRAPrioritizedList
  bool partitionable_devices = true;      // DRAPartitionableDevices
  bool device_taints = true;              // DRADeviceTaints
  bool device_taint_rules = true;         // DRADeviceTaintRules
  bool consumable_capacity = true;        // DRAConsumableCapacity (also distinctAttribute)
  bool device_binding_conditions = true;  // DRADeviceBindingConditions
  bool resource_claim_device_status = true;  // DRAResourceClaimDeviceStatus
  bool extended_resource = true;          // DRAExtendedResource
  bool list_type_attributes = false;      // DRAListTypeAttributes (alpha)
  bool fractional_capacity_range = true;  // DRAFractionalCapacityRange
  bool derived_attributes = false;        // DRADerivedAttributes (alpha)
  bool compatibility_groups = false;      // DRADeviceCompatibilityGroups (alpha)
  bool optional_node_operations = false;  // DRAOptionalNodeOperations (alpha, KEP-5945)
  // DRASchedulerFilterTimeout (beta, on): bound each scheduling verb's search by a timeout
  // (upstream's filterTimeout, 10 s in the scheduler). Not an allocator feature: the callers
  // (devlet-extender, devlet-alloc) read it to decide whether to set a deadline.
  bool scheduler_filter_timeout = true;

  // Binding conditions need both gates (upstream's DeviceBindingAndStatus).
  bool binding_and_status() const {
    return device_binding_conditions && resource_claim_device_status;
  }

  // Upstream runs its "experimental" allocator when any of these alpha gates is on; some rules
  // differ there (a slice with skipNodeOperations is usable only with DRAOptionalNodeOperations
  // on and the node declaring it, and its value is copied into the results).
  bool experimental() const {
    return list_type_attributes || derived_attributes || compatibility_groups ||
           optional_node_operations;
  }

  friend bool operator==(const Features&, const Features&) = default;
};

// ParseFeatureGates applies a comma-separated `Name=true|false` list to `base`. Gate names are the
// Kubernetes ones; gates that do not affect allocation (e.g. SchedulerPreQueueingHints) are
// accepted and ignored. Unknown names, bad values, and turning off a gate that is locked to true
// in 1.37 (DynamicResourceAllocation, DRAPrioritizedList) are InvalidArgument errors.
absl::StatusOr<Features> ParseFeatureGates(std::string_view spec, Features base = Features{});

// FormatFeatures renders the allocator-relevant gates as `Name=true,...` (for --explain).
std::string FormatFeatures(const Features& features);

}  // namespace devlet::allocator
