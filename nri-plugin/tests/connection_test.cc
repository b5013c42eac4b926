#include "devlet/nri/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <random>
#include <thread>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/ttrpc/ttrpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::nri {
namespace {

using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kSvc[] = "test.Service";

std::shared_ptr<ServiceRegistry> EchoServices(std::string prefix) {
  auto services = std::make_shared<ServiceRegistry>();
  services->Register(kSvc, "Echo",
                     [prefix](const CallContext&, std::string_view payload)
                         -> absl::StatusOr<std::string> { return prefix + std::string(payload); });
  services->Register(kSvc, "Sleep",
                     [](const CallContext&, std::string_view payload)
                         -> absl::StatusOr<std::string> {
                       std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(
                           std::string(payload))));
                       return std::string(payload);
                     });
  services->Register(kSvc, "Fail",
                     [](const CallContext&, std::string_view) -> absl::StatusOr<std::string> {
                       return FailedPrecondition("claim ns/c is not prepared");
                     });
  // Deadline answers how far away the request's deadline is: "none", "past" or "future".
  services->Register(kSvc, "Deadline",
                     [](const CallContext& context, std::string_view)
                         -> absl::StatusOr<std::string> {
                       if (context.deadline == std::chrono::steady_clock::time_point::max()) {
                         return std::string("none");
                       }
                       return std::string(context.deadline < std::chrono::steady_clock::now()
                                              ? "past"
                                              : "future");
                     });
  services->Register(kSvc, "Big",
                     [](const CallContext&, std::string_view payload)
                         -> absl::StatusOr<std::string> {
                       return std::string(std::stoul(std::string(payload)), 'b');
                     });
  return services;
}

struct Pair {
  std::unique_ptr<Connection> plugin;
  std::unique_ptr<Connection> runtime;
};

Pair MakePair(std::shared_ptr<ServiceRegistry> plugin_services,
              std::shared_ptr<ServiceRegistry> runtime_services) {
  auto fds = SocketPair();
  EXPECT_TRUE(fds.ok());
  Pair pair;
  auto plugin = Connection::Start(std::move(fds->first),
                                  {.serve_conn = kPluginServiceConn,
                                   .call_conn = kRuntimeServiceConn,
                                   .services = std::move(plugin_services)});
  auto runtime = Connection::Start(std::move(fds->second),
                                   {.serve_conn = kRuntimeServiceConn,
                                    .call_conn = kPluginServiceConn,
                                    .services = std::move(runtime_services)});
  EXPECT_TRUE(plugin.ok() && runtime.ok());
  pair.plugin = std::move(*plugin);
  pair.runtime = std::move(*runtime);
  return pair;
}

TEST(ConnectionTest, BothDirections) {
  Pair pair = MakePair(EchoServices("plugin:"), EchoServices("runtime:"));
  EXPECT_THAT(pair.plugin->Call(kSvc, "Echo", "hi", 2s), IsOkAndHolds(std::string("runtime:hi")));
  EXPECT_THAT(pair.runtime->Call(kSvc, "Echo", "yo", 2s), IsOkAndHolds(std::string("plugin:yo")));
  EXPECT_THAT(pair.runtime->Call(kSvc, "Echo", "", 0s), IsOkAndHolds(std::string("plugin:")));
}

TEST(ConnectionTest, UnknownServiceAndMethodAreUnimplemented) {
  Pair pair = MakePair(EchoServices("p"), nullptr);
  EXPECT_THAT(pair.runtime->Call(kSvc, "Nope", "", 2s),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("method Nope")));
  EXPECT_THAT(pair.runtime->Call("other.Service", "Echo", "", 2s),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("service other.Service")));
  EXPECT_THAT(pair.plugin->Call(kSvc, "Echo", "", 2s),
              StatusIs(absl::StatusCode::kUnimplemented));
}

TEST(ConnectionTest, HandlerErrorsKeepCodeAndMessage) {
  Pair pair = MakePair(EchoServices("p"), nullptr);
  EXPECT_THAT(pair.runtime->Call(kSvc, "Fail", "", 2s),
              StatusIs(absl::StatusCode::kFailedPrecondition, "claim ns/c is not prepared"));
}

