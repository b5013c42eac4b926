#include "devlet/allocator/scenario.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "devlet/cel/dra.h"
#include "devlet/common/status.h"
#include "devlet/kube/validation.h"

namespace devlet::allocator {

// ---- CEL cost validation ---------------------------------------------------------------------

namespace {

// The API server's cost limits (k8s.io/kubernetes pkg/apis/resource: CELSelectorExpressionMaxCost
// and DeviceClaimDerivedAttributeCELMaxCost, both 1,000,000).
constexpr uint64_t kSelectorMaxCost = cel::dra::kSelectorMaxCost;
constexpr uint64_t kDerivedAttributesMaxCost = 1'000'000;

// CelCostErrors adds what kube::Validate leaves to the CEL engine: the API server compiles every
// selector and derived attribute expression of a new object in its NewExpressions environment
// (following the gates) and forbids those whose estimated worst-case cost exceeds the limit, and
// claims whose derived attributes together exceed theirs. Expressions that do not compile are
// left alone here: the allocator reports them, with the scheduler's words.
class CelCostErrors {
 public:
  explicit CelCostErrors(const Features& features) : features_(features) {
    options_.consumable_capacity = features.consumable_capacity;
    options_.list_type_attributes = features.list_type_attributes;
  }

  void Selectors(const std::vector<kube::DeviceSelector>& selectors, const std::string& path) {
    for (size_t i = 0; i < selectors.size(); ++i) {
      if (!selectors[i].cel) continue;
      auto program = cel::dra::CompileSelector(selectors[i].cel->expression, options_);
      if (program.ok() && program->estimated_cost().max > kSelectorMaxCost) {
        TooComplex(path + "[" + std::to_string(i) + "].cel.expression");
      }
    }
  }

  void DerivedAttributes(const std::vector<kube::DeviceDerivedAttribute>& derived,
                         const std::string& path, uint64_t* total) {
    if (!features_.derived_attributes) return;  // the API server drops the field
    for (size_t i = 0; i < derived.size(); ++i) {
      auto program = cel::dra::CompileDerivedAttribute(derived[i].expression, options_);
      if (!program.ok()) continue;
      const uint64_t cost = program->estimated_cost().max;
      if (cost > std::min(kSelectorMaxCost, kDerivedAttributesMaxCost)) {
        TooComplex(path + "[" + std::to_string(i) + "].expression");
      }
      *total = *total > UINT64_MAX - cost ? UINT64_MAX : *total + cost;
    }
  }

  void Claim(const kube::ResourceClaimSpec& spec, const std::string& path) {
    uint64_t total = 0;
    const auto& requests = spec.devices.requests;
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::string rp = path + ".devices.requests[" + std::to_string(i) + "]";
      if (requests[i].exactly) {
        Selectors(requests[i].exactly->selectors, rp + ".exactly.selectors");
        DerivedAttributes(requests[i].exactly->derived_attributes,
                          rp + ".exactly.derivedAttributes", &total);
      }
      const auto& subs = requests[i].first_available;
      for (size_t j = 0; j < subs.size(); ++j) {
        const std::string sp = rp + ".firstAvailable[" + std::to_string(j) + "]";
        Selectors(subs[j].selectors, sp + ".selectors");
        DerivedAttributes(subs[j].derived_attributes, sp + ".derivedAttributes", &total);
      }
    }
    if (total > kDerivedAttributesMaxCost) {
      errors_.push_back({kube::FieldError::Type::kForbidden, path + ".devices", "",
                         "too complex, total cost of derived attribute CEL expressions in the "
                         "claim exceeds cost limit"});
    }
  }

  kube::FieldErrors& errors() { return errors_; }

 private:
  void TooComplex(std::string field) {
    errors_.push_back(
        {kube::FieldError::Type::kForbidden, std::move(field), "", "too complex, exceeds cost limit"});
  }

