#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "devlet/common/log.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::kube {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::devlet::testing::StatusIs;

class ManifestStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("manifest-store-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    ASSERT_OK_AND_ASSIGN(store_, ManifestStore::Open({.dir = dir_.string(),
                                                      .poll_interval = std::chrono::milliseconds(20)}));
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }

  fs::path dir_;
  std::unique_ptr<ManifestStore> store_;
};

constexpr char kClasses[] = R"(apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.devlet.io}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.devlet.io"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: train, namespace: ml}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.devlet.io}
)";

TEST_F(ManifestStoreTest, ReadsYamlAndJsonFilesAndSkipsBrokenOnes) {
  Write("classes.yaml", kClasses);
  Write("pod.json", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"pod-uid"},
                      "spec":{"nodeName":"node-1","containers":[{"name":"c"}]}})");
  Write("broken.yaml", "kind: ResourceClaim\nmetadata: [");
  Write("notes.txt", "not a manifest");
  Write(".hidden.yaml", kClasses);

  ASSERT_OK_AND_ASSIGN(std::vector<DeviceClass> classes, ListAs<DeviceClass>(*store_));
  ASSERT_THAT(classes, SizeIs(1));
  EXPECT_EQ(classes[0].metadata.name, "gpu.devlet.io");
  EXPECT_FALSE(classes[0].metadata.uid.empty());
  EXPECT_FALSE(classes[0].metadata.resource_version.empty());

  ASSERT_OK_AND_ASSIGN(ResourceClaim claim, GetAs<ResourceClaim>(*store_, "ml", "train"));
  EXPECT_EQ(claim.spec.devices.requests.size(), 1u);
  // A UID derived for a hand-written object is stable across reads.
  ASSERT_OK_AND_ASSIGN(ResourceClaim again, GetAs<ResourceClaim>(*store_, "ml", "train"));
  EXPECT_EQ(claim.metadata.uid, again.metadata.uid);

  ASSERT_OK_AND_ASSIGN(Pod pod, GetAs<Pod>(*store_, "", "p"));
  EXPECT_EQ(pod.metadata.namespace_, "default");
  EXPECT_EQ(pod.metadata.uid, "pod-uid");

  EXPECT_THAT(GetAs<ResourceClaim>(*store_, "ml", "nope"), StatusIs(absl::StatusCode::kNotFound));
  std::vector<std::string> errors = store_->errors();
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_THAT(errors[0], HasSubstr("broken.yaml"));
}

// Issue 14 §0.1: objects the API server would refuse never leave the store (their names become
// file paths on the node); Get says why, errors() lists them, each is logged once naming the
// file, and Create refuses them.
TEST_F(ManifestStoreTest, RefusesObjectsTheApiServerWouldRefuse) {
  std::vector<std::string> logged;
  std::mutex logged_mu;
  log::SetSinkForTest([&](std::string_view record) {
    std::lock_guard<std::mutex> lock(logged_mu);
    logged.emplace_back(record);
  });
  Write("hostile.yaml", R"(apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ../../../../tmp/x, namespace: x}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.devlet.io}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ok, namespace: x}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.devlet.io}}]}}
)");
  Write("nul.json", R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
    "metadata":{"name":"a\u0000b","namespace":"x"},
    "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"c"}}]}}})");
  absl::StatusOr<ResourceClaim> hostile = GetAs<ResourceClaim>(*store_, "x", "../../../../tmp/x");
  EXPECT_THAT(hostile, StatusIs(absl::StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("hostile.yaml"), HasSubstr("metadata.name"))));
  absl::StatusOr<ResourceClaim> nul = GetAs<ResourceClaim>(*store_, "x", std::string("a\0b", 3));
  EXPECT_THAT(nul, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(R"("x/a\x00b")")));
  EXPECT_EQ(nul.status().message().find('\0'), std::string_view::npos);
  ASSERT_OK_AND_ASSIGN(std::vector<ResourceClaim> claims, ListAs<ResourceClaim>(*store_));
  ASSERT_THAT(claims, SizeIs(1));
  EXPECT_EQ(claims[0].metadata.name, "ok");
  EXPECT_THAT(store_->errors(), SizeIs(2));
  ASSERT_OK(store_->List(Kind::kResourceClaim, {}).status());  // again: no new log lines
  log::SetSinkForTest(nullptr);
  int hostile_lines = 0;
  for (const std::string& record : logged) {
    EXPECT_EQ(record.find('\0'), std::string::npos);
    if (record.find("hostile.yaml") != std::string::npos) {
      EXPECT_THAT(record, HasSubstr("Skipping manifest content"));
      ++hostile_lines;
    }
  }
  EXPECT_EQ(hostile_lines, 1);

  ResourceClaim created;
  created.metadata.name = "../escape";
  created.metadata.namespace_ = "x";
  EXPECT_THAT(store_->Create(created), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("metadata.name")));
  EXPECT_FALSE(fs::exists(dir_.parent_path() / "escape.json"));
}

