// File: devlet/cdi/testing/faulty_file_system.h
//
// A cdi::FileSystem for tests that fails the N-th write-side step (or "crashes" there), to prove
// that atomic writes leave the old or the new file, never garbage:
//
//   devlet::cdi::testing::FaultyFileSystem faulty;
//   faulty.fail_at = 2;       // the third step: CreateTempFile=0, Write=1, Sync=2, ...
//   faulty.crash = true;      // ...and every step after it fails too (no cleanup)
//   EXPECT_FALSE(WriteSpec(dir, name, spec, {.fs = &faulty}).ok());
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#include "devlet/cdi/file_system.h"
#include "devlet/cdi/testing/forwarding_file_system.h"
#include "devlet/common/status.h"

namespace devlet::cdi::testing {

// FaultyFileSystem forwards to the real one and fails the `fail_at`-th write-side operation
// (CreateTempFile, Write, Sync, Close, Rename, SyncDir, Remove, WriteAt, DataSync) with ENOSPC;
// the read-side ones pass straight through (ForwardingFileSystem).
// With `crash`, the failing Write or WriteAt first writes half its data (a torn write), and every
// later operation fails too: the process "died" there and cleans nothing up.
class FaultyFileSystem final : public ForwardingFileSystem {
 public:
  // Steps may come from a store's background thread too (its sync runs outside its lock).
  std::atomic<int> fail_at{-1};   // index of the step that fails; -1: none
  bool crash = false;             // after the failure, every step fails (the process "died")
  std::atomic<int> count{0};      // write-side steps seen so far
  std::atomic<bool> dead{false};  // set once a crash happened
  // Sync, SyncDir and DataSync calls that reached the real file system (atomic: a store may sync
  // from its background thread).
  std::atomic<int> syncs{0};

  absl::StatusOr<int> CreateTempFile(const std::string& dir, const std::string& prefix,
                                     const std::string& suffix, mode_t mode,
                                     std::string* path) override {
    DEVLET_RETURN_IF_ERROR(Step("create temp in " + dir));
    return inner().CreateTempFile(dir, prefix, suffix, mode, path);
  }
  absl::Status Write(int fd, std::string_view data, const std::string& path) override {
    if (absl::Status s = Step("write " + path); !s.ok()) {
      if (crash) (void)inner().Write(fd, data.substr(0, data.size() / 2), path);
      return s;
    }
    return inner().Write(fd, data, path);
  }
  absl::Status Sync(int fd, const std::string& path) override {
    DEVLET_RETURN_IF_ERROR(Step("fsync " + path));
    ++syncs;
    return inner().Sync(fd, path);
  }
  absl::Status Close(int fd, const std::string& path) override {
    if (absl::Status s = Step("close " + path); !s.ok()) {
      (void)inner().Close(fd, path);  // a failed close(2) still releases the descriptor
      return s;
    }
    return inner().Close(fd, path);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    DEVLET_RETURN_IF_ERROR(Step("rename " + from));
    return inner().Rename(from, to);
  }
  absl::Status SyncDir(const std::string& dir) override {
    DEVLET_RETURN_IF_ERROR(Step("fsync dir " + dir));
    ++syncs;
    return inner().SyncDir(dir);
  }
  absl::Status Remove(const std::string& path) override {
    DEVLET_RETURN_IF_ERROR(Step("remove " + path));
    return inner().Remove(path);
  }
  absl::Status WriteAt(int fd, std::string_view data, std::uint64_t offset,
                       const std::string& path) override {
    const bool was_dead = dead;
    if (absl::Status s = Step("write " + path); !s.ok()) {
      // Torn: the write that "crashed" got half-way; a dead process writes nothing more.
      if (crash && !was_dead) {
        (void)inner().WriteAt(fd, data.substr(0, data.size() / 2), offset, path);
      }
      return s;
    }
    return inner().WriteAt(fd, data, offset, path);
  }
  absl::Status DataSync(int fd, const std::string& path) override {
    DEVLET_RETURN_IF_ERROR(Step("fdatasync " + path));
    ++syncs;
    return inner().DataSync(fd, path);
  }

 private:
  absl::Status Step(const std::string& what) {
    if (dead) return Aborted("process is dead: " + what);
    if (count++ == fail_at) {
      if (crash) dead = true;
      return ErrnoToStatus(ENOSPC, what);
    }
    return absl::OkStatus();
  }
};

}  // namespace devlet::cdi::testing
