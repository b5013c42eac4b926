// File: devlet/cel/dra.h
//
// The Kubernetes DRA device-selector environment (k8s.io/dynamic-resource-allocation/cel):
// a `device` variable with `driver`, `attributes`, `capacity` and `allowMultipleAllocations`,
// all Kubernetes CEL libraries, HomogeneousAggregateLiterals, a bool result and a runtime cost
// limit of 1,000,000.
//
//   absl::StatusOr<Program> selector = dra::CompileSelector(
//       R"(device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100")");
//   dra::SimpleDevice gpu("gpu.example.com");
//   gpu.SetString("model", "a100");                 // unqualified: filed under the driver's domain
//   absl::StatusOr<bool> match = dra::Match(*selector, gpu);
//
// DeviceView is an interface so that the allocator can evaluate selectors over its own device
// representation without building maps per device; SimpleDevice is an owning implementation.
//
// Lookup semantics (research §3.2): `device.attributes["unknown.domain"]` is an empty map (not an
// error); a missing name inside a domain is the runtime error "no such key: <name>"; unqualified
// attribute and capacity names belong to the driver's domain.
//
// As in Kubernetes, which converts every attribute of a device before evaluating, one invalid
// `version` attribute fails every selector on that device ("attribute cuda: parse semantic
// version: ..."), also selectors that never read it (DeviceView::AttributeConversionError).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/cel/cel.h"
#include "devlet/cel/quantity.h"
#include "devlet/cel/semver.h"

namespace devlet::cel::dra {

// The DRA cost limit (CELSelectorExpressionMaxCost).
inline constexpr uint64_t kSelectorMaxCost = 1'000'000;

// Attribute is one typed device attribute (resource.k8s.io DeviceAttribute), viewed, not owned.
struct Attribute {
  enum class Kind : unsigned char { kInt, kBool, kString, kVersion, kList };
  Kind kind = Kind::kInt;
  int64_t int_value = 0;
  bool bool_value = false;
  // kString: the string; kVersion: the semantic version text (parsed strictly when used).
  std::string_view string_value;
  // kVersion: an optional pre-parsed version (saves parsing on every evaluation).
  const Semver* version = nullptr;
  // kList (KEP-5491 list-typed attributes): the elements, each a scalar attribute.
  std::span<const Attribute> elements;
};

// DeviceView is what a selector sees of one device. Implementations must be safe to call from the
// thread that evaluates and must not change during an evaluation.
class DeviceView {
 public:
  virtual ~DeviceView() = default;

  virtual std::string_view driver() const = 0;
  virtual bool allow_multiple_allocations() const { return false; }

  // The error Kubernetes reports for every selector on this device when one of its attributes
  // cannot be converted for CEL (an invalid semantic version, also inside a version list):
  // InvalidArgument "attribute <name>: parse semantic version: <why>", else OK. Match calls it
  // before evaluating. The default scans the attributes with CheckAttributeConversion, parsing
  // the versions that are not pre-parsed; views evaluated often should compute it once.
  virtual absl::Status AttributeConversionError() const;

  // The attribute `id` of `domain` (unqualified names are in the driver's domain), or nullptr.
  virtual const Attribute* FindAttribute(std::string_view domain, std::string_view id) const = 0;
  // The capacity `id` of `domain`, or nullptr.
  virtual const Quantity* FindCapacity(std::string_view domain, std::string_view id) const = 0;

  // Enumeration, used only by expressions that iterate or size these maps.
  virtual void ForEachAttributeDomain(absl::FunctionRef<void(std::string_view)> fn) const = 0;
  virtual void ForEachAttribute(std::string_view domain,
                                absl::FunctionRef<void(std::string_view, const Attribute&)> fn) const = 0;
  virtual void ForEachCapacityDomain(absl::FunctionRef<void(std::string_view)> fn) const = 0;
  virtual void ForEachCapacity(std::string_view domain,
                               absl::FunctionRef<void(std::string_view, const Quantity&)> fn) const = 0;
};

// SimpleDevice is an owning DeviceView, convenient for tests and tools. Names may be qualified
// ("domain/id") or not (the driver's domain).
class SimpleDevice final : public DeviceView {
 public:
  explicit SimpleDevice(std::string driver);
  ~SimpleDevice() override;
  SimpleDevice(const SimpleDevice&) = delete;
  SimpleDevice& operator=(const SimpleDevice&) = delete;

  void SetInt(std::string_view name, int64_t value);
  void SetBool(std::string_view name, bool value);
  void SetString(std::string_view name, std::string_view value);
  void SetVersion(std::string_view name, std::string_view value);
  void SetInts(std::string_view name, const std::vector<int64_t>& values);
  void SetBools(std::string_view name, const std::vector<bool>& values);
  void SetStrings(std::string_view name, const std::vector<std::string>& values);
  void SetVersions(std::string_view name, const std::vector<std::string>& values);
  // SetCapacity parses `quantity` with Quantity::Parse.
  absl::Status SetCapacity(std::string_view name, std::string_view quantity);
  void SetCapacity(std::string_view name, const Quantity& quantity);
  void set_allow_multiple_allocations(bool value) { allow_multiple_allocations_ = value; }
  // Versions are parsed when set, so this is free unless one is invalid (then the first invalid
  // one in name order is reported).
  absl::Status AttributeConversionError() const override;

