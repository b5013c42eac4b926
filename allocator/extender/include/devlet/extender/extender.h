// File: devlet/extender/extender.h
//
// devlet-extender's logic: the structured allocator served to kube-scheduler as an extender
// (k8s.io/kube-scheduler/extender/v1, research §7). The verbs take and return the scheduler's JSON
// (Go field names: `Pod`, `Nodes`, `NodeNames`, `FailedNodes`, `Host`, `Score`, ...); the HTTP
// server (devlet/extender/server.h) only routes bodies to them.
//
//   ClusterState state(features);
//   DEVLET_RETURN_IF_ERROR(state.Apply(object));     // every object of the first full sync
//   state.MarkSynced();
//   MemoryWriter writer(state);                      // or an API-server backed ClusterWriter
//   Extender extender(state, writer, {.mode = Mode::kAllocate});
//   std::string reply = extender.Filter(request_body);
//
// Concurrency: Filter and Prioritize run concurrently with each other (shared lock on the state);
// Bind allocates on a snapshot of the state outside the lock and takes the exclusive lock only to
// hold the devices, after checking that the node's state did not change meanwhile (else it
// searches again), so two pods racing for one device never both bind and a slow search blocks
// nobody. Every verb's search is bounded by Options::filter_timeout while the
// DRASchedulerFilterTimeout gate is on. Watch events (Apply/Delete) take the exclusive lock
// and update the allocator's snapshot incrementally (Snapshot::WithSlice etc.), never rebuilding it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/allocator/allocator.h"
#include "devlet/allocator/extended_resources.h"
#include "devlet/allocator/features.h"
#include "devlet/kube/codec.h"

namespace devlet::extender {

// Mode chooses what the extender does (`--mode`).
enum class Mode {
  // kScore: alongside the scheduler's DynamicResources plugin. Filter rejects only nodes that
  // cannot fit even with every device free; Prioritize scores 0-10; no bind verb.
  kScore,
  // kAllocate: the extender owns DRA allocation: Filter runs the allocator per node; Bind writes
  // the claims' status.allocation + reservedFor and binds the pod.
  kAllocate,
};

// Policy chooses how Prioritize weighs the use of a node's devices (`--policy`).
enum class Policy {
  kBinPack,  // prefer nodes whose devices are already in use (keep whole nodes free)
  kSpread,   // prefer nodes with the most free devices
};

// ParseMode / ParsePolicy read the flag values "score"|"allocate" and "binpack"|"spread".
absl::StatusOr<Mode> ParseMode(std::string_view text);
absl::StatusOr<Policy> ParsePolicy(std::string_view text);

// ClusterState is the extender's view of the cluster: a compiled allocator snapshot, the allocated
// devices (from claims' status.allocation plus allocations held between reservation and write),
// claims, nodes and pods. Thread-safe.
class ClusterState {
 public:
  explicit ClusterState(allocator::Features features);

  // Apply adds or replaces one object (a watch ADDED/MODIFIED event or a listed object).
  // ResourceClaimTemplates are ignored. A slice that does not compile is an error; the state then
  // keeps the previous version of it.
  absl::Status Apply(const kube::Object& object);
  // Delete removes an object of `object`'s kind and name (a watch DELETED event).
  absl::Status Delete(const kube::Object& object);

  // MarkSynced records that the first full list was applied (/readyz turns ready).
  void MarkSynced() { synced_.store(true); }
  bool synced() const { return synced_.load(); }

  // Lookups (copies; for the verbs and tests).
  std::optional<kube::ResourceClaim> GetClaim(std::string_view ns, std::string_view name) const;
  std::optional<kube::Node> GetNode(std::string_view name) const;
  std::optional<kube::Pod> GetPod(std::string_view ns, std::string_view name) const;
  // IsAllocated reports whether a device is allocated or held.
  bool IsAllocated(std::string_view driver, std::string_view pool, std::string_view device) const;
  size_t num_slices() const;
  size_t num_held() const;

