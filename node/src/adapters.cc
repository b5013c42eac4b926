#include "devlet/node/adapters.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "devlet/cdi/codec.h"
#include "devlet/cdi/spec_dir.h"
#include "devlet/cdi/vendor.h"
#include "devlet/common/files.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/common/strings.h"
#include "devlet/devices/device_nodes.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/kube/quantity.h"
#include "nlohmann/json.hpp"

namespace devlet::node {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- Action journal (JSON) ---------------------------------------------------------------------

json ActionToJson(const devices::ActionRecord& r) {
  json j = {{"kind", std::string(devices::ActionKindName(r.kind))},
            {"device", r.device},
            {"noop", r.noop},
            {"originalDriver", r.original_driver},
            {"originalOverride", r.original_override},
            {"previousNumVfs", r.previous_num_vfs},
            {"numVfs", r.num_vfs},
            {"previousAutoprobe", r.previous_autoprobe},
            {"holder", r.holder},
            {"mdevType", r.mdev_type},
            {"mdevUuid", r.mdev_uuid},
            {"env", r.env}};
  if (r.cleanup) j["cleanup"] = {{"argv", r.cleanup->argv}, {"timeoutMs", r.cleanup->timeout_ms}};
  return j;
}

absl::StatusOr<devices::ActionRecord> ActionFromJson(const json& j) {
  devices::ActionRecord r;
  try {
    std::string kind = j.at("kind").get<std::string>();
    if (kind == "vfio-bind") {
      r.kind = devices::ActionKind::kVfioBind;
    } else if (kind == "sriov-numvfs") {
      r.kind = devices::ActionKind::kSriovNumVfs;
    } else if (kind == "command") {
      r.kind = devices::ActionKind::kCommand;
    } else if (kind == "mdev") {
      r.kind = devices::ActionKind::kMdev;
    } else {
      return InvalidArgument("unknown action kind \"" + kind + "\"");
    }
    r.device = j.at("device").get<std::string>();
    r.noop = j.value("noop", false);
    r.original_driver = j.value("originalDriver", "");
    r.original_override = j.value("originalOverride", "");
    r.previous_num_vfs = j.value("previousNumVfs", 0);
    r.num_vfs = j.value("numVfs", 0);
    r.previous_autoprobe = j.value("previousAutoprobe", -1);
    r.holder = j.value("holder", "");
    r.mdev_type = j.value("mdevType", "");
    r.mdev_uuid = j.value("mdevUuid", "");
    if (r.kind == devices::ActionKind::kMdev && r.mdev_uuid.empty()) {
      return InvalidArgument("mdev action record for " + r.device + " has no mdevUuid");
    }
    r.env = j.value("env", std::map<std::string, std::string>());
    if (j.contains("cleanup")) {
      devices::CommandLine cleanup;
      cleanup.argv = j["cleanup"].at("argv").get<std::vector<std::string>>();
      cleanup.timeout_ms = j["cleanup"].value("timeoutMs", 30000);
      r.cleanup = cleanup;
    }
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed action record: ") + e.what());
  }
  return r;
}

absl::Status WriteJournal(const std::string& path, const std::vector<devices::ActionRecord>& records) {
  json list = json::array();
  for (const devices::ActionRecord& r : records) list.push_back(ActionToJson(r));
  return WithContext(WriteFileAtomically(path, list.dump() + "\n", 0600),
                     "write preparation journal");
}

absl::StatusOr<std::vector<devices::ActionRecord>> ReadJournal(const std::string& path) {
  DEVLET_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadFileIfExists(path));
  if (!text) return std::vector<devices::ActionRecord>();
  json list = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return absl::DataLossError("preparation journal " + path + " is not a JSON list");
  std::vector<devices::ActionRecord> records;
  for (const json& j : list) {
    DEVLET_ASSIGN_OR_RETURN(devices::ActionRecord r, ActionFromJson(j));
    records.push_back(std::move(r));
  }
  return records;
}

