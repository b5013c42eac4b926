#include "devlet/cdi/spec.h"

#include <array>
#include <set>
#include <string>
#include <string_view>

#include "devlet/cdi/names.h"
#include "devlet/common/status.h"

namespace devlet::cdi {
namespace {

// Known versions, newest first (the reference library's order).
constexpr std::array<std::string_view, 10> kVersions = {
    "1.1.0", "1.0.0", "0.8.0", "0.7.0", "0.6.0", "0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.1.0"};

std::string_view StripV(std::string_view version) {
  if (!version.empty() && version.front() == 'v') {
    version.remove_prefix(1);
  }
  return version;
}

// Rank: higher is newer; -1 for unknown.
int Rank(std::string_view version) {
  version = StripV(version);
  for (size_t i = 0; i < kVersions.size(); ++i) {
    if (kVersions[i] == version) {
      return static_cast<int>(kVersions.size() - i);
    }
  }
  return -1;
}

std::string Quote(std::string_view s) { return std::string(1, '"').append(s).append(1, '"'); }

template <typename Pred>
bool AnyEdits(const Spec& spec, Pred pred) {
  if (pred(spec.container_edits)) {
    return true;
  }
  for (const Device& device : spec.devices) {
    if (pred(device.container_edits)) {
      return true;
    }
  }
  return false;
}

bool RequiresV110(const Spec& spec) {
  return AnyEdits(spec, [](const ContainerEdits& e) {
    return (e.intel_rdt.has_value() &&
            (e.intel_rdt->schemata.has_value() || e.intel_rdt->enable_monitoring)) ||
           !e.net_devices.empty();
  });
}

bool RequiresV070(const Spec& spec) {
  return AnyEdits(spec, [](const ContainerEdits& e) {
    return e.intel_rdt.has_value() || !e.additional_gids.empty();
  });
}

bool RequiresV060(const Spec& spec) {
  if (!spec.annotations.empty()) {
    return true;
  }
  for (const Device& device : spec.devices) {
    if (!device.annotations.empty()) {
      return true;
    }
  }
  const size_t slash = spec.kind.find('/');
  return slash != std::string::npos && spec.kind.find('.', slash + 1) != std::string::npos;
}

// With `quirk`, AnyEditsQuirk looks at the spec-level edits and the LAST device's edits only,
// as the reference library does: specs-go (a go 1.19 module) collects `&d.ContainerEdits` of
// the range variable, which is one variable for the whole loop before Go 1.22.
template <typename Pred>
bool AnyEditsQuirk(const Spec& spec, bool quirk, Pred pred) {
  if (!quirk) return AnyEdits(spec, pred);
  if (pred(spec.container_edits)) return true;
  return !spec.devices.empty() && pred(spec.devices.back().container_edits);
}

bool RequiresV050(const Spec& spec, bool quirk) {
  for (const Device& device : spec.devices) {
    if (!device.name.empty() && device.name.front() >= '0' && device.name.front() <= '9') {
      return true;
    }
  }
  return AnyEditsQuirk(spec, quirk, [](const ContainerEdits& e) {
    for (const DeviceNode& node : e.device_nodes) {
      if (!node.host_path.empty()) {
        return true;
      }
    }
    return false;
  });
}

bool RequiresV040(const Spec& spec, bool quirk) {
  return AnyEditsQuirk(spec, quirk, [](const ContainerEdits& e) {
    for (const Mount& mount : e.mounts) {
      if (!mount.type.empty()) {
        return true;
      }
    }
    return false;
  });
}

absl::Status ValidateEnv(const std::vector<std::string>& env, std::string_view field) {
  for (size_t i = 0; i < env.size(); ++i) {
    const size_t eq = env[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument(std::string(field) + "[" + std::to_string(i) + "]: invalid " +
                             "environment variable " + Quote(env[i]) + " (want KEY=VALUE)");
    }
  }
  return absl::OkStatus();
}

bool IsValidHookName(std::string_view name) {
  return name == "prestart" || name == "createRuntime" || name == "createContainer" ||
         name == "startContainer" || name == "poststart" || name == "poststop";
}

}  // namespace

bool ContainerEdits::IsEmpty() const {
  return env.empty() && device_nodes.empty() && hooks.empty() && mounts.empty() &&
         additional_gids.empty() && !intel_rdt.has_value() && net_devices.empty();
}

void ContainerEdits::Append(const ContainerEdits& other) {
  env.insert(env.end(), other.env.begin(), other.env.end());
  device_nodes.insert(device_nodes.end(), other.device_nodes.begin(), other.device_nodes.end());
  net_devices.insert(net_devices.end(), other.net_devices.begin(), other.net_devices.end());
  hooks.insert(hooks.end(), other.hooks.begin(), other.hooks.end());
  mounts.insert(mounts.end(), other.mounts.begin(), other.mounts.end());
  if (other.intel_rdt.has_value()) {
    intel_rdt = other.intel_rdt;
  }
  additional_gids.insert(additional_gids.end(), other.additional_gids.begin(),
                         other.additional_gids.end());
}

std::string Spec::Vendor() const {
  const size_t slash = kind.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == kind.size()) {
    return "";
  }
  return kind.substr(0, slash);
}

