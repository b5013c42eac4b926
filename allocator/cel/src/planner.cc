// Planning: name resolution, type checking (the type rules are checker.h's), constant folding and
// the DRA fast paths, turning the parsed expression into the nodes of nodes.h; the estimated cost
// is estimate.cc's, from the checked types.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ast.h"
#include "checker.h"
#include "devlet/cel/dra.h"
#include "devlet/common/status.h"
#include "estimate.h"
#include "nodes.h"
#include "program.h"
#include "utf8.h"

namespace devlet::cel::internal {
namespace {

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

  // The type of `r.orValue(a)` (optional_type(T).orValue(T) -> T) or `r.or(a)`
  // (optional_type(T).or(optional_type(T)) -> optional_type(T)) as cel-go binds T: the receiver's
  // parameter first (none when the receiver's own type parameter is free: optional.none(),
  // `{}.?c`, or a dyn or null receiver), then the argument, which keeps the more general of two
  // assignable types. Sets *no_overload (with type checking on) where no overload matches.
  Type OptOrType(const Expr& e, bool or_value, const Type& r, const Type& a, bool* no_overload) {
    auto fail = [&] {
      *no_overload = options_.type_check;
      return options_.type_check ? Type::Error() : Type::Dyn();
    };
    const bool free_receiver = IsOptionalNone(*e.operand) || IsFreeElement(*e.operand, true);
    const bool receiver_ok = r.kind() == Type::Kind::kOptional || r.is_dyn() ||
                             r.kind() == Type::Kind::kNull;
    // The argument's T: orValue takes T itself, or() an optional_type(T) (dyn and null pass).
    const bool arg_ok = or_value || a.kind() == Type::Kind::kOptional || a.is_dyn() ||
                        a.kind() == Type::Kind::kNull;
    if (!receiver_ok || !arg_ok) return fail();
    std::optional<Type> arg_t;
    if (or_value) {
      arg_t = a;
    } else if (a.kind() == Type::Kind::kOptional) {
      arg_t = a.param0();
    }
    Type bound;
    if (r.kind() == Type::Kind::kOptional && !free_receiver) {
      bound = r.param0();
      if (arg_t && !(*arg_t == bound)) {
        if (!Assignable(*arg_t, bound)) return fail();
        bound = EqualOrLessSpecific(*arg_t, bound) ? *arg_t : bound;
      }
    } else {
      bound = arg_t ? *arg_t : Type::Dyn();
    }
    return or_value ? bound : Type::Optional(bound);
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
      bool no_overload = false;
      p.type = OptOrType(e, fn == "orValue", t.type, a.type, &no_overload);
      if (no_overload) {
        std::vector<Planned> sig(2);
        sig[0].type = t.type;
        sig[1].type = a.type;
        Error(e.offset, "found no matching overload for '" + fn + "' applied to '" +
                            ArgTypes(sig, /*member=*/true) + "'");
      }
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
    bool failed = false;
    auto no_overload = [&] {
      failed = true;
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
    // cel-go types a call it found no overload for as its error type (no further errors).
    if (failed) p.type = Type::Error();
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
    } else if (const std::vector<Signature>* sigs = FindSignatures(name); sigs != nullptr) {
      overloads = 0;
      std::string_view kept;
      for (const Signature& sig : *sigs) {
        if (sig.params.size() != args.size()) continue;
        bool ok = true;
        for (size_t i = 0; i < args.size() && ok; ++i) ok = ParamMatches(sig.params[i], args[i].type);
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
    const std::vector<Signature>* sigs = FindSignatures(name);
    if (sigs == nullptr) return true;
    bool any = false;
    bool first = true;
    for (const Signature& sig : *sigs) {
      if (sig.params.size() != args.size()) continue;
      bool ok = true;
      for (size_t i = 0; i < args.size() && ok; ++i) ok = ParamMatches(sig.params[i], args[i].type);
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


  Type ResultType(const FunctionDef& def, const std::vector<Planned>& args) {
    // A result with parameters, as the overloads declare it (split: list(string)): cel-go's
    // checker knows the element types, and they decide overload resolution, hence costs.
    if (const Type* declared = FindDeclaredResult(def.name))
      return *declared;
    if (def.name == "type" && args.size() == 1) return Type::TypeOf(args[0].type);
    if (def.result != Type::Kind::kDyn)
      return TypeOfKind(def.result);
    const std::string_view n = def.name;
    if (args.empty()) return Type::Dyn();
    const Type& a = args[0].type;
    if ((n == "_+_" || n == "_-_" || n == "_*_" || n == "_/_" || n == "_%_") && args.size() == 2) {
      if (a == args[1].type) return a.kind() == Type::Kind::kList ? a : a;
      // dyn + list(T) (or the reverse): list concatenation is the only overload that matches.
      const Type& b = args[1].type;
      if (n == "_+_" && a.is_dyn() && !a.is_error() && b.kind() == Type::Kind::kList) return b;
      if (n == "_+_" && b.is_dyn() && !b.is_error() && a.kind() == Type::Kind::kList) return a;
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

  void CheckHomogeneous(const std::vector<std::pair<Type, int32_t>>& types) {
    if (!options_.homogeneous_aggregate_literals) return;
    const Type* first = nullptr;
    for (const auto& [t, offset] : types) {
      if (first == nullptr) {
        first = &t;
        continue;
      }
      if (!SameLiteralType(t, *first)) {
        ValidatorError(offset, "expected type '" + ValidatorTypeText(*first) + "' but found '" +
                                   ValidatorTypeText(t) + "'");
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
    std::vector<size_t> free_at;  // elements whose type is a free parameter (IsFreeElement)
    // Every element, for cel-go's join and its homogeneous-literal validator.
    std::vector<std::pair<Type, FreeShape>> joined;
    std::vector<int32_t> joined_offsets;
    for (size_t i = 0; i < e.args.size(); ++i) {
      Planned a = Plan(*e.args[i]);
      celgo_const = celgo_const && a.celgo_const && !e.optional_entries[i];
      Type t = a.type;
      if (e.optional_entries[i]) {
        CheckOptionalEntry(a, e.args[i]->offset);
        if (t.kind() == Type::Kind::kOptional) t = t.param0();  // else kept, as cel-go
      }
      {
        FreeShape shape = FreeShape::kNone;
        Type::Kind fk;
        if (IsOptionalNone(*e.args[i])) {
          shape = e.optional_entries[i] ? FreeShape::kParam : FreeShape::kOptionalParam;
        } else if (IsFreeElement(*e.args[i], e.optional_entries[i])) {
          shape = FreeShape::kParam;
        } else if (!e.optional_entries[i] && HasFreeParams(*e.args[i], &fk)) {
          shape = fk == Type::Kind::kList ? FreeShape::kListParam : FreeShape::kMapParams;
        }
        joined.emplace_back(t, shape);
        joined_offsets.push_back(e.args[i]->offset);
      }
      Type::Kind free_kind;
      if (!IsOptionalNone(*e.args[i])) {
        free.push_back(!e.optional_entries[i] && HasFreeParams(*e.args[i], &free_kind));
        if (IsFreeElement(*e.args[i], e.optional_entries[i])) free_at.push_back(types.size());
        types.emplace_back(t, e.args[i]->offset);
      } else if (!e.optional_entries[i]) {
        none_at.push_back(types.size());
        free.push_back(true);
        types.emplace_back(Type::Optional(Type::Dyn()), e.args[i]->offset);
      }
      all_const = all_const && a.node->constant() != nullptr && !e.optional_entries[i];
      nodes.push_back(std::move(a.node));
    }
    // cel-go's joinTypes, type parameters bound and rebound as its checker does (see
    // JoinListElements); the validator then compares the elements' final types.
    std::vector<Type> final_types;
    const Type elem = JoinListElements(joined, &final_types);
    if (exempt) {
      exempt_types_.clear();
      for (const auto& [t, o] : types) exempt_types_.push_back(t);
    } else if (format_depth_ == 0) {
      std::vector<std::pair<Type, int32_t>> checked;
      for (size_t i = 0; i < final_types.size(); ++i) {
        checked.emplace_back(final_types[i], joined_offsets[i]);
      }
      CheckHomogeneous(checked);
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
    std::vector<size_t> free_at;  // values whose type is a free parameter (IsFreeElement)
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
          if (IsFreeElement(*e.args[i], e.optional_entries[i / 2])) free_at.push_back(vtypes.size());
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
    ResolveFreeElementTypes(&vtypes, free_at);
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
    if (options_.go_map_keys && (init.type.kind() == Type::Kind::kMap || init.type.is_dyn())) {
      init.node = std::make_unique<FoldInitNode>(e.offset, std::move(init.node));
    }
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

}  // namespace

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
