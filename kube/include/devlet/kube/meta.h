// File: devlet/kube/meta.h
//
// Vocabulary shared by every Kubernetes object devlet reads or writes: quantities, raw JSON
// blobs, timestamps, ObjectMeta and metav1.Condition.
//
// Field names are the Go field names in snake_case; the JSON codec (devlet/kube/codec.h) maps them
// to the Kubernetes JSON names. Optional Go pointer fields are std::optional; Go maps are std::map
// (sorted, like Go's JSON encoder writes them).
//
//   devlet::kube::Quantity memory = devlet::kube::Quantity::Parse("80Gi").value();
//   memory.str();  // "80Gi"
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::kube {

// Quantity is a resource.Quantity kept exactly as written ("80Gi", "1500m", "1e3").
//
// The kube library checks the format only (the grammar of k8s.io/apimachinery's ParseQuantity:
// sign, digits with an optional decimal point, then one of the suffixes n, u, m, k, M, G, T, P, E,
// Ki, Mi, Gi, Ti, Pi, Ei or a decimal exponent e/E<int>). Arithmetic and comparison live in
// devlet::cel::Quantity (allocator/cel/include/devlet/cel/quantity.h): code that needs the value
// calls `devlet::cel::Quantity::Parse(q.str())` once, when it compiles its snapshot.
// Equality here is textual ("1Gi" != "1024Mi").
class Quantity {
 public:
  // An empty quantity (the Go zero value, "0" when encoded).
  Quantity() = default;

  // Parse checks the format of `text` and keeps it. Leading/trailing spaces are rejected, like
  // upstream. The message names the offending text.
  static absl::StatusOr<Quantity> Parse(std::string_view text);

  // IsValidFormat reports whether `text` is a syntactically valid quantity.
  static bool IsValidFormat(std::string_view text);

  // str is the text as written; "0" for an empty quantity.
  const std::string& str() const;

  // empty reports whether this is the zero-value quantity (never parsed).
  bool empty() const { return text_.empty(); }

  // Sign returns -1, 0 or 1 (exact: looks at the digits, not a float conversion).
  int Sign() const;

  friend bool operator==(const Quantity& a, const Quantity& b) { return a.str() == b.str(); }

 private:
  explicit Quantity(std::string text) : text_(std::move(text)) {}

  std::string text_;
};

// RawJson is an opaque JSON value kept as compact JSON text with its object keys in input order
// (runtime.RawExtension: opaque config parameters, device status data). Empty text means unset.
struct RawJson {
  std::string json;

  bool empty() const { return json.empty(); }

  friend bool operator==(const RawJson&, const RawJson&) = default;
};

// Extra holds the fields of an object that this model does not type (managedFields, a Pod's
// volumes, a Node's status...), as a compact JSON object text, so that decode+encode keeps them.
// Empty when there were none.
struct Extra {
  std::string json;

  bool empty() const { return json.empty(); }

  friend bool operator==(const Extra&, const Extra&) = default;
};

// Time is a metav1.Time in RFC 3339 form ("2026-12-02T16:01:23Z"), kept as written.
using Time = std::string;

// OwnerReference is metav1.OwnerReference.
struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  std::optional<bool> controller;
  std::optional<bool> block_owner_deletion;

  friend bool operator==(const OwnerReference&, const OwnerReference&) = default;
};

// ObjectMeta is metav1.ObjectMeta: the fields devlet uses, the rest kept in `extra`.
struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string namespace_;  // JSON "namespace"
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::optional<Time> creation_timestamp;
  std::optional<Time> deletion_timestamp;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<OwnerReference> owner_references;
  std::vector<std::string> finalizers;
  Extra extra;  // managedFields, deletionGracePeriodSeconds, selfLink, ...

  friend bool operator==(const ObjectMeta&, const ObjectMeta&) = default;
};

// ListMeta is metav1.ListMeta (lists from the API server).
struct ListMeta {
  std::string resource_version;
  std::string continue_;  // JSON "continue"
  std::optional<int64_t> remaining_item_count;

  friend bool operator==(const ListMeta&, const ListMeta&) = default;
};

// Condition is metav1.Condition.
struct Condition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  int64_t observed_generation = 0;
  Time last_transition_time;
  std::string reason;
  std::string message;

  friend bool operator==(const Condition&, const Condition&) = default;
};

}  // namespace devlet::kube
