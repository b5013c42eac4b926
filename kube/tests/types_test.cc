#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/core.h"
#include "devlet/kube/meta.h"
#include "devlet/kube/quantity.h"
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

TEST(QuantityTest, ExactValues) {
  auto value = [](std::string_view text) { return QuantityValue(Quantity::Parse(text).value()); };
  auto milli = [](std::string_view text) { return QuantityMilliValue(Quantity::Parse(text).value()); };
  using ::devlet::testing::IsOkAndHolds;
  EXPECT_THAT(value("1.5Gi"), IsOkAndHolds(1610612736));
  EXPECT_THAT(value("8Gi"), IsOkAndHolds(int64_t{8} << 30));
  EXPECT_THAT(value("1M"), IsOkAndHolds(1000000));
  EXPECT_THAT(value("2e3"), IsOkAndHolds(2000));
  EXPECT_THAT(value("1.5"), IsOkAndHolds(2));   // rounded up, like Go's Value()
  EXPECT_THAT(value("100m"), IsOkAndHolds(1));
  EXPECT_THAT(value("-1.5"), IsOkAndHolds(-2));  // away from zero
  EXPECT_THAT(value("0.000"), IsOkAndHolds(0));
  EXPECT_THAT(QuantityValue(Quantity()), IsOkAndHolds(0));
  EXPECT_THAT(milli("100m"), IsOkAndHolds(100));
  EXPECT_THAT(milli("1.5"), IsOkAndHolds(1500));
  EXPECT_THAT(milli("4"), IsOkAndHolds(4000));
  EXPECT_THAT(milli("1u"), IsOkAndHolds(1));
  EXPECT_THAT(milli("0.1234"), IsOkAndHolds(124));
  // A value a long double rounds: 2^53 + 1 bytes, and 1Ei - 1 exactly.
  EXPECT_THAT(value("9007199254740993"), IsOkAndHolds(int64_t{9007199254740993}));
  EXPECT_THAT(value("1152921504606846975"), IsOkAndHolds(int64_t{1152921504606846975}));
  EXPECT_THAT(value("7.5Ei"), IsOkAndHolds(int64_t{8646911284551352320}));
}

TEST(QuantityTest, ValuesAtTheInt64Bounds) {
  auto value = [](std::string_view text) { return QuantityValue(Quantity::Parse(text).value()); };
  auto milli = [](std::string_view text) { return QuantityMilliValue(Quantity::Parse(text).value()); };
  using ::devlet::testing::IsOkAndHolds;
  EXPECT_THAT(value("9223372036854775807"), IsOkAndHolds(INT64_MAX));
  EXPECT_THAT(value("-9223372036854775808"), IsOkAndHolds(INT64_MIN));
  EXPECT_THAT(value("9223372036854775808"),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("\"9223372036854775808\"")));
  EXPECT_THAT(value("-9223372036854775809"), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(value("9223372036854775806.5"), IsOkAndHolds(INT64_MAX));
  EXPECT_THAT(value("9223372036854775807.5"), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(value("8Ei"), StatusIs(absl::StatusCode::kOutOfRange));  // 2^63
  EXPECT_THAT(value("-8Ei"), IsOkAndHolds(INT64_MIN));
  EXPECT_THAT(value("1e19"), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(value("1e1000000"), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(milli("9223372036854775807m"), IsOkAndHolds(INT64_MAX));
  EXPECT_THAT(milli("9223372036854775.807"), IsOkAndHolds(INT64_MAX));
  EXPECT_THAT(milli("9223372036854776"),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("10^3")));
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
