#include "devlet/dra_kubelet/preparer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <future>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "devlet/cdi/vendor.h"
#include "devlet/common/files.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/dra_kubelet/config.h"
#include "devlet/state/container_marker.h"
#include "files.h"
#include "names.h"
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
  // Per record device: the edits of its own CDI devices (claim spec and metadata spec), merged
  // in the order of cdi_device_ids; vendor devices are resolved by ResolveEdits.
  std::vector<cdi::ContainerEdits> device_edits;
};

}  // namespace

cdi::ContainerEdits ToCdiEdits(const ContainerEdits& edits) {
  cdi::ContainerEdits out;
  out.env = edits.env;
  for (const DeviceNode& node : edits.device_nodes) {
    out.device_nodes.push_back(
        {.path = node.path, .host_path = node.host_path, .permissions = node.permissions});
  }
  for (const Mount& mount : edits.mounts) {
    out.mounts.push_back({.host_path = mount.host_path,
                          .container_path = mount.container_path,
                          .options = mount.options});
  }
  return out;
}

ClaimPreparer::ClaimPreparer(PreparerOptions options, ClaimSource& claims, DeviceBackend& backend,
                             CdiWriter& cdi, ClaimRecordStore& checkpoint)
    : options_(std::move(options)),
      claims_(claims),
      backend_(backend),
      cdi_(cdi),
      checkpoint_(checkpoint) {
  if (options_.status_writer != nullptr) {
    status_thread_ = std::thread([this] { RunStatusWriter(); });
  }
}

ClaimPreparer::~ClaimPreparer() {
  {
    std::lock_guard lock(status_mutex_);
    status_stop_ = true;
    if (!status_queue_.empty()) {
      log::Logger().Info("Dropping ResourceClaim status writes at shutdown", "count",
                         status_queue_.size());
      status_queue_.clear();
    }
  }
  status_cv_.notify_all();
  if (status_thread_.joinable()) status_thread_.join();
}

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
  for (std::size_t i = 0; i < record.devices.size(); ++i) {
    const PreparedDeviceRecord& device = record.devices[i];
    CdiDevice cdi_device{CdiDeviceName(uid, device), device.prepared.edits};
    // Only the containers the kubelet gives this CDI device get the marker: the NRI plugin
    // reads it back to scope devices, metadata, CPUs and memory to them (state/container_marker.h).
    cdi_device.edits.env.push_back(state::ContainerMarkerEnv(
        {uid, device.requests, device.pool, device.device, device.share_id.value_or("")}, i));
    files.device_edits.push_back(ToCdiEdits(cdi_device.edits));
    claim_spec.devices.push_back(std::move(cdi_device));
    files.cdi_device_ids.push_back({kind + "=" + CdiDeviceName(uid, device)});
    for (const std::string& id : device.prepared.vendor_cdi_device_ids) {
      files.cdi_device_ids.back().push_back(id);
    }
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
      if (const auto& net = device.prepared.network_data) {
        // NetworkDeviceData: every field is omitempty.
        ordered_json n = ordered_json::object();
        if (!net->interface_name.empty()) n["interfaceName"] = net->interface_name;
        if (!net->ips.empty()) n["ips"] = net->ips;
        if (!net->hardware_address.empty()) n["hardwareAddress"] = net->hardware_address;
        d["networkData"] = std::move(n);
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
                            {"generation", record.metadata_generation}};
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
    if (first) {
      files.cdi_device_ids[*first].push_back(driver + "/metadata=" + device_name);
      files.device_edits[*first].Append(ToCdiEdits(spec.devices.back().edits));
    }
    files.cdi_specs.emplace_back(driver + "_metadata_" + uid + "_" + base + ".json",
                                 std::move(spec));
  }
  return files;
}

// RecordEdits records in each device of `record` the edits a container that gets it receives:
// its own CDI devices' (from `files`), then its vendor CDI devices' as the runtime resolves them
// in `vendor_dirs`. An unresolvable vendor device fails: no container may start without it.
absl::Status RecordEdits(const ClaimFiles& files, const std::vector<std::string>& vendor_dirs,
                         ClaimRecord& record) {
  for (std::size_t i = 0; i < record.devices.size(); ++i) {
    PreparedDeviceRecord& device = record.devices[i];
    cdi::ContainerEdits edits = files.device_edits[i];
    if (!device.prepared.vendor_cdi_device_ids.empty()) {
      absl::StatusOr<cdi::ContainerEdits> vendor =
          cdi::ResolveVendorDevices(vendor_dirs, device.prepared.vendor_cdi_device_ids);
      if (!vendor.ok()) {
        return WithContext(vendor.status(), "device " + device.pool + "/" + device.device);
      }
      edits.Append(*vendor);
    }
    device.container_edits = std::move(edits);
  }
  return absl::OkStatus();
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
  return RecordEdits(files, options_.vendor_cdi_dirs, record);
}

