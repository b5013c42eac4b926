// Typed decoding of Kubernetes objects from a JSON tree, with v1beta1/v1beta2 conversion.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "devlet/common/status.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/json_util.h"
#include "schema.h"

namespace devlet::kube {
namespace {

using internal::Json;

// Path is where a value sits in the object ("spec.devices[0].attributes[gpu.example.com/uuid]"),
// turned into text only for an error: building a string per value cost a third of decoding a
// cluster's ResourceSlices. A Path points at its parent and at its key, which live on the caller's
// stack and in the JSON tree, so it must not outlive the call that receives it.
class Path {
 public:
  Path() = default;  // the object itself: empty text

  Path(const Path& parent, std::string_view field) : parent_(&parent), kind_(kField), key_(field) {}

  Path(const Path& parent, std::size_t index) : parent_(&parent), kind_(kIndex), index_(index) {}

  // MapKey is the path of a map's member: `labels[app]`.
  static Path MapKey(const Path& parent, std::string_view key) {
    Path out(parent, key);
    out.kind_ = kMapKey;
    return out;
  }

  std::string str() const {
    std::string out;
    Append(out);
    return out;
  }

 private:
  enum Kind { kRoot, kField, kIndex, kMapKey };

  void Append(std::string& out) const {
    if (parent_ != nullptr) {
      parent_->Append(out);
    }
    switch (kind_) {
      case kRoot:
        break;
      case kField:
        if (!out.empty()) {
          out += '.';
        }
        out += key_;
        break;
      case kIndex:
        out += '[';
        out += std::to_string(index_);
        out += ']';
        break;
      case kMapKey:
        out += '[';
        out += key_;
        out += ']';
        break;
    }
  }

  const Path* parent_ = nullptr;
  Kind kind_ = kRoot;
  std::string_view key_;
  std::size_t index_ = 0;
};

struct Ctx {
  bool strict = false;
  // YAML input: a bool or number where a string is expected is taken as a string, as
  // sigs.k8s.io/yaml does for string-typed targets (`value: 1` -> "1").
  bool yaml = false;
};

// Paths hold keys from the input, and messages can quote input: both are escaped and cut, so that
// a NUL or a 100 KB key reaches no log raw or whole.
constexpr std::size_t kMaxPathInMessage = 256;
constexpr std::size_t kMaxMessage = 1024;

absl::Status FieldError(const Path& where, std::string_view message) {
  const std::string path = where.str();
  return InvalidArgument(
      (path.empty() ? std::string() : internal::EscapeForMessage(path, kMaxPathInMessage) + ": ") +
      internal::EscapeForMessage(message, kMaxMessage));
}

absl::Status TypeError(const Path& path, std::string_view expected, const Json& got) {
  return FieldError(path, "expected " + std::string(expected) + ", got " + internal::TypeName(got));
}

// ---- Scalars ------------------------------------------------------------------------------

absl::Status Read(const Json& j, const Path& path, Ctx& ctx, std::string* out) {
  if (j.is_null()) {
    out->clear();
    return absl::OkStatus();
  }
  if (j.is_string()) {
    *out = j.get_ref<const std::string&>();
    return absl::OkStatus();
  }
  if (ctx.yaml && (j.is_boolean() || j.is_number_integer())) {
    *out = j.dump();
    return absl::OkStatus();
  }
  if (ctx.yaml && j.is_number_float()) {
    const double value = j.get<double>();
    if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 1e21) {
      *out = std::to_string(static_cast<long long>(value));  // Go: FormatFloat(1.0) == "1"
    } else {
      *out = j.dump();
    }
    return absl::OkStatus();
  }
  return TypeError(path, "a string", j);
}

absl::Status Read(const Json& j, const Path& path, Ctx&, int64_t* out) {
  if (j.is_null()) {
    *out = 0;
    return absl::OkStatus();
  }
  if (j.is_number_integer() && !j.is_number_unsigned()) {
    *out = j.get<int64_t>();
    return absl::OkStatus();
  }
  if (j.is_number_unsigned()) {
    const uint64_t value = j.get<uint64_t>();
    if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      *out = static_cast<int64_t>(value);
      return absl::OkStatus();
    }
    return FieldError(path, "integer " + j.dump() + " does not fit in 64 bits");
  }
  if (j.is_number_float()) {
    const double value = j.get<double>();
    if (std::isfinite(value) && std::fabs(value) < 9.2e18 && value == std::trunc(value)) {
      // JSON writers (and YAML "5.0") sometimes write whole numbers as floats; Go's decoder
      // rejects "5.0" for an int64, so do we, with a clear message.
      return FieldError(path, "expected an integer, got the number " + j.dump());
    }
    return FieldError(path, "expected an integer that fits in 64 bits, got the number " + j.dump());
  }
  return TypeError(path, "an integer", j);
}

