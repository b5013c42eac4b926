#include "names.h"

#include "devlet/common/status.h"
#include "devlet/common/strings.h"

namespace devlet::dra_kubelet::internal {
namespace {

bool IsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

constexpr std::string_view kLabelRule =
    "must be a lowercase RFC 1123 label (at most 63 of 'a'-'z', '0'-'9' and '-', starting and "
    "ending with a letter or digit)";
constexpr std::string_view kSubdomainRule =
    "must be a lowercase RFC 1123 subdomain (at most 253 of 'a'-'z', '0'-'9', '-' and '.', each "
    "dot-separated part starting and ending with a letter or digit)";

absl::Status Refuse(const ClaimRef& ref, std::string_view field, std::string_view value,
                    std::string_view rule) {
  return InvalidArgument("ResourceClaim " + ref.Display() + ": " + std::string(field) + " " +
                         GoQuote(value) + " " + std::string(rule) +
                         "; devlet builds file paths from it and refuses it");
}

bool IsRequestName(std::string_view value) {
  const std::size_t slash = value.find('/');
  if (slash == std::string_view::npos) return IsDns1123Label(value);
  return IsDns1123Label(value.substr(0, slash)) && IsDns1123Label(value.substr(slash + 1));
}

bool IsPoolName(std::string_view value) {
  if (value.empty() || value.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = value.find('/', start);
    if (!IsDns1123Subdomain(value.substr(start, slash - start))) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

}  // namespace

bool IsDns1123Label(std::string_view value) {
  if (value.empty() || value.size() > 63) return false;
  for (char c : value) {
    if (!IsLabelChar(c)) return false;
  }
  return value.front() != '-' && value.back() != '-';
}

bool IsDns1123Subdomain(std::string_view value) {
  if (value.empty() || value.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = value.find('.', start);
    std::string_view label = value.substr(start, dot - start);
    // Labels of a subdomain have no length limit of their own (apimachinery's regexp).
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!IsLabelChar(c)) return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool IsSafeUid(std::string_view value) {
  if (value.empty() || value.size() > 128 || value == "." || value == "..") return false;
  for (char c : value) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool IsPlainFileName(std::string_view value) {
  return !value.empty() && value != "." && value != ".." &&
         value.find('/') == std::string_view::npos && value.find('\0') == std::string_view::npos;
}

absl::Status CheckClaimRef(const ClaimRef& ref) {
  if (!IsDns1123Label(ref.namespace_name)) {
    return Refuse(ref, "namespace", ref.namespace_name, kLabelRule);
  }
  if (!IsDns1123Subdomain(ref.name)) return Refuse(ref, "name", ref.name, kSubdomainRule);
  if (!IsSafeUid(ref.uid)) {
    return Refuse(ref, "UID", ref.uid,
                  "must be 1 to 128 of 'A'-'Z', 'a'-'z', '0'-'9', '-', '.' and '_' (not \".\" "
                  "or \"..\")");
  }
  return absl::OkStatus();
}

absl::Status CheckRecordNames(const ClaimRecord& record) {
  DEVLET_RETURN_IF_ERROR(CheckClaimRef(record.claim));
  const ClaimRef& ref = record.claim;
  for (const PreparedDeviceRecord& device : record.devices) {
    for (const std::string& request : device.requests) {
      if (!IsRequestName(request)) {
        return Refuse(ref, "request", request,
                      "must be a request name (an RFC 1123 label, or two joined by '/' for a "
                      "subrequest)");
      }
    }
    if (!IsDns1123Label(device.device)) return Refuse(ref, "device", device.device, kLabelRule);
    if (!IsPoolName(device.pool)) {
      return Refuse(ref, "pool", device.pool,
                    "must be RFC 1123 subdomains joined by '/', at most 253 characters");
    }
  }
  if (record.pod_claim_name && !IsDns1123Label(*record.pod_claim_name)) {
    return Refuse(ref, "pod claim name (annotation resource.kubernetes.io/pod-claim-name)",
                  *record.pod_claim_name, kLabelRule);
  }
  return absl::OkStatus();
}

}  // namespace devlet::dra_kubelet::internal
