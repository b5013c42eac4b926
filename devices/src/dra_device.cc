#include "devlet/devices/dra_device.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <type_traits>

#include "devlet/common/status.h"
#include "devlet/common/strings.h"

namespace devlet::devices {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += " ";
    out += names[i];
  }
  return out + "]";
}

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (start <= s.size()) {
    size_t dot = s.find('.', start);
    if (dot == std::string_view::npos) dot = s.size();
    if (!IsDnsLabel(s.substr(start, dot - start))) return false;
    start = dot + 1;
  }
  return true;
}

bool IsCIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// A qualified name: optional "<DNS subdomain, <= 63>/" prefix plus a C identifier <= 32.
bool IsQualifiedName(std::string_view name) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) return IsCIdentifier(name);
  std::string_view domain = name.substr(0, slash);
  return domain.size() <= 63 && IsDnsSubdomain(domain) && IsCIdentifier(name.substr(slash + 1));
}

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string AttributeToString(const AttributeValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return "\"" + v + "\"";
        } else {
          return "v" + v.value;
        }
      },
      value);
}

const DraDevice* DeviceSet::Find(std::string_view name) const {
  for (const DraDevice& device : devices) {
    if (device.name == name) return &device;
  }
  return nullptr;
}

std::string DeviceSetDiff::ToString() const {
  std::string out = "added " + JoinNames(added) + " removed " + JoinNames(removed) + " changed " +
                    JoinNames(changed);
  if (counter_sets_changed) out += " (counter sets changed)";
  return out;
}

DeviceSetDiff DiffDeviceSets(const DeviceSet& before, const DeviceSet& after) {
  DeviceSetDiff diff;
  std::map<std::string, const DraDevice*> old_devices;
  for (const DraDevice& d : before.devices) old_devices[d.name] = &d;
  std::set<std::string> seen;
  for (const DraDevice& d : after.devices) {
    seen.insert(d.name);
    auto it = old_devices.find(d.name);
    if (it == old_devices.end()) {
      diff.added.push_back(d.name);
    } else if (!(*it->second == d)) {
      diff.changed.push_back(d.name);
    }
  }
  for (const auto& [name, device] : old_devices) {
    if (!seen.contains(name)) diff.removed.push_back(name);
  }
  std::sort(diff.added.begin(), diff.added.end());
  std::sort(diff.changed.begin(), diff.changed.end());
  diff.counter_sets_changed = !(before.counter_sets == after.counter_sets);
  return diff;
}

