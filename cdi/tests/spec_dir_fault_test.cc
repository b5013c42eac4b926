// WriteSpec (a claim's transient spec and a device-metadata spec) on a real full disk and a real
// read-only file system (root only: a size-limited tmpfs and a read-only bind mount): the previous
// spec stays intact and readable, no temp file is left, the error names the spec and the cause,
// and writing works again once the fault is gone. spec_dir_test.cc injects the same failures one
// step at a time through the FileSystem seam.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "devlet/cdi/codec.h"
#include "devlet/cdi/metadata.h"
#include "devlet/cdi/spec_dir.h"
#include "devlet/common/testing/scratch_mount.h"
#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::cdi {
namespace {

namespace fs = std::filesystem;
using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::ScratchMount;
using ::devlet::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;

class SpecDirFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "devlet-cdi-faults-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }

  void TearDown() override {
    mount_.Unmount();
    fs::remove_all(root_);
  }

  static Spec ClaimSpec(const std::string& env) {
    Spec spec{.kind = "k8s.devlet.dev/claim"};
    spec.devices.push_back({.name = "u1-gpu-0", .container_edits = {.env = {"GPU=" + env}}});
    return spec;
  }

  static MetadataRequest Metadata(const std::string& host_file) {
    return {.driver = "devlet.dev",
            .claim_uid = "u1",
            .claim_name = "c",
            .request = "gpu",
            .host_file = host_file};
  }

  std::set<std::string> Entries() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(root_)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }

  // Writes the claim spec and the metadata spec with `env` and `host_file`.
  absl::Status WriteBoth(const std::string& env, const std::string& host_file) {
    absl::Status claim =
        WriteSpec(root_, TransientSpecName("k8s.devlet.dev", "claim", "u1"), ClaimSpec(env))
            .status();
    absl::Status metadata =
        WriteSpec(root_, MetadataSpecName(Metadata(host_file)), MetadataSpec(Metadata(host_file)))
            .status();
    return claim.ok() ? metadata : claim;
  }

  // The two specs on disk decode and carry `env` and `host_file`.
  void ExpectBoth(const std::string& env, const std::string& host_file) {
    const std::string claim_path =
        root_ + "/" + TransientSpecName("k8s.devlet.dev", "claim", "u1") + ".json";
    const std::string metadata_path = root_ + "/" + MetadataSpecName(Metadata(host_file)) + ".json";
    absl::StatusOr<Spec> claim = DecodeSpec(Read(claim_path));
    ASSERT_TRUE(claim.ok()) << claim.status();
    EXPECT_EQ(claim->devices.at(0).container_edits.env, std::vector<std::string>{"GPU=" + env});
    absl::StatusOr<Spec> metadata = DecodeSpec(Read(metadata_path));
    ASSERT_TRUE(metadata.ok()) << metadata.status();
    EXPECT_THAT(Read(metadata_path), HasSubstr(host_file));
    EXPECT_EQ(Entries(), (std::set<std::string>{fs::path(claim_path).filename().string(),
                                                fs::path(metadata_path).filename().string()}));
  }

  std::string root_;
  ScratchMount mount_;
};

TEST_F(SpecDirFaultTest, DiskFullKeepsThePreviousSpecs) {
  if (absl::Status s = mount_.Tmpfs(root_, 128 << 10); !s.ok())
    GTEST_SKIP() << s;
  ASSERT_OK(WriteBoth("old", "/var/lib/devlet/old/metadata.json"));
  {
    std::ofstream filler(root_ + "/filler", std::ios::binary);
    const std::string block(4096, 'f');
    while (filler.write(block.data(), block.size()))
      filler.flush();
  }
  // Large enough not to fit into what a partly used page may still hold.
  const std::string long_env(32 << 10, 'n');
  EXPECT_THAT(WriteBoth(long_env, "/var/lib/devlet/new/metadata.json"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("k8s.devlet.dev-claim_u1.json"),
                             HasSubstr("No space left on device"))));
  fs::remove(root_ + "/filler");
  ExpectBoth("old", "/var/lib/devlet/old/metadata.json");
  EXPECT_THAT(RemoveLeakedTempFiles(root_, "k8s.devlet.dev", "claim"), IsOkAndHolds(0));

  ASSERT_OK(WriteBoth(long_env, "/var/lib/devlet/new/metadata.json"));
  ExpectBoth(long_env, "/var/lib/devlet/new/metadata.json");
}

TEST_F(SpecDirFaultTest, ReadOnlyFileSystemKeepsThePreviousSpecs) {
  ASSERT_OK(WriteBoth("old", "/var/lib/devlet/old/metadata.json"));
  if (absl::Status s = mount_.ReadOnlyBind(root_); !s.ok())
    GTEST_SKIP() << s;
  EXPECT_THAT(WriteBoth("new", "/var/lib/devlet/new/metadata.json"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("k8s.devlet.dev-claim_u1.json"),
                             HasSubstr("Read-only file system"))));
  // Removal fails the same way and keeps the spec.
  EXPECT_THAT(RemoveSpec(root_, TransientSpecName("k8s.devlet.dev", "claim", "u1")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Read-only")));
  ExpectBoth("old", "/var/lib/devlet/old/metadata.json");
  EXPECT_THAT(ListTransientSpecs(root_, "k8s.devlet.dev", "claim"), IsOkAndHolds(SizeIs(1)));

  mount_.Unmount();
  ASSERT_OK(WriteBoth("new", "/var/lib/devlet/new/metadata.json"));
  ExpectBoth("new", "/var/lib/devlet/new/metadata.json");
}

}  // namespace
}  // namespace devlet::cdi
