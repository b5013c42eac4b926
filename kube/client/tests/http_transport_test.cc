// The REST client's own HTTP/1.1 transport against a scripted TCP server (what goes over the wire
// is exactly what a test writes: chunked bodies, keep-alive, a server closing an idle connection,
// a stalled response), the server URL parser, and RestClient's retry policy through the Transport
// seam with a fake transport. TLS is covered through the fake API server in kubeconfig_test.cc.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/rest_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "devlet/kube/http_transport.h"

namespace devlet::kube {
namespace {

using ::devlet::testing::StatusIs;
using ::devlet::testing::IsOkAndHolds;
using ::testing::HasSubstr;
using internal::HttpExchange;
using internal::HttpResult;
using internal::TransportError;

// ScriptServer accepts connections on 127.0.0.1 and hands each to `serve` on its own thread.
class ScriptServer {
 public:
  explicit ScriptServer(std::function<void(int fd, int connection)> serve)
      : serve_(std::move(serve)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] {
      for (int n = 0;; ++n) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        accepted_++;
        workers_.emplace_back([this, c, n] {
          serve_(c, n);
          ::close(c);
        });
      }
    });
  }
  ~ScriptServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (std::thread& t : workers_) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }

  // ReadRequest reads one request's head (and a Content-Length body) from `fd`; empty at EOF.
  static std::string ReadRequest(int fd) {
    std::string in;
    char buf[4096];
    std::size_t end;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return "";
      in.append(buf, static_cast<std::size_t>(n));
    }
    const std::size_t cl = in.find("Content-Length: ");
    if (cl != std::string::npos && cl < end) {
      const std::size_t want = end + 4 + std::stoul(in.substr(cl + 16));
      while (in.size() < want) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
      }
    }
    return in;
  }
  static void Send(int fd, const std::string& data) {
    ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  }

 private:
  std::function<void(int, int)> serve_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
  std::vector<std::thread> workers_;
};

std::unique_ptr<internal::Transport> TransportTo(const std::string& url) {
  internal::TransportOptions options;
  absl::StatusOr<internal::Endpoint> endpoint = internal::ParseServerUrl(url, "");
  EXPECT_TRUE(endpoint.ok());
  options.endpoint = *endpoint;
  options.connect_timeout = std::chrono::seconds(2);
  absl::StatusOr<std::unique_ptr<internal::Transport>> t = internal::NewHttpTransport(options);
  EXPECT_TRUE(t.ok());
  return std::move(*t);
}

// Get sends a GET and collects the body.
HttpResult Get(internal::Transport& transport, const std::string& target, std::string& body,
               std::chrono::milliseconds timeout = std::chrono::seconds(5),
               std::function<bool()> cancelled = nullptr) {
  HttpExchange exchange;
  exchange.target = target;
  exchange.deadline = std::chrono::steady_clock::now() + timeout;
  exchange.on_body = [&body](long, std::string_view data) {
    body.append(data);
    return true;
  };
  exchange.cancelled = std::move(cancelled);
  return transport.RoundTrip(exchange, nullptr);
}

