// File: devlet/node/health_server.h
//
// HealthServer answers HTTP GET /healthz on 127.0.0.1:<port> with 200 "ok" or 503 "unhealthy"
// from a probe (liveness for the DaemonSet; --healthcheck-port). Any other path is 404. One
// request per connection, a tiny blocking server on one thread: cheap and dependency-free.
//
//   DEVLET_ASSIGN_OR_RETURN(auto server, HealthServer::Start(8080, [&] { return agent.Healthy(); }));
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"

namespace devlet::node {

class HealthServer {
 public:
  // Start listens on 127.0.0.1:`port` (0: an ephemeral port, see port()).
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(int port,
                                                             std::function<bool()> probe);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Stop closes the socket and joins the thread. Idempotent.
  void Stop();
  int port() const { return port_; }

 private:
  HealthServer(int fd, int port, std::function<bool()> probe);
  void Loop();

  int fd_;
  int port_;
  std::function<bool()> probe_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace devlet::node
