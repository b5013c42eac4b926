// File: devlet/kube/resource.h
//
// The resource.k8s.io/v1 object model (Kubernetes 1.37, k8s.io/api v0.37.2): DeviceClass,
// ResourceSlice, ResourceClaim, ResourceClaimTemplate, DeviceTaintRule, and the API limits.
// v1beta1 and v1beta2 input is converted to these types by the codec (devlet/kube/codec.h).
//
// Every struct mirrors its Go type field for field (snake_case names, Go pointers as
// std::optional, Go maps as sorted std::map), so that validation and the allocator can follow
// upstream code line by line. Maps keyed by QualifiedName use the name as written: an
// unqualified name belongs to the driver's domain (resolve it with the slice's driver).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devlet/kube/core.h"
#include "devlet/kube/meta.h"

namespace devlet::kube {

// The API group and version this model is.
inline constexpr std::string_view kResourceGroup = "resource.k8s.io";
inline constexpr std::string_view kResourceApiVersion = "resource.k8s.io/v1";

// ---- Limits (k8s.io/api/resource/v1 constants) -------------------------------------------------
inline constexpr int kDriverNameMaxLength = 63;
inline constexpr int kPoolNameMaxLength = 253;
inline constexpr int kDeviceMaxDomainLength = 63;
inline constexpr int kDeviceMaxIDLength = 32;
inline constexpr int kDeviceAttributeMaxValueLength = 64;
inline constexpr int kAllocationResultsMaxSize = 32;
inline constexpr int kDeviceRequestsMaxSize = 32;
inline constexpr int kDeviceConstraintsMaxSize = 32;
inline constexpr int kDeviceConfigMaxSize = 32;
inline constexpr int kDeviceSelectorsMaxSize = 32;
inline constexpr int kFirstAvailableDeviceRequestMaxSize = 8;
inline constexpr int kDeviceTolerationsMaxLength = 16;
inline constexpr int kDeviceTaintsMaxLength = 16;
inline constexpr int kResourceSliceMaxDevices = 128;
inline constexpr int kResourceSliceMaxDevicesWithAdvancedFeatures = 64;
inline constexpr int kResourceSliceMaxAttributesAndCapacitiesPerDevice = 32;
inline constexpr int kResourceSliceMaxAttributeValuesPerDevice = 48;
inline constexpr int kResourceSliceMaxCounterSets = 8;
inline constexpr int kResourceSliceMaxCountersPerCounterSet = 32;
inline constexpr int kResourceSliceMaxDeviceCounterConsumptionsPerDevice = 2;
inline constexpr int kResourceSliceMaxCountersPerDeviceCounterConsumption = 32;
inline constexpr int kCompatibilityGroupsMaxSize = 2;
inline constexpr int kBindingConditionsMaxSize = 4;
inline constexpr int kBindingFailureConditionsMaxSize = 4;
inline constexpr int kResourceClaimReservedForMaxSize = 256;
inline constexpr int kOpaqueParametersMaxLength = 10 * 1024;
inline constexpr int kCELSelectorExpressionMaxLength = 10 * 1024;
inline constexpr int64_t kCELSelectorExpressionMaxCost = 1000000;
inline constexpr int kCapacityRequestPolicyDiscreteMaxOptions = 10;
inline constexpr int kAllocatedDeviceStatusMaxConditions = 8;
inline constexpr int kAllocatedDeviceStatusDataMaxLength = 10 * 1024;
inline constexpr int kNetworkDeviceDataMaxIPs = 16;
inline constexpr int kNetworkDeviceDataInterfaceNameMaxLength = 256;
inline constexpr int kNetworkDeviceDataHardwareAddressMaxLength = 128;
inline constexpr int kDeviceTaintRuleStatusMaxConditions = 8;

// ---- Enumerations (string-typed in Go; unknown values are kept and rejected by validation) ---
inline constexpr std::string_view kAllocationModeExactCount = "ExactCount";
inline constexpr std::string_view kAllocationModeAll = "All";
inline constexpr std::string_view kTolerationOpExists = "Exists";
inline constexpr std::string_view kTolerationOpEqual = "Equal";
inline constexpr std::string_view kTaintEffectNone = "None";
inline constexpr std::string_view kTaintEffectNoSchedule = "NoSchedule";
inline constexpr std::string_view kTaintEffectNoExecute = "NoExecute";
inline constexpr std::string_view kAllocationConfigSourceClass = "FromClass";
inline constexpr std::string_view kAllocationConfigSourceClaim = "FromClaim";
inline constexpr std::string_view kSkipNodePrepareResources = "NodePrepareResources";
inline constexpr std::string_view kSkipNodeUnprepareResources = "NodeUnprepareResources";
inline constexpr std::string_view kSkipNodeOperationAll = "*";

// ---- Shared pieces -------------------------------------------------------------------------

// CELDeviceSelector holds one CEL expression over `device`.
struct CELDeviceSelector {
  std::string expression;

