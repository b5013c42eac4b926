// The REST client and ApiServerStore driven against a local fake API server over HTTP.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/rest_client.h"
#include "rest_fake_apiserver.h"

namespace devlet::kube {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;
using fake::FakeApiServer;

RestConfig FastConfig(const std::string& server) {
  RestConfig config;
  config.server = server;
  config.qps = 0;  // no rate limit unless a test wants one
  config.initial_backoff = std::chrono::milliseconds(5);
  config.max_backoff = std::chrono::milliseconds(50);
  config.max_retries = 4;
  return config;
}

ResourceClaim Claim(const std::string& name, const std::string& ns = "ns") {
  ResourceClaim claim;
  claim.metadata.name = name;
  claim.metadata.namespace_ = ns;
  return claim;
}

TEST(RestPathTest, Paths) {
  EXPECT_EQ(ResourcePath(Kind::kResourceClaim, "ns", "c", "status"),
            "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status");
  EXPECT_EQ(ResourcePath(Kind::kResourceSlice, ""), "/apis/resource.k8s.io/v1/resourceslices");
  EXPECT_EQ(ResourcePath(Kind::kNode, "", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(ResourcePath(Kind::kPod, "default", "p"), "/api/v1/namespaces/default/pods/p");
  EXPECT_EQ(ResourcePath(Kind::kDeviceTaintRule, ""), "/apis/resource.k8s.io/v1/devicetaintrules");
}

TEST(RestStatusTest, MapsApiStatusObjects) {
  auto body = [](int code, const std::string& reason) {
    return nlohmann::json{{"kind", "Status"}, {"code", code}, {"reason", reason},
                          {"message", "server says"}}
        .dump();
  };
  const std::string what = "ResourceClaim \"ns/c\"";
  EXPECT_THAT(StatusFromResponse(404, body(404, "NotFound"), what),
              StatusIs(absl::StatusCode::kNotFound,
                       "ResourceClaim \"ns/c\": server says (HTTP 404 NotFound)"));
  EXPECT_THAT(StatusFromResponse(409, body(409, "AlreadyExists"), what),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("ns/c")));
  EXPECT_THAT(StatusFromResponse(409, body(409, "Conflict"), what),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("Conflict")));
  EXPECT_THAT(StatusFromResponse(403, body(403, "Forbidden"), what),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("server says")));
  EXPECT_THAT(StatusFromResponse(422, body(422, "Invalid"), what),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Invalid")));
  EXPECT_THAT(StatusFromResponse(410, body(410, "Expired"), what),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("Expired")));
  EXPECT_THAT(StatusFromResponse(401, "", what), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(StatusFromResponse(503, "<html>down</html>", what),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("<html>down</html>")));
}

