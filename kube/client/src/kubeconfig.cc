// Kubeconfig and in-cluster configuration (client-go's clientcmd and rest.InClusterConfig).
#include "devlet/kube/kubeconfig.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

extern char** environ;

#include "absl/strings/escaping.h"
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

// Doc is one kubeconfig file of a (possibly merged) configuration.
struct Doc {
  YAML::Node root;
  std::string base_dir;  // relative paths of this file's entries resolve against it
  std::string source;    // the file, for messages
};

// Found is a named entry (cluster, user, context) and the file that defined it.
struct Found {
  YAML::Node node;
  const Doc* doc = nullptr;
};

// Finds the entry `name` in a named list (clusters, users, contexts) and returns its `field`. The
// first file that defines the name wins, as in client-go's merge.
absl::StatusOr<Found> Entry(const std::vector<Doc>& docs, const char* list, const char* field,
                            const std::string& name) {
  for (const Doc& doc : docs) {
    const YAML::Node entries = doc.root[list];
    if (!entries || !entries.IsSequence()) continue;
    for (const YAML::Node& entry : entries) {
      if (Str(entry, "name") == name) {
        const YAML::Node inner = entry[field];
        if (!inner || !inner.IsMap()) return Found{YAML::Node(YAML::NodeType::Map), &doc};
        return Found{inner, &doc};
      }
    }
  }
  std::string sources;
  for (const Doc& doc : docs) sources += (sources.empty() ? "" : ", ") + doc.source;
  return InvalidArgument(sources + ": " + list + ": no entry named \"" + name + "\"");
}

absl::StatusOr<ExecConfig> ParseExec(const YAML::Node& exec, const std::string& base_dir,
                                     const std::string& where) {
  ExecConfig config;
  config.command = Str(exec, "command");
  if (config.command.empty()) return InvalidArgument(where + ": exec: command is required");
  // client-go resolves a relative command with a path separator against the kubeconfig's
  // directory; a bare name is looked up in PATH.
  if (config.command.find('/') != std::string::npos) config.command = Resolve(config.command, base_dir);
  config.api_version = Str(exec, "apiVersion");
  if (config.api_version != "client.authentication.k8s.io/v1" &&
      config.api_version != "client.authentication.k8s.io/v1beta1") {
    return InvalidArgument(where + ": exec: apiVersion \"" + config.api_version +
                           "\" is not supported (use client.authentication.k8s.io/v1 or v1beta1)");
  }
  if (const YAML::Node args = exec["args"]; args && args.IsSequence()) {
    for (const YAML::Node& arg : args) config.args.push_back(arg.as<std::string>());
  }
  if (const YAML::Node env = exec["env"]; env && env.IsSequence()) {
    for (const YAML::Node& entry : env) {
      const std::string name = Str(entry, "name");
      if (name.empty()) return InvalidArgument(where + ": exec: env entry without a name");
      config.env.emplace_back(name, Str(entry, "value"));
    }
  }
  config.provide_cluster_info = Bool(exec, "provideClusterInfo");
  config.interactive_mode = Str(exec, "interactiveMode");
  if (config.interactive_mode.empty()) {
    if (config.api_version == "client.authentication.k8s.io/v1") {
      return InvalidArgument(where + ": exec: interactiveMode must be set for " +
                             config.api_version);
    }
    config.interactive_mode = "IfAvailable";
  }
  if (config.interactive_mode == "Always") {
    return FailedPrecondition(where + ": exec: interactiveMode Always needs a terminal, which a "
                              "daemon does not have; use Never or IfAvailable");
  }
  if (config.interactive_mode != "Never" && config.interactive_mode != "IfAvailable") {
    return InvalidArgument(where + ": exec: interactiveMode \"" + config.interactive_mode +
                           "\" is not one of Never, IfAvailable, Always");
  }
  return config;
}

