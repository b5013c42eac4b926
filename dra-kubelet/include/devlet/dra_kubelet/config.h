// File: devlet/dra_kubelet/config.h
//
// devlet's opaque device configuration, carried in DeviceClass and ResourceClaim `config[].opaque`
// entries whose `driver` is ours:
//
//   {"apiVersion": "devlet.io/v1alpha1", "kind": "DeviceConfig",
//    "env": {"NCCL_DEBUG": "INFO"},          // container environment (class or claim)
//    "bindDriver": "vfio-pci"}                // host-level: DeviceClass config only
//
// Decoding is strict: unknown fields, wrong types, another apiVersion or kind are errors. Entries
// apply in allocation order, DeviceClass entries before claim entries, so a claim can override a
// class's environment but never ask for host-level actions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/dra_kubelet/claim.h"
#include "devlet/dra_kubelet/interfaces.h"

namespace devlet::dra_kubelet {

inline constexpr std::string_view kDeviceConfigApiVersion = "devlet.io/v1alpha1";
inline constexpr std::string_view kDeviceConfigKind = "DeviceConfig";

// DecodeDeviceConfig strictly decodes one opaque `parameters` object.
absl::StatusOr<DeviceConfig> DecodeDeviceConfig(std::string_view json_text);

// EncodeDeviceConfig renders `config` in the wire form (used by the checkpoint).
std::string EncodeDeviceConfig(const DeviceConfig& config);

// ConfigApplies reports whether an entry with `requests` applies to the full request name
// `request`: an empty list applies to all, "<req>" applies to "<req>" and its subrequests, and
// "<req>/<sub>" applies to that subrequest only.
bool ConfigApplies(const std::vector<std::string>& requests, std::string_view request);

// ResolveDeviceConfig merges, in order, every entry of `config` for `driver` that applies to
// `request` (FromClass entries first, then FromClaim), rejecting host-level settings that come
// from a claim. Messages name the offending entry.
absl::StatusOr<DeviceConfig> ResolveDeviceConfig(const std::vector<AllocationConfig>& config,
                                                 std::string_view driver,
                                                 std::string_view request);

}  // namespace devlet::dra_kubelet
