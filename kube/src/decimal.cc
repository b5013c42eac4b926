#include "decimal.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace devlet::kube::internal {
namespace {

constexpr int64_t kMaxExponent = 1000000;

void Normalize(Dec& d) {
  std::size_t lead = 0;
  while (lead < d.digits.size() && d.digits[lead] == '0') {
    ++lead;
  }
  d.digits.erase(0, lead);
  while (!d.digits.empty() && d.digits.back() == '0') {
    d.digits.pop_back();
    ++d.exponent;
  }
  if (d.digits.empty()) {
    d.negative = false;
    d.exponent = 0;
  }
}

// Multiplies a digit string by a small factor.
std::string MultiplySmall(const std::string& digits, int factor) {
  std::string out(digits.size() + 5, '0');
  int64_t carry = 0;
  std::size_t pos = out.size();
  for (std::size_t i = digits.size(); i-- > 0;) {
    int64_t v = int64_t(digits[i] - '0') * factor + carry;
    out[--pos] = char('0' + v % 10);
    carry = v / 10;
  }
  while (carry > 0) {
    out[--pos] = char('0' + carry % 10);
    carry /= 10;
  }
  return out.substr(pos);
}

int CompareMagnitude(const Dec& a, const Dec& b) {
  if (a.IsZero() || b.IsZero()) {
    return a.IsZero() ? (b.IsZero() ? 0 : -1) : 1;
  }
  const int64_t ta = int64_t(a.digits.size()) + a.exponent;
  const int64_t tb = int64_t(b.digits.size()) + b.exponent;
  if (ta != tb) {
    return ta < tb ? -1 : 1;
  }
  const std::size_t n = std::max(a.digits.size(), b.digits.size());
  for (std::size_t i = 0; i < n; ++i) {
    const char ca = i < a.digits.size() ? a.digits[i] : '0';
    const char cb = i < b.digits.size() ? b.digits[i] : '0';
    if (ca != cb) {
      return ca < cb ? -1 : 1;
    }
  }
  return 0;
}

// Subtracts digit strings of equal length, a >= b.
std::string SubtractDigits(const std::string& a, const std::string& b) {
  std::string out(a.size(), '0');
  int borrow = 0;
  for (std::size_t i = a.size(); i-- > 0;) {
    int v = (a[i] - '0') - (b[i] - '0') - borrow;
    borrow = v < 0 ? 1 : 0;
    out[i] = char('0' + (v + 10) % 10);
  }
  return out;
}

std::string AddDigits(const std::string& a, const std::string& b) {
  std::string out(a.size() + 1, '0');
  int carry = 0;
  for (std::size_t i = a.size(); i-- > 0;) {
    int v = (a[i] - '0') + (b[i] - '0') + carry;
    carry = v / 10;
    out[i + 1] = char('0' + v % 10);
  }
  out[0] = char('0' + carry);
  return out;
}

}  // namespace

std::string Dec::ToString() const {
  if (IsZero()) {
    return "0";
  }
  std::string out = negative ? "-" : "";
  if (exponent >= 0) {
    out += digits;
    out.append(std::size_t(exponent), '0');
    return out;
  }
  const int64_t point = int64_t(digits.size()) + exponent;
  if (point > 0) {
    out += digits.substr(0, std::size_t(point));
    out += '.';
    out += digits.substr(std::size_t(point));
  } else {
    out += "0.";
    out.append(std::size_t(-point), '0');
    out += digits;
  }
  return out;
}

