// node_soak: churns claims through devlet-node's Agent the way a busy node does (issue 14 §3) and
// checks that nothing accumulates.
//
//   node_soak [--cycles N] [--every K] [--warmup W]
//
// One cycle: a ResourceClaim appears (in turn one GPU, one NIC with its device-metadata file, or
// two GPUs), the kubelet prepares it over the DRA socket, the runtime runs its pod sandbox and
// creates a container naming it over NRI, stops and removes both, the kubelet unprepares the
// claim and the claim is deleted. After a warm-up of W cycles (ctest: 500; the allocator's
// arenas and gRPC's buffers settle), and then every K cycles, it prints the process's RSS, open
// file descriptors and threads, and what devlet keeps on disk (CDI specs, device-metadata files,
// preparation journals; checkpoint records at the end). It fails (exit 1) when at the end any of
// those differs from the warm-up's (files and records: from none), or RSS keeps growing
// (devlet::testing::UsageProblems: 512 KiB in the second half, or 3 MiB in all). The
// Agent runs in this process on the simulated GPU server (devices/testing), so RSS and threads
// include the harness's own, which does the same work every cycle.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "agent_test_util.h"
#include "devlet/cdi/spec_dir.h"
#include "devlet/common/status.h"
#include "devlet/common/testing/soak.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/dra_kubelet/testing/kubelet_client.h"
#include "devlet/kube/client.h"
#include "devlet/kube/codec.h"
#include "devlet/node/agent.h"
#include "devlet/nri/runtime_session.h"
#include "devlet/nri/socket.h"
#include "devlet/state/store.h"

namespace devlet::node {
namespace {

namespace fs = std::filesystem;

// Sample is what one measurement found.
struct Sample {
  int cycle = 0;
  devlet::testing::ProcessUsage usage;
  int cdi_specs = 0;
  int metadata_files = 0;
  int preparation_journals = 0;
};

// CountFiles counts the regular files below `dir` (0 when it is missing).
int CountFiles(const fs::path& dir) {
  std::error_code ec;
  int n = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) ++n;
  }
  return n;
}

// ClaimYaml is cycle `i`'s claim: one GPU, one NIC, or two GPUs, reserved for pod "pod-<i>".
std::string ClaimYaml(int i) {
  const std::string n = std::to_string(i);
  std::string results;
  std::string requests;
  switch (i % 3) {
    case 0:
      requests = "[{name: gpu, exactly: {deviceClassName: gpu.devlet.io}}]";
      results = "[{request: gpu, driver: devlet.io, pool: node-1, device: gpu-" +
                std::to_string(i % 8) + "}]";
      break;
    case 1:
      requests = "[{name: nic, exactly: {deviceClassName: nic.devlet.io}}]";
      results = "[{request: nic, driver: devlet.io, pool: node-1, device: nic-" +
                std::to_string(i % 2) + "}]";
      break;
    default:
      requests = "[{name: gpus, exactly: {deviceClassName: gpu.devlet.io, count: 2}}]";
      results = "[{request: gpus, driver: devlet.io, pool: node-1, device: gpu-4}, "
                "{request: gpus, driver: devlet.io, pool: node-1, device: gpu-5}]";
  }
  return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c-" + n +
         ", namespace: soak, uid: claim-uid-" + n + "}\nspec: {devices: {requests: " + requests +
         "}}\nstatus:\n  allocation:\n    devices:\n      results: " + results +
         "\n  reservedFor: [{resource: pods, name: p-" + n + ", uid: pod-" + n + "}]\n";
}

