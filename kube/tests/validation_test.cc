#include "devlet/kube/validation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace devlet::kube {
namespace {

using ::devlet::kube::testing::ReadTestData;
using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

constexpr char kExpectAnnotation[] = "devlet.test/expect";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    if (end > start)
      lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

class ValidationFileTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ValidationFileTest, ReportsExactlyTheExpectedErrors) {
  ASSERT_OK_AND_ASSIGN(std::vector<Object> objects,
                       Decode(ReadTestData(std::string("validation/") + GetParam())));
  ASSERT_FALSE(objects.empty());
  for (const Object& object : objects) {
    SCOPED_TRACE(Describe(object));
    const auto& annotations = MetadataOf(object).annotations;
    auto it = annotations.find(kExpectAnnotation);
    const std::vector<std::string> expected =
        it == annotations.end() ? std::vector<std::string>{} : Lines(it->second);
    std::vector<std::string> actual;
    for (const FieldError& error : ValidateObject(object))
      actual.push_back(error.ToString());
    EXPECT_THAT(actual, UnorderedElementsAreArray(expected));
    EXPECT_EQ(Validate(object).ok(), expected.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Files, ValidationFileTest,
                         ::testing::Values("claims.yaml", "slices.yaml", "more.yaml",
                                           "classes_and_rules.yaml"));

TEST(ValidationTest, TestDataObjectsAreValid) {
  for (const char* file : {"slice_v1.yaml", "claim_v1.yaml", "cluster.yaml", "list.json"}) {
    SCOPED_TRACE(file);
    ASSERT_OK_AND_ASSIGN(std::vector<Object> objects, Decode(ReadTestData(file)));
    for (const Object& object : objects) {
      EXPECT_THAT(Validate(object), IsOk()) << Describe(object);
    }
  }
}

TEST(ValidationTest, StatusMessageLikeTheApiServer) {
  ResourceClaim claim;
  claim.metadata.name = "gpu";
  DeviceRequest request;
  request.name = "r";
  request.exactly.emplace();
  request.exactly->device_class_name = "c";
  request.exactly->allocation_mode = "ExactCount";
  request.exactly->count = 0;
  claim.spec.devices.requests.push_back(request);
  EXPECT_THAT(Validate(claim),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "ResourceClaim.resource.k8s.io \"gpu\" is invalid: "
                       "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater "
                       "than zero"));
  claim.spec.devices.requests[0].exactly->device_class_name = "";
  EXPECT_THAT(Validate(claim),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "ResourceClaim.resource.k8s.io \"gpu\" is invalid: ["
                       "spec.devices.requests[0].exactly.deviceClassName: Required value, "
                       "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater "
                       "than zero]"));
  Node node;
  node.metadata.name = "Bad Node";
  EXPECT_THAT(Validate(node), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("Node \"Bad Node\" is invalid: metadata.name")));
}

TEST(ValidationTest, Limits) {
  ResourceClaim claim;
  claim.metadata.name = "big";
  for (int i = 0; i < 33; ++i) {
    DeviceRequest request;
    request.name = "r" + std::to_string(i);
    request.exactly.emplace();
    request.exactly->device_class_name = "c";
    request.exactly->allocation_mode = "ExactCount";
    request.exactly->count = 1;
    claim.spec.devices.requests.push_back(request);
  }
  FieldErrors errors = ValidateResourceClaim(claim);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "spec.devices.requests: Too many: 33: must have at most 32 items");

  claim.spec.devices.requests.resize(1);
  auto& sub = claim.spec.devices.requests[0];
  sub.exactly.reset();
  for (int i = 0; i < 9; ++i) {
    DeviceSubRequest s;
    s.name = "s" + std::to_string(i);
    s.device_class_name = "c";
    s.allocation_mode = "ExactCount";
    s.count = 1;
    sub.first_available.push_back(s);
  }
  errors = ValidateResourceClaim(claim);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "spec.devices.requests[0].firstAvailable: Too many: 9: must have at most 8 items");

  ResourceSlice slice;
  slice.metadata.name = "s";
  slice.spec.driver = "d.example.com";
  slice.spec.pool = {"p", 0, 1};
  slice.spec.all_nodes = true;
  for (int i = 0; i < 65; ++i) {
    Device device;
    device.name = "d" + std::to_string(i);
    if (i == 0)
      device.taints.push_back(DeviceTaint{"k", "", "NoSchedule", std::nullopt});
    slice.spec.devices.push_back(device);
  }
  errors = ValidateResourceSlice(slice);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(), "spec.devices: Too many: 65: must have at most 64 items");
  slice.spec.devices[0].taints.clear();
  EXPECT_TRUE(ValidateResourceSlice(slice).empty());

  Device& device = slice.spec.devices[0];
  for (int i = 0; i < 33; ++i)
    device.attributes["a" + std::to_string(i)].int_value = i;
  errors = ValidateResourceSlice(slice);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "spec.devices[0]: Invalid value: 33: the total number of attributes and capacities "
            "must not exceed 32");

  DeviceClass cls;
  cls.metadata.name = "c";
  cls.spec.selectors.push_back(DeviceSelector{CELDeviceSelector{std::string(10 * 1024 + 1, 'x')}});
  errors = ValidateDeviceClass(cls);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(),
            "spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes");
}

TEST(ValidationTest, NodeSelector) {
  NodeSelector selector;
  EXPECT_EQ(ValidateNodeSelector(selector, "spec.nodeSelector")[0].ToString(),
            "spec.nodeSelector.nodeSelectorTerms: Required value: must have at least one node "
            "selector term");
  selector.node_selector_terms.push_back(
      NodeSelectorTerm{{NodeSelectorRequirement{"zone", "In", {}}},
                       {NodeSelectorRequirement{"metadata.name", "In", {"a", "b"}}}});
  std::vector<std::string> messages;
  for (const auto& e : ValidateNodeSelector(selector, "x"))
    messages.push_back(e.ToString());
  EXPECT_THAT(messages,
              ::testing::ElementsAre(
                  "x.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be "
                  "specified when `operator` is 'In' or 'NotIn'",
                  "x.nodeSelectorTerms[0].matchFields[0].values: Required value: must be only one "
                  "value when `operator` is 'In' or 'NotIn' for node field selector"));
}

TEST(NameRulesTest, Messages) {
  EXPECT_TRUE(IsDNS1123Label("gpu-0").empty());
  EXPECT_THAT(IsDNS1123Label("a.b"), ::testing::ElementsAre("must not contain dots"));
  EXPECT_THAT(IsDNS1123Label(std::string(64, 'a')),
              ::testing::ElementsAre("must be no more than 63 bytes"));
  EXPECT_TRUE(IsDNS1123Subdomain("gpu.example.com").empty());
  EXPECT_FALSE(IsDNS1123Subdomain("-gpu.example.com").empty());
  EXPECT_FALSE(IsDNS1123Subdomain("gpu..example.com").empty());
  EXPECT_TRUE(IsCIdentifier("_model1").empty());
  EXPECT_FALSE(IsCIdentifier("1model").empty());
  EXPECT_TRUE(IsLabelKey("example.com/My.key_1").empty());
  EXPECT_THAT(IsLabelKey("/a"), ::testing::ElementsAre("prefix part must be non-empty"));
  EXPECT_TRUE(IsLabelValue("").empty());
  EXPECT_FALSE(IsLabelValue("-a").empty());
}

}  // namespace
}  // namespace devlet::kube
