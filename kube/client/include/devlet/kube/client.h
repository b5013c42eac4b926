// File: devlet/kube/client.h
//
// ObjectStore is how devlet's agents read and write Kubernetes objects, whatever holds them: a
// kube-apiserver (the REST client, kube/client/src/rest_*.cc, not yet written) or a directory of
// manifests (standalone mode, `devlet-node --manifests DIR`, DESIGN.md §1). Objects are the typed
// v1 values of devlet/kube/codec.h (`kube::Object`).
//
//   DEVLET_ASSIGN_OR_RETURN(std::unique_ptr<ObjectStore> store, ManifestStore::Open({.dir = dir}));
//   DEVLET_ASSIGN_OR_RETURN(ResourceClaim claim, GetAs<ResourceClaim>(*store, "ns", "name"));
//   DEVLET_ASSIGN_OR_RETURN(std::vector<ResourceSlice> slices,
//                           ListAs<ResourceSlice>(*store, {.field_node_name = "node-1"}));
//   DEVLET_ASSIGN_OR_RETURN(std::unique_ptr<Watcher> watch,
//       store->Watch(Kind::kResourceClaim, {}, [](const WatchEvent& event) { ... }));
//
// Semantics every implementation follows (those of the API server):
//   - Get/Delete of a missing object: NotFound. Create of an existing one: AlreadyExists.
//   - Update with a non-empty metadata.resourceVersion that is not the current one: Aborted (the
//     API server's 409 Conflict); an empty resourceVersion updates unconditionally.
//   - Every returned object carries metadata.resourceVersion (opaque: compare for equality only)
//     and metadata.uid (assigned on Create when empty).
//   - Errors are written for a person and name the object ("ResourceClaim \"ns/name\"").
// Implementations are thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/kube/codec.h"

namespace devlet::kube {

// Kind selects an object type. Namespaced: ResourceClaim, ResourceClaimTemplate, Pod.
enum class Kind {
  kDeviceClass,
  kResourceSlice,
  kResourceClaim,
  kResourceClaimTemplate,
  kDeviceTaintRule,
  kNode,
  kPod,
};

// KindName returns the Kubernetes kind ("ResourceClaim").
std::string_view KindName(Kind kind);

// KindOfObject returns the Kind of a decoded object.
Kind KindOfObject(const Object& object);

// IsNamespaced reports whether objects of `kind` live in a namespace.
bool IsNamespaced(Kind kind);

// KindFor<T> maps a typed object (ResourceClaim, ...) to its Kind.
template <typename T>
constexpr Kind KindFor() {
  if constexpr (std::is_same_v<T, DeviceClass>) return Kind::kDeviceClass;
  else if constexpr (std::is_same_v<T, ResourceSlice>) return Kind::kResourceSlice;
  else if constexpr (std::is_same_v<T, ResourceClaim>) return Kind::kResourceClaim;
  else if constexpr (std::is_same_v<T, ResourceClaimTemplate>) return Kind::kResourceClaimTemplate;
  else if constexpr (std::is_same_v<T, DeviceTaintRule>) return Kind::kDeviceTaintRule;
  else if constexpr (std::is_same_v<T, Node>) return Kind::kNode;
  else {
    static_assert(std::is_same_v<T, Pod>, "not a kube::Object type");
    return Kind::kPod;
  }
}

// ObjectKey names one object; `namespace_name` is empty for cluster-scoped kinds.
struct ObjectKey {
  std::string namespace_name;
  std::string name;

  friend bool operator==(const ObjectKey&, const ObjectKey&) = default;
  friend auto operator<=>(const ObjectKey&, const ObjectKey&) = default;
};

// ListOptions filter List and Watch. Empty fields do not constrain.
struct ListOptions {
  // Only objects in this namespace (namespaced kinds).
  std::string namespace_name;
  // Equality label selector: every label must be present with this value.
  std::vector<std::pair<std::string, std::string>> labels;
  // ResourceSlice: spec.nodeName; Pod: spec.nodeName (the API server's field selectors).
  std::string field_node_name;
  // ResourceSlice: spec.driver.
  std::string field_driver;
};

// Matches reports whether `object` passes `options` (what List and Watch filter with).
bool Matches(const Object& object, const ListOptions& options);

// WatchEvent is one change seen by a Watch.
struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type = Type::kAdded;
  Object object;  // for kDeleted: the last state seen
  // When not empty, every change to the watched objects up to this resourceVersion has been
  // reported, this event included. ApiServerStore sets it on each streamed event (the API server
  // sends a watch's events in resourceVersion order) and on the last event of a relist (the list's
  // resourceVersion: within a relist, events come in name order). Stores whose resourceVersions
  // have no order (ManifestStore) leave it empty.
  std::string progress;
};

// WatchEventTypeName returns "ADDED", "MODIFIED" or "DELETED" (the API server's spelling).
std::string_view WatchEventTypeName(WatchEvent::Type type);

// Watcher is a running watch; destroying it (or Stop) ends the callbacks. Stop waits for a running
// callback to return, so it must not be called from inside the callback.
class Watcher {
 public:
  virtual ~Watcher() = default;
  virtual void Stop() = 0;
};

// WatchCallback receives events in order: the current state as ADDED events on the caller's
// thread before Watch returns (so none of them can arrive after a write the caller makes next),
// then changes on a thread owned by the watch.
using WatchCallback = std::function<void(const WatchEvent& event)>;

