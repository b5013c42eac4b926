// File: devlet/dra_kubelet/preparer.h
//
// ClaimPreparer is the version-independent core of NodePrepareResources and
// NodeUnprepareResources; the v1 and v1beta1 gRPC services are thin translations onto it.
//
// Prepare, per claim: fetch it, check allocation, UID, driver and node, take our driver's results,
// resolve opaque configuration, record PrepareStarted, prepare every device through the backend,
// write the per-claim CDI spec (and, when enabled, the KEP-5304 device-metadata files and their
// CDI specs), record PrepareCompleted. A repeated prepare of a completed claim rewrites missing
// or stale files from the checkpoint and returns the same devices. Unprepare works from the
// checkpoint alone; unknown claims succeed. Errors are per claim and written for a person.
//
// Group commit: claims are fetched by the calling thread, then queued; one caller at a time takes
// everything queued as a batch and makes each checkpoint step (PrepareStarted, PrepareCompleted)
// one durable write for the whole batch, so N concurrent kubelet calls cost two checkpoint
// writes, not 2N. Callers that find a batch running return at once (PrepareAsync) and get their
// answer from the thread that runs the next batch.
//
// With a ClaimStatusWriter the preparer publishes Ready=True (and networkData) for each device
// of a newly prepared claim in ResourceClaim status.devices, and clears our entries after an
// unprepare. Writes run on their own thread in commit order, outside the preparer's lock, and are
// best effort: a failure is logged and never fails the kubelet's call.
//
//   ClaimPreparer preparer(options, claims, backend, cdi, checkpoint);
//   std::map<std::string, PrepareResult> results = preparer.Prepare(refs);
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "devlet/dra_kubelet/claim.h"
#include "devlet/dra_kubelet/interfaces.h"

namespace devlet::dra_kubelet {

// PreparerOptions configures claim preparation.
struct PreparerOptions {
  std::string driver_name;
  // When set, a claim allocated to another node (allocation node selector) is refused.
  std::string node_name;
  // The plugin data directory (<plugins dir>/<driver>); holds device-metadata files.
  std::string plugin_data_dir;
  // KEP-5304 device metadata (--enable-device-metadata).
  bool enable_device_metadata = false;
  // When non-empty, every prepare and unprepare also holds flock() on this file (rolling update:
  // two plugin instances share the checkpoint).
  std::string serialize_lock_path;
  // ResourceClaim status.devices (KEP-4817); null: not published. Must outlive the preparer.
  ClaimStatusWriter* status_writer = nullptr;
  // Where vendor CDI devices (PreparedDevice::vendor_cdi_device_ids) resolve, lowest priority
  // first, when a device's container edits are recorded (the backend checked them at prepare).
  std::vector<std::string> vendor_cdi_dirs = {"/etc/cdi", "/var/run/cdi"};
  // This boot of the host (devlet-node reads /proc/sys/kernel/random/boot_id). A claim prepared
  // in another boot has its devices prepared again at the kubelet's next prepare, before it
  // answers (DevicePrepareRequest::after_reboot: the backend redoes what the reboot undid, such
  // as vfio bindings, VF counts and mediated devices), so no container starts on devices that
  // lost their set-up. Empty: reboots are not detected.
  std::string boot_id;
};

// kReadyConditionType is the condition the preparer sets on every prepared device.
inline constexpr std::string_view kReadyConditionType = "Ready";

// ReadyDeviceStatuses returns one entry per device of `record`: condition Ready=True (reason
// "Prepared") and the device's network data, if any. `now_unix` stamps lastTransitionTime.
std::vector<DeviceStatus> ReadyDeviceStatuses(const ClaimRecord& record, std::int64_t now_unix);

// PreparedClaimDevice is one device of a prepared claim as the kubelet sees it.
struct PreparedClaimDevice {
  std::vector<std::string> request_names;  // Subrequest suffixes stripped.
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
  std::optional<std::string> share_id;

