// StartSync and StoreWriter.
#include "devlet/extender/store.h"

#include <string>
#include <variant>

#include "devlet/common/log.h"
#include "devlet/common/status.h"
#include "devlet/kube/rest_client.h"

namespace devlet::extender {
namespace {

absl::StatusOr<kube::ResourceClaim> AsClaim(absl::StatusOr<kube::Object> object) {
  if (!object.ok()) return object.status();
  if (auto* claim = std::get_if<kube::ResourceClaim>(&*object)) return std::move(*claim);
  return Internal("the object store returned a " + std::string(kube::KindOf(*object)) +
                  " for a ResourceClaim");
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<kube::Watcher>>> StartSync(kube::ObjectStore& store,
                                                                      ClusterState& state) {
  // Classes and slices before claims, so that claims' allocations meet their devices.
  const kube::Kind kinds[] = {kube::Kind::kDeviceClass, kube::Kind::kResourceSlice,
                              kube::Kind::kDeviceTaintRule, kube::Kind::kResourceClaim,
                              kube::Kind::kNode, kube::Kind::kPod};
  for (kube::Kind kind : kinds) {
    DEVLET_ASSIGN_OR_RETURN(std::vector<kube::Object> objects, store.List(kind, {}));
    for (const auto& object : objects) {
      DEVLET_RETURN_IF_ERROR(WithContext(state.Apply(object), kube::Describe(object)));
    }
  }
  std::vector<std::unique_ptr<kube::Watcher>> watchers;
  for (kube::Kind kind : kinds) {
    DEVLET_ASSIGN_OR_RETURN(
        std::unique_ptr<kube::Watcher> watcher,
        store.Watch(kind, {}, [&state, kind](const kube::WatchEvent& event) {
          absl::Status status = event.type == kube::WatchEvent::Type::kDeleted
                                    ? state.Delete(event.object)
                                    : state.Apply(event.object);
          if (!status.ok()) {
            log::Logger().Error(status, "Applying a watch event failed", "object",
                                kube::Describe(event.object));
          }
          // After the event is applied: binds waiting to see every claim written before theirs.
          if (kind == kube::Kind::kResourceClaim && !event.progress.empty()) {
            state.ObserveClaimsThrough(event.progress);
          }
        }));
    watchers.push_back(std::move(watcher));
  }
  state.MarkSynced();
  return watchers;
}

absl::StatusOr<kube::ResourceClaim> StoreWriter::GetClaim(std::string_view ns,
                                                          std::string_view name) {
  return AsClaim(store_.Get(kube::Kind::kResourceClaim,
                            kube::ObjectKey{std::string(ns), std::string(name)}));
}

absl::StatusOr<kube::Pod> StoreWriter::GetPod(std::string_view ns, std::string_view name) {
  return kube::GetAs<kube::Pod>(store_, std::string(ns), std::string(name));
}

absl::StatusOr<kube::ResourceClaim> StoreWriter::CreateClaim(const kube::ResourceClaim& claim) {
  kube::ResourceClaim fresh = claim;
  fresh.metadata.uid.clear();  // the store assigns it
  fresh.metadata.resource_version.clear();
  return AsClaim(store_.Create(fresh));
}

absl::StatusOr<kube::ResourceClaim> StoreWriter::UpdateClaimStatus(
    const kube::ResourceClaim& claim) {
  return AsClaim(store_.UpdateStatus(claim));
}

absl::Status StoreWriter::BindPod(std::string_view ns, std::string_view name,
                                  std::string_view uid, std::string_view node) {
  // The API server refuses spec.nodeName in a pod update: bind through pods/binding there.
  if (auto* api = dynamic_cast<kube::ApiServerStore*>(&store_); api != nullptr) {
    return api->BindPod(std::string(ns), std::string(name), std::string(uid), std::string(node));
  }
  DEVLET_ASSIGN_OR_RETURN(kube::Object object,
                          store_.Get(kube::Kind::kPod,
                                     kube::ObjectKey{std::string(ns), std::string(name)}));
  auto* pod = std::get_if<kube::Pod>(&object);
  if (pod == nullptr) return Internal("the object store returned no Pod");
  if (!uid.empty() && pod->metadata.uid != uid) {
    return FailedPrecondition("Pod \"" + std::string(ns) + "/" + std::string(name) + "\": UID " +
                              std::string(uid) + " does not match " + pod->metadata.uid);
  }
  if (!pod->spec.node_name.empty()) {
    return absl::AbortedError("Pod \"" + std::string(ns) + "/" + std::string(name) +
                              "\" is already assigned to node \"" + pod->spec.node_name + "\"");
  }
  pod->spec.node_name = std::string(node);
  return store_.Update(object).status();
}

absl::Status StoreWriter::SetPodExtendedResourceClaimStatus(
    std::string_view ns, std::string_view name, std::string_view uid,
    const kube::PodExtendedResourceClaimStatus& status) {
  const std::string key = std::string(ns) + "/" + std::string(name);
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    DEVLET_ASSIGN_OR_RETURN(
        kube::Object object,
        store_.Get(kube::Kind::kPod, kube::ObjectKey{std::string(ns), std::string(name)}));
    auto* pod = std::get_if<kube::Pod>(&object);
    if (pod == nullptr) return Internal("the object store returned no Pod");
    if (!uid.empty() && pod->metadata.uid != uid) {
      return FailedPrecondition("Pod \"" + key + "\": UID " + std::string(uid) +
                                " does not match " + pod->metadata.uid);
    }
    if (pod->status.extended_resource_claim_status == status) return absl::OkStatus();
    pod->status.extended_resource_claim_status = status;
    absl::StatusOr<kube::Object> written = store_.UpdateStatus(object);
    if (written.ok() || written.status().code() != absl::StatusCode::kAborted ||
        attempt == kAttempts) {
      return written.status();
    }
  }
}

}  // namespace devlet::extender
