#include "devlet/dra_kubelet/plugin.h"

#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/testing/kubelet_client.h"
#include "devlet/dra_kubelet/testing/local.h"
#include "dra-health/v1/api.grpc.pb.h"
#include "dra-health/v1alpha1/api.grpc.pb.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::dra_kubelet::testing::OpenCheckpoint;
using ::devlet::dra_kubelet::testing::SimulatedBackend;
using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using testing::FakeClaimSource;
using testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

constexpr char kDriver[] = "gpu.devlet.test";

std::shared_ptr<grpc::Channel> Dial(const std::string& path) {
  return grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
}

std::unique_ptr<grpc::ClientContext> Context(int seconds = 10) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  context->set_wait_for_ready(true);
  return context;
}

class PluginTest : public ::testing::Test {
 protected:
  PluginTest()
      : backend_(pool_, SimulatedBackend::Gpus(2)),
        cdi_(dir_.path() + "/cdi"),
        store_(OpenCheckpoint(dir_.path() + "/plugins/" + kDriver, kDriver, dir_.path() + "/cdi")),
        checkpoint_(*store_) {
    PreparerOptions preparer_options;
    preparer_options.driver_name = kDriver;
    preparer_options.plugin_data_dir = dir_.path() + "/plugins/" + kDriver;
    preparer_ = std::make_unique<ClaimPreparer>(preparer_options, claims_, backend_, cdi_,
                                                checkpoint_);
    options_.driver_name = kDriver;
    options_.registrar_dir = dir_.path() + "/registry";
    options_.plugin_data_dir = dir_.path() + "/plugins/" + kDriver;
    options_.health_resend_interval = std::chrono::milliseconds(200);
    ResourceClaim claim;
    claim.namespace_name = "ns";
    claim.name = "c";
    claim.uid = "uid-c";
    claim.allocated = true;
    claim.results.push_back({"gpu", kDriver, pool_, "gpu-0", std::nullopt, false});
    claims_.Add(claim);
  }

  const std::string pool_ = "node-1";
  TempDir dir_;
  FakeClaimSource claims_;
  SimulatedBackend backend_;
  CdiSpecWriter cdi_;
  std::unique_ptr<StateClaimRecordStore> store_;
  StateClaimRecordStore& checkpoint_;
  std::unique_ptr<ClaimPreparer> preparer_;
  PluginOptions options_;
};

TEST_F(PluginTest, RegistrationPrepareHealthAndStop) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeletPlugin> plugin,
                       KubeletPlugin::Start(options_, *preparer_, &backend_));
  const std::string reg_socket = dir_.path() + "/registry/gpu.devlet.test-reg.sock";
  const std::string dra_socket = dir_.path() + "/plugins/gpu.devlet.test/dra.sock";
  EXPECT_EQ(plugin->RegistrarSocketPath(), reg_socket);
  EXPECT_EQ(plugin->DraSocketPath(), dra_socket);

  auto registration = pluginregistration::Registration::NewStub(Dial(reg_socket));
  pluginregistration::PluginInfo info;
  ASSERT_TRUE(registration->GetInfo(Context().get(), {}, &info).ok());
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), kDriver);
  EXPECT_EQ(info.endpoint(), dra_socket);
  EXPECT_THAT(info.supported_versions(),
              ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                          "v1alpha1.DRAResourceHealth"));
  EXPECT_FALSE(plugin->RegistrationStatus().notified);
  pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(false);
  status.set_error("no handler");
  pluginregistration::RegistrationStatusResponse ignored;
  ASSERT_TRUE(registration->NotifyRegistrationStatus(Context().get(), status, &ignored).ok());
  EXPECT_FALSE(plugin->RegistrationStatus().registered);
  EXPECT_EQ(plugin->RegistrationStatus().error, "no handler");
  status.set_plugin_registered(true);
  status.clear_error();
  ASSERT_TRUE(registration->NotifyRegistrationStatus(Context().get(), status, &ignored).ok());
  EXPECT_TRUE(plugin->RegistrationStatus().registered);

  ASSERT_OK_AND_ASSIGN(drav1::NodePrepareResourceResponse entry,
                       testing::KubeletClient(dra_socket).Prepare({"ns", "c", "uid-c"}));
  ASSERT_EQ(entry.devices_size(), 1);
  EXPECT_EQ(entry.devices(0).device_name(), "gpu-0");
  EXPECT_FALSE(entry.devices(0).has_share_id());
  EXPECT_THAT(entry.devices(0).cdi_device_ids(),
              ElementsAre("k8s.gpu.devlet.test/claim=uid-c-gpu-0"));

  auto channel = Dial(dra_socket);
  auto v1beta1 = drav1beta1::DRAPlugin::NewStub(channel);
  drav1beta1::NodeUnprepareResourcesRequest unprepare;
  auto* un_claim = unprepare.add_claims();
  un_claim->set_namespace_("ns");
  un_claim->set_name("c");
  un_claim->set_uid("uid-c");
  drav1beta1::NodeUnprepareResourcesResponse unprepared;
  ASSERT_TRUE(v1beta1->NodeUnprepareResources(Context().get(), unprepare, &unprepared).ok());
  ASSERT_EQ(unprepared.claims().count("uid-c"), 1u);
  EXPECT_EQ(unprepared.claims().at("uid-c").error(), "");

  // Health: a snapshot at once, then re-sends; a change is pushed.
  auto health = ::v1::DRAResourceHealth::NewStub(channel);
  auto health_context = Context();
  auto reader = health->NodeWatchResources(health_context.get(), {});
  ::v1::NodeWatchResourcesResponse snapshot;
  ASSERT_TRUE(reader->Read(&snapshot));
  ASSERT_EQ(snapshot.devices_size(), 2);
  EXPECT_EQ(snapshot.devices(0).health(), ::v1::HEALTHY);
  backend_.SetHealth("gpu-1", HealthStatus::kUnhealthy, std::string(2000, 'x'));
  bool unhealthy = false;
  for (int i = 0; i < 20 && !unhealthy && reader->Read(&snapshot); ++i) {
    for (const auto& device : snapshot.devices()) {
      if (device.device().device_name() == "gpu-1" && device.health() == ::v1::UNHEALTHY) {
        unhealthy = true;
        EXPECT_EQ(device.message().size(), 1024u);
        EXPECT_THAT(device.message(), ::testing::EndsWith("..."));
      }
    }
  }
  EXPECT_TRUE(unhealthy);

  // Stop with the health stream still open: it ends, and both sockets go away.
  plugin->Stop();
  EXPECT_FALSE(std::filesystem::exists(reg_socket));
  EXPECT_FALSE(std::filesystem::exists(dra_socket));
  while (reader->Read(&snapshot)) {
  }
  reader->Finish();
  plugin->Stop();  // Idempotent.
}

