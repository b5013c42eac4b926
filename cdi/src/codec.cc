#include "devlet/cdi/codec.h"

#include <charconv>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "devlet/cdi/edits_json.h"
#include "devlet/common/status.h"

namespace devlet::cdi {
namespace {

using nlohmann::json;

// ---- Encoding -------------------------------------------------------------------------------

json EncodeEdits(const ContainerEdits& e) {
  json out = json::object();
  if (!e.env.empty()) out["env"] = e.env;
  if (!e.device_nodes.empty()) {
    json nodes = json::array();
    for (const DeviceNode& n : e.device_nodes) {
      json node = {{"path", n.path}};
      if (!n.host_path.empty()) node["hostPath"] = n.host_path;
      if (!n.type.empty()) node["type"] = n.type;
      if (n.major != 0) node["major"] = n.major;
      if (n.minor != 0) node["minor"] = n.minor;
      if (n.file_mode.has_value()) node["fileMode"] = *n.file_mode;
      if (!n.permissions.empty()) node["permissions"] = n.permissions;
      if (n.uid.has_value()) node["uid"] = *n.uid;
      if (n.gid.has_value()) node["gid"] = *n.gid;
      nodes.push_back(std::move(node));
    }
    out["deviceNodes"] = std::move(nodes);
  }
  if (!e.net_devices.empty()) {
    json devs = json::array();
    for (const NetDevice& d : e.net_devices) {
      devs.push_back({{"hostInterfaceName", d.host_interface_name}, {"name", d.name}});
    }
    out["netDevices"] = std::move(devs);
  }
  if (!e.hooks.empty()) {
    json hooks = json::array();
    for (const Hook& h : e.hooks) {
      json hook = {{"hookName", h.hook_name}, {"path", h.path}};
      if (!h.args.empty()) hook["args"] = h.args;
      if (!h.env.empty()) hook["env"] = h.env;
      if (h.timeout.has_value()) hook["timeout"] = *h.timeout;
      hooks.push_back(std::move(hook));
    }
    out["hooks"] = std::move(hooks);
  }
  if (!e.mounts.empty()) {
    json mounts = json::array();
    for (const Mount& m : e.mounts) {
      json mount = {{"hostPath", m.host_path}, {"containerPath", m.container_path}};
      if (!m.options.empty()) mount["options"] = m.options;
      if (!m.type.empty()) mount["type"] = m.type;
      mounts.push_back(std::move(mount));
    }
    out["mounts"] = std::move(mounts);
  }
  if (e.intel_rdt.has_value()) {
    const IntelRdt& r = *e.intel_rdt;
    json rdt = json::object();
    if (!r.clos_id.empty()) rdt["closID"] = r.clos_id;
    if (!r.l3_cache_schema.empty()) rdt["l3CacheSchema"] = r.l3_cache_schema;
    if (!r.mem_bw_schema.empty()) rdt["memBwSchema"] = r.mem_bw_schema;
    // Go's omitempty drops an empty list, so an empty `schemata` is written as absent.
    if (r.schemata.has_value() && !r.schemata->empty()) rdt["schemata"] = *r.schemata;
    if (r.enable_monitoring) rdt["enableMonitoring"] = true;
    out["intelRdt"] = std::move(rdt);
  }
  if (!e.additional_gids.empty()) out["additionalGids"] = e.additional_gids;
  return out;
}

// ---- Decoding -------------------------------------------------------------------------------

class Decoder {
 public:
  explicit Decoder(bool from_yaml) : yaml_(from_yaml) {}

