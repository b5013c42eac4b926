// JSON encoding of the object model with Kubernetes field names and Go's omitempty rules.
//
// Go writes a field tagged `omitempty` only when it is not the zero value, and always writes a
// field without it. We follow the tags for scalars and structs; empty lists and maps are always
// omitted (Go would write `null` for a nil slice without omitempty, which means nothing).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "devlet/common/strings.h"
#include "devlet/kube/codec.h"
#include "json_util.h"

namespace devlet::kube {
namespace {

using internal::Json;

enum Omit { kAlways, kOmitEmpty };

// ---- Forward declarations ---------------------------------------------------------------------
#define DEVLET_DECLARE_TO_JSON(T) Json ToJson(const T& in);
DEVLET_DECLARE_TO_JSON(Quantity)
DEVLET_DECLARE_TO_JSON(OwnerReference)
DEVLET_DECLARE_TO_JSON(ObjectMeta)
DEVLET_DECLARE_TO_JSON(Condition)
DEVLET_DECLARE_TO_JSON(NodeSelectorRequirement)
DEVLET_DECLARE_TO_JSON(NodeSelectorTerm)
DEVLET_DECLARE_TO_JSON(NodeSelector)
DEVLET_DECLARE_TO_JSON(ContainerResourceClaim)
DEVLET_DECLARE_TO_JSON(ResourceRequirements)
DEVLET_DECLARE_TO_JSON(Container)
DEVLET_DECLARE_TO_JSON(PodResourceClaim)
DEVLET_DECLARE_TO_JSON(PodSpec)
DEVLET_DECLARE_TO_JSON(PodResourceClaimStatus)
DEVLET_DECLARE_TO_JSON(ContainerExtendedResourceRequest)
DEVLET_DECLARE_TO_JSON(PodExtendedResourceClaimStatus)
DEVLET_DECLARE_TO_JSON(PodStatus)
DEVLET_DECLARE_TO_JSON(CELDeviceSelector)
DEVLET_DECLARE_TO_JSON(DeviceSelector)
DEVLET_DECLARE_TO_JSON(OpaqueDeviceConfiguration)
DEVLET_DECLARE_TO_JSON(DeviceClassConfiguration)
DEVLET_DECLARE_TO_JSON(DeviceTaint)
DEVLET_DECLARE_TO_JSON(DeviceToleration)
DEVLET_DECLARE_TO_JSON(DeviceClassSpec)
DEVLET_DECLARE_TO_JSON(ResourcePool)
DEVLET_DECLARE_TO_JSON(Counter)
DEVLET_DECLARE_TO_JSON(CounterSet)
DEVLET_DECLARE_TO_JSON(DeviceCounterConsumption)
DEVLET_DECLARE_TO_JSON(CapacityRequestPolicyRange)
DEVLET_DECLARE_TO_JSON(CapacityRequestPolicy)
DEVLET_DECLARE_TO_JSON(DeviceCapacity)
DEVLET_DECLARE_TO_JSON(DeviceAttribute)
DEVLET_DECLARE_TO_JSON(NodeAllocatableMapping)
DEVLET_DECLARE_TO_JSON(NodeAllocatableOverhead)
DEVLET_DECLARE_TO_JSON(NodeAllocatableResource)
DEVLET_DECLARE_TO_JSON(Device)
DEVLET_DECLARE_TO_JSON(ResourceSliceSpec)
DEVLET_DECLARE_TO_JSON(CapacityRequirements)
DEVLET_DECLARE_TO_JSON(DeviceDerivedAttribute)
DEVLET_DECLARE_TO_JSON(ExactDeviceRequest)
DEVLET_DECLARE_TO_JSON(DeviceSubRequest)
DEVLET_DECLARE_TO_JSON(DeviceRequest)
DEVLET_DECLARE_TO_JSON(DeviceConstraint)
DEVLET_DECLARE_TO_JSON(DeviceClaimConfiguration)
DEVLET_DECLARE_TO_JSON(DeviceClaim)
DEVLET_DECLARE_TO_JSON(ResourceClaimSpec)
DEVLET_DECLARE_TO_JSON(DeviceRequestAllocationResult)
DEVLET_DECLARE_TO_JSON(DeviceAllocationConfiguration)
DEVLET_DECLARE_TO_JSON(DeviceAllocationResult)
DEVLET_DECLARE_TO_JSON(AllocationResult)
DEVLET_DECLARE_TO_JSON(ResourceClaimConsumerReference)
DEVLET_DECLARE_TO_JSON(NetworkDeviceData)
DEVLET_DECLARE_TO_JSON(AllocatedDeviceStatus)
DEVLET_DECLARE_TO_JSON(ResourceClaimStatus)
DEVLET_DECLARE_TO_JSON(ResourceClaimTemplateSpec)
DEVLET_DECLARE_TO_JSON(DeviceTaintSelector)
DEVLET_DECLARE_TO_JSON(DeviceTaintRuleSpec)
DEVLET_DECLARE_TO_JSON(DeviceTaintRuleStatus)
#undef DEVLET_DECLARE_TO_JSON

Json ToJson(const std::string& in) {
  return in;
}

Json ToJson(int64_t in) {
  return in;
}

Json ToJson(bool in) {
  return in;
}

Json ToJson(const RawJson& in) {
  if (in.empty()) {
    return nullptr;
  }
  try {
    return Json::parse(in.json);
  } catch (const std::exception&) {
    return in.json;  // Not JSON (set by code, not decoded): keep it visible as a string.
  }
}

template <typename T>
Json ToJson(const std::vector<T>& in) {
  Json out = Json::array();
  for (const T& item : in) {
    out.push_back(ToJson(item));
  }
  return out;
}

Json ToJson(const std::vector<bool>& in) {
  Json out = Json::array();
  for (bool item : in) {
    out.push_back(item);
  }
  return out;
}

template <typename T>
Json ToJson(const std::map<std::string, T>& in) {
  Json out = Json::object();
  for (const auto& [key, value] : in) {
    out[key] = ToJson(value);
  }
  return out;
}

// ---- Put helpers ----------------------------------------------------------------------------

void Put(Json& j, const char* key, const std::string& value, Omit omit = kOmitEmpty) {
  if (omit == kAlways || !value.empty()) {
    j[key] = value;
  }
}

void Put(Json& j, const char* key, int64_t value, Omit omit = kOmitEmpty) {
  if (omit == kAlways || value != 0) {
    j[key] = value;
  }
}

void Put(Json& j, const char* key, const Quantity& value) {
  j[key] = value.str();
}

void Put(Json& j, const char* key, const RawJson& value) {
  j[key] = ToJson(value);
}

template <typename T>
void Put(Json& j, const char* key, const std::optional<T>& value) {
  if (value) {
    j[key] = ToJson(*value);
  }
}

template <typename T>
void Put(Json& j, const char* key, const std::vector<T>& value) {
  if (!value.empty()) {
    j[key] = ToJson(value);
  }
}

template <typename T>
void Put(Json& j, const char* key, const std::map<std::string, T>& value) {
  if (!value.empty()) {
    j[key] = ToJson(value);
  }
}

// PutStruct writes a nested struct (Go never omits a struct value, even with omitempty).
template <typename T>
void PutStruct(Json& j, const char* key, const T& value) {
  j[key] = ToJson(value);
}

// MergeExtra appends kept fields that were not written already.
void MergeExtra(Json& j, const Extra& extra) {
  if (extra.empty()) {
    return;
  }
  Json kept;
  try {
    kept = Json::parse(extra.json);
  } catch (const std::exception&) {
    return;
  }
  if (!kept.is_object()) {
    return;
  }
  for (auto it = kept.begin(); it != kept.end(); ++it) {
    if (!j.contains(it.key())) {
      j[it.key()] = std::move(it.value());
    }
  }
}

// ---- meta / core ----------------------------------------------------------------------------

Json ToJson(const Quantity& in) {
  return in.str();
}

Json ToJson(const OwnerReference& in) {
  Json j = Json::object();
  Put(j, "apiVersion", in.api_version, kAlways);
  Put(j, "kind", in.kind, kAlways);
  Put(j, "name", in.name, kAlways);
  Put(j, "uid", in.uid, kAlways);
  Put(j, "controller", in.controller);
  Put(j, "blockOwnerDeletion", in.block_owner_deletion);
  return j;
}

Json ToJson(const ObjectMeta& in) {
  Json j = Json::object();
  Put(j, "name", in.name);
  Put(j, "generateName", in.generate_name);
  Put(j, "namespace", in.namespace_);
  Put(j, "uid", in.uid);
  Put(j, "resourceVersion", in.resource_version);
  Put(j, "generation", in.generation);
  Put(j, "creationTimestamp", in.creation_timestamp);
  Put(j, "deletionTimestamp", in.deletion_timestamp);
  Put(j, "labels", in.labels);
  Put(j, "annotations", in.annotations);
  Put(j, "ownerReferences", in.owner_references);
  Put(j, "finalizers", in.finalizers);
  MergeExtra(j, in.extra);
  return j;
}

Json ToJson(const Condition& in) {
  Json j = Json::object();
  Put(j, "type", in.type, kAlways);
  Put(j, "status", in.status, kAlways);
  Put(j, "observedGeneration", in.observed_generation);
  Put(j, "lastTransitionTime", in.last_transition_time, kAlways);
  Put(j, "reason", in.reason, kAlways);
  Put(j, "message", in.message, kAlways);
  return j;
}

Json ToJson(const NodeSelectorRequirement& in) {
  Json j = Json::object();
  Put(j, "key", in.key, kAlways);
  Put(j, "operator", in.operator_, kAlways);
  Put(j, "values", in.values);
  return j;
}

Json ToJson(const NodeSelectorTerm& in) {
  Json j = Json::object();
  Put(j, "matchExpressions", in.match_expressions);
  Put(j, "matchFields", in.match_fields);
  return j;
}

Json ToJson(const NodeSelector& in) {
  Json j = Json::object();
  j["nodeSelectorTerms"] = ToJson(in.node_selector_terms);  // no omitempty
  return j;
}

Json ToJson(const ContainerResourceClaim& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "request", in.request);
  return j;
}

Json ToJson(const ResourceRequirements& in) {
  Json j = Json::object();
  Put(j, "limits", in.limits);
  Put(j, "requests", in.requests);
  Put(j, "claims", in.claims);
  return j;
}

Json ToJson(const Container& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "image", in.image);
  PutStruct(j, "resources", in.resources);
  MergeExtra(j, in.extra);
  return j;
}

