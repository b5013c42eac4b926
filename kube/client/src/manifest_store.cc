// ManifestStore: the ObjectStore of standalone mode over a directory of manifests.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "devlet/common/files.h"
#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/common/strings.h"
#include "devlet/kube/client.h"
#include "devlet/kube/validation.h"

namespace devlet::kube {

struct ManifestStore::Entry {
  std::string file;        // absolute path
  int objects_in_file = 0;  // how many objects the file holds
  Object object;
};

// Cache keeps each file's decoded entries (or its decode error) with the file's identity.
struct ManifestStore::Cache {
  struct Identity {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    std::int64_t mtime_ns = 0;
    std::int64_t ctime_ns = 0;
    bool operator==(const Identity&) const = default;
  };
  struct File {
    Identity identity;
    std::vector<Entry> entries;
    std::vector<std::string> errors;
    // Objects that decoded but failed validation: Get names the reason instead of "not found".
    struct Rejected {
      Kind kind;
      ObjectKey key;
      std::string error;
    };
    std::vector<Rejected> rejected;
  };
  std::map<std::string, std::shared_ptr<const File>> files;
};

namespace {

namespace fs = std::filesystem;

std::uint64_t Fnv1a(std::string_view data, std::uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string Hex(std::uint64_t value, int digits) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i) {
    out[static_cast<size_t>(i)] = kDigits[value & 0xf];
    value >>= 4;
  }
  return out;
}

// StableUid derives an RFC 4122-shaped UID from the object's identity.
std::string StableUid(Kind kind, const ObjectMeta& meta) {
  std::string id = std::string(KindName(kind)) + "/" + meta.namespace_ + "/" + meta.name;
  std::uint64_t a = Fnv1a(id);
  std::uint64_t b = Fnv1a(id, a ^ 0x9e3779b97f4a7c15ull);
  std::string h = Hex(a, 16) + Hex(b, 16);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20, 12);
}

// ResourceVersionOf hashes the object without its resourceVersion.
std::string ResourceVersionOf(Object object) {
  MetadataOf(object).resource_version.clear();
  return std::to_string(Fnv1a(EncodeJson(object)) & 0x7fffffffffffull);
}

ObjectKey KeyOf(const Object& object) {
  const ObjectMeta& meta = MetadataOf(object);
  return ObjectKey{meta.namespace_, meta.name};
}

std::string DescribeKey(Kind kind, const ObjectKey& key) {
  // Quoted as Go's %q: a name with NUL or newline is shown escaped, never raw.
  return std::string(KindName(kind)) + " " +
         GoQuote(key.namespace_name.empty() ? key.name : key.namespace_name + "/" + key.name);
}

bool IsManifestName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  for (const char* ext : {".yaml", ".yml", ".json"}) {
    std::string_view e(ext);
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path);
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Internal("cannot read " + path);
  return out.str();
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// CopyStatus copies the status of `from` into `to` (same kind); false for kinds without status.
bool CopyStatus(const Object& from, Object& to) {
  if (auto* claim = std::get_if<ResourceClaim>(&to)) {
    claim->status = std::get<ResourceClaim>(from).status;
    return true;
  }
  if (auto* pod = std::get_if<Pod>(&to)) {
    pod->status = std::get<Pod>(from).status;
    return true;
  }
  if (auto* rule = std::get_if<DeviceTaintRule>(&to)) {
    rule->status = std::get<DeviceTaintRule>(from).status;
    return true;
  }
  return false;
}

// PollingWatch re-lists on a timer and reports differences.
class PollingWatch final : public Watcher {
 public:
  PollingWatch(ObjectStore& store, Kind kind, ListOptions options, WatchCallback callback,
               std::chrono::milliseconds interval)
      : store_(store),
        kind_(kind),
        options_(std::move(options)),
        callback_(std::move(callback)),
        interval_(interval) {
    // The current state is reported before the constructor returns, so that an ADDED event can
    // never arrive after (and undo) a write the caller makes once Watch has returned.
    Poll();
    thread_ = std::thread([this] { Loop(); });
  }
  ~PollingWatch() override { Stop(); }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // Poll lists once and reports the differences from the last list.
  void Poll() {
    absl::StatusOr<std::vector<Object>> objects = store_.List(kind_, options_);
    if (!objects.ok()) {
      log::Logger().V(2).Info("Watch cannot list", "kind", KindName(kind_), "err",
                              objects.status());
      return;
    }
    std::map<ObjectKey, Object> now;
    for (Object& object : *objects) now.emplace(KeyOf(object), std::move(object));
    for (const auto& [key, object] : now) {
      auto it = seen_.find(key);
      if (it == seen_.end()) {
        callback_(WatchEvent{WatchEvent::Type::kAdded, object, {}});
      } else if (MetadataOf(it->second).resource_version != MetadataOf(object).resource_version) {
        callback_(WatchEvent{WatchEvent::Type::kModified, object, {}});
      }
    }
    for (const auto& [key, object] : seen_) {
      if (!now.contains(key)) callback_(WatchEvent{WatchEvent::Type::kDeleted, object, {}});
    }
    seen_ = std::move(now);
  }

