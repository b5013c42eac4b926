// Kubeconfig parsing and the TLS variants (CA, client certificates as files and inline data,
// insecure-skip-tls-verify) against a local HTTPS fake API server with certificates made by
// openssl at test time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"
#include "rest_fake_apiserver.h"

namespace devlet::kube {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::string Base64(const std::string& in) {
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned value = 0;
  int bits = -6;
  for (unsigned char c : in) {
    value = (value << 8) + c;
    bits += 8;
    while (bits >= 0) {
      out.push_back(kChars[(value >> bits) & 0x3f]);
      bits -= 6;
    }
  }
  if (bits > -6) out.push_back(kChars[((value << 8) >> (bits + 8)) & 0x3f]);
  while (out.size() % 4) out.push_back('=');
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

const char* kBasic = R"(apiVersion: v1
kind: Config
current-context: one
clusters:
- name: c1
  cluster:
    server: https://one.example:6443/
    certificate-authority: certs/ca.crt
- name: c2
  cluster:
    server: https://two.example
    insecure-skip-tls-verify: true
    tls-server-name: api.two
users:
- name: u1
  user:
    token: abc
- name: u2
  user:
    tokenFile: /var/token
    client-certificate-data: aGVsbG8=
    client-key-data: a2V5
- name: u3
  user:
    auth-provider:
      name: gcp
contexts:
- name: one
  context: {cluster: c1, user: u1}
- name: two
  context: {cluster: c2, user: u2, namespace: team-b}
- name: three
  context: {cluster: c1, user: u3}
- name: four
  context: {cluster: missing, user: u1}
)";

TEST(KubeconfigTest, CurrentContextTokenAndRelativePaths) {
  ASSERT_OK_AND_ASSIGN(RestConfig config, ParseKubeconfig(kBasic, "/home/me/.kube"));
  EXPECT_EQ(config.server, "https://one.example:6443");
  EXPECT_EQ(config.token, "abc");
  EXPECT_EQ(config.certificate_authority_file, "/home/me/.kube/certs/ca.crt");
  EXPECT_FALSE(config.insecure_skip_tls_verify);
  EXPECT_EQ(config.namespace_name, "");  // the context names none
}

TEST(KubeconfigTest, NamedContextInlineDataAndInsecure) {
  ASSERT_OK_AND_ASSIGN(RestConfig config,
                       ParseKubeconfig(kBasic, "/x", {.context = "two"}));
  EXPECT_EQ(config.server, "https://two.example");
  EXPECT_TRUE(config.insecure_skip_tls_verify);
  EXPECT_EQ(config.tls_server_name, "api.two");
  EXPECT_EQ(config.token_file, "/var/token");
  EXPECT_EQ(config.client_certificate_data, "hello");
  EXPECT_EQ(config.client_key_data, "key");
  EXPECT_EQ(config.namespace_name, "team-b");
}

TEST(KubeconfigTest, Errors) {
  EXPECT_THAT(ParseKubeconfig(kBasic, "/x", {.context = "three"}),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("user \"u3\""), HasSubstr("auth-provider"))));
  EXPECT_THAT(ParseKubeconfig(kBasic, "/x", {.context = "four"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("clusters: no entry named \"missing\"")));
  EXPECT_THAT(ParseKubeconfig(kBasic, "/x", {.context = "nope"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"nope\"")));
  EXPECT_THAT(ParseKubeconfig("[1, 2", "/x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseKubeconfig("just text", "/x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadKubeconfig("/nonexistent/kubeconfig"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(RestClient::Create({.server = "ftp://x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("https://")));
}

// Certificates made once per test binary with openssl.
// A scratch directory removed at scope exit.
class Scratch {
 public:
  explicit Scratch(const std::string& name)
      : path_(::testing::TempDir() + "/" + name + "_" + std::to_string(getpid())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~Scratch() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content, bool executable = false) {
    const std::string file = path_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    std::ofstream(file) << content;
    if (executable) ::chmod(file.c_str(), 0755);
    return file;
  }

 private:
  std::string path_;
};

TEST(KubeconfigTest, ExecPluginFields) {
  const char* yaml = R"(current-context: x
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: bin/get-token
      args: [--cluster, one]
      env: [{name: REGION, value: eu}]
      provideClusterInfo: true
      interactiveMode: Never
)";
  ASSERT_OK_AND_ASSIGN(RestConfig config, ParseKubeconfig(yaml, "/etc/kube"));
  ASSERT_TRUE(config.exec.has_value());
  EXPECT_EQ(config.exec->command, "/etc/kube/bin/get-token");  // relative with '/': resolved
  EXPECT_THAT(config.exec->args, ElementsAre("--cluster", "one"));
  EXPECT_THAT(config.exec->env, ElementsAre(Pair("REGION", "eu")));
  EXPECT_TRUE(config.exec->provide_cluster_info);
  EXPECT_EQ(config.exec->interactive_mode, "Never");

  auto with_exec = [&](const std::string& exec) {
    std::string text = yaml;
    text = text.substr(0, text.find("    exec:")) + "    exec:\n" + exec;
    return ParseKubeconfig(text, "/etc/kube");
  };
  ASSERT_OK_AND_ASSIGN(RestConfig bare, with_exec("      apiVersion: client.authentication.k8s.io/v1beta1\n"
                                                  "      command: aws\n"));
  EXPECT_EQ(bare.exec->command, "aws");  // looked up in PATH
  EXPECT_EQ(bare.exec->interactive_mode, "IfAvailable");
  EXPECT_THAT(with_exec("      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("interactiveMode must be set")));
  EXPECT_THAT(with_exec("      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n"
                        "      interactiveMode: Always\n"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("terminal")));
  EXPECT_THAT(with_exec("      apiVersion: client.authentication.k8s.io/v1alpha1\n      command: aws\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("v1alpha1")));
  EXPECT_THAT(with_exec("      apiVersion: client.authentication.k8s.io/v1beta1\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("command is required")));
}

// KUBECONFIG=a:b:c merges like client-go: the first file to define a name wins, the first
// current-context wins, paths resolve against the defining file, missing files are skipped.
TEST(KubeconfigTest, SeveralFilesMergeFirstWins) {
  Scratch dir("kubeconfig_merge");
  const std::string a = dir.Write("a/config", R"(current-context: ""
users:
- name: me
  user: {token: from-a, client-certificate: a.crt, client-key: a.key}
)");
  const std::string b = dir.Write("b/config", R"(current-context: prod
clusters:
- name: prod
  cluster: {server: "https://prod.example", certificate-authority: ca.crt}
contexts:
- name: prod
  context: {cluster: prod, user: me}
users:
- name: me
  user: {token: from-b}
)");
  const std::string c = dir.Write("c/config", R"(current-context: other
clusters:
- name: prod
  cluster: {server: "https://shadowed.example"}
- name: other
  cluster: {server: "https://other.example"}
contexts:
- name: other
  context: {cluster: other, user: me}
)");
  ASSERT_OK_AND_ASSIGN(RestConfig config,
                       LoadKubeconfigs({dir.path() + "/missing", a, b, c}));
  EXPECT_EQ(config.server, "https://prod.example");       // b's context and b's cluster
  EXPECT_EQ(config.certificate_authority_file, dir.path() + "/b/ca.crt");
  EXPECT_EQ(config.token, "from-a");                      // a defined user "me" first
  EXPECT_EQ(config.client_certificate_file, dir.path() + "/a/a.crt");
  ASSERT_OK_AND_ASSIGN(RestConfig other, LoadKubeconfigs({a, b, c}, {.context = "other"}));
  EXPECT_EQ(other.server, "https://other.example");
  EXPECT_THAT(LoadKubeconfigs({dir.path() + "/none1", dir.path() + "/none2"}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none of the files")));

  // Through $KUBECONFIG.
  const char* old = std::getenv("KUBECONFIG");
  const std::string saved = old ? old : "";
  ::setenv("KUBECONFIG", (a + ":" + b + ":" + c).c_str(), 1);
  absl::StatusOr<RestConfig> from_env = LoadRestConfig();
  if (old) {
    ::setenv("KUBECONFIG", saved.c_str(), 1);
  } else {
    ::unsetenv("KUBECONFIG");
  }
  ASSERT_THAT(from_env.status(), IsOk());
  EXPECT_EQ(from_env->server, "https://prod.example");
  EXPECT_EQ(from_env->token, "from-a");
}

// The fake plugin records what it was given and prints a credential whose token comes from a
// file, so the test can rotate it.
constexpr char kPluginScript[] = R"sh(#!/bin/sh
echo "$KUBERNETES_EXEC_INFO" > "$(dirname "$0")/exec-info.json"
echo "$REGION $*" > "$(dirname "$0")/exec-args.txt"
echo run >> "$(dirname "$0")/runs.txt"
if [ -f "$(dirname "$0")/fail" ]; then echo "no credentials for you" >&2; exit 3; fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}\n' "$(cat "$(dirname "$0")/token")" "$(cat "$(dirname "$0")/expiry")"
)sh";

int Lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST(ExecPluginTest, TokenIsUsedAndRefreshedOn401AndExpiry) {
  Scratch dir("kubeconfig_exec");
  dir.Write("plugin/get-token", kPluginScript, /*executable=*/true);
  dir.Write("plugin/token", "first");
  dir.Write("plugin/expiry", "2999-01-01T00:00:00Z");
  fake::FakeApiServer server;
  server.RequireToken("first");
  const std::string kubeconfig = dir.Write("config", R"(current-context: x
clusters: [{name: c, cluster: {server: ")" + server.url() + R"(", tls-server-name: api.example}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin/get-token
      args: [--cluster, one]
      env: [{name: REGION, value: eu}]
      provideClusterInfo: true
      interactiveMode: IfAvailable
)");
  ASSERT_OK_AND_ASSIGN(RestConfig config, LoadKubeconfig(kubeconfig));
  config.max_retries = 0;
  config.qps = 0;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(config));
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Lines(dir.path() + "/plugin/runs.txt"), 1);
  // What the plugin saw: the request object, the cluster, its args and env.
  const std::string info = Slurp(dir.path() + "/plugin/exec-info.json");
  EXPECT_THAT(info, HasSubstr(R"("kind":"ExecCredential")"));
  EXPECT_THAT(info, HasSubstr(R"("interactive":false)"));
  EXPECT_THAT(info, HasSubstr(R"("server":")" + server.url() + "\""));
  EXPECT_THAT(info, HasSubstr(R"("tls-server-name":"api.example")"));
  EXPECT_EQ(Slurp(dir.path() + "/plugin/exec-args.txt"), "eu --cluster one\n");

  // The credential is cached: no new run while it is valid.
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Lines(dir.path() + "/plugin/runs.txt"), 1);

  // Revoked on the server: the 401 makes the client run the plugin again, once.
  dir.Write("plugin/token", "second");
  server.RequireToken("second");
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Lines(dir.path() + "/plugin/runs.txt"), 2);

  // A credential past its expirationTimestamp is replaced before every request.
  dir.Write("plugin/token", "third");
  dir.Write("plugin/expiry", "2001-01-01T00:00:00+01:00");
  server.RequireToken("third");
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  const int runs = Lines(dir.path() + "/plugin/runs.txt");
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Lines(dir.path() + "/plugin/runs.txt"), runs + 1);
}

TEST(ExecPluginTest, FailuresAreClear) {
  Scratch dir("kubeconfig_exec_fail");
  dir.Write("get-token", kPluginScript, /*executable=*/true);
  dir.Write("token", "t");
  dir.Write("expiry", "2999-01-01T00:00:00Z");
  dir.Write("fail", "");
  RestConfig config;
  config.server = "https://127.0.0.1:1";
  config.exec = ExecConfig{.command = dir.path() + "/get-token",
                           .api_version = "client.authentication.k8s.io/v1",
                           .interactive_mode = "Never"};
  EXPECT_THAT(RestClient::Create(config),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("exit status 3"), HasSubstr("no credentials for you"))));
  config.exec->command = dir.path() + "/missing-plugin";
  EXPECT_THAT(RunExecPlugin(*config.exec, config),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing-plugin")));
  // A plugin answering with another apiVersion, or garbage.
  config.exec->command = dir.Write("v1beta1", "#!/bin/sh\necho '{\"apiVersion\":"
                                   "\"client.authentication.k8s.io/v1beta1\",\"kind\":"
                                   "\"ExecCredential\",\"status\":{\"token\":\"x\"}}'\n", true);
  EXPECT_THAT(RunExecPlugin(*config.exec, config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("v1beta1")));
  config.exec->command = dir.Write("garbage", "#!/bin/sh\necho hello\n", true);
  EXPECT_THAT(RunExecPlugin(*config.exec, config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no ExecCredential")));
  config.exec->command = dir.Write("slow", "#!/bin/sh\nexec sleep 30\n", true);
  config.exec->timeout = std::chrono::milliseconds(200);
  EXPECT_THAT(RunExecPlugin(*config.exec, config),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("200 ms")));
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/kubeconfig_tls_" + std::to_string(getpid()));
    std::filesystem::create_directories(*dir_);
    const std::string d = *dir_;
    const std::string script =
        "set -e; cd '" + d + "'; exec >openssl.log 2>&1\n"
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "  -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca\n"
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "  -keyout server.key -out server.csr -subj /CN=127.0.0.1\n"
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext\n"
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "  -out server.crt -days 2 -extfile server.ext\n"
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "  -keyout client.key -out client.csr -subj /CN=devlet/O=system:masters\n"
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "  -out client.crt -days 2\n"
        // A certificate for a DNS name only: reached by IP, it verifies only with
        // tls-server-name.
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "  -keyout named.key -out named.csr -subj /CN=api.devlet.test\n"
        "printf 'subjectAltName=DNS:api.devlet.test\\n' > named.ext\n"
        "openssl x509 -req -in named.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "  -out named.crt -days 2 -extfile named.ext\n"
        // Two client certificates an exec plugin hands out in turn.
        "for n in exec-a exec-b; do\n"
        "  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "    -keyout $n.key -out $n.csr -subj /CN=$n\n"
        "  openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "    -out $n.crt -days 2\n"
        "done\n"
        // An expired one: `openssl ca` can backdate, `openssl x509 -req` cannot.
        "printf '[ca]\\ndefault_ca=d\\n[d]\\ndatabase=index.txt\\nnew_certs_dir=.\\n"
        "serial=old.srl\\ndefault_md=sha256\\npolicy=p\\n[p]\\ncommonName=supplied\\n' "
        "  > ca.cnf\n"
        ": > index.txt; echo 01 > old.srl\n"
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "  -keyout old.key -out old.csr -subj /CN=old\n"
        "openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in old.csr -out old.crt "
        "  -startdate 20000101000000Z -enddate 20010101000000Z -notext\n";
    ok_ = std::system(("sh -c \"$(cat <<'EOF'\n" + script + "EOF\n)\"").c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    if (!ok_) GTEST_SKIP() << "openssl failed: " << Slurp(*dir_ + "/openssl.log");
  }
  static std::string P(const std::string& name) { return *dir_ + "/" + name; }

  absl::StatusOr<RestConfig> Config(const std::string& server, const std::string& cluster_extra,
                                    const std::string& user) {
    const std::string yaml = "current-context: t\nclusters:\n- name: c\n  cluster:\n    server: " +
                             server + "\n" + cluster_extra +
                             "users:\n- name: u\n  user:\n" + user +
                             "contexts:\n- name: t\n  context: {cluster: c, user: u}\n";
    const std::string path = P("kubeconfig");
    std::ofstream(path) << yaml;
    absl::StatusOr<RestConfig> config = LoadKubeconfig(path);
    if (config.ok()) {
      config->max_retries = 0;
      config->qps = 0;
    }
    return config;
  }

  static absl::Status Probe(const RestConfig& config) {
    absl::StatusOr<std::unique_ptr<ApiServerStore>> store = ApiServerStore::Create(config);
    if (!store.ok()) return store.status();
    return (*store)->Get(Kind::kNode, {"", "probe"}).status();
  }

  static inline std::string* dir_ = nullptr;
  static inline bool ok_ = false;
};

TEST_F(TlsTest, ClientCertificateFilesAndCaFile) {
  fake::FakeApiServer server(P("server.crt"), P("server.key"), P("ca.crt"));
  ASSERT_OK_AND_ASSIGN(RestConfig config,
                       Config(server.url(), "    certificate-authority: ca.crt\n",
                              "    client-certificate: client.crt\n    client-key: client.key\n"));
  // NotFound: the request got through TLS with our client certificate.
  EXPECT_THAT(Probe(config), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(TlsTest, InlineCertificateData) {
  fake::FakeApiServer server(P("server.crt"), P("server.key"), P("ca.crt"));
  ASSERT_OK_AND_ASSIGN(
      RestConfig config,
      Config(server.url(),
             "    certificate-authority-data: " + Base64(Slurp(P("ca.crt"))) + "\n",
             "    client-certificate-data: " + Base64(Slurp(P("client.crt"))) +
                 "\n    client-key-data: " + Base64(Slurp(P("client.key"))) + "\n"));
  EXPECT_THAT(Probe(config), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(TlsTest, MissingClientCertificateIsRefused) {
  fake::FakeApiServer server(P("server.crt"), P("server.key"), P("ca.crt"));
  ASSERT_OK_AND_ASSIGN(RestConfig config,
                       Config(server.url(), "    certificate-authority: ca.crt\n",
                              "    token: t\n"));
  EXPECT_THAT(Probe(config), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(TlsTest, ServerVerificationAndInsecureSkip) {
  fake::FakeApiServer server(P("server.crt"), P("server.key"), "");
  server.RequireToken("tok");
  // No CA: the system trust store does not know our test CA.
  ASSERT_OK_AND_ASSIGN(RestConfig strict, Config(server.url(), "", "    token: tok\n"));
  EXPECT_THAT(Probe(strict), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_OK_AND_ASSIGN(RestConfig insecure,
                       Config(server.url(), "    insecure-skip-tls-verify: true\n",
                              "    token: tok\n"));
  EXPECT_THAT(Probe(insecure), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(RestConfig with_ca,
                       Config(server.url(), "    certificate-authority: ca.crt\n",
                              "    token: tok\n"));
  EXPECT_THAT(Probe(with_ca), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(RestConfig wrong_token,
                       Config(server.url(), "    certificate-authority: ca.crt\n",
                              "    token: nope\n"));
  EXPECT_THAT(Probe(wrong_token), StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(TlsTest, TlsServerNameIsTheNameVerified) {
  fake::FakeApiServer server(P("named.crt"), P("named.key"), "");
  server.RequireToken("tok");
  ASSERT_OK_AND_ASSIGN(RestConfig by_ip, Config(server.url(), "    certificate-authority: ca.crt\n",
                                                "    token: tok\n"));
  EXPECT_THAT(Probe(by_ip), StatusIs(absl::StatusCode::kUnavailable));  // 127.0.0.1 not in cert
  ASSERT_OK_AND_ASSIGN(RestConfig named,
                       Config(server.url(),
                              "    certificate-authority: ca.crt\n"
                              "    tls-server-name: api.devlet.test\n",
                              "    token: tok\n"));
  EXPECT_THAT(Probe(named), StatusIs(absl::StatusCode::kNotFound));  // verified, got through
  ASSERT_OK_AND_ASSIGN(RestConfig wrong,
                       Config(server.url(),
                              "    certificate-authority: ca.crt\n"
                              "    tls-server-name: other.devlet.test\n",
                              "    token: tok\n"));
  EXPECT_THAT(Probe(wrong), StatusIs(absl::StatusCode::kUnavailable));
}

// An exec plugin answering with a client certificate: the PEM files named in its `crt` and `key`
// files (a missing file gives an empty field) and the expirationTimestamp in `expiry`.
constexpr char kCertPluginScript[] = R"sh(#!/bin/sh
d="$(dirname "$0")"
echo run >> "$d/runs.txt"
pem() { if [ -f "$1" ]; then awk '{printf "%s\\n", $0}' "$1"; fi; }
printf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"clientCertificateData":"%s","clientKeyData":"%s","expirationTimestamp":"%s"}}\n' "$(pem "$(cat "$d/crt")")" "$(pem "$(cat "$d/key")")" "$(cat "$d/expiry")"
)sh";

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

class ExecCertTest : public TlsTest {
 protected:
  // Makes the plugin answer with `name`.crt / `key_name`.key (in the certificate directory,
  // or absolute paths) valid until `expiry`.
  void Answer(const std::string& name, const std::string& key_name, const std::string& expiry) {
    dir_.Write("crt", name.starts_with("/") ? name : P(name + ".crt"));
    dir_.Write("key", key_name.starts_with("/") ? key_name : P(key_name + ".key"));
    dir_.Write("expiry", expiry);
  }
  int Runs() const { return Lines(dir_.path() + "/runs.txt"); }
  RestConfig PluginConfig(const std::string& server) {
    RestConfig config;
    config.server = server;
    config.certificate_authority_file = P("ca.crt");
    config.max_retries = 0;
    config.qps = 0;
    config.initial_backoff = std::chrono::milliseconds(20);
    config.exec = ExecConfig{.command = dir_.Write("plugin", kCertPluginScript, true),
                             .api_version = "client.authentication.k8s.io/v1beta1"};
    return config;
  }
  static std::vector<std::string> Cns(const fake::FakeApiServer& server) {
    std::vector<std::string> cns;
    for (const auto& r : server.requests()) cns.push_back(r.client_cn);
    return cns;
  }

  Scratch dir_{"exec_cert"};
};

TEST_F(ExecCertTest, CertificateIsRotatedAtExpiryAndAfter401) {
  fake::FakeApiServer server(P("server.crt"), P("server.key"), P("ca.crt"));
  const auto expiry = std::chrono::system_clock::now() + std::chrono::seconds(14);
  Answer("exec-a", "exec-a", Rfc3339(expiry));
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(PluginConfig(server.url())));
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Runs(), 1);

  // The plugin has a new certificate, but ours is still valid: cached, no run.
  Answer("exec-b", "exec-b", "2999-01-01T00:00:00Z");
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Runs(), 1);
  EXPECT_THAT(Cns(server), ElementsAre("exec-a", "exec-a"));

  // Close to its expirationTimestamp (the client renews 10 s early) the plugin runs again and
  // the next request comes over a new connection with the new certificate.
  std::this_thread::sleep_until(expiry - std::chrono::seconds(10) + std::chrono::milliseconds(300));
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Runs(), 2);
  EXPECT_THAT(Cns(server), ElementsAre("exec-a", "exec-a", "exec-b"));
  EXPECT_EQ(store->client().stats().cert_rotations.load(), 1);

  // A watch open with exec-b when the server revokes exec-b: the 401 of the next request renews
  // the certificate (exec-a again), that request is repeated with it, and the watch, closed like
  // client-go closes its connections at a rotation, reconnects with exec-a and keeps delivering.
  std::atomic<int> events{0};
  ASSERT_OK_AND_ASSIGN(auto watch, store->Watch(Kind::kNode, {},
                                                [&](const WatchEvent&) { events++; }));
  for (int i = 0; i < 250 && server.watch_requests() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(server.watch_requests(), 1);
  server.RejectClientCn("exec-b");
  Answer("exec-a", "exec-a", "2999-01-01T00:00:00Z");
  const std::size_t before = server.requests().size();
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Runs(), 3);
  EXPECT_EQ(store->client().stats().cert_rotations.load(), 2);
  std::vector<std::string> cns = Cns(server);
  ASSERT_GE(cns.size(), before + 2);
  EXPECT_EQ(cns[before], "exec-b");  // refused
  EXPECT_EQ(cns[before + 1], "exec-a");
  for (int i = 0; i < 250 && server.watch_requests() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(server.watch_requests(), 2);
  std::string last_watch_cn;
  for (const auto& r : server.requests()) {
    auto w = r.params.find("watch");
    if (w != r.params.end() && w->second == "true") last_watch_cn = r.client_cn;
  }
  EXPECT_EQ(last_watch_cn, "exec-a");
  server.Put("/api/v1/nodes/n2",
             {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n2"}}}});
  for (int i = 0; i < 250 && events.load() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(events.load(), 1);
  watch.reset();
  EXPECT_EQ(Runs(), 3);  // a token-less rotation does not loop
}

TEST_F(ExecCertTest, ConcurrentRefusalsRunThePluginOnce) {
  fake::FakeApiServer server(P("server.crt"), P("server.key"), P("ca.crt"));
  Answer("exec-a", "exec-a", "");
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(PluginConfig(server.url())));
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  server.RejectClientCn("exec-a");
  Answer("exec-b", "exec-b", "");
  // Several requests refused with the same certificate at once: like client-go, only the first
  // to get to the plugin runs it; the others retry with what it returned.
  std::vector<std::thread> threads;
  std::atomic<int> not_found{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      if (absl::IsNotFound(store->Get(Kind::kNode, {"", "n"}).status())) not_found++;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(not_found.load(), 6);
  EXPECT_EQ(Runs(), 2);
  EXPECT_EQ(store->client().stats().cert_rotations.load(), 1);
  EXPECT_EQ(server.requests().back().client_cn, "exec-b");
}

TEST_F(ExecCertTest, BadCertificatesAreClearErrors) {
  RestConfig config = PluginConfig("https://127.0.0.1:1");
  auto run = [&] { return RunExecPlugin(*config.exec, config); };
  Answer("exec-a", "/nonexistent", "");
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("without a key")));
  EXPECT_THAT(RestClient::Create(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("without a key")));
  const std::string garbage = dir_.Write(
      "garbage.pem", "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n");
  Answer(garbage, "exec-a", "");
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument,
                              AllOf(HasSubstr("plugin"), HasSubstr("clientCertificateData is not "
                                                                   "a PEM certificate"))));
  Answer("exec-a", garbage, "");
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("clientKeyData is not a PEM private key")));
  Answer("exec-a", "exec-b", "");
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("is not the key of the certificate")));
  Answer("old", "old", "");
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("expired at 2001-01-01T00:00:00Z")));
  Answer("exec-a", "exec-a", "yesterday");
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not RFC 3339")));
  Answer("exec-a", "exec-a", "");
  EXPECT_THAT(run(), IsOk());
}

TEST_F(ExecCertTest, ExpiredTimestampAndFailedRenewal) {
  fake::FakeApiServer server(P("server.crt"), P("server.key"), P("ca.crt"));
  // An expirationTimestamp already past: as in client-go the credential is renewed before every
  // request (each one still works).
  Answer("exec-a", "exec-a", "2001-01-01T00:00:00Z");
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(PluginConfig(server.url())));
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Runs(), 3);
  EXPECT_EQ(store->client().stats().cert_rotations.load(), 0);  // the same pair each time

  // The renewal fails (the plugin now prints a key that is not the certificate's): the request
  // fails with the plugin's error and is not sent with the old certificate.
  Answer("exec-a", "exec-b", "2001-01-01T00:00:00Z");
  const std::size_t sent = server.requests().size();
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("getting credentials"),
                             HasSubstr("is not the key of the certificate"))));
  EXPECT_EQ(server.requests().size(), sent);
  // A watch gets the same error (its loop retries).
  std::atomic<bool> stop{false};
  EXPECT_THAT(store->client().Stream({.path = "/api/v1/nodes", .query = {{"watch", "true"}}},
                                     [](std::string) { return true; }, stop),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("getting credentials")));
  // Fixed: the next request renews and goes through, now with exec-b.
  Answer("exec-b", "exec-b", "2999-01-01T00:00:00Z");
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(server.requests().back().client_cn, "exec-b");
  EXPECT_EQ(store->client().stats().cert_rotations.load(), 1);

  // Revoked, and the plugin cannot renew: the 401 carries the renewal's error.
  server.RejectClientCn("exec-b");
  Answer("/nonexistent", "/nonexistent", "");
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       AllOf(HasSubstr("HTTP 401"), HasSubstr("renewing the credential failed"),
                             HasSubstr("neither a token nor a client certificate"))));
}

}  // namespace
}  // namespace devlet::kube
