// File: devlet/extender/server.h
//
// The extender's HTTP(S) server (cpp-httplib): `POST <prefix>/<verb>` for the filter, prioritize
// and bind verbs, plus `GET /healthz`, `/readyz` (200 only after the first full sync) and
// `/metrics` (Prometheus text). Keep-alive and a thread pool serve concurrent scheduler requests;
// bodies are capped (`max_body_bytes`) and slow clients time out (`read_timeout`).
//
//   Server server(extender, {.port = 8888, .prefix = "/devlet"});
//   DEVLET_RETURN_IF_ERROR(server.Start());   // binds; serves on a background thread
//   ... server.port() ...
//   server.Stop();
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "devlet/extender/extender.h"

namespace devlet::extender {

// ServerOptions configure the listener.
struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 8888;  // 0 picks a free port (see Server::port)
  // URL prefix of the verbs (the scheduler's urlPrefix path); a trailing '/' is ignored.
  std::string prefix = "/";
  std::string filter_verb = "filter";
  std::string prioritize_verb = "prioritize";
  std::string bind_verb = "bind";
  // TLS: both set serves HTTPS.
  std::string cert_file;
  std::string key_file;
  size_t max_body_bytes = 16u << 20;
  // Per-read timeout: a client silent this long is dropped.
  std::chrono::seconds read_timeout{10};
  // Whole-body deadline, so a client trickling bytes just inside read_timeout cannot hold a
  // server thread for long: past it the request gets 408 and the connection is closed. The
  // scheduler gives up on an extender call after its httpTimeout (30 s by default) anyway.
  std::chrono::seconds request_timeout{30};
  int threads = 16;
};

// Server serves an Extender over HTTP.
class Server {
 public:
  Server(Extender& extender, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Start binds the port and serves on a background thread.
  absl::Status Start();
  // Stop stops serving and joins the thread.
  void Stop();
  // port is the bound port (after Start).
  int port() const { return port_; }

 private:
  struct Impl;
  Extender& extender_;
  ServerOptions options_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  int port_ = 0;
};

// MetricsText renders the extender's counters in the Prometheus text format.
std::string MetricsText(const Extender& extender);

}  // namespace devlet::extender
