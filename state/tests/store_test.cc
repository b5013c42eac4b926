#include "devlet/state/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <condition_variable>
#include <future>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "devlet/cdi/testing/faulty_file_system.h"
#include "devlet/cdi/testing/forwarding_file_system.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"

namespace devlet::state {
namespace {

using ::devlet::testing::IsOk;
using ::testing::AllOf;
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
  EXPECT_THAT(Files(), ElementsAre("checkpoint.journal", "checkpoint.json", "checkpoint.lock"));
  for (const char* file : {"checkpoint.json", "checkpoint.journal"}) {
    EXPECT_EQ(fs::status(dir_ / file).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write)
        << file;
  }
}

// A container names its claims; FindForContainer serves those recorded for its pod or for a
// PodGroup (KEP-5729: no pod in reservedFor), and the PodGroups survive a reopen.
TEST_F(StoreTest, FindForContainerServesThePodsClaimsAndPodGroupClaims) {
  auto store = OpenStore();
  ASSERT_OK(store->RecordPrepareCompleted(Claim("mine", "pod-1")));
  ASSERT_OK(store->RecordPrepareCompleted(Claim("theirs", "pod-2")));
  PreparedClaim group = Claim("group");
  group.pod_group_uids = {"group-uid"};
  ASSERT_OK(store->RecordPrepareCompleted(group));

  ASSERT_OK_AND_ASSIGN(std::vector<PreparedClaim> found,
                       store->FindForContainer("pod-1", {"group", "theirs", "mine", "unknown"}));
  ASSERT_THAT(found, SizeIs(2));
  EXPECT_EQ(found[0].uid, "group");
  EXPECT_EQ(found[1].uid, "mine");
  EXPECT_THAT(OpenStore()->FindClaim("group"),
              IsOkAndHolds(Optional(::testing::Field(&PreparedClaim::pod_group_uids,
                                                     ElementsAre("group-uid")))));
  EXPECT_THAT(store->FindByPod("pod-1"), IsOkAndHolds(SizeIs(1)));
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
      EXPECT_THAT(Files(),
                  ElementsAre("checkpoint.journal", "checkpoint.json", "checkpoint.lock"));
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

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteAll(const fs::path& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Flips one byte of a file in place (the journal keeps its size and blocks).
void FlipByte(const fs::path& path, std::size_t offset) {
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  file.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  file.get(c);
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(c ^ 0x01));
}

std::uint64_t SnapshotSeq(const fs::path& path) {
  std::uint64_t seq = 0;
  EXPECT_OK(DecodeCheckpoint(ReadAll(path), "", &seq).status());
  return seq;
}

// A change is a journal record; the snapshot is only rewritten when the store opens.
TEST_F(StoreTest, JournalHoldsChangesUntilCompaction) {
  auto store = OpenStore();
  ASSERT_OK(store->RecordPrepareStarted(Claim("a")));
  ASSERT_OK(store->RecordPrepareCompleted(Claim("a")));
  ASSERT_OK_AND_ASSIGN(Checkpoint snapshot, DecodeCheckpoint(ReadAll(store->path())));
  EXPECT_THAT(snapshot.claims, IsEmpty());
  EXPECT_EQ(SnapshotSeq(store->path()), 0u);
  const std::string journal = ReadAll(store->journal_path());
  EXPECT_EQ(journal.size(), StoreOptions{}.journal_bytes);
  EXPECT_EQ(journal.substr(0, 4), "DVJ1");
  EXPECT_EQ(journal.substr(4096, 4), "DVJ1");

  auto other = OpenStore();  // folds the journal into the snapshot
  ASSERT_OK_AND_ASSIGN(snapshot, DecodeCheckpoint(ReadAll(store->path())));
  EXPECT_EQ(snapshot.claims.at("a").state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(SnapshotSeq(store->path()), 2u);
  EXPECT_EQ(ReadAll(store->journal_path()).find_first_not_of('\0'), std::string::npos);
  // Both stores keep working on the compacted files.
  ASSERT_OK(store->Remove("a"));
  EXPECT_THAT(other->FindClaim("a"), IsOkAndHolds(std::nullopt));
  ASSERT_OK(other->RecordPrepareStarted(Claim("b")));
  EXPECT_THAT(store->Load()->claims, SizeIs(1));
}

// A last record cut short by a crash was never acknowledged: dropped at start-up, with a log
// line, and the journal cleared.
TEST_F(StoreTest, TornJournalTailIsDroppedWithALogLine) {
  auto store = OpenStore();
  ASSERT_OK(store->RecordPrepareCompleted(Claim("a")));
  ASSERT_OK(store->RecordPrepareCompleted(Claim("b")));
  store.reset();  // the "crash"
  FlipByte(dir_ / "checkpoint.journal", 4096 + 100);
  std::vector<std::string> logged;
  log::SetSinkForTest([&](std::string_view line) { logged.emplace_back(line); });
  auto restarted = OpenStore();
  ASSERT_OK_AND_ASSIGN(Checkpoint checkpoint, restarted->Load());
  log::SetSinkForTest(nullptr);
  EXPECT_TRUE(checkpoint.claims.contains("a"));
  EXPECT_FALSE(checkpoint.claims.contains("b"));
  ASSERT_THAT(logged, SizeIs(1));
  EXPECT_THAT(logged[0], AllOf(HasSubstr("torn last record"), HasSubstr("checksum mismatch"),
                               HasSubstr("checkpoint.journal")));
  EXPECT_EQ(ReadAll(dir_ / "checkpoint.journal").find_first_not_of('\0'), std::string::npos);

  ASSERT_OK(restarted->RecordPrepareStarted(Claim("c")));
  ASSERT_OK_AND_ASSIGN(checkpoint, OpenStore()->Load());
  EXPECT_THAT(checkpoint.claims, SizeIs(2));
  EXPECT_TRUE(checkpoint.claims.contains("c"));
}

// Damage followed by a valid newer record is not a torn write: every call fails until the
// checkpoint and its journal are quarantined.
TEST_F(StoreTest, CorruptedJournalIsDataLossAndQuarantined) {
  auto store = OpenStore();
  ASSERT_OK(store->RecordPrepareCompleted(Claim("a")));
  ASSERT_OK(store->RecordPrepareCompleted(Claim("b")));
  store.reset();
  FlipByte(dir_ / "checkpoint.journal", 100);
  store = OpenStore();  // Open leaves it for the operator or the daemon
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->Load(), StatusIs(absl::StatusCode::kDataLoss,
                                      AllOf(HasSubstr(store->journal_path()),
                                            HasSubstr("follows it"))));
  EXPECT_THAT(store->RecordPrepareStarted(Claim("c")), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(store->FindByPod("p"), StatusIs(absl::StatusCode::kDataLoss));

  ASSERT_OK_AND_ASSIGN(std::string moved, store->QuarantineCorrupted());
  EXPECT_THAT(moved, HasSubstr("checkpoint.json.corrupt-"));
  bool journal_moved = false;
  for (const std::string& file : Files()) {
    journal_moved |= file.starts_with("checkpoint.journal.corrupt-");
  }
  EXPECT_TRUE(journal_moved);
  EXPECT_THAT(store->Load(), IsOkAndHolds(Checkpoint{}));
  ASSERT_OK(store->RecordPrepareStarted(Claim("c")));
  EXPECT_THAT(OpenStore()->Load()->claims, SizeIs(1));
}

TEST_F(StoreTest, CompactsWhenTheJournalGrows) {
  const StoreOptions options{.dir = dir_.string(),
                             .journal_bytes = 8 * 4096,
                             .compact_after_bytes = 2 * 4096,
                             .background_compaction = false};
  ASSERT_OK_AND_ASSIGN(auto store, CheckpointStore::Open(options));
  for (int i = 0; i < 10; ++i) ASSERT_OK(store->RecordPrepareCompleted(Claim(std::to_string(i))));
  // Compacted after every third record: the snapshot is at 9, record 10 is in the journal.
  EXPECT_EQ(SnapshotSeq(store->path()), 9u);
  // A change larger than the whole journal goes straight into a new snapshot.
  PreparedClaim big = Claim("big");
  big.annotations["blob"] = std::string(64 * 1024, 'x');
  ASSERT_OK(store->RecordPrepareCompleted(big));
  EXPECT_EQ(SnapshotSeq(store->path()), 10u);
  ASSERT_OK(store->Remove("0"));
  ASSERT_OK_AND_ASSIGN(auto restarted, CheckpointStore::Open(options));
  ASSERT_OK_AND_ASSIGN(Checkpoint checkpoint, restarted->Load());
  EXPECT_THAT(checkpoint.claims, SizeIs(10));
  EXPECT_EQ(checkpoint.claims.at("big").annotations.at("blob").size(), 64u * 1024);
}

TEST_F(StoreTest, CompactsInTheBackground) {
  ASSERT_OK_AND_ASSIGN(auto store,
                       CheckpointStore::Open({.dir = dir_.string(),
                                              .journal_bytes = 8 * 4096,
                                              .compact_after_bytes = 2 * 4096}));
  for (int i = 0; i < 3; ++i) ASSERT_OK(store->RecordPrepareCompleted(Claim(std::to_string(i))));
  for (int wait = 0; wait < 500 && SnapshotSeq(store->path()) < 3; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(SnapshotSeq(store->path()), 3u);
  EXPECT_THAT(store->Load()->claims, SizeIs(3));
}

// Switching the journal off folds an earlier run's journal in and removes it.
TEST_F(StoreTest, JournalOffFoldsTheJournalIn) {
  auto store = OpenStore();
  ASSERT_OK(store->RecordPrepareCompleted(Claim("a")));
  store.reset();
  ASSERT_OK_AND_ASSIGN(auto plain,
                       CheckpointStore::Open({.dir = dir_.string(), .journal_bytes = 0}));
  EXPECT_THAT(Files(), ElementsAre("checkpoint.json", "checkpoint.lock"));
  ASSERT_OK(plain->RecordPrepareCompleted(Claim("b")));
  ASSERT_OK_AND_ASSIGN(Checkpoint snapshot, DecodeCheckpoint(ReadAll(plain->path())));
  EXPECT_THAT(snapshot.claims, SizeIs(2));
}

// A checkpoint written before the journal existed is read and rewritten as version 2 at Open.
TEST_F(StoreTest, UpgradesVersionOne) {
  fs::create_directories(dir_);
  const std::string payload =
      R"({"claims":{"u1":{"devices":[],"files":[],"name":"c1","namespace":"ns","podUIDs":[],)"
      R"("state":"PrepareCompleted","uid":"u1"}}})";
  char crc[9];
  std::snprintf(crc, sizeof(crc), "%08x", Crc32(payload));
  WriteAll(dir_ / "checkpoint.json", R"({"kind":"DevletCheckpoint","version":1,"checksum":"crc32:)" +
                                         std::string(crc) + R"(","data":)" + payload + "}\n");
  auto store = OpenStore();
  EXPECT_THAT(ReadAll(dir_ / "checkpoint.json"), HasSubstr("\"version\":2"));
  EXPECT_THAT(store->FindClaim("u1"), IsOkAndHolds(Optional(::testing::Field(
                                          &PreparedClaim::state, ClaimState::kPrepareCompleted))));
}

// A failure at any step of a compaction loses nothing: the change was durable in the journal.
TEST_F(StoreTest, FailureAtEveryCompactionStepLosesNothing) {
  for (bool crash : {false, true}) {
    for (int step = 0;; ++step) {
      SCOPED_TRACE("crash=" + std::to_string(crash) + " step=" + std::to_string(step));
      fs::remove_all(dir_);
      FaultyFileSystem faulty;
      auto store = OpenStore(&faulty);
      ASSERT_OK(store->RecordPrepareCompleted(Claim("a")));
      ASSERT_OK(store->RecordPrepareCompleted(Claim("b")));
      faulty.count = 0;
      faulty.fail_at = step;
      faulty.crash = crash;
      const absl::Status status = store->Compact();
      const bool injected = faulty.count > step;
      EXPECT_EQ(status.ok(), !injected) << status;

      auto restarted = OpenStore();
      ASSERT_OK_AND_ASSIGN(Checkpoint after, restarted->Load());
      EXPECT_THAT(after.claims, SizeIs(2));
      EXPECT_THAT(Files(), ElementsAre("checkpoint.journal", "checkpoint.json", "checkpoint.lock"));
      if (!injected) break;
      ASSERT_LT(step, 20);
    }
  }
}

// A deferred change is visible at once and synced later: by the next durable change (one flush
// for both), Flush, or the background thread. The next deferred change does not wait for it.
TEST_F(StoreTest, DeferredChangesAreSyncedLater) {
  FaultyFileSystem counting;
  ASSERT_OK_AND_ASSIGN(auto store, CheckpointStore::Open({.dir = dir_.string(),
                                                          .fs = &counting,
                                                          .background_compaction = false}));
  counting.syncs = 0;
  ASSERT_OK(store->UpdateDeferred([](Checkpoint& c) {
    c.claims["a"] = Claim("a");
    return absl::OkStatus();
  }));
  ASSERT_OK(store->UpdateDeferred([](Checkpoint& c) {
    c.claims["z"] = Claim("z");
    return absl::OkStatus();
  }));
  EXPECT_EQ(counting.syncs.load(), 0);
  EXPECT_THAT(OpenStore()->FindClaim("a"), IsOkAndHolds(Optional(Claim("a"))));  // page cache
  ASSERT_OK(store->RecordPrepareStarted(Claim("b")));
  EXPECT_EQ(counting.syncs.load(), 1);  // one flush carries a's, z's and b's records
  ASSERT_OK(store->UpdateDeferred([](Checkpoint& c) {
    c.claims.erase("a");
    return absl::OkStatus();
  }));
  ASSERT_OK(store->Flush());
  ASSERT_OK(store->Flush());  // nothing left to sync
  EXPECT_EQ(counting.syncs.load(), 2);

  // With the background thread, the sync follows without a next change.
  FaultyFileSystem background;
  ASSERT_OK_AND_ASSIGN(auto other,
                       CheckpointStore::Open({.dir = dir_.string(), .fs = &background}));
  background.syncs = 0;
  ASSERT_OK(other->UpdateDeferred([](Checkpoint& c) {
    c.claims["c"] = Claim("c");
    return absl::OkStatus();
  }));
  for (int wait = 0; wait < 500 && background.syncs == 0; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(background.syncs.load(), 1);
}

// GatedSyncFileSystem holds every DataSync until released, to catch a sync on a caller's path.
class GatedSyncFileSystem final : public cdi::testing::ForwardingFileSystem {
 public:
  absl::Status DataSync(int fd, const std::string& path) override {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    return inner().DataSync(fd, path);
  }
  bool WaitForASync() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ > 0; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

// The background sync waits for the disk outside the lock: deferred changes, reads and the
// compactor's callers go on meanwhile (the kubelet plugin's PrepareStarted and PrepareCompleted
// of one claim are both deferred for a volatile backend: no flush before its answer).
TEST_F(StoreTest, BackgroundSyncDoesNotBlockDeferredChanges) {
  GatedSyncFileSystem gated;
  ASSERT_OK_AND_ASSIGN(auto store, CheckpointStore::Open({.dir = dir_.string(), .fs = &gated}));
  ASSERT_OK(store->ApplyDeferred({.puts = {Claim("a")}}));
  ASSERT_TRUE(gated.WaitForASync());
  auto more = std::async(std::launch::async, [&] {
    absl::Status status = store->ApplyDeferred({.puts = {Claim("a", "pod-1")}});
    if (status.ok()) status = store->ApplyDeferred({.puts = {Claim("b")}});
    if (status.ok()) status = store->Read([](const Checkpoint&) {});
    return status;
  });
  const bool done = more.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  gated.Open();
  EXPECT_TRUE(done) << "a deferred change waited for the background sync";
  EXPECT_OK(more.get());
  ASSERT_OK(store->Flush());
  EXPECT_THAT(OpenStore()->Load(),
              IsOkAndHolds(Checkpoint{{{"a", Claim("a", "pod-1")}, {"b", Claim("b")}}}));
}

// Counts the records in a journal file (each starts on a 4096-byte boundary).
int JournalRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int records = 0;
  for (std::size_t at = 0; at + 4 <= data.size(); at += kJournalAlign) {
    if (data.compare(at, 4, "DVJ1") == 0) ++records;
  }
  return records;
}

TEST_F(StoreTest, ApplyRecordsOnlyWhatChanges) {
  auto store = OpenStore();
  auto other = OpenStore();
  ASSERT_OK(store->Apply({.puts = {Claim("a"), Claim("b")}}));
  EXPECT_EQ(JournalRecords(store->journal_path()), 1);
  EXPECT_THAT(other->Load(), IsOkAndHolds(Checkpoint{{{"a", Claim("a")}, {"b", Claim("b")}}}));

  // Nothing new: no record at all.
  ASSERT_OK(store->Apply({.puts = {Claim("a")}, .deletes = {"zzz"}}));
  ASSERT_OK(store->Apply({}));
  EXPECT_EQ(JournalRecords(store->journal_path()), 1);

  // The last put of a UID counts; deletes follow puts; only a's change and c go in the record.
  PreparedClaim a2 = Claim("a", "pod-2");
  ASSERT_OK(store->Apply({.puts = {Claim("b"), Claim("a"), a2, Claim("c"), Claim("d")},
                          .deletes = {"d", "d"}}));
  EXPECT_EQ(JournalRecords(store->journal_path()), 2);
  const Checkpoint want{{{"a", a2}, {"b", Claim("b")}, {"c", Claim("c")}}};
  EXPECT_THAT(store->Load(), IsOkAndHolds(want));
  EXPECT_THAT(other->Load(), IsOkAndHolds(want));
  EXPECT_THAT(OpenStore()->Load(), IsOkAndHolds(want));  // replayed from the files

  ASSERT_OK(other->Apply({.deletes = {"a", "c"}}));
  EXPECT_THAT(store->Load(), IsOkAndHolds(Checkpoint{{{"b", Claim("b")}}}));

  EXPECT_THAT(store->Apply({.puts = {Claim("")}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty claim UID")));
  int seen = 0;
  ASSERT_OK(store->Read([&](const Checkpoint& c) { seen = static_cast<int>(c.claims.size()); }));
  EXPECT_EQ(seen, 1);
}

TEST_F(StoreTest, ApplyDeferredIsSyncedWithTheNextDurableChange) {
  FaultyFileSystem counting;
  ASSERT_OK_AND_ASSIGN(auto store, CheckpointStore::Open({.dir = dir_.string(),
                                                          .fs = &counting,
                                                          .background_compaction = false}));
  counting.syncs = 0;
  ASSERT_OK(store->ApplyDeferred({.puts = {Claim("a")}}));
  ASSERT_OK(store->ApplyDeferred({.puts = {Claim("b")}}));
  EXPECT_EQ(counting.syncs.load(), 0);
  EXPECT_THAT(OpenStore()->FindClaim("a"), IsOkAndHolds(Optional(Claim("a"))));
  ASSERT_OK(store->Apply({.deletes = {"a"}}));
  EXPECT_EQ(counting.syncs.load(), 1);
}

// Simulates a power cut inside the one flush that carries two unsynced records: the older torn,
// the newer on the disk.
void TearRecord(const std::string& journal, int index) {
  std::fstream file(journal, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(index) * kJournalAlign + 40);
  file.put('\x7f');
}

// Rolling update: two processes share the journal. The twin writes after the other's deferred,
// unsynced record without syncing it first; a power cut that tears that record and keeps the
// twin's newer one is a torn tail (neither was promised), not damage.
TEST_F(StoreTest, TwinWritesAfterTheOthersUnsyncedRecord) {
  ASSERT_OK_AND_ASSIGN(auto old_plugin, CheckpointStore::Open({.dir = dir_.string(),
                                                               .background_compaction = false}));
  FaultyFileSystem twin_fs;
  ASSERT_OK_AND_ASSIGN(auto twin, CheckpointStore::Open({.dir = dir_.string(),
                                                         .fs = &twin_fs,
                                                         .background_compaction = false}));
  ASSERT_OK(old_plugin->Apply({.puts = {Claim("kept")}}));
  ASSERT_OK(old_plugin->ApplyDeferred({.puts = {Claim("a")}}));
  twin_fs.syncs = 0;
  ASSERT_OK(twin->ApplyDeferred({.puts = {Claim("b")}}));
  EXPECT_EQ(twin_fs.syncs.load(), 0);
  EXPECT_EQ(JournalRecords(twin->journal_path()), 3);
  EXPECT_THAT(old_plugin->Load(), IsOkAndHolds(Checkpoint{
                                      {{"a", Claim("a")}, {"b", Claim("b")}, {"kept", Claim("kept")}}}));

  TearRecord(twin->journal_path(), 1);  // a's record
  old_plugin.reset();
  twin.reset();
  ::testing::internal::CaptureStderr();
  auto after = OpenStore();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(after, nullptr);
  EXPECT_THAT(after->Load(), IsOkAndHolds(Checkpoint{{{"kept", Claim("kept")}}}));
  EXPECT_THAT(log, AllOf(HasSubstr("Ignoring a torn last record"),
                         HasSubstr("1 later record(s) written before it was synced")));

  // Once a sync carried a record, damage to it stays damage.
  ASSERT_OK(after->ApplyDeferred({.puts = {Claim("c")}}));
  ASSERT_OK(after->Apply({.puts = {Claim("d")}}));
  ASSERT_OK(after->ApplyDeferred({.puts = {Claim("e")}}));
  after.reset();
  TearRecord(dir_ / "checkpoint.journal", 1);  // d's record; e's says it was synced
  auto damaged = CheckpointStore::Open({.dir = dir_.string()});
  ASSERT_OK(damaged.status());
  EXPECT_THAT((*damaged)->Load(), StatusIs(absl::StatusCode::kDataLoss,
                                           HasSubstr("after record")));
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
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Odd rounds: a small journal, so that kills also land in background compactions.
    StoreOptions options{.dir = dir_.string()};
    if (round % 2 == 1) {
      options.journal_bytes = 16 * 4096;
      options.compact_after_bytes = 4 * 4096;
    }
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto store = CheckpointStore::Open(options);
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
    EXPECT_THAT(Files(), ElementsAre("checkpoint.journal", "checkpoint.json", "checkpoint.lock"));
  }
}

}  // namespace
}  // namespace devlet::state
