// File: devlet/node/adapters.h
//
// The interfaces of the two plugins implemented on devlet's own modules, as devlet-node wires them:
//
//   StoreClaimSource      dra_kubelet::ClaimSource over a kube::ObjectStore (API server or
//                         manifest directory)
//   DevicesBackend        dra_kubelet::DeviceBackend over devices/: the node's current DeviceSet,
//                         preparation actions (vfio-pci binding, SR-IOV VFs, admin commands) and
//                         the device nodes each device needs
//   CheckpointClaimsView  nri::PreparedClaimsView over the state/ checkpoint the kubelet plugin
//                         writes: the two plugins meet only there
//
//   StoreClaimSource claims(store);
//   DevicesBackend backend({.pool = node_name, .sysfs = sysfs.get(), .journal_dir = dir});
//   backend.SetDevices(device_set);
//   CheckpointClaimsView view(checkpoint->store());
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "devlet/devices/actions.h"
#include "devlet/devices/dra_device.h"
#include "devlet/devices/sysfs.h"
#include "devlet/dra_kubelet/interfaces.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/kube/client.h"
#include "devlet/nri/claims_view.h"
#include "devlet/state/store.h"

namespace devlet::node {

// StoreClaimSource reads claims from an ObjectStore and converts them with
// dra_kubelet::ResourceClaimFromKube.
class StoreClaimSource final : public dra_kubelet::ClaimSource {
 public:
  explicit StoreClaimSource(kube::ObjectStore& store) : store_(store) {}

  absl::StatusOr<dra_kubelet::ResourceClaim> GetClaim(const std::string& namespace_name,
                                                      const std::string& name,
                                                      const std::string& uid) override;

 private:
  kube::ObjectStore& store_;
};

// kMdevUuidAttribute is the device-metadata attribute of a prepared mediated device: its UUID,
// which KubeVirt looks for before pciBusID (unqualified; not yet a standard name).
inline constexpr std::string_view kMdevUuidAttribute = "mdevUUID";

// DevicesBackendOptions configures a DevicesBackend.
struct DevicesBackendOptions {
  // The node's pool (the node name): requests for other pools are refused.
  std::string pool;
  // The sysfs the devices live in (not owned; must outlive the backend). nullptr: no device nodes
  // and no hardware actions (CPU-only or fully simulated nodes).
  devices::Sysfs* sysfs = nullptr;
  // Where the preparation journal of each prepared device lives (created 0700): the records
  // needed to undo its actions after a crash. Required when `sysfs` is set.
  std::string journal_dir;
  devices::PreparerOptions preparer;
  // Where the host's device nodes are: empty or "/" for a real machine; a simulated node (or a
  // containerized driver install) keeps them below another directory. Containers still see the
  // nodes at their /dev paths: CDI edits carry `hostPath` under this root.
  std::string dev_root;
  // Directories of vendor CDI specs (lowest priority first) that profiles' cdiDevices resolve in
  // (cdi::ResolveVendorDevices); a prepare whose vendor devices do not resolve fails, naming the
  // spec file or device.
  std::vector<std::string> vendor_cdi_dirs = {"/etc/cdi", "/var/run/cdi"};
};

// DevicesBackend prepares the node's devices. Prepare looks the device up in the current set,
// runs its preparation (vfio-pci when the profile or the DeviceClass config asks for it, SR-IOV
// VFs, a mediated device, init command), journaling every step to `<journal_dir>/<claim uid>_<device>.json` before it
// is done, and returns the container edits: the device nodes of the function as bound now plus
// DEVLET_DEVICE_<NAME>=<pool>/<device> and the configured environment. A mediated device gets
// no node of its parent: its attributes carry mdevUUID (and no pciBusID, which would name the
// parent), and its own vfio group node when sysfs shows one. Unprepare undoes the
// journaled actions in reverse order and removes the journal. Both are idempotent.
class DevicesBackend final : public dra_kubelet::DeviceBackend {
 public:
  explicit DevicesBackend(DevicesBackendOptions options);

  // SetDevices replaces the current device set (after a rescan).
  void SetDevices(devices::DeviceSet set);

  absl::StatusOr<dra_kubelet::PreparedDevice> Prepare(
      const dra_kubelet::DevicePrepareRequest& request) override;
  absl::Status Unprepare(const dra_kubelet::DeviceUnprepareRequest& request) override;

 private:
  std::string JournalPath(const std::string& claim_uid, const std::string& device) const;

