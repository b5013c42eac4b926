// devlet-node: devlet's node agent (DESIGN.md §1, §5). Thin: flags in, node::Agent out.
//
//   devlet-node --node-name node-1 --manifests /etc/devlet/manifests            # standalone
//   devlet-node --node-name node-1 --manifests DIR --topology-xml X --sysfs-root S   # simulated
//   devlet-node --node-name node-1 --kubeconfig ~/.kube/config                  # API server
//   devlet-node --node-name node-1          # in a pod: in-cluster config (or $KUBECONFIG)
//
// Without --manifests the kube-apiserver is found like client-go does: --kubeconfig, else
// $KUBECONFIG, else the in-cluster service account, else ~/.kube/config. Slices are then published
// once the Node object exists, owned by it.
//
// SIGTERM / SIGINT: graceful stop (kubelet registration socket removed first, then the DRA
// socket, then NRI). Exit 0 after a clean stop, 1 when start-up fails, 2 on bad flags.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "devlet/common/flags.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/kube/client.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"
#include "devlet/node/agent.h"
#include "devlet/node/health_server.h"

namespace {

// A node agent is idle nearly all the time, and its idle RSS is a target (< 20 MB;
// dra-kubelet/README.md, "Idle RSS"). glibc's defaults favour throughput: up to 8 malloc arenas
// per core, a new one for each thread that allocates while the others are busy (devlet-node has 17
// threads; each arena keeps its freed chunks), and a heap top returned to the kernel only past
// 128 KB, a threshold that grows with every large block freed.
// One arena and 64 KB thresholds (blocks from 64 KB up get their own mapping, returned on free)
// cost little at devlet-node's request rates and measured 1.2-1.5 MB less RSS, standalone and in
// API server mode. Set before any thread starts; what static initialisers allocated stays.
void TuneMallocForIdle() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024);
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
}

// RaiseFdLimit lifts the soft RLIMIT_NOFILE to the hard limit, as containerd and CRI-O do for
// themselves: every kubelet call, NRI connection, API watch and claim file costs a descriptor,
// and systemd's default soft limit of 1024 is below what a busy node needs. Returns the old and
// new soft limits (equal when nothing changed).
std::pair<rlim_t, rlim_t> RaiseFdLimit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return {0, 0};
  const rlim_t old_soft = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return {old_soft, old_soft};
  }
  return {old_soft, limit.rlim_cur};
}

// Flags holds the command line as given; what maps onto AgentOptions directly lives there.
struct Flags {
  devlet::node::AgentOptions options;
  std::string kubeconfig;
  std::string manifests;
  std::string feature_gates;
  std::string cdi_policy = "auto";
  std::string vendor_cdi_dirs = "/etc/cdi,/var/run/cdi";
  int healthcheck_port = -1;
  std::string healthcheck_address{devlet::node::HealthServer::kDefaultAddress};
  int rescan_seconds = 30;
  int health_seconds = 5;
  double kube_api_qps = 5;
  int kube_api_burst = 10;
};

