// File: devlet/state/journal.h
//
// The checkpoint's journal: `<dir>/checkpoint.journal`, a preallocated file of zeros into which
// every change of the checkpoint is written as one record, in place, followed by fdatasync(2).
// Overwriting blocks that are already allocated and written changes no file metadata, so the
// sync is one data write and a cache flush: no journal commit of the file system, no rename, no
// directory sync (what a full rewrite of checkpoint.json costs). CheckpointStore (store.h)
// replays the journal over checkpoint.json on every read and folds it back in ("compaction") at
// start-up and when it grows large.
//
// Record layout (little-endian), starting at a multiple of kJournalAlign:
//   offset 0   u32 magic "DVJ1" (0x314a5644)
//   offset 4   u32 payload length in bytes
//   offset 8   u64 sequence number (the snapshot's journalSeq + 1, + 2, ...)
//   offset 16  u32 CRC-32 (IEEE) of bytes 4..16 followed by the payload
//   offset 20  u32 reserved, 0
//   offset 24  payload: compact JSON {"put":{"<uid>":<claim>,...},"delete":["<uid>",...],
//              "synced":<seq>}, claims encoded as in checkpoint.json; "synced" is the highest
//              sequence number the writer knew to be on the disk when it wrote the record (absent
//              in records of devlet versions that synced every record before writing the next:
//              read as seq - 1)
// then zeros up to the next multiple of kJournalAlign. Records never share an aligned block, so
// a torn write can only damage the record being written, never an earlier one.
//
// Replay reads records from offset 0: a block of zeros ends the journal; records with a sequence
// number at or below the snapshot's were already folded in (a crash between writing the snapshot
// and zeroing the journal) and are skipped; the next must be exactly one more than the last. An
// unreadable record (bad magic, length or CRC) is a torn tail when no valid later record says it
// was synced: the records after the last readable one were never all on the disk together (a
// power cut inside the flush that would have carried them), so none of them was promised; they
// are ignored and reported in `torn_tail`. Deferred records (CheckpointStore::ApplyDeferred) are
// written before the earlier ones are synced, so such a flush may keep a newer record and tear
// an older one. If a valid later record's "synced" covers the unreadable one, the disk lost data
// it had acknowledged: the journal is corrupted in the middle, kDataLoss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/state/checkpoint.h"

namespace devlet::state {

// kJournalMagic is "DVJ1" read as a little-endian u32.
inline constexpr std::uint32_t kJournalMagic = 0x314a5644u;
// kJournalHeaderSize is the fixed record header before the payload.
inline constexpr std::size_t kJournalHeaderSize = 24;
// kJournalAlign: records start at multiples of this (a page, so two records never share a page
// or a physical sector).
inline constexpr std::size_t kJournalAlign = 4096;

// JournalChange is what one record changes: claims stored (replacing a claim with the same UID)
// and claim UIDs removed (unknown UIDs are fine).
struct JournalChange {
  std::vector<PreparedClaim> puts;
  std::vector<std::string> deletes;

  bool empty() const { return puts.empty() && deletes.empty(); }
};

// Diff returns the change that turns `from` into `to`.
JournalChange Diff(const Checkpoint& from, const Checkpoint& to);

// ApplyJournalChange applies `change` to `checkpoint` as replay does: puts in order (a later put
// of the same UID wins), then deletes.
void ApplyJournalChange(Checkpoint& checkpoint, JournalChange change);

// EncodeJournalRecord returns the record for `change` with sequence number `seq`, padded with
// zeros to a multiple of kJournalAlign. `synced_through` is the highest sequence number known to
// be on the disk (every record up to it synced), at most seq - 1.
std::string EncodeJournalRecord(std::uint64_t seq, std::uint64_t synced_through,
                                const JournalChange& change);

// JournalReplay is the outcome of ReplayJournal.
struct JournalReplay {
  std::uint64_t last_seq = 0;    // sequence number of the last record applied (or the base)
  std::uint64_t end = 0;         // offset where the next record goes
  int applied = 0;               // records applied
  int skipped = 0;               // records at or below the base (already in the snapshot)
  std::string torn_tail;         // why the record at `end` was ignored; empty if none
};

// JournalReader reads up to `size` bytes at `offset` (fewer at the end of the journal).
using JournalReader =
    std::function<absl::StatusOr<std::string>(std::uint64_t offset, std::size_t size)>;

// ReplayJournal applies the records of a journal of `size` bytes that follow sequence number
// `base_seq` to `checkpoint` (see the file comment), reading from offset `start` (0: the whole
// journal over a snapshot; a later offset: only what was appended since an earlier replay
// ended there). `source` names the file in messages.
absl::StatusOr<JournalReplay> ReplayJournal(const JournalReader& read, std::uint64_t size,
                                            std::uint64_t base_seq, Checkpoint& checkpoint,
                                            std::string_view source, std::uint64_t start = 0);

}  // namespace devlet::state
