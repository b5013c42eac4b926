// Differential test: devlet's kube/ module against the API server's validation and encoding
// (see README.md). The oracle path and the test data directory come from CMake.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "devlet/common/status.h"
#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace devlet::kube {
namespace {

absl::StatusOr<std::string> RunCommand(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr)
    return Internal("popen failed: " + command);
  std::string out;
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  const int rc = pclose(pipe);
  if (rc != 0)
    return Internal(command + " exited with " + std::to_string(rc));
  return out;
}

std::string ReadFile(const std::filesystem::path& path) {
  FILE* f = fopen(path.c_str(), "rb");
  std::string out;
  if (f == nullptr)
    return out;
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), f)) > 0)
    out.append(buffer, n);
  fclose(f);
  return out;
}

std::vector<std::filesystem::path> TestFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(KUBEVALID_TESTDATA)) {
    const std::string ext = entry.path().extension();
    if (ext == ".yaml" || ext == ".json") {
      if (entry.path().filename() == "claim_v1.golden.json")
        continue;
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool Compared(const Object& object) {
  return std::holds_alternative<ResourceClaim>(object) ||
         std::holds_alternative<ResourceSlice>(object) ||
         std::holds_alternative<DeviceClass>(object) ||
         std::holds_alternative<DeviceTaintRule>(object);
}

// Go writes zero values that devlet omits; drop null, {} and [] everywhere.
nlohmann::json Normalize(const nlohmann::json& j) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      nlohmann::json v = Normalize(it.value());
      if (v.is_null() || (v.is_object() && v.empty()) || (v.is_array() && v.empty()))
        continue;
      out[it.key()] = std::move(v);
    }
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : j)
      out.push_back(Normalize(item));
    return out;
  }
  return j;
}

// QuantityValue approximates a quantity's value. devlet keeps quantities as written while Go writes
// the canonical form ("0.5" -> "500m"), so quantity strings are compared by value.
std::optional<long double> QuantityValue(const std::string& text) {
  if (!Quantity::IsValidFormat(text))
    return std::nullopt;
  static const std::vector<std::pair<std::string, long double>> kSuffixes = {
      {"Ki", 1024.0L},
      {"Mi", 1048576.0L},
      {"Gi", 1073741824.0L},
      {"Ti", 1099511627776.0L},
      {"Pi", 1125899906842624.0L},
      {"Ei", 1152921504606846976.0L},
      {"n", 1e-9L},
      {"u", 1e-6L},
      {"m", 1e-3L},
      {"k", 1e3L},
      {"M", 1e6L},
      {"G", 1e9L},
      {"T", 1e12L},
      {"P", 1e15L},
      {"E", 1e18L}};
  for (const auto& [suffix, factor] : kSuffixes) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      return std::stold(text.substr(0, text.size() - suffix.size())) * factor;
    }
  }
  return std::stold(text);  // plain or with a decimal exponent
}

void Compare(const nlohmann::json& ours, const nlohmann::json& theirs, const std::string& path,
             std::vector<std::string>* diffs) {
  if (ours.is_object() && theirs.is_object()) {
    std::set<std::string> keys;
    for (auto it = ours.begin(); it != ours.end(); ++it)
      keys.insert(it.key());
    for (auto it = theirs.begin(); it != theirs.end(); ++it)
      keys.insert(it.key());
    for (const std::string& key : keys) {
      if (!ours.contains(key) || !theirs.contains(key)) {
        diffs->push_back(path + "." + key + ": only in " + (ours.contains(key) ? "ours" : "Go"));
      } else {
        Compare(ours[key], theirs[key], path + "." + key, diffs);
      }
    }
    return;
  }
  if (ours.is_array() && theirs.is_array() && ours.size() == theirs.size()) {
    for (std::size_t i = 0; i < ours.size(); ++i) {
      Compare(ours[i], theirs[i], path + "[" + std::to_string(i) + "]", diffs);
    }
    return;
  }
  if (ours == theirs)
    return;
  if (ours.is_string() && theirs.is_string()) {
    const auto a = QuantityValue(ours.get<std::string>());
    const auto b = QuantityValue(theirs.get<std::string>());
    if (a && b && std::fabs(*a - *b) <= 1e-12L * std::max(1.0L, std::fabs(*a)))
      return;
  }
  diffs->push_back(path + ": ours " + ours.dump() + ", Go " + theirs.dump());
}

// The oracle reads v1 documents only: files with lists or older versions are covered by the
// unit tests (which compare them with their v1 twins).
bool SkipFile(const std::string& text) {
  return text.find("List") != std::string::npos ||
         text.find("resource.k8s.io/v1beta") != std::string::npos ||
         text.find("resource.k8s.io/v1alpha") != std::string::npos;
}

// Only top-level documents of the compared kinds, in file order (the oracle skips lists).
absl::StatusOr<std::vector<Object>> DecodeTopLevel(const std::string& text) {
  DEVLET_ASSIGN_OR_RETURN(std::vector<Object> objects, Decode(text));
  std::vector<Object> out;
  for (Object& object : objects) {
    if (Compared(object))
      out.push_back(std::move(object));
  }
  return out;
}

