// File: devlet/devices/health.h
//
// Device health from sysfs: a device whose PCI function disappeared or stopped answering config
// reads (vendor reads 0xffff), a NIC whose link went down (netdev operstate down, or carrier 0, or
// an RDMA port not ACTIVE; VFs follow their PF's link), and PCIe AER error counters that grew
// become unhealthy; a device whose state cannot be read is Unknown; recovery (device back, link
// up, no new AER errors for a few checks) makes them healthy again. Events feed
// both device taints on the published ResourceSlices and the kubelet's resource-health stream
// (DRAResourceHealth NodeWatchResources, which wants complete snapshots re-sent periodically).
//
//   HealthMonitor monitor(sysfs);
//   every 5s: for (const HealthEvent& e : monitor.Check(rescanner.devices().devices)) { ... }
//             stream.Send(monitor.Snapshot());
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "devlet/devices/dra_device.h"
#include "devlet/devices/sysfs.h"

namespace devlet::devices {

// HealthStatus has the kubelet's HealthStatus values (UNKNOWN = 0, HEALTHY = 1, UNHEALTHY = 2).
enum class HealthStatus { kUnknown = 0, kHealthy = 1, kUnhealthy = 2 };

// HealthStatusName returns "Unknown", "Healthy" or "Unhealthy".
std::string_view HealthStatusName(HealthStatus status);

// Reasons, most severe first.
inline constexpr std::string_view kReasonDeviceRemoved = "DeviceRemoved";
inline constexpr std::string_view kReasonNotResponding = "DeviceNotResponding";
inline constexpr std::string_view kReasonAerFatal = "AERFatalError";
inline constexpr std::string_view kReasonLinkDown = "LinkDown";
inline constexpr std::string_view kReasonAerNonFatal = "AERNonFatalError";
inline constexpr std::string_view kReasonHealthy = "Healthy";
inline constexpr std::string_view kReasonUnknown = "Unknown";  // with HealthStatus::kUnknown

// HealthEvent is one device's health.
struct HealthEvent {
  std::string device;       // DRA device name
  std::string pci_address;  // the function checked ("" for CPU devices)
  HealthStatus status = HealthStatus::kUnknown;
  std::string reason;   // the most severe reason, or kReasonHealthy
  std::string message;  // for people; at most 1024 characters
  bool operator==(const HealthEvent&) const = default;
};

// DeviceTaint is a resource.k8s.io/v1 device taint.
struct DeviceTaint {
  std::string key;
  std::string value;
  std::string effect;  // "NoSchedule" or "NoExecute"
  bool operator==(const DeviceTaint&) const = default;
};

// TaintFor returns the taint for an unhealthy device, `<domain>/unhealthy=<reason>`: NoExecute for
// a removed or non-responding device or a fatal AER error (running workloads are evicted),
// NoSchedule for a link down or non-fatal AER errors. Healthy and Unknown devices get none (an
// unreadable attribute is no reason to evict). The node agent puts it on the device in the
// ResourceSlice (DeviceTaint with timeAdded) and removes it when the device recovers.
std::optional<DeviceTaint> TaintFor(const HealthEvent& event, std::string_view domain);

// HealthOptions tunes the checks.
struct HealthOptions {
  // Consecutive checks without new AER errors before an AER-unhealthy device is healthy again.
  int aer_recovery_checks = 3;
  // Correctable AER errors added within one check that make a device unhealthy (0: never).
  std::int64_t correctable_errors_threshold = 0;
};

// HealthMonitor checks devices against sysfs. Not thread-safe.
class HealthMonitor {
 public:
  explicit HealthMonitor(const Sysfs& sysfs, HealthOptions options = {});

  // Check reads the state of `devices` and returns an event for every device whose status or
  // reason changed since the previous check (the first check reports every device). Devices no
  // longer listed are forgotten. AER counters found at the first look are the baseline.
  std::vector<HealthEvent> Check(const std::vector<DraDevice>& devices);

  // Snapshot returns the current health of every device of the last check, by device name.
  std::vector<HealthEvent> Snapshot() const;

 private:
  struct AerState {
    std::int64_t fatal = 0;
    std::int64_t nonfatal = 0;
    std::int64_t correctable = 0;
    std::string reason;  // set while unhealthy
    int quiet_checks = 0;
  };
  HealthEvent Evaluate(const DraDevice& device);
  void CheckAer(const std::string& address, std::vector<std::string>& reasons,
                std::vector<std::string>& details);

  const Sysfs& sysfs_;
  HealthOptions options_;
  std::map<std::string, AerState> aer_;  // by PCI address
  // This check's AER verdict per PCI address: (reason, detail), reason "" when healthy.
  std::map<std::string, std::pair<std::string, std::string>> aer_round_;
  std::map<std::string, HealthEvent> current_;
};

}  // namespace devlet::devices
