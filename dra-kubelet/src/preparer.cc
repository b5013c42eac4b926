#include "devlet/dra_kubelet/preparer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "devlet/common/log.h"
#include "devlet/common/files.h"
#include "devlet/common/status.h"
#include "devlet/dra_kubelet/config.h"
#include "files.h"
#include "record_json.h"

namespace devlet::dra_kubelet {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kMetadataContainerDir = "/var/run/kubernetes.io/dra-device-attributes";
// Newest first: readers take the first object they can decode.
constexpr std::string_view kMetadataVersions[] = {"metadata.resource.k8s.io/v1beta1",
                                                  "metadata.resource.k8s.io/v1alpha1"};

// SerializeLock holds flock() on the rolling-update lock file, if one is configured.
class SerializeLock {
 public:
  explicit SerializeLock(const std::string& path) {
    if (path.empty()) return;
    if (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
      status_ = internal::MakeDirs(path.substr(0, slash), 0750);
      if (!status_.ok()) return;
    }
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      status_ = ErrnoToStatus(errno, "opening lock file " + path);
      return;
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        status_ = ErrnoToStatus(errno, "locking " + path);
        break;
      }
    }
  }
  ~SerializeLock() {
    if (fd_ >= 0) ::close(fd_);  // Closing releases the lock.
  }
  SerializeLock(const SerializeLock&) = delete;
  SerializeLock& operator=(const SerializeLock&) = delete;
  [[nodiscard]] const absl::Status& status() const { return status_; }

 private:
  int fd_ = -1;
  absl::Status status_;
};

std::string CdiDeviceName(const std::string& claim_uid, const PreparedDeviceRecord& device) {
  std::string name = claim_uid + "-" + device.device;
  if (device.share_id) name += "-" + *device.share_id;
  return name;
}

bool SameDevice(const PreparedDeviceRecord& a, const PreparedDeviceRecord& b) {
  return a.pool == b.pool && a.device == b.device && a.share_id == b.share_id;
}

// ClaimFiles is everything a prepared claim puts on disk, derived from its record alone.
struct ClaimFiles {
  std::vector<std::pair<std::string, CdiSpec>> cdi_specs;          // base name, spec
  std::vector<std::pair<std::string, std::string>> metadata_files;  // path, content
  std::vector<std::vector<std::string>> cdi_device_ids;            // per record device
};

}  // namespace

ClaimPreparer::ClaimPreparer(PreparerOptions options, ClaimSource& claims, DeviceBackend& backend,
                             CdiWriter& cdi, CheckpointStore& checkpoint)
    : options_(std::move(options)),
      claims_(claims),
      backend_(backend),
      cdi_(cdi),
      checkpoint_(checkpoint) {}

std::string ClaimPreparer::CdiKind() const { return "k8s." + options_.driver_name + "/claim"; }

std::string ClaimPreparer::ClaimSpecFileName(const std::string& claim_uid) const {
  // The CDI cache's transient spec name: <vendor>-<class>_<id>.json.
  return "k8s." + options_.driver_name + "-claim_" + claim_uid + ".json";
}

