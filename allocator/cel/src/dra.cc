// The DRA selector environment, SimpleDevice and Match.
#include "devlet/cel/dra.h"

#include <deque>
#include <optional>

#include "devlet/cel/quantity.h"
#include "devlet/common/status.h"
#include "program.h"

namespace devlet::cel::dra {

struct SimpleDevice::OwnedAttribute {
  Attribute attr;
  std::string text;
  std::optional<Semver> version;  // pre-parsed when the text is a valid version
  std::deque<Semver> element_versions;
  std::vector<Attribute> elements;
  std::deque<std::string> element_text;
  bool invalid_version = false;
};

SimpleDevice::SimpleDevice(std::string driver) : driver_(std::move(driver)) {}
SimpleDevice::~SimpleDevice() = default;

SimpleDevice::OwnedAttribute& SimpleDevice::Slot(std::string_view name) {
  std::string_view domain = driver_;
  std::string_view id = name;
  if (const size_t slash = name.find('/'); slash != std::string_view::npos) {
    domain = name.substr(0, slash);
    id = name.substr(slash + 1);
  }
  auto& ids = attributes_[std::string(domain)];
  auto& slot = ids[std::string(id)];
  if (slot != nullptr && slot->invalid_version) --invalid_versions_;
  slot = std::make_unique<OwnedAttribute>();
  return *slot;
}

void SimpleDevice::SetInt(std::string_view name, int64_t value) {
  OwnedAttribute& a = Slot(name);
  a.attr.kind = Attribute::Kind::kInt;
  a.attr.int_value = value;
}
void SimpleDevice::SetBool(std::string_view name, bool value) {
  OwnedAttribute& a = Slot(name);
  a.attr.kind = Attribute::Kind::kBool;
  a.attr.bool_value = value;
}
void SimpleDevice::SetString(std::string_view name, std::string_view value) {
  OwnedAttribute& a = Slot(name);
  a.text = std::string(value);
  a.attr.kind = Attribute::Kind::kString;
  a.attr.string_value = a.text;
}
void SimpleDevice::SetVersion(std::string_view name, std::string_view value) {
  OwnedAttribute& a = Slot(name);
  a.text = std::string(value);
  a.attr.kind = Attribute::Kind::kVersion;
  a.attr.string_value = a.text;
  // Parse once here; an invalid version stays text and fails when a selector reads it.
  if (absl::StatusOr<Semver> v = Semver::Parse(value); v.ok()) {
    a.version = *std::move(v);
    a.attr.version = &*a.version;
  } else {
    a.invalid_version = true;
    ++invalid_versions_;
  }
}
void SimpleDevice::SetInts(std::string_view name, const std::vector<int64_t>& values) {
  OwnedAttribute& a = Slot(name);
  for (int64_t v : values) {
    Attribute e;
    e.kind = Attribute::Kind::kInt;
    e.int_value = v;
    a.elements.push_back(e);
  }
  a.attr.kind = Attribute::Kind::kList;
  a.attr.elements = a.elements;
}
void SimpleDevice::SetBools(std::string_view name, const std::vector<bool>& values) {
  OwnedAttribute& a = Slot(name);
  for (bool v : values) {
    Attribute e;
    e.kind = Attribute::Kind::kBool;
    e.bool_value = v;
    a.elements.push_back(e);
  }
  a.attr.kind = Attribute::Kind::kList;
  a.attr.elements = a.elements;
}
void SimpleDevice::SetStrings(std::string_view name, const std::vector<std::string>& values) {
  OwnedAttribute& a = Slot(name);
  for (const std::string& v : values) {
    a.element_text.push_back(v);
    Attribute e;
    e.kind = Attribute::Kind::kString;
    e.string_value = a.element_text.back();
    a.elements.push_back(e);
  }
  a.attr.kind = Attribute::Kind::kList;
  a.attr.elements = a.elements;
}
void SimpleDevice::SetVersions(std::string_view name, const std::vector<std::string>& values) {
  OwnedAttribute& a = Slot(name);
  for (const std::string& v : values) {
    a.element_text.push_back(v);
    Attribute e;
    e.kind = Attribute::Kind::kVersion;
    e.string_value = a.element_text.back();
    if (absl::StatusOr<Semver> parsed = Semver::Parse(v); parsed.ok()) {
      a.element_versions.push_back(*std::move(parsed));
      e.version = &a.element_versions.back();
    } else if (!a.invalid_version) {
      a.invalid_version = true;
      ++invalid_versions_;
    }
    a.elements.push_back(e);
  }
  a.attr.kind = Attribute::Kind::kList;
  a.attr.elements = a.elements;
}

absl::Status SimpleDevice::SetCapacity(std::string_view name, std::string_view quantity) {
  absl::StatusOr<Quantity> q = Quantity::Parse(quantity);
  if (!q.ok()) return q.status();
  SetCapacity(name, *q);
  return absl::OkStatus();
}

void SimpleDevice::SetCapacity(std::string_view name, const Quantity& quantity) {
  std::string_view domain = driver_;
  std::string_view id = name;
  if (const size_t slash = name.find('/'); slash != std::string_view::npos) {
    domain = name.substr(0, slash);
    id = name.substr(slash + 1);
  }
  capacity_[std::string(domain)][std::string(id)] = internal::CopyQuantity(quantity);
}

const Attribute* SimpleDevice::FindAttribute(std::string_view domain, std::string_view id) const {
  auto d = attributes_.find(domain);
  if (d == attributes_.end()) return nullptr;
  auto a = d->second.find(id);
  return a == d->second.end() ? nullptr : &a->second->attr;
}

const Quantity* SimpleDevice::FindCapacity(std::string_view domain, std::string_view id) const {
  auto d = capacity_.find(domain);
  if (d == capacity_.end()) return nullptr;
  auto c = d->second.find(id);
  return c == d->second.end() ? nullptr : c->second.get();
}

void SimpleDevice::ForEachAttributeDomain(absl::FunctionRef<void(std::string_view)> fn) const {
  for (const auto& [d, ids] : attributes_) fn(d);
}
void SimpleDevice::ForEachAttribute(std::string_view domain,
                                    absl::FunctionRef<void(std::string_view, const Attribute&)> fn) const {
  auto d = attributes_.find(domain);
  if (d == attributes_.end()) return;
  for (const auto& [id, a] : d->second) fn(id, a->attr);
}
void SimpleDevice::ForEachCapacityDomain(absl::FunctionRef<void(std::string_view)> fn) const {
  for (const auto& [d, ids] : capacity_) fn(d);
}
void SimpleDevice::ForEachCapacity(std::string_view domain,
                                   absl::FunctionRef<void(std::string_view, const Quantity&)> fn) const {
  auto d = capacity_.find(domain);
  if (d == capacity_.end()) return;
  for (const auto& [id, q] : d->second) {
    if (q) fn(id, *q);
  }
}

namespace {

// The environment Kubernetes compiles every DRA expression in: selectors and derived attributes
// differ only in what they may return, which the callers add.
EnvironmentOptions DraEnvironment(const SelectorOptions& options) {
  EnvironmentOptions env;
  env.libraries = kAllLibraries;
  if (!options.list_type_attributes) env.libraries &= ~static_cast<uint32_t>(kIncludesLibrary);
  env.homogeneous_aggregate_literals = true;
  env.validate_regex_literals = true;
  env.variables.emplace_back("device", Type::DraDevice());
  env.dra_allow_multiple_allocations = options.consumable_capacity;
  env.constant_conversion_errors_at_compile_time = true;
  env.strings_v2_format = true;
  env.nan_ordering_errors = true;
  env.go_map_keys = true;
  env.go_durations = true;
  env.kubernetes_messages = true;
  return env;
}

}  // namespace

absl::StatusOr<Program> CompileSelector(std::string_view expression, const SelectorOptions& options) {
  EnvironmentOptions env = DraEnvironment(options);
  env.result_types = {Type::Bool(), Type::Dyn()};
  env.require_bool_result = true;
  return Environment(std::move(env)).Compile(expression);
}

namespace {

// The error of one version text, or OK (pre-parsed versions are valid).
absl::Status VersionError(std::string_view name, const Attribute& a) {
  if (a.kind != Attribute::Kind::kVersion || a.version != nullptr) return absl::OkStatus();
  absl::StatusOr<Semver> v = Semver::Parse(a.string_value);
  if (v.ok()) return absl::OkStatus();
  return devlet::InvalidArgument("attribute " + std::string(name) +
                                 ": parse semantic version: " + devlet::Message(v.status()));
}

absl::Status AttributeError(std::string_view name, const Attribute& a) {
  if (a.kind != Attribute::Kind::kList) return VersionError(name, a);
  for (const Attribute& e : a.elements) DEVLET_RETURN_IF_ERROR(VersionError(name, e));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAttributeConversion(const DeviceView& device) {
  absl::Status status;
  const std::string_view driver = device.driver();
  device.ForEachAttributeDomain([&](std::string_view domain) {
    if (!status.ok()) return;
    device.ForEachAttribute(domain, [&](std::string_view id, const Attribute& a) {
      if (!status.ok()) return;
      if (a.kind == Attribute::Kind::kVersion || a.kind == Attribute::Kind::kList) {
        status = AttributeError(domain == driver ? std::string(id)
                                                 : std::string(domain) + "/" + std::string(id),
                                a);
      }
    });
  });
  return status;
}

absl::Status DeviceView::AttributeConversionError() const { return CheckAttributeConversion(*this); }

absl::Status SimpleDevice::AttributeConversionError() const {
  if (invalid_versions_ == 0) return absl::OkStatus();
  for (const auto& [domain, ids] : attributes_) {
    for (const auto& [id, owned] : ids) {
      // The name as it was set: unqualified for the driver's domain.
      DEVLET_RETURN_IF_ERROR(AttributeError(domain == driver_ ? id : domain + "/" + id, owned->attr));
    }
  }
  return absl::OkStatus();
}

namespace {

// RunOnDevice evaluates a DRA program against `device` (selectors and derived attributes alike):
// attribute conversion errors first, as Kubernetes converts the device before it evaluates, then
// the run, its cost, and an evaluation error as a status whose code says why it stopped. A value
// goes to `convert` while the scratch arena that holds it is alive; what it returns must not
// point into the arena.
template <typename T, typename Convert>
absl::StatusOr<T> RunOnDevice(const Program& program, const DeviceView& device,
                              const MatchOptions& options, uint64_t* cost, Convert convert) {
  if (absl::Status conversion = device.AttributeConversionError(); !conversion.ok()) {
    if (cost != nullptr) *cost = 0;
    return conversion;
  }
  internal::ScratchArena scratch;
  internal::Ctx ctx(scratch.arena());
  ctx.device = &device;
  ctx.limit = options.cost_limit ? options.cost_limit : UINT64_MAX;
  ctx.deadline = options.deadline;
  ctx.cancelled = options.cancelled;
  Activation empty;
  ctx.activation = &empty;
  const internal::Val v = program.impl().Run(ctx);
  if (cost != nullptr) {
    *cost = ctx.abort == EvalResult::Abort::kCostLimit || ctx.abort == EvalResult::Abort::kInternal
                ? ctx.cost_at_abort
                : ctx.cost;
  }
  if (v.kind == internal::VK::kError) {
    const std::string_view msg = v.str();
    switch (ctx.abort) {
      case EvalResult::Abort::kDeadline: return devlet::DeadlineExceeded(msg);
      case EvalResult::Abort::kCancelled: return devlet::Cancelled(msg);
      case EvalResult::Abort::kCostLimit: return devlet::ResourceExhausted(msg);
      case EvalResult::Abort::kNone:
      case EvalResult::Abort::kInternal: return devlet::InvalidArgument(msg);
    }
  }
  return convert(v);
}

}  // namespace

absl::StatusOr<bool> Match(const Program& program, const DeviceView& device, const MatchOptions& options,
                           uint64_t* cost) {
  return RunOnDevice<bool>(program, device, options, cost,
                           [](const internal::Val& v) -> absl::StatusOr<bool> {
                             if (v.kind == internal::VK::kBool) return v.b;
                             return devlet::InvalidArgument(
                                 "CEL result of type " + std::string(internal::TypeNameOf(v)) +
                                 " could not be converted to bool");
                           });
}

// ---- Derived attributes ----------------------------------------------------------------------

namespace {

// Kubernetes accepts these as a derived attribute or as the element type of a list of them
// (cel.AnyType has no counterpart here; our checker says dyn).
bool DerivedScalarType(const Type& t) {
  switch (t.kind()) {
    case Type::Kind::kBool:
    case Type::Kind::kInt:
    case Type::Kind::kString:
    case Type::Kind::kDyn:
    case Type::Kind::kSemver: return true;
    default: return false;
  }
}

// Lists are allowed with DRAListTypeAttributes and always in the stored-expressions environment
// (the scheduler's), so that turning the gate off does not break stored claims.
absl::Status CheckDerivedType(const Type& t, bool allow_lists) {
  if (DerivedScalarType(t)) return absl::OkStatus();
  if (allow_lists && t.kind() == Type::Kind::kList && DerivedScalarType(t.param0())) {
    return absl::OkStatus();
  }
  return devlet::InvalidArgument(
      std::string("must evaluate to a primitive scalar (string, integer, boolean, semver)") +
      (allow_lists ? " or a list of these scalars" : "") + ", not " + t.DebugString());
}

constexpr std::string_view kInstantiationPrefix = "program instantiation failed: ";

// The Go type name (fmt's %T) of the value cel-go's ref.Val.Value() returns, for the texts of
// Kubernetes' valToDeviceAttribute.
std::string GoTypeName(const internal::Val& v) {
  using internal::VK;
  switch (v.kind) {
    case VK::kNull: return "structpb.NullValue";
    case VK::kBool: return "bool";
    case VK::kInt: return "int64";
    case VK::kUint: return "uint64";
    case VK::kDouble: return "float64";
    case VK::kString: return "string";
    case VK::kBytes: return "[]uint8";
    case VK::kList: return "[]ref.Val";
    case VK::kMap: return "map[ref.Val]ref.Val";
    case VK::kOptional: return v.opt == nullptr ? "<nil>" : GoTypeName(*v.opt);
    case VK::kType: return "*types.Type";
    case VK::kQuantity: return "*resource.Quantity";
    case VK::kSemver: return "semver.Version";
    case VK::kTimestamp: return "time.Time";
    case VK::kDuration: return "time.Duration";
    case VK::kIP: return "netip.Addr";
    case VK::kCIDR: return "netip.Prefix";
    case VK::kFormat: return "cel.Format";
    case VK::kURL: return "*url.URL";
    case VK::kDevice:
    case VK::kDeviceMap:
    case VK::kDomainMap: return "map[string]interface {}";
    case VK::kError: break;
  }
  return "error";
}

// The scalar a value stands for, as Kubernetes' switch on Value() sees it (an optional's Value()
// is its content), or nullopt.
std::optional<DerivedValue> DerivedScalar(const internal::Val& in) {
  using internal::VK;
  const internal::Val* v = &in;
  while (v->kind == VK::kOptional && v->opt != nullptr) v = v->opt;
  DerivedValue out;
  switch (v->kind) {
    case VK::kBool:
      out.kind = Attribute::Kind::kBool;
      out.bool_value = v->b;
      return out;
    case VK::kInt:
      out.kind = Attribute::Kind::kInt;
      out.int_value = v->i;
      return out;
    case VK::kString:
      out.kind = Attribute::Kind::kString;
      out.string_value = std::string(v->str());
      return out;
    case VK::kSemver:
      out.kind = Attribute::Kind::kVersion;
      out.string_value = v->v->ToString();
      return out;
    default: return std::nullopt;
  }
}

std::string_view KindGoName(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::kBool: return "bool";
    case Attribute::Kind::kInt: return "int";
    case Attribute::Kind::kString: return "string";
    case Attribute::Kind::kVersion: return "semver";
    case Attribute::Kind::kList: break;
  }
  return "list";
}

absl::StatusOr<DerivedAttribute> ToDerivedAttribute(const internal::Val& v) {
  DerivedAttribute out;
  if (std::optional<DerivedValue> scalar = DerivedScalar(v)) {
    out.values.push_back(std::move(*scalar));
    return out;
  }
  if (v.kind != internal::VK::kList) {
    return devlet::InvalidArgument("unsupported CEL return type: " + GoTypeName(v));
  }
  out.is_list = true;
  if (v.n == 0) return out;  // Kubernetes: an empty string list
  const internal::Val* data = v.list_data();
  // The first element decides the list's type (Kubernetes type-switches each element's Value(),
  // which for an optional is its content: DerivedScalar unwraps optionals the same way).
  std::optional<DerivedValue> first = DerivedScalar(data[0]);
  if (!first) {
    return devlet::InvalidArgument("unsupported list element type: " + GoTypeName(data[0]));
  }
  out.values.reserve(v.n);
  for (uint32_t i = 0; i < v.n; ++i) {
    std::optional<DerivedValue> e = DerivedScalar(data[i]);
    if (!e || e->kind != first->kind) {
      return devlet::InvalidArgument("expected list element at index " + std::to_string(i) +
                                     " to be " + std::string(KindGoName(first->kind)) + ", got " +
                                     GoTypeName(data[i]));
    }
    out.values.push_back(std::move(*e));
  }
  return out;
}

}  // namespace

absl::StatusOr<Program> CompileDerivedAttribute(std::string_view expression,
                                                const SelectorOptions& options) {
  EnvironmentOptions env = DraEnvironment(options);
  absl::StatusOr<Program> program = Environment(env).Compile(expression);
  if (program.ok()) {
    DEVLET_RETURN_IF_ERROR(CheckDerivedType(program->result_type(), options.list_type_attributes));
    return program;
  }
  // Kubernetes checks the result type before it instantiates the program, so a wrong type wins
  // over a failing constant conversion: find the type without planning those conversions.
  if (devlet::Message(program.status()).starts_with(kInstantiationPrefix)) {
    env.constant_conversion_errors_at_compile_time = false;
    absl::StatusOr<Program> typed = Environment(env).Compile(expression);
    if (typed.ok()) {
      DEVLET_RETURN_IF_ERROR(CheckDerivedType(typed->result_type(), options.list_type_attributes));
    }
  }
  return program.status();
}

absl::StatusOr<DerivedAttribute> EvaluateDerivedAttribute(const Program& program,
                                                          const DeviceView& device,
                                                          const MatchOptions& options,
                                                          uint64_t* cost) {
  // ToDerivedAttribute copies out of the scratch arena before it goes.
  return RunOnDevice<DerivedAttribute>(program, device, options, cost, ToDerivedAttribute);
}

}  // namespace devlet::cel::dra
