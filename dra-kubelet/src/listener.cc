#include "listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>

#include "devlet/common/log.h"
#include "devlet/common/status.h"

namespace devlet::dra_kubelet::internal {

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Start(const std::string& path,
                                                                  mode_t mode,
                                                                  grpc::Server* server) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return InvalidArgument("socket path " + path +
                           " is empty or longer than the AF_UNIX limit of " +
                           std::to_string(sizeof(address.sun_path) - 1) + " bytes");
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {  // A stale socket from a previous run.
    return ErrnoToStatus(errno, "removing socket " + path);
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return ErrnoToStatus(errno, "creating a socket for " + path);
  auto fail = [&](const std::string& what) {
    const int error = errno;
    ::close(fd);
    return ErrnoToStatus(error, what + " " + path);
  };
  // bind() creates the file with the socket inode's mode less the umask: set the mode first.
  if (::fchmod(fd, mode) != 0)
    return fail("setting the mode of socket");
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return fail("binding");
  }
  // And again by path: only the umask can have taken bits away, never added any.
  if (::chmod(path.c_str(), mode) != 0)
    return fail("setting the mode of");
  if (::listen(fd, SOMAXCONN) != 0)
    return fail("listening on");
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
    return fail("creating a wake-up pipe for");
  auto listener =
      std::unique_ptr<UnixListener>(new UnixListener(fd, wake[0], wake[1], path, server));
  listener->thread_ = std::thread([raw = listener.get()] { raw->Loop(); });
  return listener;
}

UnixListener::UnixListener(int fd, int wake_read, int wake_write, std::string path,
                           grpc::Server* server)
    : fd_(fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      path_(std::move(path)),
      server_(server) {}

UnixListener::~UnixListener() {
  Stop();
}

void UnixListener::Stop() {
  if (stopped_)
    return;
  stopped_ = true;
  const char byte = 0;
  while (::write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable())
    thread_.join();
  ::close(fd_);
  ::close(wake_read_);
  ::close(wake_write_);
}

void UnixListener::Loop() {
  using std::chrono::milliseconds;
  constexpr milliseconds kMinBackoff{5};
  constexpr milliseconds kMaxBackoff{1000};
  milliseconds backoff{0};
  while (true) {
    pollfd fds[2] = {{wake_read_, POLLIN, 0}, {fd_, POLLIN, 0}};
    // While backing off only the wake-up pipe is watched: the listening socket stays readable
    // with the connections that could not be accepted.
    const int ready = ::poll(fds, backoff.count() > 0 ? 1 : 2,
                             backoff.count() > 0 ? static_cast<int>(backoff.count()) : -1);
    if (ready < 0 && errno != EINTR) {
      log::Logger().Error(ErrnoToStatus(errno, "poll"), "Listener failed; retrying", "socket",
                          path_);
      backoff = kMaxBackoff;
      continue;
    }
    if (ready > 0 && (fds[0].revents & POLLIN) != 0)
      return;  // Stop()
    while (true) {
      const int connection = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (connection >= 0) {
        if (backoff.count() > 0) {
          log::Logger().Info("Accepting connections again", "socket", path_);
        }
        backoff = milliseconds{0};
        grpc::AddInsecureChannelFromFd(server_, connection);  // The server owns it now.
        continue;
      }
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED)
        continue;
      if (error == EAGAIN || error == EWOULDBLOCK)
        break;
      // EMFILE, ENFILE, ENOBUFS, ENOMEM: out of a resource that comes back when connections
      // close. Wait, then try again; never give up on the socket.
      ++accept_errors_;
      if (backoff.count() == 0) {
        log::Logger().Error(ErrnoToStatus(error, "accept"),
                            "Cannot accept connections; retrying with backoff", "socket", path_);
      }
      backoff = std::clamp(backoff * 2, kMinBackoff, kMaxBackoff);
      break;
    }
  }
}

}  // namespace devlet::dra_kubelet::internal
