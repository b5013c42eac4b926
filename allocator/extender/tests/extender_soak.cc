// extender_soak: a steady stream of filter -> prioritize -> bind through devlet-extender's HTTP
// server in allocate mode, with watch churn, checking that nothing accumulates (issue 14 §3).
//
//   extender_soak [--cycles N] [--every K] [--warmup W]
//
// One cycle: a ResourceClaim for one GPU appears (a watch event), the scheduler's filter,
// prioritize and bind requests for a pod using it arrive over one keep-alive connection, the bind
// writes the allocation, a ResourceSlice is republished with a new pool generation (watch churn)
// and the claim is deleted (the pod went away). After a warm-up of W cycles (default 500), and
// then every K cycles, it prints the process's RSS, open descriptors and threads, the claims the
// extender holds for pods not yet bound, and its slices. It fails (exit 1) when at the end a
// device is still allocated, a hold is left, descriptors, threads or slices differ from the
// warm-up's, or RSS keeps growing (devlet::testing::UsageProblems). The server runs in this process (the client's work
// is the same every cycle).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "devlet/common/status.h"
#include "devlet/common/testing/soak.h"
#include "devlet/extender/extender.h"
#include "devlet/extender/server.h"
#include "devlet/kube/codec.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace devlet::extender {
namespace {

using json = nlohmann::json;

struct Sample {
  int cycle = 0;
  devlet::testing::ProcessUsage usage;
  size_t held = 0;
  size_t slices = 0;
};

// SliceYaml is node's ResourceSlice of gpu.example.com with `devices` GPUs (NUMA 0 for the first
// half, 1 for the rest) at pool generation `generation`.
std::string SliceYaml(const std::string& node, int devices, int generation) {
  std::string yaml = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: " +
                     node + "-gpus}\nspec:\n  driver: gpu.example.com\n  nodeName: " + node +
                     "\n  pool: {name: " + node + ", generation: " + std::to_string(generation) +
                     ", resourceSliceCount: 1}\n  devices:\n";
  for (int i = 0; i < devices; ++i) {
    yaml += "  - {name: gpu-" + std::to_string(i) + ", attributes: {numaNode: {int: " +
            std::to_string(i < devices / 2 ? 0 : 1) + "}}}\n";
  }
  return yaml;
}

// The cluster: node-a with four GPUs (NUMA 0, 0, 1, 1), node-b with two, node-c with none.
std::string ClusterYaml(int generation) {
  return testing::Documents({testing::GpuClassYaml(), SliceYaml("node-a", 4, generation),
                             SliceYaml("node-b", 2, generation), testing::NodeYaml("node-a"),
                             testing::NodeYaml("node-b"), testing::NodeYaml("node-c")});
}

std::string ClaimYaml(int i) {
  return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c-" +
         std::to_string(i) + ", namespace: default, uid: uid-c-" + std::to_string(i) +
         ", resourceVersion: '1'}\nspec:\n  devices:\n    requests:\n    - name: gpu\n"
         "      exactly: {deviceClassName: gpu}\n";
}

absl::Status ApplyYaml(ClusterState& state, const std::string& yaml) {
  DEVLET_ASSIGN_OR_RETURN(std::vector<kube::Object> objects, kube::Decode(yaml));
  for (const kube::Object& object : objects) DEVLET_RETURN_IF_ERROR(state.Apply(object));
  return absl::OkStatus();
}

class Soak {
 public:
  Soak() : state_(allocator::Features{}), writer_(state_) {}

  absl::Status Run(int cycles, int every, int warmup) {
    DEVLET_RETURN_IF_ERROR(ApplyYaml(state_, ClusterYaml(1)));
    state_.MarkSynced();
    extender_ = std::make_unique<Extender>(state_, writer_, Options{.mode = Mode::kAllocate});
    DEVLET_RETURN_IF_ERROR(http_.Start(*extender_));
    std::printf("%7s %9s %5s %8s %5s %7s\n", "cycle", "rss_kib", "fds", "threads", "held",
                "slices");
    std::vector<Sample> samples;
    absl::Status status;
    for (int i = 0; i < warmup + cycles && status.ok(); ++i) {
      status = Cycle(i);
      const int done = i + 1;
      if (done < warmup || (done - warmup) % every != 0) continue;
      Sample s{.cycle = done,
               .usage = devlet::testing::MeasureProcess(),
               .held = state_.num_held(),
               .slices = state_.num_slices()};
      samples.push_back(s);
      std::printf("%7d %9ld %5d %8d %5zu %7zu\n", s.cycle, s.usage.rss_kib, s.usage.fds,
                  s.usage.threads, s.held, s.slices);
      std::fflush(stdout);
    }
    http_.Stop();
    DEVLET_RETURN_IF_ERROR(status);
    return Verdict(samples, cycles);
  }

