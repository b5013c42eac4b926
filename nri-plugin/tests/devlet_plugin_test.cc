#include "devlet/nri/devlet_plugin.h"

#include <fstream>
#include <sstream>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <nlohmann/json.hpp>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/nri/cpuset.h"
#include "devlet/state/container_marker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::nri {
namespace {

using ::testing::HasSubstr;

// Marker returns the environment entry the runtime copies into a container from the CDI device
// devlet wrote for `device`, the `index`-th of `claim`, when the kubelet gives it that device.
std::string Marker(const PreparedClaim& claim, size_t index) {
  const PreparedDevice& device = claim.devices[index];
  return state::ContainerMarkerEnv(
      {claim.uid, {device.request}, device.pool, device.device, device.share_id}, index);
}

template <typename Message>
Message FromJson(const nlohmann::json& j) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(j.dump(), &message);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in " << j.dump();
  return message;
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

// One runner for every case in tests/data/adjustments.json.
TEST(AdjustmentCasesTest, DataFile) {
  std::ifstream file("tests/data/adjustments.json");
  ASSERT_TRUE(file) << "run from nri-plugin/";
  const nlohmann::json cases = nlohmann::json::parse(file);
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    InMemoryClaimsView view;
    auto claims = ParseClaimsJson(c.at("claims").dump());
    ASSERT_OK(claims);
    for (auto& [uid, list] : *claims) {
      view.Set(uid, list);
    }
    DevletPluginOptions options;
    auto policy = ParseCdiPolicy(c.at("policy").get<std::string>());
    ASSERT_OK(policy);
    options.cdi_policy = *policy;
    if (c.contains("numaCpus")) {
      for (auto it = c.at("numaCpus").begin(); it != c.at("numaCpus").end(); ++it) {
        options.numa_cpus[std::stoi(it.key())] = it.value().get<std::string>();
      }
    }
    DevletPlugin plugin(&view, options);
    RuntimeInfo runtime;
    runtime.name = c.value("runtime", "containerd");
    runtime.version = c.value("runtimeVersion", "v2.4.0");
    runtime.nri_version = EffectiveNriVersion(c.at("nriVersion").get<std::string>(), runtime.name,
                                              runtime.version);
    ASSERT_OK(plugin.Configure(runtime));
    const auto pod = FromJson<api::PodSandbox>(c.at("pod"));
    const auto container = FromJson<api::Container>(c.at("container"));
    auto reply = plugin.CreateContainer(pod, container);
    if (c.contains("wantError")) {
      ASSERT_FALSE(reply.ok()) << ToJson(*reply);
      EXPECT_THAT(std::string(reply.status().message()),
                  HasSubstr(c.at("wantError").get<std::string>()));
      EXPECT_THAT(std::string(reply.status().message()), HasSubstr("container app of pod ns/p"));
      continue;
    }
    ASSERT_OK(reply);
    const auto want = FromJson<api::ContainerAdjustment>(c.at("want"));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(reply->adjust(), want))
        << "got  " << ToJson(reply->adjust()) << "\nwant " << ToJson(want);
    EXPECT_EQ(reply->update_size(), 0);
  }
}

TEST(CpuSetTest, ParseAndFormat) {
  auto set = ParseCpuList(" 0-3,8,10-11 ");
  ASSERT_OK(set);
  EXPECT_EQ(FormatCpuList(*set), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList(*ParseCpuList("")), "");
  EXPECT_EQ(FormatCpuList(*ParseCpuList("5,4,3")), "3-5");
  EXPECT_FALSE(ParseCpuList("1-").ok());
  EXPECT_FALSE(ParseCpuList("a").ok());
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  EXPECT_FALSE(ParseCpuList("99999").ok());
  EXPECT_EQ(FormatCpuList(Intersect(*ParseCpuList("0-7"), *ParseCpuList("4-11"))), "4-7");
}

