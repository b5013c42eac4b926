// File: devlet/cel/type.h
//
// Type describes the static (checker) type of a CEL expression or a declared variable.
//
//   env_options.variables.emplace_back("x", Type::List(Type::Int()));
//   program.result_type().DebugString();  // "bool"
//
// The checker is deliberately light: `dyn` is used wherever the type is not obvious, and only
// clear-cut mistakes (undeclared names, undefined fields of known objects, wrong result type,
// mixed literals under HomogeneousAggregateLiterals, invalid regex literals) are compile errors.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace devlet::cel {

class Type {
 public:
  enum class Kind : unsigned char {
    kDyn,
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
    kQuantity,
    kSemver,
    // The DRA `device` object (CEL type name "kubernetes.DRADevice").
    kDraDevice,
    kTimestamp,  // google.protobuf.Timestamp
    kDuration,   // google.protobuf.Duration
    kIP,         // net.IP (Kubernetes' IP library)
    kCIDR,       // net.CIDR (Kubernetes' CIDR library)
    kFormat,     // kubernetes.NamedFormat (Kubernetes' format library)
    kURL,        // kubernetes.URL (Kubernetes' URL library)
  };

  // The default type is dyn.
  Type() = default;
  static Type Dyn() { return Type(Kind::kDyn); }
  // The type the checker gives a subexpression that failed to check (cel-go's error type): it
  // behaves as dyn everywhere (its kind() is kDyn) and is spelled "!error!" in later error texts.
  static Type Error() {
    Type t(Kind::kDyn);
    t.error_ = true;
    return t;
  }
  static Type Null() { return Type(Kind::kNull); }
  static Type Bool() { return Type(Kind::kBool); }
  static Type Int() { return Type(Kind::kInt); }
  static Type Uint() { return Type(Kind::kUint); }
  static Type Double() { return Type(Kind::kDouble); }
  static Type String() { return Type(Kind::kString); }
  static Type Bytes() { return Type(Kind::kBytes); }
  static Type TypeType() { return Type(Kind::kType); }
  // The type of a type value: `int` and type(1) are type(int), `net.IP` is type(net.IP).
  static Type TypeOf(Type value);
  static Type Quantity() { return Type(Kind::kQuantity); }
  static Type Semver() { return Type(Kind::kSemver); }
  static Type DraDevice() { return Type(Kind::kDraDevice); }
  static Type Timestamp() { return Type(Kind::kTimestamp); }
  static Type Duration() { return Type(Kind::kDuration); }
  static Type IP() { return Type(Kind::kIP); }
  static Type CIDR() { return Type(Kind::kCIDR); }
  static Type Format() { return Type(Kind::kFormat); }
  static Type URL() { return Type(Kind::kURL); }
  static Type List(Type element);
  static Type Map(Type key, Type value);
  static Type Optional(Type value);

  Kind kind() const { return kind_; }
  bool is_dyn() const { return kind_ == Kind::kDyn; }
  // Whether this is Error() (then is_dyn() too).
  bool is_error() const { return error_; }
  // Type parameters: the element of a list or optional, the key of a map (dyn otherwise).
  const Type& param0() const;
  // The value type of a map (dyn otherwise).
  const Type& param1() const;

  // The CEL spelling: "int", "list(string)", "map(string, dyn)", "optional_type(int)".
  std::string DebugString() const;

  // Exact structural equality.
  friend bool operator==(const Type& a, const Type& b);

 private:
  explicit Type(Kind kind) : kind_(kind) {}
  Kind kind_ = Kind::kDyn;
  bool error_ = false;  // Error(), with kind_ kDyn
  std::shared_ptr<const std::vector<Type>> params_;
};

}  // namespace devlet::cel
