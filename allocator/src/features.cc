#include "devlet/allocator/features.h"

#include <string>
#include <string_view>
#include <vector>

#include "devlet/common/status.h"

namespace devlet::allocator {
namespace {

struct Gate {
  std::string_view name;
  bool Features::*field;  // nullptr: accepted, no effect on allocation
  bool locked_true;
};

// Kubernetes 1.37 gates that concern DRA allocation (research §1.8).
constexpr Gate kGates[] = {
    {"DynamicResourceAllocation", nullptr, true},
    {"DRAPrioritizedList", &Features::prioritized_list, true},
    {"DRAAdminAccess", &Features::admin_access, false},
    {"DRAPartitionableDevices", &Features::partitionable_devices, false},
    {"DRADeviceTaints", &Features::device_taints, false},
    {"DRADeviceTaintRules", &Features::device_taint_rules, false},
    {"DRAConsumableCapacity", &Features::consumable_capacity, false},
    {"DRADeviceBindingConditions", &Features::device_binding_conditions, false},
    {"DRAResourceClaimDeviceStatus", &Features::resource_claim_device_status, false},
    {"DRAExtendedResource", &Features::extended_resource, false},
    {"DRAListTypeAttributes", &Features::list_type_attributes, false},
    {"DRAFractionalCapacityRange", &Features::fractional_capacity_range, false},
    {"DRADerivedAttributes", &Features::derived_attributes, false},
    {"DRADeviceCompatibilityGroups", &Features::compatibility_groups, false},
    {"DRASchedulerFilterTimeout", &Features::scheduler_filter_timeout, false},
    {"DRANodeAllocatableResources", nullptr, false},
    {"DRAWorkloadResourceClaims", nullptr, false},
    {"DRAOptionalNodeOperations", &Features::optional_node_operations, false},
    {"DRAPartitionableDevicesType", nullptr, false},
    {"SchedulerPreQueueingHints", nullptr, false},
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

absl::StatusOr<Features> ParseFeatureGates(std::string_view spec, Features base) {
  Features features = base;
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = Trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("--feature-gates: missing bool value for " + std::string(item));
    }
    std::string_view name = Trim(item.substr(0, eq));
    std::string_view value = Trim(item.substr(eq + 1));
    bool enabled;
    if (value == "true" || value == "True" || value == "TRUE" || value == "1" || value == "t") {
      enabled = true;
    } else if (value == "false" || value == "False" || value == "FALSE" || value == "0" ||
               value == "f") {
      enabled = false;
    } else {
      return InvalidArgument("--feature-gates: invalid value of " + std::string(name) + ": " +
                             std::string(value) + " (expected true or false)");
    }
    const Gate* gate = nullptr;
    for (const Gate& g : kGates) {
      if (g.name == name) gate = &g;
    }
    if (gate == nullptr) {
      return InvalidArgument("--feature-gates: unrecognized feature gate: " + std::string(name));
    }
    if (gate->locked_true && !enabled) {
      return InvalidArgument("--feature-gates: cannot set feature gate " + std::string(name) +
                             " to false, feature is locked to true");
    }
    if (gate->field != nullptr) features.*(gate->field) = enabled;
  }
  return features;
}

std::string FormatFeatures(const Features& features) {
  std::string out;
  for (const Gate& g : kGates) {
    if (g.field == nullptr) continue;
    if (!out.empty()) out += ",";
    out += std::string(g.name) + "=" + (features.*(g.field) ? "true" : "false");
  }
  return out;
}

}  // namespace devlet::allocator
