// The NRI trunk as the container runtime (or, in the runtime role, a plugin) writes it: mux frames
// carrying ttrpc messages (nri/framing.h), read by nri::Connection (nri/connection.h) off a real
// socket, in both roles. The input is the byte stream the peer sends after a one-byte header:
//
//   bit 0: role (0: plugin, serving mux connection 1 and calling on 2; 1: the runtime's roles)
//   bit 1: one Call is in flight (stream 1 on the call connection) while the bytes arrive, so
//          that responses in the input meet a waiting caller
//   bits 2-7: where the stream is cut for the split-decoding check below
//
// Besides crashes and hangs (every request must be answered or the trunk closed), the pure
// decoders must give the same frames and messages whether the stream comes whole or cut anywhere.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "devlet/nri/connection.h"
#include "google/protobuf/stubs/logging.h"
#include "devlet/nri/framing.h"
#include "devlet/ttrpc/ttrpc.pb.h"
#include "fuzz_util.h"

namespace {

using devlet::nri::CallContext;
using devlet::nri::Connection;
using devlet::nri::ConnectionOptions;
using devlet::nri::MuxFrameDecoder;
using devlet::nri::ServiceRegistry;
using devlet::nri::TtrpcMessage;
using devlet::nri::TtrpcMessageDecoder;
using devlet::nri::UniqueFd;

constexpr char kService[] = "nri.pkg.api.v1alpha1.Plugin";

std::shared_ptr<const ServiceRegistry> Services() {
  static const auto* services = [] {
    auto* registry = new std::shared_ptr<ServiceRegistry>(std::make_shared<ServiceRegistry>());
    (*registry)->Register(kService, "Configure",
                          [](const CallContext&, std::string_view payload)
                              -> absl::StatusOr<std::string> { return std::string(payload); });
    (*registry)->Register(kService, "CreateContainer",
                          [](const CallContext& context, std::string_view)
                              -> absl::StatusOr<std::string> {
                            return absl::InvalidArgumentError("refused stream " +
                                                              std::to_string(context.stream_id));
                          });
    return registry;
  }();
  return *services;
}

// Frames and messages as one decoder sequence yields them: "conn:payload" and
// "stream/type/flags/oversized/length:data" records.
struct Decoded {
  std::vector<std::string> records;
  bool failed = false;
};

Decoded DecodeStream(std::string_view stream, std::size_t cut) {
  Decoded out;
  MuxFrameDecoder mux;
  TtrpcMessageDecoder ttrpc[3];
  auto on_frame = [&](uint32_t conn, std::string_view payload) {
    out.records.push_back(std::to_string(conn) + ":" + std::string(payload));
    if (conn == 1 || conn == 2) {
      ttrpc[conn].Feed(payload, [&](TtrpcMessage m) {
        out.records.push_back(std::to_string(m.stream_id) + "/" + std::to_string(m.type) + "/" +
                              std::to_string(m.flags) + "/" + std::to_string(m.oversized) + "/" +
                              std::to_string(m.announced_length) + ":" + m.data);
      });
    }
  };
  // Cut into pieces of `cut` bytes (1..64), as short reads would.
  for (std::size_t pos = 0; pos < stream.size() && !out.failed; pos += cut) {
    out.failed = !mux.Feed(stream.substr(pos, cut), on_frame).ok();
  }
  return out;
}

void CheckSplitDecoding(std::string_view stream, std::size_t cut) {
  const Decoded whole = DecodeStream(stream, stream.size() + 1);
  const Decoded split = DecodeStream(stream, cut);
  if (whole.failed != split.failed || whole.records != split.records) {
    devlet::fuzz::Fail("split decoding differs", std::to_string(cut));
  }
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // the connection gave up on the stream (a protocol error)
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // protobuf logs every string field that is not UTF-8; the connection answers those requests
  // itself (InvalidArgument), and the log lines only slow the run.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0 || size > (1u << 20)) {
    return -1;
  }
  const uint8_t header = data[0];
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  CheckSplitDecoding(stream, 1 + (header >> 2));

  const bool runtime_role = (header & 1) != 0;
  const bool with_call = (header & 2) != 0;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    devlet::fuzz::Fail("socketpair", std::to_string(errno));
  }
  UniqueFd peer(fds[1]);
  ConnectionOptions options{.serve_conn = runtime_role ? 2u : 1u,
                            .call_conn = runtime_role ? 1u : 2u,
                            .services = Services(),
                            .workers = 2};
  absl::StatusOr<std::unique_ptr<Connection>> started =
      Connection::Start(UniqueFd(fds[0]), std::move(options));
  if (!started.ok()) {
    devlet::fuzz::Fail("Connection::Start", started.status().ToString());
  }
  std::unique_ptr<Connection> connection = *std::move(started);

  // What the connection writes back (responses, the call's request) is read and dropped, so that
  // its writes never block.
  std::atomic<std::size_t> received{0};
  std::thread drain([&] {
    char buffer[16384];
    for (;;) {
      const ssize_t n = ::read(peer.get(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      received += static_cast<std::size_t>(n);
    }
  });
  std::thread caller;
  if (with_call) {
    devlet::ttrpc::Request request;
    request.set_service("nri.pkg.api.v1alpha1.Runtime");
    request.set_method("RegisterPlugin");
    request.set_payload("fuzz");
    request.set_timeout_nano(std::chrono::nanoseconds(std::chrono::seconds(5)).count());
    const std::size_t request_bytes = devlet::nri::kMuxHeaderLength +
                                      devlet::nri::kTtrpcHeaderLength + request.ByteSizeLong();
    caller = std::thread([&] {
      (void)connection->Call("nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin", "fuzz",
                             std::chrono::seconds(5));
    });
    // The request (stream 1) is on the wire before the input's responses: they can match it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (received.load() < request_bytes && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
  if (SendAll(peer.get(), stream)) {
    ::shutdown(peer.get(), SHUT_WR);  // EOF: the connection tears down, failing the call
  }
  if (!connection->WaitClosed(std::chrono::seconds(10))) {
    devlet::fuzz::Fail("the connection did not close after the peer's EOF", "");
  }
  if (caller.joinable()) caller.join();
  connection.reset();
  drain.join();
  return 0;
}
