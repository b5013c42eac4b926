#include "devlet/dra_kubelet/devlet_adapters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "devlet/cdi/spec_dir.h"
#include "devlet/cdi/testing/forwarding_file_system.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/dra_kubelet/plugin.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/dra_kubelet/testing/local.h"
#include "test_util.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::dra_kubelet::testing::SimulatedBackend;
using ::devlet::testing::IsOk;
using testing::TempDir;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kClaimsYaml[] = R"(apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, uid: pod-1}
spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: gpu-a
  namespace: default
  uid: 0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61
  annotations: {resource.kubernetes.io/pod-claim-name: gpus}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.devlet.test}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.devlet.test, pool: node-1, device: gpu-0}
      config:
      - source: FromClass
        opaque:
          driver: gpu.devlet.test
          parameters: {apiVersion: devlet.io/v1alpha1, kind: DeviceConfig, env: {A: "1"}}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  reservedFor:
  - {resource: pods, name: p, uid: pod-1}
)";

// KEP-5729: reservedFor may name PodGroups; they are kept apart from pods, and a prepared
// claim's record keeps them in state/ for the NRI side.
TEST(DevletAdapters, PodGroupReservationsAreKeptApartFromPods) {
  kube::ResourceClaim in;
  in.metadata.name = "shared";
  in.metadata.namespace_ = "train";
  in.metadata.uid = "claim-uid";
  in.status.reserved_for = {{"scheduling.k8s.io", "podgroups", "job", "group-uid"},
                            {"", "pods", "p", "pod-uid"}};
  ResourceClaim claim = ResourceClaimFromKube(in);
  EXPECT_THAT(claim.reserved_for_pod_groups, ElementsAre("group-uid"));
  EXPECT_THAT(claim.reserved_for_uids, ElementsAre("pod-uid"));

  TempDir dir;
  std::unique_ptr<StateClaimRecordStore> store =
      testing::OpenCheckpoint(dir.path(), "gpu.devlet.test", dir.path() + "/cdi");
  ClaimRecord record;
  record.claim = claim.Ref();
  record.state = ClaimState::kPrepareCompleted;
  record.pod_group_uids = {"group-uid"};
  ASSERT_OK(store->Put(record));
  ASSERT_OK_AND_ASSIGN(std::optional<state::PreparedClaim> stored,
                       store->store().FindClaim("claim-uid"));
  ASSERT_TRUE(stored.has_value());
  EXPECT_THAT(stored->pod_group_uids, ElementsAre("group-uid"));
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> back, store->Get("claim-uid"));
  ASSERT_TRUE(back.has_value());
  EXPECT_THAT(back->pod_group_uids, ElementsAre("group-uid"));
}

