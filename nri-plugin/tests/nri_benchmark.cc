// Benchmarks of the NRI plugin's own parts, without the Go runtime side:
//
//   build-nri/nri-plugin/nri_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only
//
// (The end-to-end comparison with a containerd/nri Go plugin through the real adaptation is
// `nri-harness bench`, see README.md.)
#include <benchmark/benchmark.h>

#include <future>
#include <thread>

#include "devlet/nri/devlet_plugin.h"
#include "devlet/nri/framing.h"
#include "devlet/nri/runtime_session.h"
#include "devlet/nri/stub.h"
#include "devlet/state/container_marker.h"

namespace devlet::nri {
namespace {

void BM_DecodeFrames(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  std::string stream;
  for (int i = 0; i < 64; ++i) {
    for (const auto& frame : EncodeMuxFrames(
             1, EncodeTtrpcMessage(2 * i + 1, TtrpcMessageType::kRequest, 0,
                                   std::string(size, 'x')))) {
      stream += frame;
    }
  }
  for (auto _ : state) {
    MuxFrameDecoder mux;
    TtrpcMessageDecoder ttrpc;
    size_t messages = 0;
    for (size_t pos = 0; pos < stream.size(); pos += 65536) {
      (void)mux.Feed(std::string_view(stream).substr(pos, 65536), [&](uint32_t, std::string_view p) {
        ttrpc.Feed(p, [&](TtrpcMessage) { ++messages; });
      });
    }
    benchmark::DoNotOptimize(messages);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream.size()));
}
BENCHMARK(BM_DecodeFrames)->Arg(256)->Arg(4096)->Arg(1 << 20);

InMemoryClaimsView* BenchView() {
  static InMemoryClaimsView* view = [] {
    auto* v = new InMemoryClaimsView();
    PreparedClaim claim;
    claim.uid = "claim-gpu";
    claim.namespace_name = "default";
    claim.name = "gpu";
    PreparedDevice device;
    device.request = "gpu";
    device.device = "gpu1";
    device.cdi_device_names = {"devlet.dev/gpu=gpu1"};
    device.numa_nodes = {1};
    claim.devices.push_back(device);
    claim.metadata_mounts.push_back({"/var/run/devlet/claim-gpu.json", "/var/run/devlet/gpu.json"});
    v->Set("pod-bench", {claim});
    return v;
  }();
  return view;
}

api::CreateContainerRequest BenchRequest() {
  api::CreateContainerRequest request;
  auto* pod = request.mutable_pod();
  pod->set_id("sb-bench");
  pod->set_uid("pod-bench");
  pod->set_name("bench");
  pod->set_namespace_("default");
  auto* ctr = request.mutable_container();
  ctr->set_id("ctr");
  ctr->set_name("app");
  ctr->add_env("PATH=/usr/bin:/bin");
  // The runtime copied it from the CDI device the kubelet gave this container.
  ctr->add_env(state::ContainerMarkerEnv({"claim-gpu", {"gpu"}, "", "gpu1", ""}, 0));
  ctr->mutable_linux()->mutable_resources()->mutable_cpu()->set_cpus("0-7");
  return request;
}

void BM_BuildAdjustment(benchmark::State& state) {
  DevletPlugin plugin(BenchView(), {.numa_cpus = {{0, "0-3"}, {1, "4-7"}}});
  RuntimeInfo runtime;
  runtime.nri_version = ParseNriVersion("v0.12.5");
  (void)plugin.Configure(runtime);
  const api::CreateContainerRequest request = BenchRequest();
  for (auto _ : state) {
    auto adjust = plugin.BuildAdjustment(request.pod(), request.container());
    benchmark::DoNotOptimize(adjust);
  }
}
BENCHMARK(BM_BuildAdjustment);

// CreateContainer through our runtime side and our plugin over a socket pair: the C++ transport
// both ways, protobuf both ways, devlet's handler.
void BM_CreateContainerRoundTrip(benchmark::State& state) {
  auto fds = SocketPair();
  if (!fds.ok()) {
    state.SkipWithError("socketpair");
    return;
  }
  DevletPlugin plugin(BenchView(), {.numa_cpus = {{0, "0-3"}, {1, "4-7"}}});
  auto stub = Stub::Create(plugin.MakeHandlers(), {.name = "devlet",
                                                   .index = "10",
                                                   .socket_fd = fds->first.release(),
                                                   .use_environment = false});
  if (!stub.ok()) {
    state.SkipWithError("stub");
    return;
  }
  auto run = std::async(std::launch::async, [&] { return (*stub)->Run(); });
  auto session = RuntimeSession::Start(std::move(fds->second), std::chrono::seconds(5));
  if (!session.ok() || !(*session)->Configure({}).ok()) {
    state.SkipWithError("session");
    (*stub)->Stop();
    return;
  }
  const api::CreateContainerRequest request = BenchRequest();
  for (auto _ : state) {
    auto reply = (*session)->Call<api::CreateContainerResponse>("CreateContainer", request);
    if (!reply.ok() || reply->adjust().cdi_devices_size() != 1) {
      state.SkipWithError("CreateContainer failed");
      break;
    }
  }
  (*session)->connection().Close();
  (void)run.get();
}
BENCHMARK(BM_CreateContainerRoundTrip)->UseRealTime();

}  // namespace
}  // namespace devlet::nri

BENCHMARK_MAIN();
