#include "devlet/node/slices.h"

#include <algorithm>
#include <set>

#include "devlet/common/flags.h"
#include "devlet/common/status.h"

namespace devlet::node {
namespace {

absl::StatusOr<kube::Quantity> ParseQuantity(const std::string& text, const std::string& device,
                                             const std::string& field) {
  absl::StatusOr<kube::Quantity> quantity = kube::Quantity::Parse(text);
  if (!quantity.ok()) {
    return InvalidArgument("device " + device + ": " + field + ": \"" + text +
                           "\" is not a quantity: " + Message(quantity.status()));
  }
  return *quantity;
}

kube::DeviceAttribute ToKubeAttribute(const devices::AttributeValue& value) {
  kube::DeviceAttribute out;
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) {
          out.int_value = v;
        } else if constexpr (std::is_same_v<T, bool>) {
          out.bool_value = v;
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.string_value = v;
        } else {
          out.version_value = v.value;
        }
      },
      value);
  return out;
}

kube::DeviceAttribute ToKubeListAttribute(const std::vector<devices::AttributeValue>& values) {
  kube::DeviceAttribute out;
  for (const devices::AttributeValue& value : values) {
    std::visit(
        [&out](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::int64_t>) {
            if (!out.int_values) out.int_values.emplace();
            out.int_values->push_back(v);
          } else if constexpr (std::is_same_v<T, bool>) {
            if (!out.bool_values) out.bool_values.emplace();
            out.bool_values->push_back(v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            if (!out.string_values) out.string_values.emplace();
            out.string_values->push_back(v);
          } else {
            if (!out.version_values) out.version_values.emplace();
            out.version_values->push_back(v.value);
          }
        },
        value);
  }
  return out;
}

// PartitionType names a device's counter cost, so that devices with one value have one cost as
// partitionTypeAttribute requires: "memory80Gi-slices4" (counter names and amounts in order,
// several consumptions joined by "_"). Counter names are C identifiers and quantities
// alphanumeric (plus '.', which becomes 'p'), so the value is a plain token.
std::string PartitionType(const devices::DraDevice& device) {
  std::string out;
  for (const devices::CounterConsumption& c : device.consumes_counters) {
    if (!out.empty()) out += "_";
    std::string part;
    for (const auto& [name, value] : c.counters) {
      if (!part.empty()) part += "-";
      part += name;
      for (char ch : value) part += ch == '.' ? 'p' : ch;
    }
    out += part;
  }
  return out.substr(0, 64);
}

std::uint64_t Fnv1a(std::string_view data) {
  std::uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// Comparable strips what the store adds (uid, resourceVersion, managedFields and the other
// server-set metadata kept in `extra`) and the pool generation, so that the content of published
// slices can be compared with freshly built ones.
kube::ResourceSlice Comparable(kube::ResourceSlice slice) {
  slice.metadata.extra = {};
  slice.metadata.uid.clear();
  slice.metadata.resource_version.clear();
  slice.metadata.creation_timestamp.reset();
  slice.metadata.generation = 0;
  slice.spec.pool.generation = 0;
  return slice;
}

}  // namespace