TEST(HttpTransportTest, ParsesServerUrls) {
  ASSERT_OK_AND_ASSIGN(internal::Endpoint a,
                       internal::ParseServerUrl("https://[fd00::1]:6443/prefix/", ""));
  EXPECT_TRUE(a.tls);
  EXPECT_EQ(a.host, "fd00::1");
  EXPECT_EQ(a.port, "6443");
  EXPECT_EQ(a.authority, "[fd00::1]:6443");
  EXPECT_EQ(a.prefix, "/prefix");
  EXPECT_EQ(a.server_name, "fd00::1");
  ASSERT_OK_AND_ASSIGN(internal::Endpoint b,
                       internal::ParseServerUrl("https://10.0.0.1", "api.example"));
  EXPECT_EQ(b.port, "443");
  EXPECT_EQ(b.host, "10.0.0.1");
  EXPECT_EQ(b.server_name, "api.example");
  ASSERT_OK_AND_ASSIGN(internal::Endpoint c, internal::ParseServerUrl("http://h:8080", ""));
  EXPECT_FALSE(c.tls);
  EXPECT_THAT(internal::ParseServerUrl("ftp://h", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("https://")));
  EXPECT_THAT(internal::ParseServerUrl("https://h:port", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad port")));
  EXPECT_THAT(internal::ParseServerUrl("https://[::1", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("IPv6")));
  EXPECT_THAT(internal::ParseServerUrl("https://h", "a/b"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tls-server-name")));
  EXPECT_EQ(internal::UrlEscape("a b/c=d&e~f"), "a%20b%2Fc%3Dd%26e~f");
}

TEST(HttpTransportTest, KeepAliveChunkedAndContentLength) {
  std::atomic<int> requests{0};
  ScriptServer server([&](int fd, int) {
    for (;;) {
      const std::string request = ScriptServer::ReadRequest(fd);
      if (request.empty()) return;
      const int n = requests++;
      if (n % 2 == 0) {
        // Chunked, split oddly, with an extension and a trailer.
        ScriptServer::Send(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhel");
        ScriptServer::Send(fd, "lo\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n");
      } else {
        ScriptServer::Send(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope");
      }
    }
  });
  std::unique_ptr<internal::Transport> transport = TransportTo(server.url());
  for (int i = 0; i < 4; ++i) {
    std::string body;
    const HttpResult r = Get(*transport, "/x", body);
    ASSERT_EQ(r.error, TransportError::kNone) << r.message;
    EXPECT_EQ(r.code, i % 2 == 0 ? 200 : 404);
    EXPECT_EQ(body, i % 2 == 0 ? "hello world" : "nope");
  }
  EXPECT_EQ(server.accepted(), 1);  // one connection for all four
}

TEST(HttpTransportTest, IdleConnectionClosedByTheServerIsReplaced) {
  ScriptServer server([&](int fd, int connection) {
    const std::string request = ScriptServer::ReadRequest(fd);
    if (request.empty()) return;
    // Keep-alive promised, then closed after the response (an idle timeout on the server).
    ScriptServer::Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n" +
                               std::to_string(connection));
  });
  std::unique_ptr<internal::Transport> transport = TransportTo(server.url());
  for (int i = 0; i < 3; ++i) {
    std::string body;
    const HttpResult r = Get(*transport, "/x", body);
    ASSERT_EQ(r.error, TransportError::kNone) << r.message;
    EXPECT_EQ(body, std::to_string(i));
  }
  EXPECT_EQ(server.accepted(), 3);
}

TEST(HttpTransportTest, BodyUntilCloseAndRetryAfter) {
  ScriptServer server([&](int fd, int) {
    ScriptServer::ReadRequest(fd);
    ScriptServer::Send(fd, "HTTP/1.1 503 Unavailable\r\nRetry-After: 7\r\n\r\nline1\n");
    ScriptServer::Send(fd, "line2\n");
  });
  std::unique_ptr<internal::Transport> transport = TransportTo(server.url());
  std::string body;
  const HttpResult r = Get(*transport, "/x", body);
  ASSERT_EQ(r.error, TransportError::kNone) << r.message;
  EXPECT_EQ(r.code, 503);
  EXPECT_EQ(r.retry_after_s, 7);
  EXPECT_EQ(body, "line1\nline2\n");
}

TEST(HttpTransportTest, StalledResponseTimesOutOrIsCancelled) {
  std::atomic<bool> release{false};
  ScriptServer server([&](int fd, int) {
    ScriptServer::ReadRequest(fd);
    ScriptServer::Send(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  std::unique_ptr<internal::Transport> transport = TransportTo(server.url());
  std::string body;
  auto start = std::chrono::steady_clock::now();
  HttpResult r = Get(*transport, "/x", body, std::chrono::milliseconds(300));
  EXPECT_EQ(r.error, TransportError::kTimeout);
  EXPECT_THAT(r.message, HasSubstr("timed out"));
  EXPECT_EQ(body, "abc");  // delivered as it came
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));

  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  start = std::chrono::steady_clock::now();
  r = Get(*transport, "/x", body, std::chrono::seconds(30), [&] { return stop.load(); });
  stopper.join();
  EXPECT_EQ(r.error, TransportError::kAborted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  release = true;
}

TEST(HttpTransportTest, ConnectionRefusedIsNotSentAndBadReplyIsFatal) {
  int port = 0;
  {
    ScriptServer closed([](int, int) {});
    port = std::stoi(closed.url().substr(closed.url().rfind(':') + 1));
  }
  std::unique_ptr<internal::Transport> refused =
      TransportTo("http://127.0.0.1:" + std::to_string(port));
  std::string body;
  HttpResult r = Get(*refused, "/x", body);
  EXPECT_EQ(r.error, TransportError::kNotSent);
  EXPECT_THAT(r.message, HasSubstr("connect to 127.0.0.1 port " + std::to_string(port)));

  ScriptServer garbage([](int fd, int) {
    ScriptServer::ReadRequest(fd);
    ScriptServer::Send(fd, "SSH-2.0-OpenSSH\r\n\r\n");
  });
  std::unique_ptr<internal::Transport> transport = TransportTo(garbage.url());
  r = Get(*transport, "/x", body);
  EXPECT_EQ(r.error, TransportError::kFatal);
  EXPECT_THAT(r.message, HasSubstr("not an HTTP response"));
}

TEST(HttpTransportTest, SendsHeadersBodyAndPrefix) {
  std::string seen;
  ScriptServer server([&](int fd, int) {
    seen = ScriptServer::ReadRequest(fd);
    ScriptServer::Send(fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
  });
  std::unique_ptr<internal::Transport> transport = TransportTo(server.url() + "/base/");
  HttpExchange exchange;
  exchange.method = "POST";
  exchange.target = "/api/v1/nodes?x=1";
  exchange.headers = {"Authorization: Bearer tok"};
  exchange.body = "{}";
  exchange.send_body = true;
  exchange.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const HttpResult r = transport->RoundTrip(exchange, nullptr);
  ASSERT_EQ(r.error, TransportError::kNone) << r.message;
  EXPECT_EQ(r.code, 201);
  EXPECT_THAT(seen, HasSubstr("POST /base/api/v1/nodes?x=1 HTTP/1.1\r\n"));
  EXPECT_THAT(seen, HasSubstr("Host: 127.0.0.1:"));
  EXPECT_THAT(seen, HasSubstr("Authorization: Bearer tok\r\n"));
  EXPECT_THAT(seen, HasSubstr("Content-Length: 2\r\n\r\n{}"));
}

// FakeTransport answers from a script and records the requests.
class FakeTransport final : public internal::Transport {
 public:
  explicit FakeTransport(std::deque<HttpResult> script) : script_(std::move(script)) {}
  HttpResult RoundTrip(const HttpExchange& exchange,
                       const std::shared_ptr<const internal::ClientIdentity>&) override {
    targets.push_back(exchange.method + " " + exchange.target);
    HttpResult r = script_.front();
    script_.pop_front();
    if (r.error == TransportError::kNone && exchange.on_body) exchange.on_body(r.code, "{}");
    return r;
  }
  void CloseIdle() override {}
  std::vector<std::string> targets;

 private:
  std::deque<HttpResult> script_;
};

TEST(RestClientTransportTest, RetriesOnlyWhatIsSafeToRepeat) {
  RestConfig config;
  config.server = "https://api.example";
  config.qps = 0;
  config.initial_backoff = std::chrono::milliseconds(1);
  config.max_retries = 3;
  auto not_sent = HttpResult{0, -1, TransportError::kNotSent, "connect refused"};
  auto broken = HttpResult{0, -1, TransportError::kBroken, "reset by peer"};
  auto ok = HttpResult{200, -1, TransportError::kNone, ""};
  auto fake = std::make_unique<FakeTransport>(std::deque<HttpResult>{not_sent, broken, ok});
  FakeTransport* seen = fake.get();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RestClient> client,
                       RestClient::CreateWithTransport(config, std::move(fake)));
  RestRequest get;
  get.path = "/api/v1/nodes";
  get.query = {{"labelSelector", "a=b"}};
  ASSERT_OK_AND_ASSIGN(RestResponse response, client->Do(get));
  EXPECT_EQ(response.body, "{}");
  EXPECT_EQ(seen->targets.size(), 3u);
  EXPECT_EQ(seen->targets[0], "GET /api/v1/nodes?labelSelector=a%3Db");

  // A POST is repeated after kNotSent, not after the connection broke mid-request.
  auto post_fake = std::make_unique<FakeTransport>(std::deque<HttpResult>{not_sent, broken});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RestClient> poster,
                       RestClient::CreateWithTransport(config, std::move(post_fake)));
  RestRequest post;
  post.method = "POST";
  post.path = "/api/v1/nodes";
  post.body = "{}";
  post.idempotent = false;
  post.what = "Node \"n\"";
  EXPECT_THAT(poster->Do(post),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("Node \"n\": POST https://api.example/api/v1/nodes: reset")));
  EXPECT_EQ(poster->stats().requests.load(), 2);
}

// Answers of the wrong shape from an API server, found by fuzz/http_response_fuzzer (inputs in
// fuzz/corpus/http_response_fuzzer/): list metadata that is not an object or a continue token that
// is not a string threw out of ListWithVersion (nlohmann's value()), watch lines of the wrong
// shape threw in the watch's thread (std::terminate), a continue token answered with itself made
// the list loop forever, and a huge Retry-After overflowed when converted to milliseconds. Now
// each is an error, or a line skipped with the watch going on.
TEST(ApiServerStoreRawTest, AnswersOfTheWrongShapeAreErrorsNotCrashes) {
  std::mutex mu;
  std::string list_answer;
  std::string watch_answer;
  ScriptServer server([&](int fd, int) {
    for (std::string request; !(request = ScriptServer::ReadRequest(fd)).empty();) {
      std::string answer;
      {
        std::lock_guard<std::mutex> lock(mu);
        answer = request.find("watch=true") != std::string::npos ? watch_answer : list_answer;
      }
      if (answer.rfind("HTTP/", 0) != 0) {
        answer = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(answer.size()) +
                 "\r\n\r\n" + answer;
      }
      ScriptServer::Send(fd, answer);
    }
  });
  auto answer = [&](std::string list, std::string watch = "") {
    std::lock_guard<std::mutex> lock(mu);
    list_answer = std::move(list);
    watch_answer = std::move(watch);
  };
  RestConfig config;
  config.server = server.url();
  config.qps = 0;
  config.max_retries = 1;
  config.initial_backoff = std::chrono::milliseconds(1);
  config.max_backoff = std::chrono::milliseconds(5);
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<ApiServerStore> store, ApiServerStore::Create(config));

    answer(R"({"kind":"PodList","apiVersion":"v1","metadata":5,"items":[]})");
    EXPECT_THAT(store->List(Kind::kPod, {}), IsOkAndHolds(::testing::IsEmpty()));
    answer(R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":7,"continue":[]},"items":[]})");
    EXPECT_OK(store->List(Kind::kPod, {}).status());
    answer(R"({"kind":"PodList","apiVersion":"v1","metadata":{"continue":"again"},"items":[]})");
    EXPECT_THAT(store->List(Kind::kPod, {}),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("continue token")));
    answer("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 99999999999999999999\r\n"
           "Content-Length: 2\r\n\r\n{}");
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THAT(store->List(Kind::kPod, {}), StatusIs(absl::StatusCode::kResourceExhausted));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));

    // Lines of every wrong shape, then a good event: the watch skips them and delivers it.
    const std::string pod =
        R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default",)"
        R"("resourceVersion":"5"},"spec":{"containers":[{"name":"c","image":"i"}]}})";
    answer(R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]})",
           "5\n[1]\n{\"type\":5}\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":7}}\n"
           "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":7}}}\n"
           "{\"type\":\"ADDED\",\"object\":3}\n{\"type\":\"ADDED\",\"object\":" + pod + "}\n"
           "{\"type\":\"ERROR\",\"object\":{\"code\":\"410\"}}\n{\"type\":\"ERROR\",\"object\":4}\n");
    std::mutex events_mu;
    std::vector<std::string> names;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Watcher> watch,
                         store->Watch(Kind::kPod, {}, [&](const WatchEvent& event) {
                           std::lock_guard<std::mutex> lock(events_mu);
                           names.push_back(MetadataOf(event.object).name);
                         }));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (bool seen = false; !seen && std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::lock_guard<std::mutex> lock(events_mu);
      seen = !names.empty();
    }
    watch.reset();
    std::lock_guard<std::mutex> lock(events_mu);
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names.front(), "p");
  }
}

}  // namespace
}  // namespace devlet::kube
