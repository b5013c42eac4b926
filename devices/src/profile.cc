#include "devlet/devices/profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "devlet/common/status.h"
#include "devlet/common/strings.h"

namespace devlet::devices {
namespace {

// ---- YAML parsing -------------------------------------------------------------------------

std::string Where(const YAML::Node& node) {
  if (node.Mark().line < 0) return "";
  return " (line " + std::to_string(node.Mark().line + 1) + ")";
}

absl::Status FieldError(const std::string& profile, const std::string& field,
                        const YAML::Node& node, const std::string& what) {
  return InvalidArgument("profile \"" + profile + "\": field " + field + Where(node) + ": " + what);
}

absl::StatusOr<std::vector<std::string>> StringList(const std::string& profile,
                                                    const std::string& field,
                                                    const YAML::Node& node) {
  std::vector<std::string> out;
  if (!node) return out;
  if (!node.IsSequence()) return FieldError(profile, field, node, "must be a list");
  for (const YAML::Node& item : node) {
    if (!item.IsScalar()) return FieldError(profile, field, item, "items must be strings");
    out.push_back(item.Scalar());
  }
  return out;
}

absl::StatusOr<std::uint16_t> ParseId(const std::string& profile, const std::string& field,
                                      const YAML::Node& node, const std::string& text) {
  unsigned value = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%x%n", &value, &consumed) != 1 ||
      consumed != static_cast<int>(text.size()) || value > 0xffff) {
    return FieldError(profile, field, node,
                      "\"" + text + "\" is not a 16-bit hexadecimal PCI id (e.g. \"0x10de\")");
  }
  return static_cast<std::uint16_t>(value);
}

absl::StatusOr<std::vector<std::uint16_t>> IdList(const std::string& profile,
                                                  const std::string& field,
                                                  const YAML::Node& node) {
  DEVLET_ASSIGN_OR_RETURN(std::vector<std::string> texts, StringList(profile, field, node));
  std::vector<std::uint16_t> out;
  for (const std::string& text : texts) {
    DEVLET_ASSIGN_OR_RETURN(std::uint16_t id, ParseId(profile, field, node, text));
    out.push_back(id);
  }
  return out;
}

absl::StatusOr<int> Int(const std::string& profile, const std::string& field,
                        const YAML::Node& node, int min, int max) {
  int value = 0;
  if (!node.IsScalar() || !YAML::convert<int>::decode(node, value)) {
    return FieldError(profile, field, node, "must be an integer");
  }
  if (value < min || value > max) {
    return FieldError(profile, field, node,
                      "must be between " + std::to_string(min) + " and " + std::to_string(max));
  }
  return value;
}

absl::StatusOr<bool> Bool(const std::string& profile, const std::string& field,
                          const YAML::Node& node) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    return FieldError(profile, field, node, "must be true or false");
  }
  return value;
}

absl::Status CheckKeys(const std::string& profile, const std::string& field, const YAML::Node& node,
                       std::initializer_list<std::string_view> known) {
  if (!node.IsMap()) return FieldError(profile, field, node, "must be a mapping");
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return FieldError(profile, field.empty() ? key : field + "." + key, entry.first,
                        "unknown field");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CommandLine> ParseCommand(const std::string& profile, const std::string& field,
                                         const YAML::Node& node) {
  DEVLET_RETURN_IF_ERROR(CheckKeys(profile, field, node, {"command", "timeoutSeconds"}));
  CommandLine command;
  DEVLET_ASSIGN_OR_RETURN(command.argv,
                          StringList(profile, field + ".command", node["command"]));
  if (command.argv.empty() || command.argv.front().empty() || command.argv.front()[0] != '/') {
    return FieldError(profile, field + ".command", node,
                      "must be a non-empty list starting with an absolute program path");
  }
  if (node["timeoutSeconds"]) {
    DEVLET_ASSIGN_OR_RETURN(int seconds,
                            Int(profile, field + ".timeoutSeconds", node["timeoutSeconds"], 1, 3600));
    command.timeout_ms = seconds * 1000;
  }
  return command;
}

absl::StatusOr<AttributeValue> ParseAttribute(const std::string& profile, const std::string& field,
                                              const YAML::Node& node) {
  if (node.IsMap()) {
    DEVLET_RETURN_IF_ERROR(CheckKeys(profile, field, node, {"version", "string", "int", "bool"}));
    if (node["version"]) return SemVer{node["version"].Scalar()};
    if (node["string"]) return AttributeValue(std::string(node["string"].Scalar()));
    if (node["int"]) {
      long long v = 0;
      if (!YAML::convert<long long>::decode(node["int"], v)) {
        return FieldError(profile, field, node, "int must be an integer");
      }
      return AttributeValue(static_cast<std::int64_t>(v));
    }
    DEVLET_ASSIGN_OR_RETURN(bool b, Bool(profile, field, node["bool"]));
    return AttributeValue(b);
  }
  if (!node.IsScalar()) return FieldError(profile, field, node, "must be a scalar");
  if (node.Tag() != "!") {  // unquoted: try bool, then int
    bool b = false;
    if (YAML::convert<bool>::decode(node, b)) return AttributeValue(b);
    long long v = 0;
    if (YAML::convert<long long>::decode(node, v)) return AttributeValue(static_cast<std::int64_t>(v));
  }
  return AttributeValue(std::string(node.Scalar()));
}

// A quantity of the profile, as text: a scalar made of the characters a Kubernetes quantity uses
// (the slice adapter parses it exactly and names the device when it does not parse).
absl::StatusOr<std::string> QuantityText(const std::string& profile, const std::string& field,
                                         const YAML::Node& node) {
  if (!node.IsScalar() || node.Scalar().empty()) {
    return FieldError(profile, field, node, "must be a quantity such as 2Gi or 500m");
  }
  for (char c : node.Scalar()) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '+' && c != '-') {
      return FieldError(profile, field, node,
                        "\"" + node.Scalar() + "\" is not a quantity such as 2Gi or 500m");
    }
  }
  return node.Scalar();
}