absl::StatusOr<kube::Device> ToKubeDevice(const devices::DraDevice& device,
                                          const PublishFeatures& features) {
  kube::Device out;
  out.name = device.name;
  for (const auto& [name, value] : device.attributes) out.attributes[name] = ToKubeAttribute(value);
  if (features.list_type_attributes) {
    for (const auto& [name, values] : device.list_attributes) {
      out.attributes[name] = ToKubeListAttribute(values);
    }
  }
  if (features.partitionable_devices_type && !device.consumes_counters.empty()) {
    out.attributes[std::string(kPartitionTypeAttribute)].string_value = PartitionType(device);
  }
  for (const auto& [name, capacity] : device.capacities) {
    kube::DeviceCapacity cap;
    DEVLET_ASSIGN_OR_RETURN(cap.value,
                            ParseQuantity(capacity.value, device.name, "capacity " + name));
    if (capacity.request_policy) {
      const devices::RequestPolicy& in = *capacity.request_policy;
      kube::CapacityRequestPolicy policy;
      if (!in.default_value.empty()) {
        DEVLET_ASSIGN_OR_RETURN(policy.default_, ParseQuantity(in.default_value, device.name,
                                                               "capacity " + name + " default"));
      }
      for (const std::string& v : in.valid_values) {
        DEVLET_ASSIGN_OR_RETURN(kube::Quantity q,
                                ParseQuantity(v, device.name, "capacity " + name + " validValues"));
        policy.valid_values.push_back(q);
      }
      if (!in.min.empty() || !in.max.empty() || !in.step.empty()) {
        kube::CapacityRequestPolicyRange range;
        if (!in.min.empty()) {
          DEVLET_ASSIGN_OR_RETURN(range.min, ParseQuantity(in.min, device.name, name + " min"));
        }
        if (!in.max.empty()) {
          DEVLET_ASSIGN_OR_RETURN(range.max, ParseQuantity(in.max, device.name, name + " max"));
        }
        if (!in.step.empty()) {
          DEVLET_ASSIGN_OR_RETURN(range.step, ParseQuantity(in.step, device.name, name + " step"));
        }
        policy.valid_range = range;
      }
      cap.request_policy = policy;
    }
    out.capacity[name] = cap;
  }
  for (const devices::CounterConsumption& consumption : device.consumes_counters) {
    kube::DeviceCounterConsumption c;
    c.counter_set = consumption.counter_set;
    for (const auto& [name, value] : consumption.counters) {
      DEVLET_ASSIGN_OR_RETURN(c.counters[name].value,
                              ParseQuantity(value, device.name, "counter " + name));
    }
    out.consumes_counters.push_back(std::move(c));
  }
  if (device.allow_multiple_allocations) out.allow_multiple_allocations = true;
  if (features.node_allocatable_resources) {
    for (const auto& [resource, n] : device.node_allocatable) {
      kube::NodeAllocatableResource r;
      const std::string field = "nodeAllocatableResources " + resource;
      if (!n.capacity_key.empty() || !n.device_multiplier.empty()) {
        kube::NodeAllocatableMapping m;
        if (!n.capacity_key.empty()) {
          m.capacity_key = n.capacity_key;
          DEVLET_ASSIGN_OR_RETURN(m.capacity_multiplier,
                                  ParseQuantity(n.capacity_multiplier, device.name,
                                                field + " capacityMultiplier"));
        }
        if (!n.device_multiplier.empty()) {
          DEVLET_ASSIGN_OR_RETURN(m.device_multiplier,
                                  ParseQuantity(n.device_multiplier, device.name,
                                                field + " deviceMultiplier"));
        }
        r.mapping = std::move(m);
      }
      if (!n.overhead_per_pod.empty() || !n.overhead_per_container.empty()) {
        kube::NodeAllocatableOverhead o;
        if (!n.overhead_per_pod.empty()) {
          DEVLET_ASSIGN_OR_RETURN(o.per_pod, ParseQuantity(n.overhead_per_pod, device.name,
                                                           field + " overhead perPod"));
        }
        if (!n.overhead_per_container.empty()) {
          DEVLET_ASSIGN_OR_RETURN(o.per_container,
                                  ParseQuantity(n.overhead_per_container, device.name,
                                                field + " overhead perContainer"));
        }
        r.overhead = std::move(o);
      }
      out.node_allocatable_resources[resource] = std::move(r);
    }
  }
  return out;
}

