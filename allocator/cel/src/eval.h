// Private: evaluation context, plan nodes and the function registry.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devlet/cel/cel.h"
#include "kubernetes_cost.h"
#include "val.h"

namespace devlet::cel::internal {

// Ctx is the mutable state of one evaluation.
struct Ctx {
  Arena& arena;
  const Activation* activation = nullptr;
  const dra::DeviceView* device = nullptr;
  Val* slots = nullptr;  // comprehension variables
  Val* vars = nullptr;   // external variables, loaded lazily
  uint8_t* var_loaded = nullptr;
  uint64_t cost = 0;
  uint64_t limit = UINT64_MAX;
  EvalResult::Abort abort = EvalResult::Abort::kNone;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* cancelled = nullptr;
  uint32_t iterations = 0;
  // Kubernetes' ext.Strings v2 format rules (%f/%e only doubles, %d only integers).
  bool strict_format = false;
  // EnvironmentOptions::nan_ordering_errors.
  bool nan_ordering_errors = false;
  // EnvironmentOptions::go_map_keys.
  bool go_map_keys = false;
  // EnvironmentOptions::go_durations.
  bool go_durations = false;

  explicit Ctx(Arena& a) : arena(a) {}

  // The cost when the limit was first exceeded: cel-go stops right there (it panics out of the
  // evaluation), so that is the cost it reports.
  uint64_t cost_at_abort = 0;

  void AddCost(uint64_t c) {
    cost += c;
    if (cost > limit && abort == EvalResult::Abort::kNone) {
      abort = EvalResult::Abort::kCostLimit;
      cost_at_abort = cost;
    }
  }
  bool aborted() const { return abort != EvalResult::Abort::kNone; }
  // Ends the evaluation as a cel-go panic does: the result is the error `message` (a string
  // with static storage) and the cost is what was spent so far.
  void Panic(std::string_view message) {
    if (abort != EvalResult::Abort::kNone) return;
    abort = EvalResult::Abort::kInternal;
    cost_at_abort = cost;
    panic_message = message;
  }
  std::string_view panic_message;
  // Called once per comprehension iteration; checks interruption every 100 iterations.
  void Tick() {
    if (++iterations % 100 != 0) return;
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      abort = EvalResult::Abort::kCancelled;
    } else if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      abort = EvalResult::Abort::kDeadline;
    }
  }

  Val Error(std::string_view message) {
    Val r = Val::Str(arena.Str(message), VK::kError);
    return r;
  }
  Val NoOverload(std::string_view fn, const Val* args, uint32_t n);
  Val String(std::string_view s, VK kind = VK::kString) { return Val::Str(arena.Str(s), kind); }
  Val List(const Val* elems, uint32_t n);
  // An empty list with room for `cap` elements.
  Val ListWithCapacity(uint32_t cap);
  // Appends (in place when possible, see ListRep); returns the longer list.
  Val Append(const Val& list, const Val* elems, uint32_t n);
  Val Optional(const Val& v) {
    Val* p = arena.New<Val>(v);
    return Val::Opt(p);
  }
};

// Val::sub of a kQuantity produced by add()/sub(): upstream these are *Quantity, which its
// Equal does not accept as the right operand (research note C of the differential harness).
inline constexpr uint8_t kQuantityPointer = 1;
// Val::sub of a kTimestamp: the Go location of the time (see time.cc's TimestampZone): UTC,
// time.Local, 2..28 the cached whole-hour zones, from kZoneUnique a zone of its own.
inline constexpr uint8_t kZoneUtc = 0;
inline constexpr uint8_t kZoneLocal = 1;
inline constexpr uint8_t kZoneUnique = 29;
// Val::sub of a kList that is a program constant (`in` on it costs 0, as cel-go's set lookup).
inline constexpr uint8_t kConstantList = 1;

