// The function library: CEL standard functions, strings v2, lists v3, sets, optionals and the
// macro helpers. The Kubernetes libraries are k8s.cc's (format: format.cc).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "devlet/common/strings.h"
#include "devlet/cel/dra.h"
#include "eval.h"
#include "netip.h"
#include "utf8.h"

namespace devlet::cel::internal {

std::vector<FunctionDef> KubernetesObjectFunctions();  // k8s.cc

namespace {

using K = Type::Kind;

bool IsNum(const Val& v) { return v.kind == VK::kInt || v.kind == VK::kUint || v.kind == VK::kDouble; }

// Values are bounded independently of the cost limit (which callers may turn off): strings and
// lists larger than this are errors rather than an exhausted machine.
constexpr size_t kMaxValueSize = size_t{1} << 28;
Val TooLarge(Ctx& ctx) { return ctx.Error("value too large: exceeds " + std::to_string(kMaxValueSize) + " bytes or elements"); }

#define NO_OVERLOAD(name) return ctx.NoOverload(name, a, n)

// ---- Runtime costs (cel-go interpreter/runtimecost.go and Kubernetes library/cost.go) ----------

uint64_t ActualSize(const Val& v);

[[gnu::noinline]] uint64_t RareActualSize(const Val& v) {
  uint64_t size = 0;
  switch (v.kind) {
    case VK::kDeviceMap: {
      auto count = [&](std::string_view) { ++size; };
      if (v.sub == 0) {
        v.dev->ForEachAttributeDomain(count);
      } else {
        v.dev->ForEachCapacityDomain(count);
      }
      return size;
    }
    case VK::kDomainMap:
      if (v.dom->capacity) {
        v.dom->dev->ForEachCapacity(v.dom->domain, [&](std::string_view, const Quantity&) { ++size; });
      } else {
        v.dom->dev->ForEachAttribute(v.dom->domain,
                                     [&](std::string_view, const dra::Attribute&) { ++size; });
      }
      return size;
    case VK::kOptional: return v.opt == nullptr ? 1 : ActualSize(*v.opt);
    default: return 1;
  }
}

// cel-go's actualSize: Size() of sized values (code points for strings), else 1.
uint64_t ActualSize(const Val& v) {
  switch (v.kind) {
    case VK::kString: return Utf8CountCodePoints(v.str());
    case VK::kBytes:
    case VK::kList:
    case VK::kMap: return v.n;
    case VK::kIP: return v.ip->is4 ? 4 : 16;  // net.IP's Size(): bytes of the address
    case VK::kCIDR: return static_cast<uint64_t>((v.cidr->bits + 7) / 8);  // prefix bytes
    // Kubernetes' device maps are Sizers too (an absent domain is an empty map, size 0), and
    // cel-go's actualSize looks through a present optional: rare, out of line.
    case VK::kDeviceMap:
    case VK::kDomainMap:
    case VK::kOptional: return RareActualSize(v);
    default: return 1;
  }
}
bool IsText(const Val& v) { return v.kind == VK::kString || v.kind == VK::kBytes; }
uint64_t EqCost(const Val* a, uint32_t) { return CostOf(0.1, std::min(ActualSize(a[0]), ActualSize(a[1]))); }
// Kubernetes' CallCost prices `==` with a library object on the left at 1 (`!=` it leaves to
// cel-go, which charges by size).
// That holds whatever the right operand is: `semver == ""` fails and costs 1.
uint64_t EqualsCost(const Val* a, uint32_t n) {
  return a[0].kind == VK::kIP || a[0].kind == VK::kCIDR || a[0].kind == VK::kFormat ||
                 a[0].kind == VK::kURL || a[0].kind == VK::kQuantity || a[0].kind == VK::kSemver
             ? 1
             : EqCost(a, n);
}
uint64_t AddCost(const Val* a, uint32_t) {
  return IsText(a[0]) && a[0].kind == a[1].kind ? CostOf(0.1, ActualSize(a[0]) + ActualSize(a[1])) : 1;
}
uint64_t ReceiverTraverseCost(const Val* a, uint32_t) { return CostOf(0.1, ActualSize(a[0])); }
// startsWith/endsWith: the Kubernetes cel-go version charges the prefix/suffix traversal.
uint64_t PrefixCost(const Val* a, uint32_t) { return CostOf(0.1, ActualSize(a[1])); }
uint64_t ReceiverTraverse2Cost(const Val* a, uint32_t) { return CostOf(0.2, ActualSize(a[0])); }
// string(bytes) and bytes(string) traverse their argument; string(string) and bytes(bytes) are
// cel-go's identity overloads, priced 1 like every other conversion.
uint64_t StringConversionCost(const Val* a, uint32_t) {
  return a[0].kind == VK::kBytes ? CostOf(0.1, ActualSize(a[0])) : 1;
}
uint64_t BytesConversionCost(const Val* a, uint32_t) {
  return a[0].kind == VK::kString ? CostOf(0.1, ActualSize(a[0])) : 1;
}
uint64_t JoinCost(const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList) return 1;
  uint64_t size = 0;
  for (uint32_t i = 0; i < a[0].n; ++i) size += ActualSize(a[0].l->data[i]);
  if (n == 2 && a[0].n > 1) size += ActualSize(a[1]) * (a[0].n - 1);
  return CostOf(0.2, size);
}
// Kubernetes' traversalCost: strings floor(0.1 * bytes), containers the sum over elements.
uint64_t Traversal(const Val& v) {
  switch (v.kind) {
    case VK::kString:
    case VK::kBytes: return static_cast<uint64_t>(static_cast<double>(v.n) * 0.1);
    case VK::kList: {
      uint64_t c = 0;
      for (uint32_t i = 0; i < v.n; ++i) c += Traversal(v.l->data[i]);
      return c;
    }
    case VK::kMap: {
      uint64_t c = 0;
      for (uint32_t i = 0; i < v.n; ++i) c += Traversal(v.m->keys[i]) + Traversal(v.m->vals[i]);
      return c;
    }
    default: return 1;
  }
}
uint64_t TraversalCost(const Val* a, uint32_t) { return Traversal(a[0]); }

// ---- Arithmetic ------------------------------------------------------------------------------

bool IsTime(const Val& v) { return v.kind == VK::kTimestamp || v.kind == VK::kDuration; }

Val Add(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (IsTime(x) && IsTime(y)) return TimeAdd(ctx, x, y, false);
  if (x.kind != y.kind) NO_OVERLOAD("_+_");
  switch (x.kind) {
    case VK::kInt: {
      int64_t r;
      if (__builtin_add_overflow(x.i, y.i, &r)) return ctx.Error("integer overflow");
      return Val::Int(r);
    }
    case VK::kUint: {
      uint64_t r;
      if (__builtin_add_overflow(x.u, y.u, &r)) return ctx.Error("unsigned integer overflow");
      return Val::Uint(r);
    }
    case VK::kDouble: return Val::Double(x.d + y.d);
    case VK::kString:
    case VK::kBytes: {
      if (size_t{x.n} + y.n > kMaxValueSize) return TooLarge(ctx);
      std::string s(x.str());
      s.append(y.str());
      return ctx.String(s, x.kind);
    }
    case VK::kList:
      if (size_t{x.n} + y.n > kMaxValueSize) return TooLarge(ctx);
      return ctx.Append(x, y.list_data(), y.n);
    default: NO_OVERLOAD("_+_");
  }
}

Val Sub(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (IsTime(x) && IsTime(y)) return TimeAdd(ctx, x, y, true);
  if (x.kind != y.kind) NO_OVERLOAD("_-_");
  switch (x.kind) {
    case VK::kInt: {
      int64_t r;
      if (__builtin_sub_overflow(x.i, y.i, &r)) return ctx.Error("integer overflow");
      return Val::Int(r);
    }
    case VK::kUint: {
      uint64_t r;
      if (__builtin_sub_overflow(x.u, y.u, &r)) return ctx.Error("unsigned integer overflow");
      return Val::Uint(r);
    }
    case VK::kDouble: return Val::Double(x.d - y.d);
    default: NO_OVERLOAD("_-_");
  }
}

Val Mul(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (x.kind != y.kind) NO_OVERLOAD("_*_");
  switch (x.kind) {
    case VK::kInt: {
      int64_t r;
      if (__builtin_mul_overflow(x.i, y.i, &r)) return ctx.Error("integer overflow");
      return Val::Int(r);
    }
    case VK::kUint: {
      uint64_t r;
      if (__builtin_mul_overflow(x.u, y.u, &r)) return ctx.Error("unsigned integer overflow");
      return Val::Uint(r);
    }
    case VK::kDouble: return Val::Double(x.d * y.d);
    default: NO_OVERLOAD("_*_");
  }
}

Val Div(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (x.kind != y.kind) NO_OVERLOAD("_/_");
  switch (x.kind) {
    case VK::kInt:
      if (y.i == 0) return ctx.Error("division by zero");
      if (x.i == INT64_MIN && y.i == -1) return ctx.Error("integer overflow");
      return Val::Int(x.i / y.i);
    case VK::kUint:
      if (y.u == 0) return ctx.Error("division by zero");
      return Val::Uint(x.u / y.u);
    case VK::kDouble: return Val::Double(x.d / y.d);
    default: NO_OVERLOAD("_/_");
  }
}

Val Mod(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (x.kind != y.kind) NO_OVERLOAD("_%_");
  switch (x.kind) {
    case VK::kInt:
      if (y.i == 0) return ctx.Error("modulus by zero");
      if (x.i == INT64_MIN && y.i == -1) return ctx.Error("integer overflow");
      return Val::Int(x.i % y.i);
    case VK::kUint:
      if (y.u == 0) return ctx.Error("modulus by zero");
      return Val::Uint(x.u % y.u);
    default: NO_OVERLOAD("_%_");
  }
}

Val Neg(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kInt) {
    if (a[0].i == INT64_MIN) return ctx.Error("integer overflow");
    return Val::Int(-a[0].i);
  }
  if (a[0].kind == VK::kDouble) return Val::Double(-a[0].d);
  // Not declared for the checker (no '-_' on duration), but Duration is a Negater at runtime.
  if (a[0].kind == VK::kDuration) return NegateDuration(ctx, a[0]);
  NO_OVERLOAD("-_");
}

