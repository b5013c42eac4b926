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

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) {
  g_stop = 1;
}

}  // namespace

int main(int argc, char** argv) {
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
  devlet::extender::ServerOptions server_options;
  std::string allowed_client_names;
  int header_timeout_s = static_cast<int>(server_options.header_timeout.count());
  int read_timeout_s = static_cast<int>(server_options.read_timeout.count());
  int request_timeout_s = static_cast<int>(server_options.request_timeout.count());
  int idle_timeout_s = static_cast<int>(server_options.idle_timeout.count());
  int stuck_s = static_cast<int>(server_options.stuck_timeout.count());

  CLI::App app{"devlet-extender: the devlet allocator as a kube-scheduler extender"};
  using devlet::flags::AddFlag;
  AddFlag(app, "--manifests", manifests,
          "Standalone mode: watch DeviceClasses, ResourceSlices, ResourceClaims, DeviceTaintRules, "
          "Nodes and Pods in this directory (kube/client ManifestStore); bind writes claims' "
          "status and pods' spec.nodeName back into it");
  AddFlag(app, "--kubeconfig", kubeconfig,
          "Kubeconfig for the kube-apiserver; without it and without --manifests: $KUBECONFIG, "
          "the in-cluster service account, then ~/.kube/config");
  AddFlag(app, "--kube-api-qps", kube_api_qps,
          "Client-side rate limit towards the kube-apiserver (requests per second; <= 0: none)");
  AddFlag(app, "--kube-api-burst", kube_api_burst, "Burst of --kube-api-qps");
  AddFlag(app, "--mode", mode, "score (alongside DynamicResources) or allocate (owns allocation)");
  AddFlag(app, "--policy", policy, "Prioritize policy: binpack or spread");
  AddFlag(app, "--feature-gates", feature_gates, "Allocator feature gates, A=true,B=false");
  AddFlag(app, "--filter-timeout-ms", filter_timeout_ms,
          "Deadline for one filter request's allocations; 0 disables");
  AddFlag(app, "--parallelism", parallelism, "Threads per filter request (0: one per CPU)");
  AddFlag(app, "--reuse-results", reuse_results,
          "Reuse a node's filter/prioritize outcome for pods with the same claim specs while the "
          "node's devices, pools, allocations and Node object are unchanged");
  AddFlag(app, "--check-peer-allocations", check_peer_allocations,
          "Allocate mode with several replicas: before binding, wait until the claim watch has "
          "delivered this bind's writes and back off if a claim written first took one of its "
          "devices (needs --kubeconfig)");
  AddFlag(app, "--peer-check-timeout-ms", peer_check_timeout_ms,
          "How long a bind waits for the watch in --check-peer-allocations; then it fails");
  AddFlag(app, "--bind-address", server_options.host,
          "Address to listen on (default loopback; in a cluster give the pod's address or "
          "0.0.0.0 together with --tls-cert-file, --tls-private-key-file and --client-ca-file)");
  AddFlag(app, "--port", server_options.port, "Port to listen on");
  AddFlag(app, "--url-prefix", server_options.prefix,
          "Path prefix of the verbs (the path of the scheduler's urlPrefix)");
  AddFlag(app, "--filter-verb", server_options.filter_verb, "filterVerb");
  AddFlag(app, "--prioritize-verb", server_options.prioritize_verb, "prioritizeVerb");
  AddFlag(app, "--bind-verb", server_options.bind_verb, "bindVerb");
  AddFlag(app, "--tls-cert-file", server_options.cert_file,
          "Serve HTTPS (TLS 1.2+) with this PEM certificate (chain)");
  AddFlag(app, "--tls-private-key-file", server_options.key_file, "Key of --tls-cert-file");
  AddFlag(app, "--client-ca-file", server_options.client_ca_file,
          "With TLS: the verbs need a client certificate signed by a CA in this PEM bundle "
          "(kube-scheduler: the extender's tlsConfig certFile/keyFile); /healthz, /readyz and "
          "/metrics stay open");
  AddFlag(app, "--allowed-client-names", allowed_client_names,
          "With --client-ca-file: comma-separated common names the client certificate must have "
          "(empty: any certificate the CA signed)");
  AddFlag(app, "--max-body-bytes", server_options.max_body_bytes, "Largest request body (413)");
  AddFlag(app, "--max-header-bytes", server_options.max_header_bytes,
          "Largest request line and headers (431)");
  AddFlag(app, "--max-connections", server_options.max_connections,
          "Open connections beyond which new ones get 503");
  AddFlag(app, "--threads", server_options.threads, "HTTP worker threads running the verbs");
  AddFlag(app, "--max-queued-requests", server_options.max_queued_requests,
          "Verb requests waiting for a worker beyond which new ones get 503 (0: 4 x --threads)");
  AddFlag(app, "--header-timeout-seconds", header_timeout_s,
          "Deadline for a request's headers (and the TLS handshake) from its first byte (408)");
  AddFlag(app, "--read-timeout-seconds", read_timeout_s,
          "Longest silence inside a request body (408)");
  AddFlag(app, "--request-timeout-seconds", request_timeout_s,
          "Deadline for a whole request from its first byte (408); also for writing a reply");
  AddFlag(app, "--idle-timeout-seconds", idle_timeout_s,
          "A connection without a request for this long is closed");
  AddFlag(app, "--stuck-request-seconds", stuck_s,
          "/healthz is 503 once every worker has been on its request for this long");
  if (std::optional<int> exit_code = devlet::flags::ParseCommandLine(app, argc, argv)) {
    return *exit_code;
  }
  devlet::log::Logger logger;
  for (int seconds :
       {header_timeout_s, read_timeout_s, request_timeout_s, idle_timeout_s, stuck_s}) {
    if (seconds <= 0) {
      std::cerr << "devlet-extender: the --*-seconds flags must be positive\n";
      return 2;
    }
  }
  server_options.header_timeout = std::chrono::seconds(header_timeout_s);
  server_options.read_timeout = std::chrono::seconds(read_timeout_s);
  server_options.request_timeout = std::chrono::seconds(request_timeout_s);
  server_options.idle_timeout = std::chrono::seconds(idle_timeout_s);
  server_options.stuck_timeout = std::chrono::seconds(stuck_s);
  for (size_t start = 0; start <= allowed_client_names.size();) {
    size_t comma = allowed_client_names.find(',', start);
    if (comma == std::string::npos)
      comma = allowed_client_names.size();
    if (comma > start) {
      server_options.allowed_client_names.push_back(
          allowed_client_names.substr(start, comma - start));
    }
    start = comma + 1;
  }
  if (!server_options.allowed_client_names.empty() && server_options.client_ca_file.empty()) {
    std::cerr << "devlet-extender: --allowed-client-names needs --client-ca-file\n";
    return 2;
  }
  // Each idle or slow connection costs a descriptor now rather than a thread: raise the soft
  // limit to the hard one, as container runtimes do, so --max-connections is reachable.
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }

  absl::StatusOr<devlet::allocator::Features> features =
      devlet::allocator::ParseFeatureGates(feature_gates);
  absl::StatusOr<devlet::extender::Mode> parsed_mode = devlet::extender::ParseMode(mode);
  absl::StatusOr<devlet::extender::Policy> parsed_policy = devlet::extender::ParsePolicy(policy);
  for (const absl::Status& status :
       {features.status(), parsed_mode.status(), parsed_policy.status()}) {
    if (!status.ok()) {
      std::cerr << "devlet-extender: " << devlet::Message(status) << "\n";
      return 2;
    }
  }
  if (!kubeconfig.empty() && !manifests.empty()) {
    std::cerr << "devlet-extender: --kubeconfig and --manifests exclude each other\n";
    return 2;
  }
  // The manifest store's resourceVersions have no order: the check could never confirm a bind.
  if (check_peer_allocations && !manifests.empty()) {
    std::cerr << "devlet-extender: --check-peer-allocations needs the kube-apiserver, not "
                 "--manifests\n";
    return 2;
  }
  if (peer_check_timeout_ms <= 0) {
    std::cerr << "devlet-extender: --peer-check-timeout-ms must be positive\n";
    return 2;
  }

  // One ObjectStore: the manifest directory (standalone) or the kube-apiserver.
  std::unique_ptr<devlet::kube::ObjectStore> store;
  if (!manifests.empty()) {
    absl::StatusOr<std::unique_ptr<devlet::kube::ManifestStore>> opened =
        devlet::kube::ManifestStore::Open({.dir = manifests});
    if (!opened.ok()) {
      logger.Error(opened.status(), "Cannot open --manifests");
      return 1;
    }
    store = *std::move(opened);
  } else {
    absl::StatusOr<devlet::kube::RestConfig> config = devlet::kube::LoadRestConfig(kubeconfig);
    if (!config.ok()) {
      logger.Error(config.status(), "Cannot load the kube-apiserver configuration");
      return 1;
    }
    config->user_agent = "devlet-extender";
    config->qps = kube_api_qps;
    config->burst = kube_api_burst;
    absl::StatusOr<std::unique_ptr<devlet::kube::ApiServerStore>> opened =
        devlet::kube::ApiServerStore::Create(*std::move(config));
    if (!opened.ok()) {
      logger.Error(opened.status(), "Cannot create the kube-apiserver client");
      return 1;
    }
    store = *std::move(opened);
  }
  devlet::extender::ClusterState state(*features);
  devlet::extender::StoreWriter writer(*store);
  devlet::extender::Extender extender(
      state, writer,
      {.mode = *parsed_mode,
       .policy = *parsed_policy,
       .filter_timeout = std::chrono::milliseconds(filter_timeout_ms),
       .parallelism = parallelism,
       .reuse_results = reuse_results,
       .check_peer_allocations = check_peer_allocations,
       .peer_check_timeout = std::chrono::milliseconds(peer_check_timeout_ms)});
  devlet::extender::Server server(extender, server_options);
  if (absl::Status status = server.Start(); !status.ok()) {
    logger.Error(status, "Cannot start the HTTP server");
    return 1;
  }
  // A peer that closed: the write's error is handled where it happens (the API client's TLS
  // writes use plain write(2)).
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  // The first full sync is retried (an API server that is not up yet); /readyz stays 503 until it
  // succeeds. Listing again re-applies the same objects, which is harmless.
  absl::StatusOr<std::vector<std::unique_ptr<devlet::kube::Watcher>>> watchers =
      devlet::extender::StartSync(*store, state);
  std::chrono::milliseconds backoff(500);
  while (!watchers.ok() && !g_stop) {
    logger.Error(watchers.status(), "Cannot list and watch the cluster; retrying", "backoff_ms",
                 backoff.count());
    for (auto slept = std::chrono::milliseconds(0); slept < backoff && !g_stop;
         slept += std::chrono::milliseconds(100)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
    watchers = devlet::extender::StartSync(*store, state);
  }
  if (!watchers.ok()) {
    server.Stop();
    return 1;
  }
  const bool loopback = server_options.host.starts_with("127.") || server_options.host == "::1" ||
                        server_options.host == "localhost";
  if (!loopback && server_options.client_ca_file.empty()) {
    // Anyone who reaches the port can then bind pods and write allocations.
    logger.Error(absl::PermissionDeniedError("no client authentication"),
                 "Serving the verbs beyond loopback without --client-ca-file: any client that "
                 "reaches this port can bind pods",
                 "bind_address", server_options.host);
  }
  logger.Info("devlet-extender serving", "address", server_options.host, "port", server.port(),
              "tls", !server_options.cert_file.empty(), "client_auth",
              !server_options.client_ca_file.empty(), "mode", mode, "slices", state.num_slices());
  while (!g_stop)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto stopping = std::chrono::steady_clock::now();
  // Watches end within about 200 ms of being told (the REST transport polls for it); stop them all
  // at once rather than one after another.
  std::vector<std::thread> stoppers;
  for (auto& watcher : *watchers) {
    stoppers.emplace_back([&watcher] { watcher->Stop(); });
  }
  for (auto& stopper : stoppers)
    stopper.join();
  watchers->clear();
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
  return 0;
}