  // Internal to the extender (the verbs): the lock, the snapshot, the allocated state.
  std::shared_mutex& mutex() const { return mu_; }
  // snapshot_locked first applies the slice and class changes collected since the last call (with
  // the shared or exclusive lock held; see snapshot_mu_).
  const allocator::Snapshot& snapshot_locked() const;
  // snapshot_shared_locked is the same snapshot, shared: it stays valid after the lock is
  // released (Bind searches on it outside the lock).
  std::shared_ptr<const allocator::Snapshot> snapshot_shared_locked() const;
  // NodeVersion identifies the state an allocation on one node sees: it changes whenever
  // anything that allocation depends on may have changed — the node's Node object, the slices
  // of the pools the node sees and their allocations and holds (tracked per node), classes,
  // taint rules and node-less slices (tracked globally). Equal versions mean an allocation would
  // come out the same, which lets the verbs reuse per-node results. Lock held.
  struct NodeVersion {
    uint64_t global = 0;
    uint64_t node = 0;
    friend bool operator==(const NodeVersion&, const NodeVersion&) = default;
  };
  NodeVersion node_version_locked(const std::string& node) const;
  // NodeEntry is a node's Node object (null when there is none) and version, found with one
  // lookup: the verbs ask for every candidate node of every request.
  struct NodeEntry {
    const kube::Node* node = nullptr;
    NodeVersion version;
  };
  NodeEntry node_entry_locked(const std::string& name) const;
  const allocator::AllocatedState& allocated_locked() const { return allocated_; }
  std::vector<const kube::ResourceClaim*> claims_locked() const;
  const std::map<std::string, kube::DeviceClass>& classes_locked() const { return classes_; }
  const std::map<std::string, kube::ResourceSlice>& slices_locked() const { return slices_; }
  const std::map<std::string, kube::Node>& nodes_locked() const { return nodes_; }
  // The ResourceSlices whose spec.nodeName is `node` (maintained per event, not per request).
  const std::vector<const kube::ResourceSlice*>& slices_on_node_locked(std::string_view node) const;
  // FindDeviceLocked returns a device by driver, pool and name, or null.
  const kube::Device* FindDeviceLocked(std::string_view driver, std::string_view pool,
                                       std::string_view device) const;
  // The DeviceClasses serving extended resources (DRAExtendedResource), kept with the classes.
  const allocator::ExtendedResourceClasses& extended_resource_classes_locked() const {
    return extended_classes_;
  }
  // The names a known Node lists in status.allocatable (served by a device plugin there), or
  // null for a node without a Node object. Parsed once per Node update, not per request.
  const std::set<std::string>* node_allocatable_locked(const std::string& name) const;
  const kube::ResourceClaim* FindClaimLocked(std::string_view ns, std::string_view name) const;
  // Hold records `allocation` for the claim with `uid` as in flight (exclusive lock held).
  absl::Status HoldLocked(const std::string& uid, const kube::AllocationResult& allocation);
  // Release drops a hold (exclusive lock held); no-op if there is none.
  void ReleaseLocked(const std::string& uid);
  const allocator::Features& features() const { return features_; }

  // ---- Allocations by other replicas (Options::check_peer_allocations) ----
  // ObserveClaimsThrough records that every ResourceClaim change up to `resource_version` has been
  // applied (the claim watch's WatchEvent::progress, after the event is applied) and wakes
  // WaitClaimsObserved. A version that is not a decimal number is ignored.
  void ObserveClaimsThrough(std::string_view resource_version);
  // WaitClaimsObserved waits until ObserveClaimsThrough passed `resource_version`; false at
  // `deadline`, or at once for a version that is not a decimal number.
  bool WaitClaimsObserved(std::string_view resource_version,
                          std::chrono::steady_clock::time_point deadline) const;

  // allocation_sequence_locked counts the claim allocations applied so far (a claim's allocation
  // set or changed by Apply). Lock held.
  uint64_t allocation_sequence_locked() const { return allocation_sequence_; }