  void Loop() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, interval_, [this] { return stop_; })) return;
      }
      Poll();
    }
  }

  ObjectStore& store_;
  const Kind kind_;
  const ListOptions options_;
  WatchCallback callback_;
  const std::chrono::milliseconds interval_;
  std::map<ObjectKey, Object> seen_;  // only the watch's thread touches it after construction
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kDeviceClass: return "DeviceClass";
    case Kind::kResourceSlice: return "ResourceSlice";
    case Kind::kResourceClaim: return "ResourceClaim";
    case Kind::kResourceClaimTemplate: return "ResourceClaimTemplate";
    case Kind::kDeviceTaintRule: return "DeviceTaintRule";
    case Kind::kNode: return "Node";
    case Kind::kPod: return "Pod";
  }
  return "Unknown";
}

Kind KindOfObject(const Object& object) {
  return std::visit([](const auto& typed) { return KindFor<std::decay_t<decltype(typed)>>(); },
                    object);
}

bool IsNamespaced(Kind kind) {
  return kind == Kind::kResourceClaim || kind == Kind::kResourceClaimTemplate ||
         kind == Kind::kPod;
}

std::string_view WatchEventTypeName(WatchEvent::Type type) {
  switch (type) {
    case WatchEvent::Type::kAdded: return "ADDED";
    case WatchEvent::Type::kModified: return "MODIFIED";
    case WatchEvent::Type::kDeleted: return "DELETED";
  }
  return "UNKNOWN";
}

bool Matches(const Object& object, const ListOptions& options) {
  const ObjectMeta& meta = MetadataOf(object);
  if (!options.namespace_name.empty() && IsNamespaced(KindOfObject(object)) &&
      meta.namespace_ != options.namespace_name) {
    return false;
  }
  for (const auto& [key, value] : options.labels) {
    auto it = meta.labels.find(key);
    if (it == meta.labels.end() || it->second != value) return false;
  }
  if (!options.field_node_name.empty()) {
    if (const auto* slice = std::get_if<ResourceSlice>(&object)) {
      if (slice->spec.node_name.value_or("") != options.field_node_name) return false;
    } else if (const auto* pod = std::get_if<Pod>(&object)) {
      if (pod->spec.node_name != options.field_node_name) return false;
    }
  }
  if (!options.field_driver.empty()) {
    if (const auto* slice = std::get_if<ResourceSlice>(&object)) {
      if (slice->spec.driver != options.field_driver) return false;
    }
  }
  return true;
}

ManifestStore::ManifestStore(ManifestStoreOptions options)
    : options_(std::move(options)), cache_(std::make_unique<Cache>()) {}

ManifestStore::~ManifestStore() = default;

absl::StatusOr<std::unique_ptr<ManifestStore>> ManifestStore::Open(ManifestStoreOptions options) {
  if (options.dir.empty()) return InvalidArgument("the manifest directory is empty");
  std::error_code ec;
  // Created 0755 whatever the umask (fs::create_directories would make it 0777 under umask 0).
  for (fs::path part = fs::path(options.dir).lexically_normal(), current; const auto& c : part) {
    current /= c;
    if (current.empty() || fs::is_directory(current, ec)) continue;
    if (::mkdir(current.c_str(), 0755) == 0) (void)::chmod(current.c_str(), 0755);
  }
  if (!fs::is_directory(options.dir, ec)) {
    return FailedPrecondition("manifest directory " + options.dir +
                              " cannot be created or is not a directory" +
                              (ec ? ": " + ec.message() : std::string()));
  }
  options.dir = fs::absolute(options.dir, ec).lexically_normal().string();
  if (!options.dir.empty() && options.dir.back() == '/') options.dir.pop_back();
  return std::unique_ptr<ManifestStore>(new ManifestStore(std::move(options)));
}

