// Replays kube-scheduler's own extender requests, recorded by scheduler-e2e --record against a real
// kube-scheduler v1.37.2 (testdata/{allocate,score}/NNNN-<verb>.json), through devlet-extender's
// HTTP server on the cluster they were recorded in (testdata/cluster.yaml), and expects the replies
// the extender gave then: every verb in the scheduler's exact wire format (Go field names, pods as
// informer objects with defaulted fields, "Nodes": null beside NodeNames).
#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/extender/extender.h"
#include "devlet/extender/server.h"
#include "devlet/kube/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace devlet::extender {
namespace {

using json = nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string TestData(const std::string& name) {
  return std::string(DEVLET_SCHEDULER_TESTDATA) + "/" + name;
}

class SchedulerReplayTest : public ::testing::Test {
 protected:
  void Start(Mode mode) {
    const std::string cluster = ReadFile(TestData("cluster.yaml"));
    ASSERT_FALSE(cluster.empty());
    ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> objects, kube::Decode(cluster));
    for (const auto& object : objects) ASSERT_OK(state_.Apply(object));
    state_.MarkSynced();
    extender_ = std::make_unique<Extender>(state_, writer_, Options{.mode = mode});
    server_ = std::make_unique<Server>(
        *extender_, ServerOptions{.host = "127.0.0.1", .port = 0, .prefix = "/devlet"});
    ASSERT_OK(server_->Start());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    client_.reset();
    if (server_) server_->Stop();
  }

  // Replay posts the recorded request and compares the reply with the recorded one.
  void Replay(const std::string& file) {
    SCOPED_TRACE(file);
    const json record = json::parse(ReadFile(TestData(file)), nullptr, false);
    ASSERT_FALSE(record.is_discarded()) << "unreadable record " << file;
    const std::string verb = record["verb"];
    auto res = client_->Post("/devlet/" + verb, record["request"].dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, record["status"].get<int>()) << res->body;
    const json reply = json::parse(res->body);
    const json& want = record["reply"];
    if (verb == "filter") {
      EXPECT_EQ(reply.value("Error", ""), want.value("Error", ""));
      auto names = [](const json& j) {
        std::vector<std::string> out;
        if (j.contains("NodeNames") && j["NodeNames"].is_array()) {
          for (const auto& n : j["NodeNames"]) out.push_back(n);
        }
        std::sort(out.begin(), out.end());
        return out;
      };
      EXPECT_EQ(names(reply), names(want));
      EXPECT_EQ(reply.value("FailedNodes", json::object()), want["FailedNodes"]);
      EXPECT_EQ(reply.value("FailedAndUnresolvableNodes", json::object()),
                want["FailedAndUnresolvableNodes"]);
    } else if (verb == "prioritize") {
      auto scores = [](const json& j) {
        std::map<std::string, int64_t> out;
        for (const auto& h : j) out[h["Host"]] = h["Score"];
        return out;
      };
      EXPECT_EQ(scores(reply), scores(want));
    } else {
      EXPECT_EQ(reply.value("Error", ""), want.value("Error", ""));
    }
  }

  ClusterState state_{allocator::Features{}};
  MemoryWriter writer_{state_};
  std::unique_ptr<Extender> extender_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(SchedulerReplayTest, AllocateModeClaimExtendedResourceAndRace) {
  Start(Mode::kAllocate);
  // Recorded in completion order; the race's binds ran concurrently: race-1's bind held the h100
  // first (0010), race-2's (0009) failed. Replayed one after another in that order.
  for (const char* file :
       {"allocate/0001-filter.json", "allocate/0002-prioritize.json", "allocate/0003-bind.json",
        "allocate/0004-filter.json", "allocate/0005-prioritize.json", "allocate/0006-bind.json",
        "allocate/0007-filter.json", "allocate/0008-filter.json", "allocate/0010-bind.json",
        "allocate/0009-bind.json"}) {
    Replay(file);
  }
  std::optional<kube::ResourceClaim> claim = state_.GetClaim("default", "alloc-gpu");
  ASSERT_TRUE(claim && claim->status.allocation);
  ASSERT_EQ(claim->status.allocation->devices.results.size(), 1u);
  EXPECT_EQ(claim->status.allocation->devices.results[0].pool, "node-a");
  ASSERT_EQ(claim->status.reserved_for.size(), 1u);
  EXPECT_EQ(claim->status.reserved_for[0].name, "alloc-pod");
  std::optional<kube::ResourceClaim> winner = state_.GetClaim("default", "race-1-gpu");
  ASSERT_TRUE(winner && winner->status.allocation);
  EXPECT_EQ(winner->status.allocation->devices.results[0].device, "gpu-3");
  std::optional<kube::ResourceClaim> loser = state_.GetClaim("default", "race-2-gpu");
  ASSERT_TRUE(loser);
  EXPECT_FALSE(loser->status.allocation);
  EXPECT_EQ(state_.num_held(), 0u);
  EXPECT_EQ(writer_.bindings(),
            (std::map<std::string, std::string>{{"default/alloc-pod", "node-a"},
                                                {"default/ext-pod", "node-a"},
                                                {"default/race-1", "node-b"}}));
}

TEST_F(SchedulerReplayTest, ScoreModeFilterAndPrioritize) {
  Start(Mode::kScore);
  Replay("score/0001-filter.json");
  Replay("score/0002-prioritize.json");
}

}  // namespace
}  // namespace devlet::extender
