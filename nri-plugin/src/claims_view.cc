#include "devlet/nri/claims_view.h"

#include <nlohmann/json.hpp>

#include "devlet/common/status.h"

namespace devlet::nri {

absl::StatusOr<std::vector<PreparedClaim>> InMemoryClaimsView::ClaimsForPod(
    std::string_view pod_uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = claims_.find(pod_uid);
  if (it == claims_.end()) {
    return std::vector<PreparedClaim>{};
  }
  return it->second;
}

void InMemoryClaimsView::Set(const std::string& pod_uid, std::vector<PreparedClaim> claims) {
  std::lock_guard<std::mutex> lock(mu_);
  claims_[pod_uid] = std::move(claims);
}

void InMemoryClaimsView::Remove(const std::string& pod_uid) {
  std::lock_guard<std::mutex> lock(mu_);
  claims_.erase(pod_uid);
}

size_t InMemoryClaimsView::pods() const {
  std::lock_guard<std::mutex> lock(mu_);
  return claims_.size();
}

namespace {

using nlohmann::json;

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (j.contains(key)) {
    for (const auto& item : j.at(key)) {
      out.push_back(item.get<std::string>());
    }
  }
  return out;
}

std::string String(const json& j, const char* key) {
  return j.contains(key) ? j.at(key).get<std::string>() : std::string();
}

CdiEdits Edits(const json& j) {
  CdiEdits edits;
  edits.env = Strings(j, "env");
  if (j.contains("deviceNodes")) {
    for (const auto& d : j.at("deviceNodes")) {
      CdiDeviceNode node;
      node.path = String(d, "path");
      node.host_path = String(d, "hostPath");
      node.type = String(d, "type");
      node.major = d.value("major", int64_t{-1});
      node.minor = d.value("minor", int64_t{-1});
      if (d.contains("fileMode")) {
        node.file_mode = d.at("fileMode").get<uint32_t>();
      }
      if (d.contains("uid")) {
        node.uid = d.at("uid").get<uint32_t>();
      }
      if (d.contains("gid")) {
        node.gid = d.at("gid").get<uint32_t>();
      }
      edits.device_nodes.push_back(std::move(node));
    }
  }
  if (j.contains("mounts")) {
    for (const auto& m : j.at("mounts")) {
      edits.mounts.push_back({String(m, "hostPath"), String(m, "containerPath"),
                              String(m, "type"), Strings(m, "options")});
    }
  }
  if (j.contains("hooks")) {
    for (const auto& h : j.at("hooks")) {
      CdiHook hook{String(h, "hookName"), String(h, "path"), Strings(h, "args"),
                   Strings(h, "env"), std::nullopt};
      if (h.contains("timeout")) {
        hook.timeout = h.at("timeout").get<int64_t>();
      }
      edits.hooks.push_back(std::move(hook));
    }
  }
  return edits;
}

PreparedClaim Claim(const json& j) {
  PreparedClaim claim;
  claim.uid = String(j, "uid");
  claim.namespace_name = String(j, "namespace");
  claim.name = String(j, "name");
  claim.error = String(j, "error");
  if (j.contains("devices")) {
    for (const auto& d : j.at("devices")) {
      PreparedDevice device;
      device.request = String(d, "request");
      device.driver = String(d, "driver");
      device.pool = String(d, "pool");
      device.device = String(d, "device");
      device.share_id = String(d, "shareId");
      if (d.contains("cpuMillis")) {
        device.cpu_millis = d.at("cpuMillis").get<int64_t>();
      }
      if (d.contains("memoryLimitBytes")) {
        device.memory_limit_bytes = d.at("memoryLimitBytes").get<int64_t>();
      }
      device.cdi_device_names = Strings(d, "cdiDevices");
      if (d.contains("edits")) {
        device.edits = Edits(d.at("edits"));
      }
      if (d.contains("numaNodes")) {
        device.numa_nodes = d.at("numaNodes").get<std::vector<int>>();
      }
      claim.devices.push_back(std::move(device));
    }
  }
  if (j.contains("edits")) {
    claim.claim_edits = Edits(j.at("edits"));
  }
  if (j.contains("metadataMounts")) {
    for (const auto& m : j.at("metadataMounts")) {
      claim.metadata_mounts.push_back({String(m, "hostPath"), String(m, "containerPath")});
    }
  }
  claim.cpuset = String(j, "cpuset");
  claim.mems = String(j, "mems");
  if (j.contains("memoryLimitBytes")) {
    claim.memory_limit_bytes = j.at("memoryLimitBytes").get<int64_t>();
  }
  if (j.contains("cpuMillis")) {
    claim.cpu_millis = j.at("cpuMillis").get<int64_t>();
  }
  return claim;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::vector<PreparedClaim>>> ParseClaimsJson(
    std::string_view text) {
  std::map<std::string, std::vector<PreparedClaim>> out;
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return InvalidArgument("prepared claims: not a JSON object keyed by pod UID");
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it.value().is_array()) {
      return InvalidArgument("prepared claims of pod " + it.key() + ": not a list");
    }
    try {
      for (const auto& claim : it.value()) {
        PreparedClaim parsed = Claim(claim);
        const std::string where = "prepared claims of pod " + it.key() + ", claim " +
                                  parsed.namespace_name + "/" + parsed.name;
        if (claim.contains("containers")) {
          return InvalidArgument(where + ": \"containers\" is not supported: a container gets "
                                 "a claim's devices when its environment carries their markers");
        }
        for (const PreparedDevice& device : parsed.devices) {
          if ((device.memory_limit_bytes && *device.memory_limit_bytes <= 0) ||
              (device.cpu_millis && *device.cpu_millis <= 0)) {
            return InvalidArgument(where + ", device " + device.device +
                                   ": cpuMillis and memoryLimitBytes must be positive");
          }
        }
        // Zero or negative amounts would become "no limit" or an invalid cgroup value.
        if (parsed.memory_limit_bytes && *parsed.memory_limit_bytes <= 0) {
          return InvalidArgument(where + ": memoryLimitBytes must be positive");
        }
        if (parsed.cpu_millis && *parsed.cpu_millis <= 0) {
          return InvalidArgument(where + ": cpuMillis must be positive");
        }
        out[it.key()].push_back(std::move(parsed));
      }
    } catch (const json::exception& e) {
      return InvalidArgument("prepared claims of pod " + it.key() + ": " + e.what());
    }
  }
  return out;
}

}  // namespace devlet::nri