  friend bool operator==(const PreparedClaimDevice&, const PreparedClaimDevice&) = default;
};

// PrepareResult is the outcome for one claim: devices, or a non-empty error.
struct PrepareResult {
  std::vector<PreparedClaimDevice> devices;
  std::string error;
};

// DeviceNetworkUpdate is the network configuration of one prepared device of a claim, learnt once
// the pod's network is set up (NRI RunPodSandbox, after CNI).
struct DeviceNetworkUpdate {
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;
  NetworkData network_data;
};

// PrepareDone receives the results of PrepareAsync.
using PrepareDone = std::function<void(std::map<std::string, PrepareResult>)>;

// ClaimPreparer implements prepare and unprepare. Thread-safe; batches run one at a time (claims
// are fetched before, in the calling thread).
class ClaimPreparer {
 public:
  // The dependencies must outlive the preparer.
  ClaimPreparer(PreparerOptions options, ClaimSource& claims, DeviceBackend& backend,
                CdiWriter& cdi, ClaimRecordStore& checkpoint);
  // Waits for queued status writes that are already running; drops the rest (logged).
  ~ClaimPreparer();
  ClaimPreparer(const ClaimPreparer&) = delete;
  ClaimPreparer& operator=(const ClaimPreparer&) = delete;

  // Prepare returns one entry per distinct claim UID in `refs`.
  std::map<std::string, PrepareResult> Prepare(const std::vector<ClaimRef>& refs);

  // PrepareAsync fetches the claims in this thread, queues them for the next batch and calls
  // `done` (from this or another caller's thread) with one entry per distinct claim UID. It returns
  // at once when another thread runs batches; otherwise this thread runs batches until the queue
  // is empty.
  void PrepareAsync(const std::vector<ClaimRef>& refs, PrepareDone done);

  // Unprepare returns one entry per distinct claim UID: empty on success, else the error.
  std::map<std::string, std::string> Unprepare(const std::vector<ClaimRef>& refs);

  // UpdateNetworkData records the network data of devices of the prepared claim `claim_uid`
  // (KEP-5304 deferred metadata, the Go helper's UpdateRequestMetadata): the checkpoint record
  // first, then the claim's device-metadata files are rewritten from it (atomically, metadata
  // generation + 1, so a repeated prepare regenerates the same content) and, with a status
  // writer, status.devices[].networkData is published. Devices not in `updates` keep theirs.
  // Unchanged data writes nothing. NotFound when the claim is not prepared here (unprepared
  // meanwhile), FailedPrecondition when its preparation is not complete, InvalidArgument for a
  // device the claim does not have.
  absl::Status UpdateNetworkData(const std::string& claim_uid,
                                 const std::vector<DeviceNetworkUpdate>& updates);

  // RemoveOrphanedFiles removes this driver's per-claim files that no checkpoint record
  // references: per-claim CDI specs (`k8s.<driver>-claim_<uid>.json`, `<driver>_metadata_<uid>_
  // <request>.json`, uid a UUID) in the CDI root and `metadata.json` files (and then empty
  // directories) under `<plugin data dir>/dra-device-metadata/<ns>_<claim>/<request>/`. Such
  // files are left when a power cut loses a PrepareStarted record that was not synced (see
  // PreparedStateSurvivesReboot); other files are never touched. Each removal is logged. Runs
  // under the preparer's locks (also the rolling-update lock), so a twin's claim being prepared
  // is in the checkpoint before its files exist. KubeletPlugin::Start calls it. Returns how many
  // files were removed; an error when the checkpoint or a directory cannot be read.
  absl::StatusOr<int> RemoveOrphanedFiles();

