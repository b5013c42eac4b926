#include "devlet/node/agent.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>
#include <vector>

#include "devlet/cdi/spec_dir.h"
#include "devlet/common/files.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/devices/health.h"
#include "devlet/devices/sysfs.h"
#include "devlet/dra_kubelet/claim_status.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/node/adapters.h"
#include "devlet/node/slices.h"
#include "devlet/nri/cpuset.h"
#include "devlet/nri/stub.h"

namespace devlet::node {

std::map<int, std::string> NumaCpuLists(const devices::CpuTopology& cpu) {
  std::map<int, std::string> out;
  for (const devices::NumaNode& numa : cpu.numa_nodes) {
    nri::CpuSet set(numa.cpus.begin(), numa.cpus.end());
    out[numa.id] = nri::FormatCpuList(set);
  }
  return out;
}

namespace {

// Context adds `what` to the error of a StatusOr.
template <typename T>
absl::StatusOr<T> Context(absl::StatusOr<T> value, std::string_view what) {
  if (!value.ok()) return WithContext(value.status(), what);
  return value;
}

// ReadBootId reads the boot's identity from `path` (the kernel's boot_id: one line); empty path:
// none.
absl::StatusOr<std::string> ReadBootId(const std::string& path) {
  if (path.empty()) return std::string();
  DEVLET_ASSIGN_OR_RETURN(std::optional<std::string> content,
                          Context(ReadFileIfExists(path), "reading the boot id"));
  std::string id = content.value_or("");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  if (id.empty()) {
    return FailedPrecondition("the boot id file " + path + " is missing or empty " +
                              "(--boot-id-file=\"\" turns reboot detection off)");
  }
  return id;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string NowRfc3339() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

// MeteredBackend counts and times the device preparations of the backend it wraps.
class MeteredBackend final : public dra_kubelet::DeviceBackend {
 public:
  MeteredBackend(dra_kubelet::DeviceBackend& inner, MetricsRegistry& metrics)
      : inner_(inner), metrics_(metrics) {}

  absl::StatusOr<dra_kubelet::PreparedDevice> Prepare(
      const dra_kubelet::DevicePrepareRequest& request) override {
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<dra_kubelet::PreparedDevice> out = inner_.Prepare(request);
    metrics_.Observe(kPrepareDurationMetric, {}, SecondsSince(start));
    metrics_.Add(kPrepareTotalMetric, {{"result", out.ok() ? "success" : "error"}});
    return out;
  }

  absl::Status Unprepare(const dra_kubelet::DeviceUnprepareRequest& request) override {
    auto start = std::chrono::steady_clock::now();
    absl::Status out = inner_.Unprepare(request);
    metrics_.Observe(kUnprepareDurationMetric, {}, SecondsSince(start));
    metrics_.Add(kUnprepareTotalMetric, {{"result", out.ok() ? "success" : "error"}});
    return out;
  }

  bool PreparedStateSurvivesReboot() const override {
    return inner_.PreparedStateSurvivesReboot();
  }

 private:
  dra_kubelet::DeviceBackend& inner_;
  MetricsRegistry& metrics_;
};

// Timed wraps an NRI handler so that each event is counted and timed under `event`.
template <typename R, typename... Args>
std::function<R(Args...)> Timed(std::function<R(Args...)> handler, std::string event,
                                MetricsRegistry& metrics) {
  if (!handler) return handler;
  return [handler = std::move(handler), event = std::move(event), &metrics](Args... args) -> R {
    auto start = std::chrono::steady_clock::now();
    R result = handler(std::forward<Args>(args)...);
    metrics.Observe(kNriDurationMetric, {{"event", event}}, SecondsSince(start));
    metrics.Add(kNriEventsMetric, {{"event", event}, {"result", result.ok() ? "success" : "error"}});
    return result;
  };
}

nri::Handlers TimedHandlers(nri::Handlers h, MetricsRegistry& m) {
  h.configure = Timed(std::move(h.configure), "Configure", m);
  h.synchronize = Timed(std::move(h.synchronize), "Synchronize", m);
  h.run_pod_sandbox = Timed(std::move(h.run_pod_sandbox), "RunPodSandbox", m);
  h.update_pod_sandbox = Timed(std::move(h.update_pod_sandbox), "UpdatePodSandbox", m);
  h.post_update_pod_sandbox = Timed(std::move(h.post_update_pod_sandbox), "PostUpdatePodSandbox", m);
  h.stop_pod_sandbox = Timed(std::move(h.stop_pod_sandbox), "StopPodSandbox", m);
  h.remove_pod_sandbox = Timed(std::move(h.remove_pod_sandbox), "RemovePodSandbox", m);
  h.create_container = Timed(std::move(h.create_container), "CreateContainer", m);
  h.post_create_container = Timed(std::move(h.post_create_container), "PostCreateContainer", m);
  h.start_container = Timed(std::move(h.start_container), "StartContainer", m);
  h.post_start_container = Timed(std::move(h.post_start_container), "PostStartContainer", m);
  h.update_container = Timed(std::move(h.update_container), "UpdateContainer", m);
  h.post_update_container = Timed(std::move(h.post_update_container), "PostUpdateContainer", m);
  h.stop_container = Timed(std::move(h.stop_container), "StopContainer", m);
  h.remove_container = Timed(std::move(h.remove_container), "RemoveContainer", m);
  h.validate_container_adjustment =
      Timed(std::move(h.validate_container_adjustment), "ValidateContainerAdjustment", m);
  return h;
}

void DeclareMetrics(MetricsRegistry& m) {
  m.DeclareCounter(kPrepareTotalMetric, "Device preparations (NodePrepareResources), by result.");
  m.DeclareHistogram(kPrepareDurationMetric, "Time to prepare one device, seconds.",
                     kLatencyBuckets);
  m.DeclareCounter(kUnprepareTotalMetric,
                   "Device releases (NodeUnprepareResources), by result.");
  m.DeclareHistogram(kUnprepareDurationMetric, "Time to release one device, seconds.",
                     kLatencyBuckets);
  m.DeclareCounter(kNriEventsMetric, "NRI events handled, by event and result.");
  m.DeclareHistogram(kNriDurationMetric, "Time to answer one NRI event, seconds, by event.",
                     kLatencyBuckets);
  m.DeclareGauge(kDevicesMetric, "Devices published, by health (Healthy, Unhealthy, Unknown).");
  m.DeclareGauge(kSliceGenerationMetric, "Pool generation of the published ResourceSlices.");
  m.DeclareCounter(kSlicePublishesMetric, "ResourceSlice publications that wrote to the store.");
  m.DeclareGauge(kRegisteredMetric, "1 when the kubelet confirmed the plugin's registration.");
  m.DeclareGauge(kNriConnectedMetric, "1 while the NRI plugin is connected to the runtime.");
  m.DeclareGauge(kPreparedClaimsMetric, "ResourceClaims prepared on this node (checkpoint).");
}

dra_kubelet::HealthStatus ToKubeletHealth(devices::HealthStatus status) {
  switch (status) {
    case devices::HealthStatus::kHealthy:
      return dra_kubelet::HealthStatus::kHealthy;
    case devices::HealthStatus::kUnhealthy:
      return dra_kubelet::HealthStatus::kUnhealthy;
    case devices::HealthStatus::kUnknown:
      break;
  }
  return dra_kubelet::HealthStatus::kUnknown;
}

}  // namespace

class Agent::Impl final : public dra_kubelet::HealthSource {
 public:
  Impl(AgentOptions options, kube::ObjectStore& store)
      : options_(std::move(options)),
        store_(store),
        logger_(log::Logger().With("node", options_.node_name)) {
    DeclareMetrics(metrics_);
    metrics_.SetCollector([this](MetricsRegistry& m) { Collect(m); });
  }

