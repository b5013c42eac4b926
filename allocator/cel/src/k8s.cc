// The Kubernetes CEL libraries as k8s.io/apiserver/pkg/cel/library groups them: lists, regex,
// Quantity, Semver, IP, CIDR, URL (research §3.4), and DRA's includes. The format library is
// format.cc; indexOf/lastIndexOf are one function with the strings library (functions.cc).
#include <string>
#include <vector>

#include "devlet/cel/quantity.h"
#include "devlet/cel/semver.h"
#include "devlet/common/status.h"
#include "eval.h"
#include "netip.h"
#include "neturl.h"
#include "utf8.h"

namespace devlet::cel::internal {
namespace {
using K = Type::Kind;
#define NO_OVERLOAD(name) return ctx.NoOverload(name, a, n)

// Kubernetes library/cost.go: parsing costs 0.1 per character (code point) of the argument.
uint64_t ParseCost(const Val* a, uint32_t) {
  return CostOf(0.1, a[0].kind == VK::kString ? Utf8CountCodePoints(a[0].str()) : 1);
}

Val Compare3(Ctx& ctx, const Val* a, uint32_t n, const char* name, int* out) {
  if (a[0].kind == VK::kQuantity && a[1].kind == VK::kQuantity) {
    *out = a[0].q->Compare(*a[1].q);
    return Val::Bool(true);
  }
  if (a[0].kind == VK::kSemver && a[1].kind == VK::kSemver) {
    *out = a[0].v->Compare(*a[1].v);
    return Val::Bool(true);
  }
  (void)out;
  NO_OVERLOAD(name);
}

Val IsGreaterThan(Ctx& ctx, const Val* a, uint32_t n) {
  int c = 0;
  Val r = Compare3(ctx, a, n, "isGreaterThan", &c);
  return r.is_error() ? r : Val::Bool(c > 0);
}
Val IsLessThan(Ctx& ctx, const Val* a, uint32_t n) {
  int c = 0;
  Val r = Compare3(ctx, a, n, "isLessThan", &c);
  return r.is_error() ? r : Val::Bool(c < 0);
}
Val CompareTo(Ctx& ctx, const Val* a, uint32_t n) {
  int c = 0;
  Val r = Compare3(ctx, a, n, "compareTo", &c);
  return r.is_error() ? r : Val::Int(c < 0 ? -1 : c > 0 ? 1 : 0);
}

// ---- Quantity ------------------------------------------------------------------------------

Val QuantityFn(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString) NO_OVERLOAD("quantity");
  return ParseQuantityVal(ctx, a[0].str());
}
Val IsQuantity(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString) NO_OVERLOAD("isQuantity");
  Val v = ParseQuantityVal(ctx, a[0].str());
  return Val::Bool(!v.is_error());
}

Val QVal(Ctx& ctx, Quantity q) {
  Val r;
  r.kind = VK::kQuantity;
  r.q = ctx.arena.New<Quantity>(std::move(q));
  return r;
}

Val Sign(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kQuantity) return Val::Int(a[0].q->Sign());
  NO_OVERLOAD("sign");
}
Val AsInteger(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kQuantity) {
    std::optional<int64_t> v = a[0].q->AsInt64();
    if (!v) return ctx.Error("cannot convert value to integer");
    return Val::Int(*v);
  }
  NO_OVERLOAD("asInteger");
}
Val IsInteger(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kQuantity) return Val::Bool(a[0].q->AsInt64().has_value());
  NO_OVERLOAD("isInteger");
}
Val AsApproximateFloat(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kQuantity) return Val::Double(a[0].q->AsApproximateFloat());
  NO_OVERLOAD("asApproximateFloat");
}
Val AddSub(Ctx& ctx, const Val* a, uint32_t n, bool add) {
  if (a[0].kind == VK::kQuantity && (a[1].kind == VK::kQuantity || a[1].kind == VK::kInt)) {
    const Quantity other = a[1].kind == VK::kQuantity ? *a[1].q : Quantity::FromInt64(a[1].i);
    absl::StatusOr<Quantity> r = add ? a[0].q->Add(other) : a[0].q->Sub(other);
    if (!r.ok()) return ctx.Error(devlet::Message(r.status()));
    Val v = QVal(ctx, std::move(*r));
    v.sub = kQuantityPointer;
    return v;
  }
  NO_OVERLOAD(add ? "add" : "sub");
}
Val QAdd(Ctx& ctx, const Val* a, uint32_t n) { return AddSub(ctx, a, n, true); }
Val QSub(Ctx& ctx, const Val* a, uint32_t n) { return AddSub(ctx, a, n, false); }

