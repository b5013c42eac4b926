// Private helpers shared by the codec sources: the JSON tree type and input limits.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace devlet::kube::internal {

// Json keeps object keys in input order, so that opaque parameters and kept fields round-trip.
using Json = nlohmann::ordered_json;

struct Limits {
  int max_depth = 64;
  std::size_t max_nodes = 1u << 20;
};

// CheckJsonDepth fails when brackets nest deeper than `max_depth` (before nlohmann parses, whose
// recursive destruction and dump could otherwise exhaust the stack).
absl::Status CheckJsonDepth(std::string_view text, int max_depth);

// ParseJson parses one JSON value.
absl::StatusOr<Json> ParseJson(std::string_view text, const Limits& limits);

// ParseYaml parses a YAML stream into one JSON value per document (null for an empty one),
// resolving plain scalars as go-yaml v2 does for Kubernetes (YAML 1.1 booleans y/yes/on/...,
// null, ints incl. 0x/0o, floats, else string).
absl::StatusOr<std::vector<Json>> ParseYaml(std::string_view text, const Limits& limits);

// DumpJson writes compact JSON (invalid UTF-8 replaced, never throws).
std::string DumpJson(const Json& json, int indent = -1);

// IsValidUtf8 reports whether `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

// TypeName names a JSON value's type for messages ("a string", "an object").
std::string TypeName(const Json& json);

}  // namespace devlet::kube::internal
