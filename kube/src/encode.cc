// JSON encoding of the object model with Kubernetes field names and Go's omitempty rules.
//
// Go writes a field tagged `omitempty` only when it is not the zero value, and always writes a
// field without it; schema.h's rows say which (Optional, Required). A Required list or map is
// written even when empty (`[]`, where Go would write `null` for a nil slice).
#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "devlet/common/strings.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/json_util.h"
#include "schema.h"

namespace devlet::kube {
namespace {

using internal::Json;

// Declared here so that the container templates below find them.
Json ToJson(const Quantity& in);
template <internal::HasSchema T>
Json ToJson(const T& in);

Json ToJson(const std::string& in) {
  return in;
}

Json ToJson(int64_t in) {
  return in;
}

Json ToJson(bool in) {
  return in;
}

Json ToJson(const RawJson& in) {
  if (in.empty()) {
    return nullptr;
  }
  try {
    return Json::parse(in.json);
  } catch (const std::exception&) {
    return in.json;  // Not JSON (set by code, not decoded): keep it visible as a string.
  }
}

// Serves std::vector<bool> too (each element a bool by value).
template <typename T>
Json ToJson(const std::vector<T>& in) {
  Json out = Json::array();
  for (const T& item : in) {
    out.push_back(ToJson(item));
  }
  return out;
}

// Only set optionals are written.
template <typename T>
Json ToJson(const std::optional<T>& in) {
  return ToJson(*in);
}

template <typename T>
Json ToJson(const std::map<std::string, T>& in) {
  Json out = Json::object();
  for (const auto& [key, value] : in) {
    out[key] = ToJson(value);
  }
  return out;
}

// MergeExtra appends kept fields that were not written already.
void MergeExtra(Json& j, const Extra& extra) {
  if (extra.empty()) {
    return;
  }
  Json kept;
  try {
    kept = Json::parse(extra.json);
  } catch (const std::exception&) {
    return;
  }
  if (!kept.is_object()) {
    return;
  }
  for (auto it = kept.begin(); it != kept.end(); ++it) {
    if (!j.contains(it.key())) {
      j[it.key()] = std::move(it.value());
    }
  }
}

// ---- Types with a field table (schema.h) ----------------------------------------------------

// IsEmpty is Go's omitempty test. Go never omits a struct (Quantity is one), even with omitempty.
bool IsEmpty(const std::string& value) {
  return value.empty();
}

bool IsEmpty(int64_t value) {
  return value == 0;
}

bool IsEmpty(const RawJson& value) {
  return value.empty();
}

template <typename T>
bool IsEmpty(const std::optional<T>& value) {
  return !value.has_value();
}

template <typename T>
bool IsEmpty(const std::vector<T>& value) {
  return value.empty();
}

template <typename T>
bool IsEmpty(const std::map<std::string, T>& value) {
  return value.empty();
}

template <typename T>
  requires internal::HasSchema<T> || std::same_as<T, Quantity>
bool IsEmpty(const T&) {
  return false;
}

// PutField writes one row of T's table unless Go's omitempty drops it.
template <typename T, typename F>
void PutField(Json& j, const F& field, const T& in) {
  const auto& value = in.*field.member;
  if (field.presence == internal::Presence::kRequired || !IsEmpty(value)) {
    j[field.name] = ToJson(value);
  }
}

// ToJson writes `in` row by row (apiVersion and kind first for an object, kept fields last).
template <internal::HasSchema T>
Json ToJson(const T& in) {
  Json j = Json::object();
  if constexpr (internal::IsObject<T>) {
    j["apiVersion"] = std::string(internal::Schema<T>::kApiVersion);
    j["kind"] = std::string(internal::Schema<T>::kKind);
  }
  std::apply([&](const auto&... field) { (PutField(j, field, in), ...); },
             internal::Schema<T>::kFields);
  if constexpr (internal::KeepsExtra<T>) {
    MergeExtra(j, in.extra);
  }
  return j;
}

Json ToJson(const Quantity& in) {
  return in.str();
}

// ---- Top level ------------------------------------------------------------------------------

Json TopToJson(const Object& object) {
  return std::visit([](const auto& o) { return ToJson(o); }, object);
}

}  // namespace

std::string EncodeJson(const Object& object, const EncodeOptions& options) {
  return internal::DumpJson(TopToJson(object), options.indent);
}

#define DEVLET_DEFINE_ENCODE(T)                                           \
  std::string EncodeJson(const T& object, const EncodeOptions& options) { \
    return internal::DumpJson(ToJson(object), options.indent);            \
  }
DEVLET_DEFINE_ENCODE(DeviceClass)
DEVLET_DEFINE_ENCODE(ResourceSlice)
DEVLET_DEFINE_ENCODE(ResourceClaim)
DEVLET_DEFINE_ENCODE(ResourceClaimTemplate)
DEVLET_DEFINE_ENCODE(DeviceTaintRule)
DEVLET_DEFINE_ENCODE(Node)
DEVLET_DEFINE_ENCODE(Pod)
#undef DEVLET_DEFINE_ENCODE

std::string EncodeJsonList(const std::vector<Object>& objects, const EncodeOptions& options) {
  Json j = Json::object();
  j["apiVersion"] = "v1";
  j["kind"] = "List";
  Json items = Json::array();
  for (const Object& object : objects) {
    items.push_back(TopToJson(object));
  }
  j["items"] = std::move(items);
  return internal::DumpJson(j, options.indent);
}

// ---- Object helpers ---------------------------------------------------------------------------

std::string_view KindOf(const Object& object) {
  return std::visit(
      [](const auto& o) { return internal::Schema<std::decay_t<decltype(o)>>::kKind; }, object);
}

std::string_view ApiVersionOf(const Object& object) {
  return std::visit(
      [](const auto& o) { return internal::Schema<std::decay_t<decltype(o)>>::kApiVersion; },
      object);
}

const ObjectMeta& MetadataOf(const Object& object) {
  return std::visit([](const auto& o) -> const ObjectMeta& { return o.metadata; }, object);
}

ObjectMeta& MetadataOf(Object& object) {
  return std::visit([](auto& o) -> ObjectMeta& { return o.metadata; }, object);
}

std::string Describe(const Object& object) {
  const ObjectMeta& meta = MetadataOf(object);
  std::string name = meta.namespace_.empty() ? meta.name : meta.namespace_ + "/" + meta.name;
  return std::string(KindOf(object)) + " " + GoQuote(name);  // names can hold any byte
}

}  // namespace devlet::kube
