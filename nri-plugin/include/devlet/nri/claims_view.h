// File: devlet/nri/claims_view.h
//
// The narrow view of node state the NRI plugin needs: for a pod UID, the ResourceClaims the node
// prepared for it, with each device's CDI names and resolved CDI edits, the device-metadata files
// to mount, the NUMA nodes, and CPU/memory that DRA allocated. Which of them a container gets is
// not here: the container's environment says it (state/container_marker.h). The node agent
// implements the view over its checkpointed state; InMemoryClaimsView serves tests and the
// standalone demo.
//
//   InMemoryClaimsView view;
//   view.Set("pod-uid", {claim});
//   DEVLET_ASSIGN_OR_RETURN(std::vector<PreparedClaim> claims, view.ClaimsForPod("pod-uid"));
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet::nri {

// CdiDeviceNode is a CDI containerEdits.deviceNodes entry. `type` "", major/minor < 0: resolved
// from the host node (host_path, else path) when the edit is applied.
struct CdiDeviceNode {
  std::string path;
  std::string host_path;
  std::string type;  // "c", "b", "u", "p" or ""
  int64_t major = -1;
  int64_t minor = -1;
  std::optional<uint32_t> file_mode;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
};

// CdiMount is a CDI containerEdits.mounts entry.
struct CdiMount {
  std::string host_path;
  std::string container_path;
  std::string type;
  std::vector<std::string> options;
};

// CdiHook is a CDI containerEdits.hooks entry; hook_name is the OCI hook stage
// ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop").
struct CdiHook {
  std::string hook_name;
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int64_t> timeout;
};

// CdiEdits is a CDI containerEdits block (already resolved: no spec lookups needed).
struct CdiEdits {
  std::vector<std::string> env;  // "KEY=value"
  std::vector<CdiDeviceNode> device_nodes;
  std::vector<CdiMount> mounts;
  std::vector<CdiHook> hooks;
};

// PreparedDevice is one allocated device of a claim as prepared on this node. A container gets
// it when its environment carries the device's marker (claim UID, pool, device, share ID).
struct PreparedDevice {
  std::string request;  // the claim request (or "request/subrequest") it satisfies
  std::string driver;
  std::string pool;
  std::string device;
  std::string share_id;                        // empty unless allocated with a share ID
  std::vector<std::string> cdi_device_names;  // fully qualified "vendor/class=name"
  CdiEdits edits;                              // the same devices as resolved edits
  std::vector<int> numa_nodes;                 // empty: no NUMA affinity
  // CPU (millicpus) and memory (bytes) that the allocation of this device consumed (a CPU
  // device's consumed capacity): limits of the containers that get the device.
  std::optional<int64_t> cpu_millis;
  std::optional<int64_t> memory_limit_bytes;
};

// FileMount is a host file bind-mounted read-only into containers (device metadata).
struct FileMount {
  std::string host_path;
  std::string container_path;
};

// PreparedClaim is one ResourceClaim prepared for a pod.
struct PreparedClaim {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::vector<PreparedDevice> devices;
  // Edits, metadata files, cpuset/mems and CPU/memory of the claim as a whole: given to every
  // container that gets at least one of its devices.
  CdiEdits claim_edits;  // e.g. common env
  std::vector<FileMount> metadata_mounts;
  std::string cpuset;  // CPUs DRA allocated exclusively to the claim (cpulist), "" = none
  std::string mems;    // memory nodes for those CPUs (cpulist), "" = derive from the topology
  std::optional<int64_t> memory_limit_bytes;  // memory DRA allocated, if any
  // CPU time DRA allocated, in millicpus (a shared-CPU quantity). Unset with a `cpuset`: the
  // claim counts as 1000 per allocated CPU. Becomes the container's CPU limit (CFS quota) and
  // weight (shares), so DRA-allocated CPU is enforced like a kubelet CPU request and limit.
  std::optional<int64_t> cpu_millis;
  // Non-empty: the claim is prepared but what it gives containers cannot be resolved now (e.g.
  // its CDI spec is unreadable); a container that names it fails with this message, others of
  // the pod are unaffected.
  std::string error;
};

// PodNetwork is a pod sandbox's network as the runtime reports it in RunPodSandbox, which runs
// after CNI set the network up and before any container starts.
struct PodNetwork {
  std::string pod_uid;
  std::string namespace_name;
  std::string name;
  std::vector<std::string> ips;  // PodSandbox.ips: the pod's addresses, as the runtime gives them
  std::string netns_path;        // the network namespace ("" when the pod uses the host's)
};

// PreparedClaimsView answers which claims are prepared for a pod, and learns the pod's network
// for them. Implementations are thread-safe; ClaimsForPod must be fast (it runs inside
// CreateContainer, and only for containers that name a claim).
class PreparedClaimsView {
 public:
  virtual ~PreparedClaimsView() = default;

  // ClaimsForPod returns the claims prepared for the pod with UID `pod_uid` (empty if none), or
  // an error when the node's prepared claims cannot be read at all (the container that named a
  // claim then fails to be created, and the runtime retries).
  virtual absl::StatusOr<std::vector<PreparedClaim>> ClaimsForPod(
      std::string_view pod_uid) const = 0;

  // ClaimsNamedByContainer returns the prepared claims among `claim_uids` (those a container
  // names through the CDI devices the kubelet gave it) that serve the pod `pod_uid`: prepared
  // for the pod, or for a PodGroup (KEP-5729; one claim for hundreds of pods, none of them in
  // its reservedFor: the kubelet checked the pod's group before it prepared the claim for it).
  // A UID that is neither is left out. Errors as ClaimsForPod. The default serves the pod's own
  // claims (ClaimsForPod).
  virtual absl::StatusOr<std::vector<PreparedClaim>> ClaimsNamedByContainer(
      std::string_view pod_uid, const std::vector<std::string>& claim_uids) const {
    (void)claim_uids;
    return ClaimsForPod(pod_uid);
  }

  // PodNetworkReady tells the node state the pod's network once it is set up, so that the
  // network devices of the pod's claims get their network data (KEP-5304 device metadata,
  // ResourceClaim status) before the first container is created. An error fails the
  // RunPodSandbox event. Const: the view forwards to the node state, it does not own it. The
  // default records nothing.
  virtual absl::Status PodNetworkReady(const PodNetwork& network) const {
    (void)network;
    return absl::OkStatus();
  }
};

// InMemoryClaimsView is a PreparedClaimsView backed by a map.
class InMemoryClaimsView final : public PreparedClaimsView {
 public:
  absl::StatusOr<std::vector<PreparedClaim>> ClaimsForPod(
      std::string_view pod_uid) const override;

  // Set replaces the claims of a pod.
  void Set(const std::string& pod_uid, std::vector<PreparedClaim> claims);
  // Remove forgets a pod.
  void Remove(const std::string& pod_uid);
  // pods returns how many pods have claims.
  size_t pods() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<PreparedClaim>, std::less<>> claims_;
};

// ParseClaimsJson reads `{"<pod uid>": [claim, ...], ...}` where a claim is
//   {"uid", "namespace", "name", "error", "devices": [
//     {"request", "driver", "pool", "device", "shareId", "cdiDevices": [], "numaNodes": [],
//      "cpuMillis", "memoryLimitBytes",
//      "edits": {"env": [], "deviceNodes": [{"path", "hostPath", "type", "major", "minor",
//                "fileMode", "uid", "gid"}], "mounts": [{"hostPath", "containerPath", "type",
//                "options"}], "hooks": [{"hookName", "path", "args", "env", "timeout"}]}}],
//    "edits": {...}, "metadataMounts": [{"hostPath", "containerPath"}],
//    "cpuset", "mems", "memoryLimitBytes", "cpuMillis"}
// (CDI spec spelling for the edits). Errors name the offending pod and field. A claim with
// "containers" is refused: containers name claims through their environment now.
absl::StatusOr<std::map<std::string, std::vector<PreparedClaim>>> ParseClaimsJson(
    std::string_view json);

}  // namespace devlet::nri
