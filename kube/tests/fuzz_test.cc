// Garbage in, clear error out: random bytes, mutated valid files, hostile nesting and aliases.
// Every input must return (an object list or an error); anything decoded must also encode and
// validate without crashing. Seeds are fixed so failures reproduce.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace devlet::kube {
namespace {

using ::devlet::kube::testing::ReadTestData;
using ::devlet::testing::StatusIs;
using ::testing::HasSubstr;

// Exercise decodes, and when it succeeds, encodes, re-decodes and validates.
void Exercise(const std::string& input) {
  absl::StatusOr<std::vector<Object>> objects = Decode(input, {.max_bytes = 1 << 20});
  if (!objects.ok()) {
    EXPECT_EQ(objects.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(objects.status().message().empty());
    return;
  }
  const std::string json = EncodeJsonList(*objects);
  absl::StatusOr<std::vector<Object>> again = Decode(json, {.apply_defaults = false});
  // Mutations can create values the encoder writes differently (a quantity that parsed from a
  // YAML float), so only demand that re-decoding does not crash.
  (void)again;
  for (const Object& object : *objects) {
    (void)ValidateObject(object);
    (void)Validate(object);
  }
}

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  for (const char* file :
       {"slice_v1.yaml", "slice_v1beta1.yaml", "claim_v1.yaml", "claim_v1beta1.yaml",
        "cluster.yaml", "list.json", "validation/claims.yaml", "validation/slices.yaml"}) {
    seeds.push_back(ReadTestData(file));
  }
  // JSON versions of the same objects, so that the JSON parser gets mutated input too.
  for (std::size_t i = 0, n = seeds.size(); i < n; ++i) {
    absl::StatusOr<std::vector<Object>> objects = Decode(seeds[i]);
    if (objects.ok())
      seeds.push_back(EncodeJsonList(*objects, {.indent = 1}));
  }
  return seeds;
}

TEST(FuzzTest, RandomBytes) {
  std::mt19937_64 rng(1);
  const std::string alphabet = "{}[]:,-\"' \n\t#&*!|>%@`?abcxyz0129.eE+\\\x00\xff\xc3";
  for (int i = 0; i < 3000; ++i) {
    std::string input;
    const std::size_t len = rng() % 200;
    for (std::size_t k = 0; k < len; ++k) {
      input += (rng() % 4 == 0) ? char(rng() % 256) : alphabet[rng() % alphabet.size()];
    }
    Exercise(input);
  }
}

TEST(FuzzTest, MutatedValidInput) {
  std::mt19937_64 rng(2);
  const std::vector<std::string> seeds = Seeds();
  const std::string tokens[] = {"{",
                                "}",
                                "[",
                                "]",
                                ":",
                                ",",
                                "\"",
                                "null",
                                "-1",
                                "1e400",
                                "99999999999999999999",
                                "true",
                                "\n  ",
                                "- ",
                                "&a",
                                "*a",
                                "!!str ",
                                "\xff",
                                "{\"a\":",
                                "Gi",
                                "''",
                                "\t"};
  for (int i = 0; i < 4000; ++i) {
    std::string input = seeds[rng() % seeds.size()];
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits && !input.empty(); ++e) {
      const std::size_t pos = rng() % input.size();
      switch (rng() % 4) {
        case 0:
          input.erase(pos, 1 + rng() % 8);
          break;
        case 1:
          input.insert(pos, tokens[rng() % std::size(tokens)]);
          break;
        case 2:
          input[pos] = char(rng() % 256);
          break;
        default:
          input.resize(pos);  // truncation
      }
    }
    Exercise(input);
  }
}

TEST(FuzzTest, TypeConfusionAtEveryField) {
  // Replace each scalar of a valid JSON claim and slice with values of every other type.
  const std::string replacements[] = {"null",
                                      "1",
                                      "-1",
                                      "1.5",
                                      "true",
                                      "\"x\"",
                                      "[]",
                                      "{}",
                                      "[1,[2]]",
                                      "{\"a\":{}}",
                                      "18446744073709551616"};
  for (const char* file : {"claim_v1.yaml", "slice_v1.yaml", "cluster.yaml"}) {
    ASSERT_OK_AND_ASSIGN(std::vector<Object> objects, Decode(ReadTestData(file)));
    const std::string json = EncodeJsonList(objects);
    // Positions right after a ':' start a value.
    for (std::size_t pos = 0; pos < json.size(); ++pos) {
      if (json[pos] != ':')
        continue;
      // Find the end of a simple scalar value.
      std::size_t end = pos + 1;
      if (json[end] == '"') {
        end = json.find('"', end + 1);
        if (end == std::string::npos)
          break;
        ++end;
      } else {
        while (end < json.size() && json[end] != ',' && json[end] != '}' && json[end] != ']' &&
               json[end] != '{' && json[end] != '[') {
          ++end;
        }
        if (end == pos + 1)
          continue;  // object or list value
      }
      for (const std::string& replacement : replacements) {
        Exercise(json.substr(0, pos + 1) + replacement + json.substr(end));
      }
    }
  }
}

TEST(FuzzTest, DeepNesting) {
  EXPECT_THAT(Decode(std::string(100000, '[') + std::string(100000, ']')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nests deeper than")));
  EXPECT_THAT(Decode("a: " + std::string(100000, '[') + std::string(100000, ']')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Decode("a: " + std::string(100000, '{')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::string block;
  for (int i = 0; i < 3000; ++i)
    block += std::string(std::size_t(i), ' ') + "a:\n";
  EXPECT_THAT(Decode(block), StatusIs(absl::StatusCode::kInvalidArgument));
  std::string dashes;
  for (int i = 0; i < 5000; ++i)
    dashes += "- ";
  EXPECT_THAT(Decode(dashes + "x\n"), StatusIs(absl::StatusCode::kInvalidArgument));
  // Opaque parameters nested a little deeper than the limit.
  std::string params = std::string(70, '[') + std::string(70, ']');
  EXPECT_THAT(Decode(R"({"apiVersion":"v1","kind":"Node","metadata":{"x":)" + params + "}}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nests deeper than 64")));
}

TEST(FuzzTest, AliasBomb) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 12; ++i) {
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k)
      yaml += (k ? ", *a" : "*a") + std::to_string(i - 1);
    yaml += "]\n";
  }
  EXPECT_THAT(Decode(yaml).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                              HasSubstr("aliases expand to more than")));
}

TEST(FuzzTest, HugeInputAndOddEncodings) {
  EXPECT_THAT(Decode(std::string(2 << 20, ' '), {.max_bytes = 1 << 20}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than the limit")));
  EXPECT_THAT(Decode("apiVersion: v1\nkind: Node\nmetadata: {name: \"\xff\xfe\"}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid UTF-8")));
  EXPECT_THAT(Decode("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"\xc3\"}}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid JSON")));
  // A string with an embedded NUL is data, not a terminator.
  Exercise(std::string("apiVersion: v1\nkind: Node\nmetadata: {name: \"a\\0b\"}\n"));
  Exercise(std::string("\0\0\0", 3));
}

}  // namespace
}  // namespace devlet::kube