namespace {

// One row per gate devlet-node accepts. `field` is null for the gates that change nothing it
// publishes (accepted so that one --feature-gates value can serve every component).
struct NodeGate {
  std::string_view name;
  std::string_view stage;
  bool PublishFeatures::*field;
  bool locked_true;  // GA: cannot be turned off
  std::string_view effect;
};

constexpr NodeGate kNodeGates[] = {
    {"DRANodeAllocatableResources", "alpha", &PublishFeatures::node_allocatable_resources, false,
     "devices publish nodeAllocatableResources (KEP-5517): CPU devices map cpu <- capacity cpus "
     "and memory <- capacity memory, profiles may add overheads; the kubelet sizes the pod's "
     "cgroups from them and devlet's NRI plugin no longer sets those devices' CFS quota and "
     "memory limit"},
    {"DRAListTypeAttributes", "alpha", &PublishFeatures::list_type_attributes, false,
     "list-typed attributes are published (NICs' rdmaDevices, profile attributes given as YAML "
     "lists); off, they are left out"},
    {"DRAPartitionableDevicesType", "alpha", &PublishFeatures::partitionable_devices_type, false,
     "devices that consume counters (partitioned GPUs and their partitions) get the string "
     "attribute partitionType, their counter cost such as memory20Gi-slices1, and their slices "
     "set spec.partitionTypeAttribute to <driver>/partitionType"},
    {"DRAOptionalNodeOperations", "alpha", &PublishFeatures::optional_node_operations, false,
     "devices of profiles with skipNodeOperations: true (nothing to prepare, nothing for the "
     "container) go into slices of their own with spec.skipNodeOperations [\"*\"], so the kubelet "
     "skips NodePrepareResources/NodeUnprepareResources for claims of only such devices; off, "
     "they are published and prepared like the others"},
    {"DynamicResourceAllocation", "GA", nullptr, true, ""},
    {"DRAPrioritizedList", "GA", nullptr, true, ""},
    {"DRAAdminAccess", "beta", nullptr, false, ""},
    {"DRAPartitionableDevices", "beta", nullptr, false, ""},
    {"DRADeviceTaints", "GA", nullptr, false, ""},
    {"DRADeviceTaintRules", "beta", nullptr, false, ""},
    {"DRAConsumableCapacity", "beta", nullptr, false, ""},
    {"DRADeviceBindingConditions", "beta", nullptr, false, ""},
    {"DRAResourceClaimDeviceStatus", "beta", nullptr, false, ""},
    {"DRAExtendedResource", "GA", nullptr, false, ""},
    {"DRAFractionalCapacityRange", "beta", nullptr, false, ""},
    {"DRADerivedAttributes", "alpha", nullptr, false, ""},
    {"DRADeviceCompatibilityGroups", "alpha", nullptr, false, ""},
    {"DRASchedulerFilterTimeout", "beta", nullptr, false, ""},
    {"DRAWorkloadResourceClaims", "beta", nullptr, false, ""},
    {"DRAResourceClaimGranularStatusAuthorization", "beta", nullptr, false, ""},
    {"ResourceHealthStatus", "beta", nullptr, false, ""},
    {"GenericWorkload", "beta", nullptr, false, ""},
    {"SchedulerPreQueueingHints", "beta", nullptr, false, ""},
};

}  // namespace

absl::StatusOr<PublishFeatures> ParseNodeFeatureGates(std::string_view spec) {
  DEVLET_ASSIGN_OR_RETURN(auto gates, flags::ParseFeatureGates(spec));
  PublishFeatures features;
  for (const auto& [name, enabled] : gates) {
    const NodeGate* gate = nullptr;
    for (const NodeGate& g : kNodeGates) {
      if (g.name == name) gate = &g;
    }
    if (gate == nullptr) {
      return InvalidArgument("--feature-gates: unrecognized feature gate: " + name +
                             " (devlet-node --help lists the gates it knows)");
    }
    if (gate->locked_true && !enabled) {
      return InvalidArgument("--feature-gates: cannot set feature gate " + name +
                             " to false, feature is locked to true");
    }
    if (gate->field != nullptr) features.*(gate->field) = enabled;
  }
  return features;
}

std::string NodeFeatureGatesHelp() {
  std::string out =
      "Feature gates, A=true,B=false (Kubernetes 1.37 names; all off by default). What each "
      "changes:";
  std::string quiet;
  for (const NodeGate& g : kNodeGates) {
    if (g.field == nullptr) {
      quiet += (quiet.empty() ? "" : ", ") + std::string(g.name);
      continue;
    }
    out += "\n  " + std::string(g.name) + " (" + std::string(g.stage) + "): " +
           std::string(g.effect) + ".";
  }
  return out + "\nAccepted without effect on devlet-node: " + quiet + ".";
}

bool UsesAdvancedFeatures(const kube::Device& device) {
  if (!device.taints.empty() || !device.consumes_counters.empty()) return true;
  for (const auto& [name, attribute] : device.attributes) {
    if (attribute.int_values || attribute.bool_values || attribute.string_values ||
        attribute.version_values) {
      return true;
    }
  }
  return false;
}