TEST(ExclusiveCpusTest, Heuristic) {
  api::Container c;
  auto* cpu = c.mutable_linux()->mutable_resources()->mutable_cpu();
  EXPECT_FALSE(HasExclusiveCpus(c));
  cpu->set_cpus("2-3");
  cpu->mutable_quota()->set_value(200000);
  cpu->mutable_period()->set_value(100000);
  EXPECT_TRUE(HasExclusiveCpus(c));
  cpu->mutable_quota()->set_value(150000);
  EXPECT_FALSE(HasExclusiveCpus(c));
  cpu->mutable_quota()->set_value(400000);
  EXPECT_FALSE(HasExclusiveCpus(c));  // shared pool of 2 CPUs for a 4-CPU limit
}

// The NUMA-aligned cpuset stays within the host's online CPUs and the kubelet's cpuset: the
// cluster test's Guaranteed pod (exclusive CPU 1, no CFS quota since the kubelet's
// DisableCPUQuotaWithExclusiveCPUs) with a device on NUMA node 1 got 8-15,24-31 on a 2-CPU host
// and runc failed writing cpuset.cpus.
TEST(NumaAlignmentTest, StaysWithinOnlineAndKubeletCpus) {
  struct Case {
    std::string name;
    int numa;              // the device's NUMA node
    std::string online;    // DevletPluginOptions::online_cpus
    std::string kubelet;   // the CRI request's cpuset ("" = CPU manager none)
    std::string want_cpus;
    std::string want_mems;
  };
  const std::vector<Case> cases = {
      {"exclusive CPU off the device's node, no quota", 1, "0-1", "1", "", ""},
      {"exclusive CPU off the device's node, online unknown", 1, "", "1", "", ""},
      {"no kubelet cpuset, the node's CPUs not online", 1, "0-1", "", "", ""},
      {"no kubelet cpuset, some of the node's CPUs online", 0, "0-1", "", "0-1", "0"},
      {"no kubelet cpuset, online unknown", 0, "", "", "0-7,16-23", "0"},
      {"shared pool narrowed", 0, "0-31", "0-1,8", "0-1", "0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PreparedClaim claim;
    claim.uid = "c1";
    claim.namespace_name = "ns";
    claim.name = "gpu";
    claim.devices.push_back({.request = "gpu", .pool = "node-1", .device = "gpu0",
                             .cdi_device_names = {"devlet.dev/gpu=gpu0"},
                             .numa_nodes = {c.numa}});
    InMemoryClaimsView view;
    view.Set("uid-1", {claim});
    DevletPlugin plugin(&view, {.numa_cpus = {{0, "0-7,16-23"}, {1, "8-15,24-31"}},
                                .online_cpus = c.online});
    api::PodSandbox pod;
    pod.set_id("sb-1");
    pod.set_uid("uid-1");
    pod.set_name("p");
    pod.set_namespace_("ns");
    api::Container ctr;
    ctr.set_id("ctr-1");
    ctr.set_name("app");
    ctr.set_pod_sandbox_id("sb-1");
    ctr.add_env(Marker(claim, 0));
    if (!c.kubelet.empty()) ctr.mutable_linux()->mutable_resources()->mutable_cpu()->set_cpus(c.kubelet);
    auto adjust = plugin.BuildAdjustment(pod, ctr);
    ASSERT_OK(adjust);
    EXPECT_EQ(adjust->linux().resources().cpu().cpus(), c.want_cpus);
    EXPECT_EQ(adjust->linux().resources().cpu().mems(), c.want_mems);
  }
  InMemoryClaimsView view;
  PreparedClaim claim;
  claim.uid = "c1";
  claim.devices.push_back({.request = "gpu", .pool = "node-1", .device = "gpu0", .numa_nodes = {0}});
  view.Set("uid-1", {claim});
  DevletPlugin bad(&view, {.numa_cpus = {{0, "0-7"}}, .online_cpus = "0-x"});
  api::PodSandbox pod;
  pod.set_uid("uid-1");
  api::Container ctr;
  ctr.add_env(Marker(claim, 0));
  EXPECT_THAT(bad.BuildAdjustment(pod, ctr),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("online CPUs")));
}

