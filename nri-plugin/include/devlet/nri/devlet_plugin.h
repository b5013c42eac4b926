// File: devlet/nri/devlet_plugin.h
//
// devlet's NRI handlers: make a DRA allocation real inside each container at creation.
//
// Which devices a container gets: exactly those whose markers (state/container_marker.h) are in
// its environment. The kubelet passes a device's CDI IDs only to the containers that name its
// claim (and request) in their resources, and the runtime copies the CDI device's environment,
// marker included, into those containers alone; init containers and sidecars that name no claim
// carry no marker and are left alone, without the prepared claims even being read. So scoping
// needs a runtime that applies the kubelet's CDI devices (containerd >= 1.7 with CDI enabled, the
// default from 2.0; CRI-O). Fail closed: a container with a marker whose claims cannot be read
// (PreparedClaimsView error), whose claim cannot be resolved (PreparedClaim::error), or that
// names a claim or device devlet has not prepared for the pod fails CreateContainer with an error
// naming the claim; the runtime reports it and the kubelet retries.
//
// For the claims prepared for the container's pod (PreparedClaimsView, by pod UID) of which the
// container gets at least one device, CreateContainer returns one adjustment with
//   (a) the devices the container names, by CDI policy: the CDI device names (runtime resolves them; NRI v0.7.0+),
//       or the resolved CDI edits (device nodes, mounts, env, hooks) for runtimes that do not
//       apply CDI themselves, or nothing when the runtime already applies the kubelet's CDI
//       devices;
//   (b) the claims' device-metadata files as read-only bind mounts;
//   (c) cpuset.cpus / cpuset.mems: the CPUs DRA allocated to the claims when there are any;
//       otherwise the CPUs of the NUMA nodes of the container's devices (narrowed to the
//       container's current cpuset when they overlap) unless the container already has
//       exclusive CPUs (kubelet static CPU manager: a cpuset whose size equals an integral CPU
//       limit); and limits for the CPU and memory DRA allocated: CFS quota and shares for the
//       claims' CPUs (1000 millicpus per allocated CPU, or the claim's cpu_millis) and the memory
//       limit, each unless the container's own limit is already stricter.
//
// Conflicts with other plugins are avoided by design: devlet only emits entries it owns (its own
// device paths, mount destinations, env keys, CDI names) and skips any the container already
// has; it sets cpuset/mems only for containers with devlet devices or DRA-allocated CPUs, so it
// must not be combined with another resource-policy plugin managing the same containers' cpusets
// (the runtime would reject the second plugin's cpuset with a conflict error naming both).
// UpdateContainer re-asserts devlet's cpuset/mems and allocated limits over the kubelet's
// updates (CPU-manager reconcile, in-place resize).
//
//   DevletPlugin plugin(&view, {.cdi_policy = CdiPolicy::kAuto, .numa_cpus = {{0, "0-7"}}});
//   DEVLET_ASSIGN_OR_RETURN(auto stub, Stub::Create(plugin.MakeHandlers(), stub_options));
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/nri/claims_view.h"
#include "devlet/nri/stub.h"

namespace devlet::nri {

// CdiPolicy says how claim devices reach the container.
enum class CdiPolicy {
  kAuto,         // CDI device names when the runtime's NRI supports them (v0.7.0+), else edits
  kDeviceNames,  // CDI device names (falls back to edits on runtimes older than NRI v0.7.0)
  kEdits,        // the resolved CDI edits
  kNone,         // nothing: the runtime applies the kubelet's CDI devices itself
};

// ParseCdiPolicy accepts "auto", "names", "edits", "none".
absl::StatusOr<CdiPolicy> ParseCdiPolicy(std::string_view text);

// DevletPluginOptions configures DevletPlugin.
struct DevletPluginOptions {
  CdiPolicy cdi_policy = CdiPolicy::kAuto;
  bool align_cpus = true;              // NUMA-align cpuset/mems to the devices
  std::map<int, std::string> numa_cpus;  // NUMA node -> its CPUs (cpulist)
  // The CPUs this host has online (cpulist, /sys/devices/system/cpu/online); "" = unknown. A
  // NUMA-aligned cpuset never names a CPU outside it: the topology devlet was given may describe
  // CPUs the kernel does not have, and runc fails writing such a cpuset.cpus.
  std::string online_cpus;
};

// PodRecord / ContainerRecord are devlet's bookkeeping of what the runtime runs.
struct PodRecord {
  std::string id;
  std::string uid;
  std::string namespace_name;
  std::string name;
  bool stopped = false;
};

struct ContainerRecord {
  std::string id;
  std::string pod_uid;
  std::string name;
  std::string cpus;  // cpuset devlet set ("" = untouched)
  std::string mems;
  int64_t cpu_millis = 0;          // CPU DRA allocated (its CPU limit and shares), 0 = none
  int64_t memory_limit_bytes = 0;  // memory DRA allocated (its memory limit), 0 = none
  bool stopped = false;
};

// DevletPlugin holds the handlers' state. Thread-safe.
class DevletPlugin {
 public:
  // `view` must outlive the plugin.
  DevletPlugin(const PreparedClaimsView* view, DevletPluginOptions options);