  friend bool operator==(const CELDeviceSelector&, const CELDeviceSelector&) = default;
};

// DeviceSelector: exactly one member must be set; an empty selector is an unknown future type.
struct DeviceSelector {
  std::optional<CELDeviceSelector> cel;

  friend bool operator==(const DeviceSelector&, const DeviceSelector&) = default;
};

// OpaqueDeviceConfiguration: driver-specific parameters, kept as raw JSON.
struct OpaqueDeviceConfiguration {
  std::string driver;
  RawJson parameters;

  friend bool operator==(const OpaqueDeviceConfiguration&,
                         const OpaqueDeviceConfiguration&) = default;
};

// DeviceConfiguration: exactly one member must be set.
struct DeviceConfiguration {
  std::optional<OpaqueDeviceConfiguration> opaque;

  friend bool operator==(const DeviceConfiguration&, const DeviceConfiguration&) = default;
};

// DeviceTaint is a taint on a device (in a slice or a DeviceTaintRule).
struct DeviceTaint {
  std::string key;
  std::string value;
  std::string effect;  // None | NoSchedule | NoExecute; unknown effects act like None
  std::optional<Time> time_added;

  friend bool operator==(const DeviceTaint&, const DeviceTaint&) = default;
};

// DeviceToleration tolerates device taints.
struct DeviceToleration {
  std::string key;
  std::string operator_;  // JSON "operator": Exists | Equal (empty = Equal after defaulting)
  std::string value;
  std::string effect;  // empty matches every effect
  std::optional<int64_t> toleration_seconds;

  friend bool operator==(const DeviceToleration&, const DeviceToleration&) = default;
};

// ---- DeviceClass -------------------------------------------------------------------------------

// DeviceClassConfiguration is one entry of DeviceClassSpec.config.
struct DeviceClassConfiguration : DeviceConfiguration {
  friend bool operator==(const DeviceClassConfiguration&,
                         const DeviceClassConfiguration&) = default;
};

// DeviceClassSpec: selectors every device of the class must satisfy, class config, and the
// extended resource name the class serves (DRAExtendedResource).
struct DeviceClassSpec {
  std::vector<DeviceSelector> selectors;
  std::vector<DeviceClassConfiguration> config;
  std::optional<std::string> extended_resource_name;

  friend bool operator==(const DeviceClassSpec&, const DeviceClassSpec&) = default;
};

// DeviceClass (cluster-scoped).
struct DeviceClass {
  ObjectMeta metadata;
  DeviceClassSpec spec;
  Extra extra;

  friend bool operator==(const DeviceClass&, const DeviceClass&) = default;
};

// ---- ResourceSlice -------------------------------------------------------------------------

// ResourcePool identifies the pool a slice belongs to and its generation.
struct ResourcePool {
  std::string name;
  int64_t generation = 0;
  int64_t resource_slice_count = 0;

  friend bool operator==(const ResourcePool&, const ResourcePool&) = default;
};

// Counter is one shared counter value.
struct Counter {
  Quantity value;

  friend bool operator==(const Counter&, const Counter&) = default;
};

// CounterSet is a named set of shared counters (sharedCounters).
struct CounterSet {
  std::string name;
  std::map<std::string, Counter> counters;

  friend bool operator==(const CounterSet&, const CounterSet&) = default;
};

// DeviceCounterConsumption: what a device consumes from one counter set.
struct DeviceCounterConsumption {
  std::string counter_set;
  std::map<std::string, Counter> counters;
  std::vector<std::string> compatibility_groups;  // DRADeviceCompatibilityGroups (alpha)

  friend bool operator==(const DeviceCounterConsumption&,
                         const DeviceCounterConsumption&) = default;
};

// CapacityRequestPolicyRange: min/max/step of a consumable capacity request.
struct CapacityRequestPolicyRange {
  std::optional<Quantity> min;
  std::optional<Quantity> max;
  std::optional<Quantity> step;

