// File: devlet/kube/rest_client.h
//
// The kube-apiserver client (HTTP/1.1 of its own, TLS by mbed TLS), in two layers:
//   - RestClient: HTTP to the API server with authentication (bearer token re-read on rotation,
//     client certificates, exec credential plugins whose token and client certificate are renewed
//     at expiry and after a 401), TLS verification, a client-side rate limit (token bucket,
//     client-go's 5 QPS / burst 10 by default), retries with exponential backoff on 429
//     (Retry-After honoured), 502-504, other 5xx and lost connections or timeouts when the request
//     is idempotent, and the API's Status objects mapped to absl::Status codes; JSON bodies as
//     strings; streaming for watches.
//   - ApiServerStore: the ObjectStore of devlet/kube/client.h over RestClient for the typed kinds
//     (DeviceClass, ResourceSlice, ResourceClaim incl. status, ResourceClaimTemplate,
//     DeviceTaintRule, Node, Pod), plus JSON merge patch and server-side apply.
//
//   DEVLET_ASSIGN_OR_RETURN(RestConfig config, LoadRestConfig(kubeconfig_flag));
//   DEVLET_ASSIGN_OR_RETURN(std::unique_ptr<ApiServerStore> store, ApiServerStore::Create(config));
//   DEVLET_ASSIGN_OR_RETURN(Object claim, store->Apply(Kind::kResourceClaim, {"ns", "c"}, json,
//       {.field_manager = "devlet", .force = true, .subresource = "status"}));
//
// Status codes (from the HTTP code and the Status object's reason):
//   404 NotFound -> NotFound; 409 AlreadyExists -> AlreadyExists; 409 Conflict -> Aborted;
//   403 -> PermissionDenied; 401 -> Unauthenticated; 400 / 422 Invalid -> InvalidArgument;
//   410 Gone / Expired -> OutOfRange; 429 -> ResourceExhausted; 504 and no answer within
//   request_timeout -> DeadlineExceeded; other 5xx and connection failures -> Unavailable. Messages name the object and carry the
//   server's message: `ResourceClaim "ns/c": resourceclaims.resource.k8s.io "c" not found`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/kube/client.h"
#include "devlet/kube/kubeconfig.h"

namespace devlet::kube {

namespace internal {
class Transport;  // devlet/kube/http_transport.h
}  // namespace internal

// RestRequest is one API request. `path` starts with "/" ("/api/v1/nodes/n1").
struct RestRequest {
  std::string method = "GET";
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;  // URL-encoded by the client
  std::string body;
  std::string content_type = "application/json";
  // Names the object in error messages (`ResourceClaim "ns/c"`); empty: the path.
  std::string what;
  // Whether the request may be repeated after the connection broke mid-request (POST: no).
  bool idempotent = true;
};

// RestResponse is a successful (2xx) response.
struct RestResponse {
  long code = 0;
  std::string body;
};

// StatusFromResponse maps an HTTP error response (its code and body, a Status object when the API
// server wrote one) to an absl::Status naming `what`. Exposed for tests.
absl::Status StatusFromResponse(long code, const std::string& body, const std::string& what);

// RateLimiter is a token bucket: `burst` tokens, refilled at `qps` per second.
class RateLimiter {
 public:
  RateLimiter(double qps, int burst);
  // Wait blocks until a token is available and takes it; returns how long it waited.
  std::chrono::nanoseconds Wait();

 private:
  std::mutex mu_;
  double qps_;
  double burst_;
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

// RestClient sends requests to one API server. Thread-safe.
class RestClient {
 public:
  // Create validates the config (server URL, readable credential files).
  static absl::StatusOr<std::unique_ptr<RestClient>> Create(RestConfig config);
  // CreateWithTransport is Create sending through `transport` (a fake in tests; null: the real
  // HTTP/TLS transport to config.server).
  static absl::StatusOr<std::unique_ptr<RestClient>> CreateWithTransport(
      RestConfig config, std::unique_ptr<internal::Transport> transport);
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  // Do sends a request, waiting for the rate limiter and retrying as configured. Non-2xx
  // responses become a Status (see the file comment).
  absl::StatusOr<RestResponse> Do(const RestRequest& request);

  // Stream sends a GET whose response is a stream of newline-separated JSON values (a watch) and
  // calls `on_line` for each line, until the server ends the response, `stop` becomes true or
  // `on_line` returns false. Rate limited; not retried (the caller reconnects).
  absl::Status Stream(const RestRequest& request, const std::function<bool(std::string)>& on_line,
                      const std::atomic<bool>& stop);

  const RestConfig& config() const { return config_; }

  // Counters for tests and metrics.
  struct Stats {
    std::atomic<long> requests{0};  // HTTP attempts, retries included
    std::atomic<long> retries{0};
    std::atomic<long> token_reloads{0};  // token file reads and exec plugin runs
    // Times an exec plugin's client certificate was replaced by a different one.
    std::atomic<long> cert_rotations{0};
    std::atomic<long long> throttled_ns{0};  // time spent waiting for the rate limiter
  };
  const Stats& stats() const { return stats_; }

  struct Impl;  // transport and client identity (implementation detail)

