// File: devlet/node/agent.h
//
// Agent is devlet-node: one process wiring device discovery, ResourceSlice publishing, the DRA
// kubelet plugin and the NRI plugin around one node state (the state/ checkpoint).
//
// Start, in order:
//   1. discovery (hwloc + sysfs, or a simulated machine: --topology-xml / --sysfs-root) and the
//      device profiles → the node's DeviceSet;
//   2. ResourceSlices published through the ObjectStore (API server or manifest directory);
//   3. the checkpoint opened (CDI specs of claims it no longer knows are removed), the kubelet
//      plugin started: DRA socket, then the registration socket;
//   4. the NRI plugin, once the kubelet has confirmed registration (NotifyRegistrationStatus),
//      through the runtime's socket (--nri-socket) or the pre-launched socket the runtime passed
//      in NRI_PLUGIN_SOCKET;
//   5. a devices::DeviceWatcher that rescans on kernel uevents (debounced) and every
//      rescan_interval, republishing only when the devices changed; and a control loop that
//      checks device health (unhealthy devices get a taint in the published slices and
//      Unhealthy in the kubelet's health stream; recovery removes both) and repairs our slices
//      when they were changed or deleted behind our back (a watch on them wakes the loop at
//      once: the kubelet wipes a node's slices when it starts). With wait_for_node, slices are
//      published once the Node object exists, and owned by it.
// Preparation actions are journaled per claim and device under state_dir/preparation; VFs that
// devlet created are tracked in state_dir/sriov-ledger and removed with their last user.
// Stop, in order: the device watcher, the control loop and the slice watch, the kubelet plugin
// (registration socket removed first, then the DRA socket), the NRI plugin. Slices stay
// published (the kubelet removes them when the driver deregisters; a restart republishes the
// same generation).
//
// Metrics (metrics.h names): per-device prepare/unprepare counts and latency, NRI event counts and
// latency, devices by health, slice generation and publishes, registration and NRI connection,
// prepared claims.
//
//   DEVLET_ASSIGN_OR_RETURN(std::unique_ptr<Agent> agent, Agent::Start(options, store));
//   ... wait for SIGTERM ...
//   agent->Stop();
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/devices/inventory.h"
#include "devlet/devices/profile.h"
#include "devlet/devices/sysfs.h"
#include "devlet/devices/watcher.h"
#include "devlet/kube/client.h"
#include "devlet/node/metrics.h"
#include "devlet/node/slices.h"
#include "devlet/nri/devlet_plugin.h"

