// File: devlet/allocator/allocator.h
//
// The structured allocator (KEP-4381; Kubernetes' k8s.io/dynamic-resource-allocation/structured,
// 1.37 semantics). Three pieces:
//
//   * Snapshot: the cluster's DeviceClasses, ResourceSlices (with DeviceTaintRules applied) and
//     compiled selectors, immutable once built. Slice and class changes make a new Snapshot that
//     shares every unchanged slice (and its memoized selector results) with the old one.
//   * AllocatedState: which devices (and how much consumable capacity) are already allocated,
//     maintained incrementally from claims' status.allocation.
//   * Allocate(): one pod's unallocated claims on one node, against a snapshot and a state.
//     Thread-safe: any number of Allocate calls may share a snapshot and a state, as long as
//     nobody mutates the state meanwhile.
//
//   DEVLET_ASSIGN_OR_RETURN(auto snapshot, Snapshot::Build(features, classes, slices, rules));
//   AllocatedState state;
//   for (const auto& claim : allocated_claims) state.Add(claim);
//   AllocateOutcome out = Allocate(*snapshot, node, {&claim_a, &claim_b}, state);
//   if (out.kind == AllocateOutcome::Kind::kAllocated) { out.results[0] ... }
//
// Outcomes follow upstream's contract (research §2.1): allocated (one AllocationResult per claim,
// in order), unschedulable on this node (with a reason for people), or an error for the whole pod
// (unknown class, bad CEL, disabled feature, over the limits).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/allocator/features.h"
#include "devlet/kube/core.h"
#include "devlet/kube/resource.h"

namespace devlet::allocator {

class SnapshotImpl;
class AllocatedStateImpl;
class CompiledSlice;
struct ClassEntry;
class Snapshot;

// SnapshotChanges collects slice and class changes for Snapshot::With, which applies any number of
// them with one copy and one re-index of the snapshot. Applying N slices one by one with WithSlice
// costs a copy and a re-index each, which makes a cluster's first sync quadratic (10000 slices:
// minutes); collected, it is linear. Slices are compiled when they are added, so a slice that
// does not compile is reported by SetSlice and leaves the changes as they were. Later changes to
// the same name replace earlier ones.
class SnapshotChanges {
 public:
  // Slices are compiled with `base`'s features and taint rules: apply the changes to `base` or to
  // a snapshot with the same features and rules (Snapshot::With does not recompile them).
  explicit SnapshotChanges(const Snapshot& base);
  ~SnapshotChanges();
  SnapshotChanges(SnapshotChanges&&) noexcept;
  SnapshotChanges& operator=(SnapshotChanges&&) noexcept;

  // SetSlice adds or replaces a slice (by metadata.name). Errors as Snapshot::Build's.
  absl::Status SetSlice(kube::ResourceSlice slice);
  // RemoveSlice removes a slice; removing one the snapshot does not have is not an error.
  void RemoveSlice(std::string_view name);
  // SetClass adds or replaces a DeviceClass (by metadata.name).
  void SetClass(kube::DeviceClass device_class);
  // RemoveClass removes a DeviceClass.
  void RemoveClass(std::string_view name);

  bool empty() const { return slices_.empty() && classes_.empty(); }
  // size is the number of distinct slice and class names changed.
  size_t size() const { return slices_.size() + classes_.size(); }

 private:
  friend class Snapshot;
  Features features_;
  std::vector<kube::DeviceTaintRule> rules_;
  // Null values are removals.
  std::map<std::string, std::shared_ptr<const CompiledSlice>, std::less<>> slices_;
  std::map<std::string, std::shared_ptr<const ClassEntry>, std::less<>> classes_;
};

// Snapshot is an immutable, compiled view of the cluster's devices. Share it with shared_ptr.
class Snapshot {
 public:
  // Build compiles classes, slices and taint rules. Taint rules are applied to the slices first
  // (when DRADeviceTaintRules is on). Slices that cannot be compiled (a capacity that is not a
  // quantity, ...) are an InvalidArgument error naming the slice and field: validate input first.
  // Class selectors that do not compile are not an error here: the error surfaces, like upstream,
  // when a claim uses the class.
  static absl::StatusOr<std::shared_ptr<const Snapshot>> Build(
      const Features& features, std::vector<kube::DeviceClass> classes,
      std::vector<kube::ResourceSlice> slices, std::vector<kube::DeviceTaintRule> taint_rules = {});

  // Incremental updates, for watch events: a new snapshot that shares all unchanged slices (and
  // their memoized selector results) with this one. Slices are identified by metadata.name.
  // Each call copies and re-indexes the snapshot (linear in its size): for more than one change
  // use SnapshotChanges + With.
  absl::StatusOr<std::shared_ptr<const Snapshot>> WithSlice(kube::ResourceSlice slice) const;
  absl::StatusOr<std::shared_ptr<const Snapshot>> WithoutSlice(std::string_view name) const;
  absl::StatusOr<std::shared_ptr<const Snapshot>> WithClass(kube::DeviceClass device_class) const;
  absl::StatusOr<std::shared_ptr<const Snapshot>> WithoutClass(std::string_view name) const;
  // With applies collected changes in one step. It also keeps the cached per-node views (which
  // slices and pools a node sees) of the nodes the changes do not touch, so that one slice update
  // does not make the next request rebuild every node's view.
  std::shared_ptr<const Snapshot> With(SnapshotChanges changes) const;
  // WithTaintRules replaces the set of taint rules (recompiles the slices whose taints change).
  absl::StatusOr<std::shared_ptr<const Snapshot>> WithTaintRules(
      std::vector<kube::DeviceTaintRule> taint_rules) const;