Json ToJson(const PodResourceClaim& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "resourceClaimName", in.resource_claim_name);
  Put(j, "resourceClaimTemplateName", in.resource_claim_template_name);
  return j;
}

Json ToJson(const PodSpec& in) {
  Json j = Json::object();
  Put(j, "initContainers", in.init_containers);
  j["containers"] = ToJson(in.containers);
  Put(j, "nodeSelector", in.node_selector);
  Put(j, "nodeName", in.node_name);
  Put(j, "schedulerName", in.scheduler_name);
  Put(j, "resourceClaims", in.resource_claims);
  MergeExtra(j, in.extra);
  return j;
}

Json ToJson(const PodResourceClaimStatus& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "resourceClaimName", in.resource_claim_name);
  return j;
}

Json ToJson(const ContainerExtendedResourceRequest& in) {
  Json j = Json::object();
  Put(j, "containerName", in.container_name, kAlways);
  Put(j, "resourceName", in.resource_name, kAlways);
  Put(j, "requestName", in.request_name, kAlways);
  return j;
}

Json ToJson(const PodExtendedResourceClaimStatus& in) {
  Json j = Json::object();
  j["requestMappings"] = ToJson(in.request_mappings);
  Put(j, "resourceClaimName", in.resource_claim_name, kAlways);
  return j;
}

