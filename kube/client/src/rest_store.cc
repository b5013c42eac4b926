// ApiServerStore: the typed ObjectStore over RestClient, with list+watch (bookmarks, relist on
// 410 Gone, reconnect).
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "devlet/common/status.h"
#include "devlet/kube/rest_client.h"

namespace devlet::kube {
namespace {

using Json = nlohmann::json;

std::string Describe(Kind kind, const ObjectKey& key) {
  std::string out(KindName(kind));
  out += " \"";
  if (!key.namespace_name.empty()) out += key.namespace_name + "/";
  out += key.name + "\"";
  return out;
}

// StringField reads `key` of a JSON object as a string: `fallback` when `value` is not an object
// or the field is absent or not a string. The API server's answers are read with it, not with
// nlohmann's value(), which throws on either (an uncaught exception in a watch thread ended the
// process: fuzz/http_response_fuzzer.cc).
std::string StringField(const Json& value, const char* key, const std::string& fallback = "") {
  if (!value.is_object()) return fallback;
  const auto it = value.find(key);
  return it != value.end() && it->is_string() ? it->get<std::string>() : fallback;
}

ObjectKey KeyOf(const Object& object) {
  const ObjectMeta& meta = MetadataOf(object);
  return ObjectKey{meta.namespace_, meta.name};
}

absl::StatusOr<Object> DecodeObject(const std::string& body, const std::string& what) {
  absl::StatusOr<std::vector<Object>> objects =
      DecodeJson(body, {.source = what + ": response", .skip_unknown_kinds = true});
  if (!objects.ok()) return objects.status();
  if (objects->size() != 1) {
    return Internal(what + ": the API server answered with " +
                    std::to_string(objects->size()) + " objects, expected one");
  }
  return std::move(objects->front());
}

std::vector<std::pair<std::string, std::string>> ListQuery(Kind kind,
                                                           const ListOptions& options) {
  std::vector<std::pair<std::string, std::string>> query;
  if (!options.labels.empty()) {
    std::string selector;
    for (const auto& [key, value] : options.labels) {
      if (!selector.empty()) selector += ',';
      selector += key + "=" + value;
    }
    query.emplace_back("labelSelector", selector);
  }
  std::string fields;
  auto add_field = [&](const std::string& field, const std::string& value) {
    if (!fields.empty()) fields += ',';
    fields += field + "=" + value;
  };
  if (!options.field_node_name.empty() && (kind == Kind::kResourceSlice || kind == Kind::kPod)) {
    add_field("spec.nodeName", options.field_node_name);
  }
  if (!options.field_driver.empty() && kind == Kind::kResourceSlice) {
    add_field("spec.driver", options.field_driver);
  }
  if (!fields.empty()) query.emplace_back("fieldSelector", fields);
  return query;
}

std::string NamespaceFor(Kind kind, const ObjectMeta& meta) {
  if (!IsNamespaced(kind)) return std::string();
  return meta.namespace_.empty() ? std::string("default") : meta.namespace_;
}

}  // namespace

const ResourceInfo& ResourceFor(Kind kind) {
  static const ResourceInfo kDeviceClass{"resource.k8s.io", "v1", "deviceclasses", "DeviceClass",
                                         false};
  static const ResourceInfo kSlice{"resource.k8s.io", "v1", "resourceslices", "ResourceSlice",
                                   false};
  static const ResourceInfo kClaim{"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim",
                                   true};
  static const ResourceInfo kTemplate{"resource.k8s.io", "v1", "resourceclaimtemplates",
                                      "ResourceClaimTemplate", true};
  static const ResourceInfo kTaintRule{"resource.k8s.io", "v1", "devicetaintrules",
                                       "DeviceTaintRule", false};
  static const ResourceInfo kNode{"", "v1", "nodes", "Node", false};
  static const ResourceInfo kPod{"", "v1", "pods", "Pod", true};
  switch (kind) {
    case Kind::kDeviceClass: return kDeviceClass;
    case Kind::kResourceSlice: return kSlice;
    case Kind::kResourceClaim: return kClaim;
    case Kind::kResourceClaimTemplate: return kTemplate;
    case Kind::kDeviceTaintRule: return kTaintRule;
    case Kind::kNode: return kNode;
    case Kind::kPod: return kPod;
  }
  return kPod;
}

std::string ResourcePath(Kind kind, const std::string& namespace_name, const std::string& name,
                         const std::string& subresource) {
  const ResourceInfo& info = ResourceFor(kind);
  std::string path = info.group.empty() ? "/api/" + info.version
                                        : "/apis/" + info.group + "/" + info.version;
  if (info.namespaced && !namespace_name.empty()) path += "/namespaces/" + namespace_name;
  path += "/" + info.plural;
  if (!name.empty()) {
    path += "/" + name;
    if (!subresource.empty()) path += "/" + subresource;
  }
  return path;
}

absl::StatusOr<std::unique_ptr<ApiServerStore>> ApiServerStore::Create(RestConfig config) {
  DEVLET_ASSIGN_OR_RETURN(std::unique_ptr<RestClient> client,
                          RestClient::Create(std::move(config)));
  return std::unique_ptr<ApiServerStore>(new ApiServerStore(std::move(client)));
}

absl::StatusOr<Object> ApiServerStore::Get(Kind kind, const ObjectKey& key) {
  const std::string what = Describe(kind, key);
  RestRequest request{.path = ResourcePath(kind, key.namespace_name, key.name), .what = what};
  DEVLET_ASSIGN_OR_RETURN(RestResponse response, client_->Do(request));
  return DecodeObject(response.body, what);
}

absl::StatusOr<std::pair<std::vector<Object>, std::string>> ApiServerStore::ListWithVersion(
    Kind kind, const ListOptions& options) {
  std::string what = std::string(KindName(kind)) + " list";
  if (!options.namespace_name.empty()) what += " in namespace \"" + options.namespace_name + "\"";
  std::vector<Object> out;
  std::string resource_version;
  std::string continue_token;
  std::string previous_token;
  do {
    RestRequest request{.path = ResourcePath(kind, options.namespace_name),
                        .query = ListQuery(kind, options), .what = what};
    if (client_->config().list_page_size > 0) {
      request.query.emplace_back("limit", std::to_string(client_->config().list_page_size));
    }
    if (!continue_token.empty()) request.query.emplace_back("continue", continue_token);
    DEVLET_ASSIGN_OR_RETURN(RestResponse response, client_->Do(request));
    Json doc = Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return Internal(what + ": the API server's answer is not JSON");
    const Json meta = doc.is_object() && doc.contains("metadata") ? doc["metadata"] : Json();
    resource_version = StringField(meta, "resourceVersion");
    previous_token = std::move(continue_token);
    continue_token = StringField(meta, "continue");
    if (!continue_token.empty() && continue_token == previous_token) {
      // The same page again, forever: the list would never end.
      return Internal(what + ": the API server answered the continue token with itself");
    }
    DEVLET_ASSIGN_OR_RETURN(
        std::vector<Object> page,
        DecodeJson(response.body, {.source = what + ": response", .skip_unknown_kinds = true}));
    for (Object& object : page) {
      if (Matches(object, options)) out.push_back(std::move(object));
    }
  } while (!continue_token.empty());
  std::sort(out.begin(), out.end(),
            [](const Object& a, const Object& b) { return KeyOf(a) < KeyOf(b); });
  return std::make_pair(std::move(out), std::move(resource_version));
}

absl::StatusOr<std::vector<Object>> ApiServerStore::List(Kind kind, const ListOptions& options) {
  DEVLET_ASSIGN_OR_RETURN(auto listed, ListWithVersion(kind, options));
  return std::move(listed.first);
}

absl::StatusOr<Object> ApiServerStore::Create(const Object& object) {
  const Kind kind = KindOfObject(object);
  Object copy = object;
  ObjectMeta& meta = MetadataOf(copy);
  meta.namespace_ = NamespaceFor(kind, meta);
  const std::string what = kube::Describe(copy);
  RestRequest request{.method = "POST",
                      .path = ResourcePath(kind, meta.namespace_),
                      .body = EncodeJson(copy),
                      .what = what,
                      .idempotent = false};
  DEVLET_ASSIGN_OR_RETURN(RestResponse response, client_->Do(request));
  return DecodeObject(response.body, what);
}

namespace {
absl::StatusOr<Object> Put(RestClient& client, const Object& object, const std::string& sub) {
  const Kind kind = KindOfObject(object);
  Object copy = object;
  ObjectMeta& meta = MetadataOf(copy);
  meta.namespace_ = NamespaceFor(kind, meta);
  const std::string what = kube::Describe(copy);
  RestRequest request{.method = "PUT",
                      .path = ResourcePath(kind, meta.namespace_, meta.name, sub),
                      .body = EncodeJson(copy),
                      .what = what};
  DEVLET_ASSIGN_OR_RETURN(RestResponse response, client.Do(request));
  return DecodeObject(response.body, what);
}
}  // namespace

absl::StatusOr<Object> ApiServerStore::Update(const Object& object) {
  return Put(*client_, object, "");
}

absl::StatusOr<Object> ApiServerStore::UpdateStatus(const Object& object) {
  return Put(*client_, object, "status");
}

absl::Status ApiServerStore::Delete(Kind kind, const ObjectKey& key, const std::string& uid) {
  RestRequest request{.method = "DELETE",
                      .path = ResourcePath(kind, key.namespace_name, key.name),
                      .what = Describe(kind, key)};
  if (!uid.empty()) {
    request.body = Json{{"apiVersion", "v1"},
                        {"kind", "DeleteOptions"},
                        {"preconditions", {{"uid", uid}}}}
                       .dump();
  }
  return client_->Do(request).status();
}

absl::Status ApiServerStore::BindPod(const std::string& namespace_name, const std::string& name,
                                     const std::string& uid, const std::string& node) {
  const ObjectKey key{namespace_name.empty() ? std::string("default") : namespace_name, name};
  Json metadata{{"name", key.name}, {"namespace", key.namespace_name}};
  if (!uid.empty()) metadata["uid"] = uid;
  const Json binding{{"apiVersion", "v1"},
                     {"kind", "Binding"},
                     {"metadata", metadata},
                     {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  RestRequest request{.method = "POST",
                      .path = ResourcePath(Kind::kPod, key.namespace_name, key.name, "binding"),
                      .body = binding.dump(),
                      .what = Describe(Kind::kPod, key) + " binding to node \"" + node + "\"",
                      .idempotent = false};
  return client_->Do(request).status();
}

absl::StatusOr<Object> ApiServerStore::Patch(Kind kind, const ObjectKey& key,
                                             const std::string& patch, PatchType type,
                                             const PatchOptions& options) {
  const std::string what = Describe(kind, key);
  RestRequest request{.method = "PATCH",
                      .path = ResourcePath(kind, key.namespace_name, key.name,
                                           options.subresource),
                      .body = patch,
                      .what = what};
  if (type == PatchType::kApply) {
    if (options.field_manager.empty()) {
      return InvalidArgument(what + ": server-side apply needs a field manager");
    }
    request.content_type = "application/apply-patch+yaml";
    request.query.emplace_back("fieldManager", options.field_manager);
    if (options.force) request.query.emplace_back("force", "true");
  } else {
    request.content_type = "application/merge-patch+json";
    if (!options.field_manager.empty()) {
      request.query.emplace_back("fieldManager", options.field_manager);
    }
  }
  DEVLET_ASSIGN_OR_RETURN(RestResponse response, client_->Do(request));
  return DecodeObject(response.body, what);
}

absl::StatusOr<Object> ApiServerStore::Apply(const Object& object, const PatchOptions& options) {
  const Kind kind = KindOfObject(object);
  Object copy = object;
  ObjectMeta& meta = MetadataOf(copy);
  meta.namespace_ = NamespaceFor(kind, meta);
  std::string body = EncodeJson(copy);
  try {  // An apply configuration must not carry managedFields.
    Json j = Json::parse(body);
    if (j.contains("metadata")) j["metadata"].erase("managedFields");
    body = j.dump();
  } catch (const std::exception&) {
  }
  return Patch(kind, KeyOf(copy), body, PatchType::kApply, options);
}

// ---- Watch ----------------------------------------------------------------------------------

namespace {

class RestWatch final : public kube::Watcher {
 public:
  RestWatch(ApiServerStore& store, Kind kind, ListOptions options, WatchCallback callback,
            std::vector<Object> initial, std::string resource_version)
      : store_(store), kind_(kind), options_(std::move(options)), callback_(std::move(callback)) {
    // The listed state is reported before the constructor returns, so that an ADDED event can
    // never arrive after (and undo) a write the caller makes once Watch has returned.
    Sync(std::move(initial), resource_version);
    thread_ = std::thread(
        [this, rv = std::move(resource_version)]() mutable { Run(std::move(rv)); });
  }
  ~RestWatch() override { Stop(); }

  void Stop() override {
    stop_.store(true);
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

 private:
  void Emit(WatchEvent::Type type, Object object, std::string progress) {
    if (stop_.load()) return;
    callback_(WatchEvent{type, std::move(object), std::move(progress)});
  }

  // Reports the difference between what we knew and a fresh list taken at `list_version`; only
  // the last event carries the list's version as its progress (the events are in name order).
  void Sync(std::vector<Object> listed, const std::string& list_version) {
    std::map<ObjectKey, Object> fresh;
    for (Object& object : listed) fresh.emplace(KeyOf(object), std::move(object));
    std::vector<WatchEvent> events;
    for (auto it = known_.begin(); it != known_.end();) {
      if (!fresh.contains(it->first)) {
        events.push_back(WatchEvent{WatchEvent::Type::kDeleted, std::move(it->second), {}});
        it = known_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& [key, object] : fresh) {
      auto it = known_.find(key);
      if (it == known_.end()) {
        known_.emplace(key, object);
        events.push_back(WatchEvent{WatchEvent::Type::kAdded, std::move(object), {}});
      } else if (MetadataOf(it->second).resource_version != MetadataOf(object).resource_version) {
        it->second = object;
        events.push_back(WatchEvent{WatchEvent::Type::kModified, std::move(object), {}});
      }
    }
    if (!events.empty()) events.back().progress = list_version;
    for (WatchEvent& event : events) {
      Emit(event.type, std::move(event.object), std::move(event.progress));
    }
  }

  void Sleep(std::chrono::milliseconds delay) {
    const auto until = std::chrono::steady_clock::now() + delay;
    while (!stop_.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void Run(std::string rv) {
    const RestConfig& config = store_.client().config();
    std::chrono::milliseconds backoff = config.initial_backoff;
    bool relist = false;
    while (!stop_.load()) {
      if (relist) {
        absl::StatusOr<std::pair<std::vector<Object>, std::string>> listed =
            store_.ListWithVersion(kind_, options_);
        if (!listed.ok()) {
          Sleep(backoff);
          backoff = std::min(backoff * 2, config.max_backoff);
          continue;
        }
        Sync(std::move(listed->first), listed->second);
        rv = std::move(listed->second);
        relist = false;
      }
      RestRequest request{.path = ResourcePath(kind_, options_.namespace_name),
                          .query = ListQuery(kind_, options_),
                          .what = std::string(KindName(kind_)) + " watch"};
      request.query.emplace_back("watch", "true");
      request.query.emplace_back("allowWatchBookmarks", "true");
      request.query.emplace_back("resourceVersion", rv);
      request.query.emplace_back("timeoutSeconds", std::to_string(config.watch_timeout.count()));
      bool progressed = false;
      const absl::Status status = store_.client().Stream(
          request,
          [&](std::string line) {
            Json event;
            try {
              event = Json::parse(line);
            } catch (const std::exception&) {
              return false;  // a broken stream: reconnect
            }
            const std::string type = StringField(event, "type");
            static const Json kNoObject = Json::object();
            const Json& object =
                event.is_object() && event.contains("object") ? event["object"] : kNoObject;
            if (type == "BOOKMARK") {
              if (object.is_object() && object.contains("metadata")) {
                rv = StringField(object["metadata"], "resourceVersion", rv);
              }
              progressed = true;
              return true;
            }
            if (type == "ERROR") {
              const auto code = object.is_object() ? object.find("code") : object.end();
              if (code != object.end() && code->is_number() && *code == 410) relist = true;
              return false;
            }
            absl::StatusOr<Object> decoded = DecodeObject(object.dump(), request.what);
            if (!decoded.ok()) return true;  // an object we cannot read: skip it
            const ObjectKey key = KeyOf(*decoded);
            rv = MetadataOf(*decoded).resource_version;
            progressed = true;
            if (type == "DELETED") {
              known_.erase(key);
              Emit(WatchEvent::Type::kDeleted, *std::move(decoded), rv);
            } else {
              const bool existed = known_.contains(key);
              known_.insert_or_assign(key, *decoded);
              Emit(existed ? WatchEvent::Type::kModified : WatchEvent::Type::kAdded,
                   *std::move(decoded), rv);
            }
            return true;
          },
          stop_);
      if (stop_.load()) break;
      if (absl::IsOutOfRange(status)) relist = true;  // 410 on connect
      if (progressed) backoff = config.initial_backoff;
      if (!status.ok() || !progressed) {
        if (!relist || !status.ok()) {
          Sleep(backoff);
          backoff = std::min(backoff * 2, config.max_backoff);
        }
      }
    }
  }

  ApiServerStore& store_;
  const Kind kind_;
  const ListOptions options_;
  WatchCallback callback_;
  std::atomic<bool> stop_{false};
  std::map<ObjectKey, Object> known_;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<kube::Watcher>> ApiServerStore::Watch(Kind kind,
                                                                   const ListOptions& options,
                                                                   WatchCallback callback) {
  // The first list runs here so that errors (RBAC, a bad selector) reach the caller.
  DEVLET_ASSIGN_OR_RETURN(auto listed, ListWithVersion(kind, options));
  return std::unique_ptr<kube::Watcher>(new RestWatch(*this, kind, options, std::move(callback),
                                                    std::move(listed.first),
                                                    std::move(listed.second)));
}

}  // namespace devlet::kube