// HealthOf returns gpu-<n>'s health in a snapshot (UNKNOWN when absent).
template <typename Response>
int HealthOf(const Response& snapshot, const std::string& device) {
  for (const auto& entry : snapshot.devices()) {
    if (entry.device().device_name() == device) return static_cast<int>(entry.health());
  }
  return 0;
}

TEST_F(PluginTest, HealthIsResentWithoutChangesAtTheInterval) {
  options_.health_resend_interval = std::chrono::milliseconds(100);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeletPlugin> plugin,
                       KubeletPlugin::Start(options_, *preparer_, &backend_));
  auto health = ::v1::DRAResourceHealth::NewStub(Dial(plugin->DraSocketPath()));
  auto context = Context(20);
  auto reader = health->NodeWatchResources(context.get(), {});
  ::v1::NodeWatchResourcesResponse snapshot;
  ASSERT_TRUE(reader->Read(&snapshot));  // The initial snapshot.
  // Nothing changes: the stream must still carry a full snapshot every interval. Without
  // re-sends the reads below would block until the 20 s deadline.
  auto start = std::chrono::steady_clock::now();
  constexpr int kResends = 5;
  for (int i = 0; i < kResends; ++i) {
    ASSERT_TRUE(reader->Read(&snapshot)) << "re-send " << i;
    EXPECT_EQ(snapshot.devices_size(), 2);
    EXPECT_EQ(HealthOf(snapshot, "gpu-0"), ::v1::HEALTHY);
  }
  auto took = std::chrono::steady_clock::now() - start;
  // Five re-sends at 100 ms take about 500 ms; the bound leaves room for a loaded machine but
  // not for a broadcaster that only sends on changes.
  EXPECT_GE(took, std::chrono::milliseconds(kResends * 100 - 50));
  EXPECT_LT(took, std::chrono::seconds(5));
  plugin->Stop();
  while (reader->Read(&snapshot)) {
  }
  reader->Finish();
}

TEST_F(PluginTest, HealthChangesArePushedAtOnceBothWays) {
  // The longest interval allowed: a change that arrives well before it was pushed, not re-sent.
  options_.health_resend_interval = kMaxHealthResendInterval;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeletPlugin> plugin,
                       KubeletPlugin::Start(options_, *preparer_, &backend_));
  auto health = ::v1alpha1::DRAResourceHealth::NewStub(Dial(plugin->DraSocketPath()));
  auto context = Context(20);
  auto reader = health->NodeWatchResources(context.get(), {});
  ::v1alpha1::NodeWatchResourcesResponse snapshot;
  ASSERT_TRUE(reader->Read(&snapshot));
  EXPECT_EQ(HealthOf(snapshot, "gpu-1"), ::v1alpha1::HEALTHY);

  auto start = std::chrono::steady_clock::now();
  backend_.SetHealth("gpu-1", HealthStatus::kUnhealthy, "ECC errors");
  ASSERT_TRUE(reader->Read(&snapshot));
  EXPECT_EQ(HealthOf(snapshot, "gpu-1"), ::v1alpha1::UNHEALTHY);
  EXPECT_EQ(HealthOf(snapshot, "gpu-0"), ::v1alpha1::HEALTHY);
  for (const auto& entry : snapshot.devices()) {
    if (entry.device().device_name() == "gpu-1") {
      EXPECT_EQ(entry.message(), "ECC errors");
      EXPECT_EQ(entry.device().pool_name(), pool_);
    }
  }
  backend_.SetHealth("gpu-1", HealthStatus::kHealthy, "");
  ASSERT_TRUE(reader->Read(&snapshot));
  EXPECT_EQ(HealthOf(snapshot, "gpu-1"), ::v1alpha1::HEALTHY);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  plugin->Stop();
  while (reader->Read(&snapshot)) {
  }
  reader->Finish();
}

