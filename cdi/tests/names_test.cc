#include "devlet/cdi/names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "devlet/common/testing/status_matchers.h"

namespace devlet::cdi {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

TEST(NamesTest, VendorAndClass) {
  for (const char* ok : {"a", "nvidia.com", "k8s.devlet.dev", "A-b_c.d9", "x1"}) {
    EXPECT_THAT(ValidateVendorName(ok), IsOk()) << ok;
    EXPECT_THAT(ValidateClassName(ok), IsOk()) << ok;
  }
  for (const char* bad : {"", "1abc", "-a", "a-", "a/b", "a=b", "a b", "a.", "é"}) {
    EXPECT_THAT(ValidateVendorName(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_THAT(ValidateClassName("gpu:0"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid character ':'")));
}

TEST(NamesTest, DeviceNames) {
  for (const char* ok : {"0", "gpu0", "0000:3b:00.1", "6f1c2a9e-0b7d-4c1e-9a35-1d2e3f4a5b6c-gpu-0",
                         "a_b.c:d-e"}) {
    EXPECT_THAT(ValidateDeviceName(ok), IsOk()) << ok;
  }
  for (const char* bad : {"", "-a", "a-", "a/b", "a=b", "a b", ":a", "a:"}) {
    EXPECT_THAT(ValidateDeviceName(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

TEST(NamesTest, QualifiedNames) {
  EXPECT_EQ(QualifiedName("vendor.com", "class", "dev"), "vendor.com/class=dev");
  EXPECT_THAT(ParseQualifiedName("vendor.com/class=dev:0"),
              IsOkAndHolds(QualifiedDevice{"vendor.com", "class", "dev:0"}));
  // The name part may contain '=' and '/' is split at the first one only... and then rejected.
  EXPECT_THAT(ParseQualifiedName("v/c=a/b"), StatusIs(absl::StatusCode::kInvalidArgument));
  for (const char* bad : {"", "/dev/null", "vendor/class", "vendor=dev", "/c=d", "v/=d", "v/c=",
                          "=x", "1v/c=d"}) {
    EXPECT_FALSE(IsQualifiedName(bad)) << bad;
  }
  EXPECT_TRUE(IsQualifiedName("v/c=d"));
}

TEST(NamesTest, Annotations) {
  EXPECT_THAT(AnnotationKey("devlet", "claim/uid"), IsOkAndHolds("cdi.k8s.io/devlet_claim_uid"));
  EXPECT_THAT(AnnotationKey("", "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(AnnotationKey(std::string(40, 'a'), std::string(30, 'b')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("63")));
  EXPECT_THAT(AnnotationValue({"v/c=a", "v/c=b"}), IsOkAndHolds("v/c=a,v/c=b"));
  EXPECT_THAT(AnnotationValue({"v/c=a", "bad"}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace devlet::cdi