  // MakeHandlers returns Stub handlers bound to this object (subscribes to RunPodSandbox,
  // StopPodSandbox, RemovePodSandbox, CreateContainer, UpdateContainer, StopContainer,
  // RemoveContainer, plus Configure and Synchronize).
  Handlers MakeHandlers();

  // BuildAdjustment computes the CreateContainer adjustment for a container (no bookkeeping).
  // Fails when the container names a claim that cannot be read or resolved, or that devlet has
  // not prepared for the pod, or when devlet's own data is unusable (a device node that cannot
  // be resolved, a malformed cpuset, a malformed marker), naming the claim and the field.
  absl::StatusOr<api::ContainerAdjustment> BuildAdjustment(const api::PodSandbox& pod,
                                                           const api::Container& container) const;

  // Event entry points (what the handlers call).
  absl::Status Configure(const RuntimeInfo& runtime);
  absl::StatusOr<std::vector<api::ContainerUpdate>> Synchronize(
      const std::vector<api::PodSandbox>& pods, const std::vector<api::Container>& containers);
  absl::Status RunPodSandbox(const api::PodSandbox& pod);
  absl::Status StopPodSandbox(const api::PodSandbox& pod);
  absl::Status RemovePodSandbox(const api::PodSandbox& pod);
  absl::StatusOr<api::CreateContainerResponse> CreateContainer(const api::PodSandbox& pod,
                                                               const api::Container& container);
  absl::StatusOr<api::UpdateContainerResponse> UpdateContainer(
      const api::PodSandbox& pod, const api::Container& container,
      const api::LinuxResources& resources);
  absl::StatusOr<api::StopContainerResponse> StopContainer(const api::PodSandbox& pod,
                                                           const api::Container& container);
  absl::Status RemoveContainer(const api::PodSandbox& pod, const api::Container& container);

  // Bookkeeping accessors.
  std::optional<PodRecord> pod(const std::string& uid) const;
  std::optional<ContainerRecord> container(const std::string& id) const;
  size_t pod_count() const;
  size_t container_count() const;
  // effective_cdi_policy resolves kAuto against the configured runtime.
  CdiPolicy effective_cdi_policy() const;

 private:
  void RecordPod(const api::PodSandbox& pod);
  // Build is BuildAdjustment; a non-null `record` also receives what devlet owns (cpus, mems,
  // cpu_millis, memory_limit_bytes) before stricter limits of the container are considered.
  absl::StatusOr<api::ContainerAdjustment> Build(const api::PodSandbox& pod,
                                                 const api::Container& container,
                                                 ContainerRecord* record) const;

  const PreparedClaimsView* view_;
  DevletPluginOptions options_;

  mutable std::mutex mu_;
  std::optional<RuntimeInfo> runtime_;
  std::map<std::string, PodRecord> pods_;                 // by pod UID
  std::map<std::string, std::string> pod_uid_by_sandbox_;  // sandbox id -> pod UID
  std::map<std::string, ContainerRecord> containers_;      // by container id
};

// HasExclusiveCpus reports whether the kubelet's static CPU manager pinned the container to
// exclusive CPUs: a cpuset whose size equals its integral CPU limit (quota / period).
bool HasExclusiveCpus(const api::Container& container);

}  // namespace devlet::nri
