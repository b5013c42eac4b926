// Robustness: random bytes and random token soup never crash, hang or blow up memory; whatever
// compiles evaluates within the cost limit. Deterministic seeds, so failures reproduce.
#include <random>
#include <string>
#include <vector>

#include "devlet/cel/cel.h"
#include "devlet/cel/dra.h"
#include "gtest/gtest.h"

namespace devlet::cel {
namespace {

void CompileAndRun(const std::string& expr, const dra::SimpleDevice& device) {
  absl::StatusOr<Program> p = dra::CompileSelector(expr);
  if (!p.ok()) {
    EXPECT_FALSE(p.status().message().empty()) << expr;
    return;
  }
  dra::MatchOptions options;
  options.cost_limit = 100000;
  (void)dra::Match(*p, device, options);
  EnvironmentOptions env_options;
  env_options.type_check = false;
  absl::StatusOr<Program> q = Environment(env_options).Compile(expr);
  if (q.ok()) {
    EvalOptions eval_options;
    eval_options.cost_limit = 100000;
    (void)q->Evaluate(Activation(), eval_options);
  }
}

TEST(FuzzTest, RandomBytes) {
  dra::SimpleDevice device("dra.example.com");
  device.SetString("model", "a100");
  std::mt19937 rng(1);
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 40, ' ');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    CompileAndRun(s, device);
  }
}

TEST(FuzzTest, RandomTokens) {
  static const std::vector<std::string> kTokens = {
      "device", ".", "attributes", "capacity", "driver", "[", "]", "(", ")", "{", "}", "\"dra.example.com\"",
      "model", "==", "!=", "<", ">=", "&&", "||", "!", "-", "+", "*", "/", "%", "?", ":", ",", "1", "0",
      "-9223372036854775808", "2u", "1.5", "'a'", "b'x'", "r'\\d'", "true", "null", "in", "x", "k", "v",
      "all", "exists", "exists_one", "map", "filter", "has", "size", "matches", "'['", "quantity",
      "semver", "'1Gi'", "'1.0.0'", "cel", "bind", "optional", "of", "none", "orValue", ".?", "[?",
      "transformMap", "lists", "range", "sort", "format", "split", "join", "includes", "dyn", "type",
      "int", "string", "isGreaterThan", "add", "sign", "\"\"\"", "`", "#", "\\", "\xff"};
  dra::SimpleDevice device("dra.example.com");
  device.SetString("model", "a100");
  device.SetInts("ints", {1, 2, 3});
  ASSERT_TRUE(device.SetCapacity("memory", "1Gi").ok());
  std::mt19937 rng(2);
  for (int i = 0; i < 6000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int t = 0; t < n; ++t) {
      s += kTokens[rng() % kTokens.size()];
      if (rng() % 3 == 0) s += ' ';
    }
    CompileAndRun(s, device);
  }
}

TEST(FuzzTest, HostileButValidExpressions) {
  dra::SimpleDevice device("dra.example.com");
  // Each is bounded by the cost limit or a runtime error, never by the machine.
  for (const char* expr : {
           "lists.range(1000000).map(x, lists.range(1000000)).size() > 0",
           "lists.range(100000).map(x, string(x)).join('').size() > 0",
           "[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, "
           "[1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10])))).size() > 0",
           "'a'.replace('', 'aaaaaaaaaa').replace('', 'aaaaaaaaaa').replace('', 'aaaaaaaaaa').size() > 0",
           "'%s'.format([lists.range(10000)]).size() > 0",
           "lists.range(2000).transformMap(i, v, v * 2).size() == 2000",
       }) {
    absl::StatusOr<Program> p = dra::CompileSelector(expr);
    ASSERT_TRUE(p.ok()) << expr << ": " << p.status();
    (void)dra::Match(*p, device);
  }
}

// The format library's validators (and Go net/url parsing behind `uri`) on arbitrary attribute
// strings, invalid UTF-8 included: every format answers none or a non-empty list of messages.
TEST(FuzzTest, FormatValidatorsOnRandomStrings) {
  const char* kFormats[] = {"dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName",
                            "dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix",
                            "labelValue", "uri", "uuid", "byte", "date", "datetime"};
  const std::string kAlphabet = "aZ09-_./:@?#[]%25+=tTzZ \\x80\xc3\xa9";
  std::mt19937 rng(7);
  for (const char* format : kFormats) {
    absl::StatusOr<Program> p = dra::CompileSelector(
        std::string("format.") + format +
        "().validate(device.attributes[\"dra.example.com\"].s).orValue([\"ok\"]).size() > 0");
    ASSERT_TRUE(p.ok()) << p.status();
    for (int i = 0; i < 2000; ++i) {
      std::string s(rng() % 24, ' ');
      for (char& c : s) c = kAlphabet[rng() % kAlphabet.size()];
      dra::SimpleDevice device("dra.example.com");
      device.SetString("s", s);
      absl::StatusOr<bool> matched = dra::Match(*p, device);
      ASSERT_TRUE(matched.ok()) << format << " " << s << ": " << matched.status();
      EXPECT_TRUE(*matched) << format << " " << s;
    }
  }
}

// The URL library on arbitrary attribute strings, invalid UTF-8 included: a string isURL accepts
// converts (unless url.Parse rejects its fragment or authority), and the members hold Go's
// invariants.
TEST(FuzzTest, UrlLibraryOnRandomStrings) {
  absl::StatusOr<Program> p = dra::CompileSelector(
      "cel.bind(s, device.attributes[\"dra.example.com\"].s, !isURL(s) || "
      "cel.bind(u, url(s), u == u && u.getHostname().size() <= u.getHost().size() && "
      "u.getPort().size() < u.getHost().size() + 1 && u.getQuery().size() >= 0 && "
      "u.getScheme().lowerAscii() == u.getScheme() && u.getEscapedPath().size() >= 0))");
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string kAlphabet = "aZ09-_./:@?#[]%25+=&; *\\x80\xc3\xa9";
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 24, ' ');
    for (char& c : s) c = kAlphabet[rng() % kAlphabet.size()];
    if (rng() % 2 == 0) s = (rng() % 2 == 0 ? "http://" : "/") + s;
    dra::SimpleDevice device("dra.example.com");
    device.SetString("s", s);
    absl::StatusOr<bool> matched = dra::Match(*p, device);
    if (!matched.ok()) {
      // Only where url.Parse reads more than ParseRequestURI did: a fragment, or an authority
      // after "//" (ParseRequestURI takes "//x" for a path).
      EXPECT_TRUE(s.find('#') != std::string::npos || s.rfind("//", 0) == 0)
          << s << ": " << matched.status();
      EXPECT_NE(matched.status().ToString().find("URL parse error"), std::string::npos) << s;
      continue;
    }
    EXPECT_TRUE(*matched) << s;
  }
}

}  // namespace
}  // namespace devlet::cel
