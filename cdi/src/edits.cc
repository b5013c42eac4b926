#include "devlet/cdi/edits.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "devlet/common/status.h"

namespace devlet::cdi {
namespace {

using nlohmann::json;

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// CleanPath is Go's path/filepath.Clean for '/'-separated paths.
std::string CleanPath(std::string_view path) {
  if (path.empty()) return ".";
  const bool rooted = path.front() == '/';
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part.empty() || part == ".") {
      // skip
    } else if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!rooted) {
        parts.emplace_back("..");
      }
    } else {
      parts.emplace_back(part);
    }
    i = j + 1;
  }
  std::string out = rooted ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) out += "/";
    out += parts[k];
  }
  if (out.empty()) return ".";
  return out;
}

size_t Depth(std::string_view destination) {
  const std::string clean = CleanPath(destination);
  return static_cast<size_t>(std::count(clean.begin(), clean.end(), '/'));
}

// FillMissingInfo completes a device node from the host, as the reference library does.
absl::Status FillMissingInfo(DeviceNode& node, const DeviceStat& stat) {
  const bool minimal = !node.type.empty() && (node.major != 0 || node.type == "p");
  if (node.host_path.empty()) node.host_path = node.path;
  absl::StatusOr<HostDeviceInfo> info = stat(node.host_path);
  if (!info.ok()) {
    if (!minimal) {
      return FailedPrecondition("CDI device node " + Quote(node.path) + ": cannot stat host device " +
                                Quote(node.host_path) + ": " + Message(info.status()));
    }
    return absl::OkStatus();
  }
  if (!node.file_mode.has_value()) node.file_mode = info->mode;
  if (minimal) return absl::OkStatus();
  if (node.type.empty()) node.type = info->type;
  if (node.type != info->type) {
    return FailedPrecondition("CDI device node " + Quote(node.path) + ": type " +
                              Quote(node.type) + " does not match host device " +
                              Quote(node.host_path) + " of type " + Quote(info->type));
  }
  if (node.type == "p") return absl::OkStatus();
  if (node.major == 0) {
    node.major = info->major;
    node.minor = info->minor;
  }
  return absl::OkStatus();
}

OciHook ToOci(const Hook& hook) {
  return OciHook{.path = hook.path, .args = hook.args, .env = hook.env, .timeout = hook.timeout};
}

void AddIdMap(OciMount& mount) {
  std::string option = mount.type == "bind" ? "idmap" : "";
  for (const std::string& o : mount.options) {
    if (o == "idmap" || o == "ridmap") return;
    if (o == "bind") option = "idmap";
    if (o == "rbind") option = "ridmap";
  }
  if (!option.empty()) mount.options.push_back(option);
}

// ---- OCI JSON helpers ------------------------------------------------------------------------

json& Object(json& parent, const char* key) {
  json& child = parent[key];
  if (!child.is_object()) child = json::object();
  return child;
}

json& Array(json& parent, const char* key) {
  json& child = parent[key];
  if (!child.is_array()) child = json::array();
  return child;
}

json DeviceJson(const LinuxDevice& d) {
  json out = {{"path", d.path}, {"type", d.type}, {"major", d.major}, {"minor", d.minor}};
  if (d.file_mode.has_value()) out["fileMode"] = *d.file_mode;
  if (d.uid.has_value()) out["uid"] = *d.uid;
  if (d.gid.has_value()) out["gid"] = *d.gid;
  return out;
}

json HookJson(const OciHook& h) {
  json out = {{"path", h.path}};
  if (!h.args.empty()) out["args"] = h.args;
  if (!h.env.empty()) out["env"] = h.env;
  if (h.timeout.has_value()) out["timeout"] = *h.timeout;
  return out;
}

json MountJson(const OciMount& m) {
  json out = {{"destination", m.destination}};
  if (!m.type.empty()) out["type"] = m.type;
  if (!m.source.empty()) out["source"] = m.source;
  if (!m.options.empty()) out["options"] = m.options;
  return out;
}

std::string EnvKey(const std::string& entry) { return entry.substr(0, entry.find('=')); }

absl::StatusOr<json> ParseOci(std::string_view oci_spec_json) {
  try {
    json spec = json::parse(oci_spec_json.begin(), oci_spec_json.end());
    if (!spec.is_object()) return InvalidArgument("OCI spec: want a JSON object");
    return spec;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("OCI spec: not valid JSON: ") + e.what());
  }
}

}  // namespace

bool OciHooks::empty() const {
  return prestart.empty() && create_runtime.empty() && create_container.empty() &&
         start_container.empty() && poststart.empty() && poststop.empty();
}

