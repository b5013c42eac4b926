// The HTTP server around the verbs: one Asio event loop reads whole requests (no thread per
// connection), a bounded worker pool runs the verbs, the loop writes the replies.
#include "devlet/extender/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "devlet/common/log.h"
#include "devlet/common/status.h"

namespace devlet::extender {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string JoinPath(std::string prefix, const std::string& verb) {
  while (!prefix.empty() && prefix.back() == '/')
    prefix.pop_back();
  if (!prefix.empty() && prefix.front() != '/')
    prefix.insert(prefix.begin(), '/');
  return prefix + "/" + verb;
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// WorkerPool runs verb requests on a fixed set of threads with a bounded queue, and knows how
// long each worker has been on its current request (for /healthz).
class WorkerPool {
 public:
  WorkerPool(int threads, size_t max_queued)
      : max_queued_(max_queued), busy_since_(static_cast<size_t>(threads)) {
    for (auto& since : busy_since_)
      since.store(0);
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i] { Run(static_cast<size_t>(i)); });
    }
  }

  ~WorkerPool() { Stop(); }

  // TrySubmit queues `job`; false (and `job` untouched) when the queue is full or stopping.
  bool TrySubmit(std::function<void()>& job) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || queue_.size() >= max_queued_)
        return false;
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

  // Stuck: every worker has been on its current request for longer than `after`.
  bool Stuck(Clock::duration after) const {
    const int64_t limit =
        NowNanos() - std::chrono::duration_cast<std::chrono::nanoseconds>(after).count();
    for (const auto& since : busy_since_) {
      const int64_t started = since.load();
      if (started == 0 || started > limit)
        return false;
    }
    return !busy_since_.empty();
  }

  int64_t busy() const {
    int64_t n = 0;
    for (const auto& since : busy_since_)
      n += since.load() != 0 ? 1 : 0;
    return n;
  }

  int64_t queued() const {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>(queue_.size());
  }

  size_t size() const { return busy_since_.size(); }

  // Stop lets running jobs finish, drops queued ones and joins the threads.
  void Stop() {
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      dropped.swap(queue_);
    }
    cv_.notify_all();
    for (auto& thread : threads_) {
      if (thread.joinable())
        thread.join();
    }
  }

 private:
  void Run(size_t index) {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_)
          return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      busy_since_[index].store(NowNanos());
      job();
      job = nullptr;
      busy_since_[index].store(0);
    }
  }

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::atomic<int64_t>> busy_since_;  // 0: idle
  std::vector<std::thread> threads_;
};

// Reply is what a request is answered with.
struct Reply {
  unsigned status = 200;
  std::string content_type = "text/plain";
  std::string body;
  bool close = false;  // close the connection after it
};

Reply Text(unsigned status, std::string body, bool close = false) {
  return Reply{.status = status, .body = std::move(body) + "\n", .close = close};
}

// OpenSslError is OpenSSL's most recent error as text.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0)
    return "unknown error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

}  // namespace

struct Server::Impl {
  Impl(Extender& e, const ServerOptions& o) : extender(e), options(o) {}

  Extender& extender;
  const ServerOptions& options;
  std::string filter_path;
  std::string prioritize_path;
  std::string bind_path;
  size_t body_budget = 0;