std::string SliceName(const std::string& node_name, const std::string& driver, int index) {
  std::string d = driver;
  std::replace(d.begin(), d.end(), '.', '-');
  std::string name = node_name + "-" + d + "-" + std::to_string(index);
  constexpr size_t kMax = 253;
  if (name.size() <= kMax) return name;
  std::string hash = std::to_string(Fnv1a(node_name + "/" + driver) % 1000000007ull);
  std::string suffix = "-" + hash + "-" + std::to_string(index);
  return node_name.substr(0, kMax - suffix.size()) + suffix;
}

absl::StatusOr<std::vector<kube::ResourceSlice>> BuildResourceSlices(
    const devices::DeviceSet& set, const SliceOptions& options) {
  if (options.driver.empty() || options.node_name.empty()) {
    return InvalidArgument("slices need a driver name and a node name");
  }
  DEVLET_RETURN_IF_ERROR(devices::ValidateDeviceSet(set));
  std::vector<kube::ResourceSliceSpec> specs;
  auto new_spec = [&] {
    kube::ResourceSliceSpec spec;
    spec.driver = options.driver;
    spec.node_name = options.node_name;
    spec.pool.name = options.node_name;
    return spec;
  };
  // Counter sets first, in slices of their own.
  for (size_t i = 0; i < set.counter_sets.size(); ++i) {
    if (i % kube::kResourceSliceMaxCounterSets == 0) specs.push_back(new_spec());
    kube::CounterSet counters;
    counters.name = set.counter_sets[i].name;
    for (const auto& [name, value] : set.counter_sets[i].counters) {
      DEVLET_ASSIGN_OR_RETURN(counters.counters[name].value,
                              ParseQuantity(value, "counter set " + counters.name, name));
    }
    specs.back().shared_counters.push_back(std::move(counters));
  }
  // Devices, greedily: a slice is closed when the next device would exceed its limit. With
  // DRAOptionalNodeOperations, devices that skip node operations follow in slices of their own
  // (skipNodeOperations is a slice field).
  const bool split_skip = options.features.optional_node_operations;
  std::vector<const devices::DraDevice*> ordered;
  for (const devices::DraDevice& device : set.devices) {
    if (!split_skip || !device.skip_node_operations) ordered.push_back(&device);
  }
  const size_t first_skipping = ordered.size();
  if (split_skip) {
    for (const devices::DraDevice& device : set.devices) {
      if (device.skip_node_operations) ordered.push_back(&device);
    }
  }
  bool open = false;
  bool advanced = false;
  for (size_t i = 0; i < ordered.size(); ++i) {
    const devices::DraDevice& device = *ordered[i];
    if (i == first_skipping) open = false;
    DEVLET_ASSIGN_OR_RETURN(kube::Device d, ToKubeDevice(device, options.features));
    if (auto it = options.taints.find(device.name); it != options.taints.end()) {
      d.taints = it->second;
    }
    bool d_advanced = UsesAdvancedFeatures(d);
    if (open) {
      bool would_be_advanced = advanced || d_advanced;
      size_t limit = would_be_advanced ? kube::kResourceSliceMaxDevicesWithAdvancedFeatures
                                       : kube::kResourceSliceMaxDevices;
      if (specs.back().devices.size() + 1 > limit) open = false;
    }
    if (!open) {
      specs.push_back(new_spec());
      if (i >= first_skipping) specs.back().skip_node_operations = {"*"};
      open = true;
      advanced = false;
    }
    if (options.features.partitionable_devices_type && !d.consumes_counters.empty()) {
      specs.back().partition_type_attribute =
          options.driver + "/" + std::string(kPartitionTypeAttribute);
    }
    advanced = advanced || d_advanced;
    specs.back().devices.push_back(std::move(d));
  }
  if (specs.empty()) specs.push_back(new_spec());
  std::vector<kube::ResourceSlice> slices;
  for (size_t i = 0; i < specs.size(); ++i) {
    kube::ResourceSlice slice;
    slice.metadata.name = SliceName(options.node_name, options.driver, static_cast<int>(i));
    slice.spec = std::move(specs[i]);
    slice.spec.pool.generation = 1;
    slice.spec.pool.resource_slice_count = static_cast<std::int64_t>(specs.size());
    slices.push_back(std::move(slice));
  }
  return slices;
}