DeviceStat HostDeviceStat() {
  return [](const std::string& host_path) -> absl::StatusOr<HostDeviceInfo> {
    struct stat st {};
    if (::lstat(host_path.c_str(), &st) != 0) {
      return ErrnoToStatus(errno, "lstat " + Quote(host_path));
    }
    HostDeviceInfo info;
    switch (st.st_mode & S_IFMT) {
      case S_IFBLK: info.type = "b"; break;
      case S_IFCHR: info.type = "c"; break;
      case S_IFIFO: info.type = "p"; break;
      default:
        return FailedPrecondition(Quote(host_path) + " is not a device node");
    }
    info.major = static_cast<std::int64_t>(major(st.st_rdev));
    info.minor = static_cast<std::int64_t>(minor(st.st_rdev));
    info.mode = static_cast<std::uint32_t>(st.st_mode & ~S_IFMT);
    return info;
  };
}

absl::StatusOr<ContainerAdjustment> PlanEdits(const ContainerEdits& edits,
                                              const EditContext& context) {
  DEVLET_RETURN_IF_ERROR(WithContext(ValidateEdits(edits), "invalid CDI container edits"));
  const DeviceStat stat = context.stat ? context.stat : HostDeviceStat();
  ContainerAdjustment out;
  out.env = edits.env;
  for (const DeviceNode& original : edits.device_nodes) {
    DeviceNode node = original;
    DEVLET_RETURN_IF_ERROR(FillMissingInfo(node, stat));
    LinuxDevice dev{.path = node.path,
                    .type = node.type,
                    .major = node.major,
                    .minor = node.minor,
                    .file_mode = node.file_mode,
                    .uid = node.uid,
                    .gid = node.gid};
    if (!dev.uid.has_value() && context.process_uid > 0) dev.uid = context.process_uid;
    if (!dev.gid.has_value() && context.process_gid > 0) dev.gid = context.process_gid;
    if (dev.type == "b" || dev.type == "c") {
      std::string access = original.permissions;
      if (access.empty()) {
        access = "rwm";
      } else if (access == kNoPermissions) {
        access.clear();
      }
      out.device_cgroup_rules.push_back({.allow = true,
                                         .type = dev.type,
                                         .major = dev.major,
                                         .minor = dev.minor,
                                         .access = access});
    }
    out.devices.push_back(std::move(dev));
  }
  out.net_devices = edits.net_devices;
  for (const Mount& m : edits.mounts) {
    OciMount mount{.destination = m.container_path,
                   .type = m.type,
                   .source = m.host_path,
                   .options = m.options};
    if (context.idmapped_user_namespace) AddIdMap(mount);
    out.mounts.push_back(std::move(mount));
  }
  for (const Hook& hook : edits.hooks) {
    const std::string& n = hook.hook_name;
    if (n == "prestart") out.hooks.prestart.push_back(ToOci(hook));
    else if (n == "createRuntime") out.hooks.create_runtime.push_back(ToOci(hook));
    else if (n == "createContainer") out.hooks.create_container.push_back(ToOci(hook));
    else if (n == "startContainer") out.hooks.start_container.push_back(ToOci(hook));
    else if (n == "poststart") out.hooks.poststart.push_back(ToOci(hook));
    else if (n == "poststop") out.hooks.poststop.push_back(ToOci(hook));
    else return InvalidArgument("unknown hook name " + Quote(n));
  }
  out.intel_rdt = edits.intel_rdt;
  for (std::uint32_t gid : edits.additional_gids) {
    if (gid != 0) out.additional_gids.push_back(gid);
  }
  return out;
}

absl::StatusOr<EditContext> ContextFromOciSpec(std::string_view oci_spec_json) {
  DEVLET_ASSIGN_OR_RETURN(json spec, ParseOci(oci_spec_json));
  EditContext context;
  try {
    if (auto p = spec.find("process"); p != spec.end() && p->is_object()) {
      if (auto u = p->find("user"); u != p->end() && u->is_object()) {
        context.process_uid = u->value("uid", std::uint32_t{0});
        context.process_gid = u->value("gid", std::uint32_t{0});
      }
    }
    if (auto l = spec.find("linux"); l != spec.end() && l->is_object()) {
      auto non_empty = [&](const char* key) {
        auto it = l->find(key);
        return it != l->end() && it->is_array() && !it->empty();
      };
      bool user_ns = false;
      if (auto ns = l->find("namespaces"); ns != l->end() && ns->is_array()) {
        for (const json& n : *ns) {
          user_ns = user_ns || (n.is_object() && n.value("type", "") == "user");
        }
      }
      context.idmapped_user_namespace =
          user_ns && non_empty("uidMappings") && non_empty("gidMappings");
    }
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("OCI spec: ") + e.what());
  }
  return context;
}

