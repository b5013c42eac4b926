// File: devlet/extender/server.h
//
// The extender's HTTP(S) server (Boost.Beast on one Asio event loop, OpenSSL for TLS):
// `POST <prefix>/<verb>` for the filter, prioritize and bind verbs, plus `GET /healthz`, `/readyz`
// (200 only after the first full sync) and `/metrics` (Prometheus text).
//
// A connection holds no thread while it is idle or sending its request: the event loop reads
// each request whole (header and body size limits, header/body/idle deadlines) and only then
// hands it to a bounded pool of worker threads, which run the verbs. So slow, stalled or idle
// clients cost a file descriptor and a few KB each, up to `max_connections`; past that new
// connections get 503 at once. `/healthz`, `/readyz` and `/metrics` are answered by the event
// loop itself, so they answer while every worker is busy; `/healthz` is 503 when every worker has
// been on its request for longer than `stuck_timeout` (the server cannot serve).
//
// With TLS and `client_ca_file`, the verbs need a client certificate signed by that CA (and, with
// `allowed_client_names`, one of those common names); the health, readiness and metrics paths
// stay open so that kubelet probes, which present no certificate, keep working.
//
//   Server server(extender, {.port = 8888, .prefix = "/devlet"});
//   DEVLET_RETURN_IF_ERROR(server.Start());   // binds; serves on a background thread
//   ... server.port() ...
//   server.Stop();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "devlet/extender/extender.h"

namespace devlet::extender {

// ServerOptions configure the listener. Designated initializers must follow this order.
struct ServerOptions {
  // Listen address: loopback unless told otherwise (the verbs write allocations; see the TLS
  // options for serving them beyond this host).
  std::string host = "127.0.0.1";
  int port = 8888;  // 0 picks a free port (see Server::port)
  // URL prefix of the verbs (the scheduler's urlPrefix path); a trailing '/' is ignored.
  std::string prefix = "/";
  std::string filter_verb = "filter";
  std::string prioritize_verb = "prioritize";
  std::string bind_verb = "bind";
  // TLS: both set serves HTTPS (TLS 1.2 and 1.3 only).
  std::string cert_file;
  std::string key_file;
  // PEM CA bundle: the verbs then need a client certificate that verifies against it.
  std::string client_ca_file;
  // With client_ca_file: when not empty, the client certificate's subject common name must be one
  // of these (the cluster CA also signs every kubelet's client certificate).
  std::vector<std::string> allowed_client_names;
  // Largest request body (413 past it, whether Content-Length or chunked).
  size_t max_body_bytes = 16u << 20;
  // Largest request line plus header fields (431 past it).
  size_t max_header_bytes = 64u << 10;
  // Longest silence inside a request's body: past it, 408 and the connection is closed.
  std::chrono::seconds read_timeout{10};
  // Deadline for the request line and headers, from the request's first byte (also the TLS
  // handshake's deadline): a client trickling header bytes gets 408 and is closed.
  std::chrono::seconds header_timeout{10};
  // Deadline for the whole request (headers and body), from its first byte: a client trickling
  // body bytes just inside read_timeout gets 408 and is closed. Also the deadline for writing a
  // reply to a client that does not read it.
  std::chrono::seconds request_timeout{30};
  // A connection with no request (new, or keep-alive between requests) is closed after this.
  std::chrono::seconds idle_timeout{60};
  // Worker threads running the verbs.
  int threads = 16;
  // Complete verb requests waiting for a worker beyond which new ones get 503 (0: 4 x threads).
  int max_queued_requests = 0;
  // Open connections beyond which new ones get 503 and are closed.
  int max_connections = 512;
  // Bytes of request bodies buffered at once over all connections, beyond which a new request
  // gets 503 (0: 8 x max_body_bytes). A chunked body counts as max_body_bytes.
  size_t max_buffered_body_bytes = 0;
  // /healthz is 503 once every worker has been on its current request for this long.
  std::chrono::seconds stuck_timeout{60};
};

// ServerStats are the server's own counters (also in /metrics, prefix devlet_extender_http_).
struct ServerStats {
  int64_t connections = 0;           // open, counted against max_connections
  int64_t connections_rejected = 0;  // turned away: max_connections reached
  int64_t requests_rejected = 0;     // 503: workers' queue full or body budget used up
  int64_t timeouts = 0;              // 408 or closed: header, body, idle or write deadline
  int64_t unauthenticated = 0;       // verbs refused: no, or a disallowed, client certificate
  int64_t workers_busy = 0;
  int64_t requests_queued = 0;
};

// Server serves an Extender over HTTP.
class Server {
 public:
  Server(Extender& extender, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Start binds the port and serves on background threads (one event loop, `threads` workers).
  absl::Status Start();
  // Stop stops accepting, gives requests being served up to 2 s to finish, closes every
  // connection and joins the threads (a worker stuck in a verb is waited for).
  void Stop();

  // port is the bound port (after Start).
  int port() const { return port_; }

  // stats reads the server's counters.
  ServerStats stats() const;

  // Impl is the event loop, the workers and the connections' sessions (server.cc).
  struct Impl;

 private:
  Extender& extender_;
  ServerOptions options_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// MetricsText renders the extender's counters in the Prometheus text format.
std::string MetricsText(const Extender& extender);

}  // namespace devlet::extender
