#include "devlet/state/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "devlet/common/status.h"
#include "devlet/cdi/testing/faulty_file_system.h"
#include "devlet/common/testing/status_matchers.h"

namespace devlet::state {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::SizeIs;

namespace fs = std::filesystem;

using ::devlet::cdi::testing::FaultyFileSystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("state_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<CheckpointStore> OpenStore(cdi::FileSystem* fs = nullptr) {
    auto store = CheckpointStore::Open({.dir = dir_.string(), .fs = fs});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::vector<std::string> Files() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

  static PreparedClaim Claim(const std::string& uid, const std::string& pod = "") {
    PreparedClaim c{.uid = uid, .namespace_name = "ns", .name = "claim-" + uid};
    if (!pod.empty()) c.pod_uids.push_back(pod);
    c.devices.push_back({.driver = "devlet.dev", .pool = "node", .device = "gpu-" + uid,
                         .requests = {"gpu"},
                         .cdi_device_ids = {"k8s.devlet.dev/claim=" + uid + "-gpu"},
                         .attributes = {{"numaNode", "1"}}});
    return c;
  }

  fs::path dir_;
};

TEST_F(StoreTest, LifecycleAndLookups) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->Load(), IsOkAndHolds(Checkpoint{}));  // no file yet
  ASSERT_OK(store->RecordPrepareStarted(Claim("a", "pod-1")));
  ASSERT_OK_AND_ASSIGN(auto a, store->FindClaim("a"));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->state, ClaimState::kPrepareStarted);
  ASSERT_OK(store->RecordPrepareCompleted(Claim("a", "pod-1")));
  ASSERT_OK(store->RecordPrepareCompleted(Claim("b", "pod-2")));
  ASSERT_OK(store->AddPod("b", "pod-1"));
  ASSERT_OK(store->AddPod("b", "pod-1"));
  EXPECT_THAT(store->AddPod("zzz", "pod-1"), StatusIs(absl::StatusCode::kNotFound));

  ASSERT_OK_AND_ASSIGN(std::vector<PreparedClaim> pod1, store->FindByPod("pod-1"));
  ASSERT_THAT(pod1, SizeIs(2));
  EXPECT_EQ(pod1[0].uid, "a");
  EXPECT_EQ(pod1[0].state, ClaimState::kPrepareCompleted);
  EXPECT_THAT(pod1[1].pod_uids, ElementsAre("pod-2", "pod-1"));
  EXPECT_THAT(store->FindByPod("nobody"), IsOkAndHolds(IsEmpty()));

  // A second store on the same directory (another process, a restart) sees the same state.
  auto other = OpenStore();
  EXPECT_THAT(other->FindClaim("b"), IsOkAndHolds(Optional(store->FindClaim("b")->value())));

  ASSERT_OK(store->Remove("a"));
  ASSERT_OK(store->Remove("a"));  // unknown is fine
  EXPECT_THAT(other->FindClaim("a"), IsOkAndHolds(std::nullopt));
  EXPECT_THAT(Files(), ElementsAre("checkpoint.json", "checkpoint.lock"));
  EXPECT_EQ(fs::status(dir_ / "checkpoint.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(StoreTest, FailedMutationWritesNothing) {
  auto store = OpenStore();
  ASSERT_OK(store->RecordPrepareCompleted(Claim("a")));
  EXPECT_THAT(store->Update([](Checkpoint& c) {
    c.claims.clear();
    return Internal("changed my mind");
  }),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(store->Load()->claims, SizeIs(1));
}

// The core crash-safety property: a failure (or a crash) at any step of a save leaves either the
// old or the new checkpoint on disk, never garbage; leaked temp files are removed at Open.
TEST_F(StoreTest, FailureAtEveryWriteStepLeavesOldOrNew) {
  for (bool crash : {false, true}) {
    for (int step = 0;; ++step) {
      SCOPED_TRACE("crash=" + std::to_string(crash) + " step=" + std::to_string(step));
      fs::remove_all(dir_);
      {
        auto setup = OpenStore();
        ASSERT_OK(setup->RecordPrepareCompleted(Claim("old")));
      }
      FaultyFileSystem faulty;
      auto store = OpenStore(&faulty);
      faulty.count = 0;
      faulty.fail_at = step;
      faulty.crash = crash;
      const absl::Status status = store->RecordPrepareStarted(Claim("new"));
      const bool injected = faulty.count > step;

      // Restart: a fresh store on the real file system.
      auto restarted = OpenStore();
      ASSERT_OK_AND_ASSIGN(Checkpoint after, restarted->Load());
      if (status.ok()) {
        EXPECT_THAT(after.claims, SizeIs(2));
      } else {
        EXPECT_THAT(status, StatusIs(absl::StatusCode::kResourceExhausted,
                                     HasSubstr("No space left on device")));
        // Old or new, nothing else.
        EXPECT_TRUE(after.claims.size() == 1 || after.claims.size() == 2);
        EXPECT_TRUE(after.claims.contains("old"));
      }
      EXPECT_THAT(Files(), ElementsAre("checkpoint.json", "checkpoint.lock"));
      if (!injected) break;  // every step has been covered
      ASSERT_LT(step, 20);
    }
  }
}

TEST_F(StoreTest, CorruptedCheckpointIsReportedAndQuarantined) {
  auto store = OpenStore();
  ASSERT_OK(store->RecordPrepareCompleted(Claim("a")));
  const std::string path = store->path();
  std::string text;
  {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  }
  std::ofstream(path, std::ios::trunc) << text.substr(0, text.size() / 2);

  EXPECT_THAT(store->Load(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path)));
  // Writers refuse too: a corrupted checkpoint is never overwritten silently.
  EXPECT_THAT(store->RecordPrepareStarted(Claim("b")), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(store->FindByPod("p"), StatusIs(absl::StatusCode::kDataLoss));

  ASSERT_OK_AND_ASSIGN(std::string moved, store->QuarantineCorrupted());
  EXPECT_THAT(moved, HasSubstr("checkpoint.json.corrupt-"));
  EXPECT_TRUE(fs::exists(moved));
  EXPECT_THAT(store->Load(), IsOkAndHolds(Checkpoint{}));
  EXPECT_THAT(store->QuarantineCorrupted(), IsOkAndHolds(""));
}

TEST_F(StoreTest, LockSerializesProcessesAndThreads) {
  auto store = OpenStore();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread uses its own store object, as separate processes would.
      auto mine = CheckpointStore::Open({.dir = dir_.string()});
      ASSERT_TRUE(mine.ok());
      for (int i = 0; i < kPerThread; ++i) {
        ASSERT_OK((*mine)->RecordPrepareCompleted(
            Claim(std::to_string(t) + "-" + std::to_string(i))));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_THAT(store->Load()->claims, SizeIs(kThreads * kPerThread));
}

TEST_F(StoreTest, LockTimeout) {
  auto store = OpenStore();
  auto other = CheckpointStore::Open({.dir = dir_.string(),
                                      .lock_timeout = std::chrono::milliseconds(50)});
  ASSERT_TRUE(other.ok());
  std::atomic<bool> holding = false;
  std::atomic<bool> release = false;
  std::thread holder([&] {
    ASSERT_OK(store->Update([&](Checkpoint&) {
      holding = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return absl::OkStatus();
    }));
  });
  while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_THAT((*other)->Load(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("checkpoint lock")));
  release = true;
  holder.join();
}

}  // namespace
}  // namespace devlet::state

namespace devlet::state {
namespace {

// A real kill -9: a child process rewrites the checkpoint in a loop and is killed at random
// moments; every time, a restarted store loads a valid checkpoint and leaves no temp file.
TEST_F(StoreTest, KillNineWhileWritingNeverCorrupts) {
  ASSERT_NE(OpenStore(), nullptr);
  std::mt19937 rng(42);
  for (int round = 0; round < 15; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto store = CheckpointStore::Open({.dir = dir_.string()});
      if (!store.ok()) ::_exit(1);
      for (int i = 0;; ++i) {
        const std::string uid = "c" + std::to_string(i % 50);
        if (!(*store)->RecordPrepareStarted(Claim(uid, "pod")).ok()) ::_exit(2);
        if (!(*store)->RecordPrepareCompleted(Claim(uid, "pod")).ok()) ::_exit(3);
        if (i % 7 == 0 && !(*store)->Remove(uid).ok()) ::_exit(4);
      }
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(500, 20000)(rng)));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited early with " << WEXITSTATUS(wstatus);

    auto restarted = OpenStore();  // removes the temp file a kill may have left
    ASSERT_NE(restarted, nullptr);
    ASSERT_OK_AND_ASSIGN(Checkpoint checkpoint, restarted->Load());
    for (const auto& [uid, claim] : checkpoint.claims) EXPECT_EQ(claim.uid, uid);
    for (const std::string& file : Files()) {
      EXPECT_TRUE(file == "checkpoint.json" || file == "checkpoint.lock") << file;
    }
  }
}

}  // namespace
}  // namespace devlet::state
