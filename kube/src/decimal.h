// Private: exact decimal values of quantities, for validation only (request-policy ordering and
// step checks). The allocator uses devlet::cel::Quantity instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace devlet::kube::internal {

// Dec is (-1)^negative * digits * 10^exponent; digits has no leading or trailing zeros, and is
// empty for zero.
struct Dec {
  bool negative = false;
  std::string digits;
  int64_t exponent = 0;

  bool IsZero() const { return digits.empty(); }

  int Sign() const { return IsZero() ? 0 : (negative ? -1 : 1); }

  // IsInteger: no digits below the decimal point.
  bool IsInteger() const { return IsZero() || exponent >= 0; }

  // ToString writes a plain decimal ("1073741824", "0.5", "-3").
  std::string ToString() const;
};

// ParseDec converts quantity text (already format-checked) to its exact value; nullopt when the
// exponent is absurd (|e| > 10^6).
std::optional<Dec> ParseDec(std::string_view quantity);

// Compare returns -1, 0, 1.
int Compare(const Dec& a, const Dec& b);

// Add returns a+b; nullopt when the exponents are too far apart to align cheaply.
std::optional<Dec> Add(const Dec& a, const Dec& b);

// ScaledCeil returns value*10^scale rounded away from zero to an integer (Quantity.Value() for
// scale 0, MilliValue() for scale 3); nullopt when it does not fit in int64.
std::optional<int64_t> ScaledCeil(const Dec& value, int scale);

}  // namespace devlet::kube::internal
