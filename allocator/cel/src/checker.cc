// The type rules of checker.h.
#include "checker.h"

#include <algorithm>
#include <optional>

namespace devlet::cel::internal {

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

std::string ArgTypeName(const Type& t) {
  switch (t.kind()) {
    case Type::Kind::kNull: return "null";
    case Type::Kind::kList: return "list(" + ArgTypeName(t.param0()) + ")";
    case Type::Kind::kOptional: return "optional_type(" + ArgTypeName(t.param0()) + ")";
    case Type::Kind::kMap:
      return "map(" + ArgTypeName(t.param0()) + ", " + ArgTypeName(t.param1()) + ")";
    default: return t.DebugString();
  }
}

std::string IndexOperandName(const Type& t) {
  if (t.kind() == Type::Kind::kOptional) {
    return "optional_type(" + IndexOperandName(t.param0()) + ")";
  }
  if (t.kind() != Type::Kind::kMap) return ArgTypeName(t);
  return "map(" + ArgTypeName(t.param0()) + ", " + ArgTypeName(t.param1()) + ")";
}

bool ParamMatches(char p, const Type& t) {
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

bool LegacyNullable(const Type& t) {
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

bool Assignable(const Type& a, const Type& b) {
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

bool SameLiteralType(const Type& a, const Type& b) {
  if (a.kind() != b.kind()) return false;
  // cel-go's IsEquivalentType: parameters compared exactly (list(dyn) is not list(int)).
  auto param = [](const Type& x, const Type& y) { return SameLiteralType(x, y); };
  switch (a.kind()) {
    case Type::Kind::kList:
    case Type::Kind::kOptional:
    case Type::Kind::kType: return param(a.param0(), b.param0());
    case Type::Kind::kMap: return param(a.param0(), b.param0()) && param(a.param1(), b.param1());
    default: return true;
  }
}

bool HasFreeParams(const Expr& x, Type::Kind* kind) {
  if (x.kind == Expr::Kind::kList || x.kind == Expr::Kind::kMap) {
    *kind = x.kind == Expr::Kind::kList ? Type::Kind::kList : Type::Kind::kMap;
    return x.args.empty();
  }
  *kind = Type::Kind::kOptional;
  return IsOptionalNone(x);
}

bool EqualOrLessSpecific(const Type& a, const Type& b) {
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

Type UnifyBranches(const Expr& te, const Type& t, const Expr& fe, const Type& f,
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

Type OptionalNoneType(const Expr& x, const Type& planned) {
  return IsOptionalNone(x) && planned.is_dyn() ? Type::Optional(Type::Dyn()) : planned;
}

bool IsOptionalNone(const Expr& x) {
  if (x.kind != Expr::Kind::kCall || !x.args.empty()) return false;
  if (x.operand == nullptr) return x.name == "optional.none";
  return x.name == "none" && x.operand->kind == Expr::Kind::kIdent &&
         x.operand->name == "optional";
}

bool IsFreeElement(const Expr& x, bool optional_entry) {
  const Expr* operand = nullptr;
  bool optional_access = false;
  if (x.kind == Expr::Kind::kSelect && !x.test_only) {
    operand = x.operand.get();
  } else if (x.kind == Expr::Kind::kCall && x.operand == nullptr && x.args.size() == 2 &&
             (x.name == "_[_]" || x.name == "_[?_]" || x.name == "_?._")) {
    operand = x.args[0].get();
    optional_access = x.name != "_[_]";
  }
  if (operand == nullptr || optional_access != optional_entry) return false;
  return (operand->kind == Expr::Kind::kList || operand->kind == Expr::Kind::kMap) &&
         operand->args.empty();
}

void ResolveFreeElementTypes(std::vector<std::pair<Type, int32_t>>* types,
                                    const std::vector<size_t>& free_at) {
  if (free_at.empty()) return;
  for (size_t i = 0; i < types->size(); ++i) {
    if (std::find(free_at.begin(), free_at.end(), i) != free_at.end()) continue;
    for (size_t j : free_at) (*types)[j].first = (*types)[i].first;
    return;
  }
}

void ResolveNoneTypes(std::vector<std::pair<Type, int32_t>>* types,
                             const std::vector<size_t>& none_at) {
  if (none_at.empty()) return;
  for (size_t i = 0; i < types->size(); ++i) {
    if (std::find(none_at.begin(), none_at.end(), i) != none_at.end()) continue;
    if ((*types)[i].first.kind() != Type::Kind::kOptional) continue;
    for (size_t j : none_at) (*types)[j].first = (*types)[i].first;
    return;
  }
}

namespace {

// A type term of the join: a type parameter (var >= 0), or `t` with `params` for list, map and
// optional (whose own parameters in `t` are then ignored).
struct Term {
  int var = -1;
  Type t;
  std::vector<Term> params;
};
using Mapping = std::vector<std::optional<Term>>;

bool IsVar(const Term& x) { return x.var >= 0; }
bool IsDynTerm(const Term& x) { return !IsVar(x) && x.t.is_dyn() && !x.t.is_error(); }

Term TermOf(const Type& t) {
  Term r;
  r.t = t;
  if (t.kind() == Type::Kind::kList || t.kind() == Type::Kind::kOptional) {
    r.params.push_back(TermOf(t.param0()));
  } else if (t.kind() == Type::Kind::kMap) {
    r.params.push_back(TermOf(t.param0()));
    r.params.push_back(TermOf(t.param1()));
  }
  return r;
}

Term VarTerm(int v) {
  Term r;
  r.var = v;
  return r;
}

Term Compound(const Type& shape, std::vector<Term> params) {
  Term r;
  r.t = shape;
  r.params = std::move(params);
  return r;
}

bool ExactTerm(const Term& a, const Term& b) {
  if (IsVar(a) || IsVar(b)) return a.var == b.var;
  if (a.t.kind() != b.t.kind() || a.params.size() != b.params.size()) return false;
  if (a.params.empty()) return a.t == b.t;
  for (size_t i = 0; i < a.params.size(); ++i) {
    if (!ExactTerm(a.params[i], b.params[i])) return false;
  }
  return true;
}

// cel-go's isEqualOrLessSpecific.
bool LessSpecificTerm(const Term& a, const Term& b) {
  if (IsVar(a) || IsDynTerm(a)) return true;
  if (IsVar(b) || IsDynTerm(b)) return false;
  if (a.t.kind() != b.t.kind()) return false;
  if (!a.params.empty() && a.params.size() == b.params.size()) {
    for (size_t i = 0; i < a.params.size(); ++i) {
      if (!LessSpecificTerm(a.params[i], b.params[i])) return false;
    }
    return true;
  }
  return EqualOrLessSpecific(a.t, b.t);
}

const Term& MostGeneralTerm(const Term& a, const Term& b) { return LessSpecificTerm(a, b) ? a : b; }

bool NotReferencedIn(const Mapping& m, int v, const Term& within, int depth = 0) {
  if (depth > 64) return false;
  if (IsVar(within)) {
    if (within.var == v) return false;
    if (!m[within.var]) return true;
    return NotReferencedIn(m, v, *m[within.var], depth + 1);
  }
  for (const Term& p : within.params) {
    if (!NotReferencedIn(m, v, p, depth + 1)) return false;
  }
  return true;
}

bool AssignTerm(Mapping& m, const Term& a, const Term& b, int depth = 0);

// cel-go's isValidTypeSubstitution(m, t1, v).
bool ValidSubstitution(Mapping& m, const Term& t1, int v, bool* has_sub, int depth) {
  if (IsVar(t1) && t1.var == v) {
    *has_sub = true;
    return true;
  }
  if (m[v]) {
    *has_sub = true;
    const Term sub = *m[v];
    if (ExactTerm(t1, sub)) return true;
    if (AssignTerm(m, t1, sub, depth + 1)) {
      const Term general = MostGeneralTerm(t1, sub);
      if (NotReferencedIn(m, v, general)) m[v] = general;
      return true;
    }
    return false;
  }
  *has_sub = false;
  if (NotReferencedIn(m, v, t1)) {
    m[v] = t1;
    return true;
  }
  return false;
}

// cel-go's internalIsAssignable.
bool AssignTerm(Mapping& m, const Term& a, const Term& b, int depth) {
  if (depth > 64) return false;
  if (IsVar(b)) {
    bool has_sub = false;
    if (ValidSubstitution(m, a, b.var, &has_sub, depth)) return true;
    if (has_sub) return false;
  }
  if (IsVar(a)) {
    bool has_sub = false;
    return ValidSubstitution(m, b, a.var, &has_sub, depth);
  }
  if (a.t.is_dyn() || b.t.is_dyn()) return true;
  if (a.t.kind() != b.t.kind() || a.params.empty() || a.params.size() != b.params.size()) {
    return Assignable(a.t, b.t);
  }
  for (size_t i = 0; i < a.params.size(); ++i) {
    if (!AssignTerm(m, a.params[i], b.params[i], depth + 1)) return false;
  }
  return true;
}

Type Substitute(const Mapping& m, const Term& x, int depth = 0) {
  if (depth > 64) return Type::Dyn();
  if (IsVar(x)) return m[x.var] ? Substitute(m, *m[x.var], depth + 1) : Type::Dyn();
  switch (x.t.kind()) {
    case Type::Kind::kList: return Type::List(Substitute(m, x.params[0], depth + 1));
    case Type::Kind::kOptional: return Type::Optional(Substitute(m, x.params[0], depth + 1));
    case Type::Kind::kMap:
      return Type::Map(Substitute(m, x.params[0], depth + 1), Substitute(m, x.params[1], depth + 1));
    default: return x.t;
  }
}

}  // namespace

Type JoinListElements(const std::vector<std::pair<Type, FreeShape>>& elements,
                      std::vector<Type>* final_types) {
  Mapping m;
  std::vector<Term> terms;
  terms.reserve(elements.size());
  for (const auto& [type, shape] : elements) {
    auto fresh = [&m] {
      m.emplace_back();
      return VarTerm(static_cast<int>(m.size() - 1));
    };
    switch (shape) {
      case FreeShape::kNone: terms.push_back(TermOf(type)); break;
      case FreeShape::kParam: terms.push_back(fresh()); break;
      case FreeShape::kOptionalParam: terms.push_back(Compound(Type::Optional(Type::Dyn()), {fresh()})); break;
      case FreeShape::kListParam: terms.push_back(Compound(Type::List(Type::Dyn()), {fresh()})); break;
      case FreeShape::kMapParams: {
        Term k = fresh();
        Term v = fresh();
        terms.push_back(Compound(Type::Map(Type::Dyn(), Type::Dyn()), {k, v}));
        break;
      }
    }
  }
  std::optional<Term> joined;
  for (const Term& t : terms) {
    if (!joined) {
      joined = t;
      continue;
    }
    Mapping attempt = m;
    if (AssignTerm(attempt, *joined, t)) {
      m = std::move(attempt);
      joined = Term(MostGeneralTerm(*joined, t));
    } else {
      joined = TermOf(Type::Dyn());
    }
  }
  final_types->clear();
  for (const Term& t : terms) final_types->push_back(Substitute(m, t));
  return joined ? Substitute(m, *joined) : Type::Dyn();
}

std::string ValidatorTypeText(const Type& t) {
  std::string text = t.DebugString();
  for (size_t at = text.find("null_type"); at != std::string::npos; at = text.find("null_type", at)) {
    text.replace(at, 9, "null");
  }
  return text;
}

}  // namespace devlet::cel::internal