absl::StatusOr<std::vector<ManifestStore::Entry>> ManifestStore::Scan(
    const std::function<bool(const Object&)>& want) {
  // One open directory and fstatat() by name: a stat of the full path walked every component
  // of the directory's path again, for every file, on every Get.
  DIR* dir = ::opendir(options_.dir.c_str());
  if (dir == nullptr) {
    return Unavailable("cannot read manifest directory " + options_.dir + ": " +
                       std::strerror(errno));
  }
  std::vector<std::pair<std::string, struct stat>> files;  // path, stat; sorted below
  for (;;) {
    errno = 0;
    const struct dirent* d = ::readdir(dir);
    if (d == nullptr) {
      const int error = errno;
      if (error == 0) break;
      ::closedir(dir);
      return Unavailable("cannot read manifest directory " + options_.dir + ": " +
                         std::strerror(error));
    }
    const std::string name = d->d_name;
    if (!IsManifestName(name)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), d->d_name, &st, 0) != 0) continue;  // removed since: gone
    if (!S_ISREG(st.st_mode)) continue;
    files.emplace_back(options_.dir + "/" + name, st);
  }
  ::closedir(dir);
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::vector<Entry> entries;
  std::vector<std::string> errors;
  std::map<std::string, std::shared_ptr<const Cache::File>> seen;
  for (const auto& [file, st] : files) {
    Cache::Identity identity{st.st_dev,
                             st.st_ino,
                             st.st_size,
                             static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                                 st.st_mtim.tv_nsec,
                             static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 +
                                 st.st_ctim.tv_nsec};
    // Files changed within the last second are decoded every time: a second edit inside the
    // timestamp granularity may keep the same size and times.
    const bool settled = now_ns - std::max(identity.mtime_ns, identity.ctime_ns) > 1000000000;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto cached = cache_->files.find(file);
      if (settled && cached != cache_->files.end() && cached->second->identity == identity) {
        const Cache::File& hit = *cached->second;
        for (const Entry& entry : hit.entries) {
          if (!want || want(entry.object)) entries.push_back(entry);
        }
        errors.insert(errors.end(), hit.errors.begin(), hit.errors.end());
        seen.emplace(file, cached->second);
        continue;
      }
    }
    std::vector<std::string> previous_errors;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto cached = cache_->files.find(file); cached != cache_->files.end()) {
        previous_errors = cached->second->errors;
      }
    }
    auto fresh = std::make_shared<Cache::File>();
    Cache::File& decoded = *fresh;
    decoded.identity = identity;
    absl::StatusOr<std::string> data = ReadWholeFile(file);
    if (!data.ok()) continue;  // Removed between listing and reading: it is simply gone.
    DecodeOptions decode;
    decode.source = fs::path(file).filename().string();
    decode.skip_unknown_kinds = true;
    absl::StatusOr<std::vector<Object>> objects = Decode(*data, decode);
    if (!objects.ok()) {
      decoded.errors.push_back(file + ": " + Message(objects.status()));
    } else {
      for (Object& object : *objects) {
        ObjectMeta& meta = MetadataOf(object);
        Kind kind = KindOfObject(object);
        if (meta.name.empty()) {
          decoded.errors.push_back(file + ": " + std::string(KindName(kind)) +
                                   " without metadata.name");
          continue;
        }
        if (IsNamespaced(kind) && meta.namespace_.empty()) meta.namespace_ = "default";
        if (!IsNamespaced(kind)) meta.namespace_.clear();
        if (meta.uid.empty()) meta.uid = StableUid(kind, meta);
        // What the API server would refuse is refused here too: names become file paths on
        // the node (claim namespaces and names, request, pool and device names).
        if (absl::Status valid = Validate(object); !valid.ok()) {
          decoded.errors.push_back(file + ": " + Message(valid));
          decoded.rejected.push_back({kind, KeyOf(object), decoded.errors.back()});
          continue;
        }
        meta.resource_version = ResourceVersionOf(object);
        decoded.entries.push_back(Entry{file, static_cast<int>(objects->size()), std::move(object)});
      }
    }
    // Each new problem of a file is logged once (not at every re-read of an unchanged file).
    if (decoded.errors != previous_errors) {
      for (const std::string& error : decoded.errors) {
        log::Logger().Error(InvalidArgument(error), "Skipping manifest content", "file", file);
      }
    }
    for (const Entry& entry : decoded.entries) {
      if (!want || want(entry.object)) entries.push_back(entry);
    }
    errors.insert(errors.end(), decoded.errors.begin(), decoded.errors.end());
    seen.emplace(file, std::move(fresh));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    errors_ = std::move(errors);
    cache_->files = std::move(seen);  // Files that are gone drop out.
  }
  return entries;
}

