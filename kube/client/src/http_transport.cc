// HttpTransport: HTTP/1.1 over non-blocking sockets, TLS by mbed TLS 2.28 (TLS 1.2, which every
// kube-apiserver serves by default). Each wait on the network is a poll() of at most 200 ms, so
// deadlines and cancellation are checked without signals or extra threads.
#include "devlet/kube/http_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "devlet/common/status.h"

namespace devlet::kube::internal {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kPollSlice(200);
constexpr std::size_t kMaxHeaderBytes = 256 * 1024;
// Idle keep-alive connections kept per client. devlet-extender writes claims and bindings from
// up to 16 HTTP workers at once; with 8 kept, every burst past 8 paid fresh TLS handshakes (a
// third of its CPU in the 500-pod throughput run, integration/scheduler).
constexpr std::size_t kMaxIdle = 32;
constexpr char kSystemCaFile[] = "/etc/ssl/certs/ca-certificates.crt";

std::string MbedError(int rc) {
  char text[256];
  mbedtls_strerror(rc, text, sizeof text);
  return text;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view TrimView(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The process-wide random generator for TLS (mbed TLS is built with MBEDTLS_THREADING_C, so the
// DRBG locks itself).
struct Random {
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  int seeded = -1;
  Random() {
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    static constexpr unsigned char kPersonalization[] = "devlet-kube-client";
    seeded = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, kPersonalization,
                                   sizeof kPersonalization - 1);
  }
};

Random& GlobalRandom() {
  static Random* random = new Random();  // never destroyed: connections may outlive statics
  return *random;
}

// Trusted certificates, shared by every TLS configuration of a transport.
struct CaChain {
  mbedtls_x509_crt crt;
  CaChain() { mbedtls_x509_crt_init(&crt); }
  ~CaChain() { mbedtls_x509_crt_free(&crt); }
  CaChain(const CaChain&) = delete;
  CaChain& operator=(const CaChain&) = delete;
};

// One mbed TLS client configuration: the CA chain and one client identity. Connections keep the
// one they were made with.
struct TlsConfig {
  mbedtls_ssl_config conf;
  mbedtls_x509_crt own_cert;
  mbedtls_pk_context own_key;
  std::shared_ptr<CaChain> ca;
  std::shared_ptr<const ClientIdentity> identity;
  TlsConfig() {
    mbedtls_ssl_config_init(&conf);
    mbedtls_x509_crt_init(&own_cert);
    mbedtls_pk_init(&own_key);
  }
  ~TlsConfig() {
    mbedtls_ssl_config_free(&conf);
    mbedtls_x509_crt_free(&own_cert);
    mbedtls_pk_free(&own_key);
  }
  TlsConfig(const TlsConfig&) = delete;
  TlsConfig& operator=(const TlsConfig&) = delete;
};

// What one wait on the network ended with.
enum class Io { kOk, kEof, kError, kTimeout, kCancelled };

// The deadline and cancellation of the exchange in progress.
struct Waiter {
  Clock::time_point deadline;
  const std::function<bool()>* cancelled = nullptr;
  std::string error;  // errno text of a failed call

  // Wait polls `fd` for `events` until ready, the deadline or cancellation.
  Io Wait(int fd, short events) {
    for (;;) {
      if (cancelled != nullptr && *cancelled && (*cancelled)()) return Io::kCancelled;
      const auto now = Clock::now();
      if (now >= deadline) return Io::kTimeout;
      const auto slice = std::min<Clock::duration>(kPollSlice, deadline - now);
      pollfd p{fd, events, 0};
      const int ms = static_cast<int>(
          std::chrono::ceil<std::chrono::milliseconds>(slice).count());
      const int rc = ::poll(&p, 1, ms);
      if (rc > 0) return Io::kOk;  // readable, writable or an error the next call reports
      if (rc < 0 && errno != EINTR) {
        error = std::strerror(errno);
        return Io::kError;
      }
    }
  }

  // WaitForTls waits for what an mbed TLS call that returned `rc` asks for (a readable or
  // writable socket: TLS may read to write and write to read); nullopt for any other `rc`.
  std::optional<Io> WaitForTls(int fd, int rc) {
    if (rc != MBEDTLS_ERR_SSL_WANT_READ && rc != MBEDTLS_ERR_SSL_WANT_WRITE) return std::nullopt;
    return Wait(fd, rc == MBEDTLS_ERR_SSL_WANT_READ ? POLLIN : POLLOUT);
  }
};

// Conn is one connection, plain or TLS, with its read buffer.
struct Conn {
  int fd = -1;
  std::unique_ptr<mbedtls_ssl_context> ssl;
  std::shared_ptr<TlsConfig> tls;  // outlives ssl
  std::shared_ptr<const ClientIdentity> identity;
  std::string in;  // bytes read and not consumed yet, from `in_pos`
  std::size_t in_pos = 0;
  bool reused = false;

  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() {
    if (ssl != nullptr) mbedtls_ssl_free(ssl.get());
    if (fd >= 0) ::close(fd);
  }
};

int BioSend(void* ctx, const unsigned char* data, size_t len) {
  const int fd = *static_cast<int*>(ctx);
  const ssize_t n = ::send(fd, data, len, MSG_NOSIGNAL);
  if (n >= 0) return static_cast<int>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return MBEDTLS_ERR_SSL_WANT_WRITE;
  return errno == EPIPE || errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
                                               : MBEDTLS_ERR_NET_SEND_FAILED;
}

int BioRecv(void* ctx, unsigned char* data, size_t len) {
  const int fd = *static_cast<int*>(ctx);
  const ssize_t n = ::recv(fd, data, len, 0);
  if (n >= 0) return static_cast<int>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return MBEDTLS_ERR_SSL_WANT_READ;
  return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
}

// ReadSome appends what the connection has to conn.in (waiting for at least one byte).
Io ReadSome(Conn& conn, Waiter& waiter) {
  char buf[16384];
  for (;;) {
    if (conn.ssl != nullptr) {
      const int n = mbedtls_ssl_read(conn.ssl.get(), reinterpret_cast<unsigned char*>(buf),
                                     sizeof buf);
      if (n > 0) {
        conn.in.append(buf, static_cast<std::size_t>(n));
        return Io::kOk;
      }
      // A peer that closes without close_notify ends the body too (as Go and curl read it).
      if (n == 0 || n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || n == MBEDTLS_ERR_SSL_CONN_EOF) {
        return Io::kEof;
      }
      if (std::optional<Io> io = waiter.WaitForTls(conn.fd, n)) {
        if (*io != Io::kOk) return *io;
        continue;
      }
      waiter.error = MbedError(n);
      return Io::kError;
    }
    const ssize_t n = ::recv(conn.fd, buf, sizeof buf, 0);
    if (n > 0) {
      conn.in.append(buf, static_cast<std::size_t>(n));
      return Io::kOk;
    }
    if (n == 0) return Io::kEof;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (Io io = waiter.Wait(conn.fd, POLLIN); io != Io::kOk) return io;
      continue;
    }
    waiter.error = std::strerror(errno);
    return Io::kError;
  }
}

Io WriteAll(Conn& conn, std::string_view data, Waiter& waiter) {
  while (!data.empty()) {
    if (conn.ssl != nullptr) {
      const int n = mbedtls_ssl_write(conn.ssl.get(),
                                      reinterpret_cast<const unsigned char*>(data.data()),
                                      data.size());
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (std::optional<Io> io = waiter.WaitForTls(conn.fd, n)) {
        if (*io != Io::kOk) return *io;
        continue;
      }
      waiter.error = MbedError(n);
      return Io::kError;
    }
    const ssize_t n = ::send(conn.fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (Io io = waiter.Wait(conn.fd, POLLOUT); io != Io::kOk) return io;
      continue;
    }
    waiter.error = std::strerror(errno);
    return Io::kError;
  }
  return Io::kOk;
}

// MatchesIpSan reports whether the certificate has `host` (an IP literal) as an iPAddress SAN:
// mbed TLS 2.28 compares the name only with DNS SANs and the CN.
bool MatchesIpSan(const mbedtls_x509_crt& crt, const std::string& host) {
  unsigned char addr[16];
  std::size_t len = 0;
  if (::inet_pton(AF_INET, host.c_str(), addr) == 1) {
    len = 4;
  } else if (::inet_pton(AF_INET6, host.c_str(), addr) == 1) {
    len = 16;
  } else {
    return false;
  }
  for (const mbedtls_x509_sequence* san = &crt.subject_alt_names; san != nullptr;
       san = san->next) {
    if (san->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) && san->buf.len == len &&
        std::memcmp(san->buf.p, addr, len) == 0) {
      return true;
    }
  }
  return false;
}

bool IsIpLiteral(const std::string& host) {
  unsigned char addr[16];
  return ::inet_pton(AF_INET, host.c_str(), addr) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

// IoFailure fills `result` with how a wait on the network ended while `doing` something.
HttpResult IoFailure(HttpResult& result, Io io, const Waiter& waiter, const std::string& doing) {
  switch (io) {
    case Io::kTimeout:
      result.error = TransportError::kTimeout;
      result.message = doing + ": timed out";
      break;
    case Io::kCancelled:
      result.error = TransportError::kAborted;
      result.message = "cancelled";
      break;
    case Io::kEof:
      result.error = TransportError::kBroken;
      result.message = doing + ": the server closed the connection";
      break;
    default:
      result.error = TransportError::kBroken;
      result.message = doing + ": " + waiter.error;
      break;
  }
  return result;
}

// SendRequest writes the request line, headers and body.
Io SendRequest(Conn& conn, const Endpoint& ep, const HttpExchange& exchange, Waiter& waiter) {
  std::string head = exchange.method + " " + ep.prefix + exchange.target + " HTTP/1.1\r\n";
  head += "Host: " + ep.authority + "\r\n";
  for (const std::string& h : exchange.headers) head += h + "\r\n";
  if (exchange.send_body) head += "Content-Length: " + std::to_string(exchange.body.size()) +
                                  "\r\n";
  head += "\r\n";
  if (exchange.send_body && exchange.body.size() < 64 * 1024) {
    head += exchange.body;  // one write for small bodies
    return WriteAll(conn, head, waiter);
  }
  if (Io io = WriteAll(conn, head, waiter); io != Io::kOk) return io;
  return exchange.send_body ? WriteAll(conn, exchange.body, waiter) : Io::kOk;
}

// ResponseHead is what a response's status line and headers say about its body and connection.
struct ResponseHead {
  bool close = false;  // the server closes the connection after this response
  bool chunked = false;
  long long content_length = -1;  // -1: not given
};

// ParseHead reads one status line and its headers (without the blank line) into `result` (code,
// Retry-After) and `head`; false when it is not HTTP (`result` says so).
bool ParseHead(std::string_view headers, HttpResult& result, ResponseHead& head) {
  std::size_t line_end = headers.find("\r\n");
  const std::string_view status_line = headers.substr(0, line_end);
  int major = 0;
  int minor = 0;
  long code = 0;
  if (std::sscanf(std::string(status_line).c_str(), "HTTP/%d.%d %ld", &major, &minor, &code) !=
          3 ||
      code < 100 || code > 999) {
    result.error = TransportError::kFatal;
    result.message = "not an HTTP response: " + std::string(status_line.substr(0, 80));
    return false;
  }
  result.code = code;
  head = ResponseHead{.close = major < 1 || (major == 1 && minor == 0)};
  while (line_end != std::string_view::npos) {
    const std::size_t start = line_end + 2;
    line_end = headers.find("\r\n", start);
    const std::string_view line = headers.substr(
        start, line_end == std::string_view::npos ? std::string_view::npos : line_end - start);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string name = Lower(TrimView(line.substr(0, colon)));
    const std::string_view value = TrimView(line.substr(colon + 1));
    if (name == "content-length") {
      head.content_length = std::strtoll(std::string(value).c_str(), nullptr, 10);
    } else if (name == "transfer-encoding") {
      head.chunked = Lower(value).find("chunked") != std::string::npos;
    } else if (name == "connection") {
      const std::string v = Lower(value);
      if (v.find("close") != std::string::npos) head.close = true;
      if (v.find("keep-alive") != std::string::npos) head.close = false;
    } else if (name == "retry-after") {
      char* parse_end = nullptr;
      const std::string text(value);
      const long seconds = std::strtol(text.c_str(), &parse_end, 10);
      if (parse_end != text.c_str() && seconds >= 0) result.retry_after_s = seconds;
    }
  }
  return true;
}

// ReadHead reads the response's status line and headers, skipping 1xx interim responses;
// nullopt on failure (`result` says why). `got_bytes`: some of the response arrived.
std::optional<ResponseHead> ReadHead(Conn& conn, Waiter& waiter, HttpResult& result,
                                     bool& got_bytes) {
  conn.in.erase(0, conn.in_pos);
  conn.in_pos = 0;
  for (;;) {
    std::size_t end;
    while ((end = conn.in.find("\r\n\r\n", conn.in_pos)) == std::string::npos) {
      if (conn.in.size() > kMaxHeaderBytes) {
        result.error = TransportError::kFatal;
        result.message = "response headers larger than 256 KiB";
        return std::nullopt;
      }
      if (Io io = ReadSome(conn, waiter); io != Io::kOk) {
        IoFailure(result, io, waiter, "reading the response");
        return std::nullopt;
      }
      got_bytes = true;
    }
    const std::string_view headers(conn.in.data() + conn.in_pos, end - conn.in_pos);
    conn.in_pos = end + 4;
    ResponseHead head;
    if (!ParseHead(headers, result, head)) return std::nullopt;
    if (result.code >= 200 || result.code == 101) return head;
    // 1xx interim response: the real one follows.
    result.retry_after_s = -1;
  }
}

// BodyReader hands a response body to the exchange's receiver as it arrives. Each read returns
// false on failure, with `result` saying why (kAborted when the receiver stopped).
struct BodyReader {
  Conn& conn;
  Waiter& waiter;
  const HttpExchange& exchange;
  HttpResult& result;

  bool Fail(Io io) {
    IoFailure(result, io, waiter, "reading the body");
    return false;
  }

  bool Deliver(std::string_view data) {
    if (!exchange.on_body || data.empty() || exchange.on_body(result.code, data)) return true;
    result.error = TransportError::kAborted;
    result.message = "stopped by the receiver";
    return false;
  }

  // More reads at least one more byte into the buffer.
  bool More() {
    const Io io = ReadSome(conn, waiter);
    return io == Io::kOk || Fail(io);
  }

  // Sized passes the next `length` bytes on, emptying the buffer as it goes.
  bool Sized(unsigned long long length) {
    unsigned long long left = length;
    while (left > 0) {
      if (conn.in_pos == conn.in.size()) {
        conn.in.clear();
        conn.in_pos = 0;
        if (!More()) return false;
      }
      const std::size_t take = static_cast<std::size_t>(
          std::min<unsigned long long>(left, conn.in.size() - conn.in_pos));
      const std::string_view piece(conn.in.data() + conn.in_pos, take);
      conn.in_pos += take;
      left -= take;
      if (!Deliver(piece)) return false;
    }
    return true;
  }

  // LineEnd waits for the next CRLF in the buffer and sets `eol` to it.
  bool LineEnd(std::size_t& eol) {
    while ((eol = conn.in.find("\r\n", conn.in_pos)) == std::string::npos) {
      if (!More()) return false;
    }
    return true;
  }

  // Chunked reads chunks up to the last one, then its trailers.
  bool Chunked() {
    for (;;) {
      std::size_t eol;
      if (!LineEnd(eol)) return false;
      const std::string size_text = conn.in.substr(conn.in_pos, eol - conn.in_pos);
      char* parse_end = nullptr;
      const unsigned long long size = std::strtoull(size_text.c_str(), &parse_end, 16);
      if (parse_end == size_text.c_str()) {
        result.error = TransportError::kBroken;
        result.message = "bad chunk size \"" + size_text.substr(0, 20) + "\"";
        return false;
      }
      conn.in_pos = eol + 2;
      if (size == 0) return Trailers();
      if (!Sized(size)) return false;
      while (conn.in.size() - conn.in_pos < 2) {
        if (!More()) return false;
      }
      conn.in_pos += 2;  // the chunk's CRLF
      if (conn.in_pos > 64 * 1024) {
        conn.in.erase(0, conn.in_pos);
        conn.in_pos = 0;
      }
    }
  }

  // Trailers skips the trailer lines after the last chunk, up to the empty line.
  bool Trailers() {
    for (;;) {
      std::size_t eol;
      if (!LineEnd(eol)) return false;
      const bool last = eol == conn.in_pos;
      conn.in_pos = eol + 2;
      if (last) return true;
    }
  }

  // UntilClose passes everything on until the server closes the connection.
  bool UntilClose() {
    for (;;) {
      if (conn.in_pos < conn.in.size()) {
        const std::string_view piece(conn.in.data() + conn.in_pos, conn.in.size() - conn.in_pos);
        conn.in_pos = conn.in.size();
        if (!Deliver(piece)) return false;
      }
      conn.in.clear();
      conn.in_pos = 0;
      const Io io = ReadSome(conn, waiter);
      if (io == Io::kEof) return true;
      if (io != Io::kOk) return Fail(io);
    }
  }
};

class HttpTransport final : public Transport {
 public:
  explicit HttpTransport(TransportOptions options) : options_(std::move(options)) {}
  ~HttpTransport() override = default;

  absl::Status Init() {
    if (!options_.endpoint.tls) return absl::OkStatus();
    if (GlobalRandom().seeded != 0) {
      return Internal("seeding the TLS random generator: " + MbedError(GlobalRandom().seeded));
    }
    ca_ = std::make_shared<CaChain>();
    if (!options_.ca_pem.empty()) {
      // PEM parsing wants the terminating NUL counted; std::string has one.
      const int rc = mbedtls_x509_crt_parse(
          &ca_->crt, reinterpret_cast<const unsigned char*>(options_.ca_pem.c_str()),
          options_.ca_pem.size() + 1);
      if (rc < 0 || (rc > 0 && ca_->crt.version == 0)) {
        return InvalidArgument("certificate authority: no usable certificate: " +
                               (rc < 0 ? MbedError(rc) : std::to_string(rc) + " bad ones"));
      }
    } else if (!options_.insecure_skip_tls_verify) {
      // The system store may hold certificates mbed TLS cannot read: skipped (rc > 0).
      (void)mbedtls_x509_crt_parse_file(&ca_->crt, kSystemCaFile);
    }
    return absl::OkStatus();
  }

  HttpResult RoundTrip(const HttpExchange& exchange,
                       const std::shared_ptr<const ClientIdentity>& identity) override {
    Waiter waiter{exchange.deadline, exchange.cancelled ? &exchange.cancelled : nullptr, {}};
    // A reused connection the server closed meanwhile fails before any response byte: the
    // request is sent again on a new one (once), as curl and Go do.
    for (int attempt = 0;; ++attempt) {
      HttpResult result;
      std::unique_ptr<Conn> conn = attempt == 0 ? TakeIdle(identity) : nullptr;
      if (conn == nullptr) {
        conn = Connect(identity, waiter, result);
        if (conn == nullptr) return result;
      }
      bool got_bytes = false;
      bool reusable = false;
      result = Exchange(*conn, exchange, waiter, got_bytes, reusable);
      if (result.error == TransportError::kBroken && conn->reused && !got_bytes &&
          attempt == 0) {
        continue;
      }
      if (reusable && result.error == TransportError::kNone) PutIdle(std::move(conn));
      return result;
    }
  }

  void CloseIdle() override {
    std::vector<std::unique_ptr<Conn>> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old.swap(idle_);
      tls_config_.reset();
    }
  }

 private:
  std::unique_ptr<Conn> TakeIdle(const std::shared_ptr<const ClientIdentity>& identity) {
    std::vector<std::unique_ptr<Conn>> stale;
    std::unique_ptr<Conn> found;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!idle_.empty() && found == nullptr) {
        std::unique_ptr<Conn> c = std::move(idle_.back());
        idle_.pop_back();
        pollfd p{c->fd, POLLIN, 0};
        // An idle connection with something to read was closed (or broken) by the server.
        if (c->identity == identity && ::poll(&p, 1, 0) == 0) {
          found = std::move(c);
        } else {
          stale.push_back(std::move(c));
        }
      }
    }
    if (found != nullptr) found->reused = true;
    return found;
  }

  void PutIdle(std::unique_ptr<Conn> conn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(conn));
  }

  // TlsConfigFor returns the configuration for `identity`, made once per identity.
  absl::StatusOr<std::shared_ptr<TlsConfig>> TlsConfigFor(
      const std::shared_ptr<const ClientIdentity>& identity) {
    std::lock_guard<std::mutex> lock(mu_);
    if (tls_config_ != nullptr && tls_config_->identity == identity) return tls_config_;
    auto config = std::make_shared<TlsConfig>();
    config->ca = ca_;
    config->identity = identity;
    mbedtls_ssl_config& conf = config->conf;
    int rc = mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT,
                                         MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc != 0) return Internal("TLS configuration: " + MbedError(rc));
    mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, &GlobalRandom().drbg);
    mbedtls_ssl_conf_ca_chain(&conf, &ca_->crt, nullptr);
    mbedtls_ssl_conf_authmode(&conf, options_.insecure_skip_tls_verify
                                         ? MBEDTLS_SSL_VERIFY_NONE
                                         : MBEDTLS_SSL_VERIFY_REQUIRED);
    if (identity != nullptr && (!identity->cert.empty() || !identity->key.empty())) {
      rc = mbedtls_x509_crt_parse(&config->own_cert,
                                  reinterpret_cast<const unsigned char*>(identity->cert.c_str()),
                                  identity->cert.size() + 1);
      if (rc != 0) return InvalidArgument("client certificate: " + MbedError(rc));
      rc = mbedtls_pk_parse_key(&config->own_key,
                                reinterpret_cast<const unsigned char*>(identity->key.c_str()),
                                identity->key.size() + 1, nullptr, 0);
      if (rc != 0) return InvalidArgument("client key: " + MbedError(rc));
      rc = mbedtls_ssl_conf_own_cert(&conf, &config->own_cert, &config->own_key);
      if (rc != 0) return InvalidArgument("client certificate: " + MbedError(rc));
    }
    tls_config_ = config;
    return config;
  }

  std::unique_ptr<Conn> Connect(const std::shared_ptr<const ClientIdentity>& identity,
                                Waiter& waiter, HttpResult& result) {
    const Endpoint& ep = options_.endpoint;
    const std::string where = ep.host + " port " + ep.port;
    auto fail = [&](TransportError error, std::string message) -> std::unique_ptr<Conn> {
      result.error = error;
      result.message = std::move(message);
      return nullptr;
    };
    std::shared_ptr<TlsConfig> tls;
    if (ep.tls) {
      absl::StatusOr<std::shared_ptr<TlsConfig>> made = TlsConfigFor(identity);
      if (!made.ok()) return fail(TransportError::kFatal, Message(made.status()));
      tls = *std::move(made);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* addrs = nullptr;
    if (const int rc = ::getaddrinfo(ep.host.c_str(), ep.port.c_str(), &hints, &addrs); rc != 0) {
      return fail(TransportError::kNotSent,
                  "could not resolve host " + ep.host + ": " + ::gai_strerror(rc));
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(addrs, ::freeaddrinfo);
    auto conn = std::make_unique<Conn>();
    Waiter connect_waiter = waiter;
    connect_waiter.deadline = std::min(waiter.deadline, Clock::now() + options_.connect_timeout);
    std::string last_error = "no address";
    for (const addrinfo* ai = addrs; ai != nullptr; ai = ai->ai_next) {
      const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                              ai->ai_protocol);
      if (fd < 0) {
        last_error = std::strerror(errno);
        continue;
      }
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        last_error = std::strerror(errno);
        ::close(fd);
        continue;
      }
      const Io io = connect_waiter.Wait(fd, POLLOUT);
      if (io == Io::kCancelled) {
        ::close(fd);
        return fail(TransportError::kAborted, "cancelled");
      }
      if (io == Io::kTimeout) {
        ::close(fd);
        const bool connect_limit = Clock::now() < waiter.deadline;
        return fail(connect_limit ? TransportError::kNotSent : TransportError::kTimeout,
                    "connect to " + where + ": timed out after " +
                        std::to_string(options_.connect_timeout.count()) + " ms");
      }
      int error = 0;
      socklen_t len = sizeof error;
      if (io == Io::kError || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 ||
          error != 0) {
        last_error = io == Io::kError ? connect_waiter.error : std::strerror(error);
        ::close(fd);
        continue;
      }
      conn->fd = fd;
      break;
    }
    if (conn->fd < 0) {
      return fail(TransportError::kNotSent, "connect to " + where + ": " + last_error);
    }
    const int one = 1;
    ::setsockopt(conn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn->identity = identity;
    if (!ep.tls) return conn;

    conn->tls = tls;
    conn->ssl = std::make_unique<mbedtls_ssl_context>();
    mbedtls_ssl_init(conn->ssl.get());
    mbedtls_ssl_context* ssl = conn->ssl.get();
    if (const int rc = mbedtls_ssl_setup(ssl, &tls->conf); rc != 0) {
      return fail(TransportError::kFatal, "TLS setup: " + MbedError(rc));
    }
    // An IP address is checked against the certificate's iPAddress SANs below (and is never sent
    // as SNI); a name is checked by mbed TLS against the DNS SANs.
    const bool by_ip = IsIpLiteral(ep.server_name);
    if (const int rc = mbedtls_ssl_set_hostname(ssl, by_ip ? nullptr : ep.server_name.c_str());
        rc != 0) {
      return fail(TransportError::kFatal, "TLS server name: " + MbedError(rc));
    }
    mbedtls_ssl_set_bio(ssl, &conn->fd, BioSend, BioRecv, nullptr);
    for (;;) {
      const int rc = mbedtls_ssl_handshake(ssl);
      if (rc == 0) break;
      if (std::optional<Io> waited = waiter.WaitForTls(conn->fd, rc)) {
        const Io io = *waited;
        if (io == Io::kCancelled) return fail(TransportError::kAborted, "cancelled");
        if (io == Io::kTimeout) {
          return fail(TransportError::kTimeout, "TLS handshake with " + where + ": timed out");
        }
        if (io == Io::kError) {
          return fail(TransportError::kNotSent, "TLS handshake with " + where + ": " +
                                                    waiter.error);
        }
        continue;
      }
      if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
        char info[512];
        mbedtls_x509_crt_verify_info(info, sizeof info, "",
                                     mbedtls_ssl_get_verify_result(ssl));
        std::string why = info;
        std::replace(why.begin(), why.end(), '\n', ';');
        while (!why.empty() && (why.back() == ';' || why.back() == ' ')) why.pop_back();
        return fail(TransportError::kFatal, "the server certificate of " + where +
                                                " is not trusted: " + why);
      }
      return fail(TransportError::kNotSent, "TLS handshake with " + where + ": " + MbedError(rc));
    }
    if (by_ip && !options_.insecure_skip_tls_verify) {
      const mbedtls_x509_crt* peer = mbedtls_ssl_get_peer_cert(ssl);
      if (peer == nullptr || !MatchesIpSan(*peer, ep.server_name)) {
        return fail(TransportError::kFatal, "the server certificate of " + where +
                                                " is not valid for IP address " +
                                                ep.server_name);
      }
    }
    return conn;
  }

  // Exchange sends the request on `conn` and reads the response. `got_bytes`: some of the
  // response arrived; `reusable`: the connection may carry another request.
  HttpResult Exchange(Conn& conn, const HttpExchange& exchange, Waiter& waiter, bool& got_bytes,
                      bool& reusable) {
    HttpResult result;
    if (Io io = SendRequest(conn, options_.endpoint, exchange, waiter); io != Io::kOk) {
      return IoFailure(result, io, waiter, "sending");
    }
    std::optional<ResponseHead> head = ReadHead(conn, waiter, result, got_bytes);
    if (!head) return result;
    BodyReader body{conn, waiter, exchange, result};
    bool complete = true;
    if (exchange.method == "HEAD" || result.code == 204 || result.code == 304) {
      // No body.
    } else if (head->chunked) {
      complete = body.Chunked();
    } else if (head->content_length >= 0) {
      complete = body.Sized(static_cast<unsigned long long>(head->content_length));
    } else {
      // No length: the body ends when the server closes the connection, which is then gone.
      body.UntilClose();
      return result;
    }
    reusable = complete && !head->close;
    return result;
  }

  TransportOptions options_;
  std::shared_ptr<CaChain> ca_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;
  std::shared_ptr<TlsConfig> tls_config_;
};

}  // namespace