 private:
  absl::Status Cycle(int i) {
    DEVLET_RETURN_IF_ERROR(ApplyYaml(state_, ClaimYaml(i)));
    const std::string pod = "p-" + std::to_string(i);
    const json pod_json = testing::PodJson(pod, {"c-" + std::to_string(i)});
    const std::vector<std::string> nodes = {"node-a", "node-b", "node-c"};
    json filtered = http_.Post("filter", json({{"Pod", pod_json}, {"NodeNames", nodes}}).dump());
    if (!filtered["NodeNames"].is_array() || filtered["NodeNames"].empty()) {
      return Internal("cycle " + std::to_string(i) + ": filter found no node: " +
                      filtered.dump());
    }
    json scores =
        http_.Post("prioritize", json({{"Pod", pod_json}, {"NodeNames", nodes}}).dump());
    if (!scores.is_array()) {
      return Internal("cycle " + std::to_string(i) + ": prioritize: " + scores.dump());
    }
    const std::string node = filtered["NodeNames"][0].get<std::string>();
    json bound = http_.Post("bind", json({{"PodName", pod},
                                          {"PodNamespace", "default"},
                                          {"PodUID", "uid-" + pod},
                                          {"Node", node}})
                                        .dump());
    if (bound["Error"] != "") {
      return Internal("cycle " + std::to_string(i) + ": bind: " + bound.dump());
    }
    // Watch churn: a driver republishes its slices; then the pod is gone with its claim.
    DEVLET_RETURN_IF_ERROR(ApplyYaml(state_, SliceYaml("node-b", 2, i + 2)));
    std::optional<kube::ResourceClaim> claim =
        state_.GetClaim("default", "c-" + std::to_string(i));
    if (!claim) return Internal("cycle " + std::to_string(i) + ": the claim is gone");
    if (!claim->status.allocation) {
      return Internal("cycle " + std::to_string(i) + ": bind wrote no allocation");
    }
    return state_.Delete(kube::Object(*claim));
  }

  absl::Status Verdict(const std::vector<Sample>& samples, int cycles) const {
    if (samples.size() < 2) return InvalidArgument("too few samples: raise --cycles");
    const Sample& warm = samples.front();
    const Sample& last = samples.back();
    std::string problems = devlet::testing::UsageProblems(
        warm.usage, samples[samples.size() / 2].usage, last.usage, cycles);
    devlet::testing::ExpectSame(problems, "holds", 0, static_cast<long>(last.held));
    devlet::testing::ExpectSame(problems, "slices", static_cast<long>(warm.slices),
                                static_cast<long>(last.slices));
    for (int d = 0; d < 4; ++d) {
      for (const char* node : {"node-a", "node-b"}) {
        const std::string device = "gpu-" + std::to_string(d);
        if (state_.IsAllocated("gpu.example.com", node, device)) {
          problems += std::string("\n  ") + node + "/" + device + " is still allocated";
        }
      }
    }
    if (!problems.empty()) return Internal("leaks after the soak:" + problems);
    return absl::OkStatus();
  }

  ClusterState state_;
  MemoryWriter writer_;
  std::unique_ptr<Extender> extender_;
  testing::LoopbackServer http_;
};

}  // namespace

}  // namespace devlet::extender

int main(int argc, char** argv) {
  std::optional<devlet::testing::SoakFlags> flags =
      devlet::testing::ParseSoakFlags(argc, argv, "extender_soak");
  if (!flags) return 2;
  absl::Status status = devlet::extender::Soak().Run(flags->cycles, flags->every, flags->warmup);
  if (!status.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
