// HTTP-level tests: the real server on a loopback port, driven with the scheduler's JSON (Go field
// names, as k8s.io/kube-scheduler/extender/v1 encodes them).
#include <httplib.h>

#include <atomic>
#include <optional>
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
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::PodJson;

// node-a: two GPUs on NUMA 0 and one on NUMA 1; node-b: one GPU; node-c: none.
std::string ClusterYaml() {
  return testing::Documents({testing::GpuClassYaml("example.com/gpu"),
                             testing::GpuSliceYaml("node-a", {0, 1, 0}),
                             testing::GpuSliceYaml("node-b", {0}), testing::NodeYaml("node-a"),
                             testing::NodeYaml("node-b"), testing::NodeYaml("node-c")});
}

std::string ClaimYaml(const std::string& name, int count) {
  return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: " + name +
         ", namespace: default, uid: uid-" + name + ", resourceVersion: '1'}\n" +
         "spec:\n  devices:\n    requests:\n    - name: gpus\n      exactly: {deviceClassName: "
         "gpu, count: " +
         std::to_string(count) + "}\n";
}


class ExtenderHttpTest : public ::testing::Test {
 protected:
  void StartServer(Mode mode, const std::vector<std::string>& extra_yaml = {}) {
    ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> objects, kube::Decode(ClusterYaml()));
    for (const auto& yaml : extra_yaml) {
      ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> more, kube::Decode(yaml));
      objects.insert(objects.end(), more.begin(), more.end());
    }
    for (const auto& object : objects) ASSERT_OK(state_.Apply(object));
    extender_ = std::make_unique<Extender>(state_, writer_, Options{.mode = mode});
    ASSERT_OK(http_.Start(*extender_));
  }
  void TearDown() override { http_.Stop(); }

  json Post(const std::string& verb, const std::string& body, int want_status = 200) {
    return http_.Post(verb, body, want_status);
  }
  json Filter(const json& pod, const std::vector<std::string>& nodes) {
    return Post("filter", json({{"Pod", pod}, {"NodeNames", nodes}}).dump());
  }
  json Bind(const std::string& pod, const std::string& node) {
    return Post("bind", json({{"PodName", pod},
                              {"PodNamespace", "default"},
                              {"PodUID", "uid-" + pod},
                              {"Node", node}})
                            .dump());
  }

  ClusterState state_{allocator::Features{}};
  MemoryWriter writer_{state_};
  std::unique_ptr<Extender> extender_;
  testing::LoopbackServer http_;
};

TEST_F(ExtenderHttpTest, HealthReadyAndMetrics) {
  StartServer(Mode::kAllocate);
  EXPECT_EQ(http_.client().Get("/healthz")->status, 200);
  EXPECT_EQ(http_.client().Get("/readyz")->status, 503);
  state_.MarkSynced();
  EXPECT_EQ(http_.client().Get("/readyz")->status, 200);
  Filter(PodJson("p", {}), {"node-a"});
  auto metrics = http_.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("devlet_extender_filter_requests_total 1\n"));
  EXPECT_THAT(metrics->body, HasSubstr("devlet_extender_ready 1\n"));
}

TEST_F(ExtenderHttpTest, AllocateFilterNodeNamesWithReasons) {
  StartServer(Mode::kAllocate, {ClaimYaml("two", 2)});
  json reply = Filter(PodJson("p", {"two"}), {"node-a", "node-b", "node-c", "node-x"});
  EXPECT_EQ(reply["Error"], "");
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
  EXPECT_TRUE(reply["Nodes"].is_null());
  EXPECT_TRUE(reply["FailedNodes"].contains("node-b"));
  EXPECT_TRUE(reply["FailedNodes"].contains("node-c"));
  EXPECT_THAT(reply["FailedAndUnresolvableNodes"]["node-x"].get<std::string>(),
              HasSubstr("not known"));
}

