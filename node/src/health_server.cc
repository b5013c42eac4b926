#include "devlet/node/health_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "devlet/common/status.h"

namespace devlet::node {

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    int port, std::function<bool()> probe, std::function<std::string()> metrics) {
  if (port < 0 || port > 65535) return InvalidArgument("health port out of range");
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "creating the health socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    int saved = errno;
    ::close(fd);
    return ErrnoToStatus(saved, "listening on 127.0.0.1:" + std::to_string(port));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<HealthServer>(
      new HealthServer(fd, ntohs(addr.sin_port), std::move(probe), std::move(metrics)));
}

HealthServer::HealthServer(int fd, int port, std::function<bool()> probe,
                           std::function<std::string()> metrics)
    : fd_(fd), port_(port), probe_(std::move(probe)), metrics_(std::move(metrics)) {
  thread_ = std::thread([this] { Loop(); });
}

HealthServer::~HealthServer() { Stop(); }

void HealthServer::Stop() {
  if (stop_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
}

void HealthServer::Loop() {
  while (!stop_.load()) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    std::string request;
    char buffer[1024];
    pollfd c{client, POLLIN, 0};
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192 &&
           ::poll(&c, 1, 1000) > 0) {
      ssize_t n = ::recv(client, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      request.append(buffer, static_cast<size_t>(n));
    }
    std::string status = "404 Not Found";
    std::string body = "not found\n";
    std::string content_type = "text/plain";
    // The request line: METHOD SP PATH[?query] SP VERSION.
    std::string line = request.substr(0, request.find("\r\n"));
    std::string method = line.substr(0, line.find(' '));
    std::string path;
    if (auto sp = line.find(' '); sp != std::string::npos) {
      path = line.substr(sp + 1, line.find(' ', sp + 1) - sp - 1);
      path = path.substr(0, path.find('?'));
    }
    if (method != "GET" && method != "HEAD") {
      status = "405 Method Not Allowed";
      body = "only GET\n";
    } else if (path == "/healthz") {
      bool healthy = probe_();
      status = healthy ? "200 OK" : "503 Service Unavailable";
      body = healthy ? "ok\n" : "unhealthy\n";
    } else if (path == "/metrics" && metrics_) {
      status = "200 OK";
      body = metrics_();
      content_type = "text/plain; version=0.0.4; charset=utf-8";
    }
    // HEAD: the headers GET would send (Content-Length included), no body.
    std::string response = "HTTP/1.1 " + status + "\r\nContent-Type: " + content_type +
                           "\r\nConnection: close\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" +
                           (method == "HEAD" ? std::string() : body);
    (void)::send(client, response.data(), response.size(), MSG_NOSIGNAL);
    ::close(client);
  }
}

}  // namespace devlet::node
