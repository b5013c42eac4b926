// The search (research §2.4–§2.13), following the upstream "incubating" implementation that
// Kubernetes 1.37 runs with its default gates: depth-first over claims → requests → device slots,
// combinations (not permutations) within a request, first complete solution wins, prioritized
// lists as part of the backtracking, the 32-results limit signalled upwards so that a shorter
// subrequest can be tried.
//
// Deliberate differences from upstream, all on paths upstream documents as quirks:
//   * capacity policy `default` is compared by value (upstream compares Quantity structs, which
//     can differ for equal values written differently);
//   * list-typed matchAttribute keeps a stack of intersections, so backtracking restores it
//     (upstream's experimental allocator forgets to restore it, research §2.7).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "devlet/allocator/amount.h"
#include "devlet/allocator/allocator.h"
#include "devlet/cel/dra.h"
#include "devlet/common/status.h"
#include "nlohmann/json.hpp"
#include "snapshot_impl.h"

namespace devlet::allocator {
namespace {

constexpr int kMaxResults = kube::kAllocationResultsMaxSize;  // 32

struct DeviceRef {
  int pool = 0, slice = 0, device = 0;
};

struct CapRequest {
  std::string name;
  Amount amount;
  std::string text;
};

struct ReqData {
  int request_index = 0;
  int sub_index = -1;  // -1: not a subrequest
  std::string name;    // request or subrequest name
  std::string parent;  // main request name for subrequests
  std::string full_name;
  int explain_id = 0;  // --explain: one number per distinct full_name (Search::NoteKey)
  const kube::DeviceClass* device_class = nullptr;
  const SelectorSet* selectors = nullptr;
  bool all_mode = false;
  int num_devices = 0;
  bool admin_access = false;
  const std::vector<kube::DeviceToleration>* tolerations = nullptr;
  bool has_capacity = false;
  std::vector<CapRequest> capacity;
  std::vector<DeviceRef> all_devices;
  // Derived attributes (DRADerivedAttributes): name as written -> expression; a later entry with
  // the same name wins, as in upstream's map.
  std::map<std::string, std::string, std::less<>> derived;
  // Memo array of the last slice looked at (saves the slice's lock per device).
  mutable const CompiledSlice* memo_slice = nullptr;
  mutable std::atomic<uint8_t>* memo = nullptr;
};

struct RequestSlot {
  std::vector<ReqData> alternatives;  // one entry unless firstAvailable
  bool has_subs = false;
  int selected = 0;
};

struct ClaimData {
  const kube::ResourceClaim* claim = nullptr;
  std::string label;  // "ns/name"
  std::vector<RequestSlot> requests;
};

struct ConstraintState {
  bool match = true;  // matchAttribute, else distinctAttribute
  std::set<std::string> requests;
  std::string name;  // as written: the key for the request's derived attributes
  std::string domain, id;
  // matchAttribute
  int num = 0;
  const CompiledAttribute* first = nullptr;
  std::vector<std::vector<AttrValue>> intersections;  // list-typed mode
  // distinctAttribute
  std::vector<const CompiledAttribute*> seen;
};

struct ResultEntry {
  const ReqData* request = nullptr;
  const PoolView* pool = nullptr;
  const CompiledSlice* slice = nullptr;
  const CompiledDevice* device = nullptr;
  std::optional<std::string> share_id;
  std::vector<std::pair<std::string, std::pair<Amount, std::string>>> consumed;
};

enum class Step { kDone, kFail, kMaxSize };

// The running intersection of the compatibility groups (DRADeviceCompatibilityGroups) of the
// devices placed on one counter set, with upstream's rules: a device without groups goes only
// with other devices without groups; grouped devices need a group common to all of them.
struct GroupIntersection {
  bool has_members = false;
  bool all_empty = false;            // every member so far declared no groups
  std::vector<std::string> groups;   // sorted; the intersection when !all_empty

  bool Admits(const std::vector<std::string>& g) const {
    if (!has_members) return true;
    if (g.empty()) return all_empty;
    if (all_empty) return false;
    for (const std::string& x : g) {
      if (std::binary_search(groups.begin(), groups.end(), x)) return true;
    }
    return false;
  }
  void Add(const std::vector<std::string>& g) {
    if (!has_members) {
      has_members = true;
      all_empty = g.empty();
      groups = g;
      return;
    }
    if (all_empty || g.empty()) return;  // Admits() made the other side agree
    std::vector<std::string> next;
    std::set_intersection(groups.begin(), groups.end(), g.begin(), g.end(),
                          std::back_inserter(next));
    groups = std::move(next);
  }
};

struct GroupUndo {
  std::string counter_set;
  GroupIntersection previous;
  bool existed = false;
};

absl::StatusOr<bool> CapacityFitsIn(const ReqData& r, const CompiledDevice& d,
                                    const std::map<std::string, Amount>* allocated,
                                    const std::map<std::string, Amount>* allocating,
                                    bool fractional, std::string* why);

std::string QuotedKObj(const kube::ResourceClaim& claim) {
  if (claim.metadata.namespace_.empty()) return claim.metadata.name;
  return claim.metadata.namespace_ + "/" + claim.metadata.name;
}

bool Tolerates(const kube::DeviceToleration& t, const kube::DeviceTaint& taint) {
  if (!t.effect.empty() && t.effect != taint.effect) return false;
  if (!t.key.empty() && t.key != taint.key) return false;
  if (t.operator_.empty() || t.operator_ == kube::kTolerationOpEqual) return t.value == taint.value;
  if (t.operator_ == kube::kTolerationOpExists) return true;
  return false;
}

bool TaintPrevents(const CompiledDevice& d, const ReqData& r) {
  if (!d.blocking_taint) return false;
  for (const kube::DeviceTaint& taint : d.taints) {
    if (taint.effect != kube::kTaintEffectNoSchedule && taint.effect != kube::kTaintEffectNoExecute) {
      continue;
    }
    bool tolerated = false;
    if (r.tolerations != nullptr) {
      for (const auto& t : *r.tolerations) {
        if (Tolerates(t, taint)) {
          tolerated = true;
          break;
        }
      }
    }
    if (!tolerated) return true;
  }
  return false;
}

std::string NewShareId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  uint64_t a = rng(), b = rng();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant
  char buf[37];
  snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
           static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
           static_cast<unsigned>(b >> 48),
           static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

class Search {
 public:
  Search(const SnapshotImpl& snap, const NodeView& view, const kube::Node& node,
         const AllocatedStateImpl& state, const AllocateOptions& options)
      : snap_(snap), features_(snap.features), view_(view), node_(node), state_(state),
        options_(options) {}

  absl::Status Prepare(const std::vector<const kube::ResourceClaim*>& claims);
  absl::StatusOr<bool> Run();
  absl::StatusOr<std::vector<kube::AllocationResult>> Results();
  int64_t steps() const { return steps_; }
  bool AnyInvalidPool() const {
    for (const PoolView& p : view_.pools) {
      if (p.invalid) return true;
    }
    return false;
  }