void AddFlags(CLI::App& app, Flags& f) {
  using devlet::flags::AddFlag;
  devlet::node::AgentOptions& options = f.options;
  AddFlag(app, "--node-name", options.node_name, "Name of this node (also the pool name)");
  AddFlag(app, "--driver-name", options.driver_name, "DRA driver name");
  AddFlag(app, "--cdi-root", options.cdi_root, "Directory for transient CDI spec files");
  AddFlag(app, "--kubelet-registrar-directory-path", options.registrar_dir,
          "Kubelet plugin registration directory");
  AddFlag(app, "--kubelet-plugins-directory-path", options.plugins_dir,
          "Kubelet plugins directory; the plugin's data directory is <this>/<driver-name>");
  AddFlag(app, "--state-dir", options.state_dir,
          "Checkpoint and preparation journals (default: the plugin's data directory)");
  AddFlag(app, "--healthcheck-port", f.healthcheck_port,
          "TCP port of /healthz and /metrics (0: any free port); < 0 disables");
  AddFlag(app, "--healthcheck-address", f.healthcheck_address,
          "Numeric IP address that /healthz and /metrics listen on (0.0.0.0 or :: for all; in a "
          "host-network pod, the node's address, so that probes and Prometheus reach it)");
  AddFlag(app, "--kubeconfig", f.kubeconfig,
          "Kubeconfig for the kube-apiserver; empty: $KUBECONFIG, in-cluster, ~/.kube/config");
  AddFlag(app, "--kube-api-qps", f.kube_api_qps, "Client-side QPS limit towards the API server");
  AddFlag(app, "--kube-api-burst", f.kube_api_burst, "Client-side burst towards the API server");
  AddFlag(app, "--health-check-interval-seconds", f.health_seconds,
          "Check device health this often (taints and the kubelet's health stream); 0 disables");
  AddFlag(app, "--feature-gates", f.feature_gates, devlet::node::NodeFeatureGatesHelp());
  AddFlag(app, "--nri-socket", options.nri_socket,
          "The runtime's NRI socket; empty disables NRI unless NRI_PLUGIN_SOCKET is set");
  AddFlag(app, "--nri-plugin-name", options.nri_plugin_name,
          "NRI plugin name (NRI_PLUGIN_NAME wins)");
  AddFlag(app, "--nri-plugin-index", options.nri_plugin_index,
          "NRI plugin index, two digits (NRI_PLUGIN_IDX wins)");
  AddFlag(app, "--cdi-policy", f.cdi_policy,
          "How devices reach containers through NRI: auto, names, edits or none");
  AddFlag(app, "--manifests", f.manifests,
          "Standalone mode: read DeviceClasses, ResourceClaims and Pods from this directory and "
          "write the node's ResourceSlices into it");
  AddFlag(app, "--topology-xml", options.topology_xml, "hwloc XML topology (simulated machine)");
  AddFlag(app, "--sysfs-root", options.sysfs_root, "Directory that plays /sys");
  AddFlag(app, "--dev-root", options.dev_root,
          "Directory that holds the host's device nodes (CDI hostPath); containers still see /dev");
  AddFlag(app, "--profiles", options.profiles_file, "Device profile configuration (YAML)");
  AddFlag(app, "--vendor-cdi-spec-dirs", f.vendor_cdi_dirs,
          "Comma-separated directories of vendor CDI specs (lowest priority first) that profiles' "
          "cdiDevices resolve in; a prepare whose vendor devices do not resolve fails");
  AddFlag(app, "--boot-id-file", options.boot_id_file,
          "This boot's identity: claims prepared in another boot get their vfio bindings, VFs "
          "and mdevs set up again at the kubelet's next prepare (\"\": no reboot detection)");
  AddFlag(app, "--enable-device-metadata", options.enable_device_metadata,
          "Write KEP-5304 device-metadata files");
  AddFlag(app, "--publish-claim-status", options.publish_claim_status,
          "Write prepared claims' status.devices (Ready condition) to the API server or manifests");
  AddFlag(app, "--rescan-interval-seconds", f.rescan_seconds,
          "Rescan hardware and check published slices this often; 0 disables");
}

// Resolve checks the flags against each other and completes f.options from them; an error is
// a bad command line.
absl::Status Resolve(Flags& f) {
  devlet::node::AgentOptions& options = f.options;
  options.rescan_interval = std::chrono::seconds(f.rescan_seconds);
  if (const char* pod_uid = std::getenv("POD_UID")) options.pod_uid = pod_uid;
  absl::StatusOr<devlet::node::PublishFeatures> gates =
      devlet::node::ParseNodeFeatureGates(f.feature_gates);
  if (!gates.ok()) return devlet::WithContext(gates.status(), "Bad --feature-gates");
  options.features = *gates;
  options.vendor_cdi_dirs.clear();
  for (size_t start = 0; start <= f.vendor_cdi_dirs.size();) {
    size_t comma = f.vendor_cdi_dirs.find(',', start);
    if (comma == std::string::npos) comma = f.vendor_cdi_dirs.size();
    if (comma > start) {
      options.vendor_cdi_dirs.push_back(f.vendor_cdi_dirs.substr(start, comma - start));
    }
    start = comma + 1;
  }
  absl::StatusOr<devlet::nri::CdiPolicy> policy = devlet::nri::ParseCdiPolicy(f.cdi_policy);
  if (!policy.ok()) return devlet::WithContext(policy.status(), "Bad --cdi-policy");
  options.cdi_policy = *policy;
  if (!f.manifests.empty() && !f.kubeconfig.empty()) {
    return devlet::InvalidArgument("--manifests and --kubeconfig exclude each other");
  }
  if (f.rescan_seconds < 0 || f.health_seconds < 0) {
    return devlet::InvalidArgument(
        "--rescan-interval-seconds and --health-check-interval-seconds must be >= 0");
  }
  if (absl::Status valid = devlet::node::HealthServer::ValidateAddress(f.healthcheck_address);
      !valid.ok()) {
    return devlet::WithContext(valid, "Bad --healthcheck-address");
  }
  options.health_interval = std::chrono::seconds(f.health_seconds);
  return absl::OkStatus();
}

