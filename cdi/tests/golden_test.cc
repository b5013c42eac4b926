// Data-driven apply cases: tests/testdata/apply/*.json. Each case holds CDI specs, the device
// names to inject, an OCI spec, and either the expected OCI spec or an expected error. Cases
// with "hostDevices" use that table instead of lstat(2); the others use the real /dev and are
// also run against the reference Go library (integration/cdi).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

json ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return json::parse(buffer.str());
}

TEST(GoldenApplyTest, Cases) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("tests/testdata/apply")) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    SCOPED_TRACE(entry.path().string());
    const json c = ReadJson(entry.path());
    Registry registry;
    int i = 0;
    for (const json& spec_json : c.at("specs")) {
      ASSERT_OK_AND_ASSIGN(Spec spec, DecodeSpec(spec_json.dump()));
      registry.Add("spec" + std::to_string(i++) + ".json", 0, spec);
    }
    ASSERT_TRUE(registry.errors().empty());
    DeviceStat stat;
    if (c.contains("hostDevices")) {
      const json table = c.at("hostDevices");
      stat = [table](const std::string& path) -> absl::StatusOr<HostDeviceInfo> {
        if (!table.contains(path)) return NotFound("lstat \"" + path + "\": no such file");
        const json& d = table.at(path);
        return HostDeviceInfo{d.at("type"), d.at("major"), d.at("minor"), d.at("mode")};
      };
    }
    absl::StatusOr<ContainerEdits> edits =
        registry.Resolve(c.at("devices").get<std::vector<std::string>>());
    absl::StatusOr<std::string> result =
        edits.ok() ? InjectEdits(c.at("oci").dump(), *edits, stat)
                   : absl::StatusOr<std::string>(edits.status());
    if (c.contains("error")) {
      ASSERT_FALSE(result.ok());
      EXPECT_THAT(Message(result.status()), ::testing::HasSubstr(c.at("error").get<std::string>()));
    } else {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(json::parse(*result), c.at("expected")) << json::parse(*result).dump(1);
    }
  }
  EXPECT_GE(count, 8);
}

}  // namespace
}  // namespace devlet::cdi
