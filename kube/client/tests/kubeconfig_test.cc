// Kubeconfig parsing and the TLS variants (CA, client certificates as files and inline data,
// insecure-skip-tls-verify) against a local HTTPS fake API server with certificates made by
// openssl at test time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"
#include "rest_fake_apiserver.h"

namespace devlet::kube {
namespace {

using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

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
    exec:
      command: aws
contexts:
- name: one
  context: {cluster: c1, user: u1}
- name: two
  context: {cluster: c2, user: u2}
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
}

TEST(KubeconfigTest, Errors) {
  EXPECT_THAT(ParseKubeconfig(kBasic, "/x", {.context = "three"}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("user \"u3\"")));
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
        "  -out client.crt -days 2\n";
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

}  // namespace
}  // namespace devlet::kube
