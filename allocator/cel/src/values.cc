// Value semantics of the evaluator: equality, ordering, maps, selection, indexing, conversions
// between Val and Value, and the DRA device object.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "devlet/cel/dra.h"
#include "eval.h"
#include "netip.h"
#include "neturl.h"

namespace devlet::cel::internal {

std::string_view TypeNameOf(const Val& v) {
  switch (v.kind) {
    case VK::kNull: return "null_type";
    case VK::kBool: return "bool";
    case VK::kInt: return "int";
    case VK::kUint: return "uint";
    case VK::kDouble: return "double";
    case VK::kString: return "string";
    case VK::kBytes: return "bytes";
    case VK::kList: return "list";
    case VK::kMap:
    case VK::kDeviceMap:
    case VK::kDomainMap: return "map";
    case VK::kOptional: return "optional_type";
    case VK::kType: return "type";
    case VK::kError: return "error";
    case VK::kQuantity: return "kubernetes.Quantity";
    case VK::kSemver: return "kubernetes.Semver";
    case VK::kIP: return "net.IP";
    case VK::kCIDR: return "net.CIDR";
    case VK::kFormat: return "kubernetes.NamedFormat";
    case VK::kURL: return "kubernetes.URL";
    case VK::kDevice: return "kubernetes.DRADevice";
    case VK::kTimestamp: return "google.protobuf.Timestamp";
    case VK::kDuration: return "google.protobuf.Duration";
  }
  return "dyn";
}

namespace {

// cel-go binds these operators and functions once for all overloads (a singleton binding that
// requires a trait of the first operand); the traits' kinds.
bool HasTrait(std::string_view fn, VK k, bool* singleton) {
  *singleton = true;
  const bool number = k == VK::kInt || k == VK::kUint || k == VK::kDouble;
  const bool time = k == VK::kTimestamp || k == VK::kDuration;
  const bool text = k == VK::kString || k == VK::kBytes;
  if (fn == "_<_" || fn == "_<=_" || fn == "_>_" || fn == "_>=_") {
    return number || text || time || k == VK::kBool;  // traits.Comparer
  }
  if (fn == "_+_") return number || text || time || k == VK::kList;  // traits.Adder
  if (fn == "_-_") return number || time;                            // traits.Subtractor
  if (fn == "_*_" || fn == "_/_") return number;                     // Multiplier, Divider
  if (fn == "_%_") return k == VK::kInt || k == VK::kUint;           // traits.Modder
  if (fn == "-_") return k == VK::kInt || k == VK::kDouble || k == VK::kDuration;  // Negater
  if (fn == "size") {  // traits.Sizer
    return text || k == VK::kList || k == VK::kMap || k == VK::kDeviceMap || k == VK::kDomainMap;
  }
  *singleton = false;
  return false;
}

}  // namespace

// cel-go's texts: a singleton binding whose first operand lacks the trait says "no such
// overload: _+_"; one that has it but rejects the other operand says "no such overload"; a
// dispatched or guarded overload names the function and the argument types.
Val Ctx::NoOverload(std::string_view fn, const Val* args, uint32_t n) {
  bool singleton = false;
  const bool trait = n > 0 && HasTrait(fn, args[0].kind, &singleton);
  if (singleton) {
    return Error(trait ? std::string("no such overload") : "no such overload: " + std::string(fn));
  }
  std::string msg = "no such overload: ";
  msg.append(fn);
  msg += "(";
  for (uint32_t i = 0; i < n; ++i) {
    if (i) msg += ", ";
    msg.append(TypeNameOf(args[i]));
  }
  msg += ")";
  return Error(msg);
}

Val Ctx::ListWithCapacity(uint32_t cap) {
  auto* rep = arena.New<ListRep>();
  rep->cap = cap;
  rep->used = 0;
  rep->data = cap ? arena.NewArray<Val>(cap) : nullptr;
  Val r;
  r.kind = VK::kList;
  r.l = rep;
  r.n = 0;
  return r;
}

Val Ctx::List(const Val* elems, uint32_t n) {
  Val r = ListWithCapacity(n);
  if (n) std::memcpy(static_cast<void*>(r.l->data), elems, sizeof(Val) * n);
  r.l->used = n;
  r.n = n;
  return r;
}

Val Ctx::Append(const Val& list, const Val* elems, uint32_t n) {
  if (n == 0) return list;
  ListRep* rep = list.l;
  if (rep != nullptr && rep->used == list.n && rep->cap - rep->used >= n) {
    std::memcpy(static_cast<void*>(rep->data + rep->used), elems, sizeof(Val) * n);
    rep->used += n;
    Val r = list;
    r.n = list.n + n;
    return r;
  }
  const uint32_t size = list.n + n;
  Val r = ListWithCapacity(std::max<uint32_t>(size, list.n * 2));
  if (list.n) std::memcpy(static_cast<void*>(r.l->data), list.l->data, sizeof(Val) * list.n);
  std::memcpy(static_cast<void*>(r.l->data + list.n), elems, sizeof(Val) * n);
  r.l->used = size;
  r.n = size;
  return r;
}

// ---- Equality and ordering -----------------------------------------------------------------

namespace {

bool IsNumber(const Val& v) { return v.kind == VK::kInt || v.kind == VK::kUint || v.kind == VK::kDouble; }

// Numeric comparison across int, uint and double; nullopt for NaN.
std::optional<int> CompareNumbers(const Val& a, const Val& b) {
  auto cmp = [](auto x, auto y) { return x < y ? -1 : (x > y ? 1 : 0); };
  if (a.kind == b.kind) {
    if (a.kind == VK::kInt) return cmp(a.i, b.i);
    if (a.kind == VK::kUint) return cmp(a.u, b.u);
    if (std::isnan(a.d) || std::isnan(b.d)) return std::nullopt;
    return cmp(a.d, b.d);
  }
  if (a.kind == VK::kInt && b.kind == VK::kUint) {
    if (a.i < 0) return -1;
    return cmp(static_cast<uint64_t>(a.i), b.u);
  }
  if (a.kind == VK::kUint && b.kind == VK::kInt) {
    if (b.i < 0) return 1;
    return cmp(a.u, static_cast<uint64_t>(b.i));
  }
  // One side is a double: as cel-go (compareIntDouble / compareUintDouble), which compares via
  // float64 inside the integer range and is therefore lossy near 2^63.
  const bool a_double = a.kind == VK::kDouble;
  const double d = a_double ? a.d : b.d;
  const Val& other = a_double ? b : a;
  if (std::isnan(d)) return std::nullopt;
  int r;  // compare other with d
  if (other.kind == VK::kInt) {
    if (d < -9223372036854775808.0) {
      r = 1;
    } else if (d > 9223372036854775807.0) {
      r = -1;
    } else {
      r = cmp(static_cast<double>(other.i), d);
    }
  } else {
    if (d < 0) {
      r = 1;
    } else if (d > 18446744073709551615.0) {
      r = -1;
    } else {
      r = cmp(static_cast<double>(other.u), d);
    }
  }
  return a_double ? -r : r;
}

bool MapLike(const Val& v) {
  return v.kind == VK::kMap || v.kind == VK::kDeviceMap || v.kind == VK::kDomainMap;
}

// The keys an index accepts: in cel-go (go_map_keys) the kinds it can use as an attribute
// qualifier (interpreter/attributes.go); others fail "invalid qualifier type" before any lookup.
bool ValidKey(const Val& k) {
  return k.kind == VK::kString || k.kind == VK::kInt || k.kind == VK::kUint || k.kind == VK::kBool ||
         k.kind == VK::kDouble;
}

// Key equality: numbers compare by value across types.
bool KeyEqual(const Val& a, const Val& b) {
  if (IsNumber(a) && IsNumber(b)) {
    auto c = CompareNumbers(a, b);
    return c && *c == 0;
  }
  if (a.kind != b.kind) return false;
  if (a.kind == VK::kString) return a.str() == b.str();
  if (a.kind == VK::kBool) return a.b == b.b;
  return false;
}

std::string KeyText(const Val& k) {
  switch (k.kind) {
    case VK::kString: return std::string(k.str());
    case VK::kInt: return std::to_string(k.i);
    case VK::kUint: return std::to_string(k.u);
    case VK::kBool: return k.b ? "true" : "false";
    case VK::kDouble: return FormatDouble(k.d);
    default: return std::string(TypeNameOf(k));
  }
}

}  // namespace

bool EqualBool(const Val& a, const Val& b) {
  if (IsNumber(a) && IsNumber(b)) {
    auto c = CompareNumbers(a, b);
    return c && *c == 0;
  }
  if (MapLike(a) && MapLike(b)) {
    // Generic path through lookups; device maps are rare in comparisons.
    Arena scratch;
    Ctx ctx(scratch);
    if (MapSize(ctx, a) != MapSize(ctx, b)) return false;
    Val keys = MapKeys(ctx, a);
    for (uint32_t i = 0; i < keys.n; ++i) {
      Val x, y;
      if (!MapFind(ctx, a, keys.l->data[i], &x) || !MapFind(ctx, b, keys.l->data[i], &y)) return false;
      if (!EqualBool(x, y)) return false;
    }
    return true;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case VK::kNull: return true;
    case VK::kBool: return a.b == b.b;
    case VK::kString:
    case VK::kBytes:
    case VK::kType: return a.str() == b.str();
    case VK::kList: {
      if (a.n != b.n) return false;
      for (uint32_t i = 0; i < a.n; ++i) {
        if (!EqualBool(a.l->data[i], b.l->data[i])) return false;
      }
      return true;
    }
    case VK::kOptional:
      if (a.opt == nullptr || b.opt == nullptr) return a.opt == b.opt;
      return EqualBool(*a.opt, *b.opt);
    case VK::kQuantity: return QuantityEqual(*a.q, *b.q);
    case VK::kSemver: return SemverEqual(*a.v, *b.v);
    case VK::kIP: return *a.ip == *b.ip;
    case VK::kCIDR: return *a.cidr == *b.cidr;
    case VK::kFormat: return a.i == b.i;  // Format.Equal compares the names
    case VK::kURL: return UrlString(*a.url) == UrlString(*b.url);  // URL.Equal compares String()
    case VK::kDevice: return a.dev == b.dev;
    case VK::kTimestamp: return a.i == b.i && a.n == b.n;
    case VK::kDuration: return a.i == b.i && a.n == b.n;
    default: return false;
  }
}

EqualResult EqualTri(const Val& a, const Val& b, bool null_check) {
  if (null_check && (a.kind == VK::kNull || b.kind == VK::kNull)) {
    return a.kind == b.kind ? EqualResult::kTrue : EqualResult::kFalse;
  }
  auto of = [](bool x) { return x ? EqualResult::kTrue : EqualResult::kFalse; };
  switch (a.kind) {
    case VK::kQuantity:
      if (b.kind != VK::kQuantity || b.sub == kQuantityPointer) return EqualResult::kNoOverload;
      break;
    case VK::kSemver:
    case VK::kIP:
    case VK::kCIDR:
    case VK::kFormat:
    case VK::kURL:
      if (b.kind != a.kind) return EqualResult::kNoOverload;
      break;
    case VK::kList:
      if (b.kind != VK::kList || a.n != b.n) return EqualResult::kFalse;
      for (uint32_t i = 0; i < a.n; ++i) {
        if (EqualTri(a.l->data[i], b.l->data[i], true) == EqualResult::kFalse) {
          return EqualResult::kFalse;
        }
      }
      return EqualResult::kTrue;
    case VK::kOptional:
      // Optional.Equal calls the value's own Equal (no null check there).
      if (b.kind != VK::kOptional) return EqualResult::kFalse;
      if (a.opt == nullptr || b.opt == nullptr) return of(a.opt == b.opt);
      return EqualTri(*a.opt, *b.opt, false);
    case VK::kNull: return of(b.kind == VK::kNull);
    default:
      if (MapLike(a)) {
        if (!MapLike(b)) return EqualResult::kFalse;
        Arena scratch;
        Ctx ctx(scratch);
        if (MapSize(ctx, a) != MapSize(ctx, b)) return EqualResult::kFalse;
        const Val keys = MapKeys(ctx, a);
        for (uint32_t i = 0; i < keys.n; ++i) {
          Val x, y;
          if (!MapFind(ctx, a, keys.l->data[i], &x) || !MapFind(ctx, b, keys.l->data[i], &y)) {
            return EqualResult::kFalse;
          }
          if (EqualTri(x, y, true) == EqualResult::kFalse) return EqualResult::kFalse;
        }
        return EqualResult::kTrue;
      }
  }
  return of(EqualBool(a, b));
}

Val Equal(Ctx& /*ctx*/, const Val& a, const Val& b) {
  if (a.is_error()) return a;
  if (b.is_error()) return b;
  return Val::Bool(EqualBool(a, b));
}

std::optional<int> Compare(const Val& a, const Val& b) {
  if (IsNumber(a) && IsNumber(b)) return CompareNumbers(a, b);
  if (a.kind != b.kind) return std::nullopt;
  switch (a.kind) {
    case VK::kString:
    case VK::kBytes: {
      const int c = a.str().compare(b.str());
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    case VK::kBool: return a.b == b.b ? 0 : (a.b ? 1 : -1);
    case VK::kTimestamp:
      if (a.i != b.i) return a.i < b.i ? -1 : 1;
      return a.n < b.n ? -1 : (a.n > b.n ? 1 : 0);
    case VK::kDuration:
      if (a.i != b.i) return a.i < b.i ? -1 : 1;
      return a.n < b.n ? -1 : (a.n > b.n ? 1 : 0);
    default: return std::nullopt;
  }
}

// ---- Maps ----------------------------------------------------------------------------------

std::string GoValueTypeName(const Val& v) {
  switch (v.kind) {
    case VK::kInt: return "types.Int";
    case VK::kUint: return "types.Uint";
    case VK::kDouble: return "types.Double";
    case VK::kString: return "types.String";
    case VK::kBytes: return "types.Bytes";
    case VK::kBool: return "types.Bool";
    case VK::kNull: return "types.Null";
    case VK::kOptional: return "*types.Optional";
    case VK::kType: return "*types.Type";
    case VK::kQuantity: return "cel.Quantity";
    case VK::kSemver: return "cel.Semver";
    case VK::kIP: return "cel.IP";
    case VK::kCIDR: return "cel.CIDR";
    case VK::kFormat: return "cel.Format";
    case VK::kURL: return "cel.URL";
    case VK::kTimestamp: return "types.Timestamp";
    case VK::kDuration: return "types.Duration";
    case VK::kList: return "*types.baseList";
    case VK::kMap: return "*types.baseMap";
    default: return std::string(TypeNameOf(v));
  }
}

bool GoKeyEqual(const Val& a, const Val& b) {
  if (a.kind != b.kind) return false;  // Go interface keys: the dynamic types must match
  switch (a.kind) {
    case VK::kString: return a.str() == b.str();
    case VK::kInt: return a.i == b.i;
    case VK::kUint: return a.u == b.u;
    case VK::kBool: return a.b == b.b;
    case VK::kDouble: return a.d == b.d;  // NaN never matches, -0 matches 0
    case VK::kNull: return true;
    case VK::kType: return a.str() == b.str();  // type values are singletons per name
    case VK::kIP: return *a.ip == *b.ip;        // netip.Addr compares by value
    case VK::kCIDR: return *a.cidr == *b.cidr;  // netip.Prefix: address as written and bits
    case VK::kDuration: return a.i == b.i && a.n == b.n;
    // time.Time compares its wall clock, seconds and location pointer (Val::sub, see eval.h).
    case VK::kTimestamp: return a.i == b.i && a.n == b.n && a.sub == b.sub;
    // Pointers upstream (*url.URL, *resource.Quantity, lists, maps): identity.
    case VK::kURL: return a.url == b.url;
    case VK::kQuantity: return a.q == b.q;
    case VK::kList: return a.l == b.l && a.n == b.n;
    case VK::kMap: return a.m == b.m && a.n == b.n;
    // The none optional is a singleton there as here (nullptr). A present optional is a new
    // *Optional wherever cel-go passes it through a variable, so even `cel.bind(o,
    // optional.of(1), o in {o: 1})` is false: never the same key.
    case VK::kOptional: return a.opt == nullptr && b.opt == nullptr;
    default: return false;
  }
}

std::string_view UnhashableKey(const Val& k, bool deleting) {
  // Go's map assignment panics with a runtime.Error, its delete with a plain error text.
  switch (k.kind) {
    case VK::kSemver:
      return deleting ? "internal error: hash of unhashable type: cel.Semver"
                      : "internal error: runtime error: hash of unhashable type cel.Semver";
    case VK::kFormat:
      return deleting ? "internal error: hash of unhashable type: cel.Format"
                      : "internal error: runtime error: hash of unhashable type cel.Format";
    case VK::kBytes:
      return deleting ? "internal error: hash of unhashable type: types.Bytes"
                      : "internal error: runtime error: hash of unhashable type types.Bytes";
    default: return {};
  }
}


bool MapFind(Ctx& ctx, const Val& map, const Val& key, Val* out) {
  switch (map.kind) {
    case VK::kMap: {
      // As cel-go's Go map lookup: the key itself, then (integers only) the same number as the
      // other integer type. A double key is found by an integral double only when stored as a
      // double; an integral double finds an int or uint key.
      if (key.kind == VK::kString) {  // the common case, kept tight
        const std::string_view want = key.str();
        for (uint32_t i = 0; i < map.n; ++i) {
          const Val& k = map.m->keys[i];
          if (k.kind == VK::kString && k.n == key.n && k.str() == want) {
            *out = map.m->vals[i];
            return true;
          }
        }
        return false;
      }
      for (uint32_t i = 0; i < map.n; ++i) {
        if (GoKeyEqual(map.m->keys[i], key)) {
          *out = map.m->vals[i];
          return true;
        }
      }
      if (!IsNumber(key)) return false;
      for (uint32_t i = 0; i < map.n; ++i) {
        const Val& k = map.m->keys[i];
        if (k.kind != key.kind && k.kind != VK::kDouble && KeyEqual(k, key)) {
          *out = map.m->vals[i];
          return true;
        }
      }
      return false;
    }
    case VK::kDeviceMap: {
      // Unknown domains are empty maps, never missing: Kubernetes' mapper.Find answers its
      // default for any key, one of another type too (device.attributes[?true] has a value).
      // "\x01" names no domain.
      const std::string_view domain = key.kind == VK::kString ? key.str() : "\x01";
      auto* ref = ctx.arena.New<DomainRef>(DomainRef{map.dev, domain, map.sub == 1});
      Val r;
      r.kind = VK::kDomainMap;
      r.dom = ref;
      *out = r;
      return true;
    }
    case VK::kDomainMap: {
      if (key.kind != VK::kString) return false;
      bool found = false;
      Val v = DomainLookup(ctx, map.dom->dev, map.dom->capacity, map.dom->domain, key.str(), &found);
      if (found) *out = v;
      return found;
    }
    default: return false;
  }
}

namespace {
bool MapContains(Ctx& ctx, const Val& map, const Val& key) {
  if (map.kind == VK::kDeviceMap) {
    if (key.kind != VK::kString) return false;
    bool found = false;
    const std::string_view want = key.str();
    auto fn = [&](std::string_view d) { found = found || d == want; };
    if (map.sub == 0) {
      map.dev->ForEachAttributeDomain(fn);
    } else {
      map.dev->ForEachCapacityDomain(fn);
    }
    return found;
  }
  Val ignored;
  return MapFind(ctx, map, key, &ignored);
}
}  // namespace

uint32_t MapSize(Ctx& ctx, const Val& map) {
  if (map.kind == VK::kMap) return map.n;
  return MapKeys(ctx, map).n;
}

Val MapKeys(Ctx& ctx, const Val& map) {
  if (map.kind == VK::kMap) return ctx.List(map.m == nullptr ? nullptr : map.m->keys, map.n);
  std::vector<Val> keys;
  // DeviceView names stay valid for the whole evaluation (DeviceView's contract): borrow them.
  auto add = [&](std::string_view k) { keys.push_back(Val::Str(k)); };
  if (map.kind == VK::kDeviceMap) {
    if (map.sub == 0) {
      map.dev->ForEachAttributeDomain(add);
    } else {
      map.dev->ForEachCapacityDomain(add);
    }
  } else if (map.kind == VK::kDomainMap) {
    if (map.dom->capacity) {
      map.dom->dev->ForEachCapacity(map.dom->domain, [&](std::string_view k, const Quantity&) { add(k); });
    } else {
      map.dom->dev->ForEachAttribute(map.dom->domain,
                                     [&](std::string_view k, const dra::Attribute&) { add(k); });
    }
  }
  return ctx.List(keys.data(), static_cast<uint32_t>(keys.size()));
}

// ---- DRA device ------------------------------------------------------------------------------

Val AttributeToVal(Ctx& ctx, const dra::Attribute& attr) {
  switch (attr.kind) {
    case dra::Attribute::Kind::kInt: return Val::Int(attr.int_value);
    case dra::Attribute::Kind::kBool: return Val::Bool(attr.bool_value);
    case dra::Attribute::Kind::kString: return Val::Str(attr.string_value);
    case dra::Attribute::Kind::kVersion: {
      if (attr.version != nullptr) {
        Val r;
        r.kind = VK::kSemver;
        r.v = attr.version;
        return r;
      }
      return ParseSemverVal(ctx, attr.string_value, false);
    }
    case dra::Attribute::Kind::kList: {
      const auto n = static_cast<uint32_t>(attr.elements.size());
      Val list = ctx.ListWithCapacity(n);
      for (uint32_t i = 0; i < n; ++i) {
        Val e = AttributeToVal(ctx, attr.elements[i]);
        if (e.is_error()) return e;
        list.l->data[i] = e;
      }
      list.l->used = n;
      list.n = n;
      return list;
    }
  }
  return Val::Null();
}

Val DomainLookup(Ctx& ctx, const dra::DeviceView* dev, bool capacity, std::string_view domain,
                 std::string_view id, bool* found) {
  if (capacity) {
    const Quantity* q = dev->FindCapacity(domain, id);
    *found = q != nullptr;
    if (q == nullptr) return Val();
    Val r;
    r.kind = VK::kQuantity;
    r.q = q;
    return r;
  }
  const dra::Attribute* a = dev->FindAttribute(domain, id);
  *found = a != nullptr;
  if (a == nullptr) return Val();
  return AttributeToVal(ctx, *a);
}

Val DeviceField(Ctx& ctx, const dra::DeviceView* dev, std::string_view field) {
  if (field == "driver") return Val::Str(dev->driver());
  if (field == "attributes" || field == "capacity") {
    Val r;
    r.kind = VK::kDeviceMap;
    r.sub = field == "capacity" ? 1 : 0;
    r.dev = dev;
    return r;
  }
  if (field == "allowMultipleAllocations") return Val::Bool(dev->allow_multiple_allocations());
  return ctx.Error("no such field '" + std::string(field) + "'");
}

// ---- Selection and indexing ------------------------------------------------------------------

Val Select(Ctx& ctx, const Val& operand, std::string_view field) {
  if (operand.is_error()) return operand;
  if (MapLike(operand)) {
    Val out;
    if (MapFind(ctx, operand, Val::Str(field), &out)) return out;
    return ctx.Error("no such key: " + std::string(field));
  }
  if (operand.kind == VK::kDevice) return DeviceField(ctx, operand.dev, field);
  if (ctx.go_map_keys) {
    // cel-go selects with an attribute qualifier: a list takes the field name as an index, any
    // other value (an optional inside a chain too, see Chain) has no such key.
    if (operand.kind == VK::kList) return ctx.Error("unsupported index type 'string' in list");
    return ctx.Error("no such key: " + std::string(field));
  }
  if (operand.kind == VK::kOptional) return OptSelect(ctx, operand, field);
  return ctx.Error("type '" + std::string(TypeNameOf(operand)) + "' does not support field selection");
}

bool DeviceMapEmpty(const Val& map) {
  bool empty = true;
  auto fn = [&](std::string_view) { empty = false; };
  if (map.sub == 0) {
    map.dev->ForEachAttributeDomain(fn);
  } else {
    map.dev->ForEachCapacityDomain(fn);
  }
  return empty;
}

bool DeviceMapContains(Ctx& ctx, const Val& map, const Val& key) {
  return MapContains(ctx, map, key);
}

Val Has(Ctx& ctx, const Val& operand, std::string_view field) {
  if (operand.is_error()) return operand;
  // Kubernetes' device.attributes / device.capacity find every domain (an absent one is empty),
  // and cel-go's presence test asks Find; only `in` asks Contains.
  if (operand.kind == VK::kDeviceMap && ctx.go_map_keys) return Val::Bool(true);
  if (MapLike(operand)) return Val::Bool(MapContains(ctx, operand, Val::Str(field)));
  if (operand.kind == VK::kDevice) {
    if (field == "driver" || field == "attributes" || field == "capacity") return Val::Bool(true);
    // Kubernetes' device is a Go map holding all four fields: present whatever their values.
    if (field == "allowMultipleAllocations") {
      return Val::Bool(ctx.go_map_keys || operand.dev->allow_multiple_allocations());
    }
    return ctx.Error("no such field '" + std::string(field) + "'");
  }
  if (operand.kind == VK::kOptional && !ctx.go_map_keys) {
    if (operand.opt == nullptr) return Val::Bool(false);
    return Has(ctx, *operand.opt, field);
  }
  // cel-go (go_map_keys: its attribute qualifiers) tests presence with a qualifier: a list takes
  // the field name as an index (which fails), any other value has no fields. cel-spec: an error.
  if (!ctx.go_map_keys) {
    return ctx.Error("invalid type for field selection: " + std::string(TypeNameOf(operand)));
  }
  if (operand.kind == VK::kList) return ctx.Error("unsupported index type 'string' in list");
  return Val::Bool(false);
}

namespace {
// List index from int, uint or integral double; nullopt if not an index.
std::optional<int64_t> AsIndex(const Val& k) {
  if (k.kind == VK::kInt) return k.i;
  if (k.kind == VK::kUint) return k.u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(k.u);
  if (k.kind == VK::kDouble && std::trunc(k.d) == k.d && std::abs(k.d) < 9.2e18) {
    return static_cast<int64_t>(k.d);
  }
  return std::nullopt;
}
}  // namespace

Val Index(Ctx& ctx, const Val& operand, const Val& key) {
  if (operand.is_error()) return operand;
  if (key.is_error()) return key;
  if (operand.kind == VK::kList) {
    const std::optional<int64_t> i = AsIndex(key);
    if (ctx.go_map_keys) {
      // cel-go indexes with an attribute qualifier (types.IndexOrError's texts).
      if (!ValidKey(key)) return ctx.Error("invalid qualifier type: " + GoValueTypeName(key));
      if (!i && key.kind != VK::kInt && key.kind != VK::kUint && key.kind != VK::kDouble) {
        return ctx.Error("unsupported index type '" + std::string(TypeNameOf(key)) + "' in list");
      }
      if (!i || (key.kind == VK::kUint && key.u > static_cast<uint64_t>(INT64_MAX))) {
        return ctx.Error("unsupported index value " + KeyText(key) + " in list");
      }
    }
    if (!i) return ctx.NoOverload("_[_]", &operand, 1);
    if (*i < 0 || *i >= operand.n) return ctx.Error("index out of bounds: " + std::to_string(*i));
    return operand.l->data[*i];
  }
  if (MapLike(operand)) {
    if (!ValidKey(key)) {
      if (ctx.go_map_keys) return ctx.Error("invalid qualifier type: " + GoValueTypeName(key));
      return ctx.Error("unsupported key type: " + std::string(TypeNameOf(key)));
    }
    Val out;
    if (MapFind(ctx, operand, key, &out)) return out;
    return ctx.Error("no such key: " + KeyText(key));
  }
  if (operand.kind == VK::kOptional && !ctx.go_map_keys) return OptIndex(ctx, operand, key);
  // cel-go applies an index to a value that is neither list nor map as an attribute qualifier,
  // which finds nothing.
  return ctx.Error("no such key: " + KeyText(key));
}

Val OptSelect(Ctx& ctx, const Val& operand, std::string_view field) {
  if (operand.is_error()) return operand;
  // An optional operand is the chain's base (unwrapped before, see Chain) or, for cel-go (go
  // map keys), a value inside the chain, which has no fields.
  if (operand.kind == VK::kOptional && !ctx.go_map_keys) {
    if (operand.opt == nullptr) return operand;
    return OptSelect(ctx, *operand.opt, field);
  }
  if (MapLike(operand)) {
    Val out;
    if (MapFind(ctx, operand, Val::Str(field), &out)) return ctx.Optional(out);
    return Val::Opt(nullptr);
  }
  if (operand.kind == VK::kDevice) {
    Val h = Has(ctx, operand, field);
    if (h.is_error()) return h;
    if (!h.b) return Val::Opt(nullptr);
    return ctx.Optional(DeviceField(ctx, operand.dev, field));
  }
  // cel-go (go_map_keys) qualifies in optional mode with a presence test: a list takes the field
  // name as an index (which fails), any other value has no such field (optional.none()).
  // cel-spec: an error.
  if (!ctx.go_map_keys) {
    return ctx.Error("type '" + std::string(TypeNameOf(operand)) + "' does not support field selection");
  }
  if (operand.kind == VK::kList) return ctx.Error("unsupported index type 'string' in list");
  return Val::Opt(nullptr);
}

Val OptIndex(Ctx& ctx, const Val& operand, const Val& key) {
  if (operand.is_error()) return operand;
  if (key.is_error()) return key;
  if (operand.kind == VK::kOptional && !ctx.go_map_keys) {
    if (operand.opt == nullptr) return operand;
    return OptIndex(ctx, *operand.opt, key);
  }
  if (operand.kind == VK::kList) {
    const std::optional<int64_t> i = AsIndex(key);
    // cel-go makes no qualifier of a key of another type (a Quantity, ...), and qualifies with
    // types.IndexOrError: a key that is no number has its own text.
    if (ctx.go_map_keys && !ValidKey(key)) {
      return ctx.Error("invalid qualifier type: " + GoValueTypeName(key));
    }
    if (!i && key.kind != VK::kInt && key.kind != VK::kUint && key.kind != VK::kDouble) {
      return ctx.Error("unsupported index type '" + std::string(TypeNameOf(key)) + "' in list");
    }
    if (!i || (key.kind == VK::kUint && key.u > static_cast<uint64_t>(INT64_MAX))) {
      return ctx.Error("unsupported index value " + KeyText(key) + " in list");
    }
    if (*i < 0 || *i >= operand.n) return Val::Opt(nullptr);
    return ctx.Optional(operand.l->data[*i]);
  }
  if (MapLike(operand)) {
    if (ctx.go_map_keys && !ValidKey(key)) {
      return ctx.Error("invalid qualifier type: " + GoValueTypeName(key));
    }
    Val out;
    if (ValidKey(key) && MapFind(ctx, operand, key, &out)) return ctx.Optional(out);
    return Val::Opt(nullptr);
  }
  // Neither list nor map: cel-go's presence test (go_map_keys) finds nothing (optional.none());
  // cel-spec: no such overload.
  if (!ctx.go_map_keys) {
    Val args[2] = {operand, key};
    return ctx.NoOverload("_[?_]", args, 2);
  }
  if (!ValidKey(key)) return ctx.Error("invalid qualifier type: " + GoValueTypeName(key));
  return Val::Opt(nullptr);
}

// ---- Val <-> Value ---------------------------------------------------------------------------

Val FromValue(const Value& value, Arena& arena) {
  Ctx ctx(arena);
  switch (value.kind()) {
    case Value::Kind::kNull: return Val::Null();
    case Value::Kind::kBool: return Val::Bool(value.bool_value());
    case Value::Kind::kInt: return Val::Int(value.int_value());
    case Value::Kind::kUint: return Val::Uint(value.uint_value());
    case Value::Kind::kDouble: return Val::Double(value.double_value());
    case Value::Kind::kString: return Val::Str(value.string_value());
    case Value::Kind::kBytes: return Val::Str(value.bytes_value(), VK::kBytes);
    case Value::Kind::kType: return Val::Str(value.type_name(), VK::kType);
    case Value::Kind::kError: return Val::Str(value.error_message(), VK::kError);
    case Value::Kind::kList: {
      const auto n = static_cast<uint32_t>(value.list().size());
      Val r = ctx.ListWithCapacity(n);
      for (uint32_t i = 0; i < n; ++i) r.l->data[i] = FromValue(value.list()[i], arena);
      r.l->used = n;
      r.n = n;
      return r;
    }
    case Value::Kind::kMap: {
      const auto n = static_cast<uint32_t>(value.map().size());
      auto* rep = arena.New<MapRep>();
      rep->keys = arena.NewArray<Val>(n);
      rep->vals = arena.NewArray<Val>(n);
      rep->used = rep->cap = n;
      for (uint32_t i = 0; i < n; ++i) {
        rep->keys[i] = FromValue(value.map()[i].first, arena);
        rep->vals[i] = FromValue(value.map()[i].second, arena);
      }
      Val r;
      r.kind = VK::kMap;
      r.m = rep;
      r.n = n;
      return r;
    }
    case Value::Kind::kOptional:
      if (value.optional_value() == nullptr) return Val::Opt(nullptr);
      return ctx.Optional(FromValue(*value.optional_value(), arena));
    case Value::Kind::kQuantity: {
      Val r;
      r.kind = VK::kQuantity;
      r.q = value.quantity();
      return r;
    }
    case Value::Kind::kSemver: {
      Val r;
      r.kind = VK::kSemver;
      r.v = value.semver();
      return r;
    }
    case Value::Kind::kIP: {
      IpAddr addr;
      std::string error;
      if (!ParseIp(value.string_value(), &addr, &error)) return ctx.Error(error);
      Val r;
      r.kind = VK::kIP;
      r.ip = arena.New<IpAddr>(addr);
      return r;
    }
    case Value::Kind::kCIDR: {
      CidrPrefix prefix;
      std::string error;
      if (!ParseCidr(value.string_value(), &prefix, &error)) return ctx.Error(error);
      Val r;
      r.kind = VK::kCIDR;
      r.cidr = arena.New<CidrPrefix>(prefix);
      return r;
    }
    case Value::Kind::kFormat: {
      const int64_t id = FormatIdOf(value.string_value());
      if (id < 0) return ctx.Error("unknown format \"" + value.string_value() + "\"");
      Val r;
      r.kind = VK::kFormat;
      r.i = id;
      return r;
    }
    case Value::Kind::kURL: {
      auto* url = arena.New<GoUrl>();
      std::string error;
      if (!ParseUrl(value.string_value(), url, &error)) return ctx.Error(error);
      Val r;
      r.kind = VK::kURL;
      r.url = url;
      return r;
    }
    case Value::Kind::kTimestamp: {
      Val r;
      r.kind = VK::kTimestamp;
      r.i = value.timestamp_seconds();
      r.n = value.timestamp_nanos();
      return r;
    }
    case Value::Kind::kDuration: {
      Val r;
      r.kind = VK::kDuration;
      r.i = value.duration_seconds();
      r.n = static_cast<uint32_t>(value.duration_nanos());
      return r;
    }
  }
  return Val::Null();
}

Value ToValue(const Val& v) {
  switch (v.kind) {
    case VK::kNull: return Value::Null();
    case VK::kBool: return Value::Bool(v.b);
    case VK::kInt: return Value::Int(v.i);
    case VK::kUint: return Value::Uint(v.u);
    case VK::kDouble: return Value::Double(v.d);
    case VK::kString: return Value::String(std::string(v.str()));
    case VK::kBytes: return Value::Bytes(std::string(v.str()));
    case VK::kType: return Value::Type(std::string(v.str()));
    case VK::kError: return Value::Error(std::string(v.str()));
    case VK::kList: {
      std::vector<Value> out;
      out.reserve(v.n);
      for (uint32_t i = 0; i < v.n; ++i) out.push_back(ToValue(v.l->data[i]));
      return Value::List(std::move(out));
    }
    case VK::kMap:
    case VK::kDeviceMap:
    case VK::kDomainMap: {
      Arena scratch;
      Ctx ctx(scratch);
      Val keys = MapKeys(ctx, v);
      std::vector<Value::Entry> out;
      for (uint32_t i = 0; i < keys.n; ++i) {
        Val x;
        MapFind(ctx, v, keys.l->data[i], &x);
        out.emplace_back(ToValue(keys.l->data[i]), ToValue(x));
      }
      return Value::Map(std::move(out));
    }
    case VK::kOptional:
      return v.opt == nullptr ? Value::OptionalNone() : Value::OptionalOf(ToValue(*v.opt));
    case VK::kQuantity: return Value::FromQuantity(CopyQuantity(*v.q));
    case VK::kSemver: return Value::FromSemver(CopySemver(*v.v));
    case VK::kIP: return Value::IP(v.ip->ToString());
    case VK::kCIDR: return Value::CIDR(v.cidr->ToString());
    case VK::kFormat: return Value::Format(std::string(FormatName(v.i)));
    case VK::kURL: return Value::URL(UrlString(*v.url));
    case VK::kTimestamp: return Value::Timestamp(v.i, v.n);
    case VK::kDuration: return Value::Duration(v.i, static_cast<int32_t>(v.n));
    case VK::kDevice: {
      Arena scratch;
      Ctx ctx(scratch);
      std::vector<Value::Entry> out;
      for (std::string_view f : {"driver", "attributes", "capacity", "allowMultipleAllocations"}) {
        out.emplace_back(Value::String(std::string(f)), ToValue(DeviceField(ctx, v.dev, f)));
      }
      return Value::Map(std::move(out));
    }
  }
  return Value::Null();
}

// ---- Formatting ------------------------------------------------------------------------------

std::string FormatDouble(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exp = std::atoi(sci.c_str() + e + 1);
  if (exp < -4 || exp >= 6) return sci;  // strconv.FormatFloat(d, 'g', -1, 64)
  res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed);
  return std::string(buf, res.ptr);
}

}  // namespace devlet::cel::internal