  const Features& features() const;
  size_t num_slices() const;
  size_t num_devices() const;

  // Node names that ResourceSlices mention by spec.nodeName, sorted (for --all-nodes when no
  // Node objects are given).
  std::vector<std::string> NodeNames() const;

  const SnapshotImpl& impl() const { return *impl_; }

  explicit Snapshot(std::shared_ptr<SnapshotImpl> impl);
  ~Snapshot();

 private:
  std::shared_ptr<SnapshotImpl> impl_;
};

// AllocatedState records devices already in use: dedicated devices, shares of multi-allocatable
// devices and their consumed capacity. Admin-access results never count. Add/Remove are
// incremental (reference-counted, so a claim can be removed again).
class AllocatedState {
 public:
  AllocatedState();
  ~AllocatedState();
  AllocatedState(const AllocatedState&);
  AllocatedState& operator=(const AllocatedState&);
  AllocatedState(AllocatedState&&) noexcept;
  AllocatedState& operator=(AllocatedState&&) noexcept;

  // Add/Remove account for one allocation (a claim's status.allocation). Invalid quantities in
  // consumedCapacity are an error; nothing is changed then.
  absl::Status Add(const kube::AllocationResult& allocation);
  absl::Status Remove(const kube::AllocationResult& allocation);

  // Low-level forms (test fixtures): a dedicated device, a share, aggregated capacity.
  void AddDevice(std::string_view driver, std::string_view pool, std::string_view device);
  void AddSharedDevice(std::string_view driver, std::string_view pool, std::string_view device,
                       std::string_view share_id);
  absl::Status AddCapacity(std::string_view driver, std::string_view pool,
                           std::string_view device, std::string_view capacity,
                           std::string_view quantity);

  bool IsAllocated(std::string_view driver, std::string_view pool, std::string_view device) const;

  const AllocatedStateImpl& impl() const { return *impl_; }

 private:
  std::unique_ptr<AllocatedStateImpl> impl_;
};

// Explanation collects, for --explain, what the search looked at.
struct Explanation {
  struct Candidate {
    std::string request;  // "req" or "req/sub"
    std::string device;   // driver/pool/device
    std::string verdict;  // "allocated", "in use", "selector #0 of class gpu is false", ...
  };
  struct Pool {
    std::string id;      // driver/pool
    std::string status;  // "complete", "incomplete: 1 of 2 slices", "invalid: ...", ...
    int devices = 0;
  };
  std::vector<Pool> pools;
  std::vector<Candidate> candidates;
  int64_t steps = 0;  // allocateOne invocations
};

// AllocateOptions bounds and instruments one Allocate call.
struct AllocateOptions {
  // Deterministic share IDs (tests): when set, every shareID is this value.
  std::optional<std::string> fixed_share_id;
  // A deadline for the search (upstream's filterTimeout); exceeded -> a DeadlineExceeded error
  // that names the node and the claim being searched. The search looks at the clock on its first
  // step and then every 64 steps (each step is well under a microsecond), so it stops within
  // microseconds of the deadline however large the search space.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // The budget the deadline was computed from, only for the error's text ("timed out after 10s
  // while allocating claim ns/name"); zero: the text says "timed out" without a duration.
  std::chrono::milliseconds timeout{0};
  const std::atomic<bool>* cancelled = nullptr;
  // When set, filled with what the search considered.
  Explanation* explain = nullptr;
  // Only the kind (and reason) is wanted: an allocation that succeeds returns no results, which
  // saves building them (a filter that only needs to know whether the node fits). Errors that
  // only building the results finds (a slice node selector with several terms) then go
  // unreported.
  bool verdict_only = false;
  // Count the node's devices and those in use (AllocateOutcome::node_devices*), for scoring.
  bool count_node_devices = false;
  // Results name the chosen devices only (request, driver, pool, device, shareID): no configs,
  // tolerations, consumed capacity, binding conditions or node selector — for a caller that
  // looks at which devices fit, not one that writes the allocation. As with verdict_only, the
  // node-selector errors only building a full result finds go unreported.
  bool devices_only = false;
};

// AllocateOutcome is the result of one Allocate call.
struct AllocateOutcome {
  enum class Kind {
    kAllocated,      // results hold one AllocationResult per claim, in input order
    kUnschedulable,  // cannot allocate on this node; `reason` says why (for people)
    kError,          // the pod cannot be scheduled anywhere as is; `status` says why
  };
  Kind kind = Kind::kUnschedulable;
  std::vector<kube::AllocationResult> results;
  std::string reason;
  absl::Status status;
  int64_t steps = 0;  // allocateOne invocations (search effort)
  // With count_node_devices: the devices the node can use (complete, valid pools; per-device
  // node selection applied) and how many of them are allocated (dedicated, shared or with
  // consumed capacity, as AllocatedState::IsAllocated) in `state`, before this allocation.
  int node_devices = 0;
  int node_devices_in_use = 0;
};

// Allocate allocates `claims` (one pod's claims without status.allocation) on `node`.
AllocateOutcome Allocate(const Snapshot& snapshot, const kube::Node& node,
                         const std::vector<const kube::ResourceClaim*>& claims,
                         const AllocatedState& state, const AllocateOptions& options = {});

}  // namespace devlet::allocator