  // RefreshFiles rewrites the files of every PrepareCompleted claim that differ from what this
  // version renders from the record (EnsureFiles), e.g. CDI specs of an older devlet without the
  // container markers (state/container_marker.h): a container created or restarted after an
  // upgrade then gets what this version's NRI plugin reads. KubeletPlugin::Start calls it under
  // the same locks as RemoveOrphanedFiles; an error names the claim. Records of an older devlet
  // without container edits are upgraded in one commit: their edits resolved (vendor devices in
  // PreparerOptions::vendor_cdi_dirs) and, for claims with CPU devices, the allocation's CPU and
  // memory read once from the ClaimSource.
  absl::Status RefreshFiles();

  // WaitForStatusWrites blocks until every status write queued so far has been attempted.
  void WaitForStatusWrites();

  // CdiKind returns "k8s.<driver>/claim", the kind of per-claim specs.
  [[nodiscard]] std::string CdiKind() const;
  // ClaimSpecFileName returns the per-claim CDI spec base name for `claim_uid`.
  [[nodiscard]] std::string ClaimSpecFileName(const std::string& claim_uid) const;

 private:
  struct Pending;
  struct Work;
  struct StatusUpdate {
    ClaimRef claim;
    std::vector<DeviceStatus> devices;  // empty: clear our entries
  };

  struct Batch;

  // RunBatch prepares the claims of the kubelet calls queued together, in the steps below:
  // CollectWork, LoadCheckpoint, PlanAll, RecordStarted (with ReleaseDroppedDevices),
  // PrepareAll, RecordCompleted, then the status queue, Deliver and LogBatch.
  void RunBatch(std::vector<std::unique_ptr<Pending>>& calls);
  static Batch CollectWork(const std::vector<std::unique_ptr<Pending>>& calls);
  static void Deliver(const Batch& batch, std::vector<std::unique_ptr<Pending>>& calls);
  absl::StatusOr<std::map<std::string, ClaimRecord>> LoadCheckpoint();
  void PlanAll(Batch& batch, const std::map<std::string, ClaimRecord>& checkpoint);
  absl::Status ReleaseDroppedDevices(Work& work);
  void RecordStarted(Batch& batch);
  void PrepareAll(Batch& batch, std::vector<ClaimRecord>& completed,
                  std::vector<std::string>& rolled_back);
  void RecordCompleted(Batch& batch, std::vector<ClaimRecord>& completed,
                       const std::vector<std::string>& rolled_back);
  static void LogBatch(const Batch& batch, std::chrono::steady_clock::time_point start);
  absl::Status Plan(Work& work, const std::map<std::string, ClaimRecord>& checkpoint,
                    const std::vector<const ClaimRecord*>& planned);
  absl::Status PrepareDevices(ClaimRecord& record, bool after_reboot = false);
  // PreparedInAnotherBoot: `record`'s devices were prepared before a reboot (see boot_id).
  bool PreparedInAnotherBoot(const ClaimRecord& record) const;
  bool RollBack(const ClaimRecord& record);  // true when everything was undone
  absl::Status WriteFiles(ClaimRecord& record);
  absl::Status EnsureFiles(const ClaimRecord& record);
  // AddConsumedCapacity fills the CPU/memory of `record`'s CPU devices from the current claim.
  void AddConsumedCapacity(ClaimRecord& record);
  absl::Status RemoveFiles(const ClaimRecord& record);
  void QueueStatus(StatusUpdate update);  // call with mutex_ held: keeps commit order
  void RunStatusWriter();

  PreparerOptions options_;
  ClaimSource& claims_;
  DeviceBackend& backend_;
  CdiWriter& cdi_;
  ClaimRecordStore& checkpoint_;
  std::mutex mutex_;  // Serializes batches and unprepare.

  std::mutex queue_mutex_;  // Guards queue_ and committing_.
  std::vector<std::unique_ptr<Pending>> queue_;
  bool committing_ = false;  // A thread is running batches.

  std::mutex status_mutex_;  // Guards the status queue.
  std::condition_variable status_cv_;
  std::deque<StatusUpdate> status_queue_;
  bool status_busy_ = false;
  bool status_stop_ = false;
  std::thread status_thread_;
};

}  // namespace devlet::dra_kubelet