// nodeAllocatableResources: {<resource>: {mapping: {capacityKey, capacityMultiplier,
// deviceMultiplier}, overhead: {perPod, perContainer}}} (KEP-5517, the API's own shape).
absl::StatusOr<std::map<std::string, NodeAllocatable>> ParseNodeAllocatable(
    const std::string& profile, const YAML::Node& node) {
  std::map<std::string, NodeAllocatable> out;
  const std::string field = "nodeAllocatableResources";
  if (!node.IsMap()) return FieldError(profile, field, node, "must be a mapping");
  for (const auto& entry : node) {
    const std::string resource = entry.first.Scalar();
    const std::string f = field + "." + resource;
    if (resource != "cpu" && resource != "memory" && resource.rfind("hugepages-", 0) != 0) {
      return FieldError(profile, f, entry.first,
                        "is not a node allocatable resource (cpu, memory, hugepages-<size>)");
    }
    DEVLET_RETURN_IF_ERROR(CheckKeys(profile, f, entry.second, {"mapping", "overhead"}));
    NodeAllocatable n;
    if (const YAML::Node mapping = entry.second["mapping"]) {
      DEVLET_RETURN_IF_ERROR(CheckKeys(profile, f + ".mapping", mapping,
                                       {"capacityKey", "capacityMultiplier", "deviceMultiplier"}));
      if (mapping["capacityKey"]) {
        if (!mapping["capacityKey"].IsScalar() || mapping["capacityKey"].Scalar().empty()) {
          return FieldError(profile, f + ".mapping.capacityKey", mapping, "must be a capacity name");
        }
        n.capacity_key = mapping["capacityKey"].Scalar();
        n.capacity_multiplier = "1";
      }
      if (mapping["capacityMultiplier"]) {
        DEVLET_ASSIGN_OR_RETURN(n.capacity_multiplier,
                                QuantityText(profile, f + ".mapping.capacityMultiplier",
                                             mapping["capacityMultiplier"]));
        if (n.capacity_key.empty()) {
          return FieldError(profile, f + ".mapping.capacityMultiplier", mapping,
                            "needs capacityKey");
        }
      }
      if (mapping["deviceMultiplier"]) {
        if (!n.capacity_key.empty()) {
          return FieldError(profile, f + ".mapping.deviceMultiplier", mapping,
                            "excludes capacityKey");
        }
        DEVLET_ASSIGN_OR_RETURN(n.device_multiplier,
                                QuantityText(profile, f + ".mapping.deviceMultiplier",
                                             mapping["deviceMultiplier"]));
      }
      if (n.capacity_key.empty() && n.device_multiplier.empty()) {
        return FieldError(profile, f + ".mapping", mapping,
                          "needs capacityKey or deviceMultiplier");
      }
    }
    if (const YAML::Node overhead = entry.second["overhead"]) {
      DEVLET_RETURN_IF_ERROR(CheckKeys(profile, f + ".overhead", overhead, {"perPod", "perContainer"}));
      if (overhead["perPod"]) {
        DEVLET_ASSIGN_OR_RETURN(n.overhead_per_pod,
                                QuantityText(profile, f + ".overhead.perPod", overhead["perPod"]));
      }
      if (overhead["perContainer"]) {
        DEVLET_ASSIGN_OR_RETURN(n.overhead_per_container,
                                QuantityText(profile, f + ".overhead.perContainer",
                                             overhead["perContainer"]));
      }
      if (n.overhead_per_pod.empty() && n.overhead_per_container.empty()) {
        return FieldError(profile, f + ".overhead", overhead, "needs perPod or perContainer");
      }
    }
    if (!entry.second["mapping"] && !entry.second["overhead"]) {
      return FieldError(profile, f, entry.second, "needs mapping or overhead");
    }
    out[resource] = std::move(n);
  }
  return out;
}

// match: which discovered devices the profile takes.
absl::Status ParseMatch(const std::string& name, const YAML::Node& node, Profile& profile) {
  if (const YAML::Node match = node["match"]) {
    DEVLET_RETURN_IF_ERROR(CheckKeys(name, "match", match,
                                     {"vendorIDs", "deviceIDs", "drivers", "pciAddresses",
                                      "interfaces", "models", "numaNodes"}));
    DeviceMatch& m = profile.match;
    DEVLET_ASSIGN_OR_RETURN(m.vendor_ids, IdList(name, "match.vendorIDs", match["vendorIDs"]));
    DEVLET_ASSIGN_OR_RETURN(m.device_ids, IdList(name, "match.deviceIDs", match["deviceIDs"]));
    DEVLET_ASSIGN_OR_RETURN(m.drivers, StringList(name, "match.drivers", match["drivers"]));
    DEVLET_ASSIGN_OR_RETURN(m.pci_addresses,
                            StringList(name, "match.pciAddresses", match["pciAddresses"]));
    DEVLET_ASSIGN_OR_RETURN(m.interfaces, StringList(name, "match.interfaces", match["interfaces"]));
    DEVLET_ASSIGN_OR_RETURN(m.models, StringList(name, "match.models", match["models"]));
    if (const YAML::Node numa = match["numaNodes"]) {
      if (!numa.IsSequence()) return FieldError(name, "match.numaNodes", numa, "must be a list");
      for (const YAML::Node& item : numa) {
        DEVLET_ASSIGN_OR_RETURN(int id, Int(name, "match.numaNodes", item, 0, 1023));
        m.numa_nodes.push_back(id);
      }
    }
  }
  return absl::OkStatus();
}

