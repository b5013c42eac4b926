// File: nri-plugin/src/events.h (private to devlet::nri_plugin)
//
// The NRI events as one table, one row per event: the Handlers member that handles it, its
// dedicated rpc, the first NRI version whose runtimes know it, and whether runtimes before
// v0.12.0 deliver it through StateChange. The subscription (SubscribedEvents), the version masks
// (ValidEventsMask), the rpcs the stub serves and the StateChange dispatch are all derived from
// it, so handling a new event is a Handlers member and one row in events.cc.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/common/status.h"
#include "devlet/nri/connection.h"
#include "devlet/nri/stub.h"

namespace devlet::nri::internal {

// MinVersion is the first NRI version whose runtimes know an event.
struct MinVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
};

// EventRow describes one NRI event.
struct EventRow {
  api::Event event;
  // The Plugin service rpc of the event (NRI v0.12+ runtimes call it).
  std::string_view method;
  // Runtimes of this NRI version and newer accept the event in a subscription; {0, 0, 0}: every
  // runtime, including one whose version we cannot tell.
  MinVersion since;
  // Whether `handlers` has a handler for the event (its bit in the subscription).
  bool (*subscribed)(const Handlers& handlers);
  // Registers the event's rpc (`row.method`), answered by `handlers`, which must outlive the
  // registry's use. With `state_change_only`, the rpc of an event that has a StateChange fallback
  // answers Unimplemented (tests drive the fallback with a new runtime that way).
  void (*serve)(const EventRow& row, ServiceRegistry& services, const Handlers* handlers,
                bool state_change_only);
  // Delivers a StateChange of this event to its handler; null for the events that have a reply
  // of their own, which runtimes never send through StateChange.
  absl::Status (*state_change)(const Handlers& handlers, const api::StateChangeEvent& event);
};

// EventTable returns every event this plugin library knows, in the order of their numbers.
std::span<const EventRow> EventTable();

// FindEvent returns the row of `event`, or null for an event not in the table.
const EventRow* FindEvent(api::Event event);

// DeliverStateChange hands a StateChange (runtimes before NRI v0.12.0) to the event's handler;
// events without a StateChange fallback, or unknown to the table, are ignored.
absl::Status DeliverStateChange(const Handlers& handlers, const api::StateChangeEvent& event);

// ServeTyped registers a Plugin service rpc: decode the request, run `fn`, encode the reply.
template <typename Request, typename Reply, typename Fn>
void ServeTyped(ServiceRegistry& services, const std::string& method, Fn fn) {
  services.Register(
      kPluginService, method,
      [method, fn = std::move(fn)](const CallContext&,
                                   std::string_view payload) -> absl::StatusOr<std::string> {
        Request request;  // handed over mutable: handlers may move parts out
        if (!request.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          return InvalidArgument("NRI " + method + ": undecodable request");
        }
        absl::StatusOr<Reply> reply = fn(request);
        if (!reply.ok()) {
          return reply.status();
        }
        return reply->SerializeAsString();
      });
}

}  // namespace devlet::nri::internal
