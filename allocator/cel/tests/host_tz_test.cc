// The CEL engine must not depend on the process's time zone: Kubernetes evaluates selectors in an
// API server whose time.Local is UTC. ctest cel_test_host_tz runs the data files (among them
// time_zones.txt) with TZ set to a zone west of UTC and DEVLET_TEST_HOST_TZ=1; this test makes
// sure that run really had a zone other than UTC, and checks the zone-sensitive functions directly.
#include <time.h>

#include <cstdlib>
#include <ctime>
#include <string>

#include "devlet/cel/dra.h"
#include "devlet/common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace devlet::cel {
namespace {

using ::devlet::testing::IsOkAndHolds;

TEST(HostTimeZone, ResultsDoNotFollowTheProcessZone) {
  if (std::getenv("DEVLET_TEST_HOST_TZ") == nullptr) {
    GTEST_SKIP() << "runs under ctest cel_test_host_tz (TZ set to a zone other than UTC)";
  }
  tzset();
  const std::time_t noon = 1577872800;  // 2020-01-01T10:00:00Z
  std::tm local{};
  ASSERT_NE(localtime_r(&noon, &local), nullptr);
  ASSERT_NE(local.tm_gmtoff, 0) << "TZ=" << (std::getenv("TZ") ? std::getenv("TZ") : "(unset)")
                                << " did not change the process's zone";

  dra::SimpleDevice device("gpu.example.com");
  for (const std::string expr : {
           R"(timestamp("2020-01-01T10:00:00Z").getHours() == 10)",
           R"(timestamp("2020-01-01T10:00:00Z").getHours("Local") == 10)",
           R"(timestamp("2020-01-01T10:00:00Z").getHours("localtime") == 10)",
           R"(timestamp("2020-01-01T23:30:00Z").getDate() == 1)",
           R"(string(timestamp("2020-01-01T10:00:00+00:00")) == "2020-01-01T10:00:00Z")",
           R"(string(timestamp(1577872800)) == "2020-01-01T10:00:00Z")",
           // Go's time.Parse gives -03:30 a zone of its own, +00:00 time.Local (UTC there).
           R"(!(timestamp("2020-01-01T10:00:00-03:30") in )"
           R"({timestamp("2020-01-01T10:00:00-03:30"): 1}))",
           R"(timestamp("2020-01-01T10:00:00+00:00") in )"
           R"({timestamp("2020-01-01T10:00:00+00:00"): 1})",
       }) {
    SCOPED_TRACE(expr);
    ASSERT_OK_AND_ASSIGN(Program program, dra::CompileSelector(expr));
    EXPECT_THAT(dra::Match(program, device), IsOkAndHolds(true));
  }
}

}  // namespace
}  // namespace devlet::cel