absl::Status ClaimPreparer::EnsureFiles(const ClaimRecord& record) {
  // Files are derived from the record: anything missing, or left empty or stale by a power loss
  // (CDI writers may skip fsync), is written again.
  ClaimFiles files = PlanFiles(options_, CdiKind(), ClaimSpecFileName(record.claim.uid), record);
  for (const auto& [path, content] : files.metadata_files) {
    absl::StatusOr<std::optional<std::string>> current = ReadFileIfExists(path);
    if (current.ok() && current->has_value() && **current == content) continue;
    std::string dir = path.substr(0, path.rfind('/'));
    DEVLET_RETURN_IF_ERROR(internal::MakeDirs(dir, 0755));
    DEVLET_RETURN_IF_ERROR(WithContext(WriteFileAtomically(path, content, 0644),
                                       "rewriting device metadata"));
  }
  for (const auto& [name, spec] : files.cdi_specs) {
    if (cdi_.SpecIsCurrent(name, spec)) continue;
    DEVLET_RETURN_IF_ERROR(WithContext(cdi_.WriteSpec(name, spec), "rewriting missing CDI spec"));
  }
  return absl::OkStatus();
}

absl::Status ClaimPreparer::RemoveFiles(const ClaimRecord& record) {
  // Only what this devlet writes is removed, file by file, then the directories it made for them
  // if they are empty: a record (from an older devlet, or a damaged checkpoint) naming anything
  // else cannot make unprepare delete it.
  for (const std::string& name : record.cdi_spec_files) {
    if (!internal::IsPlainFileName(name)) {
      log::Logger().Error(InvalidArgument("not a plain file name"),
                          "Not removing a CDI spec outside the CDI root", "claim",
                          record.claim.Display(), "file", name);
      continue;
    }
    DEVLET_RETURN_IF_ERROR(cdi_.RemoveSpec(name));
  }
  const std::string root = options_.plugin_data_dir + "/dra-device-metadata/";
  for (const std::string& path : record.metadata_files) {
    // <root><ns>_<claim>/<request>/metadata.json, each part a plain name.
    std::string_view rest(path);
    std::string_view claim_dir;
    std::string_view request_dir;
    bool ours = !options_.plugin_data_dir.empty() && rest.starts_with(root) &&
                rest.ends_with("/metadata.json");
    if (ours) {
      rest = rest.substr(root.size(), rest.size() - root.size() - 14);
      const std::size_t slash = rest.find('/');
      ours = slash != std::string_view::npos;
      if (ours) {
        claim_dir = rest.substr(0, slash);
        request_dir = rest.substr(slash + 1);
        ours = internal::IsPlainFileName(claim_dir) && internal::IsPlainFileName(request_dir);
      }
    }
    if (!ours) {
      log::Logger().Error(InvalidArgument("not under " + root + "<namespace>_<claim>/<request>/"),
                          "Not removing a device-metadata file devlet would not have written",
                          "claim", record.claim.Display(), "file", path);
      continue;
    }
    DEVLET_RETURN_IF_ERROR(internal::RemoveFile(path));
    const std::string claim_path = root + std::string(claim_dir);
    internal::RemoveEmptyDirectory(claim_path + "/" + std::string(request_dir));
    internal::RemoveEmptyDirectory(claim_path);
  }
  return absl::OkStatus();
}

// ---- Batches ---------------------------------------------------------------------------------

// Pending is one caller's claims waiting for a batch.
struct ClaimPreparer::Pending {
  std::vector<ClaimRef> order;  // distinct UIDs in request order, fetched successfully
  std::map<std::string, ResourceClaim> claims;
  std::map<std::string, PrepareResult> results;  // fetch errors already filled in
  PrepareDone done;
};

// Work is one distinct claim of a batch.
struct ClaimPreparer::Work {
  enum class Kind {
    kFailed,    // `status` says why
    kRepeat,    // prepared before: make sure its files exist
    kFresh,     // prepare it now
  };
  ClaimRef ref;
  const ResourceClaim* claim = nullptr;
  Kind kind = Kind::kFailed;
  absl::Status status;
  ClaimRecord record;         // kFresh: the new record; kRepeat: the checkpoint's
  bool record_changed = false;  // kRepeat: new pods to record
  // kRepeat: prepared in another boot: the devices are prepared again (the backend redoes what
  // did not survive the reboot) and the record committed with this boot.
  bool reapply = false;
  std::optional<ClaimRecord> previous;  // kFresh: an earlier attempt's PrepareStarted record
};

