// File: devlet/node/health_server.h
//
// HealthServer answers HTTP GET on 127.0.0.1:<port> (--healthcheck-port):
//   /healthz  200 "ok" or 503 "unhealthy" from a probe (liveness for the DaemonSet);
//   /metrics  the Prometheus text exposition from a renderer (when one is given).
// Any other path is 404, any other method 405. One request per connection, a tiny blocking
// server on one thread: cheap and dependency-free, and scrapes are rare.
//
//   DEVLET_ASSIGN_OR_RETURN(auto server, HealthServer::Start(8080, [&] { return agent.Healthy(); },
//                                                            [&] { return agent.MetricsText(); }));
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace devlet::node {

class HealthServer {
 public:
  // Start listens on 127.0.0.1:`port` (0: an ephemeral port, see port()). `metrics` may be
  // empty (then /metrics is 404).
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      int port, std::function<bool()> probe, std::function<std::string()> metrics = {});
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Stop closes the socket and joins the thread. Idempotent.
  void Stop();
  int port() const { return port_; }

 private:
  HealthServer(int fd, int port, std::function<bool()> probe,
               std::function<std::string()> metrics);
  void Loop();

  int fd_;
  int port_;
  std::function<bool()> probe_;
  std::function<std::string()> metrics_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace devlet::node
