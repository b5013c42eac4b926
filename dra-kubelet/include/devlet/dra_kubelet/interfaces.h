// File: devlet/dra_kubelet/interfaces.h
//
// The narrow interfaces claim preparation needs from the rest of devlet, so that the kubelet
// plugin can be built and tested on its own and each real implementation is a thin adapter:
//
//   ClaimSource      reads ResourceClaims (API client or manifest directory: kube/)
//   DeviceBackend    prepares and releases devices (devices/; testing/local.h for tests)
//   CdiWriter        writes transient CDI spec files (cdi/; testing/local.h for tests)
//   ClaimRecordStore the crash-safe prepared-claim record (state/; testing/local.h for tests)
//   HealthSource     device health for the KEP-4680 stream
//   ClaimStatusWriter  ResourceClaim status.devices (KEP-4817; kube/ API server or manifests)
//
// Implementations must be thread-safe: the plugin calls them from its worker threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/cdi/spec.h"
#include "devlet/common/status.h"
#include "devlet/dra_kubelet/claim.h"

namespace devlet::dra_kubelet {

// ---- Claims ------------------------------------------------------------------------------------

// ClaimSource fetches ResourceClaims. NotFound when the claim does not exist; any other error
// when the source cannot answer (the message names what failed).
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;

  // GetClaim returns the current claim `namespace_name/name`. `uid` is what the kubelet expects;
  // sources may use it (e.g. as a precondition) but the caller checks it again.
  virtual absl::StatusOr<ResourceClaim> GetClaim(const std::string& namespace_name,
                                                 const std::string& name,
                                                 const std::string& uid) = 0;
};

// ---- Device configuration (our driver's opaque parameters) --------------------------------------

// DeviceConfig is the decoded opaque configuration of devlet's driver
// (apiVersion "devlet.io/v1alpha1", kind "DeviceConfig"). See config.h for the wire form.
struct DeviceConfig {
  // Container environment variables; a later config entry overrides an earlier one per name.
  std::map<std::string, std::string> env;
  // Host-level: the kernel driver to bind the device to (e.g. "vfio-pci"). Honoured only from
  // DeviceClass configuration.
  std::optional<std::string> bind_driver;

  friend bool operator==(const DeviceConfig&, const DeviceConfig&) = default;
};

// ---- Container edits (what CDI injects) ---------------------------------------------------------

// DeviceNode is a device node to create in the container.
struct DeviceNode {
  std::string path;       // Path in the container.
  std::string host_path;  // Empty: same as `path`.
  std::string permissions;  // "rwm" style; empty: runtime default.

  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};

// Mount is a bind mount into the container.
struct Mount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;

  friend bool operator==(const Mount&, const Mount&) = default;
};

// ContainerEdits are the OCI edits for one device.
struct ContainerEdits {
  std::vector<std::string> env;  // "NAME=value"
  std::vector<DeviceNode> device_nodes;
  std::vector<Mount> mounts;

  friend bool operator==(const ContainerEdits&, const ContainerEdits&) = default;
};

// ToCdiEdits converts edits to the CDI spec model (cdi/).
cdi::ContainerEdits ToCdiEdits(const ContainerEdits& edits);

// VersionValue wraps a semantic-version attribute so it differs from a plain string.
struct VersionValue {
  std::string version;
  friend bool operator==(const VersionValue&, const VersionValue&) = default;
};

// AttributeValue is a ResourceSlice DeviceAttribute (int, bool, string or version).
using AttributeValue = std::variant<std::int64_t, bool, std::string, VersionValue>;

// ---- Devices --------------------------------------------------------------------------------

// DevicePrepareRequest asks the backend to prepare one allocated device for one claim.
struct DevicePrepareRequest {
  ClaimRef claim;
  std::string request;  // Full request name, "<request>[/<subrequest>]".
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;
  bool admin_access = false;
  DeviceConfig config;  // Merged class and claim configuration for this device.
  // The device was prepared for this claim in an earlier boot and the host rebooted since: what
  // that preparation did in the kernel (driver bindings, VFs, mediated devices) is gone and must
  // be set up again, although the backend's own records say it is done.
  bool after_reboot = false;
};

// NetworkData is what a network device looks like once configured (ResourceClaim
// status.devices[].networkData; also the KEP-5304 metadata's networkData).
struct NetworkData {
  std::string interface_name;          // <= 256 characters.
  std::vector<std::string> ips;        // CIDR notation ("10.0.0.5/24"), <= 16 entries.
  std::string hardware_address;        // MAC, <= 128 characters.

  friend bool operator==(const NetworkData&, const NetworkData&) = default;
};

// PreparedDevice is what the backend did and what the container needs.
struct PreparedDevice {
  ContainerEdits edits;
  // Attributes for the device-metadata file (KEP-5304), keyed by qualified name.
  std::map<std::string, AttributeValue> attributes;
  // Network configuration, when the backend knows it at prepare time (NICs).
  std::optional<NetworkData> network_data;
  // CDI devices from a vendor's own spec ("nvidia.com/gpu=0"), returned to the kubelet after the
  // device's own CDI device so that the runtime injects the vendor's edits (hooks included).
  std::vector<std::string> vendor_cdi_device_ids;
};

