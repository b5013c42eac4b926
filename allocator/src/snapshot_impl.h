// Private: the compiled cluster snapshot behind devlet::allocator::Snapshot.
//
// Layout for speed: every slice is compiled once into CompiledSlice (devices with attribute
// tables sorted by (domain, id), capacities and counters as fixed-point Amounts, taints with the
// taint rules applied, a global device-key id). Selector results are memoized per slice, per
// "selector set" (class selectors + request selectors), in atomics shared by every node and pod
// that looks at the slice; a new snapshot made by WithSlice() keeps the unchanged slices, so
// their memos survive. Per-node pool views (which slices and pools a node sees) are cached.
#pragma once

#include <atomic>
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

#include "absl/status/statusor.h"
#include "devlet/allocator/amount.h"
#include "devlet/allocator/features.h"
#include "devlet/cel/cel.h"
#include "devlet/cel/dra.h"
#include "devlet/kube/core.h"
#include "devlet/kube/resource.h"

namespace devlet::allocator {

// ---- Device keys: "driver/pool/device" interned process-wide --------------------------------

using KeyId = uint32_t;
KeyId InternDeviceKey(std::string_view driver, std::string_view pool, std::string_view device);
// Returns the id if the key was interned before, else UINT32_MAX.
KeyId FindDeviceKey(std::string_view driver, std::string_view pool, std::string_view device);

// ---- Compiled devices ------------------------------------------------------------------------

// A typed attribute value for constraints (list-typed attributes hold several values).
struct AttrValue {
  enum class Type : uint8_t { kInt, kBool, kString, kVersion };
  Type type = Type::kInt;
  int64_t i = 0;
  std::string s;  // string or version text
  friend bool operator==(const AttrValue&, const AttrValue&) = default;
};

struct CompiledAttribute {
  std::string domain;
  std::string id;
  bool is_list = false;
  std::vector<AttrValue> values;            // one for scalars
  cel::dra::Attribute view;                 // points into `values`/`elements`
  std::vector<cel::dra::Attribute> elements;  // list elements for the view
};

struct CompiledCapacity {
  std::string name;  // as written (QualifiedName)
  std::string domain, id;
  Amount value;
  std::shared_ptr<const cel::Quantity> quantity;  // for selectors
  // Request policy.
  bool has_policy = false;
  std::optional<Amount> policy_default;
  std::string policy_default_text;
  std::vector<Amount> valid_values;
  std::vector<std::string> valid_values_text;
  bool has_range = false;
  std::optional<Amount> range_min, range_max, range_step;
  std::string range_min_text, range_step_text;
  std::string value_text;
};

struct CompiledConsumption {
  std::string counter_set;
  std::vector<std::pair<std::string, Amount>> counters;
  // compatibilityGroups (DRADeviceCompatibilityGroups), sorted and unique; empty: none.
  std::vector<std::string> groups;
};

class CompiledDevice final : public cel::dra::DeviceView {
 public:
  std::string name;
  std::string_view driver_name;  // points into the owning slice
  KeyId key = 0;
  const kube::Device* source = nullptr;
  std::vector<CompiledAttribute> attributes;  // sorted by (domain, id)
  std::vector<CompiledCapacity> capacities;   // sorted by (domain, id)
  std::vector<CompiledConsumption> consumes;
  std::vector<kube::DeviceTaint> taints;  // effective: slice taints + taint rules
  bool blocking_taint = false;            // any NoSchedule/NoExecute taint
  bool allow_multiple = false;
  bool binds_to_node = false;
  bool has_binding_conditions = false;
  // Every capacity accepts its default (or full) consumption on an otherwise unused device: the
  // capacity check is trivially true for requests without capacity requests (fast path).
  bool static_fit = true;
  // Kubernetes converts every attribute before it evaluates a selector, and an invalid version
  // fails every selector on the device: computed once when the slice is compiled, not per
  // evaluation (the default AttributeConversionError scans and parses the attributes each time).
  absl::Status conversion_error;

