#include "record_json.h"

#include "devlet/cdi/edits_json.h"
#include "devlet/common/status.h"
#include "devlet/dra_kubelet/config.h"

namespace devlet::dra_kubelet::internal {

using nlohmann::json;
using nlohmann::ordered_json;

// ---- JSON forms of the interface types ----------------------------------------------------------

ordered_json AttributeToJson(const AttributeValue& value) {
  ordered_json out = ordered_json::object();
  if (const auto* i = std::get_if<std::int64_t>(&value)) out["int"] = *i;
  if (const auto* b = std::get_if<bool>(&value)) out["bool"] = *b;
  if (const auto* s = std::get_if<std::string>(&value)) out["string"] = *s;
  if (const auto* v = std::get_if<VersionValue>(&value)) out["version"] = v->version;
  return out;
}

AttributeValue AttributeFromJson(const json& value) {
  if (value.contains("int")) return value["int"].get<std::int64_t>();
  if (value.contains("bool")) return value["bool"].get<bool>();
  if (value.contains("version")) return VersionValue{value["version"].get<std::string>()};
  return value.value("string", std::string());
}

nlohmann::ordered_json EditsToJson(const ContainerEdits& edits) {
  ordered_json out = ordered_json::object();
  if (!edits.env.empty()) out["env"] = edits.env;
  if (!edits.device_nodes.empty()) {
    ordered_json nodes = ordered_json::array();
    for (const DeviceNode& node : edits.device_nodes) {
      ordered_json n = {{"path", node.path}};
      if (!node.host_path.empty()) n["hostPath"] = node.host_path;
      if (!node.permissions.empty()) n["permissions"] = node.permissions;
      nodes.push_back(std::move(n));
    }
    out["deviceNodes"] = std::move(nodes);
  }
  if (!edits.mounts.empty()) {
    ordered_json mounts = ordered_json::array();
    for (const Mount& mount : edits.mounts) {
      ordered_json m = {{"hostPath", mount.host_path}, {"containerPath", mount.container_path}};
      if (!mount.options.empty()) m["options"] = mount.options;
      mounts.push_back(std::move(m));
    }
    out["mounts"] = std::move(mounts);
  }
  return out;
}

ContainerEdits EditsFromJson(const json& in) {
  ContainerEdits edits;
  if (in.contains("env")) edits.env = in["env"].get<std::vector<std::string>>();
  if (in.contains("deviceNodes")) {
    for (const json& n : in["deviceNodes"]) {
      edits.device_nodes.push_back({n.value("path", ""), n.value("hostPath", ""),
                                    n.value("permissions", "")});
    }
  }
  if (in.contains("mounts")) {
    for (const json& m : in["mounts"]) {
      edits.mounts.push_back({m.value("hostPath", ""), m.value("containerPath", ""),
                              m.value("options", std::vector<std::string>())});
    }
  }
  return edits;
}

nlohmann::ordered_json RecordToJson(const ClaimRecord& record, bool with_container_edits) {
  ordered_json out;
  out["namespace"] = record.claim.namespace_name;
  out["name"] = record.claim.name;
  out["uid"] = record.claim.uid;
  out["state"] = record.state == ClaimState::kPrepareCompleted ? "PrepareCompleted"
                                                                : "PrepareStarted";
  if (record.pod_claim_name) out["podClaimName"] = *record.pod_claim_name;
  if (!record.pod_uids.empty()) out["podUIDs"] = record.pod_uids;
  if (!record.pod_group_uids.empty()) out["podGroupUIDs"] = record.pod_group_uids;
  ordered_json devices = ordered_json::array();
  for (const PreparedDeviceRecord& device : record.devices) {
    ordered_json d;
    d["requests"] = device.requests;
    d["pool"] = device.pool;
    d["device"] = device.device;
    if (device.share_id) d["shareID"] = *device.share_id;
    if (device.admin_access) d["adminAccess"] = true;
    d["config"] = ordered_json::parse(EncodeDeviceConfig(device.config));
    d["edits"] = EditsToJson(device.prepared.edits);
    ordered_json attributes = ordered_json::object();
    for (const auto& [name, value] : device.prepared.attributes) {
      attributes[name] = AttributeToJson(value);
    }
    d["attributes"] = std::move(attributes);
    if (!device.prepared.vendor_cdi_device_ids.empty()) {
      d["vendorCdiDeviceIDs"] = device.prepared.vendor_cdi_device_ids;
    }
    if (const auto& net = device.prepared.network_data) {
      d["networkData"] = {{"interfaceName", net->interface_name},
                          {"ips", net->ips},
                          {"hardwareAddress", net->hardware_address}};
    }
    d["cdiDeviceIDs"] = device.cdi_device_ids;
    if (device.cpu_millis)
      d["cpuMillis"] = *device.cpu_millis;
    if (device.memory_bytes)
      d["memoryBytes"] = *device.memory_bytes;
    if (with_container_edits && device.container_edits) {
      d["containerEdits"] =
          ordered_json::parse(cdi::EncodeContainerEditsJson(*device.container_edits).dump());
    }
    devices.push_back(std::move(d));
  }
  out["devices"] = std::move(devices);
  out["cdiSpecFiles"] = record.cdi_spec_files;
  out["metadataFiles"] = record.metadata_files;
  if (record.metadata_generation != 1) out["metadataGeneration"] = record.metadata_generation;
  if (!record.boot_id.empty()) out["bootId"] = record.boot_id;
  return out;
}

absl::StatusOr<ClaimRecord> RecordFromJson(const nlohmann::json& in) {
  try {
    ClaimRecord record;
    record.claim = {in.at("namespace").get<std::string>(), in.at("name").get<std::string>(),
                    in.at("uid").get<std::string>()};
    const std::string state = in.at("state").get<std::string>();
    if (state == "PrepareCompleted") {
      record.state = ClaimState::kPrepareCompleted;
    } else if (state == "PrepareStarted") {
      record.state = ClaimState::kPrepareStarted;
    } else {
      return InvalidArgument("unknown claim state \"" + state + "\"");
    }
    if (in.contains("podClaimName")) record.pod_claim_name = in["podClaimName"].get<std::string>();
    if (in.contains("podUIDs")) record.pod_uids = in["podUIDs"].get<std::vector<std::string>>();
    if (in.contains("podGroupUIDs")) {
      record.pod_group_uids = in["podGroupUIDs"].get<std::vector<std::string>>();
    }
    for (const json& d : in.at("devices")) {
      PreparedDeviceRecord device;
      device.requests = d.at("requests").get<std::vector<std::string>>();
      device.pool = d.at("pool").get<std::string>();
      device.device = d.at("device").get<std::string>();
      if (d.contains("shareID")) device.share_id = d["shareID"].get<std::string>();
      device.admin_access = d.value("adminAccess", false);
      DEVLET_ASSIGN_OR_RETURN(device.config, DecodeDeviceConfig(d.at("config").dump()));
      device.prepared.edits = EditsFromJson(d.at("edits"));
      for (const auto& [name, value] : d.at("attributes").items()) {
        device.prepared.attributes[name] = AttributeFromJson(value);
      }
      if (d.contains("vendorCdiDeviceIDs")) {
        device.prepared.vendor_cdi_device_ids =
            d["vendorCdiDeviceIDs"].get<std::vector<std::string>>();
      }
      if (d.contains("networkData")) {
        const json& net = d["networkData"];
        device.prepared.network_data =
            NetworkData{net.value("interfaceName", ""),
                        net.value("ips", std::vector<std::string>()),
                        net.value("hardwareAddress", "")};
      }
      device.cdi_device_ids = d.at("cdiDeviceIDs").get<std::vector<std::string>>();
      if (d.contains("cpuMillis"))
        device.cpu_millis = d["cpuMillis"].get<std::int64_t>();
      if (d.contains("memoryBytes"))
        device.memory_bytes = d["memoryBytes"].get<std::int64_t>();
      if (d.contains("containerEdits")) {
        DEVLET_ASSIGN_OR_RETURN(
            device.container_edits,
            cdi::DecodeContainerEditsJson(d["containerEdits"],
                                          "claim entry " + record.claim.uid + " containerEdits"));
      }
      record.devices.push_back(std::move(device));
    }
    record.cdi_spec_files = in.at("cdiSpecFiles").get<std::vector<std::string>>();
    record.metadata_files = in.at("metadataFiles").get<std::vector<std::string>>();
    record.metadata_generation = in.value("metadataGeneration", std::int64_t{1});
    if (record.metadata_generation < 1) {
      return InvalidArgument("claim entry " + record.claim.uid + ": metadataGeneration " +
                             std::to_string(record.metadata_generation) + " is not positive");
    }
    record.boot_id = in.value("bootId", "");
    return record;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed claim entry: ") + e.what());
  }
}


}  // namespace devlet::dra_kubelet::internal