  absl::Status Object(const json& j, std::string_view path,
                      std::initializer_list<std::string_view> known) const {
    if (!j.is_object()) {
      return Error(path, "want an object");
    }
    for (const auto& [key, value] : j.items()) {
      bool ok = false;
      for (std::string_view k : known) {
        ok = ok || k == key;
      }
      if (!ok) {
        return Error(Join(path, key), "unknown field");
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(const json& j, std::string_view path) const {
    if (j.is_null()) return std::string();
    if (j.is_string()) return j.get<std::string>();
    return Error(path, "want a string");
  }

  template <typename T>
  absl::StatusOr<T> Integer(const json& j, std::string_view path) const {
    if (j.is_number_integer()) {
      if (j.is_number_unsigned()) {
        const auto v = j.get<std::uint64_t>();
        if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
          return Error(path, "number out of range");
        }
        return static_cast<T>(v);
      }
      const auto v = j.get<std::int64_t>();
      if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          (v > 0 && static_cast<std::uint64_t>(v) >
                        static_cast<std::uint64_t>(std::numeric_limits<T>::max()))) {
        return Error(path, "number out of range");
      }
      return static_cast<T>(v);
    }
    if (yaml_ && j.is_string()) {
      const std::string text = j.get<std::string>();
      T value{};
      int base = 10;
      std::string_view digits = text;
      bool negative = false;
      if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
        negative = digits.front() == '-';
        digits.remove_prefix(1);
      }
      if (digits.starts_with("0x")) {
        base = 16;
        digits.remove_prefix(2);
      } else if (digits.starts_with("0o")) {
        base = 8;
        digits.remove_prefix(2);
      }
      std::string normalized = std::string(negative ? "-" : "").append(digits);
      const auto [ptr, ec] =
          std::from_chars(normalized.data(), normalized.data() + normalized.size(), value, base);
      if (ec == std::errc::result_out_of_range) {
        return Error(path, "number out of range");
      }
      if (ec != std::errc() || ptr != normalized.data() + normalized.size() || digits.empty()) {
        return Error(path, "want an integer, got \"" + text + "\"");
      }
      return value;
    }
    if (j.is_number_float()) {
      return Error(path, "want an integer");
    }
    return Error(path, "want a number");
  }

  absl::StatusOr<bool> Bool(const json& j, std::string_view path) const {
    if (j.is_null()) return false;
    if (j.is_boolean()) return j.get<bool>();
    if (yaml_ && j.is_string()) {
      const std::string text = j.get<std::string>();
      if (text == "true" || text == "True" || text == "TRUE") return true;
      if (text == "false" || text == "False" || text == "FALSE") return false;
    }
    return Error(path, "want true or false");
  }

  absl::StatusOr<std::vector<std::string>> Strings(const json& j, std::string_view path) const {
    std::vector<std::string> out;
    if (j.is_null()) return out;
    if (!j.is_array()) return Error(path, "want a list of strings");
    for (size_t i = 0; i < j.size(); ++i) {
      DEVLET_ASSIGN_OR_RETURN(std::string s, String(j[i], Index(path, i)));
      out.push_back(std::move(s));
    }
    return out;
  }

  absl::StatusOr<std::map<std::string, std::string>> StringMap(const json& j,
                                                               std::string_view path) const {
    std::map<std::string, std::string> out;
    if (j.is_null()) return out;
    if (!j.is_object()) return Error(path, "want a map of strings");
    for (const auto& [key, value] : j.items()) {
      DEVLET_ASSIGN_OR_RETURN(out[key], String(value, Join(path, key)));
    }
    return out;
  }

  absl::Status Array(const json& j, std::string_view path) const {
    if (!j.is_array() && !j.is_null()) return Error(path, "want a list");
    return absl::OkStatus();
  }

  static std::string Join(std::string_view path, std::string_view key) {
    return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
  }
  static std::string Index(std::string_view path, size_t i) {
    return std::string(path) + "[" + std::to_string(i) + "]";
  }
  static absl::Status Error(std::string_view path, std::string_view what) {
    return InvalidArgument(std::string(path.empty() ? "spec" : path) + ": " + std::string(what));
  }

