// Semantic versions with blang/semver v4 parsing and Kubernetes' normalization (see semver.h).
#include "devlet/cel/semver.h"

#include <string>
#include <string_view>
#include <vector>

#include "devlet/common/status.h"
#include "netip.h"

namespace devlet::cel {
namespace {

using internal::GoQuote;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlphaNum(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}
bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  return true;
}
bool AllAlphaNum(std::string_view s) {
  for (char c : s) {
    if (!IsAlphaNum(c)) return false;
  }
  return true;
}
bool HasLeadingZeroes(std::string_view s) { return s.size() > 1 && s[0] == '0'; }

// strconv.ParseUint(s, 10, 64) on a string of digits (possibly empty).
absl::StatusOr<uint64_t> ParseUint(std::string_view s) {
  if (s.empty()) return InvalidArgument("strconv.ParseUint: parsing \"\": invalid syntax");
  uint64_t value = 0;
  for (char c : s) {
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) {
      return InvalidArgument("strconv.ParseUint: parsing " + GoQuote(s) + ": value out of range");
    }
    value = value * 10 + digit;
  }
  return value;
}

// strings.SplitN(s, sep, n) for n > 0.
std::vector<std::string_view> SplitN(std::string_view s, char sep, size_t n) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < n) {
    size_t i = s.find(sep);
    if (i == std::string_view::npos) break;
    parts.push_back(s.substr(0, i));
    s.remove_prefix(i + 1);
  }
  parts.push_back(s);
  return parts;
}

// Kubernetes' normalizeAndParse preprocessing: the text handed to the strict parser.
absl::StatusOr<std::string> Normalize(std::string_view s) {
  if (!s.empty() && s[0] == 'v') s.remove_prefix(1);
  std::vector<std::string> parts;
  for (std::string_view p : SplitN(s, '.', 3)) {
    std::string part(p);
    if (p.size() > 1) {
      size_t first = p.find_first_not_of('0');
      std::string_view trimmed = first == std::string_view::npos ? "" : p.substr(first);
      part = std::string(trimmed);
      if (trimmed.empty() || !IsDigit(trimmed[0])) part = "0" + part;
    }
    parts.push_back(std::move(part));
  }
  if (parts.size() < 3) {
    if (parts.back().find_first_of("+-") != std::string::npos) {
      return InvalidArgument("short version cannot contain PreRelease/Build meta data");
    }
    while (parts.size() < 3) parts.emplace_back("0");
  }
  return parts[0] + "." + parts[1] + "." + parts[2];
}

}  // namespace

absl::StatusOr<Semver> Semver::Parse(std::string_view text, bool normalize) {
  std::string normalized;
  if (normalize) {
    DEVLET_ASSIGN_OR_RETURN(normalized, Normalize(text));
    text = normalized;
  }
  if (text.empty()) return InvalidArgument("Version string empty");
  std::vector<std::string_view> parts = SplitN(text, '.', 3);
  if (parts.size() != 3) return InvalidArgument("No Major.Minor.Patch elements found");

  Semver v;
  if (!AllDigits(parts[0])) {
    return InvalidArgument("Invalid character(s) found in major number " + GoQuote(parts[0]));
  }
  if (HasLeadingZeroes(parts[0])) {
    return InvalidArgument("Major number must not contain leading zeroes " + GoQuote(parts[0]));
  }
  DEVLET_ASSIGN_OR_RETURN(v.major_, ParseUint(parts[0]));
  if (!AllDigits(parts[1])) {
    return InvalidArgument("Invalid character(s) found in minor number " + GoQuote(parts[1]));
  }
  if (HasLeadingZeroes(parts[1])) {
    return InvalidArgument("Minor number must not contain leading zeroes " + GoQuote(parts[1]));
  }
  DEVLET_ASSIGN_OR_RETURN(v.minor_, ParseUint(parts[1]));

  std::string_view patch = parts[2];
  std::vector<std::string_view> build;
  std::vector<std::string_view> pre;
  bool has_build = false;
  bool has_pre = false;
  if (size_t plus = patch.find('+'); plus != std::string_view::npos) {
    build = SplitN(patch.substr(plus + 1), '.', SIZE_MAX);
    has_build = true;
    patch = patch.substr(0, plus);
  }
  if (size_t dash = patch.find('-'); dash != std::string_view::npos) {
    pre = SplitN(patch.substr(dash + 1), '.', SIZE_MAX);
    has_pre = true;
    patch = patch.substr(0, dash);
  }
  if (!AllDigits(patch)) {
    return InvalidArgument("Invalid character(s) found in patch number " + GoQuote(patch));
  }
  if (HasLeadingZeroes(patch)) {
    return InvalidArgument("Patch number must not contain leading zeroes " + GoQuote(patch));
  }
  DEVLET_ASSIGN_OR_RETURN(v.patch_, ParseUint(patch));

  if (has_pre) {
    for (std::string_view p : pre) {
      if (p.empty()) return InvalidArgument("Prerelease is empty");
      PreRelease id;
      if (AllDigits(p)) {
        if (HasLeadingZeroes(p)) {
          return InvalidArgument("Numeric PreRelease version must not contain leading zeroes " +
                                 GoQuote(p));
        }
        DEVLET_ASSIGN_OR_RETURN(id.number, ParseUint(p));
        id.is_numeric = true;
      } else if (AllAlphaNum(p)) {
        id.text = std::string(p);
      } else {
        return InvalidArgument("Invalid character(s) found in prerelease " + GoQuote(p));
      }
      v.pre_.push_back(std::move(id));
    }
  }
  if (has_build) {
    for (std::string_view b : build) {
      if (b.empty()) return InvalidArgument("Build meta data is empty");
      if (!AllAlphaNum(b)) {
        return InvalidArgument("Invalid character(s) found in build meta data " + GoQuote(b));
      }
      v.build_.emplace_back(b);
    }
  }
  return v;
}

int Semver::Compare(const Semver& other) const {
  auto cmp = [](uint64_t a, uint64_t b) { return a == b ? 0 : (a > b ? 1 : -1); };
  if (int c = cmp(major_, other.major_); c != 0) return c;
  if (int c = cmp(minor_, other.minor_); c != 0) return c;
  if (int c = cmp(patch_, other.patch_); c != 0) return c;
  if (pre_.empty() && other.pre_.empty()) return 0;
  if (pre_.empty()) return 1;
  if (other.pre_.empty()) return -1;
  size_t i = 0;
  for (; i < pre_.size() && i < other.pre_.size(); ++i) {
    const PreRelease& a = pre_[i];
    const PreRelease& b = other.pre_[i];
    int c;
    if (a.is_numeric != b.is_numeric) {
      c = a.is_numeric ? -1 : 1;
    } else if (a.is_numeric) {
      c = cmp(a.number, b.number);
    } else {
      int t = a.text.compare(b.text);
      c = t == 0 ? 0 : (t > 0 ? 1 : -1);
    }
    if (c != 0) return c;
  }
  if (i == pre_.size() && i == other.pre_.size()) return 0;
  return i == pre_.size() ? -1 : 1;
}

std::string Semver::ToString() const {
  std::string out =
      std::to_string(major_) + "." + std::to_string(minor_) + "." + std::to_string(patch_);
  for (size_t i = 0; i < pre_.size(); ++i) {
    out += i == 0 ? '-' : '.';
    out += pre_[i].is_numeric ? std::to_string(pre_[i].number) : pre_[i].text;
  }
  for (size_t i = 0; i < build_.size(); ++i) {
    out += i == 0 ? '+' : '.';
    out += build_[i];
  }
  return out;
}

}  // namespace devlet::cel