TEST(ClaimsJsonTest, Errors) {
  EXPECT_THAT(ParseClaimsJson("[]"),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseClaimsJson(R"({"pod-a": 3})"),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pod-a")));
  EXPECT_THAT(ParseClaimsJson(R"({"pod-a": [{"uid": 7}]})"),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pod-a")));
  EXPECT_THAT(ParseClaimsJson("{not json"),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseClaimsJson(R"({"pod-a": [{"namespace": "ns", "name": "c", "cpuMillis": 0}]})"),
              devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("claim ns/c: cpuMillis must be positive")));
  EXPECT_THAT(
      ParseClaimsJson(R"({"pod-a": [{"namespace": "ns", "name": "c", "memoryLimitBytes": -1}]})"),
      devlet::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("claim ns/c: memoryLimitBytes must be positive")));
}

// CPU and memory DRA allocated stay enforced when the kubelet updates the container (in-place
// resize, CPU manager): UpdateContainer rewrites the pending update's limits and cpuset.
TEST(AllocatedLimitsTest, UpdateContainerReassertsLimits) {
  InMemoryClaimsView view;
  PreparedClaim claim;
  claim.namespace_name = "ns";
  claim.uid = "claim-cpus";
  claim.name = "cpus";
  claim.cpuset = "2-3";
  claim.memory_limit_bytes = 1 << 30;
  claim.devices.push_back({.request = "cpus", .pool = "node-1", .device = "cpu-numa0"});
  view.Set("uid-1", {claim});
  DevletPlugin plugin(&view, {.numa_cpus = {{0, "0-3"}}});
  api::PodSandbox pod;
  pod.set_id("sb-1");
  pod.set_uid("uid-1");
  api::Container ctr;
  ctr.set_id("ctr-1");
  ctr.set_name("app");
  ctr.set_pod_sandbox_id("sb-1");
  ctr.add_env(Marker(claim, 0));
  auto created = plugin.CreateContainer(pod, ctr);
  ASSERT_OK(created);
  EXPECT_EQ(created->adjust().linux().resources().cpu().quota().value(), 200000);
  EXPECT_EQ(plugin.container("ctr-1")->cpu_millis, 2000);
  EXPECT_EQ(plugin.container("ctr-1")->memory_limit_bytes, 1 << 30);

  api::LinuxResources resize;  // the kubelet drops the limits and moves the cpuset
  resize.mutable_cpu()->set_cpus("0-3");
  resize.mutable_cpu()->mutable_shares()->set_value(2);
  auto update = plugin.UpdateContainer(pod, ctr, resize);
  ASSERT_OK(update);
  ASSERT_EQ(update->update_size(), 1);
  const auto& cpu = update->update(0).linux().resources().cpu();
  EXPECT_EQ(cpu.cpus(), "2-3");
  EXPECT_EQ(cpu.mems(), "0");
  EXPECT_EQ(cpu.quota().value(), 200000);
  EXPECT_EQ(cpu.period().value(), 100000u);
  EXPECT_EQ(cpu.shares().value(), 2048u);
  EXPECT_EQ(update->update(0).linux().resources().memory().limit().value(), 1 << 30);

  api::LinuxResources same;  // already what devlet owns: no rewrite
  same.mutable_cpu()->set_cpus("2-3");
  same.mutable_cpu()->set_mems("0");
  same.mutable_cpu()->mutable_quota()->set_value(200000);
  same.mutable_cpu()->mutable_period()->set_value(100000);
  same.mutable_cpu()->mutable_shares()->set_value(2048);
  same.mutable_memory()->mutable_limit()->set_value(1 << 30);
  EXPECT_EQ(plugin.UpdateContainer(pod, ctr, same)->update_size(), 0);

  // Synchronize (plugin restart) relearns what devlet owns from the prepared claims.
  DevletPlugin restarted(&view, {.numa_cpus = {{0, "0-3"}}});
  ASSERT_OK(restarted.Synchronize({pod}, {ctr}));
  EXPECT_EQ(restarted.container("ctr-1")->cpu_millis, 2000);
  EXPECT_EQ(restarted.UpdateContainer(pod, ctr, resize)->update_size(), 1);
}

