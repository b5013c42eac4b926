// Planning (resolution, light type checking, constant folding, DRA fast paths) and the plan nodes
// of the tree-walking evaluator; the estimated cost is estimate.cc's, from the checked types.
#include "program.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ast.h"
#include "estimate.h"
#include "utf8.h"
#include "devlet/cel/dra.h"
#include "devlet/common/status.h"

namespace devlet::cel::internal {
namespace {

// ---- Nodes ---------------------------------------------------------------------------------

class ConstNode final : public Node {
 public:
  ConstNode(int32_t offset, Val v, uint64_t cost) : Node(offset), v_(v), cost_(cost) {}
  Val Eval(Ctx& ctx) const override {
    if (cost_) ctx.AddCost(cost_);
    return v_;
  }
  const Val* constant() const override { return &v_; }
  uint64_t cost() const { return cost_; }

 private:
  Val v_;
  uint64_t cost_;
};

class ErrorNode final : public Node {
 public:
  ErrorNode(int32_t offset, std::string message) : Node(offset), message_(std::move(message)) {}
  Val Eval(Ctx& /*ctx*/) const override { return Val::Str(message_, VK::kError); }

 private:
  std::string message_;
};

class VarNode final : public Node {
 public:
  VarNode(int32_t offset, uint32_t index, std::string name)
      : Node(offset), index_(index), name_(std::move(name)) {}
  Val Eval(Ctx& ctx) const override {
    ctx.AddCost(attr_cost_);
    return Load(ctx);
  }
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override { attr_cost_ = 0; }
  // Load without cost; `found` reports whether the activation binds it.
  Val Load(Ctx& ctx, bool* found = nullptr) const {
    if (!ctx.var_loaded[index_]) {
      const Value* v = ctx.activation ? ctx.activation->Find(name_) : nullptr;
      ctx.var_loaded[index_] = v ? 1 : 2;
      ctx.vars[index_] = v ? FromValue(*v, ctx.arena) : Val();
    }
    if (found) *found = ctx.var_loaded[index_] == 1;
    if (ctx.var_loaded[index_] == 2) return ctx.Error("no such attribute: " + name_);
    return ctx.vars[index_];
  }

 private:
  uint32_t index_;
  std::string name_;
  uint64_t attr_cost_ = 1;
};

class DeviceVarNode final : public Node {
 public:
  explicit DeviceVarNode(int32_t offset) : Node(offset) {}
  Val Eval(Ctx& ctx) const override {
    ctx.AddCost(attr_cost_);
    if (ctx.device == nullptr) return ctx.Error("no such attribute: device");
    Val r;
    r.kind = VK::kDevice;
    r.dev = ctx.device;
    return r;
  }
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override { attr_cost_ = 0; }

 private:
  uint64_t attr_cost_ = 1;
};

// a.b.c where the activation may bind "a.b.c", "a.b" or "a" (unchecked qualified names).
class QualifiedVarNode final : public Node {
 public:
  QualifiedVarNode(int32_t offset, std::vector<std::unique_ptr<VarNode>> candidates,
                   std::vector<std::string> fields)
      : Node(offset), candidates_(std::move(candidates)), fields_(std::move(fields)) {}
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override { attr_cost_ = 0; }
  Val Eval(Ctx& ctx) const override {
    ctx.AddCost(attr_cost_);
    // candidates_[i] binds the name with fields_.size() - i trailing fields consumed.
    for (size_t i = 0; i < candidates_.size(); ++i) {
      bool found = false;
      Val v = candidates_[i]->Load(ctx, &found);
      if (!found) continue;
      const size_t remaining = i;
      for (size_t f = fields_.size() - remaining; f < fields_.size(); ++f) {
        ctx.AddCost(1);
        v = Select(ctx, v, fields_[f]);
      }
      return v;
    }
    return candidates_.back()->Load(ctx);
  }

 private:
  std::vector<std::unique_ptr<VarNode>> candidates_;  // longest name first
  std::vector<std::string> fields_;
  uint64_t attr_cost_ = 1;
};

class SlotNode final : public Node {
 public:
  SlotNode(int32_t offset, uint32_t slot) : Node(offset), slot_(slot) {}
  Val Eval(Ctx& ctx) const override {
    ctx.AddCost(attr_cost_);
    return ctx.slots[slot_];
  }
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override { attr_cost_ = 0; }

 private:
  uint32_t slot_;
  uint64_t attr_cost_ = 1;
};

// cel-go's cost of one qualifier (select, index, optional select) applied to `operand`, given the
// result: none when the operand failed (qualification stops there); in optional mode (an optional
// operand or an optional qualifier) only when the qualifier found something; else 1.
inline uint64_t QualifierCost(const Val& operand, const Val& result, bool optional) {
  if (operand.is_error()) return 0;
  if (optional || operand.kind == VK::kOptional) {
    return result.is_error() || (result.kind == VK::kOptional && result.opt == nullptr) ? 0 : 1;
  }
  return 1;
}

class SelectNode final : public Node {
 public:
  SelectNode(int32_t offset, NodePtr operand, std::string field)
      : Node(offset), operand_(std::move(operand)), field_(std::move(field)),
        relative_cost_(operand_->is_attribute() ? 0 : 1) {}
  Val Eval(Ctx& ctx) const override {
    Val v = operand_->Eval(ctx);
    ctx.AddCost(relative_cost_);
    Val r = Select(ctx, v, field_);
    ctx.AddCost(QualifierCost(v, r, false));
    return r;
  }
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override {
    if (relative_cost_ != 0) {
      relative_cost_ = 0;
    } else {
      operand_->DropAttributeCost();
    }
  }

 private:
  NodePtr operand_;
  std::string field_;
  uint64_t relative_cost_;
};

class HasNode final : public Node {
 public:
  // has() is a test-only attribute: with Kubernetes' PresenceTestHasCost(false) the attribute's
  // own 1 is refunded, and a non-attribute operand is not charged as a relative attribute.
  HasNode(int32_t offset, NodePtr operand, std::string field)
      : Node(offset), operand_(std::move(operand)), field_(std::move(field)) {
    operand_->DropAttributeCost();
  }
  Val Eval(Ctx& ctx) const override {
    Val v = operand_->Eval(ctx);
    if (!v.is_error() && !(v.kind == VK::kOptional && v.opt == nullptr)) ctx.AddCost(1);
    return Has(ctx, v, field_);
  }

 private:
  NodePtr operand_;
  std::string field_;
};

// DRA: device.driver.
class DriverNode final : public Node {
 public:
  explicit DriverNode(int32_t offset) : Node(offset) {}
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override { cost_ = 1; }
  Val Eval(Ctx& ctx) const override {
    ctx.AddCost(cost_);
    if (ctx.device == nullptr) return ctx.Error("no such attribute: device");
    return Val::Str(ctx.device->driver());
  }

 private:
  uint64_t cost_ = 2;
};

// DRA: device.attributes["domain"] / device.capacity["domain"] with a constant domain.
class DomainNode final : public Node {
 public:
  DomainNode(int32_t offset, std::string domain, bool capacity)
      : Node(offset), domain_(std::move(domain)), capacity_(capacity) {}
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override { cost_ = 2; }
  Val Eval(Ctx& ctx) const override {
    ctx.AddCost(cost_);
    if (ctx.device == nullptr) return ctx.Error("no such attribute: device");
    Val r;
    r.kind = VK::kDomainMap;
    r.dom = ctx.arena.New<DomainRef>(DomainRef{ctx.device, domain_, capacity_});
    return r;
  }
  const std::string& domain() const { return domain_; }
  bool capacity() const { return capacity_; }

 private:
  std::string domain_;
  bool capacity_;
  uint64_t cost_ = 3;
};

// DRA: device.attributes["domain"].id (or ["id"]), constant domain and id: one view lookup.
class AttrNode final : public Node {
 public:
  AttrNode(int32_t offset, std::string domain, std::string id, bool capacity)
      : Node(offset), domain_(std::move(domain)), id_(std::move(id)), capacity_(capacity) {}
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override { cost_ = 3; }
  Val Eval(Ctx& ctx) const override {
    ctx.AddCost(cost_);
    if (ctx.device == nullptr) return ctx.Error("no such attribute: device");
    bool found = false;
    Val v = DomainLookup(ctx, ctx.device, capacity_, domain_, id_, &found);
    if (!found) return ctx.Error("no such key: " + id_);
    return v;
  }

 private:
  std::string domain_, id_;
  bool capacity_;
  uint64_t cost_ = 4;
};

class IndexNode final : public Node {
 public:
  // The key is a qualifier, evaluated only once the operand resolved, and charged 1 as cel-go's
  // cost observer sees a qualifier: after it applied, and in optional mode (an optional operand
  // or `[?k]`) only when it found something. A constant key costs just that 1, anything else its
  // own cost besides; an attribute key (a variable, a select, a conditional) is resolved through
  // the qualifier, so its own attribute cost is that 1 (cel-go observes the qualifier, never the
  // key attribute's evaluation), which `{q: 1}[?q]` with an invalid key or an absent entry shows.
  IndexNode(int32_t offset, NodePtr operand, NodePtr key, bool optional)
      : Node(offset), operand_(std::move(operand)), key_(std::move(key)), optional_(optional),
        relative_cost_(operand_->is_attribute() ? 0 : 1) {
    if (key_->is_attribute()) key_->DropAttributeCost();
  }
  Val Eval(Ctx& ctx) const override {
    Val o = operand_->Eval(ctx);
    if (o.is_error() || (o.kind == VK::kOptional && o.opt == nullptr)) {
      ctx.AddCost(relative_cost_);
      return o;
    }
    Val k = key_->Eval(ctx);
    // cel-go charges the attribute once its qualifiers resolved: a panic in the key (an ext.Lists
    // cost tracker) ends the evaluation before that.
    ctx.AddCost(relative_cost_);
    Val r = optional_ ? OptIndex(ctx, o, k) : Index(ctx, o, k);
    ctx.AddCost(QualifierCost(o, r, optional_));
    return r;
  }
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override {
    if (relative_cost_ != 0) {
      relative_cost_ = 0;
    } else {
      operand_->DropAttributeCost();
    }
  }

 private:
  NodePtr operand_, key_;
  bool optional_;
  uint64_t relative_cost_;
};

class OptSelectNode final : public Node {
 public:
  OptSelectNode(int32_t offset, NodePtr operand, std::string field)
      : Node(offset), operand_(std::move(operand)), field_(std::move(field)),
        relative_cost_(operand_->is_attribute() ? 0 : 1) {}
  Val Eval(Ctx& ctx) const override {
    Val v = operand_->Eval(ctx);
    ctx.AddCost(relative_cost_);
    Val r = OptSelect(ctx, v, field_);
    ctx.AddCost(QualifierCost(v, r, true));
    return r;
  }
  bool is_attribute() const override { return true; }
  void DropAttributeCost() override {
    if (relative_cost_ != 0) {
      relative_cost_ = 0;
    } else {
      operand_->DropAttributeCost();
    }
  }

 private:
  NodePtr operand_;
  std::string field_;
  uint64_t relative_cost_;
};

class AndNode final : public Node {
 public:
  AndNode(int32_t offset, NodePtr l, NodePtr r, bool is_and)
      : Node(offset), l_(std::move(l)), r_(std::move(r)), and_(is_and) {}
  Val Eval(Ctx& ctx) const override {
    // && : false absorbs errors; || : true absorbs errors (commutatively).
    Val a = l_->Eval(ctx);
    if (a.kind == VK::kBool && a.b != and_) return a;
    Val b = r_->Eval(ctx);
    if (b.kind == VK::kBool && b.b != and_) return b;
    if (a.kind == VK::kBool && b.kind == VK::kBool) return a;
    // As cel-go's evalAnd/evalOr: the first term that is not a bool decides the error; a value
    // that is neither bool nor error is "no such overload".
    const Val& first = a.kind != VK::kBool ? a : b;
    return first.is_error() ? first : ctx.Error("no such overload");
  }

 private:
  NodePtr l_, r_;
  bool and_;
};

class NotStrictlyFalseNode final : public Node {
 public:
  NotStrictlyFalseNode(int32_t offset, NodePtr e) : Node(offset), e_(std::move(e)) {}
  Val Eval(Ctx& ctx) const override {
    Val v = e_->Eval(ctx);
    ctx.AddCost(1);
    return Val::Bool(!(v.kind == VK::kBool && !v.b));
  }

 private:
  NodePtr e_;
};

class CondNode final : public Node {
 public:
  // cel-go resolves attribute branches directly (see DropAttributeCost).
  CondNode(int32_t offset, NodePtr c, NodePtr t, NodePtr f)
      : Node(offset), c_(std::move(c)), t_(std::move(t)), f_(std::move(f)) {
    if (t_->is_attribute()) t_->DropAttributeCost();
    if (f_->is_attribute()) f_->DropAttributeCost();
  }
  bool is_attribute() const override { return true; }
  Val Eval(Ctx& ctx) const override {
    Val c = c_->Eval(ctx);
    if (c.kind == VK::kBool) return c.b ? t_->Eval(ctx) : f_->Eval(ctx);
    if (c.is_error()) return c;
    return ctx.NoOverload("_?_:_", &c, 1);
  }

 private:
  NodePtr c_, t_, f_;
};

// How cel-go plans a call, which decides its runtime cost (interpreter/planner.go):
struct CallShape {
  // The checker resolved exactly one overload. Otherwise the call has no overload id and only
  // Kubernetes' per-function costs apply; everything else costs 1.
  bool resolved = true;
  // Planned as evalVarArgs (3+ arguments, a dynamically dispatched call, or a function-only
  // binding): an error argument stops evaluation of the later arguments, and when it is not the
  // last argument the call itself is not charged (its arguments are not all on the cost stack).
  bool varargs = false;
  // `x in <constant list of primitives>`: cel-go's OptOptimize turns it into a set lookup, which
  // is not a call and costs nothing.
  bool set_lookup = false;
  // The one overload the checker kept for _<_, _<=_, _>_ or _>=_ (kCompare) or _+_ (kConcat)
  // takes strings or bytes: cel-go prices the call by that overload whatever the runtime values
  // are: ceil(0.1 * the shorter size), 0 beside an empty string; ceil(0.1 * both sizes).
  enum class Text : unsigned char { kNone, kCompare, kConcat } text = Text::kNone;
};

class CallNode final : public Node {
 public:
  CallNode(int32_t offset, const FunctionDef* def, std::vector<NodePtr> args, CallShape shape = {})
      : Node(offset), def_(def), args_(std::move(args)), shape_(shape) {
    // The argument an ext.Lists cost tracker converts to a list (see Eval), decided once.
    const size_t n = args_.size();
    if (n == 1 && def_->name == "distinct") lister_ = 0;
    if (n == 1 && def_->name == "sort" && shape_.resolved) lister_ = 0;
    if (n == 2 && def_->name == "@sortByAssociatedKeys" && shape_.resolved) lister_ = 1;
  }
  Val Eval(Ctx& ctx) const override {
    Val buf[4];
    std::vector<Val> heap;
    Val* vals = buf;
    const auto n = static_cast<uint32_t>(args_.size());
    if (n > 4) {
      heap.resize(n);
      vals = heap.data();
    }
    for (uint32_t i = 0; i < n; ++i) {
      vals[i] = args_[i]->Eval(ctx);
      if (shape_.varargs && i + 1 < n && vals[i].is_error()) return vals[i];
    }
    if (shape_.set_lookup && vals[0].kind == VK::kSemver) {
      // cel-go's set lookup hashes the value as a Go map key; a Semver (a struct holding
      // slices) panics there, and Kubernetes reports the panic for the whole evaluation.
      ctx.Panic("internal error: runtime error: hash of unhashable type cel.Semver");
      return ctx.Error(ctx.panic_message);
    }
    // cel-go's ext.Lists cost trackers of distinct(), sort() and sortBy's keys (bound to the
    // overload the checker resolved) convert that argument to a list and panic on anything
    // else; Kubernetes reports the panic for the whole evaluation.
    if (lister_ >= 0) {
      if (const std::string_view panic = ListerPanic(vals[lister_]); !panic.empty()) {
        ctx.Panic(panic);
        return ctx.Error(ctx.panic_message);
      }
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (vals[i].is_error()) {
        // cel-go charges the call even when an argument failed, sizing the error as 1 (but `in`
        // on a constant list is a set lookup there, not a call).
        if (!shape_.set_lookup) {
          // The error is priced by the overload the checker kept, never by the runtime kinds: a
          // string beside an error that was typed int (`productName + x.size()`, add_int64)
          // costs 1, as cel-go's; a kept string overload is priced by CallCost's text shape.
          Val sized[4];
          for (uint32_t j = 0; j < n && j < 4; ++j) {
            sized[j] = vals[j].is_error() ? Val::Null() : vals[j];
          }
          ctx.AddCost(CallCost(sized, n));
        }
        return vals[i];
      }
    }
    if (!shape_.set_lookup) ctx.AddCost(CallCost(vals, n));
    if (ctx.aborted()) return ctx.Error("aborted");  // do not start work past the limit
    return def_->fn(ctx, vals, n);
  }
  const FunctionDef* def() const { return def_; }
  const std::vector<NodePtr>& args() const { return args_; }

