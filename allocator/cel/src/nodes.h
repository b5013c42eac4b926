// Private: the plan nodes of the tree-walking evaluator (one class per kind of node: constants,
// variables, selection and indexing with their runtime costs, calls, literals, comprehensions).
// Built by the planner (planner.cc), run by ProgramImpl::Run (program.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "devlet/cel/dra.h"
#include "eval.h"
#include "program.h"
#include "utf8.h"

namespace devlet::cel::internal {

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

// The value of a chain once its qualifiers are applied: in optional mode, wrapped.
inline Val FinishChain(Ctx& ctx, const Chain& c) {
  return c.done || !c.opt ? c.v : ctx.Optional(c.v);
}

// One qualifier in optional mode (cel-go's QualifyIfPresent), `r` being OptSelect's or
// OptIndex's answer: an error or nothing found ends the chain; cel-go's cost observer sees the
// qualifier only when it found something.
inline void PresentStep(Ctx& ctx, Chain* c, const Val& r) {
  if (r.is_error() || r.opt == nullptr) {
    *c = {r, false, true};
    return;
  }
  ctx.AddCost(1);
  c->v = *r.opt;
}

// One qualifier in plain mode (cel-go's Qualify): observed, so charged, whatever it gives.
inline void PlainStep(Ctx& ctx, Chain* c, const Val& r) {
  ctx.AddCost(1);
  if (r.is_error()) {
    *c = {r, false, true};
  } else {
    c->v = r;
  }
}

// The chain state of a chain node's operand.
inline Chain OperandChain(Ctx& ctx, const Node& operand, bool extends) {
  return extends ? operand.Resolve(ctx) : BaseChain(operand.Eval(ctx));
}

class SelectNode final : public Node {
 public:
  SelectNode(int32_t offset, NodePtr operand, std::string field)
      : Node(offset), operand_(std::move(operand)), field_(std::move(field)),
        relative_cost_(operand_->is_attribute() ? 0 : 1),
        operand_chain_(operand_->extends_chain()) {}
  Val Eval(Ctx& ctx) const override { return FinishChain(ctx, Resolve(ctx)); }
  Chain Resolve(Ctx& ctx) const override {
    Chain c = OperandChain(ctx, *operand_, operand_chain_);
    ctx.AddCost(relative_cost_);
    if (c.done) return c;
    if (c.opt) {
      PresentStep(ctx, &c, OptSelect(ctx, c.v, field_));
    } else {
      PlainStep(ctx, &c, Select(ctx, c.v, field_));
    }
    return c;
  }
  bool extends_chain() const override { return true; }
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
  bool operand_chain_;
};

class HasNode final : public Node {
 public:
  // has() adds a test-only qualifier to its operand's chain: with Kubernetes'
  // PresenceTestHasCost(false) the attribute's own 1 is refunded, and a non-attribute operand is
  // not charged as a relative attribute. In plain mode the test is charged 1 and answers a bool;
  // in optional mode (the chain's base was an optional, or a qualifier was optional) it is
  // charged only when it finds the field, and the chain ends in optional.of(the field's value)
  // or optional.none(), which has() turns into true / false, but a ternary branch yields as is.
  HasNode(int32_t offset, NodePtr operand, std::string field)
      : Node(offset), operand_(std::move(operand)), field_(std::move(field)),
        operand_chain_(operand_->extends_chain()) {
    operand_->DropAttributeCost();
  }
  Val Eval(Ctx& ctx) const override {
    const Chain c = ResolveTest(ctx);
    if (c.done) return c.v.is_error() ? c.v : Val::Bool(false);
    return c.opt ? Val::Bool(true) : c.v;
  }
  Val EvalBranch(Ctx& ctx) const override { return FinishChain(ctx, ResolveTest(ctx)); }

 private:
  Chain ResolveTest(Ctx& ctx) const {
    Chain c = OperandChain(ctx, *operand_, operand_chain_);
    if (c.done) return c;
    if (c.opt) {
      PresentStep(ctx, &c, OptSelect(ctx, c.v, field_));
    } else {
      PlainStep(ctx, &c, Has(ctx, c.v, field_));
    }
    return c;
  }

