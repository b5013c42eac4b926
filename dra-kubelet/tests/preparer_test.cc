#include "devlet/dra_kubelet/preparer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/testing/local.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::dra_kubelet::testing::SimulatedBackend;
using ::devlet::testing::IsOk;
using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using testing::FakeClaimSource;
using testing::OpenCheckpoint;
using testing::ReadFile;
using testing::TempDir;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kDriver[] = "gpu.devlet.test";
constexpr char kPool[] = "node-1";

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

ResourceClaim Claim(const std::string& name, const std::string& uid,
                    std::vector<std::pair<std::string, std::string>> request_devices) {
  ResourceClaim claim;
  claim.namespace_name = "default";
  claim.name = name;
  claim.uid = uid;
  claim.allocated = true;
  claim.allocation_node_names = {kPool};
  for (auto& [request, device] : request_devices) {
    claim.results.push_back({request, kDriver, kPool, device, std::nullopt, false});
  }
  return claim;
}

class PreparerTest : public ::testing::Test {
 protected:
  PreparerTest()
      : backend_(kPool, SimulatedBackend::Gpus(4)),
        cdi_(dir_.path() + "/cdi"),
        store_(OpenCheckpoint(dir_.path() + "/data", kDriver, dir_.path() + "/cdi")),
        checkpoint_(*store_) {
    options_.driver_name = kDriver;
    options_.node_name = kPool;
    options_.plugin_data_dir = dir_.path() + "/data";
    options_.enable_device_metadata = true;
    preparer_ = std::make_unique<ClaimPreparer>(options_, claims_, backend_, cdi_, checkpoint_);
  }

  std::string CdiPath(const std::string& name) { return dir_.path() + "/cdi/" + name; }
  std::string ClaimSpec(const std::string& uid) {
    return CdiPath("k8s.gpu.devlet.test-claim_" + uid + ".json");
  }
  std::string MetadataFile(const std::string& claim, const std::string& request) {
    return dir_.path() + "/data/dra-device-metadata/default_" + claim + "/" + request +
           "/metadata.json";
  }

  PrepareResult PrepareOne(const ResourceClaim& claim) {
    return preparer_->Prepare({claim.Ref()})[claim.uid];
  }

  TempDir dir_;
  FakeClaimSource claims_;
  SimulatedBackend backend_;
  CdiSpecWriter cdi_;
  std::unique_ptr<StateClaimRecordStore> store_;
  StateClaimRecordStore& checkpoint_;
  PreparerOptions options_;
  std::unique_ptr<ClaimPreparer> preparer_;
};

// An upgrade: the claim's CDI spec as an older devlet wrote it (no container marker) is rewritten
// at start-up, before the kubelet calls, so that a container restarted later gets the marker.
TEST_F(PreparerTest, RefreshFilesRewritesSpecsOfAnOlderDevlet) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  const std::string current = ReadFile(ClaimSpec("uid-a"));
  ASSERT_THAT(current, ::testing::HasSubstr("DEVLET_CLAIM_UID_A_0="));
  nlohmann::json old = nlohmann::json::parse(current);
  old["devices"][0]["containerEdits"]["env"] = nlohmann::json::array({"X=1"});
  testing::WriteFile(ClaimSpec("uid-a"), old.dump());
  ASSERT_THAT(preparer_->RefreshFiles(), IsOk());
  EXPECT_EQ(ReadFile(ClaimSpec("uid-a")), current);
  ASSERT_THAT(preparer_->RefreshFiles(), IsOk());  // nothing to do
  EXPECT_EQ(ReadFile(ClaimSpec("uid-a")), current);
}

// What the NRI plugin will give a container is recorded with the claim: each device's merged
// edits of its CDI devices (its own, with the container marker; the request's metadata mount on
// the request's first device) and the CPU/memory its allocation consumed.
TEST_F(PreparerTest, RecordsEachDevicesContainerEditsAndConsumedCapacity) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}, {"gpu", "gpu-1"}});
  claim.results[0].cpu_millis = 1500;
  claim.results[0].memory_bytes = 1 << 30;
  claims_.Add(claim);
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, checkpoint_.Get("uid-a"));
  ASSERT_TRUE(record.has_value());
  ASSERT_EQ(record->devices.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const PreparedDeviceRecord& device = record->devices[i];
    ASSERT_TRUE(device.container_edits.has_value());
    EXPECT_THAT(device.container_edits->env, ::testing::Contains(::testing::StartsWith(
                                                 "DEVLET_CLAIM_UID_A_" + std::to_string(i) + "=")));
    EXPECT_EQ(device.container_edits->device_nodes.size(),
              device.prepared.edits.device_nodes.size());
    // The metadata file of request "gpu" is mounted with its first device only.
    EXPECT_EQ(device.container_edits->mounts.size(), i == 0 ? 1u : 0u);
  }
  EXPECT_EQ(record->devices[0].container_edits->mounts[0].host_path, MetadataFile("a", "gpu"));
  EXPECT_EQ(record->devices[0].cpu_millis, 1500);
  EXPECT_EQ(record->devices[0].memory_bytes, 1 << 30);
  EXPECT_FALSE(record->devices[1].cpu_millis.has_value());
}

// A record without them (an older devlet's) is upgraded at start; one that has them is left alone.
TEST_F(PreparerTest, RefreshFilesRecordsEditsOfAnOlderDevletsRecord) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, checkpoint_.Get("uid-a"));
  const cdi::ContainerEdits want = *record->devices[0].container_edits;
  record->devices[0].container_edits.reset();
  ASSERT_THAT(checkpoint_.Put(*record), IsOk());
  ASSERT_THAT(preparer_->RefreshFiles(), IsOk());
  ASSERT_OK_AND_ASSIGN(record, checkpoint_.Get("uid-a"));
  ASSERT_TRUE(record->devices[0].container_edits.has_value());
  EXPECT_EQ(*record->devices[0].container_edits, want);
}

