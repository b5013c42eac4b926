#include "devlet/common/status.h"

#include <cerrno>

#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<int> Half(int n) {
  if (n % 2 != 0) {
    return InvalidArgument("odd number " + std::to_string(n));
  }
  return n / 2;
}

absl::StatusOr<int> Quarter(int n) {
  DEVLET_ASSIGN_OR_RETURN(const int half, Half(n));
  DEVLET_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int n) {
  DEVLET_RETURN_IF_ERROR(Half(n));
  DEVLET_RETURN_IF_ERROR(absl::OkStatus());
  return absl::OkStatus();
}

TEST(StatusTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_THAT(Quarter(8), IsOkAndHolds(Eq(2)));
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd number 3")));
  EXPECT_THAT(Quarter(5), StatusIs(absl::StatusCode::kInvalidArgument, "odd number 5"));
}

TEST(StatusTest, ReturnIfErrorAcceptsStatusAndStatusOr) {
  EXPECT_THAT(CheckEven(4), IsOk());
  EXPECT_THAT(CheckEven(3), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckEven(3), Not(IsOk()));
}

TEST(StatusTest, WithContextPrefixesAndKeepsCode) {
  absl::Status status = NotFound("claim ns/a");
  status.SetPayload("devlet/test", absl::Cord("p"));
  const absl::Status wrapped = WithContext(status, "preparing");
  EXPECT_THAT(wrapped, StatusIs(absl::StatusCode::kNotFound, "preparing: claim ns/a"));
  EXPECT_TRUE(wrapped.GetPayload("devlet/test").has_value());
  EXPECT_THAT(WithContext(absl::OkStatus(), "ignored"), IsOk());
}

TEST(StatusTest, ErrnoMapsToCanonicalCodes) {
  EXPECT_THAT(ErrnoToStatus(ENOENT, "open /x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("open /x: No such file")));
  EXPECT_THAT(ErrnoToStatus(EACCES, "open"), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(ErrnoToStatus(EIO, "read"), StatusIs(absl::StatusCode::kInternal));
  // Faults of the host, not bugs: a full disk or quota, a read-only file system.
  EXPECT_THAT(ErrnoToStatus(ENOSPC, "write"), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(ErrnoToStatus(EDQUOT, "write"), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(ErrnoToStatus(EROFS, "create"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Read-only file system")));
}

}  // namespace
}  // namespace devlet
