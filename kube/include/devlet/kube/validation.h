// File: devlet/kube/validation.h
//
// Validation of resource.k8s.io/v1 objects with the API server's rules, limits and messages
// (k8s.io/kubernetes pkg/apis/resource/validation, Kubernetes 1.37 with its default feature
// gates). Each error has the API server's form:
//
//   spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero
//
// and Validate() folds them into one InvalidArgument status the way the API server answers:
//
//   ResourceClaim.resource.k8s.io "gpu" is invalid: spec.devices.requests[0].exactly.count: ...
//   (several errors: "... is invalid: [first, second]")
//
// What is not checked here: CEL selectors are checked for length only (compiling them and
// their cost is the CEL engine's job, allocator/cel); update rules (immutability) and
// admission (admin-access namespace label) are out of scope.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/core.h"
#include "devlet/kube/resource.h"

namespace devlet::kube {

// FieldError is one k8s.io/apimachinery field.Error.
struct FieldError {
  enum class Type {
    kNotFound,      // "Not found"
    kRequired,      // "Required value"
    kDuplicate,     // "Duplicate value"
    kInvalid,       // "Invalid value"
    kNotSupported,  // "Unsupported value"
    kForbidden,     // "Forbidden"
    kTooLong,       // "Too long"
    kTooMany,       // "Too many"
  };

  Type type = Type::kInvalid;
  std::string field;      // "spec.devices.requests[0].exactly.count"
  std::string bad_value;  // already rendered like Go does: `0`, `"abc"`, `null`; may be empty
  std::string detail;     // "must be greater than zero"

  // ToString renders "field: Type: value: detail" exactly as field.Error.Error() does.
  std::string ToString() const;

  friend bool operator==(const FieldError&, const FieldError&) = default;
};

using FieldErrors = std::vector<FieldError>;

// Per-kind validation of a new object (create semantics). ResourceClaim validation covers the
// spec and, when set, the status as a status update would (allocation, reservedFor, devices).
FieldErrors ValidateDeviceClass(const DeviceClass& object);
FieldErrors ValidateResourceSlice(const ResourceSlice& object);
FieldErrors ValidateResourceClaim(const ResourceClaim& object);
FieldErrors ValidateResourceClaimTemplate(const ResourceClaimTemplate& object);
FieldErrors ValidateDeviceTaintRule(const DeviceTaintRule& object);

// ValidateNodeSelector checks a core/v1 NodeSelector like corevalidation.ValidateNodeSelector
// (non-empty term list, known operators, value counts, label keys and values), paths under
// `path` (e.g. "spec.nodeSelector").
FieldErrors ValidateNodeSelector(const NodeSelector& selector, const std::string& path);

// FieldErrors for any object; Node and Pod get metadata checks only.
FieldErrors ValidateObject(const Object& object);

// Validate returns OK or InvalidArgument with the API server's "is invalid" message.
absl::Status Validate(const Object& object);

// ToStatus folds errors about an object of `kind` (e.g. "ResourceClaim.resource.k8s.io") named
// `name` into one InvalidArgument status (OK when `errors` is empty).
absl::Status ToStatus(const FieldErrors& errors, std::string_view kind, std::string_view name);

// Name checks, returning the apimachinery messages (empty when valid).
std::vector<std::string> IsDNS1123Label(std::string_view value);
std::vector<std::string> IsDNS1123Subdomain(std::string_view value);
std::vector<std::string> IsCIdentifier(std::string_view value);
std::vector<std::string> IsLabelKey(std::string_view value);  // IsQualifiedName
std::vector<std::string> IsLabelValue(std::string_view value);

}  // namespace devlet::kube
