// Private to dra-kubelet: checks of the names devlet builds file paths from.
//
// Claim namespaces and names, request, device and pool names and claim UIDs end up in the paths of
// device-metadata files (<data>/dra-device-metadata/<ns>_<claim>/<request>/metadata.json), CDI
// spec files (<cdi root>/k8s.<driver>-claim_<uid>.json) and preparation journals. The API server
// allows none of "/", "..", NUL or '_' in those names, but a manifest directory, a checkpoint from
// an older devlet or a misbehaving kubelet can hand us anything, so every name is checked with the
// API server's rules before it becomes part of a path.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "devlet/dra_kubelet/claim.h"
#include "devlet/dra_kubelet/interfaces.h"

namespace devlet::dra_kubelet::internal {

// IsDns1123Label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsDns1123Label(std::string_view value);

// IsDns1123Subdomain: DNS-1123 labels joined by '.', at most 253 characters.
bool IsDns1123Subdomain(std::string_view value);

// IsSafeUid: a claim UID devlet can put in a file name: 1 to 128 of [A-Za-z0-9._-], not "." or
// "..". (The API server sets UIDs, as UUIDs; manifests may set their own.)
bool IsSafeUid(std::string_view value);

// IsPlainFileName: a name without '/' or NUL that is not "", "." or "..".
bool IsPlainFileName(std::string_view value);

// CheckClaimRef checks the namespace (DNS-1123 label), name (DNS-1123 subdomain) and UID of a
// claim; the error names the claim with its bytes escaped and says which rule failed.
absl::Status CheckClaimRef(const ClaimRef& ref);

// CheckRecordNames checks everything of a claim record that becomes part of a path or of a
// container path: the claim reference, each request ("<request>" or "<request>/<subrequest>",
// DNS-1123 labels), device (DNS-1123 label), pool (DNS-1123 subdomains joined by '/', at most 253
// characters) and the pod claim name (DNS-1123 label).
absl::Status CheckRecordNames(const ClaimRecord& record);

}  // namespace devlet::dra_kubelet::internal
