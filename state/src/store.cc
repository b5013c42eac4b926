#include "devlet/state/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <thread>
#include <utility>

#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/state/journal.h"

namespace devlet::state {
namespace {

constexpr char kFileName[] = "checkpoint.json";
constexpr char kJournalName[] = "checkpoint.journal";
constexpr char kLockName[] = "checkpoint.lock";

std::string Quote(std::string_view s) { return std::string(1, '"').append(s).append(1, '"'); }

}  // namespace

// Lock holds the flock on the lock file and this process's mutex.
class CheckpointStore::Lock {
 public:
  Lock(std::unique_lock<std::mutex> guard, int fd) : guard_(std::move(guard)), fd_(fd) {}
  Lock(Lock&& other) noexcept : guard_(std::move(other.guard_)), fd_(std::exchange(other.fd_, -1)) {}
  Lock& operator=(Lock&&) = delete;
  ~Lock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }

 private:
  std::unique_lock<std::mutex> guard_;
  int fd_;
};

CheckpointStore::CheckpointStore(StoreOptions options)
    : options_(std::move(options)),
      fs_(options_.fs != nullptr ? *options_.fs : cdi::RealFileSystem()),
      path_(options_.dir + "/" + kFileName),
      journal_path_(options_.dir + "/" + kJournalName),
      lock_path_(options_.dir + "/" + kLockName) {}

CheckpointStore::~CheckpointStore() {
  {
    std::lock_guard guard(compactor_mu_);
    stopping_ = true;
  }
  compactor_cv_.notify_all();
  if (compactor_.joinable()) compactor_.join();
  if (journal_fd_ >= 0) {
    if (unsynced_) ::fdatasync(journal_fd_);  // best effort: a deferred record not yet synced
    ::close(journal_fd_);
  }
}

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Open(StoreOptions options) {
  if (options.dir.empty()) return InvalidArgument("checkpoint directory: empty path");
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  std::unique_ptr<CheckpointStore> store(new CheckpointStore(std::move(options)));
  DEVLET_RETURN_IF_ERROR(WithContext(store->fs_.MakeDirs(store->options_.dir, 0700),
                                     "create checkpoint directory"));
  DEVLET_ASSIGN_OR_RETURN(Lock lock, store->Acquire());
  DEVLET_RETURN_IF_ERROR(
      WithContext(cdi::RemoveTempFiles(store->fs_, store->options_.dir, "checkpoint.").status(),
                  "remove leaked checkpoint temp files"));
  DEVLET_RETURN_IF_ERROR(store->OpenJournalLocked());
  // Fold whatever the journal holds into a fresh snapshot (written in the current version), so
  // that appends start on a journal of zeros. A corrupted checkpoint is left as it is: every
  // call reports it until QuarantineCorrupted.
  absl::StatusOr<Checkpoint> current = store->LoadLocked();
  if (current.ok()) {
    DEVLET_RETURN_IF_ERROR(store->CompactLocked(*std::move(current)));
  } else if (current.status().code() != absl::StatusCode::kDataLoss &&
             current.status().code() != absl::StatusCode::kFailedPrecondition) {
    return current.status();
  }
  return store;
}

absl::Status CheckpointStore::OpenJournalLocked() {
  ++journal_generation_;
  if (journal_fd_ >= 0) {
    ::close(journal_fd_);
    journal_fd_ = -1;
  }
  const bool exists = ::access(journal_path_.c_str(), F_OK) == 0;
  if (options_.journal_bytes == 0) {
    if (!exists) return absl::OkStatus();
    // Journal switched off: fold an earlier run's journal in, then remove it.
    DEVLET_ASSIGN_OR_RETURN(journal_fd_, fs_.OpenFile(journal_path_));
    struct stat st{};
    if (::fstat(journal_fd_, &st) != 0) return ErrnoToStatus(errno, "stat " + journal_path_);
    journal_size_ = static_cast<std::uint64_t>(st.st_size);
    DEVLET_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadLocked());
    ::close(journal_fd_);
    journal_fd_ = -1;
    DEVLET_RETURN_IF_ERROR(CompactLocked(std::move(checkpoint)));
    DEVLET_RETURN_IF_ERROR(WithContext(fs_.Remove(journal_path_), "remove the checkpoint journal"));
    return fs_.SyncDir(options_.dir);
  }
  if (!exists) {
    DEVLET_RETURN_IF_ERROR(WithContext(
        cdi::WriteFileAtomically(fs_, journal_path_,
                                 std::string(static_cast<std::size_t>(options_.journal_bytes), '\0'),
                                 {.mode = 0600, .dir_mode = 0700, .create_dirs = true}),
        "create the checkpoint journal"));
  }
  DEVLET_ASSIGN_OR_RETURN(journal_fd_, fs_.OpenFile(journal_path_));
  struct stat st{};
  if (::fstat(journal_fd_, &st) != 0) return ErrnoToStatus(errno, "stat " + journal_path_);
  journal_size_ = static_cast<std::uint64_t>(st.st_size);
  return absl::OkStatus();
}

