// File: devlet/cdi/edits.h
//
// Applying CDI container edits. Two steps, so that both consumers share one set of rules:
//
//  1. PlanEdits turns merged ContainerEdits (see Registry::Resolve) into a ContainerAdjustment:
//     a neutral, runtime-independent list of changes with every host-dependent value filled in
//     (device type, major, minor and mode from lstat; cgroup rules; hooks sorted by stage). The
//     NRI plugin maps an adjustment onto an NRI ContainerAdjustment.
//  2. ApplyToOciSpec applies an adjustment to an OCI runtime spec (config.json), with the
//     reference library's ordering and merge rules (see ApplyToOciSpec).
//
//   DEVLET_ASSIGN_OR_RETURN(devlet::cdi::ContainerEdits edits, registry.Resolve(ids));
//   DEVLET_ASSIGN_OR_RETURN(std::string out, devlet::cdi::InjectEdits(oci_json, edits));
//
// Mapping a ContainerAdjustment onto an NRI ContainerAdjustment (research/nri.md), field by field:
//   env                 -> env (NRI replaces an existing KEY, like CDI);
//   devices             -> linux.devices: RemoveDevice(path) then AddDevice, in order;
//   device_cgroup_rules -> linux.resources.devices (appended);
//   net_devices         -> linux.net_devices (NRI >= v0.11 / containerd 2.2.1 / CRI-O 1.35);
//   mounts              -> RemoveMount(destination) then AddMount; the runtime sorts mounts itself,
//                          so the CDI depth sort needs no counterpart;
//   hooks               -> hooks, per stage;
//   intel_rdt           -> linux.rdt (clos_id, schemata, enable_monitoring) on NRI >= v0.11, else
//                          linux.resources.rdt_class = clos_id;
//   additional_gids     -> no NRI adjustment exists: report it (or ask the runtime to inject the
//                          CDI device itself through CDI_devices, NRI >= v0.7.0).
// Fill EditContext from the NRI Container's user (uid/gid) and linux namespaces/mappings.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/cdi/spec.h"

namespace devlet::cdi {

// HostDeviceInfo is what lstat(2) says about a device node on the host.
struct HostDeviceInfo {
  std::string type;         // "b", "c" or "p"
  std::int64_t major = 0;
  std::int64_t minor = 0;
  std::uint32_t mode = 0;   // st_mode without the file-type bits
};

// DeviceStat looks up a host device node; a path that is not a device node is an error.
using DeviceStat = std::function<absl::StatusOr<HostDeviceInfo>(const std::string& host_path)>;

// HostDeviceStat returns the DeviceStat backed by lstat(2).
DeviceStat HostDeviceStat();

// EditContext is what the edits depend on besides the host: the container's user and whether it
// runs in a user namespace with UID and GID mappings (then bind mounts get "idmap"/"ridmap").
struct EditContext {
  std::uint32_t process_uid = 0;   // > 0: device nodes without a uid get this one
  std::uint32_t process_gid = 0;   // > 0: device nodes without a gid get this one
  bool idmapped_user_namespace = false;
  DeviceStat stat;                 // empty: HostDeviceStat()
};

// LinuxDevice is an OCI `linux.devices` entry.
struct LinuxDevice {
  std::string path;
  std::string type;
  std::int64_t major = 0;
  std::int64_t minor = 0;
  std::optional<std::uint32_t> file_mode;
  std::optional<std::uint32_t> uid;
  std::optional<std::uint32_t> gid;

  bool operator==(const LinuxDevice&) const = default;
};

// DeviceCgroupRule is an OCI `linux.resources.devices` entry (always an allow rule from CDI).
struct DeviceCgroupRule {
  bool allow = true;
  std::string type;
  std::int64_t major = 0;
  std::int64_t minor = 0;
  std::string access;       // "rwm" letters; "" for permissions "none"

  bool operator==(const DeviceCgroupRule&) const = default;
};

// OciMount is an OCI `mounts` entry.
struct OciMount {
  std::string destination;
  std::string type;
  std::string source;
  std::vector<std::string> options;

  bool operator==(const OciMount&) const = default;
};

// OciHook is an OCI hook.
struct OciHook {
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int> timeout;

  bool operator==(const OciHook&) const = default;
};

// OciHooks are the hooks to append, per OCI lifecycle stage.
struct OciHooks {
  std::vector<OciHook> prestart;
  std::vector<OciHook> create_runtime;
  std::vector<OciHook> create_container;
  std::vector<OciHook> start_container;
  std::vector<OciHook> poststart;
  std::vector<OciHook> poststop;

  bool empty() const;
  bool operator==(const OciHooks&) const = default;
};

// ContainerAdjustment is the neutral result of PlanEdits. Apply the fields in this order, each
// with its merge rule (this is exactly what ApplyToOciSpec does to an OCI spec):
//  - env: for each "KEY=VALUE", replace the entry with the same KEY in the container's
//    environment (the last one, if the image has duplicates), else append;
//  - devices: for each, remove the first existing device with the same path, then append it;
//    device_cgroup_rules: append (one per "b"/"c" device, in device order);
//  - net_devices: set host interface -> container name;
//  - mounts: for each, remove the first existing mount with the same destination, then append;
//    afterwards, when `mounts` is not empty, stable-sort ALL mounts of the container by the
//    number of '/' in their cleaned destination (parents before children);
//  - hooks: append per stage;
//  - intel_rdt: replaces the container's whole RDT setting when set;
//  - additional_gids: append each one the container does not already have (0 never appears).
struct ContainerAdjustment {
  std::vector<std::string> env;
  std::vector<LinuxDevice> devices;
  std::vector<DeviceCgroupRule> device_cgroup_rules;
  std::vector<NetDevice> net_devices;
  std::vector<OciMount> mounts;
  OciHooks hooks;
  std::optional<IntelRdt> intel_rdt;
  std::vector<std::uint32_t> additional_gids;

  bool operator==(const ContainerAdjustment&) const = default;
};

// PlanEdits validates `edits` and produces the adjustment for a container described by
// `context`. Device nodes are completed from the host: hostPath defaults to path; type, major and
// minor come from the host unless the node is fully specified (type set and major != 0, or type
// "p"), in which case a missing host node is not an error; a given type must match the host's;
// fileMode comes from the host when unset and the host node exists.
absl::StatusOr<ContainerAdjustment> PlanEdits(const ContainerEdits& edits,
                                              const EditContext& context = {});

// ContextFromOciSpec reads the EditContext fields an OCI spec determines (process.user.uid/gid;
// a "user" namespace with both uidMappings and gidMappings).
absl::StatusOr<EditContext> ContextFromOciSpec(std::string_view oci_spec_json);

// ApplyToOciSpec applies `adjustment` to the OCI runtime spec `oci_spec_json` and returns the
// edited spec as JSON. Fields it does not touch are kept as they are.
absl::StatusOr<std::string> ApplyToOciSpec(std::string_view oci_spec_json,
                                           const ContainerAdjustment& adjustment);

// InjectEdits is ContextFromOciSpec + PlanEdits + ApplyToOciSpec: what the reference library's
// InjectDevices does to a spec once the device names are resolved. `stat` empty: lstat(2).
absl::StatusOr<std::string> InjectEdits(std::string_view oci_spec_json,
                                        const ContainerEdits& edits, DeviceStat stat = {});

}  // namespace devlet::cdi
