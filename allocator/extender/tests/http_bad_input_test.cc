// Bad input over HTTP, beyond extender_http_test.cc: bodies sent a byte at a time, stalled and
// trickled bodies, deeply nested and wrongly typed JSON, bodies near and over the size limit
// (plain and chunked), malformed HTTP, wrong methods, claims that do not exist yet in prioritize
// and bind, and an API server that is slow or down while binding. Every case must give a clear
// error (or the right answer) and leave the server serving.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/extender/extender.h"
#include "devlet/extender/server.h"
#include "devlet/kube/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace devlet::extender {
namespace {

using json = nlohmann::json;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;
using testing::BodyOf;
using testing::PodJson;
using testing::PostHead;
using testing::RawConnection;

// node-a: two GPUs; node-b: none. Claim "one" asks for one GPU.
std::string ClusterYaml() {
  return testing::Documents({testing::GpuClassYaml(), testing::GpuSliceYaml("node-a", {0, 0}),
                             testing::NodeYaml("node-a"), testing::NodeYaml("node-b"), R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: default, uid: uid-one, resourceVersion: '1'}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu, count: 1}}
)"});
}

std::string FilterBody(const std::string& pod, const std::string& claim) {
  return json({{"Pod", PodJson(pod, {claim})}, {"NodeNames", {"node-a", "node-b"}}}).dump();
}

// BlockingWriter stands in for an API server: slow (blocks until released) or down.
class BlockingWriter : public MemoryWriter {
 public:
  using MemoryWriter::MemoryWriter;
  absl::StatusOr<kube::ResourceClaim> UpdateClaimStatus(const kube::ResourceClaim& claim) override {
    if (down) return absl::UnavailableError("connection refused: the API server is down");
    entered.set_value();
    release.get_future().wait();
    return MemoryWriter::UpdateClaimStatus(claim);
  }
  std::atomic<bool> down{false};
  std::promise<void> entered;
  std::promise<void> release;
};

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> objects, kube::Decode(ClusterYaml()));
    for (const auto& object : objects) ASSERT_OK(state_.Apply(object));
    state_.MarkSynced();
    extender_ = std::make_unique<Extender>(state_, writer_, Options{.mode = Mode::kAllocate});
  }
  void Start(ServerOptions options = {}) {
    ASSERT_OK(http_.Start(*extender_, options));
    http_.client().set_read_timeout(std::chrono::seconds(20));
  }
  void TearDown() override { http_.Stop(); }
  // Post returns the reply of a verb as JSON (a string for non-JSON replies).
  json Post(const std::string& verb, const std::string& body, int want_status = 200) {
    return http_.Post(verb, body, want_status);
  }
  // ExpectServing checks the server still answers a normal filter correctly.
  void ExpectServing() {
    httplib::Client fresh("127.0.0.1", http_.port());
    fresh.set_read_timeout(std::chrono::seconds(20));
    auto res = fresh.Post("/devlet/filter", FilterBody("ok", "one"), "application/json");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    ASSERT_EQ(res->status, 200);
    EXPECT_EQ(json::parse(res->body)["NodeNames"], json({"node-a"}));
  }

  ClusterState state_{allocator::Features{}};
  BlockingWriter writer_{state_};
  std::unique_ptr<Extender> extender_;
  testing::LoopbackServer http_;
};

TEST_F(BadInputTest, BodySentAByteAtATimeIsServed) {
  Start();
  RawConnection conn(http_.port());
  ASSERT_TRUE(conn.connected());
  const std::string body = FilterBody("p", "one");
  const std::string request = PostHead("/devlet/filter", body.size()) + body;
  for (char c : request) {
    ASSERT_TRUE(conn.Send(std::string_view(&c, 1)));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::string response = conn.ReadResponse(std::chrono::seconds(20));
  ASSERT_THAT(response, StartsWith("HTTP/1.1 200"));
  json reply = json::parse(BodyOf(response));
  EXPECT_EQ(reply["Error"], "");
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
}

TEST_F(BadInputTest, StalledBodiesAreDroppedAndOthersServed) {
  // More stalled connections than server threads: after read_timeout they are closed and a
  // well-behaved client is served.
  Start({.read_timeout = std::chrono::seconds(1), .threads = 2});
  std::vector<std::unique_ptr<RawConnection>> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(std::make_unique<RawConnection>(http_.port()));
    ASSERT_TRUE(stalled.back()->connected());
    ASSERT_TRUE(stalled.back()->Send(PostHead("/devlet/filter", 1000) + "{\"Pod\":"));
  }
  ExpectServing();
  for (auto& conn : stalled) {
    bool closed = false;
    conn->ReadUntilClosed(std::chrono::seconds(20), &closed);
    EXPECT_TRUE(closed) << "a stalled connection was kept open";
  }
}

