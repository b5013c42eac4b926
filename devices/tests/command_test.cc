#include "devlet/devices/command.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::devices {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

using namespace std::chrono_literals;

CommandSpec Shell(const std::string& script) {
  return CommandSpec{.argv = {"/bin/sh", "-c", script}, .timeout = 10s};
}

TEST(CommandTest, CapturesOutputAndExitStatus) {
  ASSERT_OK_AND_ASSIGN(CommandResult result, RunCommand(Shell("echo out; echo err >&2; exit 3")));
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.stdout_text, "out\n");
  EXPECT_EQ(result.stderr_text, "err\n");
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(result.ToStatus("/bin/sh"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("/bin/sh exited with status 3: err")));
  ASSERT_OK_AND_ASSIGN(CommandResult good, RunCommand(Shell("exit 0")));
  EXPECT_OK(good.ToStatus("/bin/sh"));
}

TEST(CommandTest, TimeoutKillsTheWholeProcessGroup) {
  CommandSpec spec = Shell("sleep 30 & sleep 30; echo never");
  spec.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(CommandResult result, RunCommand(spec));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.term_signal, SIGKILL);
  EXPECT_THAT(result.ToStatus("/bin/sh"),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("was killed")));
}

TEST(CommandTest, StdinIsClosed) {
  CommandSpec spec = Shell("read line; echo \"read=$?\"");
  spec.timeout = 5s;
  ASSERT_OK_AND_ASSIGN(CommandResult result, RunCommand(spec));
  EXPECT_FALSE(result.timed_out);
  EXPECT_THAT(result.stdout_text, Not(HasSubstr("read=0")));
}

TEST(CommandTest, OnlyStandardFdsAreInherited) {
  int fd = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::dup2(fd, 57), 57);
  ASSERT_OK_AND_ASSIGN(CommandResult result,
                       RunCommand({.argv = {"/bin/ls", "/proc/self/fd"}, .timeout = 10s}));
  ::close(57);
  ::close(fd);
  EXPECT_EQ(result.exit_code, 0) << result.stderr_text;
  std::istringstream lines(result.stdout_text);
  std::string line;
  while (std::getline(lines, line)) {
    EXPECT_LE(std::stoi(line), 3) << "inherited fd " << line;
  }
}

TEST(CommandTest, SeccompFilterDeniesListedSyscalls) {
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("devlet-seccomp-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  CommandSpec spec{.argv = {"/bin/mkdir", dir}, .timeout = 10s};
  spec.seccomp.denied_syscalls = {"mkdir", "mkdirat"};
  ASSERT_OK_AND_ASSIGN(CommandResult denied, RunCommand(spec));
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_THAT(denied.stderr_text, HasSubstr("Operation not permitted"));
  EXPECT_FALSE(std::filesystem::exists(dir));

  spec.seccomp.enabled = false;
  ASSERT_OK_AND_ASSIGN(CommandResult allowed, RunCommand(spec));
  EXPECT_EQ(allowed.exit_code, 0) << allowed.stderr_text;
  EXPECT_TRUE(std::filesystem::exists(dir));
  std::filesystem::remove_all(dir);
}

TEST(CommandTest, DefaultPolicyDeniesNamespaceChanges) {
  if (!std::filesystem::exists("/usr/bin/unshare")) GTEST_SKIP() << "no /usr/bin/unshare";
  ASSERT_OK_AND_ASSIGN(CommandResult result,
                       RunCommand({.argv = {"/usr/bin/unshare", "--user", "/bin/true"}, .timeout = 10s}));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.stderr_text, HasSubstr("Operation not permitted"));
}

TEST(CommandTest, CleanEnvironment) {
  CommandSpec spec = Shell("echo \"$FOO|$HOME|$PATH\"");
  spec.env = {{"FOO", "bar"}};
  ASSERT_OK_AND_ASSIGN(CommandResult result, RunCommand(spec));
  EXPECT_EQ(result.stdout_text, "bar||/usr/sbin:/usr/bin:/sbin:/bin\n");
}

TEST(CommandTest, OutputIsCappedWithoutDeadlock) {
  CommandSpec spec = Shell("head -c 300000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero >&2");
  spec.max_output_bytes = 1000;
  ASSERT_OK_AND_ASSIGN(CommandResult result, RunCommand(spec));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text, std::string(1000, 'a'));
  EXPECT_EQ(result.stderr_text.size(), 1000u);
  EXPECT_TRUE(result.output_truncated);
}

TEST(CommandTest, BadCommands) {
  EXPECT_THAT(RunCommand({.argv = {"sh", "-c", "true"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("absolute program path")));
  EXPECT_THAT(RunCommand({.argv = {}}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RunCommand({.argv = {"/nonexistent/tool"}}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("starting /nonexistent/tool")));
  CommandSpec spec{.argv = {"/bin/true"}};
  spec.seccomp.denied_syscalls = {"no_such_syscall"};
  EXPECT_THAT(RunCommand(spec), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("unknown system call \"no_such_syscall\"")));
}

}  // namespace
}  // namespace devlet::devices