  // The Go panic text of an ext.Lists cost tracker given a value that is not a list (Go names
  // the value's type and the first traits.Lister method it lacks), or "" for a list or a kind
  // that does not occur there.
  static std::string_view ListerPanic(const Val& v) {
    switch (v.kind) {
      case VK::kError:
        return "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add";
      case VK::kBool:
        return "internal error: interface conversion: types.Bool is not traits.Lister: missing method Add";
      case VK::kNull:
        return "internal error: interface conversion: types.Null is not traits.Lister: missing method Add";
      case VK::kSemver:
        return "internal error: interface conversion: cel.Semver is not traits.Lister: missing method Add";
      case VK::kInt:
        return "internal error: interface conversion: types.Int is not traits.Lister: missing method Contains";
      case VK::kUint:
        return "internal error: interface conversion: types.Uint is not traits.Lister: missing method Contains";
      case VK::kDouble:
        return "internal error: interface conversion: types.Double is not traits.Lister: missing method Contains";
      case VK::kString:
        return "internal error: interface conversion: types.String is not traits.Lister: missing method Contains";
      default: return {};
    }
  }

 private:
  uint64_t CallCost(const Val* vals, uint32_t n) const {
    if (shape_.text != CallShape::Text::kNone && n == 2) {
      // cel-go's actualSize: code points of a string, bytes of bytes, 1 for anything else.
      auto size = [](const Val& v) -> uint64_t {
        if (v.kind == VK::kString) return Utf8CountCodePoints(v.str());
        return v.kind == VK::kBytes ? v.n : 1;
      };
      return shape_.text == CallShape::Text::kCompare
                 ? CostOf(0.1, std::min(size(vals[0]), size(vals[1])))
                 : CostOf(0.1, size(vals[0]) + size(vals[1]));
    }
    if (!shape_.resolved || def_->cost == nullptr || n > 4) return shape_.resolved || KubernetesCosted() ? (def_->cost && n <= 4 ? def_->cost(vals, n) : 1) : 1;
    return def_->cost(vals, n);
  }
  // Kubernetes' library/cost.go prices these by function name, with or without an overload id.
  bool KubernetesCosted() const {
    static constexpr std::string_view kNames[] = {
        "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes", "lowerAscii",
        "upperAscii", "substring", "trim", "replace", "split", "join", "find", "findAll",
        "quantity", "isQuantity", "semver", "isSemver", "ip", "isIP", "ip.isCanonical", "cidr", "isCIDR",
        "containsIP", "containsCIDR", "validate", "format.named", "url"};
    return std::find(std::begin(kNames), std::end(kNames), def_->name) != std::end(kNames);
  }

  const FunctionDef* def_;
  std::vector<NodePtr> args_;
  CallShape shape_;
  int lister_ = -1;
};

// A call to a function that is not declared (only without type checking): runtime error.
class UnknownCallNode final : public Node {
 public:
  UnknownCallNode(int32_t offset, std::string name, std::vector<NodePtr> args)
      : Node(offset), name_(std::move(name)), args_(std::move(args)) {}
  Val Eval(Ctx& ctx) const override {
    for (const NodePtr& a : args_) {
      Val v = a->Eval(ctx);
      if (v.is_error()) return v;
    }
    ctx.AddCost(1);
    return ctx.Error("no such overload: " + name_);
  }

 private:
  std::string name_;
  std::vector<NodePtr> args_;
};

// opt.or(other) / opt.orValue(value), evaluated lazily.
class OptOrNode final : public Node {
 public:
  OptOrNode(int32_t offset, NodePtr target, NodePtr alt, bool or_value)
      : Node(offset), target_(std::move(target)), alt_(std::move(alt)), or_value_(or_value) {}
  Val Eval(Ctx& ctx) const override {
    // No cost of its own: cel-go plans or/orValue as a short-circuiting node, not a call.
    Val t = target_->Eval(ctx);
    if (t.is_error()) return t;
    if (t.kind != VK::kOptional) {
      return ctx.NoOverload(or_value_ ? "orValue" : "or", &t, 1);
    }
    if (t.opt != nullptr) return or_value_ ? *t.opt : t;
    Val a = alt_->Eval(ctx);
    if (!or_value_ && !a.is_error() && a.kind != VK::kOptional) {
      Val args[2] = {t, a};
      return ctx.NoOverload("or", args, 2);
    }
    return a;
  }

 private:
  NodePtr target_, alt_;
  bool or_value_;
};

class RegexNode final : public Node {
 public:
  enum class Op : unsigned char { kMatches, kFind, kFindAll };
  RegexNode(int32_t offset, Op op, NodePtr text, std::shared_ptr<const Regex> re, size_t pattern_len,
            NodePtr limit)
      : Node(offset), op_(op), text_(std::move(text)), re_(std::move(re)),
        pattern_len_(pattern_len), limit_(std::move(limit)) {}
  Val Eval(Ctx& ctx) const override {
    Val t = text_->Eval(ctx);
    Val lim = limit_ ? limit_->Eval(ctx) : Val::Int(-1);
    // cel-go prices the call from the argument sizes (a non-string sized as cel-go's actualSize),
    // also when the call then fails; a failed text stops it before the call is priced.
    if (t.is_error()) return t;
    const uint64_t size = t.kind == VK::kString ? Utf8CountCodePoints(t.str())
                          : (t.kind == VK::kList || t.kind == VK::kMap || t.kind == VK::kBytes) ? t.n
                                                                                                  : 1;
    const uint64_t str_cost = CostOf(0.1, size + 1);
    const uint64_t re_cost = CostOf(0.25, pattern_len_);
    ctx.AddCost(str_cost * re_cost);
    if (lim.is_error()) return lim;
    if (t.kind != VK::kString || lim.kind != VK::kInt) {
      return ctx.NoOverload(op_ == Op::kMatches ? "matches" : op_ == Op::kFind ? "find" : "findAll", &t, 1);
    }
    switch (op_) {
      case Op::kMatches: return Val::Bool(RegexMatch(*re_, t.str()));
      case Op::kFind: return RegexFind(ctx, *re_, t.str());
      case Op::kFindAll: return RegexFindAll(ctx, *re_, t.str(), lim.i);
    }
    return Val();
  }

 private:
  Op op_;
  NodePtr text_;
  std::shared_ptr<const Regex> re_;
  size_t pattern_len_;
  NodePtr limit_;
};

class ListNode final : public Node {
 public:
  ListNode(int32_t offset, std::vector<NodePtr> elems, std::vector<bool> optional)
      : Node(offset), elems_(std::move(elems)), optional_(std::move(optional)) {}
  // cel-go's cost observer charges the list once it was built (also when an element failed);
  // a panic in an element (a map with a bytes key) ends the evaluation before that.
  Val Eval(Ctx& ctx) const override {
    Val r = Build(ctx);
    ctx.AddCost(10);
    return r;
  }

 private:
  Val Build(Ctx& ctx) const {
    const auto n = static_cast<uint32_t>(elems_.size());
    Val list = ctx.ListWithCapacity(n);
    uint32_t used = 0;
    for (uint32_t i = 0; i < n; ++i) {
      Val v = elems_[i]->Eval(ctx);
      if (v.is_error()) return v;
      if (optional_[i]) {
        if (v.kind != VK::kOptional) return ctx.NoOverload("optional list element", &v, 1);
        if (v.opt == nullptr) continue;
        v = *v.opt;
      }
      list.l->data[used++] = v;
    }
    list.l->used = used;
    list.n = used;
    return list;
  }

  std::vector<NodePtr> elems_;
  std::vector<bool> optional_;
};

class MapNode final : public Node {
 public:
  MapNode(int32_t offset, std::vector<NodePtr> kv, std::vector<bool> optional)
      : Node(offset), kv_(std::move(kv)), optional_(std::move(optional)) {}
  // cel-go's cost observer charges the map once it was built (also when an entry failed); a
  // panic (an unhashable key) ends the evaluation before that.
  Val Eval(Ctx& ctx) const override {
    Val r = Build(ctx);
    ctx.AddCost(30);
    return r;
  }

 private:
  Val Build(Ctx& ctx) const {
    const auto n = static_cast<uint32_t>(optional_.size());
    auto* rep = ctx.arena.New<MapRep>();
    rep->keys = ctx.arena.NewArray<Val>(n);
    rep->vals = ctx.arena.NewArray<Val>(n);
    rep->cap = n;
    uint32_t used = 0;
    for (uint32_t i = 0; i < n; ++i) {
      // A failed key stops the map before its value is evaluated (cel-go's evalMap).
      Val k = kv_[2 * i]->Eval(ctx);
      if (k.is_error()) return k;
      Val v = kv_[2 * i + 1]->Eval(ctx);
      if (v.is_error()) return v;
      if (ctx.go_map_keys) {
        if (k.kind == VK::kDevice || k.kind == VK::kDeviceMap || k.kind == VK::kDomainMap) {
          return ctx.Error("unsupported key type: " + std::string(TypeNameOf(k)));
        }
      } else if (k.kind != VK::kString && k.kind != VK::kInt && k.kind != VK::kUint &&
                 k.kind != VK::kBool) {
        return ctx.Error("unsupported key type: " + std::string(TypeNameOf(k)));
      }
      if (optional_[i]) {
        if (v.kind != VK::kOptional) return ctx.NoOverload("optional map entry", &v, 1);
      }
      if (ctx.go_map_keys) {
        // cel-go stores the entry in a Go map: hashing a key that holds slices panics (the map
        // itself is not charged then), and a repeated key replaces the earlier entry (an absent
        // optional entry deletes it).
        if (const std::string_view panic = UnhashableKey(k, optional_[i] && v.opt == nullptr);
            !panic.empty()) {
          ctx.Panic(panic);
          return ctx.Error(ctx.panic_message);
        }
        uint32_t j = 0;
        while (j < used && !GoKeyEqual(rep->keys[j], k)) ++j;
        if (optional_[i] && v.opt == nullptr) {
          if (j < used) {
            for (uint32_t m = j + 1; m < used; ++m) {
              rep->keys[m - 1] = rep->keys[m];
              rep->vals[m - 1] = rep->vals[m];
            }
            --used;
          }
          continue;
        }
        if (optional_[i]) v = *v.opt;
        rep->keys[j] = k;
        rep->vals[j] = v;
        if (j == used) ++used;
        continue;
      }
      if (optional_[i]) {
        if (v.opt == nullptr) continue;
        v = *v.opt;
      }
      for (uint32_t j = 0; j < used; ++j) {
        if (EqualBool(rep->keys[j], k)) return ctx.Error("Failed with repeated key");
      }
      rep->keys[used] = k;
      rep->vals[used] = v;
      ++used;
    }
    rep->used = used;
    Val r;
    r.kind = VK::kMap;
    r.m = rep;
    r.n = used;
    return r;
  }

  std::vector<NodePtr> kv_;
  std::vector<bool> optional_;
};


class ComprehensionNode final : public Node {
 public:
  ComprehensionNode(int32_t offset, NodePtr range, NodePtr init, NodePtr cond, NodePtr step,
                    NodePtr result, uint32_t iter_slot, int32_t iter2_slot, uint32_t accu_slot)
      : Node(offset), range_(std::move(range)), init_(std::move(init)), cond_(std::move(cond)),
        step_(std::move(step)), result_(std::move(result)), iter_slot_(iter_slot),
        iter2_slot_(iter2_slot), accu_slot_(accu_slot) {}

  Val Eval(Ctx& ctx) const override {
    Val range = range_->Eval(ctx);
    if (range.is_error()) return range;
    Val keys;
    const bool is_list = range.kind == VK::kList;
    if (is_list) {
      keys = range;
    } else if (range.kind == VK::kMap || range.kind == VK::kDeviceMap || range.kind == VK::kDomainMap) {
      keys = MapKeys(ctx, range);
    } else if (iter2_slot_ >= 0) {
      // cel-go's evalFold: a two-variable comprehension (all(k, v, ..), transformList, ...)
      // folds only lists and maps and says so in its own words.
      return ctx.Error("unsupported comprehension range type: " + GoValueTypeName(range));
    } else {
      return ctx.Error("got '" + GoValueTypeName(range) + "', expected iterable type");
    }
    Val accu = init_->Eval(ctx);
    const uint32_t n = keys.n;
    for (uint32_t i = 0; i < n; ++i) {
      ctx.Tick();
      if (ctx.aborted()) return ctx.Error("aborted");
      ctx.slots[accu_slot_] = accu;
      const Val item = keys.l->data[i];
      if (iter2_slot_ < 0) {
        ctx.slots[iter_slot_] = item;
      } else if (is_list) {
        ctx.slots[iter_slot_] = Val::Int(i);
        ctx.slots[iter2_slot_] = item;
      } else {
        ctx.slots[iter_slot_] = item;
        Val v;
        if (!MapFind(ctx, range, item, &v)) v = ctx.Error("no such key");
        ctx.slots[iter2_slot_] = v;
      }
      Val c = cond_->Eval(ctx);
      if (c.kind != VK::kBool || !c.b) break;
      accu = step_->Eval(ctx);
    }
    if (ctx.aborted()) return ctx.Error("aborted");
    ctx.slots[accu_slot_] = accu;
    return result_->Eval(ctx);
  }

 private:
  NodePtr range_, init_, cond_, step_, result_;
  uint32_t iter_slot_;
  int32_t iter2_slot_;
  uint32_t accu_slot_;
};

// ---- Planner -------------------------------------------------------------------------------

// What the planner knows about a subexpression.
struct Planned {
  NodePtr node;
  Type type;
  enum class Dra : unsigned char { kNone, kDevice, kAttributes, kCapacity, kDomain } dra = Dra::kNone;
  // cel-go's planner sees a constant (InterpretableConst): a literal, a type name, a list or map
  // literal of such constants, or a conversion of one (OptOptimize). Only these cost nothing at
  // runtime; other expressions folded here keep their cel-go cost.
  bool celgo_const = false;
  bool dra_capacity = false;  // with kDomain
};

struct ScopeVar {
  std::string name;
  uint32_t slot;
  Type type;
};

bool IsTypeName(std::string_view n) {
  static constexpr std::string_view kNames[] = {"int", "uint", "double", "bool", "string", "bytes",
                                                "list", "map", "null_type", "type",
                                                "optional_type"};
  return std::find(std::begin(kNames), std::end(kNames), n) != std::end(kNames);
}

// The checked type of a type identifier (IsTypeName): type(int), type(list(dyn)), type(type), ...
Type TypeNameType(std::string_view n) {
  if (n == "int") return Type::TypeOf(Type::Int());
  if (n == "uint") return Type::TypeOf(Type::Uint());
  if (n == "double") return Type::TypeOf(Type::Double());
  if (n == "bool") return Type::TypeOf(Type::Bool());
  if (n == "string") return Type::TypeOf(Type::String());
  if (n == "bytes") return Type::TypeOf(Type::Bytes());
  if (n == "list") return Type::TypeOf(Type::List(Type::Dyn()));
  if (n == "map") return Type::TypeOf(Type::Map(Type::Dyn(), Type::Dyn()));
  if (n == "null_type") return Type::TypeOf(Type::Null());
  if (n == "optional_type") return Type::TypeOf(Type::Optional(Type::Dyn()));
  return Type::TypeOf(Type::TypeType());
}

Type ConstType(const Constant& c) {
  switch (c.kind) {
    case Constant::Kind::kNull: return Type::Null();
    case Constant::Kind::kBool: return Type::Bool();
    case Constant::Kind::kInt: return Type::Int();
    case Constant::Kind::kUint: return Type::Uint();
    case Constant::Kind::kDouble: return Type::Double();
    case Constant::Kind::kString: return Type::String();
    case Constant::Kind::kBytes: return Type::Bytes();
  }
  return Type::Dyn();
}

// cel-go's Type.TypeName(), which format()'s errors print: the type without its parameters, the
// well-known types by their protobuf names.
std::string CelGoTypeName(const Type& t) {
  switch (t.kind()) {
    case Type::Kind::kList: return "list";
    case Type::Kind::kMap: return "map";
    case Type::Kind::kOptional: return "optional_type";
    case Type::Kind::kType: return "type";
    case Type::Kind::kTimestamp: return "google.protobuf.Timestamp";
    case Type::Kind::kDuration: return "google.protobuf.Duration";
    default: return t.DebugString();
  }
}

bool IsConcreteScalar(const Type& t) {
  switch (t.kind()) {
    case Type::Kind::kBool:
    case Type::Kind::kInt:
    case Type::Kind::kUint:
    case Type::Kind::kDouble:
    case Type::Kind::kString:
    case Type::Kind::kBytes:
    case Type::Kind::kNull: return true;
    default: return false;
  }
}

class Planner {
 public:
  Planner(std::string_view source, const EnvironmentOptions& options, ProgramImpl& program)
      : source_(source), options_(options), program_(program) {}

