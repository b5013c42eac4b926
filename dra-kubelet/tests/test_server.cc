// dra_kubelet_test_server: devlet's kubelet plugin with the simulated backend and claims read from
// a directory of ResourceClaim JSON files. The kubelet-side Go harness (integration/kubelet) runs
// it; it is also handy to poke at with a real kubelet on a test machine.
//
//   dra_kubelet_test_server --driver-name gpu.devlet.test --claims-dir DIR --cdi-root DIR
//       --kubelet-registrar-directory-path DIR --kubelet-plugins-directory-path DIR
//
// SIGTERM/SIGINT: stop (registration socket first). SIGUSR1: mark gpu-0 unhealthy. SIGUSR2: mark
// every device healthy again.
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>

#include "devlet/common/flags.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/dra_kubelet/local.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#ifdef DEVLET_DRA_KUBELET_HAVE_DEVLET
#include "devlet/dra_kubelet/devlet_adapters.h"
#endif

int main(int argc, char** argv) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // Before any thread starts.

  CLI::App app{"devlet kubelet plugin test server (simulated devices, claims from files)"};
  std::string driver_name = "gpu.devlet.test";
  std::string node_name;
  std::string registrar_dir = std::string(devlet::dra_kubelet::kDefaultRegistrarDir);
  std::string plugins_dir = std::string(devlet::dra_kubelet::kDefaultPluginsDir);
  std::string cdi_root = "/var/run/cdi";
  std::string claims_dir;
  std::string pod_uid;
  int devices = 4;
  bool enable_metadata = false;
  bool health = true;
  int health_resend_ms = 20000;
#ifdef DEVLET_DRA_KUBELET_HAVE_DEVLET
  std::string store = "devlet";
#else
  std::string store = "local";
#endif
  devlet::log::Options log_options;
  devlet::flags::AddFlag(app, "--driver-name", driver_name, "DRA driver name");
  devlet::flags::AddFlag(app, "--node-name", node_name, "Node name; also the pool name");
  devlet::flags::AddFlag(app, "--kubelet-registrar-directory-path", registrar_dir,
                         "Kubelet plugin registry directory");
  devlet::flags::AddFlag(app, "--kubelet-plugins-directory-path", plugins_dir,
                         "Kubelet plugins directory; the data directory is <this>/<driver>");
  devlet::flags::AddFlag(app, "--cdi-root", cdi_root, "Directory for transient CDI specs");
  devlet::flags::AddFlag(app, "--claims-dir", claims_dir, "Directory of ResourceClaim JSON files")
      ->required();
  devlet::flags::AddFlag(app, "--pod-uid", pod_uid, "Pod UID: rolling-update socket names");
  devlet::flags::AddFlag(app, "--devices", devices, "Number of simulated GPUs (gpu-0 ...)");
  devlet::flags::AddFlag(app, "--enable-device-metadata", enable_metadata,
                         "Write KEP-5304 device-metadata files");
  devlet::flags::AddFlag(app, "--health", health, "Serve the resource health services");
  devlet::flags::AddFlag(app, "--health-resend-interval-ms", health_resend_ms,
                         "Re-send health at least this often");
  devlet::flags::AddFlag(app, "--store", store,
                         "devlet: kube/ codec, cdi/ writer, state/ checkpoint; local: this "
                         "module's own file-based implementations");
  devlet::flags::AddLoggingFlags(app, log_options);
  try {
    devlet::flags::Parse(app, argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  devlet::log::Configure(log_options);
  devlet::log::Logger logger;
  if (node_name.empty()) node_name = "node-1";
  if (pod_uid.empty()) {
    if (const char* env = std::getenv("POD_UID")) pod_uid = env;
  }

  using namespace devlet::dra_kubelet;
  const std::string data_dir = plugins_dir + "/" + driver_name;
  SimulatedBackend backend(node_name, SimulatedBackend::Gpus(devices));
  std::unique_ptr<ClaimSource> claims;
  std::unique_ptr<CdiWriter> cdi;
  std::unique_ptr<CheckpointStore> checkpoint;
  if (store == "local") {
    claims = std::make_unique<FileClaimSource>(claims_dir);
    cdi = std::make_unique<JsonCdiWriter>(cdi_root);
    checkpoint = std::make_unique<FileCheckpointStore>(data_dir + "/checkpoint.json");
#ifdef DEVLET_DRA_KUBELET_HAVE_DEVLET
  } else if (store == "devlet") {
    claims = std::make_unique<ManifestClaimSource>(claims_dir);
    cdi = std::make_unique<CdiSpecWriter>(cdi_root);
    absl::StatusOr<std::unique_ptr<StateCheckpointStore>> opened =
        StateCheckpointStore::Open(data_dir, driver_name, cdi_root);
    if (!opened.ok()) {
      logger.Error(opened.status(), "Cannot open the checkpoint");
      return 1;
    }
    checkpoint = *std::move(opened);
#endif
  } else {
    logger.Error(devlet::InvalidArgument("unknown --store " + store), "Bad flags");
    return 2;
  }
  logger.V(1).Info("Using stores", "store", store);
  PreparerOptions preparer_options;
  preparer_options.driver_name = driver_name;
  preparer_options.node_name = node_name;
  preparer_options.plugin_data_dir = data_dir;
  preparer_options.enable_device_metadata = enable_metadata;
  if (!pod_uid.empty()) preparer_options.serialize_lock_path = data_dir + "/serialize.lock";
  ClaimPreparer preparer(preparer_options, *claims, backend, *cdi, *checkpoint);

  PluginOptions options;
  options.driver_name = driver_name;
  options.registrar_dir = registrar_dir;
  options.plugin_data_dir = data_dir;
  options.pod_uid = pod_uid;
  options.health = health;
  options.health_resend_interval = std::chrono::milliseconds(health_resend_ms);
  absl::StatusOr<std::unique_ptr<KubeletPlugin>> plugin =
      KubeletPlugin::Start(options, preparer, &backend);
  if (!plugin.ok()) {
    logger.Error(plugin.status(), "Cannot start the kubelet plugin");
    return 1;
  }
  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGUSR1) {
      backend.SetHealth("gpu-0", HealthStatus::kUnhealthy, "simulated XID 79: GPU has fallen off the bus");
      continue;
    }
    if (sig == SIGUSR2) {
      for (int i = 0; i < devices; ++i) {
        backend.SetHealth("gpu-" + std::to_string(i), HealthStatus::kHealthy, "");
      }
      continue;
    }
    logger.Info("Stopping on signal", "signal", sig);
    (*plugin)->Stop();
    return 0;
  }
}
