// File: devlet/nri/runtime_session.h
//
// The runtime's side of one plugin connection, for tests and the standalone demo: serves
// Runtime.RegisterPlugin / UpdateContainers and calls the plugin's service.
//
//   DEVLET_ASSIGN_OR_RETURN(auto session, RuntimeSession::Accept(listen_fd, 5s));
//   DEVLET_ASSIGN_OR_RETURN(uint32_t events, session->Configure({.nri_version = "v0.12.5"}));
//   DEVLET_ASSIGN_OR_RETURN(api::CreateContainerResponse reply,
//                           session->Call<api::CreateContainerResponse>("CreateContainer", req));
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/common/status.h"
#include "devlet/nri/connection.h"
#include "devlet/nri/stub.h"

namespace devlet::nri {

// RuntimeConfig is what the runtime tells a plugin in Configure.
struct RuntimeConfig {
  std::string config;
  std::string runtime_name = "devlet-test-runtime";
  std::string runtime_version = "v0.0.0";
  std::string nri_version = kImplementedNriVersion;  // "" plays a pre-v0.12 runtime
  std::chrono::milliseconds registration_timeout{5000};
  std::chrono::milliseconds request_timeout{2000};
};

// RuntimeSession is one connected plugin as the runtime sees it. Thread-safe.
class RuntimeSession {
 public:
  // Start serves the runtime side on `trunk` and waits up to `timeout` for RegisterPlugin.
  static absl::StatusOr<std::unique_ptr<RuntimeSession>> Start(UniqueFd trunk,
                                                               std::chrono::milliseconds timeout);
  // Accept takes the next connection on a listening socket, then Start()s.
  static absl::StatusOr<std::unique_ptr<RuntimeSession>> Accept(int listen_fd,
                                                                std::chrono::milliseconds timeout);

  // Configure sends ConfigureRequest and returns the plugin's event mask.
  absl::StatusOr<uint32_t> Configure(const RuntimeConfig& config);

  // Synchronize sends pods and containers in pages of at most `page` objects of each kind
  // (0: one message), checking the plugin's paging contract; returns the final updates.
  absl::StatusOr<std::vector<api::ContainerUpdate>> Synchronize(
      const std::vector<api::PodSandbox>& pods, const std::vector<api::Container>& containers,
      size_t page = 0);

  // Call invokes a Plugin service method with a typed reply.
  template <typename Reply, typename Request>
  absl::StatusOr<Reply> Call(const std::string& method, const Request& request) {
    DEVLET_ASSIGN_OR_RETURN(std::string payload,
                            connection_->Call(kPluginService, method, request.SerializeAsString(),
                                              request_timeout_));
    Reply reply;
    if (!reply.ParseFromString(payload)) {
      return Internal("undecodable " + method + " reply");
    }
    return reply;
  }

  // plugin_name / plugin_index as registered.
  std::string plugin_name() const;
  std::string plugin_index() const;
  // updates returns every UpdateContainers request the plugin sent.
  std::vector<api::UpdateContainersRequest> updates() const;
  // connection gives access to the transport (Close(), closed()).
  Connection& connection() { return *connection_; }

 private:
  RuntimeSession() = default;

  std::chrono::milliseconds request_timeout_{2000};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool registered_ = false;
  std::string name_;
  std::string index_;
  std::vector<api::UpdateContainersRequest> updates_;
  // Last, so that it is destroyed first: its threads run the handlers, which use the members
  // above, until its destructor has joined them (TSan: a handler notified cv_ after it was gone).
  std::unique_ptr<Connection> connection_;
};

}  // namespace devlet::nri
