// Vendor CDI specs (issue 13 §2 gap 6): devices named from an NVIDIA-toolkit-style spec resolve
// to the vendor's device nodes, mounts and hooks; bad specs and unknown devices give errors that
// name the file or the device.
#include "devlet/cdi/vendor.h"

#include <algorithm>
#include <string>

#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::cdi {
namespace {

using ::devlet::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kGood = "tests/testdata/vendor/good";
const std::string kBroken = "tests/testdata/vendor/broken";

std::vector<std::string> Paths(const std::vector<DeviceNode>& nodes) {
  std::vector<std::string> out;
  for (const DeviceNode& n : nodes) out.push_back(n.path);
  return out;
}

TEST(VendorDevicesTest, UuidNameBringsDeviceNodesLibrariesAndHooks) {
  ASSERT_OK_AND_ASSIGN(
      ContainerEdits edits,
      ResolveVendorDevices({"/nonexistent/etc-cdi", kGood},
                           {"nvidia.com/gpu=GPU-8c1e4a9e-7a3b-4f2d-9c1e-0d5b6a7c8e02"}));
  // The spec's edits once, then the device's: the control nodes and GPU 1's nodes, not GPU 0's.
  EXPECT_THAT(Paths(edits.device_nodes),
              ::testing::ElementsAre("/dev/nvidia-modeset", "/dev/nvidia-uvm",
                                     "/dev/nvidia-uvm-tools", "/dev/nvidiactl", "/dev/nvidia1",
                                     "/dev/dri/card2", "/dev/dri/renderD129"));
  ASSERT_EQ(edits.hooks.size(), 2u);
  EXPECT_EQ(edits.hooks[1].args[1], "update-ldcache");
  ASSERT_EQ(edits.mounts.size(), 3u);
  EXPECT_EQ(edits.mounts[0].host_path, "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15");
  EXPECT_THAT(edits.env, ::testing::ElementsAre("NVIDIA_VISIBLE_DEVICES=void"));
}

TEST(VendorDevicesTest, IndexNamesOfTwoGpusMergeInOrder) {
  ASSERT_OK_AND_ASSIGN(ContainerEdits edits,
                       ResolveVendorDevices({kGood}, {"nvidia.com/gpu=0", "nvidia.com/gpu=1"}));
  std::vector<std::string> paths = Paths(edits.device_nodes);
  EXPECT_EQ(std::count(paths.begin(), paths.end(), "/dev/nvidiactl"), 1);  // spec edits once
  EXPECT_NE(std::find(paths.begin(), paths.end(), "/dev/nvidia0"), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "/dev/nvidia1"), paths.end());
  EXPECT_EQ(edits.hooks.size(), 3u);  // GPU 0's symlink hook + the spec's two
}

TEST(VendorDevicesTest, UnknownDeviceNamesTheDeviceAndWhatExists) {
  EXPECT_THAT(ResolveVendorDevices({kGood}, {"nvidia.com/gpu=7"}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("vendor CDI device \"nvidia.com/gpu=7\" is defined by no "
                                       "spec in tests/testdata/vendor/good"),
                             HasSubstr("nvidia.com/gpu defines: 0, 1, GPU-8c1e4a9e"))));
  EXPECT_THAT(ResolveVendorDevices({kGood}, {"amd.com/gpu=0"}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("(no spec defines kind amd.com/gpu)")));
}

TEST(VendorDevicesTest, SpecThatDoesNotParseIsNamedWithWhy) {
  EXPECT_THAT(ResolveVendorDevices({kBroken}, {"nvidia.com/gpu=0"}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("vendor CDI device \"nvidia.com/gpu=0\" is defined by no "
                                       "spec"),
                             HasSubstr("spec files skipped: CDI spec "
                                       "\"tests/testdata/vendor/broken/nvidia.yaml\""),
                             HasSubstr("devicez"))));
}

TEST(VendorDevicesTest, MalformedNameIsRefusedBeforeAnyRead) {
  EXPECT_THAT(ResolveVendorDevices({kGood}, {"nvidia.com/gpu"}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("\"nvidia.com/gpu\" is not a CDI device name")));
  ASSERT_OK_AND_ASSIGN(ContainerEdits none, ResolveVendorDevices({kGood}, {}));
  EXPECT_TRUE(none.IsEmpty());
}

}  // namespace
}  // namespace devlet::cdi