 private:
  absl::StatusOr<ReqData> ValidateRequest(const ClaimData& claim, int request_index,
                                          int sub_index);
  absl::StatusOr<bool> Selectable(const ReqData& r, const ClaimData& claim, const DeviceRef& ref);
  absl::StatusOr<Step> AllocateOne(int claim, int request, int sub, int device, bool in_sub,
                                   DeviceRef start);
  // Tries to add one device; returns false (with no state change) when it cannot be used.
  absl::StatusOr<bool> AllocateDevice(int claim, const ReqData& r, const DeviceRef& ref, bool must);
  void Deallocate(int claim);
  absl::StatusOr<bool> CapacityFits(const ReqData& r, const CompiledDevice& d, std::string* why);
  bool CountersFit(int pool, int slice, int device);
  // Checks the device's compatibility groups against every counter set it draws from and, if
  // they fit, folds them in, recording in `undo` how to restore the previous state.
  bool GroupsFit(int pool, const CompiledDevice& d, std::vector<GroupUndo>* undo);
  void ReleaseGroups(int pool, std::vector<GroupUndo>& undo);
  const std::map<std::string, GroupIntersection>& GroupBaseline(int pool);
  void ReleaseCounters(int pool, int slice, int device);
  bool InUse(KeyId k) const;
  // Whether the node lists DRAOptionalNodeOperations in status.declaredFeatures (read once).
  bool NodeDeclaresOptionalNodeOperations();
  bool AllocatingForClaim(KeyId k, int claim) const;
  bool IsDeviceAllocated(KeyId k) const {
    return state_.Dedicated(k) || state_.Shared(k) || state_.HasCapacity(k);
  }
  absl::StatusOr<bool> ConstraintAdd(ConstraintState& c, const ReqData& r,
                                     const CompiledDevice& d, const PoolView& p);
  // The attribute a constraint compares: the request's derived attribute of that name, else the
  // device's own. nullptr when the device has neither.
  absl::StatusOr<const CompiledAttribute*> LookupAttribute(const ConstraintState& c,
                                                           const ReqData& r,
                                                           const CompiledDevice& d,
                                                           const PoolView& p);
  void ConstraintRemove(ConstraintState& c, const ReqData& r);
  static bool ConstraintApplies(const ConstraintState& c, const ReqData& r);
  // Note records a candidate's verdict for --explain, once per (request name, device). Cheap when
  // the pair is known already: the search calls it on every device it looks at.
  void Note(const ReqData& r, const CompiledDevice& d, const PoolView& p, std::string_view verdict);
  bool Noted(const ReqData& r, const CompiledDevice& d) const {
    return options_.explain == nullptr || noted_.count(NoteKey(r, d)) != 0;
  }
  static uint64_t NoteKey(const ReqData& r, const CompiledDevice& d) {
    return (static_cast<uint64_t>(r.explain_id) << 32) | d.key;
  }
  absl::Status CheckInterrupt(int claim);

  const SnapshotImpl& snap_;
  const Features& features_;
  const NodeView& view_;
  const kube::Node& node_;
  const AllocatedStateImpl& state_;
  const AllocateOptions& options_;

