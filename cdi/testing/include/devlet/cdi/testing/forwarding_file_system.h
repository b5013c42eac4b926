// File: devlet/cdi/testing/forwarding_file_system.h
//
// A base for test file systems that change a few cdi::FileSystem steps and pass the rest through
// to another FileSystem (the real one by default). A subclass overrides only the steps it injects
// into and calls the base (or inner()) to run the step itself:
//
//   class FailingRename final : public devlet::cdi::testing::ForwardingFileSystem {
//    public:
//     absl::Status Rename(const std::string& from, const std::string& to) override {
//       if (to.ends_with("/checkpoint.json")) return devlet::Internal("injected");
//       return ForwardingFileSystem::Rename(from, to);
//     }
//   };
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/cdi/file_system.h"

namespace devlet::cdi::testing {

// ForwardingFileSystem forwards every FileSystem operation to `inner`, unchanged. It is as
// thread-safe as `inner` (RealFileSystem() is); what a subclass adds is the subclass's to guard.
class ForwardingFileSystem : public FileSystem {
 public:
  // `inner` must outlive this object.
  explicit ForwardingFileSystem(FileSystem& inner = RealFileSystem()) : inner_(inner) {}

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    return inner_.ReadFile(path);
  }
  absl::StatusOr<int> CreateTempFile(const std::string& dir, const std::string& prefix,
                                     const std::string& suffix, mode_t mode,
                                     std::string* path) override {
    return inner_.CreateTempFile(dir, prefix, suffix, mode, path);
  }
  absl::Status Write(int fd, std::string_view data, const std::string& path) override {
    return inner_.Write(fd, data, path);
  }
  absl::Status Sync(int fd, const std::string& path) override { return inner_.Sync(fd, path); }
  absl::Status Close(int fd, const std::string& path) override { return inner_.Close(fd, path); }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    return inner_.Rename(from, to);
  }
  absl::Status SyncDir(const std::string& dir) override { return inner_.SyncDir(dir); }
  absl::Status Remove(const std::string& path) override { return inner_.Remove(path); }
  absl::StatusOr<std::vector<DirEntry>> ListDir(const std::string& dir) override {
    return inner_.ListDir(dir);
  }
  absl::Status MakeDirs(const std::string& dir, mode_t mode) override {
    return inner_.MakeDirs(dir, mode);
  }
  absl::StatusOr<int> OpenFile(const std::string& path) override { return inner_.OpenFile(path); }
  absl::StatusOr<std::string> ReadAt(int fd, std::uint64_t offset, std::size_t size,
                                     const std::string& path) override {
    return inner_.ReadAt(fd, offset, size, path);
  }
  absl::Status WriteAt(int fd, std::string_view data, std::uint64_t offset,
                       const std::string& path) override {
    return inner_.WriteAt(fd, data, offset, path);
  }
  absl::Status DataSync(int fd, const std::string& path) override {
    return inner_.DataSync(fd, path);
  }

 protected:
  // inner is the file system the steps go to: what an override calls to run the step after all.
  FileSystem& inner() const { return inner_; }

 private:
  FileSystem& inner_;
};

}  // namespace devlet::cdi::testing
