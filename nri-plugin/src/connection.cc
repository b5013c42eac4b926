#include "devlet/nri/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/ttrpc/ttrpc.pb.h"

namespace devlet::nri {
namespace {

absl::Status StatusFromWire(const ::devlet::ttrpc::Status& status) {
  if (status.code() == 0) {
    return absl::OkStatus();
  }
  const int code = status.code();
  const auto absl_code = (code > 0 && code <= 16) ? static_cast<absl::StatusCode>(code)
                                                  : absl::StatusCode::kUnknown;
  return absl::Status(absl_code, status.message());
}

}  // namespace

void ServiceRegistry::Register(const std::string& service, const std::string& method,
                               MethodHandler handler) {
  services_[service][method] = std::move(handler);
}

absl::StatusOr<const MethodHandler*> ServiceRegistry::Find(const std::string& service,
                                                           const std::string& method) const {
  auto s = services_.find(service);
  if (s == services_.end()) {
    return Unimplemented("service " + service);
  }
  auto m = s->second.find(method);
  if (m == s->second.end()) {
    return Unimplemented("method " + method);
  }
  return &m->second;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Start(UniqueFd trunk,
                                                              ConnectionOptions options) {
  if (!trunk.valid()) {
    return InvalidArgument("NRI connection: no socket");
  }
  if (options.serve_conn == 0 || options.call_conn == 0 ||
      options.serve_conn == options.call_conn) {
    return InvalidArgument("NRI connection: serve and call connection ids must differ and be > 0");
  }
  if (options.workers < 2) {
    options.workers = 2;  // one to lead (read), at least one to take over while it serves
  }
  std::unique_ptr<Connection> connection(new Connection(std::move(trunk), std::move(options)));
  for (int i = 0; i < connection->options_.workers; ++i) {
    connection->workers_.emplace_back([c = connection.get()] { c->ThreadLoop(); });
  }
  return connection;
}

Connection::Connection(UniqueFd trunk, ConnectionOptions options)
    : trunk_(std::move(trunk)), options_(std::move(options)) {}

Connection::~Connection() {
  Close();  // The leader reads EOF and tears down, which stops every thread.
  for (auto& worker : workers_) {
    worker.join();
  }
}

void Connection::Close() {
  if (close_requested_.exchange(true)) {
    return;
  }
  // Wakes the reader with EOF; the reader tears down.
  ::shutdown(trunk_.get(), SHUT_RDWR);
}

bool Connection::closed() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return closed_;
}

bool Connection::WaitClosed(std::chrono::nanoseconds timeout) {
  std::unique_lock<std::mutex> lock(state_mu_);
  return state_cv_.wait_for(lock, timeout, [&] { return torn_down_; });
}

absl::Status Connection::close_reason() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return close_reason_;
}

// Leader/follower: the pool's threads take turns reading the socket. The leader reads and decodes;
// when a chunk yields requests and another thread is idle, that thread becomes the leader and the
// old leader serves the first request itself, so a request's critical path has no thread hand-off.
// With no idle thread the leader queues the requests and keeps reading: the socket is always read.
void Connection::ThreadLoop() {
  std::unique_lock<std::mutex> lock(tasks_mu_);
  while (true) {
    ++idle_;
    tasks_cv_.wait(lock, [&] { return stopping_ || !leader_present_ || !tasks_.empty(); });
    --idle_;
    if (stopping_) {
      return;
    }
    if (!leader_present_) {
      leader_present_ = true;
      lock.unlock();
      std::function<void()> task = Lead();
      if (task) {
        task();
      }
      lock.lock();
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

std::function<void()> Connection::Lead() {
  if (read_buffer_.empty()) {
    read_buffer_.resize(64 * 1024);
  }
  while (true) {
    const ssize_t n = ::read(trunk_.get(), read_buffer_.data(), read_buffer_.size());
    if (n == 0) {
      Teardown(Unavailable(close_requested_ ? "NRI connection closed"
                                            : "NRI peer closed the connection"));
      return {};
    }
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      Teardown(close_requested_ ? Unavailable("NRI connection closed")
                                : ErrnoToStatus(errno, "reading the NRI socket"));
      return {};
    }
    absl::Status status = mux_decoder_.Feed(
        std::string_view(read_buffer_.data(), static_cast<size_t>(n)),
        [&](uint32_t conn_id, std::string_view payload) {
          TtrpcMessageDecoder* decoder = nullptr;
          if (conn_id == options_.serve_conn) {
            decoder = &serve_decoder_;
          } else if (conn_id == options_.call_conn) {
            decoder = &call_decoder_;
          } else {
            return;  // Unknown mux connection: dropped, like the Go multiplexer does.
          }
          decoder->Feed(payload, [&](TtrpcMessage message) {
            OnMessage(conn_id, std::move(message));
          });
        });
    if (!status.ok()) {
      ready_.clear();
      Teardown(status);
      return {};
    }
    if (ready_.empty()) {
      continue;
    }
    std::unique_lock<std::mutex> lock(tasks_mu_);
    if (idle_ > 0) {
      std::function<void()> first = std::move(ready_.front());
      for (size_t i = 1; i < ready_.size(); ++i) {
        tasks_.push_back(std::move(ready_[i]));
      }
      ready_.clear();
      leader_present_ = false;
      lock.unlock();
      tasks_cv_.notify_all();
      return first;
    }
    for (auto& task : ready_) {
      tasks_.push_back(std::move(task));
    }
    ready_.clear();
  }
}

void Connection::Teardown(const absl::Status& why) {
  close_requested_ = true;
  ::shutdown(trunk_.get(), SHUT_RDWR);
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    for (auto& [id, pending] : pending_) {
      pending->done = true;
      pending->result = Unavailable("NRI connection closed before the reply: " + Message(why));
      pending->cv.notify_all();
    }
    pending_.clear();
  }
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    closed_ = true;
    close_reason_ = why;
  }
  state_cv_.notify_all();
  if (options_.on_close) {
    options_.on_close(why);
  }
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    torn_down_ = true;
  }
  state_cv_.notify_all();
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    stopping_ = true;
  }
  tasks_cv_.notify_all();
}

