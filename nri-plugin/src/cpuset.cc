#include "devlet/nri/cpuset.h"

#include <algorithm>
#include <charconv>
#include <iterator>

#include "devlet/common/status.h"

namespace devlet::nri {
namespace {

bool ParseId(std::string_view text, int* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && *out >= 0 && *out <= 65535;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

absl::StatusOr<CpuSet> ParseCpuList(std::string_view text) {
  CpuSet set;
  text = Trim(text);
  if (text.empty()) {
    return set;
  }
  while (true) {
    const size_t comma = text.find(',');
    std::string_view item = Trim(text.substr(0, comma));
    const size_t dash = item.find('-');
    int first = 0;
    int last = 0;
    bool ok;
    if (dash == std::string_view::npos) {
      ok = ParseId(item, &first);
      last = first;
    } else {
      ok = ParseId(item.substr(0, dash), &first) && ParseId(item.substr(dash + 1), &last) &&
           first <= last;
    }
    if (!ok) {
      return InvalidArgument("cpu list \"" + std::string(text) + "\": bad element \"" +
                             std::string(item) + "\"");
    }
    for (int id = first; id <= last; ++id) {
      set.insert(id);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    text.remove_prefix(comma + 1);
  }
  return set;
}

std::string FormatCpuList(const CpuSet& set) {
  std::string out;
  auto it = set.begin();
  while (it != set.end()) {
    const int first = *it;
    int last = first;
    ++it;
    while (it != set.end() && *it == last + 1) {
      last = *it;
      ++it;
    }
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(first);
    if (last != first) {
      out += '-';
      out += std::to_string(last);
    }
  }
  return out;
}

CpuSet Intersect(const CpuSet& a, const CpuSet& b) {
  CpuSet out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}

CpuSet Union(const CpuSet& a, const CpuSet& b) {
  CpuSet out = a;
  out.insert(b.begin(), b.end());
  return out;
}

}  // namespace devlet::nri