TEST_F(ExtenderHttpTest, NodeNamedOnlyBySlicesIsImplied) {
  StartServer(Mode::kAllocate,
              {ClaimYaml("one", 1), testing::GpuSliceYaml("node-d", {std::nullopt})});
  EXPECT_EQ(Filter(PodJson("p", {"one"}), {"node-d"})["NodeNames"], json({"node-d"}));
  EXPECT_EQ(Bind("p", "node-d")["Error"], "");
  EXPECT_TRUE(state_.IsAllocated("gpu.example.com", "node-d", "gpu-0"));
}

TEST_F(ExtenderHttpTest, FilterNodeListFormEchoesNodes) {
  StartServer(Mode::kAllocate, {ClaimYaml("one", 1)});
  json nodes = {{"metadata", json::object()},
                {"items", json::array({{{"metadata", {{"name", "node-b"}}}},
                                       {{"metadata", {{"name", "node-c"}}}}})}};
  json reply = Post("filter", json({{"Pod", PodJson("p", {"one"})}, {"Nodes", nodes}}).dump());
  EXPECT_EQ(reply["Error"], "");
  ASSERT_EQ(reply["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(reply["Nodes"]["items"][0]["metadata"]["name"], "node-b");
  EXPECT_TRUE(reply["FailedNodes"].contains("node-c"));
}

TEST_F(ExtenderHttpTest, BadInputGivesClearErrors) {
  StartServer(Mode::kAllocate);
  EXPECT_THAT(Post("filter", "{not json")["Error"].get<std::string>(), HasSubstr("not valid JSON"));
  EXPECT_THAT(Post("filter", "[]")["Error"].get<std::string>(), HasSubstr("not a JSON object"));
  EXPECT_THAT(Post("filter", R"({"NodeNames":["a"]})")["Error"].get<std::string>(),
              HasSubstr("Pod is missing"));
  EXPECT_THAT(Post("filter", R"({"Pod":{"metadata":{"name":3}},"NodeNames":["a"]})")["Error"]
                  .get<std::string>(),
              HasSubstr("metadata.name"));
  EXPECT_THAT(Post("filter", R"({"Pod":{"metadata":{"name":"p"}}})")["Error"].get<std::string>(),
              HasSubstr("neither NodeNames nor Nodes"));
  Post("prioritize", "garbage", 400);
  EXPECT_THAT(Post("bind", "garbage")["Error"].get<std::string>(), HasSubstr("not valid JSON"));
  EXPECT_THAT(Post("bind", R"({"PodName":"p"})")["Error"].get<std::string>(),
              HasSubstr("required"));
  EXPECT_THAT(Bind("nobody", "node-a")["Error"].get<std::string>(), HasSubstr("not known"));
  EXPECT_EQ(http_.client().Post("/devlet/preempt", "{}", "application/json")->status, 404);
  std::string huge(17u << 20, ' ');
  auto res = http_.client().Post("/devlet/filter", huge, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  // Go decoding is case-insensitive: lower-case field names work too.
  json reply = Post("filter", json({{"pod", PodJson("p", {})}, {"nodenames", {"node-a"}}}).dump());
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
}

TEST_F(ExtenderHttpTest, MissingClaimsAreUnresolvable) {
  StartServer(Mode::kAllocate);
  json pod = PodJson("p", {"absent"});
  json reply = Filter(pod, {"node-a"});
  EXPECT_THAT(reply["FailedAndUnresolvableNodes"]["node-a"].get<std::string>(),
              HasSubstr("\"default/absent\" not found"));
  pod["spec"]["resourceClaims"] = json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "t"}}});
  reply = Filter(pod, {"node-a"});
  EXPECT_THAT(reply["FailedAndUnresolvableNodes"]["node-a"].get<std::string>(),
              HasSubstr("waiting for resource claim creation"));
}