absl::StatusOr<std::string> ApplyToOciSpec(std::string_view oci_spec_json,
                                           const ContainerAdjustment& adjustment) {
  DEVLET_ASSIGN_OR_RETURN(json spec, ParseOci(oci_spec_json));
  try {
    if (!adjustment.env.empty()) {
      json& env = Array(Object(spec, "process"), "env");
      std::map<std::string, size_t> index;
      for (size_t i = 0; i < env.size(); ++i) {
        if (env[i].is_string()) index[EnvKey(env[i].get<std::string>())] = i;
      }
      for (const std::string& entry : adjustment.env) {
        const std::string key = EnvKey(entry);
        if (auto it = index.find(key); it != index.end()) {
          env[it->second] = entry;
        } else {
          env.push_back(entry);
          index[key] = env.size() - 1;
        }
      }
    }
    if (!adjustment.devices.empty()) {
      json& linux_ = Object(spec, "linux");
      for (const LinuxDevice& dev : adjustment.devices) {
        json& devices = Array(linux_, "devices");
        for (auto it = devices.begin(); it != devices.end(); ++it) {
          if (it->is_object() && it->value("path", "") == dev.path) {
            devices.erase(it);
            break;
          }
        }
        bool replaced = false;
        for (json& existing : devices) {
          if (existing.is_object() && existing.value("path", "") == dev.path) {
            existing = DeviceJson(dev);
            replaced = true;
            break;
          }
        }
        if (!replaced) devices.push_back(DeviceJson(dev));
      }
    }
    if (!adjustment.device_cgroup_rules.empty()) {
      json& rules = Array(Object(Object(spec, "linux"), "resources"), "devices");
      for (const DeviceCgroupRule& rule : adjustment.device_cgroup_rules) {
        json r = {{"allow", rule.allow}};
        if (!rule.type.empty()) r["type"] = rule.type;
        r["major"] = rule.major;
        r["minor"] = rule.minor;
        if (!rule.access.empty()) r["access"] = rule.access;
        rules.push_back(std::move(r));
      }
    }
    if (!adjustment.net_devices.empty()) {
      json& net = Object(Object(spec, "linux"), "netDevices");
      for (const NetDevice& dev : adjustment.net_devices) {
        json d = json::object();
        if (!dev.name.empty()) d["name"] = dev.name;
        net[dev.host_interface_name] = std::move(d);
      }
    }
    if (!adjustment.mounts.empty()) {
      json& mounts = Array(spec, "mounts");
      for (const OciMount& mount : adjustment.mounts) {
        for (auto it = mounts.begin(); it != mounts.end(); ++it) {
          if (it->is_object() && it->value("destination", "") == mount.destination) {
            mounts.erase(it);
            break;
          }
        }
        mounts.push_back(MountJson(mount));
      }
      std::vector<json> sorted(mounts.begin(), mounts.end());
      std::stable_sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) {
        return Depth(a.is_object() ? a.value("destination", "") : "") <
               Depth(b.is_object() ? b.value("destination", "") : "");
      });
      mounts = json(sorted);
    }
    if (!adjustment.hooks.empty()) {
      json& hooks = Object(spec, "hooks");
      auto add = [&](const char* stage, const std::vector<OciHook>& list) {
        if (list.empty()) return;
        json& target = Array(hooks, stage);
        for (const OciHook& hook : list) target.push_back(HookJson(hook));
      };
      add("prestart", adjustment.hooks.prestart);
      add("createRuntime", adjustment.hooks.create_runtime);
      add("createContainer", adjustment.hooks.create_container);
      add("startContainer", adjustment.hooks.start_container);
      add("poststart", adjustment.hooks.poststart);
      add("poststop", adjustment.hooks.poststop);
    }
    if (adjustment.intel_rdt.has_value()) {
      const IntelRdt& r = *adjustment.intel_rdt;
      json rdt = json::object();
      if (!r.clos_id.empty()) rdt["closID"] = r.clos_id;
      if (r.schemata.has_value() && !r.schemata->empty()) rdt["schemata"] = *r.schemata;
      if (!r.l3_cache_schema.empty()) rdt["l3CacheSchema"] = r.l3_cache_schema;
      if (!r.mem_bw_schema.empty()) rdt["memBwSchema"] = r.mem_bw_schema;
      if (r.enable_monitoring) rdt["enableMonitoring"] = true;
      Object(spec, "linux")["intelRdt"] = std::move(rdt);
    }
    if (!adjustment.additional_gids.empty()) {
      json& gids = Array(Object(Object(spec, "process"), "user"), "additionalGids");
      for (std::uint32_t gid : adjustment.additional_gids) {
        bool present = false;
        for (const json& g : gids) present = present || (g.is_number() && g == gid);
        if (!present) gids.push_back(gid);
      }
    }
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("OCI spec: ") + e.what());
  }
  return spec.dump(-1, ' ', false, json::error_handler_t::replace);  // never throws
}

absl::StatusOr<std::string> InjectEdits(std::string_view oci_spec_json,
                                        const ContainerEdits& edits, DeviceStat stat) {
  DEVLET_ASSIGN_OR_RETURN(EditContext context, ContextFromOciSpec(oci_spec_json));
  context.stat = std::move(stat);
  DEVLET_ASSIGN_OR_RETURN(ContainerAdjustment adjustment, PlanEdits(edits, context));
  return ApplyToOciSpec(oci_spec_json, adjustment);
}

}  // namespace devlet::cdi
