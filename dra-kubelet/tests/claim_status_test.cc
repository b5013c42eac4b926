// KubeClaimStatusWriter over a fake ObjectStore (the standalone manifest store, with conflicts
// injected) and the server-side apply body it sends to an API server.
#include "devlet/dra_kubelet/claim_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/codec.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr char kDriver[] = "gpu.devlet.test";
constexpr const char* kUid = testing::kTwoDriverClaimUid;

// ConflictingStore fails the first `conflicts` UpdateStatus calls with Aborted (409 Conflict).
class ConflictingStore final : public kube::ObjectStore {
 public:
  ConflictingStore(kube::ObjectStore& inner, int conflicts) : inner_(inner), left_(conflicts) {}
  absl::StatusOr<kube::Object> Get(kube::Kind kind, const kube::ObjectKey& key) override {
    return inner_.Get(kind, key);
  }
  absl::StatusOr<std::vector<kube::Object>> List(kube::Kind kind,
                                                 const kube::ListOptions& options) override {
    return inner_.List(kind, options);
  }
  absl::StatusOr<kube::Object> Create(const kube::Object& object) override {
    return inner_.Create(object);
  }
  absl::StatusOr<kube::Object> Update(const kube::Object& object) override {
    return inner_.Update(object);
  }
  absl::StatusOr<kube::Object> UpdateStatus(const kube::Object& object) override {
    ++updates;
    if (left_-- > 0) return absl::AbortedError("conflict (injected)");
    return inner_.UpdateStatus(object);
  }
  absl::Status Delete(kube::Kind kind, const kube::ObjectKey& key,
                      const std::string& uid) override {
    return inner_.Delete(kind, key, uid);
  }
  absl::StatusOr<std::unique_ptr<kube::Watcher>> Watch(kube::Kind kind,
                                                     const kube::ListOptions& options,
                                                     kube::WatchCallback callback) override {
    return inner_.Watch(kind, options, std::move(callback));
  }
  std::atomic<int> updates{0};

 private:
  kube::ObjectStore& inner_;
  std::atomic<int> left_;
};

class ClaimStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, kube::ManifestStore::Open({.dir = dir_.path()}));
    ASSERT_OK_AND_ASSIGN(kube::ResourceClaim claim, kube::DecodeOne<kube::ResourceClaim>(
                                                        testing::TwoDriverClaimYaml("gpu-0")));
    ASSERT_THAT(store_->Create(claim).status(), IsOk());
  }

  kube::ResourceClaim Read() {
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(*store_, "default", "c");
    EXPECT_THAT(claim.status(), IsOk());
    return claim.ok() ? *claim : kube::ResourceClaim{};
  }

  static DeviceStatus Gpu0() {
    DeviceStatus status;
    status.pool = "node-1";
    status.device = "gpu-0";
    status.conditions.push_back({"Ready", "True", "Prepared", "ok", 1767225600});
    status.data = R"({"uuid":"gpu-1234"})";
    status.network_data = NetworkData{"net1", {"10.0.0.5/24", "fd00::5/64"}, "aa:bb:cc:dd:ee:ff"};
    return status;
  }

  TempDir dir_;
  std::unique_ptr<kube::ManifestStore> store_;
};