// ---- Semver --------------------------------------------------------------------------------

Val SemverFn(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString || (n == 2 && a[1].kind != VK::kBool)) NO_OVERLOAD("semver");
  return ParseSemverVal(ctx, a[0].str(), n == 2 && a[1].b);
}
Val IsSemver(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString || (n == 2 && a[1].kind != VK::kBool)) NO_OVERLOAD("isSemver");
  return Val::Bool(!ParseSemverVal(ctx, a[0].str(), n == 2 && a[1].b).is_error());
}
template <int kPart>
Val SemverPart(Ctx& ctx, const Val* a, uint32_t n) {
  static constexpr const char* kNames[] = {"major", "minor", "patch"};
  if (a[0].kind == VK::kSemver) {
    const uint64_t v = kPart == 0 ? a[0].v->Major() : kPart == 1 ? a[0].v->Minor() : a[0].v->Patch();
    return Val::Int(static_cast<int64_t>(v));
  }
  NO_OVERLOAD(kNames[kPart]);
}

// ---- IP (library/ip.go) ---------------------------------------------------------------------

// ip.isCanonical parses and compares the text again: 0.2 per character.
uint64_t CanonicalCost(const Val* a, uint32_t) {
  return CostOf(0.2, a[0].kind == VK::kString ? Utf8CountCodePoints(a[0].str()) : 1);
}

Val ParseIpVal(Ctx& ctx, std::string_view text, IpAddr* addr) {
  std::string error;
  if (!ParseIp(text, addr, &error)) return ctx.Error(error);
  Val r;
  r.kind = VK::kIP;
  r.ip = ctx.arena.New<IpAddr>(*addr);
  return r;
}

Val IpFn(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind == VK::kCIDR) {  // cidr.ip(): the address as written, host bits kept
    Val r;
    r.kind = VK::kIP;
    r.ip = &a[0].cidr->ip;
    return r;
  }
  if (a[0].kind != VK::kString) NO_OVERLOAD("ip");
  IpAddr addr;
  return ParseIpVal(ctx, a[0].str(), &addr);
}
Val IsIp(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString) NO_OVERLOAD("isIP");
  IpAddr addr;
  std::string error;
  return Val::Bool(ParseIp(a[0].str(), &addr, &error));
}
Val IpIsCanonical(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString) NO_OVERLOAD("ip.isCanonical");
  IpAddr addr;
  Val v = ParseIpVal(ctx, a[0].str(), &addr);
  if (v.is_error()) return v;
  return Val::Bool(addr.ToString() == a[0].str());
}
Val IpFamily(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kIP) NO_OVERLOAD("family");
  return Val::Int(a[0].ip->is4 ? 4 : 6);
}
template <bool (IpAddr::*kTest)() const>
Val IpTest(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kIP) {
    // cel-go names the function of the failing overload; all of these take an IP receiver.
    return ctx.NoOverload(kTest == &IpAddr::IsUnspecified          ? "isUnspecified"
                          : kTest == &IpAddr::IsLoopback           ? "isLoopback"
                          : kTest == &IpAddr::IsLinkLocalMulticast ? "isLinkLocalMulticast"
                          : kTest == &IpAddr::IsLinkLocalUnicast   ? "isLinkLocalUnicast"
                                                                   : "isGlobalUnicast",
                          a, n);
  }
  return Val::Bool((a[0].ip->*kTest)());
}

// ---- CIDR (library/cidr.go) -----------------------------------------------------------------

