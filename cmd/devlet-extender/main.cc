// devlet-extender: the structured allocator served to kube-scheduler as an extender webhook.
// See allocator/extender/README.md for the modes and the KubeSchedulerConfiguration to use.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "devlet/allocator/features.h"
#include "devlet/common/flags.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/extender/extender.h"
#include "devlet/extender/server.h"
#include "devlet/extender/store.h"
#include "devlet/kube/client.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"

namespace {

using devlet::extender::ServerOptions;

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) {
  g_stop = 1;
}

// Flags holds the command line as given.
struct Flags {
  std::string manifests;
  std::string kubeconfig;
  std::string mode = "score";
  std::string policy = "binpack";
  std::string feature_gates;
  int filter_timeout_ms = 5000;
  int parallelism = 0;
  bool reuse_results = true;
  bool check_peer_allocations = false;
  int peer_check_timeout_ms = 5000;
  double kube_api_qps = 50;
  int kube_api_burst = 100;
  ServerOptions server;
  std::string allowed_client_names;
  int header_timeout_s = static_cast<int>(server.header_timeout.count());
  int read_timeout_s = static_cast<int>(server.read_timeout.count());
  int request_timeout_s = static_cast<int>(server.request_timeout.count());
  int idle_timeout_s = static_cast<int>(server.idle_timeout.count());
  int stuck_s = static_cast<int>(server.stuck_timeout.count());
};

void AddFlags(CLI::App& app, Flags& f) {
  using devlet::flags::AddFlag;
  AddFlag(app, "--manifests", f.manifests,
          "Standalone mode: watch DeviceClasses, ResourceSlices, ResourceClaims, DeviceTaintRules, "
          "Nodes and Pods in this directory (kube/client ManifestStore); bind writes claims' "
          "status and pods' spec.nodeName back into it");
  AddFlag(app, "--kubeconfig", f.kubeconfig,
          "Kubeconfig for the kube-apiserver; without it and without --manifests: $KUBECONFIG, "
          "the in-cluster service account, then ~/.kube/config");
  AddFlag(app, "--kube-api-qps", f.kube_api_qps,
          "Client-side rate limit towards the kube-apiserver (requests per second; <= 0: none)");
  AddFlag(app, "--kube-api-burst", f.kube_api_burst, "Burst of --kube-api-qps");
  AddFlag(app, "--mode", f.mode,
          "score (alongside DynamicResources) or allocate (owns allocation)");
  AddFlag(app, "--policy", f.policy, "Prioritize policy: binpack or spread");
  AddFlag(app, "--feature-gates", f.feature_gates, "Allocator feature gates, A=true,B=false");
  AddFlag(app, "--filter-timeout-ms", f.filter_timeout_ms,
          "Deadline for one filter request's allocations; 0 disables");
  AddFlag(app, "--parallelism", f.parallelism, "Threads per filter request (0: one per CPU)");
  AddFlag(app, "--reuse-results", f.reuse_results,
          "Reuse a node's filter/prioritize outcome for pods with the same claim specs while the "
          "node's devices, pools, allocations and Node object are unchanged");
  AddFlag(app, "--check-peer-allocations", f.check_peer_allocations,
          "Allocate mode with several replicas: before binding, wait until the claim watch has "
          "delivered this bind's writes and back off if a claim written first took one of its "
          "devices (needs --kubeconfig)");
  AddFlag(app, "--peer-check-timeout-ms", f.peer_check_timeout_ms,
          "How long a bind waits for the watch in --check-peer-allocations; then it fails");
  AddFlag(app, "--bind-address", f.server.host,
          "Address to listen on (default loopback; in a cluster give the pod's address or "
          "0.0.0.0 together with --tls-cert-file, --tls-private-key-file and --client-ca-file)");
  AddFlag(app, "--port", f.server.port, "Port to listen on");
  AddFlag(app, "--url-prefix", f.server.prefix,
          "Path prefix of the verbs (the path of the scheduler's urlPrefix)");
  AddFlag(app, "--filter-verb", f.server.filter_verb, "filterVerb");
  AddFlag(app, "--prioritize-verb", f.server.prioritize_verb, "prioritizeVerb");
  AddFlag(app, "--bind-verb", f.server.bind_verb, "bindVerb");
  AddFlag(app, "--tls-cert-file", f.server.cert_file,
          "Serve HTTPS (TLS 1.2+) with this PEM certificate (chain)");
  AddFlag(app, "--tls-private-key-file", f.server.key_file, "Key of --tls-cert-file");
  AddFlag(app, "--client-ca-file", f.server.client_ca_file,
          "With TLS: the verbs need a client certificate signed by a CA in this PEM bundle "
          "(kube-scheduler: the extender's tlsConfig certFile/keyFile); /healthz, /readyz and "
          "/metrics stay open");
  AddFlag(app, "--allowed-client-names", f.allowed_client_names,
          "With --client-ca-file: comma-separated common names the client certificate must have "
          "(empty: any certificate the CA signed)");
  AddFlag(app, "--max-body-bytes", f.server.max_body_bytes, "Largest request body (413)");
  AddFlag(app, "--max-header-bytes", f.server.max_header_bytes,
          "Largest request line and headers (431)");
  AddFlag(app, "--max-connections", f.server.max_connections,
          "Open connections beyond which new ones get 503");
  AddFlag(app, "--threads", f.server.threads, "HTTP worker threads running the verbs");
  AddFlag(app, "--max-queued-requests", f.server.max_queued_requests,
          "Verb requests waiting for a worker beyond which new ones get 503 (0: 4 x --threads)");
  AddFlag(app, "--header-timeout-seconds", f.header_timeout_s,
          "Deadline for a request's headers (and the TLS handshake) from its first byte (408)");
  AddFlag(app, "--read-timeout-seconds", f.read_timeout_s,
          "Longest silence inside a request body (408)");
  AddFlag(app, "--request-timeout-seconds", f.request_timeout_s,
          "Deadline for a whole request from its first byte (408); also for writing a reply");
  AddFlag(app, "--idle-timeout-seconds", f.idle_timeout_s,
          "A connection without a request for this long is closed");
  AddFlag(app, "--stuck-request-seconds", f.stuck_s,
          "/healthz is 503 once every worker has been on its request for this long");
}

