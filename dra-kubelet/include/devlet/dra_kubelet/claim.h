// File: devlet/dra_kubelet/claim.h
//
// The parts of a resource.k8s.io/v1 ResourceClaim that claim preparation reads. This is the
// plugin's own narrow view: a ClaimSource (interfaces.h) produces it, from the API server, from
// the manifest directory or from test files. ParseResourceClaimJson decodes the upstream JSON
// encoding (an object with apiVersion resource.k8s.io/v1, kind ResourceClaim).
//
//   absl::StatusOr<ResourceClaim> claim = ParseResourceClaimJson(text);
//   for (const AllocationResult& result : claim->results) { ... }
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::dra_kubelet {

// ClaimRef names a claim as the kubelet does: namespace, name and UID (nothing else is sent).
struct ClaimRef {
  std::string namespace_name;
  std::string name;
  std::string uid;

  // Display returns "namespace/name" for messages; when either holds a byte a terminal or log
  // reader would misread (control characters such as NUL or newline, quotes, backslashes,
  // invalid UTF-8) it is quoted and escaped as Go's %q does instead ("ns/a\x00b").
  [[nodiscard]] std::string Display() const;
};

// AllocationResult is one entry of status.allocation.devices.results[].
struct AllocationResult {
  std::string request;  // "<request>" or "<request>/<subrequest>" (firstAvailable).
  std::string driver;
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;
  bool admin_access = false;
  // consumedCapacity "cpus" (in millicpus) and "memory" (bytes), any domain prefix: what the
  // allocation took from a CPU device; recorded so the container path reads no claim.
  std::optional<std::int64_t> cpu_millis;
  std::optional<std::int64_t> memory_bytes;
};

// ConfigSource says where an allocation config entry came from.
enum class ConfigSource { kFromClass, kFromClaim };

// AllocationConfig is one entry of status.allocation.devices.config[] with an opaque payload.
// Entries without `opaque` are kept with an empty driver and never match a driver.
struct AllocationConfig {
  ConfigSource source = ConfigSource::kFromClaim;
  std::vector<std::string> requests;  // Empty: applies to every request.
  std::string opaque_driver;
  std::string opaque_parameters;  // The raw JSON of opaque.parameters.
};

// ResourceClaim is the narrow view of a resource.k8s.io/v1 ResourceClaim.
struct ResourceClaim {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::int64_t generation = 0;
  std::map<std::string, std::string> annotations;
  bool allocated = false;  // status.allocation is present.
  std::vector<AllocationResult> results;
  std::vector<AllocationConfig> config;  // In allocation order: FromClass entries come first.
  std::vector<std::string> reserved_for_uids;  // status.reservedFor[].uid of pods
  // status.reservedFor[].uid of PodGroups (KEP-5729, scheduling.k8s.io podgroups): the claim
  // serves every pod of the group, which the kubelet checks before it prepares it for one.
  std::vector<std::string> reserved_for_pod_groups;
  std::vector<std::string> allocation_node_names;  // matchFields metadata.name values, if any.

  // Ref returns the claim's identity.
  [[nodiscard]] ClaimRef Ref() const { return {namespace_name, name, uid}; }
};

// kPodClaimNameAnnotation carries pod.spec.resourceClaims[].name on claims made from templates.
inline constexpr std::string_view kPodClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name";

// ParseResourceClaimJson decodes a ResourceClaim from its upstream JSON encoding. Fields the
// plugin does not read are ignored; fields it reads must have the right JSON types.
absl::StatusOr<ResourceClaim> ParseResourceClaimJson(std::string_view json_text);

// BaseRequestName strips a "/<subrequest>" suffix: "gpu/large" -> "gpu".
std::string BaseRequestName(std::string_view request);

}  // namespace devlet::dra_kubelet