  const Features& features_;
  cel::dra::SelectorOptions options_;
  kube::FieldErrors errors_;
};

// ValidateWithCel is kube::Validate plus the CEL cost checks. The cost errors follow the other
// errors of the object (the API server interleaves them in field order; with both kinds present
// the list order may differ from its).
absl::Status ValidateWithCel(const kube::Object& object, const Features& features) {
  kube::FieldErrors errors = kube::ValidateObject(object);
  CelCostErrors cel(features);
  if (const auto* c = std::get_if<kube::DeviceClass>(&object)) {
    cel.Selectors(c->spec.selectors, "spec.selectors");
  } else if (const auto* claim = std::get_if<kube::ResourceClaim>(&object)) {
    cel.Claim(claim->spec, "spec");
  } else if (const auto* t = std::get_if<kube::ResourceClaimTemplate>(&object)) {
    cel.Claim(t->spec.spec, "spec.spec");
  }
  errors.insert(errors.end(), cel.errors().begin(), cel.errors().end());
  std::string kind(kube::KindOf(object));
  if (kube::ApiVersionOf(object) != "v1") kind += "." + std::string(kube::kResourceGroup);
  return kube::ToStatus(errors, kind, kube::MetadataOf(object).name);
}

}  // namespace

// ---- Scenario ----------------------------------------------------------------------------

absl::StatusOr<Scenario> Scenario::FromObjects(std::vector<kube::Object> objects,
                                               const Features& features, bool validate) {
  std::vector<kube::DeviceClass> classes;
  std::vector<kube::ResourceSlice> slices;
  std::vector<kube::DeviceTaintRule> rules;
  Scenario scenario;
  std::set<std::string> class_names, slice_names, claim_names, node_names;
  for (kube::Object& object : objects) {
    if (validate) DEVLET_RETURN_IF_ERROR(ValidateWithCel(object, features));
    const std::string what = kube::Describe(object);
    if (auto* c = std::get_if<kube::DeviceClass>(&object)) {
      if (!class_names.insert(c->metadata.name).second) {
        return InvalidArgument(what + ": metadata.name: duplicate DeviceClass");
      }
      classes.push_back(std::move(*c));
    } else if (auto* s = std::get_if<kube::ResourceSlice>(&object)) {
      if (!slice_names.insert(s->metadata.name).second) {
        return InvalidArgument(what + ": metadata.name: duplicate ResourceSlice");
      }
      slices.push_back(std::move(*s));
    } else if (auto* r = std::get_if<kube::DeviceTaintRule>(&object)) {
      rules.push_back(std::move(*r));
    } else if (auto* claim = std::get_if<kube::ResourceClaim>(&object)) {
      if (!claim_names.insert(claim->metadata.namespace_ + "/" + claim->metadata.name).second) {
        return InvalidArgument(what + ": metadata.name: duplicate ResourceClaim");
      }
      if (claim->status.allocation) {
        DEVLET_RETURN_IF_ERROR(WithContext(scenario.state_.Add(*claim->status.allocation), what));
      } else {
        scenario.pending_.push_back(std::move(*claim));
      }
    } else if (auto* node = std::get_if<kube::Node>(&object)) {
      if (!node_names.insert(node->metadata.name).second) {
        return InvalidArgument(what + ": metadata.name: duplicate Node");
      }
      scenario.nodes_.push_back(std::move(*node));
    } else if (auto* pod = std::get_if<kube::Pod>(&object)) {
      if (scenario.pod_) {
        return InvalidArgument(what + ": only one Pod can be given (the claims are one pod's)");
      }
      scenario.pod_ = std::move(*pod);
    } else {
      return InvalidArgument(what + ": kind: not supported by devlet-alloc (give DeviceClass, "
                                    "ResourceSlice, ResourceClaim, Node, DeviceTaintRule or Pod)");
    }
  }
  if (scenario.pod_) {
    const kube::Pod& pod = *scenario.pod_;
    const std::string what = "Pod \"" + pod.metadata.name + "\"";
    for (const kube::PodResourceClaim& entry : pod.spec.resource_claims) {
      const std::string field = what + ": spec.resourceClaims[" + entry.name + "]";
      if (!entry.resource_claim_name) {
        return InvalidArgument(field + ": only resourceClaimName is supported by devlet-alloc "
                                       "(give the claim generated from the template instead)");
      }
      if (claim_names.count(pod.metadata.namespace_ + "/" + *entry.resource_claim_name) == 0) {
        return InvalidArgument(field + ": ResourceClaim \"" + *entry.resource_claim_name +
                               "\" is not in the input");
      }
    }
    scenario.extended_resources_ = ExtendedResourceClasses::Build(classes);
  }
  if (!features.device_taint_rules && !rules.empty()) rules.clear();
  DEVLET_ASSIGN_OR_RETURN(scenario.snapshot_, Snapshot::Build(features, std::move(classes),
                                                              std::move(slices), std::move(rules)));
  return scenario;
}

