// RestClient: HTTP to the kube-apiserver over libcurl (auth, TLS, rate limit, retries, Status
// mapping).
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

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
  return (t->stop != nullptr && t->stop->load()) ? 1 : 0;
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

}  // namespace

struct RestClient::Impl {
  std::mutex mu;
  std::vector<CURL*> idle;
  curl_blob cert_blob{};
  curl_blob key_blob{};
  curl_blob ca_blob{};
  std::string cert_data;
  std::string key_data;
  std::string ca_data;
  // The URL prefix requests go to: the server, or with tls-server-name that name (so it is the
  // SNI and the name checked in the certificate) while connect_to keeps the real address.
  std::string base_url;
  curl_slist* connect_to = nullptr;

  CURL* Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle.empty()) {
        CURL* c = idle.back();
        idle.pop_back();
        return c;
      }
    }
    return curl_easy_init();
  }
  void Release(CURL* c) {
    curl_easy_reset(c);
    std::lock_guard<std::mutex> lock(mu);
    if (idle.size() < 8) {
      idle.push_back(c);
    } else {
      curl_easy_cleanup(c);
    }
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
  DEVLET_RETURN_IF_ERROR(load(config.client_certificate_data, config.client_certificate_file,
                              "client certificate", impl.cert_data));
  DEVLET_RETURN_IF_ERROR(
      load(config.client_key_data, config.client_key_file, "client key", impl.key_data));
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
  if (config.exec) {
    // Run the plugin now so a broken credential fails at start-up, not at the first request.
    absl::StatusOr<ExecCredential> credential = RunExecPlugin(*config.exec, config);
    if (!credential.ok()) return credential.status();
    client->token_ = credential->token;
    client->exec_expiry_ = credential->expiration;
    client->stats_.token_reloads++;
    if (!credential->client_certificate_data.empty() && impl.cert_data.empty()) {
      // Taken once: libcurl holds the blobs for the client's lifetime.
      impl.cert_data = credential->client_certificate_data;
      impl.key_data = credential->client_key_data;
    }
  }
  impl.cert_blob = {impl.cert_data.data(), impl.cert_data.size(), CURL_BLOB_NOCOPY};
  impl.key_blob = {impl.key_data.data(), impl.key_data.size(), CURL_BLOB_NOCOPY};
  impl.ca_blob = {impl.ca_data.data(), impl.ca_data.size(), CURL_BLOB_NOCOPY};
  if (!config.token_file.empty() && !config.exec) {
    client->Token(/*force_reload=*/true);
  }
  return client;
}

std::string RestClient::Token(bool force_reload) {
  if (config_.exec) {
    std::lock_guard<std::mutex> lock(token_mu_);
    // Refresh a little before the expiry the plugin announced, so a request never carries a
    // token that runs out on the way.
    const bool expiring =
        exec_expiry_ && std::chrono::system_clock::now() + std::chrono::seconds(10) >= *exec_expiry_;
    if (force_reload || token_.empty() || expiring) {
      absl::StatusOr<ExecCredential> credential = RunExecPlugin(*config_.exec, config_);
      stats_.token_reloads++;
      if (credential.ok()) {
        token_ = credential->token;
        exec_expiry_ = credential->expiration;
      }
      // On failure the old token is used; the request fails with 401 and says so.
    }
    return token_;
  }
  if (config_.token_file.empty()) return config_.token;
  std::lock_guard<std::mutex> lock(token_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (force_reload || token_.empty() || now - token_read_ >= config_.token_reload_interval) {
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
static CURLcode Perform(CURL* curl, const RestConfig& config, RestClient::Impl& impl,
                        const RestRequest& request, const std::string& token, bool streaming,
                        Transfer& transfer, long& code) {
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
  if (!impl.cert_data.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &impl.cert_blob);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!impl.key_data.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &impl.key_blob);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
  transfer.curl = curl;
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, HeaderCallback);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  if (transfer.stop != nullptr) {
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
    Transfer transfer;
    long code = 0;
    CURL* curl = impl_->Acquire();
    if (curl == nullptr) return Internal("curl_easy_init failed");
    const CURLcode rc =
        Perform(curl, config_, *impl_, request, Token(false), false, transfer, code);
    impl_->Release(curl);
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
      reloaded_after_401 = true;  // the token may have rotated: re-read it once
      Token(true);
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
  for (int auth_try = 0; auth_try < 2; ++auth_try) {
    stats_.throttled_ns += limiter_.Wait().count();
    Transfer transfer;
    transfer.on_line = &on_line;
    transfer.stop = &stop;
    long code = 0;
    CURL* curl = impl_->Acquire();
    if (curl == nullptr) return Internal("curl_easy_init failed");
    const CURLcode rc = Perform(curl, config_, *impl_, request, Token(auth_try > 0), true,
                                transfer, code);
    impl_->Release(curl);
    stats_.requests++;
    if (stop.load() || transfer.stopped_by_callback) return absl::OkStatus();
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
