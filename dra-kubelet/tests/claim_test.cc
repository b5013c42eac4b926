#include "devlet/dra_kubelet/claim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "devlet/common/testing/status_matchers.h"

namespace devlet::dra_kubelet {
namespace {

using ::devlet::testing::IsOk;
using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kAllocated[] = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
  "metadata": {"namespace": "ns", "name": "c", "uid": "u-1", "generation": 3,
               "annotations": {"resource.kubernetes.io/pod-claim-name": "gpus"}},
  "spec": {"devices": {"requests": [{"name": "gpu"}]}},
  "status": {
    "allocation": {
      "devices": {
        "results": [
          {"request": "gpu", "driver": "gpu.devlet.test", "pool": "node-1", "device": "gpu-0"},
          {"request": "pair/large", "driver": "gpu.devlet.test", "pool": "node-1",
           "device": "gpu-1", "shareID": "s-1", "adminAccess": true}
        ],
        "config": [
          {"source": "FromClass", "opaque": {"driver": "gpu.devlet.test",
                                              "parameters": {"kind": "DeviceConfig"}}},
          {"source": "FromClaim", "requests": ["gpu"],
           "opaque": {"driver": "other", "parameters": {"x": 1}}}
        ]
      },
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
    },
    "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-1"}]
  }
})";

TEST(ParseResourceClaimJson, ReadsWhatPreparationNeeds) {
  absl::StatusOr<ResourceClaim> claim = ParseResourceClaimJson(kAllocated);
  ASSERT_THAT(claim, IsOk());
  EXPECT_EQ(claim->Ref().Display(), "ns/c");
  EXPECT_EQ(claim->uid, "u-1");
  EXPECT_EQ(claim->generation, 3);
  EXPECT_EQ(claim->annotations.at(std::string(kPodClaimNameAnnotation)), "gpus");
  EXPECT_TRUE(claim->allocated);
  ASSERT_EQ(claim->results.size(), 2u);
  EXPECT_EQ(claim->results[1].request, "pair/large");
  EXPECT_EQ(claim->results[1].share_id, "s-1");
  EXPECT_TRUE(claim->results[1].admin_access);
  EXPECT_FALSE(claim->results[0].share_id.has_value());
  ASSERT_EQ(claim->config.size(), 2u);
  EXPECT_EQ(claim->config[0].source, ConfigSource::kFromClass);
  EXPECT_EQ(claim->config[0].opaque_parameters, R"({"kind":"DeviceConfig"})");
  EXPECT_THAT(claim->config[1].requests, ElementsAre("gpu"));
  EXPECT_THAT(claim->allocation_node_names, ElementsAre("node-1"));
  EXPECT_THAT(claim->reserved_for_uids, ElementsAre("pod-1"));
}

TEST(ParseResourceClaimJson, UnallocatedClaim) {
  absl::StatusOr<ResourceClaim> claim =
      ParseResourceClaimJson(R"({"kind":"ResourceClaim","metadata":{"name":"c","namespace":"n"}})");
  ASSERT_THAT(claim, IsOk());
  EXPECT_FALSE(claim->allocated);
}

TEST(ParseResourceClaimJson, ErrorsNameTheField) {
  EXPECT_THAT(ParseResourceClaimJson("{"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseResourceClaimJson(R"({"kind":"Pod","metadata":{}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kind ResourceClaim")));
  EXPECT_THAT(
      ParseResourceClaimJson(
          R"({"metadata":{"name":"c"},"status":{"allocation":{"devices":{"results":[{"device":7}]}}}})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("status.allocation.devices.results[0].device must be a string")));
  EXPECT_THAT(
      ParseResourceClaimJson(
          R"({"metadata":{"name":"c"},"status":{"allocation":{"devices":{"config":[{"source":"FromPod"}]}}}})"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("FromClass or FromClaim")));
}

TEST(BaseRequestName, StripsSubrequest) {
  EXPECT_EQ(BaseRequestName("gpu/large"), "gpu");
  EXPECT_EQ(BaseRequestName("gpu"), "gpu");
}

}  // namespace
}  // namespace devlet::dra_kubelet
