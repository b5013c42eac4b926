// The API client's side of an HTTP exchange (kube/client: http_transport.cc's status line,
// header, Content-Length, chunked and read-until-close parsing; rest_client.cc's status mapping;
// rest_store.cc's object, list and watch-event decoding), through ApiServerStore over a real
// loopback socket. A fake API server answers every request with the input and closes the
// connection: a Get, a List and a Watch (its list, then its stream of newline-separated events,
// reconnecting) each read it. Where the input holds kWatchMarker, list and get requests get what
// comes before it and watch requests what comes after, so that a valid list can open a stream
// of anything.
//
// Besides crashes, every call must return within its deadline: a hung read is a hang report.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "devlet/kube/client.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"
#include "fuzz_util.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kWatchMarker("\n\0WATCH\0\n", 9);

// FakeApiServer answers each connection's first request with `response` and closes it.
class FakeApiServer {
 public:
  FakeApiServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      devlet::fuzz::Fail("fake API server", std::to_string(errno));
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
    thread_.detach();  // lives as long as the process
  }

  int port() const { return port_; }

  void SetResponse(std::string response) {
    std::lock_guard<std::mutex> lock(mu_);
    response_ = std::move(response);
  }

  // served counts the connections answered so far.
  long served() const { return served_.load(); }

 private:
  void Serve() {
    for (;;) {
      const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      // The request's head (GETs have no body), so that closing sends a FIN, not a reset.
      std::string request;
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        pollfd p{conn, POLLIN, 0};
        if (::poll(&p, 1, 2000) <= 0) break;
        const ssize_t n = ::recv(conn, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        request.append(buffer, static_cast<std::size_t>(n));
      }
      std::string response;
      {
        std::lock_guard<std::mutex> lock(mu_);
        response = response_;
      }
      if (const std::size_t marker = response.find(kWatchMarker); marker != std::string::npos) {
        const bool watch = request.find("watch=true") != std::string::npos;
        response = watch ? response.substr(marker + kWatchMarker.size()) : response.substr(0, marker);
      }
      std::string_view rest(response);
      while (!rest.empty()) {
        const ssize_t n = ::send(conn, rest.data(), rest.size(), MSG_NOSIGNAL);
        if (n <= 0) break;
        rest.remove_prefix(static_cast<std::size_t>(n));
      }
      ::close(conn);
      ++served_;
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::string response_;
  std::atomic<long> served_{0};
  std::thread thread_;
};

FakeApiServer& Server() {
  static auto* server = new FakeApiServer();
  return *server;
}

devlet::kube::ApiServerStore& Store() {
  static devlet::kube::ApiServerStore* store = [] {
    devlet::kube::RestConfig config;
    config.server = "http://127.0.0.1:" + std::to_string(Server().port()) + "/prefix";
    config.qps = 0;
    config.max_retries = 1;  // one retry: the retry path (Retry-After included) is read too
    config.initial_backoff = std::chrono::milliseconds(1);
    config.max_backoff = std::chrono::milliseconds(2);
    config.request_timeout = std::chrono::seconds(5);
    config.connect_timeout = std::chrono::seconds(2);
    config.list_page_size = 2;  // a `continue` in the input asks for the next page
    absl::StatusOr<std::unique_ptr<devlet::kube::ApiServerStore>> made =
        devlet::kube::ApiServerStore::Create(config);
    if (!made.ok()) devlet::fuzz::Fail("ApiServerStore::Create", made.status().ToString());
    return made->release();
  }();
  return *store;
}

void CheckWithin(Clock::time_point start, std::chrono::seconds limit, const char* what) {
  if (Clock::now() - start > limit) devlet::fuzz::Fail("call outlived its deadline", what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > (256u << 10)) {
    return -1;
  }
  Server().SetResponse(std::string(reinterpret_cast<const char*>(data), size));
  devlet::kube::ApiServerStore& store = Store();
  using devlet::kube::Kind;

  auto start = Clock::now();
  (void)store.Get(Kind::kResourceClaim, {.namespace_name = "ns", .name = "claim"});
  CheckWithin(start, std::chrono::seconds(15), "Get");

  start = Clock::now();
  (void)store.List(Kind::kResourceSlice, {});
  CheckWithin(start, std::chrono::seconds(15), "List");

  // A watch lists, then streams events from the same answer; it is stopped once it has read the
  // stream at least once (two more connections after the list).
  start = Clock::now();
  const long before = Server().served();
  std::atomic<long> events{0};
  absl::StatusOr<std::unique_ptr<devlet::kube::Watcher>> watch =
      store.Watch(Kind::kPod, {}, [&](const devlet::kube::WatchEvent&) { ++events; });
  if (watch.ok()) {
    while (Server().served() < before + 3 && Clock::now() - start < std::chrono::seconds(5)) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    watch->reset();
  }
  CheckWithin(start, std::chrono::seconds(15), "Watch");
  return 0;
}
