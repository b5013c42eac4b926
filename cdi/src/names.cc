#include "devlet/cdi/names.h"

#include <string>
#include <string_view>

#include "devlet/common/status.h"

namespace devlet::cdi {
namespace {

bool IsLetter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlphaNumeric(char c) { return IsLetter(c) || IsDigit(c); }

std::string Quote(std::string_view s) { return std::string(1, '"').append(s).append(1, '"'); }

absl::Status ValidateVendorOrClass(std::string_view what, std::string_view name) {
  const std::string prefix = "invalid " + std::string(what) + " name " + Quote(name) + ": ";
  if (name.empty()) {
    return InvalidArgument("invalid " + std::string(what) + " name: empty");
  }
  if (!IsLetter(name.front())) {
    return InvalidArgument(prefix + "must start with a letter");
  }
  if (name.size() == 1) {
    return absl::OkStatus();
  }
  for (char c : name.substr(1, name.size() - 2)) {
    if (!IsAlphaNumeric(c) && c != '_' && c != '-' && c != '.') {
      return InvalidArgument(prefix + "invalid character '" + std::string(1, c) +
                             "' (allowed: letters, digits, '_', '-', '.')");
    }
  }
  if (!IsAlphaNumeric(name.back())) {
    return InvalidArgument(prefix + "must end with a letter or digit");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateVendorName(std::string_view vendor) {
  return ValidateVendorOrClass("vendor", vendor);
}

absl::Status ValidateClassName(std::string_view klass) {
  return ValidateVendorOrClass("class", klass);
}

absl::Status ValidateDeviceName(std::string_view name) {
  if (name.empty()) {
    return InvalidArgument("invalid device name: empty");
  }
  const std::string prefix = "invalid device name " + Quote(name) + ": ";
  if (!IsAlphaNumeric(name.front())) {
    return InvalidArgument(prefix + "must start with a letter or digit");
  }
  if (name.size() == 1) {
    return absl::OkStatus();
  }
  for (char c : name.substr(1, name.size() - 2)) {
    if (!IsAlphaNumeric(c) && c != '_' && c != '-' && c != '.' && c != ':') {
      return InvalidArgument(prefix + "invalid character '" + std::string(1, c) +
                             "' (allowed: letters, digits, '_', '-', '.', ':')");
    }
  }
  if (!IsAlphaNumeric(name.back())) {
    return InvalidArgument(prefix + "must end with a letter or digit");
  }
  return absl::OkStatus();
}

std::string QualifiedName(std::string_view vendor, std::string_view klass, std::string_view name) {
  std::string out;
  out.reserve(vendor.size() + klass.size() + name.size() + 2);
  out.append(vendor).append("/").append(klass).append("=").append(name);
  return out;
}

absl::StatusOr<QualifiedDevice> ParseQualifiedName(std::string_view device) {
  const std::string context = "CDI device name " + Quote(device) + ": ";
  // Like the reference parser: a path or a string without '=' is not a CDI name.
  QualifiedDevice out;
  if (!device.empty() && device.front() != '/') {
    const size_t eq = device.find('=');
    if (eq != std::string_view::npos && eq > 0 && eq + 1 < device.size()) {
      const std::string_view qualifier = device.substr(0, eq);
      const size_t slash = qualifier.find('/');
      if (slash != std::string_view::npos && slash > 0 && slash + 1 < qualifier.size()) {
        out.vendor = std::string(qualifier.substr(0, slash));
        out.klass = std::string(qualifier.substr(slash + 1));
        out.name = std::string(device.substr(eq + 1));
      }
    }
  }
  if (out.vendor.empty()) {
    return InvalidArgument(context + "not of the form vendor/class=name");
  }
  if (absl::Status s = ValidateVendorName(out.vendor); !s.ok()) {
    return WithContext(s, context.substr(0, context.size() - 2));
  }
  if (absl::Status s = ValidateClassName(out.klass); !s.ok()) {
    return WithContext(s, context.substr(0, context.size() - 2));
  }
  if (absl::Status s = ValidateDeviceName(out.name); !s.ok()) {
    return WithContext(s, context.substr(0, context.size() - 2));
  }
  return out;
}

bool IsQualifiedName(std::string_view device) { return ParseQualifiedName(device).ok(); }

absl::StatusOr<std::string> AnnotationKey(std::string_view plugin, std::string_view device_id) {
  constexpr size_t kMaxNameLength = 63;
  if (plugin.empty()) {
    return InvalidArgument("CDI annotation key: empty plugin name");
  }
  if (device_id.empty()) {
    return InvalidArgument("CDI annotation key: empty device ID");
  }
  std::string name = std::string(plugin) + "_";
  for (char c : device_id) {
    name.push_back(c == '/' ? '_' : c);
  }
  const std::string prefix = "CDI annotation key " + Quote(name) + ": ";
  if (name.size() > kMaxNameLength) {
    return InvalidArgument(prefix + "longer than 63 characters");
  }
  if (!IsAlphaNumeric(name.front())) {
    return InvalidArgument(prefix + "must start with a letter or digit");
  }
  if (name.size() > 2) {
    for (char c : std::string_view(name).substr(1, name.size() - 2)) {
      if (!IsAlphaNumeric(c) && c != '_' && c != '-' && c != '.') {
        return InvalidArgument(prefix + "invalid character '" + std::string(1, c) + "'");
      }
    }
  }
  if (!IsAlphaNumeric(name.back())) {
    return InvalidArgument(prefix + "must end with a letter or digit");
  }
  return "cdi.k8s.io/" + name;
}

absl::StatusOr<std::string> AnnotationValue(const std::vector<std::string>& devices) {
  std::string value;
  for (const std::string& device : devices) {
    DEVLET_RETURN_IF_ERROR(ParseQualifiedName(device));
    if (!value.empty()) {
      value.push_back(',');
    }
    value += device;
  }
  return value;
}

}  // namespace devlet::cdi
