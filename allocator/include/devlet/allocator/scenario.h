// File: devlet/allocator/scenario.h
//
// A what-if scenario: Kubernetes objects in, allocations (or reasons) out. This is the code path
// of `devlet-alloc` and of the allocator's data-driven conformance cases, so both exercise the
// same thing.
//
//   DEVLET_ASSIGN_OR_RETURN(auto objects, devlet::kube::Decode(text, {.source = "cluster.yaml"}));
//   DEVLET_ASSIGN_OR_RETURN(Scenario scenario, Scenario::FromObjects(std::move(objects), features));
//   NodeOutcome outcome = scenario.AllocateOn("node-1");
//   // outcome.claims: the pending claims with status.allocation set (when allocated)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/allocator/allocator.h"
#include "devlet/allocator/extended_resources.h"
#include "devlet/allocator/features.h"
#include "devlet/kube/codec.h"

namespace devlet::allocator {

// NodeOutcome is the result of allocating the pending claims on one node.
struct NodeOutcome {
  std::string node;
  AllocateOutcome outcome;
  std::vector<kube::ResourceClaim> claims;  // pending claims, status.allocation set if allocated
  Explanation explanation;                  // filled when asked for
  // A one-line reason for people: why the node does not fit (empty when it does).
  std::string Summary() const;
};

class Scenario {
 public:
  // FromObjects sorts objects by kind. Claims with status.allocation count as allocated; the
  // others are the pod's pending claims, in input order. At most one Pod may be given: its
  // extended-resource requests that a DeviceClass serves (DRAExtendedResource) become one
  // synthesized claim per node, allocated after the pending claims; its spec.resourceClaims must
  // name given claims by resourceClaimName. ResourceClaimTemplates are rejected (name the
  // generated claims directly). Errors name the object and field.
  // `validate` runs the API server's validation on every object first (devlet-alloc always
  // does; conformance cases that feed the allocator invalid objects on purpose turn it off).
  static absl::StatusOr<Scenario> FromObjects(std::vector<kube::Object> objects,
                                              const Features& features, bool validate = true);

  // AllocateOn allocates ClaimsFor(NodeNamed(node_name)) on that node. NodeOutcome::claims are
  // those claims (the synthesized one last), with status.allocation set when allocated.
  NodeOutcome AllocateOn(std::string_view node_name, const AllocateOptions& options = {}) const;

  // ClaimsFor returns the claims to allocate on `node`: the pending claims, then the pod's
  // synthesized extended-resource claim when it has one there. Errors: a bad extended-resource
  // quantity in the pod.
  absl::StatusOr<std::vector<kube::ResourceClaim>> ClaimsFor(const kube::Node& node) const;

  // NodeNamed is the Node object of that name if one was given, otherwise a node with that name
  // and no labels.
  kube::Node NodeNamed(std::string_view node_name) const;

  // Candidate nodes for --all-nodes: the given Node objects, plus node names that slices name.
  std::vector<std::string> CandidateNodes() const;

  const Snapshot& snapshot() const { return *snapshot_; }
  const AllocatedState& state() const { return state_; }
  const std::vector<kube::ResourceClaim>& pending() const { return pending_; }
  const std::vector<kube::Node>& nodes() const { return nodes_; }
  const std::optional<kube::Pod>& pod() const { return pod_; }

 private:
  std::shared_ptr<const Snapshot> snapshot_;
  AllocatedState state_;
  std::vector<kube::ResourceClaim> pending_;
  std::vector<kube::Node> nodes_;
  std::optional<kube::Pod> pod_;
  ExtendedResourceClasses extended_resources_;
};

}  // namespace devlet::allocator
