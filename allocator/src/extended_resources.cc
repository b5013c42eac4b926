#include "devlet/allocator/extended_resources.h"

#include <utility>

#include "devlet/cel/quantity.h"
#include "devlet/common/status.h"
#include "nlohmann/json.hpp"

namespace devlet::allocator {

ExtendedResourceClasses ExtendedResourceClasses::Build(
    const std::vector<kube::DeviceClass>& classes) {
  std::vector<const kube::DeviceClass*> pointers;
  pointers.reserve(classes.size());
  for (const auto& c : classes) pointers.push_back(&c);
  return Build(pointers);
}

ExtendedResourceClasses ExtendedResourceClasses::Build(
    const std::vector<const kube::DeviceClass*>& classes) {
  ExtendedResourceClasses index;
  // The winner per name so far, to compare timestamps (metav1.Time is RFC 3339 in UTC with
  // whole seconds, so the text orders like the time; a class without one counts as oldest).
  std::map<std::string, const kube::DeviceClass*> winners;
  for (const kube::DeviceClass* c : classes) {
    index.classes_.insert(c->metadata.name);
    if (!c->spec.extended_resource_name || c->spec.extended_resource_name->empty()) continue;
    auto [it, inserted] = winners.emplace(*c->spec.extended_resource_name, c);
    if (inserted) continue;
    const std::string mine = c->metadata.creation_timestamp.value_or("");
    const std::string theirs = it->second->metadata.creation_timestamp.value_or("");
    if (mine > theirs || (mine == theirs && c->metadata.name < it->second->metadata.name)) {
      it->second = c;
    }
  }
  for (const auto& [resource, c] : winners) index.explicit_[resource] = c->metadata.name;
  return index;
}

std::optional<std::string> ExtendedResourceClasses::ClassFor(std::string_view resource) const {
  if (auto it = explicit_.find(resource); it != explicit_.end()) return it->second;
  if (resource.substr(0, kImplicitExtendedResourcePrefix.size()) ==
      kImplicitExtendedResourcePrefix) {
    std::string_view name = resource.substr(kImplicitExtendedResourcePrefix.size());
    if (classes_.find(name) != classes_.end()) return std::string(name);
  }
  return std::nullopt;
}

std::set<std::string> NodeAllocatableResources(const kube::Node& node) {
  std::set<std::string> names;
  if (node.extra.empty()) return names;
  nlohmann::json extra = nlohmann::json::parse(node.extra.json, nullptr, /*allow_exceptions=*/false);
  if (!extra.is_object()) return names;
  auto status = extra.find("status");
  if (status == extra.end() || !status->is_object()) return names;
  auto allocatable = status->find("allocatable");
  if (allocatable == status->end() || !allocatable->is_object()) return names;
  for (const auto& [name, value] : allocatable->items()) {
    std::string text = value.is_string() ? value.get<std::string>()
                       : value.is_number() ? value.dump()
                                           : "";
    auto q = cel::Quantity::Parse(text);
    if (q.ok() && !q->IsZero()) names.insert(name);
  }
  return names;
}

absl::StatusOr<std::optional<ExtendedResourceClaim>> SynthesizeExtendedResourceClaim(
    const Features& features, const kube::Pod& pod, const ExtendedResourceClasses& classes,
    const kube::Node* node) {
  if (!features.extended_resource) return std::nullopt;
  const std::string pod_key = pod.metadata.namespace_.empty()
                                  ? pod.metadata.name
                                  : pod.metadata.namespace_ + "/" + pod.metadata.name;
  std::set<std::string> node_served;
  if (node != nullptr) node_served = NodeAllocatableResources(*node);

  std::vector<const kube::Container*> containers;
  for (const auto& c : pod.spec.init_containers) containers.push_back(&c);
  for (const auto& c : pod.spec.containers) containers.push_back(&c);

  ExtendedResourceClaim out;
  for (size_t i = 0; i < containers.size(); ++i) {
    const kube::Container& container = *containers[i];
    std::map<std::string, kube::Quantity> wanted = container.resources.limits;
    for (const auto& [name, q] : container.resources.requests) wanted[name] = q;
    int j = 0;
    for (const auto& [resource, quantity] : wanted) {
      std::optional<std::string> class_name = classes.ClassFor(resource);
      if (!class_name || node_served.count(resource) > 0) continue;
      const std::string field = "Pod \"" + pod_key + "\": container \"" + container.name +
                                "\": resources " + resource;
      auto q = cel::Quantity::Parse(quantity.str());
      if (!q.ok()) return InvalidArgument(field + ": " + Message(q.status()));
      std::optional<int64_t> count = q->AsInt64();
      if (!count || *count < 0) {
        return InvalidArgument(field + ": " + quantity.str() +
                               " is not a whole, non-negative number of devices");
      }
      if (*count == 0) continue;
      kube::DeviceRequest request;
      request.name = "container-" + std::to_string(i) + "-request-" + std::to_string(j++);
      request.exactly.emplace();
      request.exactly->device_class_name = *class_name;
      request.exactly->allocation_mode = "ExactCount";
      request.exactly->count = *count;
      out.mappings.push_back({container.name, resource, request.name});
      out.claim.spec.devices.requests.push_back(std::move(request));
    }
  }
  if (out.claim.spec.devices.requests.empty()) return std::nullopt;
  out.claim.metadata.namespace_ = pod.metadata.namespace_;
  out.claim.metadata.name = pod.metadata.name + "-extended-resources";
  out.claim.metadata.uid = "extended-resources-" + pod.metadata.uid;
  out.claim.metadata.annotations[std::string(kExtendedResourceClaimAnnotation)] = "true";
  return out;
}

}  // namespace devlet::allocator
