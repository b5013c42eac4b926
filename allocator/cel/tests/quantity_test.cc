// Quantity: hand-written cases for the rules that matter to selectors, then the golden file
// tests/data/quantity_golden.jsonl, produced by upstream resource.Quantity through
// integration/celdiff (`celdiff-oracle golden-quantity`): every parse, String(), AsInt64(),
// AsApproximateFloat64(), Sign(), Cmp(), Add() and Sub() result must agree exactly.
#include "devlet/cel/quantity.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace devlet::cel {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

Quantity Q(std::string_view text) {
  absl::StatusOr<Quantity> q = Quantity::Parse(text);
  EXPECT_TRUE(q.ok()) << text << ": " << q.status();
  return q.ok() ? *q : Quantity();
}

TEST(QuantityTest, ParsesTheKubernetesGrammar) {
  EXPECT_EQ(Q("1.5G").ToString(), "1500M");
  EXPECT_EQ(Q("1Gi").ToString(), "1Gi");
  EXPECT_EQ(Q("1.5Gi").ToString(), "1536Mi");
  EXPECT_EQ(Q("100m").ToString(), "100m");
  EXPECT_EQ(Q("1.5").ToString(), "1500m");
  EXPECT_EQ(Q("1e3").ToString(), "1e3");
  EXPECT_EQ(Q("0.1n").ToString(), "1n");  // Rounded up to the smallest unit.
  EXPECT_EQ(Q("8Ei").ToString(), "9223372036854775807");  // Binary SI is capped at 2^63-1.
}

TEST(QuantityTest, RejectsWhatKubernetesRejects) {
  EXPECT_THAT(Quantity::Parse("200K"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("unable to parse quantity's suffix")));
  EXPECT_THAT(Quantity::Parse(""), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("must match the regular expression")));
  for (const char* bad : {"Three", "1,3G", " 1", "1 ", "1.1.M", "0.1mi", "1i", "-3.01e-", "Pi"}) {
    EXPECT_FALSE(Quantity::Parse(bad).ok()) << bad;
  }
  // Upstream quirks that we keep.
  for (const char* odd : {"Mi", "+", "-", ".", "e5"}) {
    ASSERT_THAT(Quantity::Parse(odd), IsOk()) << odd;
    EXPECT_TRUE(Quantity::Parse(odd)->IsZero()) << odd;
  }
}

TEST(QuantityTest, ComparesNumerically) {
  EXPECT_EQ(Q("200M").Compare(Q("0.2G")), 0);
  EXPECT_EQ(Q("50M").Compare(Q("50Mi")), -1);
  EXPECT_EQ(Q("50Mi").Compare(Q("50M")), 1);
  EXPECT_TRUE(Q("1Ki").Equal(Q("1024")));
  EXPECT_EQ(Q("1e1000000").Compare(Q("1e999999")), 1);
  EXPECT_EQ(Q("-1e1000000").Compare(Q("1n")), -1);
}

TEST(QuantityTest, AsInt64FollowsUpstreamRepresentation) {
  EXPECT_EQ(Q("50k").AsInt64(), 50000);
  EXPECT_EQ(Q("50000000G").AsInt64(), int64_t{50000000000000000});
  EXPECT_EQ(Q("9999999999999999999999999999999999999G").AsInt64(), std::nullopt);
  EXPECT_EQ(Q("1000m").AsInt64(), std::nullopt);   // Negative scale: never an integer upstream.
  EXPECT_EQ(Q("1.5Gi").AsInt64(), std::nullopt);   // Parsed into the big-decimal form.
  EXPECT_FALSE(Q("1Pi").IsInteger());
  EXPECT_TRUE(Q("1Ti").IsInteger());
}

TEST(QuantityTest, Arithmetic) {
  ASSERT_OK_AND_ASSIGN(Quantity sum, Q("50k").Add(Q("20k")));
  EXPECT_TRUE(sum.Equal(Q("70k")));
  ASSERT_OK_AND_ASSIGN(Quantity diff, Q("50k").Sub(Quantity::FromInt64(20000)));
  EXPECT_TRUE(diff.Equal(Q("30k")));
  EXPECT_EQ(diff.AsApproximateFloat(), 30000.0);
  ASSERT_OK_AND_ASSIGN(Quantity big, Q("9223372036854775807").Add(Q("1")));
  EXPECT_EQ(big.ToString(), "9223372036854775808");
  EXPECT_EQ(big.AsInt64(), std::nullopt);
}

