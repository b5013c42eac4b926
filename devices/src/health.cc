#include "devlet/devices/health.h"

#include <algorithm>
#include <sstream>

#include "devlet/common/status.h"

namespace devlet::devices {
namespace {

std::string Dev(const std::string& address) { return "bus/pci/devices/" + address; }

// Reads the TOTAL_ERR_* line of an aer_dev_* file; nullopt when absent.
std::optional<std::int64_t> AerTotal(const Sysfs& sysfs, const std::string& path) {
  auto content = sysfs.ReadFile(path);
  if (!content.ok()) return std::nullopt;
  std::istringstream lines(*content);
  std::string name;
  long long value = 0;
  while (lines >> name >> value) {
    if (name.rfind("TOTAL_ERR_", 0) == 0) return value;
  }
  return std::nullopt;
}

int Severity(std::string_view reason) {
  if (reason == kReasonDeviceRemoved) return 0;
  if (reason == kReasonNotResponding) return 0;
  if (reason == kReasonAerFatal) return 1;
  if (reason == kReasonLinkDown) return 2;
  if (reason == kReasonAerNonFatal) return 3;
  return 4;
}

std::string StringAttr(const DraDevice& device, const std::string& name) {
  auto it = device.attributes.find(name);
  if (it == device.attributes.end()) return "";
  const std::string* value = std::get_if<std::string>(&it->second);
  return value ? *value : "";
}

}  // namespace

std::string_view HealthStatusName(HealthStatus status) {
  switch (status) {
    case HealthStatus::kHealthy: return "Healthy";
    case HealthStatus::kUnhealthy: return "Unhealthy";
    case HealthStatus::kUnknown: return "Unknown";
  }
  return "Unknown";
}

std::optional<DeviceTaint> TaintFor(const HealthEvent& event, std::string_view domain) {
  if (event.status != HealthStatus::kUnhealthy) return std::nullopt;
  const bool evict = event.reason == kReasonDeviceRemoved || event.reason == kReasonNotResponding ||
                     event.reason == kReasonAerFatal;
  return DeviceTaint{.key = std::string(domain) + "/unhealthy",
                     .value = event.reason,
                     .effect = evict ? "NoExecute" : "NoSchedule"};
}

HealthMonitor::HealthMonitor(const Sysfs& sysfs, HealthOptions options)
    : sysfs_(sysfs), options_(options) {}

void HealthMonitor::CheckAer(const std::string& address, std::vector<std::string>& reasons,
                             std::vector<std::string>& details) {
  // Several DRA devices may share one PCI function (partitions): read its counters once per check.
  if (auto cached = aer_round_.find(address); cached != aer_round_.end()) {
    if (!cached->second.first.empty()) {
      reasons.push_back(cached->second.first);
      details.push_back(cached->second.second);
    }
    return;
  }
  auto& round = aer_round_[address];
  const std::string dev = Dev(address);
  auto fatal = AerTotal(sysfs_, dev + "/aer_dev_fatal");
  auto nonfatal = AerTotal(sysfs_, dev + "/aer_dev_nonfatal");
  auto correctable = AerTotal(sysfs_, dev + "/aer_dev_correctable");
  if (!fatal && !nonfatal && !correctable) return;  // no AER reporting on this device
  auto [it, first] = aer_.try_emplace(address);
  AerState& state = it->second;
  const std::int64_t f = fatal.value_or(0), n = nonfatal.value_or(0), c = correctable.value_or(0);
  if (first || f < state.fatal || n < state.nonfatal || c < state.correctable) {
    // Baseline, or the counters were reset (device reset or re-plugged).
    state = AerState{.fatal = f, .nonfatal = n, .correctable = c,
                     .reason = first ? "" : state.reason, .quiet_checks = state.quiet_checks};
    if (first) return;
  }
  std::string reason;
  std::string detail;
  if (f > state.fatal) {
    reason = std::string(kReasonAerFatal);
    detail = std::to_string(f - state.fatal) + " new fatal PCIe AER error(s) on " + address;
  } else if (n > state.nonfatal) {
    reason = std::string(kReasonAerNonFatal);
    detail = std::to_string(n - state.nonfatal) + " new non-fatal PCIe AER error(s) on " + address;
  } else if (options_.correctable_errors_threshold > 0 &&
             c - state.correctable >= options_.correctable_errors_threshold) {
    reason = std::string(kReasonAerNonFatal);
    detail = std::to_string(c - state.correctable) + " new correctable PCIe AER errors on " + address;
  }
  state.fatal = f;
  state.nonfatal = n;
  state.correctable = c;
  if (!reason.empty()) {
    // A fatal error is not downgraded by later non-fatal ones.
    if (state.reason.empty() || Severity(reason) <= Severity(state.reason)) state.reason = reason;
    state.quiet_checks = 0;
  } else if (!state.reason.empty() && ++state.quiet_checks >= options_.aer_recovery_checks) {
    state.reason.clear();
    state.quiet_checks = 0;
  }
  if (!state.reason.empty()) {
    round.first = state.reason;
    round.second = detail.empty() ? "recent PCIe AER errors on " + address + " (no new ones for " +
                                        std::to_string(state.quiet_checks) + " check(s))"
                                  : detail;
    reasons.push_back(round.first);
    details.push_back(round.second);
  }
}

HealthEvent HealthMonitor::Evaluate(const DraDevice& device) {
  HealthEvent event{.device = device.name, .pci_address = device.pci_address};
  // A VF that does not exist yet is as healthy as its PF.
  std::string address = device.pci_address;
  if (address.empty()) address = device.preparation.sriov_pf;
  event.pci_address = address;
  if (address.empty()) {  // CPU sets and other non-PCI devices
    event.status = HealthStatus::kHealthy;
    event.reason = std::string(kReasonHealthy);
    return event;
  }
  std::vector<std::string> reasons;
  std::vector<std::string> details;
  if (!sysfs_.Exists(Dev(address))) {
    reasons.push_back(std::string(kReasonDeviceRemoved));
    details.push_back("PCI device " + address + " is gone");
    aer_.erase(address);
  } else if (auto vendor = ReadTrimmed(sysfs_, Dev(address) + "/vendor"); !vendor.ok()) {
    // Present but unreadable: say so rather than guess (no taint for Unknown).
    event.status = HealthStatus::kUnknown;
    event.reason = std::string(kReasonUnknown);
    event.message = "cannot read the state of " + address + ": " + Message(vendor.status());
    if (event.message.size() > 1024) event.message = event.message.substr(0, 1021) + "...";
    return event;
  } else if (*vendor == "0xffff") {
    // Config reads return all ones once a device dropped off the bus (surprise link down, a
    // GPU that fell off the bus): it is there in sysfs but gone for any workload.
    reasons.push_back(std::string(kReasonNotResponding));
    details.push_back("PCI device " + address + " does not respond (config space reads 0xffff)");
  } else {
    CheckAer(address, reasons, details);
    // Link: the device's own netdev, or its PF's (VFs, and VFs bound to vfio-pci, follow the PF).
    std::string link_address = address;
    std::string pf = device.preparation.sriov_pf;
    if (pf.empty()) pf = StringAttr(device, "pfPciBusID");
    if (!pf.empty()) link_address = pf;
    if (!sysfs_.Exists(Dev(link_address))) {
      reasons.push_back(std::string(kReasonLinkDown));
      details.push_back("physical function " + link_address + " is gone");
    } else if (auto netdevs = sysfs_.ListDir(Dev(link_address) + "/net"); netdevs.ok()) {
      for (const std::string& netdev : *netdevs) {
        const std::string net = Dev(link_address) + "/net/" + netdev;
        auto state = ReadTrimmed(sysfs_, net + "/operstate");
        // `carrier` is unreadable while the interface is administratively down (EINVAL).
        auto carrier = ReadTrimmed(sysfs_, net + "/carrier");
        if (state.ok() && *state != "up" && *state != "unknown") {
          reasons.push_back(std::string(kReasonLinkDown));
          details.push_back("link of " + netdev + " (" + link_address + ") is " + *state);
        } else if (carrier.ok() && *carrier == "0") {
          reasons.push_back(std::string(kReasonLinkDown));
          details.push_back(netdev + " (" + link_address + ") has no carrier");
        }
      }
    }
    // RDMA ports: "4: ACTIVE" is up; DOWN, INIT, ARMED cannot carry traffic.
    if (sysfs_.Exists(Dev(link_address))) {
      const std::string ib = Dev(link_address) + "/infiniband";
      for (const std::string& rdma : sysfs_.ListDir(ib).value_or(std::vector<std::string>{})) {
        for (const std::string& port :
             sysfs_.ListDir(ib + "/" + rdma + "/ports").value_or(std::vector<std::string>{})) {
          auto state = ReadTrimmed(sysfs_, ib + "/" + rdma + "/ports/" + port + "/state");
          if (!state.ok()) continue;
          const size_t colon = state->find(':');
          std::string name = colon == std::string::npos ? *state : state->substr(colon + 1);
          name.erase(0, name.find_first_not_of(' '));
          if (name != "ACTIVE") {
            reasons.push_back(std::string(kReasonLinkDown));
            details.push_back("RDMA port " + rdma + "/" + port + " (" + link_address + ") is " +
                              name);
          }
        }
      }
    }
  }
  if (reasons.empty()) {
    event.status = HealthStatus::kHealthy;
    event.reason = std::string(kReasonHealthy);
    return event;
  }
  size_t worst = 0;
  for (size_t i = 1; i < reasons.size(); ++i) {
    if (Severity(reasons[i]) < Severity(reasons[worst])) worst = i;
  }
  event.status = HealthStatus::kUnhealthy;
  event.reason = reasons[worst];
  for (size_t i = 0; i < details.size(); ++i) {
    event.message += (i ? "; " : "") + details[i];
  }
  if (event.message.size() > 1024) event.message = event.message.substr(0, 1021) + "...";
  return event;
}

std::vector<HealthEvent> HealthMonitor::Check(const std::vector<DraDevice>& devices) {
  std::vector<HealthEvent> events;
  std::map<std::string, HealthEvent> next;
  aer_round_.clear();
  for (const DraDevice& device : devices) {
    HealthEvent event = Evaluate(device);
    auto old = current_.find(device.name);
    if (old == current_.end() || old->second.status != event.status ||
        old->second.reason != event.reason) {
      if (old != current_.end() && event.status == HealthStatus::kHealthy) {
        event.message = "recovered from " + old->second.reason;
      }
      events.push_back(event);
    } else {
      event.message = event.status == HealthStatus::kHealthy ? old->second.message : event.message;
    }
    next[device.name] = std::move(event);
  }
  current_ = std::move(next);
  return events;
}

std::vector<HealthEvent> HealthMonitor::Snapshot() const {
  std::vector<HealthEvent> out;
  for (const auto& [name, event] : current_) out.push_back(event);
  return out;
}

}  // namespace devlet::devices
