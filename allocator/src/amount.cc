#include "devlet/allocator/amount.h"

#include <string>

#include "devlet/common/status.h"

namespace devlet::allocator {
namespace {

constexpr Int128 kLimit = static_cast<Int128>(1) << 120;

std::string ToString(Int128 v) {
  if (v == 0) return "0";
  bool negative = v < 0;
  if (negative) v = -v;
  std::string s;
  while (v > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return negative ? "-" + s : s;
}

}  // namespace

absl::StatusOr<Amount> Amount::Parse(std::string_view text) {
  auto bad = [&]() {
    return InvalidArgument("quantity \"" + std::string(text) +
                           "\" does not match the Kubernetes quantity format");
  };
  std::string_view s = text;
  if (s.empty()) return bad();
  bool negative = false;
  if (s.front() == '+' || s.front() == '-') {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  // digits [. digits]
  Int128 mantissa = 0;
  int frac_digits = 0;
  bool any_digit = false, seen_dot = false, overflow = false, dropped = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c >= '0' && c <= '9') {
      any_digit = true;
      if (mantissa < kLimit) {
        mantissa = mantissa * 10 + (c - '0');
        if (seen_dot) ++frac_digits;
      } else if (!seen_dot) {
        overflow = true;
      } else if (c != '0') {
        dropped = true;  // precision beyond what we keep: round up at the end
      }
    } else if (c == '.' && !seen_dot) {
      seen_dot = true;
    } else {
      break;
    }
  }
  if (!any_digit || overflow) return bad();
  std::string_view suffix = s.substr(i);
  // Scale: value = mantissa * 10^-frac * multiplier.
  int exp10 = 0;
  Int128 multiplier = 1;
  if (suffix.empty()) {
  } else if (suffix == "Ki") multiplier = static_cast<Int128>(1) << 10;
  else if (suffix == "Mi") multiplier = static_cast<Int128>(1) << 20;
  else if (suffix == "Gi") multiplier = static_cast<Int128>(1) << 30;
  else if (suffix == "Ti") multiplier = static_cast<Int128>(1) << 40;
  else if (suffix == "Pi") multiplier = static_cast<Int128>(1) << 50;
  else if (suffix == "Ei") multiplier = static_cast<Int128>(1) << 60;
  else if (suffix == "n") exp10 = -9;
  else if (suffix == "u") exp10 = -6;
  else if (suffix == "m") exp10 = -3;
  else if (suffix == "k") exp10 = 3;
  else if (suffix == "M") exp10 = 6;
  else if (suffix == "G") exp10 = 9;
  else if (suffix == "T") exp10 = 12;
  else if (suffix == "P") exp10 = 15;
  else if (suffix == "E") exp10 = 18;
  else if (suffix.front() == 'e' || suffix.front() == 'E') {
    std::string_view e = suffix.substr(1);
    bool eneg = false;
    if (!e.empty() && (e.front() == '+' || e.front() == '-')) {
      eneg = e.front() == '-';
      e.remove_prefix(1);
    }
    if (e.empty() || e.size() > 4) return bad();
    int v = 0;
    for (char c : e) {
      if (c < '0' || c > '9') return bad();
      v = v * 10 + (c - '0');
    }
    exp10 = eneg ? -v : v;
  } else {
    return bad();
  }
  // nanos = mantissa * multiplier * 10^(exp10 - frac + 9)
  int shift = exp10 - frac_digits + 9;
  Int128 value = mantissa;
  if (multiplier != 1) {
    if (value > kLimit / multiplier) return bad();
    value *= multiplier;
  }
  if (shift >= 0) {
    for (int k = 0; k < shift; ++k) {
      if (value > kLimit / 10) return InvalidArgument("quantity \"" + std::string(text) + "\" is too large");
      value *= 10;
    }
  } else {
    bool remainder = false;
    for (int k = 0; k < -shift && value != 0; ++k) {
      if (value % 10 != 0) remainder = true;
      value /= 10;
    }
    if (remainder) value += 1;  // round up to the next nano, like resource.Quantity
  }
  if (dropped) value += 1;
  return Amount{negative ? -value : value};
}

Int128 Amount::units_ceil() const {
  Int128 q = nanos / kNano;
  if (nanos % kNano != 0 && nanos > 0) ++q;
  return q;
}

Int128 Amount::milli_ceil() const {
  Int128 q = nanos / 1000000;
  if (nanos % 1000000 != 0 && nanos > 0) ++q;
  return q;
}

std::string Amount::Format(bool binary) const {
  Int128 v = nanos;
  if (v == 0) return "0";
  if (v % kNano == 0) {
    Int128 units = v / kNano;
    if (binary) {
      static const char* kSuffix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
      int k = 0;
      while (k < 6 && units % 1024 == 0) {
        units /= 1024;
        ++k;
      }
      return ToString(units) + kSuffix[k];
    }
    static const char* kSuffix[] = {"", "k", "M", "G", "T", "P", "E"};
    int k = 0;
    while (k < 6 && units % 1000 == 0) {
      units /= 1000;
      ++k;
    }
    return ToString(units) + kSuffix[k];
  }
  if (v % 1000000 == 0) return ToString(v / 1000000) + "m";
  if (v % 1000 == 0) return ToString(v / 1000) + "u";
  return ToString(v) + "n";
}

bool IsBinaryFormat(std::string_view text) { return !text.empty() && text.back() == 'i'; }

}  // namespace devlet::allocator
