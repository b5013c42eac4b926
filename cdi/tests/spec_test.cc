#include "devlet/cdi/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "devlet/common/testing/status_matchers.h"

namespace devlet::cdi {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

Spec Minimal() {
  Spec spec;
  spec.version = "0.3.0";
  spec.kind = "vendor.com/gpu";
  spec.devices.push_back({.name = "gpu0", .container_edits = {.env = {"A=1"}}});
  return spec;
}

TEST(VersionTest, Known) {
  for (const char* v : {"0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0",
                        "1.0.0", "1.1.0", "v1.1.0"}) {
    EXPECT_TRUE(IsKnownVersion(v)) << v;
  }
  for (const char* v : {"", "1.2.0", "0.9.0", "1.0", "vv1.0.0"}) {
    EXPECT_FALSE(IsKnownVersion(v)) << v;
  }
  EXPECT_LT(CompareVersions("0.5.0", "0.7.0"), 0);
  EXPECT_GT(CompareVersions("1.1.0", "v1.0.0"), 0);
  EXPECT_EQ(CompareVersions("v0.6.0", "0.6.0"), 0);
}

TEST(VersionTest, MinimumRequiredVersionPredicates) {
  EXPECT_EQ(MinimumRequiredVersion(Minimal()), "0.3.0");

  Spec s = Minimal();
  s.devices[0].container_edits.mounts.push_back({.host_path = "/a", .container_path = "/b", .type = "bind"});
  EXPECT_EQ(MinimumRequiredVersion(s), "0.4.0");

  s = Minimal();
  s.devices[0].name = "0gpu";
  EXPECT_EQ(MinimumRequiredVersion(s), "0.5.0");
  s = Minimal();
  s.container_edits.device_nodes.push_back({.path = "/dev/x", .host_path = "/dev/y"});
  EXPECT_EQ(MinimumRequiredVersion(s), "0.5.0");

  s = Minimal();
  s.kind = "vendor.com/gpu.x";
  EXPECT_EQ(MinimumRequiredVersion(s), "0.6.0");
  s = Minimal();
  s.devices[0].annotations["a"] = "b";
  EXPECT_EQ(MinimumRequiredVersion(s), "0.6.0");
  s = Minimal();
  s.annotations["a"] = "b";
  EXPECT_EQ(MinimumRequiredVersion(s), "0.6.0");

  s = Minimal();
  s.devices[0].container_edits.additional_gids = {5};
  EXPECT_EQ(MinimumRequiredVersion(s), "0.7.0");
  s = Minimal();
  s.container_edits.intel_rdt = IntelRdt{};
  EXPECT_EQ(MinimumRequiredVersion(s), "0.7.0");

  s = Minimal();
  s.container_edits.intel_rdt = IntelRdt{.schemata = std::vector<std::string>{}};
  EXPECT_EQ(MinimumRequiredVersion(s), "1.1.0");  // present-but-empty counts
  s = Minimal();
  s.devices[0].container_edits.intel_rdt = IntelRdt{.enable_monitoring = true};
  EXPECT_EQ(MinimumRequiredVersion(s), "1.1.0");
  s = Minimal();
  s.devices[0].container_edits.net_devices.push_back({"eth1", "net1"});
  EXPECT_EQ(MinimumRequiredVersion(s), "1.1.0");
}

TEST(ValidateSpecTest, AcceptsMinimal) { EXPECT_THAT(ValidateSpec(Minimal()), IsOk()); }

TEST(ValidateSpecTest, RejectsWithFieldNames) {
  struct Case {
    const char* what;
    std::function<void(Spec&)> mutate;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"unknown version", [](Spec& s) { s.version = "2.0.0"; }, "cdiVersion: invalid version"},
      {"too old", [](Spec& s) { s.devices[0].name = "0x"; }, "must be at least v0.5.0"},
      {"no vendor", [](Spec& s) { s.kind = "gpu"; }, "kind: invalid vendor name: empty"},
      {"bad class", [](Spec& s) { s.kind = "v/-x"; }, "kind: invalid class name"},
      {"no devices", [](Spec& s) { s.devices.clear(); }, "at least one device"},
      {"dup device", [](Spec& s) { s.devices.push_back(s.devices[0]); }, "more than once"},
      {"empty edits", [](Spec& s) { s.devices[0].container_edits = {}; }, "empty device edits"},
      {"bad env", [](Spec& s) { s.devices[0].container_edits.env = {"=x"}; },
       "devices[0] (\"gpu0\").containerEdits: env[0]: invalid environment variable"},
      {"bad spec env", [](Spec& s) { s.container_edits.env = {"X"}; }, "containerEdits: env[0]"},
      {"node path", [](Spec& s) { s.devices[0].container_edits.device_nodes = {{}}; },
       "deviceNodes[0].path: empty"},
      {"node type",
       [](Spec& s) { s.devices[0].container_edits.device_nodes = {{.path = "/d", .type = "x"}}; },
       "invalid type \"x\""},
      {"node negative",
       [](Spec& s) { s.devices[0].container_edits.device_nodes = {{.path = "/d", .major = -1}}; },
       "negative device number"},
      {"node perms",
       [](Spec& s) {
         s.devices[0].container_edits.device_nodes = {{.path = "/d", .permissions = "rx"}};
       },
       "invalid permissions"},
      {"hook name",
       [](Spec& s) { s.devices[0].container_edits.hooks = {{.hook_name = "pre", .path = "/x"}}; },
       "hooks[0].hookName: invalid hook name"},
      {"hook path",
       [](Spec& s) { s.devices[0].container_edits.hooks = {{.hook_name = "prestart"}}; },
       "hooks[0].path: empty"},
      {"hook env",
       [](Spec& s) {
         s.devices[0].container_edits.hooks = {
             {.hook_name = "prestart", .path = "/x", .env = {"bad"}}};
       },
       "hooks[0].env[0]"},
      {"mount host",
       [](Spec& s) { s.devices[0].container_edits.mounts = {{.container_path = "/x"}}; },
       "mounts[0].hostPath: empty"},
      {"mount container",
       [](Spec& s) { s.devices[0].container_edits.mounts = {{.host_path = "/x"}}; },
       "mounts[0].containerPath: empty"},
      {"closid",
       [](Spec& s) {
         s.version = "0.7.0";
         s.devices[0].container_edits.intel_rdt = IntelRdt{.clos_id = "a/b"};
       },
       "intelRdt.closID"},
      {"net dup host",
       [](Spec& s) {
         s.version = "1.1.0";
         s.devices[0].container_edits.net_devices = {{"eth0", "a"}, {"eth0", "b"}};
       },
       "duplicate hostInterfaceName"},
      {"net dup name",
       [](Spec& s) {
         s.version = "1.1.0";
         s.devices[0].container_edits.net_devices = {{"eth0", "a"}, {"eth1", "a"}};
       },
       "duplicate name"},
      {"net empty",
       [](Spec& s) {
         s.version = "1.1.0";
         s.devices[0].container_edits.net_devices = {{"", "a"}};
       },
       "netDevices[0].hostInterfaceName: empty"},
  };
  for (const Case& c : cases) {
    Spec s = Minimal();
    c.mutate(s);
    EXPECT_THAT(ValidateSpec(s), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
  // closID "/" is the root class of service.
  Spec s = Minimal();
  s.version = "0.7.0";
  s.devices[0].container_edits.intel_rdt = IntelRdt{.clos_id = "/"};
  EXPECT_THAT(ValidateSpec(s), IsOk());
}

TEST(ContainerEditsTest, AppendAndEmpty) {
  ContainerEdits a{.env = {"A=1"}, .intel_rdt = IntelRdt{.clos_id = "a"}};
  ContainerEdits b{.env = {"B=2"}, .additional_gids = {3}};
  EXPECT_FALSE(a.IsEmpty());
  EXPECT_TRUE(ContainerEdits{}.IsEmpty());
  a.Append(b);
  EXPECT_EQ(a.env, (std::vector<std::string>{"A=1", "B=2"}));
  EXPECT_EQ(a.intel_rdt->clos_id, "a");
  a.Append(ContainerEdits{.intel_rdt = IntelRdt{.clos_id = "z"}});
  EXPECT_EQ(a.intel_rdt->clos_id, "z");
  EXPECT_EQ(a.additional_gids, (std::vector<std::uint32_t>{3}));
}

}  // namespace
}  // namespace devlet::cdi

namespace devlet::cdi {
namespace {

// The reference library only checks the last device's edits for `hostPath` and mount `type`.
TEST(VersionTest, ReferenceQuirk) {
  Spec s = Minimal();
  s.devices[0].container_edits.device_nodes.push_back({.path = "/dev/x", .host_path = "/dev/y"});
  s.devices.push_back({.name = "last", .container_edits = {.env = {"B=1"}}});
  EXPECT_EQ(MinimumRequiredVersion(s), "0.5.0");
  EXPECT_EQ(ReferenceMinimumRequiredVersion(s), "0.3.0");
  EXPECT_THAT(ValidateSpec(s), IsOk());  // the runtimes load it, so we do too
  std::swap(s.devices[0], s.devices[1]);
  EXPECT_EQ(ReferenceMinimumRequiredVersion(s), "0.5.0");
  s.devices[1].container_edits.device_nodes.clear();
  s.devices[0].container_edits.mounts.push_back({.host_path = "/a", .container_path = "/b", .type = "bind"});
  EXPECT_EQ(MinimumRequiredVersion(s), "0.4.0");
  EXPECT_EQ(ReferenceMinimumRequiredVersion(s), "0.3.0");
}

}  // namespace
}  // namespace devlet::cdi
