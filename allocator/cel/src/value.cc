// Public Value and Type.
#include "devlet/cel/value.h"

#include <cassert>
#include <cmath>
#include <cstdio>

#include "devlet/cel/type.h"
#include "eval.h"
#include "utf8.h"

namespace devlet::cel {

struct Value::Heap {
  std::string str;
  std::vector<Value> list;
  std::vector<Entry> map;
  std::shared_ptr<const Quantity> quantity;
  std::shared_ptr<const Semver> semver;
  bool has_optional = false;
};

namespace {
const std::string& EmptyString() {
  static const std::string* s = new std::string();
  return *s;
}
const std::vector<Value>& EmptyList() {
  static const std::vector<Value>* l = new std::vector<Value>();
  return *l;
}
const std::vector<Value::Entry>& EmptyMap() {
  static const std::vector<Value::Entry>* m = new std::vector<Value::Entry>();
  return *m;
}
}  // namespace

Value Value::Bool(bool value) {
  Value v;
  v.kind_ = Kind::kBool;
  v.scalar_.b = value;
  return v;
}
Value Value::Int(int64_t value) {
  Value v;
  v.kind_ = Kind::kInt;
  v.scalar_.i = value;
  return v;
}
Value Value::Uint(uint64_t value) {
  Value v;
  v.kind_ = Kind::kUint;
  v.scalar_.u = value;
  return v;
}
Value Value::Double(double value) {
  Value v;
  v.kind_ = Kind::kDouble;
  v.scalar_.d = value;
  return v;
}

Value Value::String(std::string value) {
  Value v;
  v.kind_ = Kind::kString;
  auto h = std::make_shared<Heap>();
  h->str = std::move(value);
  v.heap_ = std::move(h);
  return v;
}
Value Value::Bytes(std::string value) {
  Value v = String(std::move(value));
  v.kind_ = Kind::kBytes;
  return v;
}
Value Value::Type(std::string name) {
  Value v = String(std::move(name));
  v.kind_ = Kind::kType;
  return v;
}
Value Value::Error(std::string message) {
  Value v = String(std::move(message));
  v.kind_ = Kind::kError;
  return v;
}
Value Value::List(std::vector<Value> elements) {
  Value v;
  v.kind_ = Kind::kList;
  auto h = std::make_shared<Heap>();
  h->list = std::move(elements);
  v.heap_ = std::move(h);
  return v;
}
Value Value::Map(std::vector<Entry> entries) {
  Value v;
  v.kind_ = Kind::kMap;
  auto h = std::make_shared<Heap>();
  h->map = std::move(entries);
  v.heap_ = std::move(h);
  return v;
}
Value Value::OptionalOf(Value value) {
  Value v;
  v.kind_ = Kind::kOptional;
  auto h = std::make_shared<Heap>();
  h->list.push_back(std::move(value));
  h->has_optional = true;
  v.heap_ = std::move(h);
  return v;
}
Value Value::OptionalNone() {
  Value v;
  v.kind_ = Kind::kOptional;
  return v;
}
Value Value::Timestamp(int64_t unix_seconds, int32_t nanos) {
  Value v;
  v.kind_ = Kind::kTimestamp;
  v.scalar_.i = unix_seconds;
  v.nanos_ = nanos;
  return v;
}
Value Value::Duration(int64_t seconds, int32_t nanos) {
  Value v;
  v.kind_ = Kind::kDuration;
  v.scalar_.i = seconds;
  v.nanos_ = nanos;
  return v;
}
Value Value::FromQuantity(std::shared_ptr<const Quantity> quantity) {
  Value v;
  v.kind_ = Kind::kQuantity;
  auto h = std::make_shared<Heap>();
  h->quantity = std::move(quantity);
  v.heap_ = std::move(h);
  return v;
}
Value Value::IP(std::string canonical) {
  Value v = String(std::move(canonical));
  v.kind_ = Kind::kIP;
  return v;
}

Value Value::CIDR(std::string canonical) {
  Value v = String(std::move(canonical));
  v.kind_ = Kind::kCIDR;
  return v;
}

Value Value::Format(std::string name) {
  Value v = String(std::move(name));
  v.kind_ = Kind::kFormat;
  return v;
}

Value Value::URL(std::string text) {
  Value v = String(std::move(text));
  v.kind_ = Kind::kURL;
  return v;
}

Value Value::FromSemver(std::shared_ptr<const Semver> semver) {
  Value v;
  v.kind_ = Kind::kSemver;
  auto h = std::make_shared<Heap>();
  h->semver = std::move(semver);
  v.heap_ = std::move(h);
  return v;
}

bool Value::bool_value() const { return kind_ == Kind::kBool && scalar_.b; }
int64_t Value::int_value() const { return kind_ == Kind::kInt ? scalar_.i : 0; }
uint64_t Value::uint_value() const { return kind_ == Kind::kUint ? scalar_.u : 0; }
double Value::double_value() const { return kind_ == Kind::kDouble ? scalar_.d : 0; }
const std::string& Value::string_value() const { return heap_ ? heap_->str : EmptyString(); }
const std::vector<Value>& Value::list() const {
  return heap_ && kind_ == Kind::kList ? heap_->list : EmptyList();
}
const std::vector<Value::Entry>& Value::map() const {
  return heap_ && kind_ == Kind::kMap ? heap_->map : EmptyMap();
}
const Value* Value::optional_value() const {
  return heap_ && heap_->has_optional ? &heap_->list[0] : nullptr;
}
const Quantity* Value::quantity() const { return heap_ ? heap_->quantity.get() : nullptr; }
const Semver* Value::semver() const { return heap_ ? heap_->semver.get() : nullptr; }

const Value* Value::Find(const Value& key) const {
  for (const Entry& e : map()) {
    if (Equivalent(e.first, key)) return &e.second;
  }
  return nullptr;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kNull: return "null_type";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kUint: return "uint";
    case Kind::kDouble: return "double";
    case Kind::kString: return "string";
    case Kind::kBytes: return "bytes";
    case Kind::kList: return "list";
    case Kind::kMap: return "map";
    case Kind::kOptional: return "optional_type";
    case Kind::kType: return "type";
    case Kind::kError: return "error";
    case Kind::kQuantity: return "kubernetes.Quantity";
    case Kind::kSemver: return "kubernetes.Semver";
    case Kind::kTimestamp: return "google.protobuf.Timestamp";
    case Kind::kDuration: return "google.protobuf.Duration";
    case Kind::kIP: return "net.IP";
    case Kind::kCIDR: return "net.CIDR";
    case Kind::kFormat: return "kubernetes.NamedFormat";
    case Kind::kURL: return "kubernetes.URL";
  }
  return "dyn";
}

