// Private: how Kubernetes' library.CostEstimator (k8s.io/apiserver/pkg/cel/library/cost.go)
// prices a CEL function, declared on each FunctionDef row (eval.h) and applied by the runtime
// cost (nodes.h) and the compile-time estimate (estimate.cc).
#pragma once

#include <string_view>

namespace devlet::cel::internal {

// The rule of a function's Kubernetes cost. The estimate of each rule is in estimate.cc
// (KubernetesEstimate); kNone leaves both costs to cel-go's standard rules.
enum class KubernetesCost : unsigned char {
  kNone,
  kNominal,          // estimate 1 (accessors and comparisons of library types)
  kNominalByName,    // estimate 1, runtime cost by name (format.named)
  kListTraversal,    // isSorted, sum, min, max, indexOf, lastIndexOf: elements or characters
  kIncludes,         // the receiver's elements
  kStringTraversal,  // lowerAscii, upperAscii, substring, trim: the receiver's characters
  kReplace,
  kSplit,
  kJoin,
  kRegexFind,        // find, findAll
  kParse,            // quantity, semver, ip, cidr and their is* tests: the argument's characters
  kContainsIP,
  kContainsCIDR,
  kCanonical,        // ip.isCanonical
  kValidate,         // format validate(): the string times the longest format regex
  kUrl,
};
using KC = KubernetesCost;

// Whether Kubernetes prices the call at runtime by the function's name, with or without a
// resolved overload (otherwise an unresolved call costs 1).
constexpr bool CostByName(KubernetesCost c) {
  return c != KubernetesCost::kNone && c != KubernetesCost::kNominal;
}

// The rule declared by the function `name` (its member form when `member`, else its global
// form); kNone for an unknown name.
KubernetesCost KubernetesCostOf(std::string_view name, bool member);

}  // namespace devlet::cel::internal
