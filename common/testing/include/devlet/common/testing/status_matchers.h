// File: devlet/common/testing/status_matchers.h
//
// gMock matchers for absl::Status and absl::StatusOr<T>:
//
//   EXPECT_THAT(Parse(text), IsOk());
//   EXPECT_THAT(Parse(text), IsOkAndHolds(Eq(3)));
//   EXPECT_THAT(Parse(bad), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 3")));
//   ASSERT_OK_AND_ASSIGN(auto value, Parse(text));
#pragma once

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::testing {
namespace internal {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }

template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace internal

// IsOk matches an OK Status or a StatusOr holding a value.
MATCHER(IsOk, "is OK") {
  const absl::Status& status = internal::GetStatus(arg);
  if (!status.ok()) {
    *result_listener << "status is " << status.ToString();
  }
  return status.ok();
}

// IsOkAndHolds(m) matches a StatusOr<T> that holds a value matching `m`.
MATCHER_P(IsOkAndHolds, value_matcher,
          std::string(negation ? "isn't" : "is") + " OK and holding a matching value") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status().ToString();
    return false;
  }
  return ::testing::ExplainMatchResult(value_matcher, *arg, result_listener);
}

// StatusIs(code[, message_matcher]) matches a Status or StatusOr with that code and message.
MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + absl::StatusCodeToString(code) + " and a message that " +
               ::testing::DescribeMatcher<std::string>(message_matcher, negation)) {
  const absl::Status& status = internal::GetStatus(arg);
  if (status.code() != code) {
    *result_listener << "status is " << status.ToString();
    return false;
  }
  return ::testing::ExplainMatchResult(message_matcher, std::string(status.message()),
                                       result_listener);
}

MATCHER_P(StatusIs, code, "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& status = internal::GetStatus(arg);
  if (status.code() != code) {
    *result_listener << "status is " << status.ToString();
    return false;
  }
  return true;
}

}  // namespace devlet::testing

#define DEVLET_TESTING_CONCAT_INNER_(a, b) a##b
#define DEVLET_TESTING_CONCAT_(a, b) DEVLET_TESTING_CONCAT_INNER_(a, b)

// ASSERT_OK(expr) / EXPECT_OK(expr): the Status or StatusOr must be OK.
#define ASSERT_OK(expr) ASSERT_THAT((expr), ::devlet::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::devlet::testing::IsOk())

// ASSERT_OK_AND_ASSIGN(lhs, expr): asserts the StatusOr is OK and moves its value into lhs.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(DEVLET_TESTING_CONCAT_(devlet_statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, expr)            \
  auto statusor = (expr);                                          \
  ASSERT_TRUE(statusor.ok()) << statusor.status().ToString();      \
  lhs = std::move(statusor).value()