TEST(ApiServerStoreTest, CreateGetUpdateStatusDelete) {
  FakeApiServer server;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));

  ASSERT_OK_AND_ASSIGN(Object created, store->Create(Claim("c1")));
  const std::string uid = MetadataOf(created).uid;
  EXPECT_FALSE(uid.empty());
  EXPECT_FALSE(MetadataOf(created).resource_version.empty());
  EXPECT_THAT(store->Create(Claim("c1")),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("ResourceClaim \"ns/c1\"")));

  ASSERT_OK_AND_ASSIGN(ResourceClaim got, GetAs<ResourceClaim>(*store, "ns", "c1"));
  EXPECT_EQ(got.metadata.uid, uid);
  EXPECT_THAT(store->Get(Kind::kResourceClaim, {"ns", "missing"}),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("ResourceClaim \"ns/missing\": \"missing\" not found")));

  // Update with the current resourceVersion works; with a stale one it is a conflict.
  got.metadata.labels["a"] = "b";
  ASSERT_OK_AND_ASSIGN(Object updated, store->Update(got));
  EXPECT_EQ(MetadataOf(updated).labels.at("a"), "b");
  EXPECT_THAT(store->Update(got), StatusIs(absl::StatusCode::kAborted, HasSubstr("ns/c1")));

  // Status subresource.
  ResourceClaim with_status = std::get<ResourceClaim>(updated);
  with_status.status.reserved_for.push_back({"", "pods", "pod-1", "pod-uid"});
  ASSERT_OK_AND_ASSIGN(Object status_written, store->UpdateStatus(with_status));
  EXPECT_EQ(std::get<ResourceClaim>(status_written).status.reserved_for.size(), 1u);
  EXPECT_EQ(server.requests().back().path,
            "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c1/status");

  // List.
  ASSERT_OK(store->Create(Claim("c0")).status());
  ASSERT_OK_AND_ASSIGN(std::vector<ResourceClaim> claims,
                       ListAs<ResourceClaim>(*store, {.namespace_name = "ns"}));
  ASSERT_EQ(claims.size(), 2u);
  EXPECT_EQ(claims[0].metadata.name, "c0");

  // Delete with a UID precondition.
  EXPECT_THAT(store->Delete(Kind::kResourceClaim, {"ns", "c1"}, "other-uid"),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_OK(store->Delete(Kind::kResourceClaim, {"ns", "c1"}, uid));
  EXPECT_THAT(store->Delete(Kind::kResourceClaim, {"ns", "c1"}, ""),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(ApiServerStoreTest, BindPodPostsABinding) {
  FakeApiServer server;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  ASSERT_OK(store->BindPod("ns", "p1", "pod-uid", "node-a"));
  EXPECT_EQ(server.requests().back().method, "POST");
  EXPECT_EQ(server.requests().back().path, "/api/v1/namespaces/ns/pods/p1/binding");
  // The fake keeps what was posted under the binding's name: read the Binding back.
  ASSERT_OK_AND_ASSIGN(RestResponse posted,
                       store->client().Do({.path = "/api/v1/namespaces/ns/pods/p1/binding/p1"}));
  const nlohmann::json binding = nlohmann::json::parse(posted.body);
  EXPECT_EQ(binding["kind"], "Binding");
  EXPECT_EQ(binding["target"]["kind"], "Node");
  EXPECT_EQ(binding["target"]["name"], "node-a");
  EXPECT_EQ(binding["metadata"]["namespace"], "ns");
  // A refusal comes back as the error, naming the pod (the fake answers 409 AlreadyExists; a
  // real API server answers an already bound pod with 409 Conflict, i.e. Aborted).
  EXPECT_THAT(store->BindPod("ns", "p1", "pod-uid", "node-b"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("Pod \"ns/p1\" binding")));
}

TEST(ApiServerStoreTest, MergePatchAndServerSideApply) {
  FakeApiServer server;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  ASSERT_OK(store->Create(Claim("c")).status());

  ASSERT_OK_AND_ASSIGN(Object patched,
                       store->Patch(Kind::kResourceClaim, {"ns", "c"},
                                    R"({"metadata":{"labels":{"x":"y"}}})", PatchType::kMerge));
  EXPECT_EQ(MetadataOf(patched).labels.at("x"), "y");
  EXPECT_EQ(server.requests().back().content_type, "application/merge-patch+json");

  EXPECT_THAT(store->Patch(Kind::kResourceClaim, {"ns", "c"}, "{}", PatchType::kApply),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field manager")));

  ResourceClaim claim = Claim("c");
  claim.status.reserved_for.push_back({"", "pods", "p", "u"});
  ASSERT_OK(store->Apply(claim, {.field_manager = "devlet", .force = true,
                                 .subresource = "status"})
                .status());
  const auto last = server.requests().back();
  EXPECT_EQ(last.method, "PATCH");
  EXPECT_EQ(last.content_type, "application/apply-patch+yaml");
  EXPECT_EQ(last.path, "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status");
  EXPECT_EQ(last.params.find("fieldManager")->second, "devlet");
  EXPECT_EQ(last.params.find("force")->second, "true");
}

TEST(RestClientTest, RetriesOn429And503HonouringRetryAfter) {
  FakeApiServer server;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  ASSERT_OK(store->Create(Claim("c")).status());

  server.FailNext({{429, 1}, {503, -1}, {503, 0}});
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK(store->Get(Kind::kResourceClaim, {"ns", "c"}).status());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(store->client().stats().retries.load(), 3);
  // Retry-After: 1 is honoured up to max_backoff (50 ms here).
  EXPECT_GE(elapsed, std::chrono::milliseconds(50));

  // Creates (not idempotent) are retried after 429/503 too: the server did not act on them.
  server.FailNext({{503, 0}});
  EXPECT_OK(store->Create(Claim("d")).status());

  // Out of retries: the last error, naming the object.
  server.FailNext({{503, 0}, {503, 0}, {503, 0}, {503, 0}, {503, 0}});
  EXPECT_THAT(store->Get(Kind::kResourceClaim, {"ns", "c"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("ResourceClaim \"ns/c\"")));
  server.FailNext({{429, 0}, {429, 0}, {429, 0}, {429, 0}, {429, 0}});
  EXPECT_THAT(store->Get(Kind::kResourceClaim, {"ns", "c"}),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(RestClientTest, ConnectionRefusedIsRetriedThenUnavailable) {
  int port;
  {
    FakeApiServer gone;  // take a port, then free it
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  RestConfig config = FastConfig("http://127.0.0.1:" + std::to_string(port));
  config.max_retries = 2;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(config));
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n1"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("Node \"n1\"")));
  EXPECT_EQ(store->client().stats().requests.load(), 3);
}

TEST(RestClientTest, RateLimitIsATokenBucket) {
  FakeApiServer server;
  RestConfig config = FastConfig(server.url());
  config.qps = 20;
  config.burst = 2;
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(config));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 12; ++i) {
    EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // 2 at once, then 10 more at 20/s: at least ~0.5 s.
  EXPECT_GE(elapsed, std::chrono::milliseconds(450));
  EXPECT_GT(store->client().stats().throttled_ns.load(), 0);
}

TEST(RestClientTest, TokenFileIsReReadOnRotation) {
  FakeApiServer server;
  const std::string dir = ::testing::TempDir() + "/rest_token_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string token_file = dir + "/token";
  std::ofstream(token_file) << "first\n";
  server.RequireToken("first");

  RestConfig config = FastConfig(server.url());
  config.token_file = token_file;
  config.token_reload_interval = std::chrono::hours(1);  // only a 401 makes it re-read
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(config));
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));

  // The kubelet rotates the projected token.
  std::ofstream(token_file) << "second\n";
  server.RequireToken("second");
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_GE(store->client().stats().token_reloads.load(), 2);

  // A wrong token stays an error (re-read once, not forever).
  server.RequireToken("third");
  EXPECT_THAT(store->Get(Kind::kNode, {"", "n"}),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("Node \"n\"")));

  // Periodic re-read without a 401.
  config.token_reload_interval = std::chrono::milliseconds(0);
  ASSERT_OK_AND_ASSIGN(auto eager, ApiServerStore::Create(config));
  std::ofstream(token_file) << "third";
  EXPECT_THAT(eager->Get(Kind::kNode, {"", "n"}), StatusIs(absl::StatusCode::kNotFound));
  std::filesystem::remove_all(dir);
}