// OpenStore opens the one ObjectStore: the manifest directory (standalone) or the kube-apiserver
// (then the agent waits for its Node object). An error means devlet-node cannot start.
absl::StatusOr<std::unique_ptr<devlet::kube::ObjectStore>> OpenStore(Flags& f,
                                                                     devlet::log::Logger& logger) {
  if (!f.manifests.empty()) {
    absl::StatusOr<std::unique_ptr<devlet::kube::ManifestStore>> opened =
        devlet::kube::ManifestStore::Open({.dir = f.manifests});
    if (!opened.ok()) {
      return devlet::WithContext(opened.status(), "Cannot open the manifest directory");
    }
    logger.Info("Standalone mode", "manifests", f.manifests);
    return std::unique_ptr<devlet::kube::ObjectStore>(*std::move(opened));
  }
  absl::StatusOr<devlet::kube::RestConfig> config = devlet::kube::LoadRestConfig(f.kubeconfig);
  if (!config.ok()) {
    return devlet::WithContext(config.status(),
                               "No API server configuration (use --kubeconfig, or --manifests DIR "
                               "to run standalone)");
  }
  config->qps = f.kube_api_qps;
  config->burst = f.kube_api_burst;
  config->user_agent = "devlet-node/" + f.options.node_name;
  absl::StatusOr<std::unique_ptr<devlet::kube::ApiServerStore>> created =
      devlet::kube::ApiServerStore::Create(*config);
  if (!created.ok()) {
    return devlet::WithContext(created.status(), "Cannot create the API server client");
  }
  f.options.wait_for_node = true;
  logger.Info("API server mode", "server", config->server);
  return std::unique_ptr<devlet::kube::ObjectStore>(*std::move(created));
}

}  // namespace

int main(int argc, char** argv) {
  TuneMallocForIdle();
  const auto [old_fd_limit, fd_limit] = RaiseFdLimit();
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts
  signal(SIGPIPE, SIG_IGN);

  Flags flags;
  CLI::App app{"devlet-node: DRA kubelet plugin + NRI plugin for GPUs, NICs and CPUs"};
  AddFlags(app, flags);
  if (std::optional<int> exit_code = devlet::flags::ParseCommandLine(app, argc, argv)) {
    return *exit_code;
  }
  devlet::log::Logger logger;
  if (fd_limit != old_fd_limit) {
    logger.V(1).Info("Raised the open-file limit to the hard limit", "from",
                     static_cast<std::uint64_t>(old_fd_limit), "to",
                     static_cast<std::uint64_t>(fd_limit));
  }
  if (absl::Status resolved = Resolve(flags); !resolved.ok()) {
    logger.Error(resolved, "Bad command line");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<devlet::kube::ObjectStore>> store = OpenStore(flags, logger);
  if (!store.ok()) {
    logger.Error(store.status(), "devlet-node cannot start");
    // No usable API server configuration is a matter of flags and environment.
    return flags.manifests.empty() ? 2 : 1;
  }
  const devlet::node::AgentOptions& options = flags.options;
  absl::StatusOr<std::unique_ptr<devlet::node::Agent>> agent =
      devlet::node::Agent::Start(options, **store);
  if (!agent.ok()) {
    logger.Error(agent.status(), "devlet-node cannot start");
    return 1;
  }
  std::unique_ptr<devlet::node::HealthServer> health;
  if (flags.healthcheck_port >= 0) {
    devlet::node::Agent* raw = agent->get();
    absl::StatusOr<std::unique_ptr<devlet::node::HealthServer>> started =
        devlet::node::HealthServer::Start(
            flags.healthcheck_address, flags.healthcheck_port, [raw] { return raw->Healthy(); },
            [raw] { return raw->MetricsText(); });
    if (!started.ok()) {
      logger.Error(started.status(), "Cannot serve the health endpoint");
      (*agent)->Stop();
      return 1;
    }
    health = *std::move(started);
    logger.Info("Health endpoint serving", "address", health->address(), "port", health->port());
  }
  logger.Info("devlet-node running", "node", options.node_name, "driver", options.driver_name);
  int sig = 0;
  while (sigwait(&signals, &sig) != 0) {
  }
  logger.Info("Stopping on signal", "signal", sig);
  (*agent)->Stop();
  if (health) health->Stop();
  return 0;
}