// DeviceUnprepareRequest asks the backend to release a device; it carries only what the
// checkpoint recorded (the claim may be gone).
struct DeviceUnprepareRequest {
  std::string claim_uid;
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;
  DeviceConfig config;  // The configuration applied at prepare.
};

// DeviceBackend prepares and releases devices. Both calls must be idempotent: the plugin repeats
// them after crashes. Errors are written for a person and name the device.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual absl::StatusOr<PreparedDevice> Prepare(const DevicePrepareRequest& request) = 0;
  virtual absl::Status Unprepare(const DeviceUnprepareRequest& request) = 0;

  // PreparedStateSurvivesReboot reports whether anything Prepare does to the host outlives a
  // reboot (power cut, kernel crash). When it does not (sysfs driver bindings, SR-IOV VF counts,
  // mediated devices, in-memory state: the kernel starts from scratch), the preparer need not
  // sync PrepareStarted before the side effects: a record lost with the power took the device
  // state with it. A backend that writes files or runs commands whose effects persist, or cannot
  // tell, answers true (the default: the record is synced first).
  [[nodiscard]] virtual bool PreparedStateSurvivesReboot() const { return true; }
};

// ---- CDI ------------------------------------------------------------------------------------

// CdiDevice is one device of a CDI spec.
struct CdiDevice {
  std::string name;
  ContainerEdits edits;
};

// CdiSpec is a transient CDI spec file.
struct CdiSpec {
  std::string cdi_version = "0.5.0";  // Device names that start with a digit need 0.5.0.
  std::string kind;                   // "<vendor>/<class>"
  std::vector<CdiDevice> devices;
};

// CdiWriter writes CDI spec files into the CDI root (e.g. /var/run/cdi). `file_name` is a base
// name ending in ".json".
class CdiWriter {
 public:
  virtual ~CdiWriter() = default;

  // WriteSpec writes `spec` atomically (a reader sees the old file or the new one).
  virtual absl::Status WriteSpec(const std::string& file_name, const CdiSpec& spec) = 0;
  // RemoveSpec removes the file; a missing file is success.
  virtual absl::Status RemoveSpec(const std::string& file_name) = 0;
  // SpecExists reports whether the file is present.
  virtual bool SpecExists(const std::string& file_name) = 0;
  // SpecIsCurrent reports whether the file holds exactly what WriteSpec(file_name, spec) writes.
  // Writers that skip fsync (specs are regenerated from the checkpoint) override it so a repeated
  // prepare also repairs a file a power loss left empty or stale; the default only checks presence.
  virtual bool SpecIsCurrent(const std::string& file_name, const CdiSpec& spec) {
    (void)spec;
    return SpecExists(file_name);
  }
  // ListSpecs returns the base names of the spec files in the CDI root, so that the preparer can
  // remove its own per-claim specs that no checkpoint record references (left by a power cut that
  // lost a deferred record). Unimplemented (the default): the writer cannot list; nothing is swept.
  virtual absl::StatusOr<std::vector<std::string>> ListSpecs() {
    return Unimplemented("this CDI writer cannot list its spec files");
  }
};

// ---- Checkpoint ------------------------------------------------------------------------------

// ClaimState is how far preparation of a claim got.
enum class ClaimState { kPrepareStarted, kPrepareCompleted };

// PreparedDeviceRecord is one prepared device in the checkpoint.
struct PreparedDeviceRecord {
  std::vector<std::string> requests;  // Full request names this device serves.
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;
  bool admin_access = false;
  DeviceConfig config;  // Applied configuration.
  PreparedDevice prepared;  // Edits and metadata attributes, to regenerate files.
  std::vector<std::string> cdi_device_ids;  // As returned to the kubelet.
  // The merged edits of every CDI device in cdi_device_ids (devlet's own, its metadata mount,
  // the vendor's), resolved when the files were written: what the NRI plugin gives a container
  // without reading any spec file. Unset before the files are written (and in records of an
  // older devlet until ClaimPreparer::RefreshFiles upgrades them).
  std::optional<cdi::ContainerEdits> container_edits;
  // The allocation's consumedCapacity "cpus" (millicpus) and "memory" (bytes) of this device.
  std::optional<std::int64_t> cpu_millis;
  std::optional<std::int64_t> memory_bytes;
};