  friend bool operator==(const CapacityRequestPolicyRange&,
                         const CapacityRequestPolicyRange&) = default;
};

// CapacityRequestPolicy: default and allowed values of a consumable capacity request.
struct CapacityRequestPolicy {
  std::optional<Quantity> default_;  // JSON "default"
  std::vector<Quantity> valid_values;
  std::optional<CapacityRequestPolicyRange> valid_range;

  friend bool operator==(const CapacityRequestPolicy&, const CapacityRequestPolicy&) = default;
};

// DeviceCapacity: a device capacity, optionally consumable under a request policy.
struct DeviceCapacity {
  Quantity value;
  std::optional<CapacityRequestPolicy> request_policy;

  friend bool operator==(const DeviceCapacity&, const DeviceCapacity&) = default;
};

// DeviceAttribute: exactly one member is set (validation enforces it). The list forms are
// DRAListTypeAttributes (alpha).
struct DeviceAttribute {
  enum class Kind { kNone, kInt, kBool, kString, kVersion, kInts, kBools, kStrings, kVersions };

  std::optional<int64_t> int_value;                        // JSON "int"
  std::optional<bool> bool_value;                          // JSON "bool"
  std::optional<std::string> string_value;                 // JSON "string"
  std::optional<std::string> version_value;                // JSON "version" (semver 2.0.0)
  std::optional<std::vector<int64_t>> int_values;          // JSON "ints"
  std::optional<std::vector<bool>> bool_values;            // JSON "bools"
  std::optional<std::vector<std::string>> string_values;   // JSON "strings"
  std::optional<std::vector<std::string>> version_values;  // JSON "versions"

  // kind returns the first member that is set (kNone if none is).
  Kind kind() const;
  // NumSet counts the members that are set (1 for a valid attribute).
  int NumSet() const;

  friend bool operator==(const DeviceAttribute&, const DeviceAttribute&) = default;
};

// NodeAllocatableMapping (DRANodeAllocatableResources, alpha).
struct NodeAllocatableMapping {
  std::optional<std::string> capacity_key;
  std::optional<Quantity> capacity_multiplier;
  std::optional<Quantity> device_multiplier;

  friend bool operator==(const NodeAllocatableMapping&, const NodeAllocatableMapping&) = default;
};

// NodeAllocatableOverhead (DRANodeAllocatableResources, alpha).
struct NodeAllocatableOverhead {
  std::optional<Quantity> per_pod;
  std::optional<Quantity> per_container;

  friend bool operator==(const NodeAllocatableOverhead&, const NodeAllocatableOverhead&) = default;
};

// NodeAllocatableResource (DRANodeAllocatableResources, alpha).
struct NodeAllocatableResource {
  std::optional<NodeAllocatableMapping> mapping;
  std::optional<NodeAllocatableOverhead> overhead;

  friend bool operator==(const NodeAllocatableResource&, const NodeAllocatableResource&) = default;
};

// Device is one device in a slice (v1beta1's `basic` is flattened into it).
struct Device {
  std::string name;
  std::map<std::string, DeviceAttribute> attributes;  // QualifiedName -> attribute
  std::map<std::string, DeviceCapacity> capacity;     // QualifiedName -> capacity
  std::vector<DeviceCounterConsumption> consumes_counters;
  std::optional<std::string> node_name;       // only with perDeviceNodeSelection
  std::optional<NodeSelector> node_selector;  // only with perDeviceNodeSelection
  std::optional<bool> all_nodes;              // only with perDeviceNodeSelection
  std::vector<DeviceTaint> taints;
  std::optional<bool> binds_to_node;
  std::vector<std::string> binding_conditions;
  std::vector<std::string> binding_failure_conditions;
  std::optional<bool> allow_multiple_allocations;
  std::map<std::string, NodeAllocatableResource> node_allocatable_resources;

  friend bool operator==(const Device&, const Device&) = default;
};

// ResourceSliceSpec: one slice of a driver's pool.
struct ResourceSliceSpec {
  std::string driver;
  ResourcePool pool;
  std::optional<std::string> node_name;
  std::optional<NodeSelector> node_selector;
  std::optional<bool> all_nodes;
  std::vector<Device> devices;
  std::optional<bool> per_device_node_selection;
  std::vector<CounterSet> shared_counters;
  std::optional<std::string> partition_type_attribute;  // DRAPartitionableDevicesType
  std::vector<std::string> skip_node_operations;        // DRAOptionalNodeOperations

  friend bool operator==(const ResourceSliceSpec&, const ResourceSliceSpec&) = default;
};

// ResourceSlice (cluster-scoped).
struct ResourceSlice {
  ObjectMeta metadata;
  ResourceSliceSpec spec;
  Extra extra;

