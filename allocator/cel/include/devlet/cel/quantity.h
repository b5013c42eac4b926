// File: devlet/cel/quantity.h
//
// Quantity: a C++ port of Kubernetes' resource.Quantity (k8s.io/apimachinery/pkg/api/resource),
// with the same grammar, the same arithmetic and the same canonical text:
//
//   ASSIGN_OR_RETURN(Quantity q, Quantity::Parse("1.5Gi"));
//   q.ToString();                      // "1536Mi"
//   q.Compare(*Quantity::Parse("2G"))  // -1
//
// Grammar (as upstream):
//
//   <quantity>        ::= <signedNumber><suffix>
//   <signedNumber>    ::= <number> | "+" <number> | "-" <number>
//   <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
//   <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
//   <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
//   <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
//   <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
//
// so "200K" and "1 " are invalid. Like upstream, the value is kept either as an int64 mantissa with
// a base-10 scale, or (when that cannot hold it) as an arbitrary-precision decimal; the choice is
// observable (AsInt64/IsInteger only succeed for the int64 form, exactly as Go's Quantity.AsInt64),
// and it is made by the same rules as upstream: parsing rounds fractions below 1n up to 1n, caps
// binary-SI values at 2^63-1, remembers the input text when it is already canonical, and
// arithmetic falls back to the decimal form on int64 overflow. Upstream quirks are kept on purpose
// ("Mi", "+" and "." parse as zero; "1000E".ToString() is "1"), because Kubernetes evaluates
// selectors with that code and our answers must agree with it.
//
// One deliberate difference: upstream materialises numbers of any size (a value like 1e100000000
// added to 1m makes a 100-million-digit integer). We refuse values whose exact decimal form would
// need more than kMaxBits bits (about 19,700 digits): Parse and Add/Sub return an error there
// instead of hanging. Compare never materialises and is always exact.
//
// Quantity does not depend on the CEL engine; the kube object model uses it for capacities.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace devlet::cel {

namespace internal_quantity {
struct Decimal;  // Arbitrary-precision decimal (unscaled big integer and a base-10 scale).
}  // namespace internal_quantity

// Quantity is a Kubernetes resource quantity (a fixed-point number with a remembered format). It
// is an immutable value type; copies are cheap (the rare big-decimal form is shared).
class Quantity {
 public:
  // Format is the suffix family a quantity was written in, used again when it is printed.
  enum class Format {
    kDecimalExponent,  // 12e6
    kBinarySI,         // 12Mi (12 * 2^20)
    kDecimalSI,        // 12M  (12 * 10^6)
  };

  // kMaxBits bounds the size of the exact form of any value we materialise (see the file
  // comment).
  static constexpr int kMaxBits = 1 << 16;

  // Zero, in DecimalSI form (prints "0").
  Quantity() = default;

  // Parse reads `text` with the exact upstream grammar (resource.ParseQuantity). Errors carry the
  // upstream messages ("quantities must match the regular expression ...", "unable to parse
  // quantity's suffix", "unable to parse numeric part of quantity").
  static absl::StatusOr<Quantity> Parse(std::string_view text);

  // FromInt64 is resource.NewQuantity(value, format): an integer in the int64 form.
  static Quantity FromInt64(int64_t value, Format format = Format::kDecimalExponent);

  // Compare returns -1, 0 or 1 as this quantity is numerically less than, equal to or greater
  // than `other` (Go's Cmp). Exact for every value; the format does not matter.
  int Compare(const Quantity& other) const;

  // Equal is Compare(other) == 0 (Go's Equal; what CEL's == on quantities uses).
  bool Equal(const Quantity& other) const { return Compare(other) == 0; }

  // Sign returns -1, 0 or 1.
  int Sign() const;

  // IsZero is Sign() == 0.
  bool IsZero() const { return Sign() == 0; }

  // IsInteger is AsInt64().has_value() (CEL's quantity isInteger()).
  bool IsInteger() const { return AsInt64().has_value(); }

  // AsInt64 is Go's Quantity.AsInt64: the value as an int64 when the quantity is in int64 form
  // with a non-negative scale and the result does not overflow; nullopt otherwise (fractions,
  // overflow, and every value held in the arbitrary-precision form, e.g. "1.5Gi" or "1Pi").
  std::optional<int64_t> AsInt64() const;

  // AsApproximateFloat is Go's AsApproximateFloat64, bit for bit: mantissa converted to double
  // (correctly rounded) times math.Pow10(exponent); +-Inf when out of range.
  double AsApproximateFloat() const;

  // Add returns this + other with upstream's format and representation rules (the result keeps
  // this quantity's format unless this is zero). Fails only when the exact result would exceed
  // kMaxBits.
  absl::StatusOr<Quantity> Add(const Quantity& other) const;

  // Sub returns this - other, like Add.
  absl::StatusOr<Quantity> Sub(const Quantity& other) const;

  // ToString is Go's String(): the remembered input text when it was already canonical,
  // otherwise the canonical form (largest suffix of the format that loses no precision; binary-SI
  // values below 1024 or with fractions print as decimal SI; "0" for zero).
  std::string ToString() const;

  // format is the remembered suffix family.
  Format format() const { return format_; }

 private:
  // The int64 form: value_ * 10^scale_.
  struct IntAmount {
    int64_t value = 0;
    int32_t scale = 0;
  };

  bool is_decimal() const { return decimal_ != nullptr; }
  internal_quantity::Decimal AsDecimal() const;

  IntAmount int_;
  std::shared_ptr<const internal_quantity::Decimal> decimal_;  // Set when in decimal form.
  std::string text_;  // The remembered canonical text (Go's q.s); empty when not remembered.
  Format format_ = Format::kDecimalSI;

  struct Impl;  // Parsing and arithmetic helpers (quantity.cc).
  friend struct Impl;
};

}  // namespace devlet::cel