void Connection::OnMessage(uint32_t conn_id, TtrpcMessage message) {
  const auto type = static_cast<TtrpcMessageType>(message.type);
  if (conn_id == options_.serve_conn && type == TtrpcMessageType::kRequest) {
    HandleRequest(conn_id, std::move(message));
  } else if (conn_id == options_.call_conn && type == TtrpcMessageType::kResponse) {
    HandleResponse(std::move(message));
  } else {
    // Streams (Data) are not used by NRI; anything else is noise. Dropped.
    log::Logger().V(4).Info("Dropping NRI message", "conn", conn_id, "type",
                            static_cast<int>(message.type), "stream", message.stream_id);
  }
}

void Connection::HandleRequest(uint32_t conn_id, TtrpcMessage message) {
  const uint32_t stream = message.stream_id;
  if (message.oversized) {
    SendResponse(conn_id, stream,
                 ResourceExhausted("request of " + std::to_string(message.announced_length) +
                                   " bytes exceeds the ttrpc limit of " +
                                   std::to_string(kTtrpcMessageLengthMax)),
                 {});
    return;
  }
  if (stream % 2 == 0) {
    SendResponse(conn_id, stream,
                 InvalidArgument("ttrpc stream id " + std::to_string(stream) + " must be odd"), {});
    return;
  }
  if (stream <= last_request_stream_id_) {
    SendResponse(conn_id, stream,
                 InvalidArgument("ttrpc stream id " + std::to_string(stream) +
                                 " cannot be re-used and must increment"),
                 {});
    return;
  }
  last_request_stream_id_ = stream;
  auto request = std::make_shared<::devlet::ttrpc::Request>();
  if (!request->ParseFromString(message.data)) {
    SendResponse(conn_id, stream, InvalidArgument("undecodable ttrpc request"), {});
    return;
  }
  const MethodHandler* handler = nullptr;
  if (options_.services == nullptr) {
    SendResponse(conn_id, stream, Unimplemented("service " + request->service()), {});
    return;
  }
  absl::StatusOr<const MethodHandler*> found =
      options_.services->Find(request->service(), request->method());
  if (!found.ok()) {
    SendResponse(conn_id, stream, found.status(), {});
    return;
  }
  handler = *found;
  CallContext context;
  context.service = request->service();
  context.method = request->method();
  context.stream_id = stream;
  if (request->timeout_nano() > 0) {
    // Saturated at time_point::max(): a peer's timeout near INT64_MAX overflowed the clock
    // (UBSan, fuzz/nri_ttrpc_fuzzer.cc).
    const auto now = std::chrono::steady_clock::now();
    const std::chrono::nanoseconds timeout(request->timeout_nano());
    context.deadline = timeout < std::chrono::steady_clock::time_point::max() - now
                           ? now + timeout
                           : std::chrono::steady_clock::time_point::max();
  }
  const auto received = std::chrono::steady_clock::now();
  Enqueue([this, conn_id, handler, request, context = std::move(context), received] {
    const auto started = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> reply = (*handler)(context, request->payload());
    const log::Logger logger = log::Logger().V(4);
    if (logger.Enabled()) {
      const auto done = std::chrono::steady_clock::now();
      logger.Info("ttrpc request served", "method", context.method, "bytes",
                  request->payload().size(), "queuedUs",
                  std::chrono::duration_cast<std::chrono::microseconds>(started - received).count(),
                  "handlerUs",
                  std::chrono::duration_cast<std::chrono::microseconds>(done - started).count());
    }
    if (reply.ok()) {
      SendResponse(conn_id, context.stream_id, absl::OkStatus(), *reply);
    } else {
      SendResponse(conn_id, context.stream_id, reply.status(), {});
    }
  });
}

