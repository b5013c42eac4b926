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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::kube {

// ExecConfig is a kubeconfig user's `exec` credential plugin (client.authentication.k8s.io/v1 or
// v1beta1), as client-go runs it: the command with its args and extra env, KUBERNETES_EXEC_INFO
// set to an ExecCredential request, stdin closed, its stdout an ExecCredential.
struct ExecConfig {
  // A command with a '/' that is relative is resolved against the kubeconfig's directory; a bare
  // name is looked up in PATH.
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to our environment
  std::string api_version;  // client.authentication.k8s.io/v1 or .../v1beta1
  // Pass the cluster (server, CA, tls-server-name) in KUBERNETES_EXEC_INFO.
  bool provide_cluster_info = false;
  // Never, IfAvailable or Always (v1 requires it). A daemon has no terminal: "Always" is refused
  // and the plugin is always told interactive=false.
  std::string interactive_mode;
  // How long one run may take before it is killed.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// RestConfig holds the server, the credentials and the client's behaviour.
struct RestConfig {
  // Base URL, e.g. "https://10.0.0.1:443" (a trailing path prefix is kept).
  std::string server;
  // The default namespace of commands (kubectl's): the kubeconfig context's `namespace`, or
  // in-cluster the service account's namespace file; empty when neither names one. The client
  // itself does not use it.
  std::string namespace_name;

  // ---- Credentials (any combination the server accepts) ----
  // Bearer token. When token_file is set it wins and is re-read (rotation): at most every
  // token_reload_interval, and at once after a 401. An exec plugin wins over both: it runs at
  // start, again when its credential expires (10 s before its expirationTimestamp), and at once
  // after a 401. When it returns a client certificate (and the kubeconfig has none), a new one
  // is used from then on: new connections present it, idle connections made with the old one are
  // dropped and open watches are closed (they reconnect), as client-go closes its connections.
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
  // A credential plugin (kubeconfig users[].user.exec).
  std::optional<ExecConfig> exec;

  // ---- Server verification ----
  // CA bundle, PEM, as a file or inline data (data wins); both empty: the system trust store.
  std::string certificate_authority_file;
  std::string certificate_authority_data;
  // Skips verifying the server's certificate (kubeconfig insecure-skip-tls-verify).
  bool insecure_skip_tls_verify = false;
  // kubeconfig tls-server-name: the name sent as TLS SNI and checked against the server's
  // certificate instead of the host in `server` (e.g. an API server reached by IP).
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
// client-key[-data], username/password, exec) and contexts. `auth-provider` users are rejected
// (Unimplemented: the in-tree providers are gone from client-go). Errors name the file and the
// entry.
absl::StatusOr<RestConfig> ParseKubeconfig(const std::string& yaml, const std::string& base_dir,
                                           const KubeconfigOptions& options = {},
                                           const std::string& source = "kubeconfig");

// LoadKubeconfig reads and parses the kubeconfig file at `path`.
absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path,
                                          const KubeconfigOptions& options = {});

// LoadKubeconfigs merges several kubeconfig files like client-go does for a KUBECONFIG list: the
// first file that defines a cluster, user or context name wins (later definitions of the name are
// ignored, not merged field by field), the first non-empty current-context wins, and each entry's
// relative paths are resolved against the directory of the file that defined it. Files that do
// not exist are skipped; NotFound when none exists.
absl::StatusOr<RestConfig> LoadKubeconfigs(const std::vector<std::string>& paths,
                                           const KubeconfigOptions& options = {});

// ExecCredential is what an exec plugin returned (status of client.authentication.k8s.io
// ExecCredential).
struct ExecCredential {
  std::string token;
  std::string client_certificate_data;  // PEM
  std::string client_key_data;          // PEM
  // When the credential expires; nullopt: it does not (it is still re-fetched after a 401).
  std::optional<std::chrono::system_clock::time_point> expiration;
};

// RunExecPlugin runs `exec` once for `cluster` (whose server, CA data and tls-server-name are
// passed when provide_cluster_info is set) and decodes the ExecCredential it prints. A client
// certificate must come with its key, both PEM, the key must be the certificate's and the
// certificate must not have expired (InvalidArgument otherwise). Errors name the command and
// carry its stderr (trimmed).
absl::StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& exec, const RestConfig& cluster);

// InClusterOptions locate the in-cluster environment (tests point them elsewhere).
struct InClusterOptions {
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  // The pod's namespace (RestConfig::namespace_name); optional.
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
  // Empty: read KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
  std::string host;
  std::string port;
};

// InClusterConfig builds a config from KUBERNETES_SERVICE_HOST/PORT and the service-account token
// (re-read on rotation) and CA. FailedPrecondition when not running in a cluster.
absl::StatusOr<RestConfig> InClusterConfig(const InClusterOptions& options = {});

// LoadRestConfig picks a config like client-go's defaults: `kubeconfig_path` when set, else
// $KUBECONFIG (a ':'-separated list, merged by LoadKubeconfigs), else in-cluster when
// KUBERNETES_SERVICE_HOST is set, else $HOME/.kube/config.
absl::StatusOr<RestConfig> LoadRestConfig(const std::string& kubeconfig_path = std::string());

}  // namespace devlet::kube