std::string EnvName(std::string_view device) {
  std::string out = "DEVLET_DEVICE_";
  for (char c : device) {
    out.push_back(std::isalnum(static_cast<unsigned char>(c))
                      ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                      : '_');
  }
  return out;
}

dra_kubelet::AttributeValue ToPluginAttribute(const devices::AttributeValue& value) {
  return std::visit(
      [](const auto& v) -> dra_kubelet::AttributeValue {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, devices::SemVer>) {
          return dra_kubelet::VersionValue{v.value};
        } else {
          return v;
        }
      },
      value);
}

nri::CdiEdits ToNriEdits(const cdi::ContainerEdits& in) {
  nri::CdiEdits out;
  out.env = in.env;
  for (const cdi::DeviceNode& n : in.device_nodes) {
    nri::CdiDeviceNode d;
    d.path = n.path;
    d.host_path = n.host_path;
    d.type = n.type;
    d.major = n.major == 0 && n.minor == 0 ? -1 : n.major;
    d.minor = n.major == 0 && n.minor == 0 ? -1 : n.minor;
    d.file_mode = n.file_mode;
    d.uid = n.uid;
    d.gid = n.gid;
    out.device_nodes.push_back(std::move(d));
  }
  for (const cdi::Mount& m : in.mounts) {
    out.mounts.push_back({m.host_path, m.container_path, m.type, m.options});
  }
  for (const cdi::Hook& h : in.hooks) {
    nri::CdiHook hook{h.hook_name, h.path, h.args, h.env, std::nullopt};
    if (h.timeout) hook.timeout = *h.timeout;
    out.hooks.push_back(std::move(hook));
  }
  return out;
}

}  // namespace

// ---- StoreClaimSource ----------------------------------------------------------------------------

absl::StatusOr<dra_kubelet::ResourceClaim> StoreClaimSource::GetClaim(
    const std::string& namespace_name, const std::string& name, const std::string& /*uid*/) {
  DEVLET_ASSIGN_OR_RETURN(kube::ResourceClaim claim,
                          kube::GetAs<kube::ResourceClaim>(store_, namespace_name, name));
  return dra_kubelet::ResourceClaimFromKube(claim);
}

// ---- DevicesBackend -------------------------------------------------------------------------------

DevicesBackend::DevicesBackend(DevicesBackendOptions options) : options_(std::move(options)) {
  if (options_.sysfs != nullptr) {
    preparer_ = std::make_unique<devices::Preparer>(
        *options_.sysfs, [](const devices::JournalEntry&) { return absl::OkStatus(); },
        options_.preparer);
  }
}

void DevicesBackend::SetDevices(devices::DeviceSet set) {
  std::lock_guard<std::mutex> lock(mu_);
  set_ = std::move(set);
}

namespace {
// The preparation journal's file name is built from the claim UID and the device name, which
// dra-kubelet has checked (names.cc); an older checkpoint may hold names it did not check.
bool IsPlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}
}  // namespace

std::string DevicesBackend::JournalPath(const std::string& claim_uid,
                                        const std::string& device) const {
  return options_.journal_dir + "/" + claim_uid + "_" + device + ".json";
}