// sharing: whole devices, GPU partitions or consumable NIC and CPU capacity.
absl::Status ParseSharing(const std::string& name, const YAML::Node& node, Profile& profile) {
  if (const YAML::Node sharing = node["sharing"]) {
    DEVLET_RETURN_IF_ERROR(CheckKeys(name, "sharing", sharing, {"mode", "partitions", "bandwidthShare"}));
    const std::string mode = sharing["mode"] ? sharing["mode"].Scalar() : "whole";
    if (mode == "whole") {
      profile.sharing = SharingMode::kWhole;
    } else if (mode == "partitions") {
      if (profile.kind != ProfileKind::kGpu) {
        return FieldError(name, "sharing.mode", sharing, "partitions are for gpu profiles");
      }
      profile.sharing = SharingMode::kPartitions;
      if (!sharing["partitions"]) {
        return FieldError(name, "sharing.partitions", sharing, "is required with mode partitions");
      }
      DEVLET_ASSIGN_OR_RETURN(profile.partitions,
                              Int(name, "sharing.partitions", sharing["partitions"], 2, 16));
    } else if (mode == "consumable") {
      if (profile.kind != ProfileKind::kNic && profile.kind != ProfileKind::kCpu) {
        return FieldError(name, "sharing.mode", sharing, "consumable is for nic and cpu profiles");
      }
      profile.sharing = SharingMode::kConsumable;
      profile.bandwidth_share =
          sharing["bandwidthShare"] ? sharing["bandwidthShare"].Scalar() : std::string("1G");
    } else {
      return FieldError(name, "sharing.mode", sharing["mode"],
                        "unknown mode \"" + mode + "\" (want whole, partitions or consumable)");
    }
  }
  return absl::OkStatus();
}

// numVFs, vfio, mdevType: what the device is bound to or split into at prepare.
absl::Status ParseBinding(const std::string& name, const YAML::Node& node, Profile& profile) {
  if (node["numVFs"]) {
    if (profile.kind != ProfileKind::kVf) {
      return FieldError(name, "numVFs", node["numVFs"], "is only for vf profiles");
    }
    DEVLET_ASSIGN_OR_RETURN(profile.num_vfs, Int(name, "numVFs", node["numVFs"], 1, 256));
  } else if (profile.kind == ProfileKind::kVf) {
    return FieldError(name, "numVFs", node, "is required for vf profiles");
  }
  if (node["vfio"]) {
    DEVLET_ASSIGN_OR_RETURN(profile.vfio, Bool(name, "vfio", node["vfio"]));
    if (profile.vfio && profile.kind == ProfileKind::kCpu) {
      return FieldError(name, "vfio", node["vfio"], "cpu devices cannot be bound to vfio-pci");
    }
    if (profile.vfio && profile.sharing != SharingMode::kWhole) {
      return FieldError(name, "vfio", node["vfio"], "vfio passthrough needs sharing mode whole");
    }
  }
  if (const YAML::Node mdev = node["mdevType"]) {
    if (!mdev.IsScalar() || mdev.Scalar().empty() || mdev.Scalar().find('/') != std::string::npos) {
      return FieldError(name, "mdevType", mdev, "must be an mdev type name such as nvidia-63");
    }
    if (profile.kind != ProfileKind::kGpu && profile.kind != ProfileKind::kVf) {
      return FieldError(name, "mdevType", mdev, "is only for gpu and vf profiles");
    }
    if (profile.vfio) {
      return FieldError(name, "mdevType", mdev,
                        "cannot be combined with vfio: the parent stays on its vendor driver");
    }
    profile.mdev_type = mdev.Scalar();
  }
  return absl::OkStatus();
}

// init, cleanup, skipNodeOperations: what runs at prepare and unprepare, or that nothing does.
absl::Status ParseNodeOperations(const std::string& name, const YAML::Node& node,
                                 Profile& profile) {
  if (node["init"]) {
    DEVLET_ASSIGN_OR_RETURN(profile.init, ParseCommand(name, "init", node["init"]));
  }
  if (node["cleanup"]) {
    DEVLET_ASSIGN_OR_RETURN(profile.cleanup, ParseCommand(name, "cleanup", node["cleanup"]));
  }
  if (const YAML::Node skip = node["skipNodeOperations"]) {
    DEVLET_ASSIGN_OR_RETURN(profile.skip_node_operations, Bool(name, "skipNodeOperations", skip));
    // The kubelet then never prepares these devices: nothing may need preparing, and the
    // container gets nothing from devlet (no CDI devices, no cpuset from the prepared claim).
    if (profile.skip_node_operations) {
      std::string why;
      if (profile.kind == ProfileKind::kCpu) why = "cpu devices are pinned from the prepared claim";
      if (profile.kind == ProfileKind::kVf) why = "VFs are created at prepare";
      if (profile.vfio) why = "vfio binding happens at prepare";
      if (!profile.mdev_type.empty()) why = "mediated devices are created at prepare";
      if (profile.init || profile.cleanup) why = "init/cleanup commands run at prepare/unprepare";
      if (!why.empty()) {
        return FieldError(name, "skipNodeOperations", skip, "cannot be true: " + why);
      }
    }
  }
  return absl::OkStatus();
}

