#include "devlet/allocator/amount.h"

#include "gtest/gtest.h"

namespace devlet::allocator {
namespace {

Amount P(const char* text) {
  auto a = Amount::Parse(text);
  EXPECT_TRUE(a.ok()) << text;
  return a.value_or(Amount{});
}

TEST(AmountTest, ParsesKubernetesSuffixes) {
  EXPECT_EQ(P("1Gi"), Amount::FromInt(1073741824));
  EXPECT_EQ(P("1G"), Amount::FromInt(1000000000));
  EXPECT_EQ(P("1.5k"), Amount::FromInt(1500));
  EXPECT_EQ(P("100m").nanos, 100000000);
  EXPECT_EQ(P("1e3"), Amount::FromInt(1000));
  EXPECT_EQ(P("-2"), Amount::FromInt(-2));
  EXPECT_EQ(P("0.5Gi"), Amount::FromInt(536870912));
  EXPECT_EQ(P("1n").nanos, 1);
  EXPECT_EQ(P("0.1n").nanos, 1);  // rounds up to the next nano
}

TEST(AmountTest, RejectsGarbage) {
  for (const char* bad : {"", "Gi", "1 Gi", "1KiB", "200K", "1.2.3", "--1", "1e"}) {
    EXPECT_FALSE(Amount::Parse(bad).ok()) << bad;
  }
}

TEST(AmountTest, ComparesAcrossFormats) {
  EXPECT_EQ(P("1024Mi"), P("1Gi"));
  EXPECT_LT(P("999M"), P("1G"));
  EXPECT_GT(P("1Gi"), P("1G"));
}

TEST(AmountTest, Formats) {
  EXPECT_EQ(Amount::FromInt(4).Format(false), "4");
  EXPECT_EQ(P("4Gi").Format(true), "4Gi");
  EXPECT_EQ(P("4000").Format(false), "4k");
  EXPECT_EQ(P("1500m").Format(false), "1500m");
  EXPECT_EQ(Amount{}.Format(false), "0");
}

TEST(AmountTest, Ceil) {
  EXPECT_EQ(static_cast<int64_t>(P("1500m").units_ceil()), 2);
  EXPECT_EQ(static_cast<int64_t>(P("2").units_ceil()), 2);
  EXPECT_EQ(static_cast<int64_t>(P("1.0001m").milli_ceil()), 2);
}

}  // namespace
}  // namespace devlet::allocator