// cidr() wraps ParseCidr's message in the same prefix once more (as Kubernetes does).
Val ParseCidrVal(Ctx& ctx, std::string_view text) {
  CidrPrefix prefix;
  std::string error;
  if (!ParseCidr(text, &prefix, &error)) {
    return ctx.Error("network address parse error during conversion from string: " + error);
  }
  Val r;
  r.kind = VK::kCIDR;
  r.cidr = ctx.arena.New<CidrPrefix>(prefix);
  return r;
}

Val CidrFn(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString) NO_OVERLOAD("cidr");
  return ParseCidrVal(ctx, a[0].str());
}
Val IsCidr(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString) NO_OVERLOAD("isCIDR");
  CidrPrefix prefix;
  std::string error;
  return Val::Bool(ParseCidr(a[0].str(), &prefix, &error));
}
Val ContainsIp(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kCIDR || (a[1].kind != VK::kString && a[1].kind != VK::kIP)) {
    NO_OVERLOAD("containsIP");
  }
  if (a[1].kind == VK::kString) {
    IpAddr addr;
    std::string error;
    // Kubernetes passes the parse error on as the "other" operand, and reports the overload as
    // missing rather than the parse error.
    if (!ParseIp(a[1].str(), &addr, &error)) return ctx.Error("no such overload");
    return Val::Bool(a[0].cidr->Contains(addr));
  }
  return Val::Bool(a[0].cidr->Contains(*a[1].ip));
}
Val ContainsCidr(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kCIDR || (a[1].kind != VK::kString && a[1].kind != VK::kCIDR)) {
    NO_OVERLOAD("containsCIDR");
  }
  if (a[1].kind == VK::kString) {
    Val other = ParseCidrVal(ctx, a[1].str());
    if (other.is_error()) return other;
    return Val::Bool(a[0].cidr->ContainsPrefix(*other.cidr));
  }
  return Val::Bool(a[0].cidr->ContainsPrefix(*a[1].cidr));
}
Val Masked(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kCIDR) NO_OVERLOAD("masked");
  Val r;
  r.kind = VK::kCIDR;
  r.cidr = ctx.arena.New<CidrPrefix>(a[0].cidr->Masked());
  return r;
}
Val PrefixLength(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kCIDR) NO_OVERLOAD("prefixLength");
  return Val::Int(a[0].cidr->bits);
}

// Kubernetes' CallCost: comparing addresses up to the prefix (twice the CIDR's size, 0.1 per
// byte), containsCIDR one more traversal plus 1, and a string argument's parse.
uint64_t CidrSize(const Val& v) {
  return v.kind == VK::kCIDR ? static_cast<uint64_t>((v.cidr->bits + 7) / 8) : 1;
}
uint64_t StringParse(const Val& v) {
  return v.kind == VK::kString ? CostOf(0.1, Utf8CountCodePoints(v.str())) : 0;
}
uint64_t ContainsIpCost(const Val* a, uint32_t) {
  return CostOf(0.1, 2 * CidrSize(a[0])) + StringParse(a[1]);
}
uint64_t ContainsCidrCost(const Val* a, uint32_t) {
  return CostOf(0.1, 2 * CidrSize(a[0])) + CostOf(0.1, CidrSize(a[0])) + 1 + StringParse(a[1]);
}

// ---- URL (library/urls.go) --------------------------------------------------------------------