// CostOfSize is cel-go's ceil(factor * size).
inline uint64_t CostOf(double factor, uint64_t size) {
  return static_cast<uint64_t>(std::ceil(factor * static_cast<double>(size)));
}

// cel-go resolves a chain of selections and indexes over one operand as a single attribute
// (interpreter/attributes.go, applyQualifiers): only the chain's base value is unwrapped when it
// is an optional (the chain is then in optional mode, as after any `.?f` / `[?k]`); an optional
// reached inside the chain is an opaque value ("no such key"). Chain is the state between the
// qualifiers: the current object, whether the chain is in optional mode (qualifiers test presence
// and the result is wrapped in an optional) and whether it ended (an error, or optional.none():
// `v` is then the result as is).
struct Chain {
  Val v;
  bool opt = false;
  bool done = false;
};
// The chain state of a base value (a variable, or any non-attribute expression).
inline Chain BaseChain(const Val& v) {
  if (v.is_error()) return {v, false, true};
  if (v.kind == VK::kOptional) {
    if (v.opt == nullptr) return {v, false, true};
    return {*v.opt, true, false};
  }
  return {v, false, false};
}

// A plan node. Eval never throws; errors are error Vals.
class Node {
 public:
  explicit Node(int32_t offset) : offset_(offset) {}
  virtual ~Node() = default;
  virtual Val Eval(Ctx& ctx) const = 0;
  // Constant nodes report their value (for folding).
  virtual const Val* constant() const { return nullptr; }
  // Whether cel-go plans this expression as an attribute (identifier, select, index, ternary):
  // runtime cost follows from that (cel-go interpreter/runtimecost.go): an attribute costs 1 plus
  // 1 per qualifier applied, and a select or index on a non-attribute costs 1 more (a "relative"
  // attribute around the operand).
  virtual bool is_attribute() const { return false; }
  // cel-go resolves an attribute in a ternary branch or under has() without observing the
  // attribute itself: its qualifiers still cost 1 each, its own 1 is not charged.
  virtual void DropAttributeCost() {}
  // The chain state after this node (see Chain). Nodes that extend cel-go's attribute with a
  // qualifier (select, index, optional select, ternary) override it; any other node is a base.
  virtual Chain Resolve(Ctx& ctx) const { return BaseChain(Eval(ctx)); }
  // Whether Resolve is overridden (the node continues its operand's chain).
  virtual bool extends_chain() const { return false; }
  // The value as a ternary branch: cel-go resolves a branch's attribute without the branch's own
  // interpretable, which only matters for has() (its raw presence result).
  virtual Val EvalBranch(Ctx& ctx) const { return Eval(ctx); }
  int32_t offset() const { return offset_; }

 private:
  int32_t offset_;
};
using NodePtr = std::unique_ptr<Node>;

// ---- Functions -----------------------------------------------------------------------------

using Fn = Val (*)(Ctx& ctx, const Val* args, uint32_t n);
using CostFn = uint64_t (*)(const Val* args, uint32_t n);

// One CEL function: its implementation, call styles, library, runtime cost and checked
// overloads and Kubernetes' cost rule. Each library's functions are one table (StandardFunctions
// in functions.cc, KubernetesObjectFunctions in k8s.cc, TimeFunctions, FormatFunctions).
struct FunctionDef {
  std::string_view name;
  Fn fn;
  bool global;         // callable as name(args)
  bool member;         // callable as target.name(args); target is args[0]
  uint32_t library;    // Library bit, 0 = standard
  CostFn cost;         // nullptr: 1
  Type::Kind result;   // for the checker; kDyn = unknown / depends on arguments
  uint8_t min_args;    // argument counts, the receiver included
  uint8_t max_args;
  // The overloads the checker resolves, receiver first, ';'-separated:
  // "string, string -> bool; string, string, int -> bool". Parameter types: int uint double
  // string bytes bool null list map list(string) list(optional) Quantity Semver type optional
  // timestamp duration IP CIDR format URL any. Result types: the same names (but any) and dyn,
  // or with their parameters as cel-go declares them: list(string), optional(format),
  // map(string, list(string)); a result with parameters that every overload declares is the
  // call's checked type. Empty: the checker knows no overloads (any arguments within the counts).
  std::string_view overloads = {};
  // How Kubernetes' library.CostEstimator prices the call (kubernetes_cost.h): the rule of its
  // compile-time estimate, and whether its runtime cost applies without a resolved overload.
  KubernetesCost kubernetes = KubernetesCost::kNone;
};

