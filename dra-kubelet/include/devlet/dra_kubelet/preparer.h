// File: devlet/dra_kubelet/preparer.h
//
// ClaimPreparer is the version-independent core of NodePrepareResources and
// NodeUnprepareResources; the v1 and v1beta1 gRPC services are thin translations onto it.
//
// Prepare, per claim: fetch it, check allocation, UID, driver and node, take our driver's results,
// resolve opaque configuration, record PrepareStarted, prepare every device through the backend,
// write the per-claim CDI spec (and, when enabled, the KEP-5304 device-metadata files and their
// CDI specs), record PrepareCompleted. A repeated prepare of a completed claim rewrites missing
// files from the checkpoint and returns the same devices. Unprepare works from the checkpoint
// alone; unknown claims succeed. Errors are per claim and written for a person.
//
//   ClaimPreparer preparer(options, claims, backend, cdi, checkpoint);
//   std::map<std::string, PrepareResult> results = preparer.Prepare(refs);
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
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
};

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

// ClaimPreparer implements prepare and unprepare. Thread-safe; calls are serialized internally
// (claims are fetched before taking the lock).
class ClaimPreparer {
 public:
  // The dependencies must outlive the preparer.
  ClaimPreparer(PreparerOptions options, ClaimSource& claims, DeviceBackend& backend,
                CdiWriter& cdi, CheckpointStore& checkpoint);

  // Prepare returns one entry per distinct claim UID in `refs`.
  std::map<std::string, PrepareResult> Prepare(const std::vector<ClaimRef>& refs);

  // Unprepare returns one entry per distinct claim UID: empty on success, else the error.
  std::map<std::string, std::string> Unprepare(const std::vector<ClaimRef>& refs);

  // CdiKind returns "k8s.<driver>/claim", the kind of per-claim specs.
  [[nodiscard]] std::string CdiKind() const;
  // ClaimSpecFileName returns the per-claim CDI spec base name for `claim_uid`.
  [[nodiscard]] std::string ClaimSpecFileName(const std::string& claim_uid) const;

 private:
  absl::StatusOr<std::vector<PreparedClaimDevice>> PrepareOne(const ClaimRef& ref,
                                                              const ResourceClaim& claim);
  absl::Status UnprepareOne(const ClaimRef& ref);
  absl::Status WriteFiles(ClaimRecord& record);
  absl::Status EnsureFiles(const ClaimRecord& record);
  absl::Status RemoveFiles(const ClaimRecord& record);

  PreparerOptions options_;
  ClaimSource& claims_;
  DeviceBackend& backend_;
  CdiWriter& cdi_;
  CheckpointStore& checkpoint_;
  std::mutex mutex_;  // Serializes prepare and unprepare.
};

}  // namespace devlet::dra_kubelet