Val Not(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kBool) return Val::Bool(!a[0].b);
  NO_OVERLOAD("!_");
}

// ---- Comparison ------------------------------------------------------------------------------

// cel-go's Quantity.Equal / Semver.Equal type-assert the right operand: anything but a plain
// Quantity (resp. Semver) on the right of a Quantity (Semver) is "no such overload", also inside
// optionals; lists and maps ignore such members (EqualTri).
Val EqualOp(Ctx& ctx, const Val* a, uint32_t n, const char* name) {
  if (a[0].is_error()) return a[0];
  if (a[1].is_error()) return a[1];
  switch (EqualTri(a[0], a[1])) {
    case EqualResult::kTrue: return Val::Bool(true);
    case EqualResult::kFalse: return Val::Bool(false);
    case EqualResult::kNoOverload: break;
  }
  return ctx.NoOverload(name, a, n);
}
Val Eq(Ctx& ctx, const Val* a, uint32_t n) { return EqualOp(ctx, a, n, "_==_"); }
// cel-go's != is `Equal(a, b) != true`: it never reports "no such overload".
Val Ne(Ctx& /*ctx*/, const Val* a, uint32_t) {
  if (a[0].is_error()) return a[0];
  if (a[1].is_error()) return a[1];
  return Val::Bool(EqualTri(a[0], a[1]) != EqualResult::kTrue);
}

template <int kOp>
Val Relation(Ctx& ctx, const Val* a, uint32_t n) {
  static constexpr const char* kNames[] = {"_<_", "_<=_", "_>_", "_>=_"};
  const std::optional<int> c = Compare(a[0], a[1]);
  if (!c) {
    if (IsNum(a[0]) && IsNum(a[1])) {  // NaN
      return ctx.nan_ordering_errors ? ctx.Error("NaN values cannot be ordered") : Val::Bool(false);
    }
    NO_OVERLOAD(kNames[kOp]);
  }
  switch (kOp) {
    case 0: return Val::Bool(*c < 0);
    case 1: return Val::Bool(*c <= 0);
    case 2: return Val::Bool(*c > 0);
    default: return Val::Bool(*c >= 0);
  }
}
uint64_t RelCost(const Val* a, uint32_t) {
  const bool sized = (a[0].kind == VK::kString || a[0].kind == VK::kBytes) && a[0].kind == a[1].kind;
  return sized ? std::max<uint64_t>(1, CostOf(0.1, std::min(a[0].n, a[1].n))) : 1;
}

Val In(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  const Val& c = a[1];
  if (c.kind == VK::kList) {
    for (uint32_t i = 0; i < c.n; ++i) {
      if (EqualBool(x, c.l->data[i])) return Val::Bool(true);
    }
    return Val::Bool(false);
  }
  if (c.kind == VK::kMap || c.kind == VK::kDeviceMap || c.kind == VK::kDomainMap) {
    if (c.kind == VK::kDeviceMap) return Val::Bool(DeviceMapContains(ctx, c, x));
    Val out;
    return Val::Bool(MapFind(ctx, c, x, &out));
  }
  NO_OVERLOAD("@in");
}
uint64_t InCost(const Val* a, uint32_t) {
  if (a[1].kind != VK::kList) return 1;
  return a[1].n;  // `in` on a constant list is a set lookup, costed by the planner (CallShape)
}

// ---- Size and strings --------------------------------------------------------------------

Val Size(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  switch (x.kind) {
    case VK::kString: return Val::Int(static_cast<int64_t>(Utf8CountCodePoints(x.str())));
    case VK::kBytes:
    case VK::kList: return Val::Int(x.n);
    case VK::kMap:
    case VK::kDeviceMap:
    case VK::kDomainMap: return Val::Int(MapSize(ctx, x));
    default: NO_OVERLOAD("size");
  }
}

Val Contains(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString || a[1].kind != VK::kString) NO_OVERLOAD("contains");
  return Val::Bool(a[0].str().find(a[1].str()) != std::string_view::npos);
}
uint64_t ContainsCost(const Val* a, uint32_t) {
  return CostOf(0.1, ActualSize(a[0])) * CostOf(0.1, ActualSize(a[1]));
}
Val StartsWith(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString || a[1].kind != VK::kString) NO_OVERLOAD("startsWith");
  return Val::Bool(a[0].str().substr(0, a[1].n) == a[1].str());
}
Val EndsWith(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString || a[1].kind != VK::kString) NO_OVERLOAD("endsWith");
  return Val::Bool(a[0].n >= a[1].n && a[0].str().substr(a[0].n - a[1].n) == a[1].str());
}
// ext.Lists v3 cost trackers (cel-go ext/lists.go): a call that allocates a list costs 1 + 10
// (ListCreateBaseCost) + factor * size. The result size is derived from the arguments, as the cost
// is charged before the work (an error result has size 1).
uint64_t AllocatingListCost(double factor, uint64_t size) {
  return static_cast<uint64_t>(static_cast<double>(size) * factor) + 11;
}
uint64_t SliceCost(const Val* a, uint32_t) {
  if (a[0].kind == VK::kList && a[1].kind == VK::kInt && a[2].kind == VK::kInt && a[1].i >= 0 &&
      a[1].i <= a[2].i && a[2].i <= a[0].n) {
    return AllocatingListCost(1, static_cast<uint64_t>(a[2].i - a[1].i));
  }
  return AllocatingListCost(1, 1);
}
uint64_t FlattenCost(const Val* a, uint32_t n) {
  double depth = n == 2 && a[1].kind == VK::kInt ? static_cast<double>(a[1].i) : 1.0;
  if (depth < 0) depth = 1.0;
  return AllocatingListCost(depth, ActualSize(a[0]));
}
uint64_t ReverseCost(const Val* a, uint32_t) {
  return AllocatingListCost(1, a[0].kind == VK::kList ? a[0].n : 1);
}
// lists.range(n): the result has n elements (an error result, size 1, for a negative n or one over
// the limit).
uint64_t RangeCost(const Val* a, uint32_t) {
  const bool ok = a[0].kind == VK::kInt && a[0].i >= 0 && a[0].i <= 1'000'000;
  return AllocatingListCost(1, ok ? static_cast<uint64_t>(a[0].i) : 1);
}
// distinct, sort and sortBy compare every pair: factor 2 (+0.1 for strings and bytes) * size^2.
uint64_t SelfCompareCost(const Val& l) {
  const uint64_t sz = ActualSize(l);
  double factor = 2.0;
  if (sz == 0 || l.kind != VK::kList) return AllocatingListCost(factor, l.kind == VK::kList ? 0 : sz * sz);
  if (IsText(l.l->data[0])) factor += 0.1;
  return AllocatingListCost(factor, sz * sz);
}
uint64_t SelfCompareReceiverCost(const Val* a, uint32_t) { return SelfCompareCost(a[0]); }
uint64_t SelfCompareKeysCost(const Val* a, uint32_t) { return SelfCompareCost(a[1]); }

Val Matches(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString || a[1].kind != VK::kString) NO_OVERLOAD("matches");
  std::string error;
  auto re = CompileRegex(a[1].str(), &error);
  if (!re) return ctx.Error(error);
  return Val::Bool(RegexMatch(*re, a[0].str()));
}
uint64_t MatchesCost(const Val* a, uint32_t) {
  return std::max<uint64_t>(1, CostOf(0.1, uint64_t{a[0].n} + 1) * CostOf(0.25, a[1].n));
}

// ---- Conversions -------------------------------------------------------------------------

bool ParseInt64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, *out, 10);
  return ec == std::errc() && p == e;
}

Val ToInt(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  switch (x.kind) {
    case VK::kInt: return x;
    case VK::kTimestamp: return Val::Int(x.i);
    case VK::kDuration: {
      bool overflow = false;
      const int64_t v = DurationNanosSaturated(x, &overflow);
      if (overflow) return ctx.Error("integer overflow");
      return Val::Int(v);
    }
    case VK::kUint:
      if (x.u > static_cast<uint64_t>(INT64_MAX)) return ctx.Error("integer overflow");
      return Val::Int(static_cast<int64_t>(x.u));
    case VK::kDouble:
      if (std::isnan(x.d) || x.d <= -9223372036854775808.0 || x.d >= 9223372036854775807.0) {
        return ctx.Error("integer overflow");
      }
      return Val::Int(static_cast<int64_t>(x.d));
    case VK::kString: {
      int64_t v;
      if (!ParseInt64(x.str(), &v)) return ctx.Error("type conversion error from 'string' to 'int'");
      return Val::Int(v);
    }
    default: NO_OVERLOAD("int");
  }
}

Val ToUint(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  switch (x.kind) {
    case VK::kUint: return x;
    case VK::kInt:
      if (x.i < 0) return ctx.Error("unsigned integer overflow");
      return Val::Uint(static_cast<uint64_t>(x.i));
    case VK::kDouble:
      if (std::isnan(x.d) || x.d < 0 || x.d >= 18446744073709551615.0) {
        return ctx.Error("unsigned integer overflow");
      }
      return Val::Uint(static_cast<uint64_t>(x.d));
    case VK::kString: {
      // Initialized for GCC 12 at -Os (MinSizeRel), which cannot see that from_chars sets it on
      // success and stops on -Werror=maybe-uninitialized.
      uint64_t v = 0;
      std::string_view s = x.str();
      if (!s.empty() && s[0] == '+') s.remove_prefix(1);
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
      if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
        return ctx.Error("type conversion error from 'string' to 'uint'");
      }
      return Val::Uint(v);
    }
    default: NO_OVERLOAD("uint");
  }
}

