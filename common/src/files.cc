#include "devlet/common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "devlet/common/status.h"

namespace devlet {
namespace {

absl::Status WriteAll(int fd, std::string_view content, const std::string& path) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "writing " + path);
    }
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return absl::OkStatus();
}

// The temp name is unique per process and call, so two threads writing one path never collide
// and a leftover from a killed process is recognisable (".<name>.tmp-<pid>-<n>").
std::string TempPathFor(const std::string& path) {
  static std::atomic<unsigned long> counter{0};
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + ".tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

std::string DirOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view content, mode_t mode) {
  if (path.empty() || path.back() == '/') {
    return InvalidArgument("write \"" + path + "\": not a file name");
  }
  const std::string temp = TempPathFor(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoToStatus(errno, "creating " + temp);
  absl::Status status = WriteAll(fd, content, temp);
  // fchmod because open's mode is filtered by the umask.
  if (status.ok() && ::fchmod(fd, mode) != 0) status = ErrnoToStatus(errno, "chmod " + temp);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoToStatus(errno, "fsync " + temp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoToStatus(errno, "closing " + temp);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoToStatus(errno, "renaming " + temp + " to " + path);
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  const std::string dir = DirOf(path);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoToStatus(errno, "opening directory " + dir);
  const int rc = ::fsync(dir_fd);
  const int saved = errno;
  ::close(dir_fd);
  // The new content is in place; only its durability across a power loss is in doubt.
  if (rc != 0) return ErrnoToStatus(saved, "fsync directory " + dir);
  return absl::OkStatus();
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