  friend bool operator==(const ResourceSlice&, const ResourceSlice&) = default;
};

// ---- ResourceClaim -------------------------------------------------------------------------

// CapacityRequirements: consumable capacity requested per device (DRAConsumableCapacity).
struct CapacityRequirements {
  std::map<std::string, Quantity> requests;  // QualifiedName -> amount

  friend bool operator==(const CapacityRequirements&, const CapacityRequirements&) = default;
};

// DeviceDerivedAttribute (DRADerivedAttributes, alpha): an attribute computed by CEL.
struct DeviceDerivedAttribute {
  std::string name;  // FullyQualifiedName
  std::string expression;

  friend bool operator==(const DeviceDerivedAttribute&, const DeviceDerivedAttribute&) = default;
};

// ExactDeviceRequest: `count` devices (or `All`) of a class.
struct ExactDeviceRequest {
  std::string device_class_name;
  std::vector<DeviceSelector> selectors;
  std::string allocation_mode;  // ExactCount (default) | All
  int64_t count = 0;            // defaulted to 1 for ExactCount by the codec when absent
  std::optional<bool> admin_access;
  std::vector<DeviceToleration> tolerations;
  std::optional<CapacityRequirements> capacity;
  std::vector<DeviceDerivedAttribute> derived_attributes;

  friend bool operator==(const ExactDeviceRequest&, const ExactDeviceRequest&) = default;
};

// DeviceSubRequest: one alternative of firstAvailable (no adminAccess).
struct DeviceSubRequest {
  std::string name;
  std::string device_class_name;
  std::vector<DeviceSelector> selectors;
  std::string allocation_mode;
  int64_t count = 0;
  std::vector<DeviceToleration> tolerations;
  std::optional<CapacityRequirements> capacity;
  std::vector<DeviceDerivedAttribute> derived_attributes;

  friend bool operator==(const DeviceSubRequest&, const DeviceSubRequest&) = default;
};

// DeviceRequest: exactly one of `exactly` / `first_available`.
struct DeviceRequest {
  std::string name;
  std::optional<ExactDeviceRequest> exactly;
  std::vector<DeviceSubRequest> first_available;

  friend bool operator==(const DeviceRequest&, const DeviceRequest&) = default;
};

// DeviceConstraint: matchAttribute or distinctAttribute over some (or all) requests.
struct DeviceConstraint {
  std::vector<std::string> requests;              // empty = all; "req" or "req/sub"
  std::optional<std::string> match_attribute;     // FullyQualifiedName
  std::optional<std::string> distinct_attribute;  // FullyQualifiedName

  friend bool operator==(const DeviceConstraint&, const DeviceConstraint&) = default;
};

// DeviceClaimConfiguration: config for some (or all) requests of a claim.
struct DeviceClaimConfiguration : DeviceConfiguration {
  std::vector<std::string> requests;

  friend bool operator==(const DeviceClaimConfiguration&,
                         const DeviceClaimConfiguration&) = default;
};

// DeviceClaim: what a claim asks for.
struct DeviceClaim {
  std::vector<DeviceRequest> requests;
  std::vector<DeviceConstraint> constraints;
  std::vector<DeviceClaimConfiguration> config;

  friend bool operator==(const DeviceClaim&, const DeviceClaim&) = default;
};

// ResourceClaimSpec.
struct ResourceClaimSpec {
  DeviceClaim devices;

  friend bool operator==(const ResourceClaimSpec&, const ResourceClaimSpec&) = default;
};

// DeviceRequestAllocationResult: one allocated device.
struct DeviceRequestAllocationResult {
  std::string request;  // "req" or "req/sub"
  std::string driver;
  std::string pool;
  std::string device;
  std::optional<bool> admin_access;
  std::vector<DeviceToleration> tolerations;
  std::vector<std::string> binding_conditions;
  std::vector<std::string> binding_failure_conditions;
  std::optional<std::string> share_id;                // JSON "shareID"
  std::map<std::string, Quantity> consumed_capacity;  // QualifiedName -> amount
  std::vector<std::string> skip_node_operations;

  friend bool operator==(const DeviceRequestAllocationResult&,
                         const DeviceRequestAllocationResult&) = default;
};

// DeviceAllocationConfiguration: a config copied into the allocation result.
struct DeviceAllocationConfiguration : DeviceConfiguration {
  std::string source;  // FromClass | FromClaim
  std::vector<std::string> requests;