  ~Impl() { Stop(); }

  absl::Status Start() {
    if (options_.node_name.empty()) return InvalidArgument("--node-name (NODE_NAME) is required");
    DEVLET_RETURN_IF_ERROR(dra_kubelet::ValidateDriverName(options_.driver_name));
    if (options_.state_dir.empty()) {
      options_.state_dir = options_.plugins_dir + "/" + options_.driver_name;
    }
    DEVLET_ASSIGN_OR_RETURN(const devices::DeviceSet set, Discover());
    DEVLET_RETURN_IF_ERROR(MakeStateDir());
    DEVLET_RETURN_IF_ERROR(StartBackend(set));
    DEVLET_RETURN_IF_ERROR(StartSlices(set));
    DEVLET_RETURN_IF_ERROR(StartKubeletPlugin());
    StartNri();  // after registration
    StartWatcher();
    return absl::OkStatus();
  }

  // Start's steps, in order.

  // Discover finds the node's devices (1): the discoverer, profiles and the first rescan.
  absl::StatusOr<devices::DeviceSet> Discover() {
    devices::DiscoveryOptions discovery;
    discovery.sysfs_root = options_.sysfs_root;
    discovery.topology_xml = options_.topology_xml;
    discoverer_ = devices::NewDiscoverer(discovery);
    devices::ProfileConfig profiles = devices::DefaultProfileConfig();
    if (!options_.profiles_file.empty()) {
      DEVLET_ASSIGN_OR_RETURN(profiles, devices::LoadProfileConfig(options_.profiles_file));
    }
    rescanner_ = std::make_unique<devices::Rescanner>(*discoverer_, profiles);
    DEVLET_ASSIGN_OR_RETURN(devices::RescanResult scan,
                            Context(rescanner_->Rescan(), "discovering devices"));
    (void)scan;
    // The watcher owns the rescanner once it runs; everyone else reads this copy.
    const devices::DeviceSet set = rescanner_->devices();
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_set_ = set;
    }
    logger_.Info("Discovered devices", "devices", set.devices.size(), "counterSets",
                 set.counter_sets.size(), "numaNodes", rescanner_->inventory().cpu.numa_nodes.size());
    if (options_.sysfs != nullptr) {
      sysfs_ = options_.sysfs;
    } else if (options_.sysfs_root != "/sys" || options_.topology_xml.empty()) {
      owned_sysfs_ = devices::NewRealSysfs(options_.sysfs_root);
      sysfs_ = owned_sysfs_.get();
    }
    if (options_.sysfs_root == "/sys" && options_.topology_xml.empty()) {
      procfs_ = devices::NewRealSysfs("/proc");  // NVIDIA's unbindLock and device minors
    }
    return set;
  }

