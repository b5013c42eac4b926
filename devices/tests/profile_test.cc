#include "devlet/devices/profile.h"

#include <string>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::devices {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::AddGpuServer;
using testing::FakeSysfs;

const std::string kData = DEVLET_DEVICES_TESTDATA;

Inventory XmlInventory() {
  auto discoverer =
      NewDiscoverer({.topology_xml = kData + "/dgx-2s-8gpu-2nic.xml", .use_sysfs = false});
  auto inventory = discoverer->Discover();
  EXPECT_OK(inventory);
  return *inventory;
}

template <typename T>
T Attr(const DraDevice& device, std::string_view name) {
  auto it = device.attributes.find(std::string(name));
  EXPECT_NE(it, device.attributes.end()) << device.name << " lacks " << name;
  if (it == device.attributes.end()) return T{};
  const T* value = std::get_if<T>(&it->second);
  EXPECT_NE(value, nullptr) << device.name << "." << name << " has another type";
  return value ? *value : T{};
}

TEST(ProfileTest, DefaultProfilesOnGpuServer) {
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(XmlInventory(), DefaultProfileConfig()));
  ASSERT_EQ(set.devices.size(), 8u + 2u + 2u);
  EXPECT_THAT(set.counter_sets, IsEmpty());
  const DraDevice* gpu = set.Find("gpu-0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(Attr<std::string>(*gpu, kAttrPciBusId), "0000:18:00.0");
  EXPECT_EQ(Attr<std::string>(*gpu, kAttrPcieRoot), "pci0000:15");
  EXPECT_EQ(Attr<std::int64_t>(*gpu, kAttrNumaNode), 0);
  EXPECT_EQ(Attr<std::string>(*gpu, "type"), "gpu");
  EXPECT_EQ(Attr<std::string>(*gpu, "vendor"), "nvidia");
  EXPECT_EQ(Attr<std::string>(*gpu, "vendorID"), "0x10de");
  EXPECT_EQ(Attr<std::string>(*gpu, "deviceID"), "0x2330");
  EXPECT_EQ(Attr<std::string>(*gpu, "model"), "H100-SXM5-80GB");
  EXPECT_EQ(gpu->capacities.at("memory").value, "80Gi");
  EXPECT_EQ(gpu->pci_address, "0000:18:00.0");
  EXPECT_EQ(gpu->numa_node, 0);
  EXPECT_EQ(set.Find("gpu-7")->pci_address, "0000:b9:00.0");

  const DraDevice* nic = set.Find("nic-1");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(Attr<std::string>(*nic, "interface"), "ens2f0np0");
  EXPECT_EQ(Attr<std::string>(*nic, "mac"), "b8:3f:d2:0a:01:10");
  EXPECT_TRUE(Attr<bool>(*nic, "rdma"));
  EXPECT_EQ(Attr<std::string>(*nic, "rdmaDevice"), "mlx5_1");

  const DraDevice* cpu = set.Find("cpu-numa1");
  ASSERT_NE(cpu, nullptr);
  EXPECT_TRUE(cpu->allow_multiple_allocations);
  EXPECT_EQ(cpu->capacities.at("cpus").value, "16");
  EXPECT_EQ(cpu->capacities.at("cpus").request_policy->step, "1");
  EXPECT_EQ(cpu->capacities.at("memory").value, "256Gi");
  EXPECT_EQ(Attr<std::int64_t>(*cpu, "package"), 1);
  EXPECT_EQ(Attr<std::int64_t>(*cpu, "cores"), 8);
  EXPECT_TRUE(Attr<bool>(*cpu, "smt"));
  EXPECT_EQ(cpu->pci_address, "");
  // KEP-5517: a CPU device is the node's CPU and memory, one capacity unit each.
  EXPECT_EQ(cpu->node_allocatable.at("cpu"),
            (NodeAllocatable{.capacity_key = "cpus", .capacity_multiplier = "1"}));
  EXPECT_EQ(cpu->node_allocatable.at("memory"),
            (NodeAllocatable{.capacity_key = "memory", .capacity_multiplier = "1"}));
  EXPECT_THAT(gpu->node_allocatable, IsEmpty());
}

