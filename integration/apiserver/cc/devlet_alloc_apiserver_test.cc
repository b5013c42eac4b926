// devlet-alloc (and kubectl-devlet, its kubectl plugin name) against a real kube-apiserver: the
// example cluster (examples/cluster.yaml) is created in the API server, and the what-if read from
// it must answer as the same objects read from the file do; claims and pods named in the cluster,
// and the errors an operator meets (unknown claim, RBAC, bad credentials, no server, a server that
// does not answer within --timeout, a bad kubeconfig).
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/strings/str_split.h"
#include "apiserver_fixture.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace devlet {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kExamples = DEVLET_EXAMPLES_DIR;
const std::string kAlloc = DEVLET_ALLOC_BINARY;
const std::string kRbac = DEVLET_ALLOC_RBAC;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

struct Ran {
  int rc = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

// Run runs `binary` with `args` through /bin/sh, `env` (VAR=value ...) in front.
Ran Exec(const std::string& binary, const std::vector<std::string>& args,
        const std::string& env = "") {
  const std::string out = ::testing::TempDir() + "/alloc.out";
  const std::string err = ::testing::TempDir() + "/alloc.err";
  std::string command = "env " + env + " '" + binary + "'";
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += " >'" + out + "' 2>'" + err + "' </dev/null";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  Ran ran;
  ran.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ran.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ran.out = ReadFile(out);
  ran.err = ReadFile(err);
  return ran;
}

Ran Alloc(const std::vector<std::string>& args) { return Exec(kAlloc, args); }

// ToJson converts YAML of maps, lists and strings (an RBAC manifest) to JSON for the API server.
nlohmann::json ToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& entry : node) out[entry.first.as<std::string>()] = ToJson(entry.second);
    return out;
  }
  if (node.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : node) out.push_back(ToJson(item));
    return out;
  }
  return node.as<std::string>();
}

class DevletAllocApiServerTest : public apiserver_testing::ApiServerFixture {
 protected:
  void SetUp() override {
    ApiServerFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    kubeconfig_ = std::getenv("DEVLET_TEST_KUBECONFIG");
    static bool loaded = false;  // one API server for the binary: load the cluster once
    if (loaded) return;
    loaded = true;
    Post("/api/v1/namespaces",
         R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ml"}})");
    absl::StatusOr<std::vector<kube::Object>> objects =
        kube::Decode(ReadFile(kExamples + "/cluster.yaml"), {.source = "cluster.yaml"});
    ASSERT_TRUE(objects.ok()) << objects.status();
    for (kube::Object& object : *objects) {
      if (auto* claim = std::get_if<kube::ResourceClaim>(&object);
          claim != nullptr && claim->status.allocation) {
        CreateAllocated(*claim);
      } else {
        ASSERT_OK(store_->Create(object).status()) << kube::Describe(object);
      }
    }
    // A pending claim, and a pod whose claim comes from a template (not generated yet).
    ASSERT_OK(store_
                  ->Create(Decode<kube::ResourceClaim>(
                      ReadFile(kExamples + "/claims/one-gpu.yaml")))
                  .status());
    ASSERT_OK(store_->Create(Decode<kube::ResourceClaimTemplate>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu-template, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
)")).status());
    ASSERT_OK(store_->Create(Decode<kube::Pod>(R"(
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  containers:
  - name: main
    image: registry.example/trainer:1
    resources:
      claims: [{name: gpu}]
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: one-gpu-template
)")).status());
  }

  // Post sends `body` to `path` as the cluster admin and returns the response body.
  std::string Post(const std::string& path, const std::string& body) {
    absl::StatusOr<kube::RestResponse> response =
        store_->client().Do({.method = "POST", .path = path, .body = body, .idempotent = false});
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->body : "";
  }

  // KubeconfigWithToken is the test kubeconfig with another bearer token.
  std::string KubeconfigWithToken(const std::string& name, const std::string& token) {
    std::string text = ReadFile(kubeconfig_);
    const std::string from = "token: devlet-test-token";
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << text;
    if (at != std::string::npos) text.replace(at, from.size(), "token: " + token);
    return WriteTemp(name, text);
  }

  // ServiceAccountToken creates service account `name` in default (if need be) and returns a
  // token for it from the TokenRequest API.
  std::string ServiceAccountToken(const std::string& name) {
    absl::StatusOr<kube::RestResponse> created = store_->client().Do(
        {.method = "POST",
         .path = "/api/v1/namespaces/default/serviceaccounts",
         .body = R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":")" + name +
                 R"("}})",
         .idempotent = false});
    EXPECT_TRUE(created.ok() || created.status().code() == absl::StatusCode::kAlreadyExists)
        << created.status();
    nlohmann::json request = nlohmann::json::parse(
        Post("/api/v1/namespaces/default/serviceaccounts/" + name + "/token",
             R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}})"),
        nullptr, false);
    if (request.is_discarded() || !request["status"]["token"].is_string()) {
      ADD_FAILURE() << "no token for " << name;
      return "";
    }
    return request["status"]["token"].get<std::string>();
  }

  // BindReaderRole creates the ClusterRole of cmd/devlet-alloc/rbac.yaml (once) and binds it to
  // service account default/`name`.
  void BindReaderRole(const std::string& name) {
    static bool created = false;
    if (!created) {
      created = true;
      Post("/apis/rbac.authorization.k8s.io/v1/clusterroles",
           ToJson(YAML::LoadFile(kRbac)).dump());
    }
    nlohmann::json binding = {
        {"apiVersion", "rbac.authorization.k8s.io/v1"},
        {"kind", "ClusterRoleBinding"},
        {"metadata", {{"name", name + "-devlet-alloc"}}},
        {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"},
                     {"name", "devlet-alloc-reader"}}},
        {"subjects", {{{"kind", "ServiceAccount"}, {"name", name}, {"namespace", "default"}}}}};
    Post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding.dump());
  }

  std::string kubeconfig_;
};