Val ToDouble(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  switch (x.kind) {
    case VK::kDouble: return x;
    case VK::kInt: return Val::Double(static_cast<double>(x.i));
    case VK::kUint: return Val::Double(static_cast<double>(x.u));
    case VK::kString: {
      const std::string s(x.str());
      std::string lower;
      for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const std::string_view l = lower;
      if (l == "inf" || l == "+inf" || l == "infinity" || l == "+infinity") return Val::Double(INFINITY);
      if (l == "-inf" || l == "-infinity") return Val::Double(-INFINITY);
      if (l == "nan") return Val::Double(NAN);
      if (s.empty() || std::isspace(static_cast<unsigned char>(s[0])) || l.find("inf") != std::string::npos ||
          l.find("nan") != std::string::npos) {
        return ctx.Error("type conversion error from 'string' to 'double'");
      }
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (end != s.c_str() + s.size()) return ctx.Error("type conversion error from 'string' to 'double'");
      return Val::Double(d);
    }
    default: NO_OVERLOAD("double");
  }
}

Val ToString(Ctx& ctx, const Val* a, uint32_t n) {
  const Val& x = a[0];
  switch (x.kind) {
    case VK::kString: return x;
    case VK::kInt: return ctx.String(std::to_string(x.i));
    case VK::kUint: return ctx.String(std::to_string(x.u));
    case VK::kDouble: return ctx.String(FormatDouble(x.d));
    case VK::kBool: return Val::Str(x.b ? "true" : "false");
    case VK::kBytes:
      if (!Utf8Valid(x.str())) return ctx.Error("invalid UTF-8 in bytes, cannot convert to string");
      return Val::Str(x.str());
    case VK::kType: return Val::Str(x.str());
    // Go's Time.Format keeps the location time.Parse gave it.
    case VK::kTimestamp: return ctx.String(FormatTimestamp(x.i, x.n, x.tz_minutes));
    case VK::kDuration: return ctx.String(FormatDuration(x.i, x.n));
    case VK::kIP: return ctx.String(x.ip->ToString());
    case VK::kCIDR: return ctx.String(x.cidr->ToString());
    default: NO_OVERLOAD("string");
  }
}

Val ToBytes(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kBytes) return a[0];
  if (a[0].kind == VK::kString) return Val::Str(a[0].str(), VK::kBytes);
  NO_OVERLOAD("bytes");
}

Val ToBool(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kBool) return a[0];
  if (a[0].kind == VK::kString) {
    const std::string_view s = a[0].str();
    if (s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True") return Val::Bool(true);
    if (s == "0" || s == "f" || s == "F" || s == "false" || s == "FALSE" || s == "False") return Val::Bool(false);
    return ctx.Error("type conversion error from 'string' to 'bool'");
  }
  NO_OVERLOAD("bool");
}

Val Dyn(Ctx&, const Val* a, uint32_t) { return a[0]; }
Val TypeOf(Ctx&, const Val* a, uint32_t) { return Val::TypeName(TypeNameOf(a[0])); }

// ---- Optionals ---------------------------------------------------------------------------

Val OptionalOf(Ctx& ctx, const Val* a, uint32_t) { return ctx.Optional(a[0]); }
Val OptionalNone(Ctx&, const Val*, uint32_t) { return Val::Opt(nullptr); }
bool IsZero(const Val& v) {
  switch (v.kind) {
    case VK::kNull: return true;
    case VK::kBool: return !v.b;
    case VK::kInt: return v.i == 0;
    case VK::kUint: return v.u == 0;
    case VK::kDouble: return v.d == 0;
    case VK::kString:
    case VK::kBytes:
    case VK::kList:
    case VK::kMap: return v.n == 0;
    default: return false;
  }
}
Val OptionalOfNonZero(Ctx& ctx, const Val* a, uint32_t) {
  return IsZero(a[0]) ? Val::Opt(nullptr) : ctx.Optional(a[0]);
}
Val HasValue(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kOptional) NO_OVERLOAD("hasValue");
  return Val::Bool(a[0].opt != nullptr);
}
Val OptValue(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kOptional) NO_OVERLOAD("value");
  if (a[0].opt == nullptr) return ctx.Error("optional.none() dereference");
  return *a[0].opt;
}
Val OptOr(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kOptional) NO_OVERLOAD("or");
  return a[0].opt ? a[0] : a[1];
}
Val OptOrValue(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kOptional) NO_OVERLOAD("orValue");
  return a[0].opt ? *a[0].opt : a[1];
}
// list.first() / list.last(): cel-go's optional library (version 2, which Kubernetes'
// OptionalTypes() enables): the element as optional.of(e), optional.none() for an empty list.
Val ListFirst(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList) NO_OVERLOAD("first");
  return a[0].n == 0 ? Val::Opt(nullptr) : ctx.Optional(a[0].l->data[0]);
}
Val ListLast(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList) NO_OVERLOAD("last");
  return a[0].n == 0 ? Val::Opt(nullptr) : ctx.Optional(a[0].l->data[a[0].n - 1]);
}
// optional.unwrap(list) / list.unwrapOpt(): the optional library v2 as well: the values of the
// elements that have one, in order. A later element that is not an optional (only reachable
// through dyn) fails as cel-go's does ("value 1 is not optional"; Go's %v of the value, which string()
// matches for the scalars).
Val OptUnwrapImpl(Ctx& ctx, const Val* a, uint32_t n, const char* name) {
  // cel-go's runtime overload guard checks a list's first element only: a first element that is
  // not an optional is no overload, a later one reaches the function's own error.
  if (a[0].kind != VK::kList || (a[0].n > 0 && a[0].l->data[0].kind != VK::kOptional)) {
    NO_OVERLOAD(name);
  }
  std::vector<Val> out;
  for (uint32_t i = 0; i < a[0].n; ++i) {
    const Val& e = a[0].l->data[i];
    if (e.kind != VK::kOptional) {
      Val text = ToString(ctx, &e, 1);
      return ctx.Error("value " + (text.kind == VK::kString ? std::string(text.str()) : GoValueTypeName(e)) +
                       " is not optional");
    }
    if (e.opt != nullptr) out.push_back(*e.opt);
  }
  return ctx.List(out.data(), static_cast<uint32_t>(out.size()));
}
Val OptUnwrap(Ctx& ctx, const Val* a, uint32_t n) { return OptUnwrapImpl(ctx, a, n, "optional.unwrap"); }
Val UnwrapOpt(Ctx& ctx, const Val* a, uint32_t n) { return OptUnwrapImpl(ctx, a, n, "unwrapOpt"); }

// ---- Strings extension (v2) ----------------------------------------------------------------

bool Str(const Val& v) { return v.kind == VK::kString; }

Val CharAt(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0]) || a[1].kind != VK::kInt) NO_OVERLOAD("charAt");
  const std::u32string s = Utf8Decode(a[0].str());
  const int64_t i = a[1].i;
  if (i < 0 || i > static_cast<int64_t>(s.size())) return ctx.Error("index out of range: " + std::to_string(i));
  if (i == static_cast<int64_t>(s.size())) return Val::Str("");
  return ctx.String(Utf8Encode(s.substr(i, 1)));
}

Val IndexOfImpl(Ctx& ctx, const Val* a, uint32_t n, bool last) {
  const char* name = last ? "lastIndexOf" : "indexOf";
  if (a[0].kind == VK::kList) {  // Kubernetes lists library
    if (n != 2) NO_OVERLOAD(name);
    if (last) {
      for (uint32_t i = a[0].n; i-- > 0;) {
        if (EqualBool(a[0].l->data[i], a[1])) return Val::Int(i);
      }
    } else {
      for (uint32_t i = 0; i < a[0].n; ++i) {
        if (EqualBool(a[0].l->data[i], a[1])) return Val::Int(i);
      }
    }
    return Val::Int(-1);
  }
  if (!Str(a[0]) || !Str(a[1]) || (n == 3 && a[2].kind != VK::kInt)) NO_OVERLOAD(name);
  const std::u32string s = Utf8Decode(a[0].str());
  const std::u32string sub = Utf8Decode(a[1].str());
  const auto len = static_cast<int64_t>(s.size());
  const auto sublen = static_cast<int64_t>(sub.size());
  if (!ctx.strict_format) {
    // The cel-spec conformance rules: an offset outside [0, size] fails.
    const int64_t off = n == 3 ? a[2].i : (last ? len : 0);
    if (off < 0 || off > len) return ctx.Error("index out of range: " + std::to_string(off));
    if (sub.empty()) return Val::Int(off);
    if (!last) {
      const size_t pos = s.find(sub, static_cast<size_t>(off));
      return Val::Int(pos == std::u32string::npos ? -1 : static_cast<int64_t>(pos));
    }
    if (sublen > len) return Val::Int(-1);
    const size_t pos = s.rfind(sub, static_cast<size_t>(off));
    return Val::Int(pos == std::u32string::npos ? -1 : static_cast<int64_t>(pos));
  }
  // Kubernetes' ext.Strings, cel-go v0.29.2 ext/strings.go (indexOf, indexOfOffset, lastIndexOf,
  // lastIndexOfOffset), in code points: a negative offset fails, an empty needle matches at the
  // offset clamped to the end, an offset at or past the end finds nothing.
  int64_t offset = 0;
  if (n == 3) {
    offset = a[2].i;
  } else if (last) {
    if (sub.empty()) return Val::Int(len);
    if (a[0].str().size() < a[1].str().size()) return Val::Int(-1);  // Go compares bytes here
    offset = len - 1;
  }
  if (offset < 0) return ctx.Error("index out of range: " + std::to_string(offset));
  if (sub.empty()) return Val::Int(std::min(offset, len));
  if (offset >= len) return Val::Int(-1);
  if (!last) {
    for (int64_t i = offset; i < len - (sublen - 1); ++i) {
      if (s.compare(static_cast<size_t>(i), sub.size(), sub) == 0) return Val::Int(i);
    }
    return Val::Int(-1);
  }
  if (offset > len - sublen) offset = len - sublen;
  for (int64_t i = offset; i >= 0; --i) {
    if (s.compare(static_cast<size_t>(i), sub.size(), sub) == 0) return Val::Int(i);
  }
  return Val::Int(-1);
}
Val IndexOf(Ctx& ctx, const Val* a, uint32_t n) { return IndexOfImpl(ctx, a, n, false); }
Val LastIndexOf(Ctx& ctx, const Val* a, uint32_t n) { return IndexOfImpl(ctx, a, n, true); }

