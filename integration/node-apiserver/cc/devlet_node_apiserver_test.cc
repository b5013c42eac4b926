// devlet-node (the binary) in API server mode against a real kube-apiserver v1.37.2, started by
// apiserver-runner (DEVLET_TEST_KUBECONFIG): on the simulated GPU server it publishes nothing
// while its Node is missing, then ResourceSlices owned by the Node (the API server validates the
// slices and the owner reference), recreates them when they are deleted, and stops cleanly on
// SIGTERM; a claim allocated in the API server is prepared through the DRA socket and its
// status.devices (Ready) written and cleared by devlet-node, validated by the API server. Skips
// without the runner.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"
#include "dra/v1/api.grpc.pb.h"

namespace devlet {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr char kNode[] = "devlet-it-node";

class DevletNodeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubeconfig_ =
        std::getenv("DEVLET_TEST_KUBECONFIG") ? std::getenv("DEVLET_TEST_KUBECONFIG") : "";
    if (kubeconfig_.empty())
      GTEST_SKIP() << "run through apiserver-runner";
    ASSERT_OK_AND_ASSIGN(kube::RestConfig config, kube::LoadKubeconfig(kubeconfig_));
    config.qps = 50;
    config.burst = 100;
    ASSERT_OK_AND_ASSIGN(store_, kube::ApiServerStore::Create(config));
    dir_ = fs::path("/tmp") / ("devlet-node-it-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_OK(devices::testing::AddGpuServer(fake_));
  }

  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (store_) {
      for (const kube::ResourceSlice& slice : Slices()) {
        (void)store_->Delete(kube::Kind::kResourceSlice, {.name = slice.metadata.name}, "");
      }
      (void)store_->Delete(kube::Kind::kNode, {.name = kNode}, "");
    }
    fs::remove_all(dir_);
  }

  void StartDevletNode() {
    std::vector<std::string> args = {DEVLET_NODE_BINARY,
                                     "--node-name",
                                     kNode,
                                     "--kubeconfig",
                                     kubeconfig_,
                                     "--topology-xml",
                                     std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml",
                                     "--sysfs-root",
                                     fake_.Root(),
                                     "--cdi-root",
                                     (dir_ / "cdi").string(),
                                     "--kubelet-registrar-directory-path",
                                     (dir_ / "registry").string(),
                                     "--kubelet-plugins-directory-path",
                                     (dir_ / "plugins").string(),
                                     "--nri-socket",
                                     "",
                                     "--healthcheck-port",
                                     "-1",
                                     "--kube-api-qps",
                                     "50",
                                     "--kube-api-burst",
                                     "100"};
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::unsetenv("NRI_PLUGIN_SOCKET");
      std::vector<char*> argv;
      for (std::string& arg : args)
        argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

  // Waits for the Node's slices, then returns.
  void CreateNodeAndWaitForSlices() {
    kube::Node node;
    node.metadata.name = kNode;
    ASSERT_OK(store_->Create(node).status());
    ASSERT_EQ(WaitForSlices(1).size(), 1u);
  }

  std::vector<kube::ResourceSlice> Slices() {
    absl::StatusOr<std::vector<kube::ResourceSlice>> slices =
        kube::ListAs<kube::ResourceSlice>(*store_, {.field_node_name = kNode});
    EXPECT_OK(slices.status());
    return slices.ok() ? *slices : std::vector<kube::ResourceSlice>();
  }

  // WaitForSlices polls until `count` slices exist (or 30 s passed).
  std::vector<kube::ResourceSlice> WaitForSlices(size_t count) {
    std::vector<kube::ResourceSlice> slices;
    for (int i = 0; i < 300; ++i) {
      slices = Slices();
      if (slices.size() == count)
        break;
      std::this_thread::sleep_for(100ms);
    }
    return slices;
  }

  std::string kubeconfig_;
  std::unique_ptr<kube::ApiServerStore> store_;
  fs::path dir_;
  devices::testing::FakeSysfs fake_;
  pid_t pid_ = -1;
};

