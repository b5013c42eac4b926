// Two extender replicas over one object store (Options::check_peer_allocations): each has its own
// watch-fed ClusterState, so within the watch's lag both can pick the same device for two
// different claims. The store here orders every write like etcd (one revision counter) and
// delivers each replica's watch events in that order, held back at will (the watch lag).
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/extender/extender.h"
#include "devlet/extender/store.h"
#include "devlet/kube/client.h"
#include "devlet/kube/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace devlet::extender {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// OrderedStore is an in-memory kube::ObjectStore with etcd's ordering: every write gets the next
// revision as its resourceVersion, and every watch sees the writes in revision order, each event
// carrying its revision as WatchEvent::progress. Watches belong to the group set when they were
// started; Pause(group) holds that group's events back (queued, in order) until Resume.
class OrderedStore final : public kube::ObjectStore {
 public:
  void set_watch_group(int group) {
    std::lock_guard lock(mu_);
    group_ = group;
  }

  void Pause(int group) {
    std::lock_guard lock(mu_);
    paused_[group] = true;
  }

  void Resume(int group) {
    {
      std::lock_guard lock(mu_);
      paused_[group] = false;
    }
    DrainAll();
  }

  absl::StatusOr<kube::Object> Get(kube::Kind kind, const kube::ObjectKey& key) override {
    std::lock_guard lock(mu_);
    auto it = objects_.find({kind, key});
    if (it == objects_.end()) return absl::NotFoundError(key.name + " not found");
    return it->second;
  }

  absl::StatusOr<std::vector<kube::Object>> List(kube::Kind kind,
                                                 const kube::ListOptions& options) override {
    std::lock_guard lock(mu_);
    return ListLocked(kind, options);
  }

  absl::StatusOr<kube::Object> Create(const kube::Object& object) override {
    kube::Object stored = object;
    kube::ObjectMeta& meta = kube::MetadataOf(stored);
    const kube::Kind kind = kube::KindOfObject(stored);
    {
      std::lock_guard lock(mu_);
      if (kube::IsNamespaced(kind) && meta.namespace_.empty()) meta.namespace_ = "default";
      const Id id{kind, {meta.namespace_, meta.name}};
      if (objects_.contains(id)) return absl::AlreadyExistsError(meta.name + " exists");
      meta.uid = "uid-" + meta.name;
      meta.resource_version = std::to_string(++revision_);
      objects_[id] = stored;
      PublishLocked(kind, kube::WatchEvent::Type::kAdded, stored);
    }
    DrainAll();
    return stored;
  }

  absl::StatusOr<kube::Object> Update(const kube::Object& object) override {
    kube::Object stored = object;
    kube::ObjectMeta& meta = kube::MetadataOf(stored);
    const kube::Kind kind = kube::KindOfObject(stored);
    {
      std::lock_guard lock(mu_);
      auto it = objects_.find({kind, {meta.namespace_, meta.name}});
      if (it == objects_.end()) return absl::NotFoundError(meta.name + " not found");
      if (!meta.resource_version.empty() &&
          meta.resource_version != kube::MetadataOf(it->second).resource_version) {
        return absl::AbortedError("conflict on " + meta.name);
      }
      meta.uid = kube::MetadataOf(it->second).uid;
      meta.resource_version = std::to_string(++revision_);
      it->second = stored;
      PublishLocked(kind, kube::WatchEvent::Type::kModified, stored);
    }
    DrainAll();
    return stored;
  }

  // The extender writes whole claims; the status subresource is an update here.
  absl::StatusOr<kube::Object> UpdateStatus(const kube::Object& object) override {
    return Update(object);
  }

