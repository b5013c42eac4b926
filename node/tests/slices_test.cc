#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/profile.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/kube/client.h"
#include "devlet/kube/codec.h"
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

// KEP-5517: the CPU devices' mapping is published only with DRANodeAllocatableResources, in the
// API's shape, and the slices still pass the API server's validation.
TEST(BuildResourceSlicesTest, NodeAllocatableResourcesFollowTheGate) {
  auto discoverer = devices::NewDiscoverer(
      {.topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml",
       .use_sysfs = false});
  ASSERT_OK_AND_ASSIGN(devices::Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(devices::ProfileConfig config, devices::ParseProfileConfig(R"(
profiles:
- name: gpu
  kind: gpu
  nodeAllocatableResources: {memory: {overhead: {perPod: 2Gi, perContainer: 256Mi}}}
- name: cpu
  kind: cpu
)"));
  ASSERT_OK_AND_ASSIGN(devices::DeviceSet set, devices::BuildDeviceSet(inventory, config));
  auto find = [](const std::vector<kube::ResourceSlice>& slices, const std::string& name) {
    for (const kube::ResourceSlice& slice : slices) {
      for (const kube::Device& d : slice.spec.devices) {
        if (d.name == name) return d;
      }
    }
    ADD_FAILURE() << name << " not published";
    return kube::Device{};
  };
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> off, BuildResourceSlices(set, kOptions));
  EXPECT_THAT(find(off, "cpu-numa0").node_allocatable_resources, ::testing::IsEmpty());
  EXPECT_THAT(find(off, "gpu-0").node_allocatable_resources, ::testing::IsEmpty());

  SliceOptions options = kOptions;
  ASSERT_OK_AND_ASSIGN(options.features,
                       ParseNodeFeatureGates("DRANodeAllocatableResources=true"));
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> on, BuildResourceSlices(set, options));
  const kube::Device cpu = find(on, "cpu-numa1");
  ASSERT_EQ(cpu.node_allocatable_resources.size(), 2u);
  const kube::NodeAllocatableResource& c = cpu.node_allocatable_resources.at("cpu");
  ASSERT_TRUE(c.mapping.has_value());
  EXPECT_EQ(c.mapping->capacity_key, "cpus");
  EXPECT_EQ(c.mapping->capacity_multiplier->str(), "1");
  EXPECT_FALSE(c.mapping->device_multiplier.has_value());
  EXPECT_FALSE(c.overhead.has_value());
  EXPECT_EQ(cpu.node_allocatable_resources.at("memory").mapping->capacity_key, "memory");
  const kube::Device gpu = find(on, "gpu-5");
  const kube::NodeAllocatableResource& g = gpu.node_allocatable_resources.at("memory");
  EXPECT_FALSE(g.mapping.has_value());
  EXPECT_EQ(g.overhead->per_pod->str(), "2Gi");
  EXPECT_EQ(g.overhead->per_container->str(), "256Mi");
  for (const kube::ResourceSlice& slice : on) EXPECT_OK(kube::Validate(kube::Object(slice)));
  // The encoded slice carries the API's field names.
  const std::string json = kube::EncodeJson(kube::Object(on[0]));
  EXPECT_THAT(json, ::testing::HasSubstr(
                        R"("nodeAllocatableResources":{"cpu":{"mapping":{"capacityKey":"cpus",)"
                        R"("capacityMultiplier":"1"}})"));
}

