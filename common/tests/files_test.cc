#include "devlet/common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "devlet/common/status.h"
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

// Fails the `fail_at`-th step of an atomic write (0: CreateTempFile, 1: Write, 2: Sync, 3: Close,
// 4: Rename, 5: SyncDir); the other steps run on the real file system.
class FailingOps final : public AtomicWriteOps {
 public:
  explicit FailingOps(int fail_at) : fail_at_(fail_at) {}

  absl::StatusOr<int> CreateTempFile(const std::string& dir, const std::string& prefix,
                                     const std::string& suffix, mode_t mode,
                                     std::string* path) override {
    DEVLET_RETURN_IF_ERROR(Step());
    return real_.CreateTempFile(dir, prefix, suffix, mode, path);
  }
  absl::Status Write(int fd, std::string_view data, const std::string& path) override {
    DEVLET_RETURN_IF_ERROR(Step());
    return real_.Write(fd, data, path);
  }
  absl::Status Sync(int fd, const std::string& path) override {
    DEVLET_RETURN_IF_ERROR(Step());
    return real_.Sync(fd, path);
  }
  absl::Status Close(int fd, const std::string& path) override {
    if (absl::Status s = Step(); !s.ok()) {
      (void)real_.Close(fd, path);  // a failed close(2) still releases the descriptor
      return s;
    }
    return real_.Close(fd, path);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    DEVLET_RETURN_IF_ERROR(Step());
    return real_.Rename(from, to);
  }
  absl::Status SyncDir(const std::string& dir) override {
    DEVLET_RETURN_IF_ERROR(Step());
    return real_.SyncDir(dir);
  }
  absl::Status Remove(const std::string& path) override { return real_.Remove(path); }
  absl::Status MakeDirs(const std::string& dir, mode_t mode) override {
    return real_.MakeDirs(dir, mode);
  }

 private:
  absl::Status Step() {
    return step_++ == fail_at_ ? ErrnoToStatus(ENOSPC, "injected") : absl::OkStatus();
  }

  AtomicWriteOps& real_ = PosixAtomicWriteOps();
  int fail_at_;
  int step_ = 0;
};

TEST_F(FilesTest, AFailureAtAnyStepKeepsTheOldContentAndNoTempFile) {
  const std::string path = dir_ + "/checkpoint.json";
  ASSERT_OK(WriteFileAtomically(path, "old", 0600));
  for (int step = 0; step <= 4; ++step) {
    SCOPED_TRACE(step);
    FailingOps ops(step);
    EXPECT_THAT(WriteFileAtomically(path, "new", {.mode = 0600}, ops),
                StatusIs(absl::StatusCode::kResourceExhausted));
    ASSERT_OK_AND_ASSIGN(std::optional<std::string> content, ReadFileIfExists(path));
    EXPECT_EQ(content, "old");
    EXPECT_EQ(Entries(), std::vector<std::string>{"checkpoint.json"});
  }
  // The directory sync fails after the rename: the new content is in place, and the error says
  // its durability is in doubt.
  FailingOps ops(5);
  EXPECT_FALSE(WriteFileAtomically(path, "new", {.mode = 0600}, ops).ok());
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> content, ReadFileIfExists(path));
  EXPECT_EQ(content, "new");
}

TEST_F(FilesTest, CreatesMissingDirectoriesWhenAsked) {
  const std::string path = dir_ + "/a/b/spec.json";
  ASSERT_OK(WriteFileAtomically(path, "x", {.mode = 0640, .dir_mode = 0700, .create_dirs = true}));
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST_F(FilesTest, TempFilesAreHiddenAndNotJson) {
  // A crash between create and rename leaves ".<base>.<random>.tmp": never a name a CDI watcher
  // or the manifest store reads.
  std::string temp;
  ASSERT_OK_AND_ASSIGN(int fd, PosixAtomicWriteOps().CreateTempFile(dir_, ".spec.json.", ".tmp",
                                                                     0644, &temp));
  ::close(fd);
  const std::string name = fs::path(temp).filename().string();
  EXPECT_TRUE(name.starts_with(".spec.json.")) << name;
  EXPECT_TRUE(name.ends_with(".tmp")) << name;
}

}  // namespace
}  // namespace devlet