  // Counters first: sessions, destroyed with the io_context below, update them.
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> rejecting{0};
  std::atomic<int64_t> connections_rejected{0};
  std::atomic<int64_t> requests_rejected{0};
  std::atomic<int64_t> timeouts{0};
  std::atomic<int64_t> unauthenticated{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<size_t> body_bytes{0};

  std::unique_ptr<ssl::context> tls;  // null: plain HTTP
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_retry{ioc};
  std::thread io_thread;
  std::unique_ptr<WorkerPool> workers;

  // ReserveBody takes `bytes` from the body budget; false when it is used up.
  bool ReserveBody(size_t bytes) {
    size_t used = body_bytes.load();
    do {
      if (used + bytes > body_budget)
        return false;
    } while (!body_bytes.compare_exchange_weak(used, used + bytes));
    return true;
  }

  void ReleaseBody(size_t bytes) { body_bytes.fetch_sub(bytes); }

  void Accept();
  template <class Stream>
  void StartSession(Stream stream, bool reject);

  std::string ServerMetricsText() const;
};

namespace {

// Session serves one connection, on the event loop's thread only: [TLS handshake,] then requests
// one after another (no pipelining: the next is read once the reply is written). A session that
// `reject`s answers 503 at once (too many connections) and closes.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Session(Server::Impl& impl, Stream stream, bool reject)
      : impl_(impl),
        stream_(std::move(stream)),
        reject_(reject),
        deadline_(stream_.get_executor()) {
    (reject_ ? impl_.rejecting : impl_.connections).fetch_add(1);
  }

  ~Session() {
    (reject_ ? impl_.rejecting : impl_.connections).fetch_sub(1);
    if (reserved_ > 0)
      impl_.ReleaseBody(reserved_);
    if (pending_)
      impl_.in_flight.fetch_sub(1);
  }

