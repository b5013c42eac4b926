#include "devlet/node/agent.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <vector>

#include "devlet/cdi/spec_dir.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/devices/sysfs.h"
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

}  // namespace

class Agent::Impl {
 public:
  Impl(AgentOptions options, kube::ObjectStore& store)
      : options_(std::move(options)), store_(store), logger_(log::Logger().With("node", options_.node_name)) {}

  ~Impl() { Stop(); }

  absl::Status Start() {
    if (options_.node_name.empty()) return InvalidArgument("--node-name (NODE_NAME) is required");
    DEVLET_RETURN_IF_ERROR(dra_kubelet::ValidateDriverName(options_.driver_name));
    if (options_.state_dir.empty()) {
      options_.state_dir = options_.plugins_dir + "/" + options_.driver_name;
    }
    // 1. Discovery.
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
    const devices::DeviceSet& set = rescanner_->devices();
    logger_.Info("Discovered devices", "devices", set.devices.size(), "counterSets",
                 set.counter_sets.size(), "numaNodes", rescanner_->inventory().cpu.numa_nodes.size());
    if (options_.sysfs_root != "/sys" || options_.topology_xml.empty()) {
      sysfs_ = devices::NewRealSysfs(options_.sysfs_root);
    }
    DevicesBackendOptions backend_options;
    backend_options.pool = options_.node_name;
    backend_options.sysfs = sysfs_.get();
    backend_options.journal_dir = options_.state_dir + "/preparation";
    backend_ = std::make_unique<DevicesBackend>(backend_options);
    backend_->SetDevices(set);

    // 2. Slices.
    publisher_ = std::make_unique<SlicePublisher>(
        store_, SliceOptions{.driver = options_.driver_name, .node_name = options_.node_name});
    DEVLET_RETURN_IF_ERROR(Publish(set));

    // 3. Node state and the kubelet plugin.
    DEVLET_ASSIGN_OR_RETURN(checkpoint_, Context(dra_kubelet::StateCheckpointStore::Open(
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
    if (!options_.pod_uid.empty()) {
      preparer_options.serialize_lock_path = options_.state_dir + "/serialize.lock";
    }
    preparer_ = std::make_unique<dra_kubelet::ClaimPreparer>(preparer_options, *claims_, *backend_,
                                                             *cdi_, *checkpoint_);
    RemoveStaleSpecs();
    dra_kubelet::PluginOptions plugin_options;
    plugin_options.driver_name = options_.driver_name;
    plugin_options.registrar_dir = options_.registrar_dir;
    plugin_options.plugin_data_dir = options_.state_dir;
    plugin_options.pod_uid = options_.pod_uid;
    plugin_options.health = false;  // No HealthSource wired yet.
    DEVLET_ASSIGN_OR_RETURN(plugin_, Context(dra_kubelet::KubeletPlugin::Start(
                                                     plugin_options, *preparer_, nullptr),
                                                 "starting the kubelet plugin"));
    logger_.Info("Kubelet plugin serving", "dra", plugin_->DraSocketPath(), "registration",
                 plugin_->RegistrarSocketPath());

    // 4. NRI, after registration.
    view_ = std::make_unique<CheckpointClaimsView>(checkpoint_->store(), options_.cdi_root);
    nri::DevletPluginOptions nri_options;
    nri_options.cdi_policy = options_.cdi_policy;
    nri_options.numa_cpus = NumaCpuLists(rescanner_->inventory().cpu);
    nri_plugin_ = std::make_unique<nri::DevletPlugin>(view_.get(), nri_options);
    const char* prelaunched = std::getenv(nri::kPluginSocketEnv);
    if (!options_.nri_socket.empty() || (prelaunched != nullptr && *prelaunched != '\0')) {
      nri_thread_ = std::thread([this] { RunNri(); });
    } else {
      logger_.Info("NRI disabled (no --nri-socket and no NRI_PLUGIN_SOCKET)");
    }

    // 5. Rescans.
    if (options_.rescan_interval.count() > 0) {
      rescan_thread_ = std::thread([this] { RescanLoop(); });
    }
    return absl::OkStatus();
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    if (rescan_thread_.joinable()) rescan_thread_.join();
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
    return status;
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
    DEVLET_ASSIGN_OR_RETURN(PublishResult result,
                            Context(publisher_->Publish(set), "publishing ResourceSlices"));
    if (result.changed) {
      logger_.Info("Published ResourceSlices", "generation", result.generation, "slices",
                   result.slices, "created", result.created, "updated", result.updated, "deleted",
                   result.deleted);
    }
    std::lock_guard<std::mutex> lock(mu_);
    devices_ = static_cast<int>(set.devices.size());
    generation_ = result.generation;
    slices_ = result.slices;
    return absl::OkStatus();
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
        nri::Stub::Create(nri_plugin_->MakeHandlers(), stub_options);
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

  void RescanLoop() {
    while (!WaitFor(options_.rescan_interval)) {
      absl::StatusOr<devices::RescanResult> scan = rescanner_->Rescan();
      if (!scan.ok()) {
        logger_.Error(scan.status(), "Rescan failed; keeping the published devices");
        continue;
      }
      if (scan->changed) {
        logger_.Info("Devices changed", "diff", scan->device_diff.ToString());
        backend_->SetDevices(rescanner_->devices());
      }
      absl::Status published = Publish(rescanner_->devices());
      if (!published.ok()) logger_.Error(published, "Cannot publish ResourceSlices");
    }
  }

  AgentOptions options_;
  kube::ObjectStore& store_;
  log::Logger logger_;
  std::unique_ptr<devices::Discoverer> discoverer_;
  std::unique_ptr<devices::Rescanner> rescanner_;
  std::unique_ptr<devices::Sysfs> sysfs_;
  std::unique_ptr<DevicesBackend> backend_;
  std::unique_ptr<SlicePublisher> publisher_;
  std::unique_ptr<dra_kubelet::StateCheckpointStore> checkpoint_;
  std::unique_ptr<dra_kubelet::CdiSpecWriter> cdi_;
  std::unique_ptr<StoreClaimSource> claims_;
  std::unique_ptr<dra_kubelet::ClaimPreparer> preparer_;
  std::unique_ptr<dra_kubelet::KubeletPlugin> plugin_;
  std::unique_ptr<CheckpointClaimsView> view_;
  std::unique_ptr<nri::DevletPlugin> nri_plugin_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::unique_ptr<nri::Stub> stub_;
  int devices_ = 0;
  std::int64_t generation_ = 0;
  int slices_ = 0;
  std::thread nri_thread_;
  std::thread rescan_thread_;
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

}  // namespace devlet::node
