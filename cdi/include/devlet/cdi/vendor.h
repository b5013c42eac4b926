// File: devlet/cdi/vendor.h
//
// CDI devices from a vendor's own specs (issue 13 §2 gap 6): a device profile may name devices
// that a vendor toolkit wrote into the CDI spec directories (e.g. `nvidia-ctk cdi generate` into
// /etc/cdi or /var/run/cdi: `nvidia.com/gpu=0`, `nvidia.com/gpu=GPU-<uuid>`), so that a container
// gets the vendor's driver libraries, device nodes and hooks beside devlet's own edits without
// devlet linking vendor libraries. Before such a name is handed to the kubelet it must resolve
// exactly as the runtime will resolve it; otherwise the prepare fails with an error that names the
// file or the device, and no container starts without what it asked for.
//
//   DEVLET_ASSIGN_OR_RETURN(cdi::ContainerEdits edits,
//       cdi::ResolveVendorDevices({"/etc/cdi", "/var/run/cdi"}, {"nvidia.com/gpu=GPU-8c1e..."}));
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/cdi/file_system.h"
#include "devlet/cdi/spec.h"

namespace devlet::cdi {

// kDefaultVendorSpecDirs are the directories container runtimes read, lowest priority first
// (the reference library's defaults: /var/run/cdi wins over /etc/cdi).
inline const std::vector<std::string> kDefaultVendorSpecDirs = {"/etc/cdi", "/var/run/cdi"};

// ResolveVendorDevices loads the spec directories `dirs` (priority = index, as the runtime's CDI
// cache does) and resolves `names` ("vendor/class=device") into the merged container edits
// (spec-level edits once per spec, then each device's, in order). Errors are
// FailedPrecondition written for a person: a malformed name; a name whose vendor/class is only
// defined by spec files that do not parse or validate (the message names each file and why); a
// device no spec defines (the message names the device, the directories and the devices of that
// kind that do exist).
absl::StatusOr<ContainerEdits> ResolveVendorDevices(const std::vector<std::string>& dirs,
                                                    const std::vector<std::string>& names,
                                                    FileSystem* fs = nullptr);

}  // namespace devlet::cdi