absl::Status Read(const Json& j, const Path& path, Ctx&, bool* out) {
  if (j.is_null()) {
    *out = false;
    return absl::OkStatus();
  }
  if (!j.is_boolean()) {
    return TypeError(path, "a boolean", j);
  }
  *out = j.get<bool>();
  return absl::OkStatus();
}

absl::Status Read(const Json& j, const Path& path, Ctx&, Quantity* out) {
  if (j.is_null()) {
    *out = Quantity();
    return absl::OkStatus();
  }
  std::string text;
  if (j.is_string()) {
    text = j.get_ref<const std::string&>();
  } else if (j.is_number()) {
    text = j.dump();  // Quantity.UnmarshalJSON accepts a bare number.
  } else {
    return TypeError(path, "a quantity (string or number)", j);
  }
  absl::StatusOr<Quantity> quantity = Quantity::Parse(text);
  if (!quantity.ok()) {
    return FieldError(path, Message(quantity.status()));
  }
  *out = *std::move(quantity);
  return absl::OkStatus();
}

absl::Status Read(const Json& j, const Path& path, Ctx&, RawJson* out) {
  out->json.clear();
  if (j.is_null()) {
    return absl::OkStatus();
  }
  (void)path;
  out->json = internal::DumpJson(j);
  return absl::OkStatus();
}

// Declared here so that the container templates below find it.
template <internal::HasSchema T>
absl::Status Read(const Json& j, const Path& path, Ctx& ctx, T* out);

// ---- Containers ---------------------------------------------------------------------------

template <typename T>
absl::Status Read(const Json& j, const Path& path, Ctx& ctx, std::optional<T>* out) {
  if (j.is_null()) {
    out->reset();
    return absl::OkStatus();
  }
  T value{};
  DEVLET_RETURN_IF_ERROR(Read(j, path, ctx, &value));
  *out = std::move(value);
  return absl::OkStatus();
}

// Each element is read into a local and moved in, so this serves std::vector<bool> too.
template <typename T>
absl::Status Read(const Json& j, const Path& path, Ctx& ctx, std::vector<T>* out) {
  out->clear();
  if (j.is_null()) {
    return absl::OkStatus();
  }
  if (!j.is_array()) {
    return TypeError(path, "a list", j);
  }
  out->reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    T value{};
    DEVLET_RETURN_IF_ERROR(Read(j[i], Path(path, i), ctx, &value));
    out->push_back(std::move(value));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Read(const Json& j, const Path& path, Ctx& ctx, std::map<std::string, T>* out) {
  out->clear();
  if (j.is_null()) {
    return absl::OkStatus();
  }
  if (!j.is_object()) {
    return TypeError(path, "an object", j);
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    T value{};
    DEVLET_RETURN_IF_ERROR(Read(it.value(), Path::MapKey(path, it.key()), ctx, &value));
    (*out)[it.key()] = std::move(value);
  }
  return absl::OkStatus();
}

// ---- Types with a field table (schema.h) ----------------------------------------------------

// IsKnown reports whether `key` is a field of T's table (or an object's apiVersion or kind).
template <typename T>
bool IsKnown(std::string_view key) {
  if constexpr (internal::IsObject<T>) {
    if (key == "apiVersion" || key == "kind") {
      return true;
    }
  }
  static constexpr auto kNames = internal::FieldNames<T>();
  for (std::string_view name : kNames) {
    if (name == key) {
      return true;
    }
  }
  return false;
}

// ReadUnknown deals with the members of `j` that T's table does not name (`known` counts those
// it does): kept in T's `extra` when it has one, else dropped, or reported when decoding strictly.
template <typename T>
absl::Status ReadUnknown(const Json& j, const Path& path, Ctx& ctx, std::size_t known, T* out) {
  if constexpr (internal::KeepsExtra<T>) {
    if (known == j.size()) {
      out->extra.json.clear();
      return absl::OkStatus();
    }
    Json rest = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!IsKnown<T>(it.key())) {
        rest[it.key()] = it.value();
      }
    }
    out->extra.json = rest.empty() ? std::string() : internal::DumpJson(rest);
  } else if (ctx.strict && known != j.size()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!IsKnown<T>(it.key())) {
        return InvalidArgument(
            "unknown field " +
            internal::QuoteForMessage(Path(path, it.key()).str(), kMaxPathInMessage));
      }
    }
  }
  return absl::OkStatus();
}

