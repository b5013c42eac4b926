// The REST client's transport: HTTP/1.1 over TCP, or over TLS with mbed TLS, with keep-alive
// connection reuse. It replaces libcurl, whose ~25 libraries and OpenSSL handshakes cost
// devlet-node about 7.5 MB of resident memory (dra-kubelet/README.md, "Idle RSS"); mbed TLS costs
// 0.8 MB. RestClient talks to it through the Transport interface, so tests can put a fake there.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::kube::internal {

// ClientIdentity is the client certificate chain and its key (PEM) presented to the server;
// both empty: none. Replaced as a whole when an exec plugin rotates the certificate.
struct ClientIdentity {
  std::string cert;
  std::string key;
};

// Endpoint is where requests go, parsed from the kubeconfig's server URL.
struct Endpoint {
  bool tls = true;
  // Host to connect to (an IPv6 address without brackets) and port.
  std::string host;
  std::string port;
  // The Host header: the URL's host[:port] as written.
  std::string authority;
  // Path prefix of the server URL ("" or "/prefix", no trailing slash).
  std::string prefix;
  // The name the server certificate must carry and the SNI: tls-server-name, else the host.
  std::string server_name;
};

// ParseServerUrl splits http[s]://host[:port][/prefix]; `tls_server_name` (may be empty) replaces
// the name verified in the certificate while connecting to the URL's host.
absl::StatusOr<Endpoint> ParseServerUrl(const std::string& server,
                                        const std::string& tls_server_name);

// TransportOptions configure a transport to one API server.
struct TransportOptions {
  Endpoint endpoint;
  // Trusted CA certificates (PEM); empty: the system's (/etc/ssl/certs/ca-certificates.crt).
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
};

// HttpExchange is one request and where its response body goes.
struct HttpExchange {
  std::string method = "GET";
  // Path and query, escaped; the endpoint's prefix is put in front.
  std::string target;
  // Extra header lines ("Name: value"); Host and Content-Length are added.
  std::vector<std::string> headers;
  std::string body;
  // Whether a body (and Content-Length, 0 for an empty one) is sent.
  bool send_body = false;
  // The whole exchange (connect included) ends with a timeout at this point.
  std::chrono::steady_clock::time_point deadline;
  // Called with the status code and each piece of the (de-chunked) body; false stops the
  // transfer (TransportError::kAborted).
  std::function<bool(long code, std::string_view data)> on_body;
  // Polled at least every 200 ms while waiting for the network; true aborts (kAborted). Optional.
  std::function<bool()> cancelled;
};

// TransportError says how an exchange failed; the retry policy depends on it.
enum class TransportError {
  kNone,
  kNotSent,  // resolving, connecting or the TLS handshake failed: the request never left
  kBroken,   // the connection failed or closed before the response was complete
  kTimeout,  // the deadline passed
  kAborted,  // on_body returned false or cancelled() true
  kFatal,    // the server's certificate is not trusted, our credentials are unusable, bad reply
};

// HttpResult is the outcome of an exchange; `code` is set once a status line was read.
struct HttpResult {
  long code = 0;
  // Retry-After in seconds; -1: absent.
  long retry_after_s = -1;
  TransportError error = TransportError::kNone;
  // Why it failed, for a person ("connect to 127.0.0.1 port 1: Connection refused").
  std::string message;
};

// Transport sends HTTP requests to one API server. Thread-safe.
class Transport {
 public:
  virtual ~Transport() = default;
  // RoundTrip sends one request presenting `identity` (may be null: none). Idle connections are
  // reused only with the same identity object.
  virtual HttpResult RoundTrip(const HttpExchange& exchange,
                               const std::shared_ptr<const ClientIdentity>& identity) = 0;
  // CloseIdle closes every idle connection (after the client certificate changed).
  virtual void CloseIdle() = 0;
};

// NewHttpTransport makes the real transport; an unreadable CA is an InvalidArgument error.
absl::StatusOr<std::unique_ptr<Transport>> NewHttpTransport(TransportOptions options);

// UrlEscape percent-encodes everything but RFC 3986's unreserved characters.
std::string UrlEscape(std::string_view text);

}  // namespace devlet::kube::internal