Val LowerAscii(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0])) NO_OVERLOAD("lowerAscii");
  std::string s(a[0].str());
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return ctx.String(s);
}
Val UpperAscii(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0])) NO_OVERLOAD("upperAscii");
  std::string s(a[0].str());
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return ctx.String(s);
}

Val Replace(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0]) || !Str(a[1]) || !Str(a[2]) || (n == 4 && a[3].kind != VK::kInt)) NO_OVERLOAD("replace");
  int64_t limit = n == 4 ? a[3].i : -1;
  const std::string_view s = a[0].str(), from = a[1].str(), to = a[2].str();
  std::string out;
  if (from.empty()) {
    // Go strings.Replace with empty old: insert `to` before each code point and at the end.
    size_t i = 0;
    while (limit != 0 && i <= s.size()) {
      if (out.size() > kMaxValueSize) return TooLarge(ctx);
      out.append(to);
      if (limit > 0) --limit;
      if (i == s.size()) {
        i = s.size() + 1;
        break;
      }
      const size_t len = std::max<size_t>(1, Utf8SequenceLength(s, i));
      out.append(s.substr(i, len));
      i += len;
    }
    if (i <= s.size()) out.append(s.substr(i));
    return ctx.String(out);
  }
  size_t pos = 0;
  while (limit != 0) {
    const size_t f = s.find(from, pos);
    if (f == std::string_view::npos) break;
    if (out.size() > kMaxValueSize) return TooLarge(ctx);
    out.append(s.substr(pos, f - pos));
    out.append(to);
    pos = f + from.size();
    if (limit > 0) --limit;
  }
  out.append(s.substr(pos));
  return ctx.String(out);
}

Val Split(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0]) || !Str(a[1]) || (n == 3 && a[2].kind != VK::kInt)) NO_OVERLOAD("split");
  const int64_t limit = n == 3 ? a[2].i : -1;
  const std::string_view s = a[0].str(), sep = a[1].str();
  std::vector<Val> parts;
  if (limit == 0) return ctx.List(nullptr, 0);
  if (sep.empty()) {
    size_t i = 0;
    while (i < s.size()) {
      if (limit > 0 && static_cast<int64_t>(parts.size()) == limit - 1) {
        parts.push_back(Val::Str(s.substr(i)));
        i = s.size();
        break;
      }
      const size_t len = std::max<size_t>(1, Utf8SequenceLength(s, i));
      parts.push_back(Val::Str(s.substr(i, len)));
      i += len;
    }
  } else {
    size_t pos = 0;
    while (true) {
      if (limit > 0 && static_cast<int64_t>(parts.size()) == limit - 1) break;
      const size_t f = s.find(sep, pos);
      if (f == std::string_view::npos) break;
      parts.push_back(Val::Str(s.substr(pos, f - pos)));
      pos = f + sep.size();
    }
    parts.push_back(Val::Str(s.substr(pos)));
  }
  return ctx.List(parts.data(), static_cast<uint32_t>(parts.size()));
}

Val Substring(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0]) || a[1].kind != VK::kInt || (n == 3 && a[2].kind != VK::kInt)) NO_OVERLOAD("substring");
  const std::u32string s = Utf8Decode(a[0].str());
  const auto len = static_cast<int64_t>(s.size());
  const int64_t start = a[1].i;
  const int64_t end = n == 3 ? a[2].i : len;
  if (start < 0 || start > len) return ctx.Error("index out of range: " + std::to_string(start));
  if (end < 0 || end > len) return ctx.Error("index out of range: " + std::to_string(end));
  if (start > end) {
    return ctx.Error("invalid substring range. start: " + std::to_string(start) + ", end: " + std::to_string(end));
  }
  return ctx.String(Utf8Encode(s.substr(start, end - start)));
}

bool IsUnicodeSpace(char32_t c) {
  switch (c) {
    case U'\t': case U'\n': case U'\v': case U'\f': case U'\r': case U' ': case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

Val Trim(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0])) NO_OVERLOAD("trim");
  const std::u32string s = Utf8Decode(a[0].str());
  size_t b = 0, e = s.size();
  while (b < e && IsUnicodeSpace(s[b])) ++b;
  while (e > b && IsUnicodeSpace(s[e - 1])) --e;
  return ctx.String(Utf8Encode(s.substr(b, e - b)));
}

Val Join(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList || (n == 2 && !Str(a[1]))) NO_OVERLOAD("join");
  std::string out;
  for (uint32_t i = 0; i < a[0].n; ++i) {
    const Val& e = a[0].l->data[i];
    if (!Str(e)) NO_OVERLOAD("join");
    if (i && n == 2) out.append(a[1].str());
    out.append(e.str());
    if (out.size() > kMaxValueSize) return TooLarge(ctx);
  }
  return ctx.String(out);
}

std::string QuoteString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8SequenceLength(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    const char c = s[i];
    if (len == 1) {
      switch (c) {
        case '\a': out += "\\a"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\v': out += "\\v"; break;
        case '\\': out += "\\\\"; break;
        case '"': out += "\\\""; break;
        default: out += c;
      }
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out + "\"";
}

Val Quote(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0])) NO_OVERLOAD("strings.quote");
  return ctx.String(QuoteString(a[0].str()));
}

// ---- format()'s %s as ext.Strings version 2 does it (cel-go ext/formatting.go), Kubernetes'
// rules: a value prints as string() converts it, the members of lists and maps as CEL literals
// ("a", b"\x01", 1.500000, timestamp("..."), duration("1s"), "NaN"), map entries as
// "key:value" sorted by the printed key, map keys only strings, bools and integers.

bool FormatMemberV2(Ctx& ctx, const Val& v, std::string* out, std::string* err);

bool FormatListV2(Ctx& ctx, const Val& v, std::string* out, std::string* err) {
  *out += "[";
  for (uint32_t i = 0; i < v.n; ++i) {
    if (i) *out += ", ";
    if (!FormatMemberV2(ctx, v.l->data[i], out, err)) return false;
  }
  *out += "]";
  return true;
}

bool FormatMapV2(Ctx& ctx, const Val& v, std::string* out, std::string* err) {
  const Val keys = MapKeys(ctx, v);
  if (keys.kind != VK::kList) {
    *err = std::string(keys.str());
    return false;
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (uint32_t i = 0; i < keys.n; ++i) {
    const Val& k = keys.l->data[i];
    std::string key;
    switch (k.kind) {
      case VK::kString: key = GoQuote(k.str()); break;
      case VK::kBool: key = k.b ? "true" : "false"; break;
      case VK::kInt: key = std::to_string(k.i); break;
      case VK::kUint: key = std::to_string(k.u); break;
      default:
        *err = "no formatting function for map key of type " + std::string(TypeNameOf(k));
        return false;
    }
    std::string value;
    const Val val = Index(ctx, v, k);
    if (val.is_error()) {
      *err = std::string(val.str());
      return false;
    }
    if (!FormatMemberV2(ctx, val, &value, err)) return false;
    entries.emplace_back(std::move(key), std::move(value));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  *out += "{";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) *out += ", ";
    *out += entries[i].first + ":" + entries[i].second;
  }
  *out += "}";
  return true;
}

// string() of a bytes value, or cel-go's text for a %s of invalid UTF-8.
bool BytesAsString(const Val& v, std::string* out, std::string* err) {
  if (!Utf8Valid(v.str())) {
    *err = "could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to "
           "string";
    return false;
  }
  *out += std::string(v.str());
  return true;
}

// A list element or map value (clauseForType, then quoteForCEL).
bool FormatMemberV2(Ctx& ctx, const Val& v, std::string* out, std::string* err) {
  switch (v.kind) {
    case VK::kInt: *out += std::to_string(v.i); return true;
    case VK::kUint: *out += std::to_string(v.u); return true;
    case VK::kString: *out += GoQuote(v.str()); return true;
    case VK::kBytes: {
      std::string text;
      if (!BytesAsString(v, &text, err)) return false;
      *out += "b" + GoQuote(text);
      return true;
    }
    case VK::kBool: *out += v.b ? "true" : "false"; return true;
    case VK::kNull: *out += "null"; return true;
    case VK::kType: *out += std::string(v.str()); return true;
    case VK::kTimestamp:
      *out += "timestamp(" + GoQuote(FormatTimestamp(v.i, v.n, v.tz_minutes)) + ")";
      return true;
    case VK::kDuration: *out += "duration(" + GoQuote(FormatDuration(v.i, v.n)) + ")"; return true;
    case VK::kDouble: {
      // Go's %.6f, quoted when it is not a number.
      if (std::isnan(v.d) || std::isinf(v.d)) {
        *out += std::isnan(v.d) ? "\"NaN\"" : (v.d > 0 ? "\"+Inf\"" : "\"-Inf\"");
        return true;
      }
      char buf[400];
      std::snprintf(buf, sizeof(buf), "%.6f", v.d);
      *out += buf;
      return true;
    }
    case VK::kList: return FormatListV2(ctx, v, out, err);
    case VK::kMap:
    case VK::kDeviceMap:
    case VK::kDomainMap: return FormatMapV2(ctx, v, out, err);
    default:
      *err = "no formatting function for " + std::string(TypeNameOf(v));
      return false;
  }
}

