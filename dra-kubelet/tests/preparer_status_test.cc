// The preparer publishes ResourceClaim status.devices through a ClaimStatusWriter: driven through
// the DRA socket like the kubelet does, with claims and their status in the standalone manifest
// store.
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/claim_status.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/local.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/kube/codec.h"
#include "dra/v1/api.grpc.pb.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::testing::IsOk;
using testing::TempDir;
using ::testing::ElementsAre;

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

constexpr char kDriver[] = "gpu.devlet.test";
constexpr char kUid[] = "0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61";

// Our GPU and another driver's NIC, whose status entry is not ours to touch.
constexpr char kClaim[] = R"(apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default, uid: 0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.devlet.test}
    - name: nic
      exactly: {deviceClassName: nic.other.test}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.devlet.test, pool: node-1, device: gpu-1}
      - {request: nic, driver: nic.other.test, pool: node-1, device: eth1}
  reservedFor:
  - {resource: pods, name: p, uid: pod-1}
  devices:
  - driver: nic.other.test
    pool: node-1
    device: eth1
    conditions:
    - {type: Ready, status: "True", reason: Up, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
)";

// FailingWriter refuses every write (an unreachable API server).
class FailingWriter final : public ClaimStatusWriter {
 public:
  absl::Status SetDeviceStatus(const ClaimRef&, const std::vector<DeviceStatus>&) override {
    ++calls;
    return absl::UnavailableError("connection refused (injected)");
  }
  std::atomic<int> calls{0};
};

class PreparerStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() + "/manifests");
    ASSERT_OK_AND_ASSIGN(store_, kube::ManifestStore::Open({.dir = dir_.path() + "/manifests"}));
    ASSERT_OK_AND_ASSIGN(kube::ResourceClaim claim, kube::DecodeOne<kube::ResourceClaim>(kClaim));
    ASSERT_THAT(store_->Create(claim).status(), IsOk());
    ASSERT_OK_AND_ASSIGN(checkpoint_, StateCheckpointStore::Open(dir_.path() + "/data", kDriver,
                                                                 dir_.path() + "/cdi"));
  }

  // Start runs the plugin with `writer` and returns a v1 stub on its DRA socket.
  std::unique_ptr<drav1::DRAPlugin::Stub> Start(ClaimStatusWriter* writer) {
    PreparerOptions options;
    options.driver_name = kDriver;
    options.plugin_data_dir = dir_.path() + "/data";
    options.status_writer = writer;
    preparer_ = std::make_unique<ClaimPreparer>(options, claims_, backend_, cdi_, *checkpoint_);
    PluginOptions plugin_options;
    plugin_options.driver_name = kDriver;
    plugin_options.registrar_dir = dir_.path() + "/registry";
    plugin_options.plugin_data_dir = dir_.path() + "/data";
    absl::StatusOr<std::unique_ptr<KubeletPlugin>> plugin =
        KubeletPlugin::Start(plugin_options, *preparer_, nullptr);
    EXPECT_THAT(plugin.status(), IsOk());
    if (!plugin.ok()) return nullptr;
    plugin_ = *std::move(plugin);
    return drav1::DRAPlugin::NewStub(grpc::CreateChannel("unix:" + plugin_->DraSocketPath(),
                                                         grpc::InsecureChannelCredentials()));
  }

  static std::string Prepare(drav1::DRAPlugin::Stub& stub) {
    drav1::NodePrepareResourcesRequest request;
    auto* claim = request.add_claims();
    claim->set_namespace_("default");
    claim->set_name("c");
    claim->set_uid(kUid);
    drav1::NodePrepareResourcesResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    grpc::Status status = stub.NodePrepareResources(&context, request, &response);
    if (!status.ok()) return "rpc: " + status.error_message();
    if (response.claims().count(kUid) == 0) return "no entry";
    const auto& entry = response.claims().at(kUid);
    if (!entry.error().empty()) return entry.error();
    if (entry.devices_size() != 1 || entry.devices(0).device_name() != "gpu-1") return "devices?";
    return "";
  }

  static std::string Unprepare(drav1::DRAPlugin::Stub& stub) {
    drav1::NodeUnprepareResourcesRequest request;
    auto* claim = request.add_claims();
    claim->set_namespace_("default");
    claim->set_name("c");
    claim->set_uid(kUid);
    drav1::NodeUnprepareResourcesResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    grpc::Status status = stub.NodeUnprepareResources(&context, request, &response);
    if (!status.ok()) return "rpc: " + status.error_message();
    return response.claims().count(kUid) == 0 ? "no entry" : response.claims().at(kUid).error();
  }

  kube::ResourceClaim Read() {
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(*store_, "default", "c");
    EXPECT_THAT(claim.status(), IsOk());
    return claim.ok() ? *claim : kube::ResourceClaim{};
  }

  void TearDown() override {
    if (plugin_) plugin_->Stop();
  }

  TempDir dir_;
  std::unique_ptr<kube::ManifestStore> store_;
  ManifestClaimSource claims_{dir_.path() + "/manifests"};
  SimulatedBackend backend_{"node-1", SimulatedBackend::Gpus(2)};
  CdiSpecWriter cdi_{dir_.path() + "/cdi"};
  std::unique_ptr<StateCheckpointStore> checkpoint_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<KubeletPlugin> plugin_;
};