// DRAListTypeAttributes, DRAPartitionableDevicesType, DRAOptionalNodeOperations: each decides one
// part of the published slices, and the slices pass the API server's validation either way.
TEST(BuildResourceSlicesTest, PublishGatesDecideListsPartitionTypesAndSkippedOperations) {
  devices::testing::FakeSysfs fake;
  ASSERT_OK(devices::testing::AddGpuServer(fake));
  auto discoverer = devices::NewDiscoverer(
      {.sysfs_root = fake.Root(),
       .topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(devices::Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(devices::ProfileConfig config, devices::ParseProfileConfig(R"(
profiles:
- name: part
  kind: gpu
  match: {pciAddresses: ["0000:b9:00.0"]}
  sharing: {mode: partitions, partitions: 4}
- name: gpu
  kind: gpu
  match: {vendorIDs: ["0x10de"]}
- name: shared-nic
  kind: nic
  match: {interfaces: [ens2f0np0]}
  sharing: {mode: consumable, bandwidthShare: 10G}
  skipNodeOperations: true
  attributes: {zones: [a, b], lanes: [1, 2]}
- name: nic
  kind: nic
- name: cpu
  kind: cpu
)"));
  ASSERT_OK_AND_ASSIGN(devices::DeviceSet set, devices::BuildDeviceSet(inventory, config));
  struct Found {
    const kube::ResourceSlice* slice = nullptr;
    const kube::Device* device = nullptr;
  };
  auto find = [](const std::vector<kube::ResourceSlice>& slices, const std::string& name) {
    for (const kube::ResourceSlice& slice : slices) {
      for (const kube::Device& d : slice.spec.devices) {
        if (d.name == name) return Found{&slice, &d};
      }
    }
    ADD_FAILURE() << name << " not published";
    return Found{};
  };

  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> off, BuildResourceSlices(set, kOptions));
  for (const kube::ResourceSlice& slice : off) {
    EXPECT_OK(kube::Validate(kube::Object(slice)));
    EXPECT_FALSE(slice.spec.partition_type_attribute.has_value());
    EXPECT_THAT(slice.spec.skip_node_operations, ::testing::IsEmpty());
  }
  Found nic = find(off, "nic-0");
  ASSERT_NE(nic.device, nullptr);
  EXPECT_FALSE(nic.device->attributes.contains("rdmaDevices"));
  EXPECT_EQ(nic.device->attributes.at("rdmaDevice").string_value, "mlx5_0");
  EXPECT_FALSE(find(off, "shared-nic-0").device->attributes.contains("zones"));
  EXPECT_FALSE(find(off, "part-0-part-1").device->attributes.contains("partitionType"));
  EXPECT_EQ(find(off, "shared-nic-0").slice, nic.slice);  // one slice for all

  SliceOptions options = kOptions;
  ASSERT_OK_AND_ASSIGN(options.features,
                       ParseNodeFeatureGates("DRAListTypeAttributes=true,"
                                             "DRAPartitionableDevicesType=true,"
                                             "DRAOptionalNodeOperations=true"));
  ASSERT_OK_AND_ASSIGN(std::vector<kube::ResourceSlice> on, BuildResourceSlices(set, options));
  for (const kube::ResourceSlice& slice : on) EXPECT_OK(kube::Validate(kube::Object(slice)));
  nic = find(on, "nic-0");
  ASSERT_NE(nic.device, nullptr);
  EXPECT_EQ(nic.device->attributes.at("rdmaDevices").string_values,
            std::vector<std::string>({"mlx5_0"}));
  Found shared = find(on, "shared-nic-0");
  ASSERT_NE(shared.device, nullptr);
  EXPECT_EQ(shared.device->attributes.at("zones").string_values,
            std::vector<std::string>({"a", "b"}));
  EXPECT_EQ(shared.device->attributes.at("lanes").int_values, std::vector<int64_t>({1, 2}));
  // The device that skips node operations is alone in a slice that says so; the others not.
  EXPECT_NE(shared.slice, nic.slice);
  EXPECT_EQ(shared.slice->spec.skip_node_operations, std::vector<std::string>({"*"}));
  EXPECT_THAT(shared.slice->spec.devices, SizeIs(1));
  EXPECT_THAT(nic.slice->spec.skip_node_operations, ::testing::IsEmpty());
  // Partitions: the whole GPU and each partition carry their counter cost; the slice names it.
  Found whole = find(on, "part-0");
  Found quarter = find(on, "part-0-part-3");
  ASSERT_NE(whole.device, nullptr);
  ASSERT_NE(quarter.device, nullptr);
  EXPECT_EQ(whole.device->attributes.at("partitionType").string_value, "memory80Gi-slices4");
  EXPECT_EQ(quarter.device->attributes.at("partitionType").string_value, "memory20Gi-slices1");
  EXPECT_EQ(whole.slice->spec.partition_type_attribute, "gpu.devlet.io/partitionType");
  EXPECT_FALSE(find(on, "gpu-0").device->attributes.contains("partitionType"));
  int with_count = 0;
  for (const kube::ResourceSlice& slice : on) {
    EXPECT_EQ(slice.spec.pool.resource_slice_count, static_cast<std::int64_t>(on.size()));
    ++with_count;
  }
  EXPECT_EQ(with_count, static_cast<int>(off.size()) + 1);
}

TEST(NodeFeatureGatesTest, ParseAndHelp) {
  ASSERT_OK_AND_ASSIGN(PublishFeatures none, ParseNodeFeatureGates(""));
  EXPECT_FALSE(none.node_allocatable_resources);
  ASSERT_OK_AND_ASSIGN(PublishFeatures on,
                       ParseNodeFeatureGates(" DRANodeAllocatableResources=true, "
                                             "DRAWorkloadResourceClaims=true"));
  EXPECT_TRUE(on.node_allocatable_resources);
  EXPECT_THAT(ParseNodeFeatureGates("DRANodeAllocatable=true"),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                        ::testing::HasSubstr("unrecognized feature gate: "
                                                             "DRANodeAllocatable")));
  EXPECT_THAT(ParseNodeFeatureGates("DynamicResourceAllocation=false"),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                        ::testing::HasSubstr("locked to true")));
  EXPECT_THAT(ParseNodeFeatureGates("DRANodeAllocatableResources=yes"),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(NodeFeatureGatesHelp(),
              ::testing::HasSubstr("DRANodeAllocatableResources (alpha): devices publish "
                                   "nodeAllocatableResources"));
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