TEST_F(ClaimStatusTest, WritesOurEntryAndKeepsOtherDrivers) {
  KubeClaimStatusWriter writer(*store_, kDriver);
  EXPECT_FALSE(writer.UsesServerSideApply());
  ASSERT_THAT(writer.SetDeviceStatus({"default", "c", kUid}, {Gpu0()}), IsOk());
  kube::ResourceClaim claim = Read();
  ASSERT_EQ(claim.status.devices.size(), 2u);
  EXPECT_EQ(claim.status.devices[0].driver, "nic.other.test");
  const kube::AllocatedDeviceStatus& ours = claim.status.devices[1];
  EXPECT_EQ(ours.driver, kDriver);
  EXPECT_EQ(ours.device, "gpu-0");
  ASSERT_EQ(ours.conditions.size(), 1u);
  EXPECT_EQ(ours.conditions[0].type, "Ready");
  EXPECT_EQ(ours.conditions[0].last_transition_time, "2026-01-01T00:00:00Z");
  EXPECT_EQ(nlohmann::json::parse(ours.data.json)["uuid"], "gpu-1234");
  ASSERT_TRUE(ours.network_data.has_value());
  EXPECT_EQ(ours.network_data->interface_name, "net1");
  EXPECT_EQ(ours.network_data->ips.size(), 2u);

  // Cleared on unprepare: ours gone, the other driver's entry untouched.
  ASSERT_THAT(writer.SetDeviceStatus({"default", "c", kUid}, {}), IsOk());
  claim = Read();
  ASSERT_EQ(claim.status.devices.size(), 1u);
  EXPECT_EQ(claim.status.devices[0].driver, "nic.other.test");
  EXPECT_EQ(claim.status.devices[0].conditions[0].reason, "Up");
}

TEST_F(ClaimStatusTest, KeepsTransitionTimeWhenStatusUnchanged) {
  KubeClaimStatusWriter writer(*store_, kDriver);
  ASSERT_THAT(writer.SetDeviceStatus({"default", "c", kUid}, {Gpu0()}), IsOk());
  DeviceStatus again = Gpu0();
  again.conditions[0].last_transition_unix = 1800000000;
  ASSERT_THAT(writer.SetDeviceStatus({"default", "c", kUid}, {again}), IsOk());
  EXPECT_EQ(Read().status.devices[1].conditions[0].last_transition_time, "2026-01-01T00:00:00Z");
}

TEST_F(ClaimStatusTest, RetriesConflicts) {
  ConflictingStore conflicting(*store_, 2);
  KubeClaimStatusWriter writer(conflicting, kDriver);
  ASSERT_THAT(writer.SetDeviceStatus({"default", "c", kUid}, {Gpu0()}), IsOk());
  EXPECT_EQ(conflicting.updates.load(), 3);
  EXPECT_EQ(Read().status.devices.size(), 2u);

  ConflictingStore hopeless(*store_, 100);
  KubeClaimStatusWriter failing(hopeless, kDriver);
  EXPECT_THAT(failing.SetDeviceStatus({"default", "c", kUid}, {}),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("ResourceClaim default/c")));
}

