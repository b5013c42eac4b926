#include "devlet/nri/devlet_plugin.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/nri/cpuset.h"
#include "devlet/state/container_marker.h"

namespace devlet::nri {
namespace {

std::string ClaimName(const PreparedClaim& claim) {
  return claim.namespace_name + "/" + claim.name;
}

std::string EnvKey(std::string_view entry) { return std::string(entry.substr(0, entry.find('='))); }

// MarkedClaims lists the claims the container names: the devlet markers in its environment,
// which the runtime copied from the CDI devices the kubelet gave this container only.
std::string MarkedClaims(const std::vector<state::DeviceMarker>& markers) {
  std::vector<std::string> uids;
  for (const state::DeviceMarker& marker : markers) {
    if (std::find(uids.begin(), uids.end(), marker.claim_uid) == uids.end()) {
      uids.push_back(marker.claim_uid);
    }
  }
  std::string text = uids.size() == 1 ? "claim " : "claims ";
  for (size_t i = 0; i < uids.size(); ++i) text += (i > 0 ? ", " : "") + uids[i];
  return text;
}

// Accumulates one container's adjustment, skipping whatever the container already has.
class AdjustmentBuilder {
 public:
  explicit AdjustmentBuilder(const api::Container& container) {
    for (const auto& mount : container.mounts()) {
      mounts_.insert(mount.destination());
    }
    for (const auto& device : container.linux().devices()) {
      devices_.insert(device.path());
    }
    for (const auto& env : container.env()) {
      env_.insert(env);  // exact KEY=value: identical entries are skipped
    }
  }

  void AddCdiName(const std::string& name) {
    if (cdi_.insert(name).second) {
      adjust_.add_cdi_devices()->set_name(name);
    }
  }

  absl::Status AddEdits(const CdiEdits& edits, const std::string& what) {
    for (const std::string& env : edits.env) {
      if (env.find('=') == std::string::npos) {
        return InvalidArgument(what + ": env entry \"" + env + "\" is not KEY=value");
      }
      if (env_.insert(env).second && env_keys_.insert(EnvKey(env)).second) {
        auto* kv = adjust_.add_env();
        kv->set_key(EnvKey(env));
        kv->set_value(env.substr(env.find('=') + 1));
      }
    }
    for (const CdiDeviceNode& node : edits.device_nodes) {
      DEVLET_RETURN_IF_ERROR(AddDevice(node, what));
    }
    for (const CdiMount& mount : edits.mounts) {
      AddMount(mount.container_path, mount.host_path, mount.type.empty() ? "bind" : mount.type,
               mount.options.empty() ? std::vector<std::string>{"bind"} : mount.options);
    }
    for (const CdiHook& hook : edits.hooks) {
      api::Hook* out = nullptr;
      auto* hooks = adjust_.mutable_hooks();
      if (hook.hook_name == "prestart") {
        out = hooks->add_prestart();
      } else if (hook.hook_name == "createRuntime") {
        out = hooks->add_create_runtime();
      } else if (hook.hook_name == "createContainer") {
        out = hooks->add_create_container();
      } else if (hook.hook_name == "startContainer") {
        out = hooks->add_start_container();
      } else if (hook.hook_name == "poststart") {
        out = hooks->add_poststart();
      } else if (hook.hook_name == "poststop") {
        out = hooks->add_poststop();
      } else {
        return InvalidArgument(what + ": unknown hook stage \"" + hook.hook_name + "\"");
      }
      out->set_path(hook.path);
      for (const auto& arg : hook.args) {
        out->add_args(arg);
      }
      for (const auto& env : hook.env) {
        out->add_env(env);
      }
      if (hook.timeout) {
        out->mutable_timeout()->set_value(*hook.timeout);
      }
    }
    return absl::OkStatus();
  }

