// File: devlet/state/store.h
//
// CheckpointStore keeps the Checkpoint in `<dir>/checkpoint.json` (the snapshot) plus
// `<dir>/checkpoint.journal` (changes since the snapshot, journal.h), guarded by an flock(2) on
// `<dir>/checkpoint.lock` (so a rolling-update twin process and both plugins in this process
// serialize). A change is durable when the call returns: one journal record written in place
// and fdatasync'd (about 0.1 ms on the dev VM's disk, against 0.4 ms idle and up to 100 ms under
// other processes' writes for a rename-based rewrite). The snapshot is rewritten atomically
// (temp file, fsync, rename, fsync dir) and the journal cleared ("compaction") when the store
// opens and, in a background thread, once the journal holds more than compact_after_bytes.
// Every call sees other processes' writes: it checks the snapshot's identity (inode, size,
// times) and reads the journal from where the last call stopped; the parsed state is cached
// between calls only as long as the snapshot is the same file.
//
//   DEVLET_ASSIGN_OR_RETURN(auto store, devlet::state::CheckpointStore::Open({.dir = data_dir}));
//   DEVLET_RETURN_IF_ERROR(store->RecordPrepareStarted(claim));   // before any side effect
//   ... prepare devices, write CDI specs ...
//   DEVLET_RETURN_IF_ERROR(store->RecordPrepareCompleted(claim));
//   // NRI side:
//   DEVLET_ASSIGN_OR_RETURN(std::vector<PreparedClaim> claims, store->FindByPod(pod_uid));
//
// A corrupted checkpoint makes every call fail with kDataLoss (naming the file and the problem)
// until an operator or the daemon calls QuarantineCorrupted(), which moves it aside.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/cdi/file_system.h"
#include "devlet/state/checkpoint.h"
#include "devlet/state/journal.h"

namespace devlet::state {

// StoreOptions configures a CheckpointStore.
struct StoreOptions {
  std::string dir;                                   // e.g. /var/lib/kubelet/plugins/<driver>
  cdi::FileSystem* fs = nullptr;                     // nullptr: cdi::RealFileSystem()
  std::chrono::milliseconds lock_timeout{10000};     // how long to wait for the flock
  // Size of the preallocated journal. 0: no journal, every change rewrites checkpoint.json (a
  // journal left by an earlier run is folded in and removed at Open).
  std::uint64_t journal_bytes = 4 << 20;
  // Compact once the journal holds more than this many bytes and no change came for
  // `compact_idle` (compaction holds the lock for a snapshot write and the journal's clearing,
  // a few ms: better spent when no kubelet call waits), or at once past three quarters of the
  // journal. A change that does not fit in the journal at all goes into a new snapshot at once.
  std::uint64_t compact_after_bytes = 1 << 20;
  std::chrono::milliseconds compact_idle{200};
  // Compact (and sync UpdateDeferred's records) in a background thread, so the caller of the
  // change that crossed the threshold does not wait; false: compact in that caller after its
  // change is durable, and sync deferred records only with the next durable change or at Flush
  // (deterministic, for tests).
  bool background_compaction = true;
};

// CheckpointStore is the checkpoint file and its lock. Thread-safe.
class CheckpointStore {
 public:
  // Open creates `dir` (0700) if needed, removes temp files a crash left behind, creates the
  // journal, and folds a non-empty journal into a new snapshot (a torn last record, from a crash
  // in the middle of a write, is dropped with a log line). A corrupted snapshot or journal does
  // not fail Open: every later call reports it (kDataLoss).
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(StoreOptions options);

  ~CheckpointStore();
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // Load returns the current checkpoint (empty when the file does not exist yet).
  absl::StatusOr<Checkpoint> Load();

  // Update runs `mutate` on the current checkpoint under the lock and writes the result; if
  // `mutate` fails nothing is written.
  absl::Status Update(const std::function<absl::Status(Checkpoint&)>& mutate);

  // UpdateDeferred is Update whose record is written at once (every process sees it, and it
  // survives this process's crash: the page cache keeps it) but synced a moment later, by the
  // background thread (which does not hold the lock while it waits for the disk) or with the
  // next durable change, whichever comes first: neither the caller nor the next deferred change
  // waits for the disk. A power loss before that sync can lose the change, and with it every
  // later change not yet synced, never an earlier one (replay keeps a prefix: journal.h). Use it
  // only for changes whose loss is safe (the kubelet plugin's PrepareCompleted: after a reboot
  // the claim is PrepareStarted and the kubelet's repeated prepare redoes it idempotently).
  absl::Status UpdateDeferred(const std::function<absl::Status(Checkpoint&)>& mutate);

  // Apply stores `change` as one record (puts replace the claim with the same UID, deletes of
  // unknown UIDs are fine), durable when it returns. Unlike Update it neither copies nor compares
  // the whole checkpoint: the cost is the change's, not the node's (the kubelet plugin's group
  // commit). Puts equal to what is stored and deletes of absent UIDs are left out of the record;
  // nothing is written when nothing is left. A put with an empty UID is kInvalidArgument.
  absl::Status Apply(JournalChange change);

  // ApplyDeferred is Apply with UpdateDeferred's durability.
  absl::Status ApplyDeferred(JournalChange change);

  // Read runs `reader` on the current checkpoint under the lock, without copying it (Load
  // copies). `reader` must not call back into the store.
  absl::Status Read(const std::function<void(const Checkpoint&)>& reader);

