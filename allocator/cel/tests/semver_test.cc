// Semver: hand-written cases, then tests/data/semver_golden.jsonl produced by blang/semver and
// Kubernetes' CEL semver(s, true) through integration/celdiff (`celdiff-oracle golden-semver`).
#include "devlet/cel/semver.h"

#include <fstream>
#include <string>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace devlet::cel {
namespace {

using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

Semver V(std::string_view text, bool normalize = false) {
  absl::StatusOr<Semver> v = Semver::Parse(text, normalize);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status();
  return v.ok() ? *v : Semver();
}

TEST(SemverTest, StrictParse) {
  Semver v = V("1.2.3-rc.1+build.5");
  EXPECT_EQ(v.Major(), 1u);
  EXPECT_EQ(v.Minor(), 2u);
  EXPECT_EQ(v.Patch(), 3u);
  EXPECT_EQ(v.ToString(), "1.2.3-rc.1+build.5");
  for (const char* bad : {"v1.2.3", "1.2", "01.2.3", "1.2.3-01", "1.2.3+", "1.2.3-", ""}) {
    EXPECT_FALSE(Semver::Parse(bad).ok()) << bad;
  }
  EXPECT_THAT(Semver::Parse("1.2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Major.Minor.Patch")));
}

TEST(SemverTest, NormalizedParse) {
  EXPECT_EQ(V("v1.2", true).ToString(), "1.2.0");
  EXPECT_EQ(V("v01.02.03", true).ToString(), "1.2.3");
  EXPECT_EQ(V("1", true).ToString(), "1.0.0");
  EXPECT_THAT(Semver::Parse("1.2-alpha", true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("short version")));
}

TEST(SemverTest, Precedence) {
  // The semver 2.0.0 spec's example chain.
  const char* chain[] = {"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                         "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1",      "1.0.0"};
  for (size_t i = 0; i + 1 < std::size(chain); ++i) {
    EXPECT_EQ(V(chain[i]).Compare(V(chain[i + 1])), -1) << chain[i];
    EXPECT_EQ(V(chain[i + 1]).Compare(V(chain[i])), 1) << chain[i];
  }
  EXPECT_TRUE(V("1.2.3+a").Equal(V("1.2.3+b")));
}

void ExpectParsed(const absl::StatusOr<Semver>& v, const nlohmann::json& want,
                  const std::string& what) {
  if (!want.at("ok").get<bool>()) {
    EXPECT_FALSE(v.ok()) << what << " parsed as " << (v.ok() ? v->ToString() : "");
    if (!v.ok()) {
      EXPECT_EQ(devlet::Message(v.status()), want.at("error").get<std::string>()) << what;
    }
    return;
  }
  ASSERT_TRUE(v.ok()) << what << ": " << v.status();
  EXPECT_EQ(v->ToString(), want.at("str").get<std::string>()) << what;
  EXPECT_EQ(v->Major(), want.value("major", uint64_t{0})) << what;
  EXPECT_EQ(v->Minor(), want.value("minor", uint64_t{0})) << what;
  EXPECT_EQ(v->Patch(), want.value("patch", uint64_t{0})) << what;
}

TEST(SemverTest, AgreesWithUpstreamGoldenFile) {
  std::ifstream in("tests/data/semver_golden.jsonl");
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
      ExpectParsed(Semver::Parse(text), c.at("strict"), "strict " + text);
      ExpectParsed(Semver::Parse(text, true), c.at("normalize"), "normalize " + text);
    } else if (op == "compare") {
      std::string x = c.at("x").get<std::string>();
      std::string y = c.at("y").get<std::string>();
      EXPECT_EQ(V(x).Compare(V(y)), c.at("cmp").get<int>()) << x << " vs " << y;
    } else {
      ADD_FAILURE() << "unknown op " << op;
    }
  }
  EXPECT_GT(lines, 100);
}

}  // namespace
}  // namespace devlet::cel
