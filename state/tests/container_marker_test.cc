#include "devlet/state/container_marker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "devlet/common/testing/status_matchers.h"

namespace devlet::state {
namespace {

using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Optional;

TEST(ContainerMarkerTest, NameIsPortableAndUniquePerDevice) {
  EXPECT_EQ(ContainerMarkerName("5e0c1a10-0000-4000-8000-0000000c1a01", 2),
            "DEVLET_CLAIM_5E0C1A10_0000_4000_8000_0000000C1A01_2");
  EXPECT_EQ(ContainerMarkerName("a.b/c", 0), "DEVLET_CLAIM_A_B_C_0");
  EXPECT_NE(ContainerMarkerName("uid", 1), ContainerMarkerName("uid", 11));
}

TEST(ContainerMarkerTest, RoundTrips) {
  DeviceMarker marker{.claim_uid = "5e0c1a10-0000-4000-8000-0000000c1a01",
                      .requests = {"gpus", "all/sub"},
                      .pool = "example.com/node-1",
                      .device = "gpu-0",
                      .share_id = "0b7d4c1e-9a35-4d2e-8f4a-5b6c00000001"};
  const std::string entry = ContainerMarkerEnv(marker, 3);
  EXPECT_EQ(entry,
            "DEVLET_CLAIM_5E0C1A10_0000_4000_8000_0000000C1A01_3=claim=5e0c1a10-0000-4000-8000-"
            "0000000c1a01 request=gpus,all/sub device=example.com/node-1/gpu-0 "
            "share=0b7d4c1e-9a35-4d2e-8f4a-5b6c00000001");
  EXPECT_THAT(ParseContainerMarker(entry), IsOkAndHolds(Optional(marker)));
  marker.share_id.clear();
  marker.requests = {"r"};
  EXPECT_THAT(ParseContainerMarker(ContainerMarkerEnv(marker, 0)),
              IsOkAndHolds(Optional(marker)));
}

TEST(ContainerMarkerTest, OtherEntriesAreNotMarkers) {
  EXPECT_THAT(ParseContainerMarker("PATH=/bin"), IsOkAndHolds(std::nullopt));
  EXPECT_THAT(ParseContainerMarker("DEVLET_DEVICE_GPU_0=node/gpu-0"), IsOkAndHolds(std::nullopt));
}

TEST(ContainerMarkerTest, MalformedMarkersAreErrorsNamingTheEntry) {
  for (const char* entry : {"DEVLET_CLAIM_X_0", "DEVLET_CLAIM_X_0=device=p/d",
                            "DEVLET_CLAIM_X_0=claim=u", "DEVLET_CLAIM_X_0=claim=u device=nopool",
                            "DEVLET_CLAIM_X_0=claim=u device=p/d color=red",
                            "DEVLET_CLAIM_X_0=claim=u device=p/d garbage"}) {
    EXPECT_THAT(ParseContainerMarker(entry),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("DEVLET_CLAIM_X_0")))
        << entry;
  }
}

TEST(ContainerMarkerTest, TextNamesDeviceAndClaim) {
  EXPECT_EQ(DeviceMarkerText({.claim_uid = "u", .requests = {"a", "b"}, .pool = "p", .device = "d"}),
            "p/d of claim u (request a,b)");
}

}  // namespace
}  // namespace devlet::state
