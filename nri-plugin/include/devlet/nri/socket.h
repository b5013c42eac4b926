// File: devlet/nri/socket.h
//
// The few unix-socket calls the NRI transport needs, returning absl::Status:
//
//   DEVLET_ASSIGN_OR_RETURN(UniqueFd fd, ConnectUnix("/var/run/nri/nri.sock"));
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace devlet::nri {

// UniqueFd owns a file descriptor and closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  // get returns the descriptor (-1 when empty).
  int get() const { return fd_; }
  // valid reports whether a descriptor is held.
  bool valid() const { return fd_ >= 0; }
  // release gives up ownership and returns the descriptor.
  int release() { return std::exchange(fd_, -1); }
  // reset closes the held descriptor and takes `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// ConnectUnix connects a SOCK_STREAM socket to the unix socket at `path`.
absl::StatusOr<UniqueFd> ConnectUnix(const std::string& path);

// ListenUnix binds and listens on `path`, replacing a stale socket file there.
absl::StatusOr<UniqueFd> ListenUnix(const std::string& path);

// AcceptUnix waits for the next connection on a listening socket.
absl::StatusOr<UniqueFd> AcceptUnix(int listen_fd);

// SocketPair returns two connected SOCK_STREAM unix sockets (close-on-exec).
absl::StatusOr<std::pair<UniqueFd, UniqueFd>> SocketPair();

// WriteAll writes every byte of `data` to a socket (MSG_NOSIGNAL; retries on EINTR).
absl::Status WriteAll(int fd, const char* data, size_t size);

}  // namespace devlet::nri
