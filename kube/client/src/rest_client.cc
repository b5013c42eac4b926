// RestClient: HTTP to the kube-apiserver over libcurl (auth, TLS, rate limit, retries, Status
// mapping).
#include <curl/curl.h>

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

#include "curl_loader.h"
#include "devlet/common/status.h"
#include "devlet/kube/rest_client.h"

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

// ---- libcurl plumbing -----------------------------------------------------------------------

namespace {

std::once_flag curl_init_once;

// CurlInitFailed is the error when no curl handle can be made.
absl::Status CurlInitFailed() {
  const std::string why = internal::CurlLoadError();
  return why.empty() ? Internal("curl_easy_init failed") : FailedPrecondition(why);
}

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

struct Transfer {
  std::string body;
  long retry_after_s = -1;
  // Streaming
  const std::function<bool(std::string)>* on_line = nullptr;
  const std::atomic<bool>* stop = nullptr;
  CURL* curl = nullptr;
  std::string pending;
  bool stopped_by_callback = false;
  // A stream is closed when the client certificate it connected with is replaced.
  const std::atomic<std::uint64_t>* generation = nullptr;
  std::uint64_t started_generation = 0;
  bool identity_rotated = false;
};

size_t WriteCallback(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->on_line == nullptr) {
    t->body.append(data, n);
    return n;
  }
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code < 200 || code >= 300) {
    if (t->body.size() < (1u << 20)) t->body.append(data, n);
    return n;
  }
  t->pending.append(data, n);
  std::size_t start = 0;
  for (std::size_t nl; (nl = t->pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = t->pending.substr(start, nl - start);
    if (Trim(line).empty()) continue;
    if (!(*t->on_line)(std::move(line))) {
      t->stopped_by_callback = true;
      return 0;  // aborts the transfer
    }
  }
  t->pending.erase(0, start);
  if (t->pending.size() > (64u << 20)) return 0;  // a runaway line
  return n;
}

size_t HeaderCallback(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string line(data, n);
  constexpr std::string_view kRetryAfter = "retry-after:";
  if (line.size() > kRetryAfter.size()) {
    std::string head = line.substr(0, kRetryAfter.size());
    std::transform(head.begin(), head.end(), head.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (head == kRetryAfter) {
      const std::string value = Trim(line.substr(kRetryAfter.size()));
      char* end = nullptr;
      const long seconds = std::strtol(value.c_str(), &end, 10);
      if (end != value.c_str() && seconds >= 0) t->retry_after_s = seconds;
    }
  }
  return n;
}

int ProgressCallback(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->stop != nullptr && t->stop->load()) return 1;
  if (t->generation != nullptr && t->generation->load() != t->started_generation) {
    t->identity_rotated = true;
    return 1;
  }
  return 0;
}

// Errors where the request certainly did not reach the server.
bool NotSent(CURLcode code) {
  return code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
         code == CURLE_SSL_CONNECT_ERROR;
}

bool Transient(CURLcode code) {
  return NotSent(code) || code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR ||
         code == CURLE_GOT_NOTHING || code == CURLE_OPERATION_TIMEDOUT ||
         code == CURLE_PARTIAL_FILE;
}

// The client certificate and key (PEM) presented to the server; both empty: none.
struct ClientIdentity {
  std::string cert;
  std::string key;
};

// A pooled libcurl handle lent to one request, with the client identity its connections were
// made with.
struct Lease {
  CURL* curl = nullptr;
  std::uint64_t generation = 0;
  std::shared_ptr<const ClientIdentity> identity;
};

}  // namespace

struct RestClient::Impl {
  std::mutex mu;
  // Idle handles keep their connections (libcurl's per-handle cache); all are of the current
  // generation.
  std::vector<CURL*> idle;
  // Replaced as a whole when an exec plugin rotates the certificate; a lease keeps its own.
  std::shared_ptr<const ClientIdentity> identity = std::make_shared<ClientIdentity>();
  // Bumped with every new identity: handles of an older one are not reused (so their connections,
  // authenticated with the old certificate, end), and streams on them are closed.
  std::atomic<std::uint64_t> generation{0};
  curl_blob ca_blob{};
  std::string ca_data;
  // The URL prefix requests go to: the server, or with tls-server-name that name (so it is the
  // SNI and the name checked in the certificate) while connect_to keeps the real address.
  std::string base_url;
  curl_slist* connect_to = nullptr;

