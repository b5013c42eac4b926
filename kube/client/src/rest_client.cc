// RestClient: HTTP to the kube-apiserver over the transport of http_transport.h (auth, TLS, rate
// limit, retries, Status mapping).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "devlet/common/status.h"
#include "devlet/kube/rest_client.h"
#include "devlet/kube/http_transport.h"

namespace devlet::kube {

// ---- Status mapping -------------------------------------------------------------------------

absl::Status StatusFromResponse(long code, const std::string& body, const std::string& what) {
  std::string reason;
  std::string message;
  try {
    const nlohmann::json j = nlohmann::json::parse(body);
    if (j.is_object() && j.value("kind", "") == "Status") {
      reason = j.value("reason", "");
      message = j.value("message", "");
    }
  } catch (const std::exception&) {
  }
  if (message.empty()) {
    message = body.substr(0, 300);
    while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
      message.pop_back();
    }
    if (message.empty()) message = "no message";
  }
  std::string text = what + ": " + message + " (HTTP " + std::to_string(code);
  if (!reason.empty()) text += " " + reason;
  text += ")";
  switch (code) {
    case 400:
    case 422:
      return InvalidArgument(text);
    case 401:
      return absl::UnauthenticatedError(text);
    case 403:
      return PermissionDenied(text);
    case 404:
      return NotFound(text);
    case 405:
    case 415:
      return Unimplemented(text);
    case 409:
      return reason == "AlreadyExists" ? AlreadyExists(text) : Aborted(text);
    case 410:
      return OutOfRange(text);
    case 429:
      return ResourceExhausted(text);
    case 504:
      return DeadlineExceeded(text);
    default:
      break;
  }
  if (code >= 500) return Unavailable(text);
  if (reason == "NotFound") return NotFound(text);
  return Internal(text);
}

// ---- Rate limiter ---------------------------------------------------------------------------

RateLimiter::RateLimiter(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)),
      last_(std::chrono::steady_clock::now()) {}

std::chrono::nanoseconds RateLimiter::Wait() {
  if (qps_ <= 0) return std::chrono::nanoseconds(0);
  std::chrono::nanoseconds wait(0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    tokens_ -= 1;  // reserve; a negative balance is paid for by waiting
    if (tokens_ < 0) {
      wait = std::chrono::nanoseconds(static_cast<long long>(-tokens_ / qps_ * 1e9));
    }
  }
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
  return wait;
}

// ---- transport plumbing ----------------------------------------------------------------------

namespace {

using internal::ClientIdentity;
using internal::TransportError;

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// What a response body goes into: the whole body (Do), or lines handed to a watch's callback
// (Stream; an error response's body is kept, up to 1 MiB, for its Status).
struct Transfer {
  std::string body;
  const std::function<bool(std::string)>* on_line = nullptr;
  std::string pending;
  bool stopped_by_callback = false;
  bool identity_rotated = false;

  bool OnBody(long code, std::string_view data) {
    if (on_line == nullptr) {
      body.append(data);
      return true;
    }
    if (code < 200 || code >= 300) {
      if (body.size() < (1u << 20)) body.append(data);
      return true;
    }
    pending.append(data);
    std::size_t start = 0;
    for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = pending.substr(start, nl - start);
      if (Trim(line).empty()) continue;
      if (!(*on_line)(std::move(line))) {
        stopped_by_callback = true;
        return false;
      }
    }
    pending.erase(0, start);
    return pending.size() <= (64u << 20);  // a runaway line ends the stream
  }
};

// Errors where the request certainly did not reach the server.
bool NotSent(TransportError error) { return error == TransportError::kNotSent; }

bool Transient(TransportError error) {
  return error == TransportError::kNotSent || error == TransportError::kBroken ||
         error == TransportError::kTimeout;
}

}  // namespace

struct RestClient::Impl {
  std::unique_ptr<internal::Transport> transport;
  std::mutex mu;
  // Replaced as a whole when an exec plugin rotates the certificate; a request keeps the one it
  // started with, and the transport reuses a connection only for the identity it was made with.
  std::shared_ptr<const ClientIdentity> identity = std::make_shared<ClientIdentity>();
  // Bumped with every new identity: streams started with an older one are closed.
  std::atomic<std::uint64_t> generation{0};