  absl::Status Delete(kube::Kind kind, const kube::ObjectKey& key,
                      const std::string& uid) override {
    {
      std::lock_guard lock(mu_);
      auto it = objects_.find({kind, key});
      if (it == objects_.end()) return absl::NotFoundError(key.name + " not found");
      if (!uid.empty() && kube::MetadataOf(it->second).uid != uid) {
        return absl::AbortedError("uid mismatch");
      }
      kube::Object last = it->second;
      kube::MetadataOf(last).resource_version = std::to_string(++revision_);
      objects_.erase(it);
      PublishLocked(kind, kube::WatchEvent::Type::kDeleted, last);
    }
    DrainAll();
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<kube::Watcher>> Watch(kube::Kind kind,
                                                       const kube::ListOptions& options,
                                                       kube::WatchCallback callback) override {
    auto watch = std::make_shared<WatchQueue>();
    std::vector<kube::Object> listed;
    std::string listed_at;
    {
      std::lock_guard lock(mu_);
      watch->kind = kind;
      watch->group = group_;
      watch->callback = std::move(callback);
      listed = ListLocked(kind, options);
      listed_at = std::to_string(revision_);
      watches_.push_back(watch);
    }
    {
      std::lock_guard deliver(watch->deliver_mu);
      for (size_t i = 0; i < listed.size(); ++i) {
        watch->callback(kube::WatchEvent{kube::WatchEvent::Type::kAdded, std::move(listed[i]),
                                         i + 1 == listed.size() ? listed_at : ""});
      }
    }
    return std::unique_ptr<kube::Watcher>(new Handle(*this, watch));
  }

 private:
  using Id = std::pair<kube::Kind, kube::ObjectKey>;
  struct WatchQueue {
    kube::Kind kind{};
    int group = 0;
    kube::WatchCallback callback;
    std::deque<kube::WatchEvent> queue;  // guarded by the store's mu_
    bool stopped = false;                // guarded by the store's mu_
    std::mutex deliver_mu;               // one delivery at a time, in queue order
  };

  class Handle final : public kube::Watcher {
   public:
    Handle(OrderedStore& store, std::shared_ptr<WatchQueue> watch)
        : store_(store), watch_(std::move(watch)) {}
    ~Handle() override { Stop(); }
    void Stop() override {
      {
        std::lock_guard lock(store_.mu_);
        watch_->stopped = true;
      }
      std::lock_guard deliver(watch_->deliver_mu);  // a running callback returns first
    }

   private:
    OrderedStore& store_;
    std::shared_ptr<WatchQueue> watch_;
  };

  std::vector<kube::Object> ListLocked(kube::Kind kind, const kube::ListOptions& options) {
    std::vector<kube::Object> out;
    for (const auto& [id, object] : objects_) {
      if (id.first == kind && kube::Matches(object, options)) out.push_back(object);
    }
    return out;
  }

  void PublishLocked(kube::Kind kind, kube::WatchEvent::Type type, const kube::Object& object) {
    for (const auto& watch : watches_) {
      if (watch->kind != kind || watch->stopped) continue;
      watch->queue.push_back(
          kube::WatchEvent{type, object, kube::MetadataOf(object).resource_version});
    }
  }

  // Delivers what every unpaused watch has queued, in order.
  void DrainAll() {
    std::vector<std::shared_ptr<WatchQueue>> watches;
    {
      std::lock_guard lock(mu_);
      watches = watches_;
    }
    for (const auto& watch : watches) {
      std::lock_guard deliver(watch->deliver_mu);
      for (;;) {
        kube::WatchEvent event;
        {
          std::lock_guard lock(mu_);
          if (watch->stopped || paused_[watch->group] || watch->queue.empty()) break;
          event = std::move(watch->queue.front());
          watch->queue.pop_front();
        }
        watch->callback(event);
      }
    }
  }

  std::mutex mu_;
  int64_t revision_ = 100;
  int group_ = 0;
  std::map<int, bool> paused_;
  std::map<Id, kube::Object> objects_;
  std::vector<std::shared_ptr<WatchQueue>> watches_;
};

// One device (node-a/gpu-0), two claims wanting it, a pod for each.
std::string ClusterYaml() {
  return testing::Documents({testing::GpuClassYaml(), testing::GpuSliceYaml("node-a", {0}),
                             testing::NodeYaml("node-a"), R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  resourceClaims: [{name: g, resourceClaimName: one}]
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: default}
spec:
  resourceClaims: [{name: g, resourceClaimName: two}]
  containers: [{name: c, image: busybox}]
)"});
}

// Replica is one devlet-extender: its own state, fed by its own watches of the shared store.
struct Replica {
  Replica(OrderedStore& store, int group, Options options) : writer(store) {
    store.set_watch_group(group);
    auto started = StartSync(store, state);
    EXPECT_OK(started.status());
    if (started.ok()) watchers = *std::move(started);
    extender = std::make_unique<Extender>(state, writer, options);
  }

  std::string Bind(const std::string& pod) {
    return json::parse(extender->Bind(json({{"PodName", pod},
                                            {"PodNamespace", "default"},
                                            {"PodUID", "uid-" + pod},
                                            {"Node", "node-a"}})
                                           .dump()))
        .value("Error", "?");
  }

  ClusterState state{allocator::Features{}};
  StoreWriter writer;
  std::vector<std::unique_ptr<kube::Watcher>> watchers;
  std::unique_ptr<Extender> extender;
};

class PeerCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(std::vector<kube::Object> objects, kube::Decode(ClusterYaml()));
    for (const auto& object : objects) ASSERT_OK(store_.Create(object).status());
  }

  kube::ResourceClaim Claim(const std::string& name) {
    auto claim = kube::GetAs<kube::ResourceClaim>(store_, "default", name);
    EXPECT_OK(claim.status());
    return claim.ok() ? *claim : kube::ResourceClaim{};
  }

  std::string NodeOf(const std::string& pod) {
    auto got = kube::GetAs<kube::Pod>(store_, "default", pod);
    return got.ok() ? got->spec.node_name : "?";
  }

  static std::string DeviceOf(const kube::ResourceClaim& claim) {
    if (!claim.status.allocation) return "";
    return claim.status.allocation->devices.results.at(0).device;
  }

  OrderedStore store_;
};