namespace {
void Quote(std::string& out, const std::string& s, bool bytes) {
  out += bytes ? "b\"" : "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80)) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}
}  // namespace

std::string Value::DebugString() const {
  std::string out;
  switch (kind_) {
    case Kind::kNull: return "null";
    case Kind::kBool: return scalar_.b ? "true" : "false";
    case Kind::kInt: return std::to_string(scalar_.i);
    case Kind::kUint: return std::to_string(scalar_.u) + "u";
    case Kind::kDouble: {
      std::string s = internal::FormatDouble(scalar_.d);
      if (s.find_first_of(".eIN") == std::string::npos) s += ".0";
      return s;
    }
    case Kind::kString: Quote(out, string_value(), false); return out;
    case Kind::kBytes: Quote(out, string_value(), true); return out;
    case Kind::kType: return string_value();
    case Kind::kError: return "error(" + string_value() + ")";
    case Kind::kList: {
      out = "[";
      for (size_t i = 0; i < list().size(); ++i) {
        if (i) out += ", ";
        out += list()[i].DebugString();
      }
      return out + "]";
    }
    case Kind::kMap: {
      out = "{";
      for (size_t i = 0; i < map().size(); ++i) {
        if (i) out += ", ";
        out += map()[i].first.DebugString() + ": " + map()[i].second.DebugString();
      }
      return out + "}";
    }
    case Kind::kOptional:
      return optional_value() ? "optional.of(" + optional_value()->DebugString() + ")"
                              : "optional.none()";
    case Kind::kQuantity:
      return quantity() ? "quantity(\"" + internal::QuantityString(*quantity()) + "\")" : "quantity(?)";
    case Kind::kSemver:
      return semver() ? "semver(\"" + internal::SemverString(*semver()) + "\")" : "semver(?)";
    case Kind::kTimestamp:
      return "timestamp(\"" + internal::FormatTimestamp(scalar_.i, static_cast<uint32_t>(nanos_)) + "\")";
    case Kind::kDuration:
      return "duration(\"" + internal::FormatDuration(scalar_.i, static_cast<uint32_t>(nanos_)) + "\")";
    case Kind::kIP: return "ip(\"" + string_value() + "\")";
    case Kind::kCIDR: return "cidr(\"" + string_value() + "\")";
    case Kind::kFormat: return "format." + string_value() + "()";
    case Kind::kURL: return "url(\"" + string_value() + "\")";
  }
  return "?";
}

bool Value::Equivalent(const Value& a, const Value& b) {
  auto num = [](const Value& v, double* d) {
    switch (v.kind_) {
      case Kind::kInt: *d = static_cast<double>(v.scalar_.i); return true;
      case Kind::kUint: *d = static_cast<double>(v.scalar_.u); return true;
      case Kind::kDouble: *d = v.scalar_.d; return true;
      default: return false;
    }
  };
  double da, db;
  if (num(a, &da) && num(b, &db)) {
    if (a.kind_ == Kind::kInt && b.kind_ == Kind::kInt) return a.scalar_.i == b.scalar_.i;
    if (a.kind_ == Kind::kUint && b.kind_ == Kind::kUint) return a.scalar_.u == b.scalar_.u;
    if (a.kind_ == Kind::kInt && b.kind_ == Kind::kUint)
      return a.scalar_.i >= 0 && static_cast<uint64_t>(a.scalar_.i) == b.scalar_.u;
    if (a.kind_ == Kind::kUint && b.kind_ == Kind::kInt)
      return b.scalar_.i >= 0 && static_cast<uint64_t>(b.scalar_.i) == a.scalar_.u;
    if (std::isnan(da) && std::isnan(db)) return true;
    return da == db;
  }
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case Kind::kNull: return true;
    case Kind::kBool: return a.scalar_.b == b.scalar_.b;
    case Kind::kString:
    case Kind::kBytes:
    case Kind::kType:
    case Kind::kError: return a.string_value() == b.string_value();
    case Kind::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!Equivalent(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Kind::kMap: {
      if (a.map().size() != b.map().size()) return false;
      for (const Entry& e : a.map()) {
        const Value* other = b.Find(e.first);
        if (other == nullptr || !Equivalent(e.second, *other)) return false;
      }
      return true;
    }
    case Kind::kOptional: {
      const Value* x = a.optional_value();
      const Value* y = b.optional_value();
      if (!x || !y) return x == y;
      return Equivalent(*x, *y);
    }
    case Kind::kQuantity:
      return a.quantity() && b.quantity() && internal::QuantityEqual(*a.quantity(), *b.quantity());
    case Kind::kSemver:
      return a.semver() && b.semver() && internal::SemverEqual(*a.semver(), *b.semver());
    case Kind::kTimestamp: return a.scalar_.i == b.scalar_.i && a.nanos_ == b.nanos_;
    case Kind::kDuration: return a.scalar_.i == b.scalar_.i && a.nanos_ == b.nanos_;
    case Kind::kIP:
    case Kind::kCIDR:
    case Kind::kFormat:
    case Kind::kURL: return a.string_value() == b.string_value();
    default: return false;
  }
}

// ---- Type ---------------------------------------------------------------------------------

Type Type::List(Type element) {
  Type t(Kind::kList);
  t.params_ = std::make_shared<std::vector<Type>>(std::vector<Type>{std::move(element)});
  return t;
}
Type Type::Map(Type key, Type value) {
  Type t(Kind::kMap);
  t.params_ = std::make_shared<std::vector<Type>>(std::vector<Type>{std::move(key), std::move(value)});
  return t;
}
Type Type::Optional(Type value) {
  Type t(Kind::kOptional);
  t.params_ = std::make_shared<std::vector<Type>>(std::vector<Type>{std::move(value)});
  return t;
}
Type Type::TypeOf(Type value) {
  Type t(Kind::kType);
  t.params_ = std::make_shared<std::vector<Type>>(std::vector<Type>{std::move(value)});
  return t;
}

const Type& Type::param0() const {
  static const Type* dyn = new Type();
  return params_ && !params_->empty() ? (*params_)[0] : *dyn;
}
const Type& Type::param1() const {
  static const Type* dyn = new Type();
  return params_ && params_->size() > 1 ? (*params_)[1] : *dyn;
}
std::string Type::DebugString() const {
  switch (kind_) {
    case Kind::kDyn: return error_ ? "!error!" : "dyn";
    case Kind::kNull: return "null_type";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kUint: return "uint";
    case Kind::kDouble: return "double";
    case Kind::kString: return "string";
    case Kind::kBytes: return "bytes";
    case Kind::kList: return "list(" + param0().DebugString() + ")";
    case Kind::kMap: return "map(" + param0().DebugString() + ", " + param1().DebugString() + ")";
    case Kind::kOptional: return "optional_type(" + param0().DebugString() + ")";
    case Kind::kType:
      // cel-go writes the type of `null_type` as type(null).
      if (params_ == nullptr || params_->empty()) return "type";
      return "type(" + (param0().kind() == Kind::kNull ? "null" : param0().DebugString()) + ")";
    case Kind::kQuantity: return "kubernetes.Quantity";
    case Kind::kSemver: return "kubernetes.Semver";
    case Kind::kDraDevice: return "kubernetes.DRADevice";
    // cel-go's checker names the well-known types by their CEL names.
    case Kind::kTimestamp: return "timestamp";
    case Kind::kDuration: return "duration";
    case Kind::kIP: return "net.IP";
    case Kind::kCIDR: return "net.CIDR";
    case Kind::kFormat: return "kubernetes.NamedFormat";
    case Kind::kURL: return "kubernetes.URL";
  }
  return "dyn";
}
bool operator==(const Type& a, const Type& b) {
  if (a.kind_ != b.kind_ || a.error_ != b.error_) return false;
  switch (a.kind_) {
    case Type::Kind::kList:
    case Type::Kind::kOptional:
    case Type::Kind::kType: return a.param0() == b.param0();
    case Type::Kind::kMap: return a.param0() == b.param0() && a.param1() == b.param1();
    default: return true;
  }
}

}  // namespace devlet::cel