  // MakeStateDir creates the plugin's data directory.
  absl::Status MakeStateDir() {
    std::error_code ec;
    // 0750 whatever the umask: fs::create_directories made the plugin's data directory 0777
    // under umask 0 (the DRA socket and the checkpoint live here).
    for (std::filesystem::path current; const auto& part :
                                        std::filesystem::path(options_.state_dir)) {
      current /= part;
      if (current.empty() || std::filesystem::is_directory(current, ec)) continue;
      if (::mkdir(current.c_str(), 0750) == 0) {
        (void)::chmod(current.c_str(), 0750);
      } else if (errno != EEXIST) {
        return ErrnoToStatus(errno, "creating the state directory " + current.string());
      }
    }
    return absl::OkStatus();
  }

  // StartBackend opens the SR-IOV ledger and makes the device backend and the health monitor.
  absl::Status StartBackend(const devices::DeviceSet& set) {
    DEVLET_ASSIGN_OR_RETURN(
        sriov_ledger_, Context(devices::SriovLedger::Open(options_.state_dir + "/sriov-ledger"),
                               "opening the SR-IOV ledger"));
    DevicesBackendOptions backend_options;
    backend_options.pool = options_.node_name;
    backend_options.sysfs = sysfs_;
    backend_options.journal_dir = options_.state_dir + "/preparation";
    backend_options.dev_root = options_.dev_root;
    backend_options.vendor_cdi_dirs = options_.vendor_cdi_dirs;
    backend_options.preparer.sriov_ledger = sriov_ledger_.get();
    backend_options.preparer.procfs = procfs_.get();
    backend_ = std::make_unique<DevicesBackend>(backend_options);
    backend_->SetDevices(set);
    metered_backend_ = std::make_unique<MeteredBackend>(*backend_, metrics_);
    if (sysfs_ != nullptr && options_.health_interval.count() > 0) {
      health_monitor_ = std::make_unique<devices::HealthMonitor>(*sysfs_);
      CheckHealth(/*publish=*/false);
    }
    return absl::OkStatus();
  }

  // StartSlices publishes the first ResourceSlices and watches ours (2).
  absl::Status StartSlices(const devices::DeviceSet& set) {
    SliceOptions slice_options{.driver = options_.driver_name, .node_name = options_.node_name};
    slice_options.require_node = options_.wait_for_node;
    slice_options.features = options_.features;
    publisher_ = std::make_unique<SlicePublisher>(store_, slice_options);
    {
      std::lock_guard<std::mutex> lock(mu_);
      publisher_->set_taints(TaintsLocked());
    }
    absl::Status published = Publish(set);
    if (!published.ok() && !(options_.wait_for_node && absl::IsFailedPrecondition(published))) {
      return published;
    }
    if (options_.watch_slices) {
      kube::ListOptions mine;
      mine.field_node_name = options_.node_name;
      mine.field_driver = options_.driver_name;
      absl::StatusOr<std::unique_ptr<kube::Watcher>> watch = store_.Watch(
          kube::Kind::kResourceSlice, mine, [this](const kube::WatchEvent&) { RequestPublish(); });
      if (watch.ok()) {
        slice_watch_ = *std::move(watch);
      } else {
        logger_.Error(watch.status(), "Cannot watch our ResourceSlices; repairing them at rescans");
      }
    }
    return absl::OkStatus();
  }

