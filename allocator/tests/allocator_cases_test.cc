// Data-driven allocator conformance cases: allocator/tests/cases/*.yaml, one gtest per file.
//
// A case file holds Kubernetes objects (resource.k8s.io/v1 JSON/YAML, decoded by the kube codec
// exactly like devlet-alloc's input), the node, the allocated state and the expectation:
//
//   name: simple
//   gates: "DRAPrioritizedList=false"     # optional, --feature-gates syntax
//   validate: false                       # optional: skip API validation of the objects
//   node: {name: node-1, labels: {...}}   # optional; default node-1 (region=region-1, planet=earth)
//   allocated: [driver-a/pool-1/device-1] # optional, dedicated devices in use
//   allocatedShared: [driver-a/pool-1/device-1/<shareID>]
//   allocatedCapacity: {driver-a/pool-1/device-1: {memory: "1Gi"}}
//   objects: [ ...DeviceClass, ResourceSlice, ResourceClaim, DeviceTaintRule... ]
//   interrupt: deadline                   # optional: deadline (in the past), cancel or off
//   upstreamDiffers: "why"                # optional: a deliberate difference from upstream
//                                         # (allocdiff_casefiles does not compare this file)
//   expect:
//     steps: 16                           # optional: allocateOne invocations (search effort)
//     error: "substring"                  # error for the whole pod, or
//     unschedulable: true                 # cannot allocate on this node (reason: "substring"), or
//     allocations: [ <status.allocation of each pending claim, in order> ]
//
// A Pod among the objects adds its synthesized extended-resource claim after the pending claims.
// Results inside an allocation compare as an unordered set; shareIDs are fixed to
// aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "devlet/allocator/scenario.h"
#include "devlet/allocator/testing/case_yaml.h"
#include "devlet/common/status.h"
#include "devlet/kube/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace devlet::allocator {
namespace {

using Json = nlohmann::json;

constexpr char kShareId[] = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";

std::vector<std::string> CaseFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(DEVLET_ALLOCATOR_CASES_DIR)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void Normalize(Json& allocation) {
  if (!allocation.is_object()) return;
  if (allocation.contains("devices") && allocation["devices"].contains("results")) {
    Json& results = allocation["devices"]["results"];
    for (Json& r : results) {
      if (r.contains("shareID")) r["shareID"] = kShareId;
    }
    std::sort(results.begin(), results.end(), [](const Json& a, const Json& b) {
      return a.dump() < b.dump();
    });
  }
}

// The case's objects as devlet-alloc reads them (through the kube codec), with the node: the
// case's `node` (a name, or a name and labels; default node-1 in region-1 on earth), or a Node
// object of that name among the objects (one with status.allocatable, say).
void LoadObjects(const YAML::Node& doc, const std::string& source,
                 std::vector<kube::Object>* objects, kube::Node* node) {
  std::string objects_yaml;
  for (const auto& object : doc["objects"]) {
    YAML::Emitter emitter;
    emitter << object;
    objects_yaml += "---\n";
    objects_yaml += emitter.c_str();
    objects_yaml += "\n";
  }
  node->metadata.name = "node-1";
  node->metadata.labels = {{"region", "region-1"}, {"planet", "earth"}};
  if (doc["node"]) {
    if (doc["node"].IsScalar()) {
      node->metadata.name = doc["node"].as<std::string>();
    } else {
      node->metadata.name = doc["node"]["name"].as<std::string>();
      node->metadata.labels.clear();
      if (doc["node"]["labels"]) {
        for (const auto& kv : doc["node"]["labels"]) {
          node->metadata.labels[kv.first.as<std::string>()] = kv.second.as<std::string>();
        }
      }
    }
  }
  auto decoded = kube::Decode(objects_yaml, {.source = source});
  ASSERT_TRUE(decoded.ok()) << Message(decoded.status());
  *objects = std::move(*decoded);
  bool given = false;
  for (const auto& object : *objects) {
    const auto* n = std::get_if<kube::Node>(&object);
    if (n != nullptr && n->metadata.name == node->metadata.name) {
      *node = *n;
      given = true;
    }
  }
  if (!given)
    objects->push_back(*node);
}

// Allocated state given by device IDs (in addition to claims with status.allocation):
// `allocated` (driver/pool/device), `allocatedShared` (with the share ID) and
// `allocatedCapacity` (consumed capacity per device).
void AddAllocated(const YAML::Node& doc, AllocatedState* state) {
  auto split = [](const std::string& id) {
    std::vector<std::string> parts;
    std::stringstream ss(id);
    std::string part;
    while (std::getline(ss, part, '/')) parts.push_back(part);
    return parts;
  };
  for (const auto& id : doc["allocated"]) {
    auto p = split(id.as<std::string>());
    ASSERT_EQ(p.size(), 3u) << id.as<std::string>();
    state->AddDevice(p[0], p[1], p[2]);
  }
  for (const auto& id : doc["allocatedShared"]) {
    auto p = split(id.as<std::string>());
    ASSERT_EQ(p.size(), 4u) << id.as<std::string>();
    state->AddSharedDevice(p[0], p[1], p[2], p[3]);
  }
  for (const auto& kv : doc["allocatedCapacity"]) {
    auto p = split(kv.first.as<std::string>());
    ASSERT_EQ(p.size(), 3u);
    for (const auto& cap : kv.second) {
      ASSERT_TRUE(state
                      ->AddCapacity(p[0], p[1], p[2], cap.first.as<std::string>(),
                                    cap.second.as<std::string>())
                      .ok());
    }
  }
}

// The search's options: a fixed share ID, and the case's `interrupt` (upstream's interrupt test:
// a search that cannot succeed, stopped by a deadline in the past or by cancellation before it
// starts), else a budget.
void SetOptions(const YAML::Node& doc, std::atomic<bool>* cancelled, AllocateOptions* options) {
  options->fixed_share_id = kShareId;
  if (!doc["interrupt"]) {
    // A budget, so that a search that explodes (issue 16: the results limit not pruning) fails
    // the case with a clear error instead of hanging the test run.
    options->timeout = std::chrono::seconds(30);
    options->deadline = std::chrono::steady_clock::now() + options->timeout;
    return;
  }
  const std::string how = doc["interrupt"].as<std::string>();
  if (how == "deadline") {
    options->deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  } else if (how == "cancel") {
    *cancelled = true;
    options->cancelled = cancelled;
  } else {
    ASSERT_EQ(how, "off") << "interrupt: off, deadline or cancel";
  }
}

// The outcome against the case's `expect`: steps, then an error, unschedulable (with a reason)
// or the allocations, claim by claim.
void CheckOutcome(const YAML::Node& expect, const AllocateOutcome& out,
                  const std::vector<kube::ResourceClaim>& pending) {
  if (expect["steps"]) {
    // Search effort: upstream's expectNumAllocateOneInvocations (one call per device slot, per
    // request end, per claim end and per subrequest attempt).
    EXPECT_EQ(out.steps, expect["steps"].as<int64_t>()) << "allocateOne invocations";
  }
  if (expect["error"]) {
    ASSERT_EQ(out.kind, AllocateOutcome::Kind::kError) << "reason: " << out.reason;
    EXPECT_THAT(Message(out.status), ::testing::HasSubstr(expect["error"].as<std::string>()));
    return;
  }
  ASSERT_NE(out.kind, AllocateOutcome::Kind::kError) << Message(out.status);
  if (expect["unschedulable"]) {
    ASSERT_EQ(out.kind, AllocateOutcome::Kind::kUnschedulable);
    if (expect["reason"]) {
      EXPECT_THAT(out.reason, ::testing::HasSubstr(expect["reason"].as<std::string>()));
    }
    return;
  }
  ASSERT_EQ(out.kind, AllocateOutcome::Kind::kAllocated) << out.reason;
  ASSERT_TRUE(expect["allocations"]) << "case has no expectation";
  ASSERT_EQ(out.results.size(), expect["allocations"].size());
  for (size_t i = 0; i < out.results.size(); ++i) {
    kube::ResourceClaim claim = pending[i];
    claim.status.allocation = out.results[i];
    Json actual = Json::parse(kube::EncodeJson(claim))["status"]["allocation"];
    Json expected = testing::CaseYamlToJson(expect["allocations"][i]);
    Normalize(actual);
    Normalize(expected);
    EXPECT_EQ(actual.dump(2), expected.dump(2)) << "claim #" << i;
  }
}

class AllocatorCase : public ::testing::TestWithParam<std::string> {};

TEST_P(AllocatorCase, Run) {
  const std::string path = std::string(DEVLET_ALLOCATOR_CASES_DIR) + "/" + GetParam();
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    FAIL() << path << ": " << e.what();
  }
  SCOPED_TRACE(path);
  auto features = ParseFeatureGates(doc["gates"] ? doc["gates"].as<std::string>() : "");
  ASSERT_TRUE(features.ok()) << Message(features.status());
  std::vector<kube::Object> objects;
  kube::Node node;
  ASSERT_NO_FATAL_FAILURE(LoadObjects(doc, GetParam(), &objects, &node));
  bool validate = doc["validate"] ? doc["validate"].as<bool>() : true;
  auto scenario = Scenario::FromObjects(std::move(objects), *features, validate);
  const YAML::Node expect = doc["expect"];
  if (!scenario.ok()) {
    ASSERT_TRUE(expect["error"]) << "unexpected error: " << Message(scenario.status());
    EXPECT_THAT(Message(scenario.status()),
                ::testing::HasSubstr(expect["error"].as<std::string>()));
    return;
  }
  AllocatedState state = scenario->state();
  ASSERT_NO_FATAL_FAILURE(AddAllocated(doc, &state));
  // The pending claims plus the pod's synthesized extended-resource claim (Scenario::ClaimsFor,
  // as devlet-alloc does).
  auto pending = scenario->ClaimsFor(node);
  if (!pending.ok()) {
    ASSERT_TRUE(expect["error"]) << "unexpected error: " << Message(pending.status());
    EXPECT_THAT(Message(pending.status()), ::testing::HasSubstr(expect["error"].as<std::string>()));
    return;
  }
  std::vector<const kube::ResourceClaim*> claims;
  for (const auto& c : *pending)
    claims.push_back(&c);
  AllocateOptions options;
  std::atomic<bool> cancelled{false};
  ASSERT_NO_FATAL_FAILURE(SetOptions(doc, &cancelled, &options));
  AllocateOutcome out = Allocate(scenario->snapshot(), node, claims, state, options);
  CheckOutcome(expect, out, *pending);
}

INSTANTIATE_TEST_SUITE_P(Cases, AllocatorCase, ::testing::ValuesIn(CaseFiles()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param.substr(0, param_info.param.size() - 5);
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace devlet::allocator
