#include "devlet/dra_kubelet/claim.h"

#include <nlohmann/json.hpp>

#include "devlet/common/status.h"
#include "devlet/common/strings.h"

namespace devlet::dra_kubelet {

std::string ClaimRef::Display() const {
  std::string plain = namespace_name + "/" + name;
  for (unsigned char c : plain) {
    // Kubernetes names are ASCII letters, digits, '-' and '.': anything else is shown escaped.
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return GoQuote(plain);
  }
  return plain;
}

namespace {

using nlohmann::json;

// Reads an optional string member; a present non-string value is an error naming `path`.
absl::Status GetString(const json& object, const char* key, const std::string& path,
                       std::string& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return InvalidArgument(path + "." + key + " must be a string");
  out = it->get<std::string>();
  return absl::OkStatus();
}

absl::StatusOr<const json*> GetObject(const json& object, const char* key,
                                      const std::string& path) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  if (!it->is_object()) return InvalidArgument(path + "." + key + " must be an object");
  return &*it;
}

absl::StatusOr<const json*> GetArray(const json& object, const char* key,
                                     const std::string& path) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  if (!it->is_array()) return InvalidArgument(path + "." + key + " must be a list");
  return &*it;
}

absl::Status ParseStringList(const json& object, const char* key, const std::string& path,
                             std::vector<std::string>& out) {
  DEVLET_ASSIGN_OR_RETURN(const json* list, GetArray(object, key, path));
  if (list == nullptr) return absl::OkStatus();
  for (const json& item : *list) {
    if (!item.is_string()) return InvalidArgument(path + "." + key + " must hold strings");
    out.push_back(item.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ParseAllocation(const json& allocation, ResourceClaim& claim) {
  const std::string path = "status.allocation";
  DEVLET_ASSIGN_OR_RETURN(const json* devices, GetObject(allocation, "devices", path));
  if (devices != nullptr) {
    DEVLET_ASSIGN_OR_RETURN(const json* results, GetArray(*devices, "results", path + ".devices"));
    if (results != nullptr) {
      for (std::size_t i = 0; i < results->size(); ++i) {
        const json& item = (*results)[i];
        const std::string item_path = path + ".devices.results[" + std::to_string(i) + "]";
        if (!item.is_object()) return InvalidArgument(item_path + " must be an object");
        AllocationResult result;
        DEVLET_RETURN_IF_ERROR(GetString(item, "request", item_path, result.request));
        DEVLET_RETURN_IF_ERROR(GetString(item, "driver", item_path, result.driver));
        DEVLET_RETURN_IF_ERROR(GetString(item, "pool", item_path, result.pool));
        DEVLET_RETURN_IF_ERROR(GetString(item, "device", item_path, result.device));
        std::string share_id;
        DEVLET_RETURN_IF_ERROR(GetString(item, "shareID", item_path, share_id));
        if (!share_id.empty()) result.share_id = share_id;
        if (auto it = item.find("adminAccess"); it != item.end() && !it->is_null()) {
          if (!it->is_boolean()) return InvalidArgument(item_path + ".adminAccess must be a boolean");
          result.admin_access = it->get<bool>();
        }
        claim.results.push_back(std::move(result));
      }
    }
    DEVLET_ASSIGN_OR_RETURN(const json* configs, GetArray(*devices, "config", path + ".devices"));
    if (configs != nullptr) {
      for (std::size_t i = 0; i < configs->size(); ++i) {
        const json& item = (*configs)[i];
        const std::string item_path = path + ".devices.config[" + std::to_string(i) + "]";
        if (!item.is_object()) return InvalidArgument(item_path + " must be an object");
        AllocationConfig config;
        std::string source;
        DEVLET_RETURN_IF_ERROR(GetString(item, "source", item_path, source));
        if (source == "FromClass") {
          config.source = ConfigSource::kFromClass;
        } else if (source == "FromClaim") {
          config.source = ConfigSource::kFromClaim;
        } else {
          return InvalidArgument(item_path + ".source must be FromClass or FromClaim, not \"" +
                                 source + "\"");
        }
        DEVLET_RETURN_IF_ERROR(ParseStringList(item, "requests", item_path, config.requests));
        DEVLET_ASSIGN_OR_RETURN(const json* opaque, GetObject(item, "opaque", item_path));
        if (opaque != nullptr) {
          DEVLET_RETURN_IF_ERROR(
              GetString(*opaque, "driver", item_path + ".opaque", config.opaque_driver));
          auto params = opaque->find("parameters");
          config.opaque_parameters =
              params == opaque->end() ? std::string("null") : params->dump();
        }
        claim.config.push_back(std::move(config));
      }
    }
  }
  // nodeSelector: collect metadata.name matchFields values (the node-local allocation form).
  DEVLET_ASSIGN_OR_RETURN(const json* selector, GetObject(allocation, "nodeSelector", path));
  if (selector != nullptr) {
    DEVLET_ASSIGN_OR_RETURN(const json* terms,
                            GetArray(*selector, "nodeSelectorTerms", path + ".nodeSelector"));
    if (terms != nullptr) {
      for (const json& term : *terms) {
        if (!term.is_object()) continue;
        auto fields = term.find("matchFields");
        if (fields == term.end() || !fields->is_array()) continue;
        for (const json& field : *fields) {
          if (!field.is_object() || field.value("key", "") != "metadata.name" ||
              field.value("operator", "") != "In") {
            continue;
          }
          auto values = field.find("values");
          if (values == field.end() || !values->is_array()) continue;
          for (const json& value : *values) {
            if (value.is_string()) claim.allocation_node_names.push_back(value.get<std::string>());
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResourceClaim> ParseResourceClaimJson(std::string_view json_text) {
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("ResourceClaim is not valid JSON");
  if (!doc.is_object()) return InvalidArgument("ResourceClaim must be a JSON object");
  std::string kind;
  DEVLET_RETURN_IF_ERROR(GetString(doc, "kind", "", kind));
  if (!kind.empty() && kind != "ResourceClaim") {
    return InvalidArgument("expected kind ResourceClaim, got " + kind);
  }
  ResourceClaim claim;
  DEVLET_ASSIGN_OR_RETURN(const json* metadata, GetObject(doc, "metadata", ""));
  if (metadata == nullptr) return InvalidArgument("ResourceClaim has no metadata");
  DEVLET_RETURN_IF_ERROR(GetString(*metadata, "namespace", "metadata", claim.namespace_name));
  DEVLET_RETURN_IF_ERROR(GetString(*metadata, "name", "metadata", claim.name));
  DEVLET_RETURN_IF_ERROR(GetString(*metadata, "uid", "metadata", claim.uid));
  if (auto it = metadata->find("generation"); it != metadata->end() && it->is_number_integer()) {
    claim.generation = it->get<std::int64_t>();
  }
  DEVLET_ASSIGN_OR_RETURN(const json* annotations, GetObject(*metadata, "annotations", "metadata"));
  if (annotations != nullptr) {
    for (const auto& [key, value] : annotations->items()) {
      if (!value.is_string()) {
        return InvalidArgument("metadata.annotations[" + key + "] must be a string");
      }
      claim.annotations[key] = value.get<std::string>();
    }
  }
  DEVLET_ASSIGN_OR_RETURN(const json* status, GetObject(doc, "status", ""));
  if (status != nullptr) {
    DEVLET_ASSIGN_OR_RETURN(const json* allocation, GetObject(*status, "allocation", "status"));
    if (allocation != nullptr) {
      claim.allocated = true;
      DEVLET_RETURN_IF_ERROR(ParseAllocation(*allocation, claim));
    }
    DEVLET_ASSIGN_OR_RETURN(const json* reserved, GetArray(*status, "reservedFor", "status"));
    if (reserved != nullptr) {
      for (const json& ref : *reserved) {
        if (ref.is_object() && ref.contains("uid") && ref["uid"].is_string()) {
          claim.reserved_for_uids.push_back(ref["uid"].get<std::string>());
        }
      }
    }
  }
  return claim;
}

std::string BaseRequestName(std::string_view request) {
  auto slash = request.find('/');
  return std::string(slash == std::string_view::npos ? request : request.substr(0, slash));
}

}  // namespace devlet::dra_kubelet