  std::string_view driver() const override { return driver_; }
  bool allow_multiple_allocations() const override { return allow_multiple_allocations_; }
  const Attribute* FindAttribute(std::string_view domain, std::string_view id) const override;
  const Quantity* FindCapacity(std::string_view domain, std::string_view id) const override;
  void ForEachAttributeDomain(absl::FunctionRef<void(std::string_view)> fn) const override;
  void ForEachAttribute(std::string_view domain,
                        absl::FunctionRef<void(std::string_view, const Attribute&)> fn) const override;
  void ForEachCapacityDomain(absl::FunctionRef<void(std::string_view)> fn) const override;
  void ForEachCapacity(std::string_view domain,
                       absl::FunctionRef<void(std::string_view, const Quantity&)> fn) const override;

 private:
  struct OwnedAttribute;
  OwnedAttribute& Slot(std::string_view name);
  std::string driver_;
  bool allow_multiple_allocations_ = false;
  int invalid_versions_ = 0;  // attributes holding a version that does not parse
  std::map<std::string, std::map<std::string, std::unique_ptr<OwnedAttribute>, std::less<>>,
           std::less<>>
      attributes_;
  std::map<std::string, std::map<std::string, std::shared_ptr<const Quantity>, std::less<>>,
           std::less<>>
      capacity_;
};

// CheckAttributeConversion scans `device`'s attributes as Kubernetes converts them before an
// evaluation: the first version (or version list element) that does not parse strictly makes
// InvalidArgument "attribute <name>: parse semantic version: <why>", where <name> is the id for
// the driver's own domain and "domain/id" otherwise. Versions with a pre-parsed Semver are valid.
absl::Status CheckAttributeConversion(const DeviceView& device);

// SelectorOptions chooses the DRA environment variant.
struct SelectorOptions {
  // StoredExpressions declares everything; NewExpressions follows the gates below.
  bool consumable_capacity = true;     // `device.allowMultipleAllocations` is declared
  bool list_type_attributes = true;    // `includes` is declared (DRAListTypeAttributes)
};

// CompileSelector compiles a DRA selector. Errors (InvalidArgument) read like Kubernetes':
// "compilation failed: ERROR: <input>:1:2: Syntax error: ...\n | <source line>\n | .^",
// "must evaluate to bool or the unknown type, not int" or
// "program instantiation failed: integer overflow".
absl::StatusOr<Program> CompileSelector(std::string_view expression,
                                        const SelectorOptions& options = {});

// MatchOptions bounds one evaluation.
struct MatchOptions {
  uint64_t cost_limit = kSelectorMaxCost;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* cancelled = nullptr;
};

// Match evaluates a compiled selector against a device. The device's AttributeConversionError,
// if any, is the result for every selector (with runtime cost 0). A runtime error ("no such key: model",
// "operation cancelled: actual cost limit exceeded", "CEL result of type list could not be
// converted to bool") is an InvalidArgument Status (DeadlineExceeded/Cancelled for interruption);
// for Kubernetes any error aborts allocation. `cost`, if given, receives the runtime cost.
absl::StatusOr<bool> Match(const Program& program, const DeviceView& device,
                           const MatchOptions& options = {}, uint64_t* cost = nullptr);

// ---- Derived attributes (KEP-6080, DRADerivedAttributes) -----------------------------------

// CompileDerivedAttribute compiles the expression of a claim's `derivedAttributes[]` entry in the
// selector environment (same `device` variable, libraries and literal rules), but instead of a
// bool it must produce a value that a matchAttribute/distinctAttribute constraint can compare:
// bool, int, string, semver, dyn, or a list of one of these (lists only with
// options.list_type_attributes: the default, as in the scheduler's stored-expressions
// environment; off is the API server's NewExpressions check with DRAListTypeAttributes off, whose
// text then lacks " or a list of these scalars"). Errors (InvalidArgument) read like
// Kubernetes' ("compilation failed: ERROR: ...", "must evaluate to a primitive scalar (string,
// integer, boolean, semver) or a list of these scalars, not double", "program instantiation
// failed: ..."), in Kubernetes' order: parse/check, then the result type, then instantiation.
absl::StatusOr<Program> CompileDerivedAttribute(std::string_view expression,
                                                const SelectorOptions& options = {});

// DerivedValue is one scalar of an evaluated derived attribute.
struct DerivedValue {
  Attribute::Kind kind = Attribute::Kind::kInt;  // kInt, kBool, kString or kVersion
  int64_t int_value = 0;
  bool bool_value = false;
  std::string string_value;  // kString; kVersion: the version in its canonical spelling
  friend bool operator==(const DerivedValue&, const DerivedValue&) = default;
};

// DerivedAttribute is an evaluated derived attribute, owned: a scalar (one value) or a list. An
// empty list is a list of strings with no values, as Kubernetes represents it.
struct DerivedAttribute {
  bool is_list = false;
  std::vector<DerivedValue> values;
};

// EvaluateDerivedAttribute evaluates a program from CompileDerivedAttribute against a device.
// Like Match, the device's AttributeConversionError comes first. A runtime error is returned as
// Match returns it; a result Kubernetes cannot store as an attribute is InvalidArgument with its
// text ("unsupported CEL return type: float64", "unsupported list element type: float64",
// "expected list element at index 1 to be int, got string").
absl::StatusOr<DerivedAttribute> EvaluateDerivedAttribute(const Program& program,
                                                          const DeviceView& device,
                                                          const MatchOptions& options = {},
                                                          uint64_t* cost = nullptr);

}  // namespace devlet::cel::dra
