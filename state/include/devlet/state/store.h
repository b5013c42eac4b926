// File: devlet/state/store.h
//
// CheckpointStore keeps the Checkpoint in `<dir>/checkpoint.json`, guarded by an flock(2) on
// `<dir>/checkpoint.lock` (so a rolling-update twin process and both plugins in this process
// serialize), and rewritten atomically (temp file, fsync, rename, fsync dir) on every change.
// Every call re-reads the file: there is no cross-call cache, so another process's writes are
// seen.
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
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/cdi/file_system.h"
#include "devlet/state/checkpoint.h"

namespace devlet::state {

// StoreOptions configures a CheckpointStore.
struct StoreOptions {
  std::string dir;                                   // e.g. /var/lib/kubelet/plugins/<driver>
  cdi::FileSystem* fs = nullptr;                     // nullptr: cdi::RealFileSystem()
  std::chrono::milliseconds lock_timeout{10000};     // how long to wait for the flock
};

// CheckpointStore is the checkpoint file and its lock. Thread-safe.
class CheckpointStore {
 public:
  // Open creates `dir` (0700) if needed and removes temp files a crash left behind.
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(StoreOptions options);

  // Load returns the current checkpoint (empty when the file does not exist yet).
  absl::StatusOr<Checkpoint> Load();

  // Update runs `mutate` on the current checkpoint under the lock and writes the result; if
  // `mutate` fails nothing is written.
  absl::Status Update(const std::function<absl::Status(Checkpoint&)>& mutate);

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

  // QuarantineCorrupted renames a checkpoint that does not decode to
  // "checkpoint.json.corrupt-<unix seconds>" and returns the new path, so the daemon can start
  // from an empty checkpoint and reconcile; returns "" when the checkpoint is fine or missing.
  absl::StatusOr<std::string> QuarantineCorrupted();

  // path is the checkpoint file; lock_path the lock file.
  const std::string& path() const { return path_; }
  const std::string& lock_path() const { return lock_path_; }

 private:
  explicit CheckpointStore(StoreOptions options);

  class Lock;
  absl::StatusOr<Lock> Acquire();
  absl::StatusOr<Checkpoint> LoadLocked();
  absl::Status SaveLocked(const Checkpoint& checkpoint);

  StoreOptions options_;
  cdi::FileSystem& fs_;
  std::string path_;
  std::string lock_path_;
  std::mutex mu_;  // serializes this process's threads before the flock
};

}  // namespace devlet::state
