#include "devlet/allocator/features.h"

#include "devlet/common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::allocator {
namespace {

using ::testing::HasSubstr;

TEST(FeaturesTest, Defaults137) {
  Features f;
  EXPECT_TRUE(f.admin_access);
  EXPECT_TRUE(f.prioritized_list);
  EXPECT_TRUE(f.partitionable_devices);
  EXPECT_TRUE(f.device_taints);
  EXPECT_TRUE(f.consumable_capacity);
  EXPECT_TRUE(f.binding_and_status());
  EXPECT_FALSE(f.list_type_attributes);
}

TEST(FeaturesTest, Parses) {
  auto f = ParseFeatureGates(" DRAConsumableCapacity=false, DRAListTypeAttributes=true,"
                             "SchedulerPreQueueingHints=true");
  ASSERT_TRUE(f.ok()) << Message(f.status());
  EXPECT_FALSE(f->consumable_capacity);
  EXPECT_TRUE(f->list_type_attributes);
}

TEST(FeaturesTest, Errors) {
  EXPECT_THAT(Message(ParseFeatureGates("NoSuchGate=true").status()),
              HasSubstr("unrecognized feature gate: NoSuchGate"));
  EXPECT_THAT(Message(ParseFeatureGates("DRAAdminAccess=maybe").status()),
              HasSubstr("invalid value of DRAAdminAccess"));
  EXPECT_THAT(Message(ParseFeatureGates("DRAAdminAccess").status()), HasSubstr("missing bool"));
  EXPECT_THAT(Message(ParseFeatureGates("DynamicResourceAllocation=false").status()),
              HasSubstr("locked to true"));
}

}  // namespace
}  // namespace devlet::allocator