  DevicesBackendOptions options_;
  std::unique_ptr<devices::Preparer> preparer_;
  mutable std::mutex mu_;
  devices::DeviceSet set_;
};

// CheckpointClaimsView answers the NRI plugin from the state/ checkpoint alone: the claims
// recorded as PrepareCompleted for a pod, each device with its CDI device IDs, the container
// edits recorded when it was prepared (state::PreparedDevice::edits: no CDI spec is read and no
// claim fetched on the container path), and its NUMA node (attribute
// resource.kubernetes.io/numaNode). A checkpoint that cannot be read is an error; a claim with a
// device whose edits are not recorded comes back with PreparedClaim::error naming the device
// (fail closed: a container naming the claim is not created; one that does not name it is
// unaffected).
//
// DRA-allocated CPU and memory: a CPU device's (attribute type=cpu) recorded consumed capacity
// ("cpus", "memory") becomes its cpu_millis and memory_limit_bytes (the NRI plugin turns them
// into CFS quota, shares and a memory limit of the containers that get the device; its numaNode
// aligns the cpuset).
//
// Network data (KEP-5304 deferred metadata): at RunPodSandbox, for each claim prepared for that
// pod alone, every network device (attribute type nic or vf) with a netdev on the host gets
// networkData: interfaceName and hardwareAddress of the function's netdev as sysfs shows it now
// (a VF created at prepare has one only then; a function bound to vfio-pci has none and is
// skipped: a VM reads its pciBusID), falling back to the discovered interface/mac attributes,
// and ips: the pod's addresses the runtime reports after CNI (PodSandbox.ips), as host-prefix
// CIDRs (/32, /128: NRI gives bare addresses). devlet does not move netdevs into the pod's
// network namespace. The updater (ClaimPreparer::UpdateNetworkData in devlet-node) records it
// and rewrites the claim's metadata files and ResourceClaim status. A claim shared by several
// pods gets none: the addresses of one pod would be wrong for the others.
class CheckpointClaimsView final : public nri::PreparedClaimsView {
 public:
  // NetworkUpdater records network data of devices of a prepared claim.
  using NetworkUpdater = std::function<absl::Status(
      const std::string& claim_uid, const std::vector<dra_kubelet::DeviceNetworkUpdate>& updates)>;

  // `store` must outlive the view.
  explicit CheckpointClaimsView(state::CheckpointStore& store);

  // SetNetworkUpdater enables network data at RunPodSandbox; `sysfs` (not owned, may be null:
  // the discovered attributes only) is read for each function's netdev. Call before NRI starts.
  void SetNetworkUpdater(NetworkUpdater updater, const devices::Sysfs* sysfs);

  // SetKubeletSizesDraResources: the devices publish their KEP-5517 mapping
  // (DRANodeAllocatableResources), so the kubelet adds the claim's CPU and memory to the pod's
  // cgroups and to the limits of the containers naming it; the view then reports no cpu_millis /
  // memory_limit_bytes, so that the NRI plugin does not size those limits a second time (and
  // never below the kubelet's). The NUMA alignment stays. Call before NRI starts.
  void SetKubeletSizesDraResources(bool on) { kubelet_sizes_dra_resources_ = on; }

  absl::StatusOr<std::vector<nri::PreparedClaim>> ClaimsForPod(
      std::string_view pod_uid) const override;
  // ClaimsNamedByContainer reads the named claims in one read of the checkpoint
  // (state::CheckpointStore::FindForContainer).
  absl::StatusOr<std::vector<nri::PreparedClaim>> ClaimsNamedByContainer(
      std::string_view pod_uid, const std::vector<std::string>& claim_uids) const override;
  absl::Status PodNetworkReady(const nri::PodNetwork& network) const override;

 private:
  nri::PreparedClaim ToNriClaim(const state::PreparedClaim& claim) const;
  // ToNriClaims converts the completed claims of a checkpoint read (its error, with context).
  absl::StatusOr<std::vector<nri::PreparedClaim>> ToNriClaims(
      const absl::StatusOr<std::vector<state::PreparedClaim>>& claims) const;

  state::CheckpointStore& store_;
  NetworkUpdater network_updater_;
  const devices::Sysfs* sysfs_ = nullptr;
  bool kubelet_sizes_dra_resources_ = false;
};

// PodIpToCidr turns an address the runtime reports for a pod ("10.244.1.7", "fd00::7", or
// already "10.244.1.0/24") into the CIDR form of networkData.ips ("10.244.1.7/32", "fd00::7/128");
// InvalidArgument for anything else.
absl::StatusOr<std::string> PodIpToCidr(std::string_view ip);

}  // namespace devlet::node