// url() checks the text with url.ParseRequestURI (an absolute URI or an absolute path), then
// keeps what url.Parse makes of it (ParseRequestURI would read a fragment into the path).
Val UrlFn(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString) NO_OVERLOAD("url");
  constexpr std::string_view kPrefix = "URL parse error during conversion from string: ";
  std::string error;
  GoUrl checked;
  if (!ParseRequestUri(a[0].str(), &checked, &error)) return ctx.Error(std::string(kPrefix) + error);
  auto* url = ctx.arena.New<GoUrl>();
  if (!ParseUrl(a[0].str(), url, &error)) return ctx.Error(std::string(kPrefix) + error);
  Val r;
  r.kind = VK::kURL;
  r.url = url;
  return r;
}
Val IsUrl(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString) NO_OVERLOAD("isURL");
  GoUrl url;
  std::string error;
  return Val::Bool(ParseRequestUri(a[0].str(), &url, &error));
}
enum class UrlPart { kScheme, kHost, kHostname, kPort, kEscapedPath };
template <UrlPart kPart>
Val UrlGet(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kURL) {
    NO_OVERLOAD(kPart == UrlPart::kScheme     ? "getScheme"
                : kPart == UrlPart::kHost     ? "getHost"
                : kPart == UrlPart::kHostname ? "getHostname"
                : kPart == UrlPart::kPort     ? "getPort"
                                              : "getEscapedPath");
  }
  const GoUrl& u = *a[0].url;
  switch (kPart) {
    case UrlPart::kScheme: return Val::Str(u.scheme);  // the URL lives as long as the arena
    case UrlPart::kHost: return Val::Str(u.host);
    case UrlPart::kHostname: return Val::Str(Hostname(u));
    case UrlPart::kPort: return Val::Str(Port(u));
    case UrlPart::kEscapedPath: return ctx.String(EscapedPath(u));
  }
  return Val::Str("");
}
// getQuery: map(string, list(string)), each key's values in order.
Val UrlQuery(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kURL) NO_OVERLOAD("getQuery");
  const QueryValues query = ParseQuery(a[0].url->raw_query);
  const auto size = static_cast<uint32_t>(query.size());
  auto* rep = ctx.arena.New<MapRep>();
  rep->keys = ctx.arena.NewArray<Val>(size);
  rep->vals = ctx.arena.NewArray<Val>(size);
  rep->used = rep->cap = size;
  for (uint32_t i = 0; i < size; ++i) {
    rep->keys[i] = ctx.String(query[i].first);
    Val list = ctx.ListWithCapacity(static_cast<uint32_t>(query[i].second.size()));
    for (const std::string& value : query[i].second) {
      const Val v = ctx.String(value);
      list = ctx.Append(list, &v, 1);
    }
    rep->vals[i] = list;
  }
  Val r;
  r.kind = VK::kMap;
  r.m = rep;
  r.n = size;
  return r;
}

#undef NO_OVERLOAD
}  // namespace

Val ParseQuantityVal(Ctx& ctx, std::string_view text) {
  absl::StatusOr<Quantity> q = Quantity::Parse(text);
  if (!q.ok()) return ctx.Error(devlet::Message(q.status()));
  return QVal(ctx, std::move(*q));
}

Val ParseSemverVal(Ctx& ctx, std::string_view text, bool normalize) {
  absl::StatusOr<Semver> v = Semver::Parse(text, normalize);
  if (!v.ok()) return ctx.Error(devlet::Message(v.status()));
  Val r;
  r.kind = VK::kSemver;
  r.v = ctx.arena.New<Semver>(std::move(*v));
  return r;
}

bool QuantityEqual(const Quantity& a, const Quantity& b) {
  return a.Equal(b);
}
bool SemverEqual(const Semver& a, const Semver& b) {
  return a.Compare(b) == 0;
}
std::string QuantityString(const Quantity& q) {
  return q.ToString();
}
std::string SemverString(const Semver& v) {
  return v.ToString();
}
std::shared_ptr<const Quantity> CopyQuantity(const Quantity& q) {
  return std::make_shared<const Quantity>(q);
}
std::shared_ptr<const Semver> CopySemver(const Semver& v) {
  return std::make_shared<const Semver>(v);
}

// ---- Kubernetes lists, regex and DRA includes -----------------------------------------------
// (k8s.io/apiserver/pkg/cel/library lists.go and regex.go; dynamic-resource-allocation's
// includes). indexOf/lastIndexOf are one function with the strings library (functions.cc).