// The %s argument itself (FormatString).
bool FormatStringV2(Ctx& ctx, const Val& v, std::string* out, std::string* err) {
  switch (v.kind) {
    case VK::kList: return FormatListV2(ctx, v, out, err);
    case VK::kMap:
    case VK::kDeviceMap:
    case VK::kDomainMap: return FormatMapV2(ctx, v, out, err);
    case VK::kInt: *out += std::to_string(v.i); return true;
    case VK::kUint: *out += std::to_string(v.u); return true;
    case VK::kDouble: *out += FormatDouble(v.d); return true;
    case VK::kBool: *out += v.b ? "true" : "false"; return true;
    case VK::kString: *out += std::string(v.str()); return true;
    case VK::kBytes: return BytesAsString(v, out, err);
    case VK::kTimestamp: *out += FormatTimestamp(v.i, v.n, v.tz_minutes); return true;
    case VK::kDuration: *out += FormatDuration(v.i, v.n); return true;
    case VK::kType: *out += std::string(v.str()); return true;
    case VK::kNull: *out += "null"; return true;
    default:
      *err = "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
             "types, durations, and timestamps, was given " +
             std::string(TypeNameOf(v));
      return false;
  }
}

// Kubernetes' cel-go prints %f and %e through golang.org/x/text's message printer (English), not
// fmt: a zero prints without its sign, infinities as "∞" and "-∞"; %f groups the integer digits
// by thousands ("1,234.500000"); %e always has six mantissa digits and a superscript exponent
// ("1.500000×10⁰⁰", "1.000000×10⁻⁰⁷"), and the clause's precision is its minimum width in
// characters, padded on the left with spaces ("%e" of NaN is "   NaN"). All seen with
// celdiff-oracle (k8s.io v0.37.2, cel-go v0.29.2).

// The largest precision printed (Go has no limit; this bounds the buffer).
constexpr int kMaxFormatPrecision = 1 << 16;

std::string FormatFixedLikeKubernetes(double d, int precision) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "∞" : "-∞";
  if (d == 0) d = 0;  // -0.0 prints as 0
  precision = std::min(precision, kMaxFormatPrecision);
  std::string plain(static_cast<size_t>(precision) + 400, '\0');
  const int n = std::snprintf(plain.data(), plain.size(), "%.*f", precision, d);
  plain.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const size_t begin = plain.starts_with('-') ? 1 : 0;
  size_t end = plain.find('.');
  if (end == std::string::npos) end = plain.size();
  std::string out = plain.substr(0, begin);
  for (size_t i = begin; i < end; ++i) {
    if (i > begin && (end - i) % 3 == 0) out += ',';
    out += plain[i];
  }
  out.append(plain, end, std::string::npos);
  return out;
}

std::string FormatScientificLikeKubernetes(double d, int width) {
  std::string out;
  size_t chars = 0;  // printed width in characters (code points)
  if (std::isnan(d)) {
    out = "NaN";
    chars = 3;
  } else if (std::isinf(d)) {
    out = d > 0 ? "∞" : "-∞";
    chars = d > 0 ? 1 : 2;
  } else {
    if (d == 0) d = 0;  // -0.0 prints as 0
    char buf[64];
    const int n = std::snprintf(buf, sizeof(buf), "%.6e", d);
    const std::string_view plain(buf, n > 0 ? static_cast<size_t>(n) : 0);
    const size_t e = plain.find('e');
    out = std::string(plain.substr(0, e)) + "×10";
    chars = e + 3;
    static constexpr const char* kSuperscript[] = {"⁰", "¹", "²", "³", "⁴",
                                                   "⁵", "⁶", "⁷", "⁸", "⁹"};
    for (size_t i = e + 1; i < plain.size(); ++i) {
      if (plain[i] == '+') continue;
      out += plain[i] == '-' ? "⁻" : kSuperscript[plain[i] - '0'];
      ++chars;
    }
  }
  const size_t pad = static_cast<size_t>(std::min(width, kMaxFormatPrecision));
  if (chars < pad) out.insert(0, pad - chars, ' ');
  return out;
}

// format(): %s %d %f %e %b %o %x %X %% with optional precision (cel-go ext/formatting.go).
bool FormatValueAsString(Ctx& ctx, const Val& v, std::string* out, std::string* err, bool nested) {
  if (ctx.strict_format) {
    return nested ? FormatMemberV2(ctx, v, out, err) : FormatStringV2(ctx, v, out, err);
  }
  switch (v.kind) {
    case VK::kString:
    case VK::kBytes:  // bare, also inside lists and maps (cel-go)
      *out += std::string(v.str());
      return true;
    case VK::kInt: *out += std::to_string(v.i); return true;
    case VK::kUint: *out += std::to_string(v.u); return true;
    case VK::kDouble: {
      if (std::isnan(v.d)) {
        *out += "NaN";
      } else if (std::isinf(v.d)) {
        *out += v.d > 0 ? "Infinity" : "-Infinity";
      } else {
        *out += FormatDouble(v.d);
      }
      return true;
    }
    case VK::kBool: *out += v.b ? "true" : "false"; return true;
    case VK::kNull: *out += "null"; return true;
    case VK::kType: *out += std::string(v.str()); return true;
    case VK::kTimestamp: *out += FormatTimestamp(v.i, v.n); return true;
    case VK::kDuration: *out += FormatDuration(v.i, v.n); return true;
    case VK::kList: {
      *out += "[";
      for (uint32_t i = 0; i < v.n; ++i) {
        if (i) *out += ", ";
        if (!FormatValueAsString(ctx, v.l->data[i], out, err, true)) return false;
      }
      *out += "]";
      return true;
    }
    case VK::kMap: {
      std::vector<std::pair<std::string, std::string>> entries;
      for (uint32_t i = 0; i < v.n; ++i) {
        std::string k, val;
        if (!FormatValueAsString(ctx, v.m->keys[i], &k, err, true)) return false;
        if (!FormatValueAsString(ctx, v.m->vals[i], &val, err, true)) return false;
        entries.emplace_back(std::move(k), std::move(val));
      }
      std::sort(entries.begin(), entries.end());
      *out += "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) *out += ", ";
        *out += entries[i].first + ": " + entries[i].second;
      }
      *out += "}";
      return true;
    }
    default:
      *err = "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, "
             "durations, and timestamps, was given " + std::string(TypeNameOf(v));
      return false;
  }
}

Val Format(Ctx& ctx, const Val* a, uint32_t n) {
  if (!Str(a[0]) || a[1].kind != VK::kList) NO_OVERLOAD("format");
  const std::string_view f = a[0].str();
  const Val& args = a[1];
  std::string out;
  uint32_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (out.size() > kMaxValueSize) return TooLarge(ctx);
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) return ctx.Error("could not parse formatting clause: unexpected end of string");
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    int precision = -1;
    if (f[i] == '.') {
      ++i;
      precision = 0;
      while (i < f.size() && f[i] >= '0' && f[i] <= '9') precision = precision * 10 + (f[i++] - '0');
      if (i >= f.size()) return ctx.Error("could not parse formatting clause: unexpected end of string");
    }
    const char verb = f[i];
    if (next >= args.n) {
      return ctx.Error("index " + std::to_string(next) + " out of range");
    }
    const Val& v = args.l->data[next++];
    std::string err;
    char buf[512];
    switch (verb) {
      case 's':
        if (!FormatValueAsString(ctx, v, &out, &err, false)) return ctx.Error("error during formatting: " + err);
        break;
      case 'd':
        if (v.kind == VK::kInt) {
          out += std::to_string(v.i);
        } else if (v.kind == VK::kUint) {
          out += std::to_string(v.u);
        } else if (!ctx.strict_format && v.kind == VK::kDouble && (std::isnan(v.d) || std::isinf(v.d))) {
          out += std::isnan(v.d) ? "NaN" : (v.d > 0 ? "Infinity" : "-Infinity");
        } else {
          return ctx.Error("error during formatting: decimal clause can only be used on integers, was given " +
                           std::string(TypeNameOf(v)));
        }
        break;
      case 'f':
      case 'e': {
        double d;
        if (v.kind == VK::kDouble) {
          d = v.d;
        } else if (!ctx.strict_format && v.kind == VK::kInt) {
          d = static_cast<double>(v.i);
        } else if (!ctx.strict_format && v.kind == VK::kUint) {
          d = static_cast<double>(v.u);
        } else if (v.kind == VK::kString && (v.str() == "NaN" || v.str() == "Infinity" || v.str() == "-Infinity")) {
          d = v.str() == "NaN" ? NAN : (v.str() == "Infinity" ? INFINITY : -INFINITY);
        } else {
          return ctx.Error(std::string("error during formatting: ") +
                           (verb == 'f' ? "fixed-point" : "scientific") +
                           " clause can only be used on doubles, was given " + std::string(TypeNameOf(v)));
        }
        if (ctx.strict_format) {
          out += verb == 'f' ? FormatFixedLikeKubernetes(d, precision < 0 ? 6 : precision)
                             : FormatScientificLikeKubernetes(d, precision < 0 ? 6 : precision);
        } else if (std::isnan(d)) {
          out += "NaN";
        } else if (std::isinf(d)) {
          out += d > 0 ? "Infinity" : "-Infinity";
        } else {
          const std::string spec = std::string("%.") + std::to_string(precision < 0 ? 6 : std::min(precision, 100)) + verb;
          std::snprintf(buf, sizeof(buf), spec.c_str(), d);
          out += buf;
        }
        break;
      }
      case 'b':
      case 'o':
      case 'x':
      case 'X': {
        if (v.kind == VK::kInt || v.kind == VK::kUint || (v.kind == VK::kBool && verb == 'b')) {
          const bool neg = v.kind == VK::kInt && v.i < 0;
          uint64_t u = v.kind == VK::kInt ? (neg ? 0 - static_cast<uint64_t>(v.i) : static_cast<uint64_t>(v.i))
                       : v.kind == VK::kUint ? v.u
                                             : (v.b ? 1 : 0);
          const int base = verb == 'b' ? 2 : verb == 'o' ? 8 : 16;
          std::string digits;
          do {
            const int d = static_cast<int>(u % base);
            digits += static_cast<char>(d < 10 ? '0' + d : (verb == 'X' ? 'A' : 'a') + d - 10);
            u /= base;
          } while (u);
          if (neg) digits += '-';
          std::reverse(digits.begin(), digits.end());
          out += digits;
        } else if ((verb == 'x' || verb == 'X') && (v.kind == VK::kString || v.kind == VK::kBytes)) {
          for (unsigned char c : v.str()) {
            std::snprintf(buf, sizeof(buf), verb == 'x' ? "%02x" : "%02X", c);
            out += buf;
          }
        } else {
          // ext.Strings version 2's texts (Kubernetes); the cel-spec mode keeps the older ones.
          const std::string given = ", was given " + std::string(TypeNameOf(v));
          if (ctx.strict_format && verb == 'o') {
            return ctx.Error("error during formatting: octal clause can only be used on integers" +
                             given);
          }
          if (ctx.strict_format && verb == 'b') {
            return ctx.Error(
                "error during formatting: only integers and bools can be formatted as binary" +
                given);
          }
          return ctx.Error("error during formatting: only integers" +
                           std::string(verb == 'x' || verb == 'X' ? ", byte buffers, and strings" : "") +
                           " can be formatted as " + (verb == 'b' ? "binary" : verb == 'o' ? "octal" : "hex") +
                           given);
        }
        break;
      }
      default:
        return ctx.Error(std::string("could not parse formatting clause: unrecognized formatting clause \"") +
                         verb + "\"");
    }
  }
  if (next < args.n) {
    // cel-go ignores extra arguments.
  }
  return ctx.String(out);
}