  void Start() {
    if constexpr (kTls) {
      // A rejected connection still gets its 503, but only a second to take it.
      Expire(reject_ ? std::chrono::seconds(1) : impl_.options.header_timeout);
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                self->OnHandshake(self->Check(ec));
                              });
    } else {
      AfterHandshake();
    }
  }

 private:
  auto& Lowest() { return beast::get_lowest_layer(stream_); }

  // Deadlines: one timer per session. When it fires, the pending I/O is cancelled but the socket
  // stays open (Beast's stream timeouts would close it), so a 408 can still be written; Check
  // turns the cancelled operation's error into beast::error::timeout. The timer holds the
  // session weakly: a session whose I/O is done is freed (and its socket closed) at once.
  void ExpireAt(Clock::time_point at) {
    const uint64_t generation = ++deadline_generation_;
    timed_out_ = false;
    deadline_.expires_at(at);
    deadline_.async_wait([weak = this->weak_from_this(), generation](beast::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->deadline_generation_ != generation)
        return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->Lowest().socket().cancel(ignored);
    });
  }

  void Expire(Clock::duration after) { ExpireAt(Clock::now() + after); }

  void Disarm() {
    ++deadline_generation_;
    timed_out_ = false;
    deadline_.cancel();
  }

  beast::error_code Check(beast::error_code ec) const {
    return ec && timed_out_ ? beast::error_code(beast::error::timeout) : ec;
  }

  void OnHandshake(beast::error_code ec) {
    if (ec) {
      if (ec == beast::error::timeout)
        impl_.timeouts.fetch_add(1);
      return;  // dropped: the session ends with its last handler
    }
    if constexpr (kTls) {
      // With verify_peer, OpenSSL has already refused a certificate that does not verify; a
      // client without one gets here unauthenticated.
      SSL* ssl_handle = stream_.native_handle();
      X509* cert = SSL_get0_peer_certificate(ssl_handle);
      if (cert != nullptr && SSL_get_verify_result(ssl_handle) == X509_V_OK) {
        char name[256] = {};
        const int length = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName,
                                                     name, sizeof(name));
        client_name_ = length > 0 ? std::string(name, static_cast<size_t>(length)) : "";
        authenticated_ = true;
      }
    }
    AfterHandshake();
  }

  void AfterHandshake() {
    if (reject_) {
      impl_.connections_rejected.fetch_add(1);
      Write(Text(503,
                 "too many connections (--max-connections=" +
                     std::to_string(impl_.options.max_connections) + "); retry later",
                 /*close=*/true),
            11, false);
      return;
    }
    WaitForRequest();
  }

  // WaitForRequest waits up to idle_timeout for a request's first byte (unless one is buffered
  // already), then reads its header.
  void WaitForRequest() {
    if (buffer_.size() > 0) {
      ReadHeader();
      return;
    }
    Expire(impl_.options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) {
                                // The client left, or idle_timeout passed: close quietly (an idle
                                // keep-alive connection is not an error).
                                return;
                              }
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    request_start_ = Clock::now();
    parser_.emplace();
    parser_->header_limit(
        static_cast<std::uint32_t>(std::min<size_t>(impl_.options.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(impl_.options.max_body_bytes);
    ExpireAt(request_start_ + impl_.options.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(self->Check(ec));
                            });
  }

  // ReadFailed answers a request that could not be read (or closes, when there is nobody to
  // answer).
  void ReadFailed(beast::error_code ec, bool in_body) {
    if (ec == beast::error::timeout) {
      impl_.timeouts.fetch_add(1);
      const bool whole = Clock::now() >= request_start_ + (in_body ? impl_.options.request_timeout
                                                                   : impl_.options.header_timeout);
      std::string what = in_body ? "request body" : "request headers";
      Write(Text(408,
                 whole ? what + " not received within " +
                             std::to_string((in_body ? impl_.options.request_timeout
                                                     : impl_.options.header_timeout)
                                                .count()) +
                             "s"
                       : "client silent for " + std::to_string(impl_.options.read_timeout.count()) +
                             "s inside the request body",
                 true),
            11, false);
      return;
    }
    if (ec == http::error::header_limit) {
      Write(Text(431,
                 "request headers are over the limit of " +
                     std::to_string(impl_.options.max_header_bytes) + " bytes",
                 true),
            11, false);
      return;
    }
    if (ec == http::error::body_limit) {
      Write(Text(413,
                 "request body is over the limit of " +
                     std::to_string(impl_.options.max_body_bytes) + " bytes",
                 true),
            11, false);
      return;
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      Write(Text(400, "malformed HTTP request: " + ec.message(), true), 11, false);
      return;
    }
    // The client closed or reset the connection: nobody to answer.
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      ReadFailed(ec, /*in_body=*/false);
      return;
    }
    const auto& request = parser_->get();
    target_ = std::string(request.target());
    if (const size_t query = target_.find('?'); query != std::string::npos) {
      target_.resize(query);
    }
    is_verb_ = request.method() == http::verb::post &&
               (target_ == impl_.filter_path || target_ == impl_.prioritize_path ||
                target_ == impl_.bind_path);
    // Authenticate before reading a body: an unauthenticated client must not make the server
    // buffer megabytes.
    if (is_verb_ && !impl_.options.client_ca_file.empty()) {
      std::optional<Reply> refused;
      if (!authenticated_) {
        refused = Text(401, "a client certificate signed by --client-ca-file is required", true);
      } else if (const auto& allowed = impl_.options.allowed_client_names;
                 !allowed.empty() &&
                 std::find(allowed.begin(), allowed.end(), client_name_) == allowed.end()) {
        refused = Text(403,
                       "client certificate common name \"" + client_name_ +
                           "\" is not in --allowed-client-names",
                       true);
      }
      if (refused) {
        impl_.unauthenticated.fetch_add(1);
        Write(*std::move(refused), request.version(), false);
        return;
      }
    }
    // Budget the body: Content-Length when given, the limit for a chunked body.
    if (!parser_->is_done()) {
      const auto length = parser_->content_length();  // boost::optional
      const size_t want = length ? static_cast<size_t>(*length) : impl_.options.max_body_bytes;
      if (!impl_.ReserveBody(want)) {
        impl_.requests_rejected.fetch_add(1);
        Write(Text(503, "server busy: too many request bodies buffered; retry later", true),
              request.version(), false);
        return;
      }
      reserved_ = want;
    }
    if (!parser_->is_done() && beast::iequals(request[http::field::expect], "100-continue")) {
      auto continue_reply =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      ExpireAt(request_start_ + impl_.options.request_timeout);
      http::async_write(
          stream_, *continue_reply,
          [self = this->shared_from_this(), continue_reply](beast::error_code e, size_t) {
            if (e)
              return;
            self->ReadBody();
          });
      return;
    }
    ReadBody();
  }

  // ReadBody reads until the message is complete, each read bounded by read_timeout and all of
  // them by request_timeout.
  void ReadBody() {
    if (parser_->is_done()) {
      Dispatch();
      return;
    }
    ExpireAt(std::min(Clock::now() + impl_.options.read_timeout,
                      request_start_ + impl_.options.request_timeout));
    http::async_read_some(stream_, buffer_, *parser_,
                          [self = this->shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) {
                              self->ReadFailed(self->Check(ec), /*in_body=*/true);
                              return;
                            }
                            self->ReadBody();
                          });
  }

  // Dispatch answers a complete request: health, readiness and metrics here, verbs on a worker.
  void Dispatch() {
    Disarm();
    auto& request = parser_->get();
    const unsigned version = request.version();
    const bool keep_alive = request.keep_alive();
    if (is_verb_) {
      using Verb = std::string (Extender::*)(std::string_view);
      Verb verb = &Extender::Filter;
      if (target_ == impl_.prioritize_path)
        verb = &Extender::Prioritize;
      if (target_ == impl_.bind_path)
        verb = &Extender::Bind;
      const bool error_is_400 = target_ == impl_.prioritize_path;
      std::function<void()> job = [self = this->shared_from_this(), verb, error_is_400,
                                   body = std::move(request.body()), version, keep_alive] {
        std::string reply = (self->impl_.extender.*verb)(body);
        Reply out;
        if (error_is_400 && reply.empty()) {
          // The scheduler treats a non-200 status as the extender's error.
          out = Text(400, "prioritize: request body is not a valid ExtenderArgs");
        } else {
          out = Reply{.content_type = "application/json", .body = std::move(reply)};
        }
        auto executor = self->stream_.get_executor();
        asio::post(executor, [self, out = std::move(out), version, keep_alive]() mutable {
          self->Write(std::move(out), version, keep_alive);
        });
      };
      parser_.reset();
      pending_ = true;
      impl_.in_flight.fetch_add(1);
      if (!impl_.workers->TrySubmit(job)) {
        impl_.requests_rejected.fetch_add(1);
        Write(Text(503, "server busy: " + std::to_string(impl_.workers->size()) +
                            " workers busy and the queue full; retry later"),
              version, keep_alive);
      }
      return;
    }
    Reply reply;
    if (request.method() != http::verb::get) {
      reply = Text(404, "unknown path " + target_);
    } else if (target_ == "/healthz") {
      if (impl_.workers->Stuck(impl_.options.stuck_timeout)) {
        reply = Text(503, "not serving: all " + std::to_string(impl_.workers->size()) +
                              " workers have been on their requests for more than " +
                              std::to_string(impl_.options.stuck_timeout.count()) + "s");
      } else {
        reply = Text(200, "ok");
      }
    } else if (target_ == "/readyz") {
      reply = impl_.extender.state().synced() ? Text(200, "ok")
                                              : Text(503, "waiting for the first full sync");
    } else if (target_ == "/metrics") {
      reply = Reply{.content_type = "text/plain; version=0.0.4",
                    .body = MetricsText(impl_.extender) + impl_.ServerMetricsText()};
    } else {
      reply = Text(404, "unknown path " + target_);
    }
    parser_.reset();
    Write(std::move(reply), version, keep_alive);
  }

  void Write(Reply reply, unsigned version, bool keep_alive) {
    if (reserved_ > 0) {
      impl_.ReleaseBody(reserved_);
      reserved_ = 0;
    }
    if (parser_ && !parser_->is_done())
      reply.close = true;  // the rest of the body is unread
    keep_alive_ = keep_alive && !reply.close;
    response_ = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(reply.status), version < 10 ? 11 : version);
    response_->set(http::field::content_type, reply.content_type);
    response_->body() = std::move(reply.body);
    response_->keep_alive(keep_alive_);
    response_->prepare_payload();
    Expire(reject_ ? std::chrono::seconds(1) : impl_.options.request_timeout);
    http::async_write(stream_, *response_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->OnWritten(self->Check(ec));
                      });
  }

  void OnWritten(beast::error_code ec) {
    response_.reset();
    if (pending_) {
      pending_ = false;
      impl_.in_flight.fetch_sub(1);
    }
    if (ec) {
      if (ec == beast::error::timeout)
        impl_.timeouts.fetch_add(1);
      return;
    }
    if (keep_alive_) {
      parser_.reset();
      // An idle connection keeps a small buffer, whatever the last request's size.
      if (buffer_.size() == 0)
        buffer_.shrink_to_fit();
      WaitForRequest();
      return;
    }
    Close();
  }

  // Close ends the connection after a reply: TLS close_notify (bounded), then the TCP close.
  void Close() {
    if constexpr (kTls) {
      Expire(std::chrono::seconds(1));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        beast::error_code ignored;
        self->Disarm();
        self->Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
      });
    } else {
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      // Read what the client still sends (an unread body) until it closes, for at most a second:
      // closing with unread data would reset the connection, and the client could lose the reply.
      Expire(std::chrono::seconds(1));
      Drain();
    }
  }

  void Drain() {
    // Discarded bytes: one buffer for every session (all on the event loop's thread).
    static char discard[4096];
    Lowest().async_read_some(asio::buffer(discard),
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (!ec)
                                 self->Drain();
                             });
  }

  Server::Impl& impl_;
  Stream stream_;
  const bool reject_;
  asio::steady_timer deadline_;
  uint64_t deadline_generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Clock::time_point request_start_;
  std::string target_;
  bool is_verb_ = false;
  bool keep_alive_ = false;
  bool pending_ = false;  // a verb is on a worker
  size_t reserved_ = 0;   // body budget held by the request being read
  bool authenticated_ = false;
  std::string client_name_;
  std::shared_ptr<http::response<http::string_body>> response_;
};

}  // namespace