TEST_F(ClaimStatusTest, RefusesWrongUidUnallocatedDeviceAndMissingClaim) {
  KubeClaimStatusWriter writer(*store_, kDriver);
  EXPECT_THAT(writer.SetDeviceStatus({"default", "c", "other-uid"}, {Gpu0()}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("re-created")));
  DeviceStatus foreign = Gpu0();
  foreign.device = "gpu-7";
  EXPECT_THAT(writer.SetDeviceStatus({"default", "c", kUid}, {foreign}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not in the allocation")));
  EXPECT_THAT(writer.SetDeviceStatus({"default", "gone", kUid}, {}),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Read().status.devices.size(), 1u);  // Nothing half-written.
}

TEST(ClaimStatusValidation, RejectsWhatTheApiServerWould) {
  DeviceStatus ok;
  ok.pool = "p";
  ok.device = "d";
  EXPECT_THAT(ValidateDeviceStatus(ok), IsOk());

  DeviceStatus bad_ip = ok;
  bad_ip.network_data = NetworkData{"eth0", {"10.0.0.5"}, ""};
  EXPECT_THAT(ValidateDeviceStatus(bad_ip),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("CIDR")));
  DeviceStatus many_ips = ok;
  many_ips.network_data = NetworkData{};
  for (int i = 0; i < 17; ++i) many_ips.network_data->ips.push_back("10.0.0." + std::to_string(i) + "/32");
  EXPECT_THAT(ValidateDeviceStatus(many_ips), StatusIs(absl::StatusCode::kInvalidArgument));
  DeviceStatus long_name = ok;
  long_name.network_data = NetworkData{std::string(257, 'x'), {}, ""};
  EXPECT_THAT(ValidateDeviceStatus(long_name), StatusIs(absl::StatusCode::kInvalidArgument));
  DeviceStatus data_array = ok;
  data_array.data = "[1]";
  EXPECT_THAT(ValidateDeviceStatus(data_array),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("JSON object")));
  DeviceStatus big = ok;
  big.data = "{\"x\":\"" + std::string(11 * 1024, 'a') + "\"}";
  EXPECT_THAT(ValidateDeviceStatus(big), StatusIs(absl::StatusCode::kInvalidArgument));
  DeviceStatus conditions = ok;
  for (int i = 0; i < 9; ++i) conditions.conditions.push_back({"T" + std::to_string(i), "True", "R", "", 0});
  EXPECT_THAT(ValidateDeviceStatus(conditions), StatusIs(absl::StatusCode::kInvalidArgument));
  DeviceStatus duplicate = ok;
  duplicate.conditions = {{"Ready", "True", "R", "", 0}, {"Ready", "False", "R", "", 0}};
  EXPECT_THAT(ValidateDeviceStatus(duplicate),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
  DeviceStatus no_reason = ok;
  no_reason.conditions = {{"Ready", "Maybe", "R", "", 0}};
  EXPECT_THAT(ValidateDeviceStatus(no_reason), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ClaimStatusApply, BodyNamesOnlyOurEntriesWithUidPrecondition) {
  DeviceStatus status;
  status.pool = "node-1";
  status.device = "gpu-0";
  status.share_id = "s1";
  status.conditions.push_back({"Ready", "True", "Prepared", "", 1767225600});
  nlohmann::json body = nlohmann::json::parse(
      DeviceStatusApplyConfiguration(kDriver, {"default", "c", kUid}, {status}));
  EXPECT_EQ(body["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(body["kind"], "ResourceClaim");
  EXPECT_EQ(body["metadata"]["uid"], kUid);
  ASSERT_EQ(body["status"]["devices"].size(), 1u);
  const nlohmann::json& entry = body["status"]["devices"][0];
  EXPECT_EQ(entry["driver"], kDriver);
  EXPECT_EQ(entry["shareID"], "s1");
  EXPECT_EQ(entry["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
  EXPECT_FALSE(body["status"].contains("allocation"));
  // Clearing sends no entries at all: server-side apply then drops the ones we owned.
  nlohmann::json cleared =
      nlohmann::json::parse(DeviceStatusApplyConfiguration(kDriver, {"default", "c", kUid}, {}));
  EXPECT_TRUE(cleared["status"].is_object());
  EXPECT_FALSE(cleared["status"].contains("devices"));
}

TEST(ClaimStatusReady, OneReadyEntryPerPreparedDevice) {
  ClaimRecord record;
  record.claim = {"default", "c", kUid};
  PreparedDeviceRecord gpu;
  gpu.pool = "node-1";
  gpu.device = "gpu-0";
  PreparedDeviceRecord nic;
  nic.pool = "node-1";
  nic.device = "eth1";
  nic.prepared.network_data = NetworkData{"net1", {"10.1.0.2/16"}, "02:00:00:00:00:01"};
  record.devices = {gpu, nic};
  std::vector<DeviceStatus> statuses = ReadyDeviceStatuses(record, 42);
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].conditions[0].type, "Ready");
  EXPECT_EQ(statuses[0].conditions[0].status, "True");
  EXPECT_FALSE(statuses[0].network_data.has_value());
  ASSERT_TRUE(statuses[1].network_data.has_value());
  EXPECT_EQ(statuses[1].network_data->interface_name, "net1");
}

}  // namespace
}  // namespace devlet::dra_kubelet
