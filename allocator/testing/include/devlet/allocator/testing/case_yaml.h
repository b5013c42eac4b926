// File: devlet/allocator/testing/case_yaml.h
//
// Reading the allocator's case files (allocator/tests/cases/*.yaml) the same way in the case
// runner (allocator_test) and in the differential oracle (integration/allocdiff), so that both
// compare an expectation with the same JSON:
//
//   using devlet::allocator::testing::CaseYamlToJson;
//   nlohmann::json want = CaseYamlToJson(doc["expect"]["allocations"]);
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace devlet::allocator::testing {

// CaseYamlToJson converts a YAML node of a case file to JSON: the plain scalars true, false,
// null and ~ become JSON literals; every other scalar stays a string (quantities, names and
// numbers are compared as the strings the case file writes); anything but a map, sequence or
// scalar is null.
inline nlohmann::json CaseYamlToJson(const YAML::Node& node) {
  using Json = nlohmann::json;
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      Json j = Json::object();
      for (const auto& kv : node) j[kv.first.as<std::string>()] = CaseYamlToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      Json j = Json::array();
      for (const auto& v : node) j.push_back(CaseYamlToJson(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() != "!") {  // a quoted scalar is a string whatever it says
        if (s == "true") return true;
        if (s == "false") return false;
        if (s == "null" || s == "~") return nullptr;
      }
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace devlet::allocator::testing
