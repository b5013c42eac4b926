// Snapshot updates, allocated-state bookkeeping and concurrent Allocate calls.
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "devlet/allocator/allocator.h"
#include "devlet/common/status.h"
#include "devlet/kube/codec.h"
#include "gtest/gtest.h"

namespace devlet::allocator {
namespace {

template <typename T>
T Decode(const std::string& yaml) {
  auto o = kube::DecodeOne<T>(yaml);
  EXPECT_TRUE(o.ok()) << Message(o.status());
  return o.value_or(T{});
}

kube::DeviceClass Class() {
  return Decode<kube::DeviceClass>(R"(
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
)");
}

kube::ResourceSlice Slice(const std::string& node, int devices) {
  std::string yaml = R"(
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: )" + node + R"(-gpu}
spec:
  driver: gpu.example.com
  nodeName: )" + node + R"(
  pool: {name: )" + node + R"(, generation: 1, resourceSliceCount: 1}
  devices:
)";
  for (int i = 0; i < devices; ++i) {
    yaml += "  - name: gpu-" + std::to_string(i) + "\n";
  }
  return Decode<kube::ResourceSlice>(yaml);
}

kube::ResourceClaim Claim(int count) {
  return Decode<kube::ResourceClaim>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu, count: )" + std::to_string(count) + "}\n");
}

kube::Node Node(const std::string& name) {
  kube::Node n;
  n.metadata.name = name;
  return n;
}

TEST(IncrementalTest, SliceUpdatesShareUnchangedSlices) {
  auto snap = Snapshot::Build(Features{}, {Class()}, {Slice("node-1", 1), Slice("node-2", 2)});
  ASSERT_TRUE(snap.ok()) << Message(snap.status());
  kube::ResourceClaim claim = Claim(2);
  AllocatedState state;
  EXPECT_EQ(Allocate(**snap, Node("node-1"), {&claim}, state).kind,
            AllocateOutcome::Kind::kUnschedulable);
  auto grown = (*snap)->WithSlice(Slice("node-1", 4));
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(Allocate(**grown, Node("node-1"), {&claim}, state).kind,
            AllocateOutcome::Kind::kAllocated);
  // The old snapshot is unchanged.
  EXPECT_EQ(Allocate(**snap, Node("node-1"), {&claim}, state).kind,
            AllocateOutcome::Kind::kUnschedulable);
  auto removed = (*grown)->WithoutSlice("node-2-gpu");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ((*removed)->num_slices(), 1u);
  EXPECT_EQ(Allocate(**removed, Node("node-2"), {&claim}, state).kind,
            AllocateOutcome::Kind::kUnschedulable);
  auto without_class = (*removed)->WithoutClass("gpu");
  ASSERT_TRUE(without_class.ok());
  EXPECT_EQ(Allocate(**without_class, Node("node-1"), {&claim}, state).kind,
            AllocateOutcome::Kind::kError);
}

TEST(IncrementalTest, AllocatedStateAddRemove) {
  auto snap = Snapshot::Build(Features{}, {Class()}, {Slice("node-1", 2)});
  ASSERT_TRUE(snap.ok());
  kube::ResourceClaim claim = Claim(2);
  AllocatedState state;
  AllocateOutcome first = Allocate(**snap, Node("node-1"), {&claim}, state);
  ASSERT_EQ(first.kind, AllocateOutcome::Kind::kAllocated);
  ASSERT_TRUE(state.Add(first.results[0]).ok());
  EXPECT_TRUE(state.IsAllocated("gpu.example.com", "node-1", "gpu-0"));
  EXPECT_EQ(Allocate(**snap, Node("node-1"), {&claim}, state).kind,
            AllocateOutcome::Kind::kUnschedulable);
  ASSERT_TRUE(state.Remove(first.results[0]).ok());
  EXPECT_FALSE(state.IsAllocated("gpu.example.com", "node-1", "gpu-0"));
  EXPECT_EQ(Allocate(**snap, Node("node-1"), {&claim}, state).kind,
            AllocateOutcome::Kind::kAllocated);
}