TEST_F(BadInputTest, TrickledBodyHitsTheRequestDeadline) {
  // A byte every 100 ms never trips the per-read timeout; the request deadline still ends it.
  Start({.read_timeout = std::chrono::seconds(5), .request_timeout = std::chrono::seconds(1)});
  RawConnection conn(http_.port());
  ASSERT_TRUE(conn.connected());
  const std::string body = FilterBody("p", "one");
  ASSERT_TRUE(conn.Send(PostHead("/devlet/filter", body.size())));
  const auto start = Clock::now();
  bool closed = false;
  std::string response;
  // A byte every 300 ms: the server notices the deadline when a byte arrives and answers at
  // once; the client reads the answer before its next byte (which a closed socket would reset).
  for (size_t i = 0; i < body.size() && !closed; ++i) {
    if (!conn.Send(body.substr(i, 1))) break;
    response += conn.ReadUntilClosed(std::chrono::milliseconds(300), &closed);
    if (!response.empty()) break;
  }
  if (!closed) response += conn.ReadUntilClosed(std::chrono::seconds(10), &closed);
  EXPECT_TRUE(closed);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(8));
  EXPECT_THAT(response, AllOf(StartsWith("HTTP/1.1 408"), HasSubstr("not received within 1s")));
  ExpectServing();
}

TEST_F(BadInputTest, DeeplyNestedJsonIsAnErrorNotACrash) {
  Start();
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  std::string body = R"({"Pod":{"metadata":{"name":"p","labels":)" + deep +
                     R"(}},"NodeNames":["node-a"]})";
  EXPECT_THAT(Post("filter", body)["Error"].get<std::string>(), HasSubstr("nested deeper than"));
  Post("prioritize", body, 400);
  EXPECT_THAT(Post("bind", R"({"PodName":)" + deep + "}")["Error"].get<std::string>(),
              HasSubstr("nested deeper than"));
  // Unbalanced nesting is plain invalid JSON.
  EXPECT_THAT(Post("filter", std::string(100000, '['))["Error"].get<std::string>(),
              HasSubstr("request body"));
  ExpectServing();
}

TEST_F(BadInputTest, WronglyTypedFieldsNameTheField) {
  Start();
  auto filter_error = [&](const std::string& body) {
    return Post("filter", body)["Error"].get<std::string>();
  };
  EXPECT_THAT(filter_error(""), HasSubstr("not valid JSON"));
  EXPECT_THAT(filter_error("null"), HasSubstr("not a JSON object"));
  EXPECT_THAT(filter_error(R"({"Pod":"p","NodeNames":["node-a"]})"),
              HasSubstr("ExtenderArgs.Pod"));
  const json one = PodJson("p", {"one"});
  EXPECT_THAT(filter_error(json({{"Pod", one}, {"NodeNames", "node-a"}}).dump()),
              HasSubstr("NodeNames: not an array"));
  EXPECT_THAT(filter_error(json({{"Pod", one}, {"NodeNames", {1, 2}}}).dump()),
              HasSubstr("NodeNames: not a string"));
  EXPECT_THAT(filter_error(json({{"Pod", one}, {"Nodes", {{"items", 3}}}}).dump()),
              HasSubstr("Nodes.items"));
  EXPECT_THAT(
      filter_error(json({{"Pod", one},
                         {"Nodes", {{"items", json::array({{{"metadata", {{"name", 7}}}}})}}}})
                       .dump()),
      HasSubstr("Nodes.items[0]"));
  json pod = PodJson("p", {"one"});
  pod["spec"]["resourceClaims"] = "all of them";
  EXPECT_THAT(filter_error(json({{"Pod", pod}, {"NodeNames", {"node-a"}}}).dump()),
              HasSubstr("resourceClaims"));
  EXPECT_THAT(Post("bind", R"({"PodName":["p"],"Node":"node-a"})")["Error"].get<std::string>(),
              HasSubstr("PodName and Node are required"));
  ExpectServing();
}

TEST_F(BadInputTest, BodiesNearAndOverTheLimit) {
  Start({.max_body_bytes = 1u << 20});
  // 60000 node names (~0.8 MiB): served, every unknown node reported.
  json names = json::array();
  for (int i = 0; i < 60000; ++i) names.push_back("nowhere-" + std::to_string(i));
  names.push_back("node-a");
  std::string body = json({{"Pod", PodJson("p", {"one"})}, {"NodeNames", names}}).dump();
  ASSERT_LT(body.size(), 1u << 20);
  json reply = Post("filter", body);
  EXPECT_EQ(reply["Error"], "");
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
  EXPECT_EQ(reply["FailedAndUnresolvableNodes"].size(), 60000u);
  // Over the limit: 413, with Content-Length and with chunked transfer encoding.
  std::string big(2u << 20, ' ');
  // The server may answer and close before the client has written everything: then the client
  // sees a broken connection instead of the 413.
  auto res = http_.client().Post("/devlet/filter", big, "application/json");
  EXPECT_TRUE(!res || res->status == 413) << res->status;
  httplib::Client chunked("127.0.0.1", http_.port());
  size_t sent = 0;
  res = chunked.Post(
      "/devlet/filter",
      [&](size_t, httplib::DataSink& sink) {
        if (sent >= (4u << 20)) {
          sink.done();
          return true;
        }
        std::string chunk(64u << 10, ' ');
        sent += chunk.size();
        return sink.write(chunk.data(), chunk.size());
      },
      "application/json");
  EXPECT_TRUE(!res || res->status == 413) << res->status;
  ExpectServing();
}