  // PeerConflictLocked describes a claim other than `uid` whose allocation was applied after
  // `since` (an allocation_sequence_locked() value) and uses a device of `allocation`, or a counter
  // set one of its devices consumes; empty when there is none. Admin-access results use nothing.
  // Shared devices count as used: the check may refuse a share that would have fit. Lock held.
  std::string PeerConflictLocked(const std::string& uid, const kube::AllocationResult& allocation,
                                 uint64_t since) const;

 private:
  absl::Status ApplyClaimLocked(const kube::ResourceClaim& claim);
  void DeleteClaimLocked(const std::string& key);
  void RebuildExtendedClassesLocked();
  // Version bookkeeping (see NodeVersion); exclusive lock held.
  void BumpPoolLocked(std::string_view driver, std::string_view pool);
  void BumpAllocationLocked(const kube::AllocationResult& allocation);
  void IndexSliceLocked(const kube::ResourceSlice& slice, int delta);

  // Compiles nothing; applies `pending_` to `snapshot_` (snapshot_mu_ held).
  void FlushSnapshot() const;

  allocator::Features features_;
  mutable std::shared_mutex mu_;
  std::atomic<bool> synced_{false};
  // Slice and class events are compiled when they arrive (so Apply reports a bad slice) and
  // collected in pending_; the first reader of the snapshot applies them all at once
  // (Snapshot::With), so a burst of events — the first sync, a relist — costs one re-index of the
  // snapshot instead of one per event. Writers of pending_ hold mu_ exclusively; readers hold it
  // shared and serialize the flush with snapshot_mu_. Once flushed, nothing can change the
  // snapshot until mu_ is released, so references handed out under the lock stay valid.
  mutable std::mutex snapshot_mu_;
  mutable std::atomic<bool> dirty_{false};
  mutable std::shared_ptr<const allocator::Snapshot> snapshot_;
  mutable std::optional<allocator::SnapshotChanges> pending_;
  allocator::AllocatedState allocated_;
  std::map<std::string, kube::DeviceClass> classes_;
  std::map<std::string, kube::ResourceSlice> slices_;
  std::map<std::string, kube::DeviceTaintRule> taint_rules_;
  std::map<std::string, kube::ResourceClaim> claims_;  // "ns/name"
  std::map<std::string, kube::Node> nodes_;
  std::map<std::string, std::set<std::string>> node_allocatable_;
  allocator::ExtendedResourceClasses extended_classes_;
  std::map<std::string, kube::Pod> pods_;  // "ns/name"
  std::map<std::string, kube::AllocationResult> held_;  // claim uid -> in-flight allocation
  // Per claim ("ns/name"): allocation_sequence_ when its current allocation was applied.
  std::unordered_map<std::string, uint64_t> allocation_sequence_of_;
  uint64_t allocation_sequence_ = 0;
  // What the claim watch has delivered (ObserveClaimsThrough); its own lock, not mu_, so that
  // waiting binds do not hold up the watch.
  mutable std::mutex observed_mu_;
  mutable std::condition_variable observed_cv_;
  uint64_t observed_claims_version_ = 0;
  uint64_t global_version_ = 0;
  struct NodeRecord {
    uint64_t version = 0;
    const kube::Node* node = nullptr;  // into nodes_
  };
  std::unordered_map<std::string, NodeRecord> node_records_;
  // Per pool (driver + '\0' + pool): the nodes with slices in it (by spec.nodeName, with a slice
  // count), and how many of its slices have no node name (visible to any node).
  std::map<std::string, std::map<std::string, int>, std::less<>> pool_nodes_;
  std::map<std::string, int, std::less<>> pool_shared_;
  // Slices by spec.nodeName and by pool (pointers into slices_, whose nodes are stable).
  std::map<std::string, std::vector<const kube::ResourceSlice*>, std::less<>> node_slices_;
  std::map<std::string, std::vector<const kube::ResourceSlice*>, std::less<>> pool_slices_;
};

// LoadManifests applies every object in the YAML/JSON files (*.yaml, *.yml, *.json) under `dir`
// (recursively, in name order) to `state` and marks it synced. Unknown kinds are skipped; a file
// that does not decode is an error naming it.
absl::Status LoadManifests(const std::string& dir, ClusterState& state);

// ClusterWriter is how Bind writes to the cluster (an API server, or memory in standalone mode).
// Errors follow devlet/kube/client.h: a stale resourceVersion is Aborted (409 Conflict), a missing
// object NotFound.
class ClusterWriter {
 public:
  virtual ~ClusterWriter() = default;
  // GetClaim reads the current claim (after a conflict).
  virtual absl::StatusOr<kube::ResourceClaim> GetClaim(std::string_view ns,
                                                       std::string_view name) = 0;
  // GetPod reads the current pod (is it bound already?).
  virtual absl::StatusOr<kube::Pod> GetPod(std::string_view ns, std::string_view name) = 0;
  // CreateClaim creates a claim (the pod's synthesized extended-resource claim).
  virtual absl::StatusOr<kube::ResourceClaim> CreateClaim(const kube::ResourceClaim& claim) = 0;
  // UpdateClaimStatus writes claim.status with claim.metadata.resourceVersion as precondition.
  virtual absl::StatusOr<kube::ResourceClaim> UpdateClaimStatus(
      const kube::ResourceClaim& claim) = 0;
  // BindPod binds the pod to `node` (pods/binding), checking its UID when `uid` is not empty.
  virtual absl::Status BindPod(std::string_view ns, std::string_view name, std::string_view uid,
                               std::string_view node) = 0;
  // SetPodExtendedResourceClaimStatus writes the pod's status.extendedResourceClaimStatus (which
  // synthesized claim serves which container's extended resources; the kubelet reads it to hand
  // the claim's devices to those containers), checking the pod's UID when `uid` is not empty.
  virtual absl::Status SetPodExtendedResourceClaimStatus(
      std::string_view ns, std::string_view name, std::string_view uid,
      const kube::PodExtendedResourceClaimStatus& status) = 0;
};

// MemoryWriter is a ClusterWriter over the ClusterState itself (standalone `--manifests` mode and
// tests): writes check resourceVersion, bump it and are applied to the state like watch events.
class MemoryWriter : public ClusterWriter {
 public:
  explicit MemoryWriter(ClusterState& state) : state_(state) {}
  absl::StatusOr<kube::ResourceClaim> GetClaim(std::string_view ns,
                                               std::string_view name) override;
  // The state's pod, spec.nodeName set when this writer bound it.
  absl::StatusOr<kube::Pod> GetPod(std::string_view ns, std::string_view name) override;
  absl::StatusOr<kube::ResourceClaim> CreateClaim(const kube::ResourceClaim& claim) override;
  absl::StatusOr<kube::ResourceClaim> UpdateClaimStatus(const kube::ResourceClaim& claim) override;
  absl::Status BindPod(std::string_view ns, std::string_view name, std::string_view uid,
                       std::string_view node) override;
  // Applied to the pod when the state holds it; recorded either way.
  absl::Status SetPodExtendedResourceClaimStatus(
      std::string_view ns, std::string_view name, std::string_view uid,
      const kube::PodExtendedResourceClaimStatus& status) override;

