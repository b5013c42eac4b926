// The HTTP server around the verbs.
#include "devlet/extender/server.h"

#include <httplib.h>

#include <chrono>
#include <sstream>
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

  auto json_reply = [](httplib::Response& res, const std::string& body) {
    res.set_content(body, "application/json");
  };
  http.Post(JoinPath(options_.prefix, options_.filter_verb),
            [this, json_reply](const httplib::Request& req, httplib::Response& res) {
              json_reply(res, extender_.Filter(req.body));
            });
  http.Post(JoinPath(options_.prefix, options_.prioritize_verb),
            [this, json_reply](const httplib::Request& req, httplib::Response& res) {
              std::string reply = extender_.Prioritize(req.body);
              if (reply.empty()) {
                // The scheduler treats a non-200 status as the extender's error.
                res.status = 400;
                res.set_content("prioritize: request body is not a valid ExtenderArgs\n",
                                "text/plain");
                return;
              }
              json_reply(res, reply);
            });
  http.Post(JoinPath(options_.prefix, options_.bind_verb),
            [this, json_reply](const httplib::Request& req, httplib::Response& res) {
              json_reply(res, extender_.Bind(req.body));
            });
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
