#include <map>
#include <string>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/core.h"
#include "devlet/kube/meta.h"
#include "devlet/kube/resource.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::kube {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

TEST(QuantityTest, AcceptsKubernetesFormats) {
  for (const char* text :
       {"1", "0", "-1", "+1", "1.5", ".5", "5.", "100m", "1k", "80Gi", "1Ei", "1e3", "100u", "5n",
        "1E-3", "2.5e+2", "0.000001", "123456789012345678901234567890"}) {
    EXPECT_TRUE(Quantity::IsValidFormat(text)) << text;
    ASSERT_OK_AND_ASSIGN(Quantity q, Quantity::Parse(text));
    EXPECT_EQ(q.str(), text);
  }
}

TEST(QuantityTest, RejectsGarbage) {
  for (const char* text : {"", " 1", "1 ", "abc", "1Gb", "1KiB", "1.2.3", "Gi", "-", ".", "1e",
                           "1e1.5", "1ki", "1U", "1mi", "0x10", "1Mi1", "--1"}) {
    EXPECT_FALSE(Quantity::IsValidFormat(text)) << text;
  }
  EXPECT_THAT(Quantity::Parse("8 GB"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"8 GB\"")));
}

TEST(QuantityTest, SignAndZero) {
  EXPECT_EQ(Quantity().str(), "0");
  EXPECT_EQ(Quantity().Sign(), 0);
  EXPECT_EQ(Quantity::Parse("0.000").value().Sign(), 0);
  EXPECT_EQ(Quantity::Parse("-0").value().Sign(), 0);
  EXPECT_EQ(Quantity::Parse("-1m").value().Sign(), -1);
  EXPECT_EQ(Quantity::Parse("0.1").value().Sign(), 1);
}

TEST(DeviceAttributeTest, Kind) {
  DeviceAttribute attribute;
  EXPECT_EQ(attribute.kind(), DeviceAttribute::Kind::kNone);
  attribute.version_value = "1.2.3";
  EXPECT_EQ(attribute.kind(), DeviceAttribute::Kind::kVersion);
  attribute.int_values = std::vector<int64_t>{1};
  EXPECT_EQ(attribute.NumSet(), 2);
}

NodeSelectorRequirement Req(std::string key, std::string op, std::vector<std::string> values) {
  return NodeSelectorRequirement{std::move(key), std::move(op), std::move(values)};
}

TEST(NodeSelectorTest, StandardSemantics) {
  const std::map<std::string, std::string> labels = {{"zone", "a"}, {"gpus", "8"}};
  auto match = [&](NodeSelectorTerm term) {
    return MatchesNodeLabels(NodeSelector{{std::move(term)}}, "node-1", labels);
  };
  EXPECT_TRUE(match({{Req("zone", "In", {"a", "b"})}, {}}));
  EXPECT_FALSE(match({{Req("zone", "In", {"b"})}, {}}));
  EXPECT_TRUE(match({{Req("missing", "NotIn", {"x"})}, {}}));
  EXPECT_FALSE(match({{Req("zone", "NotIn", {"a"})}, {}}));
  EXPECT_TRUE(match({{Req("zone", "Exists", {})}, {}}));
  EXPECT_TRUE(match({{Req("missing", "DoesNotExist", {})}, {}}));
  EXPECT_TRUE(match({{Req("gpus", "Gt", {"4"})}, {}}));
  EXPECT_FALSE(match({{Req("gpus", "Lt", {"4"})}, {}}));
  EXPECT_FALSE(match({{Req("zone", "Gt", {"4"})}, {}}));  // label not an integer
  EXPECT_FALSE(match({{Req("gpus", "Gt", {"x"})}, {}}));  // invalid requirement
  EXPECT_FALSE(match({{Req("zone", "In", {})}, {}}));     // invalid requirement
  EXPECT_FALSE(match({{Req("zone", "Like", {"a"})}, {}}));
  EXPECT_FALSE(match({}));  // empty term matches nothing
  EXPECT_TRUE(match({{}, {Req("metadata.name", "In", {"node-1"})}}));
  EXPECT_TRUE(match({{}, {Req("metadata.name", "NotIn", {"node-2"})}}));
  EXPECT_FALSE(match({{}, {Req("metadata.name", "In", {"node-1", "node-2"})}}));
  EXPECT_FALSE(match({{}, {Req("metadata.uid", "In", {"node-1"})}}));
  EXPECT_FALSE(match({{Req("zone", "In", {"a"})}, {Req("metadata.name", "In", {"node-2"})}}));
  // Terms are ORed; an invalid term does not poison the others.
  NodeSelector selector{{NodeSelectorTerm{{Req("zone", "Bad", {})}, {}},
                         NodeSelectorTerm{{Req("zone", "In", {"a"})}, {}}}};
  EXPECT_TRUE(MatchesNodeLabels(selector, "node-1", labels));
  EXPECT_THAT(ValidateNodeSelectorRequirements(selector),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nodeSelectorTerms[0].matchExpressions[0]")));
  EXPECT_FALSE(MatchesNodeLabels(NodeSelector{}, "node-1", labels));
}

TEST(DeviceTaintRuleTest, SelectorMatches) {
  EXPECT_TRUE(DeviceTaintSelectorMatches(std::nullopt, "d", "p", "x"));
  DeviceTaintSelector selector;
  selector.driver = "gpu.example.com";
  EXPECT_TRUE(DeviceTaintSelectorMatches(selector, "gpu.example.com", "p", "x"));
  selector.device = "gpu-1";
  EXPECT_FALSE(DeviceTaintSelectorMatches(selector, "gpu.example.com", "p", "gpu-0"));
}

}  // namespace
}  // namespace devlet::kube
