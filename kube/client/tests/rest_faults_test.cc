// The API server misbehaving under the REST client and its watches (a fake server over HTTP):
// 500 retried with backoff when safe, 429's Retry-After honoured, 409 not retried, a slow server
// waited for, a hung one ending at the deadline, and watches converging through errors, 410 Gone
// with a failing relist, and a hung reconnect.
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/rest_client.h"
#include "rest_fake_apiserver.h"

namespace devlet::kube {
namespace {

using ::devlet::testing::StatusIs;
using fake::FakeApiServer;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

RestConfig FastConfig(const std::string& server) {
  RestConfig config;
  config.server = server;
  config.qps = 0;
  config.initial_backoff = milliseconds(5);
  config.max_backoff = milliseconds(50);
  config.max_retries = 4;
  return config;
}

ResourceClaim Claim(const std::string& name) {
  ResourceClaim claim;
  claim.metadata.name = name;
  claim.metadata.namespace_ = "ns";
  return claim;
}

// The state a watch has reported: name -> resourceVersion of the last ADDED/MODIFIED.
class View {
 public:
  WatchCallback Callback() {
    return [this](const WatchEvent& event) {
      std::lock_guard<std::mutex> lock(mu_);
      const ObjectMeta& meta = MetadataOf(event.object);
      if (event.type == WatchEvent::Type::kDeleted) {
        objects_.erase(meta.name);
      } else {
        objects_[meta.name] = meta.labels.contains("v") ? meta.labels.at("v") : "";
      }
      cv_.notify_all();
    };
  }

  // Waits until the view holds exactly `want` (name -> label "v").
  bool WaitFor(const std::map<std::string, std::string>& want,
               milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return objects_ == want; });
  }

  std::map<std::string, std::string> objects() {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> objects_;
};

nlohmann::json ClaimJson(const std::string& name, const std::string& v) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata",
           {{"name", name}, {"namespace", "ns"}, {"uid", "uid-" + name}, {"labels", {{"v", v}}}}},
          {"spec", nlohmann::json::object()}};
}

const char kClaims[] = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims";

TEST(ApiServerFaultTest, InternalErrorIsRetriedWithBackoffWhenSafe) {
  FakeApiServer server;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  ASSERT_OK(store->Create(Claim("c")).status());

  // A GET after two 500s: retried with growing waits (5 ms, 10 ms), then answered.
  server.FailNext({{500, -1, {}, "GET"}, {500, -1, {}, "GET"}});
  const auto start = Clock::now();
  ASSERT_OK(store->Get(Kind::kResourceClaim, {"ns", "c"}).status());
  EXPECT_GE(Clock::now() - start, milliseconds(15));
  EXPECT_EQ(store->client().stats().retries.load(), 2);
  EXPECT_EQ(server.failures_pending(), 0);

  // A 500 that does not go away: the last error after max_retries, naming the object.
  server.FailNext(std::vector<FakeApiServer::Failure>(5, {500, -1, {}, "GET"}));
  EXPECT_THAT(store->Get(Kind::kResourceClaim, {"ns", "c"}),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("ResourceClaim \"ns/c\""), HasSubstr("injected failure"))));
  EXPECT_EQ(server.failures_pending(), 0);

  // A create (POST) is not repeated after a 500: the server may have acted on it.
  const long before = store->client().stats().requests.load();
  server.FailNext({{500, -1, {}, "POST"}});
  EXPECT_THAT(store->Create(Claim("d")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(store->client().stats().requests.load(), before + 1);
  // ... unless the server asks for a retry.
  server.FailNext({{500, 0, {}, "POST"}});
  EXPECT_OK(store->Create(Claim("d")).status());
}

TEST(ApiServerFaultTest, TooManyRequestsWaitsForRetryAfter) {
  FakeApiServer server;
  RestConfig config = FastConfig(server.url());
  config.max_backoff = std::chrono::seconds(5);
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(config));
  server.FailNext({{429, 1, {}, "GET"}});
  const auto start = Clock::now();
  EXPECT_THAT(store->List(Kind::kResourceClaim, {.namespace_name = "ns"}),
              ::devlet::testing::IsOk());
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(1000));  // the server's Retry-After: 1, not the 5 ms backoff
  EXPECT_LT(elapsed, milliseconds(4000));
  EXPECT_EQ(store->client().stats().retries.load(), 1);
}

TEST(ApiServerFaultTest, ConflictIsReportedNotRetried) {
  FakeApiServer server;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  ASSERT_OK_AND_ASSIGN(Object created, store->Create(Claim("c")));
  ResourceClaim claim = std::get<ResourceClaim>(created);
  claim.metadata.labels["v"] = "1";

  const long before = store->client().stats().requests.load();
  server.FailNext({{409, -1, {}, "PUT"}});
  EXPECT_THAT(store->Update(claim),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("ResourceClaim \"ns/c\"")));
  EXPECT_EQ(store->client().stats().requests.load(), before + 1);
  // The caller re-reads and writes again: it goes through.
  ASSERT_OK_AND_ASSIGN(Object updated, store->Update(claim));
  EXPECT_EQ(MetadataOf(updated).labels.at("v"), "1");
}