// Config is what the flags ask for, checked against each other.
struct Config {
  devlet::allocator::Features features;
  devlet::extender::Options extender;
  ServerOptions server;
};

// Resolve checks the flags and turns them into a Config; an error is a bad command line.
absl::StatusOr<Config> Resolve(const Flags& f) {
  for (int seconds :
       {f.header_timeout_s, f.read_timeout_s, f.request_timeout_s, f.idle_timeout_s, f.stuck_s}) {
    if (seconds <= 0) return devlet::InvalidArgument("the --*-seconds flags must be positive");
  }
  Config config{.server = f.server};
  config.server.header_timeout = std::chrono::seconds(f.header_timeout_s);
  config.server.read_timeout = std::chrono::seconds(f.read_timeout_s);
  config.server.request_timeout = std::chrono::seconds(f.request_timeout_s);
  config.server.idle_timeout = std::chrono::seconds(f.idle_timeout_s);
  config.server.stuck_timeout = std::chrono::seconds(f.stuck_s);
  for (size_t start = 0; start <= f.allowed_client_names.size();) {
    size_t comma = f.allowed_client_names.find(',', start);
    if (comma == std::string::npos) comma = f.allowed_client_names.size();
    if (comma > start) {
      config.server.allowed_client_names.push_back(
          f.allowed_client_names.substr(start, comma - start));
    }
    start = comma + 1;
  }
  if (!config.server.allowed_client_names.empty() && config.server.client_ca_file.empty()) {
    return devlet::InvalidArgument("--allowed-client-names needs --client-ca-file");
  }
  DEVLET_ASSIGN_OR_RETURN(config.features, devlet::allocator::ParseFeatureGates(f.feature_gates));
  DEVLET_ASSIGN_OR_RETURN(const devlet::extender::Mode mode, devlet::extender::ParseMode(f.mode));
  DEVLET_ASSIGN_OR_RETURN(const devlet::extender::Policy policy,
                          devlet::extender::ParsePolicy(f.policy));
  if (!f.kubeconfig.empty() && !f.manifests.empty()) {
    return devlet::InvalidArgument("--kubeconfig and --manifests exclude each other");
  }
  // The manifest store's resourceVersions have no order: the check could never confirm a bind.
  if (f.check_peer_allocations && !f.manifests.empty()) {
    return devlet::InvalidArgument(
        "--check-peer-allocations needs the kube-apiserver, not --manifests");
  }
  if (f.peer_check_timeout_ms <= 0) {
    return devlet::InvalidArgument("--peer-check-timeout-ms must be positive");
  }
  config.extender = {.mode = mode,
                     .policy = policy,
                     .filter_timeout = std::chrono::milliseconds(f.filter_timeout_ms),
                     .parallelism = f.parallelism,
                     .reuse_results = f.reuse_results,
                     .check_peer_allocations = f.check_peer_allocations,
                     .peer_check_timeout = std::chrono::milliseconds(f.peer_check_timeout_ms)};
  return config;
}

