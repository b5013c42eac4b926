// File: devlet/kube/codec.h
//
// Decoding Kubernetes objects from JSON and YAML and encoding them to JSON.
//
//   DEVLET_ASSIGN_OR_RETURN(std::vector<devlet::kube::Object> objects,
//                           devlet::kube::Decode(file_contents, {.source = path}));
//   for (const auto& object : objects) {
//     if (const auto* claim = std::get_if<devlet::kube::ResourceClaim>(&object)) { ... }
//   }
//   std::string json = devlet::kube::EncodeJson(claim);
//
// Input: one JSON value (an object, a `kind: List` / `*List` with `items`, or an array of
// objects), or YAML with any number of `---`-separated documents, each of those. Objects are
// dispatched on apiVersion and kind:
//   resource.k8s.io/v1, v1beta2, v1beta1 (v1alpha3 for DeviceTaintRule): DeviceClass,
//     ResourceSlice, ResourceClaim, ResourceClaimTemplate, DeviceTaintRule and their lists;
//   v1: Node, Pod, NodeList, PodList, List.
// v1beta1 and v1beta2 input is converted to v1 (v1beta1 requests' inline fields move under
// `exactly`, a device's `basic` is flattened). Defaults that the API server would apply
// (allocationMode ExactCount, count 1, toleration operator Equal) are applied unless disabled.
//
// YAML is read as kubectl reads it (sigs.k8s.io/yaml, YAML 1.1 scalars): unquoted y/yes/on are
// booleans, a bool or number where a string belongs becomes its text (`name: n` -> "false").
// Anchors, aliases and `<<` merge keys work. JSON input is typed strictly (a number is not a
// string), as the API server's JSON decoder does.
//
// Errors (InvalidArgument) name the document, object and field:
//   `claims.yaml: document 2: ResourceClaim "gpu": spec.devices.requests[0].exactly.count:
//    expected an integer, got a string`
// Untrusted input is bounded: size, nesting depth and YAML alias expansion are capped, and no
// input crashes the decoder.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/kube/core.h"
#include "devlet/kube/meta.h"
#include "devlet/kube/resource.h"

namespace devlet::kube {

// Object is any object the codec understands, always in its v1 form.
using Object = std::variant<DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate,
                            DeviceTaintRule, Node, Pod>;

// KindOf returns the Kubernetes kind of `object` ("ResourceClaim").
std::string_view KindOf(const Object& object);

// ApiVersionOf returns the apiVersion the encoder writes ("resource.k8s.io/v1" or "v1").
std::string_view ApiVersionOf(const Object& object);

// MetadataOf returns the object's metadata.
const ObjectMeta& MetadataOf(const Object& object);
ObjectMeta& MetadataOf(Object& object);

// Describe names an object for messages: `ResourceClaim "ns/name"` (`DeviceClass "gpu"`).
std::string Describe(const Object& object);

// DecodeOptions tune decoding.
struct DecodeOptions {
  // Source names the input in error messages (a file name, "stdin"); may be empty.
  std::string source;
  // Strict rejects fields the model does not know at places where it does not keep them
  // (Kubernetes' "strict decoding error: unknown field"). Off: such fields are dropped.
  bool strict = false;
  // SkipUnknownKinds drops objects of other kinds instead of failing.
  bool skip_unknown_kinds = false;
  // ApplyDefaults applies the API server's defaults (see above).
  bool apply_defaults = true;
  // Limits on untrusted input.
  std::size_t max_bytes = 64u << 20;
  int max_depth = 64;
  std::size_t max_nodes = 1u << 20;  // values YAML aliases may add by expansion
};

// Decode detects JSON (first non-space byte `{` or `[`) or YAML and decodes every object.
absl::StatusOr<std::vector<Object>> Decode(std::string_view data,
                                           const DecodeOptions& options = {});

// DecodeJson decodes one JSON value (object, List or array).
absl::StatusOr<std::vector<Object>> DecodeJson(std::string_view data,
                                               const DecodeOptions& options = {});

// DecodeYaml decodes a YAML stream of one or more documents (JSON is YAML, too).
absl::StatusOr<std::vector<Object>> DecodeYaml(std::string_view data,
                                               const DecodeOptions& options = {});

// DecodeOne decodes input that must hold exactly one object of type T.
template <typename T>
absl::StatusOr<T> DecodeOne(std::string_view data, const DecodeOptions& options = {});

extern template absl::StatusOr<DeviceClass> DecodeOne(std::string_view, const DecodeOptions&);
extern template absl::StatusOr<ResourceSlice> DecodeOne(std::string_view, const DecodeOptions&);
extern template absl::StatusOr<ResourceClaim> DecodeOne(std::string_view, const DecodeOptions&);
extern template absl::StatusOr<ResourceClaimTemplate> DecodeOne(std::string_view,
                                                                const DecodeOptions&);
extern template absl::StatusOr<DeviceTaintRule> DecodeOne(std::string_view, const DecodeOptions&);
extern template absl::StatusOr<Node> DecodeOne(std::string_view, const DecodeOptions&);
extern template absl::StatusOr<Pod> DecodeOne(std::string_view, const DecodeOptions&);

// EncodeOptions tune encoding.
struct EncodeOptions {
  // Indent: -1 compact (default), otherwise pretty-printed with this many spaces.
  int indent = -1;
};

// EncodeJson writes the object as v1 JSON with apiVersion and kind, Kubernetes field names,
// empty optional fields omitted like Go's `omitempty`, map keys sorted, kept `Extra` fields
// merged back and RawJson written as kept.
std::string EncodeJson(const Object& object, const EncodeOptions& options = {});

// Per-type overloads (no copy into an Object).
std::string EncodeJson(const DeviceClass& object, const EncodeOptions& options = {});
std::string EncodeJson(const ResourceSlice& object, const EncodeOptions& options = {});
std::string EncodeJson(const ResourceClaim& object, const EncodeOptions& options = {});
std::string EncodeJson(const ResourceClaimTemplate& object, const EncodeOptions& options = {});
std::string EncodeJson(const DeviceTaintRule& object, const EncodeOptions& options = {});
std::string EncodeJson(const Node& object, const EncodeOptions& options = {});
std::string EncodeJson(const Pod& object, const EncodeOptions& options = {});

// EncodeJsonList writes `{"apiVersion":"v1","kind":"List","items":[...]}`.
std::string EncodeJsonList(const std::vector<Object>& objects, const EncodeOptions& options = {});

// ApplyDefaults applies the API server's defaults to an object decoded without them.
void ApplyDefaults(Object& object);
void ApplyDefaults(ResourceClaimSpec& spec);

}  // namespace devlet::kube
