// The codec's field tables: each Kubernetes type's JSON fields, written once. decode.cc derives
// Read (and the paths in its error messages) and encode.cc derives ToJson from the same rows, so
// a new field is one row here.
//
// A row names the JSON field, the member it fills and whether Go writes it when it is empty:
//
//   DEVLET_KUBE_FIELDS(DeviceTaint,
//       Required("key", &T::key),               // written even when empty
//       Optional("value", &T::value),           // omitempty
//       Required("effect", &T::effect),
//       Optional("timeAdded", &T::time_added));  // std::optional: written when set
//
// The member's type picks its codec: scalars, Quantity, RawJson, std::optional, std::vector,
// std::map<std::string, ...> and every type with a table here. Rows are in the order the encoder
// writes them (the JSON keeps insertion order; golden files depend on it), which is also the
// order in which the decoder reads them and so which error it reports first.
//
// A type with an `Extra extra` member keeps the fields its table does not name there (decode) and
// writes them back after its own (encode); other types drop them, or reject them when decoding
// strictly. Top-level objects (DEVLET_KUBE_OBJECT) have an apiVersion and a kind besides.
//
// Private to the kube library's sources.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "devlet/kube/core.h"
#include "devlet/kube/meta.h"
#include "devlet/kube/resource.h"

namespace devlet::kube::internal {

// Presence says whether the encoder writes a field whose value is empty (Go's `omitempty`).
// Decoding takes both alike: validation, not the codec, enforces required fields.
enum class Presence {
  kRequired,  // no omitempty: written even when empty ("", 0, [], null RawJson)
  kOptional,  // omitempty: written only when not empty
};

// Field is one row: the JSON name (also the step in error paths) and the member.
template <typename T, typename M>
struct Field {
  std::string_view name;
  M T::*member;
  Presence presence;
};

template <typename M>
inline constexpr bool kIsStdOptional = false;
template <typename M>
inline constexpr bool kIsStdOptional<std::optional<M>> = true;

template <typename T, typename M>
constexpr Field<T, M> Required(std::string_view name, M T::*member) {
  // An unset std::optional has no value to write; Go's pointers without omitempty would write
  // null, which no table here needs.
  static_assert(!kIsStdOptional<M>, "std::optional members are Optional");
  return {name, member, Presence::kRequired};
}

template <typename T, typename M>
constexpr Field<T, M> Optional(std::string_view name, M T::*member) {
  return {name, member, Presence::kOptional};
}

// Schema<T> holds T's table (kFields); only types with a DEVLET_KUBE_FIELDS row have one.
template <typename T>
struct Schema;

template <typename T>
concept HasSchema = requires {
  Schema<T>::kFields;
};

// KeepsExtra: T keeps the fields its table does not name.
template <typename T>
concept KeepsExtra = requires(T& t) {
  { t.extra } -> std::same_as<Extra&>;
};

// IsObject: T is a top-level object with an apiVersion and a kind (Schema<T>::kKind).
template <typename T>
concept IsObject = requires {
  { Schema<T>::kApiVersion } -> std::convertible_to<std::string_view>;
  { Schema<T>::kKind } -> std::convertible_to<std::string_view>;
};

// FieldNames returns the JSON names of T's table.
template <typename T>
constexpr auto FieldNames() {
  return std::apply(
      [](const auto&... field) {
        return std::array<std::string_view, sizeof...(field)>{field.name...};
      },
      Schema<T>::kFields);
}

#define DEVLET_KUBE_FIELDS(Type, ...)                             \
  template <>                                                     \
  struct Schema<Type> {                                           \
    using T = Type;                                               \
    static constexpr auto kFields = std::make_tuple(__VA_ARGS__); \
  }

#define DEVLET_KUBE_OBJECT(Type, api_version, ...)                \
  template <>                                                     \
  struct Schema<Type> {                                           \
    using T = Type;                                               \
    static constexpr std::string_view kApiVersion = api_version;  \
    static constexpr std::string_view kKind = #Type;              \
    static constexpr auto kFields = std::make_tuple(__VA_ARGS__); \
  }

// One row per line: clang-format would pack the rows of a table into paragraphs.
// clang-format off

// ---- meta / core ----------------------------------------------------------------------------

DEVLET_KUBE_FIELDS(OwnerReference,
    Required("apiVersion", &T::api_version),
    Required("kind", &T::kind),
    Required("name", &T::name),
    Required("uid", &T::uid),
    Optional("controller", &T::controller),
    Optional("blockOwnerDeletion", &T::block_owner_deletion));

DEVLET_KUBE_FIELDS(ObjectMeta,
    Optional("name", &T::name),
    Optional("generateName", &T::generate_name),
    Optional("namespace", &T::namespace_),
    Optional("uid", &T::uid),
    Optional("resourceVersion", &T::resource_version),
    Optional("generation", &T::generation),
    Optional("creationTimestamp", &T::creation_timestamp),
    Optional("deletionTimestamp", &T::deletion_timestamp),
    Optional("labels", &T::labels),
    Optional("annotations", &T::annotations),
    Optional("ownerReferences", &T::owner_references),
    Optional("finalizers", &T::finalizers));

DEVLET_KUBE_FIELDS(Condition,
    Required("type", &T::type),
    Required("status", &T::status),
    Optional("observedGeneration", &T::observed_generation),
    Required("lastTransitionTime", &T::last_transition_time),
    Required("reason", &T::reason),
    Required("message", &T::message));

DEVLET_KUBE_FIELDS(NodeSelectorRequirement,
    Required("key", &T::key),
    Required("operator", &T::operator_),
    Optional("values", &T::values));

DEVLET_KUBE_FIELDS(NodeSelectorTerm,
    Optional("matchExpressions", &T::match_expressions),
    Optional("matchFields", &T::match_fields));

DEVLET_KUBE_FIELDS(NodeSelector,
    Required("nodeSelectorTerms", &T::node_selector_terms));

DEVLET_KUBE_FIELDS(ContainerResourceClaim,
    Required("name", &T::name),
    Optional("request", &T::request));

DEVLET_KUBE_FIELDS(ResourceRequirements,
    Optional("limits", &T::limits),
    Optional("requests", &T::requests),
    Optional("claims", &T::claims));

DEVLET_KUBE_FIELDS(Container,
    Required("name", &T::name),
    Optional("image", &T::image),
    Required("resources", &T::resources));

DEVLET_KUBE_FIELDS(PodResourceClaim,
    Required("name", &T::name),
    Optional("resourceClaimName", &T::resource_claim_name),
    Optional("resourceClaimTemplateName", &T::resource_claim_template_name));

DEVLET_KUBE_FIELDS(PodSpec,
    Optional("initContainers", &T::init_containers),
    Required("containers", &T::containers),
    Optional("nodeSelector", &T::node_selector),
    Optional("nodeName", &T::node_name),
    Optional("schedulerName", &T::scheduler_name),
    Optional("resourceClaims", &T::resource_claims));

DEVLET_KUBE_FIELDS(PodResourceClaimStatus,
    Required("name", &T::name),
    Optional("resourceClaimName", &T::resource_claim_name));

DEVLET_KUBE_FIELDS(ContainerExtendedResourceRequest,
    Required("containerName", &T::container_name),
    Required("resourceName", &T::resource_name),
    Required("requestName", &T::request_name));

DEVLET_KUBE_FIELDS(PodExtendedResourceClaimStatus,
    Required("requestMappings", &T::request_mappings),
    Required("resourceClaimName", &T::resource_claim_name));

DEVLET_KUBE_FIELDS(PodStatus,
    Optional("phase", &T::phase),
    Optional("resourceClaimStatuses", &T::resource_claim_statuses),
    Optional("extendedResourceClaimStatus", &T::extended_resource_claim_status));

// ---- resource.k8s.io ------------------------------------------------------------------------

DEVLET_KUBE_FIELDS(CELDeviceSelector,
    Required("expression", &T::expression));

DEVLET_KUBE_FIELDS(DeviceSelector,
    Optional("cel", &T::cel));

DEVLET_KUBE_FIELDS(OpaqueDeviceConfiguration,
    Required("driver", &T::driver),
    Required("parameters", &T::parameters));

DEVLET_KUBE_FIELDS(DeviceClassConfiguration,
    Optional("opaque", &T::opaque));

DEVLET_KUBE_FIELDS(DeviceTaint,
    Required("key", &T::key),
    Optional("value", &T::value),
    Required("effect", &T::effect),
    Optional("timeAdded", &T::time_added));

DEVLET_KUBE_FIELDS(DeviceToleration,
    Optional("key", &T::key),
    Optional("operator", &T::operator_),
    Optional("value", &T::value),
    Optional("effect", &T::effect),
    Optional("tolerationSeconds", &T::toleration_seconds));

DEVLET_KUBE_FIELDS(DeviceClassSpec,
    Optional("selectors", &T::selectors),
    Optional("config", &T::config),
    Optional("extendedResourceName", &T::extended_resource_name));

DEVLET_KUBE_FIELDS(ResourcePool,
    Required("name", &T::name),
    Required("generation", &T::generation),
    Required("resourceSliceCount", &T::resource_slice_count));

DEVLET_KUBE_FIELDS(Counter,
    Required("value", &T::value));

DEVLET_KUBE_FIELDS(CounterSet,
    Required("name", &T::name),
    Optional("counters", &T::counters));

DEVLET_KUBE_FIELDS(DeviceCounterConsumption,
    Required("counterSet", &T::counter_set),
    Optional("counters", &T::counters),
    Optional("compatibilityGroups", &T::compatibility_groups));

DEVLET_KUBE_FIELDS(CapacityRequestPolicyRange,
    Optional("min", &T::min),
    Optional("max", &T::max),
    Optional("step", &T::step));

DEVLET_KUBE_FIELDS(CapacityRequestPolicy,
    Optional("default", &T::default_),
    Optional("validValues", &T::valid_values),
    Optional("validRange", &T::valid_range));

DEVLET_KUBE_FIELDS(DeviceCapacity,
    Required("value", &T::value),
    Optional("requestPolicy", &T::request_policy));

DEVLET_KUBE_FIELDS(DeviceAttribute,
    Optional("int", &T::int_value),
    Optional("bool", &T::bool_value),
    Optional("string", &T::string_value),
    Optional("version", &T::version_value),
    Optional("ints", &T::int_values),
    Optional("bools", &T::bool_values),
    Optional("strings", &T::string_values),
    Optional("versions", &T::version_values));

DEVLET_KUBE_FIELDS(NodeAllocatableMapping,
    Optional("capacityKey", &T::capacity_key),
    Optional("capacityMultiplier", &T::capacity_multiplier),
    Optional("deviceMultiplier", &T::device_multiplier));

DEVLET_KUBE_FIELDS(NodeAllocatableOverhead,
    Optional("perPod", &T::per_pod),
    Optional("perContainer", &T::per_container));

DEVLET_KUBE_FIELDS(NodeAllocatableResource,
    Optional("mapping", &T::mapping),
    Optional("overhead", &T::overhead));

DEVLET_KUBE_FIELDS(Device,
    Required("name", &T::name),
    Optional("attributes", &T::attributes),
    Optional("capacity", &T::capacity),
    Optional("consumesCounters", &T::consumes_counters),
    Optional("nodeName", &T::node_name),
    Optional("nodeSelector", &T::node_selector),
    Optional("allNodes", &T::all_nodes),
    Optional("taints", &T::taints),
    Optional("bindsToNode", &T::binds_to_node),
    Optional("bindingConditions", &T::binding_conditions),
    Optional("bindingFailureConditions", &T::binding_failure_conditions),
    Optional("allowMultipleAllocations", &T::allow_multiple_allocations),
    Optional("nodeAllocatableResources", &T::node_allocatable_resources));

DEVLET_KUBE_FIELDS(ResourceSliceSpec,
    Required("driver", &T::driver),
    Required("pool", &T::pool),
    Optional("nodeName", &T::node_name),
    Optional("nodeSelector", &T::node_selector),
    Optional("allNodes", &T::all_nodes),
    Optional("devices", &T::devices),
    Optional("perDeviceNodeSelection", &T::per_device_node_selection),
    Optional("sharedCounters", &T::shared_counters),
    Optional("partitionTypeAttribute", &T::partition_type_attribute),
    Optional("skipNodeOperations", &T::skip_node_operations));

DEVLET_KUBE_FIELDS(CapacityRequirements,
    Optional("requests", &T::requests));

DEVLET_KUBE_FIELDS(DeviceDerivedAttribute,
    Required("name", &T::name),
    Required("expression", &T::expression));

DEVLET_KUBE_FIELDS(ExactDeviceRequest,
    Required("deviceClassName", &T::device_class_name),
    Optional("selectors", &T::selectors),
    Optional("allocationMode", &T::allocation_mode),
    Optional("count", &T::count),
    Optional("adminAccess", &T::admin_access),
    Optional("tolerations", &T::tolerations),
    Optional("capacity", &T::capacity),
    Optional("derivedAttributes", &T::derived_attributes));

DEVLET_KUBE_FIELDS(DeviceSubRequest,
    Required("name", &T::name),
    Required("deviceClassName", &T::device_class_name),
    Optional("selectors", &T::selectors),
    Optional("allocationMode", &T::allocation_mode),
    Optional("count", &T::count),
    Optional("tolerations", &T::tolerations),
    Optional("capacity", &T::capacity),
    Optional("derivedAttributes", &T::derived_attributes));

DEVLET_KUBE_FIELDS(DeviceRequest,
    Required("name", &T::name),
    Optional("exactly", &T::exactly),
    Optional("firstAvailable", &T::first_available));

DEVLET_KUBE_FIELDS(DeviceConstraint,
    Optional("requests", &T::requests),
    Optional("matchAttribute", &T::match_attribute),
    Optional("distinctAttribute", &T::distinct_attribute));

DEVLET_KUBE_FIELDS(DeviceClaimConfiguration,
    Optional("requests", &T::requests),
    Optional("opaque", &T::opaque));

DEVLET_KUBE_FIELDS(DeviceClaim,
    Optional("requests", &T::requests),
    Optional("constraints", &T::constraints),
    Optional("config", &T::config));

DEVLET_KUBE_FIELDS(ResourceClaimSpec,
    Required("devices", &T::devices));

DEVLET_KUBE_FIELDS(DeviceRequestAllocationResult,
    Required("request", &T::request),
    Required("driver", &T::driver),
    Required("pool", &T::pool),
    Required("device", &T::device),
    Optional("adminAccess", &T::admin_access),
    Optional("tolerations", &T::tolerations),
    Optional("bindingConditions", &T::binding_conditions),
    Optional("bindingFailureConditions", &T::binding_failure_conditions),
    Optional("shareID", &T::share_id),
    Optional("consumedCapacity", &T::consumed_capacity),
    Optional("skipNodeOperations", &T::skip_node_operations));

DEVLET_KUBE_FIELDS(DeviceAllocationConfiguration,
    Required("source", &T::source),
    Optional("requests", &T::requests),
    Optional("opaque", &T::opaque));

DEVLET_KUBE_FIELDS(DeviceAllocationResult,
    Optional("results", &T::results),
    Optional("config", &T::config));

DEVLET_KUBE_FIELDS(AllocationResult,
    Required("devices", &T::devices),
    Optional("nodeSelector", &T::node_selector),
    Optional("allocationTimestamp", &T::allocation_timestamp));

DEVLET_KUBE_FIELDS(ResourceClaimConsumerReference,
    Optional("apiGroup", &T::api_group),
    Required("resource", &T::resource),
    Required("name", &T::name),
    Required("uid", &T::uid));

DEVLET_KUBE_FIELDS(NetworkDeviceData,
    Optional("interfaceName", &T::interface_name),
    Optional("ips", &T::ips),
    Optional("hardwareAddress", &T::hardware_address));

DEVLET_KUBE_FIELDS(AllocatedDeviceStatus,
    Required("driver", &T::driver),
    Required("pool", &T::pool),
    Required("device", &T::device),
    Optional("shareID", &T::share_id),
    Optional("conditions", &T::conditions),
    Optional("data", &T::data),
    Optional("networkData", &T::network_data));

DEVLET_KUBE_FIELDS(ResourceClaimStatus,
    Optional("allocation", &T::allocation),
    Optional("reservedFor", &T::reserved_for),
    Optional("devices", &T::devices));

DEVLET_KUBE_FIELDS(ResourceClaimTemplateSpec,
    Required("metadata", &T::metadata),
    Required("spec", &T::spec));

DEVLET_KUBE_FIELDS(DeviceTaintSelector,
    Optional("driver", &T::driver),
    Optional("pool", &T::pool),
    Optional("device", &T::device));

DEVLET_KUBE_FIELDS(DeviceTaintRuleSpec,
    Optional("deviceSelector", &T::device_selector),
    Required("taint", &T::taint));

DEVLET_KUBE_FIELDS(DeviceTaintRuleStatus,
    Optional("conditions", &T::conditions));

// ---- Top-level objects -----------------------------------------------------------------------

DEVLET_KUBE_OBJECT(DeviceClass, kResourceApiVersion,
    Required("metadata", &T::metadata),
    Required("spec", &T::spec));

DEVLET_KUBE_OBJECT(ResourceSlice, kResourceApiVersion,
    Required("metadata", &T::metadata),
    Required("spec", &T::spec));

DEVLET_KUBE_OBJECT(ResourceClaim, kResourceApiVersion,
    Required("metadata", &T::metadata),
    Required("spec", &T::spec),
    Required("status", &T::status));

DEVLET_KUBE_OBJECT(ResourceClaimTemplate, kResourceApiVersion,
    Required("metadata", &T::metadata),
    Required("spec", &T::spec));

DEVLET_KUBE_OBJECT(DeviceTaintRule, kResourceApiVersion,
    Required("metadata", &T::metadata),
    Required("spec", &T::spec),
    Required("status", &T::status));

DEVLET_KUBE_OBJECT(Node, "v1",
    Required("metadata", &T::metadata));

DEVLET_KUBE_OBJECT(Pod, "v1",
    Required("metadata", &T::metadata),
    Required("spec", &T::spec),
    Required("status", &T::status));

// clang-format on

}  // namespace devlet::kube::internal
