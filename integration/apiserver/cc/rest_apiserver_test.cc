// devlet's REST client (ApiServerStore) against a real kube-apiserver v1.37.2 + etcd, started by
// apiserver-runner, which passes the kubeconfigs in DEVLET_TEST_KUBECONFIG (bearer token) and
// DEVLET_TEST_KUBECONFIG_CERT (client certificate). Skips when run without the runner.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "apiserver_fixture.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"

namespace devlet::kube {
namespace {

using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kDriver[] = "devlet.example.com";

class ApiServerTest : public apiserver_testing::ApiServerFixture {
 protected:
  static ResourceSlice Slice(const std::string& node) {
    return Decode<ResourceSlice>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: )" + node + R"(-gpus
  labels: {devlet.example.com/node: )" + node + R"(}
spec:
  driver: devlet.example.com
  nodeName: )" + node + R"(
  pool: {name: )" + node + R"(, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      model: {string: H200}
)");
  }

  static ResourceClaim Claim(const std::string& name) {
    return Decode<ResourceClaim>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: )" + name + R"(, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.devlet.example.com}
)");
  }
};

TEST_F(ApiServerTest, CrudListAndErrors) {
  DeviceClass device_class = Decode<DeviceClass>(R"(
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.devlet.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "devlet.example.com"'}
)");
  ASSERT_OK(store_->Create(device_class).status());
  EXPECT_THAT(store_->Create(device_class),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("gpu.devlet.example.com")));

  ASSERT_OK(store_->Create(Slice("node-1")).status());
  ASSERT_OK(store_->Create(Slice("node-2")).status());
  ASSERT_OK_AND_ASSIGN(std::vector<ResourceSlice> on_node1,
                       ListAs<ResourceSlice>(*store_, {.field_node_name = "node-1"}));
  ASSERT_EQ(on_node1.size(), 1u);
  EXPECT_EQ(on_node1[0].metadata.name, "node-1-gpus");
  ASSERT_OK_AND_ASSIGN(
      std::vector<ResourceSlice> by_label,
      ListAs<ResourceSlice>(*store_, {.labels = {{"devlet.example.com/node", "node-2"}},
                                      .field_driver = kDriver}));
  ASSERT_EQ(by_label.size(), 1u);
  EXPECT_EQ(by_label[0].metadata.name, "node-2-gpus");

  ASSERT_OK_AND_ASSIGN(Object created, store_->Create(Claim("crud")));
  EXPECT_FALSE(MetadataOf(created).uid.empty());
  ASSERT_OK_AND_ASSIGN(ResourceClaim claim, GetAs<ResourceClaim>(*store_, "default", "crud"));
  EXPECT_EQ(claim.spec.devices.requests.at(0).name, "gpu");
  EXPECT_THAT(store_->Get(Kind::kResourceClaim, {"default", "missing"}),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("ResourceClaim \"default/missing\"")));

  claim.metadata.labels["x"] = "1";
  ASSERT_OK(store_->Update(claim).status());
  // Stale resourceVersion: the API server's 409 Conflict.
  EXPECT_THAT(store_->Update(claim),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("ResourceClaim \"default/crud\"")));
  // Invalid object: 422.
  ResourceClaim invalid = Claim("Invalid_Name");
  EXPECT_THAT(store_->Create(invalid), StatusIs(absl::StatusCode::kInvalidArgument));

  EXPECT_THAT(store_->Delete(Kind::kResourceClaim, {"default", "crud"}, "wrong-uid"),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_OK(store_->Delete(Kind::kResourceClaim, {"default", "crud"}, claim.metadata.uid));

  // Nodes and Pods (core group).
  Node node;
  node.metadata.name = "node-1";
  ASSERT_OK(store_->Create(node).status());
  Pod pod = Decode<Pod>(R"(
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  nodeName: node-1
  containers: [{name: c, image: busybox}]
)");
  ASSERT_OK(store_->Create(pod).status());
  ASSERT_OK_AND_ASSIGN(std::vector<Pod> pods, ListAs<Pod>(*store_, {.field_node_name = "node-1"}));
  EXPECT_EQ(pods.size(), 1u);
}

