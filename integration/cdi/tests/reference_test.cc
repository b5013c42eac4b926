// Runs the apply cases of cdi/tests/testdata/apply (those that use the real /dev) and the spec
// files of cdi/tests/testdata/specs through both our cdi/ module and the reference Go library
// (cdi-peer, built from this folder), and requires the same devices, versions and OCI result.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "devlet/cdi/codec.h"
#include "devlet/cdi/edits.h"
#include "devlet/cdi/spec_dir.h"
#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"

namespace devlet::cdi {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

// RunPeerForTest runs cdi-peer with `args` and returns its parsed stdout.
json RunPeerForTest(const std::vector<std::string>& args) {
  std::string command = DEVLET_CDI_PEER;
  for (const std::string& arg : args) command += " '" + arg + "'";
  FILE* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (pipe == nullptr) return json();
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int rc = ::pclose(pipe);
  EXPECT_EQ(rc, 0) << command;
  return json::parse(out);
}

namespace {

json RunPeer(const std::vector<std::string>& args) { return RunPeerForTest(args); }

class ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cdi_reference_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ReferenceTest, ApplyCasesMatchTheReferenceLibrary) {
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(DEVLET_CDI_TESTDATA) / "apply")) {
    if (entry.path().extension() != ".json") continue;
    const json c = json::parse(ReadFile(entry.path()));
    if (c.contains("hostDevices")) continue;  // fake devices: the Go side would lstat for real
    SCOPED_TRACE(entry.path().string());
    const fs::path specs = dir_ / entry.path().stem();
    fs::create_directories(specs);

    // Write every spec with our writer, letting it compute the minimum version.
    std::map<std::string, std::string> our_versions;  // what the reference computes
    int i = 0;
    for (const json& spec_json : c.at("specs")) {
      ASSERT_OK_AND_ASSIGN(Spec spec, DecodeSpec(spec_json.dump()));
      spec.version.clear();
      const std::string name =
          TransientSpecName(spec.Vendor(), spec.Class(), "claim-" + std::to_string(i++));
      ASSERT_OK_AND_ASSIGN(std::string path, WriteSpec(specs.string(), name, spec));
      ASSERT_OK_AND_ASSIGN(Spec written, DecodeSpec(ReadFile(path)));
      our_versions[path] = ReferenceMinimumRequiredVersion(written);
      // We write the exact minimum, which is never below what the reference asks for.
      EXPECT_EQ(written.version, MinimumRequiredVersion(written));
      EXPECT_GE(CompareVersions(written.version, our_versions[path]), 0);
    }
    const fs::path oci_path = dir_ / (entry.path().stem().string() + "-config.json");
    std::ofstream(oci_path) << c.at("oci").dump();

    std::string devices;
    for (const json& d : c.at("devices")) devices += (devices.empty() ? "" : ",") + d.get<std::string>();
    const json peer = RunPeer({"-spec-dir", specs.string(), "-oci", oci_path.string(),
                               "-devices", devices});

    // Same view of the directory.
    const Registry registry = Registry::Load({specs.string()});
    EXPECT_TRUE(registry.errors().empty());
    EXPECT_TRUE(peer.at("errors").empty()) << peer.at("errors").dump();
    EXPECT_EQ(peer.at("devices").get<std::vector<std::string>>(), registry.DeviceNames());
    const auto peer_versions = peer.at("minVersions").get<std::map<std::string, std::string>>();
    EXPECT_EQ(peer_versions, our_versions);

    // Same injection result, starting from the OCI spec as the reference types decode it.
    const std::string input = peer.at("input").dump();
    absl::StatusOr<ContainerEdits> edits =
        registry.Resolve(c.at("devices").get<std::vector<std::string>>());
    absl::StatusOr<std::string> ours =
        edits.ok() ? InjectEdits(input, *edits) : absl::StatusOr<std::string>(edits.status());
    if (peer.contains("error")) {
      EXPECT_FALSE(ours.ok()) << "the reference library failed with: " << peer.at("error");
    } else {
      ASSERT_TRUE(ours.ok()) << ours.status();
      EXPECT_EQ(json::parse(*ours), peer.at("output"))
          << "ours:      " << *ours << "\nreference: " << peer.at("output").dump();
    }
    ++compared;
  }
  EXPECT_GE(compared, 6);
}

