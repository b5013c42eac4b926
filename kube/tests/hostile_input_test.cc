// Issue 14 §0.2 and §0.8: objects with a million keys decode in linear time, duplicate keys are
// errors in JSON as in YAML, and input echoed in errors is escaped and cut.
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::kube {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr DecodeOptions kLarge{.max_bytes = 1u << 30};

std::string LabelKey(int i) {
  return "example.com/l" + std::to_string(i);
}

// A million labels: before the indexed object map this took hours (O(N^2): 160k keys 21 s); now
// about 2 s in a RelWithDebInfo build. A quadratic decoder does not finish within the timeout.
TEST(ManyKeysTest, JsonPodWithAMillionLabels) {
  constexpr int kKeys = 1000000;
  std::string text = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{)";
  for (int i = 0; i < kKeys; ++i) {
    text += (i ? ",\"" : "\"") + LabelKey(i) + "\":\"v\"";
  }
  text += "}}}";
  absl::StatusOr<Pod> pod = DecodeOne<Pod>(text, kLarge);
  ASSERT_THAT(pod, IsOk());
  EXPECT_EQ(pod->metadata.labels.size(), std::size_t{kKeys});
  EXPECT_EQ(pod->metadata.labels.at(LabelKey(kKeys - 1)), "v");
}

// Opaque parameters keep their key order (descending here, so a sorted map would fail).
TEST(ManyKeysTest, JsonOpaqueParametersKeepOrder) {
  constexpr int kKeys = 1000000;
  std::string parameters = "{";
  for (int i = kKeys - 1; i >= 0; --i) {
    parameters += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + (i ? "," : "}");
  }
  const std::string text =
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c"},)"
      R"("spec":{"devices":{"config":[{"opaque":{"driver":"d.example.com","parameters":)" +
      parameters + "}}]}}}";
  absl::StatusOr<ResourceClaim> claim = DecodeOne<ResourceClaim>(text, kLarge);
  ASSERT_THAT(claim, IsOk());
  ASSERT_EQ(claim->spec.devices.config.size(), 1u);
  ASSERT_TRUE(claim->spec.devices.config[0].opaque.has_value());
  EXPECT_EQ(claim->spec.devices.config[0].opaque->parameters.json, parameters);
  // And back: the encoder writes them in the same order.
  EXPECT_THAT(EncodeJson(*claim), HasSubstr(parameters));
}

TEST(ManyKeysTest, YamlPodWithManyLabels) {
  constexpr int kKeys = 200000;
  std::string text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n";
  for (int i = 0; i < kKeys; ++i) {
    text += "    " + LabelKey(i) + ": v\n";
  }
  absl::StatusOr<Pod> pod = DecodeOne<Pod>(text, kLarge);
  ASSERT_THAT(pod, IsOk());
  EXPECT_EQ(pod->metadata.labels.size(), std::size_t{kKeys});
}

TEST(ManyKeysTest, UnknownFieldsKeptInOrder) {
  constexpr int kKeys = 100000;
  std::string kept = "{";
  for (int i = kKeys - 1; i >= 0; --i) {
    kept += "\"x" + std::to_string(i) + "\":" + std::to_string(i) + (i ? "," : "}");
  }
  const std::string text =
      R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{},"status":{}, )" +
      kept.substr(1);
  absl::StatusOr<Node> node = DecodeOne<Node>(text, kLarge);
  ASSERT_THAT(node, IsOk());
  // (Not EXPECT_EQ: a mismatch would print a megabyte.)
  EXPECT_TRUE(node->extra.json == R"({"spec":{},"status":{},)" + kept.substr(1))
      << node->extra.json.substr(0, 200);
}

// ---- Duplicate keys (Kubernetes' strict decoding: `duplicate field "metadata.name"`) --------

TEST(DuplicateKeyTest, JsonNamesThePath) {
  EXPECT_THAT(Decode(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","name":"b"}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("invalid JSON: duplicate field \"metadata.name\"")));
  EXPECT_THAT(Decode(R"({"kind":"Pod","kind":"Pod"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate field \"kind\"")));
  EXPECT_THAT(
      Decode(R"({"apiVersion":"v1","kind":"List","items":[{},)"
             R"({"kind":"Pod","spec":{"containers":[{"name":"a","image":"i","name":"b"}]}}]})",
             {.source = "x.json"}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("x.json: invalid JSON: duplicate field "
                         "\"items[1].spec.containers[0].name\"")));
  // Opaque parameters are JSON too: a repeat there is as ambiguous as anywhere else.
  EXPECT_THAT(
      Decode(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",)"
             R"("spec":{"devices":{"config":[{"opaque":{"parameters":{"a":1,"a":2}}}]}}})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("duplicate field \"spec.devices.config[0].opaque.parameters.a\"")));
  // Past the size where objects get a hash index.
  std::string many = R"({"apiVersion":"v1","kind":"Pod","metadata":{"labels":{)";
  for (int i = 0; i < 100; ++i) {
    many += "\"k" + std::to_string(i) + "\":\"v\",";
  }
  many += R"("k42":"again"}}})";
  EXPECT_THAT(Decode(many), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("duplicate field \"metadata.labels.k42\"")));
}