template <class Stream>
void Server::Impl::StartSession(Stream stream, bool reject) {
  std::make_shared<Session<Stream>>(*this, std::move(stream), reject)->Start();
}

void Server::Impl::Accept() {
  acceptor.async_accept(ioc, [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open())
      return;
    if (ec) {
      // EMFILE and the like: keep the listener, try again shortly (the peers waiting in the
      // backlog are served once descriptors are free).
      log::Logger().Error(absl::UnavailableError(ec.message()), "Cannot accept a connection");
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e)
          Accept();
      });
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    bool reject = false;
    if (connections.load() >= options.max_connections) {
      // Answered with 503 in the background, up to a few dozen at once; beyond that a flood is
      // simply closed.
      reject = true;
      if (rejecting.load() >= 64) {
        connections_rejected.fetch_add(1);
        socket.close(ignored);
        Accept();
        return;
      }
    }
    if (tls) {
      StartSession(beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls),
                   reject);
    } else {
      StartSession(beast::tcp_stream(std::move(socket)), reject);
    }
    Accept();
  });
}

std::string Server::Impl::ServerMetricsText() const {
  std::ostringstream out;
  auto metric = [&](const char* name, const char* type, const char* help, int64_t value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
        << name << " " << value << "\n";
  };
  metric("devlet_extender_http_connections", "gauge", "Open connections.", connections.load());
  metric("devlet_extender_http_connections_rejected_total", "counter",
         "Connections turned away at --max-connections.", connections_rejected.load());
  metric("devlet_extender_http_requests_rejected_total", "counter",
         "Requests answered 503 because the workers' queue or the body budget was full.",
         requests_rejected.load());
  metric("devlet_extender_http_timeouts_total", "counter",
         "Connections ended by a header, body, idle-handshake or write deadline.", timeouts.load());
  metric("devlet_extender_http_unauthenticated_total", "counter",
         "Verb requests refused for a missing or disallowed client certificate.",
         unauthenticated.load());
  metric("devlet_extender_http_workers_busy", "gauge", "Workers running a verb.", workers->busy());
  metric("devlet_extender_http_requests_queued", "gauge", "Verb requests waiting for a worker.",
         workers->queued());
  return out.str();
}

