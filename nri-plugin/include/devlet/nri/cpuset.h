// File: devlet/nri/cpuset.h
//
// Linux cpulist strings ("0-3,8,10-11") as sets, for cpuset.cpus / cpuset.mems.
//
//   DEVLET_ASSIGN_OR_RETURN(CpuSet cpus, ParseCpuList("0-3,8"));
//   std::string text = FormatCpuList(cpus);  // "0-3,8"
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace devlet::nri {

// CpuSet is an ordered set of CPU (or NUMA node) ids.
using CpuSet = std::set<int>;

// ParseCpuList parses a cpulist; "" is the empty set. Ids must be in [0, 65535].
absl::StatusOr<CpuSet> ParseCpuList(std::string_view text);

// FormatCpuList renders a set with ranges collapsed ("0-3,8").
std::string FormatCpuList(const CpuSet& set);

// Intersect / Union of two sets.
CpuSet Intersect(const CpuSet& a, const CpuSet& b);
CpuSet Union(const CpuSet& a, const CpuSet& b);

}  // namespace devlet::nri