class BookkeepingTest : public ::testing::Test {
 protected:
  BookkeepingTest() : plugin_(&view_, {.numa_cpus = {{0, "0-3"}, {1, "4-7"}}}) {
    PreparedClaim claim;
    claim.uid = "c1";
    claim.namespace_name = "ns";
    claim.name = "gpu";
    PreparedDevice device;
    device.request = "gpu";
    device.pool = "node-1";
    device.device = "gpu0";
    device.cdi_device_names = {"devlet.dev/gpu=gpu0"};
    device.numa_nodes = {1};
    claim.devices.push_back(device);
    view_.Set("uid-1", {claim});
    ctr_.add_env(Marker(claim, 0));
    pod_.set_id("sb-1");
    pod_.set_uid("uid-1");
    pod_.set_name("p");
    pod_.set_namespace_("ns");
    ctr_.set_id("ctr-1");
    ctr_.set_name("app");
    ctr_.set_pod_sandbox_id("sb-1");
  }

  InMemoryClaimsView view_;
  DevletPlugin plugin_;
  api::PodSandbox pod_;
  api::Container ctr_;
};

TEST_F(BookkeepingTest, Lifecycle) {
  ASSERT_OK(plugin_.RunPodSandbox(pod_));
  EXPECT_EQ(plugin_.pod_count(), 1u);
  ASSERT_OK(plugin_.CreateContainer(pod_, ctr_));
  ASSERT_TRUE(plugin_.container("ctr-1").has_value());
  EXPECT_EQ(plugin_.container("ctr-1")->cpus, "4-7");
  EXPECT_EQ(plugin_.container("ctr-1")->mems, "1");

  // The kubelet's CPU manager tries to move the container: devlet re-asserts its placement.
  api::LinuxResources resources;
  resources.mutable_cpu()->set_cpus("0-7");
  auto update = plugin_.UpdateContainer(pod_, ctr_, resources);
  ASSERT_OK(update);
  ASSERT_EQ(update->update_size(), 1);
  EXPECT_EQ(update->update(0).container_id(), "ctr-1");
  EXPECT_EQ(update->update(0).linux().resources().cpu().cpus(), "4-7");
  EXPECT_EQ(update->update(0).linux().resources().cpu().mems(), "1");
  resources.mutable_cpu()->set_cpus("4-7");
  resources.mutable_cpu()->set_mems("1");
  EXPECT_EQ(plugin_.UpdateContainer(pod_, ctr_, resources)->update_size(), 0);

  ASSERT_OK(plugin_.StopContainer(pod_, ctr_));
  EXPECT_TRUE(plugin_.container("ctr-1")->stopped);
  ASSERT_OK(plugin_.RemoveContainer(pod_, ctr_));
  EXPECT_EQ(plugin_.container_count(), 0u);
  ASSERT_OK(plugin_.StopPodSandbox(pod_));
  EXPECT_TRUE(plugin_.pod("uid-1")->stopped);
  ASSERT_OK(plugin_.RemovePodSandbox(pod_));
  EXPECT_EQ(plugin_.pod_count(), 0u);
  // The prepared claims are the node state's, not the bookkeeping's: still there.
  EXPECT_EQ(view_.ClaimsForPod("uid-1")->size(), 1u);
}

// A view that records what RunPodSandbox reports of the pod's network, and can refuse it.
class NetworkRecordingView final : public PreparedClaimsView {
 public:
  absl::StatusOr<std::vector<PreparedClaim>> ClaimsForPod(std::string_view) const override {
    return std::vector<PreparedClaim>{};
  }
  absl::Status PodNetworkReady(const PodNetwork& network) const override {
    seen.push_back(network);
    return refuse ? absl::UnavailableError("metadata disk full") : absl::OkStatus();
  }
  mutable std::vector<PodNetwork> seen;
  bool refuse = false;
};

TEST(DevletPluginNetworkTest, RunPodSandboxHandsThePodNetworkToTheNodeState) {
  NetworkRecordingView view;
  DevletPlugin plugin(&view, {});
  api::PodSandbox pod;
  pod.set_id("sb-1");
  pod.set_uid("uid-1");
  pod.set_name("p");
  pod.set_namespace_("ns");
  pod.add_ips("10.244.1.7");
  pod.add_ips("fd00::7");
  auto* ns = pod.mutable_linux()->add_namespaces();
  ns->set_type("network");
  ns->set_path("/var/run/netns/cni-1");
  ASSERT_OK(plugin.RunPodSandbox(pod));
  ASSERT_EQ(view.seen.size(), 1u);
  EXPECT_EQ(view.seen[0].pod_uid, "uid-1");
  EXPECT_EQ(view.seen[0].namespace_name, "ns");
  EXPECT_EQ(view.seen[0].name, "p");
  EXPECT_THAT(view.seen[0].ips, ::testing::ElementsAre("10.244.1.7", "fd00::7"));
  EXPECT_EQ(view.seen[0].netns_path, "/var/run/netns/cni-1");
  // The node state's error fails the event, naming the pod; the pod is still known.
  view.refuse = true;
  EXPECT_THAT(plugin.RunPodSandbox(pod),
              devlet::testing::StatusIs(absl::StatusCode::kUnavailable,
                                        HasSubstr("pod ns/p network")));
  EXPECT_EQ(plugin.pod_count(), 1u);
}

