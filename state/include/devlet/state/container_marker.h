// File: devlet/state/container_marker.h
//
// Which prepared devices a container asked for. The kubelet tells the runtime which claims (and
// requests) a container names only through the CDI device IDs it passes for that container (CRI
// ContainerConfig.CDI_devices); NRI does not report them to plugins. So the CDI device devlet
// writes for each prepared device of a claim carries one environment entry, the container
// marker, that only the containers given that CDI device get; the NRI plugin reads the markers
// back from the container's environment at CreateContainer and applies exactly those devices
// (and their claims' metadata, CPUs and memory). Both plugins use this one definition.
//
//   DEVLET_CLAIM_<UID>_<N>=claim=<claim uid> request=<r1>[,<r2>...] device=<pool>/<device>
//                          [share=<share id>]
//
// <UID> is the claim UID with letters upper-cased and every other character that is not a
// letter or digit turned into '_' (POSIX portable environment names: claim UIDs contain '-'),
// <N> the device's position in the claim, so that two devices of one claim never share a name
// (a later CDI env entry with the same name would replace the earlier). The value carries the
// identity exactly; fields never contain spaces (UIDs are UUIDs; pools, devices and requests are
// DNS names), device names never contain '/' (the pool may).
//
//   std::string entry = ContainerMarkerEnv({.claim_uid = uid, .pool = "node-1",
//                                           .device = "gpu-0", .requests = {"gpus"}}, 0);
//   absl::StatusOr<std::optional<DeviceMarker>> marker = ParseContainerMarker(entry);
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::state {

// kContainerMarkerPrefix starts the name of every container marker.
inline constexpr std::string_view kContainerMarkerPrefix = "DEVLET_CLAIM_";

// DeviceMarker identifies one prepared device of a claim, as a container's marker names it.
struct DeviceMarker {
  std::string claim_uid;
  std::vector<std::string> requests;  // the requests the device serves ("req" or "req/sub")
  std::string pool;
  std::string device;
  std::string share_id;  // empty unless allocated with a share ID

  friend bool operator==(const DeviceMarker&, const DeviceMarker&) = default;
};

// ContainerMarkerName returns the environment name of the marker of the `index`-th device of the
// claim with UID `claim_uid`.
std::string ContainerMarkerName(std::string_view claim_uid, std::size_t index);

// ContainerMarkerEnv returns the marker entry ("NAME=value") for `marker`, the `index`-th device
// of its claim.
std::string ContainerMarkerEnv(const DeviceMarker& marker, std::size_t index);

// ParseContainerMarker reads one environment entry ("NAME=value"): nullopt when it is not a
// marker (its name does not start with kContainerMarkerPrefix), InvalidArgument naming the entry
// when it is one whose value does not parse (no claim or device field, an unknown field).
absl::StatusOr<std::optional<DeviceMarker>> ParseContainerMarker(std::string_view entry);

// DeviceMarkerText is the marker's identity for messages: "<pool>/<device>[ share <id>] of claim
// <uid> (request <r1>,<r2>)".
std::string DeviceMarkerText(const DeviceMarker& marker);

}  // namespace devlet::state