absl::Status ClaimPreparer::Plan(Work& work, const std::map<std::string, ClaimRecord>& checkpoint,
                                 const std::vector<const ClaimRecord*>& planned) {
  const ClaimRef& ref = work.ref;
  const ResourceClaim& claim = *work.claim;
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

  if (auto it = checkpoint.find(ref.uid); it != checkpoint.end()) {
    if (it->second.state == ClaimState::kPrepareCompleted) {
      // Repeated prepare (kubelet restart, node reboot, another pod sharing the claim):
      // regenerate what is missing, record new consumers, same answer.
      work.kind = Work::Kind::kRepeat;
      work.record = it->second;
      // A record an older devlet wrote may carry names it did not check: its files are not
      // regenerated from them.
      DEVLET_RETURN_IF_ERROR(internal::CheckRecordNames(work.record));
      work.reapply = PreparedInAnotherBoot(work.record);
      auto add_new = [&](const std::vector<std::string>& from, std::vector<std::string>& to) {
        for (const std::string& uid : from) {
          if (std::find(to.begin(), to.end(), uid) != to.end()) continue;
          to.push_back(uid);
          work.record_changed = true;
        }
      };
      add_new(claim.reserved_for_uids, work.record.pod_uids);
      add_new(claim.reserved_for_pod_groups, work.record.pod_group_uids);
      return absl::OkStatus();
    }
    work.previous = it->second;
  }

  ClaimRecord& record = work.record;
  record.claim = ref;
  record.state = ClaimState::kPrepareStarted;
  record.pod_uids = claim.reserved_for_uids;
  record.pod_group_uids = claim.reserved_for_pod_groups;
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
    device.cpu_millis = result->cpu_millis;
    device.memory_bytes = result->memory_bytes;
    absl::StatusOr<DeviceConfig> config =
        ResolveDeviceConfig(claim.config, options_.driver_name, result->request);
    if (!config.ok()) return WithContext(config.status(), who);
    device.config = *std::move(config);
    record.devices.push_back(std::move(device));
  }

  // Every name that goes into a file path, before the record is planned: whatever the source
  // (a manifest, a store that did not validate), nothing is written outside devlet's directories.
  DEVLET_RETURN_IF_ERROR(internal::CheckRecordNames(record));

  // Last line of defence: a device is never prepared for two claims (admin access aside), neither
  // against the checkpoint nor against the other claims of this batch.
  auto conflict = [&](const ClaimRecord& other) -> absl::Status {
    if (other.claim.uid == ref.uid) return absl::OkStatus();
    for (const PreparedDeviceRecord& theirs : other.devices) {
      for (const PreparedDeviceRecord& mine : record.devices) {
        if (SameDevice(theirs, mine) && !theirs.admin_access && !mine.admin_access) {
          return FailedPrecondition(who + ": device " + mine.pool + "/" + mine.device +
                                    " is already prepared for ResourceClaim " +
                                    other.claim.Display() + " (UID " + other.claim.uid + ")");
        }
      }
    }
    return absl::OkStatus();
  };
  for (const auto& [uid, other] : checkpoint) DEVLET_RETURN_IF_ERROR(conflict(other));
  for (const ClaimRecord* other : planned) DEVLET_RETURN_IF_ERROR(conflict(*other));

  // Every file this claim can own, recorded before any work so unprepare can always clean up.
  ClaimFiles files = PlanFiles(options_, CdiKind(), ClaimSpecFileName(ref.uid), record);
  for (const auto& [name, spec] : files.cdi_specs) record.cdi_spec_files.push_back(name);
  for (const auto& [path, content] : files.metadata_files) record.metadata_files.push_back(path);
  work.kind = Work::Kind::kFresh;
  return absl::OkStatus();
}

bool ClaimPreparer::PreparedInAnotherBoot(const ClaimRecord& record) const {
  return !options_.boot_id.empty() && record.boot_id != options_.boot_id;
}

absl::Status ClaimPreparer::PrepareDevices(ClaimRecord& record, bool after_reboot) {
  const ClaimRef& ref = record.claim;
  const std::string who = "ResourceClaim " + ref.Display();
  for (PreparedDeviceRecord& device : record.devices) {
    absl::StatusOr<PreparedDevice> done = backend_.Prepare(
        {ref, device.requests.front(), device.pool, device.device, device.share_id,
         device.admin_access, device.config, after_reboot});
    if (!done.ok()) {
      return WithContext(done.status(), who + ": preparing device " + device.pool + "/" +
                                            device.device + " for request \"" +
                                            device.requests.front() + "\"");
    }
    device.prepared = *std::move(done);
  }
  return WithContext(WriteFiles(record), who);
}

bool ClaimPreparer::RollBack(const ClaimRecord& record) {
  // Undo this attempt's side effects; the caller removes the checkpoint entry only when this
  // worked, so a failed rollback leaves PrepareStarted for a later unprepare or prepare.
  absl::Status status = RemoveFiles(record);
  for (std::size_t i = 0; i < record.devices.size() && status.ok(); ++i) {
    const PreparedDeviceRecord& device = record.devices[i];
    status = backend_.Unprepare({record.claim.uid, device.pool, device.device, device.share_id,
                                 device.config});
  }
  if (!status.ok()) {
    log::Logger().Error(status, "Rolling back a failed prepare failed; will retry later", "claim",
                        record.claim.Display(), "uid", record.claim.uid);
  }
  return status.ok();
}

// Batch is one run of RunBatch: one Work per distinct claim UID across the kubelet calls it
// serves (two pods may share a claim), in the order the calls named them.
struct ClaimPreparer::Batch {
  std::map<std::string, Work> works;
  std::vector<std::string> order;

  // FailAll fails every claim that has not failed yet with `status`.
  void FailAll(const absl::Status& status) {
    for (auto& [uid, work] : works) {
      if (work.kind != Work::Kind::kFailed || work.status.ok()) {
        work.kind = Work::Kind::kFailed;
        work.status = status;
      }
    }
  }
  // Recorded reports whether `work`'s record is written at PrepareStarted: a fresh claim, or a
  // repeated one with new pods.
  static bool Recorded(const Work& work) {
    return work.kind == Work::Kind::kFresh ||
           (work.kind == Work::Kind::kRepeat && work.record_changed);
  }
};

ClaimPreparer::Batch ClaimPreparer::CollectWork(
    const std::vector<std::unique_ptr<Pending>>& calls) {
  Batch batch;
  for (const auto& pending : calls) {
    for (const ClaimRef& ref : pending->order) {
      if (batch.works.count(ref.uid) > 0) continue;
      Work& work = batch.works[ref.uid];
      work.ref = ref;
      work.claim = &pending->claims.at(ref.uid);
      batch.order.push_back(ref.uid);
    }
  }
  return batch;
}