TEST_F(ApiServerTest, StatusSubresourceAndServerSideApply) {
  ASSERT_OK_AND_ASSIGN(Object created, store_->Create(Claim("status")));
  ResourceClaim claim = std::get<ResourceClaim>(created);
  // The scheduler's part: allocation through the status subresource.
  AllocationResult allocation;
  DeviceRequestAllocationResult result;
  result.request = "gpu";
  result.driver = kDriver;
  result.pool = "node-1";
  result.device = "gpu-0";
  allocation.devices.results.push_back(result);
  claim.status.allocation = allocation;
  ASSERT_OK_AND_ASSIGN(Object allocated, store_->UpdateStatus(claim));
  ASSERT_TRUE(std::get<ResourceClaim>(allocated).status.allocation.has_value());

  // The driver's part: status.devices with server-side apply on the status subresource.
  const std::string apply = R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
    "metadata":{"name":"status","namespace":"default"},
    "status":{"devices":[{"driver":"devlet.example.com","pool":"node-1","device":"gpu-0",
      "data":{"healthy":true},
      "conditions":[{"type":"Ready","status":"True","reason":"Prepared","message":"ok",
                     "lastTransitionTime":"2026-01-01T00:00:00Z"}]}]}})";
  ASSERT_OK_AND_ASSIGN(Object applied,
                       store_->Patch(Kind::kResourceClaim, {"default", "status"}, apply,
                                     PatchType::kApply,
                                     {.field_manager = "devlet.example.com", .force = true,
                                      .subresource = "status"}));
  const ResourceClaim& with_devices = std::get<ResourceClaim>(applied);
  ASSERT_EQ(with_devices.status.devices.size(), 1u);
  EXPECT_EQ(with_devices.status.devices[0].device, "gpu-0");
  EXPECT_TRUE(with_devices.status.allocation.has_value());

  // SSA of a whole slice by two managers: a conflict without force, ownership moves with force.
  ResourceSlice slice = Slice("node-3");
  ASSERT_OK(store_->Apply(slice, {.field_manager = "devlet-a"}).status());
  slice.spec.pool.generation = 2;
  EXPECT_THAT(store_->Apply(slice, {.field_manager = "devlet-b"}),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("conflict")));
  ASSERT_OK_AND_ASSIGN(Object forced,
                       store_->Apply(slice, {.field_manager = "devlet-b", .force = true}));
  EXPECT_EQ(std::get<ResourceSlice>(forced).spec.pool.generation, 2);

  // Merge patch.
  ASSERT_OK_AND_ASSIGN(Object patched,
                       store_->Patch(Kind::kResourceSlice, {"", "node-3-gpus"},
                                     R"({"metadata":{"labels":{"patched":"yes"}}})",
                                     PatchType::kMerge));
  EXPECT_EQ(MetadataOf(patched).labels.at("patched"), "yes");
}

TEST_F(ApiServerTest, WatchSeesChangesAndBookmarksKeepItGoing) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<WatchEvent::Type, std::string>> events;
  ASSERT_OK(store_->Create(Claim("w0")).status());
  ASSERT_OK_AND_ASSIGN(
      auto watch, store_->Watch(Kind::kResourceClaim, {.namespace_name = "default"},
                                [&](const WatchEvent& event) {
                                  std::lock_guard<std::mutex> lock(mu);
                                  if (MetadataOf(event.object).name.rfind("w", 0) != 0) return;
                                  events.emplace_back(event.type, MetadataOf(event.object).name);
                                  cv.notify_all();
                                }));
  auto wait_for = [&](std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return events.size() >= n; });
  };
  ASSERT_TRUE(wait_for(1));
  ASSERT_OK(store_->Create(Claim("w1")).status());
  ASSERT_OK(store_->Patch(Kind::kResourceClaim, {"default", "w1"},
                          R"({"metadata":{"labels":{"a":"b"}}})", PatchType::kMerge)
                .status());
  ASSERT_OK(store_->Delete(Kind::kResourceClaim, {"default", "w1"}, ""));
  ASSERT_TRUE(wait_for(4));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(events[0], std::make_pair(WatchEvent::Type::kAdded, std::string("w0")));
  EXPECT_EQ(events[1], std::make_pair(WatchEvent::Type::kAdded, std::string("w1")));
  EXPECT_EQ(events[2], std::make_pair(WatchEvent::Type::kModified, std::string("w1")));
  EXPECT_EQ(events[3], std::make_pair(WatchEvent::Type::kDeleted, std::string("w1")));
}

TEST(ApiServerCertTest, ClientCertificateKubeconfig) {
  const char* path = std::getenv("DEVLET_TEST_KUBECONFIG_CERT");
  if (path == nullptr) GTEST_SKIP() << "run through apiserver-runner";
  ASSERT_OK_AND_ASSIGN(RestConfig config, LoadKubeconfig(path));
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(config));
  EXPECT_OK(store->List(Kind::kDeviceClass, {}).status());
  // Without credentials the API server refuses (anonymous is not system:masters).
  config.client_certificate_data.clear();
  config.client_key_data.clear();
  config.max_retries = 0;
  ASSERT_OK_AND_ASSIGN(auto anonymous, ApiServerStore::Create(config));
  EXPECT_THAT(anonymous->List(Kind::kDeviceClass, {}),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

// An exec plugin answering with the PEM files named in its `crt` and `key` files (a missing file:
// an empty field), the token in `token` and the expirationTimestamp in `expiry`.
constexpr char kCertPlugin[] = R"sh(#!/bin/sh
d="$(dirname "$0")"
echo run >> "$d/runs.txt"
pem() { if [ -f "$1" ]; then awk '{printf "%s\\n", $0}' "$1"; fi; }
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"%s","clientKeyData":"%s","token":"%s","expirationTimestamp":"%s"}}\n' "$(pem "$(cat "$d/crt")")" "$(pem "$(cat "$d/key")")" "$(cat "$d/token" 2>/dev/null)" "$(cat "$d/expiry")"
)sh";

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