// cdiDevices: the vendor's CDI devices handed to the container besides devlet's own.
absl::Status ParseCdiDevices(const std::string& name, const YAML::Node& node, Profile& profile) {
  if (const YAML::Node cdi = node["cdiDevices"]) {
    if (profile.kind != ProfileKind::kGpu && profile.kind != ProfileKind::kNic) {
      return FieldError(name, "cdiDevices", cdi, "is only for gpu and nic profiles");
    }
    DEVLET_ASSIGN_OR_RETURN(profile.cdi_devices, StringList(name, "cdiDevices", cdi));
    for (const std::string& t : profile.cdi_devices) {
      const size_t eq = t.find('=');
      const size_t slash = t.find('/');
      if (eq == std::string::npos || slash == std::string::npos || slash > eq || eq + 1 == t.size()) {
        return FieldError(name, "cdiDevices", cdi,
                          GoQuote(t) + " is not a CDI device name (vendor/class=device)");
      }
      std::string rest = t.substr(eq + 1);
      for (size_t open = rest.find('{'); open != std::string::npos; open = rest.find('{', open + 1)) {
        const size_t close = rest.find('}', open);
        const std::string key = close == std::string::npos ? "" : rest.substr(open + 1, close - open - 1);
        if (key != "uuid" && key != "minor" && key != "pciBusID" && key != "index" && key != "name") {
          return FieldError(name, "cdiDevices", cdi,
                            GoQuote(t) + ": unknown placeholder (want {uuid}, {minor}, "
                            "{pciBusID}, {index} or {name})");
        }
      }
    }
    if (profile.skip_node_operations) {
      return FieldError(name, "cdiDevices", cdi,
                        "cannot be combined with skipNodeOperations (the kubelet would never "
                        "ask for them)");
    }
  }
  return absl::OkStatus();
}