TEST(ApiServerFaultTest, SlowServerIsWaitedForAndHungServerHitsTheDeadline) {
  FakeApiServer server;
  RestConfig config = FastConfig(server.url());
  config.request_timeout = milliseconds(600);
  config.max_retries = 1;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(config));
  ASSERT_OK(store->Create(Claim("c")).status());

  // Slow, within the deadline: answered, no retry.
  server.FailNext({{0, -1, milliseconds(200), "GET"}});
  ASSERT_OK(store->Get(Kind::kResourceClaim, {"ns", "c"}).status());
  EXPECT_EQ(store->client().stats().retries.load(), 0);

  // Hung (GET and an update): each attempt ends at the deadline; one retry; then a clear error.
  for (const char* method : {"GET", "PUT"}) {
    SCOPED_TRACE(method);
    server.FailNext(
        {{0, -1, std::chrono::seconds(60), method}, {0, -1, std::chrono::seconds(60), method}});
    const auto start = Clock::now();
    const absl::Status status =
        std::string(method) == "GET"
            ? store->Get(Kind::kResourceClaim, {"ns", "c"}).status()
            : store->Update(std::get<ResourceClaim>(*store->Get(Kind::kResourceClaim, {"ns", "c"})))
                  .status();
    const auto elapsed = Clock::now() - start;
    EXPECT_THAT(status,
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         AllOf(HasSubstr("ResourceClaim \"ns/c\""), HasSubstr("timed out"))));
    EXPECT_GE(elapsed, milliseconds(1200));
    EXPECT_LT(elapsed, milliseconds(5000));
    EXPECT_EQ(server.failures_pending(), 0);
  }
  // The server answers again: so does the client.
  EXPECT_OK(store->Get(Kind::kResourceClaim, {"ns", "c"}).status());
}

TEST(ApiServerFaultTest, WatchConvergesThroughErrorsGoneAndAFailingRelist) {
  FakeApiServer server;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  server.Put(std::string(kClaims) + "/a", ClaimJson("a", "1"));
  View view;
  ASSERT_OK_AND_ASSIGN(
      auto watch, store->Watch(Kind::kResourceClaim, {.namespace_name = "ns"}, view.Callback()));
  ASSERT_TRUE(view.WaitFor({{"a", "1"}}));

  // The watch connection drops and every reconnect fails for a while (500, 429, 503): once the
  // server is back the watch resumes from its resourceVersion and reports what happened.
  server.FailNext({{500, -1, {}, "WATCH"}, {429, 0, {}, "WATCH"}, {503, -1, {}, "WATCH"}});
  server.CloseWatches();
  server.Put(std::string(kClaims) + "/b", ClaimJson("b", "1"));
  ASSERT_TRUE(view.WaitFor({{"a", "1"}, {"b", "1"}})) << view.objects().size();
  EXPECT_EQ(server.failures_pending(), 0);

  // History is compacted under changes the watch never saw (410 Gone), and the relist fails
  // more often than one request retries (6 x 500 > 1 + max_retries 4): the watch relists again
  // until it gets the list, then reports the difference.
  server.FailNext(std::vector<FakeApiServer::Failure>(6, {500, -1, {}, "GET"}));
  server.Put(std::string(kClaims) + "/a", ClaimJson("a", "2"), /*silently=*/true);
  server.Remove(std::string(kClaims) + "/b", /*silently=*/true);
  server.Put(std::string(kClaims) + "/c", ClaimJson("c", "1"), /*silently=*/true);
  server.Compact();
  ASSERT_TRUE(view.WaitFor({{"a", "2"}, {"c", "1"}})) << view.objects().size();
  EXPECT_GE(server.gone_sent(), 1);
  EXPECT_EQ(server.failures_pending(), 0);

  // And it keeps streaming afterwards.
  server.Put(std::string(kClaims) + "/d", ClaimJson("d", "1"));
  EXPECT_TRUE(view.WaitFor({{"a", "2"}, {"c", "1"}, {"d", "1"}}));
  watch->Stop();
}

TEST(ApiServerFaultTest, WatchReconnectingToAHungServerStopsPromptly) {
  FakeApiServer server;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  View view;
  ASSERT_OK_AND_ASSIGN(
      auto watch, store->Watch(Kind::kResourceClaim, {.namespace_name = "ns"}, view.Callback()));
  server.FailNext({{0, -1, std::chrono::seconds(60), "WATCH"}});
  server.CloseWatches();
  for (int i = 0; i < 200 && server.failures_pending() > 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(server.failures_pending(), 0);  // the reconnect is waiting on the hung server
  const auto start = Clock::now();
  watch->Stop();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
}  // namespace devlet::kube