// The cluster read from the API server answers as the same objects read from files, for every
// example claim, on all nodes (which fit and why the others do not) and on one node.
TEST_F(DevletAllocApiServerTest, AnswersAsTheFilesDo) {
  const std::string cluster = kExamples + "/cluster.yaml";
  for (const char* name : {"one-gpu", "two-gpus-same-numa", "gpu-and-nic", "h100-or-any",
                           "four-80gi-gpus"}) {
    SCOPED_TRACE(name);
    const std::string claim = kExamples + "/claims/" + name + ".yaml";
    Ran files = Alloc({"-f", cluster, "-f", claim, "--all-nodes"});
    Ran live = Alloc({"--kubeconfig", kubeconfig_, "-f", claim, "--all-nodes"});
    EXPECT_EQ(live.rc, files.rc) << live.err;
    EXPECT_EQ(live.out, files.out);
    EXPECT_THAT(live.out, HasSubstr("NODE"));
    Ran files_b = Alloc({"-f", cluster, "-f", claim, "--node", "node-b"});
    Ran live_b = Alloc({"--kubeconfig", kubeconfig_, "-f", claim, "--node", "node-b"});
    EXPECT_EQ(live_b.rc, files_b.rc) << live_b.err;
    EXPECT_EQ(live_b.out, files_b.out);
  }
  // The allocated claim and the taint rule count: node-c has one GPU left (gpu-3), node-b's
  // gpu-0 is tainted.
  Ran live = Alloc({"--kubeconfig", kubeconfig_, "-f", kExamples + "/claims/one-gpu.yaml",
                    "--all-nodes"});
  EXPECT_EQ(live.rc, 0) << live.err;
  EXPECT_THAT(live.out, HasSubstr("gpu.example.com/node-b/gpu-1"));
  EXPECT_THAT(live.out, HasSubstr("gpu.example.com/node-c/gpu-3"));
}

