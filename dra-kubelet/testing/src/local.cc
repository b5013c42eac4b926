#include "devlet/dra_kubelet/testing/local.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "devlet/common/files.h"
#include "devlet/common/status.h"
#include "devlet/common/strings.h"
#include "devlet/dra_kubelet/config.h"
#include "files.h"
#include "names.h"
#include "record_json.h"

namespace devlet::dra_kubelet::testing {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::vector<std::string> ListJsonFiles(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0 && name[0] != '.') {
      files.push_back(dir + "/" + name);
    }
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

std::string DeviceKey(const std::string& pool, const std::string& device,
                      const std::optional<std::string>& share_id) {
  return pool + "/" + device + (share_id ? "/" + *share_id : "");
}

std::string EnvSuffix(const std::string& device) {
  std::string out;
  for (char c : device) {
    out.push_back(std::isalnum(static_cast<unsigned char>(c))
                      ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                      : '_');
  }
  return out;
}

constexpr std::string_view kCheckpointVersion = "devlet.io/dra-checkpoint/v1";

absl::Status DataLoss(const std::string& message) { return absl::DataLossError(message); }

}  // namespace

// ---- FileClaimSource ------------------------------------------------------------------------------

FileClaimSource::FileClaimSource(std::string dir) : dir_(std::move(dir)) {}

absl::StatusOr<ResourceClaim> FileClaimSource::GetClaim(const std::string& namespace_name,
                                                        const std::string& name,
                                                        const std::string& /*uid*/) {
  std::string parse_errors;
  for (const std::string& file : ListJsonFiles(dir_)) {
    DEVLET_ASSIGN_OR_RETURN(std::optional<std::string> content,
                            ReadFileIfExists(file));
    if (!content) continue;
    json doc = json::parse(*content, nullptr, /*allow_exceptions=*/false);
    std::vector<std::string> items;
    if (doc.is_object() && doc.value("kind", "") == "List" && doc.contains("items") &&
        doc["items"].is_array()) {
      for (const json& item : doc["items"]) items.push_back(item.dump());
    } else {
      items.push_back(*content);
    }
    for (const std::string& item : items) {
      absl::StatusOr<ResourceClaim> claim = ParseResourceClaimJson(item);
      if (!claim.ok()) {
        parse_errors += "; " + file + ": " + Message(claim.status());
        continue;
      }
      if (claim->namespace_name == namespace_name && claim->name == name) return claim;
    }
  }
  return NotFound("ResourceClaim " + namespace_name + "/" + name + " not found in " + dir_ +
                  parse_errors);
}

// ---- SimulatedBackend ------------------------------------------------------------------------------

SimulatedBackend::SimulatedBackend(std::string pool, std::vector<SimulatedDevice> devices)
    : pool_(std::move(pool)), devices_(std::move(devices)) {}

std::vector<SimulatedDevice> SimulatedBackend::Gpus(int count) {
  std::vector<SimulatedDevice> out;
  for (int i = 0; i < count; ++i) {
    SimulatedDevice device;
    device.name = "gpu-" + std::to_string(i);
    char bus[32];
    std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + i);
    char uuid[64];
    std::snprintf(uuid, sizeof(uuid), "gpu-00000000-0000-0000-0000-%012d", i);
    device.attributes["index"] = std::int64_t{i};
    device.attributes["uuid"] = std::string(uuid);
    device.attributes["model"] = std::string("devlet-sim");
    device.attributes["driverVersion"] = VersionValue{"1.0.0"};
    device.attributes["resource.kubernetes.io/pciBusID"] = std::string(bus);
    out.push_back(std::move(device));
  }
  return out;
}

absl::StatusOr<PreparedDevice> SimulatedBackend::Prepare(const DevicePrepareRequest& request) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(devices_.begin(), devices_.end(),
                         [&](const SimulatedDevice& d) { return d.name == request.device; });
  if (request.pool != pool_ || it == devices_.end()) {
    return NotFound("device " + request.pool + "/" + request.device + " does not exist on this node");
  }
  if (fail_devices_.count(request.device) > 0) {
    return Unavailable("device " + request.pool + "/" + request.device +
                       " could not be prepared (simulated failure)");
  }
  if (request.config.bind_driver && *request.config.bind_driver != "vfio-pci") {
    return InvalidArgument("device " + request.pool + "/" + request.device +
                           ": bindDriver \"" + *request.config.bind_driver +
                           "\" is not supported (supported: vfio-pci)");
  }
  const std::string key = DeviceKey(request.pool, request.device, request.share_id);
  auto [slot, inserted] = prepared_.emplace(key, request.claim.uid);
  if (!inserted && slot->second != request.claim.uid && !request.admin_access) {
    return FailedPrecondition("device " + key + " is already prepared for claim UID " +
                              slot->second);
  }
  if (inserted) ++prepare_calls_;
  PreparedDevice out;
  out.edits.env.push_back("DEVLET_DEVICE_" + EnvSuffix(request.device) + "=" + request.pool + "/" +
                          request.device);
  if (request.config.bind_driver) {
    out.edits.env.push_back("DEVLET_DEVICE_" + EnvSuffix(request.device) + "_DRIVER=" +
                            *request.config.bind_driver);
  }
  for (const auto& [name, value] : request.config.env) out.edits.env.push_back(name + "=" + value);
  out.attributes = it->attributes;
  return out;
}