  const CompiledAttribute* Lookup(std::string_view domain, std::string_view id) const;
  const CompiledCapacity* LookupCapacity(std::string_view name) const;  // exact written name

  // cel::dra::DeviceView
  std::string_view driver() const override { return driver_name; }
  absl::Status AttributeConversionError() const override { return conversion_error; }
  bool allow_multiple_allocations() const override { return allow_multiple; }
  const cel::dra::Attribute* FindAttribute(std::string_view domain,
                                           std::string_view id) const override;
  const cel::Quantity* FindCapacity(std::string_view domain, std::string_view id) const override;
  void ForEachAttributeDomain(absl::FunctionRef<void(std::string_view)> fn) const override;
  void ForEachAttribute(
      std::string_view domain,
      absl::FunctionRef<void(std::string_view, const cel::dra::Attribute&)> fn) const override;
  void ForEachCapacityDomain(absl::FunctionRef<void(std::string_view)> fn) const override;
  void ForEachCapacity(
      std::string_view domain,
      absl::FunctionRef<void(std::string_view, const cel::Quantity&)> fn) const override;
};

// Memo states.
enum : uint8_t { kMemoUnknown = 0, kMemoNo = 1, kMemoYes = 2, kMemoError = 3 };

struct MemoError {
  bool from_class = false;
  int selector_index = 0;
  std::string message;
};

class CompiledSlice {
 public:
  kube::ResourceSlice slice;  // with taint rules applied
  std::string name, driver, pool;
  int64_t generation = 0, count = 0;
  bool per_device = false;
  bool has_counter_sets = false;
  std::vector<CompiledDevice> devices;

  // Memo array for a selector set (one atomic per device), created on first use.
  std::atomic<uint8_t>* Memo(int set_id) const;
  void RecordError(int set_id, size_t device, MemoError error) const;
  std::optional<MemoError> GetError(int set_id, size_t device) const;

 private:
  mutable std::shared_mutex memo_mu_;
  mutable std::vector<std::unique_ptr<std::atomic<uint8_t>[]>> memo_;
  mutable std::map<std::pair<int, size_t>, MemoError> errors_;
};

absl::StatusOr<std::shared_ptr<const CompiledSlice>> CompileSlice(
    kube::ResourceSlice slice, const std::vector<kube::DeviceTaintRule>& rules,
    const Features& features);

// ---- Selectors -------------------------------------------------------------------------------

struct CompiledSelector {
  std::string expression;
  std::shared_ptr<const cel::Program> program;  // null when compile failed
  std::string compile_error;
};

// A selector set: the class selectors, then the request selectors. Interned by text.
struct SelectorSet {
  int id = 0;
  std::vector<std::shared_ptr<const CompiledSelector>> class_selectors;
  std::vector<std::shared_ptr<const CompiledSelector>> request_selectors;
};

class SelectorRegistry {
 public:
  std::shared_ptr<const CompiledSelector> Compile(const std::string& expression);
  // CompileDerived compiles (once) a derived attribute expression (DRADerivedAttributes).
  std::shared_ptr<const CompiledSelector> CompileDerived(const std::string& expression);
  const SelectorSet* Intern(const std::vector<kube::DeviceSelector>& class_selectors,
                            const std::vector<kube::DeviceSelector>& request_selectors);