absl::StatusOr<Endpoint> ParseServerUrl(const std::string& server,
                                        const std::string& tls_server_name) {
  Endpoint ep;
  std::string rest;
  if (server.rfind("https://", 0) == 0) {
    rest = server.substr(8);
  } else if (server.rfind("http://", 0) == 0) {
    ep.tls = false;
    rest = server.substr(7);
  } else {
    return InvalidArgument("API server URL \"" + server +
                           "\" must start with https:// or http://");
  }
  const std::size_t slash = rest.find('/');
  ep.authority = rest.substr(0, slash);
  ep.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!ep.prefix.empty() && ep.prefix.back() == '/') ep.prefix.pop_back();
  if (ep.authority.find('@') != std::string::npos) {
    return InvalidArgument("API server URL \"" + server + "\": user info is not supported");
  }
  ep.port = ep.tls ? "443" : "80";
  std::string host = ep.authority;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string::npos) {
      return InvalidArgument("API server URL \"" + server + "\": unterminated [IPv6 address]");
    }
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') {
        return InvalidArgument("API server URL \"" + server + "\": bad host");
      }
      ep.port = host.substr(close + 2);
    }
    host = host.substr(1, close - 1);
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string::npos) {
    ep.port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.empty()) return InvalidArgument("API server URL \"" + server + "\" has no host");
  if (ep.port.empty() || ep.port.size() > 5 ||
      ep.port.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("API server URL \"" + server + "\": bad port \"" + ep.port + "\"");
  }
  ep.host = host;
  ep.server_name = host;
  if (!tls_server_name.empty() && ep.tls) {
    if (tls_server_name.find_first_of(":/[]@ ") != std::string::npos) {
      return InvalidArgument("tls-server-name \"" + tls_server_name + "\" is not a host name");
    }
    ep.server_name = tls_server_name;
  }
  return ep;
}

absl::StatusOr<std::unique_ptr<Transport>> NewHttpTransport(TransportOptions options) {
  auto transport = std::make_unique<HttpTransport>(std::move(options));
  DEVLET_RETURN_IF_ERROR(transport->Init());
  return transport;
}

std::string UrlEscape(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace devlet::kube::internal
