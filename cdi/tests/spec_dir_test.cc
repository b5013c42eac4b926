#include "devlet/cdi/spec_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "devlet/cdi/codec.h"
#include "devlet/cdi/testing/faulty_file_system.h"
#include "devlet/common/testing/status_matchers.h"

namespace devlet::cdi {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::SizeIs;

namespace fs = std::filesystem;

class SpecDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("cdi_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static Spec ClaimSpec(const std::string& uid) {
    Spec spec{.kind = "k8s.devlet.dev/claim"};
    spec.devices.push_back({.name = uid + "-gpu-0",
                            .container_edits = {.env = {"GPU=" + uid}}});
    return spec;
  }

  void WriteRaw(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  std::string Read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }

  fs::path root_;
};

TEST_F(SpecDirTest, Names) {
  EXPECT_EQ(SpecName("vendor.com", "gpu"), "vendor.com-gpu");
  EXPECT_EQ(TransientSpecName("k8s.devlet.dev", "claim", "ns/uid"), "k8s.devlet.dev-claim_ns_uid");
}

TEST_F(SpecDirTest, WriteFillsMinimumVersionAndMode) {
  const std::string dir = (root_ / "run" / "cdi").string();  // created on demand
  const std::string name = TransientSpecName("k8s.devlet.dev", "claim", "1234-uid");
  ASSERT_OK_AND_ASSIGN(std::string path, WriteSpec(dir, name, ClaimSpec("1234-uid")));
  EXPECT_EQ(path, dir + "/k8s.devlet.dev-claim_1234-uid.json");
  ASSERT_OK_AND_ASSIGN(Spec back, DecodeSpec(Read(path)));
  EXPECT_EQ(back.version, "0.5.0");  // the device name starts with a digit
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // Nothing else is left in the directory (no temp files).
  EXPECT_THAT(ListTransientSpecs(dir, "k8s.devlet.dev", "claim"),
              IsOkAndHolds(ElementsAre(Pair("1234-uid", path))));
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(SpecDirTest, WriteOverwritesAndRemoveIsIdempotent) {
  const std::string dir = root_.string();
  Spec spec = ClaimSpec("a1");
  ASSERT_OK(WriteSpec(dir, "x", spec));
  spec.devices[0].container_edits.env = {"GPU=changed"};
  ASSERT_OK_AND_ASSIGN(std::string path, WriteSpec(dir, "x.json", spec));
  EXPECT_THAT(Read(path), HasSubstr("GPU=changed"));
  EXPECT_THAT(RemoveSpec(dir, "x"), IsOk());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_THAT(RemoveSpec(dir, "x"), IsOk());
}

TEST_F(SpecDirTest, WriteRefusesInvalidSpecs) {
  Spec spec = ClaimSpec("a");
  spec.devices[0].container_edits = {};
  EXPECT_THAT(WriteSpec(root_.string(), "x", spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty device edits")));
  spec = ClaimSpec("a");
  spec.version = "0.3.0";
  spec.devices[0].name = "9";
  EXPECT_THAT(WriteSpec(root_.string(), "x", spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least v0.5.0")));
  spec = ClaimSpec("a");
  spec.kind = "v/" + std::string(64, 'c');
  EXPECT_THAT(WriteSpec(root_.string(), "x", spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("longer than 63")));
  EXPECT_THAT(WriteSpec(root_.string(), "a/b", ClaimSpec("a")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(WriteSpec(root_.string(), "x.yaml", ClaimSpec("a")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(fs::exists(root_ / "x.json"));
}

TEST_F(SpecDirTest, LeakedTempFilesAreOursOnly) {
  WriteRaw(root_ / ".k8s.devlet.dev-claim_u1.json.AbC123.tmp", "partial");
  WriteRaw(root_ / "spec.123.tmp", "someone else's");
  WriteRaw(root_ / ".other-claim_u1.json.AbC123.tmp", "someone else's");
  EXPECT_THAT(RemoveLeakedTempFiles(root_.string(), "k8s.devlet.dev", "claim"), IsOkAndHolds(1));
  EXPECT_TRUE(fs::exists(root_ / "spec.123.tmp"));
  EXPECT_TRUE(fs::exists(root_ / ".other-claim_u1.json.AbC123.tmp"));
  EXPECT_THAT(RemoveLeakedTempFiles((root_ / "missing").string(), "v", "c"), IsOkAndHolds(0));
}

TEST_F(SpecDirTest, RegistryPrioritiesConflictsAndErrors) {
  const fs::path etc = root_ / "etc";
  const fs::path run = root_ / "run";
  auto spec_text = [](const std::string& env) {
    return "{\"cdiVersion\":\"0.3.0\",\"kind\":\"vendor.com/gpu\",\"devices\":[{\"name\":\"gpu0\","
           "\"containerEdits\":{\"env\":[\"X=" + env + "\"]}}]}";
  };
  WriteRaw(etc / "a.json", spec_text("etc"));
  WriteRaw(run / "b.json", spec_text("run"));  // higher priority: wins silently
  WriteRaw(run / "ignored.txt", spec_text("txt"));
  WriteRaw(run / "broken.json", "{\"cdiVersion\":");
  WriteRaw(run / "invalid.yaml", "cdiVersion: 0.3.0\nkind: v/c\ndevices: []\n");
  // Same device twice at the same priority: dropped, both files blamed.
  WriteRaw(root_ / "dup" / "1.json",
           "{\"cdiVersion\":\"0.3.0\",\"kind\":\"v/c\",\"devices\":[{\"name\":\"d\","
           "\"containerEdits\":{\"env\":[\"A=1\"]}},{\"name\":\"e\",\"containerEdits\":{\"env\":"
           "[\"B=1\"]}}]}");
  WriteRaw(root_ / "dup" / "2.yaml",
           "cdiVersion: 0.3.0\nkind: v/c\ndevices:\n- name: d\n  containerEdits:\n    env: [C=1]\n");

  Registry registry = Registry::Load(
      {etc.string(), (root_ / "missing").string(), run.string(), (root_ / "dup").string()});
  EXPECT_THAT(registry.DeviceNames(), ElementsAre("v/c=e", "vendor.com/gpu=gpu0"));
  ASSERT_NE(registry.FindDevice("vendor.com/gpu=gpu0"), nullptr);
  EXPECT_EQ(registry.FindDevice("vendor.com/gpu=gpu0")->container_edits.env[0], "X=run");
  EXPECT_EQ(registry.FindSpec("vendor.com/gpu=gpu0")->path, (run / "b.json").string());
  EXPECT_EQ(registry.FindDevice("v/c=d"), nullptr);

  const auto& errors = registry.errors();
  EXPECT_THAT(errors, SizeIs(4));
  EXPECT_THAT(errors.at((run / "broken.json").string()), ElementsAre(HasSubstr("not valid JSON")));
  EXPECT_THAT(errors.at((run / "invalid.yaml").string()),
              ElementsAre(HasSubstr("at least one device")));
  EXPECT_THAT(errors.at((root_ / "dup" / "1.json").string()),
              ElementsAre(HasSubstr("conflicting device \"v/c=d\"")));
  EXPECT_THAT(errors.at((root_ / "dup" / "2.yaml").string()),
              ElementsAre(HasSubstr("conflicting device \"v/c=d\"")));
}

TEST_F(SpecDirTest, ResolveMergesInReferenceOrder) {
  Registry registry;
  Spec a{.version = "0.3.0", .kind = "a.com/x", .container_edits = {.env = {"SPEC_A=1"}}};
  a.devices.push_back({.name = "1", .container_edits = {.env = {"DEV_A1=1"}}});
  a.devices.push_back({.name = "2", .container_edits = {.env = {"DEV_A2=1"}}});
  a.version = "0.5.0";
  Spec b{.version = "0.3.0", .kind = "b.com/y", .container_edits = {.env = {"SPEC_B=1"}}};
  b.devices.push_back({.name = "d", .container_edits = {.env = {"DEV_B=1"}}});
  registry.Add("a.json", 0, a);
  registry.Add("b.json", 0, b);
  EXPECT_THAT(registry.errors(), IsEmpty());
  ASSERT_OK_AND_ASSIGN(ContainerEdits edits,
                       registry.Resolve({"a.com/x=2", "b.com/y=d", "a.com/x=1", "a.com/x=2"}));
  EXPECT_THAT(edits.env, ElementsAre("SPEC_A=1", "DEV_A2=1", "SPEC_B=1", "DEV_B=1", "DEV_A1=1",
                                     "DEV_A2=1"));
  std::vector<std::string> unresolved;
  EXPECT_THAT(registry.Resolve({"a.com/x=1", "nope/x=1", "a.com/x=9"}, &unresolved),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope/x=1, a.com/x=9")));
  EXPECT_THAT(unresolved, ElementsAre("nope/x=1", "a.com/x=9"));
}

}  // namespace
}  // namespace devlet::cdi

namespace devlet::cdi {
namespace {

// A failure or a crash at any step of WriteSpec leaves the previous spec file or the new one,
// never a partial file; temp files a crash leaves are ours to remove, and only ours.
TEST_F(SpecDirTest, FailureAtEveryWriteStepLeavesOldOrNew) {
  const std::string dir = root_.string();
  Spec old_spec = ClaimSpec("u1");
  Spec new_spec = ClaimSpec("u1");
  new_spec.devices[0].container_edits.env = {"GPU=new"};
  const std::string name = TransientSpecName("k8s.devlet.dev", "claim", "u1");
  for (bool crash : {false, true}) {
    for (int step = 0;; ++step) {
      SCOPED_TRACE("crash=" + std::to_string(crash) + " step=" + std::to_string(step));
      fs::remove_all(root_);
      ASSERT_OK_AND_ASSIGN(std::string path, WriteSpec(dir, name, old_spec));
      testing::FaultyFileSystem faulty;
      faulty.fail_at = step;
      faulty.crash = crash;
      const absl::Status status = WriteSpec(dir, name, new_spec, {.fs = &faulty}).status();
      ASSERT_OK_AND_ASSIGN(Spec on_disk, DecodeSpec(Read(path)));
      on_disk.version.clear();
      if (status.ok()) {
        EXPECT_EQ(on_disk.devices, new_spec.devices);
      } else {
        EXPECT_THAT(status, StatusIs(absl::StatusCode::kResourceExhausted));
        EXPECT_TRUE(on_disk.devices == old_spec.devices || on_disk.devices == new_spec.devices);
      }
      EXPECT_THAT(RemoveLeakedTempFiles(dir, "k8s.devlet.dev", "claim"), IsOk());
      EXPECT_THAT(ListTransientSpecs(dir, "k8s.devlet.dev", "claim"),
                  IsOkAndHolds(ElementsAre(Pair("u1", path))));
      int files = 0;
      for ([[maybe_unused]] const auto& e : fs::directory_iterator(root_)) ++files;
      EXPECT_EQ(files, 1);
      if (faulty.count <= step) break;
      ASSERT_LT(step, 20);
    }
  }
}

}  // namespace
}  // namespace devlet::cdi

namespace devlet::cdi {
namespace {

// sync=false (transient specs the writer regenerates) skips both fsyncs but keeps the rename:
// a failure at any remaining step still leaves the old file or the new one.
TEST_F(SpecDirTest, UnsyncedWriteSkipsFsyncsAndStaysAtomic) {
  const std::string dir = root_.string();
  const std::string name = TransientSpecName("k8s.devlet.dev", "claim", "u1");
  Spec old_spec = ClaimSpec("u1");
  Spec new_spec = ClaimSpec("u1");
  new_spec.devices[0].container_edits.env = {"GPU=new"};
  {
    testing::FaultyFileSystem counting;
    ASSERT_THAT(WriteSpec(dir, name, old_spec, {.fs = &counting}).status(), IsOk());
    EXPECT_EQ(counting.syncs.load(), 2);  // the file and the directory
  }
  for (int step = 0;; ++step) {
    SCOPED_TRACE("step=" + std::to_string(step));
    ASSERT_OK_AND_ASSIGN(std::string path, WriteSpec(dir, name, old_spec));
    testing::FaultyFileSystem faulty;
    faulty.fail_at = step;
    faulty.crash = true;
    const absl::Status status =
        WriteSpec(dir, name, new_spec, {.fs = &faulty, .sync = false}).status();
    EXPECT_EQ(faulty.syncs.load(), 0);
    ASSERT_OK_AND_ASSIGN(Spec on_disk, DecodeSpec(Read(path)));
    if (status.ok()) {
      EXPECT_EQ(on_disk.devices, new_spec.devices);
    } else {
      EXPECT_TRUE(on_disk.devices == old_spec.devices || on_disk.devices == new_spec.devices);
    }
    EXPECT_THAT(RemoveLeakedTempFiles(dir, "k8s.devlet.dev", "claim"), IsOk());
    if (faulty.count <= step) break;
    ASSERT_LT(step, 10);
  }
}

TEST_F(SpecDirTest, RemoveStaleTransientSpecs) {
  const std::string dir = root_.string();
  for (const char* uid : {"a1", "b2", "c3"}) {
    ASSERT_OK(WriteSpec(dir, TransientSpecName("k8s.devlet.dev", "claim", uid), ClaimSpec(uid)));
  }
  WriteRaw(root_ / "other-claim_zz.json", "{}");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> removed,
                       RemoveStaleTransientSpecs(dir, "k8s.devlet.dev", "claim", {"b2", "x"}));
  EXPECT_THAT(removed, ElementsAre(dir + "/k8s.devlet.dev-claim_a1.json",
                                   dir + "/k8s.devlet.dev-claim_c3.json"));
  EXPECT_THAT(ListTransientSpecs(dir, "k8s.devlet.dev", "claim"),
              IsOkAndHolds(ElementsAre(Pair("b2", dir + "/k8s.devlet.dev-claim_b2.json"))));
  EXPECT_TRUE(fs::exists(root_ / "other-claim_zz.json"));
}

}  // namespace
}  // namespace devlet::cdi