  std::pair<std::shared_ptr<const ClientIdentity>, std::uint64_t> Current() {
    std::lock_guard<std::mutex> lock(mu);
    return {identity, generation.load()};
  }
  // SetIdentity installs a client certificate and key; false when they are the ones in use.
  // Idle connections made with the old pair are closed.
  bool SetIdentity(const std::string& cert, const std::string& key) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (identity->cert == cert && identity->key == key) return false;
      identity = std::make_shared<ClientIdentity>(ClientIdentity{cert, key});
      generation++;
    }
    if (transport != nullptr) transport->CloseIdle();
    return true;
  }
};

RestClient::RestClient(RestConfig config)
    : config_(std::move(config)), limiter_(config_.qps, config_.burst),
      impl_(std::make_unique<Impl>()) {}

RestClient::~RestClient() = default;

absl::StatusOr<std::unique_ptr<RestClient>> RestClient::Create(RestConfig config) {
  return CreateWithTransport(std::move(config), nullptr);
}

absl::StatusOr<std::unique_ptr<RestClient>> RestClient::CreateWithTransport(
    RestConfig config, std::unique_ptr<internal::Transport> transport) {
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  DEVLET_ASSIGN_OR_RETURN(internal::Endpoint endpoint,
                          internal::ParseServerUrl(config.server, config.tls_server_name));
  std::unique_ptr<RestClient> client(new RestClient(config));
  Impl& impl = *client->impl_;
  auto load = [](const std::string& data, const std::string& file, const char* what,
                 std::string& out) -> absl::Status {
    if (!data.empty()) {
      out = data;
    } else if (!file.empty()) {
      absl::StatusOr<std::string> read = ReadWholeFile(file);
      if (!read.ok()) return WithContext(read.status(), what);
      out = *std::move(read);
    }
    return absl::OkStatus();
  };
  std::string cert_data;
  std::string key_data;
  DEVLET_RETURN_IF_ERROR(load(config.client_certificate_data, config.client_certificate_file,
                              "client certificate", cert_data));
  DEVLET_RETURN_IF_ERROR(
      load(config.client_key_data, config.client_key_file, "client key", key_data));
  impl.SetIdentity(cert_data, key_data);
  internal::TransportOptions options;
  options.endpoint = std::move(endpoint);
  DEVLET_RETURN_IF_ERROR(load(config.certificate_authority_data,
                              config.certificate_authority_file, "certificate authority",
                              options.ca_pem));
  options.insecure_skip_tls_verify = config.insecure_skip_tls_verify;
  options.connect_timeout = config.connect_timeout;
  if (transport == nullptr) {
    DEVLET_ASSIGN_OR_RETURN(transport, internal::NewHttpTransport(std::move(options)));
  }
  impl.transport = std::move(transport);
  if (config.exec) {
    // A client certificate in the kubeconfig wins over the plugin's (which is then ignored).
    client->exec_supplies_cert_ = cert_data.empty() && key_data.empty();
    // Run the plugin now so a broken credential fails at start-up, not at the first request.
    std::lock_guard<std::mutex> lock(client->token_mu_);
    DEVLET_RETURN_IF_ERROR(client->RefreshExecLocked());
  }
  if (!config.token_file.empty() && !config.exec) {
    std::uint64_t serial = 0;
    (void)client->Credentials(/*after_401=*/true, serial);  // reads the file now
  }
  return client;
}

