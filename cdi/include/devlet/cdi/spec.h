// File: devlet/cdi/spec.h
//
// The Container Device Interface (CDI) spec model, cdiVersion 0.1.0 … 1.1.0, with the JSON keys of
// the reference library (tags.cncf.io/container-device-interface/specs-go):
//
//   devlet::cdi::Spec spec;
//   spec.kind = "k8s.devlet.dev/claim";
//   spec.devices.push_back({.name = uid + "-gpu-0", .container_edits = {.env = {"A=1"}}});
//   spec.version = devlet::cdi::MinimumRequiredVersion(spec);  // "0.5.0": the name starts with a digit
//   DEVLET_RETURN_IF_ERROR(devlet::cdi::ValidateSpec(spec));
//
// Version history (what each version added to the file format):
//   0.4.0 mount `type`; 0.5.0 deviceNode `hostPath`, device names starting with a digit;
//   0.6.0 spec/device `annotations`, dots in the class; 0.7.0 `intelRdt`, `additionalGids`;
//   0.8.0 and 1.0.0 nothing; 1.1.0 `netDevices`, `intelRdt.schemata`, `intelRdt.enableMonitoring`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace devlet::cdi {

// kCurrentVersion is the newest cdiVersion this library reads and writes.
inline constexpr std::string_view kCurrentVersion = "1.1.0";

// kNoPermissions is the device-node `permissions` value that asks for an empty cgroup access.
inline constexpr std::string_view kNoPermissions = "none";

// DeviceNode is one `deviceNodes` entry: a device node created in the container.
struct DeviceNode {
  std::string path;                    // `path`: in the container; required.
  std::string host_path;               // `hostPath` (≥0.5.0): on the host; defaults to `path`.
  std::string type;                    // `type`: "", "b", "c", "u" or "p".
  std::int64_t major = 0;              // `major`: 0 = take it from the host.
  std::int64_t minor = 0;              // `minor`.
  std::optional<std::uint32_t> file_mode;  // `fileMode`: permission bits, decimal in JSON.
  std::string permissions;             // `permissions`: letters of "rwm", or "none"; "" = "rwm".
  std::optional<std::uint32_t> uid;    // `uid`.
  std::optional<std::uint32_t> gid;    // `gid`.

  bool operator==(const DeviceNode&) const = default;
};

// Mount is one `mounts` entry.
struct Mount {
  std::string host_path;               // `hostPath`: required.
  std::string container_path;          // `containerPath`: required.
  std::vector<std::string> options;    // `options`.
  std::string type;                    // `type` (≥0.4.0), e.g. "bind".

  bool operator==(const Mount&) const = default;
};

// Hook is one `hooks` entry: an OCI hook run at the lifecycle stage `hook_name`.
struct Hook {
  std::string hook_name;               // `hookName`: prestart, createRuntime, createContainer,
                                       // startContainer, poststart or poststop.
  std::string path;                    // `path`: required.
  std::vector<std::string> args;       // `args`: argv, argv[0] included.
  std::vector<std::string> env;        // `env`: "KEY=VALUE".
  std::optional<int> timeout;          // `timeout` in seconds.

  bool operator==(const Hook&) const = default;
};

// IntelRdt is the `intelRdt` object (≥0.7.0): the container's RDT class of service.
struct IntelRdt {
  std::string clos_id;                 // `closID`.
  std::string l3_cache_schema;         // `l3CacheSchema`.
  std::string mem_bw_schema;           // `memBwSchema`.
  // `schemata` (≥1.1.0). Present-but-empty differs from absent: it requires 1.1.0.
  std::optional<std::vector<std::string>> schemata;
  bool enable_monitoring = false;      // `enableMonitoring` (≥1.1.0).

  bool operator==(const IntelRdt&) const = default;
};

// NetDevice is one `netDevices` entry (≥1.1.0): a host interface moved into the container.
struct NetDevice {
  std::string host_interface_name;     // `hostInterfaceName`: required.
  std::string name;                    // `name`: the name inside the container; required.

