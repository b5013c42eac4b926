#include "devlet/cdi/metadata.h"

#include <string>

#include "devlet/cdi/names.h"

namespace devlet::cdi {
namespace {

std::string BaseRequest(const std::string& request) { return request.substr(0, request.find('/')); }

}  // namespace

std::string MetadataSpecName(const MetadataRequest& r) {
  return r.driver + "_metadata_" + r.claim_uid + "_" + BaseRequest(r.request);
}

std::string MetadataDeviceId(const MetadataRequest& r) {
  return QualifiedName(r.driver, "metadata", r.claim_uid + "_" + BaseRequest(r.request));
}

std::string MetadataContainerPath(const MetadataRequest& r) {
  const std::string claim = r.pod_claim_name.empty()
                                ? "resourceclaims/" + r.claim_name
                                : "resourceclaimtemplates/" + r.pod_claim_name;
  return std::string(kMetadataContainerRoot) + "/" + claim + "/" + BaseRequest(r.request) + "/" +
         r.driver + "-metadata.json";
}

Spec MetadataSpec(const MetadataRequest& r) {
  Spec spec{.version = "0.5.0", .kind = r.driver + "/metadata"};
  spec.devices.push_back(
      {.name = r.claim_uid + "_" + BaseRequest(r.request),
       .container_edits = {.mounts = {{.host_path = r.host_file,
                                       .container_path = MetadataContainerPath(r),
                                       .options = {"ro", "bind"}}}}});
  return spec;
}

}  // namespace devlet::cdi
