// File: devlet/cdi/file_system.h
//
// A file-system seam for the writers in cdi/ and state/, so tests can inject a failure (ENOSPC,
// EIO, a crash) at any step of an atomic write or of the journal's in-place writes:
//
//   DEVLET_RETURN_IF_ERROR(devlet::cdi::WriteFileAtomically(
//       devlet::cdi::RealFileSystem(), "/var/run/cdi/x.json", text, {.mode = 0644}));
//
// The atomic write itself is common/'s (devlet::WriteFileAtomically, files.h): FileSystem is its
// AtomicWriteOps plus the reads, listings and in-place writes the stores need, and
// WriteFileAtomically here runs common's algorithm over `fs`. RemoveTempFiles removes the temp
// files (".<base>.<random>.tmp") a crash left behind.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/common/files.h"

namespace devlet::cdi {

// DirEntry is one directory entry from FileSystem::ListDir.
struct DirEntry {
  std::string name;
  bool is_regular = false;  // a regular file (symbolic links are followed)
  bool is_directory = false;
};

// FileSystem is the set of file operations the writers use: common/'s atomic-write steps
// (CreateTempFile, Write, Sync, Close, Rename, SyncDir, Remove, MakeDirs) and the ones below.
// Every error is a Status whose message names the path; a missing path is kNotFound.
// Implementations must be thread-safe.
class FileSystem : public ::devlet::AtomicWriteOps {
 public:
  // ReadFile returns the whole contents of `path`.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // ListDir lists `dir` (without "." and ".."), sorted by name.
  virtual absl::StatusOr<std::vector<DirEntry>> ListDir(const std::string& dir) = 0;

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

// AtomicWriteOptions are common/'s (files.h). Note create_dirs defaults to false there.
using AtomicWriteOptions = ::devlet::AtomicWriteOptions;

// WriteFileAtomically is devlet::WriteFileAtomically with its steps run on `fs`.
inline absl::Status WriteFileAtomically(FileSystem& fs, const std::string& path,
                                        std::string_view data,
                                        const AtomicWriteOptions& options = {}) {
  return ::devlet::WriteFileAtomically(path, data, options, fs);
}

// RemoveTempFiles removes the temp files that WriteFileAtomically leaves behind when the process
// dies mid-write: in `dir`, names ".<base>.*.tmp" for any `base` starting with `base_prefix`.
// Returns how many it removed.
absl::StatusOr<int> RemoveTempFiles(FileSystem& fs, const std::string& dir,
                                    std::string_view base_prefix);

}  // namespace devlet::cdi