  void AddMount(const std::string& destination, const std::string& source, const std::string& type,
                const std::vector<std::string>& options) {
    if (!mounts_.insert(destination).second) {
      return;
    }
    auto* mount = adjust_.add_mounts();
    mount->set_destination(destination);
    mount->set_source(source);
    mount->set_type(type);
    for (const auto& option : options) {
      mount->add_options(option);
    }
  }

  api::ContainerAdjustment& adjust() { return adjust_; }

 private:
  absl::Status AddDevice(const CdiDeviceNode& node, const std::string& what) {
    if (node.path.empty()) {
      return InvalidArgument(what + ": device node without a path");
    }
    if (!devices_.insert(node.path).second) {
      return absl::OkStatus();
    }
    std::string type = node.type;
    int64_t dev_major = node.major;
    int64_t dev_minor = node.minor;
    std::optional<uint32_t> mode = node.file_mode;
    if (type.empty() || ((type == "c" || type == "b") && (dev_major < 0 || dev_minor < 0))) {
      const std::string& host = node.host_path.empty() ? node.path : node.host_path;
      struct stat st {};
      if (::stat(host.c_str(), &st) != 0) {
        return WithContext(ErrnoToStatus(errno, "stat " + host),
                           what + ": resolving device node " + node.path);
      }
      if (S_ISCHR(st.st_mode)) {
        type = "c";
      } else if (S_ISBLK(st.st_mode)) {
        type = "b";
      } else {
        return InvalidArgument(what + ": " + host + " is not a device node");
      }
      dev_major = static_cast<int64_t>(major(st.st_rdev));
      dev_minor = static_cast<int64_t>(minor(st.st_rdev));
      if (!mode) {
        mode = st.st_mode & 07777;
      }
    }
    auto* device = adjust_.mutable_linux()->add_devices();
    device->set_path(node.path);
    device->set_type(type);
    device->set_major(dev_major);
    device->set_minor(dev_minor);
    if (mode) {
      device->mutable_file_mode()->set_value(*mode);
    }
    if (node.uid) {
      device->mutable_uid()->set_value(*node.uid);
    }
    if (node.gid) {
      device->mutable_gid()->set_value(*node.gid);
    }
    return absl::OkStatus();
  }

