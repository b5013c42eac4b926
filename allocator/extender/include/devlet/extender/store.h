// File: devlet/extender/store.h
//
// The extender over a kube::ObjectStore (devlet/kube/client.h): StartSync lists and watches the
// objects the allocator needs into a ClusterState; StoreWriter is Bind's ClusterWriter on the store.
//
//   DEVLET_ASSIGN_OR_RETURN(auto store, kube::ManifestStore::Open({.dir = dir}));
//   DEVLET_ASSIGN_OR_RETURN(auto watches, StartSync(*store, state));  // state.synced() after
//   StoreWriter writer(*store);
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/extender/extender.h"
#include "devlet/kube/client.h"

namespace devlet::extender {

// StartSync lists DeviceClasses, ResourceSlices, DeviceTaintRules, ResourceClaims, Nodes and Pods
// into `state`, marks it synced, and keeps it current with watches (ADDED/MODIFIED -> Apply,
// DELETED -> Delete). Keep the returned watchers alive as long as `state` is served.
absl::StatusOr<std::vector<std::unique_ptr<kube::Watcher>>> StartSync(kube::ObjectStore& store,
                                                                      ClusterState& state);

// StoreWriter writes claims and bindings through a kube::ObjectStore. BindPod posts pods/binding
// on a kube::ApiServerStore and updates the pod's spec.nodeName on other stores (the manifest
// store has no subresources).
class StoreWriter : public ClusterWriter {
 public:
  explicit StoreWriter(kube::ObjectStore& store) : store_(store) {}
  absl::StatusOr<kube::ResourceClaim> GetClaim(std::string_view ns,
                                               std::string_view name) override;
  absl::StatusOr<kube::Pod> GetPod(std::string_view ns, std::string_view name) override;
  absl::StatusOr<kube::ResourceClaim> CreateClaim(const kube::ResourceClaim& claim) override;
  absl::StatusOr<kube::ResourceClaim> UpdateClaimStatus(const kube::ResourceClaim& claim) override;
  absl::Status BindPod(std::string_view ns, std::string_view name, std::string_view uid,
                       std::string_view node) override;
  // Reads the pod and writes its status subresource, re-reading on a conflict (a few times).
  absl::Status SetPodExtendedResourceClaimStatus(
      std::string_view ns, std::string_view name, std::string_view uid,
      const kube::PodExtendedResourceClaimStatus& status) override;

 private:
  kube::ObjectStore& store_;
};

}  // namespace devlet::extender
