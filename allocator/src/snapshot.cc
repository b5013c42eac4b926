#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "devlet/allocator/amount.h"
#include "devlet/allocator/allocator.h"
#include "devlet/cel/quantity.h"
#include "devlet/common/status.h"
#include "snapshot_impl.h"

namespace devlet::allocator {

// ---- Device key interning ------------------------------------------------------------------

namespace {

// A key looked up by its three parts, without building the "driver/pool/device" text.
struct KeyParts {
  std::string_view driver, pool, device;
};

// FNV-1a over the key text; KeyParts hash as the text they spell.
struct KeyHash {
  using is_transparent = void;
  static uint64_t Mix(uint64_t h, std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    return h;
  }
  size_t operator()(std::string_view text) const { return Mix(14695981039346656037ULL, text); }
  size_t operator()(const std::string& text) const { return (*this)(std::string_view(text)); }
  size_t operator()(const KeyParts& k) const {
    uint64_t h = Mix(14695981039346656037ULL, k.driver);
    h = Mix(h, "/");
    h = Mix(h, k.pool);
    h = Mix(h, "/");
    return Mix(h, k.device);
  }
};

struct KeyEqual {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const { return a == b; }
  bool operator()(const KeyParts& k, const std::string& text) const {
    const size_t n = k.driver.size() + k.pool.size() + k.device.size() + 2;
    if (text.size() != n) return false;
    std::string_view t = text;
    return t.substr(0, k.driver.size()) == k.driver && t[k.driver.size()] == '/' &&
           t.substr(k.driver.size() + 1, k.pool.size()) == k.pool &&
           t[k.driver.size() + 1 + k.pool.size()] == '/' &&
           t.substr(n - k.device.size()) == k.device;
  }
  bool operator()(const std::string& text, const KeyParts& k) const { return (*this)(k, text); }
};

struct KeyTable {
  std::shared_mutex mu;
  std::unordered_map<std::string, KeyId, KeyHash, KeyEqual> ids;
};

KeyTable& Keys() {
  static KeyTable* table = new KeyTable();
  return *table;
}

std::string KeyText(std::string_view driver, std::string_view pool, std::string_view device) {
  std::string key;
  key.reserve(driver.size() + pool.size() + device.size() + 2);
  key.append(driver).push_back('/');
  key.append(pool).push_back('/');
  key.append(device);
  return key;
}

std::pair<std::string_view, std::string_view> SplitName(std::string_view name,
                                                        std::string_view driver) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) return {driver, name};
  return {name.substr(0, slash), name.substr(slash + 1)};
}

}  // namespace

KeyId InternDeviceKey(std::string_view driver, std::string_view pool, std::string_view device) {
  KeyTable& t = Keys();
  {
    std::shared_lock lock(t.mu);
    auto it = t.ids.find(KeyParts{driver, pool, device});
    if (it != t.ids.end()) return it->second;
  }
  std::string key = KeyText(driver, pool, device);
  std::unique_lock lock(t.mu);
  auto [it, inserted] = t.ids.emplace(std::move(key), static_cast<KeyId>(t.ids.size()));
  return it->second;
}

KeyId FindDeviceKey(std::string_view driver, std::string_view pool, std::string_view device) {
  KeyTable& t = Keys();
  std::shared_lock lock(t.mu);
  auto it = t.ids.find(KeyParts{driver, pool, device});
  return it == t.ids.end() ? UINT32_MAX : it->second;
}

// ---- CompiledDevice ------------------------------------------------------------------------

const CompiledAttribute* CompiledDevice::Lookup(std::string_view domain,
                                                std::string_view id) const {
  for (const CompiledAttribute& a : attributes) {
    if (a.domain == domain && a.id == id) return &a;
  }
  return nullptr;
}

const CompiledCapacity* CompiledDevice::LookupCapacity(std::string_view written) const {
  auto [domain, id] = SplitName(written, driver_name);
  for (const CompiledCapacity& c : capacities) {
    if (c.domain == domain && c.id == id) return &c;
  }
  return nullptr;
}

const cel::dra::Attribute* CompiledDevice::FindAttribute(std::string_view domain,
                                                         std::string_view id) const {
  const CompiledAttribute* a = Lookup(domain, id);
  return a == nullptr ? nullptr : &a->view;
}

const cel::Quantity* CompiledDevice::FindCapacity(std::string_view domain,
                                                  std::string_view id) const {
  for (const CompiledCapacity& c : capacities) {
    if (c.domain == domain && c.id == id) return c.quantity.get();
  }
  return nullptr;
}

void CompiledDevice::ForEachAttributeDomain(absl::FunctionRef<void(std::string_view)> fn) const {
  std::string_view last;
  bool first = true;
  for (const CompiledAttribute& a : attributes) {
    if (first || a.domain != last) fn(a.domain);
    last = a.domain;
    first = false;
  }
}

void CompiledDevice::ForEachAttribute(
    std::string_view domain,
    absl::FunctionRef<void(std::string_view, const cel::dra::Attribute&)> fn) const {
  for (const CompiledAttribute& a : attributes) {
    if (a.domain == domain) fn(a.id, a.view);
  }
}

void CompiledDevice::ForEachCapacityDomain(absl::FunctionRef<void(std::string_view)> fn) const {
  std::string_view last;
  bool first = true;
  for (const CompiledCapacity& c : capacities) {
    if (first || c.domain != last) fn(c.domain);
    last = c.domain;
    first = false;
  }
}