// ---- Lists extension (v3) and Kubernetes lists ----------------------------------------------

Val Slice(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList || a[1].kind != VK::kInt || a[2].kind != VK::kInt) NO_OVERLOAD("slice");
  const int64_t s = a[1].i, e = a[2].i;
  if (s < 0 || e < 0) {
    return ctx.Error("cannot slice(" + std::to_string(s) + ", " + std::to_string(e) +
                     "), negative indexes not supported");
  }
  if (s > e) {
    return ctx.Error("cannot slice(" + std::to_string(s) + ", " + std::to_string(e) +
                     "), start index must be less than or equal to end index");
  }
  if (e > a[0].n) {
    return ctx.Error("cannot slice(" + std::to_string(s) + ", " + std::to_string(e) + "), list is length " +
                     std::to_string(a[0].n));
  }
  return ctx.List(a[0].l->data + s, static_cast<uint32_t>(e - s));
}

void FlattenInto(const Val& list, int64_t depth, std::vector<Val>* out) {
  for (uint32_t i = 0; i < list.n; ++i) {
    const Val& e = list.l->data[i];
    if (e.kind == VK::kList && depth > 0) {
      FlattenInto(e, depth - 1, out);
    } else {
      out->push_back(e);
    }
  }
}
Val Flatten(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList || (n == 2 && a[1].kind != VK::kInt)) {
    // ext.Lists' own text: "no such overload: int.flatten()" / "list.flatten(string)".
    std::string msg = "no such overload: " + std::string(TypeNameOf(a[0])) + ".flatten(";
    if (n == 2) msg += TypeNameOf(a[1]);
    return ctx.Error(msg + ")");
  }
  const int64_t depth = n == 2 ? a[1].i : 1;
  if (depth < 0) return ctx.Error("level must be non-negative");
  std::vector<Val> out;
  FlattenInto(a[0], depth, &out);
  return ctx.List(out.data(), static_cast<uint32_t>(out.size()));
}

Val Distinct(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList) NO_OVERLOAD("distinct");
  std::vector<Val> out;
  for (uint32_t i = 0; i < a[0].n; ++i) {
    const Val& e = a[0].l->data[i];
    bool seen = false;
    for (const Val& o : out) seen = seen || EqualBool(o, e);
    if (!seen) out.push_back(e);
  }
  return ctx.List(out.data(), static_cast<uint32_t>(out.size()));
}

Val Range(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kInt) NO_OVERLOAD("lists.range");
  if (a[0].i < 0) return ctx.Error("lists.range: size must be non-negative, got " + std::to_string(a[0].i));
  if (a[0].i > 1'000'000) {
    return ctx.Error("lists.range: size " + std::to_string(a[0].i) +
                     " exceeds maximum allowed (1000000)");
  }
  const auto size = static_cast<uint32_t>(std::max<int64_t>(0, a[0].i));
  Val list = ctx.ListWithCapacity(size);
  for (uint32_t i = 0; i < size; ++i) list.l->data[i] = Val::Int(i);
  list.l->used = size;
  list.n = size;
  return list;
}

Val Reverse(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList) NO_OVERLOAD("reverse");
  std::vector<Val> out(a[0].l ? a[0].l->data : nullptr, a[0].l ? a[0].l->data + a[0].n : nullptr);
  std::reverse(out.begin(), out.end());
  return ctx.List(out.data(), static_cast<uint32_t>(out.size()));
}

// Sorts `idx` by the keys; false if some key pair is not comparable.
// ext.Lists' sortListByAssociatedKeys: the first key must be comparable (an int, uint, double,
// string, bytes, bool, timestamp or duration), every other key of exactly its type (an int and a
// double differ). Returns cel-go's error text, or "" with `idx` the stable sorted order.
std::string SortIndices(const Val& keys, std::vector<uint32_t>* idx) {
  if (keys.n > 0) {
    const VK first = keys.l->data[0].kind;
    if (first != VK::kInt && first != VK::kUint && first != VK::kDouble && first != VK::kString &&
        first != VK::kBytes && first != VK::kBool && first != VK::kTimestamp &&
        first != VK::kDuration) {
      return "list elements must be comparable";
    }
    for (uint32_t i = 1; i < keys.n; ++i) {
      if (keys.l->data[i].kind != first) return "list elements must have the same type";
    }
  }
  idx->resize(keys.n);
  for (uint32_t i = 0; i < keys.n; ++i) (*idx)[i] = i;
  std::stable_sort(idx->begin(), idx->end(), [&](uint32_t x, uint32_t y) {
    const auto c = Compare(keys.l->data[x], keys.l->data[y]);
    return c && *c < 0;
  });
  return "";
}

Val Sort(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList) NO_OVERLOAD("sort");
  std::vector<uint32_t> idx;
  if (const std::string error = SortIndices(a[0], &idx); !error.empty()) return ctx.Error(error);
  std::vector<Val> out;
  for (uint32_t i : idx) out.push_back(a[0].l->data[i]);
  return ctx.List(out.data(), static_cast<uint32_t>(out.size()));
}

Val SortByKeys(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList || a[1].kind != VK::kList || a[0].n != a[1].n) NO_OVERLOAD("sortBy");
  std::vector<uint32_t> idx;
  if (const std::string error = SortIndices(a[1], &idx); !error.empty()) return ctx.Error(error);
  std::vector<Val> out;
  for (uint32_t i : idx) out.push_back(a[0].l->data[i]);
  return ctx.List(out.data(), static_cast<uint32_t>(out.size()));
}

// ---- Sets ----------------------------------------------------------------------------------

bool ListHas(const Val& list, const Val& v) {
  for (uint32_t i = 0; i < list.n; ++i) {
    if (EqualBool(list.l->data[i], v)) return true;
  }
  return false;
}
Val SetsContains(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList || a[1].kind != VK::kList) NO_OVERLOAD("sets.contains");
  for (uint32_t i = 0; i < a[1].n; ++i) {
    if (!ListHas(a[0], a[1].l->data[i])) return Val::Bool(false);
  }
  return Val::Bool(true);
}
Val SetsEquivalent(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList || a[1].kind != VK::kList) NO_OVERLOAD("sets.equivalent");
  Val r = SetsContains(ctx, a, n);
  if (!r.b) return r;
  Val swapped[2] = {a[1], a[0]};
  return SetsContains(ctx, swapped, n);
}
Val SetsIntersects(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList || a[1].kind != VK::kList) NO_OVERLOAD("sets.intersects");
  for (uint32_t i = 0; i < a[1].n; ++i) {
    if (ListHas(a[0], a[1].l->data[i])) return Val::Bool(true);
  }
  return Val::Bool(false);
}
// cel-go ext/sets.go: 1 + factor * |a| * |b| (factor 2 for equivalent).
uint64_t SetsCost(const Val* a, uint32_t) { return 1 + ActualSize(a[0]) * ActualSize(a[1]); }
uint64_t SetsEquivalentCost(const Val* a, uint32_t) { return 1 + 2 * ActualSize(a[0]) * ActualSize(a[1]); }

// ---- Macro helpers -------------------------------------------------------------

Val MapInsert(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kMap) NO_OVERLOAD("cel.@mapInsert");
  std::vector<std::pair<Val, Val>> add;
  if (n == 3) {
    add.emplace_back(a[1], a[2]);
  } else {
    if (a[1].kind != VK::kMap) NO_OVERLOAD("cel.@mapInsert");
    for (uint32_t i = 0; i < a[1].n; ++i) add.emplace_back(a[1].m->keys[i], a[1].m->vals[i]);
  }
  const Val& m = a[0];
  for (const auto& [k, v] : add) {
    if (ctx.go_map_keys) {
      // cel-go inserts into a Go map: a key holding slices panics there.
      if (const std::string_view panic = UnhashableKey(k); !panic.empty()) {
        ctx.Panic(panic);
        return ctx.Error(ctx.panic_message);
      }
    } else if (k.kind != VK::kString && k.kind != VK::kInt && k.kind != VK::kUint &&
               k.kind != VK::kBool) {
      return ctx.Error("unsupported key type: " + std::string(TypeNameOf(k)));
    }
    Val ignored;
    if (MapFind(ctx, m, k, &ignored)) {
      return ctx.Error("insert failed: key " + std::string(k.kind == VK::kString ? k.str() : "") +
                       " already exists");
    }
  }
  const uint32_t size = m.n + static_cast<uint32_t>(add.size());
  MapRep* rep = m.m;
  if (rep == nullptr || rep->used != m.n || rep->cap < size) {
    auto* grown = ctx.arena.New<MapRep>();
    grown->cap = std::max<uint32_t>(size, m.n * 2);
    grown->keys = ctx.arena.NewArray<Val>(grown->cap);
    grown->vals = ctx.arena.NewArray<Val>(grown->cap);
    for (uint32_t i = 0; i < m.n; ++i) {
      grown->keys[i] = m.m->keys[i];
      grown->vals[i] = m.m->vals[i];
    }
    grown->used = m.n;
    rep = grown;
  }
  for (const auto& [k, v] : add) {
    rep->keys[rep->used] = k;
    rep->vals[rep->used] = v;
    ++rep->used;
  }
  Val r;
  r.kind = VK::kMap;
  r.m = rep;
  r.n = size;
  return r;
}