ResourceSlice Slice(const std::string& name, const std::string& node) {
  ResourceSlice slice;
  slice.metadata.name = name;
  slice.spec.driver = "gpu.devlet.io";
  slice.spec.node_name = node;
  slice.spec.pool = {.name = node, .generation = 1, .resource_slice_count = 1};
  Device device;
  device.name = "gpu-0";
  slice.spec.devices.push_back(device);
  return slice;
}

TEST_F(ManifestStoreTest, CreateUpdateDeleteOwnFiles) {
  ASSERT_OK_AND_ASSIGN(Object created, store_->Create(Slice("node-1-gpu-0", "node-1")));
  EXPECT_TRUE(fs::exists(dir_ / "resourceslice-node-1-gpu-0.json"));
  EXPECT_THAT(store_->Create(Slice("node-1-gpu-0", "node-1")),
              StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK(store_->Create(Slice("node-2-gpu-0", "node-2")).status());

  ASSERT_OK_AND_ASSIGN(std::vector<ResourceSlice> mine,
                       ListAs<ResourceSlice>(*store_, {.field_node_name = "node-1"}));
  ASSERT_THAT(mine, SizeIs(1));
  EXPECT_EQ(mine[0].metadata.resource_version, MetadataOf(created).resource_version);

  ResourceSlice changed = mine[0];
  changed.spec.pool.generation = 2;
  ASSERT_OK_AND_ASSIGN(Object updated, store_->Update(changed));
  EXPECT_NE(MetadataOf(updated).resource_version, MetadataOf(created).resource_version);
  // A stale resourceVersion is a conflict.
  EXPECT_THAT(store_->Update(changed), StatusIs(absl::StatusCode::kAborted));
  ASSERT_OK_AND_ASSIGN(ResourceSlice read, GetAs<ResourceSlice>(*store_, "", "node-1-gpu-0"));
  EXPECT_EQ(read.spec.pool.generation, 2);

  EXPECT_THAT(store_->Delete(Kind::kResourceSlice, {"", "node-1-gpu-0"}, "wrong-uid"),
              StatusIs(absl::StatusCode::kAborted));
  ASSERT_OK(store_->Delete(Kind::kResourceSlice, {"", "node-1-gpu-0"}, read.metadata.uid));
  EXPECT_FALSE(fs::exists(dir_ / "resourceslice-node-1-gpu-0.json"));
  EXPECT_THAT(store_->Delete(Kind::kResourceSlice, {"", "node-1-gpu-0"}),
              StatusIs(absl::StatusCode::kNotFound));
  // No temp files are left behind.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
  }
}

TEST_F(ManifestStoreTest, SharedFilesAreReadOnlyAndStatusUpdatesKeepSpec) {
  Write("classes.yaml", kClasses);
  ASSERT_OK_AND_ASSIGN(ResourceClaim claim, GetAs<ResourceClaim>(*store_, "ml", "train"));
  claim.status.allocation.emplace();
  EXPECT_THAT(store_->UpdateStatus(claim), StatusIs(absl::StatusCode::kFailedPrecondition));

  ResourceClaim own;
  own.metadata.name = "solo";
  own.metadata.namespace_ = "ml";
  own.spec = claim.spec;
  ASSERT_OK(store_->Create(own).status());
  own.spec.devices.requests.clear();  // ignored by UpdateStatus
  own.status.allocation.emplace();  // reservedFor without an allocation is refused
  own.status.allocation->devices.results.push_back(
      {.request = "gpu", .driver = "gpu.devlet.io", .pool = "node-1", .device = "gpu-0"});
  own.status.reserved_for.push_back({.resource = "pods", .name = "p", .uid = "pod-uid"});
  ASSERT_OK(store_->UpdateStatus(own).status());
  ASSERT_OK_AND_ASSIGN(ResourceClaim read, GetAs<ResourceClaim>(*store_, "ml", "solo"));
  EXPECT_EQ(read.spec.devices.requests.size(), 1u);
  ASSERT_THAT(read.status.reserved_for, SizeIs(1));
  EXPECT_EQ(read.status.reserved_for[0].uid, "pod-uid");
}

