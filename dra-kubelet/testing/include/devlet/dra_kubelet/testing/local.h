// File: devlet/dra_kubelet/testing/local.h
//
// Self-contained stand-ins for the interfaces in interfaces.h, for this module's tests, the test
// server of the Go kubelet harness and benchmarks; devlet-node uses the kube/, devices/, cdi/ and
// state/ modules instead (test support, not part of the production library):
//
//   FileClaimSource      ResourceClaims from *.json files in a directory (re-read on each call)
//   SimulatedBackend     a pool of simulated devices; also a HealthSource
//   JsonCdiWriter        CDI spec files written atomically into a CDI root
//   FileClaimRecordStore  a versioned, checksummed JSON checkpoint written atomically
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "devlet/dra_kubelet/interfaces.h"

namespace devlet::dra_kubelet::testing {

// FileClaimSource reads every *.json file of `dir` on each call. A file holds one ResourceClaim or
// a List of them. Files that do not parse are reported only when nothing else matches.
class FileClaimSource final : public ClaimSource {
 public:
  explicit FileClaimSource(std::string dir);

  absl::StatusOr<ResourceClaim> GetClaim(const std::string& namespace_name,
                                         const std::string& name,
                                         const std::string& uid) override;

 private:
  std::string dir_;
};

// SimulatedDevice is one device of a SimulatedBackend.
struct SimulatedDevice {
  std::string name;
  std::map<std::string, AttributeValue> attributes;
  HealthStatus health = HealthStatus::kHealthy;
  std::string health_message;
};

// SimulatedBackend prepares devices of one pool in memory. Prepare fails for unknown devices, for
// devices in `fail_devices`, and for a bindDriver other than "vfio-pci". Edits: one environment
// variable per device (DEVLET_DEVICE_<NAME>=<pool>/<device>) plus the configured env.
class SimulatedBackend final : public DeviceBackend, public HealthSource {
 public:
  SimulatedBackend(std::string pool, std::vector<SimulatedDevice> devices);

  // Gpus returns `count` devices gpu-0 ... with index, uuid, model, driverVersion and
  // resource.kubernetes.io/pciBusID attributes.
  static std::vector<SimulatedDevice> Gpus(int count);

  absl::StatusOr<PreparedDevice> Prepare(const DevicePrepareRequest& request) override;
  absl::Status Unprepare(const DeviceUnprepareRequest& request) override;
  // The simulated devices live in this process's memory: nothing survives a reboot.
  [[nodiscard]] bool PreparedStateSurvivesReboot() const override { return false; }

  std::vector<DeviceHealth> HealthSnapshot() override;
  void SetHealthListener(std::function<void()> listener) override;

  // SetHealth changes a device's health and notifies the listener.
  void SetHealth(const std::string& device, HealthStatus health, const std::string& message);
  // FailDevice makes Prepare of `device` fail (tests).
  void FailDevice(const std::string& device, bool fail);
  // PreparedDevices returns "<pool>/<device>[/<share>]" -> claim UID for what is prepared now.
  std::map<std::string, std::string> PreparedDevices() const;
  // PrepareCalls counts Prepare calls that did work (not idempotent repeats).
  std::int64_t PrepareCalls() const { return prepare_calls_.load(); }

 private:
  const std::string pool_;
  mutable std::mutex mutex_;
  std::vector<SimulatedDevice> devices_;
  std::set<std::string> fail_devices_;
  std::map<std::string, std::string> prepared_;
  std::function<void()> listener_;
  std::atomic<std::int64_t> prepare_calls_{0};
};

// JsonCdiWriter writes CDI specs as JSON files in `cdi_root` (created 0755 when missing) with a
// temp file, fsync and rename, so runtimes never read a partial spec.
class JsonCdiWriter final : public CdiWriter {
 public:
  explicit JsonCdiWriter(std::string cdi_root);

  absl::Status WriteSpec(const std::string& file_name, const CdiSpec& spec) override;
  absl::Status RemoveSpec(const std::string& file_name) override;
  bool SpecExists(const std::string& file_name) override;
  // ListSpecs lists the ".json" files of the CDI root (a missing root is empty).
  absl::StatusOr<std::vector<std::string>> ListSpecs() override;
  bool SpecIsCurrent(const std::string& file_name, const CdiSpec& spec) override;

  // RenderSpec returns the JSON text WriteSpec writes.
  static std::string RenderSpec(const CdiSpec& spec);

 private:
  std::string root_;
};

// FileClaimRecordStore keeps every ClaimRecord in one JSON file
// {"version": "devlet.io/dra-checkpoint/v1", "checksum": "<sha256 of data>", "data": {...}},
// re-read on every call (no cross-call memory: safe with two plugin instances under flock) and
// rewritten atomically (temp file, fsync, rename, fsync directory). A file with a bad checksum
// or an unknown version is an error, never silently reset.
class FileClaimRecordStore final : public ClaimRecordStore {
 public:
  explicit FileClaimRecordStore(std::string path);

  absl::StatusOr<std::optional<ClaimRecord>> Get(const std::string& claim_uid) override;
  absl::Status Put(const ClaimRecord& record) override;
  absl::Status Delete(const std::string& claim_uid) override;
  absl::StatusOr<std::vector<ClaimRecord>> List() override;
  // Commit rewrites the file once for the whole batch.
  absl::Status Commit(const std::vector<ClaimRecord>& puts,
                      const std::vector<std::string>& deletes) override;
  // CommitDeferred is Commit: the file has no deferred mode.
  absl::Status CommitDeferred(const std::vector<ClaimRecord>& puts,
                              const std::vector<std::string>& deletes) override {
    return Commit(puts, deletes);
  }

 private:
  absl::StatusOr<std::map<std::string, ClaimRecord>> Load();
  absl::Status Save(const std::map<std::string, ClaimRecord>& records);

  std::string path_;
  std::mutex mutex_;
};

}  // namespace devlet::dra_kubelet::testing
