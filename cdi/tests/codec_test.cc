#include "devlet/cdi/codec.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "devlet/cdi/edits_json.h"
#include "devlet/common/testing/status_matchers.h"

namespace devlet::cdi {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Every JSON file under testdata/specs decodes, validates, and re-encodes to the same JSON.
TEST(CodecTest, JsonRoundTrip) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("tests/testdata/specs")) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    const std::string text = ReadTestFile(entry.path());
    ASSERT_OK_AND_ASSIGN(Spec spec, DecodeSpec(text));
    EXPECT_THAT(ValidateSpec(spec), IsOk()) << entry.path();
    EXPECT_EQ(nlohmann::json::parse(EncodeSpecJson(spec)), nlohmann::json::parse(text))
        << entry.path();
    ASSERT_OK_AND_ASSIGN(Spec again, DecodeSpec(EncodeSpecJson(spec)));
    EXPECT_EQ(again, spec);
  }
  EXPECT_GE(count, 3);
}

TEST(CodecTest, FullSpecFields) {
  ASSERT_OK_AND_ASSIGN(Spec spec, DecodeSpec(ReadTestFile("tests/testdata/specs/full.json")));
  ASSERT_EQ(spec.devices.size(), 1u);
  const ContainerEdits& e = spec.devices[0].container_edits;
  ASSERT_EQ(e.device_nodes.size(), 1u);
  EXPECT_EQ(e.device_nodes[0].file_mode, 0666u);
  EXPECT_EQ(e.device_nodes[0].uid, 0u);  // present zero is not absent
  EXPECT_EQ(e.device_nodes[0].gid, 44u);
  EXPECT_EQ(e.hooks[0].timeout, 5);
  EXPECT_EQ(e.intel_rdt->schemata, std::vector<std::string>{"L2:0=3"});
  EXPECT_EQ(MinimumRequiredVersion(spec), "1.1.0");
}

TEST(CodecTest, OmitsEmptyOptionalFields) {
  Spec spec{.version = "0.3.0", .kind = "v/c"};
  spec.devices.push_back({.name = "d", .container_edits = {.device_nodes = {{.path = "/dev/x"}}}});
  EXPECT_EQ(EncodeSpecJson(spec),
            "{\"cdiVersion\":\"0.3.0\",\"devices\":[{\"containerEdits\":{\"deviceNodes\":"
            "[{\"path\":\"/dev/x\"}]},\"name\":\"d\"}],\"kind\":\"v/c\"}\n");
}

TEST(CodecTest, YamlMatchesReferenceTyping) {
  ASSERT_OK_AND_ASSIGN(Spec spec, DecodeSpec(ReadTestFile("tests/testdata/specs/nvidia.yaml")));
  EXPECT_THAT(ValidateSpec(spec), IsOk());
  EXPECT_EQ(spec.version, "0.5.0");
  ASSERT_EQ(spec.devices.size(), 2u);
  EXPECT_EQ(spec.devices[0].name, "0");
  EXPECT_EQ(spec.devices[0].container_edits.device_nodes[0].major, 195);
  EXPECT_EQ(spec.devices[0].container_edits.device_nodes[0].file_mode, 0666u);
  EXPECT_EQ(spec.container_edits.hooks[0].args,
            (std::vector<std::string>{"nvidia-cdi-hook", "update-ldcache"}));
  EXPECT_EQ(spec.container_edits.hooks[0].timeout, 10);
  EXPECT_EQ(spec.container_edits.mounts[0].options.size(), 4u);
}

// Found by cdi_spec_fuzzer: YAML with invalid UTF-8 decoded, and encoding it threw (terminate).
TEST(CodecTest, InvalidUtf8) {
  EXPECT_THAT(DecodeSpec("cdiVersion: 0.3.0\nkind: v/c\ndevices:\n- name: \"a\xff\"\n"
                         "  containerEdits: {env: [A=1]}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid UTF-8")));
  Spec spec;
  spec.version = "0.3.0";
  spec.kind = "v/c";
  spec.devices.push_back(Device{.name = "a\xff"});
  EXPECT_THAT(EncodeSpecJson(spec), HasSubstr("\"a\xef\xbf\xbd\""));  // U+FFFD
}

TEST(CodecTest, BadInputNamesTheField) {
  std::ifstream cases("tests/testdata/bad/cases.txt");
  std::string line;
  int count = 0;
  while (std::getline(cases, line)) {
    if (line.empty()) continue;
    const size_t bar = line.find('|');
    const std::string file = line.substr(0, bar);
    const std::string message = line.substr(bar + 1);
    ++count;
    EXPECT_THAT(DecodeSpec(ReadTestFile("tests/testdata/bad/" + file)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)))
        << file;
  }
  EXPECT_GE(count, 9);
}

TEST(CodecTest, GarbageNeverCrashes) {
  for (std::string input : {"", "   ", "null", "[]", "{", "\x01\x02", "- a\n- b", "{\"devices\":3}",
                            "{\"devices\":[3]}", "{\"kind\":{}}", "cdiVersion: {a: b}"}) {
    EXPECT_FALSE(DecodeSpec(input).ok()) << input;
  }
}

// A containerEdits block on its own (as state/ records a prepared device's resolved edits) comes
// back equal; a wrong type is refused naming the field below the caller's path.
TEST(CodecTest, ContainerEditsJsonRoundTrip) {
  ContainerEdits edits;
  edits.env = {"A=1"};
  edits.device_nodes.push_back({.path = "/dev/vfio/12", .host_path = "/sim/dev/vfio/12"});
  edits.mounts.push_back({.host_path = "/h", .container_path = "/c", .options = {"ro", "bind"}});
  edits.hooks.push_back({.hook_name = "createContainer", .path = "/bin/true", .args = {"true"}});
  edits.additional_gids = {44};
  nlohmann::json j = EncodeContainerEditsJson(edits);
  ASSERT_OK_AND_ASSIGN(ContainerEdits back, DecodeContainerEditsJson(j, "edits"));
  EXPECT_EQ(back, edits);
  EXPECT_THAT(DecodeContainerEditsJson(nlohmann::json::parse(R"({"env":[3]})"), "devices[0].edits"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices[0].edits.env")));
  EXPECT_THAT(DecodeContainerEditsJson(nlohmann::json::parse(R"({"bogus":1})"), "edits"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bogus")));
}

}  // namespace
}  // namespace devlet::cdi
