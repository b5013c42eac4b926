#include "devlet/cdi/edits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"

namespace devlet::cdi {
namespace {

using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

DeviceStat FakeStat() {
  return [](const std::string& path) -> absl::StatusOr<HostDeviceInfo> {
    if (path == "/dev/vfio/42") return HostDeviceInfo{"c", 243, 0, 0600};
    if (path == "/dev/vfio/vfio") return HostDeviceInfo{"c", 10, 196, 0666};
    return NotFound("lstat \"" + path + "\": no such file or directory");
  };
}

// The neutral adjustment is what the NRI plugin maps; check every field once.
TEST(PlanEditsTest, NeutralAdjustment) {
  ContainerEdits edits{
      .env = {"A=1"},
      .device_nodes = {{.path = "/dev/vfio/vfio", .permissions = "rw"},
                       {.path = "/dev/vfio/42", .gid = 3}},
      .net_devices = {{"eth1", "net1"}},
      .hooks = {{.hook_name = "createRuntime", .path = "/bin/h", .timeout = 2}},
      .mounts = {{.host_path = "/h", .container_path = "/c", .options = {"bind"}}},
      .intel_rdt = IntelRdt{.clos_id = "c"},
      .additional_gids = {0, 4},
  };
  EditContext context{.process_uid = 1000, .idmapped_user_namespace = true, .stat = FakeStat()};
  ASSERT_OK_AND_ASSIGN(ContainerAdjustment a, PlanEdits(edits, context));
  EXPECT_THAT(a.env, ElementsAre("A=1"));
  EXPECT_THAT(a.devices,
              ElementsAre(LinuxDevice{"/dev/vfio/vfio", "c", 10, 196, 0666, 1000, std::nullopt},
                          LinuxDevice{"/dev/vfio/42", "c", 243, 0, 0600, 1000, 3}));
  EXPECT_THAT(a.device_cgroup_rules, ElementsAre(DeviceCgroupRule{true, "c", 10, 196, "rw"},
                                                 DeviceCgroupRule{true, "c", 243, 0, "rwm"}));
  EXPECT_THAT(a.net_devices, ElementsAre(NetDevice{"eth1", "net1"}));
  EXPECT_THAT(a.hooks.create_runtime, ElementsAre(OciHook{"/bin/h", {}, {}, 2}));
  EXPECT_TRUE(a.hooks.prestart.empty());
  EXPECT_THAT(a.mounts, ElementsAre(OciMount{"/c", "", "/h", {"bind", "idmap"}}));
  EXPECT_EQ(a.intel_rdt->clos_id, "c");
  EXPECT_THAT(a.additional_gids, ElementsAre(4u));
}

TEST(PlanEditsTest, Errors) {
  EXPECT_THAT(PlanEdits({.env = {"NOEQUALS"}}, {.stat = FakeStat()}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("env[0]")));
  EXPECT_THAT(PlanEdits({.device_nodes = {{.path = "/dev/gone"}}}, {.stat = FakeStat()}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("/dev/gone")));
  EXPECT_THAT(PlanEdits({.device_nodes = {{.path = "/dev/vfio/42", .type = "b"}}},
                        {.stat = FakeStat()}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("does not match")));
}

TEST(OciSpecTest, ContextAndBadInput) {
  ASSERT_OK_AND_ASSIGN(EditContext c,
                       ContextFromOciSpec(R"({"process":{"user":{"uid":5,"gid":6}},
                         "linux":{"namespaces":[{"type":"user"}],"uidMappings":[{}]}})"));
  EXPECT_EQ(c.process_uid, 5u);
  EXPECT_EQ(c.process_gid, 6u);
  EXPECT_FALSE(c.idmapped_user_namespace);  // no gidMappings
  EXPECT_THAT(ContextFromOciSpec("{"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ContextFromOciSpec("[]"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ContextFromOciSpec(R"({"process":{"user":{"uid":"x"}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ApplyToOciSpec("nope", {}), StatusIs(absl::StatusCode::kInvalidArgument));
  // Unknown fields of the OCI spec survive.
  ASSERT_OK_AND_ASSIGN(std::string out,
                       ApplyToOciSpec(R"({"annotations":{"a":"b"},"x":1})", {.env = {"A=1"}}));
  EXPECT_EQ(out, R"({"annotations":{"a":"b"},"process":{"env":["A=1"]},"x":1})");
}

}  // namespace
}  // namespace devlet::cdi