absl::StatusOr<CheckpointStore::Lock> CheckpointStore::Acquire() {
  std::unique_lock<std::mutex> guard(mu_);
  const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoToStatus(errno, "open checkpoint lock " + Quote(lock_path_));
  const auto deadline = std::chrono::steady_clock::now() + options_.lock_timeout;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    const int error = errno;
    if (error == EINTR) continue;
    if (error != EWOULDBLOCK) {
      ::close(fd);
      return ErrnoToStatus(error, "lock " + Quote(lock_path_));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      return DeadlineExceeded("timed out after " +
                              std::to_string(options_.lock_timeout.count()) +
                              " ms waiting for the checkpoint lock " + Quote(lock_path_) +
                              " (another devlet process holds it)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Lock(std::move(guard), fd);
}

CheckpointStore::FileId CheckpointStore::SnapshotId() const {
  FileId id;
  struct stat st{};
  if (::stat(path_.c_str(), &st) != 0) return id;
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = static_cast<std::uint64_t>(st.st_size);
  id.mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
  id.ctime_ns = st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
  return id;
}

absl::StatusOr<const Checkpoint*> CheckpointStore::CurrentLocked() {
  if (journal_fd_ >= 0) {
    // Another process may have quarantined the journal and started a new one.
    struct stat open_st{}, path_st{};
    if (::fstat(journal_fd_, &open_st) != 0 || ::stat(journal_path_.c_str(), &path_st) != 0 ||
        open_st.st_ino != path_st.st_ino || open_st.st_dev != path_st.st_dev) {
      cache_.reset();
      DEVLET_RETURN_IF_ERROR(OpenJournalLocked());
    }
  }
  const FileId id = SnapshotId();
  const auto read = [&](std::uint64_t offset, std::size_t size) {
    return fs_.ReadAt(journal_fd_, offset, size, journal_path_);
  };
  if (cache_ && id == cached_snapshot_ && !journal_torn_) {
    // Same snapshot: only records appended since the last call (by any process) are new.
    if (journal_fd_ < 0) return &*cache_;
    absl::StatusOr<JournalReplay> replay =
        ReplayJournal(read, journal_size_, journal_seq_, *cache_, journal_path_, journal_end_);
    if (!replay.ok()) {
      cache_.reset();
      return replay.status();
    }
    journal_seq_ = replay->last_seq;
    journal_end_ = replay->end;
    journal_torn_ = !replay->torn_tail.empty();
    if (replay->applied > 0) foreign_records_ = true;  // ours advance journal_end_ past them
    if (journal_torn_) LogTorn(*replay);
    return &*cache_;
  }

  cache_.reset();
  Checkpoint checkpoint;
  std::uint64_t seq = 0;
  absl::StatusOr<std::string> data = fs_.ReadFile(path_);
  if (data.ok()) {
    DEVLET_ASSIGN_OR_RETURN(checkpoint, DecodeCheckpoint(*data, path_, &seq));
  } else if (!absl::IsNotFound(data.status())) {
    return WithContext(data.status(), "read checkpoint");
  }
  journal_seq_ = seq;
  synced_seq_ = seq;  // a snapshot is written synced; the journal's records may not be
  journal_end_ = 0;
  journal_torn_ = false;
  if (journal_fd_ >= 0) {
    DEVLET_ASSIGN_OR_RETURN(JournalReplay replay,
                            ReplayJournal(read, journal_size_, seq, checkpoint, journal_path_));
    journal_seq_ = replay.last_seq;
    journal_end_ = replay.end;
    journal_torn_ = !replay.torn_tail.empty();
    // Records after a snapshot we did not write, or from an earlier run: maybe not synced.
    if (replay.applied > 0) foreign_records_ = true;
    if (journal_torn_) LogTorn(replay);
  }
  cache_ = std::move(checkpoint);
  cached_snapshot_ = id;
  return &*cache_;
}

absl::StatusOr<Checkpoint> CheckpointStore::LoadLocked() {
  DEVLET_ASSIGN_OR_RETURN(const Checkpoint* current, CurrentLocked());
  return *current;
}

void CheckpointStore::LogTorn(const JournalReplay& replay) {
  if (logged_torn_at_ == replay.end) return;
  logged_torn_at_ = replay.end;
  log::Logger().Warning("Ignoring a torn last record of the checkpoint journal: a write was cut "
                        "short by a crash and never acknowledged",
                        "journal", journal_path_, "reason", replay.torn_tail, "lastSeq",
                        replay.last_seq);
}

absl::Status CheckpointStore::WriteChangeLocked(JournalChange change, bool sync) {
  if (change.empty()) return absl::OkStatus();
  const auto compact_with_change = [&]() -> absl::Status {
    Checkpoint after = *cache_;
    ApplyJournalChange(after, std::move(change));
    return CompactLocked(std::move(after));
  };
  if (journal_fd_ < 0) return compact_with_change();
  // No flush of earlier unsynced records first (ours or a rolling-update twin's): the record
  // says how far the journal was synced, so replay can tell a power cut inside the flush that
  // carries both (keeping this record, tearing an earlier one) from damage.
  const std::string record = EncodeJournalRecord(journal_seq_ + 1, synced_seq_, change);
  if (journal_torn_ || journal_end_ + record.size() > journal_size_) {
    // No room (or a torn record to clear first): the change goes into a new snapshot.
    return compact_with_change();
  }
  absl::Status status = fs_.WriteAt(journal_fd_, record, journal_end_, journal_path_);
  if (status.ok() && sync) status = fs_.DataSync(journal_fd_, journal_path_);
  if (!status.ok()) {
    // Not acknowledged: make sure no reader takes the record as written (best effort; if this
    // fails too, the record is either complete and valid or torn, and both are consistent).
    (void)fs_.WriteAt(journal_fd_, std::string(kJournalHeaderSize, '\0'), journal_end_,
                      journal_path_);
    cache_.reset();
    return WithContext(status, "append to the checkpoint journal");
  }
  journal_end_ += record.size();
  ++journal_seq_;
  if (sync) synced_seq_ = journal_seq_;  // fdatasync carried every earlier record too
  ApplyJournalChange(*cache_, std::move(change));
  if (!sync) {
    unsynced_ = true;
    if (options_.background_compaction) FlushLater();
  }
  if (journal_end_ > options_.compact_after_bytes) {
    if (options_.background_compaction) {
      MaybeCompactLater(journal_end_ > journal_size_ / 4 * 3);
    } else if (absl::Status compacted = CompactLocked(*cache_); !compacted.ok()) {
      // The change itself is durable in the journal; compaction is retried with the next one.
      log::Logger().Error(compacted, "Compacting the checkpoint journal failed", "journal",
                          journal_path_);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckpointStore::CompactLocked(Checkpoint checkpoint) {
  cache_.reset();
  DEVLET_RETURN_IF_ERROR(WithContext(
      cdi::WriteFileAtomically(fs_, path_, EncodeCheckpoint(checkpoint, journal_seq_),
                               {.mode = 0600, .dir_mode = 0700, .create_dirs = true}),
      "save checkpoint"));
  if (journal_fd_ >= 0) {
    // The snapshot holds everything up to journal_seq_: records left in the journal by a crash
    // from here on are skipped on replay, so clearing it needs no ordering with the rename.
    DEVLET_RETURN_IF_ERROR(ClearJournalLocked(journal_torn_ ? journal_size_ : journal_end_));
  }
  unsynced_ = false;  // the snapshot holds every change, synced
  foreign_records_ = false;
  synced_seq_ = journal_seq_;
  ++journal_generation_;
  cache_ = std::move(checkpoint);
  cached_snapshot_ = SnapshotId();
  return absl::OkStatus();
}

absl::Status CheckpointStore::ClearJournalLocked(std::uint64_t bytes) {
  // Also clear anything an earlier crash left beyond the end (records of an older snapshot,
  // partly zeroed), so that replay always ends at the first block of zeros.
  std::uint64_t dirty = std::min(bytes, journal_size_);
  constexpr std::size_t kChunk = 1 << 20;
  for (std::uint64_t offset = dirty; offset < journal_size_; offset += kChunk) {
    DEVLET_ASSIGN_OR_RETURN(std::string data, fs_.ReadAt(journal_fd_, offset, kChunk,
                                                         journal_path_));
    const std::size_t nonzero = data.find_last_not_of('\0');
    if (nonzero != std::string::npos) dirty = offset + nonzero + 1;
  }
  if (dirty > 0) {
    DEVLET_RETURN_IF_ERROR(WithContext(
        fs_.WriteAt(journal_fd_, std::string(static_cast<std::size_t>(dirty), '\0'), 0,
                    journal_path_),
        "clear the checkpoint journal"));
    DEVLET_RETURN_IF_ERROR(WithContext(fs_.DataSync(journal_fd_, journal_path_),
                                       "clear the checkpoint journal"));
  }
  journal_end_ = 0;
  journal_torn_ = false;
  return absl::OkStatus();
}

void CheckpointStore::StartBackgroundLocked() {
  if (!compactor_.joinable()) compactor_ = std::thread([this] { RunCompactor(); });
  compactor_cv_.notify_all();
}

void CheckpointStore::MaybeCompactLater(bool now) {
  std::lock_guard guard(compactor_mu_);
  compact_requested_ = true;
  compact_now_ = compact_now_ || now;
  last_change_ = std::chrono::steady_clock::now();
  StartBackgroundLocked();
}

void CheckpointStore::FlushLater() {
  std::lock_guard guard(compactor_mu_);
  flush_requested_ = true;
  StartBackgroundLocked();
}

void CheckpointStore::RunCompactor() {
  std::unique_lock guard(compactor_mu_);
  for (;;) {
    compactor_cv_.wait(guard,
                       [this] { return stopping_ || compact_requested_ || flush_requested_; });
    if (stopping_) return;
    if (flush_requested_) {
      // Deferred records are synced at once: the caller already has its answer.
      flush_requested_ = false;
      guard.unlock();
      absl::Status status = Flush();
      if (!status.ok()) {
        log::Logger().Error(status, "Syncing the checkpoint journal failed; retried with the "
                                    "next change", "journal", journal_path_);
      }
      guard.lock();
      continue;
    }
    // Wait for a quiet moment: no change for compact_idle (every change past the threshold
    // pushes last_change_), unless the journal is nearly full.
    while (!stopping_ && !compact_now_ && !flush_requested_) {
      const auto quiet_at = last_change_ + options_.compact_idle;
      if (std::chrono::steady_clock::now() >= quiet_at) break;
      compactor_cv_.wait_until(guard, quiet_at);
    }
    if (stopping_) return;
    if (flush_requested_) continue;  // sync first, then wait for quiet again
    compact_requested_ = false;
    compact_now_ = false;
    guard.unlock();
    absl::Status status = [this]() -> absl::Status {
      DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
      DEVLET_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadLocked());
      if (journal_end_ <= options_.compact_after_bytes) return absl::OkStatus();  // done already
      return CompactLocked(std::move(checkpoint));
    }();
    if (!status.ok()) {
      log::Logger().Error(status, "Compacting the checkpoint journal failed; retried after the "
                                  "next change", "journal", journal_path_);
    }
    guard.lock();
  }
}

absl::Status CheckpointStore::Compact() {
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  DEVLET_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadLocked());
  return CompactLocked(std::move(checkpoint));
}

absl::StatusOr<Checkpoint> CheckpointStore::Load() {
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  return LoadLocked();
}

absl::Status CheckpointStore::Update(const std::function<absl::Status(Checkpoint&)>& mutate) {
  return UpdateImpl(mutate, /*sync=*/true);
}

absl::Status CheckpointStore::UpdateDeferred(
    const std::function<absl::Status(Checkpoint&)>& mutate) {
  return UpdateImpl(mutate, /*sync=*/false);
}

absl::Status CheckpointStore::UpdateImpl(const std::function<absl::Status(Checkpoint&)>& mutate,
                                         bool sync) {
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  DEVLET_ASSIGN_OR_RETURN(const Checkpoint* before, CurrentLocked());
  Checkpoint after = *before;
  DEVLET_RETURN_IF_ERROR(mutate(after));
  return WriteChangeLocked(Diff(*before, after), sync);
}

absl::Status CheckpointStore::Apply(JournalChange change) {
  return ApplyImpl(std::move(change), /*sync=*/true);
}

absl::Status CheckpointStore::ApplyDeferred(JournalChange change) {
  return ApplyImpl(std::move(change), /*sync=*/false);
}

absl::Status CheckpointStore::ApplyImpl(JournalChange change, bool sync) {
  for (const PreparedClaim& claim : change.puts) {
    if (claim.uid.empty()) return InvalidArgument("record claim: empty claim UID");
  }
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  DEVLET_ASSIGN_OR_RETURN(const Checkpoint* current, CurrentLocked());
  // What would not change anything stays out of the record, as with Update. A put is compared
  // with the last put of its UID in this change, which is the one that counts.
  JournalChange needed;
  for (std::size_t i = 0; i < change.puts.size(); ++i) {
    PreparedClaim& claim = change.puts[i];
    const bool superseded =
        std::any_of(change.puts.begin() + static_cast<std::ptrdiff_t>(i) + 1, change.puts.end(),
                    [&](const PreparedClaim& later) { return later.uid == claim.uid; });
    if (superseded) continue;
    const bool deleted = std::find(change.deletes.begin(), change.deletes.end(), claim.uid) !=
                         change.deletes.end();
    if (deleted) continue;  // deletes follow puts
    auto it = current->claims.find(claim.uid);
    if (it != current->claims.end() && it->second == claim) continue;
    needed.puts.push_back(std::move(claim));
  }
  for (std::string& uid : change.deletes) {
    if (current->claims.count(uid) == 0) continue;
    if (std::find(needed.deletes.begin(), needed.deletes.end(), uid) != needed.deletes.end()) {
      continue;
    }
    needed.deletes.push_back(std::move(uid));
  }
  return WriteChangeLocked(std::move(needed), sync);
}

absl::Status CheckpointStore::Read(const std::function<void(const Checkpoint&)>& reader) {
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  DEVLET_ASSIGN_OR_RETURN(const Checkpoint* current, CurrentLocked());
  reader(*current);
  return absl::OkStatus();
}

absl::Status CheckpointStore::Flush() {
  // The flush runs outside the lock, on a duplicate of the descriptor (the store may close and
  // reopen its own meanwhile): writers append while it waits for the disk. fdatasync flushes
  // every dirty page of the file, whichever process wrote it, so every record written before it
  // starts is on the disk when it returns.
  int fd = -1;
  std::uint64_t target = 0;
  std::uint64_t generation = 0;
  {
    DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
    if ((!unsynced_ && !foreign_records_) || journal_fd_ < 0) return absl::OkStatus();
    fd = ::fcntl(journal_fd_, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return ErrnoToStatus(errno, "duplicate the checkpoint journal descriptor");
    target = journal_seq_;
    generation = journal_generation_;
  }
  absl::Status synced =
      WithContext(fs_.DataSync(fd, journal_path_), "sync the checkpoint journal");
  ::close(fd);
  DEVLET_RETURN_IF_ERROR(synced);
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  if (generation == journal_generation_) {
    synced_seq_ = std::max(synced_seq_, target);
    if (journal_seq_ == target) {
      unsynced_ = false;
      foreign_records_ = false;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckpointStore::RecordPrepareStarted(PreparedClaim claim) {
  if (claim.uid.empty()) return InvalidArgument("record claim: empty claim UID");
  claim.state = ClaimState::kPrepareStarted;
  return Apply({.puts = {std::move(claim)}});
}

absl::Status CheckpointStore::RecordPrepareCompleted(PreparedClaim claim) {
  if (claim.uid.empty()) return InvalidArgument("record claim: empty claim UID");
  claim.state = ClaimState::kPrepareCompleted;
  return Apply({.puts = {std::move(claim)}});
}

absl::Status CheckpointStore::AddPod(const std::string& claim_uid, const std::string& pod_uid) {
  return Update([&](Checkpoint& c) -> absl::Status {
    auto it = c.claims.find(claim_uid);
    if (it == c.claims.end()) {
      return NotFound("claim " + claim_uid + " is not in the checkpoint");
    }
    std::vector<std::string>& pods = it->second.pod_uids;
    if (std::find(pods.begin(), pods.end(), pod_uid) == pods.end()) pods.push_back(pod_uid);
    return absl::OkStatus();
  });
}

absl::Status CheckpointStore::Remove(const std::string& claim_uid) {
  return Apply({.deletes = {claim_uid}});
}

absl::StatusOr<std::optional<PreparedClaim>> CheckpointStore::FindClaim(
    const std::string& claim_uid) {
  std::optional<PreparedClaim> found;
  DEVLET_RETURN_IF_ERROR(Read([&](const Checkpoint& checkpoint) {
    if (auto it = checkpoint.claims.find(claim_uid); it != checkpoint.claims.end()) {
      found = it->second;
    }
  }));
  return found;
}

absl::StatusOr<std::vector<PreparedClaim>> CheckpointStore::FindByPod(const std::string& pod_uid) {
  std::vector<PreparedClaim> out;
  DEVLET_RETURN_IF_ERROR(Read([&](const Checkpoint& checkpoint) {
    for (const auto& [uid, claim] : checkpoint.claims) {
      if (std::find(claim.pod_uids.begin(), claim.pod_uids.end(), pod_uid) !=
          claim.pod_uids.end()) {
        out.push_back(claim);
      }
    }
  }));
  return out;
}

absl::StatusOr<std::vector<PreparedClaim>> CheckpointStore::FindForContainer(
    const std::string& pod_uid, const std::vector<std::string>& claim_uids) {
  std::vector<PreparedClaim> out;
  DEVLET_RETURN_IF_ERROR(Read([&](const Checkpoint& checkpoint) {
    for (const std::string& uid : claim_uids) {
      auto it = checkpoint.claims.find(uid);
      if (it == checkpoint.claims.end()) continue;
      const PreparedClaim& claim = it->second;
      if (claim.pod_group_uids.empty() &&
          std::find(claim.pod_uids.begin(), claim.pod_uids.end(), pod_uid) ==
              claim.pod_uids.end()) {
        continue;
      }
      out.push_back(claim);
    }
  }));
  return out;
}

absl::StatusOr<std::string> CheckpointStore::QuarantineCorrupted() {
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  absl::StatusOr<Checkpoint> current = LoadLocked();
  if (current.ok() || current.status().code() != absl::StatusCode::kDataLoss) {
    DEVLET_RETURN_IF_ERROR(current.status());
    return std::string();
  }
  const std::string suffix = ".corrupt-" + std::to_string(std::time(nullptr));
  std::string target;
  if (::access(path_.c_str(), F_OK) == 0) {
    target = path_ + suffix;
    DEVLET_RETURN_IF_ERROR(WithContext(fs_.Rename(path_, target), "quarantine checkpoint"));
  }
  if (::access(journal_path_.c_str(), F_OK) == 0) {
    const std::string journal_target = journal_path_ + suffix;
    DEVLET_RETURN_IF_ERROR(
        WithContext(fs_.Rename(journal_path_, journal_target), "quarantine checkpoint journal"));
    if (target.empty()) target = journal_target;
  }
  DEVLET_RETURN_IF_ERROR(fs_.SyncDir(options_.dir));
  // Start over with an empty snapshot and journal.
  DEVLET_RETURN_IF_ERROR(OpenJournalLocked());
  DEVLET_ASSIGN_OR_RETURN(Checkpoint empty, LoadLocked());
  DEVLET_RETURN_IF_ERROR(CompactLocked(std::move(empty)));
  return target;
}

}  // namespace devlet::state
