// Small methods of the object model.
#include <optional>
#include <string>
#include <string_view>

#include "devlet/kube/resource.h"

namespace devlet::kube {

DeviceAttribute::Kind DeviceAttribute::kind() const {
  if (int_value)
    return Kind::kInt;
  if (bool_value)
    return Kind::kBool;
  if (string_value)
    return Kind::kString;
  if (version_value)
    return Kind::kVersion;
  if (int_values)
    return Kind::kInts;
  if (bool_values)
    return Kind::kBools;
  if (string_values)
    return Kind::kStrings;
  if (version_values)
    return Kind::kVersions;
  return Kind::kNone;
}

int DeviceAttribute::NumSet() const {
  return int(int_value.has_value()) + int(bool_value.has_value()) + int(string_value.has_value()) +
         int(version_value.has_value()) + int(int_values.has_value()) +
         int(bool_values.has_value()) + int(string_values.has_value()) +
         int(version_values.has_value());
}

bool DeviceTaintSelectorMatches(const std::optional<DeviceTaintSelector>& selector,
                                std::string_view driver, std::string_view pool,
                                std::string_view device) {
  if (!selector) {
    return true;
  }
  if (selector->driver && *selector->driver != driver)
    return false;
  if (selector->pool && *selector->pool != pool)
    return false;
  if (selector->device && *selector->device != device)
    return false;
  return true;
}

}  // namespace devlet::kube
