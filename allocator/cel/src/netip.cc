// IP address parsing and printing with Go net/netip's rules (see netip.h). Written from the
// documented behaviour of netip.ParseAddr / Addr.String, not from its source.
#include "netip.h"

#include <string>
#include <string_view>

namespace devlet::cel::internal {
namespace {

// netip's parse error: `ParseAddr("in"): msg` and, when set, ` (at "rest")`.
struct ParseError {
  std::string msg;
  std::string_view at;
};

std::string AddrError(std::string_view in, const ParseError& e) {
  std::string s = "ParseAddr(" + GoQuote(in) + "): " + e.msg;
  if (!e.at.empty()) s += " (at " + GoQuote(e.at) + ")";
  return s;
}

// Dotted-quad fields of s into out[0..4): decimal 0-255, no leading zeros, exactly four.
bool ParseV4Fields(std::string_view s, uint8_t* out, ParseError* err) {
  int val = 0, pos = 0, digits = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (digits == 1 && val == 0) {
        *err = {"IPv4 field has octet with leading zero", {}};
        return false;
      }
      val = val * 10 + (c - '0');
      ++digits;
      if (val > 255) {
        *err = {"IPv4 field has value >255", {}};
        return false;
      }
    } else if (c == '.') {
      if (i == 0 || i == s.size() - 1 || s[i - 1] == '.') {
        *err = {"IPv4 field must have at least one digit", s.substr(i)};
        return false;
      }
      if (pos == 3) {
        *err = {"IPv4 address too long", {}};
        return false;
      }
      out[pos++] = static_cast<uint8_t>(val);
      val = 0;
      digits = 0;
    } else {
      *err = {"unexpected character", s.substr(i)};
      return false;
    }
  }
  if (pos < 3) {
    *err = {"IPv4 address too short", {}};
    return false;
  }
  out[3] = static_cast<uint8_t>(val);
  return true;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// IPv6 with an optional trailing dotted quad and "::"; *zone is what followed '%'.
bool ParseV6(std::string_view in, IpAddr* out, std::string_view* zone, ParseError* err) {
  std::string_view s = in;
  if (size_t p = s.find('%'); p != std::string_view::npos) {
    *zone = s.substr(p + 1);
    s = s.substr(0, p);
    if (zone->empty()) {
      *err = {"zone must be a non-empty string", {}};
      return false;
    }
  }
  std::array<uint8_t, 16> ip{};
  int ellipsis = -1;
  if (s.size() >= 2 && s[0] == ':' && s[1] == ':') {
    ellipsis = 0;
    s.remove_prefix(2);
    if (s.empty()) {
      out->bytes = ip;
      out->is4 = false;
      return true;
    }
  }
  int i = 0;
  while (i < 16) {
    size_t off = 0;
    uint32_t acc = 0;
    for (; off < s.size(); ++off) {
      const int d = HexDigit(s[off]);
      if (d < 0) break;
      acc = (acc << 4) + static_cast<uint32_t>(d);
      if (off > 3) {
        *err = {"each group must have 4 or less digits", s};
        return false;
      }
    }
    if (off == 0) {
      *err = {"each colon-separated field must have at least one digit", s};
      return false;
    }
    if (off < s.size() && s[off] == '.') {
      if (ellipsis < 0 && i != 12) {
        *err = {"embedded IPv4 address must replace the final 2 fields of the address", s};
        return false;
      }
      if (i + 4 > 16) {
        *err = {"too many hex fields to fit an embedded IPv4 at the end of the address", s};
        return false;
      }
      if (!ParseV4Fields(s, &ip[static_cast<size_t>(i)], err)) return false;
      s = {};
      i += 4;
      break;
    }
    ip[static_cast<size_t>(i)] = static_cast<uint8_t>(acc >> 8);
    ip[static_cast<size_t>(i) + 1] = static_cast<uint8_t>(acc);
    i += 2;
    s.remove_prefix(off);
    if (s.empty()) break;
    if (s[0] != ':') {
      *err = {"unexpected character, want colon", s};
      return false;
    }
    if (s.size() == 1) {
      *err = {"colon must be followed by more characters", s};
      return false;
    }
    s.remove_prefix(1);
    if (s[0] == ':') {
      if (ellipsis >= 0) {
        *err = {"multiple :: in address", s};
        return false;
      }
      ellipsis = i;
      s.remove_prefix(1);
      if (s.empty()) break;
    }
  }
  if (!s.empty()) {
    *err = {"trailing garbage after address", s};
    return false;
  }
  if (i < 16) {
    if (ellipsis < 0) {
      *err = {"address string too short", {}};
      return false;
    }
    const int n = 16 - i;
    for (int j = i - 1; j >= ellipsis; --j) ip[static_cast<size_t>(j + n)] = ip[static_cast<size_t>(j)];
    for (int j = ellipsis; j < ellipsis + n; ++j) ip[static_cast<size_t>(j)] = 0;
  } else if (ellipsis >= 0) {
    *err = {"the :: must expand to at least one field of zeros", {}};
    return false;
  }
  out->bytes = ip;
  out->is4 = false;
  return true;
}

bool Is4In6(const IpAddr& a) {
  if (a.is4) return false;
  for (int i = 0; i < 10; ++i) {
    if (a.bytes[static_cast<size_t>(i)] != 0) return false;
  }
  return a.bytes[10] == 0xff && a.bytes[11] == 0xff;
}

uint16_t Group(const IpAddr& a, int i) {
  return static_cast<uint16_t>((a.bytes[static_cast<size_t>(2 * i)] << 8) |
                               a.bytes[static_cast<size_t>(2 * i + 1)]);
}

}  // namespace

