// Snapshot updates, allocated-state bookkeeping and concurrent Allocate calls.
#include <atomic>
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

}  // namespace
}  // namespace devlet::allocator
