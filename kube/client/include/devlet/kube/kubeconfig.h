// File: devlet/kube/kubeconfig.h
//
// Where and how to reach a kube-apiserver: RestConfig, built from a kubeconfig file or from the
// in-cluster service-account environment, the way client-go's clientcmd and rest.InClusterConfig
// do.
//
//   DEVLET_ASSIGN_OR_RETURN(RestConfig config, LoadRestConfig(flags.kubeconfig));
//   DEVLET_ASSIGN_OR_RETURN(auto store, ApiServerStore::Create(config));
#pragma once

#include <chrono>
#include <string>

#include "absl/status/statusor.h"

namespace devlet::kube {

// RestConfig holds the server, the credentials and the client's behaviour.
struct RestConfig {
  // Base URL, e.g. "https://10.0.0.1:443" (a trailing path prefix is kept).
  std::string server;

  // ---- Credentials (any combination the server accepts) ----
  // Bearer token. When token_file is set it wins and is re-read (rotation): at most every
  // token_reload_interval, and at once after a 401.
  std::string token;
  std::string token_file;
  std::chrono::milliseconds token_reload_interval{std::chrono::minutes(1)};
  // Client certificate and key, PEM, as files or inline data (data wins).
  std::string client_certificate_file;
  std::string client_certificate_data;
  std::string client_key_file;
  std::string client_key_data;
  // HTTP basic auth (kubeconfig username/password); rarely used.
  std::string username;
  std::string password;

  // ---- Server verification ----
  // CA bundle, PEM, as a file or inline data (data wins); both empty: the system trust store.
  std::string certificate_authority_file;
  std::string certificate_authority_data;
  // Skips verifying the server's certificate (kubeconfig insecure-skip-tls-verify).
  bool insecure_skip_tls_verify = false;
  // kubeconfig tls-server-name: parsed but not applied yet (the server's own name is checked).
  std::string tls_server_name;

  // ---- Behaviour ----
  std::string user_agent = "devlet";
  // Client-side rate limit: a token bucket of `burst` tokens refilled at `qps` per second (client-go
  // defaults 5 / 10). qps <= 0 disables the limit.
  double qps = 5;
  int burst = 10;
  // Retries of one request after 429, 5xx or a lost connection, with exponential backoff from
  // initial_backoff up to max_backoff (a server's Retry-After is honoured, capped at max_backoff).
  int max_retries = 5;
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
  // Time limit of one non-watch request.
  std::chrono::milliseconds request_timeout{std::chrono::seconds(30)};
  // Connect timeout.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // timeoutSeconds of one watch request; the watch then reconnects from its last resourceVersion.
  std::chrono::seconds watch_timeout{std::chrono::minutes(5)};
  // Page size of List requests (the API server's `limit`; 0: no paging).
  int list_page_size = 500;
};

// KubeconfigOptions choose what to take from a kubeconfig.
struct KubeconfigOptions {
  // Context to use; empty: current-context.
  std::string context;
};

// ParseKubeconfig reads kubeconfig YAML. Relative file paths inside are resolved against
// `base_dir` (the kubeconfig's directory). Supports clusters (server, certificate-authority[-data],
// insecure-skip-tls-verify, tls-server-name), users (token, tokenFile, client-certificate[-data],
// client-key[-data], username/password) and contexts. `exec` and `auth-provider` users are
// rejected (Unimplemented). Errors name the file and the entry.
absl::StatusOr<RestConfig> ParseKubeconfig(const std::string& yaml, const std::string& base_dir,
                                           const KubeconfigOptions& options = {},
                                           const std::string& source = "kubeconfig");

// LoadKubeconfig reads and parses the kubeconfig file at `path`.
absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path,
                                          const KubeconfigOptions& options = {});

// InClusterOptions locate the in-cluster environment (tests point them elsewhere).
struct InClusterOptions {
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  // Empty: read KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
  std::string host;
  std::string port;
};

// InClusterConfig builds a config from KUBERNETES_SERVICE_HOST/PORT and the service-account token
// (re-read on rotation) and CA. FailedPrecondition when not running in a cluster.
absl::StatusOr<RestConfig> InClusterConfig(const InClusterOptions& options = {});

// LoadRestConfig picks a config like client-go's defaults: `kubeconfig_path` when set, else
// $KUBECONFIG (first entry), else in-cluster when KUBERNETES_SERVICE_HOST is set, else
// $HOME/.kube/config.
absl::StatusOr<RestConfig> LoadRestConfig(const std::string& kubeconfig_path = std::string());

}  // namespace devlet::kube