  // StartKubeletPlugin opens the node state and serves the kubelet plugin (3).
  absl::Status StartKubeletPlugin() {
    DEVLET_ASSIGN_OR_RETURN(checkpoint_, Context(dra_kubelet::StateClaimRecordStore::Open(
                                                         options_.state_dir, options_.driver_name,
                                                         options_.cdi_root),
                                                     "opening the checkpoint"));
    cdi_ = std::make_unique<dra_kubelet::CdiSpecWriter>(options_.cdi_root);
    claims_ = std::make_unique<StoreClaimSource>(store_);
    dra_kubelet::PreparerOptions preparer_options;
    preparer_options.driver_name = options_.driver_name;
    preparer_options.node_name = options_.node_name;
    preparer_options.plugin_data_dir = options_.state_dir;
    preparer_options.enable_device_metadata = options_.enable_device_metadata;
    preparer_options.vendor_cdi_dirs = options_.vendor_cdi_dirs;
    DEVLET_ASSIGN_OR_RETURN(preparer_options.boot_id, ReadBootId(options_.boot_id_file));
    if (!options_.pod_uid.empty()) {
      preparer_options.serialize_lock_path = options_.state_dir + "/serialize.lock";
    }
    if (options_.publish_claim_status) {
      status_writer_ =
          std::make_unique<dra_kubelet::KubeClaimStatusWriter>(store_, options_.driver_name);
      preparer_options.status_writer = status_writer_.get();
    }
    preparer_ = std::make_unique<dra_kubelet::ClaimPreparer>(
        preparer_options, *claims_, *metered_backend_, *cdi_, *checkpoint_);
    RemoveStaleSpecs();
    dra_kubelet::PluginOptions plugin_options;
    plugin_options.driver_name = options_.driver_name;
    plugin_options.registrar_dir = options_.registrar_dir;
    plugin_options.plugin_data_dir = options_.state_dir;
    plugin_options.pod_uid = options_.pod_uid;
    plugin_options.health = health_monitor_ != nullptr;
    DEVLET_ASSIGN_OR_RETURN(
        plugin_, Context(dra_kubelet::KubeletPlugin::Start(
                             plugin_options, *preparer_, health_monitor_ ? this : nullptr),
                         "starting the kubelet plugin"));
    logger_.Info("Kubelet plugin serving", "dra", plugin_->DraSocketPath(), "registration",
                 plugin_->RegistrarSocketPath());
    return absl::OkStatus();
  }

  // StartNri makes the NRI plugin over the node state and joins the runtime when there is one
  // (4): after the kubelet's registration.
  void StartNri() {
    view_ = std::make_unique<CheckpointClaimsView>(checkpoint_->store());
    // RunPodSandbox: network devices learn the pod's network; the preparer that wrote the
    // metadata files rewrites them from its record (one writer, same rendering).
    view_->SetNetworkUpdater(
        [this](const std::string& claim_uid,
               const std::vector<dra_kubelet::DeviceNetworkUpdate>& updates) {
          return preparer_->UpdateNetworkData(claim_uid, updates);
        },
        sysfs_);
    view_->SetKubeletSizesDraResources(options_.features.node_allocatable_resources);
    nri::DevletPluginOptions nri_options;
    nri_options.cdi_policy = options_.cdi_policy;
    nri_options.numa_cpus = NumaCpuLists(rescanner_->inventory().cpu);
    // The CPUs the kernel has online, as the sysfs devlet reads shows them (a simulated tree
    // without the file: unknown). NUMA alignment never names a CPU outside them.
    absl::StatusOr<std::optional<std::string>> online =
        ReadFileIfExists(options_.sysfs_root + "/devices/system/cpu/online");
    if (online.ok() && online->has_value() && nri::ParseCpuList(**online).ok()) {
      nri_options.online_cpus = nri::FormatCpuList(*nri::ParseCpuList(**online));
    }
    nri_plugin_ = std::make_unique<nri::DevletPlugin>(view_.get(), nri_options);
    const char* prelaunched = std::getenv(nri::kPluginSocketEnv);
    if (!options_.nri_socket.empty() || (prelaunched != nullptr && *prelaunched != '\0')) {
      nri_thread_ = std::thread([this] { RunNri(); });
    } else {
      logger_.Info("NRI disabled (no --nri-socket and no NRI_PLUGIN_SOCKET)");
    }
  }