// attributes: published on every device of the profile, lists as list-typed attributes.
absl::Status ParseAttributes(const std::string& name, const YAML::Node& node, Profile& profile) {
  if (const YAML::Node attributes = node["attributes"]) {
    if (!attributes.IsMap()) return FieldError(name, "attributes", attributes, "must be a mapping");
    for (const auto& entry : attributes) {
      const std::string key = entry.first.Scalar();
      if (entry.second.IsSequence()) {  // a list-typed attribute (DRAListTypeAttributes)
        std::vector<AttributeValue>& list = profile.list_attributes[key];
        for (const YAML::Node& item : entry.second) {
          DEVLET_ASSIGN_OR_RETURN(AttributeValue v,
                                  ParseAttribute(name, "attributes." + key, item));
          if (!list.empty() && v.index() != list.front().index()) {
            return FieldError(name, "attributes." + key, item,
                              "list elements must all have the same type");
          }
          list.push_back(std::move(v));
        }
        if (list.empty()) {
          return FieldError(name, "attributes." + key, entry.second, "list must not be empty");
        }
        continue;
      }
      DEVLET_ASSIGN_OR_RETURN(profile.attributes[key],
                              ParseAttribute(name, "attributes." + key, entry.second));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Profile> ParseProfile(const YAML::Node& node, size_t index) {
  std::string name = "#" + std::to_string(index);
  if (!node.IsMap())
    return FieldError(name, "", node, "a profile must be a mapping");
  if (!node["name"] || !node["name"].IsScalar()) {
    return FieldError(name, "name", node, "is required");
  }
  Profile profile;
  profile.name = node["name"].Scalar();
  name = profile.name;
  DEVLET_RETURN_IF_ERROR(CheckKeys(
      name, "", node,
      {"name", "kind", "match", "sharing", "numVFs", "vfio", "mdevType", "init", "cleanup",
       "attributes", "nodeAllocatableResources", "skipNodeOperations", "cdiDevices"}));
  bool label = !name.empty() && name.size() <= 40 && name.front() != '-' && name.back() != '-';
  for (char c : name)
    label = label && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  if (!label) {
    return FieldError(name, "name", node["name"],
                      "must be a lowercase DNS label of at most 40 characters");
  }
  if (!node["kind"])
    return FieldError(name, "kind", node, "is required");
  const std::string kind = node["kind"].Scalar();
  if (kind == "gpu") {
    profile.kind = ProfileKind::kGpu;
  } else if (kind == "nic") {
    profile.kind = ProfileKind::kNic;
  } else if (kind == "vf") {
    profile.kind = ProfileKind::kVf;
  } else if (kind == "cpu") {
    profile.kind = ProfileKind::kCpu;
  } else {
    return FieldError(name, "kind", node["kind"],
                      "unknown kind \"" + kind + "\" (want gpu, nic, vf or cpu)");
  }
  DEVLET_RETURN_IF_ERROR(ParseMatch(name, node, profile));
  DEVLET_RETURN_IF_ERROR(ParseSharing(name, node, profile));
  if (profile.kind == ProfileKind::kCpu)
    profile.sharing = SharingMode::kConsumable;
  DEVLET_RETURN_IF_ERROR(ParseBinding(name, node, profile));
  DEVLET_RETURN_IF_ERROR(ParseNodeOperations(name, node, profile));
  DEVLET_RETURN_IF_ERROR(ParseCdiDevices(name, node, profile));
  if (const YAML::Node allocatable = node["nodeAllocatableResources"]) {
    DEVLET_ASSIGN_OR_RETURN(profile.node_allocatable, ParseNodeAllocatable(name, allocatable));
  }
  DEVLET_RETURN_IF_ERROR(ParseAttributes(name, node, profile));
  return profile;
}

// ---- Building devices -----------------------------------------------------------------------

std::string Hex4(std::uint16_t value) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "0x%04x", value);
  return buffer;
}

template <typename T>
bool Contains(const std::vector<T>& list, const T& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

bool MatchesPci(const Profile& profile, const PciFunction& pci, const std::string& model,
                const std::string& interface) {
  const DeviceMatch& m = profile.match;
  if (!m.vendor_ids.empty() && !Contains(m.vendor_ids, pci.vendor_id)) return false;
  if (!m.device_ids.empty() && !Contains(m.device_ids, pci.device_id)) return false;
  if (!m.drivers.empty() && !Contains(m.drivers, pci.driver) &&
      !(profile.vfio && pci.driver == "vfio-pci")) {
    return false;
  }
  if (!m.pci_addresses.empty() && !Contains(m.pci_addresses, pci.address)) return false;
  if (!m.models.empty() && !Contains(m.models, model)) return false;
  if (!m.interfaces.empty() && !Contains(m.interfaces, interface)) return false;
  if (!m.numa_nodes.empty() && (!pci.numa_node || !Contains(m.numa_nodes, *pci.numa_node))) {
    return false;
  }
  return true;
}

void AddPciAttributes(const PciFunction& pci, const std::string& vendor, const std::string& model,
                      bool with_driver, DraDevice& device) {
  auto& a = device.attributes;
  a["vendor"] = vendor;
  a["vendorID"] = Hex4(pci.vendor_id);
  a["deviceID"] = Hex4(pci.device_id);
  if (!model.empty()) a["model"] = model.substr(0, 64);
  if (with_driver && !pci.driver.empty()) a["driver"] = pci.driver;
  if (IsValidPciBusId(pci.address)) {
    a[std::string(kAttrPciBusId)] = pci.address;
  } else {
    a["pciAddress"] = pci.address;  // 32-bit domains cannot use the standard attribute
  }
  if (!pci.pcie_root.empty()) a[std::string(kAttrPcieRoot)] = pci.pcie_root;
  if (pci.numa_node) a[std::string(kAttrNumaNode)] = static_cast<std::int64_t>(*pci.numa_node);
  if (pci.iommu_group) a["iommuGroup"] = static_cast<std::int64_t>(*pci.iommu_group);
  device.pci_address = pci.address;
  device.numa_node = pci.numa_node;
}

void ApplyProfileCommon(const Profile& profile, DraDevice& device) {
  device.profile = profile.name;
  device.preparation.bind_vfio = profile.vfio;
  device.preparation.init = profile.init;
  device.preparation.cleanup = profile.cleanup;
  device.preparation.mdev_type = profile.mdev_type;
  if (profile.vfio) device.attributes["vfio"] = true;
  if (!profile.mdev_type.empty()) device.attributes["mdevType"] = profile.mdev_type;
  for (const auto& [key, value] : profile.attributes) {
    device.attributes[key] = value;
    device.list_attributes.erase(key);
  }
  for (const auto& [key, values] : profile.list_attributes) {
    device.list_attributes[key] = values;
    device.attributes.erase(key);
  }
  device.skip_node_operations = profile.skip_node_operations;
  // The profile's entries replace the kind's defaults resource by resource. A capacity key the
  // device lacks (GPU partitions have no memory capacity when the GPU reports none) drops the
  // mapping; ValidateDeviceSet would refuse it.
  for (const auto& [resource, n] : profile.node_allocatable) {
    if (!n.capacity_key.empty() && !device.capacities.contains(n.capacity_key)) continue;
    device.node_allocatable[resource] = n;
  }
}

// ExpandCdiDevices fills the device's vendor CDI names from the profile's templates; a
// placeholder the device has no value for is an error naming the profile, template and device.
absl::Status ExpandCdiDevices(const Profile& profile, int index, const std::string& uuid,
                              std::optional<int> minor, DraDevice& device) {
  for (const std::string& t : profile.cdi_devices) {
    std::string out;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] != '{') {
        out += t[i];
        continue;
      }
      const size_t close = t.find('}', i);
      const std::string key = t.substr(i + 1, close - i - 1);
      std::string value;
      if (key == "uuid") value = uuid;
      if (key == "minor" && minor) value = std::to_string(*minor);
      if (key == "pciBusID") value = device.pci_address;
      if (key == "index") value = std::to_string(index);
      if (key == "name") value = device.name;
      if (value.empty()) {
        return FailedPrecondition("profile \"" + profile.name + "\": cdiDevices " + GoQuote(t) +
                                  ": device " + device.name + " (" + device.pci_address +
                                  ") has no " + GoQuote(key));
      }
      out += value;
      i = close;
    }
    device.preparation.vendor_cdi_devices.push_back(std::move(out));
  }
  return absl::OkStatus();
}