TEST(DuplicateKeyTest, YamlNamesThePathAndLine) {
  EXPECT_THAT(Decode("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    x: 1\n"
                     "    x: 2\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("invalid YAML at line 7, column 5: duplicate field "
                                 "\"metadata.labels.x\"")));
  EXPECT_THAT(Decode("kind: Pod\nspec:\n  containers:\n  - name: a\n  - name: b\n    name: c\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("duplicate field \"spec.containers[1].name\"")));
}

TEST(DuplicateKeyTest, YamlMergeKeysMayBeOverriddenOnce) {
  const std::string base =
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: &a {a: '1', b: '2'}\n"
      "  labels:\n    <<: *a\n    a: '3'\n";
  absl::StatusOr<Pod> pod = DecodeOne<Pod>(base);
  ASSERT_THAT(pod, IsOk());
  EXPECT_EQ(pod->metadata.labels, (std::map<std::string, std::string>{{"a", "3"}, {"b", "2"}}));
  EXPECT_THAT(Decode(base + "    a: '4'\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("duplicate field \"metadata.labels.a\"")));
}

// ---- Echoed input: cut and escaped ---------------------------------------------------------

TEST(EchoTest, HugeNumberIsNotEchoedWhole) {
  const std::string digits(100000, '9');
  for (const std::string& text :
       {R"({"apiVersion":"v1","kind":"Pod","metadata":{"generation":)" + digits + "}}",
        R"({"apiVersion":"v1","kind":"Pod","metadata":{"generation":1e)" + digits + "}}",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  generation: " + digits + "\n",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + digits + "x\n  generation: x\n"}) {
    absl::Status status = Decode(text).status();
    ASSERT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_LT(status.message().size(), 600u) << status.message().substr(0, 2000);
  }
  EXPECT_THAT(Decode(R"({"kind":)" + digits + "}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(100000 bytes)")));
}

TEST(EchoTest, LongKeysAndKindsAreCut) {
  const std::string key(100000, 'k');
  for (const std::string& text :
       {R"({"apiVersion":"v1","kind":"Pod","metadata":{"labels":{")" + key + R"(":1}}})",
        R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","spec":{")" + key + R"(":1}})",
        R"({"apiVersion":"v1","kind":")" + key + R"("})",
        R"({"apiVersion":"v1","kind":"Pod","metadata":{")" + key + R"(":1,")" + key + R"(":2}})"}) {
    absl::Status status = Decode(text, {.strict = true}).status();
    ASSERT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_LT(status.message().size(), 1000u) << status.message().substr(0, 2000);
  }
}

TEST(EchoTest, ControlCharactersAreEscaped) {
  // JSON lets a string hold NUL; the name is then shown as Go's %q shows it.
  absl::StatusOr<std::vector<Object>> bad = Decode(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"a\u0000b\nc"},"spec":{"containers":5}})");
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr("Pod \"a\\x00b\\nc\": spec.containers: expected a list")));
  EXPECT_EQ(bad.status().message().find('\0'), std::string_view::npos);
  EXPECT_EQ(bad.status().message().find('\n'), std::string_view::npos);

  EXPECT_THAT(Decode(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",)"
                     R"("spec":{"a\u0001\"b":1}})",
                     {.strict = true}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown field \"spec.a\\x01\\\"b\"")));
  EXPECT_THAT(Decode(R"({"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"a\tb":5}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("metadata.labels[a\\tb]: expected a string")));
  EXPECT_THAT(Decode(R"({"apiVersion":"v1","kind":"P\u0000d"})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unsupported object kind \"P\\x00d\"")));

  // yaml-cpp quotes the bad escape raw (found by kube_decode_fuzzer).
  const std::string bad_escape("a: \"\\\0\"\n", 8);
  absl::Status yaml = Decode(bad_escape).status();
  EXPECT_THAT(yaml, StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("unknown escape character: \\x00")));
  EXPECT_EQ(yaml.message().find('\0'), std::string_view::npos);

  // Validation quotes the name as Kubernetes does (%q).
  ASSERT_OK_AND_ASSIGN(
      DeviceClass dc,
      DecodeOne<DeviceClass>(
          R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"a\u0000b"}})"));
  absl::Status invalid = Validate(Object(dc));
  EXPECT_THAT(invalid,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(" \"a\\x00b\" is invalid: ")));
  EXPECT_EQ(invalid.message().find('\0'), std::string_view::npos);
  EXPECT_THAT(Describe(Object(dc)),
              AllOf(EndsWith("\"a\\x00b\""), Not(HasSubstr(std::string(1, '\0')))));
}

}  // namespace
}  // namespace devlet::kube