kube::Node Scenario::NodeNamed(std::string_view node_name) const {
  for (const kube::Node& n : nodes_) {
    if (n.metadata.name == node_name) return n;
  }
  kube::Node node;
  node.metadata.name = std::string(node_name);
  return node;
}

absl::StatusOr<std::vector<kube::ResourceClaim>> Scenario::ClaimsFor(const kube::Node& node) const {
  std::vector<kube::ResourceClaim> claims = pending_;
  if (pod_) {
    DEVLET_ASSIGN_OR_RETURN(
        std::optional<ExtendedResourceClaim> special,
        SynthesizeExtendedResourceClaim(snapshot_->features(), *pod_, extended_resources_, &node));
    if (special) claims.push_back(std::move(special->claim));
  }
  return claims;
}

NodeOutcome Scenario::AllocateOn(std::string_view node_name, const AllocateOptions& options) const {
  NodeOutcome result;
  result.node = std::string(node_name);
  const kube::Node node = NodeNamed(node_name);
  auto claims = ClaimsFor(node);
  if (!claims.ok()) {
    result.outcome.kind = AllocateOutcome::Kind::kError;
    result.outcome.status = claims.status();
    return result;
  }
  result.claims = std::move(*claims);
  std::vector<const kube::ResourceClaim*> pointers;
  for (const kube::ResourceClaim& c : result.claims) pointers.push_back(&c);
  AllocateOptions opts = options;
  if (opts.explain == nullptr) opts.explain = &result.explanation;
  result.outcome = Allocate(*snapshot_, node, pointers, state_, opts);
  if (result.outcome.kind == AllocateOutcome::Kind::kAllocated) {
    for (size_t i = 0; i < result.claims.size(); ++i) {
      result.claims[i].status.allocation = result.outcome.results[i];
    }
  }
  if (opts.explain != &result.explanation) result.explanation = *opts.explain;
  return result;
}

std::vector<std::string> Scenario::CandidateNodes() const {
  std::set<std::string> names;
  for (const kube::Node& n : nodes_) names.insert(n.metadata.name);
  for (const std::string& n : snapshot_->NodeNames()) names.insert(n);
  return {names.begin(), names.end()};
}

std::string NodeOutcome::Summary() const {
  switch (outcome.kind) {
    case AllocateOutcome::Kind::kAllocated:
      return "";
    case AllocateOutcome::Kind::kError:
      return Message(outcome.status);
    case AllocateOutcome::Kind::kUnschedulable:
      break;
  }
  std::string why = outcome.reason;
  std::vector<std::string> details;
  if (explanation.pools.empty()) details.push_back("no ResourceSlices for this node");
  for (const auto& p : explanation.pools) {
    if (p.status.rfind("complete", 0) != 0) details.push_back("pool " + p.id + " " + p.status);
  }
  // Per request: how many devices were rejected, by verdict.
  std::map<std::string, std::map<std::string, int>> by_request;
  for (const auto& c : explanation.candidates) {
    if (c.verdict.rfind("selected", 0) == 0) continue;
    std::string verdict = c.verdict;
    if (verdict.find("selector") != std::string::npos) verdict = "selectors do not match";
    by_request[c.request][verdict]++;
  }
  for (const auto& [request, verdicts] : by_request) {
    std::string line = "request " + request + ":";
    bool first = true;
    for (const auto& [verdict, count] : verdicts) {
      line += (first ? " " : ", ") + std::to_string(count) + " " + verdict;
      first = false;
    }
    details.push_back(line);
  }
  for (const std::string& d : details) why += "; " + d;
  return why;
}

}  // namespace devlet::allocator
