// CEL: parse, check, cost estimate and evaluation of DRA device selectors (allocator/cel), the
// expressions any user can put in a ResourceClaim or DeviceClass. Each input line is one
// expression ("expr: " prefixes are dropped, so the engine's test files serve as seeds); each
// compiled selector is evaluated against a device with attributes of every kind, within
// Kubernetes' cost limit, and also compiled as a derived attribute.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "devlet/cel/dra.h"

namespace {

using devlet::cel::dra::SimpleDevice;

const SimpleDevice& Device() {
  static const SimpleDevice* const device = [] {
    auto* d = new SimpleDevice("gpu.example.com");
    d->SetString("model", "a100");
    d->SetInt("memory", 80);
    d->SetInt("numaNode", -1);
    d->SetBool("mig", true);
    d->SetVersion("driverVersion", "1.2.3-rc.1+build");
    d->SetStrings("uuids", {"GPU-1", "GPU-2"});
    d->SetInts("cores", {0, 1, 2, 3});
    d->SetBools("flags", {true, false});
    d->SetVersions("versions", {"1.0.0", "2.0.0"});
    d->SetString("other.example.com/name", "x");
    (void)d->SetCapacity("memory", "80Gi");
    (void)d->SetCapacity("cores", "1500m");
    d->set_allow_multiple_allocations(true);
    return d;
  }();
  return *device;
}

void One(std::string_view expression) {
  if (expression.substr(0, 6) == "expr: ") {
    expression.remove_prefix(6);
  }
  if (expression.empty()) {
    return;
  }
  absl::StatusOr<devlet::cel::Program> selector = devlet::cel::dra::CompileSelector(expression);
  if (selector.ok()) {
    (void)selector->estimated_cost();
    uint64_t cost = 0;
    (void)devlet::cel::dra::Match(*selector, Device(), {}, &cost);
  }
  absl::StatusOr<devlet::cel::Program> derived =
      devlet::cel::dra::CompileDerivedAttribute(expression);
  if (derived.ok()) {
    (void)derived->estimated_cost();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) {
    return -1;  // Kubernetes caps a selector at 10 Ki characters
  }
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // Up to 64 lines per input, so that a whole test file is a useful seed but one input stays fast.
  for (int lines = 0; !input.empty() && lines < 64; ++lines) {
    const std::size_t end = input.find('\n');
    One(input.substr(0, end));
    if (end == std::string_view::npos) {
      break;
    }
    input.remove_prefix(end + 1);
  }
  return 0;
}
