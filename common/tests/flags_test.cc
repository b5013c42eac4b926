#include "devlet/common/flags.h"

#include <cstdlib>
#include <optional>
#include <string>

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

// ParseCommandLineTest restores the process-wide logging options that ParseCommandLine sets.
class ParseCommandLineTest : public ::testing::Test {
 protected:
  ~ParseCommandLineTest() override { log::Configure(saved_); }

  log::Options saved_ = log::CurrentOptions();
};

TEST_F(ParseCommandLineTest, ConfiguresLoggingAndGoesOn) {
  CLI::App app{"devlet-test: a binary"};
  std::string name;
  AddFlag(app, "--name", name, "A name");
  const char* argv[] = {"devlet-test", "-name=x", "-v=3", "--logging-format", "json"};
  EXPECT_EQ(ParseCommandLine(app, 5, argv), std::nullopt);
  EXPECT_EQ(name, "x");
  EXPECT_EQ(log::CurrentOptions().verbosity, 3);
  EXPECT_EQ(log::CurrentOptions().format, log::Format::kJson);
}

TEST_F(ParseCommandLineTest, HelpExitsZeroWithTheLoggingFlagsLast) {
  log::Configure({.format = log::Format::kText, .verbosity = 1});
  CLI::App app{"devlet-test: a binary"};
  std::string name;
  AddFlag(app, "--name", name, "A name");
  const char* argv[] = {"devlet-test", "--help"};
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(ParseCommandLine(app, 2, argv), 0);
  const std::string help = ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(help, HasSubstr("devlet-test: a binary"));
  ASSERT_THAT(help, HasSubstr("--name"));
  ASSERT_THAT(help, HasSubstr("--logging-format"));
  EXPECT_LT(help.find("--name"), help.find("--logging-format"));
  EXPECT_EQ(log::CurrentOptions().verbosity, 1);  // not configured: the binary exits
}

TEST_F(ParseCommandLineTest, BadFlagExitsNonZeroNamingIt) {
  log::Configure({.format = log::Format::kText, .verbosity = 1});
  for (const char* bad : {"--no-such-flag", "--logging-format=xml", "-v=many"}) {
    SCOPED_TRACE(bad);
    CLI::App app{"devlet-test: a binary"};
    const char* argv[] = {"devlet-test", "-v=5", bad};
    ::testing::internal::CaptureStderr();
    const std::optional<int> exit_code = ParseCommandLine(app, 3, argv);
    const std::string error = ::testing::internal::GetCapturedStderr();
    ASSERT_NE(exit_code, std::nullopt);
    EXPECT_NE(*exit_code, 0);
    EXPECT_THAT(error, HasSubstr("--help"));
    EXPECT_EQ(log::CurrentOptions().verbosity, 1);
  }
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