  std::vector<ClaimData> claims_;
  std::vector<std::vector<ConstraintState>> constraints_;
  std::vector<std::vector<ResultEntry>> results_;
  std::vector<std::pair<KeyId, int>> allocating_;  // (device, claim) for dedicated use
  std::map<KeyId, std::map<std::string, Amount>> allocating_capacity_;
  std::map<KeyId, int> allocating_shares_;
  // Counters, per pool index: available (lazily computed) and consumed in this call.
  std::vector<std::vector<std::vector<Amount>>> available_;
  std::vector<std::vector<std::vector<Amount>>> consumed_;
  std::vector<uint8_t> available_ready_;
  // Compatibility groups, per pool index: the allocated devices' intersection per counter set
  // (computed on first use) and the running one of this call.
  std::map<int, std::map<std::string, GroupIntersection>> group_baseline_;
  std::map<int, std::map<std::string, GroupIntersection>> group_running_;
  // Per-device rollback records for the devices currently in the result.
  struct Undo {
    bool counters = false;
    int constraints = 0;
    bool marked = false;
    bool capacity = false;
    DeviceRef ref;
    std::vector<GroupUndo> groups;
  };
  std::vector<std::vector<Undo>> undo_;
  // --explain: the candidate entry of each (request name, device) noted so far, keyed by
  // NoteKey (numbers, not text: a search that backtracks a million times looks them up a million
  // times). Request names get their numbers in Prepare (explain_ids_).
  std::unordered_map<uint64_t, size_t> noted_;
  std::map<std::string, int, std::less<>> explain_ids_;
  // Derived attribute values of this call, per (device, expression): upstream evaluates each
  // expression at most once per device and Allocate call, whichever name or request uses it.
  std::map<std::pair<KeyId, std::string>, std::unique_ptr<CompiledAttribute>, std::less<>>
      derived_cache_;
  int64_t steps_ = 0;
  std::optional<bool> node_declares_optional_ops_;
};

bool Search::NodeDeclaresOptionalNodeOperations() {
  if (node_declares_optional_ops_) return *node_declares_optional_ops_;
  bool declared = false;
  // Node keeps spec and status as JSON (kube::Extra).
  if (!node_.extra.empty()) {
    nlohmann::json extra =
        nlohmann::json::parse(node_.extra.json, nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* features = nullptr;
    if (extra.is_object() && extra.contains("status") && extra["status"].is_object() &&
        extra["status"].contains("declaredFeatures")) {
      features = &extra["status"]["declaredFeatures"];
    }
    if (features != nullptr && features->is_array()) {
      for (const auto& f : *features) declared |= f.is_string() && f == "DRAOptionalNodeOperations";
    }
  }
  node_declares_optional_ops_ = declared;
  return declared;
}

// FormatBudget writes a timeout as people write it: "10s", "1.5s", "250ms".
std::string FormatBudget(std::chrono::milliseconds timeout) {
  const int64_t ms = timeout.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g", static_cast<double>(ms) / 1000.0);
  return std::string(buf) + "s";
}

absl::Status Search::CheckInterrupt(int claim) {
  // Upstream checks its context on every allocateOne call; reading the clock that often costs
  // more than a step, so we look on the first step (an expired or cancelled search never starts,
  // as upstream) and then every 64.
  if (steps_ != 1 && (steps_ & 63) != 0) return absl::OkStatus();
  if (options_.cancelled != nullptr && options_.cancelled->load(std::memory_order_relaxed)) {
    return Cancelled("filter operation aborted: context canceled");
  }
  if (options_.deadline && std::chrono::steady_clock::now() > *options_.deadline) {
    // The claim being searched when time ran out (the last one once all are placed).
    const int shown = std::min(claim, static_cast<int>(claims_.size()) - 1);
    const std::string label = shown >= 0 ? claims_[shown].label : "";
    if (options_.timeout.count() > 0) {
      return DeadlineExceeded("node " + node_.metadata.name + ": timed out after " +
                              FormatBudget(options_.timeout) + " while allocating claim " +
                              label);
    }
    return DeadlineExceeded("node " + node_.metadata.name +
                            ": timed out trying to allocate devices for claim " + label);
  }
  return absl::OkStatus();
}

void Search::Note(const ReqData& r, const CompiledDevice& d, const PoolView& p,
                  std::string_view verdict) {
  if (options_.explain == nullptr) return;
  auto [it, inserted] = noted_.try_emplace(NoteKey(r, d), options_.explain->candidates.size());
  if (!inserted) return;
  options_.explain->candidates.push_back(
      {r.full_name, p.id + "/" + d.name, std::string(verdict)});
}

absl::StatusOr<ReqData> Search::ValidateRequest(const ClaimData& claim, int request_index,
                                                int sub_index) {
  const kube::DeviceRequest& request = claim.claim->spec.devices.requests[request_index];
  ReqData r;
  r.request_index = request_index;
  r.sub_index = sub_index;
  const std::vector<kube::DeviceSelector>* selectors;
  const std::string* class_name;
  const std::string* mode;
  int64_t count;
  const std::optional<kube::CapacityRequirements>* capacity;
  const std::vector<kube::DeviceDerivedAttribute>* derived;
  if (sub_index < 0) {
    const kube::ExactDeviceRequest& e = *request.exactly;
    r.name = r.full_name = request.name;
    selectors = &e.selectors;
    class_name = &e.device_class_name;
    mode = &e.allocation_mode;
    count = e.count;
    r.tolerations = &e.tolerations;
    capacity = &e.capacity;
    derived = &e.derived_attributes;
    r.admin_access = e.admin_access.value_or(false);
    if (e.admin_access.has_value() && !features_.admin_access) {
      return InvalidArgument("claim " + claim.label + ", request " + r.name +
                             ": admin access is requested, but the feature is disabled");
    }
  } else {
    const kube::DeviceSubRequest& s = request.first_available[sub_index];
    r.name = s.name;
    r.parent = request.name;
    r.full_name = request.name + "/" + s.name;
    selectors = &s.selectors;
    class_name = &s.device_class_name;
    mode = &s.allocation_mode;
    count = s.count;
    r.tolerations = &s.tolerations;
    capacity = &s.capacity;
    derived = &s.derived_attributes;
  }
  r.explain_id = explain_ids_.try_emplace(r.full_name, static_cast<int>(explain_ids_.size()))
                     .first->second;
  if (!derived->empty()) {
    // Rejected rather than ignored with the gate off: the constraints would silently change.
    if (!features_.derived_attributes) {
      return InvalidArgument("claim " + claim.label + ", request " + r.name +
                             ": cannot handle request with derived attributes, the feature is "
                             "disabled");
    }
    for (const kube::DeviceDerivedAttribute& a : *derived) r.derived[a.name] = a.expression;
  }
  for (size_t i = 0; i < selectors->size(); ++i) {
    if (!(*selectors)[i].cel) {
      return InvalidArgument("claim " + claim.label + ", request " + r.name + ", selector #" +
                             std::to_string(i) +
                             ": CEL expression empty (unsupported selector type?)");
    }
  }
  if (class_name->empty()) {
    return InvalidArgument("claim " + claim.label + ", request " + r.name +
                           ": missing device class name (unsupported request type?)");
  }
  auto class_it = snap_.classes.find(*class_name);
  if (class_it == snap_.classes.end()) {
    return NotFound("claim " + claim.label + ", request " + r.name +
                    ": could not retrieve device class " + *class_name +
                    ": deviceclass.resource.k8s.io \"" + *class_name + "\" not found");
  }
  r.device_class = &class_it->second->object;
  for (size_t i = 0; i < r.device_class->spec.selectors.size(); ++i) {
    if (!r.device_class->spec.selectors[i].cel) {
      return InvalidArgument("class " + *class_name + ", selector #" + std::to_string(i) +
                             ": CEL expression empty (unsupported selector type?)");
    }
  }
  r.selectors = snap_.selectors->Intern(r.device_class->spec.selectors, *selectors);
  if (capacity->has_value()) {
    r.has_capacity = true;
    for (const auto& [name, q] : (*capacity)->requests) {
      auto a = Amount::Parse(q.str());
      if (!a.ok()) {
        return InvalidArgument("claim " + claim.label + ", request " + r.name +
                               ": capacity.requests[" + name + "]: " + Message(a.status()));
      }
      r.capacity.push_back({name, *a, q.str()});
    }
  }
  if (*mode == kube::kAllocationModeExactCount || mode->empty()) {
    if (count <= 0) {
      // The API server rejects this; upstream would search for nothing.
      return InvalidArgument("claim " + claim.label + ", request " + r.name +
                             ": count must be greater than zero, got " + std::to_string(count));
    }
    if (count > (int64_t{1} << 30)) {
      return InvalidArgument("claim " + claim.label + ", request " + r.name + ": exact count " +
                             std::to_string(count) + " is too large");
    }
    r.num_devices = static_cast<int>(count);
  } else if (*mode == kube::kAllocationModeAll) {
    r.all_mode = true;
    for (int p = 0; p < static_cast<int>(view_.pools.size()); ++p) {
      const PoolView& pool = view_.pools[p];
      if (pool.incomplete) {
        return FailedPrecondition("claim " + claim.label + ", request " + r.name +
                                  ": asks for all devices, but resource pool " + pool.id +
                                  " is currently being updated");
      }
      if (pool.invalid) {
        return FailedPrecondition("claim " + claim.label + ", request " + r.name +
                                  ": asks for all devices, but resource pool " + pool.id +
                                  " is currently invalid");
      }
      for (int s = 0; s < static_cast<int>(pool.slices.size()); ++s) {
        for (int d = 0; d < static_cast<int>(pool.slices[s]->devices.size()); ++d) {
          DeviceRef ref{p, s, d};
          DEVLET_ASSIGN_OR_RETURN(bool selectable, Selectable(r, claim, ref));
          if (!selectable) continue;
          if (features_.consumable_capacity) {
            // Static capacity only: nothing allocated yet.
            const CompiledDevice& dev = pool.slices[s]->devices[d];
            auto fits = CapacityFitsIn(r, dev, nullptr, nullptr, features_.fractional_capacity_range,
                                       nullptr);
            if (!fits.ok()) {
              return InvalidArgument("claim " + claim.label + ", request " + r.name +
                                     ": checking capacity for device " + dev.name + ": " +
                                     Message(fits.status()));
            }
            if (!*fits) continue;
          }
          r.all_devices.push_back(ref);
        }
      }
    }
    r.num_devices = static_cast<int>(r.all_devices.size());
  } else {
    return InvalidArgument("claim " + claim.label + ", request " + r.name +
                           ": unsupported count mode " + *mode);
  }
  return r;
}

absl::Status Search::Prepare(const std::vector<const kube::ResourceClaim*>& claims) {
  claims_.resize(claims.size());
  constraints_.resize(claims.size());
  results_.resize(claims.size());
  undo_.resize(claims.size());
  available_.resize(view_.pools.size());
  consumed_.resize(view_.pools.size());
  available_ready_.assign(view_.pools.size(), 0);
  for (size_t ci = 0; ci < claims.size(); ++ci) {
    ClaimData& cd = claims_[ci];
    cd.claim = claims[ci];
    cd.label = QuotedKObj(*claims[ci]);
    const auto& requests = cd.claim->spec.devices.requests;
    int min_devices_per_claim = 0;
    cd.requests.resize(requests.size());
    for (size_t ri = 0; ri < requests.size(); ++ri) {
      const kube::DeviceRequest& request = requests[ri];
      RequestSlot& slot = cd.requests[ri];
      slot.has_subs = !request.first_available.empty();
      if (!features_.prioritized_list && slot.has_subs) {
        return InvalidArgument("claim " + cd.label + ", request " + request.name +
                               ": has subrequests, but the DRAPrioritizedList feature is disabled");
      }
      if (!slot.has_subs && !request.exactly) {
        return InvalidArgument("claim " + cd.label + ", request " + request.name +
                               ": neither exactly nor firstAvailable is set");
      }
      if (!features_.consumable_capacity) {
        if (request.exactly && request.exactly->capacity) {
          return InvalidArgument("claim " + cd.label + ", request " + request.name +
                                 ": has capacity requests, but the DRAConsumableCapacity feature "
                                 "is disabled");
        }
        for (const auto& sub : request.first_available) {
          if (sub.capacity) {
            return InvalidArgument("claim " + cd.label + ", subrequest " + sub.name +
                                   ": has capacity requests, but the DRAConsumableCapacity "
                                   "feature is disabled");
          }
        }
      }
      int min_devices = 0;
      if (slot.has_subs) {
        min_devices = INT32_MAX;
        for (size_t si = 0; si < request.first_available.size(); ++si) {
          DEVLET_ASSIGN_OR_RETURN(ReqData r, ValidateRequest(cd, static_cast<int>(ri),
                                                             static_cast<int>(si)));
          min_devices = std::min(min_devices, r.num_devices);
          slot.alternatives.push_back(std::move(r));
        }
      } else {
        DEVLET_ASSIGN_OR_RETURN(ReqData r, ValidateRequest(cd, static_cast<int>(ri), -1));
        min_devices = r.num_devices;
        slot.alternatives.push_back(std::move(r));
      }
      if (min_devices > kMaxResults - min_devices_per_claim) {
        return ResourceExhausted("claim " + cd.label + ", request " + request.name + ": adding " +
                                 std::to_string(min_devices) +
                                 " devices exceeds the claim limit of 32, with " +
                                 std::to_string(min_devices_per_claim) + " already accounted for");
      }
      min_devices_per_claim += min_devices;
    }
    const auto& constraints = cd.claim->spec.devices.constraints;
    for (size_t k = 0; k < constraints.size(); ++k) {
      const kube::DeviceConstraint& c = constraints[k];
      ConstraintState s;
      const std::string* attr;
      if (c.match_attribute) {
        s.match = true;
        attr = &*c.match_attribute;
      } else if (c.distinct_attribute) {
        // Upstream runs its "stable" implementation, which has no distinctAttribute, only when
        // none of the newer features is on; there the constraint is of an unknown type.
        bool stable = !features_.consumable_capacity && !features_.binding_and_status() &&
                      !features_.fractional_capacity_range && !features_.experimental();
        if (stable) {
          return InvalidArgument("claim " + cd.label + ", constraint #" + std::to_string(k) +
                                 ": empty constraint (unsupported constraint type?)");
        }
        s.match = false;
        attr = &*c.distinct_attribute;
      } else {
        return InvalidArgument("claim " + cd.label + ", constraint #" + std::to_string(k) +
                               ": empty constraint (unsupported constraint type?)");
      }
      s.requests.insert(c.requests.begin(), c.requests.end());
      s.name = *attr;
      size_t slash = attr->find('/');
      if (slash == std::string::npos) {
        s.id = *attr;  // resolved against each device's driver
      } else {
        s.domain = attr->substr(0, slash);
        s.id = attr->substr(slash + 1);
      }
      constraints_[ci].push_back(std::move(s));
    }
    results_[ci].reserve(min_devices_per_claim);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Search::Selectable(const ReqData& r, const ClaimData& claim,
                                        const DeviceRef& ref) {
  const PoolView& pool = view_.pools[ref.pool];
  const CompiledSlice& slice = *pool.slices[ref.slice];
  const CompiledDevice& device = slice.devices[ref.device];
  if (!features_.binding_and_status() && device.has_binding_conditions) {
    Note(r, device, pool, "has binding conditions, but DRADeviceBindingConditions is disabled");
    return false;
  }
  if (r.memo_slice != &slice) {
    r.memo = slice.Memo(r.selectors->id);
    r.memo_slice = &slice;
  }
  std::atomic<uint8_t>* memo = r.memo;
  uint8_t state = memo[ref.device].load(std::memory_order_acquire);
  if (state == kMemoUnknown) {
    state = kMemoYes;
    std::optional<MemoError> error;
    bool interrupted_by_cancel = false;
    cel::dra::MatchOptions match_options;
    match_options.deadline = options_.deadline;
    match_options.cancelled = options_.cancelled;
    auto eval = [&](const std::vector<std::shared_ptr<const CompiledSelector>>& list,
                    bool from_class) {
      for (size_t i = 0; i < list.size() && state == kMemoYes; ++i) {
        const CompiledSelector& sel = *list[i];
        if (!sel.program) {
          error = MemoError{from_class, static_cast<int>(i), "CEL compile error: " + sel.compile_error};
          state = kMemoError;
          break;
        }
        auto match = cel::dra::Match(*sel.program, device, match_options);
        if (!match.ok()) {
          if (match.status().code() == absl::StatusCode::kDeadlineExceeded ||
              match.status().code() == absl::StatusCode::kCancelled) {
            // Interrupted: do not memoize.
            interrupted_by_cancel = match.status().code() == absl::StatusCode::kCancelled;
            error = MemoError{from_class, -1, Message(match.status())};
            state = kMemoUnknown;
            return;
          }
          error = MemoError{from_class, static_cast<int>(i),
                            "CEL runtime error: " + Message(match.status())};
          state = kMemoError;
          break;
        }
        if (!*match) {
          state = kMemoNo;
          if (options_.explain != nullptr) {
            Note(r, device, pool,
                 std::string(from_class ? "selector #" + std::to_string(i) + " of class " +
                                              r.device_class->metadata.name
                                        : "selector #" + std::to_string(i) + " of the request") +
                     " is false");
          }
        }
      }
    };
    eval(r.selectors->class_selectors, true);
    if (state == kMemoYes) eval(r.selectors->request_selectors, false);
    if (state == kMemoUnknown) {
      if (interrupted_by_cancel) return Cancelled("filter operation aborted: context canceled");
      if (options_.timeout.count() > 0) {
        return DeadlineExceeded("node " + node_.metadata.name + ": timed out after " +
                                FormatBudget(options_.timeout) + " while allocating claim " +
                                claim.label + " (evaluating a selector: " + error->message + ")");
      }
      return DeadlineExceeded("node " + node_.metadata.name +
                              ": timed out trying to allocate devices for claim " + claim.label +
                              ": " + error->message);
    }
    if (state == kMemoError) slice.RecordError(r.selectors->id, ref.device, *error);
    memo[ref.device].store(state, std::memory_order_release);
  } else if (state == kMemoNo && options_.explain != nullptr) {
    Note(r, device, pool, "selectors do not match");
  }
  if (state == kMemoError) {
    std::optional<MemoError> e = slice.GetError(r.selectors->id, ref.device);
    MemoError err = e.value_or(MemoError{});
    std::string device_id = pool.id + "/" + device.name;
    bool compile = err.message.rfind("CEL compile error", 0) == 0;
    std::string where = err.from_class ? "class " + r.device_class->metadata.name
                                       : "claim " + claim.label;
    if (compile) {
      return InvalidArgument(where + ": selector #" + std::to_string(err.selector_index) + ": " +
                             err.message);
    }
    return InvalidArgument(where + ": selector #" + std::to_string(err.selector_index) +
                           " on device " + device_id + ": " + err.message);
  }
  if (state == kMemoNo) return false;
  if (slice.per_device && !pool.node_ok[ref.slice][ref.device]) {
    Note(r, device, pool, "not available on this node (per-device node selection)");
    return false;
  }
  return true;
}

bool Search::InUse(KeyId k) const {
  if (state_.Dedicated(k)) return true;
  if (!features_.consumable_capacity && state_.Shared(k)) return true;
  for (const auto& [key, claim] : allocating_) {
    if (key == k) return true;
  }
  return false;
}

bool Search::AllocatingForClaim(KeyId k, int claim) const {
  for (const auto& [key, c] : allocating_) {
    if (key == k && c == claim) return true;
  }
  return false;
}

// calculateConsumedCapacity + violatesPolicy (research §2.9).
struct Consumed {
  Amount amount;
  std::string text;
};

absl::StatusOr<Consumed> ConsumedFor(const CapRequest* request, const CompiledCapacity& cap,
                                     bool fractional) {
  if (request == nullptr) {
    if (cap.policy_default) return Consumed{*cap.policy_default, cap.policy_default_text};
    return Consumed{cap.value, cap.value_text};
  }
  if (!cap.has_policy) return Consumed{request->amount, request->text};
  if (cap.has_range && cap.range_min) {
    const Amount& min = *cap.range_min;
    if (request->amount < min) return Consumed{min, cap.range_min_text};
    if (!cap.range_step) return Consumed{request->amount, request->text};
    const Amount& step = *cap.range_step;
    bool binary = IsBinaryFormat(cap.range_step_text);
    bool use_milli = fractional;
    if (use_milli) {
      for (const auto& q : {cap.range_min, cap.range_max, cap.range_step}) {
        if (q && !q->milli_exact()) use_milli = false;
      }
      if (step.milli_ceil() < 1) use_milli = false;
    }
    if (use_milli) {
      if (!request->amount.milli_exact()) {
        return InvalidArgument("capacity request cannot be represented in the device's range "
                               "arithmetic: request " + request->text +
                               " is not a representable milli value");
      }
      Int128 r = request->amount.milli_ceil(), s = step.milli_ceil(), m = min.milli_ceil();
      Int128 added = r - m, n = added / s;
      if (added % s != 0) ++n;
      Amount v{(m + s * n) * 1000000};
      return Consumed{v, v.Format(binary)};
    }
    Int128 r = request->amount.units_ceil(), s = step.units_ceil(), m = min.units_ceil();
    if (s <= 0) return InvalidArgument("capacity step is zero");
    Int128 added = r - m, n = added / s;
    if (added % s != 0) ++n;
    Amount v{(m + s * n) * Amount::kNano};
    return Consumed{v, v.Format(binary)};
  }
  if (!cap.valid_values.empty()) {
    for (size_t i = 0; i < cap.valid_values.size(); ++i) {
      if (request->amount <= cap.valid_values[i]) {
        return Consumed{cap.valid_values[i], cap.valid_values_text[i]};
      }
    }
  }
  return Consumed{request->amount, request->text};
}

bool ViolatesPolicy(const Amount& consumed, const CompiledCapacity& cap, bool fractional) {
  if (!cap.has_policy) return false;
  if (cap.policy_default && consumed == *cap.policy_default) return false;
  if (cap.has_range) {
    if (cap.range_max && consumed > *cap.range_max) return true;
    if (cap.range_step) {
      Amount min = cap.range_min.value_or(Amount{});
      bool use_milli = fractional;
      if (use_milli) {
        for (const auto& q : {cap.range_min, cap.range_max, cap.range_step}) {
          if (q && !q->milli_exact()) use_milli = false;
        }
        if (cap.range_step->milli_ceil() < 1) use_milli = false;
      }
      if (use_milli) {
        if (!consumed.milli_exact()) return true;
        Int128 s = cap.range_step->milli_ceil();
        return (consumed.milli_ceil() - min.milli_ceil()) % s != 0;
      }
      Int128 s = cap.range_step->units_ceil();
      if (s == 0) return true;
      return (consumed.units_ceil() - min.units_ceil()) % s != 0;
    }
    return false;
  }
  if (!cap.valid_values.empty()) {
    for (const Amount& v : cap.valid_values) {
      if (consumed == v) return false;
    }
    return true;
  }
  return false;
}

absl::StatusOr<bool> CapacityFitsIn(const ReqData& r, const CompiledDevice& d,
                                    const std::map<std::string, Amount>* allocated,
                                    const std::map<std::string, Amount>* allocating,
                                    bool fractional, std::string* why) {
  if (r.capacity.empty() && allocated == nullptr && allocating == nullptr && d.static_fit) {
    return true;  // nothing in use and each capacity takes its default: always fits
  }
  for (const CapRequest& c : r.capacity) {
    if (d.LookupCapacity(c.name) == nullptr) {
      if (why) *why = "has no capacity " + c.name;
      return false;
    }
  }
  for (const CompiledCapacity& cap : d.capacities) {
    const CapRequest* req = nullptr;
    for (const CapRequest& c : r.capacity) {
      if (d.LookupCapacity(c.name) == &cap) req = &c;
    }
    auto consumed = ConsumedFor(req, cap, fractional);
    if (!consumed.ok()) {
      return InvalidArgument("capacity \"" + cap.name + "\": " + Message(consumed.status()));
    }
    if (consumed->amount.nanos < 0) {
      return InvalidArgument("capacity \"" + cap.name + "\": capacity value is negative");
    }
    if (ViolatesPolicy(consumed->amount, cap, fractional)) {
      if (why) *why = "request for " + cap.name + " violates the device's request policy";
      return false;
    }
    Amount total = consumed->amount;
    if (allocated) {
      if (auto it = allocated->find(cap.name); it != allocated->end()) total = total + it->second;
    }
    if (allocating) {
      if (auto it = allocating->find(cap.name); it != allocating->end()) total = total + it->second;
    }
    if (total > cap.value) {
      if (why) *why = "not enough " + cap.name + " left";
      return false;
    }
  }
  return true;
}

absl::StatusOr<bool> Search::CapacityFits(const ReqData& r, const CompiledDevice& d,
                                          std::string* why) {
  const std::map<std::string, Amount>* allocating = nullptr;
  if (auto it = allocating_capacity_.find(d.key); it != allocating_capacity_.end()) {
    allocating = &it->second;
  }
  return CapacityFitsIn(r, d, state_.Capacity(d.key), allocating,
                        features_.fractional_capacity_range, why);
}

bool Search::CountersFit(int p, int s, int d) {
  const PoolView& pool = view_.pools[p];
  if (!available_ready_[p]) {
    available_[p] = pool.counter_values;
    auto subtract = [&](const std::vector<const CompiledSlice*>& slices,
                        const std::vector<std::vector<std::vector<Consumption>>>& consumption) {
      for (size_t si = 0; si < slices.size(); ++si) {
        for (size_t di = 0; di < slices[si]->devices.size(); ++di) {
          if (!IsDeviceAllocated(slices[si]->devices[di].key)) continue;
          for (const Consumption& c : consumption[si][di]) {
            available_[p][c.set][c.counter] = available_[p][c.set][c.counter] - c.amount;
          }
        }
      }
    };
    subtract(pool.slices, pool.consumption);
    subtract(pool.not_targeting, pool.consumption_other);
    consumed_[p].resize(pool.counter_values.size());
    for (size_t k = 0; k < pool.counter_values.size(); ++k) {
      consumed_[p][k].assign(pool.counter_values[k].size(), Amount{});
    }
    available_ready_[p] = 1;
  }
  for (const Consumption& c : pool.consumption[s][d]) {
    consumed_[p][c.set][c.counter] = consumed_[p][c.set][c.counter] + c.amount;
  }
  for (size_t k = 0; k < available_[p].size(); ++k) {
    for (size_t j = 0; j < available_[p][k].size(); ++j) {
      if (available_[p][k][j] < consumed_[p][k][j]) {
        ReleaseCounters(p, s, d);
        return false;
      }
    }
  }
  return true;
}

void Search::ReleaseCounters(int p, int s, int d) {
  for (const Consumption& c : view_.pools[p].consumption[s][d]) {
    consumed_[p][c.set][c.counter] = consumed_[p][c.set][c.counter] - c.amount;
  }
}

const std::map<std::string, GroupIntersection>& Search::GroupBaseline(int p) {
  auto [it, inserted] = group_baseline_.try_emplace(p);
  if (!inserted) return it->second;
  // Devices already allocated, in every slice of the pool (also those of other nodes), as
  // upstream reads them live from the slices.
  const PoolView& pool = view_.pools[p];
  for (const auto* slices : {&pool.slices, &pool.not_targeting}) {
    for (const CompiledSlice* slice : *slices) {
      for (const CompiledDevice& d : slice->devices) {
        if (!IsDeviceAllocated(d.key)) continue;
        for (const CompiledConsumption& c : d.consumes) it->second[c.counter_set].Add(c.groups);
      }
    }
  }
  return it->second;
}

bool Search::GroupsFit(int p, const CompiledDevice& d, std::vector<GroupUndo>* undo) {
  auto& running = group_running_[p];
  const auto& baseline = GroupBaseline(p);
  for (const CompiledConsumption& c : d.consumes) {
    auto it = running.find(c.counter_set);
    const bool existed = it != running.end();
    GroupIntersection current;
    if (existed) {
      current = it->second;
    } else if (auto b = baseline.find(c.counter_set); b != baseline.end()) {
      current = b->second;
    }
    if (!current.Admits(c.groups)) {
      ReleaseGroups(p, *undo);
      return false;
    }
    undo->push_back({c.counter_set, current, existed});
    current.Add(c.groups);
    running[c.counter_set] = std::move(current);
  }
  return true;
}

void Search::ReleaseGroups(int p, std::vector<GroupUndo>& undo) {
  if (undo.empty()) return;
  auto& running = group_running_[p];
  for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
    if (it->existed) {
      running[it->counter_set] = std::move(it->previous);
    } else {
      running.erase(it->counter_set);
    }
  }
  undo.clear();
}

bool Search::ConstraintApplies(const ConstraintState& c, const ReqData& r) {
  if (c.requests.empty()) return true;
  if (r.sub_index < 0) return c.requests.count(r.name) > 0;
  return c.requests.count(r.parent) > 0 || c.requests.count(r.full_name) > 0;
}

absl::StatusOr<const CompiledAttribute*> Search::LookupAttribute(const ConstraintState& c,
                                                                 const ReqData& r,
                                                                 const CompiledDevice& d,
                                                                 const PoolView& p) {
  if (!r.derived.empty()) {
    if (auto it = r.derived.find(c.name); it != r.derived.end()) {
      const std::string& expression = it->second;
      if (auto hit = derived_cache_.find(std::make_pair(d.key, expression));
          hit != derived_cache_.end()) {
        return hit->second.get();
      }
      std::shared_ptr<const CompiledSelector> compiled = snap_.selectors->CompileDerived(expression);
      if (compiled->program == nullptr) {
        return InvalidArgument("compile derived attribute " + c.name +
                               " failed: " + compiled->compile_error);
      }
      cel::dra::MatchOptions mo;
      mo.deadline = options_.deadline;
      mo.cancelled = options_.cancelled;
      auto value = cel::dra::EvaluateDerivedAttribute(*compiled->program, d, mo);
      if (!value.ok()) {
        return absl::Status(value.status().code(),
                            "evaluate derived attribute " + c.name + " on device " + p.id + "/" +
                                d.name + " failed: " + Message(value.status()));
      }
      auto attr = std::make_unique<CompiledAttribute>();
      attr->is_list = value->is_list;
      attr->values.reserve(value->values.size());
      for (cel::dra::DerivedValue& v : value->values) {
        AttrValue a;
        switch (v.kind) {
          case cel::dra::Attribute::Kind::kBool:
            a.type = AttrValue::Type::kBool;
            a.i = v.bool_value ? 1 : 0;
            break;
          case cel::dra::Attribute::Kind::kString:
            a.type = AttrValue::Type::kString;
            a.s = std::move(v.string_value);
            break;
          case cel::dra::Attribute::Kind::kVersion:
            a.type = AttrValue::Type::kVersion;
            a.s = std::move(v.string_value);
            break;
          default:
            a.type = AttrValue::Type::kInt;
            a.i = v.int_value;
            break;
        }
        attr->values.push_back(std::move(a));
      }
      const CompiledAttribute* result = attr.get();
      derived_cache_.emplace(std::make_pair(d.key, expression), std::move(attr));
      return result;
    }
  }
  return c.domain.empty() ? d.Lookup(d.driver_name, c.id) : d.Lookup(c.domain, c.id);
}

absl::StatusOr<bool> Search::ConstraintAdd(ConstraintState& c, const ReqData& r,
                                           const CompiledDevice& d, const PoolView& p) {
  if (!ConstraintApplies(c, r)) return true;
  DEVLET_ASSIGN_OR_RETURN(const CompiledAttribute* attr, LookupAttribute(c, r, d, p));
  if (attr == nullptr) return false;
  if (features_.list_type_attributes) {
    // Set semantics: scalars are one-element sets (research §2.7, §3.6). An empty list is no set
    // at all for upstream (attributeAsSet returns nil): it neither matches nor is distinct.
    if (attr->values.empty()) return false;
    if (c.match) {
      std::vector<AttrValue> next;
      if (c.intersections.empty()) {
        next = attr->values;
      } else {
        for (const AttrValue& v : c.intersections.back()) {
          if (std::find(attr->values.begin(), attr->values.end(), v) != attr->values.end()) {
            next.push_back(v);
          }
        }
        if (next.empty()) return false;
      }
      c.intersections.push_back(std::move(next));
      return true;
    }
    for (const CompiledAttribute* seen : c.seen) {
      for (const AttrValue& v : attr->values) {
        if (std::find(seen->values.begin(), seen->values.end(), v) != seen->values.end()) {
          return false;
        }
      }
    }
    c.seen.push_back(attr);
    return true;
  }
  if (c.match) {
    if (c.num == 0) {
      c.first = attr;
      c.num = 1;
      return true;
    }
    if (attr->is_list || c.first->is_list) return false;  // unknown type without the gate
    if (!(attr->values.front() == c.first->values.front())) return false;
    ++c.num;
    return true;
  }
  for (const CompiledAttribute* seen : c.seen) {
    if (attr->is_list) return false;  // unknown type without the gate
    if (!seen->is_list && seen->values.front() == attr->values.front()) return false;
  }
  c.seen.push_back(attr);
  return true;
}

void Search::ConstraintRemove(ConstraintState& c, const ReqData& r) {
  if (!ConstraintApplies(c, r)) return;
  if (features_.list_type_attributes && c.match) {
    c.intersections.pop_back();
    return;
  }
  if (c.match) {
    --c.num;
  } else {
    c.seen.pop_back();
  }
}

absl::StatusOr<bool> Search::AllocateDevice(int claim, const ReqData& r, const DeviceRef& ref,
                                            bool must) {
  const PoolView& pool = view_.pools[ref.pool];
  const CompiledSlice& slice = *pool.slices[ref.slice];
  const CompiledDevice& device = slice.devices[ref.device];
  bool multi = features_.consumable_capacity && device.allow_multiple;
  if (!multi && r.admin_access && AllocatingForClaim(device.key, claim)) {
    Note(r, device, pool, "already allocated for this claim");
    return false;
  }
  if (!r.admin_access && InUse(device.key)) {
    Note(r, device, pool, "in use");
    return false;
  }
  if (!slice.slice.spec.skip_node_operations.empty() && features_.experimental()) {
    // KEP-5945, as upstream's experimental allocator (the others ignore the field, which the
    // API server drops while the gate is off).
    if (!features_.optional_node_operations) {
      Note(r, device, pool, "its slice skips node operations, but DRAOptionalNodeOperations is "
                            "disabled");
      return false;
    }
    if (!NodeDeclaresOptionalNodeOperations()) {
      Note(r, device, pool, "its slice skips node operations, which the node does not declare "
                            "(status.declaredFeatures DRAOptionalNodeOperations)");
      return false;
    }
  }
  if (!features_.partitionable_devices && !device.consumes.empty()) {
    Note(r, device, pool, "consumes counters, but DRAPartitionableDevices is disabled");
    return false;
  }
  bool capacity_in_use = state_.HasCapacity(device.key) || state_.Shared(device.key) ||
                         allocating_shares_.count(device.key) > 0;
  bool skip_counters = multi && capacity_in_use;
  Undo undo;
  undo.ref = ref;
  // Upstream checks compatibility groups before counters, under the same condition.
  if (features_.compatibility_groups && !skip_counters && !device.consumes.empty()) {
    if (!GroupsFit(ref.pool, device, &undo.groups)) {
      Note(r, device, pool, "compatibility groups do not fit the devices on its counter set");
      return false;
    }
  }
  if (!skip_counters && !device.consumes.empty()) {
    if (!CountersFit(ref.pool, ref.slice, ref.device)) {
      ReleaseGroups(ref.pool, undo.groups);
      Note(r, device, pool, "not enough shared counters left");
      return false;
    }
    undo.counters = true;
  }
  auto rollback = [&]() {
    for (int i = undo.constraints - 1; i >= 0; --i) ConstraintRemove(constraints_[claim][i], r);
    ReleaseGroups(ref.pool, undo.groups);
    if (undo.counters) ReleaseCounters(ref.pool, ref.slice, ref.device);
  };
  if (features_.device_taints && TaintPrevents(device, r)) {
    Note(r, device, pool, "has a taint that the request does not tolerate");
    rollback();
    return false;
  }
  for (ConstraintState& c : constraints_[claim]) {
    absl::StatusOr<bool> added = ConstraintAdd(c, r, device, pool);
    if (!added.ok()) {
      rollback();
      return added.status();
    }
    if (!*added) {
      if (!Noted(r, device)) {
        Note(r, device, pool,
             std::string(c.match ? "matchAttribute " : "distinctAttribute ") +
                 (c.domain.empty() ? c.id : c.domain + "/" + c.id) + " not satisfied");
      }
      rollback();
      if (must) {
        return FailedPrecondition("claim " + claims_[claim].label + ", request " + r.name +
                                  ": cannot add device " + pool.id + "/" + device.name +
                                  " because a claim constraint would not be satisfied");
      }
      return false;
    }
    ++undo.constraints;
  }
  ResultEntry entry;
  entry.request = &r;
  entry.pool = &pool;
  entry.slice = &slice;
  entry.device = &device;
  if (features_.consumable_capacity) {
    std::string why;
    auto fits = CapacityFits(r, device, &why);
    if (!fits.ok()) {
      rollback();
      return InvalidArgument("claim " + claims_[claim].label + ", request " + r.name +
                             ": rechecking capacity for device " + pool.id + "/" + device.name +
                             ": " + Message(fits.status()));
    }
    if (!*fits) {
      Note(r, device, pool, why);
      rollback();
      return false;
    }
    if (multi) {
      auto& inflight = allocating_capacity_[device.key];
      for (const CompiledCapacity& cap : device.capacities) {
        const CapRequest* req = nullptr;
        for (const CapRequest& c : r.capacity) {
          if (device.LookupCapacity(c.name) == &cap) req = &c;
        }
        auto consumed = ConsumedFor(req, cap, features_.fractional_capacity_range);
        if (!consumed.ok()) {
          rollback();
          return InvalidArgument("claim " + claims_[claim].label + ", request " + r.name +
                                 ": computing consumed capacity for device " + pool.id + "/" +
                                 device.name + ": " + Message(consumed.status()));
        }
        entry.consumed.push_back({cap.name, {consumed->amount, consumed->text}});
        inflight[cap.name] = inflight[cap.name] + consumed->amount;
      }
      allocating_shares_[device.key]++;
      entry.share_id = options_.fixed_share_id ? *options_.fixed_share_id : NewShareId();
      undo.capacity = true;
    }
  }
  if (!multi) {
    allocating_.emplace_back(device.key, claim);
    undo.marked = true;
  }
  if (options_.explain != nullptr) {
    // A later backtrack may undo this; the verdict records the first decision.
    Note(r, device, pool, "selected");
  }
  results_[claim].push_back(std::move(entry));
  undo_[claim].push_back(std::move(undo));
  return true;
}

void Search::Deallocate(int claim) {
  ResultEntry entry = std::move(results_[claim].back());
  results_[claim].pop_back();
  Undo undo = std::move(undo_[claim].back());
  undo_[claim].pop_back();
  const ReqData& r = *entry.request;
  const CompiledDevice& device = *entry.device;
  if (options_.explain != nullptr) {
    if (auto it = noted_.find(NoteKey(r, device)); it != noted_.end()) {
      std::string& verdict = options_.explain->candidates[it->second].verdict;
      if (verdict == "selected") verdict = "selected, then released when the search backtracked";
    }
  }
  if (undo.capacity) {
    auto& inflight = allocating_capacity_[device.key];
    for (const auto& [name, consumed] : entry.consumed) {
      inflight[name] = inflight[name] - consumed.first;
    }
    if (--allocating_shares_[device.key] == 0) {
      allocating_shares_.erase(device.key);
      allocating_capacity_.erase(device.key);
    }
  }
  if (undo.marked) {
    for (auto it = allocating_.rbegin(); it != allocating_.rend(); ++it) {
      if (it->first == device.key && it->second == claim) {
        allocating_.erase(std::next(it).base());
        break;
      }
    }
  }
  for (int i = undo.constraints - 1; i >= 0; --i) ConstraintRemove(constraints_[claim][i], r);
  ReleaseGroups(undo.ref.pool, undo.groups);
  if (undo.counters) ReleaseCounters(undo.ref.pool, undo.ref.slice, undo.ref.device);
}

absl::StatusOr<Step> Search::AllocateOne(int claim, int request, int sub, int device_index,
                                         bool in_sub, DeviceRef start) {
  ++steps_;
  DEVLET_RETURN_IF_ERROR(CheckInterrupt(claim));
  if (claim >= static_cast<int>(claims_.size())) return Step::kDone;
  ClaimData& cd = claims_[claim];
  if (request >= static_cast<int>(cd.requests.size())) {
    DEVLET_ASSIGN_OR_RETURN(Step s, AllocateOne(claim + 1, 0, 0, 0, false, DeviceRef{}));
    if (s == Step::kMaxSize) return Step::kFail;  // swallowed at claim boundaries
    return s;
  }
  RequestSlot& slot = cd.requests[request];
  if (!in_sub && slot.has_subs) {
    bool all_exceeded = true;
    for (int si = 0; si < static_cast<int>(slot.alternatives.size()); ++si) {
      DEVLET_ASSIGN_OR_RETURN(Step s, AllocateOne(claim, request, si, device_index, true, DeviceRef{}));
      if (s == Step::kMaxSize) continue;
      all_exceeded = false;
      if (s == Step::kDone) {
        slot.selected = si;
        return Step::kDone;
      }
    }
    return all_exceeded ? Step::kMaxSize : Step::kFail;
  }
  const ReqData& r = slot.alternatives[slot.has_subs ? sub : 0];
  if (r.all_mode && r.all_devices.empty()) return Step::kFail;
  if (device_index >= r.num_devices) {
    return AllocateOne(claim, request + 1, 0, 0, false, DeviceRef{});
  }
  int remaining = r.num_devices - device_index;
  int available = kMaxResults - static_cast<int>(results_[claim].size());
  if (remaining > available) return Step::kMaxSize;

  if (r.all_mode) {
    const DeviceRef& ref = r.all_devices[device_index];
    DEVLET_ASSIGN_OR_RETURN(bool ok, AllocateDevice(claim, r, ref, true));
    if (!ok) return Step::kFail;
    auto s = AllocateOne(claim, request, sub, device_index + 1, in_sub, DeviceRef{});
    if (!s.ok() || *s != Step::kDone) Deallocate(claim);
    return s;
  }

  for (int p = start.pool; p < static_cast<int>(view_.pools.size()); ++p) {
    const PoolView& pool = view_.pools[p];
    if (pool.incomplete || pool.invalid) continue;
    int slice_start = p == start.pool ? start.slice : 0;
    for (int s = slice_start; s < static_cast<int>(pool.slices.size()); ++s) {
      const CompiledSlice& slice = *pool.slices[s];
      int device_start = (p == start.pool && s == start.slice) ? start.device : 0;
      for (int d = device_start; d < static_cast<int>(slice.devices.size()); ++d) {
        const CompiledDevice& device = slice.devices[d];
        if (r.admin_access && AllocatingForClaim(device.key, claim)) {
          Note(r, device, pool, "already allocated for this claim");
          continue;
        }
        if (!r.admin_access && InUse(device.key)) {
          Note(r, device, pool, "in use");
          continue;
        }
        DeviceRef ref{p, s, d};
        DEVLET_ASSIGN_OR_RETURN(bool selectable, Selectable(r, cd, ref));
        if (!selectable) continue;
        if (features_.consumable_capacity) {
          std::string why;
          auto fits = CapacityFits(r, device, options_.explain ? &why : nullptr);
          if (!fits.ok()) {
            return InvalidArgument("claim " + cd.label + ", request " + r.name +
                                   ": checking capacity for device " + pool.id + "/" +
                                   device.name + ": " + Message(fits.status()));
          }
          if (!*fits) {
            Note(r, device, pool, why);
            continue;
          }
        }
        DEVLET_ASSIGN_OR_RETURN(bool ok, AllocateDevice(claim, r, ref, false));
        if (!ok) continue;
        auto next = AllocateOne(claim, request, sub, device_index + 1, in_sub, DeviceRef{p, s, d + 1});
        if (next.ok() && *next == Step::kDone) return Step::kDone;
        Deallocate(claim);
        if (!next.ok()) return next.status();
        // kMaxSize depends only on how many results the claim holds, not on which device this
        // slot took: every other device here ends the same way, so give up on this request at
        // once (upstream returns errAllocationResultMaxSizeExceeded from here too). Trying them
        // walks every combination of the request's devices first (issue 16: 34 devices, a
        // firstAvailable of [31, else 1] beside a request for 2 ran for minutes).
        if (*next == Step::kMaxSize) return Step::kMaxSize;
      }
    }
  }
  return Step::kFail;
}

absl::StatusOr<bool> Search::Run() {
  DEVLET_ASSIGN_OR_RETURN(Step s, AllocateOne(0, 0, 0, 0, false, DeviceRef{}));
  return s == Step::kDone;
}

void AddRequirements(const std::vector<kube::NodeSelectorRequirement>& from,
                     std::vector<kube::NodeSelectorRequirement>& to) {
  for (const auto& req : from) {
    std::set<std::string> values(req.values.begin(), req.values.end());
    bool found = false;
    for (const auto& existing : to) {
      if (existing.key == req.key && existing.operator_ == req.operator_ &&
          std::set<std::string>(existing.values.begin(), existing.values.end()) == values) {
        found = true;
        break;
      }
    }
    if (!found) to.push_back(req);
  }
}

absl::StatusOr<std::vector<kube::AllocationResult>> Search::Results() {
  std::vector<kube::AllocationResult> out(claims_.size());
  for (size_t ci = 0; ci < claims_.size(); ++ci) {
    const ClaimData& cd = claims_[ci];
    const auto& spec = cd.claim->spec.devices;
    kube::AllocationResult& result = out[ci];
    for (const ResultEntry& e : results_[ci]) {
      kube::DeviceRequestAllocationResult d;
      d.request = e.request->full_name;
      d.driver = e.pool->driver;
      d.pool = e.pool->pool;
      d.device = e.device->name;
      d.share_id = e.share_id;
      if (options_.devices_only) {
        result.devices.results.push_back(std::move(d));
        continue;
      }
      if (e.request->admin_access) d.admin_access = true;
      if (e.request->tolerations) d.tolerations = *e.request->tolerations;
      for (const auto& [name, consumed] : e.consumed) {
        auto q = kube::Quantity::Parse(consumed.second);
        if (q.ok()) d.consumed_capacity[name] = *q;
      }
      if (features_.experimental()) {
        // Without the gate no such slice is chosen (AllocateDevice).
        d.skip_node_operations = e.slice->slice.spec.skip_node_operations;
      }
      if (features_.binding_and_status()) {
        d.binding_conditions = e.device->source->binding_conditions;
        d.binding_failure_conditions = e.device->source->binding_failure_conditions;
      }
      result.devices.results.push_back(std::move(d));
    }
    if (options_.devices_only) continue;
    // Configs: class configs first, then claim configs (research §2.13).
    std::map<std::string, std::pair<size_t, size_t>> class_ranges;
    std::vector<const ReqData*> chosen;
    for (const RequestSlot& slot : cd.requests) {
      chosen.push_back(&slot.alternatives[slot.has_subs ? slot.selected : 0]);
    }
    for (const ReqData* r : chosen) {
      const std::string& class_name = r->device_class->metadata.name;
      if (auto it = class_ranges.find(class_name); it != class_ranges.end()) {
        for (size_t i = it->second.first; i < it->second.second; ++i) {
          result.devices.config[i].requests.push_back(r->full_name);
        }
        continue;
      }
      size_t begin = result.devices.config.size();
      for (const auto& config : r->device_class->spec.config) {
        kube::DeviceAllocationConfiguration c;
        c.opaque = config.opaque;
        c.source = std::string(kube::kAllocationConfigSourceClass);
        c.requests = {r->full_name};
        result.devices.config.push_back(std::move(c));
      }
      class_ranges[class_name] = {begin, result.devices.config.size()};
    }
    for (const auto& config : spec.config) {
      bool applies = config.requests.empty();
      for (size_t ri = 0; !applies && ri < spec.requests.size(); ++ri) {
        const auto& names = config.requests;
        if (std::find(names.begin(), names.end(), spec.requests[ri].name) != names.end()) {
          applies = true;
        } else if (chosen[ri]->sub_index >= 0 &&
                   std::find(names.begin(), names.end(), chosen[ri]->full_name) != names.end()) {
          applies = true;
        }
      }
      if (!applies) continue;
      kube::DeviceAllocationConfiguration c;
      c.opaque = config.opaque;
      c.source = std::string(kube::kAllocationConfigSourceClaim);
      c.requests = config.requests;
      result.devices.config.push_back(std::move(c));
    }
    for (auto& config : result.devices.config) {
      if (config.requests.empty()) continue;
      bool all = true;
      for (size_t ri = 0; all && ri < spec.requests.size(); ++ri) {
        const auto& names = config.requests;
        if (std::find(names.begin(), names.end(), spec.requests[ri].name) != names.end()) continue;
        if (chosen[ri]->sub_index >= 0 &&
            std::find(names.begin(), names.end(), chosen[ri]->full_name) != names.end()) {
          continue;
        }
        all = false;
      }
      if (all) config.requests.clear();
    }
    // Node selector.
    kube::NodeSelectorTerm term;
    bool pinned = false;
    for (const ResultEntry& e : results_[ci]) {
      const auto& slice_spec = e.slice->slice.spec;
      const std::optional<std::string>* node_name;
      const std::optional<kube::NodeSelector>* selector;
      if (e.slice->per_device) {
        node_name = &e.device->source->node_name;
        selector = &e.device->source->node_selector;
      } else {
        node_name = &slice_spec.node_name;
        selector = &slice_spec.node_selector;
      }
      if (node_name->has_value() || e.device->binds_to_node) {
        pinned = true;
        break;
      }
      if (selector->has_value() && (*selector)->node_selector_terms.size() > 1) {
        return InvalidArgument("create NodeSelector for claim " + cd.claim->metadata.name +
                               ": unsupported ResourceSlice.NodeSelector with " +
                               std::to_string((*selector)->node_selector_terms.size()) + " terms");
      }
      if (selector->has_value() && (*selector)->node_selector_terms.size() == 1) {
        AddRequirements((*selector)->node_selector_terms[0].match_fields, term.match_fields);
        AddRequirements((*selector)->node_selector_terms[0].match_expressions,
                        term.match_expressions);
      }
    }
    if (pinned) {
      kube::NodeSelector ns;
      kube::NodeSelectorTerm t;
      t.match_fields.push_back(kube::NodeSelectorRequirement{
          std::string(kube::kNodeFieldSelectorKeyNodeName), std::string(kube::kNodeSelectorOpIn),
          {node_.metadata.name}});
      ns.node_selector_terms.push_back(std::move(t));
      result.node_selector = std::move(ns);
    } else if (!term.match_fields.empty() || !term.match_expressions.empty()) {
      kube::NodeSelector ns;
      ns.node_selector_terms.push_back(std::move(term));
      result.node_selector = std::move(ns);
    }
  }
  return out;
}

}  // namespace

AllocateOutcome Allocate(const Snapshot& snapshot, const kube::Node& node,
                         const std::vector<const kube::ResourceClaim*>& claims,
                         const AllocatedState& state, const AllocateOptions& options) {
  AllocateOutcome out;
  const SnapshotImpl& snap = snapshot.impl();
  auto view = snap.ViewFor(node);
  if (!view.ok()) {
    out.kind = AllocateOutcome::Kind::kError;
    out.status = WithContext(view.status(), "gather pool information");
    return out;
  }
  if (options.explain != nullptr) {
    for (const PoolView& p : (*view)->pools) {
      Explanation::Pool info;
      info.id = p.id;
      if (p.incomplete) {
        info.status = "incomplete: " + p.reason;
      } else if (p.invalid) {
        info.status = "invalid: " + p.reason;
      } else {
        info.status = "complete";
        if (p.has_binding_conditions) info.status += ", binding conditions";
      }
      for (const CompiledSlice* s : p.slices) info.devices += static_cast<int>(s->devices.size());
      options.explain->pools.push_back(std::move(info));
    }
  }
  if (options.count_node_devices) {
    const AllocatedStateImpl& used = state.impl();
    for (const PoolView& p : (*view)->pools) {
      if (p.incomplete || p.invalid) continue;
      for (size_t s = 0; s < p.slices.size(); ++s) {
        const CompiledSlice& slice = *p.slices[s];
        for (size_t d = 0; d < slice.devices.size(); ++d) {
          if (slice.per_device && !p.node_ok[s][d]) continue;
          const KeyId k = slice.devices[d].key;
          ++out.node_devices;
          if (used.Dedicated(k) || used.Shared(k) || used.HasCapacity(k)) ++out.node_devices_in_use;
        }
      }
    }
  }
  Search search(snap, **view, node, state.impl(), options);
  absl::Status prepared = search.Prepare(claims);
  if (!prepared.ok()) {
    out.kind = AllocateOutcome::Kind::kError;
    out.status = prepared;
    return out;
  }
  auto done = search.Run();
  out.steps = search.steps();
  if (options.explain != nullptr) options.explain->steps = search.steps();
  if (!done.ok()) {
    out.kind = AllocateOutcome::Kind::kError;
    out.status = done.status();
    return out;
  }
  if (!*done) {
    out.kind = AllocateOutcome::Kind::kUnschedulable;
    out.reason = search.AnyInvalidPool() ? "invalid resource pools were encountered"
                                         : "cannot allocate all claims";
    return out;
  }
  if (options.verdict_only) {
    out.kind = AllocateOutcome::Kind::kAllocated;
    return out;
  }
  auto results = search.Results();
  if (!results.ok()) {
    out.kind = AllocateOutcome::Kind::kError;
    out.status = results.status();
    return out;
  }
  out.kind = AllocateOutcome::Kind::kAllocated;
  out.results = std::move(*results);
  return out;
}

}  // namespace devlet::allocator
