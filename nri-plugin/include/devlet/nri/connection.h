// File: devlet/nri/connection.h
//
// One NRI trunk (a connected unix stream socket) carrying two ttrpc connections through the NRI
// multiplexer: on one mux connection this side is the ttrpc server, on the other the client.
//
//   plugin role:  serve kPluginServiceConn (1), call kRuntimeServiceConn (2)
//   runtime role: serve kRuntimeServiceConn (2), call kPluginServiceConn (1)
//
// A small pool of threads takes turns reading the socket (leader/follower): the socket is always
// being read, whatever the handlers do, and a request is served by the thread that read it while
// an idle thread takes over reading; responses wake the waiting caller. Writes are serialized per message. Unknown
// services and methods get Unimplemented; oversized messages get ResourceExhausted; a malformed
// trunk closes the connection (as the Go side does).
//
//   auto services = std::make_shared<ServiceRegistry>();
//   services->Register("nri.pkg.api.v1alpha1.Plugin", "Configure", handler);
//   DEVLET_ASSIGN_OR_RETURN(auto conn, Connection::Start(std::move(fd), {.services = services}));
//   DEVLET_ASSIGN_OR_RETURN(std::string reply,
//                           conn->Call("nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin", req, 5s));
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/nri/framing.h"
#include "devlet/nri/socket.h"

namespace devlet::nri {

// CallContext describes the request a handler serves.
struct CallContext {
  std::string service;
  std::string method;
  uint32_t stream_id = 0;
  // When the caller gives up (from the request's timeout_nano); time_point::max() when unset.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// MethodHandler serves one ttrpc method: serialized request in, serialized response out. A
// non-OK status travels to the caller as the ttrpc status (code and message).
using MethodHandler =
    std::function<absl::StatusOr<std::string>(const CallContext& context, std::string_view payload)>;

// ServiceRegistry maps (service, method) to handlers. Fill it before starting a connection.
class ServiceRegistry {
 public:
  // Register adds or replaces the handler of `service`/`method`.
  void Register(const std::string& service, const std::string& method, MethodHandler handler);

  // Find returns the handler, or Unimplemented("service X" / "method Y") as ttrpc does.
  absl::StatusOr<const MethodHandler*> Find(const std::string& service,
                                            const std::string& method) const;

 private:
  std::map<std::string, std::map<std::string, MethodHandler>, std::less<>> services_;
};

// ConnectionOptions configures a Connection.
struct ConnectionOptions {
  uint32_t serve_conn = kPluginServiceConn;  // mux connection where we answer requests
  uint32_t call_conn = kRuntimeServiceConn;  // mux connection where we send requests
  std::shared_ptr<const ServiceRegistry> services;  // null: every request is Unimplemented
  int workers = 4;  // threads reading and running handlers (at least 2)
  // Called once, from a pool thread, when the connection is gone (EOF, error or Close()).
  // Must not destroy the Connection.
  std::function<void(const absl::Status& why)> on_close;
};

// Connection is one multiplexed NRI trunk. Thread-safe.
class Connection {
 public:
  // Start takes ownership of a connected stream socket and starts the reader and workers.
  static absl::StatusOr<std::unique_ptr<Connection>> Start(UniqueFd trunk,
                                                           ConnectionOptions options);

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  // Closes the socket and joins every thread. Must not run on one of this connection's threads.
  ~Connection();

  // Call sends one unary request on the call connection and waits for its response until
  // `timeout` (also sent as timeout_nano; zero means no timeout). Errors: the peer's status;
  // DeadlineExceeded; Unavailable when the connection closes; ResourceExhausted when the
  // request or the response exceeds 4 MiB.
  absl::StatusOr<std::string> Call(std::string_view service, std::string_view method,
                                   std::string_view payload, std::chrono::nanoseconds timeout);

  // Close shuts the socket down; pending calls fail with Unavailable. Idempotent, non-blocking.
  void Close();

  // closed reports whether the connection has gone; it is true before on_close runs, so
  // on_close may wake waiters that test it.
  bool closed() const;

  // WaitClosed blocks until the connection has gone and on_close has returned, or `timeout`
  // passes; returns whether both happened.
  bool WaitClosed(std::chrono::nanoseconds timeout);

  // close_reason returns why the connection went (OK while open).
  absl::Status close_reason() const;

 private:
  struct Pending {
    bool done = false;
    absl::StatusOr<std::string> result;
    std::condition_variable cv;
  };

  Connection(UniqueFd trunk, ConnectionOptions options);
  void ThreadLoop();
  std::function<void()> Lead();
  void OnMessage(uint32_t conn_id, TtrpcMessage message);
  void HandleRequest(uint32_t conn_id, TtrpcMessage message);
  void HandleResponse(TtrpcMessage message);
  void SendResponse(uint32_t conn_id, uint32_t stream_id, const absl::Status& status,
                    std::string_view payload);
  absl::Status SendMessage(uint32_t conn_id, uint32_t stream_id, TtrpcMessageType type,
                           std::string_view data);
  absl::Status SendMessageLocked(uint32_t conn_id, uint32_t stream_id, TtrpcMessageType type,
                                 std::string_view data);
  void Enqueue(std::function<void()> task);
  void Teardown(const absl::Status& why);

  UniqueFd trunk_;
  ConnectionOptions options_;

  std::mutex write_mu_;

  std::mutex pending_mu_;
  std::map<uint32_t, std::shared_ptr<Pending>> pending_;
  uint32_t next_stream_id_ = 1;
  uint32_t last_request_stream_id_ = 0;  // leader only

  std::mutex tasks_mu_;
  std::condition_variable tasks_cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  bool leader_present_ = false;
  int idle_ = 0;

  mutable std::mutex state_mu_;
  std::condition_variable state_cv_;
  bool closed_ = false;
  bool torn_down_ = false;  // closed_, and on_close has returned
  absl::Status close_reason_;
  std::atomic<bool> close_requested_{false};

  // Leader-only state.
  std::string read_buffer_;
  std::vector<std::function<void()>> ready_;
  MuxFrameDecoder mux_decoder_;
  TtrpcMessageDecoder serve_decoder_;
  TtrpcMessageDecoder call_decoder_;

  std::vector<std::thread> workers_;
};

}  // namespace devlet::nri
