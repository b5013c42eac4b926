#include "devlet/common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace devlet {
namespace {

namespace fs = std::filesystem;
using ::devlet::testing::StatusIs;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "devlet-files-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  std::string dir_;
};

TEST_F(FilesTest, WritesReplacesAndReadsBack) {
  const std::string path = dir_ + "/spec.json";
  ASSERT_OK(WriteFileAtomically(path, "first", 0600));
  ASSERT_OK(WriteFileAtomically(path, "second", 0600));
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> content, ReadFileIfExists(path));
  ASSERT_TRUE(content.has_value());
  EXPECT_EQ(*content, "second");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Entries(), std::vector<std::string>{"spec.json"});  // no temp file left behind
}

TEST_F(FilesTest, ModeIsNotFilteredByUmask) {
  const mode_t old = ::umask(077);
  const absl::Status status = WriteFileAtomically(dir_ + "/metadata.json", "{}", 0644);
  ::umask(old);
  ASSERT_OK(status);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/metadata.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(FilesTest, MissingDirectoryIsAnErrorAndLeavesNothing) {
  EXPECT_THAT(WriteFileAtomically(dir_ + "/absent/file", "x"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(Entries().empty());
}

TEST_F(FilesTest, RenameOntoDirectoryFailsAndKeepsIt) {
  fs::create_directory(dir_ + "/busy");
  EXPECT_FALSE(WriteFileAtomically(dir_ + "/busy", "x").ok());
  EXPECT_TRUE(fs::is_directory(dir_ + "/busy"));
  EXPECT_EQ(Entries(), std::vector<std::string>{"busy"});  // the temp file was removed
}

TEST_F(FilesTest, RejectsDirectoryNames) {
  EXPECT_THAT(WriteFileAtomically(dir_ + "/", "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(WriteFileAtomically("", "x"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(FilesTest, ReadMissingFileIsNullopt) {
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> content, ReadFileIfExists(dir_ + "/none"));
  EXPECT_FALSE(content.has_value());
  EXPECT_FALSE(ReadFileIfExists(dir_).ok());  // a directory is an error, not "missing"
}

TEST_F(FilesTest, ConcurrentWritersNeverTearTheFile) {
  const std::string path = dir_ + "/checkpoint";
  const std::string a(1 << 16, 'a');
  const std::string b(1 << 16, 'b');
  std::vector<std::thread> writers;
  for (int i = 0; i < 4; ++i) {
    writers.emplace_back([&, i] {
      for (int n = 0; n < 20; ++n) ASSERT_OK(WriteFileAtomically(path, i % 2 ? a : b));
    });
  }
  for (std::thread& t : writers) t.join();
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> content, ReadFileIfExists(path));
  ASSERT_TRUE(content.has_value());
  EXPECT_TRUE(*content == a || *content == b);
  EXPECT_EQ(Entries(), std::vector<std::string>{"checkpoint"});
}

}  // namespace
}  // namespace devlet