std::optional<Dec> ParseDec(std::string_view text) {
  Dec d;
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    d.negative = text[i] == '-';
    ++i;
  }
  bool seen_point = false;
  int64_t fraction_digits = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      d.digits += c;
      if (seen_point) {
        ++fraction_digits;
      }
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  d.exponent = -fraction_digits;
  std::string_view suffix = text.substr(i);
  int binary_power = 0;
  if (suffix.empty()) {
  } else if (suffix == "n") {
    d.exponent -= 9;
  } else if (suffix == "u") {
    d.exponent -= 6;
  } else if (suffix == "m") {
    d.exponent -= 3;
  } else if (suffix == "k") {
    d.exponent += 3;
  } else if (suffix == "M") {
    d.exponent += 6;
  } else if (suffix == "G") {
    d.exponent += 9;
  } else if (suffix == "T") {
    d.exponent += 12;
  } else if (suffix == "P") {
    d.exponent += 15;
  } else if (suffix == "E") {
    d.exponent += 18;
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    constexpr std::string_view kBinary = "KMGTPE";
    const std::size_t k = kBinary.find(suffix[0]);
    if (k == std::string_view::npos) {
      return std::nullopt;
    }
    binary_power = int(k) + 1;
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    std::string_view exp = suffix.substr(1);
    if (!exp.empty() && exp[0] == '+') {
      exp.remove_prefix(1);
    }
    int64_t e = 0;
    auto [ptr, ec] = std::from_chars(exp.data(), exp.data() + exp.size(), e);
    if (ec != std::errc() || ptr != exp.data() + exp.size() || e > kMaxExponent ||
        e < -kMaxExponent) {
      return std::nullopt;
    }
    d.exponent += e;
  } else {
    return std::nullopt;
  }
  for (int p = 0; p < binary_power; ++p) {
    d.digits = MultiplySmall(d.digits.empty() ? "0" : d.digits, 1024);
  }
  Normalize(d);
  return d;
}

int Compare(const Dec& a, const Dec& b) {
  if (a.Sign() != b.Sign()) {
    return a.Sign() < b.Sign() ? -1 : 1;
  }
  const int magnitude = CompareMagnitude(a, b);
  return a.negative ? -magnitude : magnitude;
}

std::optional<Dec> Add(const Dec& a, const Dec& b) {
  if (a.IsZero())
    return b;
  if (b.IsZero())
    return a;
  const int64_t low = std::min(a.exponent, b.exponent);
  const int64_t high_a = int64_t(a.digits.size()) + a.exponent;
  const int64_t high_b = int64_t(b.digits.size()) + b.exponent;
  const int64_t high = std::max(high_a, high_b);
  if (high - low > 4096) {
    return std::nullopt;
  }
  auto widen = [&](const Dec& d) {
    std::string s(std::size_t(high - (int64_t(d.digits.size()) + d.exponent)), '0');
    s += d.digits;
    s.append(std::size_t(d.exponent - low), '0');
    return s;
  };
  const std::string wa = widen(a);
  const std::string wb = widen(b);
  Dec out;
  out.exponent = low;
  if (a.negative == b.negative) {
    out.negative = a.negative;
    out.digits = AddDigits(wa, wb);
  } else if (CompareMagnitude(a, b) >= 0) {
    out.negative = a.negative;
    out.digits = SubtractDigits(wa, wb);
  } else {
    out.negative = b.negative;
    out.digits = SubtractDigits(wb, wa);
  }
  Normalize(out);
  return out;
}

std::optional<int64_t> ScaledCeil(const Dec& value, int scale) {
  if (value.IsZero()) {
    return 0;
  }
  const int64_t exponent = value.exponent + scale;
  std::string integer;
  bool remainder = false;
  if (exponent >= 0) {
    if (int64_t(value.digits.size()) + exponent > 19) {
      return std::nullopt;
    }
    integer = value.digits + std::string(std::size_t(exponent), '0');
  } else {
    const int64_t keep = int64_t(value.digits.size()) + exponent;
    if (keep > 0) {
      integer = value.digits.substr(0, std::size_t(keep));
      remainder = true;  // trailing digits are non-zero after normalization
    } else {
      integer = "0";
      remainder = true;
    }
  }
  uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(integer.data(), integer.data() + integer.size(), magnitude);
  if (ec != std::errc()) {
    return std::nullopt;
  }
  if (remainder) {
    ++magnitude;
  }
  // INT64_MIN's magnitude is one more than INT64_MAX's.
  if (magnitude > uint64_t(INT64_MAX) + (value.negative ? 1 : 0)) {
    return std::nullopt;
  }
  return value.negative ? int64_t(0 - magnitude) : int64_t(magnitude);
}

}  // namespace devlet::kube::internal