namespace {

ClaimFiles PlanFiles(const PreparerOptions& options, const std::string& kind,
                     const std::string& claim_spec_file, const ClaimRecord& record) {
  ClaimFiles files;
  const std::string& uid = record.claim.uid;
  CdiSpec claim_spec;
  claim_spec.kind = kind;
  for (const PreparedDeviceRecord& device : record.devices) {
    CdiDevice cdi_device{CdiDeviceName(uid, device), device.prepared.edits};
    claim_spec.devices.push_back(std::move(cdi_device));
    files.cdi_device_ids.push_back({kind + "=" + CdiDeviceName(uid, device)});
  }
  files.cdi_specs.emplace_back(claim_spec_file, std::move(claim_spec));
  if (!options.enable_device_metadata) return files;

  // One metadata file per request that has devices (KEP-5304), keyed by the full request name.
  std::vector<std::string> requests;
  for (const PreparedDeviceRecord& device : record.devices) {
    for (const std::string& request : device.requests) {
      if (std::find(requests.begin(), requests.end(), request) == requests.end()) {
        requests.push_back(request);
      }
    }
  }
  const std::string& driver = options.driver_name;
  for (const std::string& request : requests) {
    const std::string base = BaseRequestName(request);
    const std::string host_file = options.plugin_data_dir + "/dra-device-metadata/" +
                                  record.claim.namespace_name + "_" + record.claim.name + "/" +
                                  base + "/metadata.json";
    ordered_json devices = ordered_json::array();
    std::optional<std::size_t> first;
    for (std::size_t i = 0; i < record.devices.size(); ++i) {
      const PreparedDeviceRecord& device = record.devices[i];
      if (std::find(device.requests.begin(), device.requests.end(), request) ==
          device.requests.end()) {
        continue;
      }
      if (!first) first = i;
      ordered_json d;
      d["driver"] = driver;
      d["pool"] = device.pool;
      d["name"] = device.device;
      if (!device.prepared.attributes.empty()) {
        ordered_json attributes = ordered_json::object();
        for (const auto& [name, value] : device.prepared.attributes) {
          attributes[name] = internal::AttributeToJson(value);
        }
        d["attributes"] = std::move(attributes);
      }
      devices.push_back(std::move(d));
    }
    std::string stream;
    for (std::string_view version : kMetadataVersions) {
      ordered_json object;
      object["kind"] = "DeviceMetadata";
      object["apiVersion"] = version;
      object["metadata"] = {{"name", record.claim.name},
                            {"namespace", record.claim.namespace_name},
                            {"uid", uid},
                            {"generation", 1}};
      if (record.pod_claim_name) object["podClaimName"] = *record.pod_claim_name;
      object["requests"] = ordered_json::array({{{"name", request}, {"devices", devices}}});
      stream += object.dump() + "\n";
    }
    files.metadata_files.emplace_back(host_file, std::move(stream));

    const std::string container_file =
        std::string(kMetadataContainerDir) +
        (record.pod_claim_name ? "/resourceclaimtemplates/" + *record.pod_claim_name
                               : "/resourceclaims/" + record.claim.name) +
        "/" + base + "/" + driver + "-metadata.json";
    const std::string device_name = uid + "_" + base;
    CdiSpec spec;
    spec.kind = driver + "/metadata";
    spec.devices.push_back({device_name, ContainerEdits{{}, {}, {{host_file, container_file, {"ro", "bind"}}}}});
    files.cdi_specs.emplace_back(driver + "_metadata_" + uid + "_" + base + ".json",
                                 std::move(spec));
    if (first) files.cdi_device_ids[*first].push_back(driver + "/metadata=" + device_name);
  }
  return files;
}

std::vector<PreparedClaimDevice> ToKubeletDevices(const ClaimRecord& record) {
  std::vector<PreparedClaimDevice> out;
  for (const PreparedDeviceRecord& device : record.devices) {
    PreparedClaimDevice d;
    for (const std::string& request : device.requests) {
      std::string base = BaseRequestName(request);
      if (std::find(d.request_names.begin(), d.request_names.end(), base) == d.request_names.end()) {
        d.request_names.push_back(std::move(base));
      }
    }
    d.pool = device.pool;
    d.device = device.device;
    d.cdi_device_ids = device.cdi_device_ids;
    d.share_id = device.share_id;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

absl::Status ClaimPreparer::WriteFiles(ClaimRecord& record) {
  ClaimFiles files = PlanFiles(options_, CdiKind(), ClaimSpecFileName(record.claim.uid), record);
  for (const auto& [path, content] : files.metadata_files) {
    std::string dir = path.substr(0, path.rfind('/'));
    DEVLET_RETURN_IF_ERROR(internal::MakeDirs(dir, 0755));
    DEVLET_RETURN_IF_ERROR(WithContext(WriteFileAtomically(path, content, 0644),
                                       "writing device metadata"));
  }
  for (const auto& [name, spec] : files.cdi_specs) {
    DEVLET_RETURN_IF_ERROR(cdi_.WriteSpec(name, spec));
  }
  for (std::size_t i = 0; i < record.devices.size(); ++i) {
    record.devices[i].cdi_device_ids = files.cdi_device_ids[i];
  }
  return absl::OkStatus();
}

absl::Status ClaimPreparer::EnsureFiles(const ClaimRecord& record) {
  ClaimFiles files = PlanFiles(options_, CdiKind(), ClaimSpecFileName(record.claim.uid), record);
  for (const auto& [path, content] : files.metadata_files) {
    if (internal::PathExists(path)) continue;
    std::string dir = path.substr(0, path.rfind('/'));
    DEVLET_RETURN_IF_ERROR(internal::MakeDirs(dir, 0755));
    DEVLET_RETURN_IF_ERROR(WithContext(WriteFileAtomically(path, content, 0644),
                                       "rewriting device metadata"));
  }
  for (const auto& [name, spec] : files.cdi_specs) {
    if (cdi_.SpecExists(name)) continue;
    DEVLET_RETURN_IF_ERROR(WithContext(cdi_.WriteSpec(name, spec), "rewriting missing CDI spec"));
  }
  return absl::OkStatus();
}

absl::Status ClaimPreparer::RemoveFiles(const ClaimRecord& record) {
  for (const std::string& name : record.cdi_spec_files) {
    DEVLET_RETURN_IF_ERROR(cdi_.RemoveSpec(name));
  }
  for (const std::string& path : record.metadata_files) {
    DEVLET_RETURN_IF_ERROR(internal::RemoveIfExists(path));
  }
  if (!record.metadata_files.empty()) {
    DEVLET_RETURN_IF_ERROR(internal::RemoveIfExists(options_.plugin_data_dir +
                                                    "/dra-device-metadata/" +
                                                    record.claim.namespace_name + "_" +
                                                    record.claim.name));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PreparedClaimDevice>> ClaimPreparer::PrepareOne(
    const ClaimRef& ref, const ResourceClaim& claim) {
  const std::string who = "ResourceClaim " + ref.Display();
  if (claim.uid != ref.uid) {
    return FailedPrecondition(who + " has UID " + claim.uid + " but the kubelet asked for UID " +
                              ref.uid + ": the claim was deleted and re-created");
  }
  if (!claim.allocated) {
    return FailedPrecondition(who + " is not allocated (status.allocation is empty)");
  }
  if (!options_.node_name.empty() && !claim.allocation_node_names.empty() &&
      std::find(claim.allocation_node_names.begin(), claim.allocation_node_names.end(),
                options_.node_name) == claim.allocation_node_names.end()) {
    return FailedPrecondition(who + " is allocated to node " + claim.allocation_node_names[0] +
                              ", not to this node (" + options_.node_name + ")");
  }
  std::vector<const AllocationResult*> ours;
  for (const AllocationResult& result : claim.results) {
    if (result.driver == options_.driver_name) ours.push_back(&result);
  }
  if (ours.empty()) {
    return FailedPrecondition(who + " has no devices allocated by driver " + options_.driver_name);
  }

  DEVLET_ASSIGN_OR_RETURN(std::optional<ClaimRecord> existing, checkpoint_.Get(ref.uid));
  if (existing && existing->state == ClaimState::kPrepareCompleted) {
    // Repeated prepare (kubelet restart, node reboot, another pod sharing the claim):
    // regenerate what is missing, record new consumers, same answer.
    bool new_pods = false;
    for (const std::string& pod : claim.reserved_for_uids) {
      if (std::find(existing->pod_uids.begin(), existing->pod_uids.end(), pod) ==
          existing->pod_uids.end()) {
        existing->pod_uids.push_back(pod);
        new_pods = true;
      }
    }
    if (new_pods) {
      DEVLET_RETURN_IF_ERROR(WithContext(checkpoint_.Put(*existing), who + ": recording pods"));
    }
    DEVLET_RETURN_IF_ERROR(WithContext(EnsureFiles(*existing), who));
    return ToKubeletDevices(*existing);
  }

  ClaimRecord record;
  record.claim = ref;
  record.state = ClaimState::kPrepareStarted;
  record.pod_uids = claim.reserved_for_uids;
  if (auto it = claim.annotations.find(std::string(kPodClaimNameAnnotation));
      it != claim.annotations.end() && !it->second.empty()) {
    record.pod_claim_name = it->second;
  }
  for (const AllocationResult* result : ours) {
    if (result->pool.empty() || result->device.empty()) {
      return InvalidArgument(who + ": allocation result for request \"" + result->request +
                             "\" has no pool or device");
    }
    PreparedDeviceRecord device;
    device.requests = {result->request};
    device.pool = result->pool;
    device.device = result->device;
    device.share_id = result->share_id;
    device.admin_access = result->admin_access;
    absl::StatusOr<DeviceConfig> config =
        ResolveDeviceConfig(claim.config, options_.driver_name, result->request);
    if (!config.ok()) return WithContext(config.status(), who);
    device.config = *std::move(config);
    record.devices.push_back(std::move(device));
  }

  // Last line of defence: a device is never prepared for two claims (admin access aside).
  DEVLET_ASSIGN_OR_RETURN(std::vector<ClaimRecord> all, checkpoint_.List());
  for (const ClaimRecord& other : all) {
    if (other.claim.uid == ref.uid) continue;
    for (const PreparedDeviceRecord& theirs : other.devices) {
      for (const PreparedDeviceRecord& mine : record.devices) {
        if (SameDevice(theirs, mine) && !theirs.admin_access && !mine.admin_access) {
          return FailedPrecondition(who + ": device " + mine.pool + "/" + mine.device +
                                    " is already prepared for ResourceClaim " +
                                    other.claim.Display() + " (UID " + other.claim.uid + ")");
        }
      }
    }
  }

  // Every file this claim can own, recorded before any work so unprepare can always clean up.
  {
    ClaimFiles planned = PlanFiles(options_, CdiKind(), ClaimSpecFileName(ref.uid), record);
    for (const auto& [name, spec] : planned.cdi_specs) record.cdi_spec_files.push_back(name);
    for (const auto& [path, content] : planned.metadata_files) record.metadata_files.push_back(path);
  }
  // A previous attempt may have left devices prepared that this allocation no longer has.
  if (existing) {
    for (const PreparedDeviceRecord& old : existing->devices) {
      bool kept = std::any_of(record.devices.begin(), record.devices.end(),
                              [&](const PreparedDeviceRecord& d) { return SameDevice(d, old); });
      if (!kept) {
        DEVLET_RETURN_IF_ERROR(backend_.Unprepare({ref.uid, old.pool, old.device, old.share_id,
                                                   old.config}));
      }
    }
  }
  DEVLET_RETURN_IF_ERROR(WithContext(checkpoint_.Put(record), who + ": recording PrepareStarted"));

  absl::Status status;
  std::size_t prepared = 0;
  for (; prepared < record.devices.size(); ++prepared) {
    PreparedDeviceRecord& device = record.devices[prepared];
    absl::StatusOr<PreparedDevice> done = backend_.Prepare(
        {ref, device.requests.front(), device.pool, device.device, device.share_id,
         device.admin_access, device.config});
    if (!done.ok()) {
      status = WithContext(done.status(), who + ": preparing device " + device.pool + "/" +
                                              device.device + " for request \"" +
                                              device.requests.front() + "\"");
      break;
    }
    device.prepared = *std::move(done);
  }
  if (status.ok()) status = WithContext(WriteFiles(record), who);
  if (status.ok()) {
    record.state = ClaimState::kPrepareCompleted;
    status = WithContext(checkpoint_.Put(record), who + ": recording PrepareCompleted");
    if (status.ok()) return ToKubeletDevices(record);
  }

  // Roll back this attempt so nothing stays half-prepared; keep the PrepareStarted record if
  // that fails, so a later unprepare or prepare finishes the job.
  absl::Status rollback = RemoveFiles(record);
  for (std::size_t i = 0; i < record.devices.size() && rollback.ok(); ++i) {
    const PreparedDeviceRecord& device = record.devices[i];
    rollback = backend_.Unprepare({ref.uid, device.pool, device.device, device.share_id,
                                   device.config});
  }
  if (rollback.ok()) rollback = checkpoint_.Delete(ref.uid);
  if (!rollback.ok()) {
    log::Logger().Error(rollback, "Rolling back a failed prepare failed; will retry later",
                        "claim", ref.Display(), "uid", ref.uid);
  }
  return status;
}

std::map<std::string, PrepareResult> ClaimPreparer::Prepare(const std::vector<ClaimRef>& refs) {
  std::map<std::string, PrepareResult> results;
  // Fetch first, outside the lock: API calls are slow and need no serialization.
  std::vector<std::pair<ClaimRef, absl::StatusOr<ResourceClaim>>> fetched;
  for (const ClaimRef& ref : refs) {
    if (results.count(ref.uid) > 0) continue;
    results[ref.uid];
    if (ref.uid.empty() || ref.namespace_name.empty() || ref.name.empty()) {
      results[ref.uid].error = "the kubelet sent a claim without namespace, name or UID (" +
                               ref.Display() + ", UID \"" + ref.uid + "\")";
      continue;
    }
    absl::StatusOr<ResourceClaim> claim = claims_.GetClaim(ref.namespace_name, ref.name, ref.uid);
    if (!claim.ok()) {
      results[ref.uid].error =
          "fetching ResourceClaim " + ref.Display() + ": " + Message(claim.status());
      continue;
    }
    fetched.emplace_back(ref, std::move(claim));
  }
  std::lock_guard lock(mutex_);
  SerializeLock file_lock(options_.serialize_lock_path);
  for (auto& [ref, claim] : fetched) {
    if (!file_lock.status().ok()) {
      results[ref.uid].error = Message(file_lock.status());
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<PreparedClaimDevice>> devices = PrepareOne(ref, *claim);
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    if (devices.ok()) {
      results[ref.uid].devices = *std::move(devices);
      log::Logger().V(2).Info("Prepared claim", "claim", ref.Display(), "uid", ref.uid,
                              "devices", results[ref.uid].devices.size(), "micros", micros);
    } else {
      results[ref.uid].error = Message(devices.status());
      log::Logger().Error(devices.status(), "Preparing claim failed", "claim", ref.Display(),
                          "uid", ref.uid);
    }
  }
  return results;
}

absl::Status ClaimPreparer::UnprepareOne(const ClaimRef& ref) {
  DEVLET_ASSIGN_OR_RETURN(std::optional<ClaimRecord> record, checkpoint_.Get(ref.uid));
  if (!record) return absl::OkStatus();  // Unknown or already unprepared.
  const std::string who = "ResourceClaim " + record->claim.Display() + " (UID " + ref.uid + ")";
  for (const PreparedDeviceRecord& device : record->devices) {
    DEVLET_RETURN_IF_ERROR(WithContext(
        backend_.Unprepare({ref.uid, device.pool, device.device, device.share_id, device.config}),
        who + ": releasing device " + device.pool + "/" + device.device));
  }
  DEVLET_RETURN_IF_ERROR(WithContext(RemoveFiles(*record), who));
  return WithContext(checkpoint_.Delete(ref.uid), who + ": removing checkpoint entry");
}

std::map<std::string, std::string> ClaimPreparer::Unprepare(const std::vector<ClaimRef>& refs) {
  std::map<std::string, std::string> results;
  std::lock_guard lock(mutex_);
  SerializeLock file_lock(options_.serialize_lock_path);
  for (const ClaimRef& ref : refs) {
    if (results.count(ref.uid) > 0) continue;
    results[ref.uid];
    if (!file_lock.status().ok()) {
      results[ref.uid] = Message(file_lock.status());
      continue;
    }
    if (ref.uid.empty()) {
      results[ref.uid] = "the kubelet sent a claim without a UID (" + ref.Display() + ")";
      continue;
    }
    absl::Status status = UnprepareOne(ref);
    if (!status.ok()) {
      results[ref.uid] = Message(status);
      log::Logger().Error(status, "Unpreparing claim failed", "claim", ref.Display(), "uid",
                          ref.uid);
    } else {
      log::Logger().V(2).Info("Unprepared claim", "claim", ref.Display(), "uid", ref.uid);
    }
  }
  return results;
}

}  // namespace devlet::dra_kubelet
