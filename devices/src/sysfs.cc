#include "devlet/devices/sysfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "devlet/common/status.h"

namespace devlet::devices {
namespace {

namespace fs = std::filesystem;

absl::Status CheckRelative(std::string_view path) {
  if (path.empty() || path.front() == '/') {
    return InvalidArgument("sysfs path \"" + std::string(path) + "\" must be relative to the root");
  }
  for (const auto& part : fs::path(path)) {
    if (part == "..") {
      return InvalidArgument("sysfs path \"" + std::string(path) + "\" must not contain \"..\"");
    }
  }
  return absl::OkStatus();
}

class RealSysfs final : public Sysfs {
 public:
  explicit RealSysfs(std::string root) : root_(std::move(root)) {}

  std::string Root() const override { return root_; }

  absl::StatusOr<std::string> ReadFile(std::string_view path) const override {
    DEVLET_RETURN_IF_ERROR(CheckRelative(path));
    const std::string full = Full(path);
    int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, "reading " + full);
    std::string out;
    char buffer[4096];
    while (true) {
      ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        int error = errno;
        ::close(fd);
        return ErrnoToStatus(error, "reading " + full);
      }
      if (n == 0) break;
      out.append(buffer, static_cast<size_t>(n));
      if (out.size() > (1u << 20)) break;  // attribute files are small; never slurp a huge file
    }
    ::close(fd);
    return out;
  }

  absl::Status WriteFile(std::string_view path, std::string_view value) override {
    DEVLET_RETURN_IF_ERROR(CheckRelative(path));
    const std::string full = Full(path);
    int fd = ::open(full.c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC);
    if (fd < 0) return ErrnoToStatus(errno, "writing " + full);
    ssize_t n;
    do {
      n = ::write(fd, value.data(), value.size());
    } while (n < 0 && errno == EINTR);
    int error = errno;
    ::close(fd);
    if (n < 0) return ErrnoToStatus(error, "writing \"" + std::string(value) + "\" to " + full);
    if (static_cast<size_t>(n) != value.size()) {
      return Internal("short write to " + full);
    }
    return absl::OkStatus();
  }

  bool Exists(std::string_view path) const override {
    if (!CheckRelative(path).ok()) return false;
    std::error_code ec;
    return fs::exists(Full(path), ec);
  }

  absl::StatusOr<std::string> ReadLink(std::string_view path) const override {
    DEVLET_RETURN_IF_ERROR(CheckRelative(path));
    std::error_code ec;
    fs::path target = fs::read_symlink(Full(path), ec);
    if (ec) return ErrnoToStatus(ec.value(), "reading link " + Full(path));
    return target.string();
  }

  absl::StatusOr<std::string> RealPath(std::string_view path) const override {
    DEVLET_RETURN_IF_ERROR(CheckRelative(path));
    std::error_code ec;
    fs::path resolved = fs::canonical(Full(path), ec);
    if (ec) return ErrnoToStatus(ec.value(), "resolving " + Full(path));
    fs::path root = fs::canonical(root_, ec);
    if (ec) return ErrnoToStatus(ec.value(), "resolving sysfs root " + root_);
    fs::path relative = resolved.lexically_relative(root);
    if (relative.empty() || *relative.begin() == "..") {
      return FailedPrecondition(Full(path) + " resolves outside the sysfs root " + root_);
    }
    return relative.string();
  }

  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view path) const override {
    DEVLET_RETURN_IF_ERROR(CheckRelative(path));
    std::error_code ec;
    fs::directory_iterator it(Full(path), ec);
    if (ec) return ErrnoToStatus(ec.value(), "listing " + Full(path));
    std::vector<std::string> names;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) return ErrnoToStatus(ec.value(), "listing " + Full(path));
      names.push_back(it->path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string Full(std::string_view path) const { return root_ + "/" + std::string(path); }

  std::string root_;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t' || s.back() == '\0')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

std::unique_ptr<Sysfs> NewRealSysfs(std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return std::make_unique<RealSysfs>(std::move(root));
}

absl::StatusOr<std::string> ReadTrimmed(const Sysfs& sysfs, std::string_view path) {
  DEVLET_ASSIGN_OR_RETURN(std::string content, sysfs.ReadFile(path));
  return std::string(Trim(content));
}

absl::StatusOr<long long> ReadInt(const Sysfs& sysfs, std::string_view path) {
  absl::StatusOr<std::string> read = ReadTrimmed(sysfs, path);
  if (!read.ok()) return read.status();
  const std::string& text = *read;
  size_t pos = 0;
  bool negative = false;
  if (text.size() > pos && text[pos] == '-') {
    negative = true;
    ++pos;
  }
  int base = 10;
  if (text.size() > pos + 2 && text[pos] == '0' && (text[pos + 1] == 'x' || text[pos + 1] == 'X')) {
    base = 16;
    pos += 2;
  }
  long long value = 0;
  const char* begin = text.c_str() + pos;
  const char* end = text.c_str() + text.size();
  auto [stop, ec] = std::from_chars(begin, end, value, base);
  if (ec != std::errc() || stop != end || begin == end) {
    return InvalidArgument(sysfs.Root() + "/" + std::string(path) + ": \"" + text +
                           "\" is not an integer");
  }
  return negative ? -value : value;
}

absl::StatusOr<std::string> LinkBaseName(const Sysfs& sysfs, std::string_view path) {
  DEVLET_ASSIGN_OR_RETURN(std::string target, sysfs.ReadLink(path));
  return std::filesystem::path(target).filename().string();
}

}  // namespace devlet::devices