namespace {

#define NO_OVERLOAD(name) return ctx.NoOverload(name, a, n)

bool IsNumber(const Val& v) {
  return v.kind == VK::kInt || v.kind == VK::kUint || v.kind == VK::kDouble;
}

Val IsSorted(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList) NO_OVERLOAD("isSorted");
  for (uint32_t i = 1; i < a[0].n; ++i) {
    const auto c = Compare(a[0].l->data[i - 1], a[0].l->data[i]);
    if (!c) return ctx.NoOverload("isSorted", &a[0].l->data[i], 1);
    if (*c > 0) return Val::Bool(false);
  }
  return Val::Bool(true);
}

Val Sum(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kList) NO_OVERLOAD("sum");
  if (a[0].n == 0) return Val::Int(0);
  Val acc = a[0].l->data[0];
  // Kubernetes sums ints, uints, doubles and durations; a list of anything else has no
  // overload, and the error names the list.
  if (!IsNumber(acc) && acc.kind != VK::kDuration) return ctx.NoOverload("sum", a, 1);
  for (uint32_t i = 1; i < a[0].n; ++i) {
    Val args[2] = {acc, a[0].l->data[i]};
    acc = AddValues(ctx, args, 2);
    if (acc.is_error()) return acc;
  }
  return acc;
}

Val MinMax(Ctx& ctx, const Val* a, uint32_t n, bool is_min) {
  const char* name = is_min ? "min" : "max";
  if (a[0].kind != VK::kList) NO_OVERLOAD(name);
  if (a[0].n == 0) return ctx.Error(std::string(name) + " called on empty list");
  Val best = a[0].l->data[0];
  for (uint32_t i = 1; i < a[0].n; ++i) {
    const Val& e = a[0].l->data[i];
    const auto c = Compare(e, best);
    if (!c) return ctx.NoOverload(name, &a[0], 1);  // cel-go: "no such overload: max(list)"
    if (is_min ? *c < 0 : *c > 0) best = e;
  }
  if (a[0].n == 1 && !IsNumber(best) && best.kind != VK::kString && best.kind != VK::kBytes &&
      best.kind != VK::kBool) {
    return ctx.NoOverload(name, &a[0], 1);
  }
  return best;
}
Val Min(Ctx& ctx, const Val* a, uint32_t n) { return MinMax(ctx, a, n, true); }
Val Max(Ctx& ctx, const Val* a, uint32_t n) { return MinMax(ctx, a, n, false); }

Val Find(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString || a[1].kind != VK::kString) NO_OVERLOAD("find");
  std::string error;
  auto re = CompileRegex(a[1].str(), &error);
  if (!re) return ctx.Error(error);
  return RegexFind(ctx, *re, a[0].str());
}
Val FindAll(Ctx& ctx, const Val* a, uint32_t n) {
  if (a[0].kind != VK::kString || a[1].kind != VK::kString || (n == 3 && a[2].kind != VK::kInt)) {
    NO_OVERLOAD("findAll");
  }
  std::string error;
  auto re = CompileRegex(a[1].str(), &error);
  if (!re) return ctx.Error(error);
  return RegexFindAll(ctx, *re, a[0].str(), n == 3 ? a[2].i : -1);
}

Val Includes(Ctx& ctx, const Val* a, uint32_t) {
  if (a[0].kind == VK::kList) {
    if (a[0].n > 48) return ctx.Error("'includes' function cannot be applied to lists longer than 48 values");
    return Val::Bool(ListContains(a[0], a[1]));
  }
  return Val::Bool(EqualBool(a[0], a[1]));
}
// Kubernetes charges `includes` as one traversal of the receiver (library/cost.go).
uint64_t IncludesCost(const Val* a, uint32_t) { return TraversalCostOf(a[0]); }
uint64_t TraversalCost(const Val* a, uint32_t) { return TraversalCostOf(a[0]); }
uint64_t MatchesCost(const Val* a, uint32_t n) { return RegexCallCost(a, n); }

#undef NO_OVERLOAD

}  // namespace

