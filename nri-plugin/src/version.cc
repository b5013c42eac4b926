#include "devlet/nri/version.h"

#include <array>
#include <charconv>
#include <tuple>

#include "events.h"

namespace devlet::nri {
namespace {

bool ParseInt(std::string_view& text, int* out) {
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, *out);
  if (ec != std::errc() || ptr == begin) {
    return false;
  }
  text.remove_prefix(static_cast<size_t>(ptr - begin));
  return true;
}

struct Threshold {
  const char* runtime_version;
  const char* nri_version;
};

// Last entry whose runtime version is <= the runtime's wins (containerd/nri pkg/api/version.go).
constexpr std::array kContainerd = {
    Threshold{"1.7.0", "v0.3.0"},   Threshold{"1.7.7", "v0.4.0"},  Threshold{"1.7.14", "v0.6.0"},
    Threshold{"1.7.16", "v0.6.1"},  Threshold{"1.7.26", "v0.8.0"}, Threshold{"1.8.0", "v0.8.0"},
    Threshold{"2.0.0", "v0.8.0"},   Threshold{"2.2.0", "v0.10.0"}, Threshold{"2.2.1", "v0.11.0"},
    Threshold{"2.3.0", "v0.12.0"},
};
constexpr std::array kCrio = {
    Threshold{"1.26.0", "v0.2.0"},      Threshold{"1.26.2", "v0.3.0"},
    Threshold{"1.26.4", "v0.3.1-pre"},  Threshold{"1.27.0", "v0.3.0"},
    Threshold{"1.27.1", "v0.3.1-pre"},  Threshold{"1.29.0", "v0.5.0"},
    Threshold{"1.29.2", "v0.6.0"},      Threshold{"1.31.0", "v0.6.1"},
    Threshold{"1.32.0", "v0.9.0"},      Threshold{"1.33.0", "v0.9.1-pre"},
    Threshold{"1.34.0", "v0.10.0"},     Threshold{"1.35.0", "v0.11.0"},
};

std::tuple<int, int, int, int> Key(const NriVersion& v) {
  return {v.major, v.minor, v.patch, v.prerelease ? 0 : 1};
}

template <size_t N>
NriVersion Lookup(const std::array<Threshold, N>& table, const NriVersion& runtime) {
  const char* found = nullptr;
  for (const Threshold& t : table) {
    NriVersion threshold = ParseNriVersion(t.runtime_version);
    threshold.prerelease = true;  // 2.2.0-rc.1 already counts as 2.2.0
    if (Key(runtime) >= Key(threshold)) {
      found = t.nri_version;
    }
  }
  return found ? ParseNriVersion(found) : NriVersion{};
}

}  // namespace

bool NriVersion::AtLeast(int want_major, int want_minor, int want_patch) const {
  if (!known) {
    return false;
  }
  return Key(*this) >= std::make_tuple(want_major, want_minor, want_patch, 1);
}

NriVersion ParseNriVersion(std::string_view text) {
  NriVersion version;
  version.text = std::string(text);
  std::string_view rest = text;
  if (!rest.empty() && (rest.front() == 'v' || rest.front() == 'V')) {
    rest.remove_prefix(1);
  }
  if (!ParseInt(rest, &version.major) || rest.empty() || rest.front() != '.') {
    return NriVersion{.text = std::string(text)};
  }
  rest.remove_prefix(1);
  if (!ParseInt(rest, &version.minor)) {
    return NriVersion{.text = std::string(text)};
  }
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    if (!ParseInt(rest, &version.patch)) {
      return NriVersion{.text = std::string(text)};
    }
  }
  version.prerelease = !rest.empty() && rest.front() == '-';
  version.known = true;
  return version;
}

NriVersion InferNriVersion(std::string_view runtime_name, std::string_view runtime_version) {
  const NriVersion runtime = ParseNriVersion(runtime_version);
  if (!runtime.known) {
    return NriVersion{};
  }
  if (runtime_name == "containerd") {
    return Lookup(kContainerd, runtime);
  }
  if (runtime_name == "cri-o" || runtime_name == "crio") {
    return Lookup(kCrio, runtime);
  }
  return NriVersion{};
}

NriVersion EffectiveNriVersion(std::string_view reported, std::string_view runtime_name,
                               std::string_view runtime_version) {
  NriVersion version = ParseNriVersion(reported);
  if (version.known) {
    return version;
  }
  return InferNriVersion(runtime_name, runtime_version);
}

uint32_t ValidEventsMask(const NriVersion& version) {
  uint32_t mask = 0;
  for (const internal::EventRow& row : internal::EventTable()) {
    const internal::MinVersion& since = row.since;
    const bool always = since.major == 0 && since.minor == 0 && since.patch == 0;
    if (always || version.AtLeast(since.major, since.minor, since.patch)) {
      mask |= EventBit(row.event);
    }
  }
  return mask;
}

bool SupportsCdiDeviceAdjustment(const NriVersion& version) { return version.AtLeast(0, 7, 0); }

bool SupportsSafeUpdateContainers(const NriVersion& version) { return version.AtLeast(0, 12, 1); }

bool UsesDedicatedEventRpcs(const NriVersion& version) { return version.AtLeast(0, 12, 0); }

}  // namespace devlet::nri