absl::Status RestClient::RefreshExecLocked() {
  absl::StatusOr<ExecCredential> credential = RunExecPlugin(*config_.exec, config_);
  stats_.token_reloads++;
  if (!credential.ok()) return credential.status();
  token_ = credential->token;
  exec_expiry_ = credential->expiration;
  ++exec_serial_;
  if (exec_supplies_cert_ &&
      impl_->SetIdentity(credential->client_certificate_data, credential->client_key_data) &&
      exec_serial_ > 1) {
    stats_.cert_rotations++;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RestClient::Credentials(bool after_401, std::uint64_t& serial) {
  if (config_.exec) {
    std::lock_guard<std::mutex> lock(token_mu_);
    // Refresh a little before the expiry the plugin announced, so a request never carries a
    // credential that runs out on the way. An expiry already past makes every request run the
    // plugin, as in client-go.
    const bool expiring = exec_expiry_ && std::chrono::system_clock::now() +
                                              std::chrono::seconds(10) >= *exec_expiry_;
    // After a 401, only the first request refused with this credential runs the plugin.
    const bool refused = after_401 && serial == exec_serial_;
    if (refused || expiring) {
      // Like client-go, a credential that cannot be renewed fails the request (rather than
      // sending one the server will refuse); the next request tries the plugin again.
      DEVLET_RETURN_IF_ERROR(WithContext(RefreshExecLocked(), "getting credentials"));
    }
    serial = exec_serial_;
    return token_;
  }
  if (config_.token_file.empty()) return config_.token;
  std::lock_guard<std::mutex> lock(token_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (after_401 || token_.empty() || now - token_read_ >= config_.token_reload_interval) {
    absl::StatusOr<std::string> read = ReadWholeFile(config_.token_file);
    if (read.ok()) {
      token_ = Trim(*read);
      token_read_ = now;
      stats_.token_reloads++;
    }
  }
  return token_.empty() ? config_.token : token_;
}

namespace {

std::string BuildTarget(const RestRequest& request) {
  std::string target = request.path;
  char sep = '?';
  for (const auto& [key, value] : request.query) {
    target += sep;
    target += internal::UrlEscape(key);
    target += '=';
    target += internal::UrlEscape(value);
    sep = '&';
  }
  return target;
}

std::chrono::steady_clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  // Zero or less: no limit, ten years standing in for it.
  if (timeout.count() <= 0) return std::chrono::steady_clock::now() + std::chrono::hours(87600);
  return std::chrono::steady_clock::now() + timeout;
}

}  // namespace

// One HTTP attempt with the client identity current when it starts.
static internal::HttpResult Perform(const RestConfig& config, RestClient::Impl& impl,
                                    const RestRequest& request, const std::string& token,
                                    const std::atomic<bool>* stop, Transfer& transfer) {
  internal::HttpExchange exchange;
  exchange.method = request.method;
  exchange.target = BuildTarget(request);
  exchange.headers.push_back("User-Agent: " + config.user_agent);
  exchange.headers.push_back("Accept: application/json");
  if (!request.body.empty()) exchange.headers.push_back("Content-Type: " + request.content_type);
  if (!token.empty()) {
    exchange.headers.push_back("Authorization: Bearer " + token);
  } else if (!config.username.empty()) {
    exchange.headers.push_back("Authorization: Basic " +
                               absl::Base64Escape(config.username + ":" + config.password));
  }
  exchange.send_body = !request.body.empty() || request.method == "POST" ||
                       request.method == "PUT" || request.method == "PATCH";
  exchange.body = request.body;
  if (stop != nullptr) {
    exchange.deadline = DeadlineAfter(std::chrono::duration_cast<std::chrono::milliseconds>(
        config.watch_timeout + std::chrono::seconds(60)));
  } else {
    exchange.deadline = DeadlineAfter(config.request_timeout);
  }
  exchange.on_body = [&transfer](long code, std::string_view data) {
    return transfer.OnBody(code, data);
  };
  auto [identity, generation] = impl.Current();
  if (stop != nullptr) {
    exchange.cancelled = [stop, &impl, &transfer, generation = generation] {
      if (stop->load()) return true;
      if (impl.generation.load() != generation) {
        transfer.identity_rotated = true;
        return true;
      }
      return false;
    };
  }
  return impl.transport->RoundTrip(exchange, identity);
}

absl::StatusOr<RestResponse> RestClient::Do(const RestRequest& request) {
  const std::string what = request.what.empty() ? request.method + " " + request.path
                                                : request.what;
  bool reloaded_after_401 = false;
  std::mt19937 rng(std::random_device{}());
  auto backoff = [&](int attempt, long retry_after_s) {
    std::chrono::milliseconds delay = config_.initial_backoff * (1LL << std::min(attempt, 20));
    if (retry_after_s >= 0) {
      // Compared in seconds: a huge Retry-After overflowed when converted to milliseconds
      // (UBSan, fuzz/http_response_fuzzer.cc).
      const auto cap = std::chrono::ceil<std::chrono::seconds>(config_.max_backoff);
      delay = retry_after_s >= cap.count() ? config_.max_backoff
                                           : std::chrono::milliseconds(
                                                 std::chrono::seconds(retry_after_s));
    }
    delay = std::min(delay, config_.max_backoff);
    if (retry_after_s < 0 && delay.count() > 1) {
      delay += std::chrono::milliseconds(
          std::uniform_int_distribution<long long>(0, delay.count() / 10)(rng));
    }
    stats_.retries++;
    std::this_thread::sleep_for(delay);
  };
  absl::Status last;
  for (int attempt = 0;; ++attempt) {
    stats_.throttled_ns += limiter_.Wait().count();
    std::uint64_t serial = 0;
    absl::StatusOr<std::string> token = Credentials(/*after_401=*/false, serial);
    if (!token.ok()) return WithContext(token.status(), what);
    Transfer transfer;
    const internal::HttpResult result =
        Perform(config_, *impl_, request, *token, /*stop=*/nullptr, transfer);
    const long code = result.code;
    stats_.requests++;
    const bool more = attempt < config_.max_retries;
    if (result.error != TransportError::kNone) {
      // A server that did not answer in time is DeadlineExceeded (as a 504 is), others Unavailable.
      const std::string message =
          what + ": " + request.method + " " + config_.server + request.path + ": " + result.message;
      last = result.error == TransportError::kTimeout ? DeadlineExceeded(message)
                                                      : Unavailable(message);
      if (more && Transient(result.error) && (request.idempotent || NotSent(result.error))) {
        backoff(attempt, -1);
        continue;
      }
      return last;
    }
    if (code >= 200 && code < 300) return RestResponse{code, std::move(transfer.body)};
    if (code == 401 && RefreshesOn401() && !reloaded_after_401) {
      reloaded_after_401 = true;  // the credential may have rotated: renew it, retry once
      if (absl::Status renewed = Credentials(/*after_401=*/true, serial).status(); !renewed.ok()) {
        return absl::UnauthenticatedError(Message(StatusFromResponse(code, transfer.body, what)) +
                                          "; renewing the credential failed: " +
                                          Message(renewed));
      }
      --attempt;
      continue;
    }
    // 429 and 502-504 say the request was not acted on. Another 5xx (500 InternalError: etcd
    // timed out, a webhook failed) may have been, partly: repeated only when that is safe, or
    // when the server asks for it with Retry-After.
    const bool retryable = code == 429 || code == 502 || code == 503 || code == 504 ||
                           (code >= 500 && (request.idempotent || result.retry_after_s >= 0));
    if (more && retryable) {
      backoff(attempt, result.retry_after_s);
      continue;
    }
    return StatusFromResponse(code, transfer.body, what);
  }
}

absl::Status RestClient::Stream(const RestRequest& request,
                                const std::function<bool(std::string)>& on_line,
                                const std::atomic<bool>& stop) {
  const std::string what = request.what.empty() ? request.method + " " + request.path
                                                : request.what;
  std::uint64_t serial = 0;
  for (int auth_try = 0; auth_try < 2; ++auth_try) {
    stats_.throttled_ns += limiter_.Wait().count();
    absl::StatusOr<std::string> token = Credentials(/*after_401=*/auth_try > 0, serial);
    if (!token.ok()) return WithContext(token.status(), what);
    Transfer transfer;
    transfer.on_line = &on_line;
    const internal::HttpResult result = Perform(config_, *impl_, request, *token, &stop, transfer);
    const long code = result.code;
    stats_.requests++;
    if (stop.load() || transfer.stopped_by_callback) return absl::OkStatus();
    if (transfer.identity_rotated) {
      // client-go closes every connection when the certificate rotates; the caller reconnects.
      return Unavailable(what + ": watch closed: the client certificate was rotated");
    }
    if (code == 401 && RefreshesOn401() && auth_try == 0) continue;
    if (code != 0 && (code < 200 || code >= 300)) {
      return StatusFromResponse(code, transfer.body, what);
    }
    if (result.error != TransportError::kNone) {
      return Unavailable(what + ": watch stream: " + result.message);
    }
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(what + ": unauthorized");
}

}  // namespace devlet::kube