TEST_F(PreparerTest, PreparesDevicesAndWritesFiles) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}, {"pair/large", "gpu-1"}});
  claim.results.push_back({"nic", "other.example.com", kPool, "eth0", std::nullopt, false});
  claim.results[1].share_id = "s1";
  claim.config.push_back({ConfigSource::kFromClass, {}, kDriver,
                          R"({"apiVersion":"devlet.io/v1alpha1","kind":"DeviceConfig","env":{"X":"1"}})"});
  claims_.Add(claim);

  PrepareResult result = PrepareOne(claim);
  ASSERT_THAT(result.error, IsEmpty());
  ASSERT_EQ(result.devices.size(), 2u);
  EXPECT_EQ(result.devices[0],
            (PreparedClaimDevice{{"gpu"}, kPool, "gpu-0",
                                 {"k8s.gpu.devlet.test/claim=uid-a-gpu-0",
                                  "gpu.devlet.test/metadata=uid-a_gpu"},
                                 std::nullopt}));
  EXPECT_EQ(result.devices[1],
            (PreparedClaimDevice{{"pair"}, kPool, "gpu-1",
                                 {"k8s.gpu.devlet.test/claim=uid-a-gpu-1-s1",
                                  "gpu.devlet.test/metadata=uid-a_pair"},
                                 "s1"}));

  nlohmann::json spec = nlohmann::json::parse(ReadFile(ClaimSpec("uid-a")));
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["kind"], "k8s.gpu.devlet.test/claim");
  EXPECT_EQ(spec["devices"][0]["name"], "uid-a-gpu-0");
  // The device's own edits, then its container marker (state/container_marker.h): only the
  // containers the kubelet gives this CDI device get it.
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"],
            nlohmann::json::array({"DEVLET_DEVICE_GPU_0=node-1/gpu-0", "X=1",
                                   "DEVLET_CLAIM_UID_A_0=claim=uid-a request=gpu device=" +
                                       std::string(kPool) + "/gpu-0"}));
  EXPECT_THAT(spec["devices"][1]["containerEdits"]["env"].dump(),
              ::testing::HasSubstr("DEVLET_CLAIM_UID_A_1=claim=uid-a request=pair/large device=" +
                                   std::string(kPool) + "/gpu-1 share=s1"));

  // KEP-5304: a stream of v1beta1 then v1alpha1 objects, and a CDI spec mounting it.
  std::string stream = ReadFile(MetadataFile("a", "pair"));
  auto newline = stream.find('\n');
  ASSERT_NE(newline, std::string::npos);
  nlohmann::json first = nlohmann::json::parse(stream.substr(0, newline));
  nlohmann::json second = nlohmann::json::parse(stream.substr(newline + 1));
  EXPECT_EQ(first["apiVersion"], "metadata.resource.k8s.io/v1beta1");
  EXPECT_EQ(second["apiVersion"], "metadata.resource.k8s.io/v1alpha1");
  EXPECT_EQ(first["metadata"]["generation"], 1);
  EXPECT_EQ(first["requests"][0]["name"], "pair/large");
  EXPECT_EQ(first["requests"][0]["devices"][0]["attributes"]["resource.kubernetes.io/pciBusID"]
                 ["string"],
            "0000:11:00.0");
  nlohmann::json mspec =
      nlohmann::json::parse(ReadFile(CdiPath("gpu.devlet.test_metadata_uid-a_pair.json")));
  EXPECT_EQ(mspec["kind"], "gpu.devlet.test/metadata");
  EXPECT_EQ(mspec["devices"][0]["containerEdits"]["mounts"][0]["containerPath"],
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/a/pair/"
            "gpu.devlet.test-metadata.json");

  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, checkpoint_.Get("uid-a"));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(backend_.PreparedDevices().size(), 2u);
}

TEST_F(PreparerTest, RepeatedPrepareIsIdempotentAndRegeneratesLostFiles) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claim.annotations[std::string(kPodClaimNameAnnotation)] = "gpus";
  claims_.Add(claim);
  PrepareResult first = PrepareOne(claim);
  ASSERT_THAT(first.error, IsEmpty());
  const std::int64_t calls = backend_.PrepareCalls();
  std::string spec_before = ReadFile(ClaimSpec("uid-a"));
  std::string metadata_before = ReadFile(MetadataFile("a", "gpu"));
  EXPECT_THAT(metadata_before, HasSubstr(R"("podClaimName":"gpus")"));

  PrepareResult again = PrepareOne(claim);
  EXPECT_EQ(again.devices, first.devices);
  EXPECT_EQ(backend_.PrepareCalls(), calls);

  // A node reboot empties /var/run/cdi.
  std::filesystem::remove_all(dir_.path() + "/cdi");
  std::filesystem::remove(MetadataFile("a", "gpu"));
  PrepareResult after_reboot = PrepareOne(claim);
  EXPECT_EQ(after_reboot.devices, first.devices);
  EXPECT_EQ(ReadFile(ClaimSpec("uid-a")), spec_before);
  EXPECT_EQ(ReadFile(MetadataFile("a", "gpu")), metadata_before);
  EXPECT_TRUE(Exists(CdiPath("gpu.devlet.test_metadata_uid-a_gpu.json")));
}

