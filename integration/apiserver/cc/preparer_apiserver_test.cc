// dra-kubelet's ClaimPreparer with its ResourceClaim status writer against a real kube-apiserver
// v1.37.2 (apiserver-runner, DEVLET_TEST_KUBECONFIG), driven through the DRA socket like the
// kubelet: the claim is fetched from the API server, prepared (simulated devices, CDI specs, the
// state/ checkpoint), and its status.devices entry written by server-side apply next to another
// driver's; unprepare clears ours only. Skips without the runner.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "apiserver_fixture.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/claim_status.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/dra_kubelet/testing/kubelet_client.h"
#include "devlet/dra_kubelet/testing/local.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::dra_kubelet::testing::SimulatedBackend;
using ::devlet::testing::IsOk;
using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ResultOf;

constexpr char kDriver[] = "gpu.devlet.test";
constexpr char kNicDriver[] = "nic.other.test";

// PreparedGpu1 matches the kubelet's answer for a claim: prepared, with its one device gpu-1.
auto PreparedGpu1() {
  return IsOkAndHolds(ResultOf(&testing::DeviceNames, ElementsAre("gpu-1")));
}

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

class PreparerApiServerTest : public apiserver_testing::ApiServerFixture {
 protected:
  void SetUp() override {
    ApiServerFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_OK_AND_ASSIGN(checkpoint_,
                         StateClaimRecordStore::Open(dir_ + "/data", kDriver, dir_ + "/cdi"));
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
    kubelet_ = std::make_unique<testing::KubeletClient>(plugin_->DraSocketPath(),
                                                        std::chrono::seconds(30));
  }

  void TearDown() override {
    if (plugin_) plugin_->Stop();
    preparer_.reset();
  }

  // Creates claim `name` and allocates gpu-1 (ours) and eth1 (the NIC driver's) on node-1, as
  // the scheduler does; the NIC driver has already published its entry.
  kube::ResourceClaim CreateAllocated(const std::string& name) {
    kube::ResourceClaim claim =
        Decode<kube::ResourceClaim>(testing::TwoDriverClaimYaml("gpu-1"));
    claim.metadata.name = name;
    kube::ResourceClaim out = ApiServerFixture::CreateAllocated(std::move(claim));
    KubeClaimStatusWriter nic_writer(*store_, kNicDriver);
    DeviceStatus eth1;
    eth1.pool = "node-1";
    eth1.device = "eth1";
    eth1.conditions.push_back({"Ready", "True", "InterfaceUp", "net1 configured", 0});
    EXPECT_THAT(nic_writer.SetDeviceStatus({"default", name, out.metadata.uid}, {eth1}), IsOk());
    return out;
  }

  testing::TempDir temp_;
  const std::string dir_ = temp_.path();
  SimulatedBackend backend_{"node-1", SimulatedBackend::Gpus(2)};
  std::unique_ptr<StateClaimRecordStore> checkpoint_;
  std::unique_ptr<ApiServerClaims> claims_;
  std::unique_ptr<CdiSpecWriter> cdi_;
  std::unique_ptr<KubeClaimStatusWriter> writer_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<KubeletPlugin> plugin_;
  std::unique_ptr<testing::KubeletClient> kubelet_;
};

TEST_F(PreparerApiServerTest, PrepareWritesReadyAndUnprepareClearsOnlyOurs) {
  const kube::ResourceClaim claim = CreateAllocated("prepared");
  const std::string uid = claim.metadata.uid;

  ASSERT_THAT(kubelet_->Prepare({"default", "prepared", uid}), PreparedGpu1());
  preparer_->WaitForStatusWrites();
  kube::ResourceClaim after = ReadClaim("prepared");
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
  ASSERT_THAT(kubelet_->Prepare({"default", "prepared", uid}), PreparedGpu1());
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(ReadClaim("prepared").status.devices.size(), 2u);

  ASSERT_THAT(kubelet_->Unprepare({"default", "prepared", uid}), IsOk());
  preparer_->WaitForStatusWrites();
  kube::ResourceClaim cleared = ReadClaim("prepared");
  ASSERT_EQ(cleared.status.devices.size(), 1u);
  EXPECT_EQ(cleared.status.devices[0].driver, kNicDriver);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/cdi/k8s." + std::string(kDriver) + "-claim_" +
                                       uid + ".json"));
}

// The kubelet asks for a claim UID the API server no longer has under that name (deleted and
// re-created): a per-claim error, nothing prepared, no status written.
TEST_F(PreparerApiServerTest, RecreatedClaimIsRefused) {
  CreateAllocated("recreated");
  EXPECT_THAT(kubelet_->Prepare({"default", "recreated", "00000000-0000-4000-8000-000000000001"}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("deleted and re-created")));
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(ReadClaim("recreated").status.devices.size(), 1u);  // only the NIC driver's
  // A claim that does not exist at all: a per-claim error naming it.
  EXPECT_THAT(kubelet_->Prepare({"default", "missing", "00000000-0000-4000-8000-000000000002"}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("default/missing")));
}

}  // namespace
}  // namespace devlet::dra_kubelet
