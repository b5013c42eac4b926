// The kubelet's side of a DRA plugin's v1 socket for tests that drive preparation through it
// (dra-kubelet's own tests, devlet-node's agent tests, the API server integration tests), so that
// each of them does not build the same requests and unpack the same answers.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "devlet/dra_kubelet/claim.h"
#include "dra/v1/api.grpc.pb.h"

namespace devlet::dra_kubelet::testing {

// KubeletClient sends NodePrepareResources and NodeUnprepareResources for one claim at a time, as
// the kubelet does for a pod with one claim, each call bounded by a deadline.
class KubeletClient {
 public:
  // `dra_socket` is the path of the plugin's DRA socket; `timeout` bounds each call (a plugin
  // that hangs fails the test instead of blocking it).
  explicit KubeletClient(const std::string& dra_socket,
                         std::chrono::seconds timeout = std::chrono::seconds(20));

  // Prepare returns the claim's entry of the NodePrepareResources answer. The plugin's per-claim
  // error is FailedPrecondition with the plugin's text; a failed RPC is Unavailable, an answer
  // without the claim's entry Internal.
  absl::StatusOr<::k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourceResponse> Prepare(
      const ClaimRef& claim);

  // Unprepare sends NodeUnprepareResources; errors as for Prepare.
  absl::Status Unprepare(const ClaimRef& claim);

 private:
  std::chrono::seconds timeout_;
  std::unique_ptr<::k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::Stub> stub_;
};

// DeviceNames returns the names of the devices in a claim's prepare answer, in answer order.
std::vector<std::string> DeviceNames(
    const ::k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourceResponse& entry);

}  // namespace devlet::dra_kubelet::testing