SlicePublisher::SlicePublisher(kube::ObjectStore& store, SliceOptions options)
    : store_(store), options_(std::move(options)) {}

absl::StatusOr<PublishResult> SlicePublisher::Publish(const devices::DeviceSet& set) {
  DEVLET_ASSIGN_OR_RETURN(std::vector<kube::ResourceSlice> desired,
                          BuildResourceSlices(set, options_));
  // Owner reference to the Node, when the store knows it.
  absl::StatusOr<kube::Node> node = kube::GetAs<kube::Node>(store_, "", options_.node_name);
  if (node.ok()) {
    kube::OwnerReference owner;
    owner.api_version = "v1";
    owner.kind = "Node";
    owner.name = node->metadata.name;
    owner.uid = node->metadata.uid;
    owner.controller = true;
    for (kube::ResourceSlice& slice : desired) slice.metadata.owner_references = {owner};
  } else if (!absl::IsNotFound(node.status())) {
    return WithContext(node.status(), "reading Node " + options_.node_name);
  } else if (options_.require_node) {
    return FailedPrecondition("Node " + options_.node_name +
                              " does not exist (yet): its ResourceSlices are published once it does");
  }
  kube::ListOptions mine;
  mine.field_node_name = options_.node_name;
  mine.field_driver = options_.driver;
  DEVLET_ASSIGN_OR_RETURN(std::vector<kube::ResourceSlice> existing,
                          kube::ListAs<kube::ResourceSlice>(store_, mine));
  // Only the slices of our pool count.
  std::erase_if(existing, [&](const kube::ResourceSlice& slice) {
    return slice.spec.pool.name != options_.node_name;
  });
  std::int64_t max_generation = 0;
  for (const kube::ResourceSlice& slice : existing) {
    max_generation = std::max(max_generation, slice.spec.pool.generation);
  }
  PublishResult result;
  result.slices = static_cast<int>(desired.size());
  // Unchanged: same names, same content, one generation.
  bool same = existing.size() == desired.size();
  if (same) {
    std::map<std::string, const kube::ResourceSlice*> by_name;
    for (const kube::ResourceSlice& slice : existing) by_name[slice.metadata.name] = &slice;
    for (const kube::ResourceSlice& slice : desired) {
      auto it = by_name.find(slice.metadata.name);
      if (it == by_name.end() || it->second->spec.pool.generation != max_generation ||
          Comparable(*it->second) != Comparable(slice)) {
        same = false;
        break;
      }
    }
  }
  if (same) {
    result.generation = max_generation;
    return result;
  }
  result.changed = true;
  result.generation = max_generation + 1;
  std::set<std::string> desired_names;
  for (kube::ResourceSlice& slice : desired) {
    slice.spec.pool.generation = result.generation;
    desired_names.insert(slice.metadata.name);
    auto it = std::find_if(existing.begin(), existing.end(), [&](const kube::ResourceSlice& s) {
      return s.metadata.name == slice.metadata.name;
    });
    if (it == existing.end()) {
      DEVLET_RETURN_IF_ERROR(WithContext(store_.Create(slice).status(),
                                         "publishing ResourceSlice " + slice.metadata.name));
      ++result.created;
    } else {
      slice.metadata.uid = it->metadata.uid;
      slice.metadata.resource_version = it->metadata.resource_version;
      DEVLET_RETURN_IF_ERROR(WithContext(store_.Update(slice).status(),
                                         "publishing ResourceSlice " + slice.metadata.name));
      ++result.updated;
    }
  }
  for (const kube::ResourceSlice& slice : existing) {
    if (desired_names.contains(slice.metadata.name)) continue;
    absl::Status deleted =
        store_.Delete(kube::Kind::kResourceSlice, {"", slice.metadata.name}, slice.metadata.uid);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) {
      return WithContext(deleted, "deleting stale ResourceSlice " + slice.metadata.name);
    }
    ++result.deleted;
  }
  return result;
}

}  // namespace devlet::node