Json ToJson(const PodStatus& in) {
  Json j = Json::object();
  Put(j, "phase", in.phase);
  Put(j, "resourceClaimStatuses", in.resource_claim_statuses);
  Put(j, "extendedResourceClaimStatus", in.extended_resource_claim_status);
  MergeExtra(j, in.extra);
  return j;
}

// ---- resource.k8s.io ------------------------------------------------------------------------

Json ToJson(const CELDeviceSelector& in) {
  Json j = Json::object();
  Put(j, "expression", in.expression, kAlways);
  return j;
}

Json ToJson(const DeviceSelector& in) {
  Json j = Json::object();
  Put(j, "cel", in.cel);
  return j;
}

Json ToJson(const OpaqueDeviceConfiguration& in) {
  Json j = Json::object();
  Put(j, "driver", in.driver, kAlways);
  Put(j, "parameters", in.parameters);
  return j;
}

void PutDeviceConfiguration(Json& j, const DeviceConfiguration& in) {
  Put(j, "opaque", in.opaque);
}

Json ToJson(const DeviceClassConfiguration& in) {
  Json j = Json::object();
  PutDeviceConfiguration(j, in);
  return j;
}

Json ToJson(const DeviceTaint& in) {
  Json j = Json::object();
  Put(j, "key", in.key, kAlways);
  Put(j, "value", in.value);
  Put(j, "effect", in.effect, kAlways);
  Put(j, "timeAdded", in.time_added);
  return j;
}

