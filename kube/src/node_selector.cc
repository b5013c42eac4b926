// Node-selector matching with the scheduler's semantics
// (k8s.io/component-helpers/scheduling/corev1/nodeaffinity and apimachinery labels).
#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <system_error>

#include "devlet/common/status.h"
#include "devlet/kube/core.h"

namespace devlet::kube {
namespace {

bool ParseInt64(std::string_view text, int64_t* out) {
  if (text.empty()) {
    return false;
  }
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (*begin == '+') {
    ++begin;  // strconv.ParseInt accepts a leading '+'.
  }
  auto [ptr, ec] = std::from_chars(begin, end, *out);
  return ec == std::errc() && ptr == end;
}

bool Contains(const std::vector<std::string>& values, std::string_view value) {
  for (const std::string& v : values) {
    if (v == value) {
      return true;
    }
  }
  return false;
}

// Returns an error message for an invalid label requirement, empty when valid.
std::string CheckLabelRequirement(const NodeSelectorRequirement& req) {
  const std::string& op = req.operator_;
  if (op == kNodeSelectorOpIn || op == kNodeSelectorOpNotIn) {
    if (req.values.empty()) {
      return "for 'in', 'notin' operators, values set can't be empty";
    }
  } else if (op == kNodeSelectorOpExists || op == kNodeSelectorOpDoesNotExist) {
    if (!req.values.empty()) {
      return "values set must be empty for exists and does not exist";
    }
  } else if (op == kNodeSelectorOpGt || op == kNodeSelectorOpLt) {
    if (req.values.size() != 1) {
      return "for 'Gt', 'Lt' operators, exactly one value is required";
    }
    int64_t unused = 0;
    if (!ParseInt64(req.values[0], &unused)) {
      return "for 'Gt', 'Lt' operators, the value must be an integer";
    }
  } else {
    return "\"" + op + "\" is not a valid label selector operator";
  }
  return {};
}

std::string CheckFieldRequirement(const NodeSelectorRequirement& req) {
  if (req.key != kNodeFieldSelectorKeyNodeName) {
    return "\"" + req.key + "\" is not a valid field selector key";
  }
  if (req.operator_ != kNodeSelectorOpIn && req.operator_ != kNodeSelectorOpNotIn) {
    return "\"" + req.operator_ + "\" is not a valid field selector operator";
  }
  if (req.values.size() != 1) {
    return "unexpected number of value (" + std::to_string(req.values.size()) +
           ") for node field selector operator \"" + req.operator_ + "\"";
  }
  return {};
}

bool LabelRequirementMatches(const NodeSelectorRequirement& req,
                             const std::map<std::string, std::string>& labels) {
  auto it = labels.find(req.key);
  const bool has = it != labels.end();
  const std::string& op = req.operator_;
  if (op == kNodeSelectorOpIn) {
    return has && Contains(req.values, it->second);
  }
  if (op == kNodeSelectorOpNotIn) {
    return !has || !Contains(req.values, it->second);
  }
  if (op == kNodeSelectorOpExists) {
    return has;
  }
  if (op == kNodeSelectorOpDoesNotExist) {
    return !has;
  }
  // Gt / Lt: the label must exist and parse as an integer.
  if (!has) {
    return false;
  }
  int64_t label_value = 0;
  int64_t bound = 0;
  if (!ParseInt64(it->second, &label_value) || !ParseInt64(req.values[0], &bound)) {
    return false;
  }
  return op == kNodeSelectorOpGt ? label_value > bound : label_value < bound;
}

bool TermMatches(const NodeSelectorTerm& term, std::string_view node_name,
                 const std::map<std::string, std::string>& labels) {
  if (term.match_expressions.empty() && term.match_fields.empty()) {
    return false;
  }
  for (const NodeSelectorRequirement& req : term.match_expressions) {
    if (!CheckLabelRequirement(req).empty() || !LabelRequirementMatches(req, labels)) {
      return false;
    }
  }
  for (const NodeSelectorRequirement& req : term.match_fields) {
    if (!CheckFieldRequirement(req).empty()) {
      return false;
    }
    const bool equal = req.values[0] == node_name;
    if ((req.operator_ == kNodeSelectorOpIn) != equal) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool MatchesNodeLabels(const NodeSelector& selector, std::string_view node_name,
                       const std::map<std::string, std::string>& labels) {
  for (const NodeSelectorTerm& term : selector.node_selector_terms) {
    if (TermMatches(term, node_name, labels)) {
      return true;
    }
  }
  return false;
}

bool MatchesNode(const NodeSelector& selector, const Node& node) {
  return MatchesNodeLabels(selector, node.metadata.name, node.metadata.labels);
}

absl::Status ValidateNodeSelectorRequirements(const NodeSelector& selector) {
  for (std::size_t t = 0; t < selector.node_selector_terms.size(); ++t) {
    const NodeSelectorTerm& term = selector.node_selector_terms[t];
    const std::string prefix = "nodeSelectorTerms[" + std::to_string(t) + "]";
    for (std::size_t i = 0; i < term.match_expressions.size(); ++i) {
      std::string message = CheckLabelRequirement(term.match_expressions[i]);
      if (!message.empty()) {
        return InvalidArgument(prefix + ".matchExpressions[" + std::to_string(i) + "]: " + message);
      }
    }
    for (std::size_t i = 0; i < term.match_fields.size(); ++i) {
      std::string message = CheckFieldRequirement(term.match_fields[i]);
      if (!message.empty()) {
        return InvalidArgument(prefix + ".matchFields[" + std::to_string(i) + "]: " + message);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace devlet::kube