TEST(KubeValidTest, ValidationMatchesTheApiServer) {
  int objects_compared = 0;
  for (const auto& file : TestFiles()) {
    SCOPED_TRACE(file.string());
    const std::string text = ReadFile(file);
    if (SkipFile(text))
      continue;
    ASSERT_OK_AND_ASSIGN(std::string go, RunCommand(std::string(KUBEVALID_ORACLE) + " validate '" +
                                                    file.string() + "'"));
    std::vector<std::pair<std::string, std::set<std::string>>> expected;
    std::size_t start = 0;
    while (start < go.size()) {
      std::size_t end = go.find('\n', start);
      if (end == std::string::npos)
        end = go.size();
      const std::string line = go.substr(start, end - start);
      if (line.rfind("== ", 0) == 0) {
        expected.emplace_back(line.substr(3), std::set<std::string>{});
      } else if (!line.empty() && !expected.empty()) {
        expected.back().second.insert(line);
      }
      start = end + 1;
    }
    ASSERT_OK_AND_ASSIGN(std::vector<Object> objects, DecodeTopLevel(text));
    ASSERT_EQ(objects.size(), expected.size());
    for (std::size_t i = 0; i < objects.size(); ++i) {
      SCOPED_TRACE(expected[i].first);
      std::set<std::string> ours;
      for (const FieldError& e : ValidateObject(objects[i]))
        ours.insert(e.ToString());
      EXPECT_EQ(ours, expected[i].second);
      ++objects_compared;
    }
  }
  EXPECT_GT(objects_compared, 20);
}

TEST(KubeValidTest, JsonMatchesEncodingJson) {
  for (const auto& file : TestFiles()) {
    SCOPED_TRACE(file.string());
    const std::string text = ReadFile(file);
    if (SkipFile(text))
      continue;
    ASSERT_OK_AND_ASSIGN(std::string go, RunCommand(std::string(KUBEVALID_ORACLE) + " json '" +
                                                    file.string() + "'"));
    // Compare before defaulting: the oracle does not default in json mode.
    ASSERT_OK_AND_ASSIGN(std::vector<Object> all, Decode(text, {.apply_defaults = false}));
    std::vector<Object> objects;
    for (Object& object : all) {
      if (Compared(object))
        objects.push_back(std::move(object));
    }
    std::size_t start = 0;
    std::size_t i = 0;
    while (start < go.size()) {
      std::size_t end = go.find('\n', start);
      if (end == std::string::npos)
        end = go.size();
      if (end > start) {
        ASSERT_LT(i, objects.size());
        nlohmann::json theirs = nlohmann::json::parse(go.substr(start, end - start));
        nlohmann::json ours = nlohmann::json::parse(EncodeJson(objects[i]));
        theirs["apiVersion"] = ours["apiVersion"];  // v1beta1 input is v1 on our side
        theirs["kind"] = ours["kind"];
        std::vector<std::string> diffs;
        Compare(Normalize(ours), Normalize(theirs), "", &diffs);
        EXPECT_THAT(diffs, ::testing::IsEmpty()) << Describe(objects[i]);
        ++i;
      }
      start = end + 1;
    }
    EXPECT_EQ(i, objects.size());
  }
}

TEST(KubeValidTest, V1beta1ConversionMatchesTheApiServer) {
  int compared = 0;
  for (const auto& file : TestFiles()) {
    const std::string text = ReadFile(file);
    if (text.find("List") != std::string::npos ||
        text.find("resource.k8s.io/v1beta") == std::string::npos) {
      continue;
    }
    SCOPED_TRACE(file.string());
    ASSERT_OK_AND_ASSIGN(std::string go, RunCommand(std::string(KUBEVALID_ORACLE) + " convert '" +
                                                    file.string() + "'"));
    ASSERT_OK_AND_ASSIGN(std::vector<Object> objects, Decode(text, {.apply_defaults = false}));
    std::size_t start = 0;
    std::size_t i = 0;
    while (start < go.size()) {
      std::size_t end = go.find('\n', start);
      if (end == std::string::npos)
        end = go.size();
      if (end > start) {
        ASSERT_LT(i, objects.size());
        nlohmann::json theirs = nlohmann::json::parse(go.substr(start, end - start));
        nlohmann::json ours = nlohmann::json::parse(EncodeJson(objects[i]));
        ours.erase("apiVersion");  // Convert leaves TypeMeta empty
        ours.erase("kind");
        std::vector<std::string> diffs;
        Compare(Normalize(ours), Normalize(theirs), "", &diffs);
        EXPECT_THAT(diffs, ::testing::IsEmpty()) << Describe(objects[i]);
        ++i;
        ++compared;
      }
      start = end + 1;
    }
  }
  EXPECT_GE(compared, 2);
}

}  // namespace
}  // namespace devlet::kube