absl::Status BuildGpu(const Profile& profile, const Gpu& gpu, int index, DeviceSet& set) {
  DraDevice whole;
  whole.name = profile.name + "-" + std::to_string(index);
  whole.attributes["type"] = std::string("gpu");
  AddPciAttributes(gpu.pci, gpu.vendor, gpu.model, !profile.vfio, whole);
  if (!gpu.uuid.empty()) whole.attributes["uuid"] = gpu.uuid.substr(0, 64);
  if (gpu.memory_bytes) whole.capacities["memory"] = {.value = FormatBinaryQuantity(gpu.memory_bytes)};
  ApplyProfileCommon(profile, whole);
  DEVLET_RETURN_IF_ERROR(ExpandCdiDevices(profile, index, gpu.uuid, gpu.nvidia_minor, whole));
  if (profile.sharing != SharingMode::kPartitions) {
    set.devices.push_back(std::move(whole));
    return absl::OkStatus();
  }
  const int n = profile.partitions;
  CounterSet counters;
  counters.name = whole.name + "-counters";
  counters.counters["slices"] = std::to_string(n);
  const std::uint64_t slice_memory = gpu.memory_bytes / static_cast<std::uint64_t>(n);
  if (slice_memory) {
    counters.counters["memory"] = FormatBinaryQuantity(slice_memory * static_cast<std::uint64_t>(n));
  }
  whole.consumes_counters.push_back({.counter_set = counters.name, .counters = counters.counters});
  if (slice_memory) {
    whole.capacities["memory"] = {.value = counters.counters["memory"]};
  }
  whole.attributes["partitions"] = static_cast<std::int64_t>(n);
  for (int j = 0; j < n; ++j) {
    DraDevice part = whole;
    part.name = whole.name + "-part-" + std::to_string(j);
    part.attributes["type"] = std::string("gpu-partition");
    part.attributes["partition"] = static_cast<std::int64_t>(j);
    part.attributes["parentDevice"] = whole.name;
    part.consumes_counters = {{.counter_set = counters.name, .counters = {{"slices", "1"}}}};
    part.capacities.clear();
    if (slice_memory) {
      part.consumes_counters[0].counters["memory"] = FormatBinaryQuantity(slice_memory);
      part.capacities["memory"] = {.value = FormatBinaryQuantity(slice_memory)};
    }
    set.devices.push_back(std::move(part));
  }
  set.devices.insert(set.devices.end() - n, std::move(whole));
  set.counter_sets.push_back(std::move(counters));
  return absl::OkStatus();
}

void AddNicAttributes(const Nic& nic, DraDevice& device) {
  auto& a = device.attributes;
  if (!nic.interface.empty()) a["interface"] = nic.interface;
  if (!nic.mac.empty()) a["mac"] = nic.mac;
  a["rdma"] = !nic.rdma_devices.empty();
  if (!nic.rdma_devices.empty()) a["rdmaDevice"] = nic.rdma_devices.front();
  // Every RDMA device of the function (a list-typed attribute, DRAListTypeAttributes).
  if (!nic.rdma_devices.empty()) {
    std::vector<AttributeValue>& list = device.list_attributes["rdmaDevices"];
    list.clear();
    for (const std::string& rdma : nic.rdma_devices) list.push_back(rdma);
  }
}

absl::Status BuildNic(const Profile& profile, const Nic& nic, int index, DeviceSet& set) {
  DraDevice device;
  device.name = profile.name + "-" + std::to_string(index);
  device.attributes["type"] = std::string("nic");
  AddPciAttributes(nic.pci, nic.vendor, nic.model, !profile.vfio, device);
  AddNicAttributes(nic, device);
  if (nic.sriov_total_vfs > 0) {
    device.attributes["sriovTotalVFs"] = static_cast<std::int64_t>(nic.sriov_total_vfs);
  }
  if (nic.speed_mbps) {
    const std::uint64_t bits = static_cast<std::uint64_t>(*nic.speed_mbps) * 1000000ull;
    Capacity bandwidth{.value = FormatDecimalQuantity(bits)};
    if (profile.sharing == SharingMode::kConsumable) {
      device.allow_multiple_allocations = true;
      bandwidth.request_policy = RequestPolicy{.default_value = profile.bandwidth_share,
                                               .min = profile.bandwidth_share,
                                               .max = bandwidth.value,
                                               .step = profile.bandwidth_share};
    }
    device.capacities["bandwidth"] = std::move(bandwidth);
  } else if (profile.sharing == SharingMode::kConsumable) {
    return FailedPrecondition("profile \"" + profile.name + "\": NIC " + nic.pci.address +
                              " reports no link speed, so its bandwidth cannot be shared");
  }
  ApplyProfileCommon(profile, device);
  DEVLET_RETURN_IF_ERROR(ExpandCdiDevices(profile, index, "", std::nullopt, device));
  set.devices.push_back(std::move(device));
  return absl::OkStatus();
}

void BuildVfs(const Profile& profile, const Nic& pf, const std::vector<Nic>& nics, int index,
              DeviceSet& set) {
  int count = std::min(profile.num_vfs, pf.sriov_total_vfs);
  // VFs someone else created are used as they are: sriov_numvfs cannot grow from a non-zero
  // count without destroying them, so VFs beyond it could never be prepared.
  if (pf.sriov_num_vfs > 0) count = std::min(count, pf.sriov_num_vfs);
  for (int j = 0; j < count; ++j) {
    DraDevice device;
    device.name = profile.name + "-" + std::to_string(index) + "-vf-" + std::to_string(j);
    device.attributes["type"] = std::string("vf");
    device.attributes["vendor"] = pf.vendor;
    device.attributes["pfPciBusID"] = pf.pci.address;
    if (!pf.interface.empty()) device.attributes["pfInterface"] = pf.interface;
    device.attributes["vfIndex"] = static_cast<std::int64_t>(j);
    if (!pf.pci.pcie_root.empty()) device.attributes[std::string(kAttrPcieRoot)] = pf.pci.pcie_root;
    if (pf.pci.numa_node) {
      device.attributes[std::string(kAttrNumaNode)] = static_cast<std::int64_t>(*pf.pci.numa_node);
    }
    device.numa_node = pf.pci.numa_node;
    const Nic* vf = nullptr;
    if (j < static_cast<int>(pf.vfs.size())) {
      for (const Nic& n : nics) {
        if (n.pci.address == pf.vfs[static_cast<size_t>(j)]) vf = &n;
      }
    }
    if (vf != nullptr) {
      AddPciAttributes(vf->pci, vf->vendor, vf->model, !profile.vfio, device);
      device.attributes["type"] = std::string("vf");
      AddNicAttributes(*vf, device);
    }
    device.preparation.sriov_pf = pf.pci.address;
    device.preparation.sriov_num_vfs = count;
    ApplyProfileCommon(profile, device);
    set.devices.push_back(std::move(device));
  }
}