absl::StatusOr<dra_kubelet::PreparedDevice> DevicesBackend::Prepare(
    const dra_kubelet::DevicePrepareRequest& request) {
  if (request.pool != options_.pool) {
    return FailedPrecondition("device " + request.pool + "/" + request.device +
                              " is not in this node's pool " + options_.pool);
  }
  devices::DraDevice device;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const devices::DraDevice* found = set_.Find(request.device);
    if (found == nullptr) {
      return NotFound("device " + request.device + " is not on node " + options_.pool +
                      " any more (was it removed or renamed by a rescan?)");
    }
    device = *found;
  }
  if (request.config.bind_driver) {
    if (*request.config.bind_driver != "vfio-pci") {
      return InvalidArgument("device " + request.device + ": bindDriver \"" +
                             *request.config.bind_driver + "\" is not supported (only vfio-pci)");
    }
    device.preparation.bind_vfio = true;
  }
  // Vendor CDI devices resolve now, before any hardware action: the container must not start
  // without the vendor's libraries and hooks it was configured to get.
  if (!device.preparation.vendor_cdi_devices.empty() && !request.admin_access) {
    absl::Status vendor = cdi::ResolveVendorDevices(options_.vendor_cdi_dirs,
                                                    device.preparation.vendor_cdi_devices)
                              .status();
    if (!vendor.ok()) return WithContext(vendor, "device " + request.device);
  }
  const devices::Preparation& prep = device.preparation;
  bool has_actions = prep.bind_vfio || prep.sriov_num_vfs > 0 || prep.init.has_value() ||
                     !prep.mdev_type.empty();
  std::vector<devices::ActionRecord> done;
  if (has_actions && !request.admin_access) {
    if (preparer_ == nullptr) {
      return FailedPrecondition("device " + request.device +
                                " needs hardware preparation but devlet-node has no sysfs");
    }
    // The journal is rewritten before each step so that a crash can be undone.
    std::error_code ec;
    fs::create_directories(options_.journal_dir, ec);
    fs::permissions(options_.journal_dir, fs::perms::owner_all, ec);  // not 0777 under umask 0
    if (!IsPlainName(request.claim.uid) || !IsPlainName(request.device)) {
      return InvalidArgument("claim UID " + GoQuote(request.claim.uid) + " or device " +
                             GoQuote(request.device) + " cannot name a preparation journal");
    }
    const std::string path = JournalPath(request.claim.uid, request.device);
    DEVLET_ASSIGN_OR_RETURN(done, ReadJournal(path));
    // A journal means the device is prepared, unless the host rebooted since (after_reboot):
    // then its records are redone where the kernel lost them.
    if (done.empty() || request.after_reboot) {
      const bool reapply = !done.empty();
      std::vector<devices::ActionRecord> journal = done;
      devices::Preparer preparer(
          *options_.sysfs,
          [&](const devices::JournalEntry& entry) -> absl::Status {
            if (entry.phase != devices::JournalEntry::Phase::kDo) return absl::OkStatus();
            auto it = std::find_if(journal.begin(), journal.end(), [&](const auto& r) {
              return r.kind == entry.action.kind && r.device == entry.action.device;
            });
            if (it == journal.end()) {
              journal.push_back(entry.action);
            } else {
              *it = entry.action;
            }
            return WriteJournal(path, journal);
          },
          options_.preparer);
      absl::StatusOr<std::vector<devices::ActionRecord>> records =
          reapply ? preparer.Reapply(device, done) : preparer.Prepare(device);
      if (!records.ok()) {
        // Rolled back by the preparer; after a reboot the earlier records stay for unprepare.
        if (reapply) {
          DEVLET_RETURN_IF_ERROR(WriteJournal(path, done));
        } else {
          ::unlink(path.c_str());
        }
        return WithContext(records.status(), "preparing device " + request.device);
      }
      DEVLET_RETURN_IF_ERROR(WriteJournal(path, *records));
      done = *std::move(records);
    }
  }
  dra_kubelet::PreparedDevice out;
  if (!request.admin_access) out.vendor_cdi_device_ids = device.preparation.vendor_cdi_devices;
  out.edits.env.push_back(EnvName(request.device) + "=" + request.pool + "/" + request.device);
  for (const auto& [name, value] : request.config.env) out.edits.env.push_back(name + "=" + value);
  std::string pci = device.pci_address;
  if (pci.empty() && preparer_ != nullptr && !prep.sriov_pf.empty()) {
    auto index = device.attributes.find("vfIndex");
    if (index != device.attributes.end() && std::holds_alternative<std::int64_t>(index->second)) {
      absl::StatusOr<std::string> vf = preparer_->VfAddress(
          prep.sriov_pf, static_cast<int>(std::get<std::int64_t>(index->second)));
      if (vf.ok()) pci = *vf;
    }
  }
  const bool mdev = std::any_of(done.begin(), done.end(), [](const devices::ActionRecord& r) {
    return r.kind == devices::ActionKind::kMdev && !r.mdev_uuid.empty();
  });
  if (!pci.empty() && options_.sysfs != nullptr && !mdev) {
    absl::StatusOr<devices::DeviceNodeSet> nodes =
        devices::DeviceNodesFor(*options_.sysfs, pci, options_.preparer.procfs);
    if (!nodes.ok()) {
      return WithContext(nodes.status(), "device " + request.device + " (" + pci + ")");
    }
    const bool moved_dev = !options_.dev_root.empty() && options_.dev_root != "/";
    for (const auto* list : {&nodes->device_nodes, &nodes->shared_nodes}) {
      for (const std::string& node : *list) {
        out.edits.device_nodes.push_back({node, moved_dev ? options_.dev_root + node : "", ""});
      }
    }
    if (pci != device.pci_address && devices::IsValidPciBusId(pci)) {
      device.attributes[std::string(devices::kAttrPciBusId)] = pci;
    }
  }
  // A mediated device: the VMM opens it by UUID (KubeVirt prefers mdevUUID to pciBusID, so the
  // parent's pciBusID must not be offered as if it were passed through) through its own vfio
  // group when the kernel shows one.
  for (const devices::ActionRecord& record : done) {
    if (record.kind != devices::ActionKind::kMdev || record.mdev_uuid.empty()) continue;
    device.attributes[std::string(kMdevUuidAttribute)] = record.mdev_uuid;
    device.attributes.erase(std::string(devices::kAttrPciBusId));
    if (options_.sysfs != nullptr) {
      absl::StatusOr<std::string> group =
          options_.sysfs->ReadLink("bus/mdev/devices/" + record.mdev_uuid + "/iommu_group");
      if (group.ok()) {
        out.edits.device_nodes.push_back({"/dev/vfio/" + fs::path(*group).filename().string(), "", ""});
        out.edits.device_nodes.push_back({"/dev/vfio/vfio", "", ""});
      }
    }
  }
  for (const auto& [name, value] : device.attributes) {
    out.attributes[name] = ToPluginAttribute(value);
  }
  if (device.numa_node && !out.attributes.contains(std::string(devices::kAttrNumaNode))) {
    out.attributes[std::string(devices::kAttrNumaNode)] = static_cast<std::int64_t>(*device.numa_node);
  }
  return out;
}

