// File: devlet/common/files.h
//
// Crash-safe file helpers on the real file system: the one atomic writer of devlet. Every file
// devlet owns on the host (checkpoint snapshot and journal, CDI specs, device-metadata files,
// manifests, the SR-IOV ledger) is replaced atomically, so a reader or a restart after SIGKILL
// or power loss sees either the old or the new content, never a mix:
//
//   DEVLET_RETURN_IF_ERROR(WriteFileAtomically(path, spec_json, 0644));
//   DEVLET_RETURN_IF_ERROR(WriteFileAtomically(path, text, {.mode = 0600, .create_dirs = true}));
//   DEVLET_ASSIGN_OR_RETURN(std::optional<std::string> old, ReadFileIfExists(path));
//
// The steps go through AtomicWriteOps, so a test can fail or "crash" any one of them (cdi::
// FileSystem extends it with the reads and in-place writes that state/'s journal needs).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet {

// AtomicWriteOps are the steps of an atomic write. Every error is a Status whose message names
// the path; a missing path is kNotFound. Implementations must be thread-safe.
class AtomicWriteOps {
 public:
  virtual ~AtomicWriteOps() = default;

  // CreateTempFile creates and opens a new file `dir/<prefix><random><suffix>` with `mode` (not
  // filtered by the umask); returns the descriptor and sets `*path`.
  virtual absl::StatusOr<int> CreateTempFile(const std::string& dir, const std::string& prefix,
                                             const std::string& suffix, mode_t mode,
                                             std::string* path) = 0;
  // Write writes all of `data` to `fd` (`path` is for messages).
  virtual absl::Status Write(int fd, std::string_view data, const std::string& path) = 0;
  // Sync flushes `fd` to stable storage (fsync).
  virtual absl::Status Sync(int fd, const std::string& path) = 0;
  // Close closes `fd`.
  virtual absl::Status Close(int fd, const std::string& path) = 0;
  // Rename atomically replaces `to` with `from` (rename(2)).
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  // SyncDir fsyncs the directory `dir`, making renames and removals in it durable.
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  // Remove unlinks the file `path`.
  virtual absl::Status Remove(const std::string& path) = 0;
  // MakeDirs creates `dir` and its missing parents with `mode`; an existing directory is OK.
  virtual absl::Status MakeDirs(const std::string& dir, mode_t mode) = 0;
};

// PosixAtomicWriteOps returns the process-wide implementation on the real file system.
AtomicWriteOps& PosixAtomicWriteOps();

// AtomicWriteOptions tunes WriteFileAtomically.
struct AtomicWriteOptions {
  mode_t mode = 0644;         // mode of the new file
  mode_t dir_mode = 0755;     // mode of directories created for it
  bool create_dirs = false;   // create missing parent directories (else a missing one is kNotFound)
  // fsync the file before the rename and the directory after it. Without it the rename is still
  // atomic for every reader and survives the writer's crash (kill -9: the page cache stays), but
  // after a power loss or kernel crash the file may be missing, old, or empty. Only for derived
  // files that a later step re-checks and rewrites (transient CDI specs regenerated from the
  // checkpoint); the checkpoint itself is always synced.
  bool sync = true;
};

// WriteFileAtomically replaces `path` with `content`: it creates a temp file
// ".<base>.<random>.tmp" in the same directory (unique, so concurrent writers never share one;
// never ending in ".json" or ".yaml", so CDI watchers ignore it), writes, fsyncs, closes,
// renames it over `path` and fsyncs the directory. On failure the temp file is removed when
// possible and `path` is untouched; RemoveTempFiles removes what a crash left behind.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 const AtomicWriteOptions& options,
                                 AtomicWriteOps& ops = PosixAtomicWriteOps());

// WriteFileAtomically with `mode` and the other options at their defaults (the directory must
// exist; synced).
absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 mode_t mode = 0644);

// ReadFileIfExists returns the whole content of `path`, or nullopt when it does not exist; other
// errors (permission, I/O, a directory) are returned as such.
absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path);

}  // namespace devlet
