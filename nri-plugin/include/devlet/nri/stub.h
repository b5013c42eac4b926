// File: devlet/nri/stub.h
//
// An NRI plugin in the spirit of containerd/nri's pkg/stub: implement the handlers you want; the
// event subscription follows from which ones are set. The stub connects (external mode: the
// runtime's socket; pre-launched mode: the fd in NRI_PLUGIN_SOCKET), registers, answers Configure
// with the subscription restricted to the events the runtime's NRI version knows, pages
// Synchronize, serves both the dedicated per-event rpcs (NRI v0.12+) and StateChange (older
// runtimes), and reconnects with exponential backoff when an external runtime goes away (the
// runtime then re-configures and re-synchronizes the plugin).
//
//   Handlers handlers;
//   handlers.create_container = [&](const api::PodSandbox& pod, const api::Container& ctr)
//       -> absl::StatusOr<api::CreateContainerResponse> { ... };
//   DEVLET_ASSIGN_OR_RETURN(auto stub, Stub::Create(std::move(handlers),
//                                                   {.name = "devlet", .index = "10"}));
//   return stub->Run();  // until Stop(), or until a pre-launched plugin's socket closes
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/nri/connection.h"
#include "devlet/nri/version.h"
#include "nri/pkg/api/v1alpha1/api.pb.h"

namespace devlet::nri {

namespace api = ::nri::pkg::api::v1alpha1;

// Full ttrpc service names.
inline constexpr char kPluginService[] = "nri.pkg.api.v1alpha1.Plugin";
inline constexpr char kRuntimeService[] = "nri.pkg.api.v1alpha1.Runtime";
// The runtime's default socket for external plugins.
inline constexpr char kDefaultSocketPath[] = "/var/run/nri/nri.sock";
// Environment of a pre-launched plugin.
inline constexpr char kPluginNameEnv[] = "NRI_PLUGIN_NAME";
inline constexpr char kPluginIdxEnv[] = "NRI_PLUGIN_IDX";
inline constexpr char kPluginSocketEnv[] = "NRI_PLUGIN_SOCKET";

// EventBit returns the subscription mask bit of `event`.
constexpr uint32_t EventBit(api::Event event) { return 1u << (static_cast<int>(event) - 1); }

// RuntimeInfo is what Configure told us about the runtime.
struct RuntimeInfo {
  std::string name;     // "containerd", "cri-o", ...
  std::string version;  // the runtime's own version
  NriVersion nri_version;       // reported, or inferred from name + version
  bool nri_version_inferred = false;
  std::chrono::milliseconds registration_timeout{0};
  std::chrono::milliseconds request_timeout{0};
};

using PodHandler = std::function<absl::Status(const api::PodSandbox& pod)>;
using ContainerHandler =
    std::function<absl::Status(const api::PodSandbox& pod, const api::Container& container)>;

// Handlers are the plugin's callbacks; set the ones you need. Each event's member is bound to its
// rpc, subscription bit and StateChange delivery by one row of the event table (src/events.cc). They run on transport worker
// threads, possibly concurrently, and must answer within the runtime's request timeout
// (RuntimeInfo::request_timeout, 2 s by default) or the runtime drops the plugin. A non-OK status
// fails the runtime operation with that message (it reaches pod events).
struct Handlers {
  // Configure: the plugin's configuration (for pre-launched plugins, /etc/nri/conf.d/NN-name.conf).
  std::function<absl::Status(const RuntimeInfo& runtime, std::string_view config)> configure;
  // Synchronize: every pod and container the runtime knows (all pages joined); may return updates.
  std::function<absl::StatusOr<std::vector<api::ContainerUpdate>>(
      const std::vector<api::PodSandbox>& pods, const std::vector<api::Container>& containers)>
      synchronize;
  // Shutdown: defined by the protocol, never sent by current runtimes.
  std::function<void()> shutdown;

  PodHandler run_pod_sandbox;
  std::function<absl::Status(const api::UpdatePodSandboxRequest& request)> update_pod_sandbox;
  PodHandler post_update_pod_sandbox;
  PodHandler stop_pod_sandbox;
  PodHandler remove_pod_sandbox;

  std::function<absl::StatusOr<api::CreateContainerResponse>(const api::PodSandbox& pod,
                                                             const api::Container& container)>
      create_container;
  ContainerHandler post_create_container;
  ContainerHandler start_container;
  ContainerHandler post_start_container;
  std::function<absl::StatusOr<api::UpdateContainerResponse>(
      const api::PodSandbox& pod, const api::Container& container,
      const api::LinuxResources& resources)>
      update_container;
  ContainerHandler post_update_container;
  std::function<absl::StatusOr<api::StopContainerResponse>(const api::PodSandbox& pod,
                                                           const api::Container& container)>
      stop_container;
  ContainerHandler remove_container;

