#include "devlet/allocator/scenario.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "devlet/cel/dra.h"
#include "devlet/common/flags.h"
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

// ---- devlet-alloc ------------------------------------------------------------------------

namespace {

// ReadLimited reads `in` up to `limit` bytes and stops there: more input is refused without
// being read (1 GB on stdin used to be read whole, 987 MB of RSS, before the decoder's limit
// refused it).
absl::StatusOr<std::string> ReadLimited(std::istream& in, const std::string& name, size_t limit) {
  std::string out;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    const size_t got = static_cast<size_t>(in.gcount());
    if (got > limit - out.size()) {
      return InvalidArgument(name + ": input is more than the limit of " + std::to_string(limit) +
                             " bytes (" + std::to_string(limit >> 20) + " MiB)");
    }
    out.append(buf, got);
  }
  if (in.bad()) return Internal(name + ": read error");
  return out;
}

absl::StatusOr<std::string> ReadInput(const std::string& path, size_t limit) {
  if (path == "-") return ReadLimited(std::cin, "stdin", limit);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > limit) {
      return InvalidArgument(path + ": input is more than the limit of " + std::to_string(limit) +
                             " bytes (" + std::to_string(limit >> 20) + " MiB)");
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open file");
  return ReadLimited(in, path, limit);
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

void PrintExplanation(const NodeOutcome& out, std::ostream& err) {
  const Explanation& e = out.explanation;
  err << "node " << out.node << ": " << e.pools.size() << " pool(s), " << e.steps
      << " search step(s)\n";
  for (const auto& p : e.pools) {
    err << "  pool " << p.id << ": " << p.status << ", " << p.devices << " device(s)\n";
  }
  std::vector<std::string> order;  // requests in the order the search reached them
  for (const auto& c : e.candidates) {
    if (std::find(order.begin(), order.end(), c.request) == order.end()) order.push_back(c.request);
  }
  for (const std::string& request : order) {
    err << "  request " << request << ":\n";
    for (const auto& c : e.candidates) {
      if (c.request == request) err << "    " << c.device << ": " << c.verdict << "\n";
    }
  }
}

}  // namespace