void ClaimPreparer::Deliver(const Batch& batch, std::vector<std::unique_ptr<Pending>>& calls) {
  for (const auto& pending : calls) {
    for (const ClaimRef& ref : pending->order) {
      const Work& work = batch.works.at(ref.uid);
      PrepareResult& result = pending->results[ref.uid];
      if (work.kind == Work::Kind::kFailed) {
        result.error = Message(work.status);
      } else {
        result.devices = ToKubeletDevices(work.record);
      }
    }
  }
}

absl::StatusOr<std::map<std::string, ClaimRecord>> ClaimPreparer::LoadCheckpoint() {
  absl::StatusOr<std::vector<ClaimRecord>> all = checkpoint_.List();
  if (!all.ok()) return WithContext(all.status(), "reading the checkpoint");
  std::map<std::string, ClaimRecord> checkpoint;
  for (ClaimRecord& record : *all) {
    std::string uid = record.claim.uid;
    checkpoint.emplace(std::move(uid), std::move(record));
  }
  return checkpoint;
}

void ClaimPreparer::PlanAll(Batch& batch, const std::map<std::string, ClaimRecord>& checkpoint) {
  std::vector<const ClaimRecord*> planned;
  for (const std::string& uid : batch.order) {
    Work& work = batch.works.at(uid);
    work.status = Plan(work, checkpoint, planned);
    if (!work.status.ok()) {
      work.kind = Work::Kind::kFailed;
      continue;
    }
    if (work.kind == Work::Kind::kFresh) planned.push_back(&work.record);
  }
}

absl::Status ClaimPreparer::ReleaseDroppedDevices(Work& work) {
  if (work.kind != Work::Kind::kFresh || !work.previous) return absl::OkStatus();
  for (const PreparedDeviceRecord& old : work.previous->devices) {
    bool kept = std::any_of(work.record.devices.begin(), work.record.devices.end(),
                            [&](const PreparedDeviceRecord& d) { return SameDevice(d, old); });
    if (kept) continue;
    DEVLET_RETURN_IF_ERROR(WithContext(
        backend_.Unprepare({work.ref.uid, old.pool, old.device, old.share_id, old.config}),
        "ResourceClaim " + work.ref.Display() + ": releasing device " + old.pool + "/" +
            old.device + " that an earlier attempt prepared"));
  }
  return absl::OkStatus();
}

void ClaimPreparer::RecordStarted(Batch& batch) {
  std::vector<ClaimRecord> started;
  for (const std::string& uid : batch.order) {
    Work& work = batch.works.at(uid);
    if (absl::Status released = ReleaseDroppedDevices(work); !released.ok()) {
      work.kind = Work::Kind::kFailed;
      work.status = released;
    }
    if (Batch::Recorded(work)) started.push_back(work.record);
  }
  if (started.empty()) return;
  // PrepareStarted guards the side effects against a crash. A kill -9 cannot lose it even
  // unsynced (the written record is in the page cache), only a power cut or kernel crash can.
  // When the backend's device state does not survive a reboot (kernel state: driver bindings,
  // VF counts, mediated devices), a power cut that loses the record also undoes what it
  // guarded, so the record need not reach the disk before the side effects: it is written now
  // and synced with PrepareCompleted (or by the store's background flush). The files that do
  // persist (device-metadata files, a CDI root on disk) are removed at the next start when no
  // record names them (RemoveOrphanedFiles). A backend whose effects persist keeps the sync.
  absl::Status status = backend_.PreparedStateSurvivesReboot()
                            ? checkpoint_.Commit(started, {})
                            : checkpoint_.CommitDeferred(started, {});
  if (status.ok()) return;
  for (const std::string& uid : batch.order) {
    Work& work = batch.works.at(uid);
    if (!Batch::Recorded(work)) continue;
    work.kind = Work::Kind::kFailed;
    work.status =
        WithContext(status, "ResourceClaim " + work.ref.Display() + ": recording PrepareStarted");
  }
}

void ClaimPreparer::PrepareAll(Batch& batch, std::vector<ClaimRecord>& completed,
                               std::vector<std::string>& rolled_back) {
  for (const std::string& uid : batch.order) {
    Work& work = batch.works.at(uid);
    if (work.kind == Work::Kind::kRepeat && work.reapply) {
      // After a reboot: the same devices, set up again; their edits (a vfio group's number) and
      // so the files may differ from the last boot's. On failure the record stays as it was (a
      // later prepare tries again, an unprepare releases it) and the kubelet gets the error, so
      // no container starts without its devices.
      work.status = PrepareDevices(work.record, /*after_reboot=*/true);
      if (!work.status.ok()) {
        work.kind = Work::Kind::kFailed;
        continue;
      }
      work.record.boot_id = options_.boot_id;
      completed.push_back(work.record);
      continue;
    }
    if (work.kind == Work::Kind::kRepeat) {
      work.status = WithContext(EnsureFiles(work.record), "ResourceClaim " + work.ref.Display());
      if (!work.status.ok()) work.kind = Work::Kind::kFailed;
      continue;
    }
    if (work.kind != Work::Kind::kFresh) continue;
    work.status = PrepareDevices(work.record);
    if (!work.status.ok()) {
      work.kind = Work::Kind::kFailed;
      // The entry goes only when everything was undone; else PrepareStarted stays for a later
      // unprepare or prepare to finish.
      if (RollBack(work.record)) rolled_back.push_back(uid);
      continue;
    }
    work.record.state = ClaimState::kPrepareCompleted;
    work.record.boot_id = options_.boot_id;
    completed.push_back(work.record);
  }
}