TEST(QuantityTest, RefusesAstronomicalValuesInsteadOfHanging) {
  ASSERT_OK_AND_ASSIGN(Quantity huge, Quantity::Parse("1e1000000"));
  EXPECT_EQ(huge.ToString(), "10e999999");
  EXPECT_EQ(huge.AsApproximateFloat(), std::numeric_limits<double>::infinity());
  EXPECT_THAT(huge.Add(Q("1m")), StatusIs(absl::StatusCode::kOutOfRange));
  // A 30,000-digit fraction is rounded up to 1n like upstream, without building the number.
  const std::string zeros(30000, '0');
  EXPECT_EQ(Q("0." + zeros + "1").ToString(), "1n");
  EXPECT_EQ(Q("1." + zeros).ToString(), "1");
  EXPECT_EQ(Q("1.000000001" + zeros + "1").ToString(), "1000000002n");
  EXPECT_EQ(Q("-0." + zeros + "1").ToString(), "-1n");
  // 19 digits leave the int64 form; the exact value would have a million digits.
  EXPECT_THAT(Quantity::Parse("1234567890123456789e1000000"),
              StatusIs(absl::StatusCode::kOutOfRange));
}

// ---- Golden file from upstream ----------------------------------------------------------------

std::string FloatText(double f) {
  // Compared through strtod of upstream's shortest text, so only the value matters.
  return std::to_string(f);
}

void ExpectFacts(const absl::StatusOr<Quantity>& q, const nlohmann::json& want,
                 const std::string& what) {
  if (!want.at("ok").get<bool>()) {
    EXPECT_FALSE(q.ok()) << what << " parsed as " << (q.ok() ? q->ToString() : "");
    if (!q.ok() && want.contains("error")) {
      EXPECT_EQ(devlet::Message(q.status()), want.at("error").get<std::string>()) << what;
    }
    return;
  }
  ASSERT_TRUE(q.ok()) << what << ": " << q.status();
  EXPECT_EQ(q->ToString(), want.at("str").get<std::string>()) << what;
  std::optional<int64_t> want_int;
  if (want.contains("int")) want_int = want.at("int").get<int64_t>();
  EXPECT_EQ(q->AsInt64(), want_int) << what;
  EXPECT_EQ(q->IsInteger(), want_int.has_value()) << what;
  std::string want_float = want.at("float").get<std::string>();
  double f = std::strtod(want_float.c_str(), nullptr);
  double got = q->AsApproximateFloat();
  EXPECT_TRUE(got == f || (std::isnan(got) && std::isnan(f)))
      << what << ": float " << got << " (" << FloatText(got) << ") want " << want_float;
  EXPECT_EQ(q->Sign(), want.at("sign").get<int>()) << what;
}

TEST(QuantityTest, AgreesWithUpstreamGoldenFile) {
  std::ifstream in("tests/data/quantity_golden.jsonl");
  ASSERT_TRUE(in) << "run from allocator/cel (ctest sets the working directory)";
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++lines;
    nlohmann::json c = nlohmann::json::parse(line);
    const std::string op = c.at("op").get<std::string>();
    if (op == "parse") {
      std::string text = c.at("in").get<std::string>();
      ExpectFacts(Quantity::Parse(text), c, "parse " + text);
    } else if (op == "binary") {
      std::string xs = c.at("x").get<std::string>();
      std::string ys = c.at("y").get<std::string>();
      Quantity x = Q(xs);
      Quantity y = Q(ys);
      std::string what = xs + " op " + ys;
      EXPECT_EQ(x.Compare(y), c.at("cmp").get<int>()) << what;
      ExpectFacts(x.Add(y), c.at("add"), "add " + what);
      ExpectFacts(x.Sub(y), c.at("sub"), "sub " + what);
    } else if (op == "int") {
      std::string xs = c.at("x").get<std::string>();
      int64_t y = c.at("y").get<int64_t>();
      Quantity x = Q(xs);
      std::string what = xs + " op int " + std::to_string(y);
      Quantity qy = Quantity::FromInt64(y, Quantity::Format::kDecimalExponent);
      ExpectFacts(x.Add(qy), c.at("add"), "add " + what);
      ExpectFacts(x.Sub(qy), c.at("sub"), "sub " + what);
    } else {
      ADD_FAILURE() << "unknown op " << op;
    }
  }
  EXPECT_GT(lines, 1000);
}

}  // namespace
}  // namespace devlet::cel
