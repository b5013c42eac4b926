// The compile-time cost estimate as cel-go v0.29's checker.Cost computes it for Kubernetes:
// the coster walk over the checked tree, the Kubernetes library estimator
// (k8s.io/apiserver pkg/cel/library CostEstimator, consulted by function name), the ext.Lists and
// ext.Sets overload estimators, and the DRA size estimator that knows the declared maximum sizes
// under `device`. The arithmetic is cel-go's: saturating integers, cost factors through float64
// (an unknown size times 0.1 is 1844674407370955264, not the maximum), and Go's wrapping
// multiplications where cel-go has them. Paths are Go slices: appending to a shared path may
// write into the same backing array, which cel-go's results depend on for two-variable
// comprehensions and bound variables, so Path copies Go's append.
#include "estimate.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "kubernetes_cost.h"

namespace devlet::cel::internal {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t Add(uint64_t x, uint64_t y) { return y > 0 && x > kMax - y ? kMax : x + y; }
uint64_t Mul(uint64_t x, uint64_t y) { return y != 0 && x > kMax / y ? kMax : x * y; }
uint64_t ByFactor(uint64_t x, double y) {
  const double xf = static_cast<double>(x);
  if (xf > 0 && y > 0 && xf > static_cast<double>(kMax) / y) return kMax;
  const double c = std::ceil(xf * y);
  if (c >= 18446744073709551616.0) return kMax;
  return static_cast<uint64_t>(c);
}

// Go's uint64(f) for a non-negative float64 on amd64: values from 2^64 up become 2^63 (Kubernetes'
// replace() estimate converts an unbounded count that way, without saturating).
uint64_t GoUint64(double f) {
  if (f >= 18446744073709551616.0)
    return uint64_t{1} << 63;
  return static_cast<uint64_t>(f);
}

// A size or cost range (cel-go's SizeEstimate and CostEstimate behave alike).
struct Est {
  uint64_t min = 0, max = 0;
};
Est Fixed(uint64_t v) { return {v, v}; }
Est Unknown() { return {0, kMax}; }
Est operator+(Est a, Est b) { return {Add(a.min, b.min), Add(a.max, b.max)}; }
Est operator*(Est a, Est b) { return {Mul(a.min, b.min), Mul(a.max, b.max)}; }
Est ByFactor(Est a, double f) { return {ByFactor(a.min, f), ByFactor(a.max, f)}; }
Est Union(Est a, Est b) { return {std::min(a.min, b.min), std::max(a.max, b.max)}; }

constexpr double kStringFactor = 0.1;  // common.StringTraversalCostFactor
constexpr double kRegexFactor = 0.25;  // common.RegexStringLengthCostFactor

// A Go []string: a shared backing array with a length and a capacity.
struct Path {
  std::shared_ptr<std::vector<std::string>> arr;
  size_t len = 0, cap = 0;
  const std::string& at(size_t i) const { return (*arr)[i]; }
};
Path Append(const Path& p, std::string s) {
  if (p.len < p.cap) {
    (*p.arr)[p.len] = std::move(s);
    return {p.arr, p.len + 1, p.cap};
  }
  const size_t cap = p.cap == 0 ? 1 : p.cap * 2;  // growslice for 16-byte elements below 256
  auto arr = std::make_shared<std::vector<std::string>>(cap);
  for (size_t i = 0; i < p.len; ++i) (*arr)[i] = (*p.arr)[i];
  (*arr)[p.len] = std::move(s);
  return {std::move(arr), p.len + 1, cap};
}
Path Fresh(const Path& p, std::string s) {  // make + copy + set, as listElementNode
  Path out;
  out.arr = std::make_shared<std::vector<std::string>>(p.len + 1);
  for (size_t i = 0; i < p.len; ++i) (*out.arr)[i] = p.at(i);
  (*out.arr)[p.len] = std::move(s);
  out.len = out.cap = p.len + 1;
  return out;
}

// Kubernetes' declared DRA types (DeclType with MaxElements).
struct Decl {
  uint64_t max = 0;
  const Decl* key = nullptr;
  const Decl* elem = nullptr;
  std::vector<std::pair<std::string_view, const Decl*>> fields;
};

struct DraDecls {
  Decl domain{63}, id{32}, driver{63}, multi{1}, attribute{64}, quantity{0};
  Decl inner_attributes{32, &id, &attribute, {}};
  Decl outer_attributes{32, &domain, &inner_attributes, {}};
  Decl inner_capacity{32, &id, &quantity, {}};
  Decl outer_capacity{32, &domain, &inner_capacity, {}};
  Decl device{0, nullptr, nullptr,
              {{"driver", &driver},
               {"attributes", &outer_attributes},
               {"capacity", &outer_capacity},
               {"allowMultipleAllocations", &multi}}};
};
const DraDecls& Dra() {
  static const DraDecls* decls = new DraDecls();
  return *decls;
}

bool IsAccumulator(const std::string& name) { return name == "__result__" || name == "@result"; }

bool IsScalar(const Type& t) {
  switch (t.kind()) {
    case Type::Kind::kBool:
    case Type::Kind::kDouble:
    case Type::Kind::kDuration:
    case Type::Kind::kInt:
    case Type::Kind::kTimestamp:
    case Type::Kind::kUint: return true;
    case Type::Kind::kOptional: return IsScalar(t.param0());
    default: return false;
  }
}

// cel-go's StructKind: object types (the device, Quantity, Semver).
bool IsStruct(const Type& t) {
  return t.kind() == Type::Kind::kDraDevice || t.kind() == Type::Kind::kQuantity ||
         t.kind() == Type::Kind::kSemver || t.kind() == Type::Kind::kIP ||
         t.kind() == Type::Kind::kCIDR || t.kind() == Type::Kind::kFormat ||
         t.kind() == Type::Kind::kURL;
}

uint64_t RuneCount(const std::string& s) {
  uint64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The overloads whose estimate differs from the default (1 plus the arguments).
enum class Ov : unsigned char {
  kDefault, kFormat, kStringToBytes, kBytesToString, kQuote, kStartsWith, kInList, kMatches,
  kContains, kLogical, kConditional, kAddString, kAddBytes, kAddList, kCompareText, kEquals,
  kIndexList, kIndexMap, kListSlice, kListFlatten, kListsRange, kListReverse, kListDistinct,
  kSortText, kSortOther, kSortByText, kSortByOther, kSets1, kSets2,
};

// Whether a checked argument type may be passed for a parameter of kind `p` (dyn matches all).
bool Fits(const Type& t, Type::Kind p) { return t.is_dyn() || t.kind() == p; }
bool FitsList(const Type& t) { return Fits(t, Type::Kind::kList); }

struct Entry {
  bool list = false;  // containerKind: list or map
  Est key, val;
};

struct Node {  // cel-go's AstNode
  Path path;
  Type type;
  const Expr* expr = nullptr;
  std::optional<Est> computed;
};

struct CallEstimate {
  Est cost;
  std::optional<Est> result;
};

class Coster {
 public:
  Coster(const CheckedInfo& info, bool dra) : info_(info), dra_(dra) {}

  Est Cost(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kConst: return {};
      case Expr::Kind::kIdent: return CostIdent(e);
      case Expr::Kind::kSelect: return CostSelect(e);
      case Expr::Kind::kCall: return CostCall(e);
      case Expr::Kind::kList: return CostList(e);
      case Expr::Kind::kMap: return CostMap(e);
      case Expr::Kind::kStruct: {
        Est sum;
        for (const ExprPtr& a : e.args) sum = sum + Cost(*a);
        return sum + Fixed(40);
      }
      case Expr::Kind::kComprehension: return IsBind(e) ? CostBind(e) : CostComprehension(e);
    }
    return {};
  }

 private:
  struct Local {
    Path path;
    std::optional<Est> size;
    std::optional<Entry> entry;
  };

  Type TypeOf(const Expr& e) const {
    auto it = info_.types.find(&e);
    return it == info_.types.end() ? Type::Dyn() : it->second;
  }

  const Local* Peek(const std::string& name) const {
    auto it = locals_.find(name);
    return it == locals_.end() || it->second.empty() ? nullptr : &it->second.back();
  }
  void Push(const std::string& name, Local local) { locals_[name].push_back(std::move(local)); }
  void Pop(const std::string& name) {
    auto it = locals_.find(name);
    if (it != locals_.end() && !it->second.empty()) it->second.pop_back();
  }

  Path GetPath(const Expr& e) const {
    if (e.kind == Expr::Kind::kIdent) {
      if (const Local* v = Peek(e.name)) return v->path;
    }
    auto it = paths_.find(&e);
    return it == paths_.end() ? Path() : it->second;
  }

  // The DRA size estimator (sizeEstimator.EstimateSize in k8s.io/dynamic-resource-allocation).
  std::optional<Est> EstimateSize(const Path& path) const {
    if (!dra_ || path.len == 0 || path.at(0) != "device") return std::nullopt;
    const DraDecls& d = Dra();
    const Decl* cur = &d.device;
    for (size_t i = 1; i < path.len; ++i) {
      const std::string& name = path.at(i);
      if (name == "@items" || name == "@values") {
        if (cur->elem == nullptr) return std::nullopt;
        cur = cur->elem;
      } else if (name == "@keys") {
        if (cur->key == nullptr) return std::nullopt;
        cur = cur->key;
      } else {
        const Decl* field = nullptr;
        for (const auto& [n, t] : cur->fields) {
          if (n == name) field = t;
        }
        if (field == nullptr) {
          if (cur->elem == &d.attribute) {
            cur = &d.attribute;
            continue;
          }
          return std::nullopt;
        }
        cur = field;
      }
    }
    return Est{0, cur->max};
  }

  std::optional<Est> ComputeSize(const Expr& e) {
    if (auto it = sizes_.find(&e); it != sizes_.end()) return it->second;
    switch (e.kind) {
      case Expr::Kind::kConst:
        switch (e.constant.kind) {
          case Constant::Kind::kString: return Fixed(RuneCount(e.constant.s));
          case Constant::Kind::kBytes: return Fixed(e.constant.s.size());
          default: return Fixed(1);
        }
      case Expr::Kind::kList: return Fixed(e.args.size());
      case Expr::Kind::kMap: return Fixed(e.args.size() / 2);
      default: break;
    }
    if (std::optional<Est> s = EstimateSize(GetPath(e))) {
      sizes_[&e] = *s;
      return s;
    }
    if (IsScalar(TypeOf(e))) return Fixed(1);
    if (e.kind == Expr::Kind::kIdent) {
      if (const Local* v = Peek(e.name); v != nullptr && v->size) return v->size;
    }
    return std::nullopt;
  }
  Est SizeOrUnknown(const Expr& e) { return ComputeSize(e).value_or(Unknown()); }
  void SetSize(const Expr& e, const std::optional<Est>& size) {
    if (size) sizes_[&e] = *size;
  }

  std::optional<Entry> EntryOf(const Expr& e) const {
    if (auto it = entries_.find(&e); it != entries_.end()) return it->second;
    if (e.kind == Expr::Kind::kIdent) {
      if (const Local* v = Peek(e.name); v != nullptr && v->entry) return v->entry;
    }
    return std::nullopt;
  }
  void SetEntry(const Expr& e, const std::optional<Entry>& entry) {
    if (entry) entries_[&e] = *entry;
  }
  static std::optional<Entry> UnionEntry(const std::optional<Entry>& a,
                                         const std::optional<Entry>& b) {
    if (!a || !b) return std::nullopt;
    return Entry{a->list, Union(a->key, b->key), Union(a->val, b->val)};
  }

  Node NewNode(const Expr& e) {
    Node n;
    n.path = GetPath(e);
    if (n.path.len > 0 && IsAccumulator(n.path.at(0))) n.path = Path();
    n.type = TypeOf(e);
    n.expr = &e;
    n.computed = ComputeSize(e);
    return n;
  }
  // The Kubernetes estimator's sizeEstimate and ext's estimateSize.
  Est SizeOf(const Node& n) const {
    if (n.computed) return *n.computed;
    return EstimateSize(n.path).value_or(Unknown());
  }
  // library.CostEstimator.listElementNode: the first type parameter, path + "@items".
  std::optional<Node> ElementNode(const Node& list) const {
    const Type::Kind k = list.type.kind();
    if (k != Type::Kind::kList && k != Type::Kind::kMap && k != Type::Kind::kOptional) {
      return std::nullopt;
    }
    Node n;
    n.type = list.type.param0();
    if (list.path.len > 0) n.path = Fresh(list.path, "@items");
    return n;
  }

  Est CostIdent(const Expr& e) {
    // A leading dot names the root-scope variable (`.device` is device), never a local.
    const bool root = !e.name.empty() && e.name[0] == '.';
    if (const Local* v = root ? nullptr : Peek(e.name)) {
      paths_[&e] = v->path;
    } else {
      Path p;
      p.arr = std::make_shared<std::vector<std::string>>(1, root ? e.name.substr(1) : e.name);
      p.len = p.cap = 1;
      paths_[&e] = std::move(p);
    }
    return Fixed(1);
  }

  Est CostSelect(const Expr& e) {
    // has(): Kubernetes sets PresenceTestHasCost(false).
    if (e.test_only) return Cost(*e.operand);
    Est sum = Cost(*e.operand);
    const Type t = TypeOf(*e.operand);
    if (t.kind() == Type::Kind::kMap || IsStruct(t)) sum = sum + Fixed(1);
    paths_[&e] = Append(GetPath(*e.operand), e.name);
    return sum;
  }

  std::vector<Ov> Resolve(const std::string& name, const Node* target,
                          const std::vector<Node>& args) const {
    using K = Type::Kind;
    auto arg = [&](size_t i) -> const Type& { return args[i].type; };
    const size_t n = args.size();
    if (name == "_&&_" || name == "_||_") return {Ov::kLogical};
    if (name == "_?_:_") return {Ov::kConditional};
    if (name == "_==_" || name == "_!=_") return {Ov::kEquals};
    // Overloads with the default estimate survive when both arguments fit one of these pairs.
    auto fits_any = [&](std::initializer_list<std::pair<K, K>> pairs) {
      for (const auto& [a, b] : pairs) {
        if (Fits(arg(0), a) && Fits(arg(1), b)) return true;
      }
      return false;
    };
    if ((name == "_<_" || name == "_<=_" || name == "_>_" || name == "_>=_") && n == 2) {
      std::vector<Ov> out;
      if (fits_any({{K::kInt, K::kInt}, {K::kUint, K::kUint}, {K::kDouble, K::kDouble},
                    {K::kBool, K::kBool}, {K::kInt, K::kUint}, {K::kInt, K::kDouble},
                    {K::kUint, K::kInt}, {K::kUint, K::kDouble}, {K::kDouble, K::kInt},
                    {K::kDouble, K::kUint}, {K::kTimestamp, K::kTimestamp},
                    {K::kDuration, K::kDuration}})) {
        out.push_back(Ov::kDefault);
      }
      if (fits_any({{K::kString, K::kString}, {K::kBytes, K::kBytes}})) {
        out.push_back(Ov::kCompareText);
      }
      if (out.empty()) out.push_back(Ov::kDefault);
      return out;
    }
    if (name == "_+_" && n == 2) {
      std::vector<Ov> out;
      if (fits_any({{K::kInt, K::kInt}, {K::kUint, K::kUint}, {K::kDouble, K::kDouble},
                    {K::kTimestamp, K::kDuration}, {K::kDuration, K::kTimestamp},
                    {K::kDuration, K::kDuration}})) {
        out.push_back(Ov::kDefault);
      }
      if (Fits(arg(0), K::kString) && Fits(arg(1), K::kString)) out.push_back(Ov::kAddString);
      if (Fits(arg(0), K::kBytes) && Fits(arg(1), K::kBytes)) out.push_back(Ov::kAddBytes);
      if (FitsList(arg(0)) && FitsList(arg(1))) out.push_back(Ov::kAddList);
      if (out.empty()) out.push_back(Ov::kDefault);
      return out;
    }
    if (name == "@in" && n == 2) {
      std::vector<Ov> out;
      if (FitsList(arg(1))) out.push_back(Ov::kInList);
      if (Fits(arg(1), K::kMap)) out.push_back(Ov::kDefault);
      if (out.empty()) out.push_back(Ov::kDefault);
      return out;
    }
    if (name == "_[_]" && n == 2) {
      std::vector<Ov> out;
      if (FitsList(arg(0)) && Fits(arg(1), K::kInt)) out.push_back(Ov::kIndexList);
      if (Fits(arg(0), K::kMap)) out.push_back(Ov::kIndexMap);
      if (out.empty()) out.push_back(Ov::kDefault);
      return out;
    }
    if (target == nullptr && n == 1 && name == "string") {
      std::vector<Ov> out;
      if (!arg(0).is_dyn() && arg(0).kind() != K::kBytes) return {Ov::kDefault};
      out.push_back(Ov::kBytesToString);
      if (arg(0).is_dyn()) out.push_back(Ov::kDefault);
      return out;
    }
    if (target == nullptr && n == 1 && name == "bytes") {
      if (arg(0).is_dyn()) return {Ov::kStringToBytes, Ov::kDefault};
      return {arg(0).kind() == K::kString ? Ov::kStringToBytes : Ov::kDefault};
    }
    if (name == "strings.quote") return {Ov::kQuote};
    if (target != nullptr) {
      if (name == "format") return {Ov::kFormat};
      if (name == "startsWith" || name == "endsWith") return {Ov::kStartsWith};
      if (name == "contains") return {Ov::kContains};
      if (name == "slice") return {Ov::kListSlice};
      if (name == "flatten") return {Ov::kListFlatten};
      if (name == "reverse") return {Ov::kListReverse};
      if (name == "distinct") return {Ov::kListDistinct};
      if (name == "sort" || name == "@sortByAssociatedKeys") {
        const bool by = name != "sort";
        const Type& list = by ? (n > 0 ? arg(0) : Type::Dyn()) : target->type;
        const Type elem = list.kind() == K::kList ? list.param0() : Type::Dyn();
        std::vector<Ov> out;
        const bool text = elem.is_dyn() || elem.kind() == K::kString || elem.kind() == K::kBytes;
        const bool other = elem.is_dyn() || (elem.kind() != K::kString && elem.kind() != K::kBytes);
        if (text) out.push_back(by ? Ov::kSortByText : Ov::kSortText);
        if (other) out.push_back(by ? Ov::kSortByOther : Ov::kSortOther);
        return out;
      }
    }
    if (name == "matches") return {Ov::kMatches};
    if (name == "lists.range") return {Ov::kListsRange};
    if (name == "sets.contains" || name == "sets.intersects") return {Ov::kSets1};
    if (name == "sets.equivalent") return {Ov::kSets2};
    return {Ov::kDefault};
  }

  static uint64_t LiteralUint(const Node& n, uint64_t fallback) {
    if (n.expr == nullptr || n.expr->kind != Expr::Kind::kConst ||
        n.expr->constant.kind != Constant::Kind::kInt) {
      return fallback;
    }
    return n.expr->constant.i < 0 ? 0 : static_cast<uint64_t>(n.expr->constant.i);
  }

  static CallEstimate AllocatingList(double factor, Est size) {
    return {ByFactor(size, factor) + Fixed(1) + Fixed(10), size};
  }

  // ext.Lists / ext.Sets overload estimators (checker.OverloadCostEstimate).
  std::optional<CallEstimate> OverloadEstimate(Ov ov, const Node* target,
                                               const std::vector<Node>& args) const {
    switch (ov) {
      case Ov::kListSlice: {
        if (target == nullptr || args.size() != 2) return std::nullopt;
        const Est sz = SizeOf(*target);
        const uint64_t start = LiteralUint(args[0], 0);
        const uint64_t end = LiteralUint(args[1], sz.max);
        return AllocatingList(1, Fixed(end - start));
      }
      case Ov::kListsRange:
        if (target != nullptr || args.size() != 1) return std::nullopt;
        return AllocatingList(1, Fixed(LiteralUint(args[0], kMax)));
      case Ov::kListReverse:
        if (target == nullptr || !args.empty()) return std::nullopt;
        return AllocatingList(1, SizeOf(*target));
      case Ov::kListFlatten: {
        if (target == nullptr || args.size() > 1) return std::nullopt;
        const uint64_t depth = args.size() == 1 ? LiteralUint(args[0], kMax) : 1;
        return AllocatingList(static_cast<double>(depth), SizeOf(*target));
      }
      case Ov::kListDistinct: {
        if (target == nullptr || !args.empty()) return std::nullopt;
        const Est sz = SizeOf(*target);
        return AllocatingList(2.0, sz * sz);
      }
      case Ov::kSortText:
      case Ov::kSortOther: {
        if (target == nullptr || !args.empty()) return std::nullopt;
        const Est sz = SizeOf(*target);
        return AllocatingList(ov == Ov::kSortText ? 2.0 + kStringFactor : 2.0, sz * sz);
      }
      case Ov::kSortByText:
      case Ov::kSortByOther: {
        if (target == nullptr || args.size() != 1) return std::nullopt;
        const Est sz = SizeOf(args[0]);
        return AllocatingList(ov == Ov::kSortByText ? 2.0 + kStringFactor : 2.0, sz * sz);
      }
      case Ov::kSets1:
      case Ov::kSets2: {
        if (args.size() != 2) return std::nullopt;
        const Est c = ByFactor(SizeOf(args[0]) * SizeOf(args[1]), ov == Ov::kSets2 ? 2 : 1);
        return CallEstimate{c + Fixed(1), std::nullopt};
      }
      default: return std::nullopt;
    }
  }

  // replace(): the receiver's traversal twice; the result's size from the replacement counts.
  std::optional<CallEstimate> ReplaceEstimate(const Node* target,
                                              const std::vector<Node>& args) const {
    if (target == nullptr || args.size() < 2) return std::nullopt;
    const Est sz = SizeOf(*target);
    const Est to_replace = SizeOf(args[0]);
    const Est with = SizeOf(args[1]);
    Est count, retained;
    if (to_replace.min == 0) {
      count.max = sz.max < kMax ? sz.max + 1 : sz.max;
      retained.max = sz.max;
    } else if (with.max <= to_replace.min) {
      count.max = 0;
      retained.max = sz.max;
    } else {
      count.max = GoUint64(
          std::ceil(static_cast<double>(sz.max) / static_cast<double>(to_replace.min)));
    }
    if (to_replace.max == 0) {
      count.min = sz.min < kMax ? sz.min + 1 : sz.min;
      retained.min = sz.min;
    } else if (to_replace.max <= with.min) {
      count.min = 0;
      retained.min = sz.min;
    } else {
      count.min = GoUint64(
          std::ceil(static_cast<double>(sz.min) / static_cast<double>(to_replace.max)));
    }
    return CallEstimate{ByFactor(sz, 2 * kStringFactor), count * with + retained};
  }

  // library.CostEstimator.EstimateCallCost, by the rule the function declares
  // (FunctionDef::kubernetes).
  std::optional<CallEstimate> KubernetesEstimate(const std::string& name, const Node* target,
                                                 const std::vector<Node>& args) const {
    using K = Type::Kind;
    switch (KubernetesCostOf(name, /*member=*/target != nullptr)) {
      case KC::kNone: break;
      case KC::kNominal:
      case KC::kNominalByName: return CallEstimate{Fixed(1), std::nullopt};
      case KC::kListTraversal:
      case KC::kIncludes: {
        if (target == nullptr) return std::nullopt;
        if (std::optional<Node> el = ElementNode(*target)) {
          Est el_cost = Fixed(1);
          if (el->type.kind() == K::kString || el->type.kind() == K::kBytes) {
            el_cost = el_cost + ByFactor(SizeOf(*el), kStringFactor);
          }
          return CallEstimate{SizeOf(*target) * el_cost, std::nullopt};
        }
        if (name == "includes") return CallEstimate{SizeOf(*target) * Fixed(1), std::nullopt};
        return CallEstimate{ByFactor(SizeOf(*target), kStringFactor), std::nullopt};
      }
      case KC::kStringTraversal: {
        if (target == nullptr) return std::nullopt;
        const Est sz = SizeOf(*target);
        return CallEstimate{ByFactor(sz, kStringFactor), sz};
      }
      case KC::kReplace: return ReplaceEstimate(target, args);
      case KC::kSplit: {
        if (target == nullptr) return std::nullopt;
        const Est sz = SizeOf(*target);
        uint64_t max = sz.max;
        if (args.size() > 1 && args[1].expr != nullptr &&
            args[1].expr->kind == Expr::Kind::kConst &&
            args[1].expr->constant.kind == Constant::Kind::kInt) {
          max = static_cast<uint64_t>(args[1].expr->constant.i);
        }
        return CallEstimate{ByFactor(sz, 2 * kStringFactor), Est{0, max}};
      }
      case KC::kJoin: {
        if (target == nullptr) return std::nullopt;
        Est sz;
        const Est list = SizeOf(*target);
        if (std::optional<Node> el = ElementNode(*target)) sz = list * SizeOf(*el);
        if (!args.empty()) {
          const Est sep = SizeOf(args[0]);
          const Est seps{list.min > 0 ? list.min - 1 : 0, list.max > 0 ? list.max - 1 : 0};
          sz = sz + sep * seps;
        }
        return CallEstimate{ByFactor(sz, kStringFactor), sz};
      }
      case KC::kRegexFind: {
        if (target == nullptr || args.empty()) return std::nullopt;
        const Est sz = SizeOf(*target);
        const Est str = ByFactor(sz + Fixed(1), kStringFactor);
        const Est re = ByFactor(SizeOf(args[0]), kRegexFactor);
        return CallEstimate{str * re, Est{0, sz.max}};
      }
      case KC::kParse:
        // cidr.ip() reads a field: nominal cost.
        if (name == "ip" && target != nullptr) return CallEstimate{Fixed(1), std::nullopt};
        if (args.empty()) return std::nullopt;
        return CallEstimate{ByFactor(SizeOf(args[0]), kStringFactor), std::nullopt};
      case KC::kContainsIP:
      case KC::kContainsCIDR: {
        // Comparing two 4- or 16-byte addresses; containsCIDR masks the base first (one more
        // traversal, plus 1); a string argument is parsed (its traversal).
        if (target == nullptr || args.empty()) return std::nullopt;
        const Est bytes{4, 16};
        Est cost = ByFactor(bytes + bytes, kStringFactor);
        if (name == "containsCIDR") cost = cost + ByFactor(bytes, kStringFactor) + Fixed(1);
        // With a dyn argument the string overload is a candidate too; the estimate is the
        // maximum.
        if (args[0].type.kind() == K::kString || args[0].type.is_dyn()) {
          cost = cost + ByFactor(SizeOf(args[0]), kStringFactor);
        }
        return CallEstimate{cost, std::nullopt};
      }
      case KC::kCanonical:
        if (args.empty()) return std::nullopt;
        return CallEstimate{ByFactor(SizeOf(args[0]), 2 * kStringFactor), std::nullopt};
      case KC::kValidate:
        // The string's traversal times the longest format regex (MaxNameFormatRegexSize 128) at
        // 0.25 per character, both rounded up.
        if (args.empty()) return std::nullopt;
        return CallEstimate{
            ByFactor(ByFactor(SizeOf(args[0]), kStringFactor), 128 * kRegexFactor), std::nullopt};
      case KC::kUrl: {
        // The string's traversal; the URL's size is the string's (it prices URL equality).
        if (args.size() != 1) return std::nullopt;
        const Est sz = SizeOf(args[0]);
        return CallEstimate{ByFactor(sz, kStringFactor), sz};
      }
    }
    if (name == "_==_" && args.size() == 2 && args[0].type == args[1].type &&
        args[0].type.kind() == K::kURL) {
      // Kubernetes sizes both sides by the right operand's computed size (a url() call's string,
      // a literal; {1, 1} otherwise) and charges its traversal, at least 1.
      const Est size = args[1].computed.value_or(Fixed(1));
      return CallEstimate{ByFactor(Est{1, size.max}, kStringFactor), std::nullopt};
    }
    if (name == "_==_" && args.size() == 2 && args[0].type == args[1].type &&
        args[0].type.kind() == K::kFormat) {
      // Formats compare by name: MaxFormatSize 64 at the string traversal factor.
      return CallEstimate{ByFactor(Est{1, 64}, kStringFactor), std::nullopt};
    }
    if (name == "_==_" && args.size() == 2 && args[0].type == args[1].type &&
        (args[0].type.kind() == K::kQuantity || args[0].type.kind() == K::kSemver ||
         args[0].type.kind() == K::kIP || args[0].type.kind() == K::kCIDR)) {
      return CallEstimate{Fixed(1), std::nullopt};
    }
    return std::nullopt;
  }

  CallEstimate FunctionCost(const Expr& e, const std::string& name, Ov ov, const Node* target,
                            const std::vector<Node>& args, const std::vector<Est>& arg_costs) {
    Est arg_sum;
    for (const Est& c : arg_costs) arg_sum = arg_sum + c;
    if (std::optional<CallEstimate> est = OverloadEstimate(ov, target, args)) {
      return {est->cost + arg_sum, est->result};
    }
    if (std::optional<CallEstimate> est = KubernetesEstimate(name, target, args)) {
      return {est->cost + arg_sum, est->result};
    }
    auto size = [](const Node& n) { return n.computed.value_or(Unknown()); };
    switch (ov) {
      case Ov::kFormat:
        if (target != nullptr) return {ByFactor(size(*target), kStringFactor) + arg_sum, {}};
        break;
      case Ov::kStringToBytes:
        if (args.size() == 1) {
          const Est sz = size(args[0]);
          return {ByFactor(sz, kStringFactor) + arg_sum, Est{sz.min, sz.max * 4}};
        }
        break;
      case Ov::kBytesToString:
        if (args.size() == 1) {
          const Est sz = size(args[0]);
          return {ByFactor(sz, kStringFactor) + arg_sum, Est{sz.min / 4, sz.max}};
        }
        break;
      case Ov::kQuote:
        if (args.size() == 1) {
          const Est sz = size(args[0]);
          return {ByFactor(sz, kStringFactor) + arg_sum, Est{sz.min + 2, sz.max * 2 + 2}};
        }
        break;
      case Ov::kStartsWith:
        if (args.size() == 1) return {ByFactor(size(args[0]), kStringFactor) + arg_sum, {}};
        break;
      case Ov::kInList:
        if (args.size() == 2) return {ByFactor(size(args[1]), 1) + arg_sum, {}};
        break;
      case Ov::kMatches: {
        const Node* str = nullptr;
        const Node* re = nullptr;
        if (target != nullptr && args.size() == 1) {
          str = target;
          re = &args[0];
        } else if (target == nullptr && args.size() == 2) {
          str = &args[0];
          re = &args[1];
        }
        if (str != nullptr) {
          const Est s = ByFactor(size(*str) + Fixed(1), kStringFactor);
          const Est r = ByFactor(size(*re), kRegexFactor);
          return {s * r + arg_sum, {}};
        }
        break;
      }
      case Ov::kContains:
        if (target != nullptr && args.size() == 1) {
          const Est s = ByFactor(size(*target), kStringFactor);
          const Est sub = ByFactor(size(args[0]), kStringFactor);
          return {s * sub + arg_sum, {}};
        }
        break;
      case Ov::kLogical:
        return {Est{arg_costs[0].min, Add(arg_costs[0].max, arg_costs[1].max)}, {}};
      case Ov::kConditional: {
        const Est sz = Union(size(args[1]), size(args[2]));
        SetEntry(e, UnionEntry(EntryOf(*args[1].expr), EntryOf(*args[2].expr)));
        return {arg_costs[0] + Union(arg_costs[1], arg_costs[2]), sz};
      }
      case Ov::kAddString:
      case Ov::kAddBytes:
      case Ov::kAddList:
        if (args.size() == 2) {
          const Est result = size(args[0]) + size(args[1]);
          SetEntry(e, UnionEntry(EntryOf(*args[0].expr), EntryOf(*args[1].expr)));
          if (ov == Ov::kAddList) return {Fixed(1) + arg_sum, result};
          return {ByFactor(result, kStringFactor) + arg_sum, result};
        }
        break;
      case Ov::kCompareText:
      case Ov::kEquals: {
        const uint64_t smallest = std::min(size(args[0]).max, size(args[1]).max);
        return {ByFactor(Est{smallest > 0 ? 1u : 0u, smallest}, kStringFactor) + arg_sum, {}};
      }
      default: break;
    }
    return {Fixed(1) + arg_sum, {}};
  }

  Est CostCall(const Expr& e) {
    std::string name = e.name;
    const Expr* target = e.operand.get();
    if (auto it = info_.global_calls.find(&e); it != info_.global_calls.end()) {
      name = it->second;
      target = nullptr;
    }
    if (name == "dyn" && target == nullptr && e.args.size() == 1) {
      const Est arg = Cost(*e.args[0]);
      SetSize(e, ComputeSize(*e.args[0]));
      SetEntry(e, EntryOf(*e.args[0]));
      return Fixed(1) + arg;
    }
    std::vector<Est> arg_costs;
    std::vector<Node> args;
    for (size_t i = 0; i < e.args.size(); ++i) {
      arg_costs.push_back(Cost(*e.args[i]));
      args.push_back(NewNode(*e.args[i]));
    }
    Est sum;
    std::optional<Node> target_node;
    if (target != nullptr) {
      sum = Cost(*target);
      target_node = NewNode(*target);
    }
    const Node* tn = target_node ? &*target_node : nullptr;
    Est fn{kMax, 0};
    std::optional<Est> result;
    for (Ov ov : Resolve(name, tn, args)) {
      CallEstimate c = FunctionCost(e, name, ov, tn, args, arg_costs);
      fn = Union(fn, c.cost);
      if (c.result) result = result ? Union(*result, *c.result) : *c.result;
      if ((ov == Ov::kIndexList || ov == Ov::kIndexMap) && !e.args.empty()) {
        std::optional<Entry> entry = EntryOf(*e.args[0]);
        result = entry ? std::optional<Est>(entry->val) : std::nullopt;
        paths_[&e] = Append(GetPath(*e.args[0]), ov == Ov::kIndexList ? "@items" : "@values");
      }
      if (!result) result = ComputeSize(e);
    }
    SetSize(e, result);
    return sum + fn;
  }

  Est CostList(const Expr& e) {
    Est sum;
    Est item{kMax, 0};
    if (e.args.empty()) item.min = 0;
    for (const ExprPtr& a : e.args) {
      sum = sum + Cost(*a);
      item = Union(item, SizeOrUnknown(*a));
    }
    entries_[&e] = Entry{true, Fixed(1), item};
    return sum + Fixed(10);
  }

  Est CostMap(const Expr& e) {
    Est sum;
    Est key{kMax, 0}, val{kMax, 0};
    if (e.args.empty()) key.min = val.min = 0;
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      sum = sum + Cost(*e.args[i]);
      sum = sum + Cost(*e.args[i + 1]);
      key = Union(key, SizeOrUnknown(*e.args[i]));
      val = Union(val, SizeOrUnknown(*e.args[i + 1]));
    }
    entries_[&e] = Entry{false, key, val};
    return sum + Fixed(30);
  }