void ClaimPreparer::RecordCompleted(Batch& batch, std::vector<ClaimRecord>& completed,
                                    const std::vector<std::string>& rolled_back) {
  if (completed.empty() && rolled_back.empty()) return;
  absl::Status status = checkpoint_.Commit(completed, rolled_back);
  if (status.ok()) return;
  std::vector<std::string> undo = rolled_back;
  for (const ClaimRecord& record : completed) {
    Work& work = batch.works.at(record.claim.uid);
    work.kind = Work::Kind::kFailed;
    work.status = WithContext(status, "ResourceClaim " + work.ref.Display() +
                                          ": recording PrepareCompleted");
    // A claim prepared again after a reboot keeps its record of the earlier boot: the next
    // prepare sets its devices up again.
    if (work.reapply) continue;
    if (RollBack(work.record)) undo.push_back(record.claim.uid);
  }
  if (absl::Status again = undo.empty() ? absl::OkStatus() : checkpoint_.Commit({}, undo);
      !again.ok()) {
    log::Logger().Error(again,
                        "Removing checkpoint entries of a failed prepare failed; a later "
                        "unprepare or prepare finishes the job",
                        "claims", undo.size());
  }
  completed.clear();
}

void ClaimPreparer::LogBatch(const Batch& batch, std::chrono::steady_clock::time_point start) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
  for (const std::string& uid : batch.order) {
    const Work& work = batch.works.at(uid);
    if (work.kind == Work::Kind::kFailed) {
      log::Logger().Error(work.status, "Preparing claim failed", "claim", work.ref.Display(),
                          "uid", uid);
    } else {
      log::Logger().V(2).Info("Prepared claim", "claim", work.ref.Display(), "uid", uid,
                              "devices", work.record.devices.size(), "batch", batch.order.size(),
                              "batchMicros", micros);
    }
  }
}

void ClaimPreparer::RunBatch(std::vector<std::unique_ptr<Pending>>& calls) {
  const auto start = std::chrono::steady_clock::now();
  Batch batch = CollectWork(calls);
  std::lock_guard lock(mutex_);
  SerializeLock file_lock(options_.serialize_lock_path);
  absl::StatusOr<std::map<std::string, ClaimRecord>> checkpoint =
      file_lock.status().ok() ? LoadCheckpoint() : file_lock.status();
  if (!checkpoint.ok()) {
    batch.FailAll(checkpoint.status());
    Deliver(batch, calls);
    return;
  }
  // 1. Check every claim and plan its record.
  PlanAll(batch, *checkpoint);
  // 2. Devices an earlier attempt prepared that the allocation no longer has are released, then
  //    PrepareStarted of every fresh claim (and new pods of repeated ones) in one write.
  RecordStarted(batch);
  // 3. Prepare devices and write files; failures are rolled back claim by claim.
  std::vector<ClaimRecord> completed;
  std::vector<std::string> rolled_back;
  PrepareAll(batch, completed, rolled_back);
  // 4. PrepareCompleted of the whole batch in one durable write (with the rolled-back entries
  //    removed). If it fails, nothing of this batch counts as prepared: undo it all.
  RecordCompleted(batch, completed, rolled_back);
  // 5. status.devices of newly prepared claims, in commit order, off this thread.
  if (options_.status_writer != nullptr) {
    const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
    for (const ClaimRecord& record : completed) {
      QueueStatus({record.claim, ReadyDeviceStatuses(record, now)});
    }
  }
  Deliver(batch, calls);
  LogBatch(batch, start);
}

void ClaimPreparer::PrepareAsync(const std::vector<ClaimRef>& refs, PrepareDone done) {
  auto pending = std::make_unique<Pending>();
  pending->done = std::move(done);
  // Fetch first, outside every lock: API calls are slow and need no serialization.
  for (const ClaimRef& ref : refs) {
    if (pending->results.count(ref.uid) > 0) continue;
    PrepareResult& result = pending->results[ref.uid];
    if (ref.uid.empty() || ref.namespace_name.empty() || ref.name.empty()) {
      result.error = "the kubelet sent a claim without namespace, name or UID (" + ref.Display() +
                     ", UID \"" + ref.uid + "\")";
      continue;
    }
    // Checked before anything else sees the name: it becomes part of file paths.
    if (absl::Status names = internal::CheckClaimRef(ref); !names.ok()) {
      result.error = Message(names);
      log::Logger().Error(names, "Preparing claim failed", "claim", ref.Display(), "uid", ref.uid);
      continue;
    }
    absl::StatusOr<ResourceClaim> claim = claims_.GetClaim(ref.namespace_name, ref.name, ref.uid);
    if (!claim.ok()) {
      result.error = "fetching ResourceClaim " + ref.Display() + ": " + Message(claim.status());
      log::Logger().Error(claim.status(), "Preparing claim failed", "claim", ref.Display(), "uid",
                          ref.uid);
      continue;
    }
    pending->claims.emplace(ref.uid, *std::move(claim));
    pending->order.push_back(ref);
  }
  if (pending->order.empty()) {
    pending->done(std::move(pending->results));
    return;
  }
  {
    std::lock_guard lock(queue_mutex_);
    queue_.push_back(std::move(pending));
    if (committing_) return;  // The running committer takes it with its next batch.
    committing_ = true;
  }
  // This thread commits until the queue is empty: everything that arrives while a batch runs
  // goes into the next one.
  while (true) {
    std::vector<std::unique_ptr<Pending>> batch;
    {
      std::lock_guard lock(queue_mutex_);
      if (queue_.empty()) {
        committing_ = false;
        return;
      }
      batch.swap(queue_);
    }
    RunBatch(batch);
    for (auto& one : batch) one->done(std::move(one->results));
  }
}