  Planned Plan(const Expr& e) {
    Planned p = PlanKind(e);
    checked_.types[&e] = p.type;  // for the cel-go cost estimate (estimate.cc)
    return p;
  }

  // Check errors, else validator errors, else "". As cel-go's Errors.ToDisplayString: the first
  // 100 check errors reported, sorted by position (stable: one position keeps the check order),
  // then "N more errors were truncated".
  const std::string& errors() {
    if (errors_.empty()) {
      // Validator errors are sorted the same way: cel-go collects every validator's issues
      // (format() before the duration/timestamp literal validators) and sorts them by position.
      if (validator_text_.empty() && !validator_errors_.empty()) {
        std::stable_sort(
            validator_errors_.begin(), validator_errors_.end(),
            [](const CheckError& a, const CheckError& b) { return a.offset < b.offset; });
        for (const CheckError& error : validator_errors_) {
          if (!validator_text_.empty()) validator_text_ += "\n";
          validator_text_ += error.text;
        }
      }
      return validator_text_;
    }
    if (!errors_text_.empty()) return errors_text_;
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const CheckError& a, const CheckError& b) { return a.offset < b.offset; });
    for (const CheckError& error : errors_) {
      if (!errors_text_.empty()) errors_text_ += "\n";
      errors_text_ += error.text;
    }
    if (error_count_ > kMaxErrors) {
      errors_text_ +=
          "\n" + std::to_string(error_count_ - kMaxErrors) + " more errors were truncated";
    }
    return errors_text_;
  }
  const CheckedInfo& checked() const { return checked_; }
  // The first constant conversion that failed (cel-go's "program instantiation failed: ..."), or
  // "" (see EnvironmentOptions::constant_conversion_errors_at_compile_time).
  const std::string& instantiation_error() const { return instantiation_error_; }
  uint32_t max_slots() const { return max_slots_; }

