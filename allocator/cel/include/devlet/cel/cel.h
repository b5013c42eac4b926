// File: devlet/cel/cel.h
//
// The CEL engine: compile an expression once in an Environment, evaluate the resulting immutable
// Program many times, from any number of threads.
//
//   devlet::cel::EnvironmentOptions options;
//   options.variables.emplace_back("x", devlet::cel::Type::Int());
//   devlet::cel::Environment env(options);
//   absl::StatusOr<devlet::cel::Program> program = env.Compile("x * 2 > 10");
//   if (!program.ok()) return program.status();  // "ERROR: <input>:1:3: Syntax error: ..."
//   devlet::cel::Activation activation;
//   activation.Bind("x", devlet::cel::Value::Int(7));
//   devlet::cel::EvalResult result = program->Evaluate(activation);
//   // result.value.bool_value() == true, result.cost == 3
//
// Compile errors follow cel-go's text: one line per error, "ERROR: <input>:LINE:COL: message".
// Evaluation errors are values (CEL semantics: `false && (1/0 > 1)` is false, not an error);
// a Program returns an error Value rather than a Status. Exceeding the cost limit or the deadline
// aborts evaluation with an error Value and EvalResult::abort set.
//
// The standard library is always present: operators, size/contains/startsWith/endsWith/matches
// (RE2), conversions (int uint double string bytes bool dyn type), timestamps and durations with
// their accessors. The extension libraries below are chosen per Environment.
//
// For DRA device selectors use devlet/cel/dra.h, which configures the Kubernetes environment.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/cel/type.h"
#include "devlet/cel/value.h"

