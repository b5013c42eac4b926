#include "devlet/state/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <thread>
#include <utility>

#include "devlet/common/status.h"

namespace devlet::state {
namespace {

constexpr char kFileName[] = "checkpoint.json";
constexpr char kLockName[] = "checkpoint.lock";

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

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
      lock_path_(options_.dir + "/" + kLockName) {}

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Open(StoreOptions options) {
  if (options.dir.empty()) return InvalidArgument("checkpoint directory: empty path");
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  std::unique_ptr<CheckpointStore> store(new CheckpointStore(std::move(options)));
  DEVLET_RETURN_IF_ERROR(WithContext(store->fs_.MakeDirs(store->options_.dir, 0700),
                                     "create checkpoint directory"));
  DEVLET_ASSIGN_OR_RETURN(Lock lock, store->Acquire());
  DEVLET_RETURN_IF_ERROR(
      WithContext(cdi::RemoveTempFiles(store->fs_, store->options_.dir, kFileName).status(),
                  "remove leaked checkpoint temp files"));
  return store;
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

absl::StatusOr<Checkpoint> CheckpointStore::LoadLocked() {
  absl::StatusOr<std::string> data = fs_.ReadFile(path_);
  if (!data.ok()) {
    if (absl::IsNotFound(data.status())) return Checkpoint{};
    return WithContext(data.status(), "read checkpoint");
  }
  return DecodeCheckpoint(*data, path_);
}

absl::Status CheckpointStore::SaveLocked(const Checkpoint& checkpoint) {
  return WithContext(
      cdi::WriteFileAtomically(fs_, path_, EncodeCheckpoint(checkpoint),
                               {.mode = 0600, .dir_mode = 0700}),
      "save checkpoint");
}

absl::StatusOr<Checkpoint> CheckpointStore::Load() {
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  return LoadLocked();
}

absl::Status CheckpointStore::Update(const std::function<absl::Status(Checkpoint&)>& mutate) {
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  DEVLET_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadLocked());
  DEVLET_RETURN_IF_ERROR(mutate(checkpoint));
  return SaveLocked(checkpoint);
}

absl::Status CheckpointStore::RecordPrepareStarted(PreparedClaim claim) {
  if (claim.uid.empty()) return InvalidArgument("record claim: empty claim UID");
  claim.state = ClaimState::kPrepareStarted;
  return Update([&](Checkpoint& c) {
    c.claims[claim.uid] = claim;
    return absl::OkStatus();
  });
}

absl::Status CheckpointStore::RecordPrepareCompleted(PreparedClaim claim) {
  if (claim.uid.empty()) return InvalidArgument("record claim: empty claim UID");
  claim.state = ClaimState::kPrepareCompleted;
  return Update([&](Checkpoint& c) {
    c.claims[claim.uid] = claim;
    return absl::OkStatus();
  });
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
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  DEVLET_ASSIGN_OR_RETURN(Checkpoint checkpoint, LoadLocked());
  if (checkpoint.claims.erase(claim_uid) == 0) return absl::OkStatus();
  return SaveLocked(checkpoint);
}

absl::StatusOr<std::optional<PreparedClaim>> CheckpointStore::FindClaim(
    const std::string& claim_uid) {
  DEVLET_ASSIGN_OR_RETURN(Checkpoint checkpoint, Load());
  auto it = checkpoint.claims.find(claim_uid);
  if (it == checkpoint.claims.end()) return std::optional<PreparedClaim>();
  return std::optional<PreparedClaim>(std::move(it->second));
}

absl::StatusOr<std::vector<PreparedClaim>> CheckpointStore::FindByPod(const std::string& pod_uid) {
  DEVLET_ASSIGN_OR_RETURN(Checkpoint checkpoint, Load());
  std::vector<PreparedClaim> out;
  for (auto& [uid, claim] : checkpoint.claims) {
    if (std::find(claim.pod_uids.begin(), claim.pod_uids.end(), pod_uid) != claim.pod_uids.end()) {
      out.push_back(std::move(claim));
    }
  }
  return out;
}

absl::StatusOr<std::string> CheckpointStore::QuarantineCorrupted() {
  DEVLET_ASSIGN_OR_RETURN(Lock lock, Acquire());
  absl::StatusOr<Checkpoint> current = LoadLocked();
  if (current.ok() || current.status().code() != absl::StatusCode::kDataLoss) {
    DEVLET_RETURN_IF_ERROR(current.status());
    return std::string();
  }
  const std::string target = path_ + ".corrupt-" + std::to_string(std::time(nullptr));
  DEVLET_RETURN_IF_ERROR(WithContext(fs_.Rename(path_, target), "quarantine checkpoint"));
  DEVLET_RETURN_IF_ERROR(fs_.SyncDir(options_.dir));
  return target;
}

}  // namespace devlet::state