std::map<std::string, PrepareResult> ClaimPreparer::Prepare(const std::vector<ClaimRef>& refs) {
  std::promise<std::map<std::string, PrepareResult>> promise;
  std::future<std::map<std::string, PrepareResult>> future = promise.get_future();
  PrepareAsync(refs, [&promise](std::map<std::string, PrepareResult> results) {
    promise.set_value(std::move(results));
  });
  return future.get();
}

std::map<std::string, std::string> ClaimPreparer::Unprepare(const std::vector<ClaimRef>& refs) {
  std::map<std::string, std::string> results;
  std::lock_guard lock(mutex_);
  SerializeLock file_lock(options_.serialize_lock_path);
  std::map<std::string, ClaimRecord> released;  // uid -> record, files and devices released
  std::optional<std::map<std::string, ClaimRecord>> checkpoint;
  for (const ClaimRef& ref : refs) {
    if (results.count(ref.uid) > 0) continue;
    std::string& error = results[ref.uid];
    if (!file_lock.status().ok()) {
      error = Message(file_lock.status());
      continue;
    }
    if (ref.uid.empty()) {
      error = "the kubelet sent a claim without a UID (" + ref.Display() + ")";
      continue;
    }
    if (!checkpoint) {
      absl::StatusOr<std::vector<ClaimRecord>> all = checkpoint_.List();
      if (!all.ok()) {
        error = "reading the checkpoint: " + Message(all.status());
        continue;
      }
      checkpoint.emplace();
      for (ClaimRecord& record : *all) {
        std::string uid = record.claim.uid;
        checkpoint->emplace(std::move(uid), std::move(record));
      }
    }
    auto it = checkpoint->find(ref.uid);
    if (it == checkpoint->end()) continue;  // Unknown or already unprepared.
    const ClaimRecord& record = it->second;
    const std::string who = "ResourceClaim " + record.claim.Display() + " (UID " + ref.uid + ")";
    absl::Status status;
    for (const PreparedDeviceRecord& device : record.devices) {
      status = WithContext(
          backend_.Unprepare({ref.uid, device.pool, device.device, device.share_id, device.config}),
          who + ": releasing device " + device.pool + "/" + device.device);
      if (!status.ok()) break;
    }
    if (status.ok()) status = WithContext(RemoveFiles(record), who);
    if (!status.ok()) {
      error = Message(status);
      continue;
    }
    released.emplace(ref.uid, record);
  }
  if (!released.empty()) {
    std::vector<std::string> deletes;
    for (const auto& [uid, record] : released) deletes.push_back(uid);
    absl::Status status = checkpoint_.Commit({}, deletes);
    for (const auto& [uid, record] : released) {
      if (!status.ok()) {
        results[uid] = Message(WithContext(status, "ResourceClaim " + record.claim.Display() +
                                                       " (UID " + uid +
                                                       "): removing checkpoint entry"));
      } else if (options_.status_writer != nullptr) {
        QueueStatus({record.claim, {}});
      }
    }
  }
  for (const auto& [uid, error] : results) {
    const ClaimRef* ref = nullptr;
    for (const ClaimRef& r : refs) {
      if (r.uid == uid) ref = &r;
    }
    if (!error.empty()) {
      log::Logger().Error(Internal(error), "Unpreparing claim failed", "claim", ref->Display(),
                          "uid", uid);
    } else {
      log::Logger().V(2).Info("Unprepared claim", "claim", ref->Display(), "uid", uid);
    }
  }
  return results;
}

namespace {

// IsClaimUid reports whether `s` has the shape of a Kubernetes UID (a UUID: 8-4-4-4-12 hex).
bool IsClaimUid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

}  // namespace

absl::Status ClaimPreparer::RefreshFiles() {
  std::lock_guard lock(mutex_);
  SerializeLock file_lock(options_.serialize_lock_path);
  DEVLET_RETURN_IF_ERROR(file_lock.status());
  absl::StatusOr<std::vector<ClaimRecord>> records = checkpoint_.List();
  if (!records.ok()) return WithContext(records.status(), "reading the checkpoint");
  std::vector<ClaimRecord> upgraded;
  for (ClaimRecord& record : *records) {
    if (record.state != ClaimState::kPrepareCompleted) continue;
    const std::string who = "claim " + record.claim.namespace_name + "/" + record.claim.name;
    DEVLET_RETURN_IF_ERROR(WithContext(EnsureFiles(record), who + ": refreshing its files"));
    const bool recorded = std::all_of(record.devices.begin(), record.devices.end(),
                                      [](const auto& d) { return d.container_edits.has_value(); });
    if (recorded)
      continue;
    // A record of an older devlet: record what the container path needs (edits resolved once,
    // the allocation's CPU/memory) so that it reads nothing else. A vendor device that no longer
    // resolves leaves the record as it was: containers naming the claim fail closed.
    ClaimFiles files = PlanFiles(options_, CdiKind(), ClaimSpecFileName(record.claim.uid), record);
    if (absl::Status status = RecordEdits(files, options_.vendor_cdi_dirs, record); !status.ok()) {
      log::Logger().Error(status, "Cannot record the container edits of a prepared claim", "claim",
                          record.claim.Display());
      continue;
    }
    AddConsumedCapacity(record);
    upgraded.push_back(std::move(record));
  }
  if (upgraded.empty())
    return absl::OkStatus();
  log::Logger().Info("Upgrading prepared claims of an older devlet", "claims", upgraded.size());
  return WithContext(checkpoint_.Commit(upgraded, {}), "upgrading the checkpoint");
}

