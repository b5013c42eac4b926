#include "devlet/alloc_cli/cluster.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_split.h"
#include "devlet/common/status.h"

namespace devlet::alloc_cli {

namespace {

// What devlet-alloc reads, for the message of an RBAC refusal.
constexpr char kNeeded[] =
    "devlet-alloc needs get and list on deviceclasses, resourceslices, resourceclaims, "
    "resourceclaimtemplates and devicetaintrules (resource.k8s.io), nodes and pods";

absl::Status Explain(absl::Status status) {
  if (status.code() == absl::StatusCode::kPermissionDenied) {
    return absl::PermissionDeniedError(Message(status) + "; " + kNeeded);
  }
  return status;
}

using Key = std::tuple<kube::Kind, std::string, std::string>;  // kind, namespace, name

Key KeyOf(const kube::Object& object) {
  const kube::ObjectMeta& meta = kube::MetadataOf(object);
  return {kube::KindOfObject(object), meta.namespace_, meta.name};
}

std::string ClaimKey(const std::string& ns, const std::string& name) { return ns + "/" + name; }

// Resolver finds the claims to place and remembers them in order.
class Resolver {
 public:
  Resolver(kube::ObjectStore& store, std::map<std::string, kube::ResourceClaim>& cluster_claims,
           std::vector<std::string>* notes)
      : store_(store), cluster_claims_(cluster_claims), notes_(notes) {}

  // Place adds `claim` (from a file or the cluster) to the claims to place.
  void Place(kube::ResourceClaim claim) {
    const std::string key = ClaimKey(claim.metadata.namespace_, claim.metadata.name);
    if (!placed_.insert(key).second) return;
    if (claim.status.allocation) {
      if (notes_ != nullptr) {
        notes_->push_back("ResourceClaim \"" + key +
                          "\" is allocated in the cluster; placed as if it were not (its devices "
                          "count as free)");
      }
      claim.status = {};
    }
    order_.push_back(std::move(claim));
  }

  // PlaceNamed places the cluster's claim `name` in `ns`.
  absl::Status PlaceNamed(const std::string& ns, const std::string& name, const std::string& why) {
    auto it = cluster_claims_.find(ClaimKey(ns, name));
    if (it == cluster_claims_.end()) {
      return NotFound(why + "ResourceClaim \"" + ClaimKey(ns, name) + "\" is not in the cluster");
    }
    Place(it->second);
    return absl::OkStatus();
  }

  // PlacePod places the pod's claims and rewrites its entries to name them.
  absl::Status PlacePod(kube::Pod& pod) {
    const std::string what = "Pod \"" + pod.metadata.namespace_ + "/" + pod.metadata.name + "\"";
    // A pod already placed holds its extended-resource claim: the what-if synthesizes that claim
    // anew, so the old one must not count as allocated too.
    if (const auto& special = pod.status.extended_resource_claim_status;
        special && !special->resource_claim_name.empty()) {
      const std::string key = ClaimKey(pod.metadata.namespace_, special->resource_claim_name);
      auto it = cluster_claims_.find(key);
      if (it != cluster_claims_.end() && it->second.status.allocation && notes_ != nullptr) {
        notes_->push_back("ResourceClaim \"" + key + "\" (the extended resources of " + what +
                          ") is allocated in the cluster; placed as if it were not (its devices "
                          "count as free)");
      }
      placed_.insert(key);
    }
    for (kube::PodResourceClaim& entry : pod.spec.resource_claims) {
      const std::string field = what + ": spec.resourceClaims[" + entry.name + "]: ";
      if (entry.resource_claim_name) {
        if (placed_.count(ClaimKey(pod.metadata.namespace_, *entry.resource_claim_name)) == 0) {
          DEVLET_RETURN_IF_ERROR(
              PlaceNamed(pod.metadata.namespace_, *entry.resource_claim_name, field));
        }
        continue;
      }
      if (!entry.resource_claim_template_name) {
        return InvalidArgument(field + "names neither a claim nor a template");
      }
      std::optional<std::string> generated;
      for (const auto& status : pod.status.resource_claim_statuses) {
        if (status.name == entry.name) generated = status.resource_claim_name;
      }
      if (generated) {
        DEVLET_RETURN_IF_ERROR(PlaceNamed(pod.metadata.namespace_, *generated, field));
      } else {
        // Not generated yet (the pod is new): the claim the controller would make.
        absl::StatusOr<kube::ResourceClaimTemplate> tmpl =
            kube::GetAs<kube::ResourceClaimTemplate>(store_, pod.metadata.namespace_,
                                                     *entry.resource_claim_template_name);
        if (!tmpl.ok()) return WithContext(Explain(tmpl.status()), field);
        kube::ResourceClaim claim;
        claim.metadata = tmpl->spec.metadata;
        claim.metadata.name = pod.metadata.name + "-" + entry.name;
        claim.metadata.namespace_ = pod.metadata.namespace_;
        claim.spec = tmpl->spec.spec;
        generated = claim.metadata.name;
        Place(std::move(claim));
      }
      entry.resource_claim_template_name.reset();
      entry.resource_claim_name = *generated;
    }
    return absl::OkStatus();
  }

  std::vector<kube::ResourceClaim>& order() { return order_; }
  bool Placed(const std::string& key) const { return placed_.count(key) > 0; }

