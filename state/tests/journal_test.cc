#include "devlet/state/journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "devlet/common/testing/status_matchers.h"

namespace devlet::state {
namespace {

using ::devlet::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

PreparedClaim Claim(const std::string& uid) {
  PreparedClaim c{.uid = uid, .namespace_name = "ns", .name = "claim-" + uid};
  c.devices.push_back({.driver = "devlet.dev", .pool = "node", .device = "gpu-" + uid,
                       .requests = {"gpu"}});
  return c;
}

// Journal is an in-memory journal file of `size` zeros.
struct Journal {
  explicit Journal(std::size_t size = 16 * kJournalAlign) : bytes(size, '\0') {}
  void Put(std::uint64_t offset, const std::string& record) {
    bytes.replace(offset, record.size(), record);
  }
  absl::StatusOr<JournalReplay> Replay(std::uint64_t base, Checkpoint& checkpoint) const {
    return ReplayJournal(
        [this](std::uint64_t offset, std::size_t size) -> absl::StatusOr<std::string> {
          return offset >= bytes.size() ? std::string() : bytes.substr(offset, size);
        },
        bytes.size(), base, checkpoint, "/x/checkpoint.journal");
  }
  std::string bytes;
};

TEST(JournalTest, RecordLayout) {
  const std::string record = EncodeJournalRecord(5, 4, {.puts = {Claim("a")}, .deletes = {"b"}});
  ASSERT_EQ(record.size(), kJournalAlign);
  EXPECT_EQ(record.substr(0, 4), "DVJ1");
  EXPECT_EQ(static_cast<unsigned char>(record[8]), 5);
  EXPECT_THAT(record.substr(kJournalHeaderSize),
              ::testing::StartsWith(R"({"delete":["b"],"put":{"a":)"));
  EXPECT_THAT(record, HasSubstr(R"(},"synced":4})"));
}

TEST(JournalTest, ReplaysInOrderAndEndsAtZeros) {
  Journal journal;
  const std::string first = EncodeJournalRecord(4, 3, {.puts = {Claim("a"), Claim("b")}});
  const std::string second = EncodeJournalRecord(5, 4, {.deletes = {"a"}});
  journal.Put(0, first);
  journal.Put(first.size(), second);
  Checkpoint checkpoint;
  checkpoint.claims["old"] = Claim("old");
  ASSERT_OK_AND_ASSIGN(JournalReplay replay, journal.Replay(3, checkpoint));
  EXPECT_EQ(replay.applied, 2);
  EXPECT_EQ(replay.last_seq, 5u);
  EXPECT_EQ(replay.end, first.size() + second.size());
  EXPECT_THAT(replay.torn_tail, IsEmpty());
  std::vector<std::string> uids;
  for (const auto& [uid, claim] : checkpoint.claims) uids.push_back(uid);
  EXPECT_THAT(uids, ElementsAre("b", "old"));
}

// Records the snapshot already holds (a crash before the journal was cleared) are skipped.
TEST(JournalTest, SkipsRecordsFoldedIntoTheSnapshot) {
  Journal journal;
  journal.Put(0, EncodeJournalRecord(1, 0, {.puts = {Claim("a")}}));
  journal.Put(kJournalAlign, EncodeJournalRecord(2, 1, {.deletes = {"a"}}));
  Checkpoint checkpoint;
  ASSERT_OK_AND_ASSIGN(JournalReplay replay, journal.Replay(2, checkpoint));
  EXPECT_EQ(replay.skipped, 2);
  EXPECT_EQ(replay.applied, 0);
  EXPECT_EQ(replay.last_seq, 2u);
  EXPECT_THAT(checkpoint.claims, IsEmpty());
}

// A write cut short (every prefix of the last record) is ignored: the state before it, reported.
TEST(JournalTest, EveryTornLastRecordIsIgnored) {
  const std::string first = EncodeJournalRecord(1, 0, {.puts = {Claim("a")}});
  const std::string last = EncodeJournalRecord(2, 1, {.puts = {Claim("b")}});
  const std::size_t payload_end = last.find_last_not_of('\0') + 1;
  for (std::size_t n = 1; n < payload_end; ++n) {
    Journal journal;
    journal.Put(0, first);
    journal.Put(first.size(), last.substr(0, n));
    SCOPED_TRACE("prefix " + std::to_string(n));
    Checkpoint checkpoint;
    ASSERT_OK_AND_ASSIGN(JournalReplay replay, journal.Replay(0, checkpoint));
    EXPECT_EQ(replay.last_seq, 1u) << "prefix " << n;
    EXPECT_EQ(replay.end, first.size());
    EXPECT_FALSE(checkpoint.claims.contains("b")) << "prefix " << n;
    // A prefix that is only zeros so far is indistinguishable from the end.
    if (last.substr(0, n).find_first_not_of('\0') != std::string::npos) {
      EXPECT_THAT(replay.torn_tail, Not(IsEmpty())) << "prefix " << n;
    }
  }
}

// Damage to a record that a newer valid record follows is not a torn write: kDataLoss.
TEST(JournalTest, CorruptionInTheMiddleIsDataLoss) {
  Journal journal;
  journal.Put(0, EncodeJournalRecord(1, 0, {.puts = {Claim("a")}}));
  journal.Put(kJournalAlign, EncodeJournalRecord(2, 1, {.puts = {Claim("b")}}));
  journal.bytes[40] ^= 0x01;
  Checkpoint checkpoint;
  EXPECT_THAT(journal.Replay(0, checkpoint),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("/x/checkpoint.journal"), HasSubstr("checksum mismatch"),
                             HasSubstr("record 2 at offset 4096 follows it"))));
}