// ObjectStore reads and writes Kubernetes objects. See the file comment for the semantics.
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // Get returns one object.
  virtual absl::StatusOr<Object> Get(Kind kind, const ObjectKey& key) = 0;
  // List returns the objects of `kind` that match `options`, ordered by namespace and name.
  virtual absl::StatusOr<std::vector<Object>> List(Kind kind, const ListOptions& options) = 0;
  // Create stores a new object and returns it as stored (uid and resourceVersion set).
  virtual absl::StatusOr<Object> Create(const Object& object) = 0;
  // Update replaces an existing object (spec and metadata) and returns it as stored.
  virtual absl::StatusOr<Object> Update(const Object& object) = 0;
  // UpdateStatus replaces only the status of an existing object (the status subresource).
  virtual absl::StatusOr<Object> UpdateStatus(const Object& object) = 0;
  // Delete removes an object. With `uid` set, only if the stored object has that UID
  // (Aborted otherwise), as the API server's delete preconditions.
  virtual absl::Status Delete(Kind kind, const ObjectKey& key,
                              const std::string& uid = std::string()) = 0;
  // Watch first reports every matching object as kAdded (like list-then-watch), then changes.
  virtual absl::StatusOr<std::unique_ptr<Watcher>> Watch(Kind kind, const ListOptions& options,
                                                       WatchCallback callback) = 0;
};

// GetAs returns a typed object.
template <typename T>
absl::StatusOr<T> GetAs(ObjectStore& store, const std::string& namespace_name,
                        const std::string& name) {
  absl::StatusOr<Object> object = store.Get(KindFor<T>(), ObjectKey{namespace_name, name});
  if (!object.ok()) return object.status();
  return std::get<T>(*std::move(object));
}

// ListAs returns typed objects.
template <typename T>
absl::StatusOr<std::vector<T>> ListAs(ObjectStore& store, const ListOptions& options = {}) {
  absl::StatusOr<std::vector<Object>> objects = store.List(KindFor<T>(), options);
  if (!objects.ok()) return objects.status();
  std::vector<T> out;
  out.reserve(objects->size());
  for (Object& object : *objects) out.push_back(std::get<T>(std::move(object)));
  return out;
}

// ---- Standalone mode: the manifest directory --------------------------------------------------

// ManifestStoreOptions configures a ManifestStore.
struct ManifestStoreOptions {
  // The directory (created 0755 when missing).
  std::string dir;
  // How often watches look for changes (the directory is re-read; no inotify).
  std::chrono::milliseconds poll_interval{500};
};

// ManifestStore is an ObjectStore over a directory of manifests, like the kubelet's static-pod
// directory:
//   - reads every regular `*.yaml`, `*.yml` and `*.json` file (not recursing, skipping names that
//     start with '.'): YAML multi-document or JSON object / List, any kinds of kube::Object (others
//     are ignored). A file that does not decode is skipped; errors() says why.
//   - Create writes the object alone into `<dir>/<kind>-[<namespace>-]<name>.json` (kind in
//     lower case), atomically (temp file, fsync, rename, fsync dir).
//   - Update, UpdateStatus and Delete change the object's own file; an object that shares its file
//     with others (hand-written multi-document files) cannot be changed: FailedPrecondition.
//   - resourceVersion is a hash of the object's content; uid is kept, or for hand-written objects
//     without one derived from kind, namespace and name (stable across reads).
//   - Watches poll the directory every poll_interval.
// Every call re-lists the directory and stats each file, so hand edits are seen at once; a file
// is decoded again only when its identity (inode, size, mtime, ctime) changed, or while it is
// younger than a second (an edit within the file system's timestamp granularity could otherwise
// keep size and times).
class ManifestStore final : public ObjectStore {
 public:
  static absl::StatusOr<std::unique_ptr<ManifestStore>> Open(ManifestStoreOptions options);
  ~ManifestStore() override;

  absl::StatusOr<Object> Get(Kind kind, const ObjectKey& key) override;
  absl::StatusOr<std::vector<Object>> List(Kind kind, const ListOptions& options) override;
  absl::StatusOr<Object> Create(const Object& object) override;
  absl::StatusOr<Object> Update(const Object& object) override;
  absl::StatusOr<Object> UpdateStatus(const Object& object) override;
  absl::Status Delete(Kind kind, const ObjectKey& key,
                      const std::string& uid = std::string()) override;
  absl::StatusOr<std::unique_ptr<kube::Watcher>> Watch(Kind kind, const ListOptions& options,
                                                     WatchCallback callback) override;

  // errors returns, from the last read, "<file>: <why>" for each file that was skipped.
  std::vector<std::string> errors() const;
  // FileFor returns the file Create writes for an object.
  std::string FileFor(const Object& object) const;
  const std::string& dir() const { return options_.dir; }

  struct Entry;  // One object read from a file (implementation detail).

 private:
  explicit ManifestStore(ManifestStoreOptions options);
  // Scan re-reads the directory (decoding only changed files) and returns the entries `want`
  // accepts (all when it is empty), in file order.
  absl::StatusOr<std::vector<Entry>> Scan(const std::function<bool(const Object&)>& want = {});
  absl::StatusOr<Object> Replace(const Object& object, bool status_only);

  struct Cache;  // decoded files by path (implementation detail)

  ManifestStoreOptions options_;
  mutable std::mutex mu_;     // guards errors_ and cache_
  std::mutex write_mu_;       // serializes writers; readers re-scan
  std::vector<std::string> errors_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace devlet::kube
