#include "devlet/dra_kubelet/testing/kubelet_client.h"

#include <string_view>
#include <type_traits>

#include <grpcpp/grpcpp.h>

#include "devlet/common/status.h"

namespace devlet::dra_kubelet::testing {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

namespace {

// ClaimEntry returns the claim's entry of an answer (prepare and unprepare answers are both maps
// by claim UID), or the error of the call, of the answer or of the claim.
template <typename Response>
auto ClaimEntry(const grpc::Status& status, const Response& response, std::string_view call,
                const ClaimRef& ref)
    -> absl::StatusOr<typename std::decay_t<decltype(response.claims())>::mapped_type> {
  if (!status.ok()) {
    return Unavailable(std::string(call) + " for " + ref.Display() + ": " + status.error_message());
  }
  auto entry = response.claims().find(ref.uid);
  if (entry == response.claims().end()) {
    return Internal(std::string(call) + ": no entry for " + ref.Display() + " (" + ref.uid + ")");
  }
  if (!entry->second.error().empty())
    return FailedPrecondition(entry->second.error());
  return entry->second;
}

// CallForClaim sends `rpc` (the stub's prepare or unprepare method) for the one claim `ref`.
template <typename Request, typename Response, typename Rpc>
auto CallForClaim(const ClaimRef& ref, std::chrono::seconds timeout, std::string_view call,
                  Rpc rpc) {
  Request request;
  drav1::Claim* claim = request.add_claims();
  claim->set_namespace_(ref.namespace_name);
  claim->set_name(ref.name);
  claim->set_uid(ref.uid);
  Response response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  const grpc::Status status = rpc(&context, request, &response);
  return ClaimEntry(status, response, call, ref);
}

}  // namespace

KubeletClient::KubeletClient(const std::string& dra_socket, std::chrono::seconds timeout)
    : timeout_(timeout),
      stub_(drav1::DRAPlugin::NewStub(
          grpc::CreateChannel("unix:" + dra_socket, grpc::InsecureChannelCredentials()))) {}

absl::StatusOr<drav1::NodePrepareResourceResponse> KubeletClient::Prepare(const ClaimRef& ref) {
  return CallForClaim<drav1::NodePrepareResourcesRequest, drav1::NodePrepareResourcesResponse>(
      ref, timeout_, "NodePrepareResources",
      [this](auto... args) { return stub_->NodePrepareResources(args...); });
}

absl::Status KubeletClient::Unprepare(const ClaimRef& ref) {
  return CallForClaim<drav1::NodeUnprepareResourcesRequest, drav1::NodeUnprepareResourcesResponse>(
             ref, timeout_, "NodeUnprepareResources",
             [this](auto... args) { return stub_->NodeUnprepareResources(args...); })
      .status();
}

std::vector<std::string> DeviceNames(const drav1::NodePrepareResourceResponse& entry) {
  std::vector<std::string> names;
  for (const drav1::Device& device : entry.devices())
    names.push_back(device.device_name());
  return names;
}

}  // namespace devlet::dra_kubelet::testing