 private:
  std::shared_mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const CompiledSelector>> programs_;
  std::unordered_map<std::string, std::shared_ptr<const CompiledSelector>> derived_;
  std::unordered_map<std::string, std::unique_ptr<SelectorSet>> sets_;
  int next_id_ = 0;
};

// ---- Per-node pool views ------------------------------------------------------------------

struct Consumption {
  uint16_t set = 0;
  uint16_t counter = 0;
  Amount amount;
};

struct PoolView {
  std::string driver, pool, id;
  bool incomplete = false;
  bool invalid = false;
  std::string reason;  // for incomplete/invalid
  int slices_seen = 0;
  std::vector<const CompiledSlice*> slices;        // device slices targeting the node, by name
  std::vector<std::vector<uint8_t>> node_ok;       // per slice: per-device node match (or empty)
  std::vector<const CompiledSlice*> not_targeting;  // device slices of other nodes (counters)
  // Counter sets of the pool and resolved device consumption.
  std::vector<std::string> counter_set_names;
  std::vector<std::vector<std::string>> counter_names;
  std::vector<std::vector<Amount>> counter_values;
  std::vector<std::vector<std::vector<Consumption>>> consumption;        // [slice][device]
  std::vector<std::vector<std::vector<Consumption>>> consumption_other;  // not_targeting
  bool has_binding_conditions = false;
};

struct NodeView {
  std::vector<PoolView> pools;  // in allocation order
  // driver + '\0' + pool of every pool the view looked at, including obsolete ones it left out:
  // a change to any of them (or to the node's own or node-less slices) invalidates the view.
  std::vector<std::string> pool_keys;
};

// ---- The snapshot --------------------------------------------------------------------------

struct ClassEntry {
  kube::DeviceClass object;
};

class SnapshotImpl {
 public:
  Features features;
  std::map<std::string, std::shared_ptr<const ClassEntry>, std::less<>> classes;
  std::map<std::string, std::shared_ptr<const CompiledSlice>, std::less<>> slices;
  std::vector<kube::DeviceTaintRule> rules;
  std::shared_ptr<SelectorRegistry> selectors;

  // Indexes (rebuilt by Reindex()).
  std::unordered_map<std::string, std::vector<const CompiledSlice*>> on_node;
  std::vector<const CompiledSlice*> shared;  // slices without spec.nodeName
  std::unordered_map<std::string, std::vector<const CompiledSlice*>> by_pool;  // driver + '\0' + pool
  size_t num_devices = 0;

  void Reindex();
  absl::StatusOr<std::shared_ptr<const NodeView>> ViewFor(const kube::Node& node) const;
  // AdoptViews copies `old`'s cached views of nodes not in `nodes` whose pools are not in
  // `pools` (call after Reindex, when the slices that changed between `old` and this snapshot
  // all have a spec.nodeName in `nodes` and a pool in `pools`). The views point at slices both
  // snapshots share.
  void AdoptViews(const SnapshotImpl& old, const std::set<std::string>& nodes,
                  const std::set<std::string>& pools);

 private:
  absl::StatusOr<std::shared_ptr<const NodeView>> BuildView(const kube::Node& node) const;
  struct CachedView {
    std::map<std::string, std::string> labels;
    std::shared_ptr<const NodeView> view;
  };
  mutable std::shared_mutex views_mu_;
  mutable std::unordered_map<std::string, std::vector<CachedView>> views_;  // by node name
};

// NodeMatches is upstream's NodeMatches: nodeName, else allNodes, else the selector.
bool NodeMatches(const kube::Node& node, const std::optional<std::string>& node_name,
                 bool all_nodes, const std::optional<kube::NodeSelector>& selector);

// ---- Allocated state ------------------------------------------------------------------------

class AllocatedStateImpl {
 public:
  std::vector<uint32_t> dedicated;  // by KeyId: number of allocations
  std::vector<uint32_t> shares;     // by KeyId: number of shares (multi-allocatable)
  std::unordered_map<KeyId, std::map<std::string, Amount>> capacity;  // aggregated consumption
  std::unordered_map<KeyId, std::map<std::string, uint32_t>> share_ids;

  bool Dedicated(KeyId k) const { return k < dedicated.size() && dedicated[k] > 0; }
  bool Shared(KeyId k) const { return k < shares.size() && shares[k] > 0; }
  bool HasCapacity(KeyId k) const { return capacity.count(k) > 0; }
  const std::map<std::string, Amount>* Capacity(KeyId k) const {
    auto it = capacity.find(k);
    return it == capacity.end() ? nullptr : &it->second;
  }
};

}  // namespace devlet::allocator
