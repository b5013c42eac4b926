#include "devlet/dra_kubelet/testing/local.h"

#include <cctype>
#include <cstdio>

#include "devlet/common/status.h"

namespace devlet::dra_kubelet::testing {
namespace {

std::string DeviceKey(const std::string& pool, const std::string& device,
                      const std::optional<std::string>& share_id) {
  return pool + "/" + device + (share_id ? "/" + *share_id : "");
}

std::string EnvSuffix(const std::string& device) {
  std::string out;
  for (char c : device) {
    out.push_back(std::isalnum(static_cast<unsigned char>(c))
                      ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                      : '_');
  }
  return out;
}

}  // namespace

// ---- SimulatedBackend ------------------------------------------------------------------------------

SimulatedBackend::SimulatedBackend(std::string pool, std::vector<SimulatedDevice> devices)
    : pool_(std::move(pool)), devices_(std::move(devices)) {}

std::vector<SimulatedDevice> SimulatedBackend::Gpus(int count) {
  std::vector<SimulatedDevice> out;
  for (int i = 0; i < count; ++i) {
    SimulatedDevice device;
    device.name = "gpu-" + std::to_string(i);
    char bus[32];
    std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + i);
    char uuid[64];
    std::snprintf(uuid, sizeof(uuid), "gpu-00000000-0000-0000-0000-%012d", i);
    device.attributes["index"] = std::int64_t{i};
    device.attributes["uuid"] = std::string(uuid);
    device.attributes["model"] = std::string("devlet-sim");
    device.attributes["driverVersion"] = VersionValue{"1.0.0"};
    device.attributes["resource.kubernetes.io/pciBusID"] = std::string(bus);
    out.push_back(std::move(device));
  }
  return out;
}

absl::StatusOr<PreparedDevice> SimulatedBackend::Prepare(const DevicePrepareRequest& request) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(devices_.begin(), devices_.end(),
                         [&](const SimulatedDevice& d) { return d.name == request.device; });
  if (request.pool != pool_ || it == devices_.end()) {
    return NotFound("device " + request.pool + "/" + request.device + " does not exist on this node");
  }
  if (fail_devices_.count(request.device) > 0) {
    return Unavailable("device " + request.pool + "/" + request.device +
                       " could not be prepared (simulated failure)");
  }
  if (request.config.bind_driver && *request.config.bind_driver != "vfio-pci") {
    return InvalidArgument("device " + request.pool + "/" + request.device +
                           ": bindDriver \"" + *request.config.bind_driver +
                           "\" is not supported (supported: vfio-pci)");
  }
  const std::string key = DeviceKey(request.pool, request.device, request.share_id);
  auto [slot, inserted] = prepared_.emplace(key, request.claim.uid);
  if (!inserted && slot->second != request.claim.uid && !request.admin_access) {
    return FailedPrecondition("device " + key + " is already prepared for claim UID " +
                              slot->second);
  }
  if (inserted) ++prepare_calls_;
  PreparedDevice out;
  out.edits.env.push_back("DEVLET_DEVICE_" + EnvSuffix(request.device) + "=" + request.pool + "/" +
                          request.device);
  if (request.config.bind_driver) {
    out.edits.env.push_back("DEVLET_DEVICE_" + EnvSuffix(request.device) + "_DRIVER=" +
                            *request.config.bind_driver);
  }
  for (const auto& [name, value] : request.config.env) out.edits.env.push_back(name + "=" + value);
  out.attributes = it->attributes;
  return out;
}

absl::Status SimulatedBackend::Unprepare(const DeviceUnprepareRequest& request) {
  std::lock_guard lock(mutex_);
  auto it = prepared_.find(DeviceKey(request.pool, request.device, request.share_id));
  if (it != prepared_.end() && it->second == request.claim_uid) prepared_.erase(it);
  return absl::OkStatus();
}

std::vector<DeviceHealth> SimulatedBackend::HealthSnapshot() {
  std::lock_guard lock(mutex_);
  std::vector<DeviceHealth> out;
  const std::int64_t now = static_cast<std::int64_t>(::time(nullptr));
  for (const SimulatedDevice& device : devices_) {
    out.push_back({pool_, device.name, device.health, now, 0, device.health_message});
  }
  return out;
}

void SimulatedBackend::SetHealthListener(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void SimulatedBackend::SetHealth(const std::string& device, HealthStatus health,
                                 const std::string& message) {
  std::function<void()> listener;
  {
    std::lock_guard lock(mutex_);
    for (SimulatedDevice& d : devices_) {
      if (d.name == device) {
        d.health = health;
        d.health_message = message;
      }
    }
    listener = listener_;
  }
  if (listener) listener();
}

void SimulatedBackend::FailDevice(const std::string& device, bool fail) {
  std::lock_guard lock(mutex_);
  if (fail) {
    fail_devices_.insert(device);
  } else {
    fail_devices_.erase(device);
  }
}

std::map<std::string, std::string> SimulatedBackend::PreparedDevices() const {
  std::lock_guard lock(mutex_);
  return prepared_;
}

}  // namespace devlet::dra_kubelet::testing
