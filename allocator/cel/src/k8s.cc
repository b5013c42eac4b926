// CEL bindings for the Kubernetes Quantity and Semver libraries (research §3.4). The value
// classes themselves (quantity.h, semver.h) are owned separately; until they are present this file
// compiles to stubs whose functions report "library unavailable".
#include <string>
#include <vector>

#include "devlet/common/status.h"
#include "eval.h"
#include "netip.h"
#include "neturl.h"
#include "utf8.h"

#if __has_include("devlet/cel/quantity.h")
#include "devlet/cel/quantity.h"
#define DEVLET_CEL_HAVE_QUANTITY 1
#else
#define DEVLET_CEL_HAVE_QUANTITY 0
#endif
#if __has_include("devlet/cel/semver.h")
#include "devlet/cel/semver.h"
#define DEVLET_CEL_HAVE_SEMVER 1
#else
#define DEVLET_CEL_HAVE_SEMVER 0
#endif

namespace devlet::cel::internal {

bool HaveQuantity() { return DEVLET_CEL_HAVE_QUANTITY; }
bool HaveSemver() { return DEVLET_CEL_HAVE_SEMVER; }

namespace {
using K = Type::Kind;
#define NO_OVERLOAD(name) return ctx.NoOverload(name, a, n)

// Kubernetes library/cost.go: parsing costs 0.1 per character (code point) of the argument.
uint64_t ParseCost(const Val* a, uint32_t) {
  return CostOf(0.1, a[0].kind == VK::kString ? Utf8CountCodePoints(a[0].str()) : 1);
}

Val Compare3(Ctx& ctx, const Val* a, uint32_t n, const char* name, int* out) {
#if DEVLET_CEL_HAVE_QUANTITY
  if (a[0].kind == VK::kQuantity && a[1].kind == VK::kQuantity) {
    *out = a[0].q->Compare(*a[1].q);
    return Val::Bool(true);
  }
#endif
#if DEVLET_CEL_HAVE_SEMVER
  if (a[0].kind == VK::kSemver && a[1].kind == VK::kSemver) {
    *out = a[0].v->Compare(*a[1].v);
    return Val::Bool(true);
  }
#endif
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

#if DEVLET_CEL_HAVE_QUANTITY
Val QVal(Ctx& ctx, Quantity q) {
  Val r;
  r.kind = VK::kQuantity;
  r.q = ctx.arena.New<Quantity>(std::move(q));
  return r;
}
#endif

Val Sign(Ctx& ctx, const Val* a, uint32_t n) {
#if DEVLET_CEL_HAVE_QUANTITY
  if (a[0].kind == VK::kQuantity) return Val::Int(a[0].q->Sign());
#endif
  NO_OVERLOAD("sign");
}
Val AsInteger(Ctx& ctx, const Val* a, uint32_t n) {
#if DEVLET_CEL_HAVE_QUANTITY
  if (a[0].kind == VK::kQuantity) {
    std::optional<int64_t> v = a[0].q->AsInt64();
    if (!v) return ctx.Error("cannot convert value to integer");
    return Val::Int(*v);
  }
#endif
  NO_OVERLOAD("asInteger");
}
Val IsInteger(Ctx& ctx, const Val* a, uint32_t n) {
#if DEVLET_CEL_HAVE_QUANTITY
  if (a[0].kind == VK::kQuantity) return Val::Bool(a[0].q->AsInt64().has_value());
#endif
  NO_OVERLOAD("isInteger");
}
Val AsApproximateFloat(Ctx& ctx, const Val* a, uint32_t n) {
#if DEVLET_CEL_HAVE_QUANTITY
  if (a[0].kind == VK::kQuantity) return Val::Double(a[0].q->AsApproximateFloat());
#endif
  NO_OVERLOAD("asApproximateFloat");
}
Val AddSub(Ctx& ctx, const Val* a, uint32_t n, bool add) {
#if DEVLET_CEL_HAVE_QUANTITY
  if (a[0].kind == VK::kQuantity && (a[1].kind == VK::kQuantity || a[1].kind == VK::kInt)) {
    const Quantity other = a[1].kind == VK::kQuantity ? *a[1].q : Quantity::FromInt64(a[1].i);
    absl::StatusOr<Quantity> r = add ? a[0].q->Add(other) : a[0].q->Sub(other);
    if (!r.ok()) return ctx.Error(devlet::Message(r.status()));
    Val v = QVal(ctx, std::move(*r));
    v.sub = kQuantityPointer;
    return v;
  }
#endif
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
#if DEVLET_CEL_HAVE_SEMVER
  if (a[0].kind == VK::kSemver) {
    const uint64_t v = kPart == 0 ? a[0].v->Major() : kPart == 1 ? a[0].v->Minor() : a[0].v->Patch();
    return Val::Int(static_cast<int64_t>(v));
  }
#endif
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
#if DEVLET_CEL_HAVE_QUANTITY
  absl::StatusOr<Quantity> q = Quantity::Parse(text);
  if (!q.ok()) return ctx.Error(devlet::Message(q.status()));
  return QVal(ctx, std::move(*q));
#else
  (void)text;
  return ctx.Error("quantity library unavailable");
#endif
}

Val ParseSemverVal(Ctx& ctx, std::string_view text, bool normalize) {
#if DEVLET_CEL_HAVE_SEMVER
  absl::StatusOr<Semver> v = Semver::Parse(text, normalize);
  if (!v.ok()) return ctx.Error(devlet::Message(v.status()));
  Val r;
  r.kind = VK::kSemver;
  r.v = ctx.arena.New<Semver>(std::move(*v));
  return r;
#else
  (void)text;
  (void)normalize;
  return ctx.Error("semver library unavailable");
#endif
}

bool QuantityEqual(const Quantity& a, const Quantity& b) {
#if DEVLET_CEL_HAVE_QUANTITY
  return a.Equal(b);
#else
  return &a == &b;
#endif
}
bool SemverEqual(const Semver& a, const Semver& b) {
#if DEVLET_CEL_HAVE_SEMVER
  return a.Compare(b) == 0;
#else
  return &a == &b;
#endif
}
std::string QuantityString(const Quantity& q) {
#if DEVLET_CEL_HAVE_QUANTITY
  return q.ToString();
#else
  (void)q;
  return "?";
#endif
}
std::string SemverString(const Semver& v) {
#if DEVLET_CEL_HAVE_SEMVER
  return v.ToString();
#else
  (void)v;
  return "?";
#endif
}
std::shared_ptr<const Quantity> CopyQuantity(const Quantity& q) {
#if DEVLET_CEL_HAVE_QUANTITY
  return std::make_shared<const Quantity>(q);
#else
  (void)q;
  return nullptr;
#endif
}
std::shared_ptr<const Semver> CopySemver(const Semver& v) {
#if DEVLET_CEL_HAVE_SEMVER
  return std::make_shared<const Semver>(v);
#else
  (void)v;
  return nullptr;
#endif
}

std::vector<FunctionDef> KubernetesObjectFunctions() {
  constexpr uint32_t kQ = kQuantityLibrary, kS = kSemverLibrary, kIP = kIPLibrary,
                     kC = kCIDRLibrary, kU = kURLLibrary;
  return {
      {"quantity", QuantityFn, true, false, kQ, ParseCost, K::kQuantity, 1, 1},
      {"isQuantity", IsQuantity, true, false, kQ, ParseCost, K::kBool, 1, 1},
      {"sign", Sign, true, false, kQ, nullptr, K::kInt, 1, 1},
      {"isGreaterThan", IsGreaterThan, false, true, kQ | kS, nullptr, K::kBool, 2, 2},
      {"isLessThan", IsLessThan, false, true, kQ | kS, nullptr, K::kBool, 2, 2},
      {"compareTo", CompareTo, false, true, kQ | kS, nullptr, K::kInt, 2, 2},
      {"asInteger", AsInteger, false, true, kQ, nullptr, K::kInt, 1, 1},
      {"isInteger", IsInteger, false, true, kQ, nullptr, K::kBool, 1, 1},
      {"asApproximateFloat", AsApproximateFloat, false, true, kQ, nullptr, K::kDouble, 1, 1},
      {"add", QAdd, false, true, kQ, nullptr, K::kQuantity, 2, 2},
      {"sub", QSub, false, true, kQ, nullptr, K::kQuantity, 2, 2},
      {"semver", SemverFn, true, false, kS, ParseCost, K::kSemver, 1, 2},
      {"isSemver", IsSemver, true, false, kS, ParseCost, K::kBool, 1, 2},
      {"major", SemverPart<0>, false, true, kS, nullptr, K::kInt, 1, 1},
      {"minor", SemverPart<1>, false, true, kS, nullptr, K::kInt, 1, 1},
      {"patch", SemverPart<2>, false, true, kS, nullptr, K::kInt, 1, 1},
      {"ip", IpFn, true, true, kIP | kC, ParseCost, K::kIP, 1, 1},
      {"isIP", IsIp, true, false, kIP, ParseCost, K::kBool, 1, 1},
      {"ip.isCanonical", IpIsCanonical, true, false, kIP, CanonicalCost, K::kBool, 1, 1},
      {"family", IpFamily, false, true, kIP, nullptr, K::kInt, 1, 1},
      {"isUnspecified", IpTest<&IpAddr::IsUnspecified>, false, true, kIP, nullptr, K::kBool, 1, 1},
      {"isLoopback", IpTest<&IpAddr::IsLoopback>, false, true, kIP, nullptr, K::kBool, 1, 1},
      {"isLinkLocalMulticast", IpTest<&IpAddr::IsLinkLocalMulticast>, false, true, kIP, nullptr,
       K::kBool, 1, 1},
      {"isLinkLocalUnicast", IpTest<&IpAddr::IsLinkLocalUnicast>, false, true, kIP, nullptr,
       K::kBool, 1, 1},
      {"isGlobalUnicast", IpTest<&IpAddr::IsGlobalUnicast>, false, true, kIP, nullptr, K::kBool, 1,
       1},
      {"cidr", CidrFn, true, false, kC, ParseCost, K::kCIDR, 1, 1},
      {"isCIDR", IsCidr, true, false, kC, ParseCost, K::kBool, 1, 1},
      {"containsIP", ContainsIp, false, true, kC, ContainsIpCost, K::kBool, 2, 2},
      {"containsCIDR", ContainsCidr, false, true, kC, ContainsCidrCost, K::kBool, 2, 2},
      {"masked", Masked, false, true, kC, nullptr, K::kCIDR, 1, 1},
      {"prefixLength", PrefixLength, false, true, kC, nullptr, K::kInt, 1, 1},
      {"url", UrlFn, true, false, kU, ParseCost, K::kURL, 1, 1},
      {"isURL", IsUrl, true, false, kU, nullptr, K::kBool, 1, 1},
      {"getScheme", UrlGet<UrlPart::kScheme>, false, true, kU, nullptr, K::kString, 1, 1},
      {"getHost", UrlGet<UrlPart::kHost>, false, true, kU, nullptr, K::kString, 1, 1},
      {"getHostname", UrlGet<UrlPart::kHostname>, false, true, kU, nullptr, K::kString, 1, 1},
      {"getPort", UrlGet<UrlPart::kPort>, false, true, kU, nullptr, K::kString, 1, 1},
      {"getEscapedPath", UrlGet<UrlPart::kEscapedPath>, false, true, kU, nullptr, K::kString, 1,
       1},
      {"getQuery", UrlQuery, false, true, kU, nullptr, K::kMap, 1, 1},
  };
}

}  // namespace devlet::cel::internal