void CompiledDevice::ForEachCapacity(
    std::string_view domain,
    absl::FunctionRef<void(std::string_view, const cel::Quantity&)> fn) const {
  for (const CompiledCapacity& c : capacities) {
    if (c.domain == domain && c.quantity) fn(c.id, *c.quantity);
  }
}

// ---- CompiledSlice memo ------------------------------------------------------------------------

std::atomic<uint8_t>* CompiledSlice::Memo(int set_id) const {
  {
    std::shared_lock lock(memo_mu_);
    if (static_cast<size_t>(set_id) < memo_.size() && memo_[set_id]) return memo_[set_id].get();
  }
  std::unique_lock lock(memo_mu_);
  if (static_cast<size_t>(set_id) >= memo_.size()) memo_.resize(set_id + 1);
  if (!memo_[set_id]) {
    memo_[set_id] = std::make_unique<std::atomic<uint8_t>[]>(devices.size() + 1);
    for (size_t i = 0; i <= devices.size(); ++i) memo_[set_id][i].store(kMemoUnknown);
  }
  return memo_[set_id].get();
}

void CompiledSlice::RecordError(int set_id, size_t device, MemoError error) const {
  std::unique_lock lock(memo_mu_);
  errors_[{set_id, device}] = std::move(error);
}

std::optional<MemoError> CompiledSlice::GetError(int set_id, size_t device) const {
  std::shared_lock lock(memo_mu_);
  auto it = errors_.find({set_id, device});
  if (it == errors_.end()) return std::nullopt;
  return it->second;
}

// ---- Compiling slices ----------------------------------------------------------------------

