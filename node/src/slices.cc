#include "devlet/node/slices.h"

#include <algorithm>
#include <set>

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

absl::StatusOr<kube::Device> ToKubeDevice(const devices::DraDevice& device) {
  kube::Device out;
  out.name = device.name;
  for (const auto& [name, value] : device.attributes) out.attributes[name] = ToKubeAttribute(value);
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
  return out;
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
  // Devices, greedily: a slice is closed when the next device would exceed its limit.
  bool open = false;
  bool advanced = false;
  for (const devices::DraDevice& device : set.devices) {
    DEVLET_ASSIGN_OR_RETURN(kube::Device d, ToKubeDevice(device));
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
      open = true;
      advanced = false;
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