Server::Server(Extender& extender, ServerOptions options)
    : extender_(extender), options_(std::move(options)) {}

Server::~Server() {
  Stop();
}

absl::Status Server::Start() {
  if (impl_)
    return FailedPrecondition("server already started");
  auto impl = std::make_unique<Impl>(extender_, options_);
  impl->filter_path = JoinPath(options_.prefix, options_.filter_verb);
  impl->prioritize_path = JoinPath(options_.prefix, options_.prioritize_verb);
  impl->bind_path = JoinPath(options_.prefix, options_.bind_verb);
  impl->body_budget = options_.max_buffered_body_bytes > 0 ? options_.max_buffered_body_bytes
                                                           : 8 * options_.max_body_bytes;
  impl->body_budget = std::max(impl->body_budget, options_.max_body_bytes);
  if (options_.threads <= 0 || options_.max_connections <= 0) {
    return InvalidArgument("--threads and --max-connections must be positive");
  }

  if (!options_.cert_file.empty() || !options_.key_file.empty()) {
    if (options_.cert_file.empty() || options_.key_file.empty()) {
      return InvalidArgument("TLS needs both --tls-cert-file and --tls-private-key-file");
    }
    auto tls = std::make_unique<ssl::context>(ssl::context::tls_server);
    tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                     ssl::context::single_dh_use);
    beast::error_code ec;
    tls->use_certificate_chain_file(options_.cert_file, ec);
    if (ec) {
      return InvalidArgument("cannot load --tls-cert-file \"" + options_.cert_file +
                             "\": " + ec.message());
    }
    tls->use_private_key_file(options_.key_file, ssl::context::pem, ec);
    if (ec) {
      return InvalidArgument("cannot load --tls-private-key-file \"" + options_.key_file +
                             "\": " + ec.message());
    }
    if (SSL_CTX_check_private_key(tls->native_handle()) != 1) {
      return InvalidArgument("--tls-private-key-file \"" + options_.key_file +
                             "\" does not match --tls-cert-file \"" + options_.cert_file + "\"");
    }
    if (!options_.client_ca_file.empty()) {
      tls->load_verify_file(options_.client_ca_file, ec);
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options_.client_ca_file.c_str());
      if (ec || names == nullptr) {
        return InvalidArgument("cannot load --client-ca-file \"" + options_.client_ca_file +
                               "\": " + (ec ? ec.message() : OpenSslError()));
      }
      // Tells clients which CA to present a certificate from.
      SSL_CTX_set_client_CA_list(tls->native_handle(), names);
      // Ask for a certificate, but let a client without one finish the handshake: the verbs
      // refuse it (401), /healthz and /readyz answer it (kubelet probes have none). A
      // certificate that does not verify fails the handshake.
      tls->set_verify_mode(ssl::verify_peer);
    }
    impl->tls = std::move(tls);
  } else if (!options_.client_ca_file.empty()) {
    return InvalidArgument(
        "--client-ca-file needs TLS (--tls-cert-file and --tls-private-key-file)");
  }

  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(options_.host, ec);
  if (ec) {
    tcp::resolver resolver(impl->ioc);
    auto found = resolver.resolve(options_.host, std::to_string(options_.port), ec);
    if (ec || found.empty()) {
      return InvalidArgument("cannot resolve --bind-address \"" + options_.host + "\"" +
                             (ec ? ": " + ec.message() : ""));
    }
    address = found.begin()->endpoint().address();
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
  auto listen_error = [&](const beast::error_code& e) {
    return Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                       ": " + e.message());
  };
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec)
    impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec)
    impl->acceptor.bind(endpoint, ec);
  if (!ec)
    impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return listen_error(ec);
  port_ = impl->acceptor.local_endpoint().port();

  const size_t max_queued = options_.max_queued_requests > 0
                                ? static_cast<size_t>(options_.max_queued_requests)
                                : 4 * static_cast<size_t>(options_.threads);
  impl->workers = std::make_unique<WorkerPool>(options_.threads, max_queued);
  impl->Accept();
  impl->io_thread = std::thread([raw = impl.get()] { raw->ioc.run(); });
  impl_ = std::move(impl);
  return absl::OkStatus();
}