// One parsed overload of FunctionDef::overloads: a letter per parameter, the receiver first
// (i int, u uint, d double, s string, b bytes, B bool, n null, L list, M map, Q Quantity,
// S Semver, T type, O optional, Z timestamp, D duration, P IP, C CIDR, F format, U URL,
// W list(string), V list(optional), * any), and the result.
struct Signature {
  std::string params;
  Type::Kind result;
  // The result with its parameters, when declared with them (list(string)).
  std::optional<Type> parametric;
};

// Lookup by name and call style, filtered by enabled libraries.
const FunctionDef* FindFunction(std::string_view name, bool member, uint32_t libraries);
// The parsed overloads of the function `name` (either call style), or nullptr if it declares
// none.
const std::vector<Signature>* FindSignatures(std::string_view name);
// The checked type of a result of `kind` without parameters (list: list(dyn); optional, null:
// dyn).
Type TypeOfKind(Type::Kind kind);
// The result type with parameters that every overload of `name` declares (split:
// list(string)), or nullptr.
const Type* FindDeclaredResult(std::string_view name);
// Whether any function (any style) has this name (for "undeclared reference" errors).
bool IsFunctionName(std::string_view name, uint32_t libraries);

// Shared with the Kubernetes libraries (k8s.cc): `_+_`, the traversal cost of a value, list
// membership by CEL equality, the runtime cost of matches() / find() (string and regex sizes).
Val AddValues(Ctx& ctx, const Val* args, uint32_t n);
uint64_t RegexCallCost(const Val* args, uint32_t n);
uint64_t TraversalCostOf(const Val& v);
bool ListContains(const Val& list, const Val& v);

// Value semantics shared by functions and nodes.
// Equal: CEL equality; returns an error Val only if an operand is an error.
Val Equal(Ctx& ctx, const Val& a, const Val& b);
bool EqualBool(const Val& a, const Val& b);  // no errors: mismatched kinds are unequal
// cel-go's types.Equal (`null_check`) or the left operand's Equal method: Kubernetes' library
// types (Quantity, Semver, IP, CIDR, format, URL) fail with "no such overload" on another type
// on the right; a list or map is equal unless a member compares false (a failing member does not
// count); an optional compares its values; a null compares by nullness.
enum class EqualResult : unsigned char { kFalse, kTrue, kNoOverload };
EqualResult EqualTri(const Val& a, const Val& b, bool null_check = true);
// Compare for ordering: -1/0/1, or nullopt if not comparable.
std::optional<int> Compare(const Val& a, const Val& b);
// Map lookups (generic maps, device maps); returns nullptr-equivalent via `found`.
bool MapFind(Ctx& ctx, const Val& map, const Val& key, Val* out);
// Whether two map keys are the same Go map key in cel-go (EnvironmentOptions::go_map_keys): same
// kind and value, identity for values that are pointers upstream.
bool GoKeyEqual(const Val& a, const Val& b);
// The panic text of a key cel-go cannot hash (Semver, format, bytes) when storing it (or, with
// `deleting`, removing it: an absent optional entry); empty for hashable keys.
std::string_view UnhashableKey(const Val& k, bool deleting = false);
// The Go type name of a cel-go value, as upstream error texts print it (%T).
std::string GoValueTypeName(const Val& v);
// Size of a map-like value.
uint32_t MapSize(Ctx& ctx, const Val& map);
// Keys of a map-like value, materialized as a list.
Val MapKeys(Ctx& ctx, const Val& map);
// Field selection `operand.field` on maps, device objects; error otherwise.
Val Select(Ctx& ctx, const Val& operand, std::string_view field);
// Whether device.attributes / device.capacity (a kDeviceMap) has no domain.
bool DeviceMapEmpty(const Val& map);
// `key in map` on device.attributes / device.capacity: only the device's domains.
bool DeviceMapContains(Ctx& ctx, const Val& map, const Val& key);
// Presence test (has()).
Val Has(Ctx& ctx, const Val& operand, std::string_view field);
// Index `operand[key]`.
Val Index(Ctx& ctx, const Val& operand, const Val& key);
// Optional select / index (`.?f`, `[?k]`).
Val OptSelect(Ctx& ctx, const Val& operand, std::string_view field);
Val OptIndex(Ctx& ctx, const Val& operand, const Val& key);
// Converts one DRA attribute to a Val (versions are parsed; lists become lists).
Val AttributeToVal(Ctx& ctx, const dra::Attribute& attr);
// DRA device field access.
Val DeviceField(Ctx& ctx, const dra::DeviceView* dev, std::string_view field);
Val DomainLookup(Ctx& ctx, const dra::DeviceView* dev, bool capacity, std::string_view domain,
                 std::string_view id, bool* found);