#undef NO_OVERLOAD

constexpr uint32_t kStd = 0;

// The ordering operators' overloads (cel-go's standard library, with cross-type numbers).
constexpr std::string_view kOrderOverloads =
    "int, int -> bool; uint, uint -> bool; double, double -> bool; string, string -> bool; "
    "bytes, bytes -> bool; bool, bool -> bool; int, uint -> bool; int, double -> bool; "
    "uint, int -> bool; uint, double -> bool; double, int -> bool; double, uint -> bool; "
    "timestamp, timestamp -> bool; duration, duration -> bool";

std::vector<FunctionDef> StandardFunctions() {
  return {
      {"_+_", Add, true, false, kStd, AddCost, K::kDyn, 2, 2,
       "int, int -> int; uint, uint -> uint; double, double -> double; string, string -> string; "
       "bytes, bytes -> bytes; list, list -> list; timestamp, duration -> timestamp; "
       "duration, timestamp -> timestamp; duration, duration -> duration"},
      {"_-_", Sub, true, false, kStd, nullptr, K::kDyn, 2, 2,
       "int, int -> int; uint, uint -> uint; double, double -> double; "
       "timestamp, duration -> timestamp; timestamp, timestamp -> duration; "
       "duration, duration -> duration"},
      {"_*_", Mul, true, false, kStd, nullptr, K::kDyn, 2, 2,
       "int, int -> int; uint, uint -> uint; double, double -> double"},
      {"_/_", Div, true, false, kStd, nullptr, K::kDyn, 2, 2,
       "int, int -> int; uint, uint -> uint; double, double -> double"},
      {"_%_", Mod, true, false, kStd, nullptr, K::kDyn, 2, 2,
       "int, int -> int; uint, uint -> uint"},
      {"-_", Neg, true, false, kStd, nullptr, K::kDyn, 1, 1, "int -> int; double -> double"},
      {"!_", Not, true, false, kStd, nullptr, K::kBool, 1, 1, "bool -> bool"},
      {"_==_", Eq, true, false, kStd, EqualsCost, K::kBool, 2, 2},
      {"_!=_", Ne, true, false, kStd, EqCost, K::kBool, 2, 2},
      {"_<_", Relation<0>, true, false, kStd, RelCost, K::kBool, 2, 2, kOrderOverloads},
      {"_<=_", Relation<1>, true, false, kStd, RelCost, K::kBool, 2, 2, kOrderOverloads},
      {"_>_", Relation<2>, true, false, kStd, RelCost, K::kBool, 2, 2, kOrderOverloads},
      {"_>=_", Relation<3>, true, false, kStd, RelCost, K::kBool, 2, 2, kOrderOverloads},
      {"@in", In, true, false, kStd, InCost, K::kBool, 2, 2, "any, list -> bool; any, map -> bool"},
      {"size", Size, true, true, kStd, nullptr, K::kInt, 1, 1,
       "string -> int; bytes -> int; list -> int; map -> int"},
      {"contains", Contains, false, true, kStd, ContainsCost, K::kBool, 2, 2,
       "string, string -> bool"},
      {"startsWith", StartsWith, false, true, kStd, PrefixCost, K::kBool, 2, 2,
       "string, string -> bool"},
      {"endsWith", EndsWith, false, true, kStd, PrefixCost, K::kBool, 2, 2,
       "string, string -> bool"},
      {"matches", Matches, true, true, kStd, MatchesCost, K::kBool, 2, 2, "string, string -> bool"},
      {"int", ToInt, true, false, kStd, nullptr, K::kInt, 1, 1,
       "int -> int; uint -> int; double -> int; string -> int; timestamp -> int; duration -> int"},
      {"uint", ToUint, true, false, kStd, nullptr, K::kUint, 1, 1,
       "int -> uint; uint -> uint; double -> uint; string -> uint"},
      {"double", ToDouble, true, false, kStd, nullptr, K::kDouble, 1, 1,
       "int -> double; uint -> double; double -> double; string -> double"},
      {"string", ToString, true, false, kStd, StringConversionCost, K::kString, 1, 1,
       "int -> string; uint -> string; double -> string; string -> string; bytes -> string; "
       "bool -> string; timestamp -> string; duration -> string; IP -> string; CIDR -> string"},
      {"bytes", ToBytes, true, false, kStd, BytesConversionCost, K::kBytes, 1, 1,
       "string -> bytes; bytes -> bytes"},
      {"bool", ToBool, true, false, kStd, nullptr, K::kBool, 1, 1, "bool -> bool; string -> bool"},
      {"dyn", Dyn, true, false, kStd, nullptr, K::kDyn, 1, 1},
      {"type", TypeOf, true, false, kStd, nullptr, K::kType, 1, 1},
      // Optionals.
      {"optional.of", OptionalOf, true, false, kOptionalsLibrary, nullptr, K::kDyn, 1, 1},
      {"optional.none", OptionalNone, true, false, kOptionalsLibrary, nullptr, K::kDyn, 0, 0},
      {"optional.ofNonZeroValue", OptionalOfNonZero, true, false, kOptionalsLibrary, nullptr,
       K::kDyn, 1, 1},
      {"hasValue", HasValue, false, true, kOptionalsLibrary, nullptr, K::kBool, 1, 1,
       "optional -> bool"},
      {"value", OptValue, false, true, kOptionalsLibrary, nullptr, K::kDyn, 1, 1,
       "optional -> dyn"},
      {"or", OptOr, false, true, kOptionalsLibrary, nullptr, K::kDyn, 2, 2},
      {"orValue", OptOrValue, false, true, kOptionalsLibrary, nullptr, K::kDyn, 2, 2},
      {"first", ListFirst, false, true, kOptionalsLibrary, nullptr, K::kDyn, 1, 1, "list -> dyn"},
      {"last", ListLast, false, true, kOptionalsLibrary, nullptr, K::kDyn, 1, 1, "list -> dyn"},
      {"optional.unwrap", OptUnwrap, true, false, kOptionalsLibrary, nullptr, K::kDyn, 1, 1,
       "list(optional) -> dyn"},
      {"unwrapOpt", UnwrapOpt, false, true, kOptionalsLibrary, nullptr, K::kDyn, 1, 1,
       "list(optional) -> dyn"},
      // Strings v2.
      {"charAt", CharAt, false, true, kStringsLibrary, nullptr, K::kString, 2, 2,
       "string, int -> string"},
      {"indexOf", IndexOf, false, true, kStringsLibrary | kKubernetesListsLibrary, TraversalCost,
       K::kInt, 2, 3, "string, string -> int; string, string, int -> int; list, any -> int",
       KC::kListTraversal},
      {"lastIndexOf", LastIndexOf, false, true, kStringsLibrary | kKubernetesListsLibrary,
       TraversalCost, K::kInt, 2, 3,
       "string, string -> int; string, string, int -> int; list, any -> int", KC::kListTraversal},
      {"lowerAscii", LowerAscii, false, true, kStringsLibrary, ReceiverTraverseCost, K::kString, 1,
       1, "string -> string", KC::kStringTraversal},
      {"upperAscii", UpperAscii, false, true, kStringsLibrary, ReceiverTraverseCost, K::kString, 1,
       1, "string -> string", KC::kStringTraversal},
      {"replace", Replace, false, true, kStringsLibrary, ReceiverTraverse2Cost, K::kString, 3, 4,
       "string, string, string -> string; string, string, string, int -> string", KC::kReplace},
      {"split", Split, false, true, kStringsLibrary, ReceiverTraverse2Cost, K::kList, 2, 3,
       "string, string -> list(string); string, string, int -> list(string)", KC::kSplit},
      {"substring", Substring, false, true, kStringsLibrary, ReceiverTraverseCost, K::kString, 2, 3,
       "string, int -> string; string, int, int -> string", KC::kStringTraversal},
      {"trim", Trim, false, true, kStringsLibrary, ReceiverTraverseCost, K::kString, 1, 1,
       "string -> string", KC::kStringTraversal},
      {"join", Join, false, true, kStringsLibrary, JoinCost, K::kString, 1, 2,
       "list(string) -> string; list(string), string -> string", KC::kJoin},
      {"format", Format, false, true, kStringsLibrary, ReceiverTraverseCost, K::kString, 2, 2,
       "string, list -> string"},
      {"strings.quote", Quote, true, false, kStringsLibrary, ReceiverTraverseCost, K::kString, 1, 1,
       "string -> string"},
      // Lists v3.
      {"slice", Slice, false, true, kListsLibrary, SliceCost, K::kDyn, 3, 3,
       "list, int, int -> list"},
      {"flatten", Flatten, false, true, kListsLibrary, FlattenCost, K::kList, 1, 2,
       "list -> list; list, int -> list"},
      {"distinct", Distinct, false, true, kListsLibrary, SelfCompareReceiverCost, K::kDyn, 1, 1,
       "list -> list"},
      {"lists.range", Range, true, false, kListsLibrary, RangeCost, K::kList, 1, 1,
       "int -> list(int)"},
      {"reverse", Reverse, false, true, kListsLibrary, ReverseCost, K::kDyn, 1, 1, "list -> list"},
      {"sort", Sort, false, true, kListsLibrary, SelfCompareReceiverCost, K::kDyn, 1, 1,
       "list -> list"},
      {"@sortByAssociatedKeys", SortByKeys, false, true, kListsLibrary, SelfCompareKeysCost,
       K::kDyn, 2, 2},
      // Sets.
      {"sets.contains", SetsContains, true, false, kSetsLibrary, SetsCost, K::kBool, 2, 2,
       "list, list -> bool"},
      {"sets.equivalent", SetsEquivalent, true, false, kSetsLibrary, SetsEquivalentCost, K::kBool,
       2, 2, "list, list -> bool"},
      {"sets.intersects", SetsIntersects, true, false, kSetsLibrary, SetsCost, K::kBool, 2, 2,
       "list, list -> bool"},
      // Macro helpers.
      {"cel.@mapInsert", MapInsert, true, false, kStd, nullptr, K::kDyn, 2, 3},
  };
}

