// The Agent in API server mode (wait_for_node) through devlet's REST client against the fake API
// server of kube/client's tests (real HTTP, list + watch): no slices while the Node is missing,
// slices owned by the Node once it exists, slices deleted behind our back recreated through the
// watch. integration/apiserver's kube-apiserver covers the REST client itself.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "agent_test_util.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/devices/testing/fake_sysfs.h"
#include "devlet/kube/client.h"
#include "devlet/kube/rest_client.h"
#include "devlet/node/agent.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rest_fake_apiserver.h"

namespace devlet::node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<kube::ResourceSlice> Slices(kube::ObjectStore& store) {
  absl::StatusOr<std::vector<kube::ResourceSlice>> slices =
      kube::ListAs<kube::ResourceSlice>(store, {.field_driver = "devlet.io"});
  EXPECT_OK(slices.status());
  return slices.ok() ? *slices : std::vector<kube::ResourceSlice>();
}

TEST(AgentApiServerTest, WaitsForTheNodeOwnsItsSlicesByItAndRepairsThem) {
  ::unsetenv("NRI_PLUGIN_SOCKET");
  const fs::path dir = fs::path("/tmp") / ("node-apiserver-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  devices::testing::FakeSysfs fake;
  ASSERT_OK(devices::testing::AddGpuServer(fake));
  kube::fake::FakeApiServer server;
  kube::RestConfig config;
  config.server = server.url();
  config.qps = 0;
  config.initial_backoff = 5ms;
  config.max_backoff = 50ms;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<kube::ApiServerStore> store,
                       kube::ApiServerStore::Create(config));

  AgentOptions options = testing::SimulatedServerOptions(dir, fake);
  options.health_interval = 0ms;
  options.wait_for_node = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Agent> agent, Agent::Start(options, *store));
  EXPECT_FALSE(agent->Status().node_found);
  std::this_thread::sleep_for(1500ms);  // a retry or two of the control loop
  EXPECT_TRUE(Slices(*store).empty()) << "published before the Node exists";
  EXPECT_TRUE(agent->Healthy()) << "the kubelet plugin serves while the Node is missing";

  server.Put("/api/v1/nodes/node-1", {{"apiVersion", "v1"},
                                      {"kind", "Node"},
                                      {"metadata", {{"name", "node-1"}, {"uid", "node-uid-1"}}}});
  std::vector<kube::ResourceSlice> slices;
  // The agent records the Node as found when its publish returns, a moment after the API
  // server holds the slices: wait for both.
  testing::Eventually([&] {
    slices = Slices(*store);
    return !slices.empty() && agent->Status().node_found;
  });
  ASSERT_FALSE(slices.empty()) << "no slices within 10 s of the Node appearing";
  EXPECT_TRUE(agent->Status().node_found);
  for (const kube::ResourceSlice& slice : slices) {
    ASSERT_EQ(slice.metadata.owner_references.size(), 1u) << slice.metadata.name;
    EXPECT_EQ(slice.metadata.owner_references[0].kind, "Node");
    EXPECT_EQ(slice.metadata.owner_references[0].name, "node-1");
    EXPECT_EQ(slice.metadata.owner_references[0].uid, "node-uid-1");
    EXPECT_EQ(slice.spec.node_name.value_or(""), "node-1");
  }

  // The kubelet (or an administrator) deletes them: the watch brings them back.
  for (const kube::ResourceSlice& slice : slices) {
    ASSERT_OK(store->Delete(kube::Kind::kResourceSlice, {.name = slice.metadata.name}, ""));
  }
  std::vector<kube::ResourceSlice> repaired;
  testing::Eventually([&] {
    repaired = Slices(*store);
    return repaired.size() == slices.size();
  });
  EXPECT_EQ(repaired.size(), slices.size());
  agent->Stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace devlet::node