// Deferred metadata (KEP-5304): network data learnt at RunPodSandbox rewrites the request's file
// with generation + 1, is kept in the checkpoint (a repeated prepare renders the same file), and
// the files still go with the claim.
TEST_F(PreparerTest, NetworkDataUpdatesTheMetadataFileFromTheRecord) {
  ResourceClaim claim = Claim("a", "uid-a", {{"nic", "gpu-0"}, {"gpu", "gpu-1"}});
  claims_.Add(claim);
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  auto first_object = [&](const std::string& request) {
    std::string stream = ReadFile(MetadataFile("a", request));
    return nlohmann::json::parse(stream.substr(0, stream.find('\n')));
  };
  EXPECT_FALSE(first_object("nic")["requests"][0]["devices"][0].contains("networkData"));
  const std::string spec_before = ReadFile(ClaimSpec("uid-a"));

  NetworkData net{"ens1f0np0", {"10.244.1.7/32", "fd00::7/128"}, "b8:3f:d2:0a:00:10"};
  ASSERT_OK(preparer_->UpdateNetworkData("uid-a", {{kPool, "gpu-0", std::nullopt, net}}));
  nlohmann::json object = first_object("nic");
  EXPECT_EQ(object["metadata"]["generation"], 2);
  EXPECT_EQ(object["requests"][0]["devices"][0]["networkData"],
            nlohmann::json::parse(R"({"interfaceName":"ens1f0np0",
                                      "ips":["10.244.1.7/32","fd00::7/128"],
                                      "hardwareAddress":"b8:3f:d2:0a:00:10"})"));
  // Both API versions of the stream carry it.
  std::string stream = ReadFile(MetadataFile("a", "nic"));
  EXPECT_EQ(nlohmann::json::parse(stream.substr(stream.find('\n') + 1))["requests"][0]["devices"][0]
                ["networkData"]["interfaceName"],
            "ens1f0np0");
  EXPECT_FALSE(first_object("gpu")["requests"][0]["devices"][0].contains("networkData"));
  EXPECT_EQ(ReadFile(ClaimSpec("uid-a")), spec_before);

  // The same data again changes nothing (no new generation).
  const std::string updated = ReadFile(MetadataFile("a", "nic"));
  ASSERT_OK(preparer_->UpdateNetworkData("uid-a", {{kPool, "gpu-0", std::nullopt, net}}));
  EXPECT_EQ(ReadFile(MetadataFile("a", "nic")), updated);

  // A reboot loses the file: the repeated prepare renders it from the record, network data and
  // generation included.
  std::filesystem::remove(MetadataFile("a", "nic"));
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  EXPECT_EQ(ReadFile(MetadataFile("a", "nic")), updated);

  EXPECT_THAT(preparer_->UpdateNetworkData("uid-a", {{kPool, "gpu-9", std::nullopt, net}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no prepared device node-1/gpu-9")));
  EXPECT_THAT(preparer_->UpdateNetworkData("uid-x", {}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("uid-x")));

  EXPECT_THAT(preparer_->Unprepare({claim.Ref()})["uid-a"], IsEmpty());
  EXPECT_FALSE(Exists(dir_.path() + "/data/dra-device-metadata/default_a"));
  EXPECT_THAT(preparer_->UpdateNetworkData("uid-a", {{kPool, "gpu-0", std::nullopt, net}}),
              StatusIs(absl::StatusCode::kNotFound));
}

// The CDI writer may skip fsync: a power loss can leave a spec empty, or a file stale. A repeated
// prepare compares every file with what the record renders and rewrites what differs.
TEST_F(PreparerTest, RepeatedPrepareRepairsEmptyAndStaleFiles) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  const std::string spec = ReadFile(ClaimSpec("uid-a"));
  const std::string metadata = ReadFile(MetadataFile("a", "gpu"));
  testing::WriteFile(ClaimSpec("uid-a"), "");
  testing::WriteFile(MetadataFile("a", "gpu"), metadata.substr(0, metadata.size() / 2));
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  EXPECT_EQ(ReadFile(ClaimSpec("uid-a")), spec);
  EXPECT_EQ(ReadFile(MetadataFile("a", "gpu")), metadata);
}

// CountingStore counts Commit calls and can hold the first one until released, or fail one.
class CountingStore final : public ClaimRecordStore {
 public:
  explicit CountingStore(ClaimRecordStore& inner) : inner_(inner) {}
  absl::StatusOr<std::optional<ClaimRecord>> Get(const std::string& uid) override {
    return inner_.Get(uid);
  }
  absl::Status Put(const ClaimRecord& record) override { return inner_.Put(record); }
  absl::Status Delete(const std::string& uid) override { return inner_.Delete(uid); }
  absl::StatusOr<std::vector<ClaimRecord>> List() override { return inner_.List(); }
  absl::Status Commit(const std::vector<ClaimRecord>& puts,
                      const std::vector<std::string>& deletes) override {
    const int n = ++commits;
    {
      std::unique_lock lock(mutex_);
      if (n == 1 && hold_first) {
        held = true;
        cv_.notify_all();
        cv_.wait(lock, [this] { return !hold_first; });
      }
    }
    if (n == fail_commit) return absl::ResourceExhaustedError("disk full (injected)");
    return inner_.Commit(puts, deletes);
  }
  absl::Status CommitDeferred(const std::vector<ClaimRecord>& puts,
                              const std::vector<std::string>& deletes) override {
    return Commit(puts, deletes);  // counted (and held or failed) like any commit
  }
  void WaitUntilHeld() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return held; });
  }
  void Release() {
    std::lock_guard lock(mutex_);
    hold_first = false;
    cv_.notify_all();
  }

  std::atomic<int> commits{0};
  bool hold_first = false;
  bool held = false;
  int fail_commit = 0;

 private:
  ClaimRecordStore& inner_;
  std::mutex mutex_;
  std::condition_variable cv_;
};

// Group commit: calls that arrive while a batch runs are queued (PrepareAsync returns at once)
// and prepared together, with one PrepareStarted and one PrepareCompleted write for all of them.
TEST_F(PreparerTest, ConcurrentCallsShareCheckpointWrites) {
  CountingStore store(checkpoint_);
  store.hold_first = true;
  ClaimPreparer preparer(options_, claims_, backend_, cdi_, store);
  for (int i = 0; i < 4; ++i) {
    claims_.Add(Claim("c" + std::to_string(i), "uid-" + std::to_string(i),
                      {{"gpu", "gpu-" + std::to_string(i)}}));
  }
  std::map<std::string, PrepareResult> first;
  std::thread committer([&] { first = preparer.Prepare({{"default", "c0", "uid-0"}}); });
  store.WaitUntilHeld();  // c0's batch is inside its PrepareStarted write.

  std::mutex mutex;
  std::map<std::string, PrepareResult> later;
  for (int i = 1; i < 4; ++i) {
    const std::string uid = "uid-" + std::to_string(i);
    preparer.PrepareAsync({{"default", "c" + std::to_string(i), uid}},
                          [&](std::map<std::string, PrepareResult> results) {
                            std::lock_guard lock(mutex);
                            for (auto& [k, v] : results) later[k] = v;
                          });
  }
  {
    std::lock_guard lock(mutex);
    EXPECT_TRUE(later.empty());  // Queued behind the running batch, not run by the callers.
  }
  store.Release();
  committer.join();
  EXPECT_THAT(first["uid-0"].error, IsEmpty());
  std::lock_guard lock(mutex);
  ASSERT_EQ(later.size(), 3u);
  for (const auto& [uid, result] : later) {
    EXPECT_THAT(result.error, IsEmpty()) << uid;
    ASSERT_EQ(result.devices.size(), 1u) << uid;
  }
  EXPECT_EQ(store.commits.load(), 4);  // 2 for c0's batch, 2 for the other three together.
  EXPECT_EQ(backend_.PreparedDevices().size(), 4u);
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimRecord> records, checkpoint_.List());
  EXPECT_EQ(records.size(), 4u);
  for (const ClaimRecord& record : records) EXPECT_EQ(record.state, ClaimState::kPrepareCompleted);

  // Unprepare of several claims is one write too.
  const int before = store.commits.load();
  auto unprepared = preparer.Unprepare(
      {{"default", "c1", "uid-1"}, {"default", "c2", "uid-2"}, {"default", "c3", "uid-3"}});
  for (const auto& [uid, error] : unprepared) EXPECT_THAT(error, IsEmpty()) << uid;
  EXPECT_EQ(store.commits.load(), before + 1);
}

