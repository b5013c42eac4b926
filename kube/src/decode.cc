// Typed decoding of Kubernetes objects from a JSON tree, with v1beta1/v1beta2 conversion.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "devlet/common/status.h"
#include "devlet/kube/codec.h"
#include "json_util.h"

namespace devlet::kube {
namespace {

using internal::Json;

std::string Child(const std::string& path, std::string_view key) {
  if (path.empty()) {
    return std::string(key);
  }
  std::string out = path;
  out += '.';
  out += key;
  return out;
}

std::string Index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string Key(const std::string& path, std::string_view key) {
  return path + "[" + std::string(key) + "]";
}

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

absl::Status FieldError(const std::string& path, std::string_view message) {
  return InvalidArgument(
      (path.empty() ? std::string() : internal::EscapeForMessage(path, kMaxPathInMessage) + ": ") +
      internal::EscapeForMessage(message, kMaxMessage));
}

absl::Status TypeError(const std::string& path, std::string_view expected, const Json& got) {
  return FieldError(path, "expected " + std::string(expected) + ", got " + internal::TypeName(got));
}

// ---- Scalars ------------------------------------------------------------------------------

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, std::string* out) {
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

absl::Status Read(const Json& j, const std::string& path, Ctx&, int64_t* out) {
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

absl::Status Read(const Json& j, const std::string& path, Ctx&, bool* out) {
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

absl::Status Read(const Json& j, const std::string& path, Ctx&, Quantity* out) {
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

absl::Status Read(const Json& j, const std::string& path, Ctx&, RawJson* out) {
  out->json.clear();
  if (j.is_null()) {
    return absl::OkStatus();
  }
  (void)path;
  out->json = internal::DumpJson(j);
  return absl::OkStatus();
}

// Forward declarations so the container templates below find every overload.
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, OwnerReference* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ObjectMeta* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, Condition* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeSelectorRequirement* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeSelectorTerm* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeSelector* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ContainerResourceClaim* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceRequirements* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, Container* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, PodResourceClaim* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, PodSpec* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, PodResourceClaimStatus* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  ContainerExtendedResourceRequest* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  PodExtendedResourceClaimStatus* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, PodStatus* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, CELDeviceSelector* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceSelector* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, OpaqueDeviceConfiguration* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceClassConfiguration* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceTaint* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceToleration* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceClassSpec* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourcePool* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, Counter* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, CounterSet* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceCounterConsumption* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  CapacityRequestPolicyRange* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, CapacityRequestPolicy* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceCapacity* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceAttribute* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeAllocatableMapping* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeAllocatableOverhead* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeAllocatableResource* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, Device* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceSliceSpec* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, CapacityRequirements* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceDerivedAttribute* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ExactDeviceRequest* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceSubRequest* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceRequest* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceConstraint* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceClaimConfiguration* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceClaim* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceClaimSpec* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  DeviceRequestAllocationResult* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  DeviceAllocationConfiguration* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceAllocationResult* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, AllocationResult* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  ResourceClaimConsumerReference* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NetworkDeviceData* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, AllocatedDeviceStatus* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceClaimStatus* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceClaimTemplateSpec* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceTaintSelector* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceTaintRuleSpec* out);
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceTaintRuleStatus* out);

// ---- Containers ---------------------------------------------------------------------------

template <typename T>
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, std::optional<T>* out) {
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
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, std::vector<T>* out) {
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
    DEVLET_RETURN_IF_ERROR(Read(j[i], Index(path, i), ctx, &value));
    out->push_back(std::move(value));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, std::map<std::string, T>* out) {
  out->clear();
  if (j.is_null()) {
    return absl::OkStatus();
  }
  if (!j.is_object()) {
    return TypeError(path, "an object", j);
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    T value{};
    DEVLET_RETURN_IF_ERROR(Read(it.value(), Key(path, it.key()), ctx, &value));
    (*out)[it.key()] = std::move(value);
  }
  return absl::OkStatus();
}

// Fields reads the members of one JSON object and deals with the ones nobody asked for.
class Fields {
 public:
  Fields(const Json& j, const std::string& path, Ctx& ctx) : j_(j), path_(path), ctx_(ctx) {}

  // Open checks that `j` is an object (null counts as an empty object, like Go).
  absl::Status Open() {
    if (j_.is_null()) {
      return absl::OkStatus();
    }
    if (!j_.is_object()) {
      return TypeError(path_, "an object", j_);
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Get(std::string_view key, T* out) {
    if (!j_.is_object()) {
      return absl::OkStatus();
    }
    auto it = j_.find(key);
    if (it == j_.end()) {
      return absl::OkStatus();
    }
    used_.emplace_back(key);
    return Read(*it, Child(path_, key), ctx_, out);
  }

  // Finish puts unread members into `extra` (when given) or reports them in strict mode.
  absl::Status Finish(Extra* extra) {
    if (!j_.is_object()) {
      return absl::OkStatus();
    }
    Json rest = Json::object();
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool used = false;
      for (std::string_view u : used_) {
        if (u == it.key()) {
          used = true;
          break;
        }
      }
      if (used) {
        continue;
      }
      if (extra != nullptr) {
        rest[it.key()] = it.value();
      } else if (ctx_.strict) {
        return InvalidArgument("unknown field " + internal::QuoteForMessage(Child(path_, it.key()),
                                                                            kMaxPathInMessage));
      }
    }
    if (extra != nullptr) {
      extra->json = rest.empty() ? std::string() : internal::DumpJson(rest);
    }
    return absl::OkStatus();
  }

  // Skip marks members the caller handled itself (apiVersion, kind).
  void Skip(std::string_view key) { used_.emplace_back(key); }

 private:
  const Json& j_;
  const std::string& path_;
  Ctx& ctx_;
  std::vector<std::string_view> used_;
};

#define DEVLET_FIELDS(j, path, ctx) \
  Fields f(j, path, ctx);           \
  DEVLET_RETURN_IF_ERROR(f.Open())
#define DEVLET_GET(key, member) DEVLET_RETURN_IF_ERROR(f.Get(key, &out->member))

// ---- meta / core --------------------------------------------------------------------------

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, OwnerReference* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("apiVersion", api_version);
  DEVLET_GET("kind", kind);
  DEVLET_GET("name", name);
  DEVLET_GET("uid", uid);
  DEVLET_GET("controller", controller);
  DEVLET_GET("blockOwnerDeletion", block_owner_deletion);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ObjectMeta* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("generateName", generate_name);
  DEVLET_GET("namespace", namespace_);
  DEVLET_GET("uid", uid);
  DEVLET_GET("resourceVersion", resource_version);
  DEVLET_GET("generation", generation);
  DEVLET_GET("creationTimestamp", creation_timestamp);
  DEVLET_GET("deletionTimestamp", deletion_timestamp);
  DEVLET_GET("labels", labels);
  DEVLET_GET("annotations", annotations);
  DEVLET_GET("ownerReferences", owner_references);
  DEVLET_GET("finalizers", finalizers);
  return f.Finish(&out->extra);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, Condition* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("type", type);
  DEVLET_GET("status", status);
  DEVLET_GET("observedGeneration", observed_generation);
  DEVLET_GET("lastTransitionTime", last_transition_time);
  DEVLET_GET("reason", reason);
  DEVLET_GET("message", message);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeSelectorRequirement* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("key", key);
  DEVLET_GET("operator", operator_);
  DEVLET_GET("values", values);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeSelectorTerm* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("matchExpressions", match_expressions);
  DEVLET_GET("matchFields", match_fields);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeSelector* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("nodeSelectorTerms", node_selector_terms);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ContainerResourceClaim* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("request", request);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceRequirements* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("limits", limits);
  DEVLET_GET("requests", requests);
  DEVLET_GET("claims", claims);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, Container* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("image", image);
  DEVLET_GET("resources", resources);
  return f.Finish(&out->extra);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, PodResourceClaim* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("resourceClaimName", resource_claim_name);
  DEVLET_GET("resourceClaimTemplateName", resource_claim_template_name);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, PodSpec* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("nodeName", node_name);
  DEVLET_GET("schedulerName", scheduler_name);
  DEVLET_GET("nodeSelector", node_selector);
  DEVLET_GET("resourceClaims", resource_claims);
  DEVLET_GET("initContainers", init_containers);
  DEVLET_GET("containers", containers);
  return f.Finish(&out->extra);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, PodResourceClaimStatus* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("resourceClaimName", resource_claim_name);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  ContainerExtendedResourceRequest* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("containerName", container_name);
  DEVLET_GET("resourceName", resource_name);
  DEVLET_GET("requestName", request_name);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  PodExtendedResourceClaimStatus* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("requestMappings", request_mappings);
  DEVLET_GET("resourceClaimName", resource_claim_name);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, PodStatus* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("phase", phase);
  DEVLET_GET("resourceClaimStatuses", resource_claim_statuses);
  DEVLET_GET("extendedResourceClaimStatus", extended_resource_claim_status);
  return f.Finish(&out->extra);
}

// ---- resource.k8s.io ----------------------------------------------------------------------

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, CELDeviceSelector* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("expression", expression);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceSelector* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("cel", cel);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  OpaqueDeviceConfiguration* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("driver", driver);
  DEVLET_GET("parameters", parameters);
  return f.Finish(nullptr);
}

absl::Status ReadDeviceConfiguration(Fields& f, DeviceConfiguration* out) {
  return f.Get("opaque", &out->opaque);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceClassConfiguration* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_RETURN_IF_ERROR(ReadDeviceConfiguration(f, out));
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceTaint* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("key", key);
  DEVLET_GET("value", value);
  DEVLET_GET("effect", effect);
  DEVLET_GET("timeAdded", time_added);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceToleration* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("key", key);
  DEVLET_GET("operator", operator_);
  DEVLET_GET("value", value);
  DEVLET_GET("effect", effect);
  DEVLET_GET("tolerationSeconds", toleration_seconds);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceClassSpec* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("selectors", selectors);
  DEVLET_GET("config", config);
  DEVLET_GET("extendedResourceName", extended_resource_name);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourcePool* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("generation", generation);
  DEVLET_GET("resourceSliceCount", resource_slice_count);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, Counter* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("value", value);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, CounterSet* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("counters", counters);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceCounterConsumption* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("counterSet", counter_set);
  DEVLET_GET("counters", counters);
  DEVLET_GET("compatibilityGroups", compatibility_groups);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  CapacityRequestPolicyRange* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("min", min);
  DEVLET_GET("max", max);
  DEVLET_GET("step", step);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, CapacityRequestPolicy* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("default", default_);
  DEVLET_GET("validValues", valid_values);
  DEVLET_GET("validRange", valid_range);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceCapacity* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("value", value);
  DEVLET_GET("requestPolicy", request_policy);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceAttribute* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("int", int_value);
  DEVLET_GET("bool", bool_value);
  DEVLET_GET("string", string_value);
  DEVLET_GET("version", version_value);
  DEVLET_GET("ints", int_values);
  DEVLET_GET("bools", bool_values);
  DEVLET_GET("strings", string_values);
  DEVLET_GET("versions", version_values);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeAllocatableMapping* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("capacityKey", capacity_key);
  DEVLET_GET("capacityMultiplier", capacity_multiplier);
  DEVLET_GET("deviceMultiplier", device_multiplier);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeAllocatableOverhead* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("perPod", per_pod);
  DEVLET_GET("perContainer", per_container);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NodeAllocatableResource* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("mapping", mapping);
  DEVLET_GET("overhead", overhead);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, Device* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("attributes", attributes);
  DEVLET_GET("capacity", capacity);
  DEVLET_GET("consumesCounters", consumes_counters);
  DEVLET_GET("nodeName", node_name);
  DEVLET_GET("nodeSelector", node_selector);
  DEVLET_GET("allNodes", all_nodes);
  DEVLET_GET("taints", taints);
  DEVLET_GET("bindsToNode", binds_to_node);
  DEVLET_GET("bindingConditions", binding_conditions);
  DEVLET_GET("bindingFailureConditions", binding_failure_conditions);
  DEVLET_GET("allowMultipleAllocations", allow_multiple_allocations);
  DEVLET_GET("nodeAllocatableResources", node_allocatable_resources);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceSliceSpec* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("driver", driver);
  DEVLET_GET("pool", pool);
  DEVLET_GET("nodeName", node_name);
  DEVLET_GET("nodeSelector", node_selector);
  DEVLET_GET("allNodes", all_nodes);
  DEVLET_GET("devices", devices);
  DEVLET_GET("perDeviceNodeSelection", per_device_node_selection);
  DEVLET_GET("sharedCounters", shared_counters);
  DEVLET_GET("partitionTypeAttribute", partition_type_attribute);
  DEVLET_GET("skipNodeOperations", skip_node_operations);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, CapacityRequirements* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("requests", requests);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceDerivedAttribute* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("expression", expression);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ExactDeviceRequest* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("deviceClassName", device_class_name);
  DEVLET_GET("selectors", selectors);
  DEVLET_GET("allocationMode", allocation_mode);
  DEVLET_GET("count", count);
  DEVLET_GET("adminAccess", admin_access);
  DEVLET_GET("tolerations", tolerations);
  DEVLET_GET("capacity", capacity);
  DEVLET_GET("derivedAttributes", derived_attributes);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceSubRequest* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("deviceClassName", device_class_name);
  DEVLET_GET("selectors", selectors);
  DEVLET_GET("allocationMode", allocation_mode);
  DEVLET_GET("count", count);
  DEVLET_GET("tolerations", tolerations);
  DEVLET_GET("capacity", capacity);
  DEVLET_GET("derivedAttributes", derived_attributes);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceRequest* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("name", name);
  DEVLET_GET("exactly", exactly);
  DEVLET_GET("firstAvailable", first_available);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceConstraint* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("requests", requests);
  DEVLET_GET("matchAttribute", match_attribute);
  DEVLET_GET("distinctAttribute", distinct_attribute);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceClaimConfiguration* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("requests", requests);
  DEVLET_RETURN_IF_ERROR(ReadDeviceConfiguration(f, out));
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceClaim* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("requests", requests);
  DEVLET_GET("constraints", constraints);
  DEVLET_GET("config", config);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceClaimSpec* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("devices", devices);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  DeviceRequestAllocationResult* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("request", request);
  DEVLET_GET("driver", driver);
  DEVLET_GET("pool", pool);
  DEVLET_GET("device", device);
  DEVLET_GET("adminAccess", admin_access);
  DEVLET_GET("tolerations", tolerations);
  DEVLET_GET("bindingConditions", binding_conditions);
  DEVLET_GET("bindingFailureConditions", binding_failure_conditions);
  DEVLET_GET("shareID", share_id);
  DEVLET_GET("consumedCapacity", consumed_capacity);
  DEVLET_GET("skipNodeOperations", skip_node_operations);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  DeviceAllocationConfiguration* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("source", source);
  DEVLET_GET("requests", requests);
  DEVLET_RETURN_IF_ERROR(ReadDeviceConfiguration(f, out));
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceAllocationResult* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("results", results);
  DEVLET_GET("config", config);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, AllocationResult* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("devices", devices);
  DEVLET_GET("nodeSelector", node_selector);
  DEVLET_GET("allocationTimestamp", allocation_timestamp);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  ResourceClaimConsumerReference* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("apiGroup", api_group);
  DEVLET_GET("resource", resource);
  DEVLET_GET("name", name);
  DEVLET_GET("uid", uid);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, NetworkDeviceData* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("interfaceName", interface_name);
  DEVLET_GET("ips", ips);
  DEVLET_GET("hardwareAddress", hardware_address);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, AllocatedDeviceStatus* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("driver", driver);
  DEVLET_GET("pool", pool);
  DEVLET_GET("device", device);
  DEVLET_GET("shareID", share_id);
  DEVLET_GET("conditions", conditions);
  DEVLET_GET("data", data);
  DEVLET_GET("networkData", network_data);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, ResourceClaimStatus* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("allocation", allocation);
  DEVLET_GET("reservedFor", reserved_for);
  DEVLET_GET("devices", devices);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx,
                  ResourceClaimTemplateSpec* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("metadata", metadata);
  DEVLET_GET("spec", spec);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceTaintSelector* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("driver", driver);
  DEVLET_GET("pool", pool);
  DEVLET_GET("device", device);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceTaintRuleSpec* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("deviceSelector", device_selector);
  DEVLET_GET("taint", taint);
  return f.Finish(nullptr);
}

absl::Status Read(const Json& j, const std::string& path, Ctx& ctx, DeviceTaintRuleStatus* out) {
  DEVLET_FIELDS(j, path, ctx);
  DEVLET_GET("conditions", conditions);
  return f.Finish(nullptr);
}

// ---- Top-level objects ----------------------------------------------------------------------

template <typename T>
absl::Status ReadTop(const Json& j, Ctx& ctx, T* out) {
  const std::string path;
  DEVLET_FIELDS(j, path, ctx);
  f.Skip("apiVersion");
  f.Skip("kind");
  DEVLET_GET("metadata", metadata);
  if constexpr (!std::is_same_v<T, Node>) {
    DEVLET_GET("spec", spec);
  }
  if constexpr (std::is_same_v<T, ResourceClaim> || std::is_same_v<T, DeviceTaintRule> ||
                std::is_same_v<T, Pod>) {
    DEVLET_GET("status", status);
  }
  return f.Finish(&out->extra);
}

#undef DEVLET_GET
#undef DEVLET_FIELDS

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
    absl::Status status = ReadTop(j, ctx_, &object);
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