// A claim named in the cluster; --explain says what the search considered.
TEST_F(DevletAllocApiServerTest, ClaimNamedInTheCluster) {
  Ran files = Alloc({"-f", kExamples + "/cluster.yaml", "-f", kExamples + "/claims/one-gpu.yaml",
                     "--all-nodes"});
  Ran live = Alloc({"--kubeconfig", kubeconfig_, "--claim", "one-gpu", "--all-nodes"});
  EXPECT_EQ(live.rc, 0) << live.err;
  EXPECT_EQ(live.out, files.out);

  Ran node = Alloc({"--kubeconfig", kubeconfig_, "--claim", "one-gpu", "-n", "default", "--node",
                    "node-a", "--explain"});
  EXPECT_EQ(node.rc, 0) << node.err;
  nlohmann::json list = nlohmann::json::parse(node.out, nullptr, false);
  ASSERT_FALSE(list.is_discarded()) << node.out;
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "one-gpu");
  EXPECT_EQ(list["items"][0]["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-0");
  EXPECT_THAT(node.err, HasSubstr("node node-a: 2 pool(s)"));
  EXPECT_THAT(node.err, HasSubstr("request gpu:"));

  // The claim in the cluster is unchanged (the command only reads).
  EXPECT_FALSE(ReadClaim("one-gpu").status.allocation.has_value());
}

// A pod named in the cluster: its template's claim (not generated yet) is placed.
TEST_F(DevletAllocApiServerTest, PodNamedInTheCluster) {
  Ran files = Alloc({"-f", kExamples + "/cluster.yaml", "-f", kExamples + "/claims/one-gpu.yaml",
                     "--all-nodes"});
  Ran live = Alloc({"--kubeconfig", kubeconfig_, "--pod", "trainer", "--all-nodes"});
  EXPECT_EQ(live.rc, 0) << live.err;
  EXPECT_EQ(live.out, files.out);
  Ran node = Alloc({"--kubeconfig", kubeconfig_, "--pod", "trainer", "--node", "node-c"});
  EXPECT_EQ(node.rc, 0) << node.err;
  EXPECT_THAT(node.out, HasSubstr("\"name\": \"trainer-gpu\""));
  EXPECT_THAT(node.out, HasSubstr("\"device\": \"gpu-3\""));
}

// An allocated claim named to place is placed as if it were not: its own GPUs count as free.
TEST_F(DevletAllocApiServerTest, AllocatedClaimIsPlacedAgain) {
  Ran live = Alloc({"--kubeconfig", kubeconfig_, "-n", "ml", "--claim", "training-job",
                    "--all-nodes"});
  EXPECT_EQ(live.rc, 0) << live.err;
  EXPECT_THAT(live.err, HasSubstr("ResourceClaim \"ml/training-job\" is allocated in the cluster; "
                                  "placed as if it were not"));
  EXPECT_THAT(live.out, HasSubstr("gpus=gpu.example.com/node-c/gpu-0"));

  // Without -n, the kubeconfig context's namespace, as kubectl.
  std::string text = ReadFile(kubeconfig_);
  const size_t at = text.find("    user: admin\n");
  ASSERT_NE(at, std::string::npos) << text;
  text.insert(at, "    namespace: ml\n");
  Ran context = Alloc({"--kubeconfig", WriteTemp("ml.kubeconfig", text), "--claim",
                       "training-job", "--all-nodes"});
  EXPECT_EQ(context.rc, 0) << context.err;
  EXPECT_EQ(context.out, live.out);
}

