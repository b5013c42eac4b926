// Private: the type rules the planner checks with, as cel-go's checker applies them: type names,
// overload parameter matching, assignability, the free type parameters of empty literals and
// optional.none(), the join of ternary branches, and the texts of types in error messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ast.h"
#include "devlet/cel/type.h"

namespace devlet::cel::internal {

// Whether `n` names a type (int, uint, double, bool, string, bytes, list, map, null_type, type,
// optional_type).
bool IsTypeName(std::string_view n);
// The checked type of a type identifier (IsTypeName): type(int), type(list(dyn)), type(type), ...
Type TypeNameType(std::string_view n);
// The type of a literal.
Type ConstType(const Constant& c);
// cel-go's Type.TypeName(), which format()'s errors print.
std::string CelGoTypeName(const Type& t);
// bool, int, uint, double, string, bytes or null.
bool IsConcreteScalar(const Type& t);

// The signature in cel-go's "found no matching overload" error: "(int, string)", or
// "target.(args)" for a member call; the null type is spelled "null" there.
std::string ArgTypeName(const Type& t);

// An index operand as cel-go's overload error spells it (a map's null key or value is "null").
std::string IndexOperandName(const Type& t);

// i int, u uint, d double, s string, b bytes, B bool, n null, L list, M map, Q Quantity,
// S Semver, T type, O optional, Z timestamp, D duration, P IP, C CIDR, F format, U URL,
// W list(string), V list(optional(T)), * anything.
bool ParamMatches(char p, const Type& t);

// Type assignability for (A, A) overloads such as _==_.
// cel-go's legacy null rule: null is assignable to (and from) opaque and object types and the
// well-known timestamp and duration (so `semver("1.0.0") == null` checks).
bool LegacyNullable(const Type& t);

bool Assignable(const Type& a, const Type& b);

// The type used for homogeneity checks: optional entries unwrap.
// cel-go's homogeneousAggregateLiteralValidator compares checked types exactly: dyn is a type
// like any other at the top level ([1, attr] mixes int and dyn). Our light checker does not
// unify type parameters, so a dyn parameter (e.g. of an empty nested literal) matches anything.
bool SameLiteralType(const Type& a, const Type& b);

// `optional.none()` as written: cel-go types it optional_type(T) with a free T, which any
// element type satisfies, so an optional entry of it does not take part in the literal's type.
// A literal whose type has a free type parameter in cel-go: `[]` is list(T), `{}` map(K, V),
// optional.none() optional_type(T). Unification binds the parameter to the other side's.
// Returns false for other expressions; *kind is the literal's type kind.
bool HasFreeParams(const Expr& x, Type::Kind* kind);

// cel-go's isEqualOrLessSpecific (checker/types.go): whether `a` is dyn or no more specific
// than `b`, which decides the type a unified type parameter keeps.
bool EqualOrLessSpecific(const Type& a, const Type& b);

// The type of `c ? t : f` as cel-go binds A in _?_:_(bool, A, A): A is first the true branch's
// type; the false branch must be assignable to it, and A becomes the more general of the two,
// the false branch's on a tie (`c ? int : string` is type(string), `c ? null : semver(x)` null).
// A branch whose literal type has a free parameter (`[]`, `{}`, optional.none()) takes the other
// branch's type of the same kind. Sets *ok to false where cel-go finds no matching overload.
Type UnifyBranches(const Expr& te, const Type& t, const Expr& fe, const Type& f, bool* ok);

Type OptionalNoneType(const Expr& x, const Type& planned);

bool IsOptionalNone(const Expr& x);

// `{}.f`, `{}[k]` and `[][i]`, or as an optional entry `{}.?f`, `{}[?k]` and `[][?i]`: cel-go
// types the element with the empty literal's free type parameter, which joining the literal's
// other elements binds, so `[?{}.?c, ?optional.of(42)]` is list(int) (planned as dyn here).
bool IsFreeElement(const Expr& x, bool optional_entry);

// Elements at `free_at` (IsFreeElement) take the first other element's type, as cel-go binds
// their type parameter to it; with no other element they stay dyn.
void ResolveFreeElementTypes(std::vector<std::pair<Type, int32_t>>* types,
                             const std::vector<size_t>& free_at);

// A literal `optional.none()` element is optional_type(T) with T free: it takes the first
// optional type among the other elements (so [optional.none(), optional.of(1)] is homogeneous,
// [optional.none(), 1] is not).
void ResolveNoneTypes(std::vector<std::pair<Type, int32_t>>* types,
                      const std::vector<size_t>& none_at);

// Where a list literal element's checked type has a free type parameter in cel-go: none, the
// whole type (`{}.c`, `[][i]`, or as an optional entry `{}.?c`, `?optional.none()`), inside an
// optional (a plain `optional.none()` element), a list (`[]`) or a map (`{}`, both parameters).
enum class FreeShape : unsigned char { kNone, kParam, kOptionalParam, kListParam, kMapParams };

// cel-go's checkCreateList (checker.go joinTypes): each element joins the type so far, keeping
// the more general of two assignable types (dyn for types that are not assignable). A free type
// parameter is bound by the first element it meets and rebound to the more general type at each
// later join (checker/types.go isValidTypeSubstitution), so `[?optional.none(), ?{'k': [1]}.?k,
// ?dyn_value]` ends with the first element dyn. Returns the list's element type and, in
// *final_types, each element's type after substitution (an unbound parameter is dyn), which is
// what the homogeneous-literal validator compares.
Type JoinListElements(const std::vector<std::pair<Type, FreeShape>>& elements,
                      std::vector<Type>* final_types);

// A type as cel-go's homogeneous-literal validator writes it (cel.FormatCELType): the checker's
// text, but null is "null" (seen with celdiff-oracle: "expected type 'null' but found ...").
std::string ValidatorTypeText(const Type& t);

}  // namespace devlet::cel::internal
