#include "devlet/dra_kubelet/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "devlet/common/testing/status_matchers.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kDriver[] = "gpu.devlet.test";

std::string Params(const std::string& body) {
  return R"({"apiVersion":"devlet.io/v1alpha1","kind":"DeviceConfig")" +
         (body.empty() ? "" : "," + body) + "}";
}

AllocationConfig Entry(ConfigSource source, std::vector<std::string> requests, std::string params,
                       std::string driver = kDriver) {
  return {source, std::move(requests), std::move(driver), std::move(params)};
}

TEST(DecodeDeviceConfig, Strict) {
  absl::StatusOr<DeviceConfig> config = DecodeDeviceConfig(Params(R"("env":{"A":"1"},"bindDriver":"vfio-pci")"));
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->env.at("A"), "1");
  EXPECT_EQ(config->bind_driver, "vfio-pci");

  EXPECT_THAT(DecodeDeviceConfig(Params(R"("envv":{})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown field \"envv\"")));
  EXPECT_THAT(DecodeDeviceConfig(Params(R"("env":{"A":1})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("env.A must be a string")));
  EXPECT_THAT(DecodeDeviceConfig(Params(R"("env":{"1A":"x"})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a valid environment")));
  EXPECT_THAT(DecodeDeviceConfig(R"({"apiVersion":"devlet.io/v2","kind":"DeviceConfig"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("apiVersion must be")));
  EXPECT_THAT(DecodeDeviceConfig(R"({"env":{}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("are required")));
  EXPECT_THAT(DecodeDeviceConfig("[1]"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  HasSubstr("must be a JSON object")));
  EXPECT_THAT(DecodeDeviceConfig("nul"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  HasSubstr("not valid JSON")));
}

// Found by fuzz/device_config_fuzzer (its input is in fuzz/corpus/device_config_fuzzer/): a NUL
// in an env name reached the error raw. What the input said is quoted, escaped and cut short.
TEST(DecodeDeviceConfig, ErrorsQuoteTheInputEscapedAndShort) {
  EXPECT_THAT(DecodeDeviceConfig(Params(R"("env":{"CUDA_VISI\u0000BLE":"0"})")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(R"(env name "CUDA_VISI\x00BLE" is not a valid)")));
  EXPECT_THAT(DecodeDeviceConfig(Params(R"("en\nv":{})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(R"(unknown field "en\nv")")));
  EXPECT_THAT(DecodeDeviceConfig(R"({"apiVersion":"devlet.io/v2","kind":"DeviceConfig"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(R"(got "devlet.io/v2")")));
  std::string huge = "[";
  for (int i = 0; i < 20000; ++i) huge += "\"a\",";
  huge += "\"a\"]";
  absl::StatusOr<DeviceConfig> long_version =
      DecodeDeviceConfig(R"({"apiVersion":)" + huge + R"(,"kind":"DeviceConfig"})");
  ASSERT_THAT(long_version, StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr(R"(got ["a","a",)")));
  EXPECT_LT(long_version.status().message().size(), 200u);
}

TEST(DecodeDeviceConfig, RoundTrip) {
  DeviceConfig config;
  config.env = {{"A", "x y"}, {"B", "\"q\""}};
  config.bind_driver = "vfio-pci";
  EXPECT_THAT(DecodeDeviceConfig(EncodeDeviceConfig(config)),
              ::devlet::testing::IsOkAndHolds(config));
}

TEST(ConfigApplies, RequestsAndSubrequests) {
  EXPECT_TRUE(ConfigApplies({}, "gpu"));
  EXPECT_TRUE(ConfigApplies({"gpu"}, "gpu/large"));
  EXPECT_TRUE(ConfigApplies({"gpu/large"}, "gpu/large"));
  EXPECT_FALSE(ConfigApplies({"gpu/small"}, "gpu/large"));
  EXPECT_FALSE(ConfigApplies({"nic"}, "gpu"));
}

TEST(ResolveDeviceConfig, ClassBeforeClaimWhateverTheListOrder) {
  std::vector<AllocationConfig> entries = {
      Entry(ConfigSource::kFromClaim, {"gpu"}, Params(R"("env":{"MODE":"claim"})")),
      Entry(ConfigSource::kFromClass, {}, Params(R"("env":{"MODE":"class","FROM":"class"},"bindDriver":"vfio-pci")")),
      Entry(ConfigSource::kFromClaim, {}, "not json at all", "other.example.com"),
      Entry(ConfigSource::kFromClaim, {"nic"}, Params(R"("env":{"NIC":"1"})")),
  };
  absl::StatusOr<DeviceConfig> gpu = ResolveDeviceConfig(entries, kDriver, "gpu/large");
  ASSERT_THAT(gpu, IsOk());
  EXPECT_EQ(gpu->env.at("MODE"), "claim");
  EXPECT_EQ(gpu->env.at("FROM"), "class");
  EXPECT_EQ(gpu->env.count("NIC"), 0u);
  EXPECT_EQ(gpu->bind_driver, "vfio-pci");
}

TEST(ResolveDeviceConfig, HostLevelSettingsOnlyFromTheClass) {
  std::vector<AllocationConfig> entries = {
      Entry(ConfigSource::kFromClaim, {}, Params(R"("bindDriver":"vfio-pci")"))};
  EXPECT_THAT(ResolveDeviceConfig(entries, kDriver, "gpu"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("config[0] (from the claim) sets bindDriver")));
}

TEST(ResolveDeviceConfig, BadEntryNamesIndexAndRequest) {
  std::vector<AllocationConfig> entries = {
      Entry(ConfigSource::kFromClass, {}, Params("")),
      Entry(ConfigSource::kFromClass, {}, R"({"kind":"Other"})")};
  EXPECT_THAT(ResolveDeviceConfig(entries, kDriver, "gpu"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config[1] (from the DeviceClass) for request \"gpu\"")));
}

}  // namespace
}  // namespace devlet::dra_kubelet