absl::Status DevicesBackend::Unprepare(const dra_kubelet::DeviceUnprepareRequest& request) {
  if (options_.journal_dir.empty()) return absl::OkStatus();
  if (!IsPlainName(request.claim_uid) || !IsPlainName(request.device)) {
    // No journal of this devlet has such a name: nothing to undo, and nothing elsewhere to touch.
    log::Logger().Error(InvalidArgument("not a plain file name"),
                        "Not reading a preparation journal outside the journal directory", "uid",
                        request.claim_uid, "device", request.device);
    return absl::OkStatus();
  }
  const std::string path = JournalPath(request.claim_uid, request.device);
  DEVLET_ASSIGN_OR_RETURN(std::vector<devices::ActionRecord> records, ReadJournal(path));
  if (!records.empty()) {
    if (preparer_ == nullptr) {
      return FailedPrecondition("device " + request.device +
                                " has preparation actions to undo but devlet-node has no sysfs");
    }
    DEVLET_RETURN_IF_ERROR(
        WithContext(preparer_->Unprepare(records), "unpreparing device " + request.device));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, "removing preparation journal " + path);
  }
  return absl::OkStatus();
}

// ---- CheckpointClaimsView -------------------------------------------------------------------------

CheckpointClaimsView::CheckpointClaimsView(state::CheckpointStore& store) : store_(store) {}