TEST_F(ExtenderHttpTest, TemplateClaimResolvedThroughPodStatus) {
  StartServer(Mode::kAllocate, {ClaimYaml("p-gpu-abcde", 2)});
  json pod = PodJson("p", {});
  pod["spec"]["resourceClaims"] = json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "t"}}});
  pod["status"]["resourceClaimStatuses"] =
      json::array({{{"name", "gpu"}, {"resourceClaimName", "p-gpu-abcde"}}});
  EXPECT_EQ(Filter(pod, {"node-a", "node-b"})["NodeNames"], json({"node-a"}));
}

TEST_F(ExtenderHttpTest, BindWritesAllocationAndReservedFor) {
  StartServer(Mode::kAllocate, {ClaimYaml("two", 2)});
  json pod = PodJson("p", {"two"});
  EXPECT_EQ(Filter(pod, {"node-a"})["NodeNames"], json({"node-a"}));
  EXPECT_EQ(Bind("p", "node-a")["Error"], "");
  std::optional<kube::ResourceClaim> claim = state_.GetClaim("default", "two");
  ASSERT_TRUE(claim && claim->status.allocation);
  EXPECT_EQ(claim->status.allocation->devices.results.size(), 2u);
  ASSERT_EQ(claim->status.reserved_for.size(), 1u);
  EXPECT_EQ(claim->status.reserved_for[0].resource, "pods");
  EXPECT_EQ(claim->status.reserved_for[0].uid, "uid-p");
  EXPECT_NE(claim->metadata.resource_version, "1");
  EXPECT_EQ(writer_.bindings().at("default/p"), "node-a");
  EXPECT_EQ(state_.num_held(), 0u);
  // Two of node-a's three GPUs are taken now: another two-GPU claim no longer fits there.
  ASSERT_OK_AND_ASSIGN(auto more, kube::Decode(ClaimYaml("two-more", 2)));
  ASSERT_OK(state_.Apply(more[0]));
  json reply = Filter(PodJson("q", {"two-more"}), {"node-a"});
  EXPECT_THAT(reply["NodeNames"], IsEmpty());
  EXPECT_TRUE(reply["FailedNodes"].contains("node-a"));
}

TEST_F(ExtenderHttpTest, TwoPodsRacingForOneDeviceNeverBothBind) {
  StartServer(Mode::kAllocate, {ClaimYaml("c1", 1), ClaimYaml("c2", 1)});
  for (int round = 0; round < 1; ++round) {
    EXPECT_EQ(Filter(PodJson("p1", {"c1"}), {"node-b"})["NodeNames"], json({"node-b"}));
    EXPECT_EQ(Filter(PodJson("p2", {"c2"}), {"node-b"})["NodeNames"], json({"node-b"}));
  }
  std::atomic<int> ok{0};
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client client("127.0.0.1", http_.port());
      json args = {{"PodName", "p" + std::to_string(i + 1)},
                   {"PodNamespace", "default"},
                   {"PodUID", "uid-p" + std::to_string(i + 1)},
                   {"Node", "node-b"}};
      auto res = client.Post("/devlet/bind", args.dump(), "application/json");
      if (!res) return;
      std::string error = json::parse(res->body)["Error"];
      if (error.empty()) {
        ++ok;
      } else {
        errors[i] = error;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_THAT(errors[0] + errors[1], HasSubstr("no longer available"));
  EXPECT_EQ(writer_.bindings().size(), 1u);
  EXPECT_EQ(state_.num_held(), 0u);
}

TEST_F(ExtenderHttpTest, ExtendedResourceBecomesSynthesizedClaim) {
  StartServer(Mode::kAllocate);
  json pod = PodJson("x", {});
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"example.com/gpu", "2"}}}};
  json reply = Filter(pod, {"node-a", "node-b", "node-c"});
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
  EXPECT_EQ(Bind("x", "node-a")["Error"], "");
  std::optional<kube::ResourceClaim> claim = state_.GetClaim("default", "x-extended-resources");
  ASSERT_TRUE(claim && claim->status.allocation);
  EXPECT_EQ(claim->metadata.annotations.at("resource.kubernetes.io/extended-resource-claim"),
            "true");
  EXPECT_EQ(claim->spec.devices.requests.at(0).name, "container-0-request-0");
  EXPECT_EQ(claim->status.allocation->devices.results.size(), 2u);
  // Owned by the pod (garbage-collected with it), and named in the pod's status for the kubelet.
  ASSERT_EQ(claim->metadata.owner_references.size(), 1u);
  EXPECT_EQ(claim->metadata.owner_references[0].kind, "Pod");
  EXPECT_EQ(claim->metadata.owner_references[0].uid, "uid-x");
  EXPECT_EQ(claim->metadata.owner_references[0].controller, true);
  auto statuses = writer_.extended_resource_claim_statuses();
  ASSERT_EQ(statuses.count("default/x"), 1u);
  EXPECT_EQ(statuses["default/x"].resource_claim_name, "x-extended-resources");
  ASSERT_EQ(statuses["default/x"].request_mappings.size(), 1u);
  EXPECT_EQ(statuses["default/x"].request_mappings[0].container_name, "c");
  EXPECT_EQ(statuses["default/x"].request_mappings[0].resource_name, "example.com/gpu");
  EXPECT_EQ(statuses["default/x"].request_mappings[0].request_name, "container-0-request-0");
}