// Go-compatible formatting of doubles (strconv.FormatFloat(d, 'g', -1, 64) style used by CEL's
// string(double)).
std::string FormatDouble(double d);

// Regular expressions (RE2), shared by matches/find/findAll and the checker.
class Regex;
// Compile returns nullptr and sets `error` when RE2 rejects the pattern.
std::shared_ptr<const Regex> CompileRegex(std::string_view pattern, std::string* error);
bool RegexMatch(const Regex& re, std::string_view text);
Val RegexFind(Ctx& ctx, const Regex& re, std::string_view text);
Val RegexFindAll(Ctx& ctx, const Regex& re, std::string_view text, int64_t limit);

// Timestamps and durations (time.cc).
// RFC 3339 with trimmed nanos, as Go's time.RFC3339Nano prints a time whose location is
// `tz_minutes` east of UTC ("Z" for 0).
std::string FormatTimestamp(int64_t seconds, uint32_t nanos, int tz_minutes = 0);
std::string FormatDuration(int64_t seconds, uint32_t nanos);   // "1.5s"
// The duration in int64 nanoseconds (int(duration)); `overflow` when it does not fit.
int64_t DurationNanosSaturated(const Val& v, bool* overflow);
// ts + dur, dur + ts, dur + dur; with `subtract`: ts - dur, ts - ts, dur - dur.
Val NegateDuration(Ctx& ctx, const Val& d);  // "integer overflow" for the smallest duration
Val TimeAdd(Ctx& ctx, const Val& x, const Val& y, bool subtract);
std::vector<FunctionDef> TimeFunctions();

// Kubernetes object hooks (k8s.cc).
Val ParseQuantityVal(Ctx& ctx, std::string_view text);  // error Val on failure
Val ParseSemverVal(Ctx& ctx, std::string_view text, bool normalize);
bool QuantityEqual(const Quantity& a, const Quantity& b);
bool SemverEqual(const Semver& a, const Semver& b);
std::string QuantityString(const Quantity& q);
std::string SemverString(const Semver& v);
std::shared_ptr<const Quantity> CopyQuantity(const Quantity& q);
std::shared_ptr<const Semver> CopySemver(const Semver& v);

// The format library (format.cc): its functions, and a named format's name by id and back
// (-1 for an unknown name).
std::vector<FunctionDef> FormatFunctions();
std::string_view FormatName(int64_t id);
int64_t FormatIdOf(std::string_view name);

}  // namespace devlet::cel::internal