  bool operator==(const NetDevice&) const = default;
};

// ContainerEdits is a `containerEdits` object: what injecting a device changes in a container.
struct ContainerEdits {
  std::vector<std::string> env;        // `env`: "KEY=VALUE".
  std::vector<DeviceNode> device_nodes;  // `deviceNodes`.
  std::vector<NetDevice> net_devices;  // `netDevices` (≥1.1.0).
  std::vector<Hook> hooks;             // `hooks`.
  std::vector<Mount> mounts;           // `mounts`.
  std::optional<IntelRdt> intel_rdt;   // `intelRdt` (≥0.7.0).
  std::vector<std::uint32_t> additional_gids;  // `additionalGids` (≥0.7.0).

  // IsEmpty reports whether no edit is set (a device's edits must not be empty).
  bool IsEmpty() const;

  // Append concatenates `other` onto these edits the way the reference library merges the
  // edits of several devices: lists are concatenated, `intel_rdt` is replaced when `other` has one.
  void Append(const ContainerEdits& other);

  bool operator==(const ContainerEdits&) const = default;
};

// Device is one `devices` entry.
struct Device {
  std::string name;                    // `name`: the device part of `vendor/class=name`.
  std::map<std::string, std::string> annotations;  // `annotations` (≥0.6.0).
  ContainerEdits container_edits;      // `containerEdits`: must not be empty.

  bool operator==(const Device&) const = default;
};

// Spec is one CDI spec file.
struct Spec {
  std::string version;                 // `cdiVersion`.
  std::string kind;                    // `kind`: "vendor/class".
  std::map<std::string, std::string> annotations;  // `annotations` (≥0.6.0).
  std::vector<Device> devices;         // `devices`: at least one, names unique.
  ContainerEdits container_edits;      // `containerEdits`: applied once per spec.

  // Vendor and Class split `kind` at the first '/' (empty vendor when there is no '/').
  std::string Vendor() const;
  std::string Class() const;

  bool operator==(const Spec&) const = default;
};

// IsKnownVersion reports whether `version` (a leading 'v' is allowed) is a cdiVersion the
// reference library accepts: 0.1.0 … 0.8.0, 1.0.0, 1.1.0.
bool IsKnownVersion(std::string_view version);

// CompareVersions orders two known versions: negative when a < b, 0 when equal, positive when
// a > b. Unknown versions order before every known one.
int CompareVersions(std::string_view a, std::string_view b);

// MinimumRequiredVersion returns the oldest cdiVersion able to express `spec` (at least "0.3.0"),
// with the predicates of the reference library's MinimumRequiredVersion applied to every device.
// This is the version our writers use.
std::string MinimumRequiredVersion(const Spec& spec);

// ReferenceMinimumRequiredVersion is what the reference library (specs-go v1.1.1) actually
// computes: its 0.5.0 (`hostPath`) and 0.4.0 (mount `type`) checks only see the spec-level edits
// and the LAST device's edits (a Go range-variable aliasing bug in a go-1.19 module), so it can
// be lower than MinimumRequiredVersion. ValidateSpec uses it, so we accept exactly the files the
// runtimes accept.
std::string ReferenceMinimumRequiredVersion(const Spec& spec);

// ValidateEdits checks one `containerEdits` object as the reference library does before loading
// or applying it: env entries have '=' after a non-empty key, device nodes have a path, a valid
// type, non-negative numbers and valid permissions, hooks have a known name and a path, mounts
// have both paths, closID is a valid file name, net devices are complete and unique.
absl::Status ValidateEdits(const ContainerEdits& edits);

// ValidateSpec checks `spec` as the reference library does when it loads a file: known version
// not older than ReferenceMinimumRequiredVersion, valid vendor and class, valid spec-level edits, at least one device,
// valid and unique device names, non-empty valid device edits. Messages name the field.
absl::Status ValidateSpec(const Spec& spec);

}  // namespace devlet::cdi
