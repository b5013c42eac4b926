// File: devlet/dra_kubelet/claim_status.h
//
// ResourceClaim status.devices (KEP-4817) written by the driver, on devlet's kube/ client:
//
//   KubeClaimStatusWriter  a ClaimStatusWriter over a kube::ObjectStore. Against a kube-apiserver
//                          (kube::ApiServerStore) it uses server-side apply on the status
//                          subresource with field manager = driver name and force, as the upstream
//                          drivers do, so only our driver's entries are owned and changed. Over
//                          any other store (the standalone manifest directory, fakes) it reads the
//                          claim, replaces our driver's entries and writes the status back with a
//                          resourceVersion precondition, retrying on conflict.
//
//   ReadyDeviceStatuses    (preparer.h) what the preparer publishes after a prepare: Ready=True
//                          per device, plus networkData when the backend knew it.
//
//   KubeClaimStatusWriter writer(store, "gpu.devlet.io");
//   DEVLET_RETURN_IF_ERROR(writer.SetDeviceStatus(ref, ReadyDeviceStatuses(record)));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "devlet/dra_kubelet/interfaces.h"
#include "devlet/dra_kubelet/preparer.h"
#include "devlet/kube/client.h"

namespace devlet::dra_kubelet {

// ValidateDeviceStatus checks the API server's limits on one entry (conditions <= 8 with unique,
// non-empty types, status True/False/Unknown and a reason; data a JSON object <= 10 KiB;
// networkData interfaceName <= 256, ips <= 16 and each a CIDR, hardwareAddress <= 128), so a bad
// entry fails here with a message naming the device rather than as an opaque 422.
absl::Status ValidateDeviceStatus(const DeviceStatus& status);

// DeviceStatusApplyConfiguration returns the server-side apply body (JSON) that makes `devices`
// our driver's entries of the claim's status.devices (metadata.uid set: a UID precondition).
std::string DeviceStatusApplyConfiguration(const std::string& driver, const ClaimRef& claim,
                                           const std::vector<DeviceStatus>& devices);

// KubeClaimStatusWriter: see the file comment. Thread-safe when the store is.
class KubeClaimStatusWriter final : public ClaimStatusWriter {
 public:
  // `store` must outlive the writer.
  KubeClaimStatusWriter(kube::ObjectStore& store, std::string driver);

  absl::Status SetDeviceStatus(const ClaimRef& claim,
                               const std::vector<DeviceStatus>& devices) override;

  // UsesServerSideApply reports whether writes go through server-side apply.
  [[nodiscard]] bool UsesServerSideApply() const;

 private:
  absl::Status ReadModifyWrite(const ClaimRef& claim, const std::vector<DeviceStatus>& devices);

  kube::ObjectStore& store_;
  std::string driver_;
};

}  // namespace devlet::dra_kubelet