int Runs(const std::string& dir) {
  std::ifstream in(dir + "/runs.txt");
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// The client certificate of an exec plugin, renewed without recreating the client: the real API
// server refuses a certificate from an unknown CA with 401, the client runs the plugin again and
// retries with the cluster's certificate on a new connection; at the credential's expiry the
// plugin's answer changes to a bearer token, which new connections then use without a
// certificate.
TEST(ApiServerCertTest, ExecPluginCertificateIsRenewed) {
  const char* cert_path = std::getenv("DEVLET_TEST_KUBECONFIG_CERT");
  const char* token_path = std::getenv("DEVLET_TEST_KUBECONFIG");
  if (cert_path == nullptr || token_path == nullptr) GTEST_SKIP() << "run through apiserver-runner";
  ASSERT_OK_AND_ASSIGN(RestConfig with_cert, LoadKubeconfig(cert_path));
  ASSERT_OK_AND_ASSIGN(RestConfig with_token, LoadKubeconfig(token_path));
  const std::string dir =
      ::testing::TempDir() + "/apiserver_exec_cert_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  WriteFile(dir + "/cluster.crt", with_cert.client_certificate_data);
  WriteFile(dir + "/cluster.key", with_cert.client_key_data);
  // A well-formed certificate the API server does not trust.
  ASSERT_EQ(std::system(("cd '" + dir + "' && openssl req -x509 -newkey ec -pkeyopt "
                         "ec_paramgen_curve:prime256v1 -nodes -keyout stranger.key -out "
                         "stranger.crt -days 2 -subj /CN=stranger >openssl.log 2>&1")
                            .c_str()),
            0);
  WriteFile(dir + "/plugin", kCertPlugin);
  std::filesystem::permissions(dir + "/plugin", std::filesystem::perms::owner_all);
  auto answer = [&](const std::string& cert, const std::string& token, const std::string& expiry) {
    WriteFile(dir + "/crt", cert.empty() ? "" : dir + "/" + cert + ".crt");
    WriteFile(dir + "/key", cert.empty() ? "" : dir + "/" + cert + ".key");
    WriteFile(dir + "/token", token);
    WriteFile(dir + "/expiry", expiry);
  };

  RestConfig config = with_cert;
  config.client_certificate_data.clear();
  config.client_key_data.clear();
  config.max_retries = 0;
  config.exec = ExecConfig{.command = dir + "/plugin",
                           .api_version = "client.authentication.k8s.io/v1",
                           .interactive_mode = "Never"};
  answer("stranger", "", "");
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(config));
  EXPECT_EQ(Runs(dir), 1);
  answer("cluster", "", "");
  EXPECT_OK(store->List(Kind::kDeviceClass, {}).status());  // 401, renewed, retried
  EXPECT_EQ(Runs(dir), 2);
  EXPECT_EQ(store->client().stats().cert_rotations.load(), 1);
  EXPECT_OK(store->List(Kind::kDeviceClass, {}).status());
  EXPECT_EQ(Runs(dir), 2);  // cached: no expirationTimestamp

  // A credential that expires soon: the plugin is asked again only then.
  const auto expiry = std::chrono::system_clock::now() + std::chrono::seconds(12);
  const std::time_t tt = std::chrono::system_clock::to_time_t(expiry);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  answer("cluster", "", stamp);
  ASSERT_OK_AND_ASSIGN(auto timed, ApiServerStore::Create(config));
  const int runs = Runs(dir);
  answer("", with_token.token, "");
  EXPECT_OK(timed->List(Kind::kDeviceClass, {}).status());
  EXPECT_EQ(Runs(dir), runs);  // still valid
  std::this_thread::sleep_until(expiry - std::chrono::seconds(10) + std::chrono::milliseconds(300));
  EXPECT_OK(timed->List(Kind::kDeviceClass, {}).status());  // now with the token, no certificate
  EXPECT_EQ(Runs(dir), runs + 1);
  EXPECT_EQ(timed->client().stats().cert_rotations.load(), 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace devlet::kube