// kubectl finds kubectl-devlet on PATH and runs it for `kubectl devlet`: the same answer.
TEST_F(DevletAllocApiServerTest, KubectlPlugin) {
  const std::string plugin_dir = std::filesystem::path(kAlloc).parent_path().string();
  ASSERT_TRUE(std::filesystem::exists(plugin_dir + "/kubectl-devlet"));
  Ran direct = Alloc({"--kubeconfig", kubeconfig_, "--claim", "one-gpu", "--all-nodes"});
  // The plugin name alone makes it read the cluster ($KUBECONFIG, as kubectl passes it on).
  Ran plugin = Exec(plugin_dir + "/kubectl-devlet", {"--claim", "one-gpu", "--all-nodes"},
                   "KUBECONFIG=" + kubeconfig_);
  EXPECT_EQ(plugin.rc, 0) << plugin.err;
  EXPECT_EQ(plugin.out, direct.out);
  Ran help = Exec(plugin_dir + "/kubectl-devlet", {"--help"});
  EXPECT_THAT(help.out, HasSubstr("kubectl devlet"));

  const char* path = std::getenv("PATH");
  std::string kubectl;
  for (const auto& dir : absl::StrSplit(path == nullptr ? "" : path, ':')) {
    const std::string candidate = std::string(dir) + "/kubectl";
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) {
      kubectl = candidate;
      break;
    }
  }
  if (kubectl.empty()) GTEST_SKIP() << "no kubectl on PATH: the plugin binary was run directly";
  const std::string env = "PATH=" + plugin_dir + ":" + path + " KUBECONFIG=" + kubeconfig_;
  Ran via = Exec(kubectl, {"devlet", "--claim", "one-gpu", "--all-nodes"}, env);
  EXPECT_EQ(via.rc, 0) << via.err;
  EXPECT_EQ(via.out, direct.out);
  Ran flag = Exec(kubectl, {"devlet", "--kubeconfig", kubeconfig_, "--claim", "nope",
                           "--all-nodes"}, "PATH=" + plugin_dir + ":" + path);
  EXPECT_EQ(flag.rc, 2);
  EXPECT_THAT(flag.err, HasSubstr("kubectl devlet: "));
  EXPECT_THAT(flag.err, HasSubstr("ResourceClaim \"default/nope\" is not in the cluster"));
  Ran list = Exec(kubectl, {"plugin", "list"}, env);
  EXPECT_THAT(list.out, HasSubstr(plugin_dir + "/kubectl-devlet"));
}

TEST_F(DevletAllocApiServerTest, UnknownClaimOrPod) {
  Ran claim = Alloc({"--kubeconfig", kubeconfig_, "--claim", "nope", "--all-nodes"});
  EXPECT_EQ(claim.rc, 2);
  EXPECT_THAT(claim.err,
              HasSubstr("--claim: ResourceClaim \"default/nope\" is not in the cluster"));
  Ran pod = Alloc({"--kubeconfig", kubeconfig_, "--pod", "nope", "--all-nodes"});
  EXPECT_EQ(pod.rc, 2);
  EXPECT_THAT(pod.err, HasSubstr("--pod: "));
  EXPECT_THAT(pod.err, HasSubstr("nope"));
  Ran nothing = Alloc({"--kubeconfig", kubeconfig_, "--all-nodes"});
  EXPECT_EQ(nothing.rc, 2);
  EXPECT_THAT(nothing.err, HasSubstr("nothing to place"));
}

// A service account without RBAC rules is refused: the message says what is needed.
TEST_F(DevletAllocApiServerTest, RbacForbidden) {
  const std::string token = ServiceAccountToken("nobody");
  ASSERT_FALSE(token.empty());
  Ran ran = Alloc({"--kubeconfig", KubeconfigWithToken("nobody.kubeconfig", token), "--claim",
                   "one-gpu", "--all-nodes"});
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("forbidden"));
  EXPECT_THAT(ran.err, HasSubstr("system:serviceaccount:default:nobody"));
  EXPECT_THAT(ran.err, HasSubstr("HTTP 403"));
  EXPECT_THAT(ran.err, HasSubstr("devlet-alloc needs get and list on deviceclasses"));
  EXPECT_EQ(ran.out, "");
}