TEST(RestClientTest, InClusterConfig) {
  const std::string dir = ::testing::TempDir() + "/rest_incluster_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/token") << "sa-token";
  std::ofstream(dir + "/ca.crt") << "not really a CA";
  InClusterOptions options{.token_file = dir + "/token", .ca_file = dir + "/ca.crt",
                           .namespace_file = dir + "/namespace", .host = "10.96.0.1",
                           .port = "443"};
  ASSERT_OK_AND_ASSIGN(RestConfig config, InClusterConfig(options));
  EXPECT_EQ(config.server, "https://10.96.0.1:443");
  EXPECT_EQ(config.token_file, dir + "/token");
  EXPECT_EQ(config.certificate_authority_file, dir + "/ca.crt");
  EXPECT_EQ(config.namespace_name, "");  // no namespace file: none
  std::ofstream(dir + "/namespace") << "team-a\n";
  ASSERT_OK_AND_ASSIGN(config, InClusterConfig(options));
  EXPECT_EQ(config.namespace_name, "team-a");
  options.host = "fd00::1";
  ASSERT_OK_AND_ASSIGN(config, InClusterConfig(options));
  EXPECT_EQ(config.server, "https://[fd00::1]:443");
  options.token_file = dir + "/missing";
  EXPECT_THAT(InClusterConfig(options), StatusIs(absl::StatusCode::kNotFound));
  // Outside a cluster.
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_THAT(InClusterConfig({.token_file = dir + "/token"}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("KUBERNETES_SERVICE_HOST")));
  std::filesystem::remove_all(dir);
}

// Collects watch events.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<WatchEvent::Type, std::string>> events;  // type, name

  WatchCallback Callback() {
    return [this](const WatchEvent& event) {
      std::lock_guard<std::mutex> lock(mu);
      events.emplace_back(event.type, MetadataOf(event.object).name);
      cv.notify_all();
    };
  }
  bool WaitFor(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return events.size() >= n; });
  }
  std::pair<WatchEvent::Type, std::string> At(std::size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    return events.at(i);
  }
};

