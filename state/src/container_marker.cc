#include "devlet/state/container_marker.h"

#include "devlet/common/status.h"

namespace devlet::state {

std::string ContainerMarkerName(std::string_view claim_uid, std::size_t index) {
  std::string name(kContainerMarkerPrefix);
  name.reserve(name.size() + claim_uid.size() + 8);
  for (char c : claim_uid) {
    if (c >= 'a' && c <= 'z') {
      name.push_back(static_cast<char>(c - 'a' + 'A'));
    } else if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      name.push_back(c);
    } else {
      name.push_back('_');
    }
  }
  (name += '_') += std::to_string(index);
  return name;
}

std::string ContainerMarkerEnv(const DeviceMarker& marker, std::size_t index) {
  std::string entry = ContainerMarkerName(marker.claim_uid, index) + "=claim=" + marker.claim_uid;
  entry += " request=";
  for (std::size_t i = 0; i < marker.requests.size(); ++i) {
    if (i > 0) entry += ",";
    entry += marker.requests[i];
  }
  entry += " device=" + marker.pool + "/" + marker.device;
  if (!marker.share_id.empty()) entry += " share=" + marker.share_id;
  return entry;
}

absl::StatusOr<std::optional<DeviceMarker>> ParseContainerMarker(std::string_view entry) {
  if (!entry.starts_with(kContainerMarkerPrefix)) return std::nullopt;
  const std::size_t eq = entry.find('=');
  const std::string_view name = entry.substr(0, eq);
  auto bad = [&](std::string_view why) {
    return InvalidArgument("environment entry " + std::string(name) +
                           " is not a devlet claim marker: " + std::string(why) + " (value \"" +
                           std::string(eq == std::string_view::npos ? "" : entry.substr(eq + 1)) +
                           "\")");
  };
  if (eq == std::string_view::npos) return bad("no value");
  std::string_view value = entry.substr(eq + 1);
  DeviceMarker marker;
  bool have_device = false;
  while (!value.empty()) {
    const std::size_t space = value.find(' ');
    const std::string_view token = value.substr(0, space);
    value = space == std::string_view::npos ? std::string_view() : value.substr(space + 1);
    if (token.empty()) continue;
    const std::size_t sep = token.find('=');
    if (sep == std::string_view::npos) return bad("field \"" + std::string(token) + "\" has no '='");
    const std::string_view key = token.substr(0, sep);
    const std::string_view field = token.substr(sep + 1);
    if (key == "claim") {
      marker.claim_uid = field;
    } else if (key == "request") {
      for (std::string_view rest = field; !rest.empty();) {
        const std::size_t comma = rest.find(',');
        if (comma != 0) marker.requests.emplace_back(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    } else if (key == "device") {
      const std::size_t slash = field.rfind('/');
      if (slash == std::string_view::npos || slash + 1 == field.size()) {
        return bad("device \"" + std::string(field) + "\" is not <pool>/<device>");
      }
      marker.pool = field.substr(0, slash);
      marker.device = field.substr(slash + 1);
      have_device = true;
    } else if (key == "share") {
      marker.share_id = field;
    } else {
      return bad("unknown field \"" + std::string(key) + "\"");
    }
  }
  if (marker.claim_uid.empty()) return bad("no claim UID");
  if (!have_device) return bad("no device");
  return marker;
}

std::string DeviceMarkerText(const DeviceMarker& marker) {
  std::string text = marker.pool + "/" + marker.device;
  if (!marker.share_id.empty()) text += " share " + marker.share_id;
  text += " of claim " + marker.claim_uid;
  if (!marker.requests.empty()) {
    text += " (request ";
    for (std::size_t i = 0; i < marker.requests.size(); ++i) {
      text += (i > 0 ? "," : "") + marker.requests[i];
    }
    text += ")";
  }
  return text;
}

}  // namespace devlet::state