absl::StatusOr<std::string> PodIpToCidr(std::string_view ip) {
  std::string address(ip);
  std::optional<int> prefix;
  if (auto slash = address.find('/'); slash != std::string::npos) {
    const std::string bits = address.substr(slash + 1);
    address.resize(slash);
    if (bits.empty() || bits.size() > 3 ||
        !std::all_of(bits.begin(), bits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return InvalidArgument("pod address \"" + std::string(ip) + "\" has a bad prefix length");
    }
    prefix = std::stoi(bits);
  }
  unsigned char buffer[16];
  int max_prefix = 0;
  if (::inet_pton(AF_INET, address.c_str(), buffer) == 1) {
    max_prefix = 32;
  } else if (::inet_pton(AF_INET6, address.c_str(), buffer) == 1) {
    max_prefix = 128;
  } else {
    return InvalidArgument("pod address \"" + std::string(ip) + "\" is not an IP address");
  }
  if (prefix && *prefix > max_prefix) {
    return InvalidArgument("pod address \"" + std::string(ip) + "\" has a prefix longer than " +
                           std::to_string(max_prefix));
  }
  return address + "/" + std::to_string(prefix.value_or(max_prefix));
}

void CheckpointClaimsView::SetNetworkUpdater(NetworkUpdater updater, const devices::Sysfs* sysfs) {
  network_updater_ = std::move(updater);
  sysfs_ = sysfs;
}

namespace {

std::string TrimSpace(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

std::string AttributeOr(const state::PreparedDevice& device, const std::string& name) {
  auto it = device.attributes.find(name);
  return it == device.attributes.end() ? "" : it->second;
}

// NetdevOf returns the interface name and MAC of the function's netdev as sysfs shows it now;
// nullopt when sysfs is known and shows none (e.g. bound to vfio-pci).
std::optional<std::pair<std::string, std::string>> NetdevOf(const devices::Sysfs* sysfs,
                                                            const state::PreparedDevice& device) {
  const std::string pci = AttributeOr(device, std::string(devices::kAttrPciBusId));
  if (sysfs == nullptr || pci.empty()) {
    std::string name = AttributeOr(device, "interface");
    if (name.empty()) return std::nullopt;
    return std::make_pair(name, AttributeOr(device, "mac"));
  }
  const std::string net = "bus/pci/devices/" + pci + "/net";
  absl::StatusOr<std::vector<std::string>> names = sysfs->ListDir(net);
  if (!names.ok() || names->empty()) return std::nullopt;
  std::sort(names->begin(), names->end());
  const std::string& name = names->front();
  std::string mac = TrimSpace(sysfs->ReadFile(net + "/" + name + "/address").value_or(""));
  if (mac.empty()) mac = AttributeOr(device, "mac");
  return std::make_pair(name, mac);
}

}  // namespace

absl::Status CheckpointClaimsView::PodNetworkReady(const nri::PodNetwork& network) const {
  if (!network_updater_) return absl::OkStatus();
  DEVLET_ASSIGN_OR_RETURN(std::vector<state::PreparedClaim> claims,
                          store_.FindByPod(network.pod_uid));
  std::vector<std::string> ips;
  for (const std::string& ip : network.ips) {
    absl::StatusOr<std::string> cidr = PodIpToCidr(ip);
    if (!cidr.ok()) {
      log::Logger().Error(cidr.status(), "Ignoring a pod address", "pod",
                          network.namespace_name + "/" + network.name);
      continue;
    }
    if (std::find(ips.begin(), ips.end(), *cidr) == ips.end()) ips.push_back(*cidr);
  }
  for (const state::PreparedClaim& claim : claims) {
    if (claim.state != state::ClaimState::kPrepareCompleted) continue;
    const std::string who = "claim " + claim.namespace_name + "/" + claim.name;
    std::vector<dra_kubelet::DeviceNetworkUpdate> updates;
    for (const state::PreparedDevice& device : claim.devices) {
      const std::string type = AttributeOr(device, "type");
      if (type != "nic" && type != "vf") continue;
      std::optional<std::pair<std::string, std::string>> netdev = NetdevOf(sysfs_, device);
      if (!netdev) continue;
      dra_kubelet::DeviceNetworkUpdate update;
      update.pool = device.pool;
      update.device = device.device;
      if (!device.share_id.empty()) update.share_id = device.share_id;
      update.network_data = {netdev->first, ips, netdev->second};
      updates.push_back(std::move(update));
    }
    if (updates.empty()) continue;
    if (claim.pod_uids.size() > 1) {
      log::Logger().V(1).Info("No network data for a claim shared by several pods", "claim",
                              claim.namespace_name + "/" + claim.name, "pods", claim.pod_uids.size());
      continue;
    }
    absl::Status status = network_updater_(claim.uid, updates);
    if (absl::IsNotFound(status)) continue;  // unprepared meanwhile
    DEVLET_RETURN_IF_ERROR(WithContext(status, who + ": recording the network data of the pod"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<nri::PreparedClaim>> CheckpointClaimsView::ClaimsForPod(
    std::string_view pod_uid) const {
  return ToNriClaims(store_.FindByPod(std::string(pod_uid)));
}

absl::StatusOr<std::vector<nri::PreparedClaim>> CheckpointClaimsView::ClaimsNamedByContainer(
    std::string_view pod_uid, const std::vector<std::string>& claim_uids) const {
  return ToNriClaims(store_.FindForContainer(std::string(pod_uid), claim_uids));
}

absl::StatusOr<std::vector<nri::PreparedClaim>> CheckpointClaimsView::ToNriClaims(
    const absl::StatusOr<std::vector<state::PreparedClaim>>& claims) const {
  if (!claims.ok()) {
    return WithContext(claims.status(), "reading devlet's checkpoint of prepared claims");
  }
  std::vector<nri::PreparedClaim> out;
  for (const state::PreparedClaim& claim : *claims) {
    if (claim.state != state::ClaimState::kPrepareCompleted) continue;
    out.push_back(ToNriClaim(claim));
  }
  return out;
}

nri::PreparedClaim CheckpointClaimsView::ToNriClaim(const state::PreparedClaim& claim) const {
  nri::PreparedClaim p;
  p.uid = claim.uid;
  p.namespace_name = claim.namespace_name;
  p.name = claim.name;
  for (const state::PreparedDevice& device : claim.devices) {
    // Fail closed: a container naming the claim must not start without edits it was given.
    if (!device.edits) {
      p.error = "no CDI edits are recorded for its device " + device.pool + "/" + device.device +
                " (a record of an older devlet that the kubelet plugin could not upgrade)";
      return p;
    }
    nri::PreparedDevice d;
    d.request = device.requests.empty() ? "" : device.requests.front();
    d.driver = device.driver;
    d.pool = device.pool;
    d.device = device.device;
    d.share_id = device.share_id;
    d.cdi_device_names = device.cdi_device_ids;
    d.edits = ToNriEdits(*device.edits);
    // Only a CPU device's consumed cpus/memory are container limits (a GPU's "memory" is not).
    auto type = device.attributes.find("type");
    if (!kubelet_sizes_dra_resources_ && type != device.attributes.end() && type->second == "cpu") {
      d.cpu_millis = device.cpu_millis;
      d.memory_limit_bytes = device.memory_bytes;
    }
    auto numa = device.attributes.find(std::string(devices::kAttrNumaNode));
    if (numa == device.attributes.end()) numa = device.attributes.find("numaNode");
    if (numa != device.attributes.end()) {
      try {
        d.numa_nodes.push_back(std::stoi(numa->second));
      } catch (const std::exception&) {
        // Not a single NUMA node: no affinity.
      }
    }
    p.devices.push_back(std::move(d));
  }
  return p;
}

}  // namespace devlet::node
