// Private to dra-kubelet: the Unix-socket listeners of the DRA and registration services.
//
// devlet accepts connections itself and hands each one to its gRPC server
// (grpc::AddInsecureChannelFromFd) instead of letting gRPC listen, for two reasons:
//   - gRPC 1.51's listener gives up for good when accept4() fails with anything but EAGAIN or
//     ECONNABORTED: one burst of connections past the fd limit (EMFILE) left dra.sock accepting
//     nothing until a restart, while the kubelet kept calling. This one backs off (5 ms doubling
//     to 1 s, like Go's net/http) and accepts again once descriptors are free; the connections
//     that arrive meanwhile wait in the listen backlog.
//   - the socket's mode is set before bind() (Linux takes the inode's mode, less the umask), so
//     it is never reachable with the umask's mode, not even for the moment before a chmod.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace devlet::dra_kubelet::internal {

// UnixListener listens on a Unix socket and serves every connection with one gRPC server.
class UnixListener {
 public:
  // Start binds `path` (a stale socket there is removed first) with `mode` whatever the umask,
  // listens, and starts the accepting thread. `server` must outlive the listener; it is a server
  // built without listening ports.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Start(const std::string& path, mode_t mode,
                                                             grpc::Server* server);
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  // Stop ends accepting and closes the listening socket (the socket file stays; the caller
  // removes it). Connections already handed over stay with the server. Idempotent.
  void Stop();

  // AcceptErrors counts the accept4() failures other than EAGAIN/EINTR/ECONNABORTED so far
  // (EMFILE and the like), for tests and logs.
  int AcceptErrors() const { return accept_errors_.load(); }

 private:
  UnixListener(int fd, int wake_read, int wake_write, std::string path, grpc::Server* server);
  void Loop();

  int fd_;
  int wake_read_;
  int wake_write_;
  std::string path_;
  grpc::Server* server_;
  std::atomic<int> accept_errors_{0};
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace devlet::dra_kubelet::internal
