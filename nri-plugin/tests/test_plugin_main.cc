// devlet-nri-test-plugin: devlet's NRI handlers over an in-memory claims view, for the Go harness
// against the real containerd/nri adaptation (integration/nri) and for the benchmark.
//
//   devlet-nri-test-plugin --socket /tmp/nri.sock --claims claims.json [--cdi-policy names]
//       [--numa-cpus '0=0-3;1=4-7'] [--state-change-only] [--no-reconnect] [--name N --idx NN]
//       [--subscribe-all]   (want all 14 events; the stub restricts them to the runtime's)
//       [--fail-request] [--keep-connected]   (the failure policy sent in ConfigureResponse)
//
// Pre-launched (NRI_PLUGIN_SOCKET set by the runtime) it uses the inherited socket. A non-empty
// Configure config replaces the claims (same JSON as --claims). Test hooks, driven by pod
// annotations so that one plugin process serves every scenario:
//   devlet.test/create-delay-ms: CreateContainer sleeps that long first (slow-handler scenario);
//   devlet.test/update-containers: CreateContainer also asks the runtime, from another thread,
//     for an unsolicited UpdateContainers of that container (cpu shares 1234) and reports in the
//     adjustment's annotation devlet.test/update-containers "ok", "refused: <why>" (the stub's
//     guard for runtimes older than NRI v0.12.1) or "pending" (no answer within 300 ms);
//   devlet.test/report: when set, the adjustment carries annotations devlet.test/events (pod
//     events seen, in order), devlet.test/registrations (Configure calls: the runtime configures
//     each registration, and may do so before the stub's thread has read the RegisterPlugin
//     reply, so Stub::registrations() can lag behind a handler) and devlet.test/synced
//     (containers in the last Synchronize).
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/nri/claims_view.h"
#include "devlet/nri/devlet_plugin.h"
#include "devlet/nri/stub.h"

namespace devlet::nri {
namespace {

struct Flags {
  std::string socket = kDefaultSocketPath;
  std::string name = "devlet";
  std::string idx = "10";
  std::string claims;
  std::string cdi_policy = "auto";
  std::string numa_cpus;
  bool state_change_only = false;
  bool reconnect = true;
  bool subscribe_all = false;
  bool fail_request = false;
  bool keep_connected = false;
  int verbosity = 0;
};

absl::Status LoadClaims(InMemoryClaimsView& view, std::string_view json) {
  DEVLET_ASSIGN_OR_RETURN(auto claims, ParseClaimsJson(json));
  for (auto& [uid, list] : claims) {
    view.Set(uid, std::move(list));
  }
  return absl::OkStatus();
}

class TestPlugin {
 public:
  TestPlugin(InMemoryClaimsView* view, DevletPluginOptions options)
      : view_(view), plugin_(view, std::move(options)) {}

