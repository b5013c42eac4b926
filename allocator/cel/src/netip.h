// Private: IP addresses as Go's net/netip parses and prints them, with Kubernetes' CEL rules
// (k8s.io/apiserver pkg/cel/library/ip.go): no zones, no IPv4-mapped IPv6 addresses.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace devlet::cel::internal {

// IpAddr is an IPv4 address (bytes[0..4)) or an IPv6 address (all 16 bytes).
struct IpAddr {
  std::array<uint8_t, 16> bytes{};
  bool is4 = false;

  int BitLen() const { return is4 ? 32 : 128; }
  friend bool operator==(const IpAddr& a, const IpAddr& b) {
    return a.is4 == b.is4 && a.bytes == b.bytes;
  }

  bool IsUnspecified() const;
  bool IsLoopback() const;
  bool IsMulticast() const;
  bool IsLinkLocalMulticast() const;
  bool IsLinkLocalUnicast() const;
  bool IsGlobalUnicast() const;
  // Go's Addr.String(): dotted quad, or RFC 5952 IPv6 (lower-case hex, the longest run of two or
  // more zero groups, the first on a tie, as "::").
  std::string ToString() const;
};

// ParseIp is netip.ParseAddr followed by Kubernetes' checks. On failure it returns false and
// sets *error to Kubernetes' message ("IP Address \"x\" parse error during conversion from
// string: ParseAddr(\"x\"): unable to parse IP", "IP address \"x\" with zone value is not
// allowed", "IPv4-mapped IPv6 address \"x\" is not allowed").
bool ParseIp(std::string_view text, IpAddr* out, std::string* error);

// GoQuote is Go's strconv.Quote (enough of it for error messages).
std::string GoQuote(std::string_view s);

}  // namespace devlet::cel::internal
