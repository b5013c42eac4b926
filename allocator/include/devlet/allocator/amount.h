// Amount: a Kubernetes quantity as an exact fixed-point integer (nano units in 128 bits), the
// compiled form of counters and consumable capacity. Every quantity Kubernetes can store with at
// most nano precision and a magnitude below ~1.7e29 is exact; finer digits round up (like
// resource.Quantity's scale handling), larger values are rejected at compile time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace devlet::allocator {

// 128-bit integer (a GCC/Clang extension; __extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 Int128;

struct Amount {
  Int128 nanos = 0;

  static absl::StatusOr<Amount> Parse(std::string_view text);
  static Amount FromInt(int64_t value) { return Amount{static_cast<Int128>(value) * kNano}; }

  bool is_integer() const { return nanos % kNano == 0; }
  // Whole units, truncated toward zero (resource.Quantity.Value() rounds up; see Ceil).
  Int128 units_ceil() const;
  Int128 milli_ceil() const;  // MilliValue(): rounds up
  bool milli_exact() const { return nanos % 1000000 == 0; }

  // Canonical Kubernetes text; `binary` picks Ki/Mi/... suffixes for integer values.
  std::string Format(bool binary) const;

  friend auto operator<=>(const Amount&, const Amount&) = default;
  friend Amount operator+(Amount a, Amount b) { return Amount{a.nanos + b.nanos}; }
  friend Amount operator-(Amount a, Amount b) { return Amount{a.nanos - b.nanos}; }

  static constexpr Int128 kNano = 1000000000;
};

// IsBinaryFormat reports whether a quantity text uses a binary suffix (Ki, Mi, ...).
bool IsBinaryFormat(std::string_view text);

}  // namespace devlet::allocator