void BuildCpu(const Profile& profile, const CpuTopology& cpu, const NumaNode& node, DeviceSet& set) {
  DraDevice device;
  device.name = profile.name + "-numa" + std::to_string(node.id);
  device.attributes["type"] = std::string("cpu");
  device.attributes[std::string(kAttrNumaNode)] = static_cast<std::int64_t>(node.id);
  device.attributes["package"] = static_cast<std::int64_t>(node.package);
  device.attributes["smt"] = cpu.threads_per_core > 1;
  device.attributes["cores"] = static_cast<std::int64_t>(node.cores);
  device.numa_node = node.id;
  device.allow_multiple_allocations = true;
  device.capacities["cpus"] = {
      .value = std::to_string(node.cpus.size()),
      .request_policy = RequestPolicy{.default_value = "1", .min = "1", .step = "1"}};
  if (node.memory_bytes) {
    device.capacities["memory"] = {
        .value = FormatBinaryQuantity(node.memory_bytes),
        .request_policy = RequestPolicy{.default_value = "1Gi", .min = "1Mi", .step = "1Mi"}};
  }
  // KEP-5517: what a claim consumes of this device is the node's own CPU and memory, so the
  // kubelet sizes the pod's cgroups with it and the scheduler counts it once (not again as the
  // pod's requests). One capacity unit is one CPU / one byte.
  device.node_allocatable["cpu"] = {.capacity_key = "cpus", .capacity_multiplier = "1"};
  if (node.memory_bytes) {
    device.node_allocatable["memory"] = {.capacity_key = "memory", .capacity_multiplier = "1"};
  }
  ApplyProfileCommon(profile, device);
  set.devices.push_back(std::move(device));
}

// Readable returns `status` with control bytes escaped as Go's %q writes them and the message cut
// at 2 KiB: errors quote keys and values from the YAML, and a tab in a key reached the message
// raw (fuzz/device_profile_fuzzer.cc).
absl::Status Readable(const absl::Status& status) {
  constexpr std::size_t kMax = 2048;
  const std::string_view message(status.message().data(), status.message().size());
  std::string out;
  for (const char c : message.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
      continue;
    }
    static constexpr char kNamed[] = "abtnvfr";  // \a (7) to \r (13)
    if (u >= 7 && u <= 13) {
      out += '\\';
      out += kNamed[u - 7];
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  if (message.size() > kMax) out += "...";
  return absl::Status(status.code(), out);
}

absl::StatusOr<ProfileConfig> ParseProfileConfigUnchecked(std::string_view yaml) {
  ProfileConfig config;
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (!root || root.IsNull()) return InvalidArgument("device profile configuration is empty");
    if (!root.IsMap() || !root["profiles"]) {
      return InvalidArgument("device profile configuration: expected a mapping with \"profiles\"" +
                             Where(root));
    }
    for (const auto& entry : root) {
      if (entry.first.Scalar() != "profiles") {
        return InvalidArgument("device profile configuration: unknown field " +
                               entry.first.Scalar() + Where(entry.first));
      }
    }
    const YAML::Node profiles = root["profiles"];
    if (!profiles.IsSequence()) {
      return InvalidArgument("device profile configuration: profiles must be a list" +
                             Where(profiles));
    }
    std::set<std::string> names;
    size_t index = 0;
    for (const YAML::Node& node : profiles) {
      DEVLET_ASSIGN_OR_RETURN(Profile profile, ParseProfile(node, index++));
      if (!names.insert(profile.name).second) {
        return InvalidArgument("profile \"" + profile.name + "\" is defined twice" + Where(node));
      }
      config.profiles.push_back(std::move(profile));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument("device profile configuration is not valid YAML: " + std::string(e.what()));
  }
  return config;
}

}  // namespace

absl::StatusOr<ProfileConfig> ParseProfileConfig(std::string_view yaml) {
  absl::StatusOr<ProfileConfig> config = ParseProfileConfigUnchecked(yaml);
  if (!config.ok()) return Readable(config.status());
  return config;
}

absl::StatusOr<ProfileConfig> LoadProfileConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read device profile configuration " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto config = ParseProfileConfig(buffer.str());
  if (!config.ok()) return WithContext(config.status(), path);
  return config;
}

ProfileConfig DefaultProfileConfig() {
  ProfileConfig config;
  // NVIDIA, AMD and Intel only: servers' BMC display controllers (ASPEED, Matrox) are class 0x03 too.
  config.profiles.push_back(Profile{.name = "gpu",
                                    .kind = ProfileKind::kGpu,
                                    .match = {.vendor_ids = {0x10de, 0x1002, 0x8086}}});
  config.profiles.push_back(Profile{.name = "nic", .kind = ProfileKind::kNic});
  config.profiles.push_back(
      Profile{.name = "cpu", .kind = ProfileKind::kCpu, .sharing = SharingMode::kConsumable});
  return config;
}