TEST(ProfileTest, VendorCdiDevicesExpandPerDevice) {
  ASSERT_OK_AND_ASSIGN(ProfileConfig config, ParseProfileConfig(R"(
profiles:
- name: gpu
  kind: gpu
  cdiDevices: ["nvidia.com/gpu={index}", "example.com/gpu={pciBusID}"]
)"));
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(XmlInventory(), config));
  EXPECT_THAT(set.Find("gpu-3")->preparation.vendor_cdi_devices,
              ElementsAre("nvidia.com/gpu=3", "example.com/gpu=" + set.Find("gpu-3")->pci_address));
  // A placeholder the device has no value for: the XML gives no NVIDIA UUID.
  ASSERT_OK_AND_ASSIGN(config, ParseProfileConfig(
                                   "profiles:\n- name: gpu\n  kind: gpu\n  cdiDevices: "
                                   "[\"nvidia.com/gpu={uuid}\"]\n"));
  EXPECT_THAT(BuildDeviceSet(XmlInventory(), config),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("profile \"gpu\": cdiDevices \"nvidia.com/gpu={uuid}\": device "
                                 "gpu-0 (0000:18:00.0) has no \"uuid\"")));
}

TEST(ProfileTest, NodeAllocatableResourcesFromYaml) {
  ASSERT_OK_AND_ASSIGN(ProfileConfig config, ParseProfileConfig(R"(
profiles:
- name: gpu
  kind: gpu
  nodeAllocatableResources:
    memory: {overhead: {perPod: 2Gi, perContainer: 256Mi}}
- name: cpu
  kind: cpu
  nodeAllocatableResources:
    cpu: {mapping: {capacityKey: cpus, capacityMultiplier: "2"}}
    hugepages-2Mi: {overhead: {perPod: 4Mi}}
)"));
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(XmlInventory(), config));
  const DraDevice* gpu = set.Find("gpu-3");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->node_allocatable.size(), 1u);
  EXPECT_EQ(gpu->node_allocatable.at("memory"),
            (NodeAllocatable{.overhead_per_pod = "2Gi", .overhead_per_container = "256Mi"}));
  const DraDevice* cpu = set.Find("cpu-numa0");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->node_allocatable.at("cpu").capacity_multiplier, "2");  // replaced
  EXPECT_EQ(cpu->node_allocatable.at("memory").capacity_key, "memory");  // default kept
  EXPECT_EQ(cpu->node_allocatable.at("hugepages-2Mi").overhead_per_pod, "4Mi");
  // Published content: the fingerprint sees the mapping.
  DeviceSet changed = set;
  changed.devices[0].node_allocatable.clear();
  EXPECT_NE(DeviceSetFingerprint(changed), DeviceSetFingerprint(set));
}

