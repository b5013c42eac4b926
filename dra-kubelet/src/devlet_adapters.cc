#include "devlet/dra_kubelet/devlet_adapters.h"

#include <dirent.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "devlet/cdi/codec.h"
#include "devlet/cdi/spec.h"
#include "devlet/cdi/spec_dir.h"
#include "devlet/common/files.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/common/strings.h"
#include "devlet/dra_kubelet/config.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/quantity.h"
#include "files.h"
#include "names.h"
#include "record_json.h"

namespace devlet::dra_kubelet {
namespace {

bool HasSuffix(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string AttributeString(const AttributeValue& value) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  return std::get<VersionValue>(value).version;
}

std::string StripJson(const std::string& file_name) {
  return HasSuffix(file_name, ".json") ? file_name.substr(0, file_name.size() - 5) : file_name;
}

}  // namespace

// ---- kube/ ---------------------------------------------------------------------------------------

ResourceClaim ResourceClaimFromKube(const kube::ResourceClaim& in) {
  ResourceClaim out;
  out.namespace_name = in.metadata.namespace_;
  out.name = in.metadata.name;
  out.uid = in.metadata.uid;
  out.generation = in.metadata.generation;
  out.annotations = in.metadata.annotations;
  for (const auto& ref : in.status.reserved_for) {
    (ref.resource == "podgroups" ? out.reserved_for_pod_groups : out.reserved_for_uids)
        .push_back(ref.uid);
  }
  if (!in.status.allocation) return out;
  const kube::AllocationResult& allocation = *in.status.allocation;
  out.allocated = true;
  for (const auto& result : allocation.devices.results) {
    AllocationResult r{result.request, result.driver,   result.pool,
                       result.device,  result.share_id, result.admin_access.value_or(false)};
    for (const auto& [name, quantity] : result.consumed_capacity) {
      std::string_view base = name;
      if (auto slash = base.rfind('/'); slash != std::string_view::npos)
        base = base.substr(slash + 1);
      if (base != "cpus" && base != "memory")
        continue;
      // Exact (kube::Quantity): "1.5Gi" and values near 2^63 stay exact.
      absl::StatusOr<std::int64_t> value =
          base == "cpus" ? kube::QuantityMilliValue(quantity) : kube::QuantityValue(quantity);
      if (!value.ok()) {
        log::Logger().Error(value.status(), "Ignoring consumed capacity", "claim",
                            out.namespace_name + "/" + out.name, "capacity", name);
        continue;
      }
      std::optional<std::int64_t>& sum = base == "cpus" ? r.cpu_millis : r.memory_bytes;
      sum = sum.value_or(0) + *value;
    }
    out.results.push_back(std::move(r));
  }
  for (const auto& config : allocation.devices.config) {
    AllocationConfig c;
    c.source = config.source == "FromClass" ? ConfigSource::kFromClass : ConfigSource::kFromClaim;
    c.requests = config.requests;
    if (config.opaque) {
      c.opaque_driver = config.opaque->driver;
      c.opaque_parameters = config.opaque->parameters.empty() ? "null" : config.opaque->parameters.json;
    }
    out.config.push_back(std::move(c));
  }
  if (allocation.node_selector) {
    for (const auto& term : allocation.node_selector->node_selector_terms) {
      for (const auto& field : term.match_fields) {
        if (field.key == "metadata.name" && field.operator_ == "In") {
          out.allocation_node_names.insert(out.allocation_node_names.end(), field.values.begin(),
                                           field.values.end());
        }
      }
    }
  }
  return out;
}

ManifestClaimSource::ManifestClaimSource(std::string dir) : dir_(std::move(dir)) {}

absl::StatusOr<ResourceClaim> ManifestClaimSource::GetClaim(const std::string& namespace_name,
                                                            const std::string& name,
                                                            const std::string& /*uid*/) {
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (dirent* entry = ::readdir(d)) {
      std::string file = entry->d_name;
      if (file[0] != '.' &&
          (HasSuffix(file, ".json") || HasSuffix(file, ".yaml") || HasSuffix(file, ".yml"))) {
        files.push_back(dir_ + "/" + file);
      }
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  std::string errors;
  for (const std::string& path : files) {
    DEVLET_ASSIGN_OR_RETURN(std::optional<std::string> content, ReadFileIfExists(path));
    if (!content) continue;
    kube::DecodeOptions options;
    options.source = path;
    options.skip_unknown_kinds = true;  // The directory also holds Pods, DeviceClasses, ...
    absl::StatusOr<std::vector<kube::Object>> objects = kube::Decode(*content, options);
    if (!objects.ok()) {
      errors += "; " + Message(objects.status());
      continue;
    }
    for (const kube::Object& object : *objects) {
      const auto* claim = std::get_if<kube::ResourceClaim>(&object);
      if (claim != nullptr && claim->metadata.namespace_ == namespace_name &&
          claim->metadata.name == name) {
        return ResourceClaimFromKube(*claim);
      }
    }
  }
  return NotFound("ResourceClaim " + namespace_name + "/" + name + " not found in " + dir_ +
                  errors);
}

// ---- cdi/ ----------------------------------------------------------------------------------------

CdiSpecWriter::CdiSpecWriter(std::string cdi_root, bool sync)
    : root_(std::move(cdi_root)), sync_(sync) {}

namespace {

cdi::Spec ToCdiSpec(const CdiSpec& spec) {
  cdi::Spec out;
  out.kind = spec.kind;
  for (const CdiDevice& device : spec.devices) {
    cdi::Device d;
    d.name = device.name;
    d.container_edits = ToCdiEdits(device.edits);
    out.devices.push_back(std::move(d));
  }
  // At least the version we were asked for (0.5.0 for names starting with a digit).
  out.version = cdi::MinimumRequiredVersion(out);
  if (cdi::CompareVersions(spec.cdi_version, out.version) > 0) out.version = spec.cdi_version;
  return out;
}

}  // namespace

absl::Status CdiSpecWriter::WriteSpec(const std::string& file_name, const CdiSpec& spec) {
  cdi::WriteSpecOptions options;
  options.sync = sync_;
  absl::StatusOr<std::string> written =
      cdi::WriteSpec(root_, StripJson(file_name), ToCdiSpec(spec), options);
  return WithContext(written.status(), "writing CDI spec " + file_name);
}

bool CdiSpecWriter::SpecIsCurrent(const std::string& file_name, const CdiSpec& spec) {
  absl::StatusOr<std::optional<std::string>> current = ReadFileIfExists(root_ + "/" + file_name);
  return current.ok() && current->has_value() && **current == cdi::EncodeSpecJson(ToCdiSpec(spec));
}

absl::Status CdiSpecWriter::RemoveSpec(const std::string& file_name) {
  if (!internal::IsPlainFileName(file_name)) {
    return InvalidArgument("CDI spec file name " + GoQuote(file_name) + " is not a plain file name");
  }
  return cdi::RemoveSpec(root_, StripJson(file_name));
}

absl::StatusOr<std::vector<std::string>> CdiSpecWriter::ListSpecs() {
  return internal::ListJsonFiles(root_);
}

bool CdiSpecWriter::SpecExists(const std::string& file_name) {
  return internal::PathExists(root_ + "/" + file_name);
}

// ---- state/ --------------------------------------------------------------------------------------

StateClaimRecordStore::StateClaimRecordStore(std::unique_ptr<state::CheckpointStore> store,
                                           std::string driver, std::string cdi_root)
    : store_(std::move(store)), driver_(std::move(driver)), cdi_root_(std::move(cdi_root)) {}

absl::StatusOr<std::unique_ptr<StateClaimRecordStore>> StateClaimRecordStore::Open(
    const std::string& dir, std::string driver, std::string cdi_root) {
  state::StoreOptions options;
  options.dir = dir;
  return Open(options, std::move(driver), std::move(cdi_root));
}

absl::StatusOr<std::unique_ptr<StateClaimRecordStore>> StateClaimRecordStore::Open(
    const state::StoreOptions& options, std::string driver, std::string cdi_root) {
  DEVLET_ASSIGN_OR_RETURN(std::unique_ptr<state::CheckpointStore> store,
                          state::CheckpointStore::Open(options));
  return std::unique_ptr<StateClaimRecordStore>(
      new StateClaimRecordStore(std::move(store), std::move(driver), std::move(cdi_root)));
}

namespace {

// ParsedRecords memoizes, per claim UID, the plugin record decoded from the annotation's text.
// Every batch lists the whole checkpoint (it checks every claim for device conflicts), and
// parsing each record's JSON again for every batch made a lone claim's prepare cost grow with
// the claims already prepared on the node. The text is compared before a cached record is used,
// so an entry is never stale; List drops the UIDs that left the checkpoint. Keyed by store: a
// closed store's entries stay until another store takes its address (stores normally live as
// long as the process).
class ParsedRecords {
 public:
  // Parse returns the record in `text`, the annotation of claim `uid` in `owner`'s checkpoint.
  absl::StatusOr<ClaimRecord> Parse(const void* owner, const std::string& uid,
                                    const std::string& text) {
    {
      std::lock_guard lock(mu_);
      auto& records = records_[owner];
      if (auto it = records.find(uid); it != records.end() && it->second.first == text) {
        return it->second.second;
      }
    }
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      return absl::DataLossError("checkpoint entry for claim UID " + uid +
                                 " holds a malformed plugin record");
    }
    DEVLET_ASSIGN_OR_RETURN(ClaimRecord record, internal::RecordFromJson(doc));
    std::lock_guard lock(mu_);
    records_[owner].insert_or_assign(uid, std::make_pair(text, record));
    return record;
  }

  // Retain forgets `owner`'s UIDs for which `keep` is false.
  void Retain(const void* owner, const std::function<bool(const std::string&)>& keep) {
    std::lock_guard lock(mu_);
    std::erase_if(records_[owner], [&](const auto& entry) { return !keep(entry.first); });
  }

 private:
  std::mutex mu_;
  // store -> claim UID -> (annotation text, record)
  std::unordered_map<const void*,
                     std::unordered_map<std::string, std::pair<std::string, ClaimRecord>>>
      records_;
};

ParsedRecords& Parsed() {
  static ParsedRecords* const parsed = new ParsedRecords();  // never destroyed: no exit order
  return *parsed;
}

absl::StatusOr<ClaimRecord> FromState(const void* owner, const state::PreparedClaim& claim) {
  auto it = claim.annotations.find(StateClaimRecordStore::kRecordAnnotation);
  if (it == claim.annotations.end()) {
    return absl::DataLossError("checkpoint entry for claim " + claim.namespace_name + "/" + claim.name +
                    " (UID " + claim.uid + ") was not written by the kubelet plugin");
  }
  DEVLET_ASSIGN_OR_RETURN(ClaimRecord record, Parsed().Parse(owner, claim.uid, it->second));
  // The state/ fields are authoritative for what the NRI side may have changed.
  record.state = claim.state == state::ClaimState::kPrepareCompleted
                     ? ClaimState::kPrepareCompleted
                     : ClaimState::kPrepareStarted;
  record.pod_uids = claim.pod_uids;
  record.pod_group_uids = claim.pod_group_uids;
  // So are the edits and CPU/memory recorded for each device (the annotation leaves them out).
  if (record.devices.size() == claim.devices.size()) {
    for (std::size_t i = 0; i < record.devices.size(); ++i) {
      record.devices[i].container_edits = claim.devices[i].edits;
      record.devices[i].cpu_millis = claim.devices[i].cpu_millis;
      record.devices[i].memory_bytes = claim.devices[i].memory_bytes;
    }
  }
  return record;
}

}  // namespace

absl::StatusOr<std::optional<ClaimRecord>> StateClaimRecordStore::Get(
    const std::string& claim_uid) {
  DEVLET_ASSIGN_OR_RETURN(std::optional<state::PreparedClaim> claim, store_->FindClaim(claim_uid));
  if (!claim) return std::optional<ClaimRecord>();
  DEVLET_ASSIGN_OR_RETURN(ClaimRecord record, FromState(this, *claim));
  return std::optional<ClaimRecord>(std::move(record));
}

namespace {

// ToState fills the generic fields the NRI side reads and keeps the full record as an annotation.
state::PreparedClaim ToState(const ClaimRecord& record, const std::string& driver,
                             const std::string& cdi_root) {
  state::PreparedClaim claim;
  claim.uid = record.claim.uid;
  claim.namespace_name = record.claim.namespace_name;
  claim.name = record.claim.name;
  claim.state = record.state == ClaimState::kPrepareCompleted ? state::ClaimState::kPrepareCompleted
                                                              : state::ClaimState::kPrepareStarted;
  claim.pod_uids = record.pod_uids;
  claim.pod_group_uids = record.pod_group_uids;
  nlohmann::ordered_json configs = nlohmann::ordered_json::array();
  for (const PreparedDeviceRecord& device : record.devices) {
    state::PreparedDevice d;
    d.driver = driver;
    d.pool = device.pool;
    d.device = device.device;
    d.requests = device.requests;
    d.cdi_device_ids = device.cdi_device_ids;
    d.share_id = device.share_id.value_or("");
    for (const auto& [name, value] : device.prepared.attributes) {
      d.attributes[name] = AttributeString(value);
    }
    d.edits = device.container_edits;
    d.cpu_millis = device.cpu_millis;
    d.memory_bytes = device.memory_bytes;
    claim.devices.push_back(std::move(d));
    configs.push_back(nlohmann::ordered_json::parse(EncodeDeviceConfig(device.config)));
  }
  for (const std::string& name : record.cdi_spec_files) claim.files.push_back(cdi_root + "/" + name);
  for (const std::string& path : record.metadata_files) claim.files.push_back(path);
  claim.applied_config = configs.dump();
  claim.annotations[StateClaimRecordStore::kRecordAnnotation] =
      internal::RecordToJson(record, /*with_container_edits=*/false).dump();
  return claim;
}

}  // namespace

absl::Status StateClaimRecordStore::Put(const ClaimRecord& record) {
  state::PreparedClaim claim = ToState(record, driver_, cdi_root_);
  if (record.state == ClaimState::kPrepareCompleted) {
    return store_->RecordPrepareCompleted(std::move(claim));
  }
  return store_->RecordPrepareStarted(std::move(claim));
}

absl::Status StateClaimRecordStore::Commit(const std::vector<ClaimRecord>& puts,
                                          const std::vector<std::string>& deletes) {
  if (puts.empty() && deletes.empty()) return absl::OkStatus();
  // One record with exactly this batch's changes (state::CheckpointStore::Apply): the cost does
  // not grow with the claims already on the node.
  state::JournalChange change;
  change.puts.reserve(puts.size());
  for (const ClaimRecord& record : puts) {
    if (record.claim.uid.empty()) return InvalidArgument("record claim: empty claim UID");
    change.puts.push_back(ToState(record, driver_, cdi_root_));
  }
  change.deletes = deletes;
  // PrepareCompleted (and new pods of a completed claim) need not reach the disk before the
  // kubelet's answer: a kill -9 keeps the record (page cache), and a power loss only leaves the
  // claim PrepareStarted, which the kubelet's repeated prepare after the reboot redoes
  // idempotently (or its unprepare cleans up from). PrepareStarted and removals stay durable: the
  // first guards every side effect, and a lost removal would keep released devices reserved.
  const bool deferrable =
      deletes.empty() && std::all_of(puts.begin(), puts.end(), [](const ClaimRecord& r) {
        return r.state == ClaimState::kPrepareCompleted;
      });
  return deferrable ? store_->ApplyDeferred(std::move(change)) : store_->Apply(std::move(change));
}

absl::Status StateClaimRecordStore::CommitDeferred(const std::vector<ClaimRecord>& puts,
                                                  const std::vector<std::string>& deletes) {
  // A lost removal would keep released devices reserved after a power cut: removals are synced.
  if (!deletes.empty() || puts.empty()) return Commit(puts, deletes);
  state::JournalChange change;
  change.puts.reserve(puts.size());
  for (const ClaimRecord& record : puts) {
    if (record.claim.uid.empty()) return InvalidArgument("record claim: empty claim UID");
    change.puts.push_back(ToState(record, driver_, cdi_root_));
  }
  return store_->ApplyDeferred(std::move(change));
}

absl::Status StateClaimRecordStore::Delete(const std::string& claim_uid) {
  return store_->Remove(claim_uid);
}

absl::StatusOr<std::vector<ClaimRecord>> StateClaimRecordStore::List() {
  std::vector<ClaimRecord> out;
  absl::Status status;
  DEVLET_RETURN_IF_ERROR(store_->Read([&](const state::Checkpoint& checkpoint) {
    out.reserve(checkpoint.claims.size());
    for (const auto& [uid, claim] : checkpoint.claims) {
      absl::StatusOr<ClaimRecord> record = FromState(this, claim);
      if (!record.ok()) {
        status = record.status();
        return;
      }
      out.push_back(*std::move(record));
    }
    Parsed().Retain(this,
                    [&](const std::string& uid) { return checkpoint.claims.count(uid) > 0; });
  }));
  DEVLET_RETURN_IF_ERROR(status);
  return out;
}

}  // namespace devlet::dra_kubelet
