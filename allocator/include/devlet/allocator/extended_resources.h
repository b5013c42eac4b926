// File: devlet/allocator/extended_resources.h
//
// Extended resources backed by DRA (KEP-5004, gate DRAExtendedResource; 1.37 semantics): a pod
// that asks for `example.com/gpu: 2` in a container's resources, where a DeviceClass serves that
// name, gets one synthesized ResourceClaim holding one request per (container, resource). That
// claim is allocated together with the pod's other claims, like any other claim.
//
// A DeviceClass serves two names: its spec.extendedResourceName (when set) and, always, the
// implicit `deviceclass.resource.kubernetes.io/<class name>`. When several classes declare the
// same extendedResourceName, the newest (metadata.creationTimestamp) wins and ties go to the
// lexicographically first class name, as the scheduler's class cache does. On a node whose
// status.allocatable lists the resource (a device plugin serves it there), the request is not
// DRA-backed and stays out of the claim, so the synthesized claim differs per node.
//
//   ExtendedResourceClasses index = ExtendedResourceClasses::Build(classes);
//   DEVLET_ASSIGN_OR_RETURN(std::optional<ExtendedResourceClaim> special,
//                           SynthesizeExtendedResourceClaim(features, pod, index, &node));
//   if (special) claims.push_back(&special->claim);   // allocate it with the pod's claims
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/allocator/features.h"
#include "devlet/kube/core.h"
#include "devlet/kube/resource.h"

namespace devlet::allocator {

// The prefix of the implicit extended resource name of every DeviceClass.
inline constexpr std::string_view kImplicitExtendedResourcePrefix =
    "deviceclass.resource.kubernetes.io/";

// The annotation that marks the synthesized claim (its value is "true").
inline constexpr std::string_view kExtendedResourceClaimAnnotation =
    "resource.kubernetes.io/extended-resource-claim";

// ExtendedResourceClasses maps extended resource names to the DeviceClass that serves them.
// Build it once per set of classes (it is cheap to copy and immutable).
class ExtendedResourceClasses {
 public:
  // Build indexes `classes` (duplicate extendedResourceNames resolved as described above).
  static ExtendedResourceClasses Build(const std::vector<kube::DeviceClass>& classes);
  static ExtendedResourceClasses Build(const std::vector<const kube::DeviceClass*>& classes);

  // ClassFor returns the name of the class serving `resource`, or nullopt when no class does
  // (then the resource is not DRA-backed: a device plugin or nobody serves it). An explicit
  // extendedResourceName takes precedence over an implicit name that happens to be equal.
  std::optional<std::string> ClassFor(std::string_view resource) const;

 private:
  std::map<std::string, std::string, std::less<>> explicit_;  // resource -> class
  std::set<std::string, std::less<>> classes_;                // every class name
};

// ExtendedResourceClaim is the synthesized claim and how the pod's containers map onto it.
struct ExtendedResourceClaim {
  // metadata: the pod's namespace, name "<pod>-extended-resources", uid
  // "extended-resources-<pod uid>", the kExtendedResourceClaimAnnotation annotation.
  // spec.devices.requests: "container-<i>-request-<j>", ExactCount, count = the quantity.
  kube::ResourceClaim claim;
  // One mapping per request (status.extendedResourceClaimStatus.requestMappings of the pod).
  std::vector<kube::ContainerExtendedResourceRequest> mappings;
};

// SynthesizeExtendedResourceClaim builds the pod's special claim for `node`.
//
// Containers are numbered init containers first, then regular containers (`<i>` counts them
// all); within a container the resources are taken in name order and `<j>` counts only the
// DRA-backed ones. A container's requests win over its limits (the API server defaults
// requests from limits and requires them equal for extended resources). Zero quantities are
// skipped. Returns nullopt when the gate is off or nothing is DRA-backed. `node` may be null
// (then no resource is considered served by a device plugin).
//
// Errors (InvalidArgument, naming the pod, container and resource): a quantity that is not a
// whole non-negative number of devices.
absl::StatusOr<std::optional<ExtendedResourceClaim>> SynthesizeExtendedResourceClaim(
    const Features& features, const kube::Pod& pod, const ExtendedResourceClasses& classes,
    const kube::Node* node = nullptr);

// NodeAllocatableResources returns the names in node status.allocatable with a non-zero
// quantity (kept in the Node's untyped `extra`). A malformed status yields an empty set.
std::set<std::string> NodeAllocatableResources(const kube::Node& node);

}  // namespace devlet::allocator