 private:
  kube::ObjectStore& store_;
  std::map<std::string, kube::ResourceClaim>& cluster_claims_;
  std::vector<std::string>* notes_;
  std::set<std::string> placed_;
  std::vector<kube::ResourceClaim> order_;
};

}  // namespace

absl::StatusOr<kube::RestConfig> LoadClusterConfig(const ClusterRequest& request) {
  absl::StatusOr<kube::RestConfig> config;
  if (request.in_cluster) {
    config = kube::InClusterConfig();
  } else if (request.context.empty()) {
    config = kube::LoadRestConfig(request.kubeconfig);
  } else {
    std::vector<std::string> paths;
    const char* env = std::getenv("KUBECONFIG");
    const char* home = std::getenv("HOME");
    if (!request.kubeconfig.empty()) {
      paths.push_back(request.kubeconfig);
    } else if (env != nullptr && *env != '\0') {
      paths = absl::StrSplit(env, ':', absl::SkipEmpty());
    } else {
      paths.push_back(std::string(home == nullptr ? "" : home) + "/.kube/config");
    }
    config = kube::LoadKubeconfigs(paths, {.context = request.context});
  }
  if (!config.ok()) return config.status();
  config->user_agent = "devlet-alloc";
  config->qps = 0;  // a handful of lists: no client-side throttling
  config->max_retries = 2;
  config->max_backoff = std::chrono::seconds(1);
  return config;
}

absl::StatusOr<std::vector<kube::Object>> ReadCluster(kube::ObjectStore& store,
                                                      const ClusterRequest& request,
                                                      std::vector<kube::Object> from_files,
                                                      std::vector<std::string>* notes) {
  const std::string ns = request.namespace_name.empty() ? "default" : request.namespace_name;
  // The cluster's devices and nodes, in a map so that file objects replace them by name.
  std::vector<Key> order;
  std::map<Key, kube::Object> objects;
  auto put = [&](kube::Object object) {
    Key key = KeyOf(object);
    if (objects.count(key) == 0) order.push_back(key);
    objects.insert_or_assign(std::move(key), std::move(object));
  };
  for (kube::Kind kind : {kube::Kind::kDeviceClass, kube::Kind::kResourceSlice,
                          kube::Kind::kDeviceTaintRule, kube::Kind::kNode}) {
    absl::StatusOr<std::vector<kube::Object>> listed = store.List(kind, {});
    if (!listed.ok() && kind == kube::Kind::kDeviceTaintRule &&
        listed.status().code() == absl::StatusCode::kNotFound) {
      continue;  // the API server does not serve DeviceTaintRules (gate off): there are none
    }
    if (!listed.ok()) return Explain(listed.status());
    for (kube::Object& object : *listed) put(std::move(object));
  }
  absl::StatusOr<std::vector<kube::ResourceClaim>> claims =
      kube::ListAs<kube::ResourceClaim>(store);
  if (!claims.ok()) return Explain(claims.status());
  std::map<std::string, kube::ResourceClaim> cluster_claims;
  for (kube::ResourceClaim& claim : *claims) {
    std::string key = ClaimKey(claim.metadata.namespace_, claim.metadata.name);
    cluster_claims.emplace(std::move(key), std::move(claim));
  }

  // The file's objects: claims without an allocation and a Pod are to be placed.
  Resolver resolver(store, cluster_claims, notes);
  std::optional<kube::Pod> pod;
  std::vector<kube::ResourceClaim> file_allocated;
  for (kube::Object& object : from_files) {
    kube::ObjectMeta& meta = kube::MetadataOf(object);
    if (auto* claim = std::get_if<kube::ResourceClaim>(&object)) {
      if (meta.namespace_.empty()) meta.namespace_ = ns;
      if (claim->status.allocation) {
        file_allocated.push_back(std::move(*claim));
      } else {
        resolver.Place(std::move(*claim));
      }
    } else if (auto* p = std::get_if<kube::Pod>(&object)) {
      if (meta.namespace_.empty()) meta.namespace_ = ns;
      if (pod) return InvalidArgument(kube::Describe(object) + ": only one Pod can be given");
      pod = std::move(*p);
    } else {
      if (kube::IsNamespaced(kube::KindOfObject(object)) && meta.namespace_.empty()) {
        meta.namespace_ = ns;
      }
      put(std::move(object));
    }
  }
  for (const std::string& name : request.claims) {
    DEVLET_RETURN_IF_ERROR(resolver.PlaceNamed(ns, name, "--claim: "));
  }
  if (!request.pod.empty()) {
    if (pod) return InvalidArgument("--pod " + request.pod + ": a Pod is also given in a file");
    absl::StatusOr<kube::Pod> got = kube::GetAs<kube::Pod>(store, ns, request.pod);
    if (!got.ok()) return WithContext(Explain(got.status()), "--pod");
    pod = std::move(*got);
  }
  if (pod) DEVLET_RETURN_IF_ERROR(resolver.PlacePod(*pod));

  std::vector<kube::Object> out;
  out.reserve(order.size() + cluster_claims.size() + resolver.order().size() + 1);
  for (const Key& key : order) out.push_back(std::move(objects.at(key)));
  std::set<std::string> from_file;  // a file's allocated claim replaces the cluster's
  for (kube::ResourceClaim& claim : file_allocated) {
    std::string key = ClaimKey(claim.metadata.namespace_, claim.metadata.name);
    if (!resolver.Placed(key)) out.push_back(std::move(claim));
    from_file.insert(std::move(key));
  }
  for (auto& [key, claim] : cluster_claims) {
    if (claim.status.allocation && !resolver.Placed(key) && from_file.count(key) == 0) {
      out.push_back(std::move(claim));
    }
  }
  for (kube::ResourceClaim& claim : resolver.order()) out.push_back(std::move(claim));
  if (pod) out.push_back(std::move(*pod));
  return out;
}

}  // namespace devlet::alloc_cli
