// WriteFileAtomically on a real full disk and a real read-only file system (root only: a
// size-limited tmpfs and a read-only bind mount): the previous file stays intact, no temp file is
// left, the error names the file and the cause, and writing works again once the fault is gone.
// files_test.cc injects the same failures one step at a time through AtomicWriteOps.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "devlet/common/files.h"
#include "devlet/common/testing/scratch_mount.h"
#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet {
namespace {

namespace fs = std::filesystem;
using ::devlet::testing::ScratchMount;
using ::devlet::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class FilesFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "devlet-faults-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }

  void TearDown() override {
    mount_.Unmount();
    fs::remove_all(dir_);
  }

  std::set<std::string> Entries(const std::string& dir) const {
    std::set<std::string> names;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      names.insert(fs::relative(entry.path(), dir).string());
    }
    return names;
  }

  // Fills the file system of `dir` with a file "filler" until a write fails with ENOSPC.
  static void Fill(const std::string& dir) {
    std::ofstream filler(dir + "/filler", std::ios::binary);
    const std::string block(4096, 'f');
    for (int i = 0; i < 1 << 20 && filler.write(block.data(), block.size()); ++i) {
      filler.flush();
    }
  }

  std::string dir_;
  ScratchMount mount_;
};

TEST_F(FilesFaultTest, DiskFullKeepsTheOldFileAndLeavesNoTempFile) {
  if (absl::Status s = mount_.Tmpfs(dir_, 256 << 10); !s.ok())
    GTEST_SKIP() << s;
  // A device-metadata file as the kubelet plugin writes it, in a directory created for it.
  const std::string path = dir_ + "/ns_claim/gpu/metadata.json";
  const AtomicWriteOptions options{.mode = 0644, .create_dirs = true};
  ASSERT_OK(WriteFileAtomically(path, R"({"old":true})", options));
  Fill(dir_);

  const std::string big(64 << 10, 'n');
  EXPECT_THAT(WriteFileAtomically(path, big, options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(path), HasSubstr("No space left on device"))));
  EXPECT_EQ(ReadFileIfExists(path).value(), R"({"old":true})");
  EXPECT_EQ(Entries(dir_), (std::set<std::string>{"filler", "ns_claim", "ns_claim/gpu",
                                                  "ns_claim/gpu/metadata.json"}));
  // A file in a new directory is not written either.
  EXPECT_FALSE(WriteFileAtomically(dir_ + "/ns_other/gpu/metadata.json", big, options).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/ns_other/gpu/metadata.json"));

  // Space comes back: the next write goes through.
  fs::remove(dir_ + "/filler");
  ASSERT_OK(WriteFileAtomically(path, big, options));
  EXPECT_EQ(ReadFileIfExists(path).value(), big);
}

TEST_F(FilesFaultTest, ReadOnlyFileSystemKeepsTheOldFileWithAClearError) {
  const std::string path = dir_ + "/checkpoint.json";
  ASSERT_OK(WriteFileAtomically(path, "old", 0600));
  if (absl::Status s = mount_.ReadOnlyBind(dir_); !s.ok())
    GTEST_SKIP() << s;

  EXPECT_THAT(WriteFileAtomically(path, "new", 0600),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(path), HasSubstr("Read-only file system"))));
  EXPECT_THAT(WriteFileAtomically(dir_ + "/sub/spec.json", "new", {.create_dirs = true}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Read-only file system")));
  EXPECT_EQ(ReadFileIfExists(path).value(), "old");
  EXPECT_EQ(Entries(dir_), std::set<std::string>{"checkpoint.json"});

  mount_.Unmount();
  ASSERT_OK(WriteFileAtomically(path, "new", 0600));
  EXPECT_EQ(ReadFileIfExists(path).value(), "new");
}

}  // namespace
}  // namespace devlet