TEST(ProfileTest, GpuServerProfilesFromYaml) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  auto discoverer =
      NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kData + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(ProfileConfig config, LoadProfileConfig(kData + "/profiles-gpu-server.yaml"));
  ASSERT_EQ(config.profiles.size(), 5u);
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, config));

  // 4 VFs + 1 NIC + 4 whole GPUs + 4 x (1 + 4) partitioned GPUs + 2 CPU devices.
  EXPECT_EQ(set.devices.size(), 4u + 1u + 4u + 20u + 2u);
  ASSERT_EQ(set.counter_sets.size(), 4u);

  const DraDevice* vf = set.Find("vf-0-vf-3");
  ASSERT_NE(vf, nullptr);
  EXPECT_EQ(Attr<std::string>(*vf, "pfPciBusID"), "0000:1a:00.0");
  EXPECT_EQ(Attr<std::string>(*vf, "pfInterface"), "ens1f0np0");
  EXPECT_EQ(Attr<std::int64_t>(*vf, "vfIndex"), 3);
  EXPECT_EQ(Attr<std::string>(*vf, kAttrPcieRoot), "pci0000:15");
  EXPECT_FALSE(vf->attributes.contains(std::string(kAttrPciBusId)));  // not created yet
  EXPECT_EQ(vf->preparation.sriov_pf, "0000:1a:00.0");
  EXPECT_EQ(vf->preparation.sriov_num_vfs, 4);
  EXPECT_TRUE(vf->preparation.bind_vfio);

  const DraDevice* nic = set.Find("nic-0");
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->pci_address, "0000:9c:00.0");
  EXPECT_TRUE(nic->allow_multiple_allocations);
  const Capacity& bandwidth = nic->capacities.at("bandwidth");
  EXPECT_EQ(bandwidth.value, "200G");
  ASSERT_TRUE(bandwidth.request_policy.has_value());
  EXPECT_EQ(bandwidth.request_policy->default_value, "10G");
  EXPECT_EQ(bandwidth.request_policy->step, "10G");
  EXPECT_EQ(Attr<std::int64_t>(*nic, "sriovTotalVFs"), 8);
  EXPECT_EQ(Attr<std::string>(*nic, "driver"), "mlx5_core");

  const DraDevice* gpu = set.Find("gpu-3");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->pci_address, "0000:3a:00.0");
  EXPECT_TRUE(gpu->preparation.bind_vfio);
  ASSERT_TRUE(gpu->preparation.init.has_value());
  EXPECT_THAT(gpu->preparation.init->argv, ElementsAre("/usr/local/sbin/gpu-reset", "--quiet"));
  EXPECT_EQ(gpu->preparation.init->timeout_ms, 20000);
  EXPECT_EQ(gpu->preparation.cleanup->timeout_ms, 30000);
  EXPECT_EQ(Attr<std::string>(*gpu, "tier"), "gold");
  EXPECT_EQ(Attr<std::int64_t>(*gpu, "rack"), 7);
  EXPECT_EQ(Attr<SemVer>(*gpu, "firmware").value, "96.0.94");
  EXPECT_TRUE(Attr<bool>(*gpu, "vfio"));
  EXPECT_FALSE(gpu->attributes.contains("driver"));  // host driver is irrelevant for passthrough
  EXPECT_EQ(Attr<std::int64_t>(*gpu, "iommuGroup"), 13);

  const DraDevice* whole = set.Find("gpu-part-0");
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->pci_address, "0000:9a:00.0");
  ASSERT_EQ(whole->consumes_counters.size(), 1u);
  EXPECT_EQ(whole->consumes_counters[0].counter_set, "gpu-part-0-counters");
  EXPECT_EQ(whole->consumes_counters[0].counters.at("slices"), "4");
  EXPECT_EQ(whole->consumes_counters[0].counters.at("memory"), "80Gi");
  const DraDevice* part = set.Find("gpu-part-0-part-2");
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(Attr<std::string>(*part, "type"), "gpu-partition");
  EXPECT_EQ(Attr<std::int64_t>(*part, "partition"), 2);
  EXPECT_EQ(Attr<std::string>(*part, "parentDevice"), "gpu-part-0");
  EXPECT_EQ(part->consumes_counters[0].counters.at("slices"), "1");
  EXPECT_EQ(part->consumes_counters[0].counters.at("memory"), "20Gi");
  EXPECT_EQ(part->capacities.at("memory").value, "20Gi");
  EXPECT_EQ(set.counter_sets[0].name, "gpu-part-0-counters");
  EXPECT_EQ(set.counter_sets[0].counters.at("memory"), "80Gi");
}

TEST(ProfileTest, RescanReportsNoChangeThenNewVfs) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  auto discoverer =
      NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kData + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(ProfileConfig config, LoadProfileConfig(kData + "/profiles-gpu-server.yaml"));
  Rescanner rescanner(*discoverer, config);
  ASSERT_OK_AND_ASSIGN(RescanResult first, rescanner.Rescan());
  EXPECT_TRUE(first.changed);
  ASSERT_OK_AND_ASSIGN(RescanResult second, rescanner.Rescan());
  EXPECT_FALSE(second.changed) << second.device_diff.ToString();
  EXPECT_TRUE(second.inventory_diff.empty());

  ASSERT_OK(fake.WriteFile("bus/pci/devices/0000:1a:00.0/sriov_numvfs", "4"));
  ASSERT_OK_AND_ASSIGN(RescanResult third, rescanner.Rescan());
  EXPECT_TRUE(third.changed);
  EXPECT_THAT(third.device_diff.changed, ElementsAre("vf-0-vf-0", "vf-0-vf-1", "vf-0-vf-2", "vf-0-vf-3"));
  EXPECT_THAT(third.device_diff.added, IsEmpty());
  const DraDevice* vf = rescanner.devices().Find("vf-0-vf-1");
  ASSERT_NE(vf, nullptr);
  EXPECT_EQ(Attr<std::string>(*vf, kAttrPciBusId), "0000:1a:00.3");
  EXPECT_EQ(vf->pci_address, "0000:1a:00.3");
}

