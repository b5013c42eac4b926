// dra-kubelet's ClaimPreparer with its ResourceClaim status writer against a real kube-apiserver
// v1.37.2 (apiserver-runner, DEVLET_TEST_KUBECONFIG), driven through the DRA socket like the
// kubelet: the claim is fetched from the API server, prepared (simulated devices, CDI specs, the
// state/ checkpoint), and its status.devices entry written by server-side apply next to another
// driver's; unprepare clears ours only. Skips without the runner.
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/claim_status.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/local.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"
#include "dra/v1/api.grpc.pb.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::testing::IsOk;
using ::testing::HasSubstr;

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

constexpr char kDriver[] = "gpu.devlet.test";
constexpr char kNicDriver[] = "nic.other.test";

// ApiServerClaims fetches claims from the API server, as devlet-node does with --kubeconfig.
class ApiServerClaims final : public ClaimSource {
 public:
  explicit ApiServerClaims(kube::ObjectStore& store) : store_(store) {}
  absl::StatusOr<ResourceClaim> GetClaim(const std::string& namespace_name,
                                         const std::string& name, const std::string&) override {
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(store_, namespace_name, name);
    if (!claim.ok()) return claim.status();
    return ResourceClaimFromKube(*claim);
  }

 private:
  kube::ObjectStore& store_;
};

class PreparerApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("DEVLET_TEST_KUBECONFIG");
    if (path == nullptr) GTEST_SKIP() << "run through apiserver-runner";
    ASSERT_OK_AND_ASSIGN(kube::RestConfig config, kube::LoadKubeconfig(path));
    ASSERT_OK_AND_ASSIGN(store_, kube::ApiServerStore::Create(config));
    std::string pattern =
        (std::filesystem::temp_directory_path() / "dra-preparer-apiserver-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ASSERT_OK_AND_ASSIGN(checkpoint_,
                         StateCheckpointStore::Open(dir_ + "/data", kDriver, dir_ + "/cdi"));
    claims_ = std::make_unique<ApiServerClaims>(*store_);
    cdi_ = std::make_unique<CdiSpecWriter>(dir_ + "/cdi");
    writer_ = std::make_unique<KubeClaimStatusWriter>(*store_, kDriver);
    PreparerOptions options;
    options.driver_name = kDriver;
    options.node_name = "node-1";
    options.plugin_data_dir = dir_ + "/data";
    options.status_writer = writer_.get();
    preparer_ = std::make_unique<ClaimPreparer>(options, *claims_, backend_, *cdi_, *checkpoint_);
    PluginOptions plugin_options;
    plugin_options.driver_name = kDriver;
    plugin_options.registrar_dir = dir_ + "/registry";
    plugin_options.plugin_data_dir = dir_ + "/data";
    ASSERT_OK_AND_ASSIGN(plugin_, KubeletPlugin::Start(plugin_options, *preparer_, nullptr));
    stub_ = drav1::DRAPlugin::NewStub(grpc::CreateChannel("unix:" + plugin_->DraSocketPath(),
                                                          grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (plugin_) plugin_->Stop();
    preparer_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Creates claim `name` and allocates gpu-1 (ours) and eth1 (the NIC driver's) on node-1, as
  // the scheduler does; the NIC driver has already published its entry.
  kube::ResourceClaim CreateAllocated(const std::string& name) {
    absl::StatusOr<kube::ResourceClaim> claim = kube::DecodeOne<kube::ResourceClaim>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: )" + name + R"(, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.devlet.test}
    - name: nic
      exactly: {deviceClassName: nic.other.test}
)");
    EXPECT_THAT(claim.status(), IsOk());
    absl::StatusOr<kube::Object> created = store_->Create(*claim);
    EXPECT_THAT(created.status(), IsOk());
    kube::ResourceClaim out = std::get<kube::ResourceClaim>(*created);
    kube::AllocationResult allocation;
    kube::DeviceRequestAllocationResult gpu;
    gpu.request = "gpu";
    gpu.driver = kDriver;
    gpu.pool = "node-1";
    gpu.device = "gpu-1";
    kube::DeviceRequestAllocationResult nic = gpu;
    nic.request = "nic";
    nic.driver = kNicDriver;
    nic.device = "eth1";
    allocation.devices.results = {gpu, nic};
    out.status.allocation = allocation;
    absl::StatusOr<kube::Object> allocated = store_->UpdateStatus(out);
    EXPECT_THAT(allocated.status(), IsOk());
    out = allocated.ok() ? std::get<kube::ResourceClaim>(*allocated) : out;
    KubeClaimStatusWriter nic_writer(*store_, kNicDriver);
    DeviceStatus eth1;
    eth1.pool = "node-1";
    eth1.device = "eth1";
    eth1.conditions.push_back({"Ready", "True", "InterfaceUp", "net1 configured", 0});
    EXPECT_THAT(nic_writer.SetDeviceStatus({"default", name, out.metadata.uid}, {eth1}), IsOk());
    return out;
  }

  kube::ResourceClaim Read(const std::string& name) {
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(*store_, "default", name);
    EXPECT_THAT(claim.status(), IsOk());
    return claim.ok() ? *claim : kube::ResourceClaim{};
  }

  // Call sends NodePrepareResources (or NodeUnprepareResources) for one claim and returns its
  // per-claim error ("" on success).
  std::string Call(bool prepare, const std::string& name, const std::string& uid) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (prepare) {
      drav1::NodePrepareResourcesRequest request;
      auto* claim = request.add_claims();
      claim->set_namespace_("default");
      claim->set_name(name);
      claim->set_uid(uid);
      drav1::NodePrepareResourcesResponse response;
      grpc::Status status = stub_->NodePrepareResources(&context, request, &response);
      if (!status.ok()) return "rpc: " + status.error_message();
      if (response.claims().count(uid) == 0) return "no entry";
      const auto& entry = response.claims().at(uid);
      if (!entry.error().empty()) return entry.error();
      if (entry.devices_size() != 1 || entry.devices(0).device_name() != "gpu-1") {
        return "unexpected devices";
      }
      return "";
    }
    drav1::NodeUnprepareResourcesRequest request;
    auto* claim = request.add_claims();
    claim->set_namespace_("default");
    claim->set_name(name);
    claim->set_uid(uid);
    drav1::NodeUnprepareResourcesResponse response;
    grpc::Status status = stub_->NodeUnprepareResources(&context, request, &response);
    if (!status.ok()) return "rpc: " + status.error_message();
    return response.claims().count(uid) == 0 ? "no entry" : response.claims().at(uid).error();
  }

  std::unique_ptr<kube::ApiServerStore> store_;
  std::string dir_;
  SimulatedBackend backend_{"node-1", SimulatedBackend::Gpus(2)};
  std::unique_ptr<StateCheckpointStore> checkpoint_;
  std::unique_ptr<ApiServerClaims> claims_;
  std::unique_ptr<CdiSpecWriter> cdi_;
  std::unique_ptr<KubeClaimStatusWriter> writer_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<KubeletPlugin> plugin_;
  std::unique_ptr<drav1::DRAPlugin::Stub> stub_;
};