TEST_F(BookkeepingTest, EventsForUnknownPodsAndContainers) {
  ASSERT_OK(plugin_.StopPodSandbox(pod_));
  ASSERT_OK(plugin_.RemovePodSandbox(pod_));
  ASSERT_OK(plugin_.RemoveContainer(pod_, ctr_));
  ASSERT_OK(plugin_.StopContainer(pod_, ctr_));
  api::LinuxResources resources;
  EXPECT_EQ(plugin_.UpdateContainer(pod_, ctr_, resources)->update_size(), 0);
  // CreateContainer for a pod never seen: learned on the fly.
  ASSERT_OK(plugin_.CreateContainer(pod_, ctr_));
  EXPECT_TRUE(plugin_.pod("uid-1").has_value());
}

TEST_F(BookkeepingTest, SynchronizeRebuildsWithoutForgettingPreparedPods) {
  ASSERT_OK(plugin_.RunPodSandbox(pod_));
  api::PodSandbox other = pod_;
  other.set_id("sb-2");
  other.set_uid("uid-2");
  ASSERT_OK(plugin_.RunPodSandbox(other));
  auto updates = plugin_.Synchronize({pod_}, {ctr_});
  ASSERT_OK(updates);
  EXPECT_TRUE(updates->empty());
  EXPECT_EQ(plugin_.pod_count(), 1u);
  ASSERT_TRUE(plugin_.container("ctr-1").has_value());
  EXPECT_EQ(plugin_.container("ctr-1")->cpus, "4-7");
  EXPECT_EQ(plugin_.container("ctr-1")->pod_uid, "uid-1");
  EXPECT_EQ(view_.pods(), 1u);
}