std::vector<std::string> ManifestStore::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

std::string ManifestStore::FileFor(const Object& object) const {
  const ObjectMeta& meta = MetadataOf(object);
  std::string base = Lower(KindName(KindOfObject(object))) + "-";
  if (!meta.namespace_.empty()) base += meta.namespace_ + "-";
  base += meta.name;
  for (char& c : base) {
    if (c == '/') c = '_';
  }
  return options_.dir + "/" + base + ".json";
}

absl::StatusOr<Object> ManifestStore::Get(Kind kind, const ObjectKey& key) {
  ObjectKey wanted = key;
  if (IsNamespaced(kind) && wanted.namespace_name.empty()) wanted.namespace_name = "default";
  if (!IsNamespaced(kind)) wanted.namespace_name.clear();
  // Only the wanted object is copied out of the cache (a claim fetch on a node with many
  // manifests copied every object).
  DEVLET_ASSIGN_OR_RETURN(std::vector<Entry> entries, Scan([&](const Object& object) {
                            return KindOfObject(object) == kind && KeyOf(object) == wanted;
                          }));
  for (Entry& entry : entries) {
    if (KindOfObject(entry.object) == kind && KeyOf(entry.object) == wanted) {
      return std::move(entry.object);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [file, decoded] : cache_->files) {
      for (const Cache::File::Rejected& rejected : decoded->rejected) {
        if (rejected.kind == kind && rejected.key == wanted) {
          return InvalidArgument(DescribeKey(kind, wanted) + " is invalid and was skipped: " +
                                 rejected.error);
        }
      }
    }
  }
  return NotFound(DescribeKey(kind, wanted) + " not found in manifest directory " + options_.dir);
}

absl::StatusOr<std::vector<Object>> ManifestStore::List(Kind kind, const ListOptions& options) {
  DEVLET_ASSIGN_OR_RETURN(std::vector<Entry> entries, Scan([&](const Object& object) {
                            return KindOfObject(object) == kind;
                          }));
  std::map<ObjectKey, Object> out;  // the first definition of a key wins
  for (Entry& entry : entries) {
    if (KindOfObject(entry.object) != kind || !Matches(entry.object, options)) continue;
    out.emplace(KeyOf(entry.object), std::move(entry.object));
  }
  std::vector<Object> list;
  list.reserve(out.size());
  for (auto& [key, object] : out) list.push_back(std::move(object));
  return list;
}

absl::StatusOr<Object> ManifestStore::Create(const Object& object) {
  Object stored = object;
  ObjectMeta& meta = MetadataOf(stored);
  Kind kind = KindOfObject(stored);
  if (meta.name.empty()) return InvalidArgument(std::string(KindName(kind)) + " without metadata.name");
  if (IsNamespaced(kind) && meta.namespace_.empty()) meta.namespace_ = "default";
  if (!IsNamespaced(kind)) meta.namespace_.clear();
  std::lock_guard<std::mutex> writer(write_mu_);
  DEVLET_ASSIGN_OR_RETURN(std::vector<Entry> entries, Scan());
  for (const Entry& entry : entries) {
    if (KindOfObject(entry.object) == kind && KeyOf(entry.object) == KeyOf(stored)) {
      return AlreadyExists(Describe(stored) + " already exists (in " + entry.file + ")");
    }
  }
  if (meta.uid.empty()) meta.uid = StableUid(kind, meta);
  DEVLET_RETURN_IF_ERROR(Validate(stored));
  meta.resource_version.clear();
  std::string file = FileFor(stored);
  EncodeOptions encode;
  encode.indent = 2;
  DEVLET_RETURN_IF_ERROR(WithContext(WriteFileAtomically(file, EncodeJson(stored, encode) + "\n"),
                                     "creating " + Describe(stored)));
  meta.resource_version = ResourceVersionOf(stored);
  return stored;
}