TEST_F(PreparerApiServerTest, PrepareWritesReadyAndUnprepareClearsOnlyOurs) {
  const kube::ResourceClaim claim = CreateAllocated("prepared");
  const std::string uid = claim.metadata.uid;

  ASSERT_EQ(Call(true, "prepared", uid), "");
  preparer_->WaitForStatusWrites();
  kube::ResourceClaim after = Read("prepared");
  ASSERT_EQ(after.status.devices.size(), 2u);
  int ours = 0;
  for (const kube::AllocatedDeviceStatus& entry : after.status.devices) {
    if (entry.driver != kDriver) {
      EXPECT_EQ(entry.conditions.at(0).reason, "InterfaceUp");  // untouched
      continue;
    }
    ++ours;
    EXPECT_EQ(entry.pool, "node-1");
    EXPECT_EQ(entry.device, "gpu-1");
    ASSERT_EQ(entry.conditions.size(), 1u);
    EXPECT_EQ(entry.conditions[0].type, "Ready");
    EXPECT_EQ(entry.conditions[0].status, "True");
    EXPECT_EQ(entry.conditions[0].reason, "Prepared");
  }
  EXPECT_EQ(ours, 1);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/cdi/k8s." + std::string(kDriver) + "-claim_" + uid +
                                      ".json"));

  // The kubelet repeats the call (restart): same answer, the entry is applied again unchanged.
  ASSERT_EQ(Call(true, "prepared", uid), "");
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(Read("prepared").status.devices.size(), 2u);

  ASSERT_EQ(Call(false, "prepared", uid), "");
  preparer_->WaitForStatusWrites();
  kube::ResourceClaim cleared = Read("prepared");
  ASSERT_EQ(cleared.status.devices.size(), 1u);
  EXPECT_EQ(cleared.status.devices[0].driver, kNicDriver);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/cdi/k8s." + std::string(kDriver) + "-claim_" +
                                       uid + ".json"));
}

// The kubelet asks for a claim UID the API server no longer has under that name (deleted and
// re-created): a per-claim error, nothing prepared, no status written.
TEST_F(PreparerApiServerTest, RecreatedClaimIsRefused) {
  CreateAllocated("recreated");
  const std::string error = Call(true, "recreated", "00000000-0000-4000-8000-000000000001");
  EXPECT_THAT(error, HasSubstr("deleted and re-created"));
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(Read("recreated").status.devices.size(), 1u);  // only the NIC driver's
  // A claim that does not exist at all: a per-claim error naming it.
  EXPECT_THAT(Call(true, "missing", "00000000-0000-4000-8000-000000000002"),
              HasSubstr("default/missing"));
}

}  // namespace
}  // namespace devlet::dra_kubelet