  bool IsBind(const Expr& e) const {
    return e.iter_range->kind == Expr::Kind::kList && e.iter_range->args.empty() &&
           e.loop_cond->kind == Expr::Kind::kConst &&
           e.loop_cond->constant.kind == Constant::Kind::kBool && !e.loop_cond->constant.b &&
           e.accu_var != "__result__";
  }

  Est CostBind(const Expr& e) {
    Est sum = Cost(*e.iter_range);
    sum = sum + Cost(*e.accu_init);
    PushLocal(e.accu_var, *e.accu_init);
    sum = sum + Cost(*e.result);
    Pop(e.accu_var);
    SetSize(e, ComputeSize(*e.result));
    SetEntry(e, EntryOf(*e.result));
    return sum;
  }

  void PushLocal(const std::string& name, const Expr& e) {
    Local v;
    v.path = GetPath(e);
    v.entry = EntryOf(e);
    v.size = ComputeSize(e);
    Push(name, std::move(v));
  }

  // The container kind of a range: from its entry sizes, else its checked type.
  bool RangeIsList(const Expr& range, const std::optional<Entry>& entry) const {
    if (entry) return entry->list;
    return TypeOf(range).kind() == Type::Kind::kList;
  }

  void PushIter(const std::string& name, const Expr& range, bool key, bool single) {
    const std::optional<Entry> entry = EntryOf(range);
    const bool list = RangeIsList(range, entry);
    Local v;
    std::string sub;
    if (single) {
      v.size = entry ? std::optional<Est>(list ? entry->val : entry->key) : std::nullopt;
      sub = list ? "@items" : "@keys";
    } else if (key) {
      v.size = entry ? std::optional<Est>(entry->key) : std::nullopt;
      sub = list ? "@indices" : "@keys";
    } else {
      v.size = entry ? std::optional<Est>(entry->val) : std::nullopt;
      sub = list ? "@items" : "@values";
    }
    v.path = Append(GetPath(range), std::move(sub));
    Push(name, std::move(v));
  }