// The pieces of `text` between `sep`s, each without surrounding spaces.
std::vector<std::string_view> SplitTrimmed(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t end = text.find(sep);
    std::string_view piece = text.substr(0, end);
    while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    while (!piece.empty() && piece.back() == ' ') piece.remove_suffix(1);
    out.push_back(piece);
    if (end == std::string_view::npos) return out;
    text.remove_prefix(end + 1);
  }
}

// The kinds of the result type names of FunctionDef::overloads.
const std::unordered_map<std::string_view, K>& ResultKinds() {
  static const auto* kinds =
      new std::unordered_map<std::string_view, K>{{"int", K::kInt},
                                                  {"uint", K::kUint},
                                                  {"double", K::kDouble},
                                                  {"string", K::kString},
                                                  {"bytes", K::kBytes},
                                                  {"bool", K::kBool},
                                                  {"list", K::kList},
                                                  {"map", K::kMap},
                                                  {"Quantity", K::kQuantity},
                                                  {"Semver", K::kSemver},
                                                  {"type", K::kType},
                                                  {"optional", K::kOptional},
                                                  {"timestamp", K::kTimestamp},
                                                  {"duration", K::kDuration},
                                                  {"IP", K::kIP},
                                                  {"CIDR", K::kCIDR},
                                                  {"format", K::kFormat},
                                                  {"URL", K::kURL},
                                                  {"dyn", K::kDyn}};
  return *kinds;
}

// A declared result with parameters: list(T), optional(T), map(K, V), T a result type name or
// one with parameters; nullopt if malformed.
std::optional<Type> ParseResultType(std::string_view t) {
  const size_t open = t.find('(');
  if (open == std::string_view::npos) {
    auto it = ResultKinds().find(t);
    if (it == ResultKinds().end() || it->second == K::kOptional)
      return std::nullopt;
    return TypeOfKind(it->second);
  }
  if (t.back() != ')')
    return std::nullopt;
  const std::string_view head = t.substr(0, open);
  const std::string_view inner = t.substr(open + 1, t.size() - open - 2);
  if (head == "list" || head == "optional") {
    std::optional<Type> el = ParseResultType(inner);
    if (!el)
      return std::nullopt;
    return head == "list" ? Type::List(*el) : Type::Optional(*el);
  }
  if (head != "map")
    return std::nullopt;
  int depth = 0;
  for (size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] == '(')
      ++depth;
    if (inner[i] == ')')
      --depth;
    if (inner[i] == ',' && depth == 0) {
      std::optional<Type> key = ParseResultType(SplitTrimmed(inner.substr(0, i), ';')[0]);
      std::optional<Type> value = ParseResultType(SplitTrimmed(inner.substr(i + 1), ';')[0]);
      if (!key || !value)
        return std::nullopt;
      return Type::Map(*key, *value);
    }
  }
  return std::nullopt;
}

// Parses FunctionDef::overloads; a malformed declaration is a programming error (abort, naming
// the function), found by any test that compiles an expression.
std::vector<Signature> ParseOverloads(const FunctionDef& d) {
  static const auto* kLetters = new std::unordered_map<std::string_view, char>{
      {"int", 'i'},      {"uint", 'u'},          {"double", 'd'},       {"string", 's'},
      {"bytes", 'b'},    {"bool", 'B'},          {"null", 'n'},         {"list", 'L'},
      {"map", 'M'},      {"Quantity", 'Q'},      {"Semver", 'S'},       {"type", 'T'},
      {"optional", 'O'}, {"timestamp", 'Z'},     {"duration", 'D'},     {"IP", 'P'},
      {"CIDR", 'C'},     {"format", 'F'},        {"URL", 'U'},          {"list(string)", 'W'},
      {"list(optional)", 'V'}, {"any", '*'}};
  const std::unordered_map<std::string_view, K>* kResults = &ResultKinds();
  auto fail = [&](std::string_view what) {
    std::fprintf(stderr, "devlet::cel: bad overload declaration of %.*s: %.*s\n",
                 static_cast<int>(d.name.size()), d.name.data(), static_cast<int>(what.size()),
                 what.data());
    std::abort();
  };
  std::vector<Signature> out;
  for (std::string_view overload : SplitTrimmed(d.overloads, ';')) {
    const size_t arrow = overload.find("->");
    if (arrow == std::string_view::npos) fail(overload);
    Signature sig;
    for (std::string_view param : SplitTrimmed(overload.substr(0, arrow), ',')) {
      auto it = kLetters->find(param);
      if (it == kLetters->end()) fail(param);
      sig.params += it->second;
    }
    const std::string_view result = SplitTrimmed(overload.substr(arrow + 2), ';')[0];
    auto it = kResults->find(result.substr(0, result.find('(')));
    if (it == kResults->end()) fail(overload);
    sig.result = it->second;
    if (result.find('(') != std::string_view::npos) {
      sig.parametric = ParseResultType(result);
      if (!sig.parametric)
        fail(overload);
    }
    out.push_back(std::move(sig));
  }
  return out;
}

struct Registry {
  // name -> (global def, member def)
  std::unordered_map<std::string_view, std::pair<const FunctionDef*, const FunctionDef*>> by_name;
  // name -> parsed overloads, for the functions that declare them
  std::unordered_map<std::string_view, std::vector<Signature>> signatures;
  // name -> the result with parameters that all its overloads declare
  std::unordered_map<std::string_view, Type> declared_results;
  std::vector<FunctionDef> defs;
  Registry() {
    defs = StandardFunctions();
    for (FunctionDef& d : KubernetesObjectFunctions()) defs.push_back(d);
    for (FunctionDef& d : TimeFunctions()) defs.push_back(d);
    for (FunctionDef& d : FormatFunctions()) defs.push_back(d);
    for (const FunctionDef& d : defs) {
      auto& slot = by_name[d.name];
      if (d.global) slot.first = &d;
      if (d.member) slot.second = &d;
      if (!d.overloads.empty()) signatures[d.name] = ParseOverloads(d);
    }
    for (const auto& [name, sigs] : signatures) {
      const std::optional<Type>& first = sigs.front().parametric;
      if (first && std::all_of(sigs.begin(), sigs.end(),
                               [&](const Signature& s) { return s.parametric == first; })) {
        declared_results.emplace(name, *first);
      }
    }
  }
};

const Registry& GetRegistry() {
  static const Registry* r = new Registry();
  return *r;
}

}  // namespace

const FunctionDef* FindFunction(std::string_view name, bool member, uint32_t libraries) {
  const Registry& r = GetRegistry();
  auto it = r.by_name.find(name);
  if (it == r.by_name.end()) return nullptr;
  const FunctionDef* d = member ? it->second.second : it->second.first;
  if (d == nullptr) return nullptr;
  if (d->library != 0 && (d->library & libraries) == 0) return nullptr;
  return d;
}

const std::vector<Signature>* FindSignatures(std::string_view name) {
  const Registry& r = GetRegistry();
  auto it = r.signatures.find(name);
  return it == r.signatures.end() ? nullptr : &it->second;
}

Type TypeOfKind(Type::Kind kind) {
  switch (kind) {
    case K::kBool:
      return Type::Bool();
    case K::kInt:
      return Type::Int();
    case K::kUint:
      return Type::Uint();
    case K::kDouble:
      return Type::Double();
    case K::kString:
      return Type::String();
    case K::kBytes:
      return Type::Bytes();
    case K::kType:
      return Type::TypeType();
    case K::kQuantity:
      return Type::Quantity();
    case K::kTimestamp:
      return Type::Timestamp();
    case K::kDuration:
      return Type::Duration();
    case K::kSemver:
      return Type::Semver();
    case K::kIP:
      return Type::IP();
    case K::kCIDR:
      return Type::CIDR();
    case K::kFormat:
      return Type::Format();
    case K::kURL:
      return Type::URL();
    case K::kList:
      return Type::List(Type::Dyn());
    case K::kMap:
      return Type::Map(Type::Dyn(), Type::Dyn());
    default:
      return Type::Dyn();
  }
}

const Type* FindDeclaredResult(std::string_view name) {
  const Registry& r = GetRegistry();
  auto it = r.declared_results.find(name);
  return it == r.declared_results.end() ? nullptr : &it->second;
}

Val AddValues(Ctx& ctx, const Val* args, uint32_t n) { return Add(ctx, args, n); }
uint64_t TraversalCostOf(const Val& v) { return Traversal(v); }
bool ListContains(const Val& list, const Val& v) { return ListHas(list, v); }
uint64_t RegexCallCost(const Val* args, uint32_t n) { return MatchesCost(args, n); }

KubernetesCost KubernetesCostOf(std::string_view name, bool member) {
  const FunctionDef* d = FindFunction(name, member, ~0u);
  return d == nullptr ? KubernetesCost::kNone : d->kubernetes;
}

bool IsFunctionName(std::string_view name, uint32_t libraries) {
  return FindFunction(name, false, libraries) != nullptr || FindFunction(name, true, libraries) != nullptr;
}

}  // namespace devlet::cel::internal
