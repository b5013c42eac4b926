// ClusterState and MemoryWriter.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
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

// ParseVersion reads a resourceVersion as the API server writes them (etcd revisions: decimal).
std::optional<uint64_t> ParseVersion(std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// UsesDevice: whether an allocation result takes its device (admin access takes nothing).
bool UsesDevice(const kube::DeviceRequestAllocationResult& result) {
  return !result.admin_access.value_or(false);
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

const allocator::Snapshot& ClusterState::snapshot_locked() const {
  if (dirty_.load(std::memory_order_acquire)) FlushSnapshot();
  return *snapshot_;
}

std::shared_ptr<const allocator::Snapshot> ClusterState::snapshot_shared_locked() const {
  if (dirty_.load(std::memory_order_acquire)) FlushSnapshot();
  return snapshot_;
}

void ClusterState::FlushSnapshot() const {
  std::lock_guard lock(snapshot_mu_);
  if (!dirty_.load(std::memory_order_relaxed)) return;
  if (pending_ && !pending_->empty()) snapshot_ = snapshot_->With(std::move(*pending_));
  pending_.reset();
  dirty_.store(false, std::memory_order_release);
}

absl::Status ClusterState::Apply(const kube::Object& object) {
  std::unique_lock lock(mu_);
  auto changes = [this]() -> allocator::SnapshotChanges& {
    if (!pending_) pending_.emplace(*snapshot_);
    return *pending_;
  };
  if (const auto* c = std::get_if<kube::DeviceClass>(&object)) {
    changes().SetClass(*c);
    dirty_.store(true);
    classes_[c->metadata.name] = *c;
    RebuildExtendedClassesLocked();
    ++global_version_;
  } else if (const auto* s = std::get_if<kube::ResourceSlice>(&object)) {
    DEVLET_RETURN_IF_ERROR(changes().SetSlice(*s));
    dirty_.store(true);
    auto [it, inserted] = slices_.try_emplace(s->metadata.name, *s);
    if (!inserted) {
      IndexSliceLocked(it->second, -1);
      it->second = *s;
    }
    IndexSliceLocked(it->second, +1);
  } else if (const auto* r = std::get_if<kube::DeviceTaintRule>(&object)) {
    taint_rules_[r->metadata.name] = *r;
    std::vector<kube::DeviceTaintRule> rules;
    for (const auto& [name, rule] : taint_rules_) rules.push_back(rule);
    // Pending slices were compiled with the old rules: apply them first.
    FlushSnapshot();
    DEVLET_ASSIGN_OR_RETURN(snapshot_, snapshot_->WithTaintRules(std::move(rules)));
    ++global_version_;
  } else if (const auto* claim = std::get_if<kube::ResourceClaim>(&object)) {
    DEVLET_RETURN_IF_ERROR(ApplyClaimLocked(*claim));
  } else if (const auto* n = std::get_if<kube::Node>(&object)) {
    kube::Node& stored = nodes_[n->metadata.name] = *n;
    node_allocatable_[n->metadata.name] = allocator::NodeAllocatableResources(*n);
    NodeRecord& record = node_records_[n->metadata.name];
    ++record.version;
    record.node = &stored;
  } else if (const auto* p = std::get_if<kube::Pod>(&object)) {
    pods_[Key(p->metadata)] = *p;
  }
  return absl::OkStatus();
}

absl::Status ClusterState::Delete(const kube::Object& object) {
  std::unique_lock lock(mu_);
  const kube::ObjectMeta& meta = kube::MetadataOf(object);
  auto changes = [this]() -> allocator::SnapshotChanges& {
    if (!pending_) pending_.emplace(*snapshot_);
    return *pending_;
  };
  if (std::holds_alternative<kube::DeviceClass>(object)) {
    changes().RemoveClass(meta.name);
    dirty_.store(true);
    classes_.erase(meta.name);
    RebuildExtendedClassesLocked();
    ++global_version_;
  } else if (std::holds_alternative<kube::ResourceSlice>(object)) {
    changes().RemoveSlice(meta.name);
    dirty_.store(true);
    if (auto it = slices_.find(meta.name); it != slices_.end()) {
      IndexSliceLocked(it->second, -1);
      slices_.erase(it);
    }
  } else if (std::holds_alternative<kube::DeviceTaintRule>(object)) {
    taint_rules_.erase(meta.name);
    std::vector<kube::DeviceTaintRule> rules;
    for (const auto& [name, rule] : taint_rules_) rules.push_back(rule);
    FlushSnapshot();
    DEVLET_ASSIGN_OR_RETURN(snapshot_, snapshot_->WithTaintRules(std::move(rules)));
    ++global_version_;
  } else if (std::holds_alternative<kube::ResourceClaim>(object)) {
    DeleteClaimLocked(Key(meta));
  } else if (std::holds_alternative<kube::Node>(object)) {
    nodes_.erase(meta.name);
    node_allocatable_.erase(meta.name);
    NodeRecord& record = node_records_[meta.name];
    ++record.version;
    record.node = nullptr;
  } else if (std::holds_alternative<kube::Pod>(object)) {
    pods_.erase(Key(meta));
  }
  return absl::OkStatus();
}

namespace {

std::string PoolKey(std::string_view driver, std::string_view pool) {
  std::string key(driver);
  key.push_back('\0');
  key += pool;
  return key;
}

}  // namespace

void ClusterState::BumpPoolLocked(std::string_view driver, std::string_view pool) {
  const std::string key = PoolKey(driver, pool);
  if (auto shared = pool_shared_.find(key); shared != pool_shared_.end()) {
    ++global_version_;  // a pool any node may see
    return;
  }
  // A pool nobody publishes slices for is in no node's view: its slices bump when they come.
  if (auto it = pool_nodes_.find(key); it != pool_nodes_.end()) {
    for (const auto& [node, count] : it->second) ++node_records_[node].version;
  }
}

void ClusterState::BumpAllocationLocked(const kube::AllocationResult& allocation) {
  for (const auto& r : allocation.devices.results) BumpPoolLocked(r.driver, r.pool);
}

namespace {

// Adds (delta > 0) or removes `slice` in the list at `key`.
void IndexInto(std::map<std::string, std::vector<const kube::ResourceSlice*>, std::less<>>& index,
               const std::string& key, const kube::ResourceSlice& slice, int delta) {
  auto& list = index[key];
  if (delta > 0) {
    list.push_back(&slice);
  } else {
    std::erase(list, &slice);
  }
  if (list.empty()) index.erase(key);
}

}  // namespace

void ClusterState::IndexSliceLocked(const kube::ResourceSlice& slice, int delta) {
  // Before and after the change, every node that sees the pool is touched.
  BumpPoolLocked(slice.spec.driver, slice.spec.pool.name);
  const std::string key = PoolKey(slice.spec.driver, slice.spec.pool.name);
  IndexInto(pool_slices_, key, slice, delta);
  if (slice.spec.node_name) IndexInto(node_slices_, *slice.spec.node_name, slice, delta);
  const bool has_node = slice.spec.node_name && !slice.spec.node_name->empty();
  if (!has_node) {
    ++global_version_;
    if ((pool_shared_[key] += delta) <= 0) pool_shared_.erase(key);
    return;
  }
  ++node_records_[*slice.spec.node_name].version;
  auto& nodes = pool_nodes_[key];
  if ((nodes[*slice.spec.node_name] += delta) <= 0) nodes.erase(*slice.spec.node_name);
  if (nodes.empty()) pool_nodes_.erase(key);
}

const std::vector<const kube::ResourceSlice*>& ClusterState::slices_on_node_locked(
    std::string_view node) const {
  static const std::vector<const kube::ResourceSlice*>* const empty =
      new std::vector<const kube::ResourceSlice*>();
  auto it = node_slices_.find(node);
  return it == node_slices_.end() ? *empty : it->second;
}

const kube::Device* ClusterState::FindDeviceLocked(std::string_view driver, std::string_view pool,
                                                   std::string_view device) const {
  auto it = pool_slices_.find(PoolKey(driver, pool));
  if (it == pool_slices_.end()) return nullptr;
  for (const kube::ResourceSlice* slice : it->second) {
    for (const kube::Device& d : slice->spec.devices) {
      if (d.name == device) return &d;
    }
  }
  return nullptr;
}

ClusterState::NodeVersion ClusterState::node_version_locked(const std::string& node) const {
  auto it = node_records_.find(node);
  return NodeVersion{global_version_, it == node_records_.end() ? 0 : it->second.version};
}

ClusterState::NodeEntry ClusterState::node_entry_locked(const std::string& name) const {
  auto it = node_records_.find(name);
  if (it == node_records_.end()) return NodeEntry{nullptr, NodeVersion{global_version_, 0}};
  return NodeEntry{it->second.node, NodeVersion{global_version_, it->second.version}};
}

void ClusterState::RebuildExtendedClassesLocked() {
  std::vector<const kube::DeviceClass*> classes;
  classes.reserve(classes_.size());
  for (const auto& [name, c] : classes_) classes.push_back(&c);
  extended_classes_ = allocator::ExtendedResourceClasses::Build(classes);
}

const std::set<std::string>* ClusterState::node_allocatable_locked(const std::string& name) const {
  auto it = node_allocatable_.find(name);
  return it == node_allocatable_.end() ? nullptr : &it->second;
}

absl::Status ClusterState::ApplyClaimLocked(const kube::ResourceClaim& claim) {
  const std::string key = Key(claim.metadata);
  auto old = claims_.find(key);
  if (old != claims_.end() && old->second.metadata.uid == claim.metadata.uid) {
    // Bind applies its own writes at once; the watch's older event of the same claim, arriving
    // after, must not take the allocation back out (its device would look free until the watch
    // caught up).
    std::optional<uint64_t> have = ParseVersion(old->second.metadata.resource_version);
    std::optional<uint64_t> got = ParseVersion(claim.metadata.resource_version);
    if (have && got && *got < *have) return absl::OkStatus();
  }
  bool allocation_changed = false;
  if (claim.status.allocation) {
    DEVLET_RETURN_IF_ERROR(WithContext(allocated_.Add(*claim.status.allocation),
                                       "ResourceClaim \"" + key + "\": status.allocation"));
    // Unchanged allocations (a reservedFor update) leave the versions alone.
    allocation_changed = old == claims_.end() || !old->second.status.allocation ||
                         !(*old->second.status.allocation == *claim.status.allocation);
    if (allocation_changed) BumpAllocationLocked(*claim.status.allocation);
  }
  uint64_t sequence = 0;
  if (auto it = allocation_sequence_of_.find(key); it != allocation_sequence_of_.end()) {
    sequence = it->second;
  }
  DeleteClaimLocked(key);
  // The claim's own allocation replaces an allocation held for it between reservation and write.
  if (claim.status.allocation) {
    ReleaseLocked(claim.metadata.uid);
    allocation_sequence_of_[key] = allocation_changed ? ++allocation_sequence_ : sequence;
  }
  claims_[key] = claim;
  return absl::OkStatus();
}

void ClusterState::DeleteClaimLocked(const std::string& key) {
  auto it = claims_.find(key);
  if (it == claims_.end()) return;
  if (it->second.status.allocation) {
    (void)allocated_.Remove(*it->second.status.allocation);
    BumpAllocationLocked(*it->second.status.allocation);
  }
  allocation_sequence_of_.erase(key);
  claims_.erase(it);
}

void ClusterState::ObserveClaimsThrough(std::string_view resource_version) {
  std::optional<uint64_t> version = ParseVersion(resource_version);
  if (!version) return;
  {
    std::lock_guard lock(observed_mu_);
    if (*version <= observed_claims_version_) return;
    observed_claims_version_ = *version;
  }
  observed_cv_.notify_all();
}

bool ClusterState::WaitClaimsObserved(std::string_view resource_version,
                                      std::chrono::steady_clock::time_point deadline) const {
  std::optional<uint64_t> version = ParseVersion(resource_version);
  if (!version) return false;
  std::unique_lock lock(observed_mu_);
  return observed_cv_.wait_until(lock, deadline,
                                 [&] { return observed_claims_version_ >= *version; });
}

std::string ClusterState::PeerConflictLocked(const std::string& uid,
                                             const kube::AllocationResult& allocation,
                                             uint64_t since) const {
  // What `allocation` takes: devices, and the counter sets they draw on.
  auto counter_sets = [this](const kube::DeviceRequestAllocationResult& result) {
    std::set<std::string> out;
    const kube::Device* device = FindDeviceLocked(result.driver, result.pool, result.device);
    if (device == nullptr) return out;
    for (const auto& consumption : device->consumes_counters) {
      out.insert(result.driver + '\0' + result.pool + '\0' + consumption.counter_set);
    }
    return out;
  };
  std::set<std::string> devices;
  std::set<std::string> counters;
  for (const auto& result : allocation.devices.results) {
    if (!UsesDevice(result)) continue;
    devices.insert(result.driver + '\0' + result.pool + '\0' + result.device);
    counters.merge(counter_sets(result));
  }
  if (devices.empty()) return "";
  for (const auto& [key, sequence] : allocation_sequence_of_) {
    if (sequence <= since) continue;
    auto it = claims_.find(key);
    if (it == claims_.end() || it->second.metadata.uid == uid || !it->second.status.allocation) {
      continue;
    }
    for (const auto& result : it->second.status.allocation->devices.results) {
      if (!UsesDevice(result)) continue;
      const bool same_device =
          devices.contains(result.driver + '\0' + result.pool + '\0' + result.device);
      bool same_counters = false;
      if (!same_device && !counters.empty()) {
        for (const auto& set : counter_sets(result)) same_counters |= counters.contains(set);
      }
      if (same_device || same_counters) {
        return "device " + result.driver + "/" + result.pool + "/" + result.device +
               (same_device ? "" : " (its counters)") + " is also allocated to ResourceClaim \"" +
               key + "\"";
      }
    }
  }
  return "";
}

absl::Status ClusterState::HoldLocked(const std::string& uid,
                                      const kube::AllocationResult& allocation) {
  ReleaseLocked(uid);
  DEVLET_RETURN_IF_ERROR(allocated_.Add(allocation));
  held_[uid] = allocation;
  BumpAllocationLocked(allocation);
  return absl::OkStatus();
}

void ClusterState::ReleaseLocked(const std::string& uid) {
  auto it = held_.find(uid);
  if (it == held_.end()) return;
  (void)allocated_.Remove(it->second);
  BumpAllocationLocked(it->second);
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

absl::StatusOr<kube::Pod> MemoryWriter::GetPod(std::string_view ns, std::string_view name) {
  std::optional<kube::Pod> pod = state_.GetPod(ns, name);
  if (!pod) return NotFound("Pod \"" + Key(ns, name) + "\" not found");
  std::lock_guard lock(mu_);
  auto it = bindings_.find(Key(ns, name));
  if (it != bindings_.end()) pod->spec.node_name = it->second;
  return *pod;
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

absl::Status MemoryWriter::SetPodExtendedResourceClaimStatus(
    std::string_view ns, std::string_view name, std::string_view uid,
    const kube::PodExtendedResourceClaimStatus& status) {
  std::lock_guard lock(mu_);
  const std::string key = Key(ns, name);
  if (std::optional<kube::Pod> pod = state_.GetPod(ns, name)) {
    if (!uid.empty() && pod->metadata.uid != uid) {
      return FailedPrecondition("Pod \"" + key + "\": UID " + std::string(uid) +
                                " does not match the stored pod's " + pod->metadata.uid);
    }
    pod->status.extended_resource_claim_status = status;
    DEVLET_RETURN_IF_ERROR(state_.Apply(*pod));
  }
  extended_statuses_[key] = status;
  return absl::OkStatus();
}

std::map<std::string, kube::PodExtendedResourceClaimStatus>
MemoryWriter::extended_resource_claim_statuses() {
  std::lock_guard lock(mu_);
  return extended_statuses_;
}

std::map<std::string, std::string> MemoryWriter::bindings() {
  std::lock_guard lock(mu_);
  return bindings_;
}

}  // namespace devlet::extender