  // Acquire lends a handle with the identity to present. A handle and the identity are taken
  // under one lock, so a pooled handle's connections always belong to the identity lent with it.
  Lease Acquire() {
    Lease lease;
    {
      std::lock_guard<std::mutex> lock(mu);
      lease.generation = generation.load();
      lease.identity = identity;
      if (!idle.empty()) {
        lease.curl = idle.back();
        idle.pop_back();
        return lease;
      }
    }
    lease.curl = curl_easy_init();  // no connections yet: fine for any identity
    return lease;
  }
  void Release(Lease& lease) {
    if (lease.curl == nullptr) return;
    curl_easy_reset(lease.curl);  // keeps the handle's connections
    std::unique_lock<std::mutex> lock(mu);
    if (lease.generation == generation.load() && idle.size() < 8) {
      idle.push_back(lease.curl);
    } else {
      lock.unlock();
      curl_easy_cleanup(lease.curl);  // closes its connections
    }
    lease.curl = nullptr;
  }
  // SetIdentity installs a client certificate and key; false when they are the ones in use.
  // Idle handles (and their connections) made with the old pair are closed.
  bool SetIdentity(const std::string& cert, const std::string& key) {
    std::vector<CURL*> old;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (identity->cert == cert && identity->key == key) return false;
      identity = std::make_shared<ClientIdentity>(ClientIdentity{cert, key});
      generation++;
      old.swap(idle);
    }
    for (CURL* c : old) curl_easy_cleanup(c);
    return true;
  }
  ~Impl() {
    for (CURL* c : idle) curl_easy_cleanup(c);
    if (connect_to != nullptr) curl_slist_free_all(connect_to);
  }
};

RestClient::RestClient(RestConfig config)
    : config_(std::move(config)), limiter_(config_.qps, config_.burst),
      impl_(std::make_unique<Impl>()) {}

RestClient::~RestClient() = default;

absl::StatusOr<std::unique_ptr<RestClient>> RestClient::Create(RestConfig config) {
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  // libcurl is loaded on first use (curl_loader.cc): a missing one is reported here, once.
  if (std::string why = internal::CurlLoadError(); !why.empty()) return FailedPrecondition(why);
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return InvalidArgument("API server URL \"" + config.server +
                           "\" must start with https:// or http://");
  }
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
  DEVLET_RETURN_IF_ERROR(load(config.certificate_authority_data,
                              config.certificate_authority_file, "certificate authority",
                              impl.ca_data));
  impl.base_url = config.server;
  if (!config.tls_server_name.empty() && config.server.rfind("https://", 0) == 0) {
    // https://host[:port][/prefix] -> https://<tls-server-name>:port/prefix, connecting to host.
    const std::string rest = config.server.substr(8);
    const std::size_t slash = rest.find('/');
    const std::string authority = rest.substr(0, slash);
    const std::string prefix = slash == std::string::npos ? "" : rest.substr(slash);
    std::string host = authority;
    std::string port = "443";
    const std::size_t bracket = authority.rfind(']');
    const std::size_t colon = authority.rfind(':');
    if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
    }
    if (config.tls_server_name.find_first_of(":/[]@ ") != std::string::npos) {
      return InvalidArgument("tls-server-name \"" + config.tls_server_name +
                             "\" is not a host name");
    }
    impl.base_url = "https://" + config.tls_server_name + ":" + port + prefix;
    impl.connect_to = curl_slist_append(
        nullptr, (config.tls_server_name + ":" + port + ":" + host + ":" + port).c_str());
  }
  impl.ca_blob = {impl.ca_data.data(), impl.ca_data.size(), CURL_BLOB_NOCOPY};
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

