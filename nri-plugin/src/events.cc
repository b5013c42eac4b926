#include "events.h"

#include <array>
#include <type_traits>

#include "devlet/common/log.h"

namespace devlet::nri::internal {
namespace {

// Call hands a request's parts to `handler` in the shape the handler takes: (pod, container,
// resources), (pod, container), (pod), or the whole request.
template <typename Handler, typename Request>
auto Call(const Handler& handler, const Request& request) {
  if constexpr (std::is_invocable_v<Handler, const api::PodSandbox&, const api::Container&,
                                    const api::LinuxResources&>) {
    return handler(request.pod(), request.container(), request.linux_resources());
  } else if constexpr (std::is_invocable_v<Handler, const api::PodSandbox&,
                                           const api::Container&>) {
    return handler(request.pod(), request.container());
  } else if constexpr (std::is_invocable_v<Handler, const api::PodSandbox&>) {
    return handler(request.pod());
  } else {
    return handler(request);
  }
}

// ToReply turns a handler's answer into the rpc's: a Status means an empty reply when OK.
template <typename Reply, typename Result>
absl::StatusOr<Reply> ToReply(Result result) {
  if constexpr (std::is_same_v<Result, absl::Status>) {
    if (!result.ok()) {
      return result;
    }
    return Reply();
  } else {
    return result;
  }
}

template <auto Member>
bool Subscribed(const Handlers& handlers) {
  return static_cast<bool>(handlers.*Member);
}

// An event without a handler is answered with an empty reply (the runtime may send events nobody
// subscribed to, e.g. with events_override).
template <auto Member, typename Request, typename Reply, bool kHasStateChange>
void ServeRpc(const EventRow& row, ServiceRegistry& services, const Handlers* handlers,
              bool state_change_only) {
  const bool refuse = kHasStateChange && state_change_only;
  const std::string method(row.method);
  ServeTyped<Request, Reply>(
      services, method,
      [handlers, refuse, method](const Request& request) -> absl::StatusOr<Reply> {
        if (refuse) {
          return Unimplemented("method " + method);
        }
        const auto& handler = handlers->*Member;
        if (!handler) {
          return Reply();
        }
        return ToReply<Reply>(Call(handler, request));
      });
}

template <auto Member>
absl::Status StateChange(const Handlers& handlers, const api::StateChangeEvent& event) {
  const auto& handler = handlers.*Member;
  return handler ? Call(handler, event) : absl::OkStatus();
}

// Notify is the row of an event without a reply of its own: runtimes before NRI v0.12.0 send it
// through StateChange, newer ones through its rpc.
template <auto Member, typename Request, typename Reply>
constexpr EventRow Notify(api::Event event, std::string_view method, MinVersion since = {}) {
  return {.event = event,
          .method = method,
          .since = since,
          .subscribed = &Subscribed<Member>,
          .serve = &ServeRpc<Member, Request, Reply, true>,
          .state_change = &StateChange<Member>};
}

// Answer is the row of an event that only ever comes through its own rpc (it has a reply, or
// is newer than StateChange's use).
template <auto Member, typename Request, typename Reply>
constexpr EventRow Answer(api::Event event, std::string_view method, MinVersion since = {}) {
  return {.event = event,
          .method = method,
          .since = since,
          .subscribed = &Subscribed<Member>,
          .serve = &ServeRpc<Member, Request, Reply, false>,
          .state_change = nullptr};
}

constexpr MinVersion kV0_10_0{0, 10, 0};

// One row per event, in the order of their numbers (api.proto, enum Event).
constexpr std::array kEvents = {
    Notify<&Handlers::run_pod_sandbox, api::RunPodSandboxRequest, api::RunPodSandboxResponse>(
        api::RUN_POD_SANDBOX, "RunPodSandbox"),
    Notify<&Handlers::stop_pod_sandbox, api::StopPodSandboxRequest, api::StopPodSandboxResponse>(
        api::STOP_POD_SANDBOX, "StopPodSandbox"),
    Notify<&Handlers::remove_pod_sandbox, api::RemovePodSandboxRequest,
           api::RemovePodSandboxResponse>(api::REMOVE_POD_SANDBOX, "RemovePodSandbox"),
    Answer<&Handlers::create_container, api::CreateContainerRequest,
           api::CreateContainerResponse>(api::CREATE_CONTAINER, "CreateContainer"),
    Notify<&Handlers::post_create_container, api::PostCreateContainerRequest,
           api::PostCreateContainerResponse>(api::POST_CREATE_CONTAINER, "PostCreateContainer"),
    Notify<&Handlers::start_container, api::StartContainerRequest, api::StartContainerResponse>(
        api::START_CONTAINER, "StartContainer"),
    Notify<&Handlers::post_start_container, api::PostStartContainerRequest,
           api::PostStartContainerResponse>(api::POST_START_CONTAINER, "PostStartContainer"),
    Answer<&Handlers::update_container, api::UpdateContainerRequest,
           api::UpdateContainerResponse>(api::UPDATE_CONTAINER, "UpdateContainer"),
    Notify<&Handlers::post_update_container, api::PostUpdateContainerRequest,
           api::PostUpdateContainerResponse>(api::POST_UPDATE_CONTAINER, "PostUpdateContainer"),
    Answer<&Handlers::stop_container, api::StopContainerRequest, api::StopContainerResponse>(
        api::STOP_CONTAINER, "StopContainer"),
    Notify<&Handlers::remove_container, api::RemoveContainerRequest,
           api::RemoveContainerResponse>(api::REMOVE_CONTAINER, "RemoveContainer"),
    Answer<&Handlers::update_pod_sandbox, api::UpdatePodSandboxRequest,
           api::UpdatePodSandboxResponse>(api::UPDATE_POD_SANDBOX, "UpdatePodSandbox", kV0_10_0),
    Notify<&Handlers::post_update_pod_sandbox, api::PostUpdatePodSandboxRequest,
           api::PostUpdatePodSandboxResponse>(api::POST_UPDATE_POD_SANDBOX,
                                              "PostUpdatePodSandbox", kV0_10_0),
    Answer<&Handlers::validate_container_adjustment, api::ValidateContainerAdjustmentRequest,
           api::ValidateContainerAdjustmentResponse>(api::VALIDATE_CONTAINER_ADJUSTMENT,
                                                     "ValidateContainerAdjustment", kV0_10_0),
};

}  // namespace

std::span<const EventRow> EventTable() { return kEvents; }

const EventRow* FindEvent(api::Event event) {
  for (const EventRow& row : kEvents) {
    if (row.event == event) {
      return &row;
    }
  }
  return nullptr;
}

absl::Status DeliverStateChange(const Handlers& handlers, const api::StateChangeEvent& event) {
  const EventRow* row = FindEvent(event.event());
  if (row == nullptr || row->state_change == nullptr) {
    // Events with replies of their own never come through StateChange; ignore others.
    log::Logger().V(2).Info("Ignoring NRI StateChange event", "event",
                            static_cast<int>(event.event()));
    return absl::OkStatus();
  }
  return row->state_change(handlers, event);
}

}  // namespace devlet::nri::internal
