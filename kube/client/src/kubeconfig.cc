// Kubeconfig and in-cluster configuration (client-go's clientcmd and rest.InClusterConfig).
#include "devlet/kube/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "devlet/common/status.h"

namespace devlet::kube {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound(what + ": cannot read " + path);
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Base64 (standard alphabet, padding optional, whitespace ignored) as kubeconfig *-data fields.
absl::StatusOr<std::string> DecodeBase64(const std::string& in, const std::string& what) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    const int v = value(c);
    if (v < 0) return InvalidArgument(what + ": not valid base64");
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

std::string Str(const YAML::Node& node, const char* key) {
  const YAML::Node value = node[key];
  if (!value || !value.IsScalar()) return std::string();
  return value.as<std::string>();
}

bool Bool(const YAML::Node& node, const char* key) {
  const YAML::Node value = node[key];
  if (!value || !value.IsScalar()) return false;
  return value.as<bool>(false);
}

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / path).string();
}

// Finds the entry `name` in a named list (clusters, users, contexts) and returns its `field`.
absl::StatusOr<YAML::Node> Entry(const YAML::Node& root, const char* list, const char* field,
                                 const std::string& name, const std::string& source) {
  const YAML::Node entries = root[list];
  if (entries && entries.IsSequence()) {
    for (const YAML::Node& entry : entries) {
      if (Str(entry, "name") == name) {
        const YAML::Node inner = entry[field];
        if (!inner || !inner.IsMap()) return YAML::Node(YAML::NodeType::Map);
        return inner;
      }
    }
  }
  return InvalidArgument(source + ": " + list + ": no entry named \"" + name + "\"");
}

absl::StatusOr<RestConfig> Parse(const std::string& yaml, const std::string& base_dir,
                                 const KubeconfigOptions& options, const std::string& source) {
  const YAML::Node root = YAML::Load(yaml);
  if (!root || !root.IsMap()) {
    return InvalidArgument(source + ": not a kubeconfig (expected a YAML mapping)");
  }
  std::string context_name = options.context.empty() ? Str(root, "current-context")
                                                      : options.context;
  if (context_name.empty()) {
    return InvalidArgument(source + ": no current-context and no context given");
  }
  DEVLET_ASSIGN_OR_RETURN(YAML::Node context,
                          Entry(root, "contexts", "context", context_name, source));
  const std::string cluster_name = Str(context, "cluster");
  const std::string user_name = Str(context, "user");
  if (cluster_name.empty()) {
    return InvalidArgument(source + ": context \"" + context_name + "\" names no cluster");
  }
  DEVLET_ASSIGN_OR_RETURN(YAML::Node cluster,
                          Entry(root, "clusters", "cluster", cluster_name, source));
  RestConfig config;
  config.server = Str(cluster, "server");
  if (config.server.empty()) {
    return InvalidArgument(source + ": cluster \"" + cluster_name + "\" has no server");
  }
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  const std::string where_cluster = source + ": cluster \"" + cluster_name + "\"";
  if (std::string data = Str(cluster, "certificate-authority-data"); !data.empty()) {
    DEVLET_ASSIGN_OR_RETURN(config.certificate_authority_data,
                            DecodeBase64(data, where_cluster + ": certificate-authority-data"));
  }
  config.certificate_authority_file = Resolve(Str(cluster, "certificate-authority"), base_dir);
  config.insecure_skip_tls_verify = Bool(cluster, "insecure-skip-tls-verify");
  config.tls_server_name = Str(cluster, "tls-server-name");

  if (!user_name.empty()) {
    DEVLET_ASSIGN_OR_RETURN(YAML::Node user, Entry(root, "users", "user", user_name, source));
    const std::string where = source + ": user \"" + user_name + "\"";
    if (user["exec"] || user["auth-provider"]) {
      return Unimplemented(where + ": exec and auth-provider credentials are not supported; "
                           "use a token, a token file or a client certificate");
    }
    config.token = Str(user, "token");
    config.token_file = Resolve(Str(user, "tokenFile"), base_dir);
    if (std::string data = Str(user, "client-certificate-data"); !data.empty()) {
      DEVLET_ASSIGN_OR_RETURN(config.client_certificate_data,
                              DecodeBase64(data, where + ": client-certificate-data"));
    }
    if (std::string data = Str(user, "client-key-data"); !data.empty()) {
      DEVLET_ASSIGN_OR_RETURN(config.client_key_data,
                              DecodeBase64(data, where + ": client-key-data"));
    }
    config.client_certificate_file = Resolve(Str(user, "client-certificate"), base_dir);
    config.client_key_file = Resolve(Str(user, "client-key"), base_dir);
    config.username = Str(user, "username");
    config.password = Str(user, "password");
    const bool has_cert =
        !config.client_certificate_data.empty() || !config.client_certificate_file.empty();
    const bool has_key = !config.client_key_data.empty() || !config.client_key_file.empty();
    if (has_cert != has_key) {
      return InvalidArgument(where + ": a client certificate needs a client key and vice versa");
    }
  }
  return config;
}

}  // namespace

absl::StatusOr<RestConfig> ParseKubeconfig(const std::string& yaml, const std::string& base_dir,
                                           const KubeconfigOptions& options,
                                           const std::string& source) {
  try {
    return Parse(yaml, base_dir, options, source);
  } catch (const std::exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
}

absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path,
                                          const KubeconfigOptions& options) {
  DEVLET_ASSIGN_OR_RETURN(std::string yaml, ReadFile(path, "kubeconfig"));
  std::string base_dir;
  try {
    base_dir = std::filesystem::absolute(path).parent_path().string();
  } catch (const std::exception&) {
  }
  return ParseKubeconfig(yaml, base_dir, options, path);
}

absl::StatusOr<RestConfig> InClusterConfig(const InClusterOptions& options) {
  std::string host = options.host;
  std::string port = options.port;
  if (host.empty()) {
    const char* env = std::getenv("KUBERNETES_SERVICE_HOST");
    host = env ? env : "";
  }
  if (port.empty()) {
    const char* env = std::getenv("KUBERNETES_SERVICE_PORT");
    port = env ? env : "";
  }
  if (host.empty() || port.empty()) {
    return FailedPrecondition(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
        "set (or pass --kubeconfig)");
  }
  // Read once now so that a missing token fails at start-up, not at the first request.
  DEVLET_RETURN_IF_ERROR(ReadFile(options.token_file, "service-account token"));
  RestConfig config;
  const bool ipv6 = host.find(':') != std::string::npos;
  config.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  config.token_file = options.token_file;
  std::error_code ec;
  if (std::filesystem::exists(options.ca_file, ec)) {
    config.certificate_authority_file = options.ca_file;
  }
  return config;
}

absl::StatusOr<RestConfig> LoadRestConfig(const std::string& kubeconfig_path) {
  if (!kubeconfig_path.empty()) return LoadKubeconfig(kubeconfig_path);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string first = env;
    first = first.substr(0, first.find(':'));
    if (!first.empty()) return LoadKubeconfig(first);
  }
  if (const char* env = std::getenv("KUBERNETES_SERVICE_HOST"); env != nullptr && *env != '\0') {
    return InClusterConfig();
  }
  const char* home = std::getenv("HOME");
  if (home != nullptr) {
    const std::string path = std::string(home) + "/.kube/config";
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) return LoadKubeconfig(path);
  }
  return FailedPrecondition(
      "no API server configured: pass --kubeconfig, set KUBECONFIG, or run in a cluster");
}

}  // namespace devlet::kube
