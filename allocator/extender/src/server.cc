// The HTTP server around the verbs.
#include "devlet/extender/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <thread>

#include "devlet/common/log.h"
#include "devlet/common/status.h"

namespace devlet::extender {

struct Server::Impl {
  std::unique_ptr<httplib::Server> http;
};

namespace {

std::string JoinPath(std::string prefix, const std::string& verb) {
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty() && prefix.front() != '/') prefix.insert(prefix.begin(), '/');
  return prefix + "/" + verb;
}

// ReadBody reads a verb's body, failing once request_timeout has passed since the handler started
// (headers are bounded by httplib's size limit and read_timeout).
absl::Status ReadBody(const httplib::Request& req, const httplib::ContentReader& content_reader,
                      const ServerOptions& options, std::string& body) {
  const auto deadline = std::chrono::steady_clock::now() + options.request_timeout;
  // Content-Length was checked against max_body_bytes before the handler runs; a chunked body
  // has none (0).
  const std::string length_header = req.get_header_value("Content-Length");
  const unsigned long long expected = std::strtoull(length_header.c_str(), nullptr, 10);
  body.reserve(static_cast<size_t>(
      std::min<unsigned long long>(expected, options.max_body_bytes)));
  bool late = false;
  bool too_large = false;
  const bool complete = content_reader([&](const char* data, size_t length) {
    if (std::chrono::steady_clock::now() > deadline) {
      late = true;
      return false;
    }
    // httplib checks Content-Length against the limit, but not a chunked body.
    if (body.size() + length > options.max_body_bytes) {
      too_large = true;
      return false;
    }
    body.append(data, length);
    return true;
  });
  if (late) {
    return DeadlineExceeded("request body not received within " +
                            std::to_string(options.request_timeout.count()) + "s");
  }
  if (too_large) {
    return ResourceExhausted("request body is over the limit of " +
                             std::to_string(options.max_body_bytes) + " bytes");
  }
  if (!complete) {
    return InvalidArgument("request body could not be read (connection closed or timed out)");
  }
  return absl::OkStatus();
}

// EndConnection makes httplib close the connection from `remote_addr`:`remote_port` to
// `local_port`. httplib 0.11 keeps a connection alive whatever the handler says, so after a body
// that was cut off (stalled, too slow, too large) it would wait keep_alive_timeout for a next
// request, or parse the rest of the body as one, holding a server thread. The connection is found
// by its addresses and its reading side shut down (httplib then sees end of input and closes);
// this only runs on the error path, after the reply is written (httplib does not write a reply
// on a socket that reads end of input).
void EndConnection(const std::string& remote_addr, int remote_port, int local_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    sockaddr_storage local{};
    sockaddr_storage peer{};
    socklen_t local_len = sizeof(local);
    socklen_t peer_len = sizeof(peer);
    const int sock = static_cast<int>(fd);
    if (getsockname(sock, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(sock, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      continue;
    }
    auto port_of = [](const sockaddr_storage& a) {
      if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
      if (a.ss_family == AF_INET6) {
        return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
      }
      return uint16_t{0};
    };
    char ip[INET6_ADDRSTRLEN] = {};
    if (peer.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(peer).sin_addr, ip, sizeof(ip));
    } else if (peer.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr, ip, sizeof(ip));
    }
    if (port_of(local) == local_port && port_of(peer) == remote_port && remote_addr == ip) {
      shutdown(sock, SHUT_RD);
      break;
    }
  }
  closedir(dir);
}

}  // namespace

Server::Server(Extender& extender, ServerOptions options)
    : extender_(extender), options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

Server::~Server() { Stop(); }