// UnprepareFails wraps a backend whose Unprepare can be made to fail.
class UnprepareFails final : public DeviceBackend {
 public:
  explicit UnprepareFails(DeviceBackend& inner) : inner_(inner) {}
  absl::StatusOr<PreparedDevice> Prepare(const DevicePrepareRequest& request) override {
    return inner_.Prepare(request);
  }
  absl::Status Unprepare(const DeviceUnprepareRequest& request) override {
    if (fail) return absl::InternalError("device is wedged (injected)");
    return inner_.Unprepare(request);
  }
  bool fail = true;

 private:
  DeviceBackend& inner_;
};

// A prepare that fails and cannot be rolled back keeps its PrepareStarted entry, so the devices
// it left prepared are released by the kubelet's unprepare.
TEST_F(PreparerTest, FailedRollbackKeepsTheRecord) {
  UnprepareFails backend(backend_);
  ClaimPreparer preparer(options_, claims_, backend, cdi_, checkpoint_);
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}, {"gpu2", "gpu-1"}});
  claims_.Add(claim);
  backend_.FailDevice("gpu-1", true);
  EXPECT_THAT(preparer.Prepare({claim.Ref()})["uid-a"].error, HasSubstr("gpu-1"));
  EXPECT_EQ(backend_.PreparedDevices().size(), 1u);  // gpu-0 could not be released
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, checkpoint_.Get("uid-a"));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, ClaimState::kPrepareStarted);
  backend.fail = false;
  EXPECT_THAT(preparer.Unprepare({claim.Ref()})["uid-a"], IsEmpty());
  EXPECT_THAT(backend_.PreparedDevices(), IsEmpty());
  ASSERT_OK_AND_ASSIGN(record, checkpoint_.Get("uid-a"));
  EXPECT_FALSE(record.has_value());
}

TEST_F(PreparerTest, TwoClaimsOfOneBatchNeverShareADevice) {
  ResourceClaim a = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  ResourceClaim b = Claim("b", "uid-b", {{"gpu", "gpu-0"}});
  claims_.Add(a);
  claims_.Add(b);
  std::map<std::string, PrepareResult> results = preparer_->Prepare({a.Ref(), b.Ref()});
  EXPECT_THAT(results["uid-a"].error, IsEmpty());
  EXPECT_THAT(results["uid-b"].error,
              HasSubstr("device node-1/gpu-0 is already prepared for ResourceClaim default/a"));
  EXPECT_EQ(backend_.PreparedDevices().size(), 1u);
}

// A failed PrepareCompleted write undoes the whole batch: nothing stays half-prepared.
TEST_F(PreparerTest, FailedCompletionWriteRollsBackTheBatch) {
  CountingStore store(checkpoint_);
  store.fail_commit = 2;
  ClaimPreparer preparer(options_, claims_, backend_, cdi_, store);
  ResourceClaim a = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  ResourceClaim b = Claim("b", "uid-b", {{"gpu", "gpu-1"}});
  claims_.Add(a);
  claims_.Add(b);
  std::map<std::string, PrepareResult> results = preparer.Prepare({a.Ref(), b.Ref()});
  for (const char* uid : {"uid-a", "uid-b"}) {
    EXPECT_THAT(results[uid].error,
                AllOf(HasSubstr("recording PrepareCompleted"), HasSubstr("disk full"))) << uid;
  }
  EXPECT_THAT(backend_.PreparedDevices(), IsEmpty());
  EXPECT_FALSE(Exists(ClaimSpec("uid-a")));
  EXPECT_FALSE(Exists(ClaimSpec("uid-b")));
  EXPECT_FALSE(Exists(dir_.path() + "/data/dra-device-metadata/default_a"));
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimRecord> records, checkpoint_.List());
  EXPECT_THAT(records, IsEmpty());
  // The next attempt works.
  results = preparer.Prepare({a.Ref(), b.Ref()});
  EXPECT_THAT(results["uid-a"].error, IsEmpty());
  EXPECT_THAT(results["uid-b"].error, IsEmpty());
}

TEST_F(PreparerTest, PerClaimErrorsForAPerson) {
  ResourceClaim good = Claim("good", "uid-good", {{"gpu", "gpu-0"}});
  ResourceClaim unallocated = Claim("unallocated", "uid-u", {});
  unallocated.allocated = false;
  ResourceClaim other_driver = Claim("other-driver", "uid-o", {});
  other_driver.results.push_back({"gpu", "other.example.com", kPool, "x", std::nullopt, false});
  ResourceClaim other_node = Claim("other-node", "uid-n", {{"gpu", "gpu-1"}});
  other_node.allocation_node_names = {"node-2"};
  ResourceClaim unknown_device = Claim("unknown-device", "uid-d", {{"gpu", "gpu-9"}});
  for (const auto& c : {good, unallocated, other_driver, other_node, unknown_device}) claims_.Add(c);

  auto results = preparer_->Prepare({good.Ref(), unallocated.Ref(), other_driver.Ref(),
                                     other_node.Ref(), unknown_device.Ref(),
                                     {"default", "good", "uid-replaced"},
                                     {"default", "missing", "uid-m"},
                                     {"", "", "uid-empty"}});
  ASSERT_EQ(results.size(), 8u);
  EXPECT_THAT(results["uid-good"].error, IsEmpty());
  EXPECT_THAT(results["uid-u"].error, HasSubstr("default/unallocated is not allocated"));
  EXPECT_THAT(results["uid-o"].error, HasSubstr("no devices allocated by driver gpu.devlet.test"));
  EXPECT_THAT(results["uid-n"].error, HasSubstr("allocated to node node-2, not to this node"));
  EXPECT_THAT(results["uid-d"].error, HasSubstr("device node-1/gpu-9 does not exist"));
  EXPECT_THAT(results["uid-replaced"].error, HasSubstr("deleted and re-created"));
  EXPECT_THAT(results["uid-m"].error, HasSubstr("fetching ResourceClaim default/missing"));
  EXPECT_THAT(results["uid-empty"].error, HasSubstr("without namespace, name or UID"));
  for (const auto& [uid, result] : results) {
    if (uid != "uid-good") {
      EXPECT_THAT(result.devices, IsEmpty()) << uid;
    }
  }
  // Nothing half-written for the failed claims.
  EXPECT_FALSE(Exists(ClaimSpec("uid-d")));
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimRecord> all, checkpoint_.List());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].claim.uid, "uid-good");
}