  // StartWatcher starts the device watcher and the control loop (5).
  void StartWatcher() {
    devices::UeventSource* source = options_.uevent_source;
    if (source == nullptr && options_.sysfs_root == "/sys" && options_.topology_xml.empty()) {
      absl::StatusOr<std::unique_ptr<devices::UeventSource>> netlink =
          devices::NewNetlinkUeventSource();
      if (netlink.ok()) {
        uevents_ = *std::move(netlink);
        source = uevents_.get();
      } else {
        logger_.Info("No kernel uevents; rescanning periodically only", "err", netlink.status());
      }
    }
    if (options_.rescan_interval.count() > 0 || source != nullptr) {
      devices::WatcherOptions watcher_options;
      watcher_options.period = options_.rescan_interval.count() > 0
                                   ? options_.rescan_interval
                                   : std::chrono::milliseconds(std::chrono::hours(24));
      watcher_ = std::make_unique<devices::DeviceWatcher>(*rescanner_, source, watcher_options);
      watcher_->Start([this](const devices::DeviceChange& change) { OnDevicesChanged(change); });
    }
    loop_thread_ = std::thread([this] { Loop(); });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    if (watcher_) watcher_->Stop();
    if (slice_watch_) slice_watch_->Stop();
    if (loop_thread_.joinable()) loop_thread_.join();
    if (plugin_) {
      logger_.Info("Stopping the kubelet plugin");
      plugin_->Stop();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stub_) stub_->Stop();
    }
    if (nri_thread_.joinable()) nri_thread_.join();
    logger_.Info("Stopped");
  }

  AgentStatus Status() const {
    AgentStatus status;
    std::lock_guard<std::mutex> lock(mu_);
    status.devices = devices_;
    status.slice_generation = generation_;
    status.slices = slices_;
    if (plugin_) {
      dra_kubelet::RegistrationState reg = plugin_->RegistrationStatus();
      status.kubelet_registered = reg.registered;
      status.registration_error = reg.error;
      status.dra_socket = plugin_->DraSocketPath();
      status.registrar_socket = plugin_->RegistrarSocketPath();
    }
    status.nri_started = stub_ != nullptr;
    status.nri_connected = stub_ != nullptr && stub_->connected();
    status.node_found = node_found_;
    for (const auto& [device, event] : health_) {
      if (event.status == devices::HealthStatus::kUnhealthy) ++status.unhealthy_devices;
    }
    return status;
  }

  std::string MetricsText() { return metrics_.Render(); }
  MetricsRegistry& metrics() { return metrics_; }

  int CheckHealthNow() {
    // Serialized with the control loop: the monitor is not thread-safe.
    std::lock_guard<std::mutex> lock(loop_mu_);
    CheckHealth(/*publish=*/true);
    return Status().unhealthy_devices;
  }