void ClaimPreparer::AddConsumedCapacity(ClaimRecord& record) {
  // Only CPU devices carry capacity the NRI plugin enforces; reading the claim is worth it only
  // for them.
  const bool cpu = std::any_of(record.devices.begin(), record.devices.end(), [](const auto& d) {
    auto type = d.prepared.attributes.find("type");
    return type != d.prepared.attributes.end() &&
           type->second == AttributeValue(std::string("cpu"));
  });
  if (!cpu)
    return;
  absl::StatusOr<ResourceClaim> claim =
      claims_.GetClaim(record.claim.namespace_name, record.claim.name, record.claim.uid);
  if (!claim.ok() || claim->uid != record.claim.uid) {
    log::Logger().Error(claim.ok() ? NotFound("the claim has another UID now") : claim.status(),
                        "No allocated CPU/memory recorded for a prepared claim", "claim",
                        record.claim.Display());
    return;
  }
  for (PreparedDeviceRecord& device : record.devices) {
    for (const AllocationResult& result : claim->results) {
      if (result.pool == device.pool && result.device == device.device &&
          result.share_id == device.share_id) {
        device.cpu_millis = result.cpu_millis;
        device.memory_bytes = result.memory_bytes;
      }
    }
  }
}

absl::StatusOr<int> ClaimPreparer::RemoveOrphanedFiles() {
  std::lock_guard lock(mutex_);
  SerializeLock file_lock(options_.serialize_lock_path);
  DEVLET_RETURN_IF_ERROR(file_lock.status());
  absl::StatusOr<std::vector<ClaimRecord>> records = checkpoint_.List();
  if (!records.ok()) return WithContext(records.status(), "reading the checkpoint");
  std::set<std::string> specs;
  std::set<std::string> metadata;
  for (const ClaimRecord& record : *records) {
    specs.insert(record.cdi_spec_files.begin(), record.cdi_spec_files.end());
    metadata.insert(record.metadata_files.begin(), record.metadata_files.end());
  }
  int removed = 0;

  // Per-claim CDI specs: only names that carry our driver and a claim UID.
  const std::string claim_prefix = "k8s." + options_.driver_name + "-claim_";
  const std::string metadata_prefix = options_.driver_name + "_metadata_";
  absl::StatusOr<std::vector<std::string>> names = cdi_.ListSpecs();
  if (!names.ok() && names.status().code() != absl::StatusCode::kUnimplemented) {
    return WithContext(names.status(), "listing the CDI root");
  }
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>{}) {
    if (specs.contains(name) || !name.ends_with(".json")) continue;
    const std::string_view stem = std::string_view(name).substr(0, name.size() - 5);
    bool ours = false;
    if (stem.starts_with(claim_prefix)) {
      ours = IsClaimUid(stem.substr(claim_prefix.size()));
    } else if (stem.starts_with(metadata_prefix)) {
      std::string_view rest = stem.substr(metadata_prefix.size());  // <uid>_<request>
      ours = rest.size() > 37 && rest[36] == '_' && IsClaimUid(rest.substr(0, 36)) &&
             rest.substr(37).find('_') == std::string_view::npos;
    }
    if (!ours) continue;
    DEVLET_RETURN_IF_ERROR(WithContext(cdi_.RemoveSpec(name), "removing orphaned CDI spec"));
    log::Logger().Info("Removed a CDI spec no checkpoint record references", "file", name);
    ++removed;
  }

  // Device-metadata files: <data dir>/dra-device-metadata/<ns>_<claim>/<request>/metadata.json.
  if (!options_.plugin_data_dir.empty()) {
    const std::string root = options_.plugin_data_dir + "/dra-device-metadata";
    DEVLET_ASSIGN_OR_RETURN(auto claims, internal::ListDirectory(root));
    for (const auto& [claim_dir, claim_is_dir] : claims) {
      if (!claim_is_dir || claim_dir.find('_') == std::string::npos) continue;
      const std::string claim_path = root + "/" + claim_dir;
      DEVLET_ASSIGN_OR_RETURN(auto requests, internal::ListDirectory(claim_path));
      for (const auto& [request_dir, request_is_dir] : requests) {
        if (!request_is_dir) continue;
        const std::string request_path = claim_path + "/" + request_dir;
        const std::string file = request_path + "/metadata.json";
        if (!metadata.contains(file) && internal::IsRegularFile(file)) {
          DEVLET_RETURN_IF_ERROR(WithContext(internal::RemoveFile(file),
                                             "removing orphaned device metadata"));
          log::Logger().Info("Removed a device-metadata file no checkpoint record references",
                             "file", file);
          ++removed;
        }
        internal::RemoveEmptyDirectory(request_path);
      }
      internal::RemoveEmptyDirectory(claim_path);
    }
  }
  return removed;
}