 private:
  bool yaml_;
};

// DecodeList decodes each element of the list `j` (absent or null: none) with `decode`, naming
// the element's index in errors.
template <typename T, typename Decode>
absl::Status DecodeList(const Decoder& d, const json& j, const std::string& path, Decode decode,
                        std::vector<T>* out) {
  DEVLET_RETURN_IF_ERROR(d.Array(j, path));
  if (!j.is_array()) return absl::OkStatus();
  for (size_t i = 0; i < j.size(); ++i) {
    DEVLET_ASSIGN_OR_RETURN(T value, decode(d, j[i], Decoder::Index(path, i)));
    out->push_back(std::move(value));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceNode> DecodeDeviceNode(const Decoder& d, const json& n,
                                            const std::string& p) {
  DEVLET_RETURN_IF_ERROR(d.Object(n, p,
                                  {"path", "hostPath", "type", "major", "minor", "fileMode",
                                   "permissions", "uid", "gid"}));
  DeviceNode node;
  for (const auto& [key, value] : n.items()) {
    const std::string fp = Decoder::Join(p, key);
    if (key == "path") {
      DEVLET_ASSIGN_OR_RETURN(node.path, d.String(value, fp));
    } else if (key == "hostPath") {
      DEVLET_ASSIGN_OR_RETURN(node.host_path, d.String(value, fp));
    } else if (key == "type") {
      DEVLET_ASSIGN_OR_RETURN(node.type, d.String(value, fp));
    } else if (key == "permissions") {
      DEVLET_ASSIGN_OR_RETURN(node.permissions, d.String(value, fp));
    } else if (value.is_null()) {
      continue;
    } else if (key == "major") {
      DEVLET_ASSIGN_OR_RETURN(node.major, d.Integer<std::int64_t>(value, fp));
    } else if (key == "minor") {
      DEVLET_ASSIGN_OR_RETURN(node.minor, d.Integer<std::int64_t>(value, fp));
    } else if (key == "fileMode") {
      DEVLET_ASSIGN_OR_RETURN(node.file_mode, d.Integer<std::uint32_t>(value, fp));
    } else if (key == "uid") {
      DEVLET_ASSIGN_OR_RETURN(node.uid, d.Integer<std::uint32_t>(value, fp));
    } else if (key == "gid") {
      DEVLET_ASSIGN_OR_RETURN(node.gid, d.Integer<std::uint32_t>(value, fp));
    }
  }
  return node;
}

absl::StatusOr<NetDevice> DecodeNetDevice(const Decoder& d, const json& n, const std::string& p) {
  DEVLET_RETURN_IF_ERROR(d.Object(n, p, {"hostInterfaceName", "name"}));
  NetDevice dev;
  if (n.contains("hostInterfaceName")) {
    DEVLET_ASSIGN_OR_RETURN(dev.host_interface_name,
                            d.String(n["hostInterfaceName"], p + ".hostInterfaceName"));
  }
  if (n.contains("name")) {
    DEVLET_ASSIGN_OR_RETURN(dev.name, d.String(n["name"], p + ".name"));
  }
  return dev;
}

absl::StatusOr<Hook> DecodeHook(const Decoder& d, const json& h, const std::string& p) {
  DEVLET_RETURN_IF_ERROR(d.Object(h, p, {"hookName", "path", "args", "env", "timeout"}));
  Hook hook;
  for (const auto& [key, value] : h.items()) {
    const std::string fp = Decoder::Join(p, key);
    if (key == "hookName") {
      DEVLET_ASSIGN_OR_RETURN(hook.hook_name, d.String(value, fp));
    } else if (key == "path") {
      DEVLET_ASSIGN_OR_RETURN(hook.path, d.String(value, fp));
    } else if (key == "args") {
      DEVLET_ASSIGN_OR_RETURN(hook.args, d.Strings(value, fp));
    } else if (key == "env") {
      DEVLET_ASSIGN_OR_RETURN(hook.env, d.Strings(value, fp));
    } else if (key == "timeout" && !value.is_null()) {
      DEVLET_ASSIGN_OR_RETURN(hook.timeout, d.Integer<int>(value, fp));
    }
  }
  return hook;
}

absl::StatusOr<Mount> DecodeMount(const Decoder& d, const json& m, const std::string& p) {
  DEVLET_RETURN_IF_ERROR(d.Object(m, p, {"hostPath", "containerPath", "options", "type"}));
  Mount mount;
  for (const auto& [key, value] : m.items()) {
    const std::string fp = Decoder::Join(p, key);
    if (key == "hostPath") {
      DEVLET_ASSIGN_OR_RETURN(mount.host_path, d.String(value, fp));
    } else if (key == "containerPath") {
      DEVLET_ASSIGN_OR_RETURN(mount.container_path, d.String(value, fp));
    } else if (key == "options") {
      DEVLET_ASSIGN_OR_RETURN(mount.options, d.Strings(value, fp));
    } else if (key == "type") {
      DEVLET_ASSIGN_OR_RETURN(mount.type, d.String(value, fp));
    }
  }
  return mount;
}

absl::StatusOr<IntelRdt> DecodeIntelRdt(const Decoder& d, const json& r, const std::string& p) {
  DEVLET_RETURN_IF_ERROR(
      d.Object(r, p, {"closID", "l3CacheSchema", "memBwSchema", "schemata", "enableMonitoring"}));
  IntelRdt rdt;
  for (const auto& [key, value] : r.items()) {
    const std::string fp = Decoder::Join(p, key);
    if (key == "closID") {
      DEVLET_ASSIGN_OR_RETURN(rdt.clos_id, d.String(value, fp));
    } else if (key == "l3CacheSchema") {
      DEVLET_ASSIGN_OR_RETURN(rdt.l3_cache_schema, d.String(value, fp));
    } else if (key == "memBwSchema") {
      DEVLET_ASSIGN_OR_RETURN(rdt.mem_bw_schema, d.String(value, fp));
    } else if (key == "schemata" && !value.is_null()) {
      DEVLET_ASSIGN_OR_RETURN(rdt.schemata, d.Strings(value, fp));
    } else if (key == "enableMonitoring") {
      DEVLET_ASSIGN_OR_RETURN(rdt.enable_monitoring, d.Bool(value, fp));
    }
  }
  return rdt;
}

absl::StatusOr<std::uint32_t> DecodeGid(const Decoder& d, const json& g, const std::string& p) {
  return d.Integer<std::uint32_t>(g, p);
}

// DecodeEdits reads containerEdits field by field, in the order errors are reported.
absl::StatusOr<ContainerEdits> DecodeEdits(const Decoder& d, const json& j,
                                           const std::string& path) {
  ContainerEdits out;
  if (j.is_null()) return out;
  DEVLET_RETURN_IF_ERROR(d.Object(j, path,
                                  {"env", "deviceNodes", "netDevices", "hooks", "mounts",
                                   "intelRdt", "additionalGids"}));
  auto field = [&](const char* key) -> const json& {
    static const json kNull;
    auto it = j.find(key);
    return it == j.end() ? kNull : *it;
  };
  DEVLET_ASSIGN_OR_RETURN(out.env, d.Strings(field("env"), Decoder::Join(path, "env")));
  DEVLET_RETURN_IF_ERROR(DecodeList(d, field("deviceNodes"), Decoder::Join(path, "deviceNodes"),
                                    DecodeDeviceNode, &out.device_nodes));
  DEVLET_RETURN_IF_ERROR(DecodeList(d, field("netDevices"), Decoder::Join(path, "netDevices"),
                                    DecodeNetDevice, &out.net_devices));
  DEVLET_RETURN_IF_ERROR(
      DecodeList(d, field("hooks"), Decoder::Join(path, "hooks"), DecodeHook, &out.hooks));
  DEVLET_RETURN_IF_ERROR(
      DecodeList(d, field("mounts"), Decoder::Join(path, "mounts"), DecodeMount, &out.mounts));
  if (const json& r = field("intelRdt"); !r.is_null()) {
    DEVLET_ASSIGN_OR_RETURN(out.intel_rdt, DecodeIntelRdt(d, r, Decoder::Join(path, "intelRdt")));
  }
  DEVLET_RETURN_IF_ERROR(DecodeList(d, field("additionalGids"),
                                    Decoder::Join(path, "additionalGids"), DecodeGid,
                                    &out.additional_gids));
  return out;
}

absl::StatusOr<Spec> DecodeJsonTree(const json& j, bool from_yaml) {
  const Decoder d(from_yaml);
  if (j.is_null()) {
    return InvalidArgument("spec: no spec data");
  }
  DEVLET_RETURN_IF_ERROR(
      d.Object(j, "", {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}));
  Spec spec;
  for (const auto& [key, value] : j.items()) {
    if (key == "cdiVersion") {
      DEVLET_ASSIGN_OR_RETURN(spec.version, d.String(value, key));
    } else if (key == "kind") {
      DEVLET_ASSIGN_OR_RETURN(spec.kind, d.String(value, key));
    } else if (key == "annotations") {
      DEVLET_ASSIGN_OR_RETURN(spec.annotations, d.StringMap(value, key));
    } else if (key == "containerEdits") {
      DEVLET_ASSIGN_OR_RETURN(spec.container_edits, DecodeEdits(d, value, key));
    } else if (key == "devices") {
      DEVLET_RETURN_IF_ERROR(d.Array(value, key));
      if (!value.is_array()) continue;
      for (size_t i = 0; i < value.size(); ++i) {
        const std::string p = Decoder::Index("devices", i);
        DEVLET_RETURN_IF_ERROR(d.Object(value[i], p, {"name", "annotations", "containerEdits"}));
        Device device;
        for (const auto& [dkey, dvalue] : value[i].items()) {
          const std::string fp = Decoder::Join(p, dkey);
          if (dkey == "name") {
            DEVLET_ASSIGN_OR_RETURN(device.name, d.String(dvalue, fp));
          } else if (dkey == "annotations") {
            DEVLET_ASSIGN_OR_RETURN(device.annotations, d.StringMap(dvalue, fp));
          } else if (dkey == "containerEdits") {
            DEVLET_ASSIGN_OR_RETURN(device.container_edits, DecodeEdits(d, dvalue, fp));
          }
        }
        spec.devices.push_back(std::move(device));
      }
    }
  }
  return spec;
}

// YamlToJson converts a YAML node; scalars become strings (typed by the decoder from the target
// field), except a plain `~`/`null`/empty scalar, which becomes null.
absl::StatusOr<json> YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return json(nullptr);
    case YAML::NodeType::Scalar: {
      const std::string& value = node.Scalar();
      if (node.Tag() != "!" && (value == "~" || value == "null" || value == "Null" ||
                                value == "NULL" || value.empty())) {
        return json(nullptr);
      }
      return json(value);
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const YAML::Node& item : node) {
        DEVLET_ASSIGN_OR_RETURN(json v, YamlToJson(item));
        out.push_back(std::move(v));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& item : node) {
        if (!item.first.IsScalar()) {
          return InvalidArgument("spec: a YAML map key is not a string");
        }
        const std::string key = item.first.Scalar();
        if (out.contains(key)) {
          return InvalidArgument("spec: YAML key \"" + key + "\" is defined twice");
        }
        DEVLET_ASSIGN_OR_RETURN(out[key], YamlToJson(item.second));
      }
      return out;
    }
  }
  return json(nullptr);
}

}  // namespace