  Handlers MakeHandlers() {
    Handlers h = plugin_.MakeHandlers();
    auto configure = h.configure;
    h.configure = [this, configure](const RuntimeInfo& runtime, std::string_view config) {
      ++configured_;
      if (!config.empty()) {
        DEVLET_RETURN_IF_ERROR(LoadClaims(*view_, config));
      }
      return configure(runtime, config);
    };
    auto synchronize = h.synchronize;
    h.synchronize = [this, synchronize](const std::vector<api::PodSandbox>& pods,
                                        const std::vector<api::Container>& containers) {
      synced_ = static_cast<int>(containers.size());
      return synchronize(pods, containers);
    };
    auto record = [this](const char* event, PodHandler next) -> PodHandler {
      return [this, event, next](const api::PodSandbox& pod) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          std::string& seen = events_[pod.uid()];
          seen += seen.empty() ? event : std::string(",") + event;
        }
        return next(pod);
      };
    };
    h.run_pod_sandbox = record("RunPodSandbox", h.run_pod_sandbox);
    h.stop_pod_sandbox = record("StopPodSandbox", h.stop_pod_sandbox);
    h.remove_pod_sandbox = record("RemovePodSandbox", h.remove_pod_sandbox);
    auto create = h.create_container;
    h.create_container = [this, create](const api::PodSandbox& pod, const api::Container& ctr)
        -> absl::StatusOr<api::CreateContainerResponse> {
      auto delay = pod.annotations().find("devlet.test/create-delay-ms");
      if (delay != pod.annotations().end()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(delay->second)));
      }
      DEVLET_ASSIGN_OR_RETURN(api::CreateContainerResponse response, create(pod, ctr));
      if (pod.annotations().contains("devlet.test/update-containers")) {
        (*response.mutable_adjust()->mutable_annotations())["devlet.test/update-containers"] =
            UnsolicitedUpdate(ctr.id());
      }
      if (pod.annotations().contains("devlet.test/report")) {
        auto& annotations = *response.mutable_adjust()->mutable_annotations();
        std::lock_guard<std::mutex> lock(mu_);
        annotations["devlet.test/events"] = events_[pod.uid()];
        annotations["devlet.test/registrations"] = std::to_string(configured_.load());
        annotations["devlet.test/synced"] = std::to_string(synced_.load());
      }
      return response;
    };
    return h;
  }

  void set_stub(Stub* stub) { stub_ = stub; }

  // UnsolicitedUpdate calls Stub::UpdateContainers from a thread of its own (as a resource
  // policy would, outside any event) and waits briefly for the outcome: the runtime may only
  // serve it once the CreateContainer in progress has returned.
  std::string UnsolicitedUpdate(const std::string& container_id) {
    struct Outcome {
      std::mutex mu;
      std::condition_variable cv;
      std::optional<std::string> text;
    };
    auto outcome = std::make_shared<Outcome>();
    Stub* stub = stub_;
    std::thread([outcome, stub, container_id]() {
      api::ContainerUpdate update;
      update.set_container_id(container_id);
      update.mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(1234);
      absl::StatusOr<std::vector<api::ContainerUpdate>> failed =
          stub->UpdateContainers({update});
      std::lock_guard<std::mutex> lock(outcome->mu);
      outcome->text = failed.ok() ? "ok" : "refused: " + Message(failed.status());
      outcome->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(outcome->mu);
    outcome->cv.wait_for(lock, std::chrono::milliseconds(300),
                         [&] { return outcome->text.has_value(); });
    return outcome->text.value_or("pending");
  }

 private:
  InMemoryClaimsView* view_;
  DevletPlugin plugin_;
  Stub* stub_ = nullptr;
  std::atomic<int> configured_{0};
  std::atomic<int> synced_{-1};
  std::mutex mu_;
  std::map<std::string, std::string> events_;
};

absl::Status Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--socket") flags.socket = value();
    else if (arg == "--name") flags.name = value();
    else if (arg == "--idx") flags.idx = value();
    else if (arg == "--claims") flags.claims = value();
    else if (arg == "--cdi-policy") flags.cdi_policy = value();
    else if (arg == "--numa-cpus") flags.numa_cpus = value();
    else if (arg == "--state-change-only") flags.state_change_only = true;
    else if (arg == "--no-reconnect") flags.reconnect = false;
    else if (arg == "--subscribe-all") flags.subscribe_all = true;
    else if (arg == "--fail-request") flags.fail_request = true;
    else if (arg == "--keep-connected") flags.keep_connected = true;
    else if (arg == "-v") flags.verbosity = std::stoi(value());
    else return InvalidArgument("unknown flag " + arg);
  }
  log::Configure({.verbosity = flags.verbosity});
  InMemoryClaimsView view;
  if (!flags.claims.empty()) {
    std::ifstream file(flags.claims);
    if (!file) {
      return NotFound("cannot read --claims " + flags.claims);
    }
    std::stringstream text;
    text << file.rdbuf();
    DEVLET_RETURN_IF_ERROR(LoadClaims(view, text.str()));
  }
  DevletPluginOptions options;
  DEVLET_ASSIGN_OR_RETURN(options.cdi_policy, ParseCdiPolicy(flags.cdi_policy));
  std::stringstream numa(flags.numa_cpus);
  for (std::string item; std::getline(numa, item, ';');) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("--numa-cpus entry \"" + item + "\" is not NODE=CPULIST");
    }
    options.numa_cpus[std::stoi(item.substr(0, eq))] = item.substr(eq + 1);
  }
  TestPlugin plugin(&view, options);
  std::optional<FailurePolicy> failure_policy;
  if (flags.fail_request || flags.keep_connected) {
    failure_policy = FailurePolicy{flags.fail_request, flags.keep_connected};
  }
  // --subscribe-all: every event the implemented NRI version knows.
  const uint32_t all_events = ValidEventsMask(ParseNriVersion(kImplementedNriVersion));
  DEVLET_ASSIGN_OR_RETURN(auto stub, Stub::Create(plugin.MakeHandlers(),
                                                  {.name = flags.name,
                                                   .index = flags.idx,
                                                   .socket_path = flags.socket,
                                                   .reconnect = flags.reconnect,
                                                   .min_backoff = std::chrono::milliseconds(20),
                                                   .max_backoff = std::chrono::milliseconds(500),
                                                   .failure_policy = failure_policy,
                                                   .events_override = flags.subscribe_all ? all_events : 0u,
                                                   .state_change_only = flags.state_change_only}));
  plugin.set_stub(stub.get());
  return stub->Run();
}

}  // namespace
}  // namespace devlet::nri

int main(int argc, char** argv) {
  absl::Status status = devlet::nri::Main(argc, argv);
  if (!status.ok()) {
    std::cerr << "devlet-nri-test-plugin: " << devlet::Message(status) << "\n";
    return 1;
  }
  return 0;
}