 private:
  void Error(int32_t offset, std::string_view message) {
    if (++error_count_ > kMaxErrors) return;
    // Sorted by the position FormatError prints (it clamps the offset into the source).
    const int32_t clamped = std::clamp<int32_t>(offset, 0, static_cast<int32_t>(source_.size()));
    errors_.push_back({clamped, FormatError(source_, offset, message)});
  }
  // Errors of cel-go's AST validators (homogeneous literals, format(), regex literals): cel-go
  // runs them only after a successful check, so they are reported only without check errors.
  void ValidatorError(int32_t offset, std::string_view message) {
    const int32_t clamped = std::clamp<int32_t>(offset, 0, static_cast<int32_t>(source_.size()));
    validator_errors_.push_back({clamped, FormatError(source_, offset, message)});
  }
  Planned PlanKind(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kConst: return PlanConst(e);
      case Expr::Kind::kIdent: return PlanIdent(e);
      case Expr::Kind::kSelect: return PlanSelect(e);
      case Expr::Kind::kCall: return PlanCall(e);
      case Expr::Kind::kList: return PlanList(e);
      case Expr::Kind::kMap: return PlanMap(e);
      case Expr::Kind::kStruct: {
        Error(e.offset, "undeclared reference to '" + e.name + "' (in container '')");
        return Dummy(e);
      }
      case Expr::Kind::kComprehension: return PlanComprehension(e);
    }
    return Dummy(e);
  }

  // The placeholder of a subexpression that failed to check, typed as cel-go types it.
  Planned Dummy(const Expr& e, Type type = Type::Error()) {
    Planned p;
    p.type = std::move(type);
    p.node = std::make_unique<ConstNode>(e.offset, Val(), 0);
    return p;
  }

  // Stores a string in the program's constant arena.
  std::string_view Keep(std::string_view s) { return program_.constants->Str(s); }

  // Constants are shared by all evaluations: take away spare capacity so that appends never
  // write into them in place.
  static void Freeze(const Val& v) {
    if (v.kind == VK::kList && v.l != nullptr) {
      v.l->cap = v.l->used = v.n;
      for (uint32_t i = 0; i < v.n; ++i) Freeze(v.l->data[i]);
    } else if (v.kind == VK::kMap && v.m != nullptr) {
      v.m->cap = v.m->used = v.n;
      for (uint32_t i = 0; i < v.n; ++i) Freeze(v.m->vals[i]);
    } else if (v.kind == VK::kOptional && v.opt != nullptr) {
      Freeze(*v.opt);
    }
  }

  Planned MakeConst(int32_t offset, Val v, uint64_t cost, Type type) {
    Freeze(v);
    if (v.kind == VK::kList) v.sub = kConstantList;
    Planned p;
    p.type = std::move(type);
    p.node = std::make_unique<ConstNode>(offset, v, cost);
    return p;
  }

  Planned PlanConst(const Expr& e) {
    const Constant& c = e.constant;
    Val v;
    switch (c.kind) {
      case Constant::Kind::kNull: v = Val::Null(); break;
      case Constant::Kind::kBool: v = Val::Bool(c.b); break;
      case Constant::Kind::kInt: v = Val::Int(c.i); break;
      case Constant::Kind::kUint: v = Val::Uint(c.u); break;
      case Constant::Kind::kDouble: v = Val::Double(c.d); break;
      case Constant::Kind::kString: v = Val::Str(Keep(c.s)); break;
      case Constant::Kind::kBytes: v = Val::Str(Keep(c.s), VK::kBytes); break;
    }
    Planned p = MakeConst(e.offset, v, 0, ConstType(c));
    p.celgo_const = true;
    return p;
  }

  const ScopeVar* FindScope(std::string_view name) const {
    for (size_t i = scope_.size(); i-- > 0;) {
      if (scope_[i].name == name) return &scope_[i];
    }
    return nullptr;
  }
  const Type* FindDeclared(std::string_view name) const {
    for (const auto& [n, t] : options_.variables) {
      if (n == name) return &t;
    }
    return nullptr;
  }
  uint32_t VarIndex(const std::string& name) {
    for (size_t i = 0; i < program_.var_names.size(); ++i) {
      if (program_.var_names[i] == name) return static_cast<uint32_t>(i);
    }
    program_.var_names.push_back(name);
    return static_cast<uint32_t>(program_.var_names.size() - 1);
  }

  Planned PlanVariable(int32_t offset, const std::string& name, const Type& type) {
    Planned p;
    p.type = type;
    if (type.kind() == Type::Kind::kDraDevice) {
      p.node = std::make_unique<DeviceVarNode>(offset);
      p.dra = Planned::Dra::kDevice;
      return p;
    }
    p.node = std::make_unique<VarNode>(offset, VarIndex(name), name);
    return p;
  }

  Planned PlanIdent(const Expr& e) {
    std::string name = e.name;
    if (!name.empty() && name[0] == '.') name = name.substr(1);
    if (const ScopeVar* s = FindScope(name); s != nullptr && e.name[0] != '.') {
      Planned p;
      p.type = s->type;
      p.node = std::make_unique<SlotNode>(e.offset, s->slot);
      return p;
    }
    if (const Type* t = FindDeclared(name)) return PlanVariable(e.offset, name, *t);
    if (IsTypeName(name)) {
      Planned p = MakeConst(e.offset, Val::TypeName(Keep(name)), 0, TypeNameType(name));
      p.celgo_const = true;
      return p;
    }
    if (options_.type_check) {
      // cel-go names the reference as written, leading dot included.
      Error(e.offset, "undeclared reference to '" + e.name + "' (in container '')");
      return Dummy(e);
    }
    return PlanVariable(e.offset, name, Type::Dyn());
  }

  // Collects a.b.c into {"a", "b", "c"} if e is a chain of plain selects over an identifier.
  static bool QualifiedParts(const Expr& e, std::vector<std::string>* parts) {
    if (e.kind == Expr::Kind::kIdent) {
      parts->push_back(e.name);
      return true;
    }
    if (e.kind != Expr::Kind::kSelect || e.test_only || !QualifiedParts(*e.operand, parts)) return false;
    parts->push_back(e.name);
    return true;
  }

  // Resolves a qualified name against declared variables: returns the planned variable and the
  // number of parts it consumed, or 0 parts if the root is not a qualified variable name.
  size_t ResolveQualified(const Expr& e, Planned* out) {
    std::vector<std::string> parts;
    if (!QualifiedParts(e, &parts) || parts.size() < 2) return 0;
    if (FindScope(parts[0]) != nullptr) return 0;
    std::string root = parts[0];
    if (!root.empty() && root[0] == '.') root = root.substr(1);
    for (size_t n = parts.size(); n >= 2; --n) {
      std::string name = root;
      for (size_t i = 1; i < n; ++i) name += "." + parts[i];
      if (const Type* t = FindDeclared(name)) {
        *out = PlanVariable(e.offset, name, *t);
        for (size_t i = n; i < parts.size(); ++i) *out = SelectOn(e.offset, std::move(*out), parts[i]);
        return parts.size();
      }
    }
    if (!options_.type_check && FindDeclared(root) == nullptr && !IsTypeName(root)) {
      // Unchecked: resolve at runtime, longest bound name first.
      std::vector<std::unique_ptr<VarNode>> candidates;
      std::vector<std::string> fields(parts.begin() + 1, parts.end());
      for (size_t n = parts.size(); n >= 1; --n) {
        std::string name = root;
        for (size_t i = 1; i < n; ++i) name += "." + parts[i];
        candidates.push_back(std::make_unique<VarNode>(e.offset, VarIndex(name), name));
      }
      out->node = std::make_unique<QualifiedVarNode>(e.offset, std::move(candidates), std::move(fields));
      out->type = Type::Dyn();
      return parts.size();
    }
    return 0;
  }

  bool IsDeviceField(std::string_view field) const {
    return field == "driver" || field == "attributes" || field == "capacity" ||
           (field == "allowMultipleAllocations" && options_.dra_allow_multiple_allocations);
  }

  // Plans `operand.field` given the planned operand.
  Planned SelectOn(int32_t offset, Planned op, const std::string& field) {
    Planned p;
    switch (op.dra) {
      case Planned::Dra::kDevice: {
        if (!IsDeviceField(field)) {
          Error(offset, "undefined field '" + field + "'");
          p.type = Type::Error();
          p.node = std::make_unique<ConstNode>(offset, Val(), 0);
          return p;
        }
        if (field == "driver") {
          p.type = Type::String();
          p.node = dynamic_cast<DeviceVarNode*>(op.node.get()) != nullptr
                       ? NodePtr(std::make_unique<DriverNode>(offset))
                       : NodePtr(std::make_unique<SelectNode>(offset, std::move(op.node), field));
          return p;
        }
        if (field == "allowMultipleAllocations") {
          p.type = Type::Bool();
        } else {
          p.dra = field == "capacity" ? Planned::Dra::kCapacity : Planned::Dra::kAttributes;
          p.type = Type::Map(Type::String(),
                             Type::Map(Type::String(), field == "capacity" ? Type::Quantity() : Type::Dyn()));
        }
        p.node = std::make_unique<SelectNode>(offset, std::move(op.node), field);
        return p;
      }
      case Planned::Dra::kAttributes:
      case Planned::Dra::kCapacity:
        return DomainOf(offset, std::move(op), Val::Str(field), nullptr);
      case Planned::Dra::kDomain:
        return AttrOf(offset, std::move(op), Val::Str(field), nullptr);
      default:
        break;
    }
    p.type = SelectFieldType(offset, op.type, field, /*optional_select=*/false);
    p.node = std::make_unique<SelectNode>(offset, std::move(op.node), field);
    return p;
  }

  // cel-go's checkSelectField: the type of `operand.field` (`operand.?field` when
  // optional_select), reporting what cel-go's checker reports. An optional operand is unwrapped
  // and the result wrapped again. Kubernetes declares Quantity, Semver, URL and NamedFormat as
  // object types its type provider cannot resolve ('unexpected failed resolution'); other types
  // without fields do not support field selection (the result is then dyn, not an error).
  Type SelectFieldType(int32_t offset, const Type& operand, const std::string& field,
                       bool optional_select) {
    const bool opt = operand.kind() == Type::Kind::kOptional;
    const Type target = opt ? operand.param0() : operand;
    Type result = Type::Error();
    switch (target.kind()) {
      case Type::Kind::kMap: result = target.param1(); break;
      case Type::Kind::kDraDevice:
        if (!IsDeviceField(field)) {
          if (options_.type_check) Error(offset, "undefined field '" + field + "'");
        } else if (field == "driver") {
          result = Type::String();
        } else if (field == "allowMultipleAllocations") {
          result = Type::Bool();
        } else {
          result = Type::Map(Type::String(), Type::Map(Type::String(), field == "capacity"
                                                                           ? Type::Quantity()
                                                                           : Type::Dyn()));
        }
        break;
      case Type::Kind::kQuantity:
      case Type::Kind::kSemver:
      case Type::Kind::kURL:
      case Type::Kind::kFormat:
        if (options_.type_check) {
          Error(offset, "unexpected failed resolution of '" + target.DebugString() + "'");
        }
        break;
      default:
        if (!target.is_dyn() && options_.type_check) {
          Error(offset, "type '" + ArgTypeName(target) + "' does not support field selection");
        }
        result = Type::Dyn();
    }
    return opt || optional_select ? Type::Optional(result) : result;
  }

  // device.attributes[domain] with a constant domain -> DomainNode.
  Planned DomainOf(int32_t offset, Planned op, Val key, NodePtr key_node) {
    Planned p;
    const bool capacity = op.dra == Planned::Dra::kCapacity;
    p.type = Type::Map(Type::String(), capacity ? Type::Quantity() : Type::Dyn());
    p.dra = Planned::Dra::kDomain;
    p.dra_capacity = capacity;
    const bool direct = key_node == nullptr || key_node->constant() != nullptr;
    if (direct && key.kind == VK::kString && IsDirectDeviceMap(*op.node)) {
      p.node = std::make_unique<DomainNode>(offset, std::string(key.str()), capacity);
      return p;
    }
    if (key_node == nullptr) {
      p.node = std::make_unique<SelectNode>(offset, std::move(op.node), std::string(key.str()));
    } else {
      p.node = std::make_unique<IndexNode>(offset, std::move(op.node), std::move(key_node), false);
    }
    return p;
  }

  Planned AttrOf(int32_t offset, Planned op, Val key, NodePtr key_node) {
    Planned p;
    p.type = op.dra_capacity ? Type::Quantity() : Type::Dyn();
    const bool direct = key_node == nullptr || key_node->constant() != nullptr;
    if (auto* dom = dynamic_cast<DomainNode*>(op.node.get()); dom != nullptr && direct &&
                                                              key.kind == VK::kString) {
      p.node = std::make_unique<AttrNode>(offset, dom->domain(), std::string(key.str()), dom->capacity());
      return p;
    }
    if (key_node == nullptr) {
      p.node = std::make_unique<SelectNode>(offset, std::move(op.node), std::string(key.str()));
    } else {
      p.node = std::make_unique<IndexNode>(offset, std::move(op.node), std::move(key_node), false);
    }
    return p;
  }

  // Whether `n` is `device.attributes` / `device.capacity` straight off the device variable.
  static bool IsDirectDeviceMap(const Node& n) {
    const auto* s = dynamic_cast<const SelectNode*>(&n);
    return s != nullptr;  // only SelectNodes over DeviceVarNode carry Dra::kAttributes/kCapacity
  }

  Planned PlanSelect(const Expr& e) {
    if (e.test_only) {
      Planned op = Plan(*e.operand);
      Planned p;
      p.type = Type::Bool();
      SelectFieldType(e.offset, op.type, e.name, /*optional_select=*/false);
      p.node = std::make_unique<HasNode>(e.offset, std::move(op.node), e.name);
      return p;
    }
    {
      std::vector<std::string> parts;
      if (QualifiedParts(e, &parts) && parts.size() == 3 && parts[0] == "google" && parts[1] == "protobuf" &&
          (parts[2] == "Timestamp" || parts[2] == "Duration") && FindScope("google") == nullptr &&
          FindDeclared("google") == nullptr) {
        const bool ts = parts[2] == "Timestamp";
        Planned p = MakeConst(
            e.offset, Val::TypeName(ts ? "google.protobuf.Timestamp" : "google.protobuf.Duration"), 0,
            Type::TypeOf(ts ? Type::Timestamp() : Type::Duration()));
        p.celgo_const = true;  // a type identifier: cel-go folds calls over it
        return p;
      }
      // The Kubernetes IP and CIDR libraries declare their types, so their names are type values
      // (the URL, Quantity, Semver and format types are not declared in the DRA environment).
      // The DRA environment declares the device's type, so `kubernetes.DRADevice` checks as a
      // type value, but cel-go's planner finds no such type to make the program with.
      parts.clear();
      if (QualifiedParts(e, &parts) && parts.size() == 2 && parts[0] == "kubernetes" &&
          parts[1] == "DRADevice" && FindScope("kubernetes") == nullptr &&
          FindDeclared("kubernetes") == nullptr && FindDeclared("device") != nullptr &&
          FindDeclared("device")->kind() == Type::Kind::kDraDevice) {
        if (instantiation_error_.empty()) {
          instantiation_error_ = "reference to undefined type: kubernetes.DRADevice";
        }
        return MakeConst(e.offset, Val::TypeName("kubernetes.DRADevice"), 0,
                         Type::TypeOf(Type::DraDevice()));
      }
      parts.clear();
      if (QualifiedParts(e, &parts) && parts.size() == 2 && parts[0] == "net" &&
          (parts[1] == "IP" || parts[1] == "CIDR") && FindScope("net") == nullptr &&
          FindDeclared("net") == nullptr &&
          (options_.libraries & (parts[1] == "IP" ? kIPLibrary : kCIDRLibrary)) != 0) {
        const bool ip = parts[1] == "IP";
        Planned p = MakeConst(e.offset, Val::TypeName(ip ? "net.IP" : "net.CIDR"), 0,
                              Type::TypeOf(ip ? Type::IP() : Type::CIDR()));
        p.celgo_const = true;  // a type identifier: cel-go folds calls over it
        return p;
      }
    }
    Planned q;
    const size_t consumed = ResolveQualified(e, &q);
    if (consumed > 0) return q;
    Planned op = Plan(*e.operand);
    if (op.dra == Planned::Dra::kNone && op.type.kind() != Type::Kind::kDraDevice) {
      return SelectOn(e.offset, std::move(op), e.name);
    }
    if (op.type.kind() == Type::Kind::kDraDevice) op.dra = Planned::Dra::kDevice;
    return SelectOn(e.offset, std::move(op), e.name);
  }

  // ---- Calls -----------------------------------------------------------------------------

  Planned PlanCall(const Expr& e) {
    const std::string& fn = e.name;
    // Namespaced global functions: strings.quote(x), lists.range(n), sets.contains(a, b), ...
    if (e.operand) {
      std::vector<std::string> parts;
      if (QualifiedParts(*e.operand, &parts) && FindScope(parts[0]) == nullptr) {
        std::string qualified;
        for (const std::string& part : parts) qualified += part + ".";
        if (!qualified.empty() && qualified[0] == '.') qualified = qualified.substr(1);
        qualified += fn;
        std::string root = parts[0];
        if (!root.empty() && root[0] == '.') root = root.substr(1);
        if (FindDeclared(root) == nullptr && FindFunction(qualified, false, options_.libraries)) {
          checked_.global_calls[&e] = qualified;
          return PlanFunction(e, qualified, /*member=*/false, nullptr);
        }
      }
    }
    // A leading dot names a global function: cel-go resolves `.f(x)` as f(x) (macros are not
    // expanded for it; the parser keeps the dot). An unknown `.f` stays undeclared as '.f'.
    if (!e.operand && fn.size() > 1 && fn[0] == '.') {
      const std::string global = fn.substr(1);
      if (FindFunction(global, false, options_.libraries) != nullptr ||
          FindFunction(global, true, options_.libraries) != nullptr) {
        checked_.global_calls[&e] = global;
        return PlanFunction(e, global, /*member=*/false, nullptr);
      }
    }
    if (fn == "_&&_" || fn == "_||_") {
      Planned a = Plan(*e.args[0]);
      Planned b = Plan(*e.args[1]);
      Planned p;
      p.type = Type::Bool();
      const bool a_ok = CheckBoolOperand(a, e.args[0]->offset);
      if (!(CheckBoolOperand(b, e.args[1]->offset) && a_ok)) p.type = Type::Error();
      p.node = std::make_unique<AndNode>(e.offset, std::move(a.node), std::move(b.node), fn == "_&&_");
      return FoldIfConst(std::move(p), e.offset);
    }
    if (fn == "_?_:_") {
      Planned c = Plan(*e.args[0]);
      Planned t = Plan(*e.args[1]);
      Planned f = Plan(*e.args[2]);
      Planned p;
      // cel-go checks the conditional as the overload _?_:_(bool, A, A) -> A: the condition must
      // be bool (or dyn), and the false branch must be assignable to what the true branch bound A
      // to. A failure names the whole call at the '?', with all three argument types.
      const bool cond_ok = c.type.kind() == Type::Kind::kBool || c.type.is_dyn();
      bool branches_ok = true;
      p.type = UnifyBranches(*e.args[1], t.type, *e.args[2], f.type, &branches_ok);
      if (options_.type_check && (!cond_ok || !branches_ok)) {
        std::vector<Planned> sig(3);
        sig[0].type = c.type;
        sig[1].type = t.type;
        sig[2].type = f.type;
        Error(e.offset,
              "found no matching overload for '_?_:_' applied to '" + ArgTypes(sig) + "'");
        p.type = Type::Error();
      }
      p.node = std::make_unique<CondNode>(e.offset, std::move(c.node), std::move(t.node), std::move(f.node));
      return FoldIfConst(std::move(p), e.offset);
    }
    if (fn == "@not_strictly_false") {
      Planned a = Plan(*e.args[0]);
      Planned p;
      p.type = Type::Bool();
      p.node = std::make_unique<NotStrictlyFalseNode>(e.offset, std::move(a.node));
      return p;
    }
    if (fn == "_[_]" || fn == "_[?_]") return PlanIndex(e, fn == "_[?_]");
    if (fn == "_?._") {
      Planned op = Plan(*e.args[0]);
      Planned p;
      p.type = SelectFieldType(e.offset, op.type, e.args[1]->constant.s, /*optional_select=*/true);
      p.node = std::make_unique<OptSelectNode>(e.offset, std::move(op.node), e.args[1]->constant.s);
      return p;
    }
    if (e.operand && (fn == "or" || fn == "orValue") && e.args.size() == 1 &&
        (options_.libraries & kOptionalsLibrary)) {
      Planned t = Plan(*e.operand);
      Planned a = Plan(*e.args[0]);
      Planned p;
      p.type = fn == "or" ? t.type : (t.type.kind() == Type::Kind::kOptional ? t.type.param0() : Type::Dyn());
      p.node = std::make_unique<OptOrNode>(e.offset, std::move(t.node), std::move(a.node), fn == "orValue");
      return p;
    }
    if ((fn == "matches" || fn == "find" || fn == "findAll") && ((e.operand && !e.args.empty()) ||
                                                                 (!e.operand && fn == "matches" && e.args.size() == 2))) {
      const Expr& pattern = e.operand ? *e.args[0] : *e.args[1];
      if (pattern.kind == Expr::Kind::kConst && pattern.constant.kind == Constant::Kind::kString &&
          (fn == "matches" || (options_.libraries & kRegexLibrary))) {
        return PlanRegex(e, pattern.constant.s, pattern.offset);
      }
    }
    const bool member = e.operand != nullptr;
    return PlanFunction(e, fn, member, e.operand.get());
  }

  // cel-go checks each operand of && and || against bool and reports a mismatch at the operand
  // ("expected type 'bool' but found 'int'"), not as an overload error. Returns false on one.
  bool CheckBoolOperand(const Planned& p, int32_t offset) {
    if (!options_.type_check) return true;
    const Type::Kind k = p.type.kind();
    if (k == Type::Kind::kBool || k == Type::Kind::kDyn) return true;
    Error(offset, "expected type 'bool' but found '" + ArgTypeName(p.type) + "'");
    return false;
  }

  Planned PlanRegex(const Expr& e, const std::string& pattern, int32_t pattern_offset) {
    std::string error;
    std::shared_ptr<const Regex> re = CompileRegex(pattern, &error);
    if (re == nullptr) {
      // Invalid literal: a compile error (Kubernetes' regex validator) or a runtime error.
      if (options_.validate_regex_literals) {
        // cel-go's regex validator reports at the literal, without the parser's reason.
        // Kubernetes compiles find/findAll patterns when it creates the program.
        if (e.name == "matches") {
          ValidatorError(pattern_offset, "invalid matches argument");
        } else if (instantiation_error_.empty()) {
          instantiation_error_ = error;
        }
        // The receiver and arguments are still checked: their check errors come first (cel-go
        // runs the validator only after a clean check).
        if (e.operand) Plan(*e.operand);
        for (const ExprPtr& a : e.args) Plan(*a);
        // cel-go's check passed: the call keeps its declared result type.
        return Dummy(e, e.name == "matches" ? Type::Bool()
                        : e.name == "find"  ? Type::String()
                                            : Type::List(Type::String()));
      }
      return PlanFunction(e, e.name, e.operand != nullptr, e.operand.get());
    }
    Planned text = Plan(e.operand ? *e.operand : *e.args[0]);
    NodePtr limit;
    if (e.operand && e.args.size() == 2) limit = Plan(*e.args[1]).node;
    Planned p;
    RegexNode::Op op = e.name == "matches" ? RegexNode::Op::kMatches
                       : e.name == "find"  ? RegexNode::Op::kFind
                                           : RegexNode::Op::kFindAll;
    p.type = op == RegexNode::Op::kMatches ? Type::Bool()
             : op == RegexNode::Op::kFind  ? Type::String()
                                           : Type::List(Type::String());
    p.node = std::make_unique<RegexNode>(e.offset, op, std::move(text.node), re, pattern.size(), std::move(limit));
    program_.keep_alive.push_back(re);
    return FoldIfConst(std::move(p), e.offset);
  }

  Planned PlanIndex(const Expr& e, bool optional) {
    Planned op = Plan(*e.args[0]);
    const Expr& key_expr = *e.args[1];
    if (!optional && (op.dra == Planned::Dra::kAttributes || op.dra == Planned::Dra::kCapacity ||
                      op.dra == Planned::Dra::kDomain)) {
      Planned k = Plan(key_expr);
      const Val* kc = k.node->constant();
      const Val key = kc ? *kc : Val();
      Planned p = op.dra == Planned::Dra::kDomain ? AttrOf(e.offset, std::move(op), key, std::move(k.node))
                                                  : DomainOf(e.offset, std::move(op), key, std::move(k.node));
      return p;
    }
    Planned k = Plan(key_expr);
    Planned p;
    // cel-go's overloads: (list(V), int) and (map(K, V), K), and the same with optional_type(...)
    // around the operand, which give optional_type(V) for _[_] too. A null operand matches the
    // optional ones (null is assignable to an opaque type), any other operand none.
    const bool optional_operand = op.type.kind() == Type::Kind::kOptional;
    const Type& t = optional_operand ? op.type.param0() : op.type;
    auto no_overload = [&] {
      Error(e.offset, std::string("found no matching overload for '") +
                          (optional ? "_[?_]" : "_[_]") + "' applied to '(" +
                          IndexOperandName(op.type) + ", " + ArgTypeName(k.type) + ")'");
    };
    Type elem = Type::Dyn();
    bool typed_optional = false;  // the result is optional_type(elem) whatever `optional` says
    if (t.kind() == Type::Kind::kList) {
      elem = t.param0();
      typed_optional = optional_operand;
      if (options_.type_check && !Assignable(Type::Int(), k.type)) no_overload();
    } else if (t.kind() == Type::Kind::kMap) {
      elem = t.param1();
      typed_optional = optional_operand;
      if (options_.type_check && !Assignable(t.param0(), k.type)) no_overload();
    } else if (options_.type_check && !t.is_dyn() &&
               (optional_operand || t.kind() != Type::Kind::kNull)) {
      no_overload();
    }
    // cel-go turns a constant key into an attribute qualifier when it plans the program; a key
    // that is not a string, int, uint, bool or double fails there.
    if (options_.go_map_keys && k.celgo_const && k.node->constant() != nullptr &&
        (t.kind() == Type::Kind::kMap || t.is_dyn()) && instantiation_error_.empty()) {
      const VK kind = k.node->constant()->kind;
      if (kind != VK::kString && kind != VK::kInt && kind != VK::kUint && kind != VK::kBool &&
          kind != VK::kDouble && kind != VK::kError) {
        instantiation_error_ = "invalid qualifier type: " + GoValueTypeName(*k.node->constant());
      }
    }
    p.type = optional || typed_optional ? Type::Optional(elem) : elem;
    p.node = std::make_unique<IndexNode>(e.offset, std::move(op.node), std::move(k.node), optional);
    return FoldIfConst(std::move(p), e.offset);
  }

  // Folds a node whose inputs are all constants by evaluating it once at compile time.
  // cel-go's OptOptimize folds exactly these type conversion functions.
  static bool IsConversion(std::string_view fn) {
    return fn == "int" || fn == "uint" || fn == "double" || fn == "string" || fn == "bytes" || fn == "bool" ||
           fn == "duration" || fn == "timestamp" || fn == "dyn" || fn == "type";
  }

  // `literal_args`: a conversion whose argument cel-go's planner sees as a constant (celgo_const).
  Planned FoldIfConst(Planned p, int32_t offset, bool literal_args = false) {
    if (!AllConst(*p.node)) return p;
    Ctx ctx(*program_.constants);
    ctx.strict_format = options_.strings_v2_format;
    ctx.nan_ordering_errors = options_.nan_ordering_errors;
    ctx.go_map_keys = options_.go_map_keys;
    ctx.go_durations = options_.go_durations;
    Val v = p.node->Eval(ctx);
    // A cel-go panic (Ctx::Panic) happens at runtime there and fails the whole evaluation: keep
    // the call.
    if (ctx.aborted()) return p;
    if (v.is_error() && literal_args && options_.constant_conversion_errors_at_compile_time) {
      const std::string_view fn = static_cast<const CallNode*>(p.node.get())->def()->name;
      if (IsConversion(fn)) {
        // Kubernetes validates duration and timestamp literals after the check (at the literal);
        // other conversions fail when cel-go plans the program (no location).
        if (literal_validator_offset_ >= 0 && (fn == "duration" || fn == "timestamp")) {
          ValidatorError(literal_validator_offset_, "invalid " + std::string(fn) + " argument");
        } else if (instantiation_error_.empty()) {
          instantiation_error_ = std::string(v.str());
        }
        return p;
      }
    }
    if (v.kind == VK::kOptional || v.kind == VK::kDevice || v.kind == VK::kDeviceMap ||
        v.kind == VK::kDomainMap) {
      return p;
    }
    // cel-go's OptOptimize folds a conversion of a planning constant into a constant, which costs
    // nothing at runtime; other constant calls are folded here only for speed and keep their cost.
    const bool celgo_folds = literal_args;
    Planned c = MakeConst(offset, v, celgo_folds ? 0 : ctx.cost, p.type);
    c.celgo_const = celgo_folds;
    return c;
  }
  static bool AllConst(const Node& n) {
    if (const auto* c = dynamic_cast<const CallNode*>(&n)) {
      // Large results are built at runtime, under the cost limit, not at compile time.
      if (c->def()->name == "lists.range") {
        const Val* arg = c->args().empty() ? nullptr : c->args()[0]->constant();
        if (arg == nullptr || arg->kind != VK::kInt || arg->i > 10000) return false;
      }
      for (const NodePtr& a : c->args()) {
        if (a->constant() == nullptr) return false;
      }
      return true;
    }
    return false;
  }

  Planned PlanFunction(const Expr& e, const std::string& name, bool member, const Expr* target) {
    std::vector<Planned> args;
    // cel-go exempts every literal below a call named format (its receiver included) from
    // HomogeneousAggregateLiterals.
    if (name == "format") ++format_depth_;
    if (member && target) args.push_back(Plan(*target));
    // The list literal argument of format() is exempt from HomogeneousAggregateLiterals, and its
    // element types are kept for the compile-time format check.
    const bool format_call = name == "format" && member && e.args.size() == 1;
    if (format_call) exempt_literal_ = e.args[0].get();
    for (const ExprPtr& a : e.args) args.push_back(Plan(*a));
    // ext.Lists' sort() has one overload per element type, int's first: cel-go's resolution binds
    // the free element type of an empty list literal to int, so `[].sort()` is list(int) (and
    // costs as a sort of ints).
    Type::Kind free_kind;
    if (name == "sort" && member && target != nullptr && e.args.empty() && options_.type_check &&
        HasFreeParams(*target, &free_kind) && free_kind == Type::Kind::kList) {
      args[0].type = Type::List(Type::Int());
    }
    if (format_call && target != nullptr) CheckFormat(e, *target, *e.args[0]);
    exempt_literal_ = nullptr;
    if (name == "format") --format_depth_;
    const FunctionDef* def = FindFunction(name, member, options_.libraries);
    if (def == nullptr) {
      if (options_.type_check) {
        // A declared function called in the other style (global vs member) has no matching
        // overload in cel-go, e.g. getHost(url("/a")); only unknown names are undeclared.
        if (FindFunction(name, !member, options_.libraries) != nullptr) {
          Error(e.offset, "found no matching overload for '" + name + "' applied to '" +
                              ArgTypes(args, member) + "'");
        } else {
          Error(e.offset, "undeclared reference to '" + name + "' (in container '')");
        }
        return Dummy(e);
      }
      std::vector<NodePtr> nodes;
      for (Planned& a : args) nodes.push_back(std::move(a.node));
      Planned p;
      p.node = std::make_unique<UnknownCallNode>(e.offset, name, std::move(nodes));
      return p;
    }
    if (args.size() < def->min_args || args.size() > def->max_args) {
      if (options_.type_check) {
        Error(e.offset, "found no matching overload for '" + name + "' applied to '" + ArgTypes(args, member) + "'");
        return Dummy(e);
      }
      std::vector<NodePtr> nodes;
      for (Planned& a : args) nodes.push_back(std::move(a.node));
      Planned p;
      p.node = std::make_unique<UnknownCallNode>(e.offset, name, std::move(nodes));
      return p;
    }
    Type::Kind resolved = Type::Kind::kDyn;
    if (!CheckOverload(e, name, args, &resolved)) return Dummy(e);
    Planned p;
    p.type = ResultType(*def, args);
    if (resolved != Type::Kind::kDyn && resolved != Type::Kind::kList && resolved != Type::Kind::kMap) {
      FunctionDef synthetic = *def;
      synthetic.result = resolved;
      p.type = ResultType(synthetic, args);
    }
    CallShape shape = ShapeOf(name, args);
    if (name == "@in" && args.size() == 2 && args[1].celgo_const && args[1].node->constant() != nullptr &&
        args[1].node->constant()->kind == VK::kList) {
      const Val& list = *args[1].node->constant();
      shape.set_lookup = true;
      for (uint32_t i = 0; i < list.n; ++i) {
        const VK k = list.l->data[i].kind;
        shape.set_lookup = shape.set_lookup && (k == VK::kInt || k == VK::kUint || k == VK::kDouble ||
                                                k == VK::kString || k == VK::kBool);
      }
      if (shape.set_lookup && list.n == 0) {
        // cel-go plans `x in []` as the constant false: x is never evaluated.
        Planned f = MakeConst(e.offset, Val::Bool(false), 0, Type::Bool());
        f.celgo_const = true;
        return f;
      }
    }
    bool literal_args = target == nullptr && IsConversion(name);
    for (const Planned& a : args) literal_args = literal_args && a.celgo_const;
    std::vector<NodePtr> nodes;
    for (Planned& a : args) nodes.push_back(std::move(a.node));
    p.node = std::make_unique<CallNode>(e.offset, def, std::move(nodes), shape);
    // cel-go's duration/timestamp literal validators look at a literal argument (a string, or the
    // Unix seconds of timestamp(int)).
    literal_validator_offset_ =
        e.args.size() == 1 && e.args[0]->kind == Expr::Kind::kConst ? e.args[0]->offset : -1;
    Planned folded = FoldIfConst(std::move(p), e.offset, literal_args);
    literal_validator_offset_ = -1;
    return folded;
  }

  // How cel-go plans this call (see CallShape): the number of overloads its checker keeps for the
  // argument types, and the kind of binding.
  static CallShape ShapeOf(std::string_view name, const std::vector<Planned>& args) {
    CallShape shape;
    if (name == "_==_" || name == "_!=_") return shape;  // evalEq / evalNe, always "equals"
    size_t overloads = 1;
    auto concrete_elems = [](const Type& t) {
      if (t.kind() != Type::Kind::kList || t.param0().is_dyn()) return false;
      switch (t.param0().kind()) {
        case Type::Kind::kInt:
        case Type::Kind::kUint:
        case Type::Kind::kDouble:
        case Type::Kind::kBool:
        case Type::Kind::kString:
        case Type::Kind::kBytes:
        case Type::Kind::kTimestamp:
        case Type::Kind::kDuration: return true;
        default: return false;
      }
    };
    if (name == "sort" || name == "isSorted" || name == "sum" || name == "min" || name == "max") {
      // One overload per element type.
      overloads = !args.empty() && concrete_elems(args[0].type) ? 1 : 2;
    } else if (name == "@sortByAssociatedKeys") {
      overloads = args.size() == 2 && concrete_elems(args[1].type) ? 1 : 2;
    } else if (const std::vector<Signature>* sigs = Signatures(name); sigs != nullptr) {
      overloads = 0;
      std::string_view kept;
      for (const Signature& sig : *sigs) {
        if (sig.params.size() != args.size()) continue;
        bool ok = true;
        for (size_t i = 0; i < args.size() && ok; ++i) ok = Matches(sig.params[i], args[i].type);
        if (ok) {
          ++overloads;
          kept = sig.params;
        }
      }
      if (overloads == 0) overloads = 1;
      if (overloads == 1 && (kept == "ss" || kept == "bb")) {
        if (name == "_<_" || name == "_<=_" || name == "_>_" || name == "_>=_") {
          shape.text = CallShape::Text::kCompare;
        } else if (name == "_+_") {
          shape.text = CallShape::Text::kConcat;
        }
      }
    }
    shape.resolved = overloads == 1;
    // The standard library binds its operators, size() and matches() to one function for all
    // overloads (a singleton binding), so they stay unary/binary calls even when ambiguous.
    static constexpr std::string_view kSingletons[] = {"_+_", "_-_", "_*_", "_/_", "_%_", "-_",
                                                       "_<_", "_<=_", "_>_", "_>=_", "@in",
                                                       "size", "type", "dyn", "matches",
                                                       // ext.Lists' singleton bindings
                                                       "sort", "@sortByAssociatedKeys"};
    const bool singleton = std::find(std::begin(kSingletons), std::end(kSingletons), name) !=
                           std::end(kSingletons);
    shape.varargs = args.size() >= 3 || (!shape.resolved && !singleton) || name == "format" ||
                    name == "slice";
    return shape;
  }

  // The signature in cel-go's "found no matching overload" error: "(int, string)", or
  // "target.(args)" for a member call; the null type is spelled "null" there.
  static std::string ArgTypeName(const Type& t) {
    switch (t.kind()) {
      case Type::Kind::kNull: return "null";
      case Type::Kind::kList: return "list(" + ArgTypeName(t.param0()) + ")";
      case Type::Kind::kOptional: return "optional_type(" + ArgTypeName(t.param0()) + ")";
      case Type::Kind::kMap:
        return "map(" + ArgTypeName(t.param0()) + ", " + ArgTypeName(t.param1()) + ")";
      default: return t.DebugString();
    }
  }
  // An index operand as cel-go's overload error spells it (a map's null key or value is "null").
  static std::string IndexOperandName(const Type& t) {
    if (t.kind() == Type::Kind::kOptional) {
      return "optional_type(" + IndexOperandName(t.param0()) + ")";
    }
    if (t.kind() != Type::Kind::kMap) return ArgTypeName(t);
    return "map(" + ArgTypeName(t.param0()) + ", " + ArgTypeName(t.param1()) + ")";
  }
  static std::string ArgTypes(const std::vector<Planned>& args, bool member = false) {
    auto name = [](const Type& t) { return ArgTypeName(t); };
    std::string s;
    size_t first = 0;
    if (member && !args.empty()) {
      s = name(args[0].type) + ".";
      first = 1;
    }
    s += "(";
    for (size_t i = first; i < args.size(); ++i) {
      if (i > first) s += ", ";
      s += name(args[i].type);
    }
    return s + ")";
  }

  // Overload resolution as cel-go's checker does it: an overload survives when every argument
  // type is assignable to its parameter (dyn matches anything); no survivor is a compile error.
  // Returns false (after reporting) when no overload survives; `result` receives the survivors'
  // common result kind, or kDyn.
  bool CheckOverload(const Expr& e, const std::string& name, const std::vector<Planned>& args,
                     Type::Kind* result) {
    const bool member = e.operand != nullptr && checked_.global_calls.count(&e) == 0;
    *result = Type::Kind::kDyn;
    if (!options_.type_check) return true;
    if (name == "_==_" || name == "_!=_") {
      if (args.size() == 2 && !Assignable(args[0].type, args[1].type)) {
        Error(e.offset, "found no matching overload for '" + name + "' applied to '" + ArgTypes(args, member) + "'");
        return false;
      }
      *result = Type::Kind::kBool;
      return true;
    }
    // `in` is (A, list(A)) and (A, map(A, B)) in cel-go: the element or key type must agree.
    if (name == "@in" && args.size() == 2 &&
        (args[1].type.kind() == Type::Kind::kList || args[1].type.kind() == Type::Kind::kMap) &&
        !Assignable(args[1].type.param0(), args[0].type)) {
      Error(e.offset, "found no matching overload for '" + name + "' applied to '" +
                          ArgTypes(args, member) + "'");
      return false;
    }
    // ext.Sets: (list(T), list(T)), the element types must agree.
    if ((name == "sets.contains" || name == "sets.equivalent" || name == "sets.intersects") &&
        args.size() == 2 && args[0].type.kind() == Type::Kind::kList &&
        args[1].type.kind() == Type::Kind::kList &&
        !Assignable(args[0].type.param0(), args[1].type.param0())) {
      Error(e.offset, "found no matching overload for '" + name + "' applied to '" +
                          ArgTypes(args, member) + "'");
      return false;
    }
    // ext.Lists' flatten() is list(list(T)) -> list(T): a list of anything but lists (or dyn)
    // has no overload (flatten(depth) takes list(dyn) and accepts any list).
    if (name == "flatten" && args.size() == 1 && args[0].type.kind() == Type::Kind::kList &&
        !Assignable(Type::List(Type::Dyn()), args[0].type.param0())) {
      Error(e.offset, "found no matching overload for '" + name + "' applied to '" +
                          ArgTypes(args, member) + "'");
      return false;
    }
    // ext.Lists' sort() has one overload per comparable element type (and sortBy's
    // @sortByAssociatedKeys one per key type): int, uint, double, string, bytes, bool, timestamp,
    // duration (null passes as a timestamp or duration).
    if ((name == "sort" && args.size() == 1) ||
        (name == "@sortByAssociatedKeys" && args.size() == 2)) {
      const Type& keys = args.back().type;
      if (keys.kind() == Type::Kind::kList) {
        switch (keys.param0().kind()) {
          case Type::Kind::kDyn:
          case Type::Kind::kNull:
          case Type::Kind::kInt:
          case Type::Kind::kUint:
          case Type::Kind::kDouble:
          case Type::Kind::kString:
          case Type::Kind::kBytes:
          case Type::Kind::kBool:
          case Type::Kind::kTimestamp:
          case Type::Kind::kDuration: break;
          default:
            Error(e.offset, "found no matching overload for '" + name + "' applied to '" +
                                ArgTypes(args, member) + "'");
            return false;
        }
      }
    }
    const std::vector<Signature>* sigs = Signatures(name);
    if (sigs == nullptr) return true;
    bool any = false;
    bool first = true;
    for (const Signature& sig : *sigs) {
      if (sig.params.size() != args.size()) continue;
      bool ok = true;
      for (size_t i = 0; i < args.size() && ok; ++i) ok = Matches(sig.params[i], args[i].type);
      if (!ok) continue;
      any = true;
      if (first) {
        *result = sig.result;
        first = false;
      } else if (*result != sig.result) {
        *result = Type::Kind::kDyn;
      }
    }
    if (!any) {
      Error(e.offset, "found no matching overload for '" + name + "' applied to '" + ArgTypes(args, member) + "'");
      return false;
    }
    return true;
  }

  struct Signature {
    std::string_view params;  // one letter per parameter, the receiver first
    Type::Kind result;
  };

  // i int, u uint, d double, s string, b bytes, B bool, n null, L list, M map, Q Quantity,
  // S Semver, T type, O optional, Z timestamp, D duration, P IP, C CIDR, F format, U URL,
  // W list(string), V list(optional(T)), * anything.
  static bool Matches(char p, const Type& t) {
    if (t.is_dyn() || p == '*') return true;
    switch (p) {
      case 'i': return t.kind() == Type::Kind::kInt;
      case 'u': return t.kind() == Type::Kind::kUint;
      case 'd': return t.kind() == Type::Kind::kDouble;
      case 's': return t.kind() == Type::Kind::kString;
      case 'b': return t.kind() == Type::Kind::kBytes;
      case 'B': return t.kind() == Type::Kind::kBool;
      case 'n': return t.kind() == Type::Kind::kNull;
      case 'L': return t.kind() == Type::Kind::kList;
      case 'M': return t.kind() == Type::Kind::kMap;
      case 'Q': return t.kind() == Type::Kind::kQuantity;
      case 'S': return t.kind() == Type::Kind::kSemver;
      case 'T': return t.kind() == Type::Kind::kType;
      case 'O': return t.kind() == Type::Kind::kOptional;
      case 'Z': return t.kind() == Type::Kind::kTimestamp;
      case 'D': return t.kind() == Type::Kind::kDuration;
      case 'P': return t.kind() == Type::Kind::kIP;
      case 'C': return t.kind() == Type::Kind::kCIDR;
      case 'F': return t.kind() == Type::Kind::kFormat;
      case 'U': return t.kind() == Type::Kind::kURL;
      case 'W': return t.kind() == Type::Kind::kList && (t.param0().is_dyn() ||
                                                        t.param0().kind() == Type::Kind::kString);
      case 'V': return t.kind() == Type::Kind::kList && (t.param0().is_dyn() ||
                                                        t.param0().kind() == Type::Kind::kOptional);
      default: return false;
    }
  }

  // Type assignability for (A, A) overloads such as _==_.
  // cel-go's legacy null rule: null is assignable to (and from) opaque and object types and the
  // well-known timestamp and duration (so `semver("1.0.0") == null` checks).
  static bool LegacyNullable(const Type& t) {
    switch (t.kind()) {
      case Type::Kind::kQuantity:
      case Type::Kind::kSemver:
      case Type::Kind::kIP:
      case Type::Kind::kCIDR:
      case Type::Kind::kFormat:
      case Type::Kind::kURL:
      case Type::Kind::kDraDevice:
      case Type::Kind::kTimestamp:
      case Type::Kind::kDuration:
      case Type::Kind::kOptional: return true;
      default: return false;
    }
  }
  static bool Assignable(const Type& a, const Type& b) {
    if (a.is_dyn() || b.is_dyn()) return true;
    if ((a.kind() == Type::Kind::kNull && LegacyNullable(b)) ||
        (b.kind() == Type::Kind::kNull && LegacyNullable(a))) {
      return true;
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
      case Type::Kind::kList:
      case Type::Kind::kOptional: return Assignable(a.param0(), b.param0());
      case Type::Kind::kMap: return Assignable(a.param0(), b.param0()) && Assignable(a.param1(), b.param1());
      default: return true;
    }
  }

  static const std::vector<Signature>* Signatures(std::string_view name) {
    using TK = Type::Kind;
    static const auto* table = new std::unordered_map<std::string_view, std::vector<Signature>>{
        {"_+_", {{"ii", TK::kInt}, {"uu", TK::kUint}, {"dd", TK::kDouble}, {"ss", TK::kString},
                 {"bb", TK::kBytes}, {"LL", TK::kList}, {"ZD", TK::kTimestamp}, {"DZ", TK::kTimestamp},
                 {"DD", TK::kDuration}}},
        {"_-_", {{"ii", TK::kInt}, {"uu", TK::kUint}, {"dd", TK::kDouble}, {"ZD", TK::kTimestamp},
                 {"ZZ", TK::kDuration}, {"DD", TK::kDuration}}},
        {"_*_", {{"ii", TK::kInt}, {"uu", TK::kUint}, {"dd", TK::kDouble}}},
        {"_/_", {{"ii", TK::kInt}, {"uu", TK::kUint}, {"dd", TK::kDouble}}},
        {"_%_", {{"ii", TK::kInt}, {"uu", TK::kUint}}},
        {"-_", {{"i", TK::kInt}, {"d", TK::kDouble}}},  // no duration negation in cel-go
        {"!_", {{"B", TK::kBool}}},
        {"_<_", kOrder()}, {"_<=_", kOrder()}, {"_>_", kOrder()}, {"_>=_", kOrder()},
        {"@in", {{"*L", TK::kBool}, {"*M", TK::kBool}}},
        {"size", {{"s", TK::kInt}, {"b", TK::kInt}, {"L", TK::kInt}, {"M", TK::kInt}}},
        {"contains", {{"ss", TK::kBool}}},
        {"startsWith", {{"ss", TK::kBool}}},
        {"endsWith", {{"ss", TK::kBool}}},
        {"matches", {{"ss", TK::kBool}}},
        {"int", {{"i", TK::kInt}, {"u", TK::kInt}, {"d", TK::kInt}, {"s", TK::kInt}, {"Z", TK::kInt},
                 {"D", TK::kInt}}},
        {"timestamp", {{"s", TK::kTimestamp}, {"i", TK::kTimestamp}, {"Z", TK::kTimestamp}}},
        {"duration", {{"s", TK::kDuration}, {"D", TK::kDuration}}},
        {"uint", {{"i", TK::kUint}, {"u", TK::kUint}, {"d", TK::kUint}, {"s", TK::kUint}}},
        {"double", {{"i", TK::kDouble}, {"u", TK::kDouble}, {"d", TK::kDouble}, {"s", TK::kDouble}}},
        {"string", {{"i", TK::kString}, {"u", TK::kString}, {"d", TK::kString}, {"s", TK::kString},
                    {"b", TK::kString}, {"B", TK::kString}, {"Z", TK::kString},
                    {"D", TK::kString}, {"P", TK::kString}, {"C", TK::kString}}},
        {"bytes", {{"s", TK::kBytes}, {"b", TK::kBytes}}},
        {"bool", {{"B", TK::kBool}, {"s", TK::kBool}}},
        {"charAt", {{"si", TK::kString}}},
        {"indexOf", {{"ss", TK::kInt}, {"ssi", TK::kInt}, {"L*", TK::kInt}}},
        {"lastIndexOf", {{"ss", TK::kInt}, {"ssi", TK::kInt}, {"L*", TK::kInt}}},
        {"lowerAscii", {{"s", TK::kString}}},
        {"upperAscii", {{"s", TK::kString}}},
        {"replace", {{"sss", TK::kString}, {"sssi", TK::kString}}},
        {"split", {{"ss", TK::kList}, {"ssi", TK::kList}}},
        {"substring", {{"si", TK::kString}, {"sii", TK::kString}}},
        {"trim", {{"s", TK::kString}}},
        {"join", {{"W", TK::kString}, {"Ws", TK::kString}}},
        {"format", {{"sL", TK::kString}}},
        {"strings.quote", {{"s", TK::kString}}},
        {"slice", {{"Lii", TK::kList}}},
        {"flatten", {{"L", TK::kList}, {"Li", TK::kList}}},
        {"distinct", {{"L", TK::kList}}},
        {"lists.range", {{"i", TK::kList}}},
        {"reverse", {{"L", TK::kList}}},
        {"sort", {{"L", TK::kList}}},
        {"sets.contains", {{"LL", TK::kBool}}},
        {"sets.equivalent", {{"LL", TK::kBool}}},
        {"sets.intersects", {{"LL", TK::kBool}}},
        {"isSorted", {{"L", TK::kBool}}},
        {"sum", {{"L", TK::kDyn}}},
        {"min", {{"L", TK::kDyn}}},
        {"max", {{"L", TK::kDyn}}},
        {"find", {{"ss", TK::kString}}},
        {"findAll", {{"ss", TK::kList}, {"ssi", TK::kList}}},
        {"quantity", {{"s", TK::kQuantity}}},
        {"isQuantity", {{"s", TK::kBool}}},
        {"sign", {{"Q", TK::kInt}}},
        {"isGreaterThan", {{"QQ", TK::kBool}, {"SS", TK::kBool}}},
        {"isLessThan", {{"QQ", TK::kBool}, {"SS", TK::kBool}}},
        {"compareTo", {{"QQ", TK::kInt}, {"SS", TK::kInt}}},
        {"asInteger", {{"Q", TK::kInt}}},
        {"isInteger", {{"Q", TK::kBool}}},
        {"asApproximateFloat", {{"Q", TK::kDouble}}},
        {"add", {{"QQ", TK::kQuantity}, {"Qi", TK::kQuantity}}},
        {"sub", {{"QQ", TK::kQuantity}, {"Qi", TK::kQuantity}}},
        {"semver", {{"s", TK::kSemver}, {"sB", TK::kSemver}}},
        {"isSemver", {{"s", TK::kBool}, {"sB", TK::kBool}}},
        {"major", {{"S", TK::kInt}}},
        {"minor", {{"S", TK::kInt}}},
        {"patch", {{"S", TK::kInt}}},
        {"ip", {{"s", TK::kIP}, {"C", TK::kIP}}},
        {"cidr", {{"s", TK::kCIDR}}},
        {"isCIDR", {{"s", TK::kBool}}},
        {"containsIP", {{"Cs", TK::kBool}, {"CP", TK::kBool}}},
        {"containsCIDR", {{"Cs", TK::kBool}, {"CC", TK::kBool}}},
        {"masked", {{"C", TK::kCIDR}}},
        {"format.named", {{"s", TK::kOptional}}},
        {"validate", {{"Fs", TK::kOptional}}},
        {"prefixLength", {{"C", TK::kInt}}},
        {"isIP", {{"s", TK::kBool}}},
        {"url", {{"s", TK::kURL}}},
        {"isURL", {{"s", TK::kBool}}},
        {"getScheme", {{"U", TK::kString}}},
        {"getHost", {{"U", TK::kString}}},
        {"getHostname", {{"U", TK::kString}}},
        {"getPort", {{"U", TK::kString}}},
        {"getEscapedPath", {{"U", TK::kString}}},
        {"getQuery", {{"U", TK::kMap}}},
        {"ip.isCanonical", {{"s", TK::kBool}}},
        {"family", {{"P", TK::kInt}}},
        {"isUnspecified", {{"P", TK::kBool}}},
        {"isLoopback", {{"P", TK::kBool}}},
        {"isLinkLocalMulticast", {{"P", TK::kBool}}},
        {"isLinkLocalUnicast", {{"P", TK::kBool}}},
        {"isGlobalUnicast", {{"P", TK::kBool}}},
        {"getFullYear", {{"Z", TK::kInt}, {"Zs", TK::kInt}}},
        {"getMonth", {{"Z", TK::kInt}, {"Zs", TK::kInt}}},
        {"getDate", {{"Z", TK::kInt}, {"Zs", TK::kInt}}},
        {"getDayOfMonth", {{"Z", TK::kInt}, {"Zs", TK::kInt}}},
        {"getDayOfWeek", {{"Z", TK::kInt}, {"Zs", TK::kInt}}},
        {"getDayOfYear", {{"Z", TK::kInt}, {"Zs", TK::kInt}}},
        {"getHours", {{"Z", TK::kInt}, {"Zs", TK::kInt}, {"D", TK::kInt}}},
        {"getMinutes", {{"Z", TK::kInt}, {"Zs", TK::kInt}, {"D", TK::kInt}}},
        {"getSeconds", {{"Z", TK::kInt}, {"Zs", TK::kInt}, {"D", TK::kInt}}},
        {"getMilliseconds", {{"Z", TK::kInt}, {"Zs", TK::kInt}, {"D", TK::kInt}}},
        {"hasValue", {{"O", TK::kBool}}},
        {"value", {{"O", TK::kDyn}}},
        {"first", {{"L", TK::kDyn}}},
        {"last", {{"L", TK::kDyn}}},
        {"optional.unwrap", {{"V", TK::kDyn}}},
        {"unwrapOpt", {{"V", TK::kDyn}}},
    };
    auto it = table->find(name);
    return it == table->end() ? nullptr : &it->second;
  }

  static std::vector<Signature> kOrder() {
    using TK = Type::Kind;
    return {{"ii", TK::kBool}, {"uu", TK::kBool}, {"dd", TK::kBool}, {"ss", TK::kBool}, {"bb", TK::kBool},
            {"BB", TK::kBool}, {"iu", TK::kBool}, {"id", TK::kBool}, {"ui", TK::kBool}, {"ud", TK::kBool},
            {"di", TK::kBool}, {"du", TK::kBool}, {"ZZ", TK::kBool}, {"DD", TK::kBool}};
  }

  Type ResultType(const FunctionDef& def, const std::vector<Planned>& args) {
    // Element types cel-go's checker knows (they decide overload resolution, hence costs).
    if (def.name == "split" || def.name == "findAll") return Type::List(Type::String());
    if (def.name == "lists.range") return Type::List(Type::Int());
    if (def.name == "format.named") return Type::Optional(Type::Format());
    if (def.name == "validate") return Type::Optional(Type::List(Type::String()));
    if (def.name == "getQuery") return Type::Map(Type::String(), Type::List(Type::String()));
    if (def.name == "type" && args.size() == 1) return Type::TypeOf(args[0].type);
    if (def.result != Type::Kind::kDyn) {
      switch (def.result) {
        case Type::Kind::kBool: return Type::Bool();
        case Type::Kind::kInt: return Type::Int();
        case Type::Kind::kUint: return Type::Uint();
        case Type::Kind::kDouble: return Type::Double();
        case Type::Kind::kString: return Type::String();
        case Type::Kind::kBytes: return Type::Bytes();
        case Type::Kind::kType: return Type::TypeType();
        case Type::Kind::kQuantity: return Type::Quantity();
        case Type::Kind::kTimestamp: return Type::Timestamp();
        case Type::Kind::kDuration: return Type::Duration();
        case Type::Kind::kSemver: return Type::Semver();
        case Type::Kind::kIP: return Type::IP();
        case Type::Kind::kCIDR: return Type::CIDR();
        case Type::Kind::kFormat: return Type::Format();
        case Type::Kind::kURL: return Type::URL();
        case Type::Kind::kList: return Type::List(Type::Dyn());
        case Type::Kind::kMap: return Type::Map(Type::Dyn(), Type::Dyn());
        default: return Type::Dyn();
      }
    }
    const std::string_view n = def.name;
    if (args.empty()) return Type::Dyn();
    const Type& a = args[0].type;
    if ((n == "_+_" || n == "_-_" || n == "_*_" || n == "_/_" || n == "_%_") && args.size() == 2) {
      if (a == args[1].type) return a.kind() == Type::Kind::kList ? a : a;
      if (a.kind() == Type::Kind::kList && args[1].type.kind() == Type::Kind::kList) return Type::List(Type::Dyn());
      return Type::Dyn();
    }
    if (n == "-_") return a;
    if (n == "dyn") return Type::Dyn();
    if (n == "optional.of" || n == "optional.ofNonZeroValue") return Type::Optional(a);
    if (n == "optional.none") return Type::Optional(Type::Dyn());
    if (n == "value" && a.kind() == Type::Kind::kOptional) return a.param0();
    if (n == "first" || n == "last") {
      return Type::Optional(a.kind() == Type::Kind::kList ? a.param0() : Type::Dyn());
    }
    // list(optional(T)) -> list(T); a list(dyn) or dyn receiver binds T to dyn.
    if (n == "optional.unwrap" || n == "unwrapOpt") {
      return Type::List(a.kind() == Type::Kind::kList && a.param0().kind() == Type::Kind::kOptional
                            ? a.param0().param0()
                            : Type::Dyn());
    }
    if ((n == "min" || n == "max" || n == "sum") && a.kind() == Type::Kind::kList) return a.param0();
    // sort() has one overload per comparable element type (list(int) -> list(int), ...): a
    // list(dyn) matches them all, and cel-go types a call whose candidates differ in result as
    // dyn. The others are parametric (list(T) -> list(T)).
    if (n == "sort" && a.kind() == Type::Kind::kList && a.param0().is_dyn()) return Type::Dyn();
    if ((n == "slice" || n == "distinct" || n == "reverse" || n == "sort" ||
         n == "@sortByAssociatedKeys") && a.kind() == Type::Kind::kList) {
      return a;
    }
    // One overload each, list(T) -> list(T): a dyn receiver gives list(dyn) (so a selector ending
    // in .distinct() is "must evaluate to bool", not a dyn result).
    if ((n == "slice" || n == "distinct" || n == "reverse") && a.is_dyn()) {
      return Type::List(Type::Dyn());
    }
    if (n == "cel.@mapInsert") return a.kind() == Type::Kind::kMap ? a : Type::Map(Type::Dyn(), Type::Dyn());
    return Type::Dyn();
  }

  // ---- Literals --------------------------------------------------------------------------

  // The type used for homogeneity checks: optional entries unwrap.
  // cel-go's homogeneousAggregateLiteralValidator compares checked types exactly: dyn is a type
  // like any other at the top level ([1, attr] mixes int and dyn). Our light checker does not
  // unify type parameters, so a dyn parameter (e.g. of an empty nested literal) matches anything.
  static bool SameLiteralType(const Type& a, const Type& b) {
    if (a.kind() != b.kind()) return false;
    auto param = [](const Type& x, const Type& y) { return x.is_dyn() || y.is_dyn() || SameLiteralType(x, y); };
    switch (a.kind()) {
      case Type::Kind::kList:
      case Type::Kind::kOptional:
      case Type::Kind::kType: return param(a.param0(), b.param0());
      case Type::Kind::kMap: return param(a.param0(), b.param0()) && param(a.param1(), b.param1());
      default: return true;
    }
  }

  // `optional.none()` as written: cel-go types it optional_type(T) with a free T, which any
  // element type satisfies, so an optional entry of it does not take part in the literal's type.
  // A literal whose type has a free type parameter in cel-go: `[]` is list(T), `{}` map(K, V),
  // optional.none() optional_type(T). Unification binds the parameter to the other side's.
  // Returns false for other expressions; *kind is the literal's type kind.
  static bool HasFreeParams(const Expr& x, Type::Kind* kind) {
    if (x.kind == Expr::Kind::kList || x.kind == Expr::Kind::kMap) {
      *kind = x.kind == Expr::Kind::kList ? Type::Kind::kList : Type::Kind::kMap;
      return x.args.empty();
    }
    *kind = Type::Kind::kOptional;
    return IsOptionalNone(x);
  }
  // cel-go's isEqualOrLessSpecific (checker/types.go): whether `a` is dyn or no more specific
  // than `b`, which decides the type a unified type parameter keeps.
  static bool EqualOrLessSpecific(const Type& a, const Type& b) {
    // The error type is not dyn here: an error joined with int is int.
    if (a.is_dyn() && !a.is_error()) return true;
    if ((b.is_dyn() && !b.is_error()) || a.kind() != b.kind()) return false;
    switch (a.kind()) {
      case Type::Kind::kList:
      case Type::Kind::kOptional: return EqualOrLessSpecific(a.param0(), b.param0());
      case Type::Kind::kMap:
        return EqualOrLessSpecific(a.param0(), b.param0()) &&
               EqualOrLessSpecific(a.param1(), b.param1());
      default: return true;  // equal kinds: the same type, or two type values (kType)
    }
  }
  // The type of `c ? t : f` as cel-go binds A in _?_:_(bool, A, A): A is first the true branch's
  // type; the false branch must be assignable to it, and A becomes the more general of the two,
  // the false branch's on a tie (`c ? int : string` is type(string), `c ? null : semver(x)` null).
  // A branch whose literal type has a free parameter (`[]`, `{}`, optional.none()) takes the other
  // branch's type of the same kind. Sets *ok to false where cel-go finds no matching overload.
  static Type UnifyBranches(const Expr& te, const Type& t, const Expr& fe, const Type& f,
                            bool* ok) {
    Type::Kind kind;
    if (HasFreeParams(fe, &kind) && t.kind() == kind) return t;
    if (HasFreeParams(te, &kind) && f.kind() == kind) return f;
    // The planner types optional.none() as dyn; cel-go's optional_type(T) ends as
    // optional_type(dyn) beside a type that does not bind T.
    const Type tt = OptionalNoneType(te, t);
    const Type ft = OptionalNoneType(fe, f);
    if (!Assignable(ft, tt)) {
      *ok = false;
      return Type::Dyn();
    }
    return EqualOrLessSpecific(ft, tt) ? ft : tt;
  }
  static Type OptionalNoneType(const Expr& x, const Type& planned) {
    return IsOptionalNone(x) && planned.is_dyn() ? Type::Optional(Type::Dyn()) : planned;
  }

  static bool IsOptionalNone(const Expr& x) {
    if (x.kind != Expr::Kind::kCall || !x.args.empty()) return false;
    if (x.operand == nullptr) return x.name == "optional.none";
    return x.name == "none" && x.operand->kind == Expr::Kind::kIdent &&
           x.operand->name == "optional";
  }

  // An optional entry (`?k: v`, `[?v]`) needs an optional value: cel-go checks it as
  // optional_type(T) and reports the plain type.
  void CheckOptionalEntry(const Planned& a, int32_t offset) {
    // An error-typed value is reported too (cel-go exempts only dyn).
    if (!options_.type_check || (a.type.is_dyn() && !a.type.is_error()) ||
        a.type.kind() == Type::Kind::kOptional) {
      return;
    }
    Error(offset, "expected type '" + Type::Optional(a.type).DebugString() + "' but found '" +
                      a.type.DebugString() + "'");
  }

  // A literal `optional.none()` element is optional_type(T) with T free: it takes the first
  // optional type among the other elements (so [optional.none(), optional.of(1)] is homogeneous,
  // [optional.none(), 1] is not).
  static void ResolveNoneTypes(std::vector<std::pair<Type, int32_t>>* types,
                               const std::vector<size_t>& none_at) {
    if (none_at.empty()) return;
    for (size_t i = 0; i < types->size(); ++i) {
      if (std::find(none_at.begin(), none_at.end(), i) != none_at.end()) continue;
      if ((*types)[i].first.kind() != Type::Kind::kOptional) continue;
      for (size_t j : none_at) (*types)[j].first = (*types)[i].first;
      return;
    }
  }

  void CheckHomogeneous(const std::vector<std::pair<Type, int32_t>>& types) {
    if (!options_.homogeneous_aggregate_literals) return;
    const Type* first = nullptr;
    for (const auto& [t, offset] : types) {
      if (first == nullptr) {
        first = &t;
        continue;
      }
      if (!SameLiteralType(t, *first)) {
        ValidatorError(offset, "expected type '" + first->DebugString() + "' but found '" + t.DebugString() + "'");
        return;
      }
    }
  }

  // The first expression under `e` (itself, or inside list and map literals) whose checked type
  // %s cannot format (cel-go's stringFormatChecker.verifyString), or nullptr.
  const Expr* UnformattableForString(const Expr& e) {
    // A literal optional.none() is optional_type(T), T free (planned as dyn).
    const Type t = IsOptionalNone(e) ? Type::Optional(Type::Dyn()) : checked_.types[&e];
    switch (t.kind()) {
      case Type::Kind::kDyn:
      case Type::Kind::kList:
      case Type::Kind::kMap:
      case Type::Kind::kInt:
      case Type::Kind::kUint:
      case Type::Kind::kDouble:
      case Type::Kind::kBool:
      case Type::Kind::kString:
      case Type::Kind::kTimestamp:
      case Type::Kind::kBytes:
      case Type::Kind::kDuration:
      case Type::Kind::kType:
      case Type::Kind::kNull: break;
      default: return &e;
    }
    if (e.kind == Expr::Kind::kList || e.kind == Expr::Kind::kMap) {
      for (const ExprPtr& a : e.args) {
        if (const Expr* bad = UnformattableForString(*a)) return bad;
      }
    }
    return nullptr;
  }

  // ext.Strings' format validator: "<literal>".format([<list literal>]) is checked when compiling.
  void CheckFormat(const Expr& call, const Expr& target, const Expr& list) {
    if (!options_.type_check || target.kind != Expr::Kind::kConst ||
        target.constant.kind != Constant::Kind::kString || list.kind != Expr::Kind::kList) {
      return;
    }
    const std::string& f = target.constant.s;
    const std::vector<Type>& types = exempt_types_;
    size_t next = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] != '%') continue;
      if (++i >= f.size()) return;  // runtime reports it
      if (f[i] == '%') continue;
      if (f[i] == '.') {
        ++i;
        while (i < f.size() && f[i] >= '0' && f[i] <= '9') ++i;
        if (i >= f.size()) return;
      }
      const char verb = f[i];
      if (next >= types.size()) {
        ValidatorError(call.offset, "index " + std::to_string(next) + " out of range");
        return;
      }
      const Type& t = types[next++];
      // cel-go reports a clause's type error at the list element it formats.
      const int32_t at = next - 1 < list.args.size() ? list.args[next - 1]->offset : call.offset;
      // An unknown verb fails to parse whatever the argument's type, a dyn one too.
      if (std::string_view("sdfexXob").find(verb) == std::string_view::npos) {
        ValidatorError(call.offset, std::string("could not parse formatting clause: "
                                                "unrecognized formatting clause \"") + verb + "\"");
        return;
      }
      if (t.is_dyn()) continue;
      const Type::Kind k = t.kind();
      const std::string given = CelGoTypeName(t);
      const bool integer = k == Type::Kind::kInt || k == Type::Kind::kUint;
      const bool strict = options_.strings_v2_format;
      // cel-go's format check stops at the first clause that fails (no "index out of range"
      // after a bad argument).
      const size_t errors_before = validator_errors_.size();
      switch (verb) {
        case 's':
          // ext.Strings version 2 checks the argument and, inside list and map literals, every
          // element, key and value.
          if (strict && next - 1 < list.args.size()) {
            if (const Expr* bad = UnformattableForString(*list.args[next - 1])) {
              ValidatorError(bad->offset,
                             "error during formatting: string clause can only be used on strings, "
                             "bools, bytes, ints, doubles, maps, lists, types, durations, and "
                             "timestamps, was given " +
                                 (IsOptionalNone(*bad) ? std::string("optional_type")
                                                       : CelGoTypeName(checked_.types[bad])));
            }
          }
          break;
        case 'd':
          if (!integer && (strict || k != Type::Kind::kDouble)) ValidatorError(at, "error during formatting: decimal clause can only be used on integers, was given " + given);
          break;
        case 'f':  // strings pass: "NaN", "Infinity" and "-Infinity" format at runtime
          if (k != Type::Kind::kDouble && k != Type::Kind::kString && (strict || !integer)) ValidatorError(at, "error during formatting: fixed-point clause can only be used on doubles, was given " + given);
          break;
        case 'e':
          if (k != Type::Kind::kDouble && k != Type::Kind::kString && (strict || !integer)) ValidatorError(at, "error during formatting: scientific clause can only be used on doubles, was given " + given);
          break;
        case 'x':
        case 'X':
          if (!integer && k != Type::Kind::kString && k != Type::Kind::kBytes) {
            ValidatorError(at, "error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given " + given);
          }
          break;
        case 'o':
          if (!integer) {
            ValidatorError(at, std::string("error during formatting: ") +
                                   (strict ? "octal clause can only be used on integers"
                                           : "only integers can be formatted as octal") +
                                   ", was given " + given);
          }
          break;
        case 'b':
          if (!integer && k != Type::Kind::kBool) ValidatorError(at, "error during formatting: only integers and bools can be formatted as binary, was given " + given);
          break;
        default:
          ValidatorError(call.offset, std::string("could not parse formatting clause: unrecognized formatting clause \"") + verb + "\"");
          return;
      }
      if (validator_errors_.size() != errors_before) return;
    }
    if (next < types.size()) {
      ValidatorError(call.offset, "too many arguments supplied to string.format (expected " + std::to_string(next) +
                             ", got " + std::to_string(types.size()) + ")");
    }
  }

  Planned PlanList(const Expr& e) {
    const bool exempt = &e == exempt_literal_;
    exempt_literal_ = nullptr;  // nested literals are checked
    std::vector<NodePtr> nodes;
    std::vector<std::pair<Type, int32_t>> types;
    Planned p;
    bool all_const = true;
    bool celgo_const = true;
    std::vector<size_t> none_at;  // elements `optional.none()` in `types`
    std::vector<bool> free;       // per `types` entry: a literal with a free type parameter
    for (size_t i = 0; i < e.args.size(); ++i) {
      Planned a = Plan(*e.args[i]);
      celgo_const = celgo_const && a.celgo_const && !e.optional_entries[i];
      Type t = a.type;
      if (e.optional_entries[i]) {
        CheckOptionalEntry(a, e.args[i]->offset);
        if (t.kind() == Type::Kind::kOptional) t = t.param0();  // else kept, as cel-go
      }
      Type::Kind free_kind;
      if (!IsOptionalNone(*e.args[i])) {
        free.push_back(!e.optional_entries[i] && HasFreeParams(*e.args[i], &free_kind));
        types.emplace_back(t, e.args[i]->offset);
      } else if (!e.optional_entries[i]) {
        none_at.push_back(types.size());
        free.push_back(true);
        types.emplace_back(Type::Optional(Type::Dyn()), e.args[i]->offset);
      }
      all_const = all_const && a.node->constant() != nullptr && !e.optional_entries[i];
      nodes.push_back(std::move(a.node));
    }
    if (exempt) {
      exempt_types_.clear();
      for (const auto& [t, o] : types) exempt_types_.push_back(t);
    } else {
      ResolveNoneTypes(&types, none_at);
      if (format_depth_ == 0) CheckHomogeneous(types);
    }
    // cel-go's joinTypes: each element joins the type so far, keeping the more general of two
    // assignable types (dyn otherwise, aggregate literals of mixed types being allowed). An
    // element with a free type parameter (`[]`, `{}`, optional.none()) binds it to the other's.
    Type elem = Type::Dyn();
    bool elem_free = false;
    for (size_t i = 0; i < types.size(); ++i) {
      const Type& t = types[i].first;
      if (i == 0) {
        elem = t;
        elem_free = free[i];
      } else if (elem_free && t.kind() == elem.kind()) {
        elem = t;
        elem_free = free[i];
      } else if (free[i] && t.kind() == elem.kind()) {
        continue;
      } else if (Assignable(elem, t)) {
        elem = EqualOrLessSpecific(elem, t) ? elem : t;
        elem_free = false;
      } else {
        elem = Type::Dyn();
        elem_free = false;
      }
    }
    p.type = Type::List(elem);
    p.node = std::make_unique<ListNode>(e.offset, std::move(nodes), e.optional_entries);
    if (all_const) {
      // A constant list is built once. cel-go folds it too when its elements are its constants
      // (no runtime cost); otherwise the list's 10 and its elements' costs are still charged.
      // The estimate keeps the literal's 10.
      Ctx ctx(*program_.constants);
      ctx.strict_format = options_.strings_v2_format;
      ctx.nan_ordering_errors = options_.nan_ordering_errors;
      ctx.go_map_keys = options_.go_map_keys;
      ctx.go_durations = options_.go_durations;
    ctx.go_durations = options_.go_durations;
      Val v = p.node->Eval(ctx);
      Planned c = MakeConst(e.offset, v, celgo_const ? 0 : ctx.cost, p.type);
      c.celgo_const = celgo_const;
      return c;
    }
    return p;
  }

  Planned PlanMap(const Expr& e) {
    exempt_literal_ = nullptr;
    std::vector<NodePtr> nodes;
    std::vector<std::pair<Type, int32_t>> ktypes, vtypes;
    Planned p;
    bool all_const = true;
    bool celgo_const = true;
    std::vector<size_t> none_at;  // values `optional.none()` in `vtypes`
    for (size_t i = 0; i < e.args.size(); ++i) {
      Planned a = Plan(*e.args[i]);
      celgo_const = celgo_const && a.celgo_const && !e.optional_entries[i / 2];
      all_const = all_const && a.node->constant() != nullptr && !e.optional_entries[i / 2];
      Type t = a.type;
      if (i % 2 == 1) {
        if (e.optional_entries[i / 2]) {
          CheckOptionalEntry(a, e.args[i]->offset);
          if (t.kind() == Type::Kind::kOptional) t = t.param0();  // else kept, as cel-go
        }
        if (!IsOptionalNone(*e.args[i])) {
          vtypes.emplace_back(t, e.args[i]->offset);
        } else if (!e.optional_entries[i / 2]) {
          none_at.push_back(vtypes.size());
          vtypes.emplace_back(Type::Optional(Type::Dyn()), e.args[i]->offset);
        }
      } else {
        // cel-go (go_map_keys) accepts any key type at check time (bytes keys panic when the
        // map is built: see below).
        const bool rejected = !options_.go_map_keys &&
                              (t.kind() == Type::Kind::kDouble || t.kind() == Type::Kind::kNull ||
                               t.kind() == Type::Kind::kBytes);
        if (options_.type_check && IsConcreteScalar(t) && rejected) {
          Error(e.args[i]->offset, "unsupported map key type: " + t.DebugString());
        }
        ktypes.emplace_back(t, e.args[i]->offset);
      }
      nodes.push_back(std::move(a.node));
    }
    if (format_depth_ == 0) CheckHomogeneous(ktypes);
    ResolveNoneTypes(&vtypes, none_at);
    if (format_depth_ == 0) CheckHomogeneous(vtypes);
    auto common = [](const std::vector<std::pair<Type, int32_t>>& ts) {
      if (ts.empty()) return Type::Dyn();
      Type t = ts[0].first;
      for (const auto& [x, o] : ts) {
        if (!(x == t)) return Type::Dyn();
      }
      return t;
    };
    p.type = Type::Map(common(ktypes), common(vtypes));
    p.node = std::make_unique<MapNode>(e.offset, std::move(nodes), e.optional_entries);
    if (all_const) {
      // Constant map literals are built once (cel-go's OptOptimize); a failure (repeated key) stays
      // a runtime error. No runtime cost; the estimate keeps the literal's 30.
      Ctx ctx(*program_.constants);
      ctx.strict_format = options_.strings_v2_format;
      ctx.nan_ordering_errors = options_.nan_ordering_errors;
      ctx.go_map_keys = options_.go_map_keys;
      ctx.go_durations = options_.go_durations;
    ctx.go_durations = options_.go_durations;
      if (const Val v = p.node->Eval(ctx); v.kind == VK::kMap) {
        Planned c = MakeConst(e.offset, v, celgo_const ? 0 : ctx.cost, p.type);
        c.celgo_const = celgo_const;
        return c;
      }
      // A bytes key panics hashing it (Ctx::Panic). cel-go builds a map of planning constants
      // while it plans the program (OptOptimize), where nothing recovers the panic: the API
      // server's validation of the object panics and the request fails without a response (seen
      // with kube-apiserver v1.37.2). devlet rejects the expression; any other map panics when
      // it is evaluated, as in Kubernetes.
      if (ctx.aborted() && celgo_const && options_.go_map_keys && instantiation_error_.empty()) {
        std::string_view panic = ctx.panic_message;
        if (panic.starts_with("internal error: ")) panic.remove_prefix(16);
        instantiation_error_ = std::string(panic) +
                               " (cel-go panics building this constant map; Kubernetes' API server "
                               "fails the request)";
      }
    }
    return p;
  }

  // ---- Comprehensions --------------------------------------------------------------------

  Planned PlanComprehension(const Expr& e) {
    Planned range = Plan(*e.iter_range);
    Planned init = Plan(*e.accu_init);
    const bool two = !e.iter_var2.empty();
    // Iteration variable types.
    Type it1 = Type::Dyn(), it2 = Type::Dyn();
    const Type& rt = range.type;
    const bool is_map = rt.kind() == Type::Kind::kMap;
    if (rt.kind() == Type::Kind::kList) {
      if (two) {
        it1 = Type::Int();
        it2 = rt.param0();
      } else {
        it1 = rt.param0();
      }
    } else if (is_map) {
      it1 = rt.param0();
      it2 = rt.param1();
    } else if (options_.type_check && rt.kind() != Type::Kind::kDyn) {
      Error(e.iter_range->offset, "expression of type '" + rt.DebugString() +
                                      "' cannot be range of a comprehension (must be list, map, or dynamic)");
    }
    const size_t scope_mark = scope_.size();
    const uint32_t slot_mark = next_slot_;
    const uint32_t accu_slot = next_slot_++;
    Type accu_type = init.type;
    scope_.push_back({e.accu_var, accu_slot, accu_type});
    const uint32_t iter_slot = next_slot_++;
    scope_.push_back({e.iter_var, iter_slot, it1});
    int32_t iter2_slot = -1;
    if (two) {
      iter2_slot = static_cast<int32_t>(next_slot_++);
      scope_.push_back({e.iter_var2, static_cast<uint32_t>(iter2_slot), it2});
    }
    max_slots_ = std::max(max_slots_, next_slot_);
    Planned cond = Plan(*e.loop_cond);
    Planned step = Plan(*e.loop_step);
    // The accumulator's type after the loop: the step's type refines an empty literal.
    if (step.type.kind() != Type::Kind::kDyn) accu_type = step.type;
    // cel-go types an empty list literal with a free type parameter that the step binds:
    // `[3, 1, 2].map(x, x)` is a list(int) there, not a list(dyn) (this decides overloads and
    // so costs of calls on the result).
    if (e.accu_init->kind == Expr::Kind::kList && e.accu_init->args.empty() &&
        accu_type.kind() == Type::Kind::kList && accu_type.param0().is_dyn()) {
      const Expr* s = e.loop_step.get();
      if (s->kind == Expr::Kind::kCall && s->name == "_?_:_" && s->args.size() == 3) {
        s = s->args[1].get();
      }
      if (s->kind == Expr::Kind::kCall && s->name == "_+_" && s->args.size() == 2 &&
          s->args[0]->kind == Expr::Kind::kIdent && s->args[0]->name == e.accu_var &&
          s->args[1]->kind == Expr::Kind::kList && s->args[1]->args.size() == 1) {
        auto it = checked_.types.find(s->args[1]->args[0].get());
        if (it != checked_.types.end()) accu_type = Type::List(it->second);
      }
    }
    // The same for an empty map literal and cel.@mapInsert (transformMap: key and value;
    // transformMapEntry: the entry map's type): `{"a": 1}.transformMap(k, v, v + 1)` is a
    // map(string, int) there.
    if (e.accu_init->kind == Expr::Kind::kMap && e.accu_init->args.empty() &&
        accu_type.kind() == Type::Kind::kMap && accu_type.param0().is_dyn() &&
        accu_type.param1().is_dyn()) {
      const Expr* s = e.loop_step.get();
      if (s->kind == Expr::Kind::kCall && s->name == "_?_:_" && s->args.size() == 3) {
        s = s->args[1].get();
      }
      if (s->kind == Expr::Kind::kCall && s->name == "cel.@mapInsert" && !s->args.empty() &&
          s->args[0]->kind == Expr::Kind::kIdent && s->args[0]->name == e.accu_var) {
        if (s->args.size() == 3) {
          auto k = checked_.types.find(s->args[1].get());
          auto v = checked_.types.find(s->args[2].get());
          if (k != checked_.types.end() && v != checked_.types.end()) {
            accu_type = Type::Map(k->second, v->second);
          }
        } else if (s->args.size() == 2) {
          auto m = checked_.types.find(s->args[1].get());
          if (m != checked_.types.end() && m->second.kind() == Type::Kind::kMap) {
            accu_type = m->second;
          }
        }
      }
    }
    scope_.resize(scope_mark + 1);
    scope_.back().type = accu_type;
    Planned result = Plan(*e.result);
    scope_.resize(scope_mark);
    next_slot_ = slot_mark;
    Planned p;
    p.type = result.type;
    p.node = std::make_unique<ComprehensionNode>(e.offset, std::move(range.node), std::move(init.node),
                                                 std::move(cond.node), std::move(step.node),
                                                 std::move(result.node), iter_slot, iter2_slot, accu_slot);
    return p;
  }

  std::string_view source_;
  const EnvironmentOptions& options_;
  ProgramImpl& program_;
  // cel-go keeps the first 100 errors reported (common/errors.go) and counts the rest.
  static constexpr size_t kMaxErrors = 100;
  struct CheckError {
    int32_t offset;
    std::string text;
  };
  std::vector<CheckError> errors_;
  size_t error_count_ = 0;
  std::string errors_text_;  // errors_ as errors() formats them
  std::vector<CheckError> validator_errors_;  // in the order reported
  std::string validator_text_;                // validator_errors_ as errors() formats them
  CheckedInfo checked_;
  std::string instantiation_error_;
  int32_t literal_validator_offset_ = -1;  // see PlanFunction
  std::vector<ScopeVar> scope_;
  const Expr* exempt_literal_ = nullptr;  // the list literal argument of format()
  int format_depth_ = 0;                   // calls named format being planned around this node
  std::vector<Type> exempt_types_;        // its element types
  uint32_t next_slot_ = 0;
  uint32_t max_slots_ = 0;
};

