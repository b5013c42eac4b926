#include "devlet/state/checkpoint.h"

#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "claim_json.h"
#include "devlet/cdi/edits_json.h"
#include "devlet/common/status.h"

namespace devlet::state {
namespace internal {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Hex32(std::uint32_t v) {
  char buffer[9];
  std::snprintf(buffer, sizeof(buffer), "%08x", v);
  return buffer;
}

static json EncodeDevice(const PreparedDevice& d) {
  json out = {{"driver", d.driver}, {"pool", d.pool}, {"device", d.device},
              {"requests", d.requests}, {"cdiDeviceIDs", d.cdi_device_ids}};
  if (!d.share_id.empty()) out["shareID"] = d.share_id;
  if (!d.attributes.empty()) out["attributes"] = d.attributes;
  if (d.edits)
    out["edits"] = cdi::EncodeContainerEditsJson(*d.edits);
  if (d.cpu_millis)
    out["cpuMillis"] = *d.cpu_millis;
  if (d.memory_bytes)
    out["memoryBytes"] = *d.memory_bytes;
  return out;
}

json EncodeClaim(const PreparedClaim& c) {
  json devices = json::array();
  for (const PreparedDevice& d : c.devices) devices.push_back(EncodeDevice(d));
  json out = {{"uid", c.uid},
              {"namespace", c.namespace_name},
              {"name", c.name},
              {"state", std::string(ClaimStateName(c.state))},
              {"podUIDs", c.pod_uids},
              {"devices", std::move(devices)},
              {"files", c.files}};
  if (!c.pod_group_uids.empty()) out["podGroupUIDs"] = c.pod_group_uids;
  if (!c.applied_config.empty()) out["appliedConfig"] = c.applied_config;
  if (!c.annotations.empty()) out["annotations"] = c.annotations;
  return out;
}

// The decoder throws nlohmann exceptions on type errors; DecodeCheckpoint turns them into
// kDataLoss (a checksum-valid file with the wrong shape was not written by us).
PreparedClaim DecodeClaim(const json& j) {
  PreparedClaim c;
  c.uid = j.at("uid").get<std::string>();
  c.namespace_name = j.at("namespace").get<std::string>();
  c.name = j.at("name").get<std::string>();
  const std::string state = j.at("state").get<std::string>();
  if (state == "PrepareStarted") {
    c.state = ClaimState::kPrepareStarted;
  } else if (state == "PrepareCompleted") {
    c.state = ClaimState::kPrepareCompleted;
  } else {
    throw std::runtime_error("claim " + c.uid + ": unknown state \"" + state + "\"");
  }
  c.pod_uids = j.value("podUIDs", std::vector<std::string>{});
  c.pod_group_uids = j.value("podGroupUIDs", std::vector<std::string>{});
  for (const json& d : j.value("devices", json::array())) {
    PreparedDevice device;
    device.driver = d.at("driver").get<std::string>();
    device.pool = d.at("pool").get<std::string>();
    device.device = d.at("device").get<std::string>();
    device.requests = d.value("requests", std::vector<std::string>{});
    device.cdi_device_ids = d.value("cdiDeviceIDs", std::vector<std::string>{});
    device.share_id = d.value("shareID", std::string());
    device.attributes = d.value("attributes", std::map<std::string, std::string>{});
    if (auto it = d.find("edits"); it != d.end()) {
      absl::StatusOr<cdi::ContainerEdits> edits = cdi::DecodeContainerEditsJson(
          *it, "claim " + c.uid + " device " + device.device + " edits");
      if (!edits.ok())
        throw std::runtime_error(std::string(edits.status().message()));
      device.edits = *std::move(edits);
    }
    if (auto it = d.find("cpuMillis"); it != d.end())
      device.cpu_millis = it->get<std::int64_t>();
    if (auto it = d.find("memoryBytes"); it != d.end()) {
      device.memory_bytes = it->get<std::int64_t>();
    }
    c.devices.push_back(std::move(device));
  }
  c.files = j.value("files", std::vector<std::string>{});
  c.applied_config = j.value("appliedConfig", std::string());
  c.annotations = j.value("annotations", std::map<std::string, std::string>{});
  return c;
}

}  // namespace internal

namespace {

using nlohmann::json;
using internal::DecodeClaim;
using internal::Dump;
using internal::EncodeClaim;

constexpr std::string_view kKind = "DevletCheckpoint";

}  // namespace

std::string_view ClaimStateName(ClaimState state) {
  switch (state) {
    case ClaimState::kPrepareStarted:
      return "PrepareStarted";
    case ClaimState::kPrepareCompleted:
      return "PrepareCompleted";
  }
  return "Unknown";
}

std::uint32_t Crc32(std::string_view data) {
  static const std::array<std::uint32_t, 256> kTable = [] {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    return table;
  }();
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) crc = kTable[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string EncodeCheckpoint(const Checkpoint& checkpoint, std::uint64_t journal_seq) {
  json claims = json::object();
  for (const auto& [uid, claim] : checkpoint.claims) claims[uid] = EncodeClaim(claim);
  const json data = {{"claims", std::move(claims)}, {"journalSeq", journal_seq}};
  const std::string payload = Dump(data);
  // Written by hand so that "data" is byte-for-byte the checksummed payload.
  return "{\"kind\":\"" + std::string(kKind) + "\",\"version\":" +
         std::to_string(kCheckpointVersion) + ",\"checksum\":\"crc32:" + internal::Hex32(Crc32(payload)) +
         "\",\"data\":" + payload + "}\n";
}

absl::StatusOr<Checkpoint> DecodeCheckpoint(std::string_view data, std::string_view source,
                                             std::uint64_t* journal_seq) {
  const std::string name =
      source.empty() ? std::string("checkpoint") : "checkpoint \"" + std::string(source) + "\"";
  auto corrupted = [&](const std::string& why) {
    return absl::DataLossError(name + " is corrupted (" + why +
                               "); the claims it recorded cannot be trusted: move it aside "
                               "(QuarantineCorrupted) and let the kubelet re-prepare");
  };
  if (data.empty()) return corrupted("the file is empty");
  json j;
  try {
    j = json::parse(data.begin(), data.end());
  } catch (const json::exception& e) {
    return corrupted(std::string("not valid JSON, perhaps truncated: ") + e.what());
  }
  if (!j.is_object() || j.value("kind", "") != kKind) {
    return corrupted("not a devlet checkpoint: missing kind \"DevletCheckpoint\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer()) {
    return corrupted("missing version");
  }
  const int version = j["version"].get<int>();
  if (version > kCheckpointVersion) {
    return FailedPrecondition(name + " has version " + std::to_string(version) +
                              ", newer than this devlet understands (" +
                              std::to_string(kCheckpointVersion) + "); refusing to touch it");
  }
  if (version < 1) return corrupted("invalid version " + std::to_string(version));
  if (!j.contains("data") || !j.contains("checksum") || !j["checksum"].is_string()) {
    return corrupted("missing data or checksum");
  }
  const std::string stored = j["checksum"].get<std::string>();
  const std::string computed = "crc32:" + internal::Hex32(Crc32(Dump(j["data"])));
  if (stored != computed) {
    return corrupted("checksum mismatch: stored " + stored + ", computed " + computed);
  }
  Checkpoint checkpoint;
  try {
    // Version 1 had no journal: everything is in the file.
    const std::uint64_t seq = j["data"].value("journalSeq", std::uint64_t{0});
    if (journal_seq != nullptr) *journal_seq = seq;
    for (const auto& [uid, claim] : j["data"].at("claims").items()) {
      PreparedClaim c = DecodeClaim(claim);
      if (c.uid != uid) throw std::runtime_error("claim key " + uid + " holds UID " + c.uid);
      checkpoint.claims.emplace(uid, std::move(c));
    }
  } catch (const std::exception& e) {
    return corrupted(std::string("unexpected content: ") + e.what());
  }
  return checkpoint;
}

}  // namespace devlet::state
