// Single Allocate calls on a 500-node cluster (8 GPUs + 4 NICs per node).
//   build-alloc/allocator/allocator_benchmark --benchmark_filter=Allocate
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "devlet/allocator/allocator.h"
#include "devlet/kube/codec.h"

namespace devlet::allocator {
namespace {

kube::DeviceAttribute Str(std::string s) {
  kube::DeviceAttribute a;
  a.string_value = std::move(s);
  return a;
}
kube::DeviceAttribute Int(int64_t v) {
  kube::DeviceAttribute a;
  a.int_value = v;
  return a;
}

std::shared_ptr<const Snapshot> Cluster(int nodes) {
  std::vector<kube::DeviceClass> classes(2);
  classes[0].metadata.name = "gpu";
  classes[0].spec.selectors.push_back({kube::CELDeviceSelector{"device.driver == \"gpu.example.com\""}});
  classes[1].metadata.name = "nic";
  classes[1].spec.selectors.push_back({kube::CELDeviceSelector{"device.driver == \"nic.example.com\""}});
  std::vector<kube::ResourceSlice> slices;
  for (int n = 0; n < nodes; ++n) {
    std::string name = "node-" + std::to_string(n);
    kube::ResourceSlice gpu;
    gpu.metadata.name = name + "-gpu";
    gpu.spec.driver = "gpu.example.com";
    gpu.spec.node_name = name;
    gpu.spec.pool = {name, 1, 1};
    for (int i = 0; i < 8; ++i) {
      kube::Device d;
      d.name = "gpu-" + std::to_string(i);
      d.attributes["model"] = Str(n % 2 ? "h100" : "a100");
      d.attributes["numaNode"] = Int(i / 4);
      d.attributes["example.com/pcieRoot"] = Str("pci" + std::to_string(i / 2));
      d.capacity["memory"].value = kube::Quantity::Parse(n % 2 ? "80Gi" : "40Gi").value();
      gpu.spec.devices.push_back(std::move(d));
    }
    kube::ResourceSlice nic;
    nic.metadata.name = name + "-nic";
    nic.spec.driver = "nic.example.com";
    nic.spec.node_name = name;
    nic.spec.pool = {name, 1, 1};
    for (int i = 0; i < 4; ++i) {
      kube::Device d;
      d.name = "nic-" + std::to_string(i);
      d.attributes["numaNode"] = Int(i / 2);
      d.attributes["example.com/pcieRoot"] = Str("pci" + std::to_string(i));
      nic.spec.devices.push_back(std::move(d));
    }
    slices.push_back(std::move(gpu));
    slices.push_back(std::move(nic));
  }
  return Snapshot::Build(Features{}, classes, slices).value();
}

kube::DeviceRequest Exact(std::string name, std::string cls, int count) {
  kube::DeviceRequest r;
  r.name = std::move(name);
  r.exactly.emplace();
  r.exactly->device_class_name = std::move(cls);
  r.exactly->allocation_mode = "ExactCount";
  r.exactly->count = count;
  return r;
}

void Run(benchmark::State& state, const kube::ResourceClaim& claim) {
  static std::shared_ptr<const Snapshot> snapshot = Cluster(500);
  AllocatedState allocated;
  std::vector<kube::Node> nodes(500);
  for (int i = 0; i < 500; ++i) nodes[i].metadata.name = "node-" + std::to_string(i);
  size_t i = 0;
  for (auto _ : state) {
    AllocateOutcome out = Allocate(*snapshot, nodes[i++ % 500], {&claim}, allocated);
    benchmark::DoNotOptimize(out);
    if (out.kind != AllocateOutcome::Kind::kAllocated) state.SkipWithError("not allocated");
  }
}

void BM_Allocate1Gpu(benchmark::State& state) {
  kube::ResourceClaim c;
  c.metadata.name = "c";
  c.spec.devices.requests.push_back(Exact("gpu", "gpu", 1));
  Run(state, c);
}
BENCHMARK(BM_Allocate1Gpu);

void BM_Allocate2GpuSameNuma(benchmark::State& state) {
  kube::ResourceClaim c;
  c.metadata.name = "c";
  c.spec.devices.requests.push_back(Exact("gpu", "gpu", 2));
  c.spec.devices.constraints.push_back({{}, std::string("gpu.example.com/numaNode"), {}});
  Run(state, c);
}
BENCHMARK(BM_Allocate2GpuSameNuma);

void BM_AllocateGpuNicSamePcieRoot(benchmark::State& state) {
  kube::ResourceClaim c;
  c.metadata.name = "c";
  c.spec.devices.requests.push_back(Exact("gpu", "gpu", 1));
  c.spec.devices.requests.push_back(Exact("nic", "nic", 1));
  c.spec.devices.constraints.push_back({{}, std::string("example.com/pcieRoot"), {}});
  Run(state, c);
}
BENCHMARK(BM_AllocateGpuNicSamePcieRoot);

void BM_AllocateGpuBySelector(benchmark::State& state) {
  kube::ResourceClaim c;
  c.metadata.name = "c";
  c.spec.devices.requests.push_back(Exact("gpu", "gpu", 1));
  c.spec.devices.requests[0].exactly->selectors.push_back(
      {kube::CELDeviceSelector{"device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0"}});
  Run(state, c);
}
BENCHMARK(BM_AllocateGpuBySelector);

}  // namespace
}  // namespace devlet::allocator

BENCHMARK_MAIN();