Json ToJson(const DeviceToleration& in) {
  Json j = Json::object();
  Put(j, "key", in.key);
  Put(j, "operator", in.operator_);
  Put(j, "value", in.value);
  Put(j, "effect", in.effect);
  Put(j, "tolerationSeconds", in.toleration_seconds);
  return j;
}

Json ToJson(const DeviceClassSpec& in) {
  Json j = Json::object();
  Put(j, "selectors", in.selectors);
  Put(j, "config", in.config);
  Put(j, "extendedResourceName", in.extended_resource_name);
  return j;
}

Json ToJson(const ResourcePool& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "generation", in.generation, kAlways);
  Put(j, "resourceSliceCount", in.resource_slice_count, kAlways);
  return j;
}

Json ToJson(const Counter& in) {
  Json j = Json::object();
  Put(j, "value", in.value);
  return j;
}

Json ToJson(const CounterSet& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "counters", in.counters);
  return j;
}

Json ToJson(const DeviceCounterConsumption& in) {
  Json j = Json::object();
  Put(j, "counterSet", in.counter_set, kAlways);
  Put(j, "counters", in.counters);
  Put(j, "compatibilityGroups", in.compatibility_groups);
  return j;
}

Json ToJson(const CapacityRequestPolicyRange& in) {
  Json j = Json::object();
  Put(j, "min", in.min);
  Put(j, "max", in.max);
  Put(j, "step", in.step);
  return j;
}

Json ToJson(const CapacityRequestPolicy& in) {
  Json j = Json::object();
  Put(j, "default", in.default_);
  Put(j, "validValues", in.valid_values);
  Put(j, "validRange", in.valid_range);
  return j;
}

Json ToJson(const DeviceCapacity& in) {
  Json j = Json::object();
  Put(j, "value", in.value);
  Put(j, "requestPolicy", in.request_policy);
  return j;
}

Json ToJson(const DeviceAttribute& in) {
  Json j = Json::object();
  Put(j, "int", in.int_value);
  Put(j, "bool", in.bool_value);
  Put(j, "string", in.string_value);
  Put(j, "version", in.version_value);
  // List values: an empty list that is set is kept (validation rejects it).
  if (in.int_values)
    j["ints"] = ToJson(*in.int_values);
  if (in.bool_values)
    j["bools"] = ToJson(*in.bool_values);
  if (in.string_values)
    j["strings"] = ToJson(*in.string_values);
  if (in.version_values)
    j["versions"] = ToJson(*in.version_values);
  return j;
}

Json ToJson(const NodeAllocatableMapping& in) {
  Json j = Json::object();
  Put(j, "capacityKey", in.capacity_key);
  Put(j, "capacityMultiplier", in.capacity_multiplier);
  Put(j, "deviceMultiplier", in.device_multiplier);
  return j;
}

Json ToJson(const NodeAllocatableOverhead& in) {
  Json j = Json::object();
  Put(j, "perPod", in.per_pod);
  Put(j, "perContainer", in.per_container);
  return j;
}

Json ToJson(const NodeAllocatableResource& in) {
  Json j = Json::object();
  Put(j, "mapping", in.mapping);
  Put(j, "overhead", in.overhead);
  return j;
}

