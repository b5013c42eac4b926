#include "devlet/common/strings.h"

#include <string>

#include "gtest/gtest.h"

namespace devlet {
namespace {

// Expected values are what Go's strconv.Quote returns for the same bytes.
TEST(GoQuoteTest, QuotesLikeGo) {
  EXPECT_EQ(GoQuote(""), R"("")");
  EXPECT_EQ(GoQuote("gpu-0"), R"("gpu-0")");
  EXPECT_EQ(GoQuote("say \"hi\"\\"), R"("say \"hi\"\\")");
  EXPECT_EQ(GoQuote("a\nb\tc\rd"), R"("a\nb\tc\rd")");
  EXPECT_EQ(GoQuote("\a\b\f\v"), R"("\a\b\f\v")");
  EXPECT_EQ(GoQuote(std::string("\x00\x01\x1f\x7f", 4)), R"("\x00\x01\x1f\x7f")");
}

TEST(GoQuoteTest, KeepsValidUtf8AndEscapesInvalidBytes) {
  EXPECT_EQ(GoQuote("gr\xc3\xbc\xc3\x9f"), "\"gr\xc3\xbc\xc3\x9f\"");  // grüß
  EXPECT_EQ(GoQuote("\xe2\x82\xac"), "\"\xe2\x82\xac\"");              // €
  EXPECT_EQ(GoQuote("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");      // U+1F600
  EXPECT_EQ(GoQuote("\xff"), R"("\xff")");                             // never valid
  EXPECT_EQ(GoQuote("\xc0\xaf"), R"("\xc0\xaf")");                     // overlong
  EXPECT_EQ(GoQuote("\xe2\x82"), R"("\xe2\x82")");                     // truncated
  EXPECT_EQ(GoQuote("\xc3("), R"("\xc3(")");                           // bad continuation
}

TEST(GoQuoteTest, AppendsToExistingText) {
  std::string out = "name=";
  AppendGoQuoted(out, "x y");
  EXPECT_EQ(out, R"(name="x y")");
}

}  // namespace
}  // namespace devlet
