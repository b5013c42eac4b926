#include "devlet/common/log.h"

#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace devlet::log {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetSinkForTest([this](std::string_view record) { records_.emplace_back(record); });
  }

  void TearDown() override {
    SetSinkForTest(nullptr);
    Configure(Options{});
  }

  std::vector<std::string> records_;
};

TEST_F(LogTest, TextRecordHasKlogHeaderQuotedMessageAndPairs) {
  Configure(Options{.format = Format::kText, .verbosity = 0});
  Logger().With("claim", "ns/c").Info("Prepared \"claim\"", "devices", 2, "vm", true);
  ASSERT_EQ(records_.size(), 1u);
  const std::regex klog(
      R"(^I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ log_test\.cc:\d+\] "Prepared \\"claim\\"" )"
      R"(claim="ns/c" devices=2 vm=true$)");
  EXPECT_TRUE(std::regex_match(records_[0], klog)) << records_[0];
}

TEST_F(LogTest, VerbosityGatesInfoButNotErrors) {
  Configure(Options{.format = Format::kText, .verbosity = 2});
  const Logger logger;
  logger.V(2).Info("shown");
  logger.V(3).Info("hidden");
  logger.V(9).Error(absl::InternalError("boom"), "failed");
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_THAT(records_[0], HasSubstr("\"shown\""));
  EXPECT_THAT(records_[1], HasSubstr("\"failed\" err=\"boom\""));
  EXPECT_EQ(records_[1][0], 'E');
}

TEST_F(LogTest, JsonRecordIsOneObjectWithTypedValues) {
  Configure(Options{.format = Format::kJson, .verbosity = 4});
  Logger().V(4).Info("decision", "node", "n1", "score", 7, "ratio", 0.5);
  Logger().Error(absl::NotFoundError("no claim"), "lookup");
  ASSERT_EQ(records_.size(), 2u);
  const auto info = nlohmann::json::parse(records_[0]);
  EXPECT_EQ(info["msg"], "decision");
  EXPECT_EQ(info["v"], 4);
  EXPECT_EQ(info["node"], "n1");
  EXPECT_EQ(info["score"], 7);
  EXPECT_EQ(info["ratio"], 0.5);
  EXPECT_THAT(info["caller"].get<std::string>(), HasSubstr("log_test.cc:"));
  const auto error = nlohmann::json::parse(records_[1]);
  EXPECT_EQ(error["err"], "no claim");
}

TEST_F(LogTest, DisabledLoggerWritesNothing) {
  Configure(Options{.format = Format::kText, .verbosity = 0});
  Logger().V(1).Info("quiet");
  EXPECT_THAT(records_, IsEmpty());
  EXPECT_FALSE(Logger().V(1).Enabled());
  EXPECT_TRUE(Logger().Enabled());
}

TEST_F(LogTest, ControlCharactersAreEscaped) {
  Logger().Info("line\nbreak", "k", "tab\there");
  EXPECT_THAT(records_, ElementsAre(HasSubstr(R"("line\nbreak" k="tab\there")")));
}

}  // namespace
}  // namespace devlet::log
