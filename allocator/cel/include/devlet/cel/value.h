// File: devlet/cel/value.h
//
// Value is an owned, immutable CEL value: what a Program returns and what an Activation binds.
// Copies are cheap (heap payloads are shared, never mutated).
//
//   Value v = Value::List({Value::Int(1), Value::String("a")});
//   if (v.kind() == Value::Kind::kList) { for (const Value& e : v.list()) ... }
//
// Errors are values too (CEL "errors as values"): a Program evaluating `1 / 0` returns a Value of
// kind kError whose error_message() is "division by zero".
//
// Kubernetes Quantity and Semver objects are held by shared pointer so that this header only needs
// their forward declarations; include devlet/cel/quantity.h or semver.h to use them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devlet::cel {

class Quantity;
class Semver;

class Value {
 public:
  // Kind is the runtime type of a value. kQuantity and kSemver are the Kubernetes object types
  // (CEL type names "kubernetes.Quantity" and "kubernetes.Semver").
  enum class Kind : uint8_t {
    kNull,
    kBool,
    kInt,
    kUint,
    kDouble,
    kString,
    kBytes,
    kList,
    kMap,
    kOptional,
    kType,
    kError,
    kQuantity,
    kSemver,
    // google.protobuf.Timestamp (Unix seconds + nanoseconds) and google.protobuf.Duration.
    kTimestamp,
    kDuration,
    // net.IP of Kubernetes' IP library, held as its canonical text (string_value()).
    kIP,
    // net.CIDR of Kubernetes' CIDR library, held as its canonical text (string_value()).
    kCIDR,
    // kubernetes.NamedFormat of Kubernetes' format library, held as its name (string_value(),
    // e.g. "dns1123Label").
    kFormat,
    // kubernetes.URL of Kubernetes' URL library, held as Go's URL.String() text (string_value()).
    kURL,
  };

  // A map entry; CEL maps keep insertion order here (CEL equality ignores order).
  using Entry = std::pair<Value, Value>;

  // The default value is null.
  Value() = default;

  static Value Null() { return Value(); }
  static Value Bool(bool value);
  static Value Int(int64_t value);
  static Value Uint(uint64_t value);
  static Value Double(double value);
  static Value String(std::string value);
  static Value Bytes(std::string value);
  static Value List(std::vector<Value> elements);
  // Map keys must be bool, int, uint or string; duplicate keys are the caller's responsibility.
  static Value Map(std::vector<Entry> entries);
  static Value OptionalOf(Value value);
  static Value OptionalNone();
  // A type value such as `int` or `list`, by its CEL type name.
  static Value Type(std::string name);
  static Value Error(std::string message);
  static Value FromQuantity(std::shared_ptr<const Quantity> quantity);
  static Value FromSemver(std::shared_ptr<const Semver> semver);
  // An IP address by its canonical text (as string(ip) prints it); not validated here.
  static Value IP(std::string canonical);
  // A CIDR prefix by its canonical text (as string(cidr) prints it); not validated here.
  static Value CIDR(std::string canonical);
  // A named format of the format library by its name ("dns1123Label", "uuid", ...).
  static Value Format(std::string name);
  // A URL of the URL library by its text (as Go's URL.String() writes it); not validated here.
  static Value URL(std::string text);
  // `nanos` in [0, 1e9) for both: a duration of -1.5s is Duration(-2, 500000000).
  static Value Timestamp(int64_t unix_seconds, int32_t nanos = 0);
  static Value Duration(int64_t seconds, int32_t nanos = 0);

  Kind kind() const { return kind_; }
  bool is_error() const { return kind_ == Kind::kError; }

  // Accessors; each requires the matching kind (checked with assert in debug builds; a wrong
  // kind returns a zero value).
  bool bool_value() const;
  int64_t int_value() const;
  uint64_t uint_value() const;
  double double_value() const;
  // kString, kBytes, kType (its name), kError (its message), kIP and kCIDR (their
  // canonical text), kFormat (its name), kURL (its text).
  const std::string& string_value() const;
  const std::string& bytes_value() const { return string_value(); }
  const std::string& type_name() const { return string_value(); }
  const std::string& error_message() const { return string_value(); }
  const std::vector<Value>& list() const;
  const std::vector<Entry>& map() const;
  // kOptional: the wrapped value, or nullptr for optional.none().
  const Value* optional_value() const;
  int64_t timestamp_seconds() const { return kind_ == Kind::kTimestamp ? scalar_.i : 0; }
  int32_t timestamp_nanos() const { return kind_ == Kind::kTimestamp ? nanos_ : 0; }
  int64_t duration_seconds() const { return kind_ == Kind::kDuration ? scalar_.i : 0; }
  int32_t duration_nanos() const { return kind_ == Kind::kDuration ? nanos_ : 0; }
  const Quantity* quantity() const;
  const Semver* semver() const;

  // Find returns the value under `key` in a map (CEL key equality: 1 == 1u == 1.0), or nullptr.
  const Value* Find(const Value& key) const;

  // The CEL type name of this value: "int", "list", "kubernetes.Quantity", "optional_type", ...
  std::string TypeName() const;

  // DebugString renders the value like a CEL literal: [1, "a", b"\x00", {"k": 2u}, optional.of(1)].
  std::string DebugString() const;

  // Equivalent is structural equality for tests: CEL equality (numbers compare across int, uint
  // and double; maps ignore order), except that NaN matches NaN and errors/types compare by text.
  static bool Equivalent(const Value& a, const Value& b);

 private:
  struct Heap;
  Kind kind_ = Kind::kNull;
  union {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
  } scalar_{};
  int32_t nanos_ = 0;
  std::shared_ptr<const Heap> heap_;
};

}  // namespace devlet::cel
