// The search budget over HTTP (issue 16 §1, issue 14 §0.4): every verb's search stops at
// Options::filter_timeout while DRASchedulerFilterTimeout is on, and bind searches outside the
// state's exclusive lock, so a slow bind never holds up another pod's filter.
#include <httplib.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/extender/extender.h"
#include "devlet/kube/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace devlet::extender {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using testing::PodJson;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// node-s: `plain` devices of slow.example.com on NUMA 0 and one on NUMA 1. The claim
// "exhaustive" asks for `count` of them plus the NUMA 1 one under one matchAttribute: no solution,
// found only after trying every `count` of the plain ones (C(40, 8) = 7.7e7 sets: hours).
std::string SlowYaml(int plain, int count) {
  std::string slice =
      "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: node-s-slow}\n"
      "spec:\n  driver: slow.example.com\n  nodeName: node-s\n"
      "  pool: {name: node-s, generation: 1, resourceSliceCount: 1}\n  devices:\n";
  for (int i = 0; i <= plain; ++i) {
    slice += "  - {name: dev-" + std::to_string(i) + ", attributes: {numa: {int: " +
             (i == plain ? "1" : "0") + "}}}\n";
  }
  return testing::Documents(
      {"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: slow}\nspec:\n"
       "  selectors:\n  - cel: {expression: 'device.driver == \"slow.example.com\"'}\n",
       slice, testing::NodeYaml("node-s"),
       "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: exhaustive, "
       "namespace: default, uid: uid-exhaustive, resourceVersion: '1'}\nspec:\n  devices:\n"
       "    requests:\n    - name: many\n      exactly: {deviceClassName: slow, count: " +
           std::to_string(count) +
           "}\n    - name: one\n      exactly:\n        deviceClassName: slow\n"
           "        selectors:\n        - cel: {expression: "
           "'device.attributes[\"slow.example.com\"].numa == 1'}\n"
           "    constraints:\n    - matchAttribute: slow.example.com/numa\n"});
}

class ExtenderBudgetTest : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds timeout, const std::string& gates = "",
             int plain = 40, int count = 8) {
    ASSERT_OK_AND_ASSIGN(allocator::Features features, allocator::ParseFeatureGates(gates));
    state_ = std::make_unique<ClusterState>(features);
    writer_ = std::make_unique<MemoryWriter>(*state_);
    ASSERT_OK_AND_ASSIGN(
        std::vector<kube::Object> objects,
        kube::Decode(testing::Documents(
            {SlowYaml(plain, count), testing::GpuClassYaml(), testing::GpuSliceYaml("node-a", {0}),
             testing::NodeYaml("node-a"),
             "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: one-gpu, "
             "namespace: default, uid: uid-one-gpu, resourceVersion: '1'}\nspec:\n  devices:\n"
             "    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu}\n"})));
    for (const auto& object : objects) ASSERT_OK(state_->Apply(object));
    state_->MarkSynced();
    extender_ = std::make_unique<Extender>(
        *state_, *writer_,
        Options{.mode = Mode::kAllocate, .filter_timeout = timeout, .reuse_results = false});
    ASSERT_OK(http_.Start(*extender_));
  }
  void TearDown() override { http_.Stop(); }

  json Filter(const std::string& pod, const std::string& claim, const std::string& node) {
    return http_.Post("filter",
                      json({{"Pod", PodJson(pod, {claim})}, {"NodeNames", {node}}}).dump());
  }
  json Bind(httplib::Client& client, const std::string& pod, const std::string& node) {
    json args = {{"PodName", pod}, {"PodNamespace", "default"}, {"PodUID", "uid-" + pod},
                 {"Node", node}};
    auto res = client.Post("/devlet/bind", args.dump(), "application/json");
    EXPECT_TRUE(res);
    return res ? json::parse(res->body) : json();
  }

  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<MemoryWriter> writer_;
  std::unique_ptr<Extender> extender_;
  testing::LoopbackServer http_;
};