absl::Status ClaimPreparer::UpdateNetworkData(const std::string& claim_uid,
                                              const std::vector<DeviceNetworkUpdate>& updates) {
  std::lock_guard lock(mutex_);  // Serialized with batches and unprepare: one record writer.
  SerializeLock file_lock(options_.serialize_lock_path);
  DEVLET_RETURN_IF_ERROR(file_lock.status());
  DEVLET_ASSIGN_OR_RETURN(std::optional<ClaimRecord> found, checkpoint_.Get(claim_uid));
  if (!found) {
    return NotFound("claim UID " + claim_uid + " is not prepared on this node");
  }
  ClaimRecord record = *std::move(found);
  const std::string who = "ResourceClaim " + record.claim.Display() + " (UID " + claim_uid + ")";
  if (record.state != ClaimState::kPrepareCompleted) {
    return FailedPrecondition(who + " is still being prepared");
  }
  DEVLET_RETURN_IF_ERROR(internal::CheckRecordNames(record));  // its files are rewritten below
  bool changed = false;
  for (const DeviceNetworkUpdate& update : updates) {
    auto it = std::find_if(record.devices.begin(), record.devices.end(),
                           [&](const PreparedDeviceRecord& d) {
                             return d.pool == update.pool && d.device == update.device &&
                                    d.share_id == update.share_id;
                           });
    if (it == record.devices.end()) {
      return InvalidArgument(who + " has no prepared device " + update.pool + "/" + update.device);
    }
    if (it->prepared.network_data != update.network_data) {
      it->prepared.network_data = update.network_data;
      changed = true;
    }
  }
  if (!changed) return absl::OkStatus();
  ++record.metadata_generation;
  // The record first: if the files cannot be written now, a repeated prepare writes them from it.
  DEVLET_RETURN_IF_ERROR(WithContext(checkpoint_.Put(record), who + ": recording network data"));
  DEVLET_RETURN_IF_ERROR(WithContext(EnsureFiles(record), who + ": updating device metadata"));
  if (options_.status_writer != nullptr) {
    QueueStatus({record.claim,
                 ReadyDeviceStatuses(record, static_cast<std::int64_t>(std::time(nullptr)))});
  }
  log::Logger().V(2).Info("Recorded network data", "claim", record.claim.Display(), "uid",
                          claim_uid, "devices", updates.size(), "metadataGeneration",
                          record.metadata_generation);
  return absl::OkStatus();
}

// ---- ResourceClaim status ----------------------------------------------------------------------

std::vector<DeviceStatus> ReadyDeviceStatuses(const ClaimRecord& record, std::int64_t now_unix) {
  std::vector<DeviceStatus> out;
  for (const PreparedDeviceRecord& device : record.devices) {
    DeviceStatus status;
    status.pool = device.pool;
    status.device = device.device;
    status.share_id = device.share_id;
    status.conditions.push_back({std::string(kReadyConditionType), "True", "Prepared",
                                 "the device is prepared on this node", now_unix});
    status.network_data = device.prepared.network_data;
    out.push_back(std::move(status));
  }
  return out;
}

void ClaimPreparer::QueueStatus(StatusUpdate update) {
  {
    std::lock_guard lock(status_mutex_);
    if (status_stop_) return;
    // Only the newest state of a claim matters: a queued older write is replaced in place.
    bool replaced = false;
    for (StatusUpdate& queued : status_queue_) {
      if (queued.claim.uid == update.claim.uid) {
        queued = update;
        replaced = true;
      }
    }
    if (!replaced) status_queue_.push_back(std::move(update));
  }
  status_cv_.notify_all();
}

void ClaimPreparer::RunStatusWriter() {
  std::unique_lock lock(status_mutex_);
  while (true) {
    status_cv_.wait(lock, [this] { return status_stop_ || !status_queue_.empty(); });
    if (status_stop_) return;
    StatusUpdate update = std::move(status_queue_.front());
    status_queue_.pop_front();
    status_busy_ = true;
    lock.unlock();
    absl::Status status = options_.status_writer->SetDeviceStatus(update.claim, update.devices);
    if (!status.ok()) {
      // Best effort: the claim works without it; NotFound after an unprepare is the usual case
      // of a deleted claim.
      if (update.devices.empty() && absl::IsNotFound(status)) {
        log::Logger().V(2).Info("ResourceClaim is gone; no status to clear", "claim",
                                update.claim.Display(), "uid", update.claim.uid);
      } else {
        log::Logger().Error(status, "Writing ResourceClaim status.devices failed", "claim",
                            update.claim.Display(), "uid", update.claim.uid, "devices",
                            update.devices.size());
      }
    }
    lock.lock();
    status_busy_ = false;
    status_cv_.notify_all();
  }
}

void ClaimPreparer::WaitForStatusWrites() {
  std::unique_lock lock(status_mutex_);
  status_cv_.wait(lock,
                  [this] { return status_stop_ || (status_queue_.empty() && !status_busy_); });
}

}  // namespace devlet::dra_kubelet