// Per-thread scratch arena for evaluations.
struct ThreadScratch {
  Arena arena;
  bool busy = false;
};
thread_local ThreadScratch t_scratch;

}  // namespace

ScratchArena::ScratchArena() {
  if (t_scratch.busy) {
    owned_ = std::make_unique<Arena>();
    arena_ = owned_.get();
  } else {
    t_scratch.busy = true;
    arena_ = &t_scratch.arena;
  }
}

ScratchArena::~ScratchArena() {
  if (!owned_) {
    t_scratch.arena.Reset();
    t_scratch.busy = false;
  }
}

Val ProgramImpl::Run(Ctx& ctx) const {
  const size_t nvars = var_names.size();
  ctx.vars = nvars ? ctx.arena.NewArray<Val>(nvars) : nullptr;
  ctx.var_loaded = nvars ? ctx.arena.NewArray<uint8_t>(nvars) : nullptr;
  if (nvars) std::memset(ctx.var_loaded, 0, nvars);
  ctx.slots = num_slots ? ctx.arena.NewArray<Val>(num_slots) : nullptr;
  ctx.strict_format = strict_format;
  ctx.nan_ordering_errors = nan_ordering_errors;
  ctx.go_map_keys = go_map_keys;
  ctx.go_durations = go_durations;
  Val v = root->Eval(ctx);
  switch (ctx.abort) {
    case EvalResult::Abort::kNone:
      if (require_bool && v.kind != VK::kBool && !v.is_error()) {
        // cel-go's ConvertToNative(bool): an optional converts its value (optional.of(true) is
        // a match); otherwise Kubernetes appends the conversion error.
        const Val* inner = &v;
        while (inner->kind == VK::kOptional && inner->opt != nullptr) inner = inner->opt;
        if (inner->kind == VK::kBool) return *inner;
        std::string why;
        switch (inner->kind) {
          case VK::kString: why = ": unsupported native conversion from string to 'bool'"; break;
          case VK::kList: why = ": type conversion error from list to 'bool'"; break;
          case VK::kSemver: why = ": type conversion error from 'Semver' to 'bool'"; break;
          case VK::kIP: why = ": type conversion error from 'IP' to 'bool'"; break;
          case VK::kCIDR: why = ": type conversion error from 'CIDR' to 'bool'"; break;
          case VK::kFormat: why = ": type conversion error from 'Format' to 'bool'"; break;
          case VK::kURL: why = ": type conversion error from 'URL' to 'bool'"; break;
          case VK::kDouble: why = ": type conversion error from Double to 'bool'"; break;
          case VK::kBytes: why = ": type conversion error from Bytes to 'bool'"; break;
          case VK::kUint: why = ": unsupported type conversion from 'uint' to bool"; break;
          case VK::kInt: why = ": unsupported type conversion from 'int' to bool"; break;
          case VK::kMap:
          case VK::kDevice:
          case VK::kDeviceMap:
          case VK::kDomainMap: why = ": type conversion error from map to 'bool'"; break;
          case VK::kNull: why = ": type conversion error from 'null_type' to 'bool'"; break;
          case VK::kQuantity: why = ": type conversion error from 'Quantity' to 'bool'"; break;
          case VK::kType: why = ": type conversion not supported for 'type'"; break;
          case VK::kOptional: why = ": optional.none() dereference"; break;
          case VK::kTimestamp: why = ": type conversion error from 'Timestamp' to 'bool'"; break;
          case VK::kDuration: why = ": type conversion error from 'Duration' to 'bool'"; break;
          default: break;
        }
        // The device object is a map at runtime in Kubernetes.
        const std::string type = v.kind == VK::kDevice ? "map" : std::string(TypeNameOf(v));
        return ctx.Error("CEL result of type " + type + " could not be converted to bool" + why);
      }
      return v;
    case EvalResult::Abort::kCostLimit: return ctx.Error("operation cancelled: actual cost limit exceeded");
    case EvalResult::Abort::kDeadline: return ctx.Error("operation interrupted: deadline exceeded");
    case EvalResult::Abort::kCancelled: return ctx.Error("operation interrupted: cancelled");
    case EvalResult::Abort::kInternal: return ctx.Error(ctx.panic_message);
  }
  return v;
}