namespace devlet::cel {

namespace dra {
class DeviceView;
}  // namespace dra

// Libraries that an Environment may enable (bit flags; combine with |).
enum Library : uint32_t {
  // ext.Strings v2: charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace, split,
  // substring, trim, join, format, strings.quote.
  kStringsLibrary = 1u << 0,
  // ext.Lists v3: slice, flatten, distinct, lists.range, reverse, sort, sortBy.
  kListsLibrary = 1u << 1,
  // ext.Sets: sets.contains, sets.equivalent, sets.intersects.
  kSetsLibrary = 1u << 2,
  // Kubernetes lists: isSorted, sum, min, max, indexOf, lastIndexOf.
  kKubernetesListsLibrary = 1u << 3,
  // Kubernetes regex: find, findAll.
  kRegexLibrary = 1u << 4,
  // Kubernetes quantity(): quantity, isQuantity, sign and the Quantity members.
  kQuantityLibrary = 1u << 5,
  // Kubernetes semver(): semver, isSemver and the Semver members.
  kSemverLibrary = 1u << 6,
  // cel.bind(name, init, expr).
  kBindingsLibrary = 1u << 7,
  // optional.of/none/ofNonZeroValue, .?x, [?k], orValue, or, hasValue, value.
  kOptionalsLibrary = 1u << 8,
  // DRA `includes` (feature gate DRAListTypeAttributes).
  kIncludesLibrary = 1u << 9,
  // Two-variable comprehensions: all(i,v,p), exists(i,v,p), existsOne, transformList,
  // transformMap, transformMapEntry.
  kTwoVarComprehensionsLibrary = 1u << 10,
  // Kubernetes ip(): ip, isIP, ip.isCanonical, string(ip) and the IP members.
  kIPLibrary = 1u << 11,
  // Kubernetes cidr(): cidr, isCIDR, containsIP, containsCIDR, ip, masked, prefixLength,
  // string(cidr).
  kCIDRLibrary = 1u << 12,
  // Kubernetes URLs: url, isURL and the URL members getScheme, getHost, getHostname, getPort,
  // getEscapedPath, getQuery.
  kURLLibrary = 1u << 13,
  // Kubernetes format: format.named, format.<name>() for each named format, <format>.validate.
  kFormatLibrary = 1u << 14,
  kAllLibraries = (1u << 15) - 1,
};

// EnvironmentOptions configures parsing, checking and the available functions.
struct EnvironmentOptions {
  // Bitwise OR of Library values. The CEL standard library is always present.
  uint32_t libraries = kAllLibraries;
  // Expand macros (has, all, exists, exists_one, map, filter, ...). When false, `has(x.y)` is an
  // ordinary (usually undeclared) function call.
  bool enable_macros = true;
  // Type-check the expression. When false, unknown identifiers and functions are runtime errors
  // ("no such attribute: x", "no such overload: f") instead of compile errors ("undeclared
  // reference to 'x'"), as with cel-go's disable_check.
  bool type_check = true;
  // Kubernetes HomogeneousAggregateLiterals: list and map literals whose elements' checked types
  // differ are compile errors ("expected type 'int' but found 'dyn'"; dyn counts as a type, as in
  // cel-go); the list argument of format() is exempt.
  bool homogeneous_aggregate_literals = false;
  // A literal regex argument of matches/find/findAll that RE2 rejects is a compile error.
  bool validate_regex_literals = true;
  // Declared variables. Without type checking, declarations are optional.
  std::vector<std::pair<std::string, Type>> variables;
  // If not empty, the checked result type must be one of these (dyn always passes), else a compile
  // error "must evaluate to <a> or <b>, not <T>" -- DRA uses {bool, dyn}; see dra.h for its text.
  std::vector<Type> result_types;
  // Evaluation turns a result that is not a bool (and not an error) into the error value
  // "CEL result of type <t> could not be converted to bool" (as the DRA scheduler does).
  bool require_bool_result = false;
  // cel-go evaluates type conversions of constants (int("x"), uint(-1), int(1e30)) when it plans
  // a program, so their failure is a compile error in Kubernetes ("program instantiation
  // failed: ..."), even in branches that never run. On for DRA selectors; off by default, where
  // they are runtime errors as the cel-spec conformance tests expect.
  bool constant_conversion_errors_at_compile_time = false;
  // ext.Strings as Kubernetes has it (version 2 in cel-go v0.29.2): format() takes only doubles
  // (or "NaN"/"Infinity" strings) for %f/%e, only integers for %d, and prints list and map members
  // as CEL literals; indexOf/lastIndexOf find nothing (-1) from an offset past the end. Off: the
  // current cel-spec rules (ints for %f/%e, NaN/Infinity doubles for %d, bare members, an offset
  // past the end is an error).
  bool strings_v2_format = false;
  // Ordering a NaN (`<`, `<=`, `>`, `>=`) is the error "NaN values cannot be ordered", as in
  // cel-go v0.29 (Kubernetes; on for DRA selectors). Off: false, as the cel-spec conformance
  // tests expect.
  bool nan_ordering_errors = false;
  // Map literals key as cel-go's Go maps do (on for DRA selectors): any comparable value is a key
  // (double, null, timestamp, duration, type, IP, CIDR; URL, Quantity, list, map and optional
  // keys by identity), a repeated key replaces the earlier entry, a lookup tries the key's own
  // type before the other integer types, a Semver, format or bytes key fails the whole
  // evaluation as cel-go's "hash of unhashable type" panic, and indexing with a key that is not
  // string, int, uint, bool or double is "invalid qualifier type". Off: the cel-spec rules
  // (bool, int, uint and string keys; a repeated key is an error), as the conformance tests expect.
  // On, field selection in optional mode (`.?f`, or after an optional qualifier) and has() test
  // presence as cel-go's attribute qualifiers do: a value that is neither map nor list has no
  // fields (optional.none(), false), a list fails as indexed by the field's name; off, both are
  // errors as cel-spec says.
  bool go_map_keys = false;
  // Durations are cel-go's Go time.Duration, int64 nanoseconds (about +-292 years): a longer one
  // does not parse, and arithmetic beyond it is "integer overflow". On for DRA selectors. Off:
  // protobuf's +-10000 years, as the cel-spec conformance tests expect.
  bool go_durations = false;
  // Compile errors read as Kubernetes' DRA compiler words them: "compilation failed: ERROR: ..."
  // for parse and check errors, "must evaluate to bool or the unknown type, not int" for the
  // result type, "program instantiation failed: ..." for a constant conversion.
  bool kubernetes_messages = false;
  // For the DRA device type: whether `device.allowMultipleAllocations` is a declared field.
  bool dra_allow_multiple_allocations = true;
  // Parser limits: nesting depth of the syntax tree and expression length in bytes.
  int max_recursion_depth = 250;
  size_t max_expression_bytes = 100 * 1024;
};

// Activation binds variable names to values for one evaluation. It does not own a bound device.
class Activation {
 public:
  Activation() = default;
  // Bind sets (or replaces) a variable.
  void Bind(std::string name, Value value);
  // BindDevice binds the DRA `device` variable to a view that must outlive the evaluation.
  void BindDevice(const dra::DeviceView* device) { device_ = device; }