TEST(ProfileTest, NamesStayStableWhenADeviceIsUnplugged) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  auto discoverer =
      NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kData + "/dgx-2s-8gpu-2nic.xml"});
  Rescanner rescanner(*discoverer, DefaultProfileConfig());
  ASSERT_OK(rescanner.Rescan());
  ASSERT_EQ(rescanner.devices().Find("gpu-4")->pci_address, "0000:9a:00.0");
  ASSERT_OK(fake.RemovePciDevice("0000:3a:00.0"));  // gpu-3
  ASSERT_OK_AND_ASSIGN(RescanResult removed, rescanner.Rescan());
  EXPECT_THAT(removed.device_diff.removed, ElementsAre("gpu-3"));
  EXPECT_THAT(removed.device_diff.changed, IsEmpty());  // gpu-4..7 keep their names
  EXPECT_EQ(rescanner.devices().Find("gpu-4")->pci_address, "0000:9a:00.0");
  // The slot is refilled by the next new GPU; another one after that takes gpu-8.
  testing::FakePciDevice gpu{.address = "0000:3a:00.0", .parent = "pci0000:38/0000:38:02.0",
                             .vendor_id = 0x10de, .device_id = 0x2330, .class_code = 0x030200,
                             .driver = "nvidia", .numa_node = 0, .iommu_group = 13};
  ASSERT_OK(fake.AddPciDevice(gpu));
  gpu.address = "0000:3b:00.0";
  gpu.iommu_group = 14;
  ASSERT_OK(fake.AddPciDevice(gpu));
  ASSERT_OK_AND_ASSIGN(RescanResult added, rescanner.Rescan());
  EXPECT_THAT(added.device_diff.added, ElementsAre("gpu-3", "gpu-8"));
  EXPECT_EQ(rescanner.devices().Find("gpu-8")->pci_address, "0000:3b:00.0");
  // Without a previous set the names are positional again.
  ASSERT_OK_AND_ASSIGN(DeviceSet fresh,
                       BuildDeviceSet(rescanner.inventory(), DefaultProfileConfig()));
  EXPECT_EQ(fresh.Find("gpu-4")->pci_address, "0000:3b:00.0");
}

TEST(ProfileTest, VfDevicesFollowAnExistingVfCountAndTheDeviceLimit) {
  FakeSysfs fake;
  ASSERT_OK(AddGpuServer(fake));
  auto discoverer =
      NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kData + "/dgx-2s-8gpu-2nic.xml"});
  ASSERT_OK_AND_ASSIGN(
      ProfileConfig config,
      ParseProfileConfig("profiles:\n- {name: vf, kind: vf, numVFs: 32}\n"));  // PFs allow 8
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, config));
  EXPECT_EQ(set.devices.size(), 16u);
  EXPECT_EQ(set.Find("vf-0-vf-7")->preparation.sriov_num_vfs, 8);
  EXPECT_EQ(set.Find("vf-0-vf-8"), nullptr);
  // Someone created 2 VFs on the first PF: only those two can be handed out there.
  ASSERT_OK(fake.WriteFile("bus/pci/devices/0000:1a:00.0/sriov_numvfs", "2"));
  ASSERT_OK_AND_ASSIGN(inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(set, BuildDeviceSet(inventory, config));
  EXPECT_EQ(set.devices.size(), 2u + 8u);
  EXPECT_EQ(set.Find("vf-0-vf-1")->pci_address, "0000:1a:00.3");
  EXPECT_EQ(set.Find("vf-0-vf-2"), nullptr);
  EXPECT_EQ(set.Find("vf-1-vf-7")->preparation.sriov_num_vfs, 8);
}

TEST(ProfileTest, NicHeavyServerSkipsTheBmcAndNeedsLinkSpeedToShareBandwidth) {
  auto discoverer =
      NewDiscoverer({.topology_xml = kData + "/nic-1s-8port.xml", .use_sysfs = false});
  ASSERT_OK_AND_ASSIGN(Inventory inventory, discoverer->Discover());
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, DefaultProfileConfig()));
  EXPECT_EQ(set.devices.size(), 8u + 1u);  // 8 ports + 1 CPU device; no BMC "GPU"
  EXPECT_EQ(set.Find("gpu-0"), nullptr);
  const DraDevice* cpu = set.Find("cpu-numa0");
  ASSERT_NE(cpu, nullptr);
  EXPECT_FALSE(Attr<bool>(*cpu, "smt"));
  EXPECT_EQ(cpu->capacities.at("cpus").value, "12");
  EXPECT_EQ(Attr<std::string>(*set.Find("nic-7"), kAttrPcieRoot), "pci0000:65");

  ASSERT_OK_AND_ASSIGN(ProfileConfig shared,
                       ParseProfileConfig("profiles:\n- {name: nic, kind: nic, sharing: {mode: consumable}}\n"));
  EXPECT_THAT(BuildDeviceSet(inventory, shared),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("NIC 0000:18:00.0 reports no link speed")));
}