  // ---- dra_kubelet::HealthSource ----
  std::vector<dra_kubelet::DeviceHealth> HealthSnapshot() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<dra_kubelet::DeviceHealth> out;
    for (const auto& [device, event] : health_) {
      dra_kubelet::DeviceHealth h;
      h.pool = options_.node_name;
      h.device = device;
      h.health = ToKubeletHealth(event.status);
      h.last_updated_unix = health_checked_unix_;
      h.message = event.reason == devices::kReasonHealthy ? "" : event.reason + ": " + event.message;
      out.push_back(std::move(h));
    }
    return out;
  }
  void SetHealthListener(std::function<void()> listener) override {
    std::lock_guard<std::mutex> lock(mu_);
    health_listener_ = std::move(listener);
  }

  bool Healthy() const {
    AgentStatus status = Status();
    if (status.dra_socket.empty()) return false;
    std::error_code ec;
    if (!std::filesystem::exists(status.dra_socket, ec)) return false;
    return !status.nri_started || status.nri_connected;
  }

 private:
  absl::Status Publish(const devices::DeviceSet& set) {
    absl::StatusOr<PublishResult> published = publisher_->Publish(set);
    if (!published.ok()) {
      if (options_.wait_for_node && absl::IsFailedPrecondition(published.status())) {
        bool was_found;
        {
          std::lock_guard<std::mutex> lock(mu_);
          was_found = node_found_;
          node_found_ = false;
        }
        if (was_found || !node_wait_logged_) {
          logger_.Info("Waiting for the Node object before publishing ResourceSlices");
          node_wait_logged_ = true;
        }
      }
      return WithContext(published.status(), "publishing ResourceSlices");
    }
    const PublishResult& result = *published;
    if (result.changed) {
      logger_.Info("Published ResourceSlices", "generation", result.generation, "slices",
                   result.slices, "created", result.created, "updated", result.updated, "deleted",
                   result.deleted);
      metrics_.Add(kSlicePublishesMetric, {});
    }
    std::lock_guard<std::mutex> lock(mu_);
    devices_ = static_cast<int>(set.devices.size());
    generation_ = result.generation;
    slices_ = result.slices;
    node_found_ = true;
    return absl::OkStatus();
  }

  // RequestPublish wakes the control loop to check our slices (a watch saw a change).
  void RequestPublish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      publish_requested_ = true;
    }
    cv_.notify_all();
  }

  // TaintsLocked returns the taints of the unhealthy devices (mu_ held).
  std::map<std::string, std::vector<kube::DeviceTaint>> TaintsLocked() const {
    std::map<std::string, std::vector<kube::DeviceTaint>> out;
    for (const auto& [device, taint] : taints_) out[device] = {taint};
    return out;
  }

  // CheckHealth runs the health monitor once: changed devices update the taints (kept with their
  // first timeAdded, so that republishing is a no-op while nothing changes), the kubelet's health
  // stream is notified, and with `publish` the slices are republished. Loop thread (or Start).
  void CheckHealth(bool publish) {
    if (health_monitor_ == nullptr) return;
    std::vector<devices::DraDevice> current;
    {
      std::lock_guard<std::mutex> lock(mu_);
      current = current_set_.devices;
    }
    std::vector<devices::HealthEvent> events = health_monitor_->Check(current);
    std::vector<devices::HealthEvent> snapshot = health_monitor_->Snapshot();
    std::function<void()> listener;
    bool taints_changed = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      health_checked_unix_ = static_cast<std::int64_t>(std::time(nullptr));
      health_.clear();
      for (const devices::HealthEvent& e : snapshot) health_[e.device] = e;
      for (const devices::HealthEvent& e : events) {
        std::optional<devices::DeviceTaint> taint = devices::TaintFor(e, options_.driver_name);
        auto it = taints_.find(e.device);
        if (!taint) {
          if (it != taints_.end()) {
            taints_.erase(it);
            taints_changed = true;
          }
          continue;
        }
        if (it != taints_.end() && it->second.key == taint->key &&
            it->second.value == taint->value && it->second.effect == taint->effect) {
          continue;
        }
        taints_[e.device] = kube::DeviceTaint{
            .key = taint->key, .value = taint->value, .effect = taint->effect,
            .time_added = NowRfc3339()};
        taints_changed = true;
      }
      // Devices that are gone are forgotten by the monitor: drop their taints too.
      for (auto it = taints_.begin(); it != taints_.end();) {
        if (!health_.contains(it->first)) {
          it = taints_.erase(it);
          taints_changed = true;
        } else {
          ++it;
        }
      }
      listener = health_listener_;
      if (taints_changed) publisher_taints_ = TaintsLocked();
    }
    for (const devices::HealthEvent& e : events) {
      if (e.status == devices::HealthStatus::kHealthy && !publish) continue;  // first look
      logger_.Info("Device health", "device", e.device, "health",
                   devices::HealthStatusName(e.status), "reason", e.reason, "message", e.message);
    }
    if (!events.empty() && listener) listener();
    if (taints_changed && publisher_ != nullptr) {
      std::map<std::string, std::vector<kube::DeviceTaint>> taints;
      {
        std::lock_guard<std::mutex> lock(mu_);
        taints = publisher_taints_;
      }
      publisher_->set_taints(std::move(taints));
      if (publish) {
        absl::Status published = Publish(CurrentSet());
        if (!published.ok()) logger_.Error(published, "Cannot publish device taints");
      }
    }
  }

  // Collect refreshes the gauges read at scrape time.
  void Collect(MetricsRegistry& m) {
    AgentStatus status = Status();
    m.Set(kSliceGenerationMetric, {}, static_cast<double>(status.slice_generation));
    m.Set(kRegisteredMetric, {}, status.kubelet_registered ? 1 : 0);
    m.Set(kNriConnectedMetric, {}, status.nri_connected ? 1 : 0);
    std::map<std::string, int> by_health = {{"Healthy", 0}, {"Unhealthy", 0}, {"Unknown", 0}};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (health_monitor_ == nullptr) {
        by_health["Unknown"] = devices_;
      } else {
        for (const auto& [device, event] : health_) {
          ++by_health[std::string(devices::HealthStatusName(event.status))];
        }
      }
    }
    for (const auto& [health, count] : by_health) m.Set(kDevicesMetric, {{"health", health}}, count);
    if (checkpoint_ != nullptr) {
      absl::StatusOr<std::vector<dra_kubelet::ClaimRecord>> records = checkpoint_->List();
      if (records.ok()) m.Set(kPreparedClaimsMetric, {}, static_cast<double>(records->size()));
    }
  }

  void RemoveStaleSpecs() {
    absl::StatusOr<std::vector<dra_kubelet::ClaimRecord>> records = checkpoint_->List();
    if (!records.ok()) {
      logger_.Error(records.status(), "Cannot list the checkpoint; stale CDI specs are kept");
      return;
    }
    std::vector<std::string> live;
    for (const dra_kubelet::ClaimRecord& record : *records) live.push_back(record.claim.uid);
    std::string kind = preparer_->CdiKind();
    std::string vendor = kind.substr(0, kind.find('/'));
    std::string klass = kind.substr(kind.find('/') + 1);
    absl::StatusOr<std::vector<std::string>> removed =
        cdi::RemoveStaleTransientSpecs(options_.cdi_root, vendor, klass, live);
    if (!removed.ok()) {
      logger_.V(1).Info("Cannot garbage-collect CDI specs", "err", removed.status());
    } else if (!removed->empty()) {
      logger_.Info("Removed CDI specs of claims the checkpoint does not know", "count",
                   removed->size());
    }
  }

  bool WaitFor(std::chrono::milliseconds duration) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, duration, [this] { return stopped_; });
  }

  void RunNri() {
    if (options_.nri_after_registration) {
      auto start = std::chrono::steady_clock::now();
      bool warned = false;
      while (!plugin_->RegistrationStatus().registered) {
        if (WaitFor(std::chrono::milliseconds(100))) return;
        if (!warned && std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) {
          logger_.Warning("Still waiting for the kubelet to register the plugin before starting NRI",
                          "registration", plugin_->RegistrarSocketPath());
          warned = true;
        }
      }
      logger_.Info("Kubelet registered the plugin; starting NRI");
    }
    nri::StubOptions stub_options;
    stub_options.name = options_.nri_plugin_name;
    stub_options.index = options_.nri_plugin_index;
    if (!options_.nri_socket.empty()) stub_options.socket_path = options_.nri_socket;
    absl::StatusOr<std::unique_ptr<nri::Stub>> stub =
        nri::Stub::Create(TimedHandlers(nri_plugin_->MakeHandlers(), metrics_), stub_options);
    if (!stub.ok()) {
      logger_.Error(stub.status(), "Cannot create the NRI plugin");
      return;
    }
    nri::Stub* raw = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stub_ = *std::move(stub);
      raw = stub_.get();
    }
    logger_.Info("NRI plugin running", "socket",
                 raw->pre_launched() ? std::string("pre-launched") : stub_options.socket_path,
                 "name", raw->name(), "index", raw->index());
    absl::Status run = raw->Run();
    if (!run.ok()) logger_.Error(run, "NRI plugin stopped");
  }

  // CurrentSet returns a copy of the devices as last discovered.
  devices::DeviceSet CurrentSet() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_set_;
  }

  // OnDevicesChanged runs on the watcher's thread after a rescan that changed the devices.
  void OnDevicesChanged(const devices::DeviceChange& change) {
    logger_.Info("Devices changed", "trigger", change.trigger, "diff",
                 change.result.device_diff.ToString());
    backend_->SetDevices(change.devices);
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_set_ = change.devices;
    }
    std::lock_guard<std::mutex> loop_lock(loop_mu_);
    CheckHealth(/*publish=*/false);  // new devices get a health state, gone ones lose theirs
    absl::Status published = Publish(change.devices);
    if (!published.ok() && !(options_.wait_for_node && absl::IsFailedPrecondition(published))) {
      logger_.Error(published, "Cannot publish ResourceSlices");
    }
  }

  // Loop is the control loop: health checks every health_interval, a slice check (drift repair)
  // every rescan_interval and whenever the watch saw a change, and, while the Node is missing
  // (wait_for_node), a publish attempt every second. Rescans are the watcher's.
  void Loop() {
    using Clock = std::chrono::steady_clock;
    auto next_check = Clock::now() + options_.rescan_interval;
    auto next_health = Clock::now() + options_.health_interval;
    while (true) {
      auto wake = Clock::now() + std::chrono::hours(1);
      if (options_.rescan_interval.count() > 0) wake = std::min(wake, next_check);
      if (health_monitor_ != nullptr) wake = std::min(wake, next_health);
      bool retry_node;
      {
        std::lock_guard<std::mutex> lock(mu_);
        retry_node = options_.wait_for_node && !node_found_;
      }
      if (retry_node) wake = std::min(wake, Clock::now() + std::chrono::seconds(1));
      bool publish = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_until(lock, wake, [this] { return stopped_ || publish_requested_; });
        if (stopped_) return;
        publish = publish_requested_ || retry_node;
        publish_requested_ = false;
      }
      std::lock_guard<std::mutex> loop_lock(loop_mu_);
      auto now = Clock::now();
      if (options_.rescan_interval.count() > 0 && now >= next_check) {
        next_check = now + options_.rescan_interval;
        publish = true;
      }
      if (health_monitor_ != nullptr && now >= next_health) {
        next_health = now + options_.health_interval;
        CheckHealth(/*publish=*/false);
        publish = true;
      }
      if (publish) {
        absl::Status published = Publish(CurrentSet());
        if (!published.ok() &&
            !(options_.wait_for_node && absl::IsFailedPrecondition(published))) {
          logger_.Error(published, "Cannot publish ResourceSlices");
        }
      }
    }
  }

  AgentOptions options_;
  kube::ObjectStore& store_;
  log::Logger logger_;
  std::unique_ptr<devices::Discoverer> discoverer_;
  std::unique_ptr<devices::Rescanner> rescanner_;
  std::unique_ptr<devices::Sysfs> owned_sysfs_;
  devices::Sysfs* sysfs_ = nullptr;  // options_.sysfs or owned_sysfs_; null without sysfs
  std::unique_ptr<devices::Sysfs> procfs_;
  std::unique_ptr<devices::SriovLedger> sriov_ledger_;
  std::unique_ptr<devices::UeventSource> uevents_;
  std::unique_ptr<devices::DeviceWatcher> watcher_;
  std::unique_ptr<DevicesBackend> backend_;
  std::unique_ptr<MeteredBackend> metered_backend_;
  std::unique_ptr<devices::HealthMonitor> health_monitor_;
  std::unique_ptr<kube::Watcher> slice_watch_;
  MetricsRegistry metrics_;
  std::mutex loop_mu_;  // one control-loop pass (or CheckHealthNow) at a time
  bool node_wait_logged_ = false;
  std::unique_ptr<SlicePublisher> publisher_;
  std::unique_ptr<dra_kubelet::StateClaimRecordStore> checkpoint_;
  std::unique_ptr<dra_kubelet::CdiSpecWriter> cdi_;
  std::unique_ptr<StoreClaimSource> claims_;
  // Declared before preparer_: the preparer's status thread uses it until the preparer is gone.
  std::unique_ptr<dra_kubelet::KubeClaimStatusWriter> status_writer_;
  std::unique_ptr<dra_kubelet::ClaimPreparer> preparer_;
  std::unique_ptr<dra_kubelet::KubeletPlugin> plugin_;
  std::unique_ptr<CheckpointClaimsView> view_;
  std::unique_ptr<nri::DevletPlugin> nri_plugin_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::unique_ptr<nri::Stub> stub_;
  devices::DeviceSet current_set_;
  int devices_ = 0;
  std::int64_t generation_ = 0;
  int slices_ = 0;
  bool publish_requested_ = false;
  bool node_found_ = false;
  std::map<std::string, devices::HealthEvent> health_;
  std::int64_t health_checked_unix_ = 0;
  std::map<std::string, kube::DeviceTaint> taints_;
  std::map<std::string, std::vector<kube::DeviceTaint>> publisher_taints_;
  std::function<void()> health_listener_;
  std::thread nri_thread_;
  std::thread loop_thread_;
};

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() { Stop(); }

absl::StatusOr<std::unique_ptr<Agent>> Agent::Start(AgentOptions options, kube::ObjectStore& store) {
  auto impl = std::make_unique<Impl>(std::move(options), store);
  DEVLET_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

void Agent::Stop() {
  if (impl_) impl_->Stop();
}

AgentStatus Agent::Status() const { return impl_->Status(); }
bool Agent::Healthy() const { return impl_->Healthy(); }
std::string Agent::MetricsText() { return impl_->MetricsText(); }
MetricsRegistry& Agent::metrics() { return impl_->metrics(); }
int Agent::CheckHealthNow() { return impl_->CheckHealthNow(); }

}  // namespace devlet::node
