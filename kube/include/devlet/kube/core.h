// File: devlet/kube/core.h
//
// The core/v1 objects and fields devlet needs: NodeSelector (with the standard node-selector
// matching semantics), Node, Pod.
//
//   if (devlet::kube::MatchesNode(*slice.spec.node_selector, node)) { ... }
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "devlet/kube/meta.h"

namespace devlet::kube {

// NodeSelectorOperator values (core/v1).
inline constexpr std::string_view kNodeSelectorOpIn = "In";
inline constexpr std::string_view kNodeSelectorOpNotIn = "NotIn";
inline constexpr std::string_view kNodeSelectorOpExists = "Exists";
inline constexpr std::string_view kNodeSelectorOpDoesNotExist = "DoesNotExist";
inline constexpr std::string_view kNodeSelectorOpGt = "Gt";
inline constexpr std::string_view kNodeSelectorOpLt = "Lt";

// kNodeFieldSelectorKeyNodeName is the only field key matchFields supports.
inline constexpr std::string_view kNodeFieldSelectorKeyNodeName = "metadata.name";

// NodeSelectorRequirement is one label or field requirement: `key operator values`.
struct NodeSelectorRequirement {
  std::string key;
  std::string operator_;  // JSON "operator"; one of the kNodeSelectorOp* values
  std::vector<std::string> values;

  friend bool operator==(const NodeSelectorRequirement&, const NodeSelectorRequirement&) = default;
};

// NodeSelectorTerm ANDs its requirements. A term with no requirements matches no node.
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;
  std::vector<NodeSelectorRequirement> match_fields;

  friend bool operator==(const NodeSelectorTerm&, const NodeSelectorTerm&) = default;
};

// NodeSelector ORs its terms.
struct NodeSelector {
  std::vector<NodeSelectorTerm> node_selector_terms;

  friend bool operator==(const NodeSelector&, const NodeSelector&) = default;
};

// Node is core/v1 Node: metadata (name, labels) typed; spec and status kept in `extra`.
struct Node {
  ObjectMeta metadata;
  Extra extra;  // spec, status

  friend bool operator==(const Node&, const Node&) = default;
};

// MatchesNode applies the scheduler's node-selector semantics
// (k8s.io/component-helpers/scheduling/corev1/nodeaffinity): terms are ORed, requirements inside
// a term ANDed; an empty term, or a term with an invalid requirement (unknown operator, wrong
// number of values, a Gt/Lt value that is not an integer, a field key other than metadata.name,
// a field operator other than In/NotIn), matches nothing. NotIn and DoesNotExist match a node
// without the label.
bool MatchesNode(const NodeSelector& selector, const Node& node);

// MatchesNodeLabels is MatchesNode for a node known only by name and labels.
bool MatchesNodeLabels(const NodeSelector& selector, std::string_view node_name,
                       const std::map<std::string, std::string>& labels);

// ValidateNodeSelectorRequirements returns an error naming the first invalid requirement (the
// ones MatchesNode silently skips), e.g. for devlet-alloc to report a bad selector.
absl::Status ValidateNodeSelectorRequirements(const NodeSelector& selector);

// ContainerResourceClaim is core/v1 ResourceClaim in containers[].resources.claims.
struct ContainerResourceClaim {
  std::string name;     // the pod's spec.resourceClaims[].name
  std::string request;  // optional: one request of that claim

  friend bool operator==(const ContainerResourceClaim&, const ContainerResourceClaim&) = default;
};

// ResourceRequirements is core/v1 ResourceRequirements.
struct ResourceRequirements {
  std::map<std::string, Quantity> limits;  // e.g. "example.com/gpu": "1"
  std::map<std::string, Quantity> requests;
  std::vector<ContainerResourceClaim> claims;

  friend bool operator==(const ResourceRequirements&, const ResourceRequirements&) = default;
};

// Container is the part of core/v1 Container devlet reads; the rest stays in `extra`.
struct Container {
  std::string name;
  std::string image;
  ResourceRequirements resources;
  Extra extra;

  friend bool operator==(const Container&, const Container&) = default;
};

// PodResourceClaim is an entry of spec.resourceClaims.
struct PodResourceClaim {
  std::string name;
  std::optional<std::string> resource_claim_name;
  std::optional<std::string> resource_claim_template_name;

  friend bool operator==(const PodResourceClaim&, const PodResourceClaim&) = default;
};

// PodSpec: node name, claims, containers; the rest in `extra`.
struct PodSpec {
  std::string node_name;
  std::string scheduler_name;
  std::map<std::string, std::string> node_selector;
  std::vector<PodResourceClaim> resource_claims;
  std::vector<Container> init_containers;
  std::vector<Container> containers;
  Extra extra;

  friend bool operator==(const PodSpec&, const PodSpec&) = default;
};

// PodResourceClaimStatus is an entry of status.resourceClaimStatuses.
struct PodResourceClaimStatus {
  std::string name;
  std::optional<std::string> resource_claim_name;

  friend bool operator==(const PodResourceClaimStatus&, const PodResourceClaimStatus&) = default;
};

// ContainerExtendedResourceRequest maps a container's extended-resource request to a request
// of the special claim (DRAExtendedResource).
struct ContainerExtendedResourceRequest {
  std::string container_name;
  std::string resource_name;
  std::string request_name;

  friend bool operator==(const ContainerExtendedResourceRequest&,
                         const ContainerExtendedResourceRequest&) = default;
};

// PodExtendedResourceClaimStatus is status.extendedResourceClaimStatus.
struct PodExtendedResourceClaimStatus {
  std::vector<ContainerExtendedResourceRequest> request_mappings;
  std::string resource_claim_name;

  friend bool operator==(const PodExtendedResourceClaimStatus&,
                         const PodExtendedResourceClaimStatus&) = default;
};

// PodStatus: phase and claim statuses; the rest in `extra`.
struct PodStatus {
  std::string phase;
  std::vector<PodResourceClaimStatus> resource_claim_statuses;
  std::optional<PodExtendedResourceClaimStatus> extended_resource_claim_status;
  Extra extra;

  friend bool operator==(const PodStatus&, const PodStatus&) = default;
};

// Pod is core/v1 Pod.
struct Pod {
  ObjectMeta metadata;
  PodSpec spec;
  PodStatus status;
  Extra extra;

  friend bool operator==(const Pod&, const Pod&) = default;
};

}  // namespace devlet::kube
