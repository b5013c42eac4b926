// Private: the compile-time cost estimate, computed the way cel-go's checker.Cost does it for
// Kubernetes (k8s.io/apiserver library.CostEstimator with the DRA size estimator of
// k8s.io/dynamic-resource-allocation/cel). The API server rejects a selector whose estimate
// exceeds the cost limit, so the estimate must be cel-go's number, not a tighter or looser one.
#pragma once

#include <string>
#include <unordered_map>

#include "ast.h"
#include "devlet/cel/cel.h"
#include "devlet/cel/type.h"

namespace devlet::cel::internal {

// What the estimator reads from the checked syntax tree: the checked type of each expression
// and, for namespaced global calls written as member calls (`sets.contains(a, b)`), the resolved
// function name. Filled in by the planner.
struct CheckedInfo {
  std::unordered_map<const Expr*, Type> types;
  std::unordered_map<const Expr*, std::string> global_calls;
};

// EstimateCost walks `root` as cel-go's coster walks the checked AST (the tree before constant
// folding). `dra_sizes`: the `device` variable has Kubernetes' declared maximum sizes (driver 63
// characters, 32 domains of 32 attributes, attribute values 64, ...).
CostEstimate EstimateCost(const Expr& root, const CheckedInfo& info, bool dra_sizes);

}  // namespace devlet::cel::internal