TEST(IncrementalTest, ConcurrentAllocateOnSharedSnapshot) {
  std::vector<kube::ResourceSlice> slices;
  for (int n = 0; n < 16; ++n) slices.push_back(Slice("node-" + std::to_string(n), 8));
  auto snap = Snapshot::Build(Features{}, {Class()}, slices);
  ASSERT_TRUE(snap.ok());
  kube::ResourceClaim claim = Claim(3);
  AllocatedState state;
  std::atomic<int> allocated{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        AllocateOutcome out =
            Allocate(**snap, Node("node-" + std::to_string((t + i) % 16)), {&claim}, state);
        if (out.kind == AllocateOutcome::Kind::kAllocated && out.results[0].devices.results.size() == 3) {
          allocated++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(allocated.load(), 8 * 200);
}

TEST(IncrementalTest, TaintRulesReplaceOnlyAffectedSlices) {
  auto snap = Snapshot::Build(Features{}, {Class()}, {Slice("node-1", 1)});
  ASSERT_TRUE(snap.ok());
  auto rule = Decode<kube::DeviceTaintRule>(R"(
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: r}
spec:
  deviceSelector: {driver: gpu.example.com, pool: node-1, device: gpu-0}
  taint: {key: broken, value: "true", effect: NoSchedule}
)");
  auto tainted = (*snap)->WithTaintRules({rule});
  ASSERT_TRUE(tainted.ok());
  kube::ResourceClaim claim = Claim(1);
  AllocatedState state;
  EXPECT_EQ(Allocate(**tainted, Node("node-1"), {&claim}, state).kind,
            AllocateOutcome::Kind::kUnschedulable);
  auto untainted = (*tainted)->WithTaintRules({});
  ASSERT_TRUE(untainted.ok());
  EXPECT_EQ(Allocate(**untainted, Node("node-1"), {&claim}, state).kind,
            AllocateOutcome::Kind::kAllocated);
}

kube::ResourceSlice PoolSlice(const std::string& name, const std::string& node,
                              const std::string& pool, int generation, int count = 1) {
  return Decode<kube::ResourceSlice>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: )" + name + R"(}
spec:
  driver: gpu.example.com
  nodeName: )" + node + R"(
  pool: {name: )" + pool + ", generation: " + std::to_string(generation) +
                                     ", resourceSliceCount: " + std::to_string(count) + R"(}
  devices:
  - name: )" + name + "-gpu\n");
}

TEST(IncrementalTest, ChangesApplyTogether) {
  auto snap = Snapshot::Build(Features{}, {}, {Slice("node-1", 1)});
  ASSERT_TRUE(snap.ok());
  SnapshotChanges changes(**snap);
  EXPECT_TRUE(changes.empty());
  ASSERT_TRUE(changes.SetSlice(Slice("node-2", 1)).ok());
  ASSERT_TRUE(changes.SetSlice(Slice("node-3", 1)).ok());
  ASSERT_TRUE(changes.SetSlice(Slice("node-1", 3)).ok());  // replaces the snapshot's
  changes.RemoveSlice("node-3-gpu");                        // the later change wins
  changes.SetClass(Class());
  // A slice that does not compile is reported and leaves the changes as they were.
  kube::ResourceSlice bad = Slice("node-4", 1);
  bad.spec.devices[0].attributes["x"] = kube::DeviceAttribute();  // no value set
  EXPECT_FALSE(changes.SetSlice(bad).ok());
  EXPECT_EQ(changes.size(), 4u);  // node-1, node-2, node-3 slices; the class

  std::shared_ptr<const Snapshot> next = (*snap)->With(std::move(changes));
  EXPECT_EQ(next->num_slices(), 2u);
  EXPECT_EQ(next->num_devices(), 4u);
  EXPECT_EQ(next->NodeNames(), (std::vector<std::string>{"node-1", "node-2"}));
  kube::ResourceClaim three = Claim(3);
  AllocatedState state;
  EXPECT_EQ(Allocate(*next, Node("node-1"), {&three}, state).kind,
            AllocateOutcome::Kind::kAllocated);
  // The base snapshot is unchanged (and has no class).
  EXPECT_EQ((*snap)->num_slices(), 1u);
  EXPECT_EQ(Allocate(**snap, Node("node-1"), {&three}, state).kind,
            AllocateOutcome::Kind::kError);
}