// ---- Compile -----------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<const ProgramImpl>> CompileImpl(std::string_view expression,
                                                              const EnvironmentOptions& options) {
  ParseOptions popts;
  popts.enable_macros = options.enable_macros;
  popts.two_var_comprehensions = (options.libraries & kTwoVarComprehensionsLibrary) != 0;
  popts.bindings = (options.libraries & kBindingsLibrary) != 0;
  popts.optionals = (options.libraries & kOptionalsLibrary) != 0;
  popts.lists_ext = (options.libraries & kListsLibrary) != 0;
  popts.max_recursion_depth = options.max_recursion_depth;
  popts.max_expression_bytes = options.max_expression_bytes;
  ParseResult parsed = Parse(expression, popts);
  // Kubernetes' texts (DRA compile.go): parse and check errors after "compilation failed: ", the
  // result type check and program creation on their own.
  const std::string compile_prefix = options.kubernetes_messages ? "compilation failed: " : "";
  if (!parsed.errors.empty()) return devlet::InvalidArgument(compile_prefix + parsed.errors);

  auto program = std::make_shared<ProgramImpl>();
  program->expression = std::string(expression);
  Planner planner(program->expression, options, *program);
  Planned root = planner.Plan(*parsed.expr);
  if (!planner.errors().empty()) return devlet::InvalidArgument(compile_prefix + planner.errors());
  if (!options.result_types.empty() && options.type_check && !root.type.is_dyn()) {
    bool ok = false;
    for (const Type& t : options.result_types) ok = ok || t == root.type;
    if (!ok) {
      std::string want;
      for (size_t i = 0; i < options.result_types.size(); ++i) {
        if (i) want += " or ";
        want += options.result_types[i].is_dyn() ? "the unknown type" : options.result_types[i].DebugString();
      }
      if (options.kubernetes_messages) {
        return devlet::InvalidArgument("must evaluate to " + want + ", not " + root.type.DebugString());
      }
      return devlet::InvalidArgument(FormatError(program->expression, 0,
                                                 "expression must evaluate to " + want + ", not " +
                                                     root.type.DebugString()));
    }
  }
  if (!planner.instantiation_error().empty()) {
    return devlet::InvalidArgument("program instantiation failed: " + planner.instantiation_error());
  }
  program->result_type = root.type;
  program->require_bool = options.require_bool_result;
  program->strict_format = options.strings_v2_format;
  program->nan_ordering_errors = options.nan_ordering_errors;
  program->go_map_keys = options.go_map_keys;
  program->go_durations = options.go_durations;
  bool dra_sizes = false;
  for (const auto& [name, type] : options.variables) {
    dra_sizes = dra_sizes || (name == "device" && type.kind() == Type::Kind::kDraDevice);
  }
  program->cost = EstimateCost(*parsed.expr, planner.checked(), dra_sizes);
  program->root = std::move(root.node);
  program->num_slots = planner.max_slots();
  return std::shared_ptr<const ProgramImpl>(std::move(program));
}

}  // namespace devlet::cel::internal

