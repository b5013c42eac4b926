// File: devlet/cdi/file_system.h
//
// A file-system seam for the writers in cdi/ and state/, so tests can inject a failure (ENOSPC,
// EIO, a crash) at any step of an atomic write, and the atomic write itself:
//
//   DEVLET_RETURN_IF_ERROR(devlet::cdi::WriteFileAtomically(
//       devlet::cdi::RealFileSystem(), "/var/run/cdi/x.json", text, {.mode = 0644}));
//
// WriteFileAtomically: create a temp file ".<base>.<random>.tmp" in the target's directory, write,
// fsync, close, rename(2) over the target, fsync the directory. A failure at any step leaves the
// old file intact; the temp file is removed when possible, and RemoveTempFiles removes the ones a
// crash left behind. Temp names never end in ".json" or ".yaml", so CDI watchers ignore them.
//
// (This would sit naturally in common/; it lives here until common/ grows atomic file writes.)
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace devlet::cdi {

// DirEntry is one directory entry from FileSystem::ListDir.
struct DirEntry {
  std::string name;
  bool is_regular = false;  // a regular file (symbolic links are followed)
  bool is_directory = false;
};

// FileSystem is the set of file operations the writers use. Every error is a Status whose
// message names the path; a missing path is kNotFound. Implementations must be thread-safe.
class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // ReadFile returns the whole contents of `path`.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // CreateTempFile creates and opens a new file `dir/<prefix><random><suffix>` with `mode`;
  // returns the descriptor and sets `*path`.
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
  // ListDir lists `dir` (without "." and ".."), sorted by name.
  virtual absl::StatusOr<std::vector<DirEntry>> ListDir(const std::string& dir) = 0;
  // MakeDirs creates `dir` and its missing parents with `mode`; an existing directory is OK.
  virtual absl::Status MakeDirs(const std::string& dir, mode_t mode) = 0;

  // In-place writers (state/'s journal overwrites a preallocated file instead of replacing it):
  // OpenFile opens an existing file read-write; ReadAt reads up to `size` bytes at `offset`
  // (fewer at the end of the file); WriteAt writes all of `data` at `offset`; DataSync is
  // fdatasync(2), which skips the metadata flush when the file's size and blocks are unchanged.
  virtual absl::StatusOr<int> OpenFile(const std::string& path) = 0;
  virtual absl::StatusOr<std::string> ReadAt(int fd, std::uint64_t offset, std::size_t size,
                                             const std::string& path) = 0;
  virtual absl::Status WriteAt(int fd, std::string_view data, std::uint64_t offset,
                               const std::string& path) = 0;
  virtual absl::Status DataSync(int fd, const std::string& path) = 0;
};

// RealFileSystem returns the process-wide POSIX implementation.
FileSystem& RealFileSystem();

// AtomicWriteOptions tunes WriteFileAtomically.
struct AtomicWriteOptions {
  mode_t mode = 0644;        // mode of the new file
  mode_t dir_mode = 0755;    // mode of directories created for it
  bool create_dirs = true;   // create missing parent directories
  // fsync the file before the rename and the directory after it. Without it the rename is still
  // atomic for every reader and survives the writer's crash (kill -9: the page cache stays), but
  // after a power loss or kernel crash the file may be missing, old, or empty. Only for derived
  // files that a later step re-checks and rewrites (transient CDI specs regenerated from the
  // checkpoint); the checkpoint itself is always synced.
  bool sync = true;
};

// WriteFileAtomically replaces `path` with `data` (see the file comment). On error the previous
// contents of `path`, if any, are untouched.
absl::Status WriteFileAtomically(FileSystem& fs, const std::string& path, std::string_view data,
                                 const AtomicWriteOptions& options = {});

// RemoveTempFiles removes the temp files that WriteFileAtomically leaves behind when the process
// dies mid-write: in `dir`, names ".<base>.*.tmp" for any `base` starting with `base_prefix`.
// Returns how many it removed.
absl::StatusOr<int> RemoveTempFiles(FileSystem& fs, const std::string& dir,
                                    std::string_view base_prefix);

}  // namespace devlet::cdi