nlohmann::json EncodeContainerEditsJson(const ContainerEdits& edits) {
  return EncodeEdits(edits);
}

absl::StatusOr<ContainerEdits> DecodeContainerEditsJson(const nlohmann::json& j,
                                                        std::string_view path) {
  return DecodeEdits(Decoder(/*yaml=*/false), j, std::string(path));
}

std::string EncodeSpecJson(const Spec& spec) {
  json out = json::object();
  out["cdiVersion"] = spec.version;
  out["kind"] = spec.kind;
  if (!spec.annotations.empty()) out["annotations"] = spec.annotations;
  json devices = json::array();
  for (const Device& d : spec.devices) {
    json device = {{"name", d.name}};
    if (!d.annotations.empty()) device["annotations"] = d.annotations;
    device["containerEdits"] = EncodeEdits(d.container_edits);
    devices.push_back(std::move(device));
  }
  out["devices"] = std::move(devices);
  if (!spec.container_edits.IsEmpty()) out["containerEdits"] = EncodeEdits(spec.container_edits);
  // Strings set by code may hold invalid UTF-8: replace it rather than throw (a crash).
  return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

absl::StatusOr<Spec> DecodeSpec(std::string_view data) {
  const size_t first = data.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && data[first] == '{') {
    json j;
    try {
      j = json::parse(data.begin(), data.end());
    } catch (const json::exception& e) {
      return InvalidArgument(std::string("spec: not valid JSON: ") + e.what());
    }
    return DecodeJsonTree(j, /*from_yaml=*/false);
  }
  try {
    const YAML::Node node = YAML::Load(std::string(data));
    DEVLET_ASSIGN_OR_RETURN(json j, YamlToJson(node));
    // yaml-cpp passes invalid UTF-8 through; the reference library's YAML reader (and our JSON
    // reader) refuse it, and strings that are not UTF-8 would break every JSON written later.
    try {
      (void)j.dump();
    } catch (const json::type_error&) {
      return InvalidArgument("spec: not valid YAML: invalid UTF-8");
    }
    return DecodeJsonTree(j, /*from_yaml=*/true);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("spec: not valid YAML: ") + e.what());
  }
}

}  // namespace devlet::cdi
