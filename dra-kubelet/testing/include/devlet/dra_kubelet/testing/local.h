// File: devlet/dra_kubelet/testing/local.h
//
// A stand-in for the device backend of interfaces.h, for this module's tests, the test server of
// the Go kubelet harness and benchmarks (test support, not part of the production library): a pool
// of simulated devices, also a HealthSource. Claims, CDI specs and the checkpoint go through the
// production adapters (devlet_adapters.h) in tests as in devlet-node.
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

}  // namespace devlet::dra_kubelet::testing