namespace devlet::node {

// AgentOptions are devlet-node's settings (DESIGN.md §5).
struct AgentOptions {
  std::string node_name;
  std::string driver_name = "devlet.io";
  std::string cdi_root = "/var/run/cdi";
  std::string registrar_dir = "/var/lib/kubelet/plugins_registry";
  std::string plugins_dir = "/var/lib/kubelet/plugins";
  // The checkpoint and preparation journals; empty: <plugins_dir>/<driver_name>.
  std::string state_dir;
  // POD_UID: rolling-update socket names.
  std::string pod_uid;
  // Simulated hardware.
  std::string sysfs_root = "/sys";
  // The sysfs devlet acts through (not owned; it must show sysfs_root's tree); nullptr: files
  // under sysfs_root. Tests pass a simulated kernel (devices::testing::FakeSysfs), whose writes
  // bind drivers and create VFs and mdevs as the kernel's do.
  devices::Sysfs* sysfs = nullptr;
  std::string topology_xml;
  // Directory that holds the host's device nodes (DevicesBackendOptions::dev_root); "/" normally.
  std::string dev_root = "/";
  // Device profiles (YAML, devices/profile.h); empty: devices::DefaultProfileConfig().
  std::string profiles_file;
  bool enable_device_metadata = true;
  // Write each prepared claim's status.devices (Ready condition, KEP-4817) through the store:
  // server-side apply against an API server, read-modify-write in the manifest directory.
  bool publish_claim_status = true;
  // NRI: the runtime's socket; empty disables NRI unless NRI_PLUGIN_SOCKET is set (pre-launched).
  std::string nri_socket = "/var/run/nri/nri.sock";
  std::string nri_plugin_name = "devlet";
  std::string nri_plugin_index = "10";
  nri::CdiPolicy cdi_policy = nri::CdiPolicy::kAuto;
  // Start NRI only after the kubelet confirmed registration (as dranet does). Off: at once.
  bool nri_after_registration = true;
  // How often to rescan the hardware and check the published slices; 0 disables.
  std::chrono::milliseconds rescan_interval{std::chrono::seconds(30)};
  // How often to check device health (needs sysfs); 0 disables health monitoring, and then the
  // kubelet's health service answers Unimplemented.
  std::chrono::milliseconds health_interval{std::chrono::seconds(5)};
  // Publish only once the Node object exists and own the slices by it (API server mode).
  bool wait_for_node = false;
  // Watch our ResourceSlices and repair them as soon as they change (off: only at rescans).
  bool watch_slices = true;
  // Kernel uevents that trigger a rescan (hot-plug, driver binding), not owned; tests and
  // simulated nodes pass a devices::ManualUeventSource. nullptr: the kernel's netlink socket on
  // a real machine (sysfs_root /sys without a topology XML), else periodic rescans only.
  devices::UeventSource* uevent_source = nullptr;
  // --feature-gates: what the slices carry (and, with DRANodeAllocatableResources, who sizes the
  // CPU/memory limits of DRA-allocated CPUs: the kubelet).
  PublishFeatures features;
  // Vendor CDI spec directories for profiles' cdiDevices (lowest priority first).
  std::vector<std::string> vendor_cdi_dirs = {"/etc/cdi", "/var/run/cdi"};
  // --boot-id-file: this boot's identity (dra_kubelet::PreparerOptions::boot_id): a claim
  // prepared in another boot has its vfio bindings, VFs and mdevs set up again at the kubelet's
  // next prepare. Start fails when it cannot be read; empty: reboots are not detected.
  std::string boot_id_file = "/proc/sys/kernel/random/boot_id";
};

// AgentStatus is a snapshot for logs, the health endpoint and tests.
struct AgentStatus {
  int devices = 0;
  std::int64_t slice_generation = 0;
  int slices = 0;
  bool kubelet_registered = false;
  std::string registration_error;
  bool nri_started = false;
  bool nri_connected = false;
  std::string dra_socket;
  std::string registrar_socket;
  // wait_for_node: whether the Node object was found (slices are published only then).
  bool node_found = false;
  // Devices the health monitor holds unhealthy (each has a taint in the published slices).
  int unhealthy_devices = 0;
};

// Agent runs devlet-node. Thread-safe.
class Agent {
 public:
  // Start performs steps 1-3 before returning (errors name the step) and starts the threads of
  // steps 4-5. `store` must outlive the agent.
  static absl::StatusOr<std::unique_ptr<Agent>> Start(AgentOptions options,
                                                      kube::ObjectStore& store);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Stop shuts down in order (see the file comment). Idempotent.
  void Stop();

  AgentStatus Status() const;
  // Healthy: the kubelet plugin is serving and, when NRI is on and started, connected.
  bool Healthy() const;

  // MetricsText renders the agent's metrics in the Prometheus text format (for /metrics).
  std::string MetricsText();
  // metrics returns the registry (tests read values from it).
  MetricsRegistry& metrics();

  // CheckHealthNow runs one health check and republishes when health changed (tests; the control
  // loop does this every health_interval). Returns the number of unhealthy devices.
  int CheckHealthNow();

  class Impl;

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// NumaCpuLists returns, per NUMA node of the inventory, its CPUs as a cpulist ("0-7,16-23").
std::map<int, std::string> NumaCpuLists(const devices::CpuTopology& cpu);

}  // namespace devlet::node
