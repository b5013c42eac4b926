#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/profile.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/kube/client.h"
#include "devlet/kube/validation.h"
#include "devlet/node/slices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::node {
namespace {

namespace fs = std::filesystem;
using ::testing::SizeIs;

devices::DeviceSet PlainDevices(int n) {
  devices::DeviceSet set;
  for (int i = 0; i < n; ++i) {
    devices::DraDevice d;
    d.name = "dev-" + std::to_string(i);
    d.attributes["type"] = std::string("gpu");
    d.attributes["index"] = static_cast<std::int64_t>(i);
    d.capacities["memory"] = {.value = "80Gi"};
    set.devices.push_back(d);
  }
  return set;
}

const SliceOptions kOptions{.driver = "gpu.devlet.io", .node_name = "node-1"};

TEST(BuildResourceSlicesTest, SplitsAt128PlainDevices) {
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> slices,
                       BuildResourceSlices(PlainDevices(200), kOptions));
  ASSERT_THAT(slices, SizeIs(2));
  EXPECT_THAT(slices[0].spec.devices, SizeIs(128));
  EXPECT_THAT(slices[1].spec.devices, SizeIs(72));
  for (const kube::ResourceSlice& slice : slices) {
    EXPECT_EQ(slice.spec.pool.name, "node-1");
    EXPECT_EQ(slice.spec.pool.resource_slice_count, 2);
    EXPECT_EQ(slice.spec.node_name, "node-1");
    EXPECT_EQ(slice.spec.driver, "gpu.devlet.io");
  }
  EXPECT_EQ(slices[0].metadata.name, "node-1-gpu-devlet-io-0");
}

TEST(BuildResourceSlicesTest, CountersGetTheirOwnSliceAndLowerTheLimit) {
  devices::DeviceSet set = PlainDevices(100);
  set.counter_sets.push_back({.name = "gpu-0-counters", .counters = {{"memory", "80Gi"}}});
  set.devices[70].consumes_counters.push_back(
      {.counter_set = "gpu-0-counters", .counters = {{"memory", "10Gi"}}});
  SliceOptions options = kOptions;
  options.taints["dev-99"] = {{.key = "devlet.io/unhealthy", .value = "", .effect = "NoSchedule"}};
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> slices, BuildResourceSlices(set, options));
  ASSERT_GE(slices.size(), 3u);
  EXPECT_THAT(slices[0].spec.shared_counters, SizeIs(1));
  EXPECT_TRUE(slices[0].spec.devices.empty());
  size_t total = 0;
  for (size_t i = 1; i < slices.size(); ++i) {
    EXPECT_TRUE(slices[i].spec.shared_counters.empty());
    bool advanced = false;
    for (const kube::Device& d : slices[i].spec.devices) advanced |= UsesAdvancedFeatures(d);
    EXPECT_LE(slices[i].spec.devices.size(), advanced ? 64u : 128u) << i;
    total += slices[i].spec.devices.size();
  }
  EXPECT_EQ(total, 100u);
  EXPECT_THAT(slices.back().spec.devices.back().taints, SizeIs(1));
}

TEST(BuildResourceSlicesTest, GpuServerSlicesPassApiValidation) {
  devices::testing::FakeSysfs fake;
  ASSERT_OK(devices::testing::AddGpuServer(fake));
  auto discoverer = devices::NewDiscoverer(
      {.sysfs_root = fake.Root(),
       .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(devices::Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(devices::DeviceSet set,
                       devices::BuildDeviceSet(inventory, devices::DefaultProfileConfig()));
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> slices, BuildResourceSlices(set, kOptions));
  ASSERT_THAT(slices, SizeIs(1));
  EXPECT_GE(slices[0].spec.devices.size(), 10u);  // 8 GPUs, 2 NICs, CPU devices
  for (const kube::ResourceSlice& slice : slices) {
    EXPECT_OK(kube::Validate(kube::Object(slice)));
  }
}

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("node-publisher-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_OK_AND_ASSIGN(store_, kube::ManifestStore::Open({.dir = dir_.string()}));
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::unique_ptr<kube::ManifestStore> store_;
};

TEST_F(PublisherTest, PublishesOnceRepublishesChangesAndRepairsDrift) {
  SlicePublisher publisher(*store_, kOptions);
  ASSERT_OK_AND_ASSIGN(PublishResult first, publisher.Publish(PlainDevices(200)));
  EXPECT_TRUE(first.changed);
  EXPECT_EQ(first.generation, 1);
  EXPECT_EQ(first.created, 2);

  ASSERT_OK_AND_ASSIGN(PublishResult again, publisher.Publish(PlainDevices(200)));
  EXPECT_FALSE(again.changed);
  EXPECT_EQ(again.generation, 1);

  ASSERT_OK_AND_ASSIGN(PublishResult smaller, publisher.Publish(PlainDevices(10)));
  EXPECT_TRUE(smaller.changed);
  EXPECT_EQ(smaller.generation, 2);
  EXPECT_EQ(smaller.updated, 1);
  EXPECT_EQ(smaller.deleted, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> slices,
                       kube::ListAs<kube::ResourceSlice>(*store_));
  ASSERT_THAT(slices, SizeIs(1));
  EXPECT_EQ(slices[0].spec.pool.generation, 2);
  EXPECT_EQ(slices[0].spec.pool.resource_slice_count, 1);

  // Someone deletes our slice: the next publish puts it back under a new generation.
  ASSERT_OK(store_->Delete(kube::Kind::kResourceSlice, {"", slices[0].metadata.name}));
  ASSERT_OK_AND_ASSIGN(PublishResult repaired, publisher.Publish(PlainDevices(10)));
  EXPECT_TRUE(repaired.changed);
  EXPECT_EQ(repaired.created, 1);

  // Other nodes' slices are left alone.
  SlicePublisher other(*store_, {.driver = "gpu.devlet.io", .node_name = "node-2"});
  ASSERT_OK(other.Publish(PlainDevices(3)).status());
  ASSERT_OK_AND_ASSIGN(PublishResult mine, publisher.Publish(PlainDevices(10)));
  EXPECT_FALSE(mine.changed);
}

TEST_F(PublisherTest, OwnerReferenceToTheNode) {
  std::ofstream(dir_ / "node.yaml") << "apiVersion: v1\nkind: Node\nmetadata: {name: node-1, uid: n-uid}\n";
  SlicePublisher publisher(*store_, kOptions);
  ASSERT_OK(publisher.Publish(PlainDevices(1)).status());
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> slices,
                       kube::ListAs<kube::ResourceSlice>(*store_));
  ASSERT_THAT(slices, SizeIs(1));
  ASSERT_THAT(slices[0].metadata.owner_references, SizeIs(1));
  EXPECT_EQ(slices[0].metadata.owner_references[0].uid, "n-uid");
  EXPECT_EQ(slices[0].metadata.owner_references[0].kind, "Node");
}

}  // namespace
}  // namespace devlet::node