// With keeps the cached node views the changes cannot touch and rebuilds the others: after every
// change, each node allocates exactly as on a snapshot built from scratch. The changes reach
// views through the node's own slices, other nodes' slices of its pools (a pool split over two
// nodes is incomplete without both) and node-less slices.
TEST(IncrementalTest, KeptViewsMatchAFreshBuild) {
  std::map<std::string, kube::ResourceSlice> model;
  for (auto s : {PoolSlice("a", "node-1", "p", 1, 2), PoolSlice("b", "node-2", "p", 1, 2),
                 PoolSlice("c", "node-2", "q", 1), PoolSlice("d", "node-3", "r", 1)}) {
    model[s.metadata.name] = s;
  }
  auto all = [&] {
    std::vector<kube::ResourceSlice> out;
    for (const auto& [name, s] : model) out.push_back(s);
    return out;
  };
  auto built = Snapshot::Build(Features{}, {Class()}, all());
  ASSERT_TRUE(built.ok());
  std::shared_ptr<const Snapshot> snap = *built;
  kube::ResourceClaim one = Claim(1);
  AllocatedState state;
  auto outcomes = [&](const Snapshot& s) {
    std::vector<AllocateOutcome::Kind> out;
    for (const char* node : {"node-1", "node-2", "node-3", "node-4"}) {
      out.push_back(Allocate(s, Node(node), {&one}, state).kind);
    }
    return out;
  };
  auto check = [&](const std::string& step) {
    auto fresh = Snapshot::Build(Features{}, {Class()}, all());
    ASSERT_TRUE(fresh.ok());
    EXPECT_EQ(outcomes(*snap), outcomes(**fresh)) << step;
  };
  outcomes(*snap);  // cache every node's view
  check("initial");
  // node-1 sees pool p through both nodes' slices: removing node-2's half makes it incomplete.
  snap = *snap->WithoutSlice("b");
  model.erase("b");
  check("pool p split, half removed");
  snap = *snap->WithSlice(PoolSlice("b", "node-2", "p", 1, 2));
  model["b"] = PoolSlice("b", "node-2", "p", 1, 2);
  check("half back");
  // A newer generation of p on node-2 only.
  snap = *snap->WithSlice(PoolSlice("b", "node-2", "p", 2, 1));
  model["b"] = PoolSlice("b", "node-2", "p", 2, 1);
  check("newer generation on node-2");
  // A change on node-3 alone.
  snap = *snap->WithSlice(PoolSlice("e", "node-3", "r2", 1));
  model["e"] = PoolSlice("e", "node-3", "r2", 1);
  check("second pool on node-3");
  // A slice without a node name (all nodes) reaches every node.
  auto everywhere = Decode<kube::ResourceSlice>(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: net}
spec:
  driver: gpu.example.com
  allNodes: true
  pool: {name: net, generation: 1, resourceSliceCount: 1}
  devices:
  - name: net-gpu
)");
  snap = *snap->WithSlice(everywhere);
  model["net"] = everywhere;
  check("node-less slice");
  // Several changes at once.
  SnapshotChanges changes(*snap);
  ASSERT_TRUE(changes.SetSlice(PoolSlice("f", "node-4", "s", 1)).ok());
  changes.RemoveSlice("net");
  changes.RemoveSlice("d");
  snap = snap->With(std::move(changes));
  model["f"] = PoolSlice("f", "node-4", "s", 1);
  model.erase("net");
  model.erase("d");
  check("batch");
}

// The options that trim an outcome for callers that only look at it (the extender's filter and
// prioritize), and the device count for scoring.
TEST(IncrementalTest, OutcomeOptions) {
  auto snap = Snapshot::Build(Features{}, {Class()}, {Slice("node-1", 4)});
  ASSERT_TRUE(snap.ok());
  AllocatedState state;
  state.AddDevice("gpu.example.com", "node-1", "gpu-0");
  kube::ResourceClaim claim = Claim(1);
  AllocateOutcome full = Allocate(**snap, Node("node-1"), {&claim}, state);
  ASSERT_EQ(full.kind, AllocateOutcome::Kind::kAllocated);
  ASSERT_EQ(full.results.size(), 1u);
  EXPECT_TRUE(full.results[0].node_selector.has_value());
  EXPECT_EQ(full.node_devices, 0);  // not asked for

  AllocateOutcome counted =
      Allocate(**snap, Node("node-1"), {&claim}, state, {.count_node_devices = true});
  EXPECT_EQ(counted.node_devices, 4);
  EXPECT_EQ(counted.node_devices_in_use, 1);

  AllocateOutcome verdict =
      Allocate(**snap, Node("node-1"), {&claim}, state, {.verdict_only = true});
  EXPECT_EQ(verdict.kind, AllocateOutcome::Kind::kAllocated);
  EXPECT_TRUE(verdict.results.empty());

  AllocateOutcome devices =
      Allocate(**snap, Node("node-1"), {&claim}, state, {.devices_only = true});
  ASSERT_EQ(devices.kind, AllocateOutcome::Kind::kAllocated);
  ASSERT_EQ(devices.results.size(), 1u);
  ASSERT_EQ(devices.results[0].devices.results.size(), 1u);
  EXPECT_EQ(devices.results[0].devices.results[0].device,
            full.results[0].devices.results[0].device);
  EXPECT_EQ(devices.results[0].devices.results[0].device, "gpu-1");
  EXPECT_FALSE(devices.results[0].node_selector.has_value());

  // Unschedulable stays unschedulable with every option.
  kube::ResourceClaim four = Claim(4);
  EXPECT_EQ(Allocate(**snap, Node("node-1"), {&four}, state,
                     {.verdict_only = true, .count_node_devices = true, .devices_only = true})
                .kind,
            AllocateOutcome::Kind::kUnschedulable);
}

}  // namespace
}  // namespace devlet::allocator