  api::ContainerAdjustment adjust_;
  std::set<std::string> mounts_;
  std::set<std::string> devices_;
  std::set<std::string> env_;
  std::set<std::string> env_keys_;
  std::set<std::string> cdi_;
};

// The CFS period the kubelet uses when a container has none.
constexpr uint64_t kDefaultCfsPeriod = 100000;

// ApplyAllocatedLimits turns CPU (millicpus) and memory (bytes) that DRA allocated into limits
// on `out`, as the kubelet turns requests and limits into cgroup values: quota = millis * period
// / 1000, shares = millis * 1024 / 1000 (at least 2). Limits the container already has that are
// stricter (a smaller positive quota or memory limit) are kept: devlet enforces the allocation,
// it never loosens what the pod asked for. Shares are only raised.
void ApplyAllocatedLimits(const api::LinuxResources& current, int64_t cpu_millis,
                          int64_t memory_limit, api::LinuxResources* out) {
  if (cpu_millis > 0) {
    const auto& cpu = current.cpu();
    const uint64_t period =
        cpu.has_period() && cpu.period().value() > 0 ? cpu.period().value() : kDefaultCfsPeriod;
    const int64_t quota = cpu_millis * static_cast<int64_t>(period) / 1000;
    const bool stricter =
        cpu.has_quota() && cpu.quota().value() > 0 && cpu.quota().value() <= quota;
    if (!stricter) {
      out->mutable_cpu()->mutable_quota()->set_value(std::max<int64_t>(quota, 1000));
      out->mutable_cpu()->mutable_period()->set_value(period);
    }
    const uint64_t shares = std::max<uint64_t>(2, static_cast<uint64_t>(cpu_millis) * 1024 / 1000);
    if (!cpu.has_shares() || cpu.shares().value() < shares) {
      out->mutable_cpu()->mutable_shares()->set_value(shares);
    }
  }
  if (memory_limit > 0) {
    const auto& memory = current.memory();
    const bool stricter = memory.has_limit() && memory.limit().value() > 0 &&
                          memory.limit().value() <= memory_limit;
    if (!stricter) {
      out->mutable_memory()->mutable_limit()->set_value(memory_limit);
    }
  }
}

}  // namespace

absl::StatusOr<CdiPolicy> ParseCdiPolicy(std::string_view text) {
  if (text == "auto") return CdiPolicy::kAuto;
  if (text == "names") return CdiPolicy::kDeviceNames;
  if (text == "edits") return CdiPolicy::kEdits;
  if (text == "none") return CdiPolicy::kNone;
  return InvalidArgument("CDI policy \"" + std::string(text) +
                         "\" must be one of auto, names, edits, none");
}

bool HasExclusiveCpus(const api::Container& container) {
  const auto& cpu = container.linux().resources().cpu();
  if (cpu.cpus().empty() || !cpu.has_quota() || !cpu.has_period()) {
    return false;
  }
  const int64_t quota = cpu.quota().value();
  const uint64_t period = cpu.period().value();
  if (quota <= 0 || period == 0 || static_cast<uint64_t>(quota) % period != 0) {
    return false;
  }
  absl::StatusOr<CpuSet> cpus = ParseCpuList(cpu.cpus());
  return cpus.ok() && cpus->size() == static_cast<uint64_t>(quota) / period;
}

DevletPlugin::DevletPlugin(const PreparedClaimsView* view, DevletPluginOptions options)
    : view_(view), options_(std::move(options)) {}

CdiPolicy DevletPlugin::effective_cdi_policy() const {
  std::optional<RuntimeInfo> runtime;
  {
    std::lock_guard<std::mutex> lock(mu_);
    runtime = runtime_;
  }
  const bool names_ok = runtime && SupportsCdiDeviceAdjustment(runtime->nri_version);
  switch (options_.cdi_policy) {
    case CdiPolicy::kAuto:
    case CdiPolicy::kDeviceNames:
      return names_ok ? CdiPolicy::kDeviceNames : CdiPolicy::kEdits;
    default:
      return options_.cdi_policy;
  }
}

absl::StatusOr<api::ContainerAdjustment> DevletPlugin::BuildAdjustment(
    const api::PodSandbox& pod, const api::Container& container) const {
  return Build(pod, container, nullptr);
}

absl::StatusOr<api::ContainerAdjustment> DevletPlugin::Build(const api::PodSandbox& pod,
                                                             const api::Container& container,
                                                             ContainerRecord* record) const {
  // The devices the container names (state/container_marker.h). A container naming none gets
  // nothing, and the prepared claims are not even read: init containers and sidecars that do not
  // list a claim in their resources never get its devices, metadata, CPUs or memory.
  std::vector<state::DeviceMarker> markers;
  for (const std::string& entry : container.env()) {
    DEVLET_ASSIGN_OR_RETURN(std::optional<state::DeviceMarker> marker,
                            state::ParseContainerMarker(entry));
    if (marker) markers.push_back(*std::move(marker));
  }
  if (markers.empty()) {
    return api::ContainerAdjustment();
  }
  // Fail closed: a container that named a claim never starts without what devlet prepared.
  std::vector<std::string> named;
  for (const state::DeviceMarker& marker : markers) {
    if (std::find(named.begin(), named.end(), marker.claim_uid) == named.end()) {
      named.push_back(marker.claim_uid);
    }
  }
  absl::StatusOr<std::vector<PreparedClaim>> read =
      view_->ClaimsNamedByContainer(pod.uid(), named);
  if (!read.ok()) {
    return WithContext(read.status(), "reading the prepared " + MarkedClaims(markers));
  }
  const std::vector<PreparedClaim>& claims = *read;
  // selected[c][d]: the container gets device d of claim c.
  std::vector<std::vector<bool>> selected(claims.size());
  for (size_t c = 0; c < claims.size(); ++c) selected[c].assign(claims[c].devices.size(), false);
  for (const state::DeviceMarker& marker : markers) {
    size_t c = 0;
    while (c < claims.size() && claims[c].uid != marker.claim_uid) ++c;
    if (c == claims.size()) {
      return FailedPrecondition("the container names device " + state::DeviceMarkerText(marker) +
                                ", but devlet has not prepared that claim for this pod");
    }
    const PreparedClaim& claim = claims[c];
    if (!claim.error.empty()) {
      return Unavailable("claim " + ClaimName(claim) + " (uid " + claim.uid + "): " + claim.error);
    }
    size_t d = 0;
    while (d < claim.devices.size() &&
           (claim.devices[d].device != marker.device || claim.devices[d].pool != marker.pool ||
            claim.devices[d].share_id != marker.share_id)) {
      ++d;
    }
    if (d == claim.devices.size()) {
      return FailedPrecondition("the container names device " + state::DeviceMarkerText(marker) +
                                ", but claim " + ClaimName(claim) +
                                " was prepared without that device");
    }
    selected[c][d] = true;
  }
  const CdiPolicy policy = effective_cdi_policy();
  AdjustmentBuilder builder(container);
  CpuSet numa_nodes;
  CpuSet claim_cpus;
  CpuSet claim_mems;
  int64_t memory_limit = 0;
  int64_t cpu_millis = 0;
  for (size_t c = 0; c < claims.size(); ++c) {
    const PreparedClaim& claim = claims[c];
    if (std::find(selected[c].begin(), selected[c].end(), true) == selected[c].end()) {
      continue;
    }
    const std::string what = "claim " + ClaimName(claim);
    for (size_t d = 0; d < claim.devices.size(); ++d) {
      if (!selected[c][d]) continue;
      const PreparedDevice& device = claim.devices[d];
      cpu_millis += device.cpu_millis.value_or(0);
      memory_limit += device.memory_limit_bytes.value_or(0);
      numa_nodes.insert(device.numa_nodes.begin(), device.numa_nodes.end());
      if (policy == CdiPolicy::kDeviceNames) {
        for (const std::string& name : device.cdi_device_names) {
          builder.AddCdiName(name);
        }
      } else if (policy == CdiPolicy::kEdits) {
        DEVLET_RETURN_IF_ERROR(builder.AddEdits(device.edits, what + " device " + device.device));
      }
    }
    if (policy == CdiPolicy::kEdits) {
      DEVLET_RETURN_IF_ERROR(builder.AddEdits(claim.claim_edits, what));
    }
    for (const FileMount& mount : claim.metadata_mounts) {
      builder.AddMount(mount.container_path, mount.host_path, "bind", {"bind", "ro"});
    }
    size_t claim_cpu_count = 0;
    if (!claim.cpuset.empty()) {
      absl::StatusOr<CpuSet> cpus = ParseCpuList(claim.cpuset);
      if (!cpus.ok()) {
        return WithContext(cpus.status(), what + " field cpuset");
      }
      claim_cpu_count = cpus->size();
      claim_cpus = Union(claim_cpus, *cpus);
    }
    if (!claim.mems.empty()) {
      absl::StatusOr<CpuSet> mems = ParseCpuList(claim.mems);
      if (!mems.ok()) {
        return WithContext(mems.status(), what + " field mems");
      }
      claim_mems = Union(claim_mems, *mems);
    }
    if (claim.memory_limit_bytes) {
      memory_limit += *claim.memory_limit_bytes;
    }
    if (claim.cpu_millis) {
      cpu_millis += *claim.cpu_millis;
    } else {
      cpu_millis += 1000 * static_cast<int64_t>(claim_cpu_count);
    }
  }

  api::ContainerAdjustment& adjust = builder.adjust();
  std::string cpus;
  std::string mems;
  if (!claim_cpus.empty()) {
    // CPUs DRA allocated: exactly those, on their memory nodes.
    cpus = FormatCpuList(claim_cpus);
    if (claim_mems.empty()) {
      for (const auto& [node, list] : options_.numa_cpus) {
        absl::StatusOr<CpuSet> node_cpus = ParseCpuList(list);
        if (node_cpus.ok() && !Intersect(*node_cpus, claim_cpus).empty()) {
          claim_mems.insert(node);
        }
      }
    }
    mems = FormatCpuList(claim_mems);
  } else if (options_.align_cpus && !numa_nodes.empty() && !HasExclusiveCpus(container)) {
    CpuSet node_cpus;
    bool topology_known = true;
    for (int node : numa_nodes) {
      auto it = options_.numa_cpus.find(node);
      if (it == options_.numa_cpus.end()) {
        topology_known = false;
        break;
      }
      absl::StatusOr<CpuSet> list = ParseCpuList(it->second);
      if (!list.ok()) {
        return WithContext(list.status(), "NUMA node " + std::to_string(node) + " CPUs");
      }
      node_cpus = Union(node_cpus, *list);
    }
    if (topology_known && !options_.online_cpus.empty()) {
      absl::StatusOr<CpuSet> online = ParseCpuList(options_.online_cpus);
      if (!online.ok()) {
        return WithContext(online.status(), "the host's online CPUs");
      }
      node_cpus = Intersect(node_cpus, *online);
    }
    // Alignment only ever narrows: the container keeps the kubelet's cpuset (an exclusive one
    // the kubelet did not quote in CFS terms, since DisableCPUQuotaWithExclusiveCPUs, or the
    // shared pool) when none of the devices' NUMA CPUs is in it or online. Widening it would
    // take CPUs the host lacks or that are another container's, and memory nodes the kernel may
    // not have; cpus and mems are then both left alone.
    bool aligned = true;
    if (topology_known) {
      CpuSet chosen = node_cpus;
      absl::StatusOr<CpuSet> current = ParseCpuList(container.linux().resources().cpu().cpus());
      if (current.ok() && !current->empty()) {
        chosen = Intersect(*current, node_cpus);
      }
      aligned = !chosen.empty();
      if (aligned) cpus = FormatCpuList(chosen);
    }
    if (aligned) mems = FormatCpuList(numa_nodes);
  }
  if (!cpus.empty() || !mems.empty()) {
    auto* cpu = adjust.mutable_linux()->mutable_resources()->mutable_cpu();
    cpu->set_cpus(cpus);
    cpu->set_mems(mems);
  }
  if (record != nullptr) {
    record->cpus = cpus;
    record->mems = mems;
    record->cpu_millis = cpu_millis;
    record->memory_limit_bytes = memory_limit;
  }
  ApplyAllocatedLimits(container.linux().resources(), cpu_millis, memory_limit,
                       adjust.mutable_linux()->mutable_resources());
  if (adjust.linux().resources().ByteSizeLong() == 0) {
    adjust.mutable_linux()->clear_resources();
  }
  if (adjust.linux().ByteSizeLong() == 0) {
    adjust.clear_linux();
  }
  return adjust;
}

absl::Status DevletPlugin::Configure(const RuntimeInfo& runtime) {
  std::lock_guard<std::mutex> lock(mu_);
  runtime_ = runtime;
  return absl::OkStatus();
}

void DevletPlugin::RecordPod(const api::PodSandbox& pod) {
  PodRecord& record = pods_[pod.uid()];
  record.id = pod.id();
  record.uid = pod.uid();
  record.namespace_name = pod.namespace_();
  record.name = pod.name();
  pod_uid_by_sandbox_[pod.id()] = pod.uid();
}

absl::StatusOr<std::vector<api::ContainerUpdate>> DevletPlugin::Synchronize(
    const std::vector<api::PodSandbox>& pods, const std::vector<api::Container>& containers) {
  std::map<std::string, const api::PodSandbox*> by_sandbox;
  for (const auto& pod : pods) {
    by_sandbox[pod.id()] = &pod;
  }
  // What devlet would have set, recomputed from the prepared claims (nothing is re-applied).
  std::map<std::string, ContainerRecord> rebuilt;
  for (const auto& container : containers) {
    ContainerRecord record;
    record.id = container.id();
    record.name = container.name();
    record.stopped = container.state() == api::CONTAINER_STOPPED;
    auto pod = by_sandbox.find(container.pod_sandbox_id());
    if (pod != by_sandbox.end()) {
      record.pod_uid = pod->second->uid();
      ContainerRecord owned;
      if (Build(*pod->second, container, &owned).ok()) {
        record.cpus = owned.cpus;
        record.mems = owned.mems;
        record.cpu_millis = owned.cpu_millis;
        record.memory_limit_bytes = owned.memory_limit_bytes;
      }
    }
    rebuilt[record.id] = std::move(record);
  }
  std::lock_guard<std::mutex> lock(mu_);
  pods_.clear();
  pod_uid_by_sandbox_.clear();
  for (const auto& pod : pods) {
    RecordPod(pod);
  }
  containers_ = std::move(rebuilt);
  log::Logger().V(2).Info("NRI synchronized", "pods", pods.size(), "containers",
                          containers.size());
  return std::vector<api::ContainerUpdate>{};
}

absl::Status DevletPlugin::RunPodSandbox(const api::PodSandbox& pod) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    RecordPod(pod);
  }
  // Outside our lock: the node state writes files (and must not block CreateContainer of others).
  PodNetwork network;
  network.pod_uid = pod.uid();
  network.namespace_name = pod.namespace_();
  network.name = pod.name();
  network.ips.assign(pod.ips().begin(), pod.ips().end());
  for (const auto& ns : pod.linux().namespaces()) {
    if (ns.type() == "network") network.netns_path = ns.path();
  }
  return WithContext(view_->PodNetworkReady(network),
                     "devlet: pod " + pod.namespace_() + "/" + pod.name() + " network");
}