TEST(DevletAdapters, PrepareAndUnprepareOnKubeCdiAndState) {
  TempDir dir;
  const std::string manifests = dir.path() + "/manifests";
  const std::string cdi_root = dir.path() + "/cdi";
  const std::string data = dir.path() + "/data";
  std::filesystem::create_directories(manifests);
  testing::WriteFile(manifests + "/claims.yaml", kClaimsYaml);

  ManifestClaimSource claims(manifests);
  ASSERT_OK_AND_ASSIGN(ResourceClaim claim,
                       claims.GetClaim("default", "gpu-a", "0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61"));
  EXPECT_TRUE(claim.allocated);
  EXPECT_THAT(claim.allocation_node_names, ElementsAre("node-1"));
  EXPECT_THAT(claim.reserved_for_uids, ElementsAre("pod-1"));
  ASSERT_EQ(claim.config.size(), 1u);
  EXPECT_EQ(claim.config[0].source, ConfigSource::kFromClass);
  EXPECT_FALSE(claims.GetClaim("default", "nope", "").ok());

  SimulatedBackend backend("node-1", SimulatedBackend::Gpus(2));
  CdiSpecWriter cdi(cdi_root);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StateClaimRecordStore> checkpoint,
                       StateClaimRecordStore::Open(data, "gpu.devlet.test", cdi_root));
  PreparerOptions options;
  options.driver_name = "gpu.devlet.test";
  options.node_name = "node-1";
  options.plugin_data_dir = data;
  options.enable_device_metadata = true;
  ClaimPreparer preparer(options, claims, backend, cdi, *checkpoint);

  PrepareResult result = preparer.Prepare({claim.Ref()})[claim.uid];
  ASSERT_THAT(result.error, IsEmpty());
  ASSERT_EQ(result.devices.size(), 1u);

  // The state/ view the NRI plugin reads.
  ASSERT_OK_AND_ASSIGN(std::vector<state::PreparedClaim> by_pod,
                       checkpoint->store().FindByPod("pod-1"));
  ASSERT_EQ(by_pod.size(), 1u);
  const state::PreparedClaim& prepared = by_pod[0];
  EXPECT_EQ(prepared.state, state::ClaimState::kPrepareCompleted);
  ASSERT_EQ(prepared.devices.size(), 1u);
  EXPECT_EQ(prepared.devices[0].driver, "gpu.devlet.test");
  EXPECT_EQ(prepared.devices[0].attributes.at("resource.kubernetes.io/pciBusID"), "0000:10:00.0");
  EXPECT_EQ(prepared.devices[0].attributes.at("index"), "0");
  EXPECT_EQ(prepared.devices[0].cdi_device_ids, result.devices[0].cdi_device_ids);
  EXPECT_THAT(prepared.files,
              Contains(cdi_root + "/k8s.gpu.devlet.test-claim_" + claim.uid + ".json"));
  EXPECT_THAT(prepared.applied_config, HasSubstr(R"("A":"1")"));

  // What we wrote loads and resolves in the cdi/ registry (the reference library's rules).
  cdi::Registry registry = cdi::Registry::Load({cdi_root});
  EXPECT_THAT(registry.errors(), IsEmpty());
  absl::StatusOr<cdi::ContainerEdits> edits = registry.Resolve(result.devices[0].cdi_device_ids);
  ASSERT_THAT(edits, IsOk());
  EXPECT_THAT(edits->env, Contains("A=1"));
  ASSERT_EQ(edits->mounts.size(), 1u);
  EXPECT_EQ(edits->mounts[0].container_path,
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpus/gpu/"
            "gpu.devlet.test-metadata.json");

  // Idempotent, regenerates a lost spec, then unprepare from the checkpoint alone.
  std::filesystem::remove_all(cdi_root);
  EXPECT_EQ(preparer.Prepare({claim.Ref()})[claim.uid].devices, result.devices);
  EXPECT_TRUE(std::filesystem::exists(cdi_root + "/k8s.gpu.devlet.test-claim_" + claim.uid + ".json"));
  std::filesystem::remove(manifests + "/claims.yaml");
  EXPECT_THAT(preparer.Unprepare({claim.Ref()})[claim.uid], IsEmpty());
  EXPECT_TRUE(std::filesystem::is_empty(cdi_root));
  ASSERT_OK_AND_ASSIGN(state::Checkpoint all, checkpoint->store().Load());
  EXPECT_THAT(all.claims, IsEmpty());
  EXPECT_THAT(backend.PreparedDevices(), IsEmpty());
}

// List and Get see what the checkpoint holds now, whoever wrote it (another store object stands
// for a rolling-update twin), though decoded records are reused between calls.
TEST(DevletAdapters, StateCheckpointStoreListsWhatIsStoredNow) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StateClaimRecordStore> mine,
                       StateClaimRecordStore::Open(data, "gpu.devlet.test", "/cdi"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StateClaimRecordStore> twin,
                       StateClaimRecordStore::Open(data, "gpu.devlet.test", "/cdi"));
  auto record = [](const std::string& uid, std::int64_t generation) {
    ClaimRecord r;
    r.claim = {"default", "claim-" + uid, uid};
    r.state = ClaimState::kPrepareCompleted;
    r.pod_uids = {"pod-" + uid};
    PreparedDeviceRecord device;
    device.requests = {"gpu"};
    device.pool = "node-1";
    device.device = "gpu-" + uid;
    r.devices.push_back(device);
    r.metadata_generation = generation;
    return r;
  };
  auto generations = [](const std::vector<ClaimRecord>& records) {
    std::vector<std::string> out;
    for (const ClaimRecord& r : records) {
      out.push_back(r.claim.uid + ":" + std::to_string(r.metadata_generation));
    }
    return out;
  };
  ASSERT_OK(mine->Commit({record("a", 1), record("b", 1)}, {}));
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimRecord> listed, mine->List());
  EXPECT_THAT(generations(listed), ElementsAre("a:1", "b:1"));

  ASSERT_OK(twin->Commit({record("a", 2)}, {"b"}));
  ASSERT_OK_AND_ASSIGN(listed, mine->List());
  EXPECT_THAT(generations(listed), ElementsAre("a:2"));
  ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> a, mine->Get("a"));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->metadata_generation, 2);
  EXPECT_THAT(a->pod_uids, ElementsAre("pod-a"));

  // b again, as it was: decoded again, not remembered from before its removal.
  ASSERT_OK(twin->Commit({record("b", 1)}, {}));
  ASSERT_OK_AND_ASSIGN(listed, mine->List());
  EXPECT_THAT(generations(listed), ElementsAre("a:2", "b:1"));

  // A record we cannot decode is an error, not a stale copy.
  ASSERT_OK(twin->store().Update([](state::Checkpoint& c) {
    c.claims.at("a").annotations[StateClaimRecordStore::kRecordAnnotation] = "{not json";
    return absl::OkStatus();
  }));
  EXPECT_THAT(mine->List().status(),
              ::devlet::testing::StatusIs(absl::StatusCode::kDataLoss,
                                          HasSubstr("malformed plugin record")));
  ASSERT_OK(twin->Commit({}, {"a", "b"}));
  EXPECT_THAT(mine->List(), ::devlet::testing::IsOkAndHolds(IsEmpty()));
}