absl::StatusOr<RestConfig> Parse(const std::vector<Doc>& docs, const KubeconfigOptions& options) {
  std::string sources;
  for (const Doc& doc : docs) {
    if (!doc.root || !doc.root.IsMap()) {
      return InvalidArgument(doc.source + ": not a kubeconfig (expected a YAML mapping)");
    }
    sources += (sources.empty() ? "" : ", ") + doc.source;
  }
  std::string context_name = options.context;
  for (const Doc& doc : docs) {
    if (!context_name.empty()) break;
    context_name = Str(doc.root, "current-context");
  }
  if (context_name.empty()) {
    return InvalidArgument(sources + ": no current-context and no context given");
  }
  DEVLET_ASSIGN_OR_RETURN(Found context, Entry(docs, "contexts", "context", context_name));
  const std::string cluster_name = Str(context.node, "cluster");
  const std::string user_name = Str(context.node, "user");
  if (cluster_name.empty()) {
    return InvalidArgument(context.doc->source + ": context \"" + context_name +
                           "\" names no cluster");
  }
  DEVLET_ASSIGN_OR_RETURN(Found found_cluster, Entry(docs, "clusters", "cluster", cluster_name));
  const YAML::Node& cluster = found_cluster.node;
  const std::string& cluster_dir = found_cluster.doc->base_dir;
  RestConfig config;
  config.server = Str(cluster, "server");
  config.namespace_name = Str(context.node, "namespace");
  const std::string where_cluster = found_cluster.doc->source + ": cluster \"" + cluster_name + "\"";
  if (config.server.empty()) return InvalidArgument(where_cluster + " has no server");
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  if (std::string data = Str(cluster, "certificate-authority-data"); !data.empty()) {
    DEVLET_ASSIGN_OR_RETURN(config.certificate_authority_data,
                            DecodeBase64(data, where_cluster + ": certificate-authority-data"));
  }
  config.certificate_authority_file = Resolve(Str(cluster, "certificate-authority"), cluster_dir);
  config.insecure_skip_tls_verify = Bool(cluster, "insecure-skip-tls-verify");
  config.tls_server_name = Str(cluster, "tls-server-name");

  if (!user_name.empty()) {
    DEVLET_ASSIGN_OR_RETURN(Found found_user, Entry(docs, "users", "user", user_name));
    const YAML::Node& user = found_user.node;
    const std::string& base_dir = found_user.doc->base_dir;
    const std::string where = found_user.doc->source + ": user \"" + user_name + "\"";
    if (user["auth-provider"]) {
      return Unimplemented(where + ": auth-provider credentials are not supported; use a token, "
                           "a token file, a client certificate or an exec plugin");
    }
    if (const YAML::Node exec = user["exec"]; exec && exec.IsMap()) {
      DEVLET_ASSIGN_OR_RETURN(config.exec, ParseExec(exec, base_dir, where));
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

std::string BaseDir(const std::string& path) {
  try {
    return std::filesystem::absolute(path).parent_path().string();
  } catch (const std::exception&) {
    return std::string();
  }
}

// ParseRfc3339 reads "2026-12-03T07:00:00Z", with optional fractional seconds and a numeric
// offset instead of Z.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::size_t pos = static_cast<std::size_t>(consumed);
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  }
  long offset = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int hours = 0;
    int minutes = 0;
    if (std::sscanf(text.c_str() + pos + 1, "%2d:%2d", &hours, &minutes) != 2) return std::nullopt;
    offset = (hours * 3600L + minutes * 60L) * (text[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  std::time_t t = ::timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  t -= offset;
  // system_clock counts nanoseconds in 64 bits (up to the year 2262): later expiries, which
  // plugins use for "never", are clamped rather than wrapped into the past.
  constexpr std::time_t kLatest = 9'000'000'000;  // 2255
  return std::chrono::system_clock::from_time_t(std::min(t, kLatest));
}

// Child is a process run with stdin from /dev/null and both outputs captured.
struct ChildOutput {
  int status = 0;  // waitpid status
  bool timed_out = false;
  std::string out;
  std::string err;
};

absl::StatusOr<ChildOutput> RunChild(const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env,
                                     std::chrono::milliseconds timeout) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int saved = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return ErrnoToStatus(saved, "pipe");
  }
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (const std::string& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int saved = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return ErrnoToStatus(saved, "fork");
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ChildOutput result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buffer[4096];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    const int ready = ::poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& fd : fds) {
    if (fd.fd >= 0) ::close(fd.fd);
  }
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

std::string TrimSpace(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

// OpenSslError returns (and clears) the reason of OpenSSL's last error.
std::string OpenSslError() {
  const unsigned long code = ::ERR_peek_last_error();
  ::ERR_clear_error();
  if (code == 0) return "no PEM data";
  const char* reason = ::ERR_reason_error_string(code);
  return reason != nullptr ? reason : "error " + std::to_string(code);
}

// CheckKeyPair checks what the transport would otherwise only find at the TLS handshake (with an
// unhelpful "could not load PEM client certificate"): the certificate and the key are PEM, the
// key belongs to the certificate, and the certificate has not expired. client-go checks the first
// two with tls.X509KeyPair when it takes the plugin's answer.
absl::Status CheckKeyPair(const std::string& cert_pem, const std::string& key_pem,
                          const std::string& who) {
  struct Free {
    void operator()(BIO* b) const { ::BIO_free(b); }
    void operator()(X509* x) const { ::X509_free(x); }
    void operator()(EVP_PKEY* k) const { ::EVP_PKEY_free(k); }
  };
  ::ERR_clear_error();
  std::unique_ptr<BIO, Free> cert_bio(
      ::BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  std::unique_ptr<X509, Free> cert(
      cert_bio ? ::PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) {
    return InvalidArgument(who + ": status.clientCertificateData is not a PEM certificate (" +
                           OpenSslError() + ")");
  }
  std::unique_ptr<BIO, Free> key_bio(
      ::BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  // An empty passphrase callback: an encrypted key fails instead of prompting on a terminal.
  std::unique_ptr<EVP_PKEY, Free> key(
      key_bio ? ::PEM_read_bio_PrivateKey(key_bio.get(), nullptr,
                                          [](char*, int, int, void*) { return 0; }, nullptr)
              : nullptr);
  if (!key) {
    return InvalidArgument(who + ": status.clientKeyData is not a PEM private key (" +
                           OpenSslError() + ")");
  }
  if (::X509_check_private_key(cert.get(), key.get()) != 1) {
    ::ERR_clear_error();
    return InvalidArgument(who + ": status.clientKeyData is not the key of the certificate in "
                           "status.clientCertificateData");
  }
  if (::X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
    std::string when = "?";
    struct tm tm {};
    if (::ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) == 1) {
      char buf[32];
      std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
      when = buf;
    }
    return InvalidArgument(who + ": the client certificate in status.clientCertificateData "
                           "expired at " + when);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RestConfig> ParseKubeconfig(const std::string& yaml, const std::string& base_dir,
                                           const KubeconfigOptions& options,
                                           const std::string& source) {
  try {
    return Parse({Doc{YAML::Load(yaml), base_dir, source}}, options);
  } catch (const std::exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
}

absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path,
                                          const KubeconfigOptions& options) {
  DEVLET_ASSIGN_OR_RETURN(std::string yaml, ReadFile(path, "kubeconfig"));
  return ParseKubeconfig(yaml, BaseDir(path), options, path);
}

absl::StatusOr<RestConfig> LoadKubeconfigs(const std::vector<std::string>& paths,
                                           const KubeconfigOptions& options) {
  std::vector<Doc> docs;
  std::set<std::string> seen;
  for (const std::string& path : paths) {
    if (path.empty() || !seen.insert(path).second) continue;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;  // client-go skips missing files
    DEVLET_ASSIGN_OR_RETURN(std::string yaml, ReadFile(path, "kubeconfig"));
    try {
      docs.push_back(Doc{YAML::Load(yaml), BaseDir(path), path});
    } catch (const std::exception& e) {
      return InvalidArgument(path + ": " + e.what());
    }
  }
  if (docs.empty()) {
    std::string list;
    for (const std::string& path : paths) list += (list.empty() ? "" : ":") + path;
    return NotFound("kubeconfig: none of the files in \"" + list + "\" exists");
  }
  try {
    return Parse(docs, options);
  } catch (const std::exception& e) {
    return InvalidArgument(docs.front().source + ": " + e.what());
  }
}

absl::StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& exec, const RestConfig& cluster) {
  const std::string who = "exec credential plugin \"" + exec.command + "\"";
  nlohmann::json info = {{"apiVersion", exec.api_version},
                         {"kind", "ExecCredential"},
                         {"spec", {{"interactive", false}}}};
  if (exec.provide_cluster_info) {
    nlohmann::json c = {{"server", cluster.server}};
    if (!cluster.tls_server_name.empty()) c["tls-server-name"] = cluster.tls_server_name;
    if (cluster.insecure_skip_tls_verify) c["insecure-skip-tls-verify"] = true;
    std::string ca = cluster.certificate_authority_data;
    if (ca.empty() && !cluster.certificate_authority_file.empty()) {
      absl::StatusOr<std::string> read = ReadFile(cluster.certificate_authority_file, "CA");
      if (read.ok()) ca = *read;
    }
    if (!ca.empty()) c["certificate-authority-data"] = absl::Base64Escape(ca);
    info["spec"]["cluster"] = std::move(c);
  }
  std::set<std::string> overridden = {"KUBERNETES_EXEC_INFO"};
  for (const auto& [name, value] : exec.env) overridden.insert(name);
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    if (overridden.count(entry.substr(0, entry.find('='))) == 0) env.push_back(std::move(entry));
  }
  for (const auto& [name, value] : exec.env) env.push_back(name + "=" + value);
  env.push_back("KUBERNETES_EXEC_INFO=" + info.dump());
  std::vector<std::string> argv = {exec.command};
  argv.insert(argv.end(), exec.args.begin(), exec.args.end());

  DEVLET_ASSIGN_OR_RETURN(ChildOutput run, RunChild(argv, env, exec.timeout));
  const std::string stderr_text = TrimSpace(run.err).substr(0, 1024);
  const std::string detail = stderr_text.empty() ? "" : ": " + stderr_text;
  if (run.timed_out) {
    return DeadlineExceeded(who + " did not finish within " +
                            std::to_string(exec.timeout.count()) + " ms" + detail);
  }
  if (WIFEXITED(run.status) && WEXITSTATUS(run.status) == 127 && run.out.empty()) {
    return NotFound(who + " could not be run (not found or not executable)" + detail);
  }
  if (!WIFEXITED(run.status) || WEXITSTATUS(run.status) != 0) {
    return Unavailable(who + " failed (" +
                       (WIFEXITED(run.status)
                            ? "exit status " + std::to_string(WEXITSTATUS(run.status))
                            : "killed by signal " + std::to_string(WTERMSIG(run.status))) +
                       ")" + detail);
  }
  const nlohmann::json doc = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("kind", "") != "ExecCredential") {
    return InvalidArgument(who + " printed no ExecCredential object on stdout");
  }
  if (doc.value("apiVersion", "") != exec.api_version) {
    return InvalidArgument(who + " returned apiVersion \"" + doc.value("apiVersion", "") +
                           "\", but the kubeconfig asks for \"" + exec.api_version + "\"");
  }
  const auto status = doc.find("status");
  if (status == doc.end() || !status->is_object()) {
    return InvalidArgument(who + ": the ExecCredential has no status");
  }
  ExecCredential credential;
  credential.token = status->value("token", "");
  credential.client_certificate_data = status->value("clientCertificateData", "");
  credential.client_key_data = status->value("clientKeyData", "");
  if (credential.client_certificate_data.empty() != credential.client_key_data.empty()) {
    return InvalidArgument(who + ": the ExecCredential has a client certificate without a key "
                           "or a key without a certificate");
  }
  if (credential.token.empty() && credential.client_certificate_data.empty()) {
    return InvalidArgument(who + ": the ExecCredential has neither a token nor a client "
                           "certificate");
  }
  if (!credential.client_certificate_data.empty()) {
    DEVLET_RETURN_IF_ERROR(
        CheckKeyPair(credential.client_certificate_data, credential.client_key_data, who));
  }
  if (const std::string expiry = status->value("expirationTimestamp", ""); !expiry.empty()) {
    credential.expiration = ParseRfc3339(expiry);
    if (!credential.expiration) {
      return InvalidArgument(who + ": expirationTimestamp \"" + expiry + "\" is not RFC 3339");
    }
  }
  return credential;
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
  if (std::ifstream in(options.namespace_file); in) {
    std::getline(in, config.namespace_name);
    while (!config.namespace_name.empty() && std::isspace(static_cast<unsigned char>(
                                                 config.namespace_name.back()))) {
      config.namespace_name.pop_back();
    }
  }
  return config;
}

absl::StatusOr<RestConfig> LoadRestConfig(const std::string& kubeconfig_path) {
  if (!kubeconfig_path.empty()) return LoadKubeconfig(kubeconfig_path);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::vector<std::string> paths;
    std::string list = env;
    for (std::size_t start = 0; start <= list.size();) {
      std::size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      paths.push_back(list.substr(start, end - start));
      start = end + 1;
    }
    return LoadKubeconfigs(paths);
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