  // bindings returns "ns/name" -> node for every pod bound so far.
  std::map<std::string, std::string> bindings();
  // extended_resource_claim_statuses returns "ns/name" -> the status written for that pod.
  std::map<std::string, kube::PodExtendedResourceClaimStatus> extended_resource_claim_statuses();

 private:
  ClusterState& state_;
  std::map<std::string, std::string> bindings_;
  std::map<std::string, kube::PodExtendedResourceClaimStatus> extended_statuses_;
  std::mutex mu_;  // serializes read-check-write
  int64_t next_version_ = 1000000;
};

// Options configure the verbs.
struct Options {
  Mode mode = Mode::kScore;
  Policy policy = Policy::kBinPack;
  // Per-request deadline of the allocator's search in filter, prioritize and bind (upstream's
  // filterTimeout), applied while the DRASchedulerFilterTimeout gate is on; zero disables. The
  // default is kube-scheduler's default extender HTTP timeout (5 s) rather than the in-tree
  // plugin's 10 s: an answer after the scheduler stopped waiting is wasted work.
  std::chrono::milliseconds filter_timeout{5000};
  // Threads for Filter's per-node allocations (0: hardware concurrency).
  int parallelism = 0;
  // Conflict retries per claim in Bind.
  int bind_retries = 5;
  // Reuse per-node outcomes of filter and prioritize while a node's state
  // (ClusterState::NodeVersion) and the pod's claim specs are unchanged. Off: every request
  // allocates on every node (for measuring the allocator).
  bool reuse_results = true;
  // Several replicas serve one scheduler (`--check-peer-allocations`): each has its own
  // watch-fed state, so within the watch's lag two replicas can give one device to two claims.
  // With this on, Bind, after writing its claims' allocations and before binding the pod, waits
  // until the claim watch has delivered every claim change up to its own writes (watch events
  // come in etcd order), then refuses — takes its writes back, fails the bind, the scheduler
  // retries the pod — if a claim whose allocation it did not know when it searched now uses one
  // of its devices: that claim was written first. The first writer keeps; two binds can both
  // refuse (each saw the other), never both keep. Needs an API server (ordered
  // resourceVersions); costs one watch round trip per bind.
  bool check_peer_allocations = false;
  // How long Bind waits for the watch to deliver its writes; past it, the bind fails closed.
  std::chrono::milliseconds peer_check_timeout{5000};
};

// Counters are what /metrics exports.
struct Counters {
  std::atomic<int64_t> filter_requests{0};
  std::atomic<int64_t> prioritize_requests{0};
  std::atomic<int64_t> bind_requests{0};
  std::atomic<int64_t> bind_failures{0};
  std::atomic<int64_t> bad_requests{0};
  std::atomic<int64_t> conflicts{0};
  // Binds whose search (run on a snapshot, outside the lock) found the node changed when it came
  // to hold the devices, and searched again.
  std::atomic<int64_t> bind_reserve_retries{0};
  // check_peer_allocations: binds checked, binds refused (another claim took a device first, or
  // the watch did not catch up in time), and the time spent waiting and checking.
  std::atomic<int64_t> peer_checks{0};
  std::atomic<int64_t> peer_conflicts{0};
  std::atomic<int64_t> peer_check_micros_total{0};
  std::atomic<int64_t> filter_micros_total{0};
  std::atomic<int64_t> prioritize_micros_total{0};
};

// Extender implements the verbs on JSON bodies. Every verb returns a JSON reply the scheduler
// understands; problems go into its `Error` field (so the scheduler's `ignorable` decides).
class Extender {
 public:
  Extender(ClusterState& state, ClusterWriter& writer, Options options);
  ~Extender();