class Soak {
 public:
  absl::Status Run(int cycles, int every, int warmup) {
    dir_ = fs::path("/tmp") / ("node-soak-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "manifests");
    DEVLET_RETURN_IF_ERROR(devices::testing::AddGpuServer(fake_));
    DEVLET_ASSIGN_OR_RETURN(store_,
                            kube::ManifestStore::Open({.dir = (dir_ / "manifests").string()}));
    AgentOptions options = testing::SimulatedServerOptions(dir_, fake_);
    options.enable_device_metadata = true;
    options.sysfs = &fake_;
    options.boot_id_file = "";
    options.nri_socket = "/tmp/node-soak-nri-" + std::to_string(::getpid()) + ".sock";
    options.nri_after_registration = false;
    DEVLET_ASSIGN_OR_RETURN(nri::UniqueFd listener, nri::ListenUnix(options.nri_socket));
    DEVLET_ASSIGN_OR_RETURN(std::unique_ptr<Agent> agent, Agent::Start(options, *store_));
    DEVLET_ASSIGN_OR_RETURN(runtime_, nri::RuntimeSession::Accept(listener.get(),
                                                                  std::chrono::seconds(10)));
    DEVLET_RETURN_IF_ERROR(runtime_->Configure({}).status());
    DEVLET_RETURN_IF_ERROR(runtime_->Synchronize({}, {}).status());
    kubelet_ = std::make_unique<dra_kubelet::testing::KubeletClient>(agent->Status().dra_socket);
    plugin_dir_ = fs::path(options.plugins_dir) / "devlet.io";

    std::vector<Sample> samples;
    std::printf("%7s %9s %5s %8s %10s %9s %9s %8s\n", "cycle", "rss_kib", "fds", "threads",
                "cdi_specs", "metadata", "journals", "ms/cycle");
    auto start = std::chrono::steady_clock::now();
    absl::Status status;
    for (int i = 0; i < warmup + cycles && status.ok(); ++i) {
      status = Cycle(i);
      const int done = i + 1;
      if (done < warmup || (done - warmup) % every != 0) continue;
      samples.push_back(Measure(done));
      const Sample& s = samples.back();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count() /
          every;
      std::printf("%7d %9ld %5d %8d %10d %9d %9d %8.2f\n", s.cycle, s.usage.rss_kib,
                  s.usage.fds, s.usage.threads, s.cdi_specs, s.metadata_files,
                  s.preparation_journals, ms);
      std::fflush(stdout);
      start = std::chrono::steady_clock::now();
    }
    kubelet_.reset();
    runtime_.reset();
    agent->Stop();
    // The checkpoint is read once, at the end: a store opened while the agent runs would fold
    // its journal and change what is measured.
    int records = -1;
    if (auto checkpoint = state::CheckpointStore::Open({.dir = plugin_dir_.string()});
        checkpoint.ok()) {
      absl::StatusOr<state::Checkpoint> loaded = (*checkpoint)->Load();
      if (loaded.ok()) records = static_cast<int>(loaded->claims.size());
    }
    fs::remove(options.nri_socket);
    fs::remove_all(dir_);
    DEVLET_RETURN_IF_ERROR(status);
    return Verdict(samples, cycles, records);
  }

 private:
  absl::Status Cycle(int i) {
    const std::string n = std::to_string(i);
    DEVLET_ASSIGN_OR_RETURN(std::vector<kube::Object> objects, kube::Decode(ClaimYaml(i)));
    DEVLET_RETURN_IF_ERROR(store_->Create(objects.at(0)).status());
    const dra_kubelet::ClaimRef ref{"soak", "c-" + n, "claim-uid-" + n};
    DEVLET_ASSIGN_OR_RETURN(auto prepared, kubelet_->Prepare(ref));
    std::vector<std::string> ids;
    for (const auto& device : prepared.devices()) {
      ids.insert(ids.end(), device.cdi_device_ids().begin(), device.cdi_device_ids().end());
    }
    DEVLET_ASSIGN_OR_RETURN(cdi::ContainerEdits edits,
                            cdi::Registry::Load({(dir_ / "cdi").string()}).Resolve(ids));

    nri::api::PodSandbox pod;
    pod.set_id("sandbox-" + n);
    pod.set_uid("pod-" + n);
    pod.set_name("p-" + n);
    pod.set_namespace_("soak");
    pod.add_ips("10.244.0." + std::to_string(i % 250 + 1));
    nri::api::RunPodSandboxRequest run;
    *run.mutable_pod() = pod;
    DEVLET_RETURN_IF_ERROR(
        runtime_->Call<nri::api::RunPodSandboxResponse>("RunPodSandbox", run).status());
    nri::api::CreateContainerRequest create;
    *create.mutable_pod() = pod;
    create.mutable_container()->set_id("ctr-" + n);
    create.mutable_container()->set_name("app");
    create.mutable_container()->set_pod_sandbox_id(pod.id());
    for (const std::string& env : edits.env) create.mutable_container()->add_env(env);
    DEVLET_RETURN_IF_ERROR(
        runtime_->Call<nri::api::CreateContainerResponse>("CreateContainer", create).status());
    nri::api::StopContainerRequest stop;
    *stop.mutable_pod() = pod;
    *stop.mutable_container() = create.container();
    DEVLET_RETURN_IF_ERROR(
        runtime_->Call<nri::api::StopContainerResponse>("StopContainer", stop).status());
    nri::api::StateChangeEvent removed;
    removed.set_event(nri::api::REMOVE_CONTAINER);
    *removed.mutable_pod() = pod;
    *removed.mutable_container() = create.container();
    DEVLET_RETURN_IF_ERROR(runtime_->Call<nri::api::Empty>("StateChange", removed).status());
    nri::api::StopPodSandboxRequest stop_pod;
    *stop_pod.mutable_pod() = pod;
    DEVLET_RETURN_IF_ERROR(
        runtime_->Call<nri::api::StopPodSandboxResponse>("StopPodSandbox", stop_pod).status());
    nri::api::RemovePodSandboxRequest remove_pod;
    *remove_pod.mutable_pod() = pod;
    DEVLET_RETURN_IF_ERROR(
        runtime_->Call<nri::api::RemovePodSandboxResponse>("RemovePodSandbox", remove_pod)
            .status());

    DEVLET_RETURN_IF_ERROR(kubelet_->Unprepare(ref));
    return store_->Delete(kube::Kind::kResourceClaim, {"soak", "c-" + n});
  }

  Sample Measure(int cycle) {
    Sample s;
    s.cycle = cycle;
    s.usage = devlet::testing::MeasureProcess();
    s.cdi_specs = devlet::testing::CountEntries(dir_ / "cdi");
    s.metadata_files = CountFiles(plugin_dir_ / "dra-device-metadata");
    s.preparation_journals = devlet::testing::CountEntries(plugin_dir_ / "preparation");
    return s;
  }

  static absl::Status Verdict(const std::vector<Sample>& samples, int cycles, int records) {
    if (samples.size() < 2) return InvalidArgument("too few samples: raise --cycles");
    const Sample& warm = samples.front();
    const Sample& last = samples.back();
    std::string problems = devlet::testing::UsageProblems(
        warm.usage, samples[samples.size() / 2].usage, last.usage, cycles);
    devlet::testing::ExpectSame(problems, "CDI spec files", warm.cdi_specs, last.cdi_specs);
    devlet::testing::ExpectSame(problems, "device-metadata files", 0, last.metadata_files);
    devlet::testing::ExpectSame(problems, "checkpoint records", 0, records);
    devlet::testing::ExpectSame(problems, "preparation journals", 0, last.preparation_journals);
    if (!problems.empty()) return Internal("leaks after the soak:" + problems);
    return absl::OkStatus();
  }

  fs::path dir_;
  fs::path plugin_dir_;
  devices::testing::FakeSysfs fake_;
  std::unique_ptr<kube::ManifestStore> store_;
  std::unique_ptr<nri::RuntimeSession> runtime_;
  std::unique_ptr<dra_kubelet::testing::KubeletClient> kubelet_;
};

}  // namespace
}  // namespace devlet::node

int main(int argc, char** argv) {
  std::optional<devlet::testing::SoakFlags> flags =
      devlet::testing::ParseSoakFlags(argc, argv, "node_soak");
  if (!flags) return 2;
  absl::Status status = devlet::node::Soak().Run(flags->cycles, flags->every, flags->warmup);
  if (!status.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