// ReadField reads one row of T's table from `j`, counting it in `known` when present.
template <typename T, typename F>
absl::Status ReadField(const Json& j, const Path& path, Ctx& ctx, const F& field,
                       std::size_t& known, T* out) {
  auto it = j.find(field.name);
  if (it == j.end()) {
    return absl::OkStatus();
  }
  ++known;
  return Read(*it, Path(path, field.name), ctx, &(out->*field.member));
}

// Read fills `out` from the object `j` row by row; null counts as an empty object, like Go.
template <internal::HasSchema T>
absl::Status Read(const Json& j, const Path& path, Ctx& ctx, T* out) {
  if (j.is_null()) {
    return absl::OkStatus();
  }
  if (!j.is_object()) {
    return TypeError(path, "an object", j);
  }
  std::size_t known = 0;
  absl::Status status;
  std::apply(
      [&](const auto&... field) {
        (... && (status = ReadField(j, path, ctx, field, known, out)).ok());
      },
      internal::Schema<T>::kFields);
  DEVLET_RETURN_IF_ERROR(status);
  if constexpr (internal::IsObject<T>) {
    known += j.contains("apiVersion") + j.contains("kind");
  }
  return ReadUnknown(j, path, ctx, known, out);
}

// ---- Version conversion (on the JSON tree, before typed decoding) ---------------------------

// v1beta1 DeviceRequest: the ExactDeviceRequest fields sit inline; v1 nests them under
// `exactly` unless the request uses firstAvailable.
void ConvertV1beta1DeviceClaim(Json& devices) {
  if (!devices.is_object()) {
    return;
  }
  auto requests = devices.find("requests");
  if (requests == devices.end() || !requests->is_array()) {
    return;
  }
  static constexpr std::string_view kInline[] = {
      "deviceClassName", "selectors",   "allocationMode", "count",
      "adminAccess",     "tolerations", "capacity",       "derivedAttributes"};
  for (Json& request : *requests) {
    if (!request.is_object()) {
      continue;
    }
    Json exactly = Json::object();
    for (std::string_view key : kInline) {
      auto it = request.find(key);
      if (it != request.end()) {
        exactly[std::string(key)] = std::move(*it);
        request.erase(it);
      }
    }
    auto first = request.find("firstAvailable");
    const bool has_first = first != request.end() && first->is_array() && !first->empty();
    if (!has_first || !exactly.empty()) {
      // Without firstAvailable the inline fields are the exact request (even when all are
      // absent: validation then reports the missing deviceClassName under `exactly`). With both,
      // keep both so that validation reports the conflict.
      request["exactly"] = std::move(exactly);
    }
  }
}

// v1beta1 Device: attributes, capacity, ... sit under `basic`.
void ConvertV1beta1Slice(Json& spec) {
  if (!spec.is_object()) {
    return;
  }
  auto devices = spec.find("devices");
  if (devices == spec.end() || !devices->is_array()) {
    return;
  }
  for (Json& device : *devices) {
    if (!device.is_object()) {
      continue;
    }
    auto basic = device.find("basic");
    if (basic == device.end()) {
      continue;
    }
    Json fields = std::move(*basic);
    device.erase(basic);
    if (fields.is_object()) {
      for (auto it = fields.begin(); it != fields.end(); ++it) {
        if (!device.contains(it.key())) {
          device[it.key()] = std::move(it.value());
        }
      }
    }
  }
}

Json* FindPath(Json& j, std::initializer_list<std::string_view> keys) {
  Json* current = &j;
  for (std::string_view key : keys) {
    if (!current->is_object()) {
      return nullptr;
    }
    auto it = current->find(key);
    if (it == current->end()) {
      return nullptr;
    }
    current = &*it;
  }
  return current;
}