// Without the check the race is real: replica 2 has not yet seen replica 1's allocation, and the
// one device ends up allocated to both claims.
TEST_F(PeerCheckTest, WithoutTheCheckTwoReplicasAllocateOneDeviceTwice) {
  Replica one(store_, 1, {.mode = Mode::kAllocate});
  Replica two(store_, 2, {.mode = Mode::kAllocate});
  store_.Pause(2);
  EXPECT_EQ(one.Bind("p1"), "");
  EXPECT_EQ(two.Bind("p2"), "");
  EXPECT_EQ(DeviceOf(Claim("one")), "gpu-0");
  EXPECT_EQ(DeviceOf(Claim("two")), "gpu-0");
  store_.Resume(2);
}

// With it, the second writer waits for its watch, finds the first writer's claim on its device
// and backs off: its claim is taken back, its pod stays unbound, the first keeps the device.
TEST_F(PeerCheckTest, SecondWriterBacksOffOnceItsWatchShowsTheFirst) {
  const Options options{.mode = Mode::kAllocate,
                        .check_peer_allocations = true,
                        .peer_check_timeout = std::chrono::seconds(10)};
  Replica one(store_, 1, options);
  Replica two(store_, 2, options);
  store_.Pause(2);
  EXPECT_EQ(one.Bind("p1"), "");
  EXPECT_EQ(one.extender->counters().peer_conflicts.load(), 0);
  // Replica 2 still sees gpu-0 free; its bind writes claim two, then waits for its watch.
  std::future<std::string> bind = std::async(std::launch::async, [&] { return two.Bind("p2"); });
  EXPECT_EQ(bind.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  EXPECT_EQ(DeviceOf(Claim("two")), "gpu-0");  // written, not yet confirmed
  store_.Resume(2);
  const std::string error = bind.get();
  EXPECT_THAT(error, HasSubstr("gpu.example.com/node-a/gpu-0 is also allocated to ResourceClaim "
                               "\"default/one\""));
  EXPECT_EQ(two.extender->counters().peer_conflicts.load(), 1);
  EXPECT_EQ(DeviceOf(Claim("one")), "gpu-0");
  const kube::ResourceClaim lost = Claim("two");
  EXPECT_FALSE(lost.status.allocation.has_value());
  EXPECT_TRUE(lost.status.reserved_for.empty());
  EXPECT_EQ(NodeOf("p1"), "node-a");
  EXPECT_EQ(NodeOf("p2"), "");
  // The scheduler's retry on replica 2, which now knows: no device left, nothing written.
  EXPECT_THAT(two.Bind("p2"), HasSubstr("no longer available"));
  EXPECT_FALSE(Claim("two").status.allocation.has_value());
}

// A watch that does not deliver in time: the bind cannot rule out a peer, so it fails closed and
// takes its write back.
TEST_F(PeerCheckTest, NoWatchInTimeFailsTheBindAndTakesTheWriteBack) {
  Replica two(store_, 2,
              {.mode = Mode::kAllocate,
               .check_peer_allocations = true,
               .peer_check_timeout = std::chrono::milliseconds(100)});
  store_.Pause(2);
  EXPECT_THAT(two.Bind("p2"), HasSubstr("did not deliver our allocation"));
  EXPECT_FALSE(Claim("two").status.allocation.has_value());
  EXPECT_EQ(NodeOf("p2"), "");
  store_.Resume(2);
  EXPECT_EQ(two.Bind("p2"), "");  // delivered: no peer holds gpu-0
  EXPECT_EQ(DeviceOf(Claim("two")), "gpu-0");
  EXPECT_EQ(NodeOf("p2"), "node-a");
}

// An older watch event of a claim arriving after Bind applied its own write must not free the
// device in the state (one replica, no peer): the stale event is ignored.
TEST_F(PeerCheckTest, StaleWatchEventDoesNotUndoOwnWrite) {
  Replica one(store_, 1, {.mode = Mode::kAllocate});
  kube::ResourceClaim before = Claim("one");
  EXPECT_EQ(one.Bind("p1"), "");
  ASSERT_TRUE(one.state.IsAllocated("gpu.example.com", "node-a", "gpu-0"));
  ASSERT_OK(one.state.Apply(before));  // as if the watch delivered it late
  EXPECT_TRUE(one.state.IsAllocated("gpu.example.com", "node-a", "gpu-0"));
  EXPECT_THAT(one.Bind("p2"), HasSubstr("no longer available"));
}

}  // namespace
}  // namespace devlet::extender