// Per-container scoping: a pod with an init container, a sidecar and a main container, where
// only the main container names the claim (the runtime gave only it the claim's CDI devices, so
// only its environment carries the markers). Only the main container gets the devices, the
// metadata mount, the cpuset/mems and the CPU/memory limits.
TEST(ScopingTest, OnlyTheContainerNamingTheClaimGetsIt) {
  PreparedClaim claim;
  claim.uid = "5e0c1a10-0000-4000-8000-0000000c1a01";
  claim.namespace_name = "ml";
  claim.name = "training";
  claim.devices.push_back({.request = "gpus",
                           .pool = "node-1",
                           .device = "gpu-0",
                           .cdi_device_names = {"k8s.devlet.io/claim=gpu-0"},
                           .numa_nodes = {1}});
  claim.devices.push_back({.request = "cpus",
                           .pool = "node-1",
                           .device = "cpu-numa1",
                           .numa_nodes = {1},
                           .cpu_millis = 1500,
                           .memory_limit_bytes = int64_t{1} << 30});
  claim.metadata_mounts.push_back({"/var/lib/devlet/meta.json", "/var/run/meta/gpus.json"});
  InMemoryClaimsView view;
  view.Set("pod-uid", {claim});
  DevletPlugin plugin(&view, {.cdi_policy = CdiPolicy::kDeviceNames,
                              .numa_cpus = {{0, "0-3"}, {1, "4-7"}}});
  RuntimeInfo runtime;
  runtime.nri_version = ParseNriVersion("v0.12.5");
  ASSERT_OK(plugin.Configure(runtime));
  api::PodSandbox pod;
  pod.set_id("sb");
  pod.set_uid("pod-uid");
  pod.set_name("training");
  pod.set_namespace_("ml");
  auto make = [&](const std::string& name) {
    api::Container ctr;
    ctr.set_id("ctr-" + name);
    ctr.set_name(name);
    ctr.set_pod_sandbox_id("sb");
    ctr.add_env("PATH=/bin");
    ctr.mutable_linux()->mutable_resources()->mutable_cpu()->set_cpus("0-7");
    return ctr;
  };
  for (const char* name : {"setup", "log-shipper"}) {  // init container, sidecar
    SCOPED_TRACE(name);
    auto reply = plugin.CreateContainer(pod, make(name));
    ASSERT_OK(reply);
    EXPECT_EQ(reply->adjust().ByteSizeLong(), 0u) << ToJson(reply->adjust());
    EXPECT_EQ(plugin.container(std::string("ctr-") + name)->cpus, "");
    EXPECT_EQ(plugin.container(std::string("ctr-") + name)->cpu_millis, 0);
  }
  api::Container trainer = make("trainer");
  trainer.add_env(Marker(claim, 0));
  trainer.add_env(Marker(claim, 1));
  auto reply = plugin.CreateContainer(pod, trainer);
  ASSERT_OK(reply);
  const api::ContainerAdjustment& adjust = reply->adjust();
  ASSERT_EQ(adjust.cdi_devices_size(), 1);
  EXPECT_EQ(adjust.cdi_devices(0).name(), "k8s.devlet.io/claim=gpu-0");
  ASSERT_EQ(adjust.mounts_size(), 1);
  EXPECT_EQ(adjust.mounts(0).destination(), "/var/run/meta/gpus.json");
  EXPECT_EQ(adjust.linux().resources().cpu().cpus(), "4-7");
  EXPECT_EQ(adjust.linux().resources().cpu().mems(), "1");
  EXPECT_EQ(adjust.linux().resources().cpu().quota().value(), 150000);
  EXPECT_EQ(adjust.linux().resources().cpu().shares().value(), 1536u);
  EXPECT_EQ(adjust.linux().resources().memory().limit().value(), int64_t{1} << 30);

  // Request scoping: a container naming only the "gpus" request gets the GPU (and the claim's
  // metadata), not the CPU device's limits.
  api::Container viewer = make("viewer");
  viewer.add_env(Marker(claim, 0));
  reply = plugin.CreateContainer(pod, viewer);
  ASSERT_OK(reply);
  EXPECT_EQ(reply->adjust().cdi_devices_size(), 1);
  EXPECT_FALSE(reply->adjust().linux().resources().cpu().has_quota());
  EXPECT_FALSE(reply->adjust().linux().resources().has_memory());
}

// A view whose checkpoint cannot be read.
class BrokenView final : public PreparedClaimsView {
 public:
  absl::StatusOr<std::vector<PreparedClaim>> ClaimsForPod(std::string_view) const override {
    ++reads;
    return absl::DataLossError("checkpoint.json: checksum mismatch");
  }
  mutable int reads = 0;
};

// Fail closed: a container that names a claim is not created without what devlet prepared; the
// error names the claim. A container that names none is created and the claims are not read.
TEST(FailClosedTest, UnreadableClaimsFailTheContainerNamingOne) {
  BrokenView view;
  DevletPlugin plugin(&view, {});
  api::PodSandbox pod;
  pod.set_id("sb");
  pod.set_uid("pod-uid");
  pod.set_name("p");
  pod.set_namespace_("ns");
  api::Container plain;
  plain.set_id("ctr-plain");
  plain.set_name("plain");
  ASSERT_OK(plugin.CreateContainer(pod, plain));
  EXPECT_EQ(view.reads, 0);
  api::Container app = plain;
  app.set_id("ctr-app");
  app.set_name("app");
  app.add_env(state::ContainerMarkerEnv(
      {"5e0c1a10-0000-4000-8000-0000000c1a01", {"gpus"}, "node-1", "gpu-0", ""}, 0));
  EXPECT_THAT(plugin.CreateContainer(pod, app),
              devlet::testing::StatusIs(
                  absl::StatusCode::kDataLoss,
                  HasSubstr("container app of pod ns/p: reading the prepared claim "
                            "5e0c1a10-0000-4000-8000-0000000c1a01: checkpoint.json")));
  EXPECT_FALSE(plugin.container("ctr-app").has_value());
}

}  // namespace
}  // namespace devlet::nri