namespace {

// The index each (profile, PCI address) had in the previous set: "<profile>-<index>[-...]".
std::map<std::pair<std::string, std::string>, int> PreviousIndices(const DeviceSet* previous) {
  std::map<std::pair<std::string, std::string>, int> out;
  if (previous == nullptr) return out;
  for (const DraDevice& device : previous->devices) {
    // VF devices are keyed by their PF (their own address appears only once the VF exists).
    const std::string& address =
        device.preparation.sriov_pf.empty() ? device.pci_address : device.preparation.sriov_pf;
    if (address.empty() || device.profile.empty()) continue;
    const std::string prefix = device.profile + "-";
    if (device.name.rfind(prefix, 0) != 0) continue;
    size_t end = prefix.size();
    while (end < device.name.size() && std::isdigit(static_cast<unsigned char>(device.name[end]))) {
      ++end;
    }
    if (end == prefix.size() || end - prefix.size() > 6) continue;
    out.emplace(std::make_pair(device.profile, address),
                std::stoi(device.name.substr(prefix.size(), end - prefix.size())));
  }
  return out;
}

// Indices for the items a profile matched (in inventory order): an item published before keeps
// its index, so that unplugging gpu-3 does not rename gpu-4..7 under running claims; new items
// take the lowest free indices in order.
std::vector<int> AssignIndices(const std::string& profile, const std::vector<std::string>& addresses,
                               const std::map<std::pair<std::string, std::string>, int>& previous) {
  std::vector<int> indices(addresses.size(), -1);
  std::set<int> used;
  for (size_t i = 0; i < addresses.size(); ++i) {
    auto it = previous.find({profile, addresses[i]});
    if (it != previous.end() && used.insert(it->second).second) indices[i] = it->second;
  }
  int next = 0;
  for (int& index : indices) {
    if (index >= 0) continue;
    while (used.contains(next)) ++next;
    index = next;
    used.insert(next);
  }
  return indices;
}

}  // namespace

absl::StatusOr<DeviceSet> BuildDeviceSet(const Inventory& inventory, const ProfileConfig& config,
                                         const DeviceSet* previous) {
  DeviceSet set;
  std::set<std::string> claimed;  // PCI addresses and "numa:<id>" owned by an earlier profile
  const auto previous_indices = PreviousIndices(previous);
  for (const Profile& profile : config.profiles) {
    switch (profile.kind) {
      case ProfileKind::kGpu: {
        std::vector<const Gpu*> matched;
        std::vector<std::string> addresses;
        for (const Gpu& gpu : inventory.gpus) {
          if (claimed.contains(gpu.pci.address) || !MatchesPci(profile, gpu.pci, gpu.model, "")) {
            continue;
          }
          claimed.insert(gpu.pci.address);
          matched.push_back(&gpu);
          addresses.push_back(gpu.pci.address);
        }
        std::vector<int> indices = AssignIndices(profile.name, addresses, previous_indices);
        for (size_t i = 0; i < matched.size(); ++i) {
          DEVLET_RETURN_IF_ERROR(BuildGpu(profile, *matched[i], indices[i], set));
        }
        break;
      }
      case ProfileKind::kNic: {
        std::vector<const Nic*> matched;
        std::vector<std::string> addresses;
        for (const Nic& nic : inventory.nics) {
          if (nic.is_vf() || claimed.contains(nic.pci.address) ||
              !MatchesPci(profile, nic.pci, nic.model, nic.interface)) {
            continue;
          }
          claimed.insert(nic.pci.address);
          matched.push_back(&nic);
          addresses.push_back(nic.pci.address);
        }
        std::vector<int> indices = AssignIndices(profile.name, addresses, previous_indices);
        for (size_t i = 0; i < matched.size(); ++i) {
          DEVLET_RETURN_IF_ERROR(BuildNic(profile, *matched[i], indices[i], set));
        }
        break;
      }
      case ProfileKind::kVf: {
        std::vector<const Nic*> matched;
        std::vector<std::string> addresses;
        for (const Nic& nic : inventory.nics) {
          if (nic.is_vf() || nic.sriov_total_vfs == 0 || claimed.contains(nic.pci.address) ||
              !MatchesPci(profile, nic.pci, nic.model, nic.interface)) {
            continue;
          }
          claimed.insert(nic.pci.address);
          for (const std::string& vf : nic.vfs) claimed.insert(vf);
          matched.push_back(&nic);
          addresses.push_back(nic.pci.address);
        }
        std::vector<int> indices = AssignIndices(profile.name, addresses, previous_indices);
        for (size_t i = 0; i < matched.size(); ++i) {
          BuildVfs(profile, *matched[i], inventory.nics, indices[i], set);
        }
        break;
      }
      case ProfileKind::kCpu:
        for (const NumaNode& node : inventory.cpu.numa_nodes) {
          const std::string id = "numa:" + std::to_string(node.id);
          if (claimed.contains(id) || node.cpus.empty() ||
              (!profile.match.numa_nodes.empty() && !Contains(profile.match.numa_nodes, node.id))) {
            continue;
          }
          claimed.insert(id);
          BuildCpu(profile, inventory.cpu, node, set);
        }
        break;
    }
  }
  DEVLET_RETURN_IF_ERROR(ValidateDeviceSet(set));
  return set;
}

Rescanner::Rescanner(Discoverer& discoverer, ProfileConfig config)
    : discoverer_(discoverer), config_(std::move(config)) {}

absl::StatusOr<RescanResult> Rescanner::Rescan() {
  DEVLET_ASSIGN_OR_RETURN(Inventory inventory, discoverer_.Discover());
  DEVLET_ASSIGN_OR_RETURN(DeviceSet devices,
                          BuildDeviceSet(inventory, config_, first_ ? nullptr : &devices_));
  RescanResult result;
  result.inventory_diff = DiffInventories(inventory_, inventory);
  result.device_diff = DiffDeviceSets(devices_, devices);
  result.changed = first_ || !result.device_diff.empty();
  first_ = false;
  inventory_ = std::move(inventory);
  devices_ = std::move(devices);
  return result;
}

}  // namespace devlet::devices