void ConvertToV1(std::string_view version, std::string_view kind, Json& j) {
  if (version != "v1beta1") {
    return;  // v1beta2 and v1alpha3 (DeviceTaintRule) have the v1 shape.
  }
  if (kind == "ResourceClaim") {
    if (Json* devices = FindPath(j, {"spec", "devices"})) {
      ConvertV1beta1DeviceClaim(*devices);
    }
  } else if (kind == "ResourceClaimTemplate") {
    if (Json* devices = FindPath(j, {"spec", "spec", "devices"})) {
      ConvertV1beta1DeviceClaim(*devices);
    }
  } else if (kind == "ResourceSlice") {
    if (Json* spec = FindPath(j, {"spec"})) {
      ConvertV1beta1Slice(*spec);
    }
  }
}

// ---- Dispatch -----------------------------------------------------------------------------

struct Location {
  std::string prefix;  // "file.yaml: document 2: items[3]: "
};

std::string NameForMessage(const Json& j) {
  const Json* metadata = nullptr;
  if (j.is_object()) {
    auto it = j.find("metadata");
    if (it != j.end() && it->is_object()) {
      metadata = &*it;
    }
  }
  if (metadata == nullptr) {
    return {};
  }
  std::string name;
  auto ns = metadata->find("namespace");
  if (ns != metadata->end() && ns->is_string() && !ns->get_ref<const std::string&>().empty()) {
    name = ns->get_ref<const std::string&>() + "/";
  }
  auto n = metadata->find("name");
  if (n != metadata->end() && n->is_string()) {
    name += n->get_ref<const std::string&>();
  }
  return name;
}

bool IsResourceVersion(std::string_view api_version, std::string_view* version) {
  constexpr std::string_view kPrefix = "resource.k8s.io/";
  if (api_version.substr(0, kPrefix.size()) != kPrefix) {
    return false;
  }
  *version = api_version.substr(kPrefix.size());
  return *version == "v1" || *version == "v1beta1" || *version == "v1beta2" ||
         *version == "v1alpha3";
}

class Dispatcher {
 public:
  Dispatcher(const DecodeOptions& options, std::vector<Object>* out, bool yaml)
      : options_(options), out_(out) {
    ctx_.strict = options.strict;
    ctx_.yaml = yaml;
  }

  // Decodes one top-level JSON value: an object, a list object or an array.
  absl::Status Value(Json& j, const std::string& prefix, std::string_view default_api_version,
                     std::string_view default_kind, int list_depth) {
    if (j.is_null()) {
      return absl::OkStatus();  // empty YAML document
    }
    if (j.is_array()) {
      if (list_depth > 0) {
        return InvalidArgument(prefix + "expected an object, got a list");
      }
      for (std::size_t i = 0; i < j.size(); ++i) {
        DEVLET_RETURN_IF_ERROR(
            Value(j[i], prefix + "[" + std::to_string(i) + "]: ", "", "", list_depth + 1));
      }
      return absl::OkStatus();
    }
    if (!j.is_object()) {
      return InvalidArgument(prefix + "expected a Kubernetes object, got " + internal::TypeName(j));
    }
    std::string api_version(default_api_version);
    std::string kind(default_kind);
    DEVLET_RETURN_IF_ERROR(TypeField(j, "apiVersion", prefix, &api_version));
    DEVLET_RETURN_IF_ERROR(TypeField(j, "kind", prefix, &kind));
    if (kind.empty()) {
      return InvalidArgument(prefix + "object has no kind");
    }
    if (api_version.empty()) {
      return InvalidArgument(prefix + internal::EscapeForMessage(kind, 128) +
                             ": object has no apiVersion");
    }
    const bool is_list = kind == "List" || (kind.size() > 4 && kind.ends_with("List"));
    if (is_list) {
      if (list_depth > 0) {
        return InvalidArgument(prefix + "lists inside lists are not supported");
      }
      auto items = j.find("items");
      if (items == j.end() || items->is_null()) {
        return absl::OkStatus();
      }
      if (!items->is_array()) {
        return InvalidArgument(prefix + internal::EscapeForMessage(kind, 128) +
                               ": items: expected a list, got " + internal::TypeName(*items));
      }
      // Items of a typed list (ResourceClaimList) may omit apiVersion and kind.
      const std::string item_kind = kind == "List" ? "" : kind.substr(0, kind.size() - 4);
      const std::string item_version = kind == "List" ? "" : api_version;
      for (std::size_t i = 0; i < items->size(); ++i) {
        DEVLET_RETURN_IF_ERROR(Value((*items)[i], prefix + "items[" + std::to_string(i) + "]: ",
                                     item_version, item_kind, list_depth + 1));
      }
      return absl::OkStatus();
    }
    return Object(j, prefix, api_version, kind);
  }