 private:
  explicit RestClient(RestConfig config);
  // Credentials returns the bearer token for the next request (empty: none) and, in `serial`,
  // which exec plugin answer it (and the client certificate in use) came from. It re-reads the
  // token file or re-runs the exec plugin when due. `after_401`: the server refused the
  // credential of `serial`; it is replaced unless another request did so meanwhile. An error
  // when an exec credential expired (or was refused) and the plugin could not renew it.
  absl::StatusOr<std::string> Credentials(bool after_401, std::uint64_t& serial);
  // RefreshExecLocked runs the exec plugin and installs its token and, unless the kubeconfig
  // has a client certificate of its own, its client certificate. Needs token_mu_.
  absl::Status RefreshExecLocked();
  // RefreshesOn401 reports whether a 401 may be cured by reading the credential again.
  bool RefreshesOn401() const { return !config_.token_file.empty() || config_.exec.has_value(); }

  RestConfig config_;
  RateLimiter limiter_;
  std::unique_ptr<Impl> impl_;
  std::mutex token_mu_;
  std::string token_;
  std::chrono::steady_clock::time_point token_read_{};
  // Exec plugin credential expiry (system clock, as the plugin reports it); nullopt: none.
  std::optional<std::chrono::system_clock::time_point> exec_expiry_;
  // Counts successful exec plugin runs (see Credentials).
  std::uint64_t exec_serial_ = 0;
  // Whether the exec plugin's client certificate is used (the kubeconfig has none).
  bool exec_supplies_cert_ = false;
  Stats stats_;
};

// ResourceInfo describes where a kind lives in the API.
struct ResourceInfo {
  std::string group;    // "" for the core group
  std::string version;  // "v1"
  std::string plural;   // "resourceclaims"
  std::string kind;     // "ResourceClaim"
  bool namespaced = false;
};

// ResourceFor returns the API resource of a kind (all resource.k8s.io kinds are v1).
const ResourceInfo& ResourceFor(Kind kind);

// ResourcePath returns the collection path ("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims")
// or, with a name, the object path; `subresource` ("status") is appended to an object path.
std::string ResourcePath(Kind kind, const std::string& namespace_name,
                         const std::string& name = std::string(),
                         const std::string& subresource = std::string());

// PatchType selects the patch format.
enum class PatchType {
  kMerge,  // application/merge-patch+json (RFC 7386)
  kApply,  // application/apply-patch+yaml: server-side apply (the body is JSON, which is YAML)
};

// PatchOptions tune Patch and Apply.
struct PatchOptions {
  // fieldManager (required for server-side apply).
  std::string field_manager;
  // force: take ownership of conflicting fields (server-side apply only).
  bool force = false;
  // "status" patches the status subresource; empty: the object.
  std::string subresource;
};

// ApiServerStore is the ObjectStore backed by a kube-apiserver. Watches list first (every object
// reported kAdded), then watch from the list's resourceVersion with bookmarks; on 410 Gone they
// relist and report the difference (kAdded / kModified / kDeleted); on a lost connection or a
// server timeout they reconnect from the last resourceVersion seen, with backoff.
class ApiServerStore final : public ObjectStore {
 public:
  static absl::StatusOr<std::unique_ptr<ApiServerStore>> Create(RestConfig config);

  absl::StatusOr<Object> Get(Kind kind, const ObjectKey& key) override;
  absl::StatusOr<std::vector<Object>> List(Kind kind, const ListOptions& options) override;
  absl::StatusOr<Object> Create(const Object& object) override;
  absl::StatusOr<Object> Update(const Object& object) override;
  absl::StatusOr<Object> UpdateStatus(const Object& object) override;
  absl::Status Delete(Kind kind, const ObjectKey& key, const std::string& uid) override;
  absl::StatusOr<std::unique_ptr<kube::Watcher>> Watch(Kind kind, const ListOptions& options,
                                                     WatchCallback callback) override;

  // Patch applies a JSON merge patch or a server-side apply configuration (`patch`, JSON) to an
  // object and returns the result.
  absl::StatusOr<Object> Patch(Kind kind, const ObjectKey& key, const std::string& patch,
                               PatchType type, const PatchOptions& options = {});

  // Apply is server-side apply of a whole typed object (apiVersion, kind, name, namespace taken
  // from it); the field manager then owns every field the object sets.
  absl::StatusOr<Object> Apply(const Object& object, const PatchOptions& options);

  // BindPod binds a pod to a node through the pods/binding subresource (what kube-scheduler and
  // extenders with a bind verb do; an update of spec.nodeName is refused by the API server). A
  // non-empty `uid` is the binding's UID precondition: a pod recreated under the same name is not
  // bound. An already bound pod is a Conflict (Aborted).
  absl::Status BindPod(const std::string& namespace_name, const std::string& name,
                       const std::string& uid, const std::string& node);

  // ListWithVersion is List plus the list's resourceVersion (for callers that watch themselves).
  absl::StatusOr<std::pair<std::vector<Object>, std::string>> ListWithVersion(
      Kind kind, const ListOptions& options);

  RestClient& client() { return *client_; }

 private:
  explicit ApiServerStore(std::unique_ptr<RestClient> client) : client_(std::move(client)) {}
  std::unique_ptr<RestClient> client_;
};

}  // namespace devlet::kube