absl::StatusOr<Object> ManifestStore::Replace(const Object& object, bool status_only) {
  Kind kind = KindOfObject(object);
  Object wanted = object;
  ObjectMeta& meta = MetadataOf(wanted);
  if (IsNamespaced(kind) && meta.namespace_.empty()) meta.namespace_ = "default";
  if (!IsNamespaced(kind)) meta.namespace_.clear();
  std::lock_guard<std::mutex> writer(write_mu_);
  DEVLET_ASSIGN_OR_RETURN(std::vector<Entry> entries, Scan());
  for (Entry& entry : entries) {
    if (KindOfObject(entry.object) != kind || KeyOf(entry.object) != KeyOf(wanted)) continue;
    const ObjectMeta& current = MetadataOf(entry.object);
    if (!meta.resource_version.empty() && meta.resource_version != current.resource_version) {
      return absl::AbortedError(Describe(wanted) +
                                ": the object has been modified; please apply your changes to "
                                "the latest version and try again");
    }
    if (entry.objects_in_file != 1) {
      return FailedPrecondition(Describe(wanted) + " shares " + entry.file +
                                " with other objects; the manifest store changes only objects "
                                "that have a file of their own");
    }
    Object stored;
    if (status_only) {
      stored = entry.object;
      if (!CopyStatus(wanted, stored)) {
        return InvalidArgument(std::string(KindName(kind)) + " has no status subresource");
      }
    } else {
      stored = wanted;
      if (MetadataOf(stored).uid.empty()) MetadataOf(stored).uid = current.uid;
    }
    DEVLET_RETURN_IF_ERROR(Validate(stored));
    MetadataOf(stored).resource_version.clear();
    EncodeOptions encode;
    encode.indent = 2;
    DEVLET_RETURN_IF_ERROR(WithContext(
        WriteFileAtomically(entry.file, EncodeJson(stored, encode) + "\n"),
        "updating " + Describe(stored)));
    MetadataOf(stored).resource_version = ResourceVersionOf(stored);
    return stored;
  }
  return NotFound(Describe(wanted) + " not found in manifest directory " + options_.dir);
}

absl::StatusOr<Object> ManifestStore::Update(const Object& object) {
  return Replace(object, /*status_only=*/false);
}

absl::StatusOr<Object> ManifestStore::UpdateStatus(const Object& object) {
  return Replace(object, /*status_only=*/true);
}

absl::Status ManifestStore::Delete(Kind kind, const ObjectKey& key, const std::string& uid) {
  ObjectKey wanted = key;
  if (IsNamespaced(kind) && wanted.namespace_name.empty()) wanted.namespace_name = "default";
  if (!IsNamespaced(kind)) wanted.namespace_name.clear();
  std::lock_guard<std::mutex> writer(write_mu_);
  DEVLET_ASSIGN_OR_RETURN(std::vector<Entry> entries, Scan());
  for (const Entry& entry : entries) {
    if (KindOfObject(entry.object) != kind || KeyOf(entry.object) != wanted) continue;
    if (!uid.empty() && MetadataOf(entry.object).uid != uid) {
      return absl::AbortedError(DescribeKey(kind, wanted) + ": precondition failed: UID in "
                                "precondition: " + uid + ", UID in object meta: " +
                                MetadataOf(entry.object).uid);
    }
    if (entry.objects_in_file != 1) {
      return FailedPrecondition(DescribeKey(kind, wanted) + " shares " + entry.file +
                                " with other objects; the manifest store deletes only objects "
                                "that have a file of their own");
    }
    if (::unlink(entry.file.c_str()) != 0 && errno != ENOENT) {
      return ErrnoToStatus(errno, "deleting " + entry.file);
    }
    return absl::OkStatus();
  }
  return NotFound(DescribeKey(kind, wanted) + " not found in manifest directory " + options_.dir);
}

absl::StatusOr<std::unique_ptr<Watcher>> ManifestStore::Watch(Kind kind, const ListOptions& options,
                                                            WatchCallback callback) {
  if (!callback) return InvalidArgument("watch without a callback");
  return std::unique_ptr<kube::Watcher>(
      new PollingWatch(*this, kind, options, std::move(callback), options_.poll_interval));
}

}  // namespace devlet::kube
