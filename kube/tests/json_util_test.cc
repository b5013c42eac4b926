// The codec's private JSON helpers: IndexedOrderedMap (the object type of the tree) against a
// model, and the message quoting helpers.
#include "devlet/kube/json_util.h"

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::kube::internal {
namespace {

using namespace std::string_view_literals;

// Model is what ordered_map does: a list of pairs searched linearly.
using Model = std::vector<std::pair<std::string, int>>;

void ExpectSame(const Json& json, const Model& model) {
  ASSERT_TRUE(json.is_object());
  ASSERT_EQ(json.size(), model.size());
  std::size_t i = 0;
  for (auto it = json.begin(); it != json.end(); ++it, ++i) {
    EXPECT_EQ(it.key(), model[i].first);
    EXPECT_EQ(it.value().get<int>(), model[i].second);
  }
  for (const auto& [key, value] : model) {
    ASSERT_TRUE(json.contains(key)) << key;
    EXPECT_EQ(json.at(key).get<int>(), value);
    EXPECT_EQ(json.find(key).key(), key);
    EXPECT_EQ(json.count(key), 1u);
  }
  EXPECT_FALSE(json.contains("absent"));
  EXPECT_EQ(json.find("absent"), json.end());
}

// Random inserts, overwrites and erases across the size where the index starts.
TEST(IndexedOrderedMapTest, MatchesAnOrderedListUnderRandomEdits) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    Json json = Json::object();
    Model model;
    const int key_space = 1 + static_cast<int>(rng() % 200);
    for (int step = 0; step < 600; ++step) {
      const std::string key = "k" + std::to_string(rng() % key_space);
      const int value = static_cast<int>(rng() % 1000);
      auto in_model =
          std::find_if(model.begin(), model.end(), [&](const auto& p) { return p.first == key; });
      switch (rng() % 4) {
        case 0:
        case 1:  // operator[]: insert or overwrite in place
          json[key] = value;
          if (in_model == model.end()) {
            model.emplace_back(key, value);
          } else {
            in_model->second = value;
          }
          break;
        case 2: {  // emplace: insert only
          const bool inserted = json.emplace(key, value).second;
          EXPECT_EQ(inserted, in_model == model.end());
          if (inserted) {
            model.emplace_back(key, value);
          }
          break;
        }
        case 3:  // erase
          EXPECT_EQ(json.erase(key), in_model == model.end() ? 0u : 1u);
          if (in_model != model.end()) {
            model.erase(in_model);
          }
          break;
      }
    }
    ExpectSame(json, model);
    // Copies, moves and comparisons keep the order and the index.
    Json copy = json;
    EXPECT_EQ(copy, json);
    ExpectSame(copy, model);
    Json moved = std::move(copy);
    ExpectSame(moved, model);
    if (!model.empty()) {
      moved[model.front().first] = -1;
      EXPECT_NE(moved, json);
    }
  }
}

TEST(IndexedOrderedMapTest, EraseRangeAndClear) {
  Json json = Json::object();
  Model model;
  for (int i = 0; i < 100; ++i) {
    json["k" + std::to_string(i)] = i;
    model.emplace_back("k" + std::to_string(i), i);
  }
  Json::object_t& object = json.get_ref<Json::object_t&>();
  object.erase(object.begin() + 10, object.begin() + 60);
  model.erase(model.begin() + 10, model.begin() + 60);
  ExpectSame(json, model);
  json.clear();
  EXPECT_TRUE(json.empty());
  json["k1"] = 1;
  ExpectSame(json, Model{{"k1", 1}});
}

TEST(IndexedOrderedMapTest, ParseKeepsOrderAndUpdateWorks) {
  std::string text = "{";
  for (int i = 99; i >= 0; --i) {
    text += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + (i ? "," : "}");
  }
  Json parsed = Json::parse(text);
  EXPECT_EQ(parsed.dump(), text);
  Json other = {{"k5", 500}, {"new", 1}};
  parsed.update(other);
  EXPECT_EQ(parsed["k5"], 500);
  EXPECT_EQ(parsed.back(), 1);
  EXPECT_EQ(parsed.size(), 101u);
}

TEST(ParseJsonTest, DuplicatesAndDepth) {
  EXPECT_TRUE(ParseJson(R"({"a":{"b":[{"c":1},{"c":2}]}})", {}).ok());
  absl::StatusOr<Json> dup = ParseJson(R"({"a":{"b":[{"c":1},{"d":1,"d":2}]}})", {});
  EXPECT_EQ(dup.status().message(), "invalid JSON: duplicate field \"a.b[1].d\"");
  EXPECT_EQ(ParseJson(R"([[1],{"x":{"y":1,"y":1}}])", {}).status().message(),
            "invalid JSON: duplicate field \"[1].x.y\"");
  EXPECT_FALSE(ParseJson(std::string(100, '['), {}).ok());
  absl::StatusOr<Json> value = ParseJson(R"( {"z":1,"a":[true,null,-5,1.5,"s"]} )", {});
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(DumpJson(*value), R"({"z":1,"a":[true,null,-5,1.5,"s"]})");
}

TEST(MessageTest, QuoteAndEscape) {
  EXPECT_EQ(QuoteForMessage("a\0b\"\n\xff"sv, 100), "\"a\\x00b\\\"\\n\\xff\"");
  EXPECT_EQ(QuoteForMessage("abcdef", 3), "\"abc...\" (6 bytes)");
  EXPECT_EQ(QuoteForMessage("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(EscapeForMessage("x\0y\tz\xc3"sv), "x\\x00y\\tz\\xc3");
  EXPECT_EQ(EscapeForMessage("abcdef", 2), "ab...(6 bytes)");
}

}  // namespace
}  // namespace devlet::kube::internal