bool IpAddr::IsUnspecified() const {
  for (int i = 0; i < (is4 ? 4 : 16); ++i) {
    if (bytes[static_cast<size_t>(i)] != 0) return false;
  }
  return true;
}

bool IpAddr::IsLoopback() const {
  if (is4) return bytes[0] == 127;
  for (int i = 0; i < 15; ++i) {
    if (bytes[static_cast<size_t>(i)] != 0) return false;
  }
  return bytes[15] == 1;
}

bool IpAddr::IsMulticast() const { return is4 ? (bytes[0] & 0xf0) == 0xe0 : bytes[0] == 0xff; }

bool IpAddr::IsLinkLocalMulticast() const {
  if (is4) return bytes[0] == 224 && bytes[1] == 0 && bytes[2] == 0;
  return (Group(*this, 0) & 0xff0f) == 0xff02;
}

bool IpAddr::IsLinkLocalUnicast() const {
  if (is4) return bytes[0] == 169 && bytes[1] == 254;
  return (Group(*this, 0) & 0xffc0) == 0xfe80;
}

bool IpAddr::IsGlobalUnicast() const {
  if (is4 && (IsUnspecified() ||
              (bytes[0] == 255 && bytes[1] == 255 && bytes[2] == 255 && bytes[3] == 255))) {
    return false;
  }
  return !IsUnspecified() && !IsLoopback() && !IsMulticast() && !IsLinkLocalUnicast();
}

std::string IpAddr::ToString() const {
  std::string out;
  if (is4) {
    for (int i = 0; i < 4; ++i) {
      if (i > 0) out += '.';
      out += std::to_string(bytes[static_cast<size_t>(i)]);
    }
    return out;
  }
  int zero_start = -1, zero_end = -1;
  for (int i = 0; i < 8; ++i) {
    int j = i;
    while (j < 8 && Group(*this, j) == 0) ++j;
    if (j - i >= 2 && j - i > zero_end - zero_start) {
      zero_start = i;
      zero_end = j;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    if (i == zero_start) {
      out += "::";
      i = zero_end;
      if (i >= 8) break;
    } else if (i > 0) {
      out += ':';
    }
    const uint16_t g = Group(*this, i);
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      const int d = (g >> shift) & 15;
      if (d != 0 || started || shift == 0) {
        out += kHex[d];
        started = true;
      }
    }
  }
  return out;
}

