// The DRA selector environment, SimpleDevice and Match.
#include "devlet/cel/dra.h"

#include <deque>
#include <optional>

#include "devlet/common/status.h"
#include "program.h"

#if __has_include("devlet/cel/quantity.h")
#include "devlet/cel/quantity.h"
#define DEVLET_CEL_DRA_HAVE_QUANTITY 1
#else
#define DEVLET_CEL_DRA_HAVE_QUANTITY 0
#endif

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
#if DEVLET_CEL_DRA_HAVE_QUANTITY
  absl::StatusOr<Quantity> q = Quantity::Parse(quantity);
  if (!q.ok()) return q.status();
  SetCapacity(name, *q);
  return absl::OkStatus();
#else
  (void)name;
  (void)quantity;
  return devlet::Unimplemented("quantity library unavailable");
#endif
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

absl::StatusOr<Program> CompileSelector(std::string_view expression, const SelectorOptions& options) {
  EnvironmentOptions env;
  env.libraries = kAllLibraries;
  if (!options.list_type_attributes) env.libraries &= ~static_cast<uint32_t>(kIncludesLibrary);
  env.homogeneous_aggregate_literals = true;
  env.validate_regex_literals = true;
  env.variables.emplace_back("device", Type::DraDevice());
  env.result_types = {Type::Bool(), Type::Dyn()};
  env.dra_allow_multiple_allocations = options.consumable_capacity;
  env.require_bool_result = true;
  env.constant_conversion_errors_at_compile_time = true;
  env.strings_v2_format = true;
  env.nan_ordering_errors = true;
  env.kubernetes_messages = true;
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

absl::StatusOr<bool> Match(const Program& program, const DeviceView& device, const MatchOptions& options,
                           uint64_t* cost) {
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
  if (v.kind == internal::VK::kBool) return v.b;
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
  return devlet::InvalidArgument("CEL result of type " + std::string(internal::TypeNameOf(v)) +
                                 " could not be converted to bool");
}

}  // namespace devlet::cel::dra
