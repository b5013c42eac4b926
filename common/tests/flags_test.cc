#include "devlet/common/flags.h"

#include <cstdlib>

#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::flags {
namespace {

using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(FlagsTest, EnvNameIsUpperSnake) {
  EXPECT_EQ(EnvName("--node-name"), "NODE_NAME");
  EXPECT_EQ(EnvName("--kubelet-registrar-directory-path"), "KUBELET_REGISTRAR_DIRECTORY_PATH");
  EXPECT_EQ(EnvName("cdi-root"), "CDI_ROOT");
}

TEST(FlagsTest, EnvironmentFillsFlagAndCommandLineWins) {
  ::setenv("DEVLET_TEST_FLAG", "from-env", 1);
  {
    CLI::App app;
    std::string value;
    AddFlag(app, "--devlet-test-flag", value, "test");
    const char* argv[] = {"prog"};
    app.parse(1, argv);
    EXPECT_EQ(value, "from-env");
  }
  {
    CLI::App app;
    std::string value;
    AddFlag(app, "--devlet-test-flag", value, "test");
    const char* argv[] = {"prog", "--devlet-test-flag=from-flag"};
    app.parse(2, argv);
    EXPECT_EQ(value, "from-flag");
  }
  ::unsetenv("DEVLET_TEST_FLAG");
}

TEST(FlagsTest, LoggingFlags) {
  CLI::App app;
  log::Options options;
  AddLoggingFlags(app, options);
  const char* argv[] = {"prog", "-v=4", "-logging-format=json"};
  Parse(app, 3, argv);
  EXPECT_EQ(options.verbosity, 4);
  EXPECT_EQ(options.format, log::Format::kJson);
}

TEST(FlagsTest, FeatureGates) {
  EXPECT_THAT(ParseFeatureGates("DRAAdminAccess=true, DRADeviceTaints=false"),
              IsOkAndHolds(ElementsAre(Pair("DRAAdminAccess", true), Pair("DRADeviceTaints", false))));
  EXPECT_THAT(ParseFeatureGates(""), IsOkAndHolds(ElementsAre()));
  EXPECT_THAT(ParseFeatureGates("A=yes"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be true or false")));
  EXPECT_THAT(ParseFeatureGates("A"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseFeatureGates("=true"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace devlet::flags