std::vector<FunctionDef> KubernetesObjectFunctions() {
  constexpr uint32_t kQ = kQuantityLibrary, kS = kSemverLibrary, kIP = kIPLibrary,
                     kC = kCIDRLibrary, kU = kURLLibrary;
  return {
      // Kubernetes lists (indexOf/lastIndexOf: functions.cc, shared with strings).
      {"isSorted", IsSorted, false, true, kKubernetesListsLibrary, TraversalCost, K::kBool, 1, 1,
       "list -> bool", KC::kListTraversal},
      {"sum", Sum, false, true, kKubernetesListsLibrary, TraversalCost, K::kDyn, 1, 1,
       "list -> dyn", KC::kListTraversal},
      {"min", Min, false, true, kKubernetesListsLibrary, TraversalCost, K::kDyn, 1, 1,
       "list -> dyn", KC::kListTraversal},
      {"max", Max, false, true, kKubernetesListsLibrary, TraversalCost, K::kDyn, 1, 1,
       "list -> dyn", KC::kListTraversal},
      // Kubernetes regex.
      {"find", Find, false, true, kRegexLibrary, MatchesCost, K::kString, 2, 2,
       "string, string -> string", KC::kRegexFind},
      {"findAll", FindAll, false, true, kRegexLibrary, MatchesCost, K::kList, 2, 3,
       "string, string -> list(string); string, string, int -> list(string)", KC::kRegexFind},
      // DRA includes.
      {"includes", Includes, false, true, kIncludesLibrary, IncludesCost, K::kBool, 2, 2, "",
       KC::kIncludes},
      // Kubernetes quantity, semver, IP, CIDR, URL.
      {"quantity", QuantityFn, true, false, kQ, ParseCost, K::kQuantity, 1, 1, "string -> Quantity",
       KC::kParse},
      {"isQuantity", IsQuantity, true, false, kQ, ParseCost, K::kBool, 1, 1, "string -> bool",
       KC::kParse},
      {"sign", Sign, true, false, kQ, nullptr, K::kInt, 1, 1, "Quantity -> int", KC::kNominal},
      {"isGreaterThan", IsGreaterThan, false, true, kQ | kS, nullptr, K::kBool, 2, 2,
       "Quantity, Quantity -> bool; Semver, Semver -> bool", KC::kNominal},
      {"isLessThan", IsLessThan, false, true, kQ | kS, nullptr, K::kBool, 2, 2,
       "Quantity, Quantity -> bool; Semver, Semver -> bool", KC::kNominal},
      {"compareTo", CompareTo, false, true, kQ | kS, nullptr, K::kInt, 2, 2,
       "Quantity, Quantity -> int; Semver, Semver -> int", KC::kNominal},
      {"asInteger", AsInteger, false, true, kQ, nullptr, K::kInt, 1, 1, "Quantity -> int",
       KC::kNominal},
      {"isInteger", IsInteger, false, true, kQ, nullptr, K::kBool, 1, 1, "Quantity -> bool",
       KC::kNominal},
      {"asApproximateFloat", AsApproximateFloat, false, true, kQ, nullptr, K::kDouble, 1, 1,
       "Quantity -> double", KC::kNominal},
      {"add", QAdd, false, true, kQ, nullptr, K::kQuantity, 2, 2,
       "Quantity, Quantity -> Quantity; Quantity, int -> Quantity", KC::kNominal},
      {"sub", QSub, false, true, kQ, nullptr, K::kQuantity, 2, 2,
       "Quantity, Quantity -> Quantity; Quantity, int -> Quantity", KC::kNominal},
      {"semver", SemverFn, true, false, kS, ParseCost, K::kSemver, 1, 2,
       "string -> Semver; string, bool -> Semver", KC::kParse},
      {"isSemver", IsSemver, true, false, kS, ParseCost, K::kBool, 1, 2,
       "string -> bool; string, bool -> bool", KC::kParse},
      {"major", SemverPart<0>, false, true, kS, nullptr, K::kInt, 1, 1, "Semver -> int",
       KC::kNominal},
      {"minor", SemverPart<1>, false, true, kS, nullptr, K::kInt, 1, 1, "Semver -> int",
       KC::kNominal},
      {"patch", SemverPart<2>, false, true, kS, nullptr, K::kInt, 1, 1, "Semver -> int",
       KC::kNominal},
      {"ip", IpFn, true, true, kIP | kC, ParseCost, K::kIP, 1, 1, "string -> IP; CIDR -> IP",
       KC::kParse},
      {"isIP", IsIp, true, false, kIP, ParseCost, K::kBool, 1, 1, "string -> bool", KC::kParse},
      {"ip.isCanonical", IpIsCanonical, true, false, kIP, CanonicalCost, K::kBool, 1, 1,
       "string -> bool", KC::kCanonical},
      {"family", IpFamily, false, true, kIP, nullptr, K::kInt, 1, 1, "IP -> int", KC::kNominal},
      {"isUnspecified", IpTest<&IpAddr::IsUnspecified>, false, true, kIP, nullptr, K::kBool, 1, 1,
       "IP -> bool", KC::kNominal},
      {"isLoopback", IpTest<&IpAddr::IsLoopback>, false, true, kIP, nullptr, K::kBool, 1, 1,
       "IP -> bool", KC::kNominal},
      {"isLinkLocalMulticast", IpTest<&IpAddr::IsLinkLocalMulticast>, false, true, kIP, nullptr,
       K::kBool, 1, 1, "IP -> bool", KC::kNominal},
      {"isLinkLocalUnicast", IpTest<&IpAddr::IsLinkLocalUnicast>, false, true, kIP, nullptr,
       K::kBool, 1, 1, "IP -> bool", KC::kNominal},
      {"isGlobalUnicast", IpTest<&IpAddr::IsGlobalUnicast>, false, true, kIP, nullptr, K::kBool, 1,
       1, "IP -> bool", KC::kNominal},
      {"cidr", CidrFn, true, false, kC, ParseCost, K::kCIDR, 1, 1, "string -> CIDR", KC::kParse},
      {"isCIDR", IsCidr, true, false, kC, ParseCost, K::kBool, 1, 1, "string -> bool", KC::kParse},
      {"containsIP", ContainsIp, false, true, kC, ContainsIpCost, K::kBool, 2, 2,
       "CIDR, string -> bool; CIDR, IP -> bool", KC::kContainsIP},
      {"containsCIDR", ContainsCidr, false, true, kC, ContainsCidrCost, K::kBool, 2, 2,
       "CIDR, string -> bool; CIDR, CIDR -> bool", KC::kContainsCIDR},
      {"masked", Masked, false, true, kC, nullptr, K::kCIDR, 1, 1, "CIDR -> CIDR", KC::kNominal},
      {"prefixLength", PrefixLength, false, true, kC, nullptr, K::kInt, 1, 1, "CIDR -> int",
       KC::kNominal},
      {"url", UrlFn, true, false, kU, ParseCost, K::kURL, 1, 1, "string -> URL", KC::kUrl},
      {"isURL", IsUrl, true, false, kU, nullptr, K::kBool, 1, 1, "string -> bool"},
      {"getScheme", UrlGet<UrlPart::kScheme>, false, true, kU, nullptr, K::kString, 1, 1,
       "URL -> string", KC::kNominal},
      {"getHost", UrlGet<UrlPart::kHost>, false, true, kU, nullptr, K::kString, 1, 1,
       "URL -> string", KC::kNominal},
      {"getHostname", UrlGet<UrlPart::kHostname>, false, true, kU, nullptr, K::kString, 1, 1,
       "URL -> string", KC::kNominal},
      {"getPort", UrlGet<UrlPart::kPort>, false, true, kU, nullptr, K::kString, 1, 1,
       "URL -> string", KC::kNominal},
      {"getEscapedPath", UrlGet<UrlPart::kEscapedPath>, false, true, kU, nullptr, K::kString, 1, 1,
       "URL -> string", KC::kNominal},
      {"getQuery", UrlQuery, false, true, kU, nullptr, K::kMap, 1, 1,
       "URL -> map(string, list(string))", KC::kNominal},
  };
}

}  // namespace devlet::cel::internal