TEST_F(PreparerTest, RefusesADeviceHeldByAnotherClaim) {
  ResourceClaim a = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  ResourceClaim b = Claim("b", "uid-b", {{"gpu", "gpu-0"}});
  claims_.Add(a);
  claims_.Add(b);
  ASSERT_THAT(PrepareOne(a).error, IsEmpty());
  EXPECT_THAT(PrepareOne(b).error,
              HasSubstr("device node-1/gpu-0 is already prepared for ResourceClaim default/a"));
  EXPECT_THAT(preparer_->Unprepare({a.Ref()})["uid-a"], IsEmpty());
  EXPECT_THAT(PrepareOne(b).error, IsEmpty());
}

TEST_F(PreparerTest, BackendFailureRollsBack) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}, {"gpu2", "gpu-1"}});
  claims_.Add(claim);
  backend_.FailDevice("gpu-1", true);
  EXPECT_THAT(PrepareOne(claim).error,
              HasSubstr("preparing device node-1/gpu-1 for request \"gpu2\""));
  EXPECT_THAT(backend_.PreparedDevices(), IsEmpty());
  EXPECT_FALSE(Exists(ClaimSpec("uid-a")));
  EXPECT_FALSE(Exists(dir_.path() + "/data/dra-device-metadata/default_a"));
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, checkpoint_.Get("uid-a"));
  EXPECT_FALSE(record.has_value());

  backend_.FailDevice("gpu-1", false);
  EXPECT_THAT(PrepareOne(claim).error, IsEmpty());
}

TEST_F(PreparerTest, ResumesAfterACrashInsidePrepare) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  // The state a crash after PrepareStarted and the backend call leaves behind.
  ClaimRecord started;
  started.claim = claim.Ref();
  started.state = ClaimState::kPrepareStarted;
  started.devices.push_back({{"gpu"}, kPool, "gpu-0", std::nullopt, false, {}, {}, {}});
  started.cdi_spec_files = {"k8s.gpu.devlet.test-claim_uid-a.json"};
  ASSERT_THAT(checkpoint_.Put(started), IsOk());
  ASSERT_THAT(backend_.Prepare({claim.Ref(), "gpu", kPool, "gpu-0", std::nullopt, false, {}}),
              IsOk());

  PrepareResult result = PrepareOne(claim);
  EXPECT_THAT(result.error, IsEmpty());
  EXPECT_EQ(backend_.PreparedDevices().size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, checkpoint_.Get("uid-a"));
  EXPECT_EQ(record->state, ClaimState::kPrepareCompleted);
}

TEST_F(PreparerTest, UnprepareFromTheCheckpointAlone) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  claims_.Remove("default", "a");  // The claim is gone by the time the kubelet unprepares.

  auto results = preparer_->Unprepare({claim.Ref(), {"default", "never", "uid-never"}});
  EXPECT_THAT(results["uid-a"], IsEmpty());
  EXPECT_THAT(results["uid-never"], IsEmpty());
  EXPECT_THAT(backend_.PreparedDevices(), IsEmpty());
  EXPECT_FALSE(Exists(ClaimSpec("uid-a")));
  EXPECT_FALSE(Exists(CdiPath("gpu.devlet.test_metadata_uid-a_gpu.json")));
  EXPECT_FALSE(Exists(dir_.path() + "/data/dra-device-metadata/default_a"));
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimRecord> all, checkpoint_.List());
  EXPECT_THAT(all, IsEmpty());
  EXPECT_THAT(preparer_->Unprepare({claim.Ref()})["uid-a"], IsEmpty());
}

TEST_F(PreparerTest, CorruptedCheckpointIsAnErrorNotAReset) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  testing::WriteFile(dir_.path() + "/data/checkpoint.json", "{garbage");

  EXPECT_THAT(PrepareOne(claim).error, HasSubstr("corrupted"));
  EXPECT_THAT(preparer_->Unprepare({claim.Ref()})["uid-a"], HasSubstr("corrupted"));
  EXPECT_THAT(checkpoint_.List(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("corrupted")));
  EXPECT_EQ(ReadFile(dir_.path() + "/data/checkpoint.json"), "{garbage");
}

// Issue 13 §2.5: the checkpoint survives a reboot, the simulated devices (kernel state) do not.
// The kubelet's prepare in a new boot prepares the devices again, once, before it answers; in
// the same boot it trusts the record.
TEST_F(PreparerTest, ANewBootPreparesTheDevicesAgainOnce) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  options_.boot_id = "boot-1";
  ClaimPreparer first(options_, claims_, backend_, cdi_, checkpoint_);
  ASSERT_THAT(first.Prepare({claim.Ref()})["uid-a"].error, IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, checkpoint_.Get("uid-a"));
  EXPECT_EQ(record->boot_id, "boot-1");

  SimulatedBackend rebooted(kPool, SimulatedBackend::Gpus(4));
  ClaimPreparer same_boot(options_, claims_, rebooted, cdi_, checkpoint_);
  ASSERT_THAT(same_boot.Prepare({claim.Ref()})["uid-a"].error, IsEmpty());
  EXPECT_EQ(rebooted.PrepareCalls(), 0);

  options_.boot_id = "boot-2";
  ClaimPreparer next_boot(options_, claims_, rebooted, cdi_, checkpoint_);
  PrepareResult result = next_boot.Prepare({claim.Ref()})["uid-a"];
  ASSERT_THAT(result.error, IsEmpty());
  ASSERT_EQ(result.devices.size(), 1u);
  EXPECT_EQ(result.devices[0].device, "gpu-0");
  EXPECT_EQ(rebooted.PrepareCalls(), 1);
  EXPECT_THAT(rebooted.PreparedDevices(), ElementsAre(::testing::Pair("node-1/gpu-0", "uid-a")));
  ASSERT_OK_AND_ASSIGN(record, checkpoint_.Get("uid-a"));
  EXPECT_EQ(record->boot_id, "boot-2");
  EXPECT_TRUE(Exists(ClaimSpec("uid-a")));
  ASSERT_THAT(next_boot.Prepare({claim.Ref()})["uid-a"].error, IsEmpty());
  EXPECT_EQ(rebooted.PrepareCalls(), 1);
}

