#include "devlet/dra_kubelet/config.h"

#include <nlohmann/json.hpp>

#include "devlet/common/status.h"
#include "devlet/common/strings.h"

namespace devlet::dra_kubelet {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxEnvValue = 4096;

bool IsEnvName(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Shown quotes what the input said for an error message: escaped (a NUL or newline in a key
// reached the message raw: fuzz/device_config_fuzzer.cc) and cut to 64 bytes.
std::string Shown(std::string_view text) {
  constexpr std::size_t kMax = 64;
  return GoQuote(text.substr(0, kMax)) + (text.size() > kMax ? "..." : "");
}

// ShownJson is Shown for a JSON value: a string quoted, anything else as JSON (ASCII), cut.
std::string ShownJson(const json& value) {
  if (value.is_string()) return Shown(value.get<std::string>());
  const std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true);
  return text.size() > 64 ? text.substr(0, 64) + "..." : text;
}

}  // namespace

absl::StatusOr<DeviceConfig> DecodeDeviceConfig(std::string_view json_text) {
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("parameters are not valid JSON");
  if (!doc.is_object()) return InvalidArgument("parameters must be a JSON object");
  DeviceConfig config;
  bool saw_api_version = false;
  bool saw_kind = false;
  for (const auto& [key, value] : doc.items()) {
    if (key == "apiVersion") {
      if (!value.is_string() || value.get<std::string>() != kDeviceConfigApiVersion) {
        return InvalidArgument("apiVersion must be \"" + std::string(kDeviceConfigApiVersion) +
                               "\", got " + ShownJson(value));
      }
      saw_api_version = true;
    } else if (key == "kind") {
      if (!value.is_string() || value.get<std::string>() != kDeviceConfigKind) {
        return InvalidArgument("kind must be \"" + std::string(kDeviceConfigKind) + "\", got " +
                               ShownJson(value));
      }
      saw_kind = true;
    } else if (key == "env") {
      if (value.is_null()) continue;
      if (!value.is_object()) return InvalidArgument("env must be an object of strings");
      for (const auto& [name, env_value] : value.items()) {
        if (!IsEnvName(name)) {
          return InvalidArgument("env name " + Shown(name) +
                                 " is not a valid environment variable name");
        }
        if (!env_value.is_string()) return InvalidArgument("env." + name + " must be a string");
        std::string text = env_value.get<std::string>();
        if (text.size() > kMaxEnvValue || text.find('\0') != std::string::npos) {
          return InvalidArgument("env." + name + " is longer than 4096 bytes or holds NUL");
        }
        config.env[name] = std::move(text);
      }
    } else if (key == "bindDriver") {
      if (value.is_null()) continue;
      if (!value.is_string() || value.get<std::string>().empty()) {
        return InvalidArgument("bindDriver must be a non-empty string");
      }
      config.bind_driver = value.get<std::string>();
    } else {
      return InvalidArgument("unknown field " + Shown(key) + " (known: apiVersion, kind, env, " +
                             "bindDriver)");
    }
  }
  if (!saw_api_version || !saw_kind) {
    return InvalidArgument("apiVersion \"" + std::string(kDeviceConfigApiVersion) +
                           "\" and kind \"" + std::string(kDeviceConfigKind) + "\" are required");
  }
  return config;
}

std::string EncodeDeviceConfig(const DeviceConfig& config) {
  json doc = json::object();
  doc["apiVersion"] = kDeviceConfigApiVersion;
  doc["kind"] = kDeviceConfigKind;
  if (!config.env.empty()) doc["env"] = config.env;
  if (config.bind_driver) doc["bindDriver"] = *config.bind_driver;
  return doc.dump();
}

bool ConfigApplies(const std::vector<std::string>& requests, std::string_view request) {
  if (requests.empty()) return true;
  const std::string base = BaseRequestName(request);
  for (const std::string& entry : requests) {
    if (entry == request || entry == base) return true;
  }
  return false;
}

absl::StatusOr<DeviceConfig> ResolveDeviceConfig(const std::vector<AllocationConfig>& config,
                                                 std::string_view driver,
                                                 std::string_view request) {
  DeviceConfig merged;
  // Class entries first, then claim entries; each group keeps its allocation order.
  for (ConfigSource pass : {ConfigSource::kFromClass, ConfigSource::kFromClaim}) {
    for (std::size_t i = 0; i < config.size(); ++i) {
      const AllocationConfig& entry = config[i];
      if (entry.source != pass || entry.opaque_driver != driver ||
          !ConfigApplies(entry.requests, request)) {
        continue;
      }
      const std::string where =
          std::string("status.allocation.devices.config[") + std::to_string(i) + "] (" +
          (pass == ConfigSource::kFromClass ? "from the DeviceClass" : "from the claim") + ")";
      absl::StatusOr<DeviceConfig> decoded = DecodeDeviceConfig(entry.opaque_parameters);
      if (!decoded.ok()) {
        return InvalidArgument("opaque configuration " + where + " for request \"" +
                               std::string(request) + "\": " + Message(decoded.status()));
      }
      if (pass == ConfigSource::kFromClaim && decoded->bind_driver) {
        return PermissionDenied("opaque configuration " + where + " sets bindDriver, a host-level " +
                                "setting that only a DeviceClass may set");
      }
      for (auto& [name, value] : decoded->env) merged.env[name] = value;
      if (decoded->bind_driver) merged.bind_driver = decoded->bind_driver;
    }
  }
  return merged;
}

}  // namespace devlet::dra_kubelet