Json ToJson(const Device& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "attributes", in.attributes);
  Put(j, "capacity", in.capacity);
  Put(j, "consumesCounters", in.consumes_counters);
  Put(j, "nodeName", in.node_name);
  Put(j, "nodeSelector", in.node_selector);
  Put(j, "allNodes", in.all_nodes);
  Put(j, "taints", in.taints);
  Put(j, "bindsToNode", in.binds_to_node);
  Put(j, "bindingConditions", in.binding_conditions);
  Put(j, "bindingFailureConditions", in.binding_failure_conditions);
  Put(j, "allowMultipleAllocations", in.allow_multiple_allocations);
  Put(j, "nodeAllocatableResources", in.node_allocatable_resources);
  return j;
}

Json ToJson(const ResourceSliceSpec& in) {
  Json j = Json::object();
  Put(j, "driver", in.driver, kAlways);
  PutStruct(j, "pool", in.pool);
  Put(j, "nodeName", in.node_name);
  Put(j, "nodeSelector", in.node_selector);
  Put(j, "allNodes", in.all_nodes);
  Put(j, "devices", in.devices);
  Put(j, "perDeviceNodeSelection", in.per_device_node_selection);
  Put(j, "sharedCounters", in.shared_counters);
  Put(j, "partitionTypeAttribute", in.partition_type_attribute);
  Put(j, "skipNodeOperations", in.skip_node_operations);
  return j;
}

Json ToJson(const CapacityRequirements& in) {
  Json j = Json::object();
  Put(j, "requests", in.requests);
  return j;
}

Json ToJson(const DeviceDerivedAttribute& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "expression", in.expression, kAlways);
  return j;
}

Json ToJson(const ExactDeviceRequest& in) {
  Json j = Json::object();
  Put(j, "deviceClassName", in.device_class_name, kAlways);
  Put(j, "selectors", in.selectors);
  Put(j, "allocationMode", in.allocation_mode);
  Put(j, "count", in.count);
  Put(j, "adminAccess", in.admin_access);
  Put(j, "tolerations", in.tolerations);
  Put(j, "capacity", in.capacity);
  Put(j, "derivedAttributes", in.derived_attributes);
  return j;
}

Json ToJson(const DeviceSubRequest& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "deviceClassName", in.device_class_name, kAlways);
  Put(j, "selectors", in.selectors);
  Put(j, "allocationMode", in.allocation_mode);
  Put(j, "count", in.count);
  Put(j, "tolerations", in.tolerations);
  Put(j, "capacity", in.capacity);
  Put(j, "derivedAttributes", in.derived_attributes);
  return j;
}

Json ToJson(const DeviceRequest& in) {
  Json j = Json::object();
  Put(j, "name", in.name, kAlways);
  Put(j, "exactly", in.exactly);
  Put(j, "firstAvailable", in.first_available);
  return j;
}

Json ToJson(const DeviceConstraint& in) {
  Json j = Json::object();
  Put(j, "requests", in.requests);
  Put(j, "matchAttribute", in.match_attribute);
  Put(j, "distinctAttribute", in.distinct_attribute);
  return j;
}

Json ToJson(const DeviceClaimConfiguration& in) {
  Json j = Json::object();
  Put(j, "requests", in.requests);
  PutDeviceConfiguration(j, in);
  return j;
}

Json ToJson(const DeviceClaim& in) {
  Json j = Json::object();
  Put(j, "requests", in.requests);
  Put(j, "constraints", in.constraints);
  Put(j, "config", in.config);
  return j;
}

Json ToJson(const ResourceClaimSpec& in) {
  Json j = Json::object();
  PutStruct(j, "devices", in.devices);
  return j;
}

Json ToJson(const DeviceRequestAllocationResult& in) {
  Json j = Json::object();
  Put(j, "request", in.request, kAlways);
  Put(j, "driver", in.driver, kAlways);
  Put(j, "pool", in.pool, kAlways);
  Put(j, "device", in.device, kAlways);
  Put(j, "adminAccess", in.admin_access);
  Put(j, "tolerations", in.tolerations);
  Put(j, "bindingConditions", in.binding_conditions);
  Put(j, "bindingFailureConditions", in.binding_failure_conditions);
  Put(j, "shareID", in.share_id);
  Put(j, "consumedCapacity", in.consumed_capacity);
  Put(j, "skipNodeOperations", in.skip_node_operations);
  return j;
}