absl::Status DevletPlugin::StopPodSandbox(const api::PodSandbox& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(pod.uid());
  if (it != pods_.end()) {
    it->second.stopped = true;
  }
  return absl::OkStatus();
}

absl::Status DevletPlugin::RemovePodSandbox(const api::PodSandbox& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_.erase(pod.uid());
  pod_uid_by_sandbox_.erase(pod.id());
  for (auto it = containers_.begin(); it != containers_.end();) {
    it = it->second.pod_uid == pod.uid() ? containers_.erase(it) : std::next(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<api::CreateContainerResponse> DevletPlugin::CreateContainer(
    const api::PodSandbox& pod, const api::Container& container) {
  ContainerRecord record;
  absl::StatusOr<api::ContainerAdjustment> adjust = Build(pod, container, &record);
  if (!adjust.ok()) {
    return WithContext(adjust.status(), "devlet: container " + container.name() + " of pod " +
                                            pod.namespace_() + "/" + pod.name());
  }
  record.id = container.id();
  record.pod_uid = pod.uid();
  record.name = container.name();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pods_.find(pod.uid()) == pods_.end()) {
      RecordPod(pod);  // A pod devlet never saw start (e.g. subscribed late): learn it now.
    }
    containers_[record.id] = std::move(record);
  }
  api::CreateContainerResponse response;
  *response.mutable_adjust() = std::move(*adjust);
  return response;
}

absl::StatusOr<api::UpdateContainerResponse> DevletPlugin::UpdateContainer(
    const api::PodSandbox&, const api::Container& container,
    const api::LinuxResources& resources) {
  api::UpdateContainerResponse response;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(container.id());
  if (it == containers_.end()) {
    return response;
  }
  const ContainerRecord& record = it->second;
  // Keep devlet's placement and the limits of what DRA allocated over the kubelet's update
  // (CPU manager reconcile, in-place resize): rewrite the pending update of this container.
  api::LinuxResources owned;
  if ((!record.cpus.empty() || !record.mems.empty()) &&
      (resources.cpu().cpus() != record.cpus || resources.cpu().mems() != record.mems)) {
    owned.mutable_cpu()->set_cpus(record.cpus);
    owned.mutable_cpu()->set_mems(record.mems);
  }
  ApplyAllocatedLimits(resources, record.cpu_millis, record.memory_limit_bytes, &owned);
  // Values the update already carries need no rewrite.
  if (owned.cpu().has_quota() && resources.cpu().has_quota() &&
      owned.cpu().quota().value() == resources.cpu().quota().value() &&
      owned.cpu().period().value() == resources.cpu().period().value()) {
    owned.mutable_cpu()->clear_quota();
    owned.mutable_cpu()->clear_period();
  }
  if (owned.memory().has_limit() && resources.memory().has_limit() &&
      owned.memory().limit().value() == resources.memory().limit().value()) {
    owned.mutable_memory()->clear_limit();
  }
  if (owned.ByteSizeLong() == 0) {
    return response;
  }
  auto* update = response.add_update();
  update->set_container_id(container.id());
  *update->mutable_linux()->mutable_resources() = std::move(owned);
  return response;
}

absl::StatusOr<api::StopContainerResponse> DevletPlugin::StopContainer(
    const api::PodSandbox&, const api::Container& container) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(container.id());
  if (it != containers_.end()) {
    it->second.stopped = true;
  }
  return api::StopContainerResponse();
}

