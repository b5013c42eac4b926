// File: devlet/cdi/names.h
//
// CDI names: vendor and class (the `kind` "vendor/class"), device names, and fully-qualified
// device names "vendor/class=device", with the reference library's rules (pkg/parser):
//
//   DEVLET_RETURN_IF_ERROR(devlet::cdi::ValidateDeviceName(uid + "-gpu-0"));
//   std::string id = devlet::cdi::QualifiedName("k8s.devlet.dev", "claim", uid + "-gpu-0");
//   DEVLET_ASSIGN_OR_RETURN(devlet::cdi::QualifiedDevice parsed, devlet::cdi::ParseQualifiedName(id));
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet::cdi {

// QualifiedDevice is a parsed "vendor/class=name".
struct QualifiedDevice {
  std::string vendor;
  std::string klass;  // `class` is a keyword.
  std::string name;

  bool operator==(const QualifiedDevice&) const = default;
};

// ValidateVendorName checks a vendor: an ASCII letter first, then letters, digits, '_', '-', '.',
// ending in a letter or digit. ValidateClassName applies the same rule to a class.
absl::Status ValidateVendorName(std::string_view vendor);
absl::Status ValidateClassName(std::string_view klass);

// ValidateDeviceName checks a device name: a letter or digit first, then letters, digits, '_',
// '-', '.', ':', ending in a letter or digit (so PCI addresses and claim UIDs are valid).
absl::Status ValidateDeviceName(std::string_view name);

// QualifiedName joins "vendor/class=name" without validating.
std::string QualifiedName(std::string_view vendor, std::string_view klass, std::string_view name);

// ParseQualifiedName splits and validates "vendor/class=name".
absl::StatusOr<QualifiedDevice> ParseQualifiedName(std::string_view device);

// IsQualifiedName reports whether ParseQualifiedName would succeed.
bool IsQualifiedName(std::string_view device);

// AnnotationKey returns the "cdi.k8s.io/<plugin>_<device id>" annotation key the kubelet and
// runtimes use for CDI devices ('/' in the id becomes '_'; the part after the prefix is at most
// 63 characters, alphanumeric at both ends, [A-Za-z0-9_.-] inside).
absl::StatusOr<std::string> AnnotationKey(std::string_view plugin, std::string_view device_id);

// AnnotationValue joins qualified device names with ',' after validating each.
absl::StatusOr<std::string> AnnotationValue(const std::vector<std::string>& devices);

}  // namespace devlet::cdi
