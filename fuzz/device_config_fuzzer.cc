// devlet's opaque device configuration (dra-kubelet/config.h): the `parameters` of a
// DeviceClass's or a ResourceClaim's `config[].opaque` entry for devlet's driver, as the kubelet
// plugin resolves them at prepare (ResolveDeviceConfig: class entries, then claim entries).
// The input is one parameters object, given as a class entry and as a claim entry.
//
// Checks: errors are for a person (InvalidArgument, short, no raw control bytes; the claim's
// bindDriver is PermissionDenied); a claim entry never yields a host-level setting (bindDriver);
// what decodes encodes and decodes again to the same configuration.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "devlet/dra_kubelet/claim.h"
#include "devlet/dra_kubelet/config.h"
#include "fuzz_util.h"

namespace {

using devlet::dra_kubelet::AllocationConfig;
using devlet::dra_kubelet::ConfigSource;
using devlet::dra_kubelet::DeviceConfig;

constexpr char kDriver[] = "gpu.devlet.io";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > (256u << 10)) {
    return -1;
  }
  const std::string input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<DeviceConfig> decoded = devlet::dra_kubelet::DecodeDeviceConfig(input);
  if (!decoded.ok()) {
    devlet::fuzz::CheckErrorMessage(decoded.status(), 8192);
  } else {
    const std::string encoded = devlet::dra_kubelet::EncodeDeviceConfig(*decoded);
    absl::StatusOr<DeviceConfig> again = devlet::dra_kubelet::DecodeDeviceConfig(encoded);
    if (!again.ok() || !(*again == *decoded)) {
      devlet::fuzz::Fail("encoded configuration does not decode to itself", encoded);
    }
  }

  // From a class, then from a claim (for one request, "gpus", and its subrequest "gpus/a").
  const AllocationConfig from_class{ConfigSource::kFromClass, {}, kDriver, input};
  const AllocationConfig from_claim{ConfigSource::kFromClaim, {"gpus"}, kDriver, input};
  for (const std::string_view request : {"gpus", "gpus/a"}) {
    absl::StatusOr<DeviceConfig> as_class =
        devlet::dra_kubelet::ResolveDeviceConfig({from_class}, kDriver, request);
    if (as_class.ok() != decoded.ok()) devlet::fuzz::Fail("class entry", input);
    absl::StatusOr<DeviceConfig> as_claim =
        devlet::dra_kubelet::ResolveDeviceConfig({from_class, from_claim}, kDriver, request);
    if (as_claim.ok()) {
      if (decoded.ok() && decoded->bind_driver) {
        devlet::fuzz::Fail("a claim's bindDriver was accepted", input);
      }
    } else if (absl::IsPermissionDenied(as_claim.status())) {
      if (!decoded.ok() || !decoded->bind_driver) {
        devlet::fuzz::Fail("PermissionDenied without a bindDriver", as_claim.status().ToString());
      }
    } else {
      devlet::fuzz::CheckErrorMessage(as_claim.status(), 8192 + 256);
    }
  }
  return 0;
}