TEST_F(PreparerStatusTest, PrepareWritesReadyAndUnprepareClearsIt) {
  KubeClaimStatusWriter writer(*store_, kDriver);
  auto stub = Start(&writer);
  ASSERT_NE(stub, nullptr);
  ASSERT_EQ(Prepare(*stub), "");
  preparer_->WaitForStatusWrites();
  kube::ResourceClaim claim = Read();
  ASSERT_EQ(claim.status.devices.size(), 2u);
  EXPECT_EQ(claim.status.devices[0].driver, "nic.other.test");  // Not ours: untouched.
  EXPECT_EQ(claim.status.devices[0].conditions[0].reason, "Up");
  const kube::AllocatedDeviceStatus& ours = claim.status.devices[1];
  EXPECT_EQ(ours.driver, kDriver);
  EXPECT_EQ(ours.pool, "node-1");
  EXPECT_EQ(ours.device, "gpu-1");
  ASSERT_EQ(ours.conditions.size(), 1u);
  EXPECT_EQ(ours.conditions[0].type, "Ready");
  EXPECT_EQ(ours.conditions[0].status, "True");
  EXPECT_EQ(ours.conditions[0].reason, "Prepared");
  EXPECT_FALSE(ours.conditions[0].last_transition_time.empty());

  // A repeated prepare (kubelet restart) does not need to write again, and keeps the entry.
  ASSERT_EQ(Prepare(*stub), "");
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(Read().status.devices.size(), 2u);

  ASSERT_EQ(Unprepare(*stub), "");
  preparer_->WaitForStatusWrites();
  claim = Read();
  ASSERT_EQ(claim.status.devices.size(), 1u);
  EXPECT_EQ(claim.status.devices[0].driver, "nic.other.test");
}

TEST_F(PreparerStatusTest, AFailingStatusWriteDoesNotFailThePrepare) {
  FailingWriter writer;
  auto stub = Start(&writer);
  ASSERT_NE(stub, nullptr);
  ASSERT_EQ(Prepare(*stub), "");
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(writer.calls.load(), 1);
  EXPECT_THAT(backend_.PreparedDevices(), ElementsAre(::testing::Pair("node-1/gpu-1", kUid)));
  ASSERT_EQ(Unprepare(*stub), "");
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(writer.calls.load(), 2);  // The clear was attempted too.
  EXPECT_TRUE(backend_.PreparedDevices().empty());
  EXPECT_EQ(Read().status.devices.size(), 1u);  // Nothing was written.
}

TEST_F(PreparerStatusTest, NoWriterNoStatus) {
  auto stub = Start(nullptr);
  ASSERT_NE(stub, nullptr);
  ASSERT_EQ(Prepare(*stub), "");
  preparer_->WaitForStatusWrites();  // Returns at once without a writer.
  EXPECT_EQ(Read().status.devices.size(), 1u);
}

}  // namespace
}  // namespace devlet::dra_kubelet