  friend bool operator==(const DeviceAllocationConfiguration&,
                         const DeviceAllocationConfiguration&) = default;
};

// DeviceAllocationResult.
struct DeviceAllocationResult {
  std::vector<DeviceRequestAllocationResult> results;
  std::vector<DeviceAllocationConfiguration> config;

  friend bool operator==(const DeviceAllocationResult&, const DeviceAllocationResult&) = default;
};

// AllocationResult: status.allocation.
struct AllocationResult {
  DeviceAllocationResult devices;
  std::optional<NodeSelector> node_selector;  // unset = usable on every node
  std::optional<Time> allocation_timestamp;

  friend bool operator==(const AllocationResult&, const AllocationResult&) = default;
};

// ResourceClaimConsumerReference: an entry of status.reservedFor.
struct ResourceClaimConsumerReference {
  std::string api_group;
  std::string resource;
  std::string name;
  std::string uid;

  friend bool operator==(const ResourceClaimConsumerReference&,
                         const ResourceClaimConsumerReference&) = default;
};

// NetworkDeviceData: status.devices[].networkData.
struct NetworkDeviceData {
  std::string interface_name;
  std::vector<std::string> ips;
  std::string hardware_address;

  friend bool operator==(const NetworkDeviceData&, const NetworkDeviceData&) = default;
};

// AllocatedDeviceStatus: status.devices[], written by drivers.
struct AllocatedDeviceStatus {
  std::string driver;
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;  // JSON "shareID"
  std::vector<Condition> conditions;
  RawJson data;
  std::optional<NetworkDeviceData> network_data;

  friend bool operator==(const AllocatedDeviceStatus&, const AllocatedDeviceStatus&) = default;
};

// ResourceClaimStatus.
struct ResourceClaimStatus {
  std::optional<AllocationResult> allocation;
  std::vector<ResourceClaimConsumerReference> reserved_for;
  std::vector<AllocatedDeviceStatus> devices;

  friend bool operator==(const ResourceClaimStatus&, const ResourceClaimStatus&) = default;
};

// ResourceClaim (namespaced).
struct ResourceClaim {
  ObjectMeta metadata;
  ResourceClaimSpec spec;
  ResourceClaimStatus status;
  Extra extra;

  friend bool operator==(const ResourceClaim&, const ResourceClaim&) = default;
};

// ResourceClaimTemplateSpec: metadata and spec of the claims made from a template.
struct ResourceClaimTemplateSpec {
  ObjectMeta metadata;
  ResourceClaimSpec spec;

  friend bool operator==(const ResourceClaimTemplateSpec&,
                         const ResourceClaimTemplateSpec&) = default;
};

// ResourceClaimTemplate (namespaced).
struct ResourceClaimTemplate {
  ObjectMeta metadata;
  ResourceClaimTemplateSpec spec;
  Extra extra;

  friend bool operator==(const ResourceClaimTemplate&, const ResourceClaimTemplate&) = default;
};

// ---- DeviceTaintRule -----------------------------------------------------------------------

// DeviceTaintSelector: driver/pool/device, all optional and ANDed.
struct DeviceTaintSelector {
  std::optional<std::string> driver;
  std::optional<std::string> pool;
  std::optional<std::string> device;

  friend bool operator==(const DeviceTaintSelector&, const DeviceTaintSelector&) = default;
};

// DeviceTaintRuleSpec.
struct DeviceTaintRuleSpec {
  std::optional<DeviceTaintSelector> device_selector;  // unset = every device
  DeviceTaint taint;

  friend bool operator==(const DeviceTaintRuleSpec&, const DeviceTaintRuleSpec&) = default;
};

// DeviceTaintRuleStatus.
struct DeviceTaintRuleStatus {
  std::vector<Condition> conditions;

  friend bool operator==(const DeviceTaintRuleStatus&, const DeviceTaintRuleStatus&) = default;
};

// DeviceTaintRule (cluster-scoped): adds its taint to every matching device.
struct DeviceTaintRule {
  ObjectMeta metadata;
  DeviceTaintRuleSpec spec;
  DeviceTaintRuleStatus status;
  Extra extra;

  friend bool operator==(const DeviceTaintRule&, const DeviceTaintRule&) = default;
};

// DeviceTaintSelectorMatches reports whether a rule's selector picks the device
// (driver, pool, device); an unset selector matches every device.
bool DeviceTaintSelectorMatches(const std::optional<DeviceTaintSelector>& selector,
                                std::string_view driver, std::string_view pool,
                                std::string_view device);

}  // namespace devlet::kube