absl::Status DevletPlugin::RemoveContainer(const api::PodSandbox&,
                                           const api::Container& container) {
  std::lock_guard<std::mutex> lock(mu_);
  containers_.erase(container.id());
  return absl::OkStatus();
}

std::optional<PodRecord> DevletPlugin::pod(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(uid);
  return it == pods_.end() ? std::nullopt : std::optional<PodRecord>(it->second);
}

std::optional<ContainerRecord> DevletPlugin::container(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(id);
  return it == containers_.end() ? std::nullopt : std::optional<ContainerRecord>(it->second);
}

size_t DevletPlugin::pod_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pods_.size();
}

size_t DevletPlugin::container_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return containers_.size();
}

Handlers DevletPlugin::MakeHandlers() {
  Handlers h;
  h.configure = [this](const RuntimeInfo& runtime, std::string_view) { return Configure(runtime); };
  h.synchronize = [this](const std::vector<api::PodSandbox>& pods,
                         const std::vector<api::Container>& containers) {
    return Synchronize(pods, containers);
  };
  h.run_pod_sandbox = [this](const api::PodSandbox& pod) { return RunPodSandbox(pod); };
  h.stop_pod_sandbox = [this](const api::PodSandbox& pod) { return StopPodSandbox(pod); };
  h.remove_pod_sandbox = [this](const api::PodSandbox& pod) { return RemovePodSandbox(pod); };
  h.create_container = [this](const api::PodSandbox& pod, const api::Container& container) {
    return CreateContainer(pod, container);
  };
  h.update_container = [this](const api::PodSandbox& pod, const api::Container& container,
                              const api::LinuxResources& resources) {
    return UpdateContainer(pod, container, resources);
  };
  h.stop_container = [this](const api::PodSandbox& pod, const api::Container& container) {
    return StopContainer(pod, container);
  };
  h.remove_container = [this](const api::PodSandbox& pod, const api::Container& container) {
    return RemoveContainer(pod, container);
  };
  return h;
}

}  // namespace devlet::nri