// ClaimRecord is the checkpoint entry of one claim.
struct ClaimRecord {
  ClaimRef claim;
  ClaimState state = ClaimState::kPrepareStarted;
  std::optional<std::string> pod_claim_name;
  // status.reservedFor[].uid at prepare time: the pods the NRI side joins on.
  std::vector<std::string> pod_uids;
  // The PodGroups it is reserved for (KEP-5729): any of their pods' containers may name it.
  std::vector<std::string> pod_group_uids;
  std::vector<PreparedDeviceRecord> devices;
  std::vector<std::string> cdi_spec_files;  // Base names in the CDI root.
  std::vector<std::string> metadata_files;  // Absolute paths of device-metadata files.
  // metadata.generation of the claim's device-metadata files (KEP-5304): 1 when prepared, +1 on
  // every later change of their content (network data learnt at RunPodSandbox).
  std::int64_t metadata_generation = 1;
  // The boot (PreparerOptions::boot_id) in which the devices were last prepared; empty in
  // records of an older devlet. A repeated prepare in another boot prepares the devices again
  // (DevicePrepareRequest::after_reboot).
  std::string boot_id;
};

// ClaimRecordStore is the durable record of prepared claims, keyed by claim UID. Every Put and
// Delete is durable when it returns.
class ClaimRecordStore {
 public:
  virtual ~ClaimRecordStore() = default;

  virtual absl::StatusOr<std::optional<ClaimRecord>> Get(const std::string& claim_uid) = 0;
  virtual absl::Status Put(const ClaimRecord& record) = 0;
  // Delete removes the entry; a missing entry is success.
  virtual absl::Status Delete(const std::string& claim_uid) = 0;
  virtual absl::StatusOr<std::vector<ClaimRecord>> List() = 0;

  // Commit stores `puts` and removes `deletes` (group commit: the preparer batches the claims of
  // concurrent kubelet calls). Stores that can override it to make the whole change durable with
  // one write; the default applies the changes one by one, so on failure a prefix may be applied.
  virtual absl::Status Commit(const std::vector<ClaimRecord>& puts,
                              const std::vector<std::string>& deletes) {
    for (const ClaimRecord& record : puts) {
      if (absl::Status status = Put(record); !status.ok()) return status;
    }
    for (const std::string& uid : deletes) {
      if (absl::Status status = Delete(uid); !status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // CommitDeferred is Commit whose flush to stable storage may come after it returns: the change
  // is visible to every reader and survives the process being killed (it is in the page cache),
  // but a power cut or kernel crash before the flush may lose it. The preparer uses it for
  // PrepareStarted when the backend's device state does not survive a reboot either. Stores
  // without such a mode make the change durable (call Commit). Removals are never deferred. No
  // default: a wrapper that forgot to forward it would silently make every change durable.
  virtual absl::Status CommitDeferred(const std::vector<ClaimRecord>& puts,
                                      const std::vector<std::string>& deletes) = 0;
};

// ---- Health ---------------------------------------------------------------------------------

// HealthStatus mirrors the KEP-4680 enum.
enum class HealthStatus { kUnknown = 0, kHealthy = 1, kUnhealthy = 2 };

// DeviceHealth is one device in a health snapshot.
struct DeviceHealth {
  std::string pool;
  std::string device;
  HealthStatus health = HealthStatus::kUnknown;
  std::int64_t last_updated_unix = 0;
  std::int64_t timeout_seconds = 0;  // 0: the kubelet's default (30 s).
  std::string message;
};

// HealthSource reports device health. Snapshot must not block on hardware: return the last known
// state. A source calls the listener (from any thread) when health changed.
class HealthSource {
 public:
  virtual ~HealthSource() = default;

  virtual std::vector<DeviceHealth> HealthSnapshot() = 0;
  // SetHealthListener registers the change callback (replacing a previous one; empty clears it).
  virtual void SetHealthListener(std::function<void()> listener) = 0;
};

// ---- Claim status (KEP-4817) ------------------------------------------------------------------

// DeviceCondition is one metav1.Condition of status.devices[].conditions.
struct DeviceCondition {
  std::string type;     // e.g. "Ready"
  std::string status;   // "True", "False" or "Unknown"
  std::string reason;   // CamelCase, required by the API server
  std::string message;
  std::int64_t last_transition_unix = 0;  // 0: now

  friend bool operator==(const DeviceCondition&, const DeviceCondition&) = default;
};

// DeviceStatus is our driver's entry for one allocated device in status.devices.
struct DeviceStatus {
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;
  std::vector<DeviceCondition> conditions;  // <= 8, unique types
  std::string data;                         // a JSON object (<= 10 KiB) or empty
  std::optional<NetworkData> network_data;

  friend bool operator==(const DeviceStatus&, const DeviceStatus&) = default;
};

// ClaimStatusWriter publishes our driver's entries of a ResourceClaim's status.devices. Entries
// of other drivers are never touched.
class ClaimStatusWriter {
 public:
  virtual ~ClaimStatusWriter() = default;

  // SetDeviceStatus makes our driver's entries of the claim's status.devices exactly `devices`
  // (empty: removes them). The claim's UID is a precondition: a re-created claim of the same
  // name is not written (FailedPrecondition / Aborted). A claim that no longer exists is NotFound.
  virtual absl::Status SetDeviceStatus(const ClaimRef& claim,
                                       const std::vector<DeviceStatus>& devices) = 0;
};

}  // namespace devlet::dra_kubelet
