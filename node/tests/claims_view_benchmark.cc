// The container path of devlet-node without the transport: DevletPlugin::BuildAdjustment over
// node's CheckpointClaimsView on a real state/ checkpoint, for one container that names a GPU
// claim prepared by the real ClaimPreparer (simulated backend, CDI spec in a temp CDI root).
// What CreateContainer costs in devlet beyond nri_benchmark's in-memory view.
//
//   build/node/node_claims_view_benchmark --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "devlet/dra_kubelet/devlet_adapters.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/dra_kubelet/testing/local.h"
#include "devlet/node/adapters.h"
#include "devlet/nri/devlet_plugin.h"
#include "devlet/nri/stub.h"
#include "devlet/nri/version.h"
#include "devlet/state/container_marker.h"

namespace devlet::node {
namespace {

namespace fs = std::filesystem;

// OneClaim serves the bench claim: one GPU of pool node-1 for request "gpu", reserved for the
// bench pod.
class OneClaim final : public dra_kubelet::ClaimSource {
 public:
  absl::StatusOr<dra_kubelet::ResourceClaim> GetClaim(const std::string& namespace_name,
                                                      const std::string& name,
                                                      const std::string& uid) override {
    dra_kubelet::ResourceClaim claim;
    claim.namespace_name = namespace_name;
    claim.name = name;
    claim.uid = uid;
    claim.allocated = true;
    claim.results.push_back({.request = "gpu", .driver = "devlet.io", .pool = "node-1",
                             .device = "gpu-0"});
    claim.reserved_for_uids = {"pod-bench"};
    return claim;
  }
};

struct Node {
  std::string dir;
  std::unique_ptr<dra_kubelet::StateClaimRecordStore> checkpoint;
  std::unique_ptr<CheckpointClaimsView> view;
};

Node& BenchNode() {
  static Node* node = [] {
    auto* n = new Node();
    std::string pattern = (fs::temp_directory_path() / "devlet-view-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    n->dir = pattern;
    // Removed at exit (the store is leaked on purpose: no destruction order to get wrong).
    static const struct RemoveAtExit {
      std::string dir;
      ~RemoveAtExit() { fs::remove_all(dir); }
    } remove_at_exit{n->dir};
    const std::string cdi_root = n->dir + "/cdi";
    n->checkpoint = *dra_kubelet::StateClaimRecordStore::Open(n->dir + "/state", "devlet.io",
                                                               cdi_root);
    static OneClaim claims;
    static dra_kubelet::testing::SimulatedBackend backend(
        "node-1", dra_kubelet::testing::SimulatedBackend::Gpus(1));
    static dra_kubelet::CdiSpecWriter cdi(cdi_root);
    dra_kubelet::ClaimPreparer preparer({.driver_name = "devlet.io"}, claims, backend, cdi,
                                        *n->checkpoint);
    auto results = preparer.Prepare({{"default", "gpu", "claim-gpu"}});
    if (!results["claim-gpu"].error.empty()) std::abort();
    n->view = std::make_unique<CheckpointClaimsView>(n->checkpoint->store());
    return n;
  }();
  return *node;
}

void BM_BuildAdjustmentFromCheckpoint(benchmark::State& state) {
  Node& node = BenchNode();
  nri::DevletPlugin plugin(node.view.get(), {.numa_cpus = {{0, "0-3"}, {1, "4-7"}}});
  nri::RuntimeInfo runtime;
  runtime.nri_version = nri::ParseNriVersion("v0.12.5");
  (void)plugin.Configure(runtime);
  nri::api::CreateContainerRequest request;
  auto* pod = request.mutable_pod();
  pod->set_id("sb-bench");
  pod->set_uid("pod-bench");
  pod->set_name("bench");
  pod->set_namespace_("default");
  auto* ctr = request.mutable_container();
  ctr->set_id("ctr");
  ctr->set_name("app");
  ctr->add_env("PATH=/usr/bin:/bin");
  // The runtime copied it from the claim's CDI device the kubelet gave this container.
  ctr->add_env(state::ContainerMarkerEnv({"claim-gpu", {"gpu"}, "node-1", "gpu-0", ""}, 0));
  ctr->mutable_linux()->mutable_resources()->mutable_cpu()->set_cpus("0-7");
  if (!plugin.BuildAdjustment(request.pod(), request.container()).ok()) {
    state.SkipWithError("the bench container's adjustment failed");
    return;
  }
  for (auto _ : state) {
    auto adjust = plugin.BuildAdjustment(request.pod(), request.container());
    benchmark::DoNotOptimize(adjust);
  }
}
BENCHMARK(BM_BuildAdjustmentFromCheckpoint);

}  // namespace
}  // namespace devlet::node

BENCHMARK_MAIN();