TEST_F(ExtenderHttpTest, PrioritizeScoresLocalityAndBinPacking) {
  StartServer(Mode::kScore, {ClaimYaml("two", 2), ClaimYaml("one", 1)});
  json reply = Post("prioritize",
                    json({{"Pod", PodJson("p", {"two"})}, {"NodeNames", {"node-a", "node-c"}}})
                        .dump());
  ASSERT_TRUE(reply.is_array());
  ASSERT_EQ(reply.size(), 2u);
  EXPECT_EQ(reply[0]["Host"], "node-a");
  // The allocator's first fit is gpu-0 + gpu-1: NUMA 0 and 1 (locality 5), 2 of 3 used
  // (binpack 6.7): round(5.8) = 6.
  EXPECT_EQ(reply[0]["Score"], 6);
  EXPECT_EQ(reply[1]["Host"], "node-c");
  EXPECT_EQ(reply[1]["Score"], 0);
  // One GPU: node-b is filled by it (10), node-a a third (3.3).
  reply = Post("prioritize",
               json({{"Pod", PodJson("p", {"one"})}, {"NodeNames", {"node-a", "node-b"}}}).dump());
  EXPECT_GT(reply[1]["Score"].get<int>(), reply[0]["Score"].get<int>());
}

TEST_F(ExtenderHttpTest, ScoreModeFilterIgnoresAllocations) {
  StartServer(Mode::kScore, {ClaimYaml("one", 1)});
  state_.MarkSynced();
  ASSERT_OK_AND_ASSIGN(auto used, kube::Decode(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: used, namespace: default, uid: uid-used}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}
status:
  allocation:
    devices:
      results: [{request: r, driver: gpu.example.com, pool: node-b, device: gpu-0}]
)"));
  ASSERT_OK(state_.Apply(used[0]));
  EXPECT_TRUE(state_.IsAllocated("gpu.example.com", "node-b", "gpu-0"));
  // node-b's only GPU is in use, but it may be freed: score mode rejects only node-c.
  json reply = Filter(PodJson("p", {"one"}), {"node-b", "node-c"});
  EXPECT_EQ(reply["NodeNames"], json({"node-b"}));
  EXPECT_TRUE(reply["FailedNodes"].contains("node-c"));
  // Deleting the claim frees the device.
  ASSERT_OK(state_.Delete(used[0]));
  EXPECT_FALSE(state_.IsAllocated("gpu.example.com", "node-b", "gpu-0"));
}

