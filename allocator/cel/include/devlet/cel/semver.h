// File: devlet/cel/semver.h
//
// Semver: a semantic version as Kubernetes' CEL semver library sees it (k8s.io/apiserver
// pkg/cel/library/semverlib.go, on top of github.com/blang/semver/v4):
//
//   ASSIGN_OR_RETURN(Semver v, Semver::Parse("1.2.3-rc.1+build.5"));
//   v.Major();                                   // 1
//   v.Compare(*Semver::Parse("v1.2", true))      // 1: 1.2.3-rc.1 > 1.2.0
//
// Strict parsing is semver 2.0.0 as blang/semver implements it: "MAJOR.MINOR.PATCH" with decimal
// uint64 parts without leading zeros, then optional "-" pre-release identifiers (numeric ones
// without leading zeros, others of [0-9A-Za-z-]) and "+" build identifiers ([0-9A-Za-z-],
// non-empty). Normalizing parsing (semver(s, true)) first strips one leading "v", strips leading
// zeros of each of the first three dot-separated parts, and pads a short version with ".0"
// parts, but rejects a short version whose last part carries "-" or "+" metadata.
//
// Compare follows semver precedence (build metadata ignored); equality in CEL is Compare == 0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace devlet::cel {

// Semver is an immutable parsed semantic version.
class Semver {
 public:
  // PreRelease is one dot-separated pre-release identifier: numeric or alphanumeric.
  struct PreRelease {
    bool is_numeric = false;
    uint64_t number = 0;  // When is_numeric.
    std::string text;     // When !is_numeric.
  };

  // The version 0.0.0.
  Semver() = default;

  // Parse reads `text` strictly (semver(s)), or with Kubernetes' normalization when `normalize`
  // (semver(s, true)). Error messages are blang/semver's ("No Major.Minor.Patch elements found",
  // "Invalid character(s) found in major number \"x\"", ...), or "short version cannot contain
  // PreRelease/Build meta data".
  static absl::StatusOr<Semver> Parse(std::string_view text, bool normalize = false);

  // Major, Minor and Patch return the numeric parts (uint64; CEL's major() etc. return them as
  // int, wrapping like Go's int64(uint64) conversion).
  uint64_t Major() const { return major_; }
  uint64_t Minor() const { return minor_; }
  uint64_t Patch() const { return patch_; }

  // pre_release and build return the identifiers after "-" and "+".
  const std::vector<PreRelease>& pre_release() const { return pre_; }
  const std::vector<std::string>& build() const { return build_; }

  // Compare returns -1, 0 or 1 by semver 2.0.0 precedence: numeric parts, then a version with a
  // pre-release sorts before one without, then identifier by identifier (numeric < alphanumeric,
  // numbers numerically, text bytewise), then the shorter list first. Build metadata is ignored.
  int Compare(const Semver& other) const;

  // Equal is Compare(other) == 0 (CEL's == on semver values).
  bool Equal(const Semver& other) const { return Compare(other) == 0; }

  // ToString prints "M.m.p[-pre][+build]" (numeric identifiers without leading zeros).
  std::string ToString() const;

 private:
  uint64_t major_ = 0;
  uint64_t minor_ = 0;
  uint64_t patch_ = 0;
  std::vector<PreRelease> pre_;
  std::vector<std::string> build_;
};

}  // namespace devlet::cel