TEST_F(PluginTest, RefusesAHealthIntervalBeyondTheKubeletsTimeout) {
  EXPECT_LE(PluginOptions{}.health_resend_interval, kMaxHealthResendInterval);
  options_.health_resend_interval = std::chrono::milliseconds(30001);
  EXPECT_THAT(KubeletPlugin::Start(options_, *preparer_, &backend_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 30 s")));
  options_.health_resend_interval = std::chrono::milliseconds(0);
  EXPECT_THAT(KubeletPlugin::Start(options_, *preparer_, &backend_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 0")));
  // Without health there is nothing to re-send.
  options_.health = false;
  EXPECT_THAT(KubeletPlugin::Start(options_, *preparer_, &backend_), IsOk());
}

TEST_F(PluginTest, HealthOffIsUnimplementedAndNotAdvertised) {
  options_.health = false;
  options_.serve_v1beta1 = false;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeletPlugin> plugin,
                       KubeletPlugin::Start(options_, *preparer_, &backend_));
  EXPECT_THAT(plugin->SupportedVersions(), ElementsAre("v1.DRAPlugin"));
  auto health = ::v1alpha1::DRAResourceHealth::NewStub(Dial(plugin->DraSocketPath()));
  auto context = Context();
  auto reader = health->NodeWatchResources(context.get(), {});
  ::v1alpha1::NodeWatchResourcesResponse response;
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(PluginTest, ReplacesAStaleSocket) {
  std::filesystem::create_directories(dir_.path() + "/registry");
  testing::WriteFile(dir_.path() + "/registry/gpu.devlet.test-reg.sock", "stale");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeletPlugin> plugin,
                       KubeletPlugin::Start(options_, *preparer_, nullptr));
  EXPECT_TRUE(std::filesystem::is_socket(plugin->RegistrarSocketPath()));
  EXPECT_THAT(plugin->SupportedVersions(), ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin"));
}

TEST_F(PluginTest, RejectsBadOptions) {
  options_.driver_name = "GPU_driver";
  EXPECT_THAT(KubeletPlugin::Start(options_, *preparer_, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lower-case DNS subdomain")));
  options_.driver_name = kDriver;
  options_.plugin_data_dir = dir_.path() + "/" + std::string(120, 'd');
  EXPECT_THAT(KubeletPlugin::Start(options_, *preparer_, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("AF_UNIX")));
}

TEST(SocketNames, PlainAndRollingUpdate) {
  EXPECT_EQ(RegistrarSocketFileName("/var/lib/kubelet/plugins_registry", "gpu.example.com", ""),
            "gpu.example.com-reg.sock");
  EXPECT_EQ(DraSocketFileName(""), "dra.sock");
  const std::string uid = "6b2c9a3e-1f1e-4c7a-9a52-1b7d3f0e2a11";
  EXPECT_EQ(DraSocketFileName(uid), "dra-" + uid + ".sock");
  EXPECT_EQ(RegistrarSocketFileName("/var/lib/kubelet/plugins_registry", "gpu.example.com", uid),
            "gpu.example.com-" + uid + "-reg.sock");
  // Too long with the UID: the hashed forms (11 and 22 base64url characters).
  std::string long_dir = "/" + std::string(60, 'r');
  std::string hashed = RegistrarSocketFileName(long_dir, "gpu.example.com", uid);
  EXPECT_THAT(hashed, StartsWith("gpu.example.com-"));
  EXPECT_EQ(hashed.size(), std::string("gpu.example.com-").size() + 11 + 9);
  std::string shortest = RegistrarSocketFileName("/" + std::string(80, 'r'), "gpu.example.com", uid);
  EXPECT_THAT(shortest, StartsWith("dra-"));
  EXPECT_EQ(shortest.size(), 4u + 22u + 9u);
}

TEST(ValidateDriverName, DnsSubdomain) {
  EXPECT_THAT(ValidateDriverName("gpu.devlet.test"), IsOk());
  EXPECT_THAT(ValidateDriverName(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 to 63")));
  EXPECT_THAT(ValidateDriverName(std::string(64, 'a')), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 to 63")));
  EXPECT_THAT(ValidateDriverName("a..b"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty DNS label")));
  EXPECT_THAT(ValidateDriverName("-a.b"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("start and end")));
}

}  // namespace
}  // namespace devlet::dra_kubelet
