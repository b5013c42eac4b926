// A small in-memory kube-apiserver for the REST client's unit tests (cpp-httplib): objects by
// path, resourceVersions, Status errors, merge patch (apply is treated as a merge and recorded),
// watches with bookmarks, compaction (410 Gone), failure injection (any code, Retry-After, a slow
// or hung answer, for some requests only), bearer-token checking. Plain HTTP or HTTPS (with optional client-certificate verification; the
// common name of the certificate each request came with is recorded, and names can be refused).
#pragma once

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace devlet::kube::fake {

class FakeApiServer {
 public:
  using Json = nlohmann::json;

  // What the server does to one request instead of (or before) answering it.
  struct Failure {
    int code;              // the error answered; 0: none (after `delay`, the request is served)
    int retry_after = -1;  // seconds; -1: no header
    // Waits this long first (a slow server); a hung one: longer than the client's deadline. The
    // wait ends early when the server shuts down.
    std::chrono::milliseconds delay{0};
    // Which requests it applies to: "" any; "GET", "PUT", ... that method (watches excluded);
    // "WATCH" watch requests only.
    std::string only;
  };
  struct Recorded {
    std::string method;
    std::string path;
    std::string content_type;
    std::multimap<std::string, std::string> params;
    // HTTPS: the common name of the client certificate of the connection; empty: none.
    std::string client_cn;
  };

  // Plain HTTP.
  FakeApiServer() : server_(std::make_unique<httplib::Server>()) { Start(); }
  // HTTPS; client_ca empty: no client certificates required.
  FakeApiServer(const std::string& cert, const std::string& key, const std::string& client_ca)
      : server_(std::make_unique<httplib::SSLServer>(
            cert.c_str(), key.c_str(), client_ca.empty() ? nullptr : client_ca.c_str())),
        tls_(true) {
    Start();
  }
  ~FakeApiServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutting_down_ = true;
    }
    cv_.notify_all();
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  std::string url() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }

  // Only requests with "Authorization: Bearer <token>" pass (empty: no check).
  void RequireToken(const std::string& token) {
    std::lock_guard<std::mutex> lock(mu_);
    token_ = token;
  }
  // Requests over connections whose client certificate has this common name get 401 (a revoked
  // certificate, as the API server's x509 authenticator answers).
  void RejectClientCn(const std::string& cn) {
    std::lock_guard<std::mutex> lock(mu_);
    rejected_cns_.insert(cn);
  }
  // The next requests (those each failure applies to) fail with these codes, in order.
  void FailNext(std::vector<Failure> failures) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Failure& f : failures) failures_.push_back(f);
  }
  // Bookmark interval for watches (0: none).
  void SetBookmarkInterval(std::chrono::milliseconds interval) {
    std::lock_guard<std::mutex> lock(mu_);
    bookmark_interval_ = interval;
  }
  // Forgets history: watches from older resourceVersions get 410 (open ones an ERROR event).
  void Compact() {
    std::lock_guard<std::mutex> lock(mu_);
    compacted_ = rv_ + 1;
    cv_.notify_all();
  }
  // Ends every open watch (as a server timeout or a dropped connection would).
  void CloseWatches() {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    cv_.notify_all();
  }
  // Changes an object behind the client's back (no event recorded when `silently`).
  void Put(const std::string& path, Json object, bool silently = false) {
    std::lock_guard<std::mutex> lock(mu_);
    object["metadata"]["resourceVersion"] = std::to_string(++rv_);
    objects_[path] = object;
    if (!silently) events_.push_back({rv_, "MODIFIED", Collection(path), object});
  }
  void Remove(const std::string& path, bool silently = false) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(path);
    if (it == objects_.end()) return;
    ++rv_;
    if (!silently) events_.push_back({rv_, "DELETED", Collection(path), it->second});
    objects_.erase(it);
  }

  std::vector<Recorded> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int bookmarks_sent() const { return bookmarks_sent_.load(); }
  int watch_requests() const { return watch_requests_.load(); }
  int gone_sent() const { return gone_sent_.load(); }
  // How many injected failures were served; how many are still waiting for their request.
  int failures_served() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_served_;
  }
  int failures_pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(failures_.size());
  }

 private:
  struct Event {
    long rv;
    std::string type;
    std::string collection;
    Json object;
  };

  static bool IsPlural(const std::string& segment) {
    static const std::set<std::string> kPlurals = {
        "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates",
        "devicetaintrules", "nodes", "pods"};
    return kPlurals.contains(segment);
  }
  static std::string Last(const std::string& path) { return path.substr(path.rfind('/') + 1); }
  static std::string Parent(const std::string& path) { return path.substr(0, path.rfind('/')); }
  static std::string Collection(const std::string& item_path) { return Parent(item_path); }

  static std::string ClientCn(const httplib::Request& req) {
    if (req.ssl == nullptr) return "";
    X509* cert = SSL_get1_peer_certificate(req.ssl);
    if (cert == nullptr) return "";
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    X509_free(cert);
    return cn;
  }

  static std::string Reason(int code) {
    switch (code) {
      case 409: return "Conflict";
      case 410: return "Expired";
      case 429: return "TooManyRequests";
      case 500: return "InternalError";
      case 504: return "Timeout";
      default: return "ServiceUnavailable";
    }
  }
  static Json StatusJson(int code, const std::string& reason, const std::string& message) {
    return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                {"code", code},     {"reason", reason},   {"message", message}};
  }
  static void Error(httplib::Response& res, int code, const std::string& reason,
                    const std::string& message) {
    res.status = code;
    res.set_content(StatusJson(code, reason, message).dump(), "application/json");
  }

  void Start() {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      Handle(req, res);
    };
    server_->Get(".*", handler);
    server_->Post(".*", handler);
    server_->Put(".*", handler);
    server_->Patch(".*", handler);
    server_->Delete(".*", handler);
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mu_);
    Recorded recorded{req.method, req.path, req.get_header_value("Content-Type"), {}};
    for (const auto& [k, v] : req.params) recorded.params.emplace(k, v);
    recorded.client_cn = ClientCn(req);
    requests_.push_back(recorded);
    if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
      return Error(res, 401, "Unauthorized", "Unauthorized");
    }
    if (!recorded.client_cn.empty() && rejected_cns_.contains(recorded.client_cn)) {
      return Error(res, 401, "Unauthorized", "Unauthorized");
    }
    const bool is_watch = req.get_param_value("watch") == "true";
    auto failure = std::find_if(failures_.begin(), failures_.end(), [&](const Failure& f) {
      return f.only.empty() || (f.only == "WATCH" ? is_watch : !is_watch && f.only == req.method);
    });
    if (failure != failures_.end()) {
      const Failure f = *failure;
      failures_.erase(failure);
      ++failures_served_;
      if (f.delay.count() > 0) {
        cv_.wait_for(lock, f.delay, [&] { return shutting_down_; });
        if (shutting_down_) return Error(res, 503, "ServiceUnavailable", "shutting down");
      }
      if (f.code != 0) {
        if (f.retry_after >= 0) res.set_header("Retry-After", std::to_string(f.retry_after));
        return Error(res, f.code, Reason(f.code), "injected failure");
      }
    }
    const std::string path = req.path;
    const bool status_sub = Last(path) == "status";
    const std::string item = status_sub ? Parent(path) : path;
    const bool collection = IsPlural(Last(path));
    Json body;
    if (!req.body.empty()) {
      try {
        body = Json::parse(req.body);
      } catch (const std::exception&) {
        return Error(res, 400, "BadRequest", "body is not JSON");
      }
    }
    const std::string name = Last(item);
    if (req.method == "GET" && collection && req.get_param_value("watch") == "true") {
      return Watch(req, res, path, std::move(lock));
    }
    if (req.method == "GET" && collection) {
      Json list{{"kind", "List"}, {"apiVersion", "v1"},
                {"metadata", {{"resourceVersion", std::to_string(rv_)}}}, {"items", Json::array()}};
      for (const auto& [p, object] : objects_) {
        if (Parent(p) == path) list["items"].push_back(object);
      }
      res.set_content(list.dump(), "application/json");
      return;
    }
    if (req.method == "GET") {
      auto it = objects_.find(item);
      if (it == objects_.end()) return Error(res, 404, "NotFound", "\"" + name + "\" not found");
      res.set_content(it->second.dump(), "application/json");
      return;
    }
    if (req.method == "POST") {
      const std::string new_path = path + "/" + body["metadata"].value("name", "");
      if (objects_.contains(new_path)) {
        return Error(res, 409, "AlreadyExists", "\"" + Last(new_path) + "\" already exists");
      }
      body["metadata"]["uid"] = "uid-" + std::to_string(++uid_);
      body["metadata"]["resourceVersion"] = std::to_string(++rv_);
      objects_[new_path] = body;
      events_.push_back({rv_, "ADDED", path, body});
      cv_.notify_all();
      res.status = 201;
      res.set_content(body.dump(), "application/json");
      return;
    }
    auto it = objects_.find(item);
    if (req.method == "PATCH" && it == objects_.end() &&
        recorded.content_type == "application/apply-patch+yaml") {
      body["metadata"]["uid"] = "uid-" + std::to_string(++uid_);
      body["metadata"]["resourceVersion"] = std::to_string(++rv_);
      objects_[item] = body;
      events_.push_back({rv_, "ADDED", Collection(item), body});
      cv_.notify_all();
      res.set_content(body.dump(), "application/json");
      return;
    }
    if (it == objects_.end()) return Error(res, 404, "NotFound", "\"" + name + "\" not found");
    Json& stored = it->second;
    if (req.method == "DELETE") {
      if (body.contains("preconditions") &&
          body["preconditions"].value("uid", "") != stored["metadata"].value("uid", "")) {
        return Error(res, 409, "Conflict", "Precondition failed: UID in precondition");
      }
      ++rv_;
      events_.push_back({rv_, "DELETED", Collection(item), stored});
      res.set_content(stored.dump(), "application/json");
      objects_.erase(it);
      cv_.notify_all();
      return;
    }
    if (req.method == "PUT") {
      const std::string want = body["metadata"].value("resourceVersion", "");
      if (!want.empty() && want != stored["metadata"].value("resourceVersion", "")) {
        return Error(res, 409, "Conflict",
                     "Operation cannot be fulfilled on \"" + name +
                         "\": the object has been modified");
      }
      Json updated = stored;
      if (status_sub) {
        updated["status"] = body.value("status", Json::object());
      } else {
        Json status = stored.value("status", Json());
        updated = body;
        updated["metadata"]["uid"] = stored["metadata"]["uid"];
        if (!status.is_null()) updated["status"] = status;
      }
      stored = updated;
    } else {  // PATCH: merge (apply treated as a merge here)
      Json patch = body;
      if (!status_sub) patch.erase("status");
      stored.merge_patch(patch);
    }
    stored["metadata"]["resourceVersion"] = std::to_string(++rv_);
    events_.push_back({rv_, "MODIFIED", Collection(item), stored});
    cv_.notify_all();
    res.set_content(stored.dump(), "application/json");
  }

  void Watch(const httplib::Request& req, httplib::Response& res, const std::string& collection,
             std::unique_lock<std::mutex> lock) {
    watch_requests_++;
    long from = 0;
    try {
      from = std::stol(req.get_param_value("resourceVersion"));
    } catch (const std::exception&) {
      from = 0;
    }
    if (from != 0 && from + 1 < compacted_) {
      gone_sent_++;
      return Error(res, 410, "Expired", "too old resource version");
    }
    const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    const long generation = generation_;
    lock.unlock();
    auto cursor = std::make_shared<long>(from);
    auto last_bookmark = std::make_shared<std::chrono::steady_clock::time_point>(
        std::chrono::steady_clock::now());
    res.set_chunked_content_provider(
        "application/json",
        [this, collection, cursor, bookmarks, generation, last_bookmark](
            size_t, httplib::DataSink& sink) {
          std::unique_lock<std::mutex> l(mu_);
          cv_.wait_for(l, std::chrono::milliseconds(20));
          if (shutting_down_ || generation_ != generation) {
            sink.done();
            return true;
          }
          if (*cursor + 1 < compacted_) {  // compacted under an open watch
            gone_sent_++;
            const std::string line =
                Json{{"type", "ERROR"}, {"object", StatusJson(410, "Expired", "too old")}}.dump() +
                "\n";
            sink.write(line.data(), line.size());
            sink.done();
            return true;
          }
          std::string out;
          for (const Event& e : events_) {
            if (e.rv > *cursor && e.collection == collection) {
              out += Json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
            }
          }
          if (!events_.empty()) *cursor = std::max(*cursor, events_.back().rv);
          const auto now = std::chrono::steady_clock::now();
          if (bookmarks && bookmark_interval_.count() > 0 &&
              now - *last_bookmark >= bookmark_interval_) {
            *last_bookmark = now;
            bookmarks_sent_++;
            out += Json{{"type", "BOOKMARK"},
                        {"object",
                         {{"kind", "ResourceClaim"},
                          {"apiVersion", "resource.k8s.io/v1"},
                          {"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}}
                       .dump() +
                   "\n";
          }
          l.unlock();
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          return sink.is_writable();
        });
  }

  std::unique_ptr<httplib::Server> server_;
  bool tls_ = false;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool shutting_down_ = false;
  std::string token_;
  std::set<std::string> rejected_cns_;
  std::deque<Failure> failures_;
  int failures_served_ = 0;
  std::chrono::milliseconds bookmark_interval_{0};
  std::map<std::string, Json> objects_;
  std::vector<Event> events_;
  std::vector<Recorded> requests_;
  long rv_ = 100;
  long uid_ = 0;
  long compacted_ = 0;
  long generation_ = 0;
  std::atomic<int> bookmarks_sent_{0};
  std::atomic<int> watch_requests_{0};
  std::atomic<int> gone_sent_{0};
};

}  // namespace devlet::kube::fake