// Deferred records are written before the earlier ones are synced: a power cut inside the flush
// that carries both can keep a newer record and tear an older one. The newer record says it was
// written before the older was synced: a torn tail, dropped with everything after it.
TEST(JournalTest, RecordsWrittenBeforeATornOneWasSyncedGoWithIt) {
  Journal journal;
  journal.Put(0, EncodeJournalRecord(1, 0, {.puts = {Claim("a")}}));
  journal.Put(kJournalAlign, EncodeJournalRecord(2, 1, {.puts = {Claim("b")}}));
  journal.Put(2 * kJournalAlign, EncodeJournalRecord(3, 1, {.puts = {Claim("c")}}));
  journal.Put(3 * kJournalAlign, EncodeJournalRecord(4, 1, {.deletes = {"a"}}));
  journal.bytes[kJournalAlign + 40] ^= 0x01;  // record 2
  Checkpoint checkpoint;
  ASSERT_OK_AND_ASSIGN(JournalReplay replay, journal.Replay(0, checkpoint));
  EXPECT_EQ(replay.last_seq, 1u);
  EXPECT_EQ(replay.end, kJournalAlign);
  EXPECT_THAT(replay.torn_tail, AllOf(HasSubstr("checksum mismatch"),
                                      HasSubstr("2 later record(s) written before it was synced")));
  std::vector<std::string> uids;
  for (const auto& [uid, claim] : checkpoint.claims) uids.push_back(uid);
  EXPECT_THAT(uids, ElementsAre("a"));  // a prefix of the changes: 1 kept, 2..4 dropped

  // A later record that knew record 2 synced: the disk lost an acknowledged write.
  journal.Put(3 * kJournalAlign, EncodeJournalRecord(4, 3, {.deletes = {"a"}}));
  Checkpoint again;
  EXPECT_THAT(journal.Replay(0, again),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("record 4 at offset 12288 follows it"),
                             HasSubstr("after record 2 had been synced"))));
}

// Records of devlet versions before the "synced" field synced every record before the next: a
// damaged one followed by a valid one stays damage.
TEST(JournalTest, RecordsWithoutSyncedFieldCountEverythingBeforeThemSynced) {
  std::string legacy = EncodeJournalRecord(2, 1, {.puts = {Claim("b")}});
  const std::size_t length = static_cast<unsigned char>(legacy[4]) |
                             static_cast<std::size_t>(static_cast<unsigned char>(legacy[5])) << 8;
  std::string payload = legacy.substr(kJournalHeaderSize, length);
  const std::string field = R"(,"synced":1)";
  ASSERT_NE(payload.find(field), std::string::npos);
  payload.erase(payload.find(field), field.size());
  std::string header = legacy.substr(0, kJournalHeaderSize);
  header[4] = static_cast<char>(payload.size() & 0xFF);
  header[5] = static_cast<char>(payload.size() >> 8);
  const std::uint32_t crc = Crc32(header.substr(4, 12) + payload);
  for (int i = 0; i < 4; ++i) header[16 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  legacy = header + payload;

  Journal journal;
  journal.Put(0, EncodeJournalRecord(1, 0, {.puts = {Claim("a")}}));
  journal.Put(kJournalAlign, legacy);
  Checkpoint whole;
  ASSERT_OK_AND_ASSIGN(JournalReplay replay, journal.Replay(0, whole));
  EXPECT_EQ(replay.last_seq, 2u);  // it reads as before

  journal.bytes[40] ^= 0x01;  // record 1
  Checkpoint damaged;
  EXPECT_THAT(journal.Replay(0, damaged), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(JournalTest, SequenceGapIsDataLoss) {
  Journal journal;
  journal.Put(0, EncodeJournalRecord(1, 0, {.puts = {Claim("a")}}));
  journal.Put(kJournalAlign, EncodeJournalRecord(3, 2, {.puts = {Claim("b")}}));
  Checkpoint checkpoint;
  EXPECT_THAT(journal.Replay(0, checkpoint),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("sequence number 3 where 2")));
}

TEST(JournalTest, DiffFindsPutsAndDeletes) {
  Checkpoint from;
  from.claims["a"] = Claim("a");
  from.claims["b"] = Claim("b");
  Checkpoint to = from;
  to.claims.erase("a");
  to.claims["b"].state = ClaimState::kPrepareCompleted;
  to.claims["c"] = Claim("c");
  JournalChange change = Diff(from, to);
  ASSERT_EQ(change.puts.size(), 2u);
  EXPECT_EQ(change.puts[0].uid, "b");
  EXPECT_EQ(change.puts[1].uid, "c");
  EXPECT_THAT(change.deletes, ElementsAre("a"));
  EXPECT_TRUE(Diff(to, to).empty());
}

}  // namespace
}  // namespace devlet::state
