// File: devlet/cdi/metadata.h
//
// CDI side of the KEP-5304 device-metadata protocol: the per-claim, per-request spec that
// bind-mounts the host metadata file read-only into the container, with the Go helper's names:
//
//   spec file  <cdi root>/<driver>_metadata_<claimUID>_<request>.json   (cdiVersion 0.5.0)
//   kind       <driver>/metadata, one device <claimUID>_<request>
//   CDI ID     <driver>/metadata=<claimUID>_<request>   (append to the request's first device)
//   mount      <host file> -> /var/run/kubernetes.io/dra-device-attributes/
//              {resourceclaims/<claimName> | resourceclaimtemplates/<podClaimName>}/<request>/
//              <driver>-metadata.json, options ["ro", "bind"]
//
//   devlet::cdi::MetadataRequest r{.driver = "devlet.dev", .claim_uid = uid, .claim_name = name,
//                                  .request = "gpu", .host_file = path};
//   DEVLET_ASSIGN_OR_RETURN(auto written, devlet::cdi::WriteSpec(root, MetadataSpecName(r),
//                                                                MetadataSpec(r)));
//
// Writing the metadata file itself (the DeviceMetadata JSON stream) is the caller's job.
#pragma once

#include <string>

#include "devlet/cdi/spec.h"

namespace devlet::cdi {

// kMetadataContainerRoot is where the metadata files appear in containers.
inline constexpr std::string_view kMetadataContainerRoot =
    "/var/run/kubernetes.io/dra-device-attributes";

// MetadataRequest names one claim request whose metadata file is mounted.
struct MetadataRequest {
  std::string driver;          // the DRA driver name (vendor of the spec)
  std::string claim_uid;
  std::string claim_name;      // used when pod_claim_name is empty (claim referenced by name)
  std::string pod_claim_name;  // annotation resource.kubernetes.io/pod-claim-name (template)
  std::string request;         // the top-level request name (subrequest stripped)
  std::string host_file;       // the metadata.json on the host
};

// MetadataSpecName is the spec file name without extension: "<driver>_metadata_<uid>_<request>".
std::string MetadataSpecName(const MetadataRequest& request);

// MetadataDeviceId is the CDI ID to return: "<driver>/metadata=<uid>_<request>".
std::string MetadataDeviceId(const MetadataRequest& request);

// MetadataContainerPath is the file's path inside the container.
std::string MetadataContainerPath(const MetadataRequest& request);

// MetadataSpec is the spec to write (cdiVersion "0.5.0", as the Go helper writes).
Spec MetadataSpec(const MetadataRequest& request);

}  // namespace devlet::cdi