// The role devlet-alloc documents (cmd/devlet-alloc/rbac.yaml) is enough: a service account bound
// to it gets the admin's answer. (The authorizer sees a new binding after a moment: retried.)
TEST_F(DevletAllocApiServerTest, RbacReaderRoleIsEnough) {
  const std::string token = ServiceAccountToken("reader");
  ASSERT_FALSE(token.empty());
  BindReaderRole("reader");
  const std::string config = KubeconfigWithToken("reader.kubeconfig", token);
  Ran admin = Alloc({"--kubeconfig", kubeconfig_, "--pod", "trainer", "--all-nodes"});
  ASSERT_EQ(admin.rc, 0) << admin.err;
  Ran reader;
  for (int i = 0; i < 50; ++i) {
    reader = Alloc({"--kubeconfig", config, "--pod", "trainer", "--all-nodes"});
    if (reader.rc == 0 || reader.err.find("forbidden") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(reader.rc, 0) << reader.err;
  EXPECT_EQ(reader.out, admin.out);
}

// --in-cluster: the pod's service account (token and CA under
// /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/PORT). The files are put
// there in a private mount namespace (a tmpfs over /run), so the test needs unshare -m (root, or
// a user namespace with -r); skipped without it.
TEST_F(DevletAllocApiServerTest, InClusterServiceAccount) {
  const bool root = geteuid() == 0;
  const std::string unshare = root ? "-m" : "-rm";
  if (Exec("unshare", {unshare, "true"}).rc != 0) {
    GTEST_SKIP() << "unshare " << unshare << " is not allowed here";
  }
  const std::string token = ServiceAccountToken("incluster");
  ASSERT_FALSE(token.empty());
  BindReaderRole("incluster");
  ASSERT_OK_AND_ASSIGN(kube::RestConfig admin, kube::LoadKubeconfig(kubeconfig_));
  const std::string token_file = WriteTemp("incluster.token", token);
  const std::string ca_file = WriteTemp("incluster.ca", admin.certificate_authority_data);
  ASSERT_FALSE(admin.certificate_authority_data.empty());
  const std::string server = std::getenv("DEVLET_TEST_APISERVER");
  const size_t colon = server.rfind(':');
  ASSERT_NE(colon, std::string::npos) << server;
  const std::string env = "KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=" +
                          server.substr(colon + 1) + " KUBECONFIG=/nonexistent";
  const std::string script =
      "set -e; run=$(readlink -f /var/run); mount -t tmpfs devlet-test \"$run\"; "
      "d=\"$run/secrets/kubernetes.io/serviceaccount\"; mkdir -p \"$d\"; "
      "cp \"" + token_file + "\" \"$d/token\"; cp \"" + ca_file + "\" \"$d/ca.crt\"; "
      "exec \"" + kAlloc + "\" --in-cluster --pod trainer --all-nodes";
  Ran admin_run = Alloc({"--kubeconfig", kubeconfig_, "--pod", "trainer", "--all-nodes"});
  Ran in_cluster;
  for (int i = 0; i < 50; ++i) {
    in_cluster = Exec("unshare", {unshare, "sh", "-c", script}, env);
    if (in_cluster.rc == 0 || in_cluster.err.find("forbidden") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(in_cluster.rc, 0) << in_cluster.err;
  EXPECT_EQ(in_cluster.out, admin_run.out);
  EXPECT_THAT(in_cluster.out, HasSubstr("node-a"));
}

TEST_F(DevletAllocApiServerTest, BadToken) {
  Ran ran = Alloc({"--kubeconfig", KubeconfigWithToken("bad.kubeconfig", "not-a-token"),
                   "--claim", "one-gpu", "--all-nodes"});
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("HTTP 401"));
  EXPECT_EQ(ran.out, "");
}

// No server on the port: a clear error within seconds, exit 2.
TEST_F(DevletAllocApiServerTest, UnreachableServer) {
  const std::string config = WriteTemp("unreachable.kubeconfig", R"(apiVersion: v1
kind: Config
current-context: t
clusters:
- {name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}
users:
- {name: u, user: {token: abc}}
contexts:
- {name: t, context: {cluster: c, user: u}}
)");
  Ran ran = Alloc({"--kubeconfig", config, "--claim", "one-gpu", "--all-nodes"});
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("reading the cluster at https://127.0.0.1:1"));
  EXPECT_THAT(ran.err, HasSubstr("Connection refused"));
  EXPECT_LT(ran.seconds, 10);
}

// A server that accepts connections and never answers: --timeout bounds the read.
TEST_F(DevletAllocApiServerTest, SilentServerIsBoundedByTimeout) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 16), 0);  // never accepted: connects complete, nothing is answered
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string server = "https://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const std::string config = WriteTemp("silent.kubeconfig", "apiVersion: v1\nkind: Config\n"
      "current-context: t\nclusters:\n- {name: c, cluster: {server: \"" + server +
      "\", insecure-skip-tls-verify: true}}\nusers:\n- {name: u, user: {token: abc}}\n"
      "contexts:\n- {name: t, context: {cluster: c, user: u}}\n");
  Ran ran = Alloc({"--kubeconfig", config, "--claim", "one-gpu", "--all-nodes", "--timeout", "1s"});
  close(fd);
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("timed out after 1s reading the cluster at " + server));
  EXPECT_LT(ran.seconds, 5);
  EXPECT_EQ(ran.out, "");
}