namespace devlet::cel {

void Activation::Bind(std::string name, Value value) {
  for (auto& [n, v] : bindings_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  bindings_.emplace_back(std::move(name), std::move(value));
}

const Value* Activation::Find(std::string_view name) const {
  for (const auto& [n, v] : bindings_) {
    if (n == name) return &v;
  }
  return nullptr;
}

Environment::Environment(EnvironmentOptions options) : options_(std::move(options)) {}

absl::StatusOr<Program> Environment::Compile(std::string_view expression) const {
  DEVLET_ASSIGN_OR_RETURN(std::shared_ptr<const internal::ProgramImpl> impl,
                          internal::CompileImpl(expression, options_));
  return Program(std::move(impl));
}

EvalResult Program::Evaluate(const Activation& activation, const EvalOptions& options) const {
  // As dra::Match: a device whose attributes Kubernetes cannot convert fails every selector.
  if (activation.device() != nullptr) {
    if (absl::Status s = activation.device()->AttributeConversionError(); !s.ok()) {
      EvalResult result;
      result.value = Value::Error(devlet::Message(s));
      return result;
    }
  }
  internal::ScratchArena scratch;
  internal::Ctx ctx(scratch.arena());
  ctx.activation = &activation;
  ctx.device = activation.device();
  if (options.cost_limit) ctx.limit = options.cost_limit;
  ctx.deadline = options.deadline;
  ctx.cancelled = options.cancelled;
  const internal::Val v = impl_->Run(ctx);
  EvalResult result;
  result.value = internal::ToValue(v);
  result.cost = ctx.abort == EvalResult::Abort::kCostLimit || ctx.abort == EvalResult::Abort::kInternal
                    ? ctx.cost_at_abort
                    : ctx.cost;
  result.abort = ctx.abort;
  return result;
}

const Type& Program::result_type() const { return impl_->result_type; }
CostEstimate Program::estimated_cost() const { return impl_->cost; }
const std::string& Program::expression() const { return impl_->expression; }

}  // namespace devlet::cel