// A device that cannot be set up again after the reboot fails the kubelet's prepare with the
// claim named (no container starts) and loses nothing: the record of the earlier boot stays, and
// the next prepare tries again.
TEST_F(PreparerTest, ASetUpThatFailsAfterARebootFailsThePrepareAndKeepsTheRecord) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  options_.boot_id = "boot-1";
  ClaimPreparer first(options_, claims_, backend_, cdi_, checkpoint_);
  ASSERT_THAT(first.Prepare({claim.Ref()})["uid-a"].error, IsEmpty());
  const std::string spec = ReadFile(ClaimSpec("uid-a"));

  SimulatedBackend rebooted(kPool, SimulatedBackend::Gpus(4));
  rebooted.FailDevice("gpu-0", true);
  options_.boot_id = "boot-2";
  ClaimPreparer next_boot(options_, claims_, rebooted, cdi_, checkpoint_);
  EXPECT_THAT(next_boot.Prepare({claim.Ref()})["uid-a"].error,
              AllOf(HasSubstr("ResourceClaim default/a"), HasSubstr("gpu-0")));
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, checkpoint_.Get("uid-a"));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(record->boot_id, "boot-1");
  EXPECT_EQ(ReadFile(ClaimSpec("uid-a")), spec);

  rebooted.FailDevice("gpu-0", false);
  ASSERT_THAT(next_boot.Prepare({claim.Ref()})["uid-a"].error, IsEmpty());
  ASSERT_OK_AND_ASSIGN(record, checkpoint_.Get("uid-a"));
  EXPECT_EQ(record->boot_id, "boot-2");
  EXPECT_THAT(next_boot.Unprepare({claim.Ref()})["uid-a"], IsEmpty());
  EXPECT_THAT(rebooted.PreparedDevices(), IsEmpty());
}

TEST_F(PreparerTest, RollingUpdateHoldsTheSerializeLock) {
  options_.serialize_lock_path = dir_.path() + "/data/serialize.lock";
  ClaimPreparer preparer(options_, claims_, backend_, cdi_, checkpoint_);
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  EXPECT_THAT(preparer.Prepare({claim.Ref()})["uid-a"].error, IsEmpty());
  EXPECT_TRUE(Exists(options_.serialize_lock_path));
}

// RecordingStore notes, for every checkpoint write, whether it was deferred and what it held.
class RecordingStore final : public ClaimRecordStore {
 public:
  struct Write {
    bool deferred;
    std::vector<ClaimState> puts;
    std::size_t deletes;
  };
  explicit RecordingStore(ClaimRecordStore& inner) : inner_(inner) {}
  absl::StatusOr<std::optional<ClaimRecord>> Get(const std::string& uid) override {
    return inner_.Get(uid);
  }
  absl::Status Put(const ClaimRecord& record) override { return inner_.Put(record); }
  absl::Status Delete(const std::string& uid) override { return inner_.Delete(uid); }
  absl::StatusOr<std::vector<ClaimRecord>> List() override { return inner_.List(); }
  absl::Status Commit(const std::vector<ClaimRecord>& puts,
                      const std::vector<std::string>& deletes) override {
    Note(false, puts, deletes);
    return inner_.Commit(puts, deletes);
  }
  absl::Status CommitDeferred(const std::vector<ClaimRecord>& puts,
                              const std::vector<std::string>& deletes) override {
    Note(true, puts, deletes);
    return inner_.Commit(puts, deletes);
  }
  std::vector<Write> writes;

 private:
  void Note(bool deferred, const std::vector<ClaimRecord>& puts,
            const std::vector<std::string>& deletes) {
    Write w{deferred, {}, deletes.size()};
    for (const ClaimRecord& r : puts) w.puts.push_back(r.state);
    writes.push_back(std::move(w));
  }
  ClaimRecordStore& inner_;
};

// PersistentBackend is the simulated backend claiming that its device state survives a reboot.
class PersistentBackend final : public DeviceBackend {
 public:
  explicit PersistentBackend(DeviceBackend& inner) : inner_(inner) {}
  absl::StatusOr<PreparedDevice> Prepare(const DevicePrepareRequest& request) override {
    return inner_.Prepare(request);
  }
  absl::Status Unprepare(const DeviceUnprepareRequest& request) override {
    return inner_.Unprepare(request);
  }
  bool PreparedStateSurvivesReboot() const override { return true; }

 private:
  DeviceBackend& inner_;
};

// PrepareStarted skips the sync only when the backend's device state dies with a reboot too;
// removals are always synced.
TEST_F(PreparerTest, PrepareStartedIsDeferredOnlyForVolatileDeviceState) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  EXPECT_FALSE(backend_.PreparedStateSurvivesReboot());
  {
    RecordingStore store(checkpoint_);
    ClaimPreparer preparer(options_, claims_, backend_, cdi_, store);
    ASSERT_THAT(preparer.Prepare({claim.Ref()})["uid-a"].error, IsEmpty());
    ASSERT_THAT(preparer.Unprepare({claim.Ref()})["uid-a"], IsEmpty());
    ASSERT_EQ(store.writes.size(), 3u);
    EXPECT_TRUE(store.writes[0].deferred);
    EXPECT_THAT(store.writes[0].puts, ElementsAre(ClaimState::kPrepareStarted));
    EXPECT_THAT(store.writes[1].puts, ElementsAre(ClaimState::kPrepareCompleted));
    EXPECT_FALSE(store.writes[2].deferred);
    EXPECT_EQ(store.writes[2].deletes, 1u);
  }
  {
    PersistentBackend persistent(backend_);
    RecordingStore store(checkpoint_);
    ClaimPreparer preparer(options_, claims_, persistent, cdi_, store);
    ASSERT_THAT(preparer.Prepare({claim.Ref()})["uid-a"].error, IsEmpty());
    ASSERT_EQ(store.writes.size(), 2u);
    EXPECT_FALSE(store.writes[0].deferred);  // Synced before the device is touched.
    EXPECT_THAT(store.writes[0].puts, ElementsAre(ClaimState::kPrepareStarted));
  }
}

