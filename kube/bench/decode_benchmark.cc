// Decoding time against the number of keys in one object (issue 14 §0.2: it grew with the square
// of the key count). Each case builds one object whose map has N keys and decodes it; the
// benchmark's complexity fit should report O(N).
//
//   cmake --build build --target kube_decode_benchmark
//   build/kube/kube_decode_benchmark --benchmark_filter='/(10000|100000|1000000)$'
//
// Cases: Pod labels (what the extender decodes per filter call), opaque claim parameters (kept as
// raw JSON with their key order), the same Pod as YAML, and encoding the decoded Pod back.
//
// A cluster's ResourceSlices (issue 15: the table-driven codec must not be slower): a list of 10k
// slices, one per node, each with 8 GPUs carrying the attributes and capacity a GPU driver
// publishes, decoded and encoded back:
//
//   build/kube/kube_decode_benchmark --benchmark_filter=SliceList
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true  (one line)
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "benchmark/benchmark.h"
#include "devlet/kube/codec.h"

namespace devlet::kube {
namespace {

std::string Key(int64_t i) {
  return "example.com/label-" + std::to_string(i);
}

std::string PodJson(int64_t n) {
  std::string out = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{)";
  for (int64_t i = 0; i < n; ++i) {
    out += (i ? ",\"" : "\"") + Key(i) + "\":\"v" + std::to_string(i) + "\"";
  }
  out += R"(}},"spec":{"containers":[{"name":"c","image":"i"}]}})";
  return out;
}

std::string PodYaml(int64_t n) {
  std::string out = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n";
  for (int64_t i = 0; i < n; ++i) {
    out += "    " + Key(i) + ": v" + std::to_string(i) + "\n";
  }
  out += "spec:\n  containers:\n  - name: c\n    image: i\n";
  return out;
}

std::string ClaimJson(int64_t n) {
  std::string out =
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c"},)"
      R"("spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu"}}],)"
      R"("config":[{"opaque":{"driver":"gpu.example.com","parameters":{)";
  for (int64_t i = 0; i < n; ++i) {
    out += (i ? ",\"" : "\"") + Key(i) + "\":" + std::to_string(i);
  }
  out += "}}}]}}}";
  return out;
}

// One node's slice: 8 devices as a GPU driver publishes them (string, int, bool and version
// attributes, memory and compute capacity, a request policy on one of them).
std::string SliceJson(int64_t node) {
  const std::string name = "node-" + std::to_string(node);
  std::string out =
      R"({"metadata":{"name":")" + name + R"(-gpu.example.com-x7k2p",)" + R"("generateName":")" +
      name + R"(-gpu.example.com-",)" + R"("uid":"5f0c6f1e-2d4b-4c8a-9e3f-)" +
      std::to_string(100000000000 + node) + R"(","resourceVersion":")" +
      std::to_string(4000000 + node) + R"(","creationTimestamp":"2026-12-01T10:00:00Z",)" +
      R"("ownerReferences":[{"apiVersion":"v1","kind":"Node","name":")" + name +
      R"(","uid":"0b1c2d3e-)" + std::to_string(node) + R"(","controller":true}]},)" +
      R"("spec":{"driver":"gpu.example.com","pool":{"name":")" + name +
      R"(","generation":3,"resourceSliceCount":1},"nodeName":")" + name + R"(","devices":[)";
  for (int d = 0; d < 8; ++d) {
    const std::string index = std::to_string(d);
    out += (d ? "," : "");
    out += R"({"name":"gpu-)" + index + R"(","attributes":{)" +
           R"("gpu.example.com/uuid":{"string":"GPU-)" + std::to_string(node) + "-" + index +
           R"("},"gpu.example.com/index":{"int":)" + index +
           R"(},"gpu.example.com/productName":{"string":"Example H100 80GB HBM3"},)" +
           R"("gpu.example.com/architecture":{"string":"Hopper"},)" +
           R"("gpu.example.com/driverVersion":{"version":"570.86.15"},)" +
           R"("gpu.example.com/cudaComputeCapability":{"version":"9.0.0"},)" +
           R"("gpu.example.com/migCapable":{"bool":true},)" +
           R"("resource.kubernetes.io/pcieRoot":{"string":"pci0000:)" + index + R"(0"}},)" +
           R"("capacity":{"gpu.example.com/memory":{"value":"80Gi"},)" +
           R"("gpu.example.com/multiprocessors":{"value":"132","requestPolicy":)" +
           R"({"default":"132","validRange":{"min":"1","max":"132","step":"1"}}}}})";
  }
  out += "]}}";
  return out;
}

std::string SliceListJson(int64_t n) {
  std::string out = R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSliceList",)"
                    R"("metadata":{"resourceVersion":"4100000"},"items":[)";
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    out += SliceJson(i);
  }
  out += "]}";
  return out;
}

void Run(benchmark::State& state, const std::string& input, std::size_t want = 1) {
  const DecodeOptions options{.max_bytes = 1u << 30};
  for (auto _ : state) {
    absl::StatusOr<std::vector<Object>> objects = Decode(input, options);
    if (!objects.ok() || objects->size() != want) {
      state.SkipWithError("decode failed");
      return;
    }
    benchmark::DoNotOptimize(objects);
  }
  state.SetComplexityN(state.range(0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input.size()));
}

void BM_DecodeJsonPodLabels(benchmark::State& state) {
  Run(state, PodJson(state.range(0)));
}

void BM_DecodeYamlPodLabels(benchmark::State& state) {
  Run(state, PodYaml(state.range(0)));
}

void BM_DecodeJsonOpaqueParameters(benchmark::State& state) {
  Run(state, ClaimJson(state.range(0)));
}

void BM_EncodeJsonPodLabels(benchmark::State& state) {
  absl::StatusOr<Pod> pod = DecodeOne<Pod>(PodJson(state.range(0)), {.max_bytes = 1u << 30});
  if (!pod.ok()) {
    state.SkipWithError("decode failed");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(EncodeJson(*pod));
  }
  state.SetComplexityN(state.range(0));
}

// 10k..1M for the report; the 2x steps in between make the complexity fit meaningful.
#define DEVLET_KEYS                                                                              \
  Arg(10000)->Arg(20000)->Arg(40000)->Arg(80000)->Arg(100000)->Arg(1000000)->Complexity()->Unit( \
      benchmark::kMillisecond)

void BM_DecodeJsonSliceList(benchmark::State& state) {
  Run(state, SliceListJson(state.range(0)), static_cast<std::size_t>(state.range(0)));
}

void BM_EncodeJsonSliceList(benchmark::State& state) {
  absl::StatusOr<std::vector<Object>> slices =
      Decode(SliceListJson(state.range(0)), {.max_bytes = 1u << 30});
  if (!slices.ok() || slices->size() != static_cast<std::size_t>(state.range(0))) {
    state.SkipWithError("decode failed");
    return;
  }
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string json = EncodeJsonList(*slices);
    bytes = json.size();
    benchmark::DoNotOptimize(json);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

BENCHMARK(BM_DecodeJsonPodLabels)->DEVLET_KEYS;
BENCHMARK(BM_DecodeYamlPodLabels)->DEVLET_KEYS;
BENCHMARK(BM_DecodeJsonOpaqueParameters)->DEVLET_KEYS;
BENCHMARK(BM_EncodeJsonPodLabels)->DEVLET_KEYS;
BENCHMARK(BM_DecodeJsonSliceList)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeJsonSliceList)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace devlet::kube

BENCHMARK_MAIN();