TEST_F(DevletAllocApiServerTest, BadKubeconfig) {
  const std::string config = WriteTemp("garbage.kubeconfig", "clusters: [\n");
  Ran ran = Alloc({"--kubeconfig", config, "--claim", "one-gpu", "--all-nodes"});
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("garbage.kubeconfig"));
  Ran missing = Alloc({"--kubeconfig", config + ".missing", "--claim", "one-gpu", "--all-nodes"});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_THAT(missing.err, HasSubstr("garbage.kubeconfig.missing"));
  Ran context = Alloc({"--kubeconfig", kubeconfig_, "--context", "nope", "--claim", "one-gpu",
                       "--all-nodes"});
  EXPECT_EQ(context.rc, 2);
  EXPECT_THAT(context.err, HasSubstr("nope"));
  EXPECT_THAT(context.out, Not(HasSubstr("NODE")));
}

// A pod already placed, with extended resources (DRAExtendedResource): its special claim in the
// cluster holds node-a's gpu-0 and gpu-1; the what-if synthesizes the claim anew and counts those
// devices as free, instead of counting them twice. (Last: it allocates devices in the shared API
// server, and deletes the claim at the end.)
TEST_F(DevletAllocApiServerTest, PlacedPodsExtendedResourceClaimIsNotCountedTwice) {
  kube::ResourceClaim special = CreateAllocated(Decode<kube::ResourceClaim>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: trainer-extended-resources-x7k2p, namespace: default}
spec:
  devices:
    requests:
    - name: container-0-request-0
      exactly: {deviceClassName: gpu.example.com, count: 2}
status:
  allocation:
    devices:
      results:
      - {request: container-0-request-0, driver: gpu.example.com, pool: node-a, device: gpu-0}
      - {request: container-0-request-0, driver: gpu.example.com, pool: node-a, device: gpu-1}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields:
        - {key: metadata.name, operator: In, values: [node-a]}
)"));
  ASSERT_TRUE(special.status.allocation.has_value());
  std::string pod = ReadFile(kExamples + "/claims/extended-resource-pod.yaml");
  pod += R"(status:
  extendedResourceClaimStatus:
    resourceClaimName: trainer-extended-resources-x7k2p
    requestMappings:
    - containerName: train
      resourceName: deviceclass.resource.kubernetes.io/gpu.example.com
      requestName: container-0-request-0
)";
  const std::string file = WriteTemp("placed-pod.yaml", pod);
  Ran placed = Alloc({"--kubeconfig", kubeconfig_, "-f", file, "--node", "node-a"});
  EXPECT_EQ(placed.rc, 0) << placed.err;
  EXPECT_THAT(placed.out, HasSubstr("\"device\": \"gpu-0\""));
  EXPECT_THAT(placed.out, HasSubstr("\"device\": \"gpu-1\""));
  EXPECT_THAT(placed.err, HasSubstr("\"default/trainer-extended-resources-x7k2p\" (the extended "
                                    "resources of Pod \"default/trainer\") is allocated"));
  // The same pod not yet placed sees the claim's devices taken.
  Ran fresh = Alloc({"--kubeconfig", kubeconfig_, "-f",
                     kExamples + "/claims/extended-resource-pod.yaml", "--node", "node-a"});
  EXPECT_EQ(fresh.rc, 0) << fresh.err;
  EXPECT_THAT(fresh.out, HasSubstr("\"device\": \"gpu-2\""));
  EXPECT_THAT(fresh.out, HasSubstr("\"device\": \"gpu-3\""));
  EXPECT_OK(store_->Delete(kube::Kind::kResourceClaim,
                           {"default", "trainer-extended-resources-x7k2p"}, ""));
}

}  // namespace
}  // namespace devlet