Json ToJson(const DeviceAllocationConfiguration& in) {
  Json j = Json::object();
  Put(j, "source", in.source, kAlways);
  Put(j, "requests", in.requests);
  PutDeviceConfiguration(j, in);
  return j;
}

Json ToJson(const DeviceAllocationResult& in) {
  Json j = Json::object();
  Put(j, "results", in.results);
  Put(j, "config", in.config);
  return j;
}

Json ToJson(const AllocationResult& in) {
  Json j = Json::object();
  PutStruct(j, "devices", in.devices);
  Put(j, "nodeSelector", in.node_selector);
  Put(j, "allocationTimestamp", in.allocation_timestamp);
  return j;
}

Json ToJson(const ResourceClaimConsumerReference& in) {
  Json j = Json::object();
  Put(j, "apiGroup", in.api_group);
  Put(j, "resource", in.resource, kAlways);
  Put(j, "name", in.name, kAlways);
  Put(j, "uid", in.uid, kAlways);
  return j;
}

Json ToJson(const NetworkDeviceData& in) {
  Json j = Json::object();
  Put(j, "interfaceName", in.interface_name);
  Put(j, "ips", in.ips);
  Put(j, "hardwareAddress", in.hardware_address);
  return j;
}

Json ToJson(const AllocatedDeviceStatus& in) {
  Json j = Json::object();
  Put(j, "driver", in.driver, kAlways);
  Put(j, "pool", in.pool, kAlways);
  Put(j, "device", in.device, kAlways);
  Put(j, "shareID", in.share_id);
  Put(j, "conditions", in.conditions);
  if (!in.data.empty()) {
    Put(j, "data", in.data);
  }
  Put(j, "networkData", in.network_data);
  return j;
}

Json ToJson(const ResourceClaimStatus& in) {
  Json j = Json::object();
  Put(j, "allocation", in.allocation);
  Put(j, "reservedFor", in.reserved_for);
  Put(j, "devices", in.devices);
  return j;
}

Json ToJson(const ResourceClaimTemplateSpec& in) {
  Json j = Json::object();
  PutStruct(j, "metadata", in.metadata);
  PutStruct(j, "spec", in.spec);
  return j;
}

Json ToJson(const DeviceTaintSelector& in) {
  Json j = Json::object();
  Put(j, "driver", in.driver);
  Put(j, "pool", in.pool);
  Put(j, "device", in.device);
  return j;
}

Json ToJson(const DeviceTaintRuleSpec& in) {
  Json j = Json::object();
  Put(j, "deviceSelector", in.device_selector);
  PutStruct(j, "taint", in.taint);
  return j;
}

Json ToJson(const DeviceTaintRuleStatus& in) {
  Json j = Json::object();
  Put(j, "conditions", in.conditions);
  return j;
}

// ---- Top level ------------------------------------------------------------------------------

Json Header(std::string_view api_version, std::string_view kind) {
  Json j = Json::object();
  j["apiVersion"] = std::string(api_version);
  j["kind"] = std::string(kind);
  return j;
}

Json TopToJson(const DeviceClass& in) {
  Json j = Header(kResourceApiVersion, "DeviceClass");
  PutStruct(j, "metadata", in.metadata);
  PutStruct(j, "spec", in.spec);
  MergeExtra(j, in.extra);
  return j;
}

Json TopToJson(const ResourceSlice& in) {
  Json j = Header(kResourceApiVersion, "ResourceSlice");
  PutStruct(j, "metadata", in.metadata);
  PutStruct(j, "spec", in.spec);
  MergeExtra(j, in.extra);
  return j;
}

Json TopToJson(const ResourceClaim& in) {
  Json j = Header(kResourceApiVersion, "ResourceClaim");
  PutStruct(j, "metadata", in.metadata);
  PutStruct(j, "spec", in.spec);
  PutStruct(j, "status", in.status);
  MergeExtra(j, in.extra);
  return j;
}