void Server::Stop() {
  if (!impl_)
    return;
  Impl& impl = *impl_;
  if (impl.io_thread.joinable()) {
    asio::post(impl.ioc, [&impl] {
      beast::error_code ignored;
      impl.acceptor.close(ignored);
      impl.accept_retry.cancel();
    });
    // Requests being served get a moment to be answered; idle connections are not waited for.
    const auto give_up = Clock::now() + std::chrono::seconds(2);
    while (impl.in_flight.load() > 0 && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    impl.ioc.stop();
    impl.io_thread.join();
  }
  if (impl.workers)
    impl.workers->Stop();
  impl_.reset();
}

ServerStats Server::stats() const {
  if (!impl_)
    return {};
  return ServerStats{.connections = impl_->connections.load(),
                     .connections_rejected = impl_->connections_rejected.load(),
                     .requests_rejected = impl_->requests_rejected.load(),
                     .timeouts = impl_->timeouts.load(),
                     .unauthenticated = impl_->unauthenticated.load(),
                     .workers_busy = impl_->workers->busy(),
                     .requests_queued = impl_->workers->queued()};
}

std::string MetricsText(const Extender& extender) {
  const Counters& c = extender.counters();
  std::ostringstream out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
        << name << " " << value << "\n";
  };
  auto count = [](const std::atomic<int64_t>& v) {
    return static_cast<double>(v.load());
  };
  metric("devlet_extender_filter_requests_total", "counter", "Filter requests.",
         count(c.filter_requests));
  metric("devlet_extender_prioritize_requests_total", "counter", "Prioritize requests.",
         count(c.prioritize_requests));
  metric("devlet_extender_bind_requests_total", "counter", "Bind requests.",
         count(c.bind_requests));
  metric("devlet_extender_bind_failures_total", "counter", "Bind requests that failed.",
         count(c.bind_failures));
  metric("devlet_extender_bad_requests_total", "counter", "Requests with an invalid body.",
         count(c.bad_requests));
  metric("devlet_extender_claim_conflicts_total", "counter",
         "ResourceClaim status updates that hit a resourceVersion conflict.", count(c.conflicts));
  metric("devlet_extender_peer_checks_total", "counter",
         "Binds that waited for the claim watch to rule out another replica's allocation.",
         count(c.peer_checks));
  metric("devlet_extender_peer_conflicts_total", "counter",
         "Binds refused by that check (a device taken first elsewhere, or no watch in time).",
         count(c.peer_conflicts));
  metric("devlet_extender_peer_check_seconds_total", "counter", "Time spent in that check.",
         count(c.peer_check_micros_total) / 1e6);
  metric("devlet_extender_filter_seconds_total", "counter", "Time spent in filter.",
         count(c.filter_micros_total) / 1e6);
  metric("devlet_extender_prioritize_seconds_total", "counter", "Time spent in prioritize.",
         count(c.prioritize_micros_total) / 1e6);
  metric("devlet_extender_ready", "gauge", "Whether the first full sync is done.",
         extender.state().synced() ? 1 : 0);
  return out.str();
}

}  // namespace devlet::extender
