// File: devlet/node/health_server.h
//
// HealthServer answers HTTP GET on <address>:<port> (--healthcheck-address, default 127.0.0.1;
// --healthcheck-port):
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
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet::node {

class HealthServer {
 public:
  // The address Start(port, ...) binds: only local processes can reach it. A pod on the host
  // network (the chart) binds the node's address or 0.0.0.0 instead, so that the kubelet's probes
  // and a Prometheus in the cluster reach it.
  static constexpr std::string_view kDefaultAddress = "127.0.0.1";

  // Start listens on `address`:`port` (0: an ephemeral port, see port()). `address` is a numeric
  // IPv4 or IPv6 address ("0.0.0.0", "10.0.0.5", "::", "[::1]"), not a host name: a DNS lookup at
  // start-up would make the node agent depend on a resolver. "::" also accepts IPv4 clients.
  // `metrics` may be empty (then /metrics is 404).
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      std::string_view address, int port, std::function<bool()> probe,
      std::function<std::string()> metrics = {});
  // Start on kDefaultAddress.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      int port, std::function<bool()> probe, std::function<std::string()> metrics = {});

  // ValidateAddress: OK when Start would accept `address` (for flag checks before start-up).
  static absl::Status ValidateAddress(std::string_view address);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Stop closes the socket and joins the thread. Idempotent.
  void Stop();
  int port() const { return port_; }
  // The address it listens on, as given to Start (brackets removed).
  const std::string& address() const { return address_; }

 private:
  HealthServer(int fd, std::string address, int port, std::function<bool()> probe,
               std::function<std::string()> metrics);
  void Loop();

  int fd_;
  std::string address_;
  int port_;
  std::function<bool()> probe_;
  std::function<std::string()> metrics_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace devlet::node
