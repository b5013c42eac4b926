// File: devlet/nri/version.h
//
// NRI protocol versions and what each one knows. Runtimes since NRI v0.12.0 send their NRI version
// in ConfigureRequest; for older ones it is inferred from the runtime's name and version with the
// same table containerd/nri uses (pkg/api/version.go).
//
//   NriVersion v = EffectiveNriVersion(request.nri_version(), "containerd", "v1.7.20");  // v0.6.1
//   uint32_t mask = wanted & ValidEventsMask(v);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace devlet::nri {

// kImplementedNriVersion is the NRI protocol version this plugin implements and registers with.
inline constexpr char kImplementedNriVersion[] = "v0.12.5";

// NriVersion is a parsed "vMAJOR.MINOR.PATCH[-suffix]". A suffix makes it a pre-release, ordered
// just below the release. `known` is false for "", "unknown" and anything unparsable.
struct NriVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  bool prerelease = false;
  bool known = false;
  std::string text;

  // AtLeast reports whether this version is known and >= major.minor.patch (a release).
  bool AtLeast(int want_major, int want_minor, int want_patch) const;
};

// ParseNriVersion parses a semantic version with or without the leading 'v'.
NriVersion ParseNriVersion(std::string_view text);

// InferNriVersion maps a runtime name ("containerd", "cri-o") and version to the NRI version it
// vendors; unknown runtimes and versions yield an unknown NriVersion.
NriVersion InferNriVersion(std::string_view runtime_name, std::string_view runtime_version);

// EffectiveNriVersion is `reported` when the runtime sent one, else the inferred version.
NriVersion EffectiveNriVersion(std::string_view reported, std::string_view runtime_name,
                               std::string_view runtime_version);

// ValidEventsMask returns the events a runtime of NRI version `version` accepts in a subscription
// (each event's first version is in the event table, src/events.cc): 0x3FFF since v0.10.0
// (UpdatePodSandbox, PostUpdatePodSandbox, ValidateContainerAdjustment), else 0x7FF. Subscribing to
// more makes the runtime refuse the plugin.
uint32_t ValidEventsMask(const NriVersion& version);

// SupportsCdiDeviceAdjustment: the runtime applies ContainerAdjustment.CDI_devices (v0.7.0+).
bool SupportsCdiDeviceAdjustment(const NriVersion& version);

// SupportsSafeUpdateContainers: Runtime.UpdateContainers cannot deadlock the runtime (v0.12.1+).
bool SupportsSafeUpdateContainers(const NriVersion& version);

// UsesDedicatedEventRpcs: the runtime calls RunPodSandbox, StartContainer, ... directly (v0.12.0+)
// instead of StateChange.
bool UsesDedicatedEventRpcs(const NriVersion& version);

}  // namespace devlet::nri
