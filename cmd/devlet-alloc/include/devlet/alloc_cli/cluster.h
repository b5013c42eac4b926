// File: devlet/alloc_cli/cluster.h
//
// devlet-alloc against a live cluster: the objects of a what-if read from the kube-apiserver
// through devlet's REST client (kube/client, the client devlet-node uses), so that an operator
// asks where a claim or pod would fit right now without copying objects out.
//
//   DEVLET_ASSIGN_OR_RETURN(kube::RestConfig config, LoadClusterConfig(request));
//   DEVLET_ASSIGN_OR_RETURN(auto store, kube::ApiServerStore::Create(config));
//   DEVLET_ASSIGN_OR_RETURN(auto objects, ReadCluster(*store, request, std::move(from_files)));
//   DEVLET_ASSIGN_OR_RETURN(auto scenario, allocator::Scenario::FromObjects(objects, features));
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/kube/client.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/kubeconfig.h"

namespace devlet::alloc_cli {

// ClusterRequest says which cluster to read and what to place in it.
struct ClusterRequest {
  // --kubeconfig: a kubeconfig file; empty: $KUBECONFIG, in-cluster, ~/.kube/config (client-go's
  // order, kube::LoadRestConfig).
  std::string kubeconfig;
  // --context: the kubeconfig context; empty: its current-context.
  std::string context;
  // --in-cluster: the pod's service account (KUBERNETES_SERVICE_HOST/PORT and its token).
  bool in_cluster = false;
  // -n/--namespace: of --claim, --pod and of file objects that name none. Empty: the kubeconfig
  // context's namespace (in-cluster: the service account's), else "default", as kubectl.
  std::string namespace_name;
  // --claim: ResourceClaims in the cluster to place (one pod's claims), in this order.
  std::vector<std::string> claims;
  // --pod: a Pod in the cluster whose claims (and extended resources) to place.
  std::string pod;
};

// LoadClusterConfig builds the connection from `request` (kubeconfig, context or in-cluster).
// The client is set up for a command: user agent devlet-alloc, no client-side throttling and
// few retries, so that an unreachable server is reported within seconds.
absl::StatusOr<kube::RestConfig> LoadClusterConfig(const ClusterRequest& request);

// ReadCluster returns the objects of the what-if, for allocator::Scenario::FromObjects:
// - the cluster's DeviceClasses, ResourceSlices, DeviceTaintRules (none when the API server does
//   not serve them) and Nodes, each replaced by a file object of the same kind and name, plus the
//   file's others;
// - the cluster's allocated ResourceClaims (what the devices already hold); its unallocated ones
//   belong to other pods and are left out;
// - the claims to place, in this order: the file's claims without status.allocation, --claim,
//   and the claims of the Pod (from the file or --pod): resourceClaimName, or for
//   resourceClaimTemplateName the claim generated for the pod (status.resourceClaimStatuses), or,
//   when none was generated yet, one made from the template. The Pod comes last, its entries
//   rewritten to name those claims. A claim to place that the cluster has allocated is placed as
//   if it were not (its devices count as free); `notes` gets a line saying so. So is the Pod's
//   extended-resource claim (status.extendedResourceClaimStatus): the allocator synthesizes it
//   anew.
// Errors name the object: a named claim, pod or template the cluster does not have (NotFound),
// two Pods, and the API server's refusals (PermissionDenied for RBAC, with the resources
// devlet-alloc needs).
absl::StatusOr<std::vector<kube::Object>> ReadCluster(kube::ObjectStore& store,
                                                      const ClusterRequest& request,
                                                      std::vector<kube::Object> from_files,
                                                      std::vector<std::string>* notes);

}  // namespace devlet::alloc_cli