int RunDevletAlloc(int argc, char** argv) {
  CLI::App app{
      "devlet-alloc: allocate DRA ResourceClaims on a node, as the Kubernetes scheduler would.\n"
      "Input: DeviceClass, ResourceSlice, ResourceClaim, Node, DeviceTaintRule, Pod (YAML or\n"
      "JSON), at most 64 MiB per file. Claims with status.allocation are already allocated;\n"
      "the others are one pod's claims. A Pod's extended resources served by a DeviceClass\n"
      "become one more claim. Nothing to allocate: an empty List.\n"
      "Exit: 0 allocated, 1 cannot be allocated on that node (also: the search ran out of\n"
      "--timeout), 2 error.",
      "devlet-alloc"};
  std::vector<std::string> files;
  std::string node_name, gates, timeout_text = "10s";
  bool all_nodes = false, explain = false;
  app.add_option("-f,--filename", files, "Input file (repeatable; - for stdin)")->required();
  app.add_option("--node", node_name, "Node to allocate on");
  app.add_option("--feature-gates", gates, "Feature gates, e.g. DRAConsumableCapacity=false");
  app.add_flag("--all-nodes", all_nodes, "Try every node; print which fit and why others do not");
  app.add_flag("--explain", explain, "Explain, on stderr, what the search considered");
  app.add_option("--timeout", timeout_text,
                 "Bound on the search per node, as the scheduler's filterTimeout (Go duration: "
                 "10s, 500ms, 1m; 0 for none)")
      ->capture_default_str();
  try {
    flags::Parse(app, argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  auto fail = [](const std::string& message) {
    std::cerr << "devlet-alloc: " << message << "\n";
    return 2;
  };
  if (all_nodes == !node_name.empty()) return fail("give exactly one of --node NAME and --all-nodes");
  auto features = ParseFeatureGates(gates);
  if (!features.ok()) return fail(Message(features.status()));
  absl::Duration timeout;
  if (!absl::ParseDuration(timeout_text, &timeout) || timeout < absl::ZeroDuration()) {
    return fail("--timeout: invalid duration \"" + timeout_text + "\" (e.g. 10s, 500ms, 0)");
  }
  // Each node's search gets its own budget, as each of the scheduler's Filter calls does.
  auto options_for_node = [&] {
    AllocateOptions options;
    if (timeout > absl::ZeroDuration()) {
      options.timeout = std::chrono::milliseconds(
          std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
      options.deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    }
    return options;
  };
  std::vector<kube::Object> objects;
  for (const std::string& file : files) {
    kube::DecodeOptions decode_options;
    auto text = ReadInput(file, decode_options.max_bytes);
    if (!text.ok()) return fail(Message(text.status()));
    decode_options.source = file == "-" ? "stdin" : file;
    auto decoded = kube::Decode(*text, decode_options);
    if (!decoded.ok()) return fail(Message(decoded.status()));
    for (auto& o : *decoded) objects.push_back(std::move(o));
  }
  auto scenario = Scenario::FromObjects(std::move(objects), *features);
  if (!scenario.ok()) return fail(Message(scenario.status()));
  if (scenario->pending().empty() && !scenario->pod()) {
    // Nothing to allocate (upstream: nothing to do): the empty List of allocated claims.
    std::cout << kube::EncodeJsonList({}, {.indent = 2}) << "\n";
    return 0;
  }
  auto timed_out = [](const NodeOutcome& out) {
    return out.outcome.kind == AllocateOutcome::Kind::kError &&
           out.outcome.status.code() == absl::StatusCode::kDeadlineExceeded;
  };

  if (!all_nodes) {
    NodeOutcome out = scenario->AllocateOn(node_name, options_for_node());
    if (timed_out(out)) {
      // Exit 1, "not on this node (within the budget)", not 2: the input is fine and a larger
      // --timeout may answer. (The scheduler's Filter returns the timeout as an Error so that
      // the pod retries with backoff rather than wait for a cluster event.)
      std::cerr << "devlet-alloc: " << Message(out.outcome.status) << "\n";
      return 1;
    }
    if (explain) PrintExplanation(out, std::cerr);
    switch (out.outcome.kind) {
      case AllocateOutcome::Kind::kAllocated: {
        std::vector<kube::Object> list(out.claims.begin(), out.claims.end());
        std::cout << kube::EncodeJsonList(list, {.indent = 2}) << "\n";
        return 0;
      }
      case AllocateOutcome::Kind::kUnschedulable:
        std::cerr << "devlet-alloc: node " << node_name << ": " << out.Summary() << "\n";
        return 1;
      case AllocateOutcome::Kind::kError:
        return fail(Message(out.outcome.status));
    }
  }
  std::vector<std::string> nodes = scenario->CandidateNodes();
  if (nodes.empty()) return fail("--all-nodes: no Node objects and no slice names a node");
  std::vector<NodeOutcome> outcomes;
  size_t width = 4;
  for (const std::string& n : nodes) {
    outcomes.push_back(scenario->AllocateOn(n, options_for_node()));
    width = std::max(width, n.size());
    if (outcomes.back().outcome.kind == AllocateOutcome::Kind::kError &&
        !timed_out(outcomes.back())) {
      return fail(Message(outcomes.back().outcome.status));  // the pod fails everywhere
    }
  }
  bool any = false;
  std::cout << Pad("NODE", width) << "  FITS  DETAILS\n";
  for (const NodeOutcome& out : outcomes) {
    bool fits = out.outcome.kind == AllocateOutcome::Kind::kAllocated;
    any = any || fits;
    std::string details;
    if (fits) {
      for (const auto& r : out.outcome.results) {
        for (const auto& d : r.devices.results) {
          if (!details.empty()) details += ", ";
          details += d.request + "=" + d.driver + "/" + d.pool + "/" + d.device;
        }
      }
    } else {
      details = out.Summary();
    }
    std::cout << Pad(out.node, width) << "  " << (fits ? "yes " : "no  ") << "  " << details
              << "\n";
    if (explain) PrintExplanation(out, std::cerr);
  }
  return any ? 0 : 1;
}

}  // namespace devlet::allocator