// OpenStore opens the one ObjectStore: the manifest directory (standalone) or the kube-apiserver.
absl::StatusOr<std::unique_ptr<devlet::kube::ObjectStore>> OpenStore(const Flags& f) {
  if (!f.manifests.empty()) {
    absl::StatusOr<std::unique_ptr<devlet::kube::ManifestStore>> opened =
        devlet::kube::ManifestStore::Open({.dir = f.manifests});
    if (!opened.ok()) return devlet::WithContext(opened.status(), "Cannot open --manifests");
    return std::unique_ptr<devlet::kube::ObjectStore>(*std::move(opened));
  }
  absl::StatusOr<devlet::kube::RestConfig> config = devlet::kube::LoadRestConfig(f.kubeconfig);
  if (!config.ok()) {
    return devlet::WithContext(config.status(), "Cannot load the kube-apiserver configuration");
  }
  config->user_agent = "devlet-extender";
  config->qps = f.kube_api_qps;
  config->burst = f.kube_api_burst;
  absl::StatusOr<std::unique_ptr<devlet::kube::ApiServerStore>> created =
      devlet::kube::ApiServerStore::Create(*std::move(config));
  if (!created.ok()) {
    return devlet::WithContext(created.status(), "Cannot create the kube-apiserver client");
  }
  return std::unique_ptr<devlet::kube::ObjectStore>(*std::move(created));
}

