// Fixtures shared by the extender's tests: the objects of a small GPU cluster as YAML, a pod as
// the scheduler sends it, and the extender served on a loopback port with a client for it.
#pragma once

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "devlet/extender/extender.h"
#include "devlet/extender/server.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace devlet::extender::testing {

// GpuClassYaml is the DeviceClass "gpu": every device of the driver gpu.example.com, also
// requested as `extended_resource_name` when that is not empty.
inline std::string GpuClassYaml(const std::string& extended_resource_name = "") {
  return "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec:\n" +
         (extended_resource_name.empty()
              ? std::string()
              : "  extendedResourceName: " + extended_resource_name + "\n") +
         "  selectors:\n  - cel: {expression: 'device.driver == \"gpu.example.com\"'}\n";
}

// GpuSliceYaml is the ResourceSlice "<node>-gpus" of gpu.example.com on `node` (its own pool):
// devices gpu-0, gpu-1, ..., one per entry of `numa_nodes`, each with that numaNode attribute
// (none for nullopt).
inline std::string GpuSliceYaml(const std::string& node,
                                const std::vector<std::optional<int>>& numa_nodes) {
  std::string yaml =
      "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: " + node +
      "-gpus}\nspec:\n  driver: gpu.example.com\n  nodeName: " + node + "\n  pool: {name: " + node +
      ", generation: 1, resourceSliceCount: 1}\n  devices:\n";
  for (std::size_t i = 0; i < numa_nodes.size(); ++i) {
    yaml += "  - {name: gpu-" + std::to_string(i);
    if (numa_nodes[i].has_value()) {
      yaml += ", attributes: {numaNode: {int: " + std::to_string(*numa_nodes[i]) + "}}";
    }
    yaml += "}\n";
  }
  return yaml;
}

// NodeYaml is the Node `name` with its kubernetes.io/hostname label.
inline std::string NodeYaml(const std::string& name) {
  return "apiVersion: v1\nkind: Node\nmetadata: {name: " + name +
         ", labels: {kubernetes.io/hostname: " + name + "}}\n";
}

// Documents joins YAML documents into one multi-document text.
inline std::string Documents(const std::vector<std::string>& documents) {
  std::string yaml;
  for (const std::string& document : documents) {
    if (!yaml.empty())
      yaml += "---\n";
    yaml += document;
  }
  return yaml;
}

// PodJson is a pod in namespace default as the scheduler sends it (no apiVersion/kind: informer
// objects), UID "uid-<name>", one container, and a spec.resourceClaims entry per claim, named
// after it.
inline nlohmann::json PodJson(const std::string& name, const std::vector<std::string>& claims) {
  using json = nlohmann::json;
  json pod = {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
              {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
  json refs = json::array();
  for (const auto& claim : claims)
    refs.push_back({{"name", claim}, {"resourceClaimName", claim}});
  pod["spec"]["resourceClaims"] = refs;
  return pod;
}

// LoopbackServer serves an Extender on 127.0.0.1 (a free port) under the prefix "/devlet" and
// holds a keep-alive client for it. The extender must outlive it.
class LoopbackServer {
 public:
  LoopbackServer() = default;
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  ~LoopbackServer() { Stop(); }

  // Start serves `extender` with `options`, its host, port and prefix replaced as above.
  absl::Status Start(Extender& extender, ServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.prefix = "/devlet";
    server_ = std::make_unique<Server>(extender, options);
    if (absl::Status status = server_->Start(); !status.ok())
      return status;
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_keep_alive(true);
    // As the scheduler's Go client: without it the body waits on the headers' delayed ACK.
    client_->set_tcp_nodelay(true);
    return absl::OkStatus();
  }

  // Stop closes the keep-alive connection, then stops the server (which waits for open ones).
  void Stop() {
    client_.reset();
    if (server_)
      server_->Stop();
    server_.reset();
  }

  int port() const { return server_->port(); }

  // stats_connections is the server's count of open connections.
  int stats_connections() const { return static_cast<int>(server_->stats().connections); }

  httplib::Client& client() { return *client_; }

  // Post sends `body` to the verb and expects `want_status`; returns the reply as JSON (a JSON
  // string when the reply is not JSON, null when there was none).
  nlohmann::json Post(const std::string& verb, const std::string& body, int want_status = 200) {
    auto res = client_->Post("/devlet/" + verb, body, "application/json");
    EXPECT_TRUE(res) << verb << ": " << (res ? "" : httplib::to_string(res.error()));
    if (!res)
      return nullptr;
    EXPECT_EQ(res->status, want_status) << res->body;
    nlohmann::json parsed = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    return parsed.is_discarded() ? nlohmann::json(res->body) : parsed;
  }

 private:
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

// RawConnection is a client socket for what httplib::Client will not send: bodies a byte at a
// time, stalls, malformed requests.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    int one = 1;
    if (connected_)
      setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }

  ~RawConnection() {
    if (fd_ >= 0)
      close(fd_);
  }

  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }

  int fd() const { return fd_; }

  // Send writes all of `data`; false once the peer has closed.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // ReadUntilClosed collects what the server sends until it closes the connection or `timeout`
  // passes; `closed` says which.
  std::string ReadUntilClosed(std::chrono::milliseconds timeout, bool* closed) {
    std::string out;
    *closed = false;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now())
                                      .count());
      if (poll(&p, 1, std::max(left, 1)) <= 0)
        continue;
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        *closed = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  // ReadResponse reads one response with a Content-Length body (keep-alive connections).
  std::string ReadResponse(std::chrono::milliseconds timeout) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      size_t header_end = out.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        size_t cl = out.find("Content-Length: ");
        if (cl != std::string::npos && cl < header_end) {
          size_t length = std::stoul(out.substr(cl + 16));
          if (out.size() >= header_end + 4 + length)
            return out;
        }
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0)
        continue;
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0)
        break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// PostHead is the request line and headers of a JSON POST to `path`.
inline std::string PostHead(const std::string& path, size_t content_length) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(content_length) + "\r\n\r\n";
}

// BodyOf is what follows the headers of an HTTP response.
inline std::string BodyOf(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

}  // namespace devlet::extender::testing
