#include "devlet/nri/socket.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "devlet/common/status.h"

namespace devlet::nri {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset(other.release());
  }
  return *this;
}

UniqueFd::~UniqueFd() { reset(); }

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = fd;
}

namespace {

absl::StatusOr<sockaddr_un> MakeAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return InvalidArgument("unix socket path \"" + path + "\" must have 1 to " +
                           std::to_string(sizeof(address.sun_path) - 1) + " characters");
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

}  // namespace

absl::StatusOr<UniqueFd> ConnectUnix(const std::string& path) {
  DEVLET_ASSIGN_OR_RETURN(sockaddr_un address, MakeAddress(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return ErrnoToStatus(errno, "creating a unix socket");
  }
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int error = errno;
    absl::Status status = ErrnoToStatus(error, "connecting to " + path);
    return status;
  }
  return fd;
}

absl::StatusOr<UniqueFd> ListenUnix(const std::string& path) {
  DEVLET_ASSIGN_OR_RETURN(sockaddr_un address, MakeAddress(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return ErrnoToStatus(errno, "creating a unix socket");
  }
  ::unlink(path.c_str());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return ErrnoToStatus(errno, "binding " + path);
  }
  if (::listen(fd.get(), 16) != 0) {
    return ErrnoToStatus(errno, "listening on " + path);
  }
  return fd;
}

absl::StatusOr<UniqueFd> AcceptUnix(int listen_fd) {
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      return UniqueFd(fd);
    }
    if (errno != EINTR) {
      return ErrnoToStatus(errno, "accepting a connection");
    }
  }
}

absl::StatusOr<std::pair<UniqueFd, UniqueFd>> SocketPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return ErrnoToStatus(errno, "creating a socket pair");
  }
  return std::make_pair(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

absl::Status WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ErrnoToStatus(errno, "writing to the NRI socket");
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace devlet::nri