// What a power cut leaves when it loses an unsynced PrepareStarted: files no record names. They
// are removed; the files of recorded claims and anything not provably ours stay.
TEST_F(PreparerTest, RemovesOrphanedFilesOnly) {
  const std::string kept_uid = "0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61";
  const std::string lost_uid = "1b6d3f1f-4c2e-4b9f-8d70-2f3e4d5c6b72";
  ResourceClaim kept = Claim("kept", kept_uid, {{"gpu", "gpu-0"}});
  ResourceClaim lost = Claim("lost", lost_uid, {{"gpu", "gpu-1"}});
  claims_.Add(kept);
  claims_.Add(lost);
  ASSERT_THAT(PrepareOne(kept).error, IsEmpty());
  ASSERT_THAT(PrepareOne(lost).error, IsEmpty());
  ASSERT_THAT(checkpoint_.Delete(lost_uid), IsOk());  // The record the power cut took.
  const std::string lost_meta_spec = CdiPath("gpu.devlet.test_metadata_" + lost_uid + "_gpu.json");
  ASSERT_TRUE(Exists(ClaimSpec(lost_uid)));
  ASSERT_TRUE(Exists(lost_meta_spec));
  ASSERT_TRUE(Exists(MetadataFile("lost", "gpu")));
  const std::vector<std::string> foreign = {
      CdiPath("k8s.other.example.com-claim_" + lost_uid + ".json"),  // another driver
      CdiPath("k8s.gpu.devlet.test-claim_not-a-uid.json"),           // not a claim UID
      CdiPath("gpu.devlet.test_metadata_" + lost_uid + "_a_b.json"),  // not a request name
      CdiPath("vendor.json"),
      dir_.path() + "/data/dra-device-metadata/default_x/gpu/notes.txt",
      dir_.path() + "/data/checkpoint-notes.json",
  };
  for (const std::string& path : foreign) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    testing::WriteFile(path, "{}");
  }

  ASSERT_OK_AND_ASSIGN(int removed, preparer_->RemoveOrphanedFiles());
  EXPECT_EQ(removed, 3);
  EXPECT_FALSE(Exists(ClaimSpec(lost_uid)));
  EXPECT_FALSE(Exists(lost_meta_spec));
  EXPECT_FALSE(Exists(MetadataFile("lost", "gpu")));
  EXPECT_FALSE(Exists(dir_.path() + "/data/dra-device-metadata/default_lost"));
  EXPECT_TRUE(Exists(ClaimSpec(kept_uid)));
  EXPECT_TRUE(Exists(CdiPath("gpu.devlet.test_metadata_" + kept_uid + "_gpu.json")));
  EXPECT_TRUE(Exists(MetadataFile("kept", "gpu")));
  for (const std::string& path : foreign) EXPECT_TRUE(Exists(path)) << path;
  EXPECT_THAT(preparer_->RemoveOrphanedFiles(), IsOkAndHolds(0));
  // The recorded claim is untouched: a repeated prepare finds everything in place.
  EXPECT_THAT(PrepareOne(kept).error, IsEmpty());
}

TEST(StateClaimRecordStore, RoundTripsRecords) {
  TempDir dir;
  std::unique_ptr<StateClaimRecordStore> checkpoint =
      OpenCheckpoint(dir.path(), kDriver, dir.path() + "/cdi");
  StateClaimRecordStore& store = *checkpoint;
  ClaimRecord record;
  record.claim = {"ns", "c", "u"};
  record.state = ClaimState::kPrepareCompleted;
  record.pod_claim_name = "gpus";
  PreparedDeviceRecord device;
  device.requests = {"gpu/large"};
  device.pool = "p";
  device.device = "d";
  device.share_id = "s";
  device.admin_access = true;
  device.config.env = {{"A", "1"}};
  device.config.bind_driver = "vfio-pci";
  device.prepared.edits.env = {"A=1"};
  device.prepared.edits.device_nodes = {{"/dev/x", "/dev/y", "rw"}};
  device.prepared.edits.mounts = {{"/h", "/c", {"ro"}}};
  device.prepared.attributes = {{"i", std::int64_t{3}}, {"b", true}, {"s", std::string("x")},
                                {"v", VersionValue{"1.2.3"}}};
  device.cdi_device_ids = {"k/c=d"};
  record.devices.push_back(device);
  record.cdi_spec_files = {"f.json"};
  record.metadata_files = {"/m"};
  ASSERT_THAT(store.Put(record), IsOk());
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> got, store.Get("u"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->pod_claim_name, "gpus");
  ASSERT_EQ(got->devices.size(), 1u);
  const PreparedDeviceRecord& d = got->devices[0];
  EXPECT_EQ(d.requests, device.requests);
  EXPECT_EQ(d.share_id, "s");
  EXPECT_TRUE(d.admin_access);
  EXPECT_EQ(d.config, device.config);
  EXPECT_EQ(d.prepared.edits, device.prepared.edits);
  EXPECT_EQ(d.prepared.attributes, device.prepared.attributes);
  EXPECT_EQ(d.cdi_device_ids, device.cdi_device_ids);
  EXPECT_EQ(got->cdi_spec_files, record.cdi_spec_files);
  EXPECT_EQ(got->metadata_files, record.metadata_files);
  ASSERT_THAT(store.Delete("u"), IsOk());
  ASSERT_THAT(store.Delete("u"), IsOk());
  ASSERT_OK_AND_ASSIGN(got, store.Get("u"));
  EXPECT_FALSE(got.has_value());
}