absl::Status Server::Start() {
  if (!options_.cert_file.empty() || !options_.key_file.empty()) {
    if (options_.cert_file.empty() || options_.key_file.empty()) {
      return InvalidArgument("TLS needs both --tls-cert-file and --tls-private-key-file");
    }
    auto tls = std::make_unique<httplib::SSLServer>(options_.cert_file.c_str(),
                                                    options_.key_file.c_str());
    if (!tls->is_valid()) {
      return InvalidArgument("cannot load TLS certificate \"" + options_.cert_file +
                             "\" or key \"" + options_.key_file + "\"");
    }
    impl_->http = std::move(tls);
  } else {
    impl_->http = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *impl_->http;
  const int threads = options_.threads;
  http.new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads > 0 ? threads : 8));
  };
  http.set_payload_max_length(options_.max_body_bytes);
  http.set_read_timeout(options_.read_timeout);
  http.set_keep_alive_max_count(1000);
  http.set_keep_alive_timeout(30);
  // Replies are written as header and body; without TCP_NODELAY the body waits for the peer's
  // delayed ACK (~40 ms on Linux) on keep-alive connections. Go's clients set it too.
  http.set_tcp_nodelay(true);

  // Verbs read their body through a ContentReader so that the whole body has a deadline
  // (request_timeout), not only each read.
  using Verb = std::string (Extender::*)(std::string_view);
  auto serve = [this](Verb verb, bool error_is_400) {
    return [this, verb, error_is_400](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& content_reader) {
      std::string body;
      absl::Status read = ReadBody(req, content_reader, options_, body);
      if (!read.ok()) {
        res.set_header("Connection", "close");
        if (res.status == 413) {
          // httplib refused a Content-Length over the limit.
          read = ResourceExhausted("request body is over the limit of " +
                                   std::to_string(options_.max_body_bytes) + " bytes");
        }
        switch (read.code()) {
          case absl::StatusCode::kDeadlineExceeded:
            res.status = 408;
            break;
          case absl::StatusCode::kResourceExhausted:
            res.status = 413;
            break;
          default:
            res.status = 400;
        }
        // A content provider, because its releaser runs once the reply has been written: that is
        // when the connection can be ended.
        std::string message = Message(read) + "\n";
        const size_t size = message.size();
        res.set_content_provider(
            size, "text/plain",
            [message = std::move(message)](size_t offset, size_t length, httplib::DataSink& sink) {
              return sink.write(message.data() + offset, length);
            },
            [this, addr = req.remote_addr, remote_port = req.remote_port](bool) {
              EndConnection(addr, remote_port, port_);
            });
        return;
      }
      std::string reply = (extender_.*verb)(body);
      if (error_is_400 && reply.empty()) {
        // The scheduler treats a non-200 status as the extender's error.
        res.status = 400;
        res.set_content("prioritize: request body is not a valid ExtenderArgs\n", "text/plain");
        return;
      }
      res.set_content(std::move(reply), "application/json");
    };
  };
  http.Post(JoinPath(options_.prefix, options_.filter_verb), serve(&Extender::Filter, false));
  http.Post(JoinPath(options_.prefix, options_.prioritize_verb),
            serve(&Extender::Prioritize, true));
  http.Post(JoinPath(options_.prefix, options_.bind_verb), serve(&Extender::Bind, false));
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    if (extender_.state().synced()) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("waiting for the first full sync\n", "text/plain");
    }
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(MetricsText(extender_), "text/plain; version=0.0.4");
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404) {
      res.set_content("unknown path " + req.path + "\n", "text/plain");
    } else if (res.status == 413) {
      res.set_content("request body too large\n", "text/plain");
    }
  });

  if (options_.port == 0) {
    port_ = http.bind_to_any_port(options_.host);
  } else {
    port_ = http.bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    return Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  }
  thread_ = std::thread([this] { impl_->http->listen_after_bind(); });
  // Wait until the accept loop runs, so that an early Stop() cannot miss it.
  while (!impl_->http->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return absl::OkStatus();
}

void Server::Stop() {
  if (impl_ && impl_->http) impl_->http->stop();
  if (thread_.joinable()) thread_.join();
}

std::string MetricsText(const Extender& extender) {
  const Counters& c = extender.counters();
  std::ostringstream out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
        << name << " " << value << "\n";
  };
  auto count = [](const std::atomic<int64_t>& v) { return static_cast<double>(v.load()); };
  metric("devlet_extender_filter_requests_total", "counter", "Filter requests.",
         count(c.filter_requests));
  metric("devlet_extender_prioritize_requests_total", "counter", "Prioritize requests.",
         count(c.prioritize_requests));
  metric("devlet_extender_bind_requests_total", "counter", "Bind requests.",
         count(c.bind_requests));
  metric("devlet_extender_bind_failures_total", "counter", "Bind requests that failed.",
         count(c.bind_failures));
  metric("devlet_extender_bad_requests_total", "counter", "Requests with an invalid body.",
         count(c.bad_requests));
  metric("devlet_extender_claim_conflicts_total", "counter",
         "ResourceClaim status updates that hit a resourceVersion conflict.", count(c.conflicts));
  metric("devlet_extender_filter_seconds_total", "counter", "Time spent in filter.",
         count(c.filter_micros_total) / 1e6);
  metric("devlet_extender_prioritize_seconds_total", "counter", "Time spent in prioritize.",
         count(c.prioritize_micros_total) / 1e6);
  metric("devlet_extender_ready", "gauge", "Whether the first full sync is done.",
         extender.state().synced() ? 1 : 0);
  return out.str();
}

}  // namespace devlet::extender
