// File: devlet/kube/quantity.h
//
// Exact values of a kube::Quantity (meta.h), for code that turns an allocation into numbers
// (the CPU and memory of a DRA-allocated CPU device); the allocator uses devlet::cel::Quantity.
// Decimal digits, never a float: "1.5Gi" is 1610612736, "100m" is 100 milli, and values at the
// int64 bound stay exact.
//
//   DEVLET_ASSIGN_OR_RETURN(std::int64_t millis, QuantityMilliValue(consumed.at("cpus")));
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "devlet/kube/meta.h"

namespace devlet::kube {

// QuantityScaledValue is `q` times 10^scale, rounded away from zero (Go's ScaledValue rounding);
// kOutOfRange when it does not fit in int64.
absl::StatusOr<std::int64_t> QuantityScaledValue(const Quantity& q, int scale);

// QuantityValue is Go's Quantity.Value(): "1.5" -> 2, "100m" -> 1, "-1.5" -> -2.
inline absl::StatusOr<std::int64_t> QuantityValue(const Quantity& q) {
  return QuantityScaledValue(q, 0);
}

// QuantityMilliValue is Go's Quantity.MilliValue(): "1.5" -> 1500, "100m" -> 100, "1u" -> 1.
inline absl::StatusOr<std::int64_t> QuantityMilliValue(const Quantity& q) {
  return QuantityScaledValue(q, 3);
}

}  // namespace devlet::kube