// Issue 14 §0.1: names become file paths. Whatever the claim source hands over, a name the API
// server would refuse is refused with the claim named, and nothing is written anywhere.
TEST_F(PreparerTest, RefusesNamesThatWouldEscapeTheDataDirectory) {
  namespace fs = std::filesystem;
  const std::string outside = dir_.path() + "/outside";
  struct Case {
    const char* what;
    ResourceClaim claim;
    const char* message;
  };
  ResourceClaim traversal_name = Claim("../../../../outside/x", "uid-1", {{"gpu", "gpu-0"}});
  ResourceClaim traversal_request = Claim("b", "uid-2", {{"../../../../outside/y", "gpu-0"}});
  ResourceClaim traversal_uid = Claim("c", "../../outside/z", {{"gpu", "gpu-0"}});
  ResourceClaim bad_device = Claim("d", "uid-4", {{"gpu", "gpu-0"}});
  bad_device.results[0].device = "../gpu-0";
  ResourceClaim bad_pool = Claim("e", "uid-5", {{"gpu", "gpu-0"}});
  bad_pool.results[0].pool = "node-1/../..";
  ResourceClaim nul_name = Claim(std::string("f\0g", 3), "uid-6", {{"gpu", "gpu-0"}});
  ResourceClaim bad_pod_claim = Claim("h", "uid-7", {{"gpu", "gpu-0"}});
  bad_pod_claim.annotations["resource.kubernetes.io/pod-claim-name"] = "../../x";
  const Case cases[] = {
      {"name", traversal_name, R"(name "../../../../outside/x" must be a lowercase RFC 1123)"},
      {"request", traversal_request, R"(request "../../../../outside/y" must be a request name)"},
      {"uid", traversal_uid, R"(UID "../../outside/z" must be)"},
      {"device", bad_device, R"(device "../gpu-0" must be a lowercase RFC 1123 label)"},
      {"pool", bad_pool, R"(pool "node-1/../.." must be RFC 1123 subdomains)"},
      {"NUL", nul_name, R"(ResourceClaim "default/f\x00g": name "f\x00g")"},
      {"pod claim", bad_pod_claim, R"(pod claim name (annotation)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    claims_.Add(c.claim);
    PrepareResult result = PrepareOne(c.claim);
    EXPECT_THAT(result.error, AllOf(HasSubstr(c.message), HasSubstr("refuses it")));
    EXPECT_EQ(result.error.find('\0'), std::string::npos);  // escaped, never raw
    EXPECT_THAT(result.devices, IsEmpty());
  }
  EXPECT_FALSE(Exists(outside));
  EXPECT_FALSE(Exists(dir_.path() + "/data/dra-device-metadata"));
  EXPECT_TRUE(!Exists(dir_.path() + "/cdi") || fs::is_empty(dir_.path() + "/cdi"));
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimRecord> records, checkpoint_.List());
  EXPECT_THAT(records, IsEmpty());
  EXPECT_THAT(backend_.PreparedDevices(), IsEmpty());
}

// A checkpoint an older devlet wrote for a hostile claim (the issue's "../../../../tmp/x"): the
// unprepare removes only files of the form devlet writes, never a directory tree, and the
// repeated prepare does not regenerate files from the bad names.
TEST_F(PreparerTest, UnprepareOfAHostileOldRecordDeletesNothingOutside) {
  namespace fs = std::filesystem;
  const std::string root = dir_.path() + "/data/dra-device-metadata";
  // What the old code's "<root>/x_../../../escape" resolved to, holding files devlet never wrote.
  fs::create_directories(root + "/x_..");
  fs::create_directories(dir_.path() + "/escape/gpu");
  testing::WriteFile(dir_.path() + "/escape/gpu/metadata.json", "not devlet's");
  testing::WriteFile(dir_.path() + "/escape/keep.txt", "not devlet's");
  fs::create_directories(dir_.path() + "/cdi");
  testing::WriteFile(dir_.path() + "/victim.json", "not devlet's");
  ClaimRecord record;
  record.claim = {"x", "../../../escape", "uid-old"};
  record.state = ClaimState::kPrepareCompleted;
  PreparedDeviceRecord device;
  device.requests = {"gpu"};
  device.pool = kPool;
  device.device = "gpu-0";
  record.devices.push_back(device);
  record.cdi_spec_files = {"../victim.json"};
  record.metadata_files = {root + "/x_../../../escape/gpu/metadata.json"};
  ASSERT_OK(checkpoint_.Put(record));

  PrepareResult again = preparer_->Prepare({record.claim})["uid-old"];
  EXPECT_THAT(again.error, HasSubstr("refuses it"));
  std::map<std::string, std::string> errors = preparer_->Unprepare({record.claim});
  EXPECT_THAT(errors["uid-old"], IsEmpty());
  EXPECT_EQ(ReadFile(dir_.path() + "/escape/gpu/metadata.json"), "not devlet's");
  EXPECT_EQ(ReadFile(dir_.path() + "/escape/keep.txt"), "not devlet's");
  EXPECT_EQ(ReadFile(dir_.path() + "/victim.json"), "not devlet's");
  EXPECT_THAT(checkpoint_.List(), IsOkAndHolds(IsEmpty()));
}

// Unprepare removes the files it wrote and then only the directories it made, if empty: a file
// someone else put beside them survives (the old code removed the claim's directory recursively).
TEST_F(PreparerTest, UnprepareRemovesOnlyItsOwnFiles) {
  ResourceClaim claim = Claim("a", "uid-a", {{"gpu", "gpu-0"}});
  claims_.Add(claim);
  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  ASSERT_TRUE(Exists(MetadataFile("a", "gpu")));
  const std::string claim_dir = dir_.path() + "/data/dra-device-metadata/default_a";
  testing::WriteFile(claim_dir + "/gpu/other.txt", "kept");
  EXPECT_THAT(preparer_->Unprepare({claim.Ref()})["uid-a"], IsEmpty());
  EXPECT_FALSE(Exists(MetadataFile("a", "gpu")));
  EXPECT_EQ(ReadFile(claim_dir + "/gpu/other.txt"), "kept");
  std::filesystem::remove(claim_dir + "/gpu/other.txt");

  ASSERT_THAT(PrepareOne(claim).error, IsEmpty());
  EXPECT_THAT(preparer_->Unprepare({claim.Ref()})["uid-a"], IsEmpty());
  EXPECT_FALSE(Exists(claim_dir));  // empty directories it made are gone
}

}  // namespace
}  // namespace devlet::dra_kubelet
