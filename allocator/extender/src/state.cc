// ClusterState and MemoryWriter.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <shared_mutex>
#include <string>
#include <variant>

#include "devlet/common/status.h"
#include "devlet/extender/extender.h"

namespace devlet::extender {
namespace {

std::string Key(const kube::ObjectMeta& meta) {
  return meta.namespace_.empty() ? meta.name : meta.namespace_ + "/" + meta.name;
}

std::string Key(std::string_view ns, std::string_view name) {
  return ns.empty() ? std::string(name) : std::string(ns) + "/" + std::string(name);
}

}  // namespace

absl::StatusOr<Mode> ParseMode(std::string_view text) {
  if (text == "score") return Mode::kScore;
  if (text == "allocate") return Mode::kAllocate;
  return InvalidArgument("--mode: want score or allocate, got \"" + std::string(text) + "\"");
}

absl::StatusOr<Policy> ParsePolicy(std::string_view text) {
  if (text == "binpack") return Policy::kBinPack;
  if (text == "spread") return Policy::kSpread;
  return InvalidArgument("--policy: want binpack or spread, got \"" + std::string(text) + "\"");
}

ClusterState::ClusterState(allocator::Features features) : features_(features) {
  auto snapshot = allocator::Snapshot::Build(features_, {}, {}, {});
  // An empty snapshot always builds.
  snapshot_ = snapshot.ok() ? *snapshot : nullptr;
}

absl::Status ClusterState::Apply(const kube::Object& object) {
  std::unique_lock lock(mu_);
  if (const auto* c = std::get_if<kube::DeviceClass>(&object)) {
    DEVLET_ASSIGN_OR_RETURN(snapshot_, snapshot_->WithClass(*c));
    classes_[c->metadata.name] = *c;
  } else if (const auto* s = std::get_if<kube::ResourceSlice>(&object)) {
    DEVLET_ASSIGN_OR_RETURN(snapshot_, snapshot_->WithSlice(*s));
    slices_[s->metadata.name] = *s;
  } else if (const auto* r = std::get_if<kube::DeviceTaintRule>(&object)) {
    taint_rules_[r->metadata.name] = *r;
    std::vector<kube::DeviceTaintRule> rules;
    for (const auto& [name, rule] : taint_rules_) rules.push_back(rule);
    DEVLET_ASSIGN_OR_RETURN(snapshot_, snapshot_->WithTaintRules(std::move(rules)));
  } else if (const auto* claim = std::get_if<kube::ResourceClaim>(&object)) {
    return ApplyClaimLocked(*claim);
  } else if (const auto* n = std::get_if<kube::Node>(&object)) {
    nodes_[n->metadata.name] = *n;
  } else if (const auto* p = std::get_if<kube::Pod>(&object)) {
    pods_[Key(p->metadata)] = *p;
  }
  return absl::OkStatus();
}

absl::Status ClusterState::Delete(const kube::Object& object) {
  std::unique_lock lock(mu_);
  const kube::ObjectMeta& meta = kube::MetadataOf(object);
  if (std::holds_alternative<kube::DeviceClass>(object)) {
    DEVLET_ASSIGN_OR_RETURN(snapshot_, snapshot_->WithoutClass(meta.name));
    classes_.erase(meta.name);
  } else if (std::holds_alternative<kube::ResourceSlice>(object)) {
    DEVLET_ASSIGN_OR_RETURN(snapshot_, snapshot_->WithoutSlice(meta.name));
    slices_.erase(meta.name);
  } else if (std::holds_alternative<kube::DeviceTaintRule>(object)) {
    taint_rules_.erase(meta.name);
    std::vector<kube::DeviceTaintRule> rules;
    for (const auto& [name, rule] : taint_rules_) rules.push_back(rule);
    DEVLET_ASSIGN_OR_RETURN(snapshot_, snapshot_->WithTaintRules(std::move(rules)));
  } else if (std::holds_alternative<kube::ResourceClaim>(object)) {
    DeleteClaimLocked(Key(meta));
  } else if (std::holds_alternative<kube::Node>(object)) {
    nodes_.erase(meta.name);
  } else if (std::holds_alternative<kube::Pod>(object)) {
    pods_.erase(Key(meta));
  }
  return absl::OkStatus();
}

absl::Status ClusterState::ApplyClaimLocked(const kube::ResourceClaim& claim) {
  const std::string key = Key(claim.metadata);
  if (claim.status.allocation) {
    DEVLET_RETURN_IF_ERROR(WithContext(allocated_.Add(*claim.status.allocation),
                                       "ResourceClaim \"" + key + "\": status.allocation"));
  }
  DeleteClaimLocked(key);
  // The claim's own allocation replaces an allocation held for it between reservation and write.
  if (claim.status.allocation) ReleaseLocked(claim.metadata.uid);
  claims_[key] = claim;
  return absl::OkStatus();
}

void ClusterState::DeleteClaimLocked(const std::string& key) {
  auto it = claims_.find(key);
  if (it == claims_.end()) return;
  if (it->second.status.allocation) (void)allocated_.Remove(*it->second.status.allocation);
  claims_.erase(it);
}

absl::Status ClusterState::HoldLocked(const std::string& uid,
                                      const kube::AllocationResult& allocation) {
  ReleaseLocked(uid);
  DEVLET_RETURN_IF_ERROR(allocated_.Add(allocation));
  held_[uid] = allocation;
  return absl::OkStatus();
}

void ClusterState::ReleaseLocked(const std::string& uid) {
  auto it = held_.find(uid);
  if (it == held_.end()) return;
  (void)allocated_.Remove(it->second);
  held_.erase(it);
}

std::optional<kube::ResourceClaim> ClusterState::GetClaim(std::string_view ns,
                                                          std::string_view name) const {
  std::shared_lock lock(mu_);
  const kube::ResourceClaim* claim = FindClaimLocked(ns, name);
  if (claim == nullptr) return std::nullopt;
  return *claim;
}

const kube::ResourceClaim* ClusterState::FindClaimLocked(std::string_view ns,
                                                         std::string_view name) const {
  auto it = claims_.find(Key(ns, name));
  return it == claims_.end() ? nullptr : &it->second;
}

std::optional<kube::Node> ClusterState::GetNode(std::string_view name) const {
  std::shared_lock lock(mu_);
  auto it = nodes_.find(std::string(name));
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::optional<kube::Pod> ClusterState::GetPod(std::string_view ns, std::string_view name) const {
  std::shared_lock lock(mu_);
  auto it = pods_.find(Key(ns, name));
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

bool ClusterState::IsAllocated(std::string_view driver, std::string_view pool,
                               std::string_view device) const {
  std::shared_lock lock(mu_);
  return allocated_.IsAllocated(driver, pool, device);
}

size_t ClusterState::num_slices() const {
  std::shared_lock lock(mu_);
  return slices_.size();
}

size_t ClusterState::num_held() const {
  std::shared_lock lock(mu_);
  return held_.size();
}

std::vector<const kube::ResourceClaim*> ClusterState::claims_locked() const {
  std::vector<const kube::ResourceClaim*> out;
  for (const auto& [key, claim] : claims_) out.push_back(&claim);
  return out;
}

absl::Status LoadManifests(const std::string& dir, ClusterState& state) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, ec), end;
  if (ec) return NotFound("--manifests " + dir + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Unavailable("--manifests " + dir + ": " + ec.message());
    const auto ext = it->path().extension().string();
    if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return NotFound("cannot read " + file.string());
    std::stringstream data;
    data << in.rdbuf();
    DEVLET_ASSIGN_OR_RETURN(
        std::vector<kube::Object> objects,
        kube::Decode(data.str(), {.source = file.string(), .skip_unknown_kinds = true}));
    for (const auto& object : objects) {
      DEVLET_RETURN_IF_ERROR(WithContext(state.Apply(object), file.string()));
    }
  }
  state.MarkSynced();
  return absl::OkStatus();
}

// ---- MemoryWriter -----------------------------------------------------------------------------

absl::StatusOr<kube::ResourceClaim> MemoryWriter::GetClaim(std::string_view ns,
                                                           std::string_view name) {
  std::optional<kube::ResourceClaim> claim = state_.GetClaim(ns, name);
  if (!claim) return NotFound("ResourceClaim \"" + Key(ns, name) + "\" not found");
  return *claim;
}

absl::StatusOr<kube::ResourceClaim> MemoryWriter::CreateClaim(const kube::ResourceClaim& claim) {
  std::lock_guard lock(mu_);
  const std::string key = Key(claim.metadata);
  if (state_.GetClaim(claim.metadata.namespace_, claim.metadata.name)) {
    return AlreadyExists("ResourceClaim \"" + key + "\" already exists");
  }
  kube::ResourceClaim created = claim;
  if (created.metadata.uid.empty()) created.metadata.uid = "uid-" + key;
  created.metadata.resource_version = std::to_string(++next_version_);
  DEVLET_RETURN_IF_ERROR(state_.Apply(created));
  return created;
}

absl::StatusOr<kube::ResourceClaim> MemoryWriter::UpdateClaimStatus(
    const kube::ResourceClaim& claim) {
  std::lock_guard lock(mu_);
  const std::string key = Key(claim.metadata);
  std::optional<kube::ResourceClaim> current =
      state_.GetClaim(claim.metadata.namespace_, claim.metadata.name);
  if (!current) return NotFound("ResourceClaim \"" + key + "\" not found");
  if (!claim.metadata.resource_version.empty() &&
      claim.metadata.resource_version != current->metadata.resource_version) {
    return absl::AbortedError("Operation cannot be fulfilled on resourceclaims \"" + key +
                              "\": the object has been modified; please apply your changes to "
                              "the latest version and try again");
  }
  current->status = claim.status;
  current->metadata.resource_version = std::to_string(++next_version_);
  DEVLET_RETURN_IF_ERROR(state_.Apply(*current));
  return *current;
}

absl::Status MemoryWriter::BindPod(std::string_view ns, std::string_view name,
                                   std::string_view uid, std::string_view node) {
  std::lock_guard lock(mu_);
  const std::string key = Key(ns, name);
  if (std::optional<kube::Pod> pod = state_.GetPod(ns, name)) {
    if (!uid.empty() && pod->metadata.uid != uid) {
      return FailedPrecondition("Pod \"" + key + "\": UID " + std::string(uid) +
                                " does not match the stored pod's " + pod->metadata.uid);
    }
    if (!pod->spec.node_name.empty()) {
      return absl::AbortedError("Pod \"" + key + "\" is already assigned to node \"" +
                                pod->spec.node_name + "\"");
    }
    pod->spec.node_name = std::string(node);
    DEVLET_RETURN_IF_ERROR(state_.Apply(*pod));
  } else if (bindings_.count(key) != 0) {
    return absl::AbortedError("Pod \"" + key + "\" is already assigned to node \"" +
                              bindings_[key] + "\"");
  }
  bindings_[key] = std::string(node);
  return absl::OkStatus();
}

std::map<std::string, std::string> MemoryWriter::bindings() {
  std::lock_guard lock(mu_);
  return bindings_;
}

}  // namespace devlet::extender