absl::Status ValidateDeviceSet(const DeviceSet& set) {
  std::set<std::string> names;
  std::set<std::string> counter_sets;
  for (const CounterSet& cs : set.counter_sets) {
    if (!IsDnsLabel(cs.name)) {
      return InvalidArgument("counter set \"" + cs.name + "\": name must be a DNS label");
    }
    if (!counter_sets.insert(cs.name).second) {
      return InvalidArgument("counter set \"" + cs.name + "\" is defined twice");
    }
    if (cs.counters.size() > 32) {
      return InvalidArgument("counter set \"" + cs.name + "\" has more than 32 counters");
    }
  }
  for (const DraDevice& d : set.devices) {
    const std::string where = "device \"" + d.name + "\"";
    if (!IsDnsLabel(d.name)) return InvalidArgument(where + ": name must be a DNS label");
    if (!names.insert(d.name).second) return InvalidArgument(where + " is defined twice");
    if (d.attributes.size() + d.list_attributes.size() + d.capacities.size() > 32) {
      return InvalidArgument(where + ": more than 32 attributes and capacities");
    }
    for (const auto& [name, values] : d.list_attributes) {
      if (!IsQualifiedName(name)) {
        return InvalidArgument(where + ": attribute name " + GoQuote(name) +
                               " is not a qualified name");
      }
      if (d.attributes.contains(name)) {
        return InvalidArgument(where + ": attribute " + name + " is both a value and a list");
      }
      if (values.empty()) return InvalidArgument(where + ": list attribute " + name + " is empty");
      for (const AttributeValue& v : values) {
        if (v.index() != values.front().index()) {
          return InvalidArgument(where + ": list attribute " + name + " mixes value types");
        }
        const std::string text = AttributeToString(v);
        if (text.size() > 66) {  // 64 plus the quotes AttributeToString puts around strings
          return InvalidArgument(where + ": list attribute " + name +
                                 " has an element longer than 64 characters");
        }
      }
    }
    for (const auto& [name, value] : d.attributes) {
      if (!IsQualifiedName(name)) {
        return InvalidArgument(where + ": attribute name " + GoQuote(name) +
                               " is not a qualified name");
      }
      if (const auto* s = std::get_if<std::string>(&value); s && s->size() > 64) {
        return InvalidArgument(where + ": attribute " + name + " is longer than 64 characters");
      }
      if (const auto* v = std::get_if<SemVer>(&value); v && v->value.size() > 64) {
        return InvalidArgument(where + ": attribute " + name + " is longer than 64 characters");
      }
    }
    for (const auto& [name, capacity] : d.capacities) {
      if (!IsQualifiedName(name)) {
        return InvalidArgument(where + ": capacity name " + GoQuote(name) +
                               " is not a qualified name");
      }
      if (capacity.value.empty()) return InvalidArgument(where + ": capacity " + name + " is empty");
      if (capacity.request_policy && !d.allow_multiple_allocations) {
        return InvalidArgument(where + ": capacity " + name +
                               " has a request policy but the device does not allow multiple "
                               "allocations");
      }
    }
    for (const auto& [name, n] : d.node_allocatable) {
      const std::string what = where + ": nodeAllocatableResources " + name;
      if (name != "cpu" && name != "memory" && name.rfind("hugepages-", 0) != 0) {
        return InvalidArgument(what + ": not a node allocatable resource (cpu, memory, "
                               "hugepages-<size>)");
      }
      const bool mapping = !n.capacity_key.empty() || !n.device_multiplier.empty();
      const bool overhead = !n.overhead_per_pod.empty() || !n.overhead_per_container.empty();
      if (!mapping && !overhead) return InvalidArgument(what + ": needs a mapping or an overhead");
      if (!n.capacity_key.empty() && !d.capacities.contains(n.capacity_key)) {
        return InvalidArgument(what + ": capacityKey \"" + n.capacity_key +
                               "\" is not a capacity of the device");
      }
      if (n.capacity_key.empty() != n.capacity_multiplier.empty()) {
        return InvalidArgument(what + ": capacityKey and capacityMultiplier go together");
      }
      if (!n.capacity_key.empty() && !n.device_multiplier.empty()) {
        return InvalidArgument(what + ": capacityKey and deviceMultiplier exclude each other");
      }
    }
    if (d.consumes_counters.size() > 2) {
      return InvalidArgument(where + ": more than 2 consumesCounters entries");
    }
    for (const CounterConsumption& c : d.consumes_counters) {
      if (!counter_sets.contains(c.counter_set)) {
        return InvalidArgument(where + ": consumes counters of unknown counter set \"" +
                               c.counter_set + "\"");
      }
    }
  }
  return absl::OkStatus();
}

bool IsValidPciBusId(std::string_view a) {
  // dddd:bb:dd.f
  if (a.size() != 12) return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11}) {
    if (!IsHex(a[i])) return false;
  }
  return a[4] == ':' && a[7] == ':' && a[10] == '.';
}

