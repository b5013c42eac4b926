// Device profiles (devices/profile.h): the administrator's YAML that devlet-node reads at start
// (`--profiles`), parsed by ParseProfileConfig and, when it parses, applied by BuildDeviceSet to
// the inventory of the project's 2-socket, 8-GPU, 2-NIC test server (devices/tests/data, hwloc
// XML, discovered once). BuildDeviceSet promises a set that passes ValidateDeviceSet, the checks
// a ResourceSlice would otherwise fail late at the API server: a set it returns that does not is
// a failure. Errors on bad input are InvalidArgument, for a person (short, no raw control bytes).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "devlet/devices/dra_device.h"
#include "devlet/devices/inventory.h"
#include "devlet/devices/profile.h"
#include "fuzz_util.h"

namespace {

const devlet::devices::Inventory& TestInventory() {
  static const auto* inventory = [] {
    auto discoverer = devlet::devices::NewDiscoverer(
        {.topology_xml = std::string(DEVLET_DEVICES_TESTDATA) + "/dgx-2s-8gpu-2nic.xml",
         .use_sysfs = false});
    absl::StatusOr<devlet::devices::Inventory> found = discoverer->Discover();
    if (!found.ok()) devlet::fuzz::Fail("test inventory", found.status().ToString());
    return new devlet::devices::Inventory(*std::move(found));
  }();
  return *inventory;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size > (256u << 10)) {
    return -1;
  }
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<devlet::devices::ProfileConfig> config = devlet::devices::ParseProfileConfig(yaml);
  if (!config.ok()) {
    devlet::fuzz::CheckErrorMessage(config.status(), 8192);
    return 0;
  }
  absl::StatusOr<devlet::devices::DeviceSet> set =
      devlet::devices::BuildDeviceSet(TestInventory(), *config);
  if (!set.ok()) {
    // A device the profile cannot describe (a cdiDevices placeholder it lacks, a NIC without a
    // link speed for consumable sharing) is FailedPrecondition; the message rules are the same.
    const absl::Status status = absl::IsFailedPrecondition(set.status())
                                    ? absl::InvalidArgumentError(set.status().message())
                                    : set.status();
    devlet::fuzz::CheckErrorMessage(status, 8192);
    return 0;
  }
  if (absl::Status valid = devlet::devices::ValidateDeviceSet(*set); !valid.ok()) {
    devlet::fuzz::Fail("BuildDeviceSet returned a set ValidateDeviceSet refuses", valid.ToString());
  }
  // A rebuild with the set as `previous` (a rescan of an unchanged machine) gives the same set.
  absl::StatusOr<devlet::devices::DeviceSet> again =
      devlet::devices::BuildDeviceSet(TestInventory(), *config, &*set);
  if (!again.ok() || !(*again == *set)) {
    devlet::fuzz::Fail("a rescan of the same inventory changed the device set",
                       again.ok() ? "" : again.status().ToString());
  }
  return 0;
}
