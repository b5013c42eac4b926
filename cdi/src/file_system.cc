#include "devlet/cdi/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "devlet/common/status.h"

namespace devlet::cdi {
namespace {

std::string Quote(std::string_view s) { return std::string(1, '"').append(s).append(1, '"'); }

absl::Status Errno(int error, std::string_view what, std::string_view path) {
  return ErrnoToStatus(error, std::string(what) + " " + Quote(path));
}

class PosixFileSystem final : public FileSystem {
 public:
  static AtomicWriteOps& Ops() { return PosixAtomicWriteOps(); }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno(errno, "open", path);
    std::string out;
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        const int error = errno;
        ::close(fd);
        return Errno(error, "read", path);
      }
      if (n == 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  // The atomic-write steps are common/'s.
  absl::StatusOr<int> CreateTempFile(const std::string& dir, const std::string& prefix,
                                     const std::string& suffix, mode_t mode,
                                     std::string* path) override {
    return Ops().CreateTempFile(dir, prefix, suffix, mode, path);
  }
  absl::Status Write(int fd, std::string_view data, const std::string& path) override {
    return Ops().Write(fd, data, path);
  }
  absl::Status Sync(int fd, const std::string& path) override { return Ops().Sync(fd, path); }
  absl::Status Close(int fd, const std::string& path) override { return Ops().Close(fd, path); }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    return Ops().Rename(from, to);
  }
  absl::Status SyncDir(const std::string& dir) override { return Ops().SyncDir(dir); }
  absl::Status Remove(const std::string& path) override { return Ops().Remove(path); }
  absl::Status MakeDirs(const std::string& dir, mode_t mode) override {
    return Ops().MakeDirs(dir, mode);
  }

  absl::StatusOr<int> OpenFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return Errno(errno, "open", path);
    return fd;
  }

  absl::StatusOr<std::string> ReadAt(int fd, std::uint64_t offset, std::size_t size,
                                     const std::string& path) override {
    std::string out(size, '\0');
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd, out.data() + done, size - done,
                                static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno(errno, "read", path);
      }
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    out.resize(done);
    return out;
  }

  absl::Status WriteAt(int fd, std::string_view data, std::uint64_t offset,
                       const std::string& path) override {
    while (!data.empty()) {
      const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno(errno, "write", path);
      }
      data.remove_prefix(static_cast<std::size_t>(n));
      offset += static_cast<std::uint64_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status DataSync(int fd, const std::string& path) override {
    if (::fdatasync(fd) != 0) return Errno(errno, "fdatasync", path);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<DirEntry>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return Errno(errno, "open directory", dir);
    std::vector<DirEntry> out;
    errno = 0;
    while (const dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      DirEntry e{.name = name};
      struct stat st {};
      if (::stat((dir + "/" + name).c_str(), &st) == 0) {
        e.is_regular = S_ISREG(st.st_mode);
        e.is_directory = S_ISDIR(st.st_mode);
      }
      out.push_back(std::move(e));
      errno = 0;
    }
    const int error = errno;
    ::closedir(d);
    if (error != 0) return Errno(error, "read directory", dir);
    std::sort(out.begin(), out.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    return out;
  }

};

}  // namespace

FileSystem& RealFileSystem() {
  static PosixFileSystem* fs = new PosixFileSystem();
  return *fs;
}

absl::StatusOr<int> RemoveTempFiles(FileSystem& fs, const std::string& dir,
                                    std::string_view base_prefix) {
  auto entries = fs.ListDir(dir);
  if (!entries.ok()) {
    if (absl::IsNotFound(entries.status())) return 0;
    return entries.status();
  }
  const std::string prefix = std::string(1, '.').append(base_prefix);
  int removed = 0;
  for (const DirEntry& entry : *entries) {
    if (!entry.is_regular || !entry.name.starts_with(prefix) || !entry.name.ends_with(".tmp")) {
      continue;
    }
    absl::Status s = fs.Remove(dir + "/" + entry.name);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    if (s.ok()) ++removed;
  }
  return removed;
}

}  // namespace devlet::cdi