// SyncUntilStopped lists and watches the cluster into `state`, retrying the first full sync
// with backoff (an API server that is not up yet) until it succeeds or a signal stops it; /readyz
// stays 503 meanwhile. Listing again re-applies the same objects, which is harmless.
absl::StatusOr<std::vector<std::unique_ptr<devlet::kube::Watcher>>> SyncUntilStopped(
    devlet::kube::ObjectStore& store, devlet::extender::ClusterState& state,
    devlet::log::Logger& logger) {
  absl::StatusOr<std::vector<std::unique_ptr<devlet::kube::Watcher>>> watchers =
      devlet::extender::StartSync(store, state);
  std::chrono::milliseconds backoff(500);
  while (!watchers.ok() && !g_stop) {
    logger.Error(watchers.status(), "Cannot list and watch the cluster; retrying", "backoff_ms",
                 backoff.count());
    for (auto slept = std::chrono::milliseconds(0); slept < backoff && !g_stop;
         slept += std::chrono::milliseconds(100)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
    watchers = devlet::extender::StartSync(store, state);
  }
  return watchers;
}

// WarnIfOpen logs an error when the verbs are served beyond loopback without client
// authentication: anyone who reaches the port can then bind pods and write allocations.
void WarnIfOpen(const ServerOptions& server, devlet::log::Logger& logger) {
  const bool loopback =
      server.host.starts_with("127.") || server.host == "::1" || server.host == "localhost";
  if (!loopback && server.client_ca_file.empty()) {
    logger.Error(absl::PermissionDeniedError("no client authentication"),
                 "Serving the verbs beyond loopback without --client-ca-file: any client that "
                 "reaches this port can bind pods",
                 "bind_address", server.host);
  }
}

// Shutdown stops the watches, then the server, and exits the process where the server does not
// stop within 3 s.
void Shutdown(std::vector<std::unique_ptr<devlet::kube::Watcher>>& watchers,
              devlet::extender::Server& server, devlet::log::Logger& logger) {
  const auto stopping = std::chrono::steady_clock::now();
  // Watches end within about 200 ms of being told (the REST transport polls for it); stop them all
  // at once rather than one after another.
  std::vector<std::thread> stoppers;
  for (auto& watcher : watchers) {
    stoppers.emplace_back([&watcher] { watcher->Stop(); });
  }
  for (auto& stopper : stoppers)
    stopper.join();
  watchers.clear();
  // Stop does not wait for idle keep-alive connections, and gives requests being served 2 s; a
  // worker stuck in a verb (an API server that does not answer) would hold it up, so the wait is
  // bounded rather than holding a restart up for it.
  std::atomic<bool> stopped{false};
  std::thread([&server, &stopped] {
    server.Stop();
    stopped.store(true);
  }).detach();
  while (!stopped.load() && std::chrono::steady_clock::now() - stopping < std::chrono::seconds(3)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  logger.Info("devlet-extender stopped", "seconds",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping).count(),
              "idle_connections_cut", !stopped.load());
  if (!stopped.load())
    std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"devlet-extender: the devlet allocator as a kube-scheduler extender"};
  AddFlags(app, flags);
  if (std::optional<int> exit_code = devlet::flags::ParseCommandLine(app, argc, argv)) {
    return *exit_code;
  }
  devlet::log::Logger logger;
  absl::StatusOr<Config> config = Resolve(flags);
  if (!config.ok()) {
    std::cerr << "devlet-extender: " << devlet::Message(config.status()) << "\n";
    return 2;
  }
  // Each idle or slow connection costs a descriptor now rather than a thread: raise the soft
  // limit to the hard one, as container runtimes do, so --max-connections is reachable.
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  absl::StatusOr<std::unique_ptr<devlet::kube::ObjectStore>> store = OpenStore(flags);
  if (!store.ok()) {
    logger.Error(store.status(), "Cannot start");
    return 1;
  }
  devlet::extender::ClusterState state(config->features);
  devlet::extender::StoreWriter writer(**store);
  devlet::extender::Extender extender(state, writer, config->extender);
  devlet::extender::Server server(extender, config->server);
  if (absl::Status status = server.Start(); !status.ok()) {
    logger.Error(status, "Cannot start the HTTP server");
    return 1;
  }
  // A peer that closed: the write's error is handled where it happens (the API client's TLS
  // writes use plain write(2)).
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  absl::StatusOr<std::vector<std::unique_ptr<devlet::kube::Watcher>>> watchers =
      SyncUntilStopped(**store, state, logger);
  if (!watchers.ok()) {
    server.Stop();
    return 1;
  }
  WarnIfOpen(config->server, logger);
  logger.Info("devlet-extender serving", "address", config->server.host, "port", server.port(),
              "tls", !config->server.cert_file.empty(), "client_auth",
              !config->server.client_ca_file.empty(), "mode", flags.mode, "slices",
              state.num_slices());
  while (!g_stop)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Shutdown(*watchers, server, logger);
  return 0;
}