Json TopToJson(const ResourceClaimTemplate& in) {
  Json j = Header(kResourceApiVersion, "ResourceClaimTemplate");
  PutStruct(j, "metadata", in.metadata);
  PutStruct(j, "spec", in.spec);
  MergeExtra(j, in.extra);
  return j;
}

Json TopToJson(const DeviceTaintRule& in) {
  Json j = Header(kResourceApiVersion, "DeviceTaintRule");
  PutStruct(j, "metadata", in.metadata);
  PutStruct(j, "spec", in.spec);
  PutStruct(j, "status", in.status);
  MergeExtra(j, in.extra);
  return j;
}

Json TopToJson(const Node& in) {
  Json j = Header("v1", "Node");
  PutStruct(j, "metadata", in.metadata);
  MergeExtra(j, in.extra);
  return j;
}

Json TopToJson(const Pod& in) {
  Json j = Header("v1", "Pod");
  PutStruct(j, "metadata", in.metadata);
  PutStruct(j, "spec", in.spec);
  PutStruct(j, "status", in.status);
  MergeExtra(j, in.extra);
  return j;
}

Json TopToJson(const Object& object) {
  return std::visit([](const auto& o) { return TopToJson(o); }, object);
}

}  // namespace

std::string EncodeJson(const Object& object, const EncodeOptions& options) {
  return internal::DumpJson(TopToJson(object), options.indent);
}

#define DEVLET_DEFINE_ENCODE(T)                                           \
  std::string EncodeJson(const T& object, const EncodeOptions& options) { \
    return internal::DumpJson(TopToJson(object), options.indent);         \
  }
DEVLET_DEFINE_ENCODE(DeviceClass)
DEVLET_DEFINE_ENCODE(ResourceSlice)
DEVLET_DEFINE_ENCODE(ResourceClaim)
DEVLET_DEFINE_ENCODE(ResourceClaimTemplate)
DEVLET_DEFINE_ENCODE(DeviceTaintRule)
DEVLET_DEFINE_ENCODE(Node)
DEVLET_DEFINE_ENCODE(Pod)
#undef DEVLET_DEFINE_ENCODE

std::string EncodeJsonList(const std::vector<Object>& objects, const EncodeOptions& options) {
  Json j = Header("v1", "List");
  Json items = Json::array();
  for (const Object& object : objects) {
    items.push_back(TopToJson(object));
  }
  j["items"] = std::move(items);
  return internal::DumpJson(j, options.indent);
}

// ---- Object helpers ---------------------------------------------------------------------------

std::string_view KindOf(const Object& object) {
  struct Visitor {
    std::string_view operator()(const DeviceClass&) const { return "DeviceClass"; }

    std::string_view operator()(const ResourceSlice&) const { return "ResourceSlice"; }

    std::string_view operator()(const ResourceClaim&) const { return "ResourceClaim"; }

    std::string_view operator()(const ResourceClaimTemplate&) const {
      return "ResourceClaimTemplate";
    }

    std::string_view operator()(const DeviceTaintRule&) const { return "DeviceTaintRule"; }

    std::string_view operator()(const Node&) const { return "Node"; }

    std::string_view operator()(const Pod&) const { return "Pod"; }
  };

  return std::visit(Visitor{}, object);
}

std::string_view ApiVersionOf(const Object& object) {
  if (std::holds_alternative<Node>(object) || std::holds_alternative<Pod>(object)) {
    return "v1";
  }
  return kResourceApiVersion;
}

const ObjectMeta& MetadataOf(const Object& object) {
  return std::visit([](const auto& o) -> const ObjectMeta& { return o.metadata; }, object);
}

ObjectMeta& MetadataOf(Object& object) {
  return std::visit([](auto& o) -> ObjectMeta& { return o.metadata; }, object);
}

std::string Describe(const Object& object) {
  const ObjectMeta& meta = MetadataOf(object);
  std::string name = meta.namespace_.empty() ? meta.name : meta.namespace_ + "/" + meta.name;
  return std::string(KindOf(object)) + " " + GoQuote(name);  // names can hold any byte
}

}  // namespace devlet::kube