std::string FormatBinaryQuantity(std::uint64_t bytes) {
  static constexpr const char* kSuffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (bytes == 0) return "0";
  int i = 0;
  while (i < 6 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + kSuffixes[i];
}

std::string FormatDecimalQuantity(std::uint64_t value) {
  static constexpr const char* kSuffixes[] = {"", "k", "M", "G", "T", "P", "E"};
  if (value == 0) return "0";
  int i = 0;
  while (i < 6 && value % 1000 == 0) {
    value /= 1000;
    ++i;
  }
  return std::to_string(value) + kSuffixes[i];
}

namespace {

// Fnv64 hashes a canonical, length-prefixed encoding (so "ab"+"c" differs from "a"+"bc").
class Fnv64 {
 public:
  void Add(std::string_view text) {
    AddRaw(std::to_string(text.size()));
    AddRaw(":");
    AddRaw(text);
  }
  void Add(std::int64_t value) { Add(std::to_string(value)); }
  std::uint64_t value() const { return hash_; }

 private:
  void AddRaw(std::string_view bytes) {
    for (unsigned char c : bytes) {
      hash_ ^= c;
      hash_ *= 0x100000001b3ull;
    }
  }
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

void AddQuantities(Fnv64& h, const std::map<std::string, std::string>& quantities) {
  h.Add(static_cast<std::int64_t>(quantities.size()));
  for (const auto& [name, value] : quantities) {
    h.Add(name);
    h.Add(value);
  }
}

}  // namespace

std::string DeviceSetFingerprint(const DeviceSet& set) {
  // Order-independent: the slice adapter may reorder, and an equal set must hash equal.
  std::vector<const DraDevice*> devices;
  for (const DraDevice& device : set.devices) devices.push_back(&device);
  std::sort(devices.begin(), devices.end(),
            [](const DraDevice* a, const DraDevice* b) { return a->name < b->name; });
  Fnv64 h;
  h.Add(static_cast<std::int64_t>(devices.size()));
  for (const DraDevice* device : devices) {
    h.Add(device->name);
    h.Add(static_cast<std::int64_t>(device->attributes.size()));
    for (const auto& [name, value] : device->attributes) {
      h.Add(name);
      h.Add(static_cast<std::int64_t>(value.index()));  // int 3 and string "3" differ
      h.Add(AttributeToString(value));
    }
    h.Add(static_cast<std::int64_t>(device->capacities.size()));
    for (const auto& [name, capacity] : device->capacities) {
      h.Add(name);
      h.Add(capacity.value);
      h.Add(capacity.request_policy.has_value() ? 1 : 0);
      if (capacity.request_policy) {
        const RequestPolicy& policy = *capacity.request_policy;
        h.Add(policy.default_value);
        h.Add(static_cast<std::int64_t>(policy.valid_values.size()));
        for (const std::string& v : policy.valid_values) h.Add(v);
        h.Add(policy.min);
        h.Add(policy.max);
        h.Add(policy.step);
      }
    }
    h.Add(static_cast<std::int64_t>(device->consumes_counters.size()));
    for (const CounterConsumption& consumption : device->consumes_counters) {
      h.Add(consumption.counter_set);
      AddQuantities(h, consumption.counters);
    }
    h.Add(device->allow_multiple_allocations ? 1 : 0);
    // Only when present, so that the fingerprints of sets without them stay what they were.
    if (!device->list_attributes.empty()) {
      h.Add("listAttributes");
      h.Add(static_cast<std::int64_t>(device->list_attributes.size()));
      for (const auto& [name, values] : device->list_attributes) {
        h.Add(name);
        h.Add(static_cast<std::int64_t>(values.size()));
        for (const AttributeValue& v : values) {
          h.Add(static_cast<std::int64_t>(v.index()));
          h.Add(AttributeToString(v));
        }
      }
    }
    if (device->skip_node_operations) h.Add("skipNodeOperations");
    if (!device->node_allocatable.empty()) {
      h.Add("nodeAllocatable");
      h.Add(static_cast<std::int64_t>(device->node_allocatable.size()));
      for (const auto& [name, n] : device->node_allocatable) {
        h.Add(name);
        for (const std::string* v : {&n.capacity_key, &n.capacity_multiplier, &n.device_multiplier,
                                     &n.overhead_per_pod, &n.overhead_per_container}) {
          h.Add(*v);
        }
      }
    }
  }
  std::vector<const CounterSet*> sets;
  for (const CounterSet& counter_set : set.counter_sets) sets.push_back(&counter_set);
  std::sort(sets.begin(), sets.end(),
            [](const CounterSet* a, const CounterSet* b) { return a->name < b->name; });
  h.Add(static_cast<std::int64_t>(sets.size()));
  for (const CounterSet* counter_set : sets) {
    h.Add(counter_set->name);
    AddQuantities(h, counter_set->counters);
  }
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h.value()));
  return out;
}

}  // namespace devlet::devices