 private:
  // TypeField reads the string member `key` (apiVersion, kind) of the object `j` into `*out`;
  // absent or null keeps `*out` (a typed list's default for its items).
  static absl::Status TypeField(const Json& j, std::string_view key, const std::string& prefix,
                                std::string* out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      return absl::OkStatus();
    }
    if (!it->is_string()) {
      return InvalidArgument(prefix + std::string(key) + ": expected a string, got " +
                             internal::TypeName(*it));
    }
    *out = it->get<std::string>();
    return absl::OkStatus();
  }

  absl::Status Object(Json& j, const std::string& prefix, const std::string& api_version,
                      const std::string& kind) {
    std::string_view version;
    const std::string described = internal::EscapeForMessage(kind, 128) + " " +
                                  internal::QuoteForMessage(NameForMessage(j)) + ": ";
    if (IsResourceVersion(api_version, &version)) {
      const bool alpha_ok = kind == "DeviceTaintRule";
      if (version == "v1alpha3" && !alpha_ok) {
        return InvalidArgument(prefix + described + "resource.k8s.io/v1alpha3 has no " +
                               internal::EscapeForMessage(kind, 128));
      }
      if (kind == "DeviceTaintRule" && version == "v1beta1") {
        return InvalidArgument(prefix + described + "resource.k8s.io/v1beta1 has no " +
                               internal::EscapeForMessage(kind, 128));
      }
      ConvertToV1(version, kind, j);
      if (kind == "DeviceClass")
        return Decode<DeviceClass>(j, prefix + described);
      if (kind == "ResourceSlice")
        return Decode<ResourceSlice>(j, prefix + described);
      if (kind == "ResourceClaim")
        return Decode<ResourceClaim>(j, prefix + described);
      if (kind == "ResourceClaimTemplate") {
        return Decode<ResourceClaimTemplate>(j, prefix + described);
      }
      if (kind == "DeviceTaintRule")
        return Decode<DeviceTaintRule>(j, prefix + described);
    } else if (api_version == "v1") {
      if (kind == "Node")
        return Decode<Node>(j, prefix + described);
      if (kind == "Pod")
        return Decode<Pod>(j, prefix + described);
    }
    if (options_.skip_unknown_kinds) {
      return absl::OkStatus();
    }
    return InvalidArgument(prefix + "unsupported object kind " + internal::QuoteForMessage(kind) +
                           " (apiVersion " + internal::QuoteForMessage(api_version) +
                           "); expected resource.k8s.io/v1, v1beta2 or v1beta1 DeviceClass, "
                           "ResourceSlice, ResourceClaim, ResourceClaimTemplate, "
                           "DeviceTaintRule, or v1 Node or Pod");
  }

  template <typename T>
  absl::Status Decode(const Json& j, const std::string& prefix) {
    T object{};
    absl::Status status = Read(j, Path(), ctx_, &object);
    if (!status.ok()) {
      return InvalidArgument(prefix + Message(status));
    }
    out_->emplace_back(std::move(object));
    if (options_.apply_defaults) {
      ApplyDefaults(out_->back());
    }
    return absl::OkStatus();
  }

  const DecodeOptions& options_;
  std::vector<kube::Object>* out_;
  Ctx ctx_;
};

std::string SourcePrefix(const DecodeOptions& options) {
  return options.source.empty() ? std::string()
                                : internal::EscapeForMessage(options.source, 1024) + ": ";
}

absl::Status CheckSize(std::string_view data, const DecodeOptions& options) {
  if (data.size() > options.max_bytes) {
    return InvalidArgument(SourcePrefix(options) + "input is " + std::to_string(data.size()) +
                           " bytes, more than the limit of " + std::to_string(options.max_bytes));
  }
  return absl::OkStatus();
}

internal::Limits LimitsOf(const DecodeOptions& options) {
  return internal::Limits{options.max_depth, options.max_nodes};
}

}  // namespace

absl::StatusOr<std::vector<Object>> DecodeJson(std::string_view data,
                                               const DecodeOptions& options) {
  DEVLET_RETURN_IF_ERROR(CheckSize(data, options));
  absl::StatusOr<Json> json = internal::ParseJson(data, LimitsOf(options));
  if (!json.ok()) {
    return InvalidArgument(SourcePrefix(options) + Message(json.status()));
  }
  std::vector<Object> out;
  Dispatcher dispatcher(options, &out, /*yaml=*/false);
  DEVLET_RETURN_IF_ERROR(dispatcher.Value(*json, SourcePrefix(options), "", "", 0));
  return out;
}