  std::function<absl::StatusOr<api::ValidateContainerAdjustmentResponse>(
      const api::ValidateContainerAdjustmentRequest& request)>
      validate_container_adjustment;
};

// SubscribedEvents returns the event mask implied by the handlers that are set.
uint32_t SubscribedEvents(const Handlers& handlers);

// FailurePolicy is what the runtime does when this plugin fails to answer (NRI v0.12.5+; older
// runtimes ignore it and drop the plugin without failing the request).
struct FailurePolicy {
  bool fail_request = false;    // fail the CRI request instead of proceeding without the plugin
  bool keep_connected = false;  // a request timeout does not disconnect the plugin
};

// StubOptions configures a Stub.
struct StubOptions {
  std::string name;   // [a-zA-Z0-9_.+-]+ (NRI_PLUGIN_NAME wins when set)
  std::string index;  // two digits (NRI_PLUGIN_IDX wins when set)
  std::string socket_path = kDefaultSocketPath;  // external mode
  int socket_fd = -1;  // pre-launched mode: an already connected socket (NRI_PLUGIN_SOCKET wins)
  bool use_environment = true;  // read NRI_PLUGIN_NAME / NRI_PLUGIN_IDX / NRI_PLUGIN_SOCKET
  std::chrono::milliseconds registration_timeout{5000};
  // External mode: reconnect after the runtime goes away, backing off exponentially.
  bool reconnect = true;
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{10000};
  // Sent in ConfigureResponse when set.
  std::optional<FailurePolicy> failure_policy;
  // Non-zero: subscribe to these events instead of the ones implied by the handlers.
  uint32_t events_override = 0;
  // For tests: answer Unimplemented on the dedicated rpcs that have a StateChange fallback, to
  // drive the StateChange path with a new runtime.
  bool state_change_only = false;
  int workers = 4;
  // Called after each connection ends (with why); runs on the Run() thread.
  std::function<void(const absl::Status& why)> on_close;
};

// Stub is one NRI plugin instance. Thread-safe.
class Stub {
 public:
  // Create validates the options (after applying the environment when allowed).
  static absl::StatusOr<std::unique_ptr<Stub>> Create(Handlers handlers, StubOptions options);
  // Stops, then waits for handlers still running on closed connections. Run() must have returned.
  ~Stub();

  // Run connects, registers and serves until Stop(). External mode reconnects with backoff;
  // pre-launched mode returns when the runtime closes the socket (it relaunches plugins itself).
  absl::Status Run();

  // Stop makes Run() return and closes the connection. Safe from any thread, including handlers.
  void Stop();

  // UpdateContainers asks the runtime to update containers outside of any event (unsolicited).
  // Refused (FailedPrecondition) on runtimes older than NRI v0.12.1, which may deadlock on it.
  // Returns the updates the runtime could not apply.
  absl::StatusOr<std::vector<api::ContainerUpdate>> UpdateContainers(
      const std::vector<api::ContainerUpdate>& updates,
      const std::vector<api::ContainerEviction>& evictions = {});

  // runtime returns what the last Configure said, if any.
  std::optional<RuntimeInfo> runtime() const;
  // events returns the mask sent in the last ConfigureResponse.
  uint32_t events() const;
  // registrations counts successful registrations (1 + reconnections).
  int registrations() const;
  // connected reports whether a registered connection is up.
  bool connected() const;
  // name / index as registered.
  const std::string& name() const { return options_.name; }
  const std::string& index() const { return options_.index; }
  // pre_launched reports whether the stub uses an inherited socket.
  bool pre_launched() const { return options_.socket_fd >= 0; }

 private:
  Stub(Handlers handlers, StubOptions options);
  // RegisterServices fills services_: the lifecycle rpcs, each event's rpc, StateChange.
  void RegisterServices();
  // The lifecycle rpcs.
  absl::StatusOr<api::ConfigureResponse> Configure(const api::ConfigureRequest& request);
  absl::StatusOr<api::SynchronizeResponse> Synchronize(api::SynchronizeRequest& request);
  static RuntimeInfo ReadRuntimeInfo(const api::ConfigureRequest& request);
  // EventsFor returns the subscription for `runtime`: the handlers' (or events_override)
  // restricted to the events the runtime's NRI version knows; none of them is an error.
  absl::StatusOr<uint32_t> EventsFor(const RuntimeInfo& runtime) const;
  absl::Status Register(Connection& connection);
  bool SleepUnlessStopped(std::chrono::milliseconds duration);
  std::shared_ptr<Connection> CurrentConnection() const;

  Handlers handlers_;
  StubOptions options_;
  std::shared_ptr<ServiceRegistry> services_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool fd_used_ = false;
  std::shared_ptr<Connection> connection_;
  std::vector<std::thread> reapers_;  // destroy closed connections off the Run() thread
  std::optional<RuntimeInfo> runtime_;
  uint32_t events_ = 0;
  int registrations_ = 0;

  std::mutex sync_mu_;
  std::vector<api::PodSandbox> sync_pods_;
  std::vector<api::Container> sync_containers_;
};

}  // namespace devlet::nri