TEST_F(BadInputTest, MalformedHttpAndWrongMethods) {
  Start();
  {
    RawConnection conn(http_.port());
    ASSERT_TRUE(conn.Send("THIS IS NOT HTTP\r\n\r\n"));
    EXPECT_THAT(conn.ReadResponse(std::chrono::seconds(10)), StartsWith("HTTP/1.1 400"));
  }
  {
    RawConnection conn(http_.port());
    ASSERT_TRUE(conn.Send("POST /devlet/filter HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n"
                          "\r\n{}"));
    // httplib reads an unparsable length as 0: the empty body is then the verb's error.
    std::string response = conn.ReadResponse(std::chrono::seconds(10));
    EXPECT_THAT(response, AnyOf(StartsWith("HTTP/1.1 4"), HasSubstr("not valid JSON")));
  }
  auto res = http_.client().Get("/devlet/filter");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = http_.client().Put("/devlet/bind", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = http_.client().Post("/devlet/filter/../bind", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  ExpectServing();
}

TEST_F(BadInputTest, ClaimsThatDoNotExistYet) {
  Start();
  // Prioritize cannot score a pod whose claim is missing: every node 0, not an error.
  json reply = Post("prioritize",
                    json({{"Pod", PodJson("p", {"later"})}, {"NodeNames", {"node-a", "node-b"}}})
                        .dump());
  ASSERT_TRUE(reply.is_array());
  ASSERT_EQ(reply.size(), 2u);
  EXPECT_EQ(reply[0]["Score"], 0);
  EXPECT_EQ(reply[1]["Score"], 0);
  // Filter saw the pod; bind then fails naming the claim, and nothing is held.
  reply = Post("filter", FilterBody("p", "later"));
  EXPECT_THAT(reply["FailedAndUnresolvableNodes"]["node-a"].get<std::string>(),
              HasSubstr("\"default/later\" not found"));
  reply = Post("bind", json({{"PodName", "p"}, {"PodNamespace", "default"}, {"Node", "node-a"}})
                           .dump());
  EXPECT_THAT(reply["Error"].get<std::string>(), HasSubstr("\"default/later\" not found"));
  EXPECT_EQ(state_.num_held(), 0u);
}

TEST_F(BadInputTest, SlowApiServerDoesNotBlockFilter) {
  Start();
  Post("filter", FilterBody("p", "one"));
  std::future<json> bind = std::async(std::launch::async, [&] {
    httplib::Client c("127.0.0.1", http_.port());
    c.set_read_timeout(std::chrono::seconds(30));
    auto res = c.Post("/devlet/bind",
                      json({{"PodName", "p"}, {"PodNamespace", "default"}, {"Node", "node-a"}})
                          .dump(),
                      "application/json");
    return res ? json::parse(res->body) : json(nullptr);
  });
  // The bind is now inside the (blocked) API-server write, with the device held.
  ASSERT_EQ(writer_.entered.get_future().wait_for(std::chrono::seconds(20)),
            std::future_status::ready);
  EXPECT_TRUE(state_.IsAllocated("gpu.example.com", "node-a", "gpu-0"));
  // Filter and prioritize are served meanwhile, seeing the held device.
  ASSERT_OK_AND_ASSIGN(auto more, kube::Decode(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two, namespace: default, uid: uid-two, resourceVersion: '1'}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 2}}]}}
)"));
  ASSERT_OK(state_.Apply(more[0]));
  json reply = Post("filter", FilterBody("q", "two"));
  EXPECT_TRUE(reply["FailedNodes"].contains("node-a")) << reply.dump();
  EXPECT_TRUE(Post("prioritize", FilterBody("q", "two")).is_array());
  writer_.release.set_value();
  EXPECT_EQ(bind.get()["Error"], "");
  EXPECT_EQ(state_.num_held(), 0u);
}

TEST_F(BadInputTest, ApiServerDownFailsBindCleanly) {
  Start();
  writer_.down = true;
  Post("filter", FilterBody("p", "one"));
  json reply =
      Post("bind", json({{"PodName", "p"}, {"PodNamespace", "default"}, {"Node", "node-a"}})
                       .dump());
  EXPECT_THAT(reply["Error"].get<std::string>(), HasSubstr("the API server is down"));
  EXPECT_EQ(state_.num_held(), 0u);
  EXPECT_FALSE(state_.IsAllocated("gpu.example.com", "node-a", "gpu-0"));
  ExpectServing();
}

}  // namespace
}  // namespace devlet::extender