  // Filter: ExtenderArgs -> ExtenderFilterResult.
  std::string Filter(std::string_view body);
  // Prioritize: ExtenderArgs -> HostPriorityList (errors: an empty list; see LastError in logs).
  std::string Prioritize(std::string_view body);
  // Bind: ExtenderBindingArgs -> ExtenderBindingResult.
  std::string Bind(std::string_view body);

  const Counters& counters() const { return counters_; }
  const Options& options() const { return options_; }
  ClusterState& state() { return state_; }
  const ClusterState& state() const { return state_; }

 private:
  // PodToBind finds the pod Bind is asked to bind: from the state, else as the last Filter saw it
  // (a pod the watch has not delivered yet); a UID that does not match is an error.
  absl::StatusOr<kube::Pod> PodToBind(const std::string& ns, const std::string& name,
                                      const std::string& uid);

  ClusterState& state_;
  ClusterWriter& writer_;
  Options options_;
  Counters counters_;
  std::mutex pods_mu_;
  // "ns/name" -> pod from the last Filter, allocate mode, until it is bound (at most 10,000).
  std::map<std::string, kube::Pod> pods_seen_;
  struct Cache;  // per-node outcomes (extender.cc)
  std::unique_ptr<Cache> cache_;
};

}  // namespace devlet::extender
