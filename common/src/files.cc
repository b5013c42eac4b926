#include "devlet/common/files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "devlet/common/status.h"

namespace devlet {
namespace {

std::string Quote(std::string_view s) { return std::string(1, '"').append(s).append(1, '"'); }

absl::Status Errno(int error, std::string_view what, std::string_view path) {
  return ErrnoToStatus(error, std::string(what) + " " + Quote(path));
}

std::string DirName(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class PosixOps final : public AtomicWriteOps {
 public:
  absl::StatusOr<int> CreateTempFile(const std::string& dir, const std::string& prefix,
                                     const std::string& suffix, mode_t mode,
                                     std::string* path) override {
    std::string name = dir + "/" + prefix + "XXXXXX" + suffix;
    const int fd = ::mkostemps(name.data(), static_cast<int>(suffix.size()), O_CLOEXEC);
    if (fd < 0) return Errno(errno, "create a temporary file in", dir);
    // fchmod because mkostemps creates 0600 and open's mode would be filtered by the umask.
    if (::fchmod(fd, mode) != 0) {
      const int error = errno;
      ::close(fd);
      ::unlink(name.c_str());
      return Errno(error, "chmod", name);
    }
    *path = name;
    return fd;
  }

  absl::Status Write(int fd, std::string_view data, const std::string& path) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno(errno, "write", path);
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return absl::OkStatus();
  }

  absl::Status Sync(int fd, const std::string& path) override {
    if (::fsync(fd) != 0) return Errno(errno, "fsync", path);
    return absl::OkStatus();
  }

  absl::Status Close(int fd, const std::string& path) override {
    if (::close(fd) != 0) return Errno(errno, "close", path);
    return absl::OkStatus();
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoToStatus(errno, "rename " + Quote(from) + " to " + Quote(to));
    }
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno(errno, "open directory", dir);
    const int rc = ::fsync(fd);
    const int error = errno;
    ::close(fd);
    if (rc != 0) return Errno(error, "fsync directory", dir);
    return absl::OkStatus();
  }

  absl::Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return Errno(errno, "remove", path);
    return absl::OkStatus();
  }

  absl::Status MakeDirs(const std::string& dir, mode_t mode) override {
    if (dir.empty()) return absl::OkStatus();
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return absl::OkStatus();
      return FailedPrecondition(Quote(dir) + " exists and is not a directory");
    }
    const std::string parent = DirName(dir);
    if (parent != dir) {
      DEVLET_RETURN_IF_ERROR(MakeDirs(parent, mode));
    }
    if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
      return Errno(errno, "create directory", dir);
    }
    return absl::OkStatus();
  }
};

}  // namespace

AtomicWriteOps& PosixAtomicWriteOps() {
  static PosixOps* ops = new PosixOps();
  return *ops;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view content,
                                 const AtomicWriteOptions& options, AtomicWriteOps& ops) {
  const std::string dir = DirName(path);
  const std::string base = BaseName(path);
  if (base.empty()) {
    return InvalidArgument("write " + Quote(path) + ": not a file name");
  }
  // Every error names the file being written, also those of the steps before its temp file.
  if (options.create_dirs) {
    if (absl::Status s = ops.MakeDirs(dir, options.dir_mode); !s.ok()) {
      return WithContext(s, "write " + Quote(path));
    }
  }
  std::string temp;
  absl::StatusOr<int> created =
      ops.CreateTempFile(dir, "." + base + ".", ".tmp", options.mode, &temp);
  if (!created.ok()) return WithContext(created.status(), "write " + Quote(path));
  const int fd = *created;
  auto fail = [&](const absl::Status& status, bool close_fd) {
    if (close_fd) (void)ops.Close(fd, temp);
    (void)ops.Remove(temp);
    return WithContext(status, "write " + Quote(path));
  };
  if (absl::Status s = ops.Write(fd, content, temp); !s.ok()) return fail(s, true);
  if (options.sync) {
    if (absl::Status s = ops.Sync(fd, temp); !s.ok()) return fail(s, true);
  }
  if (absl::Status s = ops.Close(fd, temp); !s.ok()) return fail(s, false);
  if (absl::Status s = ops.Rename(temp, path); !s.ok()) return fail(s, false);
  if (!options.sync) return absl::OkStatus();
  if (absl::Status s = ops.SyncDir(dir); !s.ok()) {
    // The new content is in place; only its durability across a power loss is in doubt.
    return WithContext(s, "write " + Quote(path));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view content, mode_t mode) {
  return WriteFileAtomically(path, content, AtomicWriteOptions{.mode = mode});
}

absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return ErrnoToStatus(errno, "opening " + path);
  }
  std::string content;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      ::close(fd);
      return ErrnoToStatus(saved, "reading " + path);
    }
    if (n == 0) break;
    content.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return std::optional<std::string>(std::move(content));
}

}  // namespace devlet