TEST(ProfileTest, VmdDomainDeviceGetsVendorAddressAttributeOnly) {
  Inventory inventory;
  Nic nic;
  nic.pci.address = "10000:e1:00.0";
  nic.pci.vendor_id = 0x8086;
  nic.pci.device_id = 0x1592;
  nic.pci.pcie_root = "pci0000:5d";
  nic.vendor = "intel";
  inventory.nics.push_back(nic);
  ASSERT_OK_AND_ASSIGN(DeviceSet set, BuildDeviceSet(inventory, DefaultProfileConfig()));
  ASSERT_EQ(set.devices.size(), 1u);
  EXPECT_FALSE(set.devices[0].attributes.contains(std::string(kAttrPciBusId)));
  EXPECT_FALSE(set.devices[0].attributes.contains(std::string(kAttrNumaNode)));
  EXPECT_EQ(Attr<std::string>(set.devices[0], "pciAddress"), "10000:e1:00.0");
}

TEST(ProfileTest, ConfigErrorsNameProfileFieldAndLine) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"profiles:\n- name: g\n  kind: gpux\n", "profile \"g\": field kind (line 3): unknown kind \"gpux\""},
      {"profiles:\n- name: g\n  kind: gpu\n  colour: red\n", "field colour (line 4): unknown field"},
      {"profiles:\n- name: g\n  kind: gpu\n  match: {vendorIDs: [nvidia]}\n",
       "\"nvidia\" is not a 16-bit hexadecimal PCI id"},
      {"profiles:\n- name: n\n  kind: nic\n  sharing: {mode: partitions, partitions: 2}\n",
       "partitions are for gpu profiles"},
      {"profiles:\n- name: g\n  kind: gpu\n  init: {command: [reset]}\n",
       "field init.command (line 4): must be a non-empty list starting with an absolute program path"},
      {"profiles:\n- name: v\n  kind: vf\n", "field numVFs (line 2): is required for vf profiles"},
      {"profiles:\n- name: G_1\n  kind: gpu\n", "must be a lowercase DNS label"},
      {"profiles:\n- name: g\n  kind: gpu\n- name: g\n  kind: nic\n", "profile \"g\" is defined twice"},
      {"profiles: [\n", "not valid YAML"},
      {"", "is empty"},
      {"gpus: []\n", "expected a mapping with \"profiles\""},
      {"profiles:\n- name: g\n  kind: gpu\n  nodeAllocatableResources: {nvidia.com/gpu: "
       "{overhead: {perPod: 1}}}\n",
       "field nodeAllocatableResources.nvidia.com/gpu (line 4): is not a node allocatable resource"},
      {"profiles:\n- name: g\n  kind: gpu\n  nodeAllocatableResources: {memory: {}}\n",
       "field nodeAllocatableResources.memory (line 4): needs mapping or overhead"},
      {"profiles:\n- name: g\n  kind: gpu\n  nodeAllocatableResources:\n    memory: "
       "{overhead: {perPod: 2 GiB}}\n",
       "field nodeAllocatableResources.memory.overhead.perPod (line 5): \"2 GiB\" is not a "
       "quantity"},
      {"profiles:\n- name: c\n  kind: cpu\n  nodeAllocatableResources:\n    cpu: {mapping: "
       "{capacityKey: cpus, deviceMultiplier: 2}}\n",
       "deviceMultiplier (line 5): excludes capacityKey"},
      {"profiles:\n- name: c\n  kind: cpu\n  skipNodeOperations: true\n",
       "field skipNodeOperations (line 4): cannot be true: cpu devices are pinned"},
      {"profiles:\n- name: g\n  kind: gpu\n  vfio: true\n  skipNodeOperations: true\n",
       "cannot be true: vfio binding happens at prepare"},
      {"profiles:\n- name: g\n  kind: gpu\n  attributes: {zones: [a, 1]}\n",
       "field attributes.zones (line 4): list elements must all have the same type"},
      {"profiles:\n- name: g\n  kind: gpu\n  cdiDevices: [nvidia.com/gpu]\n",
       "field cdiDevices (line 4): \"nvidia.com/gpu\" is not a CDI device name"},
      {"profiles:\n- name: g\n  kind: gpu\n  cdiDevices: [\"nvidia.com/gpu={serial}\"]\n",
       "unknown placeholder"},
      {"profiles:\n- name: c\n  kind: cpu\n  cdiDevices: [\"nvidia.com/gpu=0\"]\n",
       "is only for gpu and nic profiles"},
  };
  for (const Case& c : cases) {
    auto config = ParseProfileConfig(c.yaml);
    EXPECT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.yaml;
  }
  EXPECT_THAT(LoadProfileConfig("/nonexistent/profiles.yaml"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/profiles.yaml")));
}

// Found by fuzz/device_profile_fuzzer (input in fuzz/corpus/device_profile_fuzzer/): a NUL and a
// tab in a key reached the error message raw. Control bytes are escaped, long messages cut.
TEST(ProfileTest, ConfigErrorsEscapeControlBytesAndStayShort) {
  absl::StatusOr<ProfileConfig> config =
      ParseProfileConfig(std::string("profiles:\n- name: gpu\n  \"\\0\\tnd\": gpu\n"));
  ASSERT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr(R"(field \x00\tnd (line 3): unknown field)")));
  for (const char c : config.status().message()) {
    EXPECT_GE(static_cast<unsigned char>(c), 0x20) << config.status();
  }
  config = ParseProfileConfig("profiles:\n- name: gpu\n  kind: " + std::string(100000, 'k'));
  ASSERT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kkkk...")));
  EXPECT_LT(config.status().message().size(), 4096u);
}