TEST_F(ExtenderBudgetTest, FilterTimesOutWithAnError) {
  Start(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  json reply = Filter("slow-pod", "exhaustive", "node-s");
  EXPECT_LT(SecondsSince(start), 5.0);
  // As upstream's Filter (1.37): an Error, so that the pod retries with backoff.
  EXPECT_THAT(reply["Error"].get<std::string>(),
              HasSubstr("node node-s: timed out after 300ms while allocating claim "
                        "default/exhaustive"));
}

TEST_F(ExtenderBudgetTest, PrioritizeTimesOutWithScoreZero) {
  Start(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  json reply = http_.Post(
      "prioritize",
      json({{"Pod", PodJson("slow-pod", {"exhaustive"})}, {"NodeNames", {"node-s"}}}).dump());
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_EQ(reply, json::parse(R"([{"Host":"node-s","Score":0}])"));
}

TEST_F(ExtenderBudgetTest, BindTimesOutAndHoldsNothing) {
  Start(std::chrono::milliseconds(300));
  (void)Filter("slow-pod", "exhaustive", "node-a");  // the scheduler's filter saw the pod
  const auto start = Clock::now();
  json reply = Bind(http_.client(), "slow-pod", "node-s");
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_THAT(reply["Error"].get<std::string>(),
              HasSubstr("node node-s: timed out after 300ms while allocating claim "
                        "default/exhaustive"));
  EXPECT_EQ(state_->num_held(), 0u);
  EXPECT_TRUE(writer_->bindings().empty());
}

// With the gate off there is no budget (upstream: no filterTimeout): a search of a few thousand
// steps that a 1 ms budget cuts short runs to its end.
TEST_F(ExtenderBudgetTest, GateOffMeansNoBudget) {
  for (const std::string gates : {"", "DRASchedulerFilterTimeout=false"}) {
    SCOPED_TRACE(gates);
    Start(std::chrono::milliseconds(1), gates, /*plain=*/24, /*count=*/4);
    json reply = Filter("slow-pod", "exhaustive", "node-s");
    if (gates.empty()) {
      EXPECT_THAT(reply["Error"].get<std::string>(), HasSubstr("timed out after 1ms"));
    } else {
      EXPECT_EQ(reply["Error"], "");
      EXPECT_EQ(reply["FailedNodes"]["node-s"], "cannot allocate all claims");
    }
    http_.Stop();
  }
}

// Bind searches on a snapshot outside the state's lock: while one pod's bind searches for
// seconds, another pod's filter answers at once (before: it waited for the bind's exclusive lock,
// the whole search long), and the other pod binds too.
TEST_F(ExtenderBudgetTest, SlowBindDoesNotBlockOtherPods) {
  Start(std::chrono::milliseconds(3000));
  (void)Filter("slow-pod", "exhaustive", "node-a");  // quick: no slow devices there
  const auto bind_start = Clock::now();
  std::future<json> slow = std::async(std::launch::async, [&] {
    httplib::Client client("127.0.0.1", http_.port());
    client.set_read_timeout(30, 0);
    return Bind(client, "slow-pod", "node-s");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the bind is searching
  const auto start = Clock::now();
  httplib::Client other("127.0.0.1", http_.port());
  auto res = other.Post("/devlet/filter",
                        json({{"Pod", PodJson("gpu-pod", {"one-gpu"})}, {"NodeNames", {"node-a"}}})
                            .dump(),
                        "application/json");
  ASSERT_TRUE(res);
  const double filter_seconds = SecondsSince(start);
  EXPECT_EQ(json::parse(res->body)["NodeNames"], json({"node-a"}));
  EXPECT_EQ(Bind(other, "gpu-pod", "node-a")["Error"], "");
  const double both_seconds = SecondsSince(start);
  json slow_reply = slow.get();
  const double bind_seconds = SecondsSince(bind_start);
  EXPECT_LT(filter_seconds, 1.0) << "filter waited for the slow bind";
  EXPECT_LT(both_seconds, 1.5) << "filter + bind waited for the slow bind";
  EXPECT_GT(bind_seconds, 2.5) << "the slow bind should have searched for its budget";
  EXPECT_THAT(slow_reply["Error"].get<std::string>(), HasSubstr("timed out after 3s"));
  EXPECT_TRUE(state_->IsAllocated("gpu.example.com", "node-a", "gpu-0"));
  EXPECT_EQ(writer_->bindings().size(), 1u);
}

// Binds that race for one device both search on the state before either holds it; the one that
// commits second finds the node changed, searches again and reports the device gone.
TEST_F(ExtenderBudgetTest, RacingBindsRecheckBeforeHolding) {
  Start(std::chrono::milliseconds(3000));
  for (int round = 0; round < 20; ++round) {
    // Two new pods with a claim each for node-a's only GPU.
    std::vector<std::string> pods;
    for (const char* side : {"a", "b"}) {
      const std::string name = "r" + std::to_string(round) + side;
      ASSERT_OK_AND_ASSIGN(
          std::vector<kube::Object> claim,
          kube::Decode("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: " +
                       name + ", namespace: default, uid: uid-" + name +
                       ", resourceVersion: '1'}\nspec:\n  devices:\n    requests:\n"
                       "    - name: gpu\n      exactly: {deviceClassName: gpu}\n"));
      ASSERT_OK(state_->Apply(claim[0]));
      (void)Filter("pod-" + name, name, "node-a");
      pods.push_back("pod-" + name);
    }
    std::vector<std::future<json>> binds;
    for (const std::string& pod : pods) {
      binds.push_back(std::async(std::launch::async, [&, pod] {
        httplib::Client client("127.0.0.1", http_.port());
        return Bind(client, pod, "node-a");
      }));
    }
    int ok = 0;
    std::string errors, winner;
    for (size_t k = 0; k < binds.size(); ++k) {
      json reply = binds[k].get();
      if (reply["Error"] == "") {
        ++ok;
        winner = pods[k].substr(4);
      } else {
        errors += reply["Error"].get<std::string>();
      }
    }
    ASSERT_EQ(ok, 1) << "round " << round << ": " << errors;
    EXPECT_THAT(errors, HasSubstr("no longer available"));
    EXPECT_EQ(state_->num_held(), 0u);
    // Free the GPU for the next round: the winner's claim loses its allocation.
    std::optional<kube::ResourceClaim> c = state_->GetClaim("default", winner);
    ASSERT_TRUE(c);
    c->status = {};
    ASSERT_OK(state_->Apply(*c));
    ASSERT_FALSE(state_->IsAllocated("gpu.example.com", "node-a", "gpu-0"));
  }
}

}  // namespace
}  // namespace devlet::extender