// Outcomes are kept per node while the node's state is unchanged (Options::reuse_results): every
// kind of change to a node must reach the next pod of the same shape.
TEST_F(ExtenderHttpTest, ReusedResultsFollowStateChanges) {
  StartServer(Mode::kAllocate, {ClaimYaml("one-a", 1), ClaimYaml("one-b", 1)});
  const std::vector<std::string> all = {"node-a", "node-b", "node-c"};
  auto passing = [&](const std::string& pod, const std::string& claim) {
    return Filter(PodJson(pod, {claim}), all)["NodeNames"];
  };
  EXPECT_EQ(passing("p1", "one-a"), json({"node-a", "node-b"}));
  // A bind uses node-b's only GPU: the next pod of the same shape no longer fits there.
  ASSERT_EQ(Bind("p1", "node-b")["Error"], "");
  json reply = Filter(PodJson("p2", {"one-b"}), all);
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
  EXPECT_TRUE(reply["FailedNodes"].contains("node-b"));
  // A new slice on node-c.
  ASSERT_OK_AND_ASSIGN(auto slice, kube::Decode(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-c-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-c
  pool: {name: node-c, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
)"));
  ASSERT_OK(state_.Apply(slice[0]));
  EXPECT_EQ(passing("p2", "one-b"), json({"node-a", "node-c"}));
  // A taint rule on every GPU (global), then gone again.
  ASSERT_OK_AND_ASSIGN(auto rule, kube::Decode(R"(
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: all-broken}
spec:
  deviceSelector: {driver: gpu.example.com}
  taint: {key: broken, value: "true", effect: NoSchedule}
)"));
  ASSERT_OK(state_.Apply(rule[0]));
  EXPECT_EQ(passing("p2", "one-b"), json::array());
  ASSERT_OK(state_.Delete(rule[0]));
  EXPECT_EQ(passing("p2", "one-b"), json({"node-a", "node-c"}));
  // Deleting the bound claim frees node-b; deleting node-c's slice takes its GPU away.
  ASSERT_OK(state_.Delete(kube::Object(*state_.GetClaim("default", "one-a"))));
  ASSERT_OK(state_.Delete(slice[0]));
  EXPECT_EQ(passing("p2", "one-b"), json({"node-a", "node-b"}));
  // A node whose labels change is re-evaluated (a slice selecting nodes by label).
  ASSERT_OK_AND_ASSIGN(auto labelled, kube::Decode(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: rack-gpus}
spec:
  driver: gpu.example.com
  nodeSelector:
    nodeSelectorTerms: [{matchExpressions: [{key: rack, operator: In, values: ["1"]}]}]
  pool: {name: rack, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
)"));
  ASSERT_OK(state_.Apply(labelled[0]));
  EXPECT_EQ(passing("p2", "one-b"), json({"node-a", "node-b"}));
  ASSERT_OK_AND_ASSIGN(auto node_c, kube::Decode(R"(
apiVersion: v1
kind: Node
metadata: {name: node-c, labels: {kubernetes.io/hostname: node-c, rack: "1"}}
)"));
  ASSERT_OK(state_.Apply(node_c[0]));
  EXPECT_EQ(passing("p2", "one-b"), json({"node-a", "node-b", "node-c"}));
}

// The same sequence of requests and changes answered with and without reused outcomes gives the
// same replies, filter and prioritize, in both modes.
TEST(ExtenderReuseTest, ReuseAnswersLikeFreshAllocation) {
  for (Mode mode : {Mode::kScore, Mode::kAllocate}) {
    ClusterState state{allocator::Features{}};
    ASSERT_OK_AND_ASSIGN(auto objects, kube::Decode(ClusterYaml()));
    for (const auto& o : objects) ASSERT_OK(state.Apply(o));
    for (const char* claim : {"a", "b", "c"}) {
      ASSERT_OK_AND_ASSIGN(auto c, kube::Decode(ClaimYaml(claim, 1)));
      ASSERT_OK(state.Apply(c[0]));
    }
    ASSERT_OK_AND_ASSIGN(auto two, kube::Decode(ClaimYaml("two", 2)));
    ASSERT_OK(state.Apply(two[0]));
    MemoryWriter writer(state);
    Extender reusing(state, writer, {.mode = mode, .reuse_results = true});
    Extender fresh(state, writer, {.mode = mode, .reuse_results = false});
    auto compare = [&](const std::string& pod, const std::string& claim) {
      const std::string body =
          json({{"Pod", PodJson(pod, {claim})}, {"NodeNames", {"node-a", "node-b", "node-c"}}})
              .dump();
      for (int round = 0; round < 2; ++round) {  // the second round answers from kept outcomes
        EXPECT_EQ(reusing.Filter(body), fresh.Filter(body)) << pod << " round " << round;
        EXPECT_EQ(reusing.Prioritize(body), fresh.Prioritize(body)) << pod << " round " << round;
      }
    };
    compare("p1", "a");
    compare("p2", "two");
    // Allocate node-a's gpu-0 by writing a claim's allocation (what a bind or the plugin does).
    kube::ResourceClaim a = *state.GetClaim("default", "a");
    a.status.allocation.emplace();
    a.status.allocation->devices.results.push_back({"gpus", "gpu.example.com", "node-a", "gpu-0"});
    ASSERT_OK(state.Apply(a));
    compare("p3", "b");
    compare("p4", "two");
    ASSERT_OK(state.Apply(*state.GetClaim("default", "two")));  // unchanged: nothing moves
    compare("p5", "two");
    kube::ResourceClaim b = *state.GetClaim("default", "b");
    b.status.allocation.emplace();
    b.status.allocation->devices.results.push_back({"gpus", "gpu.example.com", "node-b", "gpu-0"});
    ASSERT_OK(state.Apply(b));
    compare("p6", "c");
    compare("p7", "two");
    ASSERT_OK(state.Delete(kube::Object(a)));
    compare("p8", "c");
    compare("p9", "two");
  }
}

// Watch events (slices, claims, nodes) applied while filter and prioritize run: the collected
// snapshot changes are applied by whichever request reads first, and once the events stop, the
// kept outcomes answer like a fresh allocation.
TEST(ExtenderReuseTest, EventsDuringRequests) {
  ClusterState state{allocator::Features{}};
  ASSERT_OK_AND_ASSIGN(auto objects, kube::Decode(ClusterYaml()));
  for (const auto& o : objects) ASSERT_OK(state.Apply(o));
  ASSERT_OK_AND_ASSIGN(auto one, kube::Decode(ClaimYaml("one", 1)));
  ASSERT_OK(state.Apply(one[0]));
  MemoryWriter writer(state);
  Extender reusing(state, writer, {.mode = Mode::kAllocate, .reuse_results = true});
  Extender fresh(state, writer, {.mode = Mode::kAllocate, .reuse_results = false});
  std::vector<std::string> names;
  for (int n = 0; n < 40; ++n) names.push_back("extra-" + std::to_string(n));
  names.push_back("node-a");
  names.push_back("node-b");
  const std::string body = json({{"Pod", PodJson("p", {"one"})}, {"NodeNames", names}}).dump();
  std::atomic<bool> stop{false};
  std::vector<std::thread> requests;
  for (int t = 0; t < 2; ++t) {
    requests.emplace_back([&] {
      while (!stop.load()) {
        reusing.Filter(body);
        reusing.Prioritize(body);
      }
    });
  }
  // In a lambda, so that a failed ASSERT still stops and joins the request threads.
  auto events = [&] {
    for (int round = 0; round < 60; ++round) {
      const std::string node = "extra-" + std::to_string(round % 40);
      kube::Node n;
      n.metadata.name = node;
      n.metadata.labels["kubernetes.io/hostname"] = node;
      ASSERT_OK(state.Apply(kube::Object(n)));
      ASSERT_OK_AND_ASSIGN(auto slice, kube::Decode(
          "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: " + node +
          "}\nspec:\n  driver: gpu.example.com\n  nodeName: " + node + "\n  pool: {name: " + node +
          ", generation: " + std::to_string(round + 1) +
          ", resourceSliceCount: 1}\n  devices: [{name: gpu-0}, {name: gpu-1}]\n"));
      ASSERT_OK(state.Apply(slice[0]));
      kube::ResourceClaim used = *state.GetClaim("default", "one");
      used.metadata.name = "used";
      used.metadata.uid = "uid-used";
      used.status.allocation.emplace();
      used.status.allocation->devices.results.push_back({"gpus", "gpu.example.com", node, "gpu-0"});
      ASSERT_OK(state.Apply(used));
      if (round % 3 == 0) {
        ASSERT_OK(state.Delete(slice[0]));
      }
    }
  };
  events();
  stop = true;
  for (auto& t : requests) t.join();
  EXPECT_EQ(reusing.Filter(body), fresh.Filter(body));
  EXPECT_EQ(reusing.Prioritize(body), fresh.Prioritize(body));
}

// A node whose status.allocatable lists an extended resource serves it through a device plugin:
// the claim synthesized for that node leaves the resource out (allocator/extended_resources.h).
TEST_F(ExtenderHttpTest, ExtendedResourceServedByDevicePluginOnOneNode) {
  StartServer(Mode::kAllocate, {R"(
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status: {allocatable: {example.com/gpu: "8", cpu: "4"}}
)"});
  json pod = PodJson("x", {});
  pod["spec"]["containers"][0]["resources"] = {{"requests", {{"example.com/gpu", "4"}}}};
  // node-a has 3 DRA GPUs but its device plugin serves the 4; node-b's 1 GPU is too few.
  json reply = Filter(pod, {"node-a", "node-b"});
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
  EXPECT_TRUE(reply["FailedNodes"].contains("node-b"));
  // Binding there synthesizes no claim.
  EXPECT_EQ(Bind("x", "node-a")["Error"], "");
  EXPECT_FALSE(state_.GetClaim("default", "x-extended-resources").has_value());
  EXPECT_EQ(writer_.bindings().at("default/x"), "node-a");
}

// Score mode: the in-tree plugin allocates, the extender filters and scores the synthesized
// extended-resource claim like any other.
TEST_F(ExtenderHttpTest, ScoreModeFiltersAndScoresExtendedResources) {
  StartServer(Mode::kScore);
  json pod = PodJson("x", {});
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"example.com/gpu", "2"}}}};
  json reply = Filter(pod, {"node-a", "node-b", "node-c"});
  EXPECT_EQ(reply["NodeNames"], json({"node-a"}));
  EXPECT_TRUE(reply["FailedNodes"].contains("node-b"));
  reply = Post("prioritize",
               json({{"Pod", pod}, {"NodeNames", {"node-a", "node-b"}}}).dump());
  ASSERT_TRUE(reply.is_array());
  ASSERT_EQ(reply.size(), 2u);
  // gpu-0 + gpu-1 (NUMA 0 and 1: locality 5), 2 of 3 in use (binpack 6.7): round(5.8) = 6.
  EXPECT_EQ(reply[0]["Score"], 6);
  EXPECT_EQ(reply[1]["Score"], 0);
}

// ConflictingWriter fails the first status update with a resourceVersion conflict.
class ConflictingWriter : public MemoryWriter {
 public:
  using MemoryWriter::MemoryWriter;
  absl::StatusOr<kube::ResourceClaim> UpdateClaimStatus(const kube::ResourceClaim& claim) override {
    if (conflicts_-- > 0) return absl::AbortedError("the object has been modified");
    return MemoryWriter::UpdateClaimStatus(claim);
  }
  int conflicts_ = 1;
};

TEST(ExtenderConflictTest, ConflictRereadsAndRetries) {
  ClusterState state{allocator::Features{}};
  ASSERT_OK_AND_ASSIGN(auto objects, kube::Decode(ClusterYaml()));
  for (const auto& o : objects) ASSERT_OK(state.Apply(o));
  ASSERT_OK_AND_ASSIGN(auto claim, kube::Decode(ClaimYaml("one", 1)));
  ASSERT_OK(state.Apply(claim[0]));
  ConflictingWriter writer(state);
  Extender extender(state, writer, {.mode = Mode::kAllocate});
  json pod = PodJson("p", {"one"});
  extender.Filter(json({{"Pod", pod}, {"NodeNames", {"node-b"}}}).dump());
  json reply = json::parse(extender.Bind(
      json({{"PodName", "p"}, {"PodNamespace", "default"}, {"Node", "node-b"}}).dump()));
  EXPECT_EQ(reply["Error"], "");
  EXPECT_EQ(extender.counters().conflicts.load(), 1);
  EXPECT_TRUE(state.GetClaim("default", "one")->status.allocation.has_value());

  // Ten conflicts in a row: bind fails cleanly and releases the held device.
  ASSERT_OK_AND_ASSIGN(auto other, kube::Decode(ClaimYaml("other", 1)));
  ASSERT_OK(state.Apply(other[0]));
  writer.conflicts_ = 10;
  extender.Filter(json({{"Pod", PodJson("q", {"other"})}, {"NodeNames", {"node-a"}}}).dump());
  reply = json::parse(extender.Bind(
      json({{"PodName", "q"}, {"PodNamespace", "default"}, {"Node", "node-a"}}).dump()));
  EXPECT_THAT(reply["Error"].get<std::string>(), HasSubstr("gave up"));
  EXPECT_EQ(state.num_held(), 0u);
  EXPECT_FALSE(state.IsAllocated("gpu.example.com", "node-a", "gpu-0"));
}

// FailingBindWriter cannot bind pods.
class FailingBindWriter : public MemoryWriter {
 public:
  using MemoryWriter::MemoryWriter;
  absl::Status BindPod(std::string_view, std::string_view, std::string_view,
                       std::string_view) override {
    return absl::UnavailableError("the API server is down");
  }
};

TEST(ExtenderBindTest, FailedBindingTakesTheAllocationBack) {
  ClusterState state{allocator::Features{}};
  ASSERT_OK_AND_ASSIGN(auto objects, kube::Decode(ClusterYaml()));
  for (const auto& o : objects) ASSERT_OK(state.Apply(o));
  ASSERT_OK_AND_ASSIGN(auto claim, kube::Decode(ClaimYaml("one", 1)));
  ASSERT_OK(state.Apply(claim[0]));
  FailingBindWriter writer(state);
  Extender extender(state, writer, {.mode = Mode::kAllocate});
  extender.Filter(json({{"Pod", PodJson("p", {"one"})}, {"NodeNames", {"node-b"}}}).dump());
  json reply = json::parse(extender.Bind(
      json({{"PodName", "p"}, {"PodNamespace", "default"}, {"Node", "node-b"}}).dump()));
  EXPECT_THAT(reply["Error"].get<std::string>(), HasSubstr("the API server is down"));
  std::optional<kube::ResourceClaim> after = state.GetClaim("default", "one");
  ASSERT_TRUE(after.has_value());
  EXPECT_FALSE(after->status.allocation.has_value());
  EXPECT_THAT(after->status.reserved_for, IsEmpty());
  EXPECT_FALSE(state.IsAllocated("gpu.example.com", "node-b", "gpu-0"));
  EXPECT_EQ(state.num_held(), 0u);
}

}  // namespace
}  // namespace devlet::extender