  // Flush syncs a deferred change now (no-op when there is none).
  absl::Status Flush();

  // RecordPrepareStarted stores `claim` with state kPrepareStarted, replacing an earlier record
  // of the same UID. Call it before any side effect.
  absl::Status RecordPrepareStarted(PreparedClaim claim);

  // RecordPrepareCompleted stores `claim` with state kPrepareCompleted.
  absl::Status RecordPrepareCompleted(PreparedClaim claim);

  // AddPod records that `pod_uid` uses claim `claim_uid` (no-op if already recorded);
  // kNotFound if the claim is not in the checkpoint.
  absl::Status AddPod(const std::string& claim_uid, const std::string& pod_uid);

  // Remove forgets a claim (after unprepare). An unknown UID is success.
  absl::Status Remove(const std::string& claim_uid);

  // FindClaim returns the claim recorded under `claim_uid`, or nullopt.
  absl::StatusOr<std::optional<PreparedClaim>> FindClaim(const std::string& claim_uid);

  // FindByPod returns the claims recorded for `pod_uid`, in claim-UID order.
  absl::StatusOr<std::vector<PreparedClaim>> FindByPod(const std::string& pod_uid);

  // FindForContainer returns, in one read and in the order of `claim_uids`, the claims among
  // them that serve `pod_uid`: recorded for the pod, or for a PodGroup (pod_group_uids). Other
  // UIDs are left out.
  absl::StatusOr<std::vector<PreparedClaim>> FindForContainer(
      const std::string& pod_uid, const std::vector<std::string>& claim_uids);

  // QuarantineCorrupted renames a checkpoint whose snapshot or journal does not decode to
  // "checkpoint.json.corrupt-<unix seconds>" (and the journal to
  // "checkpoint.journal.corrupt-<unix seconds>") and returns the new snapshot path, so the daemon
  // can start from an empty checkpoint and reconcile; returns "" when the checkpoint is fine.
  absl::StatusOr<std::string> QuarantineCorrupted();

  // Compact folds the journal into a new snapshot now and clears it.
  absl::Status Compact();

  // path is the snapshot; journal_path the journal; lock_path the lock file.
  const std::string& path() const { return path_; }
  const std::string& journal_path() const { return journal_path_; }
  const std::string& lock_path() const { return lock_path_; }

 private:
  explicit CheckpointStore(StoreOptions options);

  class Lock;
  absl::StatusOr<Lock> Acquire();
  absl::Status OpenJournalLocked();
  // CurrentLocked brings cache_ up to date and returns it (valid until the lock is released or
  // the next write); LoadLocked returns a copy.
  absl::StatusOr<const Checkpoint*> CurrentLocked();
  absl::StatusOr<Checkpoint> LoadLocked();
  void LogTorn(const JournalReplay& replay);
  absl::Status UpdateImpl(const std::function<absl::Status(Checkpoint&)>& mutate, bool sync);
  absl::Status ApplyImpl(JournalChange change, bool sync);
  // WriteChangeLocked records `change` over cache_ (current, from CurrentLocked) and applies it
  // to cache_ in place.
  absl::Status WriteChangeLocked(JournalChange change, bool sync);
  absl::Status CompactLocked(Checkpoint checkpoint);
  absl::Status ClearJournalLocked(std::uint64_t bytes);
  void MaybeCompactLater(bool now);
  void FlushLater();
  void StartBackgroundLocked();
  void RunCompactor();

  StoreOptions options_;
  cdi::FileSystem& fs_;
  std::string path_;
  std::string journal_path_;
  std::string lock_path_;
  std::mutex mu_;  // serializes this process's threads before the flock

  // FileId identifies one version of the snapshot file (a rewrite is a new inode and ctime).
  struct FileId {
    bool exists = false;
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const FileId&) const = default;
  };
  FileId SnapshotId() const;

  // Valid under the lock after LoadLocked.
  std::optional<Checkpoint> cache_;  // the state at journal_seq_ / journal_end_
  FileId cached_snapshot_;           // the snapshot cache_ was built on
  int journal_fd_ = -1;
  std::uint64_t journal_size_ = 0;
  std::uint64_t journal_end_ = 0;      // where the next record goes
  std::uint64_t journal_seq_ = 0;      // last sequence number (snapshot's or journal's)
  bool journal_torn_ = false;          // an unreadable last record sits at journal_end_
  bool unsynced_ = false;              // a record was written by UpdateDeferred, not synced
  // Records another process (a rolling-update twin) appended since our last sync: they may be
  // its deferred, unsynced ones (Flush syncs them too).
  bool foreign_records_ = false;
  // Every record up to this sequence number is known to be on the disk (our syncs, snapshots):
  // written into each record (journal.h), so replay can tell a power cut from damage.
  std::uint64_t synced_seq_ = 0;
  // Counts journal reopenings and compactions: a Flush that ran outside the lock only counts
  // for the journal it started on.
  std::uint64_t journal_generation_ = 0;
  std::uint64_t logged_torn_at_ = ~std::uint64_t{0};  // torn tail already logged at this offset

  std::mutex compactor_mu_;
  std::condition_variable compactor_cv_;
  std::thread compactor_;
  bool compact_requested_ = false;
  bool flush_requested_ = false;
  bool compact_now_ = false;  // past the hard limit: do not wait for a quiet moment
  std::chrono::steady_clock::time_point last_change_;
  bool stopping_ = false;
};

}  // namespace devlet::state
