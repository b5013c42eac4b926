#include "devlet/state/journal.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "claim_json.h"
#include "devlet/common/status.h"

namespace devlet::state {
namespace {

using nlohmann::json;

void PutU32(std::string& out, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

void PutU64(std::string& out, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

std::uint64_t GetLE(std::string_view data, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(data[at + static_cast<std::size_t>(i)]);
  }
  return v;
}

std::uint64_t AlignUp(std::uint64_t n) {
  return (n + kJournalAlign - 1) / kJournalAlign * kJournalAlign;
}

// Crc of the header fields it protects (length and sequence number) followed by the payload.
std::uint32_t RecordCrc(std::string_view header, std::string_view payload) {
  std::string covered(header.substr(4, 12));
  covered.append(payload);
  return Crc32(covered);
}

// Record is one readable record.
struct Record {
  std::uint64_t seq = 0;
  std::uint64_t next = 0;  // aligned offset after it
  std::string payload;

  // SyncedThrough is the record's "synced" field: seq - 1 for records written before the field
  // (their writers synced every record before the next), and for a payload we cannot read (the
  // checksum matched, so it is ours: claim the most, which reports damage rather than hides it).
  std::uint64_t SyncedThrough() const {
    const json parsed = json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) {
      auto it = parsed.find("synced");
      if (it == parsed.end()) return seq - 1;
      if (it->is_number_unsigned()) return it->get<std::uint64_t>();
    }
    return seq - 1;
  }
};

// ReadRecord reads the record at `offset`: nullopt and `*zero` set for a block of zeros, nullopt
// and `*why` set for an unreadable one.
absl::StatusOr<std::optional<Record>> ReadRecord(const JournalReader& read, std::uint64_t size,
                                                 std::uint64_t offset, bool* zero,
                                                 std::string* why) {
  *zero = false;
  if (offset + kJournalHeaderSize > size) {
    *zero = true;  // the end of the file: nothing fits here
    return std::optional<Record>();
  }
  DEVLET_ASSIGN_OR_RETURN(std::string header, read(offset, kJournalHeaderSize));
  if (header.size() < kJournalHeaderSize) {
    *zero = true;
    return std::optional<Record>();
  }
  if (header.find_first_not_of('\0') == std::string::npos) {
    *zero = true;
    return std::optional<Record>();
  }
  const std::uint32_t magic = static_cast<std::uint32_t>(GetLE(header, 0, 4));
  const std::uint64_t length = GetLE(header, 4, 4);
  if (magic != kJournalMagic) {
    *why = "bad magic at offset " + std::to_string(offset);
    return std::optional<Record>();
  }
  if (offset + kJournalHeaderSize + length > size) {
    *why = "record at offset " + std::to_string(offset) + " claims " + std::to_string(length) +
           " bytes, past the end of the journal";
    return std::optional<Record>();
  }
  DEVLET_ASSIGN_OR_RETURN(std::string payload, read(offset + kJournalHeaderSize, length));
  if (payload.size() != length) {
    *why = "record at offset " + std::to_string(offset) + " is cut short";
    return std::optional<Record>();
  }
  const std::uint32_t stored = static_cast<std::uint32_t>(GetLE(header, 16, 4));
  if (RecordCrc(header, payload) != stored) {
    *why = "checksum mismatch in the record at offset " + std::to_string(offset);
    return std::optional<Record>();
  }
  Record record;
  record.seq = GetLE(header, 8, 8);
  record.next = AlignUp(offset + kJournalHeaderSize + length);
  record.payload = std::move(payload);
  return std::optional<Record>(std::move(record));
}

}  // namespace

JournalChange Diff(const Checkpoint& from, const Checkpoint& to) {
  JournalChange change;
  for (const auto& [uid, claim] : to.claims) {
    auto it = from.claims.find(uid);
    if (it == from.claims.end() || !(it->second == claim)) change.puts.push_back(claim);
  }
  for (const auto& [uid, claim] : from.claims) {
    if (to.claims.count(uid) == 0) change.deletes.push_back(uid);
  }
  return change;
}

void ApplyJournalChange(Checkpoint& checkpoint, JournalChange change) {
  for (PreparedClaim& claim : change.puts) {
    std::string uid = claim.uid;
    checkpoint.claims.insert_or_assign(std::move(uid), std::move(claim));
  }
  for (const std::string& uid : change.deletes) checkpoint.claims.erase(uid);
}

std::string EncodeJournalRecord(std::uint64_t seq, std::uint64_t synced_through,
                                const JournalChange& change) {
  json puts = json::object();
  for (const PreparedClaim& claim : change.puts) puts[claim.uid] = internal::EncodeClaim(claim);
  const std::string payload = internal::Dump({{"put", std::move(puts)},
                                              {"delete", change.deletes},
                                              {"synced", std::min(synced_through, seq - 1)}});
  std::string out(AlignUp(kJournalHeaderSize + payload.size()), '\0');
  PutU32(out, 0, kJournalMagic);
  PutU32(out, 4, static_cast<std::uint32_t>(payload.size()));
  PutU64(out, 8, seq);
  PutU32(out, 16, RecordCrc(std::string_view(out).substr(0, kJournalHeaderSize), payload));
  out.replace(kJournalHeaderSize, payload.size(), payload);
  return out;
}

absl::StatusOr<JournalReplay> ReplayJournal(const JournalReader& read, std::uint64_t size,
                                            std::uint64_t base_seq, Checkpoint& checkpoint,
                                            std::string_view source, std::uint64_t start) {
  const std::string name = "checkpoint journal \"" + std::string(source) + "\"";
  auto corrupted = [&](const std::string& why) {
    return absl::DataLossError(name + " is corrupted (" + why +
                               "); the claims it recorded cannot be trusted: move the checkpoint "
                               "and its journal aside (QuarantineCorrupted) and let the kubelet "
                               "re-prepare");
  };
  JournalReplay replay;
  replay.last_seq = base_seq;
  replay.end = start;
  std::uint64_t offset = start;
  for (;;) {
    bool zero = false;
    std::string why;
    DEVLET_ASSIGN_OR_RETURN(std::optional<Record> record,
                            ReadRecord(read, size, offset, &zero, &why));
    if (zero) break;
    if (!record) {
      // Torn tail or damage in the middle: a valid newer record that knew the missing one
      // synced tells them apart. Newer records that did not were cut off by the same power
      // cut (see the file comment) and go with it.
      const std::uint64_t missing = replay.last_seq + 1;
      std::uint64_t dropped = 0;
      for (std::uint64_t later = offset + kJournalAlign; later + kJournalHeaderSize <= size;
           later += kJournalAlign) {
        bool later_zero = false;
        std::string later_why;
        DEVLET_ASSIGN_OR_RETURN(std::optional<Record> next,
                                ReadRecord(read, size, later, &later_zero, &later_why));
        if (!next || next->seq <= replay.last_seq) continue;
        if (next->SyncedThrough() >= missing) {
          return corrupted(why + ", but record " + std::to_string(next->seq) + " at offset " +
                           std::to_string(later) + " follows it and was written after record " +
                           std::to_string(missing) + " had been synced");
        }
        ++dropped;
      }
      replay.torn_tail = why;
      if (dropped > 0) {
        replay.torn_tail += "; " + std::to_string(dropped) +
                            " later record(s) written before it was synced are dropped with it";
      }
      break;
    }
    if (record->seq <= base_seq) {
      ++replay.skipped;  // folded into the snapshot before the journal was cleared
      offset = record->next;
      continue;
    }
    if (record->seq != replay.last_seq + 1) {
      return corrupted("record at offset " + std::to_string(offset) + " has sequence number " +
                       std::to_string(record->seq) + " where " +
                       std::to_string(replay.last_seq + 1) + " was expected");
    }
    try {
      const json change = json::parse(record->payload);
      for (const auto& [uid, claim] : change.at("put").items()) {
        PreparedClaim c = internal::DecodeClaim(claim);
        if (c.uid != uid) throw std::runtime_error("claim key " + uid + " holds UID " + c.uid);
        checkpoint.claims[uid] = std::move(c);
      }
      for (const json& uid : change.at("delete")) checkpoint.claims.erase(uid.get<std::string>());
    } catch (const std::exception& e) {
      // The checksum matched, so we wrote this: a shape we cannot read is not a torn write.
      return corrupted("record " + std::to_string(record->seq) + " has unexpected content: " +
                       e.what());
    }
    replay.last_seq = record->seq;
    ++replay.applied;
    offset = record->next;
  }
  replay.end = offset;
  return replay;
}

}  // namespace devlet::state