// SyncCountingFs counts flushes to stable storage (fsync, fdatasync, directory fsync).
class SyncCountingFs final : public cdi::testing::ForwardingFileSystem {
 public:
  absl::Status Sync(int fd, const std::string& path) override {
    ++syncs;
    return ForwardingFileSystem::Sync(fd, path);
  }
  absl::Status SyncDir(const std::string& dir) override {
    ++syncs;
    return ForwardingFileSystem::SyncDir(dir);
  }
  absl::Status DataSync(int fd, const std::string& path) override {
    ++syncs;
    return ForwardingFileSystem::DataSync(fd, path);
  }
  std::atomic<int> syncs{0};
};

// ProbeBackend notes how many flushes the checkpoint made before the first device is prepared
// and answers PreparedStateSurvivesReboot as told.
class ProbeBackend final : public DeviceBackend {
 public:
  ProbeBackend(DeviceBackend& inner, const SyncCountingFs& fs, bool survives)
      : inner_(inner), fs_(fs), survives_(survives) {}
  absl::StatusOr<PreparedDevice> Prepare(const DevicePrepareRequest& request) override {
    syncs_at_prepare = fs_.syncs.load();
    return inner_.Prepare(request);
  }
  absl::Status Unprepare(const DeviceUnprepareRequest& request) override {
    return inner_.Unprepare(request);
  }
  bool PreparedStateSurvivesReboot() const override { return survives_; }
  int syncs_at_prepare = -1;

 private:
  DeviceBackend& inner_;
  const SyncCountingFs& fs_;
  bool survives_;
};

// On the state/ journal: a backend whose device state survives a reboot gets PrepareStarted
// flushed before its Prepare; a volatile one does not wait for a flush, and the record is still
// there for another reader (a restarted process) at once.
TEST(DevletAdapters, PrepareStartedIsFlushedFirstOnlyForPersistentDeviceState) {
  for (bool survives : {true, false}) {
    SCOPED_TRACE(survives ? "persistent backend" : "volatile backend");
    TempDir dir;
    const std::string manifests = dir.path() + "/manifests";
    const std::string cdi_root = dir.path() + "/cdi";
    const std::string data = dir.path() + "/data";
    std::filesystem::create_directories(manifests);
    testing::WriteFile(manifests + "/claims.yaml", kClaimsYaml);
    ManifestClaimSource claims(manifests);
    SimulatedBackend simulated("node-1", SimulatedBackend::Gpus(2));
    SyncCountingFs fs;
    ProbeBackend backend(simulated, fs, survives);
    CdiSpecWriter cdi(cdi_root);
    state::StoreOptions store_options;
    store_options.dir = data;
    store_options.fs = &fs;
    store_options.background_compaction = false;  // No flush by a timer in between.
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<StateClaimRecordStore> checkpoint,
                         StateClaimRecordStore::Open(store_options, "gpu.devlet.test", cdi_root));
    PreparerOptions options;
    options.driver_name = "gpu.devlet.test";
    options.node_name = "node-1";
    options.plugin_data_dir = data;
    ClaimPreparer preparer(options, claims, backend, cdi, *checkpoint);
    const ClaimRef ref{"default", "gpu-a", "0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61"};

    const int before = fs.syncs.load();
    ASSERT_THAT(preparer.Prepare({ref})[ref.uid].error, IsEmpty());
    if (survives) {
      EXPECT_GT(backend.syncs_at_prepare, before);
    } else {
      EXPECT_EQ(backend.syncs_at_prepare, before);
    }
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<StateClaimRecordStore> reopened,
                         StateClaimRecordStore::Open(data, "gpu.devlet.test", cdi_root));
    ASSERT_OK_AND_ASSIGN(std::optional<ClaimRecord> record, reopened->Get(ref.uid));
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->state, ClaimState::kPrepareCompleted);

    // Unprepare's removal is flushed before it returns in both cases.
    const int before_unprepare = fs.syncs.load();
    EXPECT_THAT(preparer.Unprepare({ref})[ref.uid], IsEmpty());
    EXPECT_GT(fs.syncs.load(), before_unprepare);
  }
}