TEST_F(DevletNodeApiServerTest, PublishesForItsNodeRepairsDeletedSlicesAndStopsCleanly) {
  StartDevletNode();
  std::this_thread::sleep_for(3s);
  ASSERT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "devlet-node exited";
  EXPECT_THAT(Slices(), ::testing::IsEmpty()) << "published before the Node exists";

  kube::Node node;
  node.metadata.name = kNode;
  ASSERT_OK_AND_ASSIGN(kube::Object created, store_->Create(node));
  const std::string node_uid = kube::MetadataOf(created).uid;
  std::vector<kube::ResourceSlice> slices = WaitForSlices(1);
  ASSERT_EQ(slices.size(), 1u) << "the simulated GPU server fits one slice";
  const kube::ResourceSlice& slice = slices[0];
  EXPECT_EQ(slice.spec.driver, "devlet.io");
  EXPECT_EQ(slice.spec.node_name.value_or(""), kNode);
  EXPECT_EQ(slice.spec.devices.size(), 12u);
  ASSERT_EQ(slice.metadata.owner_references.size(), 1u);
  EXPECT_EQ(slice.metadata.owner_references[0].api_version, "v1");
  EXPECT_EQ(slice.metadata.owner_references[0].kind, "Node");
  EXPECT_EQ(slice.metadata.owner_references[0].name, kNode);
  EXPECT_EQ(slice.metadata.owner_references[0].uid, node_uid);

  // Nothing changed on the node: the published slice stays as it is. The API server adds fields
  // of its own (managedFields, ...) that must not read as a change, or devlet-node's watch on its
  // own slices republishes in a loop.
  std::this_thread::sleep_for(3s);
  std::vector<kube::ResourceSlice> later = Slices();
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].metadata.resource_version, slice.metadata.resource_version)
      << "an unchanged slice was written again";
  EXPECT_EQ(later[0].spec.pool.generation, slice.spec.pool.generation);

  // Deleted behind devlet-node's back (the kubelet does this when it starts): recreated.
  ASSERT_OK(store_->Delete(kube::Kind::kResourceSlice, {.name = slice.metadata.name}, ""));
  std::vector<kube::ResourceSlice> repaired;
  for (int i = 0; i < 300; ++i) {
    repaired = Slices();
    if (!repaired.empty() && repaired[0].metadata.uid != slice.metadata.uid)
      break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(repaired.size(), 1u);
  EXPECT_NE(repaired[0].metadata.uid, slice.metadata.uid);
  EXPECT_EQ(repaired[0].spec.devices.size(), 12u);

  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 200 && !exited; ++i) {
    exited = ::waitpid(pid_, &status, WNOHANG) == pid_;
    if (!exited)
      std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(exited) << "devlet-node did not stop within 10 s of SIGTERM";
  pid_ = -1;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(dir_ / "registry" / "devlet.io-reg.sock"));
  EXPECT_EQ(Slices().size(), 1u) << "slices stay published across a restart";
}