absl::Status SimulatedBackend::Unprepare(const DeviceUnprepareRequest& request) {
  std::lock_guard lock(mutex_);
  auto it = prepared_.find(DeviceKey(request.pool, request.device, request.share_id));
  if (it != prepared_.end() && it->second == request.claim_uid) prepared_.erase(it);
  return absl::OkStatus();
}

std::vector<DeviceHealth> SimulatedBackend::HealthSnapshot() {
  std::lock_guard lock(mutex_);
  std::vector<DeviceHealth> out;
  const std::int64_t now = static_cast<std::int64_t>(::time(nullptr));
  for (const SimulatedDevice& device : devices_) {
    out.push_back({pool_, device.name, device.health, now, 0, device.health_message});
  }
  return out;
}

void SimulatedBackend::SetHealthListener(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void SimulatedBackend::SetHealth(const std::string& device, HealthStatus health,
                                 const std::string& message) {
  std::function<void()> listener;
  {
    std::lock_guard lock(mutex_);
    for (SimulatedDevice& d : devices_) {
      if (d.name == device) {
        d.health = health;
        d.health_message = message;
      }
    }
    listener = listener_;
  }
  if (listener) listener();
}

void SimulatedBackend::FailDevice(const std::string& device, bool fail) {
  std::lock_guard lock(mutex_);
  if (fail) {
    fail_devices_.insert(device);
  } else {
    fail_devices_.erase(device);
  }
}

std::map<std::string, std::string> SimulatedBackend::PreparedDevices() const {
  std::lock_guard lock(mutex_);
  return prepared_;
}

// ---- JsonCdiWriter ------------------------------------------------------------------------------

JsonCdiWriter::JsonCdiWriter(std::string cdi_root) : root_(std::move(cdi_root)) {}

std::string JsonCdiWriter::RenderSpec(const CdiSpec& spec) {
  ordered_json doc;
  doc["cdiVersion"] = spec.cdi_version;
  doc["kind"] = spec.kind;
  ordered_json devices = ordered_json::array();
  for (const CdiDevice& device : spec.devices) {
    devices.push_back({{"name", device.name}, {"containerEdits", internal::EditsToJson(device.edits)}});
  }
  doc["devices"] = std::move(devices);
  doc["containerEdits"] = ordered_json::object();
  return doc.dump(2) + "\n";
}

absl::Status JsonCdiWriter::WriteSpec(const std::string& file_name, const CdiSpec& spec) {
  if (!internal::IsPlainFileName(file_name)) {
    return InvalidArgument("CDI spec file name " + GoQuote(file_name) + " is not a plain file name");
  }
  DEVLET_RETURN_IF_ERROR(internal::MakeDirs(root_, 0755));
  return WithContext(WriteFileAtomically(root_ + "/" + file_name, RenderSpec(spec), 0644),
                     "writing CDI spec");
}

absl::Status JsonCdiWriter::RemoveSpec(const std::string& file_name) {
  if (!internal::IsPlainFileName(file_name)) {
    return InvalidArgument("CDI spec file name " + GoQuote(file_name) + " is not a plain file name");
  }
  return internal::RemoveFile(root_ + "/" + file_name);
}

absl::StatusOr<std::vector<std::string>> JsonCdiWriter::ListSpecs() {
  return internal::ListJsonFiles(root_);
}

bool JsonCdiWriter::SpecExists(const std::string& file_name) {
  return internal::PathExists(root_ + "/" + file_name);
}

bool JsonCdiWriter::SpecIsCurrent(const std::string& file_name, const CdiSpec& spec) {
  absl::StatusOr<std::optional<std::string>> current = ReadFileIfExists(root_ + "/" + file_name);
  return current.ok() && current->has_value() && **current == RenderSpec(spec);
}

// ---- FileClaimRecordStore -----------------------------------------------------------------------

FileClaimRecordStore::FileClaimRecordStore(std::string path) : path_(std::move(path)) {}

absl::StatusOr<std::map<std::string, ClaimRecord>> FileClaimRecordStore::Load() {
  std::map<std::string, ClaimRecord> records;
  DEVLET_ASSIGN_OR_RETURN(std::optional<std::string> content, ReadFileIfExists(path_));
  if (!content) return records;
  const std::string what = "checkpoint " + path_;
  json doc = json::parse(*content, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("data") || !doc.contains("checksum") ||
      !doc["checksum"].is_string()) {
    return DataLoss(what + " is corrupted (not a checkpoint document); move it away to start over");
  }
  if (doc.value("version", "") != kCheckpointVersion) {
    return DataLoss(what + " has version " + doc.value("version", "(none)") + ", expected " +
                    std::string(kCheckpointVersion));
  }
  const std::string data = doc["data"].dump();
  auto digest = internal::Sha256(data);
  if (internal::HexEncode(digest.data(), digest.size()) != doc["checksum"].get<std::string>()) {
    return DataLoss(what + " is corrupted (checksum mismatch); move it away to start over");
  }
  const json& claims = doc["data"]["claims"];
  if (!claims.is_object()) return DataLoss(what + " is corrupted (no claims object)");
  for (const auto& [uid, entry] : claims.items()) {
    absl::StatusOr<ClaimRecord> record = internal::RecordFromJson(entry);
    if (!record.ok()) return DataLoss(what + ": claim " + uid + ": " + Message(record.status()));
    records[uid] = *std::move(record);
  }
  return records;
}

absl::Status FileClaimRecordStore::Save(const std::map<std::string, ClaimRecord>& records) {
  ordered_json claims = ordered_json::object();
  for (const auto& [uid, record] : records) claims[uid] = internal::RecordToJson(record);
  ordered_json data = {{"claims", std::move(claims)}};
  // The checksum covers the data as json::dump renders it after a parse (sorted keys), so the
  // reader can recompute it from the parsed document.
  const std::string canonical = json::parse(data.dump()).dump();
  auto digest = internal::Sha256(canonical);
  ordered_json doc;
  doc["version"] = kCheckpointVersion;
  doc["checksum"] = internal::HexEncode(digest.data(), digest.size());
  doc["data"] = std::move(data);
  std::string dir = path_.substr(0, path_.rfind('/'));
  if (!dir.empty() && dir != path_) DEVLET_RETURN_IF_ERROR(internal::MakeDirs(dir, 0750));
  return WithContext(WriteFileAtomically(path_, doc.dump() + "\n", 0600),
                     "writing checkpoint");
}

absl::StatusOr<std::optional<ClaimRecord>> FileClaimRecordStore::Get(const std::string& claim_uid) {
  std::lock_guard lock(mutex_);
  DEVLET_ASSIGN_OR_RETURN(auto records, Load());
  auto it = records.find(claim_uid);
  if (it == records.end()) return std::optional<ClaimRecord>();
  return std::optional<ClaimRecord>(std::move(it->second));
}

absl::Status FileClaimRecordStore::Put(const ClaimRecord& record) {
  std::lock_guard lock(mutex_);
  DEVLET_ASSIGN_OR_RETURN(auto records, Load());
  records[record.claim.uid] = record;
  return Save(records);
}

absl::Status FileClaimRecordStore::Delete(const std::string& claim_uid) {
  std::lock_guard lock(mutex_);
  DEVLET_ASSIGN_OR_RETURN(auto records, Load());
  if (records.erase(claim_uid) == 0) return absl::OkStatus();
  return Save(records);
}

absl::Status FileClaimRecordStore::Commit(const std::vector<ClaimRecord>& puts,
                                         const std::vector<std::string>& deletes) {
  if (puts.empty() && deletes.empty()) return absl::OkStatus();
  std::lock_guard lock(mutex_);
  DEVLET_ASSIGN_OR_RETURN(auto records, Load());
  for (const ClaimRecord& record : puts) records[record.claim.uid] = record;
  for (const std::string& uid : deletes) records.erase(uid);
  return Save(records);
}

absl::StatusOr<std::vector<ClaimRecord>> FileClaimRecordStore::List() {
  std::lock_guard lock(mutex_);
  DEVLET_ASSIGN_OR_RETURN(auto records, Load());
  std::vector<ClaimRecord> out;
  for (auto& [uid, record] : records) out.push_back(std::move(record));
  return out;
}

}  // namespace devlet::dra_kubelet::testing
