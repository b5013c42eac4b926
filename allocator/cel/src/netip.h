// Private: IP addresses as Go's net/netip parses and prints them, with Kubernetes' CEL rules
// (k8s.io/apiserver pkg/cel/library/ip.go): no zones, no IPv4-mapped IPv6 addresses.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "devlet/common/strings.h"

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

// CidrPrefix is a netip.Prefix: an address (host bits kept as written) and a prefix length.
struct CidrPrefix {
  IpAddr ip;
  int bits = 0;

  friend bool operator==(const CidrPrefix& a, const CidrPrefix& b) {
    return a.ip == b.ip && a.bits == b.bits;
  }
  // The address with all bits after the prefix cleared.
  CidrPrefix Masked() const;
  // Whether `addr` is of the same family and agrees on the first `bits` bits.
  bool Contains(const IpAddr& addr) const;
  // Kubernetes' containsCIDR: the prefixes overlap and `other` is at least as long.
  bool ContainsPrefix(const CidrPrefix& other) const;
  // "ip/bits" with the address as IpAddr::ToString prints it.
  std::string ToString() const;
};

// ParseCidr is netip.ParsePrefix followed by Kubernetes' check (no IPv4-mapped IPv6); *error gets
// Kubernetes' message (library/cidr.go wraps netip's error in "network address parse error during
// conversion from string: ", not the IPv4-mapped one; cidr() adds the same prefix again, see
// k8s.cc).
bool ParseCidr(std::string_view text, CidrPrefix* out, std::string* error);

// ParseIp is netip.ParseAddr followed by Kubernetes' checks. On failure it returns false and
// sets *error to Kubernetes' message ("IP Address \"x\" parse error during conversion from
// string: ParseAddr(\"x\"): unable to parse IP", "IP address \"x\" with zone value is not
// allowed", "IPv4-mapped IPv6 address \"x\" is not allowed").
bool ParseIp(std::string_view text, IpAddr* out, std::string* error);

// ParseAddr is netip.ParseAddr itself (zones allowed): false with *netip_error = Go's message
// ("ParseAddr(\"x\"): unable to parse IP"); *zone = the text after '%' if any.
bool ParseAddr(std::string_view text, IpAddr* out, std::string_view* zone,
               std::string* netip_error);

// Go's strconv.Quote, for error messages that quote their input as Kubernetes does.
using ::devlet::GoQuote;

}  // namespace devlet::cel::internal
