// Decoding time against the number of keys in one object (issue 14 §0.2: it grew with the square
// of the key count). Each case builds one object whose map has N keys and decodes it; the
// benchmark's complexity fit should report O(N).
//
//   cmake --build build --target kube_decode_benchmark
//   build/kube/kube_decode_benchmark --benchmark_filter='/(10000|100000|1000000)$'
//
// Cases: Pod labels (what the extender decodes per filter call), opaque claim parameters (kept as
// raw JSON with their key order), the same Pod as YAML, and encoding the decoded Pod back.
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

void Run(benchmark::State& state, const std::string& input) {
  const DecodeOptions options{.max_bytes = 1u << 30};
  for (auto _ : state) {
    absl::StatusOr<std::vector<Object>> objects = Decode(input, options);
    if (!objects.ok() || objects->size() != 1) {
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

BENCHMARK(BM_DecodeJsonPodLabels)->DEVLET_KEYS;
BENCHMARK(BM_DecodeYamlPodLabels)->DEVLET_KEYS;
BENCHMARK(BM_DecodeJsonOpaqueParameters)->DEVLET_KEYS;
BENCHMARK(BM_EncodeJsonPodLabels)->DEVLET_KEYS;

}  // namespace
}  // namespace devlet::kube

BENCHMARK_MAIN();