TEST(DraDeviceTest, QuantitiesAndBusIds) {
  EXPECT_EQ(FormatBinaryQuantity(80ull << 30), "80Gi");
  EXPECT_EQ(FormatBinaryQuantity(1000), "1000");
  EXPECT_EQ(FormatBinaryQuantity(0), "0");
  EXPECT_EQ(FormatBinaryQuantity(1536ull << 20), "1536Mi");
  EXPECT_EQ(FormatDecimalQuantity(200000ull * 1000000), "200G");
  EXPECT_EQ(FormatDecimalQuantity(25500ull * 1000000), "25500M");
  EXPECT_TRUE(IsValidPciBusId("0000:3b:00.1"));
  EXPECT_FALSE(IsValidPciBusId("0000:3B:00.1"));
  EXPECT_FALSE(IsValidPciBusId("10000:e1:00.0"));
  EXPECT_FALSE(IsValidPciBusId("0000:3b:00.10"));
}

TEST(DraDeviceTest, ValidateAndDiff) {
  DeviceSet set;
  DraDevice d;
  d.name = "gpu-0";
  d.attributes["type"] = std::string("gpu");
  set.devices.push_back(d);
  EXPECT_OK(ValidateDeviceSet(set));
  DeviceSet bad = set;
  bad.devices[0].attributes["this_name_is_far_too_long_for_an_attribute"] = true;
  EXPECT_THAT(ValidateDeviceSet(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("is not a qualified name")));
  bad = set;
  bad.devices[0].consumes_counters.push_back({.counter_set = "missing"});
  EXPECT_THAT(ValidateDeviceSet(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("unknown counter set \"missing\"")));
  bad = set;
  bad.devices[0].name = "GPU_0";
  EXPECT_THAT(ValidateDeviceSet(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("DNS label")));

  DeviceSet after = set;
  after.devices[0].attributes["model"] = std::string("x");
  DraDevice extra = d;
  extra.name = "gpu-1";
  after.devices.push_back(extra);
  DeviceSetDiff diff = DiffDeviceSets(set, after);
  EXPECT_THAT(diff.added, ElementsAre("gpu-1"));
  EXPECT_THAT(diff.changed, ElementsAre("gpu-0"));
  EXPECT_THAT(diff.removed, IsEmpty());
  EXPECT_TRUE(DiffDeviceSets(after, after).empty());
  EXPECT_THAT(DiffDeviceSets(after, set).removed, ElementsAre("gpu-1"));
}

}  // namespace
}  // namespace devlet::devices