void Connection::HandleResponse(TtrpcMessage message) {
  std::shared_ptr<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    auto it = pending_.find(message.stream_id);
    if (it == pending_.end()) {
      return;  // Late reply to a call that timed out, or noise.
    }
    pending = it->second;
    pending_.erase(it);
    if (message.oversized) {
      pending->result = ResourceExhausted(
          "response of " + std::to_string(message.announced_length) +
          " bytes exceeds the ttrpc limit of " + std::to_string(kTtrpcMessageLengthMax));
    } else {
      ::devlet::ttrpc::Response response;
      if (!response.ParseFromString(message.data)) {
        pending->result = Internal("undecodable ttrpc response");
      } else if (absl::Status status = StatusFromWire(response.status()); !status.ok()) {
        pending->result = status;
      } else {
        pending->result = std::move(*response.mutable_payload());
      }
    }
    pending->done = true;
  }
  pending->cv.notify_all();
}

void Connection::SendResponse(uint32_t conn_id, uint32_t stream_id, const absl::Status& status,
                              std::string_view payload) {
  ::devlet::ttrpc::Response response;
  auto* wire_status = response.mutable_status();  // Always present, as the Go server sends it.
  if (!status.ok()) {
    wire_status->set_code(static_cast<int32_t>(status.code()));
    wire_status->set_message(Message(status));
  }
  if (!payload.empty()) {
    response.set_payload(std::string(payload));
  }
  std::string data = response.SerializeAsString();
  if (data.size() > kTtrpcMessageLengthMax) {
    const std::string what = "response of " + std::to_string(data.size()) +
                             " bytes exceeds the ttrpc limit of " +
                             std::to_string(kTtrpcMessageLengthMax);
    log::Logger().Warning("Refusing to send an oversized NRI response", "bytes", data.size());
    response.Clear();
    response.mutable_status()->set_code(static_cast<int32_t>(absl::StatusCode::kResourceExhausted));
    response.mutable_status()->set_message(what);
    data = response.SerializeAsString();
  }
  absl::Status sent = SendMessage(conn_id, stream_id, TtrpcMessageType::kResponse, data);
  if (!sent.ok()) {
    log::Logger().V(2).Info("Could not send NRI response", "stream", stream_id, "err",
                            Message(sent));
  }
}

absl::Status Connection::SendMessage(uint32_t conn_id, uint32_t stream_id, TtrpcMessageType type,
                                     std::string_view data) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    status = SendMessageLocked(conn_id, stream_id, type, data);
  }
  if (!status.ok()) {
    Close();
  }
  return status;
}

absl::Status Connection::SendMessageLocked(uint32_t conn_id, uint32_t stream_id,
                                           TtrpcMessageType type, std::string_view data) {
  const std::string message = EncodeTtrpcMessage(stream_id, type, 0, data);
  for (const std::string& frame : EncodeMuxFrames(conn_id, message)) {
    DEVLET_RETURN_IF_ERROR(WriteAll(trunk_.get(), frame.data(), frame.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Connection::Call(std::string_view service, std::string_view method,
                                             std::string_view payload,
                                             std::chrono::nanoseconds timeout) {
  ::devlet::ttrpc::Request request;
  request.set_service(std::string(service));
  request.set_method(std::string(method));
  request.set_payload(std::string(payload));
  if (timeout.count() > 0) {
    request.set_timeout_nano(timeout.count());
  }
  const std::string data = request.SerializeAsString();
  if (data.size() > kTtrpcMessageLengthMax) {
    return ResourceExhausted(std::string(method) + " request of " + std::to_string(data.size()) +
                             " bytes exceeds the ttrpc limit of " +
                             std::to_string(kTtrpcMessageLengthMax));
  }
  auto pending = std::make_shared<Pending>();
  uint32_t stream_id;
  absl::Status sent;
  {
    // The id is taken and the request written under the write lock, so ids reach the server in
    // increasing order, as ttrpc servers require.
    std::lock_guard<std::mutex> write_lock(write_mu_);
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      if (close_requested_) {
        return Unavailable("NRI connection is closed");
      }
      stream_id = next_stream_id_;
      next_stream_id_ += 2;
      pending_[stream_id] = pending;
    }
    sent = SendMessageLocked(options_.call_conn, stream_id, TtrpcMessageType::kRequest, data);
  }
  if (!sent.ok()) {
    Close();
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_.erase(stream_id);
    return Unavailable("sending " + std::string(method) + ": " + Message(sent));
  }
  std::unique_lock<std::mutex> lock(pending_mu_);
  auto ready = [&] { return pending->done; };
  if (timeout.count() > 0) {
    if (!pending->cv.wait_for(lock, timeout, ready)) {
      pending_.erase(stream_id);
      return DeadlineExceeded(std::string(method) + " got no reply within " +
                              std::to_string(timeout.count() / 1000000) + " ms");
    }
  } else {
    pending->cv.wait(lock, ready);
  }
  return std::move(pending->result);
}

void Connection::Enqueue(std::function<void()> task) {
  ready_.push_back(std::move(task));  // Leader only; dispatched after the chunk (see Lead).
}

}  // namespace devlet::nri
