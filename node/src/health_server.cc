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

namespace {

// A numeric address parsed into a socket address of its family.
struct ParsedAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string text;  // without brackets
};

absl::StatusOr<ParsedAddress> ParseAddress(std::string_view address, int port) {
  ParsedAddress parsed;
  parsed.text = std::string(address);
  if (parsed.text.size() >= 2 && parsed.text.front() == '[' && parsed.text.back() == ']') {
    parsed.text = parsed.text.substr(1, parsed.text.size() - 2);
  }
  auto* v4 = reinterpret_cast<sockaddr_in*>(&parsed.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&parsed.storage);
  if (::inet_pton(AF_INET, parsed.text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    parsed.length = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, parsed.text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    parsed.length = sizeof(sockaddr_in6);
  } else {
    return InvalidArgument("health address \"" + std::string(address) +
                           "\" is not a numeric IPv4 or IPv6 address");
  }
  return parsed;
}

}  // namespace

absl::Status HealthServer::ValidateAddress(std::string_view address) {
  return ParseAddress(address, 0).status();
}

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    int port, std::function<bool()> probe, std::function<std::string()> metrics) {
  return Start(kDefaultAddress, port, std::move(probe), std::move(metrics));
}

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    std::string_view address, int port, std::function<bool()> probe,
    std::function<std::string()> metrics) {
  if (port < 0 || port > 65535) return InvalidArgument("health port out of range");
  DEVLET_ASSIGN_OR_RETURN(ParsedAddress parsed, ParseAddress(address, port));
  int family = parsed.storage.ss_family;
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "creating the health socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6) {
    // "::" means every address, IPv4 ones too, whatever net.ipv6.bindv6only says.
    int zero = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  std::string where = (family == AF_INET6 ? "[" + parsed.text + "]" : parsed.text) + ":" +
                      std::to_string(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&parsed.storage), parsed.length) != 0 ||
      ::listen(fd, 16) != 0) {
    int saved = errno;
    ::close(fd);
    return ErrnoToStatus(saved, "listening on " + where);
  }
  socklen_t len = parsed.length;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&parsed.storage), &len);
  int bound_port = family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&parsed.storage)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&parsed.storage)->sin_port);
  return std::unique_ptr<HealthServer>(new HealthServer(
      fd, std::move(parsed.text), bound_port, std::move(probe), std::move(metrics)));
}

HealthServer::HealthServer(int fd, std::string address, int port, std::function<bool()> probe,
                           std::function<std::string()> metrics)
    : fd_(fd),
      address_(std::move(address)),
      port_(port),
      probe_(std::move(probe)),
      metrics_(std::move(metrics)) {
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
