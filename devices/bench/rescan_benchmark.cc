// What a periodic rescan of an unchanged node costs (discovery + profiles + diff), and what
// parsing one uevent costs, on the GPU-server fixture (hwloc XML + fake sysfs tree).
//
//   build-dev/devices/devices_rescan_benchmark --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "devlet/devices/profile.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/devices/watcher.h"

namespace devlet::devices {
namespace {

const std::string kXml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml";

void BM_RescanUnchangedGpuServer(benchmark::State& state) {
  testing::FakeSysfs fake;
  if (!testing::AddGpuServer(fake).ok()) std::abort();
  auto discoverer = NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kXml});
  Rescanner rescanner(*discoverer, DefaultProfileConfig());
  if (!rescanner.Rescan().ok()) std::abort();
  for (auto _ : state) {
    auto result = rescanner.Rescan();
    if (!result.ok() || result->changed) std::abort();
    benchmark::DoNotOptimize(result);
  }
}
BENCHMARK(BM_RescanUnchangedGpuServer)->Unit(benchmark::kMillisecond);

void BM_FingerprintGpuServer(benchmark::State& state) {
  testing::FakeSysfs fake;
  if (!testing::AddGpuServer(fake).ok()) std::abort();
  auto discoverer = NewDiscoverer({.sysfs_root = fake.Root(), .topology_xml = kXml});
  auto inventory = discoverer->Discover();
  if (!inventory.ok()) std::abort();
  auto set = BuildDeviceSet(*inventory, DefaultProfileConfig());
  if (!set.ok()) std::abort();
  for (auto _ : state) benchmark::DoNotOptimize(DeviceSetFingerprint(*set));
}
BENCHMARK(BM_FingerprintGpuServer)->Unit(benchmark::kMicrosecond);

void BM_ParseUevent(benchmark::State& state) {
  static const char kPayload[] =
      "bind@/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0\0ACTION=bind\0"
      "DEVPATH=/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0\0"
      "SUBSYSTEM=pci\0DRIVER=vfio-pci\0PCI_CLASS=30200\0PCI_ID=10DE:2330\0"
      "PCI_SLOT_NAME=0000:18:00.0\0SEQNUM=5121\0";
  const std::string payload(kPayload, sizeof(kPayload) - 1);
  for (auto _ : state) {
    auto event = ParseUevent(payload);
    benchmark::DoNotOptimize(event);
  }
}
BENCHMARK(BM_ParseUevent)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace devlet::devices

BENCHMARK_MAIN();