// The scheduler's part done in the API server (a claim allocated gpu-0 of this node and reserved
// for a pod), the kubelet's part over the DRA socket: devlet-node reads the claim from the API
// server, prepares gpu-0, writes its CDI spec, and publishes status.devices with a Ready
// condition by server-side apply, which the API server validates against the allocation;
// unprepare removes the spec and the entry.
TEST_F(DevletNodeApiServerTest, PreparesAnApiServerClaimAndWritesItsDeviceStatus) {
  StartDevletNode();
  CreateNodeAndWaitForSlices();

  ASSERT_OK_AND_ASSIGN(kube::ResourceClaim claim, kube::DecodeOne<kube::ResourceClaim>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: it-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.devlet.io}
)"));
  ASSERT_OK_AND_ASSIGN(kube::Object created, store_->Create(claim));
  claim = std::get<kube::ResourceClaim>(created);
  kube::AllocationResult allocation;
  kube::DeviceRequestAllocationResult gpu;
  gpu.request = "gpu";
  gpu.driver = "devlet.io";
  gpu.pool = kNode;
  gpu.device = "gpu-0";
  allocation.devices.results = {gpu};
  claim.status.allocation = allocation;
  claim.status.reserved_for = {{.api_group = "",
                                .resource = "pods",
                                .name = "trainer",
                                .uid = "0f0e0d0c-0000-4000-8000-0000000000aa"}};
  ASSERT_OK_AND_ASSIGN(kube::Object allocated, store_->UpdateStatus(claim));
  const std::string uid = kube::MetadataOf(allocated).uid;

  auto channel =
      grpc::CreateChannel("unix:" + (dir_ / "plugins" / "devlet.io" / "dra.sock").string(),
                          grpc::InsecureChannelCredentials());
  auto dra = k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::NewStub(channel);
  k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesRequest prepare;
  auto* ref = prepare.add_claims();
  ref->set_namespace_("default");
  ref->set_name("it-gpu");
  ref->set_uid(uid);
  k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesResponse prepared;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    ASSERT_TRUE(dra->NodePrepareResources(&context, prepare, &prepared).ok());
  }
  ASSERT_TRUE(prepared.claims().contains(uid));
  const auto& result = prepared.claims().at(uid);
  ASSERT_EQ(result.error(), "");
  ASSERT_EQ(result.devices_size(), 1);
  EXPECT_EQ(result.devices(0).device_name(), "gpu-0");
  EXPECT_EQ(result.devices(0).pool_name(), kNode);
  EXPECT_GT(result.devices(0).cdi_device_ids_size(), 0);
  EXPECT_FALSE(fs::is_empty(dir_ / "cdi"));

  // status.devices arrives asynchronously (devlet-node's writer thread, after the answer).
  auto device_statuses = [&] {
    absl::StatusOr<kube::ResourceClaim> now =
        kube::GetAs<kube::ResourceClaim>(*store_, "default", "it-gpu");
    EXPECT_OK(now.status());
    return now.ok() ? now->status.devices : std::vector<kube::AllocatedDeviceStatus>();
  };
  std::vector<kube::AllocatedDeviceStatus> statuses;
  for (int i = 0; i < 100 && statuses.empty(); ++i) {
    statuses = device_statuses();
    if (statuses.empty())
      std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(statuses.size(), 1u) << "no status.devices written within 10 s";
  EXPECT_EQ(statuses[0].driver, "devlet.io");
  EXPECT_EQ(statuses[0].pool, kNode);
  EXPECT_EQ(statuses[0].device, "gpu-0");
  ASSERT_FALSE(statuses[0].conditions.empty());
  EXPECT_EQ(statuses[0].conditions[0].type, "Ready");
  EXPECT_EQ(statuses[0].conditions[0].status, "True");

  k8s::io::kubelet::pkg::apis::dra::v1::NodeUnprepareResourcesRequest unprepare;
  *unprepare.add_claims() = *ref;
  k8s::io::kubelet::pkg::apis::dra::v1::NodeUnprepareResourcesResponse unprepared;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    ASSERT_TRUE(dra->NodeUnprepareResources(&context, unprepare, &unprepared).ok());
  }
  ASSERT_TRUE(unprepared.claims().contains(uid));
  EXPECT_EQ(unprepared.claims().at(uid).error(), "");
  EXPECT_TRUE(fs::is_empty(dir_ / "cdi")) << "CDI spec left after unprepare";
  for (int i = 0; i < 100 && !statuses.empty(); ++i) {
    statuses = device_statuses();
    if (!statuses.empty())
      std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(statuses.empty()) << "status.devices not cleared within 10 s of unprepare";
  (void)store_->Delete(kube::Kind::kResourceClaim, {.namespace_name = "default", .name = "it-gpu"},
                       "");
}

}  // namespace
}  // namespace devlet
