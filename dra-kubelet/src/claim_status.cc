#include "devlet/dra_kubelet/claim_status.h"

#include <arpa/inet.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "devlet/common/status.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/resource.h"
#include "devlet/kube/rest_client.h"

namespace devlet::dra_kubelet {
namespace {

using nlohmann::ordered_json;

std::string Rfc3339(std::int64_t unix_seconds) {
  if (unix_seconds == 0) unix_seconds = static_cast<std::int64_t>(::time(nullptr));
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

bool IsCidr(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash + 1 >= text.size()) return false;
  const std::string address = text.substr(0, slash);
  const std::string bits = text.substr(slash + 1);
  if (bits.size() > 3 || !std::all_of(bits.begin(), bits.end(), ::isdigit)) return false;
  const int prefix = std::stoi(bits);
  unsigned char buffer[16];
  if (::inet_pton(AF_INET, address.c_str(), buffer) == 1) return prefix <= 32;
  if (::inet_pton(AF_INET6, address.c_str(), buffer) == 1) return prefix <= 128;
  return false;
}

std::string DeviceName(const DeviceStatus& status) {
  return status.pool + "/" + status.device + (status.share_id ? " (share " + *status.share_id + ")"
                                                              : std::string());
}

kube::AllocatedDeviceStatus ToKube(const std::string& driver, const DeviceStatus& in) {
  kube::AllocatedDeviceStatus out;
  out.driver = driver;
  out.pool = in.pool;
  out.device = in.device;
  out.share_id = in.share_id;
  for (const DeviceCondition& c : in.conditions) {
    kube::Condition condition;
    condition.type = c.type;
    condition.status = c.status;
    condition.reason = c.reason;
    condition.message = c.message;
    condition.last_transition_time = Rfc3339(c.last_transition_unix);
    out.conditions.push_back(std::move(condition));
  }
  if (!in.data.empty()) out.data.json = in.data;
  if (in.network_data) {
    out.network_data = kube::NetworkDeviceData{in.network_data->interface_name,
                                               in.network_data->ips,
                                               in.network_data->hardware_address};
  }
  return out;
}

bool SameEntry(const kube::AllocatedDeviceStatus& entry, const std::string& driver,
               const DeviceStatus& status) {
  return entry.driver == driver && entry.pool == status.pool && entry.device == status.device &&
         entry.share_id == status.share_id;
}

}  // namespace

absl::Status ValidateDeviceStatus(const DeviceStatus& status) {
  const std::string who = "status of device " + DeviceName(status);
  if (status.pool.empty() || status.device.empty()) {
    return InvalidArgument(who + ": pool and device are required");
  }
  if (status.conditions.size() > static_cast<std::size_t>(kube::kAllocatedDeviceStatusMaxConditions)) {
    return InvalidArgument(who + ": " + std::to_string(status.conditions.size()) +
                           " conditions, at most " +
                           std::to_string(kube::kAllocatedDeviceStatusMaxConditions) + " allowed");
  }
  std::set<std::string> types;
  for (const DeviceCondition& condition : status.conditions) {
    if (condition.type.empty()) return InvalidArgument(who + ": a condition has no type");
    if (!types.insert(condition.type).second) {
      return InvalidArgument(who + ": condition type \"" + condition.type + "\" appears twice");
    }
    if (condition.status != "True" && condition.status != "False" &&
        condition.status != "Unknown") {
      return InvalidArgument(who + ": condition \"" + condition.type + "\" has status \"" +
                             condition.status + "\" (want True, False or Unknown)");
    }
    if (condition.reason.empty()) {
      return InvalidArgument(who + ": condition \"" + condition.type + "\" has no reason");
    }
  }
  if (!status.data.empty()) {
    if (status.data.size() > static_cast<std::size_t>(kube::kAllocatedDeviceStatusDataMaxLength)) {
      return InvalidArgument(who + ": data is " + std::to_string(status.data.size()) +
                             " bytes, at most " +
                             std::to_string(kube::kAllocatedDeviceStatusDataMaxLength) +
                             " allowed");
    }
    const nlohmann::json data =
        nlohmann::json::parse(status.data, nullptr, /*allow_exceptions=*/false);
    if (!data.is_object()) return InvalidArgument(who + ": data is not a JSON object");
  }
  if (const auto& net = status.network_data) {
    if (net->interface_name.size() >
        static_cast<std::size_t>(kube::kNetworkDeviceDataInterfaceNameMaxLength)) {
      return InvalidArgument(who + ": networkData.interfaceName is longer than " +
                             std::to_string(kube::kNetworkDeviceDataInterfaceNameMaxLength));
    }
    if (net->hardware_address.size() >
        static_cast<std::size_t>(kube::kNetworkDeviceDataHardwareAddressMaxLength)) {
      return InvalidArgument(who + ": networkData.hardwareAddress is longer than " +
                             std::to_string(kube::kNetworkDeviceDataHardwareAddressMaxLength));
    }
    if (net->ips.size() > static_cast<std::size_t>(kube::kNetworkDeviceDataMaxIPs)) {
      return InvalidArgument(who + ": networkData has " + std::to_string(net->ips.size()) +
                             " ips, at most " + std::to_string(kube::kNetworkDeviceDataMaxIPs));
    }
    std::set<std::string> seen;
    for (const std::string& ip : net->ips) {
      if (!IsCidr(ip)) {
        return InvalidArgument(who + ": networkData.ips entry \"" + ip +
                               "\" is not an address in CIDR notation (e.g. 10.0.0.5/24)");
      }
      if (!seen.insert(ip).second) {
        return InvalidArgument(who + ": networkData.ips has \"" + ip + "\" twice");
      }
    }
  }
  return absl::OkStatus();
}

std::string DeviceStatusApplyConfiguration(const std::string& driver, const ClaimRef& claim,
                                           const std::vector<DeviceStatus>& devices) {
  ordered_json entries = ordered_json::array();
  for (const DeviceStatus& device : devices) {
    // The codec's encoding of the typed entry is the API's JSON form of AllocatedDeviceStatus.
    kube::ResourceClaim holder;
    holder.status.devices.push_back(ToKube(driver, device));
    ordered_json encoded = ordered_json::parse(kube::EncodeJson(holder));
    entries.push_back(encoded["status"]["devices"][0]);
  }
  ordered_json doc;
  doc["apiVersion"] = "resource.k8s.io/v1";
  doc["kind"] = "ResourceClaim";
  doc["metadata"] = {{"name", claim.name}, {"namespace", claim.namespace_name}};
  if (!claim.uid.empty()) doc["metadata"]["uid"] = claim.uid;
  // Without entries the configuration owns no status.devices fields, so server-side apply
  // removes the entries this field manager owned and leaves other drivers' alone.
  doc["status"] = ordered_json::object();
  if (!entries.empty()) doc["status"]["devices"] = std::move(entries);
  return doc.dump();
}

KubeClaimStatusWriter::KubeClaimStatusWriter(kube::ObjectStore& store, std::string driver)
    : store_(store), driver_(std::move(driver)) {}

bool KubeClaimStatusWriter::UsesServerSideApply() const {
  return dynamic_cast<kube::ApiServerStore*>(&store_) != nullptr;
}

absl::Status KubeClaimStatusWriter::SetDeviceStatus(const ClaimRef& claim,
                                                    const std::vector<DeviceStatus>& devices) {
  const std::string who = "ResourceClaim " + claim.Display();
  for (const DeviceStatus& device : devices) {
    DEVLET_RETURN_IF_ERROR(WithContext(ValidateDeviceStatus(device), who));
  }
  auto* api = dynamic_cast<kube::ApiServerStore*>(&store_);
  if (api == nullptr) return ReadModifyWrite(claim, devices);
  kube::PatchOptions options;
  options.field_manager = driver_;
  options.force = true;  // As the upstream drivers: our entries are ours, whoever touched them.
  options.subresource = "status";
  absl::StatusOr<kube::Object> applied =
      api->Patch(kube::Kind::kResourceClaim, {claim.namespace_name, claim.name},
                 DeviceStatusApplyConfiguration(driver_, claim, devices), kube::PatchType::kApply,
                 options);
  return WithContext(applied.status(), "writing status.devices of " + who);
}

absl::Status KubeClaimStatusWriter::ReadModifyWrite(const ClaimRef& claim,
                                                    const std::vector<DeviceStatus>& devices) {
  const std::string who = "ResourceClaim " + claim.Display();
  constexpr int kAttempts = 5;
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<kube::ResourceClaim> current =
        kube::GetAs<kube::ResourceClaim>(store_, claim.namespace_name, claim.name);
    if (!current.ok()) return WithContext(current.status(), "reading " + who);
    if (!claim.uid.empty() && current->metadata.uid != claim.uid) {
      return FailedPrecondition(who + " has UID " + current->metadata.uid + ", not " + claim.uid +
                                ": it was re-created; its status is not ours to write");
    }
    if (!devices.empty() && !current->status.allocation) {
      return FailedPrecondition(who + " is not allocated: status.devices needs an allocation");
    }
    for (const DeviceStatus& device : devices) {
      const auto& results = current->status.allocation->devices.results;
      const bool allocated = std::any_of(results.begin(), results.end(), [&](const auto& r) {
        return r.driver == driver_ && r.pool == device.pool && r.device == device.device &&
               r.share_id == device.share_id;
      });
      if (!allocated) {
        return FailedPrecondition(who + ": device " + DeviceName(device) +
                                  " of driver " + driver_ + " is not in the allocation");
      }
    }
    std::vector<kube::AllocatedDeviceStatus> next;
    for (const kube::AllocatedDeviceStatus& entry : current->status.devices) {
      if (entry.driver != driver_) next.push_back(entry);
    }
    for (const DeviceStatus& device : devices) {
      kube::AllocatedDeviceStatus entry = ToKube(driver_, device);
      // Keep lastTransitionTime of a condition whose status did not change (metav1 semantics).
      for (const kube::AllocatedDeviceStatus& old : current->status.devices) {
        if (!SameEntry(old, driver_, device)) continue;
        for (kube::Condition& condition : entry.conditions) {
          for (const kube::Condition& before : old.conditions) {
            if (before.type == condition.type && before.status == condition.status) {
              condition.last_transition_time = before.last_transition_time;
            }
          }
        }
      }
      next.push_back(std::move(entry));
    }
    if (next == current->status.devices) return absl::OkStatus();  // Nothing to write.
    current->status.devices = std::move(next);
    absl::StatusOr<kube::Object> written = store_.UpdateStatus(*current);
    if (written.ok()) return absl::OkStatus();
    last = written.status();
    if (last.code() != absl::StatusCode::kAborted) break;  // Only conflicts are retried.
  }
  return WithContext(last, "writing status.devices of " + who);
}

}  // namespace devlet::dra_kubelet