// Starting the plugin removes the per-claim files of a claim whose record a power cut lost
// (here removed from the checkpoint behind the preparer's back) and keeps the recorded claim's
// files and everything that is not provably ours.
TEST(DevletAdapters, PluginStartRemovesFilesNoRecordReferences) {
  TempDir dir;
  const std::string manifests = dir.path() + "/manifests";
  const std::string cdi_root = dir.path() + "/cdi";
  const std::string data = dir.path() + "/data";
  std::filesystem::create_directories(manifests);
  testing::WriteFile(manifests + "/claims.yaml", kClaimsYaml);
  ManifestClaimSource claims(manifests);
  SimulatedBackend backend("node-1", SimulatedBackend::Gpus(2));
  CdiSpecWriter cdi(cdi_root);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StateClaimRecordStore> checkpoint,
                       StateClaimRecordStore::Open(data, "gpu.devlet.test", cdi_root));
  PreparerOptions options;
  options.driver_name = "gpu.devlet.test";
  options.node_name = "node-1";
  options.plugin_data_dir = data;
  options.enable_device_metadata = true;
  ClaimPreparer preparer(options, claims, backend, cdi, *checkpoint);
  const ClaimRef ref{"default", "gpu-a", "0a5c2f0e-3b1d-4a8e-9c6f-1e2d3c4b5a61"};
  ASSERT_THAT(preparer.Prepare({ref})[ref.uid].error, IsEmpty());
  const std::string kept_spec = cdi_root + "/k8s.gpu.devlet.test-claim_" + ref.uid + ".json";
  const std::string kept_meta = data + "/dra-device-metadata/default_gpu-a/gpu/metadata.json";
  ASSERT_TRUE(std::filesystem::exists(kept_spec));
  ASSERT_TRUE(std::filesystem::exists(kept_meta));

  // A second claim prepared before the power cut; its record did not survive.
  const std::string lost_uid = "1b6d3f1f-4c2e-4b9f-8d70-2f3e4d5c6b72";
  const std::vector<std::string> orphans = {
      cdi_root + "/k8s.gpu.devlet.test-claim_" + lost_uid + ".json",
      cdi_root + "/gpu.devlet.test_metadata_" + lost_uid + "_gpu.json",
      data + "/dra-device-metadata/default_gpu-b/gpu/metadata.json",
  };
  const std::vector<std::string> foreign = {
      cdi_root + "/k8s.nic.example.com-claim_" + lost_uid + ".json",
      cdi_root + "/nvidia.json",
      data + "/dra-device-metadata/default_gpu-b/readme.txt",
  };
  for (const std::string& path : orphans) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    testing::WriteFile(path, "{}");
  }
  for (const std::string& path : foreign) testing::WriteFile(path, "{}");

  PluginOptions plugin_options;
  plugin_options.driver_name = "gpu.devlet.test";
  plugin_options.registrar_dir = dir.path() + "/registry";
  plugin_options.plugin_data_dir = dir.path() + "/plugins";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeletPlugin> plugin,
                       KubeletPlugin::Start(plugin_options, preparer, nullptr));
  for (const std::string& path : orphans) EXPECT_FALSE(std::filesystem::exists(path)) << path;
  EXPECT_FALSE(std::filesystem::exists(data + "/dra-device-metadata/default_gpu-b/gpu"));
  for (const std::string& path : foreign) EXPECT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_TRUE(std::filesystem::exists(kept_spec));
  EXPECT_TRUE(std::filesystem::exists(kept_meta));
  plugin->Stop();
}

}  // namespace
}  // namespace devlet::dra_kubelet