// netip.ParseAddr: false with *netip_error = its message; *zone = the zone text if any.
bool ParseAddr(std::string_view text, IpAddr* out, std::string_view* zone, std::string* netip_error) {
  ParseError err;
  bool ok = false;
  bool decided = false;
  for (size_t i = 0; i < text.size() && !decided; ++i) {
    switch (text[i]) {
      case '.':
        decided = true;
        out->bytes = {};
        out->is4 = true;
        ok = ParseV4Fields(text, out->bytes.data(), &err);
        break;
      case ':':
        decided = true;
        ok = ParseV6(text, out, zone, &err);
        break;
      case '%':
        decided = true;
        err = {"missing IPv6 address", {}};
        break;
      default: break;
    }
  }
  if (!decided) err = {"unable to parse IP", {}};
  if (!ok) *netip_error = AddrError(text, err);
  return ok;
}

namespace {

void MaskTo(IpAddr* a, int bits) {
  const int total = a->is4 ? 4 : 16;
  for (int i = 0; i < total; ++i) {
    const int keep = bits - 8 * i;
    uint8_t& byte = a->bytes[static_cast<size_t>(i)];
    if (keep <= 0) {
      byte = 0;
    } else if (keep < 8) {
      byte = static_cast<uint8_t>(byte & (0xff << (8 - keep)));
    }
  }
}
}  // namespace

CidrPrefix CidrPrefix::Masked() const {
  CidrPrefix m = *this;
  MaskTo(&m.ip, bits);
  return m;
}

bool CidrPrefix::Contains(const IpAddr& addr) const {
  if (addr.is4 != ip.is4) return false;
  IpAddr a = addr, b = ip;
  MaskTo(&a, bits);
  MaskTo(&b, bits);
  return a == b;
}

bool CidrPrefix::ContainsPrefix(const CidrPrefix& other) const {
  if (other.ip.is4 != ip.is4) return false;
  const int min_bits = bits < other.bits ? bits : other.bits;
  IpAddr a = ip, b = other.ip;
  MaskTo(&a, min_bits);
  MaskTo(&b, min_bits);
  return a == b && bits <= other.bits;
}

std::string CidrPrefix::ToString() const { return ip.ToString() + "/" + std::to_string(bits); }

bool ParseCidr(std::string_view text, CidrPrefix* out, std::string* error) {
  const std::string prefix = "network address parse error during conversion from string: ";
  auto fail = [&](const std::string& msg) {
    *error = prefix + "netip.ParsePrefix(" + GoQuote(text) + "): " + msg;
    return false;
  };
  const size_t slash = text.rfind('/');
  if (slash == std::string_view::npos) return fail("no '/'");
  std::string_view zone;
  std::string netip_error;
  if (!ParseAddr(text.substr(0, slash), &out->ip, &zone, &netip_error)) return fail(netip_error);
  if (!out->ip.is4 && !zone.empty()) return fail("IPv6 zones cannot be present in a prefix");
  const std::string_view bits = text.substr(slash + 1);
  const std::string bad = "bad bits after slash: " + GoQuote(bits);
  if (bits.size() > 1 && (bits[0] < '1' || bits[0] > '9')) return fail(bad);
  // strconv.Atoi: an optional sign, then decimal digits, within int64.
  std::string_view digits = bits;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty() || digits.size() > 18) return fail(bad);
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return fail(bad);
    value = value * 10 + (c - '0');
  }
  if (negative) value = -value;
  if (value < 0 || value > (out->ip.is4 ? 32 : 128)) return fail("prefix length out of range");
  out->bits = static_cast<int>(value);
  if (Is4In6(out->ip)) {
    *error = "IPv4-mapped IPv6 address " + GoQuote(text) + " is not allowed";
    return false;
  }
  return true;
}

bool ParseIp(std::string_view text, IpAddr* out, std::string* error) {
  std::string_view zone;
  std::string netip_error;
  if (!ParseAddr(text, out, &zone, &netip_error)) {
    *error = "IP Address " + GoQuote(text) + " parse error during conversion from string: " +
             netip_error;
    return false;
  }
  if (!zone.empty()) {
    *error = "IP address " + GoQuote(text) + " with zone value is not allowed";
    return false;
  }
  if (Is4In6(*out)) {
    *error = "IPv4-mapped IPv6 address " + GoQuote(text) + " is not allowed";
    return false;
  }
  return true;
}

}  // namespace devlet::cel::internal