  NodePtr operand_;
  std::string field_;
  bool operand_chain_;
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
        relative_cost_(operand_->is_attribute() ? 0 : 1),
        operand_chain_(operand_->extends_chain()) {
    if (key_->is_attribute()) key_->DropAttributeCost();
  }
  Val Eval(Ctx& ctx) const override { return FinishChain(ctx, Resolve(ctx)); }
  Chain Resolve(Ctx& ctx) const override {
    Chain c = OperandChain(ctx, *operand_, operand_chain_);
    if (c.done) {
      ctx.AddCost(relative_cost_);
      return c;
    }
    Val k = key_->Eval(ctx);
    // cel-go charges the attribute once its qualifiers resolved: a panic in the key (an ext.Lists
    // cost tracker) ends the evaluation before that.
    ctx.AddCost(relative_cost_);
    if (c.opt || optional_) {
      c.opt = true;
      PresentStep(ctx, &c, OptIndex(ctx, c.v, k));
    } else {
      PlainStep(ctx, &c, Index(ctx, c.v, k));
    }
    return c;
  }
  bool extends_chain() const override { return true; }
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
  bool operand_chain_;
};

class OptSelectNode final : public Node {
 public:
  OptSelectNode(int32_t offset, NodePtr operand, std::string field)
      : Node(offset), operand_(std::move(operand)), field_(std::move(field)),
        relative_cost_(operand_->is_attribute() ? 0 : 1),
        operand_chain_(operand_->extends_chain()) {}
  Val Eval(Ctx& ctx) const override { return FinishChain(ctx, Resolve(ctx)); }
  Chain Resolve(Ctx& ctx) const override {
    Chain c = OperandChain(ctx, *operand_, operand_chain_);
    ctx.AddCost(relative_cost_);
    if (c.done) return c;
    c.opt = true;
    PresentStep(ctx, &c, OptSelect(ctx, c.v, field_));
    return c;
  }
  bool extends_chain() const override { return true; }
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
  bool operand_chain_;
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
    if (c.kind == VK::kBool) return c.b ? t_->EvalBranch(ctx) : f_->EvalBranch(ctx);
    if (c.is_error()) return c;
    return ctx.NoOverload("_?_:_", &c, 1);
  }
  // A qualifier after a ternary is appended to both branches' attributes.
  bool extends_chain() const override { return true; }
  Chain Resolve(Ctx& ctx) const override {
    Val c = c_->Eval(ctx);
    if (c.kind == VK::kBool) {
      const Node& branch = c.b ? *t_ : *f_;
      return branch.extends_chain() ? branch.Resolve(ctx) : BaseChain(branch.EvalBranch(ctx));
    }
    if (c.is_error()) return {c, false, true};
    return {ctx.NoOverload("_?_:_", &c, 1), false, true};
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
  bool KubernetesCosted() const { return CostByName(def_->kubernetes); }

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

// cel-go's folder replaces an empty map accumulator by a new mutable map: device.attributes of a
// device without attributes (cel.bind(x, device.attributes, ...)) loses Kubernetes' default domain
// there (x["d"] is "no such key", has(x.d) false).
// The planner wraps an accumulator initializer that may be a map in this node (not in
// ComprehensionNode's loop, which stays as it was).
class FoldInitNode final : public Node {
 public:
  FoldInitNode(int32_t offset, NodePtr init) : Node(offset), init_(std::move(init)) {}
  Val Eval(Ctx& ctx) const override {
    Val v = init_->Eval(ctx);
    if (v.kind != VK::kDeviceMap || !ctx.go_map_keys || !DeviceMapEmpty(v)) return v;
    Val empty;
    empty.kind = VK::kMap;
    return empty;
  }

 private:
  NodePtr init_;
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

}  // namespace devlet::cel::internal