  Est CostComprehension(const Expr& e) {
    Est sum = Cost(*e.iter_range);
    sum = sum + Cost(*e.accu_init);
    PushLocal(e.accu_var, *e.accu_init);
    const bool two = !e.iter_var2.empty();
    if (two) {
      PushIter(e.iter_var, *e.iter_range, /*key=*/true, /*single=*/false);
      PushIter(e.iter_var2, *e.iter_range, /*key=*/false, /*single=*/false);
    } else {
      PushIter(e.iter_var, *e.iter_range, /*key=*/true, /*single=*/true);
    }
    const Est loop = Cost(*e.loop_cond);
    const Est step = Cost(*e.loop_step);
    Pop(e.iter_var);
    if (two) Pop(e.iter_var2);
    sum = sum + Cost(*e.result);
    Pop(e.accu_var);
    const Est range = SizeOrUnknown(*e.iter_range);
    sum = sum + range * (step + loop);
    switch (e.accu_init->kind) {
      case Expr::Kind::kConst: SetSize(e, ComputeSize(*e.accu_init)); break;
      case Expr::Kind::kList:
      case Expr::Kind::kMap:
        SetSize(e, range);
        SetEntry(e, EntryOf(*e.loop_step));
        break;
      default: break;
    }
    return sum;
  }

  const CheckedInfo& info_;
  const bool dra_;
  std::unordered_map<const Expr*, Path> paths_;
  std::unordered_map<const Expr*, Est> sizes_;
  std::unordered_map<const Expr*, Entry> entries_;
  std::map<std::string, std::vector<Local>, std::less<>> locals_;
};

}  // namespace

CostEstimate EstimateCost(const Expr& root, const CheckedInfo& info, bool dra_sizes) {
  Coster coster(info, dra_sizes);
  const Est e = coster.Cost(root);
  return CostEstimate{e.min, e.max};
}

}  // namespace devlet::cel::internal