TEST_F(ManifestStoreTest, WatchReportsAddsChangesAndDeletes) {
  std::mutex mu;
  std::vector<std::string> events;
  auto seen = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  };
  ASSERT_OK(store_->Create(Slice("a", "node-1")).status());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Watcher> watch,
                       store_->Watch(Kind::kResourceSlice, {.field_node_name = "node-1"},
                                     [&](const WatchEvent& event) {
                                       std::lock_guard<std::mutex> lock(mu);
                                       events.push_back(std::string(WatchEventTypeName(event.type)) +
                                                        " " + MetadataOf(event.object).name);
                                     }));
  auto wait_for = [&](size_t n) {
    for (int i = 0; i < 500 && seen().size() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  // The current state arrives before Watch returns: a write made next cannot be overtaken by it.
  EXPECT_THAT(seen(), ElementsAre("ADDED a"));
  ASSERT_OK(store_->Create(Slice("b", "node-2")).status());  // filtered out
  ASSERT_OK_AND_ASSIGN(ResourceSlice a, GetAs<ResourceSlice>(*store_, "", "a"));
  a.spec.pool.generation = 5;
  ASSERT_OK(store_->Update(a).status());
  wait_for(2);
  ASSERT_OK(store_->Delete(Kind::kResourceSlice, {"", "a"}));
  wait_for(3);
  watch->Stop();
  EXPECT_THAT(seen(), ElementsAre("ADDED a", "MODIFIED a", "DELETED a"));
}

}  // namespace
}  // namespace devlet::kube

namespace devlet::kube {
namespace {

// Files are decoded again only when they changed; every kind of change is still seen at once.
class ManifestCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("manifest-cache-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_OK_AND_ASSIGN(store_, ManifestStore::Open({.dir = dir_.string()}));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Class writes a DeviceClass whose selector expression is `expression` (same length each time).
  void Class(const std::string& expression) {
    std::ofstream(dir_ / "class.yaml", std::ios::trunc)
        << "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c}\n"
           "spec:\n  selectors:\n  - cel: {expression: '" << expression << "'}\n";
  }
  // Age sets the file's mtime 10 s into the past (a settled file, eligible for the cache).
  void Age() {
    const fs::path file = dir_ / "class.yaml";
    fs::last_write_time(file, fs::last_write_time(file) - std::chrono::seconds(10));
  }
  std::string Expression() {
    absl::StatusOr<Object> object = store_->Get(Kind::kDeviceClass, {"", "c"});
    if (!object.ok()) return "error: " + std::string(object.status().message());
    return std::get<DeviceClass>(*object).spec.selectors.at(0).cel->expression;
  }

  fs::path dir_;
  std::unique_ptr<ManifestStore> store_;
};

TEST_F(ManifestCacheTest, InPlaceEditsOfTheSameSizeAreSeen) {
  Class("1 == 1");
  EXPECT_EQ(Expression(), "1 == 1");
  Class("2 == 2");  // Same size, same second: decoded again (racy-recent rule).
  EXPECT_EQ(Expression(), "2 == 2");
  Age();
  EXPECT_EQ(Expression(), "2 == 2");  // Settled: served from the cache from now on.
  EXPECT_EQ(Expression(), "2 == 2");
  // Same size, and the old mtime put back: the ctime still tells.
  const auto mtime = fs::last_write_time(dir_ / "class.yaml");
  Class("3 == 3");
  fs::last_write_time(dir_ / "class.yaml", mtime);
  EXPECT_EQ(Expression(), "3 == 3");
  // Replaced by rename (editors, atomic writers): a new inode.
  Age();
  EXPECT_EQ(Expression(), "3 == 3");
  std::ofstream(dir_ / "tmp.txt")
      << "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c}\n"
         "spec:\n  selectors:\n  - cel: {expression: '4 == 4'}\n";
  fs::rename(dir_ / "tmp.txt", dir_ / "class.yaml");
  EXPECT_EQ(Expression(), "4 == 4");
  fs::remove(dir_ / "class.yaml");
  EXPECT_THAT(store_->Get(Kind::kDeviceClass, {"", "c"}),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace devlet::kube