absl::StatusOr<std::vector<Object>> DecodeYaml(std::string_view data,
                                               const DecodeOptions& options) {
  DEVLET_RETURN_IF_ERROR(CheckSize(data, options));
  absl::StatusOr<std::vector<Json>> documents = internal::ParseYaml(data, LimitsOf(options));
  if (!documents.ok()) {
    return InvalidArgument(SourcePrefix(options) + Message(documents.status()));
  }
  std::vector<Object> out;
  Dispatcher dispatcher(options, &out, /*yaml=*/true);
  const bool many = documents->size() > 1;
  for (std::size_t i = 0; i < documents->size(); ++i) {
    const std::string prefix =
        SourcePrefix(options) + (many ? "document " + std::to_string(i + 1) + ": " : "");
    DEVLET_RETURN_IF_ERROR(dispatcher.Value((*documents)[i], prefix, "", "", 0));
  }
  return out;
}

absl::StatusOr<std::vector<Object>> Decode(std::string_view data, const DecodeOptions& options) {
  std::size_t i = 0;
  while (i < data.size() &&
         (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')) {
    ++i;
  }
  if (i < data.size() && (data[i] == '{' || data[i] == '[')) {
    return DecodeJson(data, options);
  }
  return DecodeYaml(data, options);
}

template <typename T>
absl::StatusOr<T> DecodeOne(std::string_view data, const DecodeOptions& options) {
  DEVLET_ASSIGN_OR_RETURN(std::vector<Object> objects, Decode(data, options));
  if (objects.size() != 1) {
    return InvalidArgument(SourcePrefix(options) + "expected exactly one object, got " +
                           std::to_string(objects.size()));
  }
  T* object = std::get_if<T>(&objects[0]);
  if (object == nullptr) {
    return InvalidArgument(SourcePrefix(options) + "expected a " +
                           std::string(KindOf(Object(T{}))) + ", got " + Describe(objects[0]));
  }
  return std::move(*object);
}

template absl::StatusOr<DeviceClass> DecodeOne(std::string_view, const DecodeOptions&);
template absl::StatusOr<ResourceSlice> DecodeOne(std::string_view, const DecodeOptions&);
template absl::StatusOr<ResourceClaim> DecodeOne(std::string_view, const DecodeOptions&);
template absl::StatusOr<ResourceClaimTemplate> DecodeOne(std::string_view, const DecodeOptions&);
template absl::StatusOr<DeviceTaintRule> DecodeOne(std::string_view, const DecodeOptions&);
template absl::StatusOr<Node> DecodeOne(std::string_view, const DecodeOptions&);
template absl::StatusOr<Pod> DecodeOne(std::string_view, const DecodeOptions&);

// ---- Defaults -------------------------------------------------------------------------------

namespace {

void DefaultTolerations(std::vector<DeviceToleration>& tolerations) {
  for (DeviceToleration& toleration : tolerations) {
    if (toleration.operator_.empty()) {
      toleration.operator_ = std::string(kTolerationOpEqual);
    }
  }
}

template <typename Request>
void DefaultRequest(Request& request) {
  if (request.allocation_mode.empty()) {
    request.allocation_mode = std::string(kAllocationModeExactCount);
  }
  if (request.allocation_mode == kAllocationModeExactCount && request.count == 0) {
    request.count = 1;
  }
  DefaultTolerations(request.tolerations);
}

}  // namespace

void ApplyDefaults(ResourceClaimSpec& spec) {
  for (DeviceRequest& request : spec.devices.requests) {
    if (request.exactly) {
      DefaultRequest(*request.exactly);
    }
    for (DeviceSubRequest& sub : request.first_available) {
      DefaultRequest(sub);
    }
  }
}

void ApplyDefaults(Object& object) {
  if (auto* claim = std::get_if<ResourceClaim>(&object)) {
    ApplyDefaults(claim->spec);
    if (claim->status.allocation) {
      for (auto& result : claim->status.allocation->devices.results) {
        DefaultTolerations(result.tolerations);
      }
    }
  } else if (auto* tmpl = std::get_if<ResourceClaimTemplate>(&object)) {
    ApplyDefaults(tmpl->spec.spec);
  }
}

}  // namespace devlet::kube