std::string Spec::Class() const {
  const size_t slash = kind.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == kind.size()) {
    return kind;
  }
  return kind.substr(slash + 1);
}

bool IsKnownVersion(std::string_view version) { return Rank(version) > 0; }

int CompareVersions(std::string_view a, std::string_view b) { return Rank(a) - Rank(b); }

namespace {

std::string MinimumVersion(const Spec& spec, bool quirk) {
  if (RequiresV110(spec)) return "1.1.0";
  if (RequiresV070(spec)) return "0.7.0";
  if (RequiresV060(spec)) return "0.6.0";
  if (RequiresV050(spec, quirk)) return "0.5.0";
  if (RequiresV040(spec, quirk)) return "0.4.0";
  return "0.3.0";
}

}  // namespace

std::string MinimumRequiredVersion(const Spec& spec) { return MinimumVersion(spec, false); }

std::string ReferenceMinimumRequiredVersion(const Spec& spec) {
  return MinimumVersion(spec, true);
}

absl::Status ValidateEdits(const ContainerEdits& edits) {
  DEVLET_RETURN_IF_ERROR(ValidateEnv(edits.env, "env"));
  for (size_t i = 0; i < edits.device_nodes.size(); ++i) {
    const DeviceNode& node = edits.device_nodes[i];
    const std::string field = "deviceNodes[" + std::to_string(i) + "]";
    if (node.path.empty()) {
      return InvalidArgument(field + ".path: empty device path");
    }
    const std::string where = field + " (" + Quote(node.path) + ")";
    if (!node.type.empty() && node.type != "b" && node.type != "c" && node.type != "u" &&
        node.type != "p") {
      return InvalidArgument(where + ": invalid type " + Quote(node.type) +
                             " (want b, c, u or p)");
    }
    if (node.major < 0 || node.minor < 0) {
      return InvalidArgument(where + ": negative device number " + std::to_string(node.major) +
                             ":" + std::to_string(node.minor));
    }
    if (!node.permissions.empty() && node.permissions != kNoPermissions &&
        node.permissions.find_first_not_of("rwm") != std::string::npos) {
      return InvalidArgument(where + ": invalid permissions " + Quote(node.permissions) +
                             " (want letters of \"rwm\" or \"none\")");
    }
  }
  for (size_t i = 0; i < edits.hooks.size(); ++i) {
    const Hook& hook = edits.hooks[i];
    const std::string field = "hooks[" + std::to_string(i) + "]";
    if (!IsValidHookName(hook.hook_name)) {
      return InvalidArgument(field + ".hookName: invalid hook name " + Quote(hook.hook_name) +
                             " (want prestart, createRuntime, createContainer, startContainer, "
                             "poststart or poststop)");
    }
    if (hook.path.empty()) {
      return InvalidArgument(field + ".path: empty path for hook " + Quote(hook.hook_name));
    }
    DEVLET_RETURN_IF_ERROR(ValidateEnv(hook.env, field + ".env"));
  }
  for (size_t i = 0; i < edits.mounts.size(); ++i) {
    const std::string field = "mounts[" + std::to_string(i) + "]";
    if (edits.mounts[i].host_path.empty()) {
      return InvalidArgument(field + ".hostPath: empty host path");
    }
    if (edits.mounts[i].container_path.empty()) {
      return InvalidArgument(field + ".containerPath: empty container path");
    }
  }
  if (edits.intel_rdt.has_value()) {
    const std::string& clos = edits.intel_rdt->clos_id;
    if (clos != "/" && (clos.size() >= 4096 || clos == "." || clos == ".." ||
                        clos.find_first_of("/\n") != std::string::npos)) {
      return InvalidArgument("intelRdt.closID: invalid " + Quote(clos) +
                             " (must be a file name, or \"/\")");
    }
  }
  std::set<std::string> hosts;
  std::set<std::string> names;
  for (size_t i = 0; i < edits.net_devices.size(); ++i) {
    const NetDevice& dev = edits.net_devices[i];
    const std::string field = "netDevices[" + std::to_string(i) + "]";
    if (dev.host_interface_name.empty()) {
      return InvalidArgument(field + ".hostInterfaceName: empty");
    }
    if (dev.name.empty()) {
      return InvalidArgument(field + ".name: empty");
    }
    if (!hosts.insert(dev.host_interface_name).second) {
      return InvalidArgument(field + ": duplicate hostInterfaceName " +
                             Quote(dev.host_interface_name));
    }
    if (!names.insert(dev.name).second) {
      return InvalidArgument(field + ": duplicate name " + Quote(dev.name));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSpec(const Spec& spec) {
  if (!IsKnownVersion(spec.version)) {
    return InvalidArgument("cdiVersion: invalid version " + Quote(spec.version) +
                           " (known: 0.1.0 ... 0.8.0, 1.0.0, 1.1.0)");
  }
  const std::string minimum = ReferenceMinimumRequiredVersion(spec);
  if (CompareVersions(spec.version, minimum) < 0) {
    return InvalidArgument("cdiVersion: the spec uses features of v" + minimum +
                           ", so its version must be at least v" + minimum + " (it is " +
                           Quote(spec.version) + ")");
  }
  DEVLET_RETURN_IF_ERROR(WithContext(ValidateVendorName(spec.Vendor()), "kind"));
  DEVLET_RETURN_IF_ERROR(WithContext(ValidateClassName(spec.Class()), "kind"));
  DEVLET_RETURN_IF_ERROR(WithContext(ValidateEdits(spec.container_edits), "containerEdits"));
  std::set<std::string> seen;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const Device& device = spec.devices[i];
    const std::string field = "devices[" + std::to_string(i) + "]";
    DEVLET_RETURN_IF_ERROR(WithContext(ValidateDeviceName(device.name), field + ".name"));
    const std::string where = field + " (" + Quote(device.name) + ")";
    if (device.container_edits.IsEmpty()) {
      return InvalidArgument(where + ".containerEdits: empty device edits");
    }
    DEVLET_RETURN_IF_ERROR(
        WithContext(ValidateEdits(device.container_edits), where + ".containerEdits"));
    if (!seen.insert(device.name).second) {
      return InvalidArgument(where + ": device defined more than once");
    }
  }
  if (spec.devices.empty()) {
    return InvalidArgument("devices: a spec needs at least one device");
  }
  return absl::OkStatus();
}

}  // namespace devlet::cdi