TEST(ApiServerStoreTest, WatchListsThenStreamsWithBookmarksAndRelistsOnGone) {
  FakeApiServer server;
  server.SetBookmarkInterval(std::chrono::milliseconds(50));
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  ASSERT_OK(store->Create(Claim("a")).status());
  ASSERT_OK(store->Create(Claim("b")).status());

  Recorder recorder;
  ASSERT_OK_AND_ASSIGN(auto watch, store->Watch(Kind::kResourceClaim, {.namespace_name = "ns"},
                                                recorder.Callback()));
  // The listed state arrives before Watch returns: a write made next cannot be overtaken by it.
  ASSERT_TRUE(recorder.WaitFor(2, std::chrono::milliseconds(0)));
  EXPECT_EQ(recorder.At(0), std::make_pair(WatchEvent::Type::kAdded, std::string("a")));
  EXPECT_EQ(recorder.At(1), std::make_pair(WatchEvent::Type::kAdded, std::string("b")));

  ASSERT_OK(store->Create(Claim("c")).status());
  ASSERT_TRUE(recorder.WaitFor(3));
  EXPECT_EQ(recorder.At(2), std::make_pair(WatchEvent::Type::kAdded, std::string("c")));
  ASSERT_OK(store->Patch(Kind::kResourceClaim, {"ns", "a"}, R"({"metadata":{"labels":{"x":"1"}}})",
                         PatchType::kMerge)
                .status());
  ASSERT_TRUE(recorder.WaitFor(4));
  EXPECT_EQ(recorder.At(3), std::make_pair(WatchEvent::Type::kModified, std::string("a")));
  ASSERT_OK(store->Delete(Kind::kResourceClaim, {"ns", "b"}, ""));
  ASSERT_TRUE(recorder.WaitFor(5));
  EXPECT_EQ(recorder.At(4), std::make_pair(WatchEvent::Type::kDeleted, std::string("b")));

  // Bookmarks flow (and are not reported as events).
  for (int i = 0; i < 100 && server.bookmarks_sent() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(server.bookmarks_sent(), 2);

  // History is compacted while changes happened that the watch never saw: the server answers
  // 410 Gone; the watch relists and reports the difference.
  const std::string base = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/";
  nlohmann::json changed = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"},
                            {"metadata", {{"name", "a"}, {"namespace", "ns"}, {"uid", "uid-x"},
                                          {"labels", {{"x", "2"}}}}},
                            {"spec", nlohmann::json::object()}};
  server.Put(base + "a", changed, /*silently=*/true);
  server.Remove(base + "c", /*silently=*/true);
  server.Compact();
  ASSERT_TRUE(recorder.WaitFor(7));
  EXPECT_GE(server.gone_sent(), 1);
  std::set<std::pair<WatchEvent::Type, std::string>> after = {recorder.At(5), recorder.At(6)};
  EXPECT_TRUE(after.contains({WatchEvent::Type::kDeleted, "c"}));
  EXPECT_TRUE(after.contains({WatchEvent::Type::kModified, "a"}));

  // A dropped connection: the watch reconnects from its resourceVersion and misses nothing.
  const int watches = server.watch_requests();
  server.CloseWatches();
  ASSERT_OK(store->Create(Claim("d")).status());
  ASSERT_TRUE(recorder.WaitFor(8));
  EXPECT_EQ(recorder.At(7), std::make_pair(WatchEvent::Type::kAdded, std::string("d")));
  EXPECT_GT(server.watch_requests(), watches);
  for (const auto& request : server.requests()) {
    if (request.params.count("watch")) {
      EXPECT_EQ(request.params.find("allowWatchBookmarks")->second, "true");
      EXPECT_FALSE(request.params.find("resourceVersion")->second.empty());
    }
  }
  watch->Stop();
}

TEST(ApiServerStoreTest, WatchStopsPromptlyAndReportsListErrors) {
  FakeApiServer server;
  server.RequireToken("secret");
  ASSERT_OK_AND_ASSIGN(auto store, ApiServerStore::Create(FastConfig(server.url())));
  Recorder recorder;
  EXPECT_THAT(store->Watch(Kind::kPod, {}, recorder.Callback()),
              StatusIs(absl::StatusCode::kUnauthenticated));

  server.RequireToken("");
  ASSERT_OK_AND_ASSIGN(auto watch, store->Watch(Kind::kPod, {}, recorder.Callback()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  watch.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
}  // namespace devlet::kube