// The spec files of the codec tests load identically and get the same minimum versions.
TEST_F(ReferenceTest, SpecFilesLoadTheSame) {
  for (const auto& entry : fs::directory_iterator(fs::path(DEVLET_CDI_TESTDATA) / "specs")) {
    fs::copy_file(entry.path(), dir_ / entry.path().filename());
  }
  const json peer = RunPeer({"-spec-dir", dir_.string()});
  const Registry registry = Registry::Load({dir_.string()});
  EXPECT_EQ(peer.at("devices").get<std::vector<std::string>>(), registry.DeviceNames());
  EXPECT_TRUE(peer.at("errors").empty()) << peer.at("errors").dump();
  EXPECT_TRUE(registry.errors().empty());
  for (const auto& [path, version] : peer.at("minVersions").items()) {
    ASSERT_OK_AND_ASSIGN(Spec spec, DecodeSpec(ReadFile(path)));
    EXPECT_EQ(ReferenceMinimumRequiredVersion(spec), version.get<std::string>()) << path;
  }
}

// Conflicts and broken files are reported against the same paths, and the same devices remain.
TEST_F(ReferenceTest, ConflictsAndErrorsMatch) {
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  };
  const std::string dev = R"({"name":"d","containerEdits":{"env":["A=1"]}})";
  write("a.json", R"({"cdiVersion":"0.3.0","kind":"v.com/c","devices":[)" + dev +
                      R"(,{"name":"e","containerEdits":{"env":["B=1"]}}]})");
  write("b.json", R"({"cdiVersion":"0.3.0","kind":"v.com/c","devices":[)" + dev + "]}");
  write("c.json", R"({"cdiVersion":"0.3.0","kind":"v.com/c","devices":[{"name":"0x","containerEdits":{"env":["A=1"]}}]})");
  write("d.yaml", "cdiVersion: 0.3.0\nkind: v.com/c\ndevices:\n- name: f\n  containerEdits: {}\n");
  write("e.json", R"({"cdiVersion":"0.3.0","kind":"v.com/c","devices":[],"bogus":1})");
  write("f.json", R"({"cdiVersion":"0.5.0","kind":"w.com/c","devices":[{"name":"g","containerEdits":{"env":["A=1"]}}]})");
  const json peer = RunPeer({"-spec-dir", dir_.string()});
  const Registry registry = Registry::Load({dir_.string()});
  EXPECT_EQ(peer.at("devices").get<std::vector<std::string>>(), registry.DeviceNames());
  std::vector<std::string> peer_paths;
  for (const auto& [path, errors] : peer.at("errors").items()) peer_paths.push_back(path);
  std::vector<std::string> our_paths;
  for (const auto& [path, errors] : registry.errors()) our_paths.push_back(path);
  EXPECT_EQ(peer_paths, our_paths) << peer.at("errors").dump(1);
}

// Several directories: the later one wins silently, and a conflict inside one directory removes
// the device even where another directory defines it too.
TEST_F(ReferenceTest, PrioritiesAcrossDirectoriesMatch) {
  auto write = [&](const std::string& dir, const std::string& name, const std::string& device,
                   const std::string& env) {
    fs::create_directories(dir_ / dir);
    std::ofstream(dir_ / dir / name)
        << R"({"cdiVersion":"0.3.0","kind":"v.com/c","devices":[{"name":")" + device +
               R"(","containerEdits":{"env":[")" + env + R"("]}}]})";
  };
  write("etc", "a.json", "x", "FROM=etc");
  write("run", "a.json", "x", "FROM=run");
  write("etc", "b.json", "y", "FROM=etc1");
  write("etc", "c.json", "y", "FROM=etc2");  // conflict at priority 0
  write("run", "d.json", "y", "FROM=run");   // ...still removed by the reference cache
  write("run", "e.json", "z", "FROM=run");
  write("etc", "f.json", "z", "FROM=etc");   // lower priority: ignored
  const std::string oci = (dir_ / "config.json").string();
  std::ofstream(oci) << R"({"ociVersion":"1.2.0","process":{"user":{"uid":0,"gid":0},"cwd":"/"}})";
  const json peer = RunPeer({"-spec-dir", (dir_ / "etc").string(), "-spec-dir",
                             (dir_ / "run").string(), "-oci", oci, "-devices", "v.com/c=x,v.com/c=z"});
  const Registry registry = Registry::Load({(dir_ / "etc").string(), (dir_ / "run").string()});
  EXPECT_EQ(peer.at("devices").get<std::vector<std::string>>(), registry.DeviceNames());
  std::vector<std::string> peer_paths;
  for (const auto& [path, errors] : peer.at("errors").items()) peer_paths.push_back(path);
  std::vector<std::string> our_paths;
  for (const auto& [path, errors] : registry.errors()) our_paths.push_back(path);
  EXPECT_EQ(peer_paths, our_paths) << peer.at("errors").dump(1);
  ASSERT_OK_AND_ASSIGN(ContainerEdits edits, registry.Resolve({"v.com/c=x", "v.com/c=z"}));
  ASSERT_OK_AND_ASSIGN(std::string ours, InjectEdits(peer.at("input").dump(), edits));
  EXPECT_EQ(json::parse(ours), peer.at("output"));
}

}  // namespace
}  // namespace devlet::cdi