TEST(ConnectionTest, ConcurrentCallsAreMatchedByStream) {
  Pair pair = MakePair(EchoServices("p"), nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 25; ++i) {
        const std::string ms = std::to_string(rng() % 3);
        auto reply = pair.runtime->Call(kSvc, (i % 2) ? "Sleep" : "Echo", ms, 5s);
        const std::string want = (i % 2) ? ms : "p" + ms;
        if (!reply.ok() || *reply != want) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
}

TEST(ConnectionTest, SlowHandlerDoesNotBlockOthers) {
  Pair pair = MakePair(EchoServices("p"), nullptr);
  auto slow = std::async(std::launch::async,
                         [&] { return pair.runtime->Call(kSvc, "Sleep", "300", 5s); });
  std::this_thread::sleep_for(20ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(pair.runtime->Call(kSvc, "Echo", "x", 5s), IsOkAndHolds(std::string("px")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_THAT(slow.get(), IsOkAndHolds(std::string("300")));
}

// A handler that calls back into the peer while serving (Configure arriving while the plugin's
// RegisterPlugin is pending is the real-world case) must not deadlock the reader.
TEST(ConnectionTest, NestedCallFromHandler) {
  auto runtime_services = EchoServices("runtime:");
  auto plugin_services = std::make_shared<ServiceRegistry>();
  Connection* plugin_side = nullptr;
  plugin_services->Register(kSvc, "Nested",
                            [&](const CallContext&, std::string_view payload)
                                -> absl::StatusOr<std::string> {
                              return plugin_side->Call(kSvc, "Echo", payload, 2s);
                            });
  Pair pair = MakePair(plugin_services, runtime_services);
  plugin_side = pair.plugin.get();
  EXPECT_THAT(pair.runtime->Call(kSvc, "Nested", "n", 2s), IsOkAndHolds(std::string("runtime:n")));
}

TEST(ConnectionTest, LargeMessagesAndTheLimit) {
  Pair pair = MakePair(EchoServices(""), nullptr);
  for (size_t size : {size_t{4000}, size_t{4096}, size_t{5000}, size_t{1} << 20}) {
    const std::string payload(size, 'q');
    EXPECT_THAT(pair.runtime->Call(kSvc, "Echo", payload, 5s), IsOkAndHolds(payload)) << size;
  }
  EXPECT_THAT(pair.runtime->Call(kSvc, "Echo", std::string(kTtrpcMessageLengthMax, 'q'), 5s),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // A handler whose response would exceed the limit answers ResourceExhausted instead.
  EXPECT_THAT(pair.runtime->Call(kSvc, "Big", std::to_string(kTtrpcMessageLengthMax + 10), 5s),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("exceeds")));
  // And the connection is still fine.
  EXPECT_THAT(pair.runtime->Call(kSvc, "Echo", "ok", 5s), IsOkAndHolds(std::string("ok")));
}

TEST(ConnectionTest, CallTimeoutThenLateReplyIsIgnored) {
  Pair pair = MakePair(EchoServices("p"), nullptr);
  EXPECT_THAT(pair.runtime->Call(kSvc, "Sleep", "200", 50ms),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  std::this_thread::sleep_for(250ms);
  EXPECT_THAT(pair.runtime->Call(kSvc, "Echo", "x", 2s), IsOkAndHolds(std::string("px")));
}

TEST(ConnectionTest, PeerClosingMidRequestFailsPendingCalls) {
  std::atomic<bool> closed{false};
  auto fds = SocketPair();
  ASSERT_TRUE(fds.ok());
  auto plugin = Connection::Start(std::move(fds->first),
                                  {.on_close = [&](const absl::Status&) { closed = true; }});
  ASSERT_TRUE(plugin.ok());
  UniqueFd peer = std::move(fds->second);
  auto call = std::async(std::launch::async,
                         [&] { return (*plugin)->Call(kSvc, "Echo", "x", 10s); });
  std::this_thread::sleep_for(50ms);
  peer.reset();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(call.get(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE((*plugin)->WaitClosed(2s));
  EXPECT_TRUE(closed.load());
  EXPECT_THAT((*plugin)->Call(kSvc, "Echo", "x", 1s), StatusIs(absl::StatusCode::kUnavailable));
}

// A raw peer speaking bytes at a plugin-role connection.
class RawPeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fds = SocketPair();
    ASSERT_TRUE(fds.ok());
    auto connection = Connection::Start(
        std::move(fds->first),
        {.services = EchoServices("p"), .on_close = [this](const absl::Status& why) {
           std::lock_guard<std::mutex> lock(mu_);
           close_reason_ = why;
         }});
    ASSERT_TRUE(connection.ok());
    connection_ = std::move(*connection);
    peer_ = std::move(fds->second);
    timeval tv{.tv_sec = 3, .tv_usec = 0};
    setsockopt(peer_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }

  // The connection's on_close writes into this fixture: destroy it first.
  void TearDown() override { connection_.reset(); }

  void Send(const std::string& bytes) { ASSERT_OK(WriteAll(peer_.get(), bytes.data(), bytes.size())); }

  void SendRequest(uint32_t conn, uint32_t stream, const std::string& method,
                   const std::string& payload, int64_t timeout_nano = 0) {
    ::devlet::ttrpc::Request request;
    request.set_service(kSvc);
    request.set_method(method);
    request.set_payload(payload);
    request.set_timeout_nano(timeout_nano);
    for (const auto& frame : EncodeMuxFrames(
             conn, EncodeTtrpcMessage(stream, TtrpcMessageType::kRequest, 0,
                                      request.SerializeAsString()))) {
      Send(frame);
    }
  }

  // Reads one response from the plugin's service connection.
  std::pair<uint32_t, ::devlet::ttrpc::Response> ReadResponse() {
    std::pair<uint32_t, ::devlet::ttrpc::Response> result{0, {}};
    bool done = false;
    char buffer[65536];
    while (!done) {
      const ssize_t n = ::read(peer_.get(), buffer, sizeof(buffer));
      if (n <= 0) {
        ADD_FAILURE() << "no response";
        return result;
      }
      EXPECT_OK(mux_.Feed(std::string_view(buffer, static_cast<size_t>(n)),
                          [&](uint32_t conn, std::string_view payload) {
                            EXPECT_EQ(conn, kPluginServiceConn);
                            decoder_.Feed(payload, [&](TtrpcMessage m) {
                              EXPECT_EQ(m.type, 2);
                              result.first = m.stream_id;
                              result.second.ParseFromString(m.data);
                              done = true;
                            });
                          }));
    }
    return result;
  }

  std::unique_ptr<Connection> connection_;
  UniqueFd peer_;
  MuxFrameDecoder mux_;
  TtrpcMessageDecoder decoder_;
  std::mutex mu_;
  absl::Status close_reason_;
};

TEST_F(RawPeerTest, ValidRequestAfterNoise) {
  Send(EncodeMuxFrame(9, "frames for unknown connections are dropped"));
  Send(EncodeMuxFrame(kRuntimeServiceConn,
                      EncodeTtrpcMessage(77, TtrpcMessageType::kData, 0, "stray data")));
  SendRequest(kPluginServiceConn, 1, "Echo", "a");
  auto [stream, response] = ReadResponse();
  EXPECT_EQ(stream, 1u);
  EXPECT_EQ(response.status().code(), 0);
  EXPECT_TRUE(response.has_status());
  EXPECT_EQ(response.payload(), "pa");
}

TEST_F(RawPeerTest, StreamIdRules) {
  SendRequest(kPluginServiceConn, 2, "Echo", "a");
  auto [stream, response] = ReadResponse();
  EXPECT_EQ(stream, 2u);
  EXPECT_EQ(response.status().code(), 3);
  EXPECT_THAT(response.status().message(), HasSubstr("must be odd"));
  SendRequest(kPluginServiceConn, 5, "Echo", "a");
  EXPECT_EQ(ReadResponse().second.status().code(), 0);
  SendRequest(kPluginServiceConn, 3, "Echo", "a");
  auto [stream3, response3] = ReadResponse();
  EXPECT_EQ(stream3, 3u);
  EXPECT_THAT(response3.status().message(), HasSubstr("must increment"));
}

// Found by fuzz/nri_ttrpc_fuzzer: a timeout_nano near INT64_MAX overflowed now() + timeout (UBSan)
// and, without UBSan, wrapped into a deadline in the past. It now means no deadline.
TEST_F(RawPeerTest, HugeTimeoutIsNoDeadline) {
  SendRequest(kPluginServiceConn, 1, "Deadline", "", std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ReadResponse().second.payload(), "none");
  SendRequest(kPluginServiceConn, 3, "Deadline", "", 60'000'000'000);
  EXPECT_EQ(ReadResponse().second.payload(), "future");
  SendRequest(kPluginServiceConn, 5, "Deadline", "");
  EXPECT_EQ(ReadResponse().second.payload(), "none");
}

TEST_F(RawPeerTest, UndecodableRequest) {
  Send(EncodeMuxFrame(kPluginServiceConn,
                      EncodeTtrpcMessage(1, TtrpcMessageType::kRequest, 0, "\xff\xff\xff")));
  auto [stream, response] = ReadResponse();
  EXPECT_EQ(stream, 1u);
  EXPECT_EQ(response.status().code(), 3);
}

TEST_F(RawPeerTest, OversizedRequestGetsResourceExhausted) {
  std::string header(kTtrpcHeaderLength, '\0');
  PutUint32(header.data(), kTtrpcMessageLengthMax + 100);
  PutUint32(header.data() + 4, 1);
  header[8] = 1;
  std::string body = header + std::string(kTtrpcMessageLengthMax + 100, 'x');
  // Sent as the Go side would: first 4096 bytes, then the rest split at the mux limit.
  for (const auto& frame : EncodeMuxFrames(kPluginServiceConn, body)) {
    Send(frame);
  }
  auto [stream, response] = ReadResponse();
  EXPECT_EQ(stream, 1u);
  EXPECT_EQ(response.status().code(), 8);
  SendRequest(kPluginServiceConn, 3, "Echo", "after");
  EXPECT_EQ(ReadResponse().second.payload(), "pafter");
}

TEST_F(RawPeerTest, OversizedMuxFrameClosesTheConnection) {
  std::string header(kMuxHeaderLength, '\0');
  PutUint32(header.data(), 1);
  PutUint32(header.data() + 4, 0x7fffffff);
  Send(header);
  EXPECT_TRUE(connection_->WaitClosed(2s));
  EXPECT_THAT(connection_->close_reason(), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Random ttrpc garbage inside well-formed mux frames: answered or ignored, never a crash, and the
// connection still serves a valid request afterwards.
TEST_F(RawPeerTest, RandomGarbageInsideFrames) {
  std::mt19937 rng(4);
  for (int i = 0; i < 300; ++i) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) {
      c = static_cast<char>(rng());
    }
    // A plausible header (length small, random type/flags/stream), then junk as the body.
    const std::string message = EncodeTtrpcMessage(
        rng(), static_cast<TtrpcMessageType>(rng() % 5), static_cast<uint8_t>(rng()), junk);
    Send(EncodeMuxFrame(rng() % 2 ? kPluginServiceConn : 7, message));
  }
  // Requests with random ids may have raised the last stream id: use the largest odd one.
  SendRequest(kPluginServiceConn, 0xffffffffu, "Echo", "alive");
  while (true) {
    auto [stream, response] = ReadResponse();
    if (stream == 0xffffffffu || stream == 0) {
      EXPECT_EQ(response.payload(), "palive");
      break;
    }
  }
  EXPECT_FALSE(connection_->closed());
}

TEST_F(RawPeerTest, TruncatedFrameThenCloseDoesNotHang) {
  SendRequest(kPluginServiceConn, 1, "Echo", "a");
  ReadResponse();
  Send(std::string("\x00\x00\x00\x01\x00\x00\x01\x00partial", 15));
  peer_.reset();
  EXPECT_TRUE(connection_->WaitClosed(2s));
}

}  // namespace
}  // namespace devlet::nri