namespace {

absl::Status CompileAttribute(const std::string& slice_name, const std::string& device_name,
                              const std::string& key, const kube::DeviceAttribute& attribute,
                              CompiledAttribute& out) {
  auto add = [&](AttrValue::Type type, int64_t i, std::string s) {
    AttrValue v;
    v.type = type;
    v.i = i;
    v.s = std::move(s);
    out.values.push_back(std::move(v));
  };
  switch (attribute.kind()) {
    case kube::DeviceAttribute::Kind::kInt: add(AttrValue::Type::kInt, *attribute.int_value, ""); break;
    case kube::DeviceAttribute::Kind::kBool: add(AttrValue::Type::kBool, *attribute.bool_value ? 1 : 0, ""); break;
    case kube::DeviceAttribute::Kind::kString: add(AttrValue::Type::kString, 0, *attribute.string_value); break;
    case kube::DeviceAttribute::Kind::kVersion: add(AttrValue::Type::kVersion, 0, *attribute.version_value); break;
    case kube::DeviceAttribute::Kind::kInts:
      out.is_list = true;
      for (int64_t v : *attribute.int_values) add(AttrValue::Type::kInt, v, "");
      break;
    case kube::DeviceAttribute::Kind::kBools:
      out.is_list = true;
      for (bool v : *attribute.bool_values) add(AttrValue::Type::kBool, v ? 1 : 0, "");
      break;
    case kube::DeviceAttribute::Kind::kStrings:
      out.is_list = true;
      for (const std::string& v : *attribute.string_values) add(AttrValue::Type::kString, 0, v);
      break;
    case kube::DeviceAttribute::Kind::kVersions:
      out.is_list = true;
      for (const std::string& v : *attribute.version_values) add(AttrValue::Type::kVersion, 0, v);
      break;
    case kube::DeviceAttribute::Kind::kNone:
      return InvalidArgument("ResourceSlice \"" + slice_name + "\": device \"" + device_name +
                             "\": attributes[\"" + key + "\"]: no value set");
  }
  return absl::OkStatus();
}

cel::dra::Attribute ViewOf(const AttrValue& v) {
  cel::dra::Attribute a;
  switch (v.type) {
    case AttrValue::Type::kInt: a.kind = cel::dra::Attribute::Kind::kInt; a.int_value = v.i; break;
    case AttrValue::Type::kBool: a.kind = cel::dra::Attribute::Kind::kBool; a.bool_value = v.i != 0; break;
    case AttrValue::Type::kString: a.kind = cel::dra::Attribute::Kind::kString; a.string_value = v.s; break;
    case AttrValue::Type::kVersion: a.kind = cel::dra::Attribute::Kind::kVersion; a.string_value = v.s; break;
  }
  return a;
}

absl::StatusOr<Amount> ParseAmount(const kube::Quantity& q, const std::string& where) {
  auto a = Amount::Parse(q.str());
  if (!a.ok()) return InvalidArgument(where + ": " + Message(a.status()));
  return *a;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CompiledSlice>> CompileSlice(
    kube::ResourceSlice slice, const std::vector<kube::DeviceTaintRule>& rules,
    const Features& features) {
  auto out = std::make_shared<CompiledSlice>();
  out->name = slice.metadata.name;
  out->driver = slice.spec.driver;
  out->pool = slice.spec.pool.name;
  out->generation = slice.spec.pool.generation;
  out->count = slice.spec.pool.resource_slice_count;
  out->per_device = slice.spec.per_device_node_selection.value_or(false);
  out->has_counter_sets = !slice.spec.shared_counters.empty();
  out->slice = std::move(slice);
  const std::string where0 = "ResourceSlice \"" + out->name + "\"";
  for (const kube::CounterSet& set : out->slice.spec.shared_counters) {
    for (const auto& [name, counter] : set.counters) {
      DEVLET_RETURN_IF_ERROR(ParseAmount(counter.value, where0 + ": spec.sharedCounters[" +
                                                            set.name + "].counters[" + name +
                                                            "].value"));
    }
  }
  out->devices.resize(out->slice.spec.devices.size());
  for (size_t i = 0; i < out->slice.spec.devices.size(); ++i) {
    const kube::Device& src = out->slice.spec.devices[i];
    CompiledDevice& d = out->devices[i];
    const std::string where = where0 + ": spec.devices[" + std::to_string(i) + "]";
    d.name = src.name;
    d.driver_name = out->driver;
    d.key = InternDeviceKey(out->driver, out->pool, src.name);
    d.source = &src;
    for (const auto& [key, attribute] : src.attributes) {
      CompiledAttribute a;
      auto [domain, id] = SplitName(key, out->driver);
      a.domain = std::string(domain);
      a.id = std::string(id);
      DEVLET_RETURN_IF_ERROR(CompileAttribute(out->name, src.name, key, attribute, a));
      d.attributes.push_back(std::move(a));
    }
    std::sort(d.attributes.begin(), d.attributes.end(), [](const auto& a, const auto& b) {
      return std::tie(a.domain, a.id) < std::tie(b.domain, b.id);
    });
    for (CompiledAttribute& a : d.attributes) {  // views point into the final storage
      if (a.is_list) {
        for (const AttrValue& v : a.values) a.elements.push_back(ViewOf(v));
        a.view.kind = cel::dra::Attribute::Kind::kList;
        a.view.elements = a.elements;
      } else {
        a.view = ViewOf(a.values.front());
      }
    }
    for (const auto& [key, capacity] : src.capacity) {
      CompiledCapacity c;
      c.name = key;
      auto [domain, id] = SplitName(key, out->driver);
      c.domain = std::string(domain);
      c.id = std::string(id);
      const std::string cwhere = where + ".capacity[\"" + key + "\"]";
      DEVLET_ASSIGN_OR_RETURN(c.value, ParseAmount(capacity.value, cwhere + ".value"));
      c.value_text = capacity.value.str();
      auto q = cel::Quantity::Parse(capacity.value.str());
      if (!q.ok()) return InvalidArgument(cwhere + ".value: " + Message(q.status()));
      c.quantity = std::make_shared<const cel::Quantity>(std::move(*q));
      if (capacity.request_policy) {
        const kube::CapacityRequestPolicy& p = *capacity.request_policy;
        c.has_policy = true;
        if (p.default_) {
          DEVLET_ASSIGN_OR_RETURN(c.policy_default,
                                  ParseAmount(*p.default_, cwhere + ".requestPolicy.default"));
          c.policy_default_text = p.default_->str();
        }
        for (size_t k = 0; k < p.valid_values.size(); ++k) {
          DEVLET_ASSIGN_OR_RETURN(Amount v, ParseAmount(p.valid_values[k],
                                                        cwhere + ".requestPolicy.validValues[" +
                                                            std::to_string(k) + "]"));
          c.valid_values.push_back(v);
          c.valid_values_text.push_back(p.valid_values[k].str());
        }
        if (p.valid_range) {
          c.has_range = true;
          if (p.valid_range->min) {
            DEVLET_ASSIGN_OR_RETURN(c.range_min, ParseAmount(*p.valid_range->min,
                                                             cwhere + ".requestPolicy.validRange.min"));
            c.range_min_text = p.valid_range->min->str();
          }
          if (p.valid_range->max) {
            DEVLET_ASSIGN_OR_RETURN(c.range_max, ParseAmount(*p.valid_range->max,
                                                             cwhere + ".requestPolicy.validRange.max"));
          }
          if (p.valid_range->step) {
            DEVLET_ASSIGN_OR_RETURN(c.range_step, ParseAmount(*p.valid_range->step,
                                                              cwhere + ".requestPolicy.validRange.step"));
            c.range_step_text = p.valid_range->step->str();
            if (c.range_step->nanos <= 0) {
              return InvalidArgument(cwhere + ".requestPolicy.validRange.step: must be positive");
            }
          }
        }
      }
      d.capacities.push_back(std::move(c));
    }
    std::sort(d.capacities.begin(), d.capacities.end(), [](const auto& a, const auto& b) {
      return std::tie(a.domain, a.id) < std::tie(b.domain, b.id);
    });
    for (size_t k = 0; k < src.consumes_counters.size(); ++k) {
      const kube::DeviceCounterConsumption& cc = src.consumes_counters[k];
      CompiledConsumption c;
      c.counter_set = cc.counter_set;
      for (const auto& [name, counter] : cc.counters) {
        DEVLET_ASSIGN_OR_RETURN(Amount v, ParseAmount(counter.value, where + ".consumesCounters[" +
                                                                         std::to_string(k) +
                                                                         "].counters[" + name +
                                                                         "].value"));
        c.counters.emplace_back(name, v);
      }
      c.groups = cc.compatibility_groups;
      std::sort(c.groups.begin(), c.groups.end());
      c.groups.erase(std::unique(c.groups.begin(), c.groups.end()), c.groups.end());
      d.consumes.push_back(std::move(c));
    }
    d.taints = src.taints;
    if (features.device_taint_rules) {
      for (const kube::DeviceTaintRule& rule : rules) {
        if (kube::DeviceTaintSelectorMatches(rule.spec.device_selector, out->driver, out->pool,
                                             src.name)) {
          d.taints.push_back(rule.spec.taint);
        }
      }
    }
    for (const kube::DeviceTaint& t : d.taints) {
      if (t.effect == kube::kTaintEffectNoSchedule || t.effect == kube::kTaintEffectNoExecute) {
        d.blocking_taint = true;
      }
    }
    d.allow_multiple = src.allow_multiple_allocations.value_or(false);
    d.binds_to_node = src.binds_to_node.value_or(false);
    for (const CompiledCapacity& c : d.capacities) {
      bool ok = !c.has_policy || (c.policy_default && *c.policy_default <= c.value &&
                                  c.policy_default->nanos >= 0);
      if (!ok || c.value.nanos < 0) d.static_fit = false;
    }
    d.has_binding_conditions = !src.binding_conditions.empty();
  }
  // Pointers into the final device storage.
  for (size_t i = 0; i < out->devices.size(); ++i) {
    out->devices[i].source = &out->slice.spec.devices[i];
    out->devices[i].driver_name = out->driver;
    out->devices[i].conversion_error = cel::dra::CheckAttributeConversion(out->devices[i]);
  }
  return std::shared_ptr<const CompiledSlice>(std::move(out));
}

// ---- Selectors -----------------------------------------------------------------------------

std::shared_ptr<const CompiledSelector> SelectorRegistry::Compile(const std::string& expression) {
  {
    std::shared_lock lock(mu_);
    auto it = programs_.find(expression);
    if (it != programs_.end()) return it->second;
  }
  auto compiled = std::make_shared<CompiledSelector>();
  compiled->expression = expression;
  // The scheduler compiles with the StoredExpressions environment: everything declared.
  auto program = cel::dra::CompileSelector(expression);
  if (program.ok()) {
    compiled->program = std::make_shared<const cel::Program>(std::move(*program));
  } else {
    compiled->compile_error = Message(program.status());
  }
  std::unique_lock lock(mu_);
  auto [it, inserted] = programs_.emplace(expression, std::move(compiled));
  return it->second;
}

std::shared_ptr<const CompiledSelector> SelectorRegistry::CompileDerived(
    const std::string& expression) {
  {
    std::shared_lock lock(mu_);
    auto it = derived_.find(expression);
    if (it != derived_.end()) return it->second;
  }
  auto compiled = std::make_shared<CompiledSelector>();
  compiled->expression = expression;
  auto program = cel::dra::CompileDerivedAttribute(expression);
  if (program.ok()) {
    compiled->program = std::make_shared<const cel::Program>(std::move(*program));
  } else {
    compiled->compile_error = Message(program.status());
  }
  std::unique_lock lock(mu_);
  auto [it, inserted] = derived_.emplace(expression, std::move(compiled));
  return it->second;
}

const SelectorSet* SelectorRegistry::Intern(
    const std::vector<kube::DeviceSelector>& class_selectors,
    const std::vector<kube::DeviceSelector>& request_selectors) {
  std::string key;
  for (const auto& s : class_selectors) {
    key += "C";
    key += s.cel ? s.cel->expression : std::string();
    key.push_back('\0');
  }
  for (const auto& s : request_selectors) {
    key += "R";
    key += s.cel ? s.cel->expression : std::string();
    key.push_back('\0');
  }
  {
    std::shared_lock lock(mu_);
    auto it = sets_.find(key);
    if (it != sets_.end()) return it->second.get();
  }
  auto set = std::make_unique<SelectorSet>();
  for (const auto& s : class_selectors) {
    set->class_selectors.push_back(Compile(s.cel ? s.cel->expression : std::string()));
  }
  for (const auto& s : request_selectors) {
    set->request_selectors.push_back(Compile(s.cel ? s.cel->expression : std::string()));
  }
  std::unique_lock lock(mu_);
  auto it = sets_.find(key);
  if (it != sets_.end()) return it->second.get();
  set->id = next_id_++;
  return sets_.emplace(std::move(key), std::move(set)).first->second.get();
}

// ---- Node matching and pool gathering --------------------------------------------------------

bool NodeMatches(const kube::Node& node, const std::optional<std::string>& node_name,
                 bool all_nodes, const std::optional<kube::NodeSelector>& selector) {
  if (node_name && !node_name->empty()) return node.metadata.name == *node_name;
  if (all_nodes) return true;
  if (selector) return kube::MatchesNode(*selector, node);
  return false;
}

void SnapshotImpl::Reindex() {
  on_node.clear();
  shared.clear();
  by_pool.clear();
  num_devices = 0;
  for (const auto& [name, slice] : slices) {
    const auto& spec = slice->slice.spec;
    if (spec.node_name && !spec.node_name->empty()) {
      on_node[*spec.node_name].push_back(slice.get());
    } else {
      shared.push_back(slice.get());
    }
    std::string key = slice->driver;
    key.push_back('\0');
    key += slice->pool;
    by_pool[key].push_back(slice.get());
    num_devices += slice->devices.size();
  }
}

absl::StatusOr<std::shared_ptr<const NodeView>> SnapshotImpl::ViewFor(
    const kube::Node& node) const {
  {
    std::shared_lock lock(views_mu_);
    auto it = views_.find(node.metadata.name);
    if (it != views_.end()) {
      for (const CachedView& v : it->second) {
        if (v.labels == node.metadata.labels) return v.view;
      }
    }
  }
  DEVLET_ASSIGN_OR_RETURN(std::shared_ptr<const NodeView> view, BuildView(node));
  std::unique_lock lock(views_mu_);
  auto& list = views_[node.metadata.name];
  if (list.size() >= 4) list.erase(list.begin());  // labels changed: keep a few versions
  list.push_back(CachedView{node.metadata.labels, view});
  return view;
}

void SnapshotImpl::AdoptViews(const SnapshotImpl& old, const std::set<std::string>& nodes,
                              const std::set<std::string>& pools) {
  std::shared_lock old_lock(old.views_mu_);
  std::unique_lock lock(views_mu_);
  for (const auto& [name, list] : old.views_) {
    if (nodes.count(name) != 0) continue;
    std::vector<CachedView> kept;
    for (const CachedView& v : list) {
      bool touched = false;
      for (const std::string& key : v.view->pool_keys) {
        if (pools.count(key) != 0) {
          touched = true;
          break;
        }
      }
      if (!touched) kept.push_back(v);
    }
    if (!kept.empty()) views_.emplace(name, std::move(kept));
  }
}

namespace {

absl::Status CheckSelector(const std::optional<kube::NodeSelector>& selector,
                           const std::string& what) {
  if (!selector) return absl::OkStatus();
  absl::Status s = kube::ValidateNodeSelectorRequirements(*selector);
  if (!s.ok()) return InvalidArgument("failed to perform node selection for " + what + ": " + Message(s));
  return absl::OkStatus();
}

// Completes a PoolView from its slices (upstream buildPool).
void BuildPool(PoolView& pool, std::vector<const CompiledSlice*> slices,
               const std::vector<const CompiledSlice*>& all_for_pool, const Features& features,
               const kube::Node& node) {
  std::sort(slices.begin(), slices.end(),
            [](const CompiledSlice* a, const CompiledSlice* b) { return a->name < b->name; });
  std::vector<const CompiledSlice*> counter_slices;
  for (const CompiledSlice* s : slices) {
    if (features.partitionable_devices && s->has_counter_sets) {
      counter_slices.push_back(s);
    } else {
      pool.slices.push_back(s);
    }
  }
  if (slices.size() < all_for_pool.size()) {
    std::set<std::string_view> targeting;
    for (const CompiledSlice* s : slices) targeting.insert(s->name);
    for (const CompiledSlice* s : all_for_pool) {
      if (targeting.count(s->name)) continue;
      if (features.partitionable_devices && s->has_counter_sets) {
        counter_slices.push_back(s);
      } else {
        pool.not_targeting.push_back(s);
      }
    }
  }
  auto invalid = [&](std::string reason) {
    pool.invalid = true;
    pool.reason = std::move(reason);
    pool.slices.clear();
    pool.not_targeting.clear();
  };
  {
    std::set<std::string_view> names;
    for (const CompiledSlice* s : pool.slices) {
      for (const CompiledDevice& d : s->devices) {
        if (!names.insert(d.name).second) return invalid("duplicate device name " + d.name);
      }
    }
  }
  for (const CompiledSlice* s : pool.slices) {
    if (!s->per_device) {
      pool.node_ok.emplace_back();
      continue;
    }
    std::vector<uint8_t> ok(s->devices.size());
    for (size_t i = 0; i < s->devices.size(); ++i) {
      const kube::Device& d = *s->devices[i].source;
      ok[i] = NodeMatches(node, d.node_name, d.all_nodes.value_or(false), d.node_selector);
    }
    pool.node_ok.push_back(std::move(ok));
  }
  for (const CompiledSlice* s : pool.slices) {
    for (const CompiledDevice& d : s->devices) {
      if (d.has_binding_conditions) pool.has_binding_conditions = true;
    }
  }
  if (!features.partitionable_devices) return;
  for (const CompiledSlice* s : counter_slices) {
    for (const kube::CounterSet& set : s->slice.spec.shared_counters) {
      if (std::find(pool.counter_set_names.begin(), pool.counter_set_names.end(), set.name) !=
          pool.counter_set_names.end()) {
        return invalid("duplicate counter set name " + set.name);
      }
      pool.counter_set_names.push_back(set.name);
      std::vector<std::string> names;
      std::vector<Amount> values;
      for (const auto& [name, counter] : set.counters) {
        names.push_back(name);
        values.push_back(Amount::Parse(counter.value.str()).value_or(Amount{}));  // checked at compile
      }
      pool.counter_names.push_back(std::move(names));
      pool.counter_values.push_back(std::move(values));
    }
  }
  auto resolve = [&](const std::vector<const CompiledSlice*>& list,
                     std::vector<std::vector<std::vector<Consumption>>>& out) -> bool {
    for (const CompiledSlice* s : list) {
      std::vector<std::vector<Consumption>> per_device(s->devices.size());
      for (size_t i = 0; i < s->devices.size(); ++i) {
        for (const CompiledConsumption& cc : s->devices[i].consumes) {
          auto set_it = std::find(pool.counter_set_names.begin(), pool.counter_set_names.end(),
                                  cc.counter_set);
          if (set_it == pool.counter_set_names.end()) {
            invalid("counter set " + cc.counter_set + " not found");
            return false;
          }
          size_t set = set_it - pool.counter_set_names.begin();
          for (const auto& [name, amount] : cc.counters) {
            const auto& names = pool.counter_names[set];
            auto c_it = std::find(names.begin(), names.end(), name);
            if (c_it == names.end()) {
              invalid("counter " + name + " not found in counter set " + cc.counter_set);
              return false;
            }
            per_device[i].push_back(Consumption{static_cast<uint16_t>(set),
                                                static_cast<uint16_t>(c_it - names.begin()),
                                                amount});
          }
        }
      }
      out.push_back(std::move(per_device));
    }
    return true;
  };
  if (!resolve(pool.slices, pool.consumption)) return;
  if (!resolve(pool.not_targeting, pool.consumption_other)) return;
}

}  // namespace

namespace {

bool UsesCompatibilityGroups(const kube::ResourceSliceSpec& spec) {
  for (const kube::Device& d : spec.devices) {
    for (const kube::DeviceCounterConsumption& c : d.consumes_counters) {
      if (!c.compatibility_groups.empty()) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const NodeView>> SnapshotImpl::BuildView(
    const kube::Node& node) const {
  // Candidate slices: those for this node by name, and all without a node name.
  std::vector<const CompiledSlice*> candidates;
  if (auto it = on_node.find(node.metadata.name); it != on_node.end()) {
    candidates = it->second;
  }
  candidates.insert(candidates.end(), shared.begin(), shared.end());

  std::map<std::pair<std::string_view, std::string_view>, std::vector<const CompiledSlice*>> pools;
  for (const CompiledSlice* s : candidates) {
    const auto& spec = s->slice.spec;
    if (!features.partitionable_devices &&
        (spec.per_device_node_selection.has_value() || !spec.shared_counters.empty())) {
      continue;
    }
    // With DRADeviceCompatibilityGroups off a slice using compatibility groups is ignored (its
    // devices could otherwise be co-allocated unchecked), which leaves its pool incomplete.
    if (!features.compatibility_groups && UsesCompatibilityGroups(spec)) continue;
    bool relevant = false;
    bool has_node_name = spec.node_name && !spec.node_name->empty();
    if (has_node_name || spec.all_nodes.value_or(false) || spec.node_selector) {
      DEVLET_RETURN_IF_ERROR(CheckSelector(spec.node_selector, "slice " + s->name));
      relevant = NodeMatches(node, spec.node_name, spec.all_nodes.value_or(false),
                             spec.node_selector);
    } else if (s->per_device) {
      for (const CompiledDevice& d : s->devices) {
        DEVLET_RETURN_IF_ERROR(CheckSelector(d.source->node_selector,
                                             "device " + d.name + " in slice " + s->name));
        if (NodeMatches(node, d.source->node_name, d.source->all_nodes.value_or(false),
                        d.source->node_selector)) {
          relevant = true;
          break;
        }
      }
    } else {
      continue;
    }
    if (!relevant) continue;
    auto& list = pools[{s->driver, s->pool}];
    if (list.empty() || s->generation == list.front()->generation) {
      list.push_back(s);
    } else if (s->generation > list.front()->generation) {
      list.assign(1, s);
    }
  }

  auto view = std::make_shared<NodeView>();
  view->pool_keys.reserve(pools.size());
  for (const auto& [id, list] : pools) {
    std::string key(id.first);
    key.push_back('\0');
    key += id.second;
    view->pool_keys.push_back(std::move(key));
  }
  std::vector<PoolView> with_binding;
  for (auto& [id, list] : pools) {
    PoolView pool;
    pool.driver = std::string(id.first);
    pool.pool = std::string(id.second);
    pool.id = pool.driver + "/" + pool.pool;
    int64_t generation = list.front()->generation;
    int64_t count = list.front()->count;
    pool.slices_seen = static_cast<int>(list.size());
    if (static_cast<int64_t>(list.size()) == count) {
      BuildPool(pool, list, {}, features, node);
    } else {
      std::string key = pool.driver;
      key.push_back('\0');
      key += pool.pool;
      const auto& all = by_pool.at(key);
      bool obsolete = false;
      std::vector<const CompiledSlice*> same_generation;
      for (const CompiledSlice* s : all) {
        if (s->generation > generation) {
          obsolete = true;
          break;
        }
        // Upstream counts the pool's slices without those it ignores for compatibility groups.
        if (s->generation == generation &&
            (features.compatibility_groups || !UsesCompatibilityGroups(s->slice.spec))) {
          same_generation.push_back(s);
        }
      }
      if (obsolete) continue;
      if (static_cast<int64_t>(same_generation.size()) != count) {
        pool.incomplete = true;
        pool.reason = "resource pool " + pool.id + " is incomplete: " +
                      std::to_string(same_generation.size()) + " of " + std::to_string(count) +
                      " slices of generation " + std::to_string(generation) + " are published";
        view->pools.push_back(std::move(pool));
        continue;
      }
      BuildPool(pool, list, same_generation, features, node);
    }
    if (pool.has_binding_conditions) {
      with_binding.push_back(std::move(pool));
    } else {
      view->pools.push_back(std::move(pool));
    }
  }
  // `pools` is a std::map ordered by (driver, pool), so both groups are sorted already.
  for (PoolView& p : with_binding) view->pools.push_back(std::move(p));
  return std::shared_ptr<const NodeView>(std::move(view));
}

// ---- Snapshot ------------------------------------------------------------------------------

Snapshot::Snapshot(std::shared_ptr<SnapshotImpl> impl) : impl_(std::move(impl)) {}
Snapshot::~Snapshot() = default;

const Features& Snapshot::features() const { return impl_->features; }
size_t Snapshot::num_slices() const { return impl_->slices.size(); }
size_t Snapshot::num_devices() const { return impl_->num_devices; }

std::vector<std::string> Snapshot::NodeNames() const {
  std::vector<std::string> names;
  for (const auto& [name, list] : impl_->on_node) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::shared_ptr<const Snapshot>> Snapshot::Build(
    const Features& features, std::vector<kube::DeviceClass> classes,
    std::vector<kube::ResourceSlice> slices, std::vector<kube::DeviceTaintRule> taint_rules) {
  auto impl = std::make_shared<SnapshotImpl>();
  impl->features = features;
  impl->selectors = std::make_shared<SelectorRegistry>();
  impl->rules = std::move(taint_rules);
  for (kube::DeviceClass& c : classes) {
    std::string name = c.metadata.name;
    if (impl->classes.count(name)) {
      return InvalidArgument("DeviceClass \"" + name + "\": metadata.name: duplicate");
    }
    auto entry = std::make_shared<ClassEntry>();
    entry->object = std::move(c);
    impl->classes.emplace(std::move(name), std::move(entry));
  }
  for (kube::ResourceSlice& s : slices) {
    std::string name = s.metadata.name;
    if (impl->slices.count(name)) {
      return InvalidArgument("ResourceSlice \"" + name + "\": metadata.name: duplicate");
    }
    DEVLET_ASSIGN_OR_RETURN(auto compiled, CompileSlice(std::move(s), impl->rules, features));
    impl->slices.emplace(std::move(name), std::move(compiled));
  }
  impl->Reindex();
  return std::make_shared<const Snapshot>(std::move(impl));
}

namespace {

std::shared_ptr<SnapshotImpl> CopyImpl(const SnapshotImpl& old) {
  auto impl = std::make_shared<SnapshotImpl>();
  impl->features = old.features;
  impl->classes = old.classes;
  impl->slices = old.slices;
  impl->rules = old.rules;
  impl->selectors = old.selectors;
  return impl;
}

}  // namespace

// ---- SnapshotChanges -------------------------------------------------------------------------

SnapshotChanges::SnapshotChanges(const Snapshot& base)
    : features_(base.features()), rules_(base.impl().rules) {}
SnapshotChanges::~SnapshotChanges() = default;
SnapshotChanges::SnapshotChanges(SnapshotChanges&&) noexcept = default;
SnapshotChanges& SnapshotChanges::operator=(SnapshotChanges&&) noexcept = default;

absl::Status SnapshotChanges::SetSlice(kube::ResourceSlice slice) {
  std::string name = slice.metadata.name;
  DEVLET_ASSIGN_OR_RETURN(auto compiled, CompileSlice(std::move(slice), rules_, features_));
  slices_.insert_or_assign(std::move(name), std::move(compiled));
  return absl::OkStatus();
}

void SnapshotChanges::RemoveSlice(std::string_view name) {
  slices_.insert_or_assign(std::string(name), nullptr);
}

void SnapshotChanges::SetClass(kube::DeviceClass device_class) {
  auto entry = std::make_shared<ClassEntry>();
  std::string name = device_class.metadata.name;
  entry->object = std::move(device_class);
  classes_.insert_or_assign(std::move(name), std::move(entry));
}

void SnapshotChanges::RemoveClass(std::string_view name) {
  classes_.insert_or_assign(std::string(name), nullptr);
}

std::shared_ptr<const Snapshot> Snapshot::With(SnapshotChanges changes) const {
  auto impl = CopyImpl(*impl_);
  // Which cached node views the changes can touch: those of the nodes named by a changed slice
  // (old or new version), of the pools it belongs to, or every view for a slice without a node
  // name (it may be visible to any node). Classes do not enter views.
  std::set<std::string> nodes;
  std::set<std::string> pools;
  bool all_views = false;
  auto touch = [&](const CompiledSlice& s) {
    const auto& node_name = s.slice.spec.node_name;
    if (node_name && !node_name->empty()) {
      nodes.insert(*node_name);
    } else {
      all_views = true;
    }
    std::string key = s.driver;
    key.push_back('\0');
    key += s.pool;
    pools.insert(std::move(key));
  };
  for (auto& [name, compiled] : changes.slices_) {
    auto it = impl->slices.find(name);
    if (it != impl->slices.end()) touch(*it->second);
    if (compiled) {
      touch(*compiled);
      if (it != impl->slices.end()) {
        it->second = std::move(compiled);
      } else {
        impl->slices.emplace(name, std::move(compiled));
      }
    } else if (it != impl->slices.end()) {
      impl->slices.erase(it);
    }
  }
  for (auto& [name, entry] : changes.classes_) {
    if (entry) {
      impl->classes.insert_or_assign(name, std::move(entry));
    } else if (auto it = impl->classes.find(name); it != impl->classes.end()) {
      impl->classes.erase(it);
    }
  }
  impl->Reindex();
  if (!all_views) impl->AdoptViews(*impl_, nodes, pools);
  return std::make_shared<const Snapshot>(std::move(impl));
}

absl::StatusOr<std::shared_ptr<const Snapshot>> Snapshot::WithSlice(
    kube::ResourceSlice slice) const {
  SnapshotChanges changes(*this);
  DEVLET_RETURN_IF_ERROR(changes.SetSlice(std::move(slice)));
  return With(std::move(changes));
}

absl::StatusOr<std::shared_ptr<const Snapshot>> Snapshot::WithoutSlice(
    std::string_view name) const {
  SnapshotChanges changes(*this);
  changes.RemoveSlice(name);
  return With(std::move(changes));
}

absl::StatusOr<std::shared_ptr<const Snapshot>> Snapshot::WithClass(
    kube::DeviceClass device_class) const {
  SnapshotChanges changes(*this);
  changes.SetClass(std::move(device_class));
  return With(std::move(changes));
}

absl::StatusOr<std::shared_ptr<const Snapshot>> Snapshot::WithoutClass(
    std::string_view name) const {
  SnapshotChanges changes(*this);
  changes.RemoveClass(name);
  return With(std::move(changes));
}

absl::StatusOr<std::shared_ptr<const Snapshot>> Snapshot::WithTaintRules(
    std::vector<kube::DeviceTaintRule> taint_rules) const {
  auto impl = CopyImpl(*impl_);
  impl->rules = std::move(taint_rules);
  for (auto& [name, slice] : impl->slices) {
    DEVLET_ASSIGN_OR_RETURN(auto compiled, CompileSlice(slice->slice, impl->rules, impl->features));
    // Keep the old compiled slice (and its memo) when the effective taints did not change.
    bool same = compiled->devices.size() == slice->devices.size();
    for (size_t i = 0; same && i < compiled->devices.size(); ++i) {
      same = compiled->devices[i].taints == slice->devices[i].taints;
    }
    if (!same) slice = std::move(compiled);
  }
  impl->Reindex();
  return std::make_shared<const Snapshot>(std::move(impl));
}

// ---- AllocatedState --------------------------------------------------------------------------

AllocatedState::AllocatedState() : impl_(std::make_unique<AllocatedStateImpl>()) {}
AllocatedState::~AllocatedState() = default;
AllocatedState::AllocatedState(const AllocatedState& other)
    : impl_(std::make_unique<AllocatedStateImpl>(*other.impl_)) {}
AllocatedState& AllocatedState::operator=(const AllocatedState& other) {
  impl_ = std::make_unique<AllocatedStateImpl>(*other.impl_);
  return *this;
}
AllocatedState::AllocatedState(AllocatedState&&) noexcept = default;
AllocatedState& AllocatedState::operator=(AllocatedState&&) noexcept = default;

namespace {

void Bump(std::vector<uint32_t>& v, KeyId k, int delta) {
  if (k >= v.size()) v.resize(std::max<size_t>(k + 1, v.size() * 2), 0);
  if (delta < 0 && v[k] == 0) return;
  v[k] += delta;
}

absl::Status Apply(AllocatedStateImpl& s, const kube::AllocationResult& allocation, int delta) {
  // Parse first so that a bad quantity changes nothing.
  std::vector<std::vector<std::pair<std::string, Amount>>> parsed;
  for (const auto& r : allocation.devices.results) {
    std::vector<std::pair<std::string, Amount>> caps;
    for (const auto& [name, q] : r.consumed_capacity) {
      auto a = Amount::Parse(q.str());
      if (!a.ok()) {
        return InvalidArgument("status.allocation.devices.results: device " + r.device +
                               ": consumedCapacity[" + name + "]: " + Message(a.status()));
      }
      caps.emplace_back(name, *a);
    }
    parsed.push_back(std::move(caps));
  }
  for (size_t i = 0; i < allocation.devices.results.size(); ++i) {
    const auto& r = allocation.devices.results[i];
    if (r.admin_access.value_or(false)) continue;  // admin access never counts
    KeyId k = InternDeviceKey(r.driver, r.pool, r.device);
    if (r.share_id) {
      Bump(s.shares, k, delta);
      auto& ids = s.share_ids[k];
      if (delta > 0) {
        ids[*r.share_id]++;
      } else if (auto it = ids.find(*r.share_id); it != ids.end() && --it->second == 0) {
        ids.erase(it);
      }
      if (ids.empty()) s.share_ids.erase(k);
    } else {
      Bump(s.dedicated, k, delta);
    }
    if (!parsed[i].empty()) {
      auto& agg = s.capacity[k];
      for (const auto& [name, amount] : parsed[i]) {
        if (delta > 0) {
          agg[name] = agg[name] + amount;
        } else {
          agg[name] = agg[name] - amount;
        }
      }
      if (delta < 0) {
        bool all_zero = true;
        for (const auto& [name, amount] : agg) all_zero = all_zero && amount.nanos == 0;
        if (all_zero && !s.Shared(k)) s.capacity.erase(k);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AllocatedState::Add(const kube::AllocationResult& allocation) {
  return Apply(*impl_, allocation, +1);
}

absl::Status AllocatedState::Remove(const kube::AllocationResult& allocation) {
  return Apply(*impl_, allocation, -1);
}

void AllocatedState::AddDevice(std::string_view driver, std::string_view pool,
                               std::string_view device) {
  Bump(impl_->dedicated, InternDeviceKey(driver, pool, device), +1);
}

void AllocatedState::AddSharedDevice(std::string_view driver, std::string_view pool,
                                     std::string_view device, std::string_view share_id) {
  KeyId k = InternDeviceKey(driver, pool, device);
  Bump(impl_->shares, k, +1);
  impl_->share_ids[k][std::string(share_id)]++;
}

absl::Status AllocatedState::AddCapacity(std::string_view driver, std::string_view pool,
                                         std::string_view device, std::string_view capacity,
                                         std::string_view quantity) {
  DEVLET_ASSIGN_OR_RETURN(Amount a, Amount::Parse(quantity));
  auto& agg = impl_->capacity[InternDeviceKey(driver, pool, device)];
  agg[std::string(capacity)] = agg[std::string(capacity)] + a;
  return absl::OkStatus();
}

bool AllocatedState::IsAllocated(std::string_view driver, std::string_view pool,
                                 std::string_view device) const {
  KeyId k = FindDeviceKey(driver, pool, device);
  if (k == UINT32_MAX) return false;
  return impl_->Dedicated(k) || impl_->Shared(k) || impl_->HasCapacity(k);
}

}  // namespace devlet::allocator