std::string BuildUrl(CURL* curl, const std::string& server, const RestRequest& request) {
  std::string url = server + request.path;
  char sep = '?';
  for (const auto& [key, value] : request.query) {
    char* k = curl_easy_escape(curl, key.data(), static_cast<int>(key.size()));
    char* v = curl_easy_escape(curl, value.data(), static_cast<int>(value.size()));
    url += sep;
    url += k;
    url += '=';
    url += v;
    curl_free(k);
    curl_free(v);
    sep = '&';
  }
  return url;
}

}  // namespace

// One HTTP attempt. Returns the curl code; fills code and transfer.
static CURLcode Perform(const Lease& lease, const RestConfig& config, RestClient::Impl& impl,
                        const RestRequest& request, const std::string& token, bool streaming,
                        Transfer& transfer, long& code) {
  CURL* curl = lease.curl;
  const std::string url = BuildUrl(curl, impl.base_url, request);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  if (impl.connect_to != nullptr) curl_easy_setopt(curl, CURLOPT_CONNECT_TO, impl.connect_to);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, config.user_agent.c_str());
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config.connect_timeout.count()));
  if (streaming) {
    const auto total = config.watch_timeout + std::chrono::seconds(60);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::chrono::milliseconds(total).count()));
  } else {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(config.request_timeout.count()));
  }
  if (request.method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  }
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!request.body.empty()) {
    headers = curl_slist_append(headers, ("Content-Type: " + request.content_type).c_str());
  }
  if (!token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (!config.username.empty()) {
    curl_easy_setopt(curl, CURLOPT_USERNAME, config.username.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, config.password.c_str());
  }
  // TLS
  if (config.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!impl.ca_data.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &impl.ca_blob);
  // Copied into the handle: the lease's identity may be replaced while the request runs.
  const ClientIdentity& identity = *lease.identity;
  if (!identity.cert.empty()) {
    curl_blob cert{const_cast<char*>(identity.cert.data()), identity.cert.size(), CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!identity.key.empty()) {
    curl_blob key{const_cast<char*>(identity.key.data()), identity.key.size(), CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
  transfer.curl = curl;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, HeaderCallback);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  if (transfer.stop != nullptr) {
    transfer.generation = &impl.generation;
    transfer.started_generation = lease.generation;
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, ProgressCallback);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  }
  const CURLcode rc = curl_easy_perform(curl);
  code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  return rc;
}

absl::StatusOr<RestResponse> RestClient::Do(const RestRequest& request) {
  const std::string what = request.what.empty() ? request.method + " " + request.path
                                                : request.what;
  bool reloaded_after_401 = false;
  std::mt19937 rng(std::random_device{}());
  auto backoff = [&](int attempt, long retry_after_s) {
    std::chrono::milliseconds delay = config_.initial_backoff * (1LL << std::min(attempt, 20));
    if (retry_after_s >= 0) delay = std::chrono::seconds(retry_after_s);
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
    long code = 0;
    Lease lease = impl_->Acquire();
    if (lease.curl == nullptr) return CurlInitFailed();
    const CURLcode rc = Perform(lease, config_, *impl_, request, *token, false, transfer, code);
    impl_->Release(lease);
    stats_.requests++;
    const bool more = attempt < config_.max_retries;
    if (rc != CURLE_OK) {
      last = Unavailable(what + ": " + request.method + " " + config_.server + request.path +
                         ": " + curl_easy_strerror(rc));
      if (more && Transient(rc) && (request.idempotent || NotSent(rc))) {
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
    const bool retryable =
        code == 429 || code == 502 || code == 503 || code == 504 ||
        (code >= 500 && transfer.retry_after_s >= 0);
    if (more && retryable) {
      backoff(attempt, transfer.retry_after_s);
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
    transfer.stop = &stop;
    long code = 0;
    Lease lease = impl_->Acquire();
    if (lease.curl == nullptr) return CurlInitFailed();
    const CURLcode rc = Perform(lease, config_, *impl_, request, *token, true, transfer, code);
    impl_->Release(lease);
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
    if (rc != CURLE_OK) {
      return Unavailable(what + ": watch stream: " + curl_easy_strerror(rc));
    }
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(what + ": unauthorized");
}

}  // namespace devlet::kube
