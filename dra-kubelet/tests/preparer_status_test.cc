// The preparer publishes ResourceClaim status.devices through a ClaimStatusWriter: driven through
// the DRA socket like the kubelet does, with claims and their status in the standalone manifest
// store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/claim_status.h"
#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/dra_kubelet/testing/kubelet_client.h"
#include "devlet/dra_kubelet/testing/local.h"
#include "devlet/kube/codec.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::dra_kubelet::testing::SimulatedBackend;
using ::devlet::testing::IsOk;
using ::devlet::testing::IsOkAndHolds;
using testing::DeviceNames;
using testing::KubeletClient;
using testing::TempDir;
using ::testing::ElementsAre;
using ::testing::ResultOf;

constexpr char kDriver[] = "gpu.devlet.test";
constexpr const char* kUid = testing::kTwoDriverClaimUid;
const ClaimRef kRef{"default", "c", kUid};

// PreparedGpu1 matches the kubelet's answer for claim c: prepared, with its one device gpu-1.
auto PreparedGpu1() { return IsOkAndHolds(ResultOf(&DeviceNames, ElementsAre("gpu-1"))); }

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
    ASSERT_OK_AND_ASSIGN(kube::ResourceClaim claim, kube::DecodeOne<kube::ResourceClaim>(
                                                        testing::TwoDriverClaimYaml("gpu-1")));
    ASSERT_THAT(store_->Create(claim).status(), IsOk());
    ASSERT_OK_AND_ASSIGN(checkpoint_, StateClaimRecordStore::Open(dir_.path() + "/data", kDriver,
                                                                 dir_.path() + "/cdi"));
  }

  // Start runs the plugin with `writer` and returns the kubelet's client of its DRA socket.
  std::unique_ptr<KubeletClient> Start(ClaimStatusWriter* writer) {
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
    return std::make_unique<KubeletClient>(plugin_->DraSocketPath());
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
  std::unique_ptr<StateClaimRecordStore> checkpoint_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<KubeletPlugin> plugin_;
};

TEST_F(PreparerStatusTest, PrepareWritesReadyAndUnprepareClearsIt) {
  KubeClaimStatusWriter writer(*store_, kDriver);
  std::unique_ptr<KubeletClient> kubelet = Start(&writer);
  ASSERT_NE(kubelet, nullptr);
  ASSERT_THAT(kubelet->Prepare(kRef), PreparedGpu1());
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
  ASSERT_THAT(kubelet->Prepare(kRef), PreparedGpu1());
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(Read().status.devices.size(), 2u);

  ASSERT_THAT(kubelet->Unprepare(kRef), IsOk());
  preparer_->WaitForStatusWrites();
  claim = Read();
  ASSERT_EQ(claim.status.devices.size(), 1u);
  EXPECT_EQ(claim.status.devices[0].driver, "nic.other.test");
}

TEST_F(PreparerStatusTest, AFailingStatusWriteDoesNotFailThePrepare) {
  FailingWriter writer;
  std::unique_ptr<KubeletClient> kubelet = Start(&writer);
  ASSERT_NE(kubelet, nullptr);
  ASSERT_THAT(kubelet->Prepare(kRef), PreparedGpu1());
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(writer.calls.load(), 1);
  EXPECT_THAT(backend_.PreparedDevices(), ElementsAre(::testing::Pair("node-1/gpu-1", kUid)));
  ASSERT_THAT(kubelet->Unprepare(kRef), IsOk());
  preparer_->WaitForStatusWrites();
  EXPECT_EQ(writer.calls.load(), 2);  // The clear was attempted too.
  EXPECT_TRUE(backend_.PreparedDevices().empty());
  EXPECT_EQ(Read().status.devices.size(), 1u);  // Nothing was written.
}

TEST_F(PreparerStatusTest, NoWriterNoStatus) {
  std::unique_ptr<KubeletClient> kubelet = Start(nullptr);
  ASSERT_NE(kubelet, nullptr);
  ASSERT_THAT(kubelet->Prepare(kRef), PreparedGpu1());
  preparer_->WaitForStatusWrites();  // Returns at once without a writer.
  EXPECT_EQ(Read().status.devices.size(), 1u);
}

}  // namespace
}  // namespace devlet::dra_kubelet