  const Value* Find(std::string_view name) const;
  const dra::DeviceView* device() const { return device_; }

 private:
  std::vector<std::pair<std::string, Value>> bindings_;
  const dra::DeviceView* device_ = nullptr;
};

// EvalOptions bounds one evaluation.
struct EvalOptions {
  // Runtime cost limit (cel-go units); 0 = unlimited. Exceeding it aborts with the error value
  // "operation cancelled: actual cost limit exceeded".
  uint64_t cost_limit = 0;
  // Checked every 100 comprehension iterations; past it, evaluation aborts with
  // "operation interrupted: deadline exceeded".
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Checked like the deadline; when it becomes true evaluation aborts with
  // "operation interrupted: cancelled".
  const std::atomic<bool>* cancelled = nullptr;
};

// EvalResult is the outcome of one evaluation.
struct EvalResult {
  // Why evaluation stopped early, if it did.
  // kInternal: where cel-go panics (and Kubernetes reports "internal error: ..." for the whole
  // evaluation, whatever `||` or `&&` around it would absorb), so does this engine.
  enum class Abort : unsigned char { kNone, kCostLimit, kDeadline, kCancelled, kInternal };
  // The result; an error value (kind kError) when evaluation failed.
  Value value;
  // Runtime cost actually spent (cel-go units).
  uint64_t cost = 0;
  Abort abort = Abort::kNone;
};

// CostEstimate is the compile-time bound on the runtime cost (cel-go units).
struct CostEstimate {
  uint64_t min = 0;
  uint64_t max = 0;
};

namespace internal {
struct ProgramImpl;
}  // namespace internal

// Program is a compiled expression. Immutable; cheap to copy; safe to evaluate concurrently.
class Program {
 public:
  // Evaluate runs the program. Unbound variables evaluate to an "undeclared reference" or
  // "no such attribute" error value.
  EvalResult Evaluate(const Activation& activation, const EvalOptions& options = {}) const;

  // The checked result type (dyn when unknown or when checking is off).
  const Type& result_type() const;
  // Bounds on the runtime cost, computed at compile time with the DRA size limits for the device.
  CostEstimate estimated_cost() const;
  // The source text.
  const std::string& expression() const;

  // For the implementation (dra.cc).
  const internal::ProgramImpl& impl() const { return *impl_; }

 private:
  friend class Environment;
  explicit Program(std::shared_ptr<const internal::ProgramImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const internal::ProgramImpl> impl_;
};

// Environment compiles expressions. Immutable after construction; Compile is thread-safe.
class Environment {
 public:
  explicit Environment(EnvironmentOptions options = {});

  // Compile parses, expands macros, checks and plans `expression`. Errors (InvalidArgument) carry
  // cel-go style text: "ERROR: <input>:1:5: Syntax error: mismatched input ..." or
  // "ERROR: <input>:1:1: undeclared reference to 'x' (in container '')".
  absl::StatusOr<Program> Compile(std::string_view expression) const;

  const EnvironmentOptions& options() const { return options_; }

 private:
  EnvironmentOptions options_;
};

}  // namespace devlet::cel
